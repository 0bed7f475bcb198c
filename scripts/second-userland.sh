#!/usr/bin/env bash
# The proof that a count depends only on what the repository pins: an architecture's
# count pass, run again inside a second Linux userland (Debian 13, made with debootstrap
# into target/userland/, once), must count every cell that gates the same as the count
# pass on this machine did, and pass against baselines/ too (xtask/src/second_userland.rs).
#   scripts/second-userland.sh [<triple> [nextest arguments]]  (after scripts/count-pass.sh
#                                           <triple>, default the host's; root or sudo)
#   scripts/second-userland.sh --prepare   (only make the userland, e.g. while other work runs)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
xtask second-userland "$@"
