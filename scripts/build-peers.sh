#!/usr/bin/env bash
# The reference external peers (protocol v1): builds the C peer for a target triple
# (this machine's by default; a counted build's static, by zig) into
# peers/c/build/<triple>/c-echo-peer, where matrix.yaml names it, and makes sure python3
# is there for the Python peer. Prints the binary's path (xtask/src/peers.rs):
#   scripts/build-peers.sh                            (this machine's triple)
#   scripts/build-peers.sh s390x-unknown-linux-gnu    (cross; run with qemu-s390x -L /usr/s390x-linux-gnu)
#   scripts/build-peers.sh x86_64-unknown-linux-musl  (a counted build: static, by zig)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -le 1 ] || die "usage: scripts/build-peers.sh [target-triple]"
xtask build-peer "$@"
