# shellcheck shell=bash
# Shared helpers of the scripts in this folder; sourced, not run. The work itself is in
# Rust (xtask/src/main.rs lists its tasks); these are the words the scripts call it by.
set -euo pipefail

# Each line says how long the outermost script has run (m:ss): where the time went.
export SCRIPT_STARTED_AT="${SCRIPT_STARTED_AT:-$(date +%s)}"
say() { local t=$(($(date +%s) - SCRIPT_STARTED_AT)); printf '==> [%d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Found once, as this file is sourced: a script may change folders afterwards.
LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root() { cd "$LIB_DIR/.." && pwd; }
source "$LIB_DIR/rust.sh"  # ensure_rust, ensure_nextest
source "$LIB_DIR/steps.sh" # first_failure, failure_summary

# The tasks in Rust, built into a target folder of their own (a workspace build never
# waits for theirs) and run as built: no variable of `cargo run` reaches what they start.
xtask() {
  local target="${CARGO_TARGET_DIR:-target}/xtask"
  case "$target" in /*) ;; *) target="$(repo_root)/$target" ;; esac
  (cd "$(repo_root)" && cargo build --quiet --locked --manifest-path xtask/Cargo.toml --target-dir "$target") &&
    "$target/debug/xtask" "$@"
}
cargo_runner() { xtask runner "$1"; }          # .cargo/config.toml's runner, as words
ipc_matrix() { xtask ipc-matrix "$@"; }        # the CLI of the suite's own build
example_copy() { xtask example-copy "$1"; }    # examples/<name>, copied out; prints where
ensure_count_plugin() { xtask count-plugin; }  # the counting plugin and the pinned QEMU
ensure_interop_tools() { xtask interop-tools; } # protoc, capnp, pyzmq, iproute2
ensure_browser() { xtask browser; }            # Chromium for the reports' check, or why not
suite_profile() { printf '%s' "${IPC_MATRIX_PROFILE:-quick}"; }
# What a counted build of the triples given compiles with (zig's compilers, fixed paths).
zig_env() { local exports; exports="$(xtask zig-env "$@")" && eval "$exports"; }
# Each leg's reports, judged against baselines/ (STRICT_INSTRUCTIONS=true: counts gate).
write_reports() {
  local strict=()
  [ "${STRICT_INSTRUCTIONS:-false}" = true ] && strict=(--strict-instructions)
  xtask reports "${strict[@]}" "$@"
}
