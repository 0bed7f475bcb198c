#!/usr/bin/env bash
# The reference C peer built for a big-endian CPU (s390x), checked by this machine's own
# harness: its echo cells with that peer started through QEMU user mode, every reply
# checked byte for byte. Results go to target/ipc-matrix/big-endian-peer/
# (xtask/src/big_endian_peer.rs).
#   scripts/big-endian-peer.sh s390x-unknown-linux-gnu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 1 ] || die "usage: scripts/big-endian-peer.sh <target-triple>"
xtask big-endian-peer "$1"
