#!/usr/bin/env bash
# Measures a leg's baseline afresh from several runs of its timing cells (default 3), so
# that the baseline knows how far unchanged code moves from run to run on this machine
# (for a counted leg, how far its counts move under perturbations; xtask/src/legs.rs):
#   scripts/accept-baseline.sh                          # this machine, 3 runs
#   scripts/accept-baseline.sh 5 s390x-unknown-linux-gnu        # (or ...-gnu@qemu)
#   scripts/accept-baseline.sh 3 x86_64-unknown-linux-musl@qemu  # the host's count pass
#   scripts/accept-baseline.sh 3 aarch64-unknown-linux-musl@qemu # aarch64's count pass
# Then review `git diff baselines/` and commit it. Profile: IPC_MATRIX_PROFILE (quick).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
ensure_nextest
xtask accept-baseline "$@"
