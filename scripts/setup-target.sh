#!/usr/bin/env bash
# Prepares this machine to build and run tests for a target triple, installing only what
# is missing and saying what it did: the rustup target; for a counted build zig and the
# pinned QEMU; for another emulated one the cross gcc and g++ and qemu-user, from apt on
# Debian/Ubuntu (xtask/src/setup.rs).
#   scripts/setup-target.sh aarch64-unknown-linux-gnu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 1 ] || die "usage: scripts/setup-target.sh <target-triple>"
xtask setup-target "$1"
