#!/usr/bin/env bash
# The worked example of a user's own stack (examples/rust-stack) as its user has it: copied
# outside this repository, depending on this checkout by path, then its nextest door (its
# cells and the matrix's fault trials over its stack) and its own fault test, run there.
# Builds into this checkout's target folder (what the suite compiled is reused); its
# results go to the copy's own folder, apart from this repository's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$(repo_root)"
copy="$(mktemp -d "${TMPDIR:-/tmp}/ipc-matrix-rust-stack.XXXXXX")"
trap 'rm -rf "$copy"' EXIT
cp -R "$root/examples/rust-stack/." "$copy/"
sed -i "s|^ipc-matrix = { path = \"../../crates/cli\" }|ipc-matrix = { path = \"$root/crates/cli\" }|" \
  "$copy/Cargo.toml"
grep -q "path = \"$root/crates/cli\"" "$copy/Cargo.toml" || die "example-stacks.sh: the example's dependency line moved"
say "a user's own stack, from $copy: cargo nextest run"
cd "$copy"
CARGO_TARGET_DIR="$root/target" IPC_MATRIX_OUT="$copy/target/ipc-matrix" \
  cargo nextest run --locked --cargo-profile test "$@"
