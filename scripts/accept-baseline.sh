#!/usr/bin/env bash
# Measures a leg's baseline afresh from several runs of its timing cells (default 3), so
# that the baseline knows how far unchanged code moves from run to run on this machine:
#   scripts/accept-baseline.sh                          # this machine, 3 runs
#   scripts/accept-baseline.sh 5 aarch64-unknown-linux-gnu
# Then review `git diff baselines/` and commit it. Profile: IPC_MATRIX_PROFILE (quick).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
runs="${1:-3}"
host="$(rustc -vV | sed -n 's/^host: //p')"
triple="${2:-$host}"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/accept-baseline.sh [runs >= 1] [target-triple]"
ensure_rust
ensure_nextest
if [ "$triple" = "$host" ]; then leg="$triple@native"; else leg="$triple@qemu"; scripts/setup-target.sh "$triple"; fi
profile="$(suite_profile)"
for run in $(seq 1 "$runs"); do
  say "run $run of $runs: the timing cells of $leg ($profile)"
  cargo nextest run --locked --profile ci --target "$triple" -E 'binary(matrix) & !test(/^fault::/)'
  if [ "$run" -eq 1 ]; then
    ipc_matrix baseline accept --profile "$profile" --leg "$leg"
  else
    ipc_matrix baseline accept --append --profile "$profile" --leg "$leg"
  fi
done
say "baselines/$leg/$profile.json now holds $runs run(s); review with git diff and commit"
