# shellcheck shell=bash
# Rust itself, before any task in Rust can run; sourced by scripts/lib.sh.

# Rust through rustup, with the toolchain rust-toolchain.toml pins and its components
# (clippy, rustfmt). On a fresh Debian/Ubuntu machine rustup comes first, without a
# default toolchain: the pinned one is the only one this repository builds with.
# Run from the repository root (where rust-toolchain.toml is).
ensure_rust() {
  if ! command -v rustup >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/rustup" ]; then
      export PATH="$HOME/.cargo/bin:$PATH"
    elif command -v cargo >/dev/null 2>&1; then
      say "cargo without rustup: rust-toolchain.toml is not applied; building with $(cargo --version)"
      return
    else
      command -v curl >/dev/null 2>&1 || die "cargo is missing and so is curl; install curl (apt-get install curl) or Rust (https://rustup.rs)"
      say "installing rustup (the toolchain itself is the one rust-toolchain.toml pins)"
      curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none
      export PATH="$HOME/.cargo/bin:$PATH"
    fi
  fi
  # rustup would install the pinned toolchain on the first cargo call (not its missing
  # components, and nothing with RUSTUP_AUTO_INSTALL=0); asked for here, both come
  # either way. `rustup toolchain install` alone reads rust-toolchain.toml (rustup 1.28+).
  if ! rustup show active-toolchain >/dev/null 2>&1 ||
    ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
    say "installing the toolchain rust-toolchain.toml pins, with clippy and rustfmt"
    rustup toolchain install ||
      die "rustup toolchain install failed (a rustup older than 1.28 needs: rustup self update)"
  fi
}

# cargo-nextest, if missing: a prebuilt binary is not assumed, so it is built once.
ensure_nextest() {
  if cargo nextest --version >/dev/null 2>&1; then return; fi
  say "installing cargo-nextest (cargo install --locked)"
  cargo install --locked cargo-nextest
}
