#!/usr/bin/env bash
# The instruction-count pass of a leg: its architecture's cells as the counted build
# (static against musl, C and C++ by zig) under the pinned QEMU with the counting plugin
# (scripts/qemu-run); its results form the leg <arch>-unknown-linux-musl@qemu, judged on
# guest instructions per round trip (xtask/src/count_pass.rs):
#   scripts/count-pass.sh x86_64-unknown-linux-gnu [nextest arguments, e.g. -E 'test(/^echo::/)']
#   scripts/count-pass.sh aarch64-unknown-linux-gnu   (another architecture: under qemu-aarch64)
# The counted triple itself (x86_64-unknown-linux-musl) names the same pass.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -gt 0 ] || die "usage: scripts/count-pass.sh <target-triple> [nextest arguments]"
xtask count-pass "$@"
