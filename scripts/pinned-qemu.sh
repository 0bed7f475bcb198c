#!/usr/bin/env bash
# The emulator that counts, pinned: QEMU 7.2.22 user mode with plugin support, built once
# from Debian 12's source package (each file checked against its SHA-256) into
# <target dir>/pinned/qemu-<release>/ (xtask/src/pinned_qemu.rs). Prints the folder of
# its binaries (qemu-x86_64, qemu-aarch64).
#   scripts/pinned-qemu.sh
# IPC_MATRIX_QEMU_SOURCE=DIR takes the three source files from DIR instead of Debian's
# archive (a mirror, or a cache of CI's).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 0 ] || die "usage: scripts/pinned-qemu.sh"
xtask pinned-qemu
