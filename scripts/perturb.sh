#!/usr/bin/env bash
# Runs a command under perturbation N of what must not move an instruction count, for
# the runs of a counted baseline (scripts/accept-baseline.sh):
#   1: as it is;  2: matrix.yaml, through a folder of another path length, and 4 KiB more
#   environment;  3: TMPDIR of another length (/tmp/ipcm-p3) and two CPU hogs throughout.
#   scripts/perturb.sh 2 -- scripts/count-pass.sh x86_64-unknown-linux-gnu
# Run n of a baseline takes perturbation (n-1) % 3 + 1.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -ge 3 ] && [ "$2" = -- ] || die "usage: scripts/perturb.sh <run number> -- <command> (run n takes perturbation (n-1) % 3 + 1)"
[[ "$1" =~ ^[1-9][0-9]*$ ]] || die "perturb.sh: the run number is '$1', not a number from 1"
n=$((($1 - 1) % 3 + 1))
shift 2
dir="$(repo_root)/target/ipc-matrix/perturbed"
case "$n" in
  1) exec "$@" ;;
  # The matrix in use (IPC_MATRIX_FILE, else ./matrix.yaml) and what lies beside it (its
  # peers, a stack's libraries), each through a link from the farther folder: this run's
  # own (a name of fixed length), so that runs at once never read each other's matrix.
  2) matrix="$(realpath "${IPC_MATRIX_FILE:-matrix.yaml}")" || die "perturb.sh: no matrix.yaml here"
     mkdir -p "$dir" && own="$(mktemp -d "$dir/run.XXXXXXXX")" && trap 'rm -rf "$own"' EXIT
     far="$own/a-folder-whose-name-makes-the-path-of-matrix-yaml-longer-than-usual" && mkdir "$far"
     for entry in "$(dirname "$matrix")"/*; do ln -sfn "$entry" "$far/"; done
     IPC_MATRIX_FILE="$far/$(basename "$matrix")" IPC_MATRIX_PERTURBATION="$(head -c 4096 /dev/zero | tr '\0' p)" "$@" ;;
  # Short: iceoryx2's socket paths under TMPDIR must fit in 107 bytes.
  3) mkdir -p /tmp/ipcm-p3 && export TMPDIR=/tmp/ipcm-p3
     yes >/dev/null &
     hog1=$!
     yes >/dev/null &
     hog2=$!
     trap 'kill "$hog1" "$hog2" 2>/dev/null' EXIT
     "$@" ;;
  *) die "perturbation $n: there are 1, 2 and 3" ;;
esac
