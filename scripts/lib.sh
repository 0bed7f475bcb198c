# Shared helpers of the scripts in this folder; sourced, not run.
set -euo pipefail

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

# Rust through rustup, if cargo is missing (a fresh Debian/Ubuntu machine).
ensure_rust() {
  if command -v cargo >/dev/null 2>&1; then return; fi
  [ -x "$HOME/.cargo/bin/cargo" ] && { export PATH="$HOME/.cargo/bin:$PATH"; return; }
  command -v curl >/dev/null 2>&1 || die "cargo is missing and so is curl; install curl (apt-get install curl) or Rust (https://rustup.rs)"
  say "installing Rust with rustup (stable, minimal profile)"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt
  export PATH="$HOME/.cargo/bin:$PATH"
}

# cargo-nextest, if missing: a prebuilt binary is not assumed, so it is built once.
ensure_nextest() {
  if cargo nextest --version >/dev/null 2>&1; then return; fi
  say "installing cargo-nextest (cargo install --locked)"
  cargo install --locked cargo-nextest
}
