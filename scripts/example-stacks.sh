#!/usr/bin/env bash
# The worked examples of a user's own stack as their users have them, each copied outside
# this repository: examples/rust-stack, depending on this checkout by path, then its
# nextest door (its cells and the matrix's fault trials over its stack), the conformance
# suite against its stack and its own fault test; examples/c-stack, a shared library
# built against this checkout's header, then its cells, the conformance suite and its
# fault through `ipc-matrix`.
# Builds into this checkout's target folder (what the suite compiled is reused); its
# results go to the copy's own folder, apart from this repository's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$(repo_root)"
copy="$(example_copy rust-stack)"
trap 'rm -rf "$copy"' EXIT
say "a user's own stack, from $copy: cargo nextest run"
cd "$copy"
CARGO_TARGET_DIR="$root/target" IPC_MATRIX_OUT="$copy/target/ipc-matrix" \
  cargo nextest run --locked --cargo-profile test "$@"

# The C stack (examples/c-stack), as its user has it: copied outside this repository, its
# library built with the C compiler against this checkout's header, then `ipc-matrix run`
# there; and its fault, a reply it corrupts, which must fail its cell naming the round
# trip and the offset.
c_copy="$(example_copy c-stack)"
trap 'rm -rf "$copy" "$c_copy"' EXIT
IPC_MATRIX_INCLUDE="$root/crates/transport/include" "$c_copy/build.sh" >/dev/null
say "a user's own C stack, from $c_copy: ipc-matrix run"
cd "$c_copy"
ipc_matrix run --profile quick --out "$c_copy/target/ipc-matrix"
say "the C stack's conformance: ipc-matrix conformance --max-message 64KiB"
ipc_matrix conformance --max-message 64KiB | tail -n 3
say "the C stack's fault: its peer corrupts byte 100 of reply 5"
set +e
fault="$(SEQPACKET_CORRUPT_REPLY=6 ipc_matrix run --profile quick \
  --filter echo::seqpacket::200B --out "$c_copy/target/fault" 2>&1)"
code=$?
set -e
printf '%s\n' "$fault" | grep '^FAIL' || true
[ "$code" -eq 1 ] && grep -q 'round trip 5 of .*first difference at byte offset 100' <<<"$fault" ||
  die "example-stacks.sh: the C stack's corrupted reply did not fail its cell at round trip 5, offset 100 (exit $code)"
