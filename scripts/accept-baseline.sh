#!/usr/bin/env bash
# Measures a leg's baseline afresh from several runs of its timing cells (default 3), so
# that the baseline knows how far unchanged code moves from run to run on this machine
# (for a counted leg, how far its counts move under perturbations):
#   scripts/accept-baseline.sh                          # this machine, 3 runs
#   scripts/accept-baseline.sh 5 s390x-unknown-linux-gnu        # (or ...-gnu@qemu)
#   scripts/accept-baseline.sh 3 x86_64-unknown-linux-musl@qemu  # the host's count pass
#   scripts/accept-baseline.sh 3 aarch64-unknown-linux-musl@qemu # aarch64's count pass
# Then review `git diff baselines/` and commit it. Profile: IPC_MATRIX_PROFILE (quick).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
runs="${1:-3}"
host="$(rustc -vV | sed -n 's/^host: //p')"
asked="${2:-$host}"
triple="${asked%@*}"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/accept-baseline.sh [runs >= 1] [target-triple]"
ensure_rust
ensure_nextest
# A count pass is asked for as its leg (<arch>-unknown-linux-musl@qemu, or the counted
# triple alone) or, for the host's, as <host>@qemu; any other triple is a leg of its
# own, emulated unless it is the host's.
count_pass=0
counted="$(counted_target "$triple" || true)"
if [ "$asked" = "$host@qemu" ] || { [ -n "$counted" ] && [ "$triple" = "$counted" ]; }; then
  count_pass=1
  leg="$counted@qemu"
elif [ "$triple" = "$host" ]; then
  leg="$triple@native"
else
  leg="$triple@qemu"
  scripts/setup-target.sh "$triple"
  ensure_count_plugin # the emulated cells count guest instructions as they run
  scripts/build-peers.sh "$triple" >/dev/null # the reference C peer its cells start
fi
# `ipc_matrix` runs the CLI of the build the cells ran from: the --target build of the
# timing cells, or for a count pass (a counted build, compiled by zig) the host build
# that scripts/test.sh makes too.
[ "$count_pass" = 1 ] || export IPC_MATRIX_TARGET="$triple"
profile="$(suite_profile)"
for run in $(seq 1 "$runs"); do
  say "run $run of $runs: the timing cells of $leg ($profile)"
  # A counted leg's runs are made under perturbations (scripts/perturb.sh): a count that
  # moves under one depends on more than the code, and its verdict only informs.
  perturb=()
  if [ "$leg" != "$triple@native" ]; then perturb=(scripts/perturb.sh "$run" --); fi
  if [ "$count_pass" = 1 ]; then
    "${perturb[@]}" scripts/count-pass.sh "$triple"
  else
    IPC_MATRIX_COUNT=on "${perturb[@]}" cargo nextest run --locked --workspace --profile ci \
      --target "$triple" -E 'binary(matrix) & !test(/^fault::/)'
  fi
  if [ "$run" -eq 1 ]; then
    ipc_matrix baseline accept --profile "$profile" --leg "$leg"
  else
    ipc_matrix baseline accept --append --profile "$profile" --leg "$leg"
  fi
done
say "baselines/$leg/$profile.json now holds $runs run(s); review with git diff and commit"
