#!/usr/bin/env bash
# Runs the whole test suite for one target of matrix.yaml, set up first if needed, and
# writes that leg's reports (xtask/src/legs.rs):
#   scripts/test-target.sh s390x-unknown-linux-gnu            (under QEMU on x86_64)
#   scripts/test-target.sh x86_64-unknown-linux-gnu           (this machine, natively)
#   scripts/test-target.sh aarch64-unknown-linux-musl         (a counted build, pinned QEMU)
# Extra arguments go to `cargo nextest run` (e.g. -E 'test(/shm/)').
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
[ $# -gt 0 ] || die "usage: scripts/test-target.sh <target-triple> [nextest arguments]"
ensure_rust
ensure_nextest
ensure_interop_tools
xtask test-target "$@"
