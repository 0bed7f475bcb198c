#!/usr/bin/env bash
# One worked example's stack on one CPU (scripts/example-counts.sh): counted by `run
# --count` (another CPU's binary started under QEMU, with its sysroot) and judged against
# its baselines, then its fault (round trip 5, offset 100); or, RUNS > 0, counted RUNS
# times under scripts/perturb.sh and accepted into examples/<name>/baselines.
#   scripts/example-on-cpu.sh <copy of the example> <triple> <binary> <VAR=N> <cell> <runs>
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 6 ] || die "usage: scripts/example-on-cpu.sh <copy> <triple> <binary> <VAR=N> <cell> <runs>"
copy=$1 triple=$2 bin=$3 fault=$4 cell=$5 runs=$6 arch=${2%%-*} libs=/ start=()
leg="$triple@qemu" name="${copy##*/ipc-matrix-}" name="${name%.*}" root="$(repo_root)"
qemu="$PINNED_QEMU/qemu-$arch" && [ -x "$qemu" ] || qemu="$(command -v "qemu-$arch")" || die "no qemu-$arch"
if [ "$arch" != "$(uname -m)" ]; then
  read -r _ _ gnu <<<"$(cargo_runner "$triple")" && [ "${gnu:-static}" = static ] || libs="/usr/$gnu"
  start=(env QEMU_LD_PREFIX="$libs" "$qemu" -L "$libs")
fi
run=("${start[@]}" "$bin" run --count --qemu "$qemu" --count-plugin "$COUNT_PLUGIN" --profile quick)
stored=(--profile quick --leg "$leg" --results "$copy/target/ipc-matrix" --baselines "$copy/baselines")
cd "$copy"
if [ "$runs" -gt 0 ]; then
  for n in $(seq "$runs"); do
    say "$name on $leg: count $n of $runs, perturbed (scripts/perturb.sh $n)"
    "$root/scripts/perturb.sh" "$n" -- bash -c '"$@" --matrix "${IPC_MATRIX_FILE:-matrix.yaml}"' _ \
      "${run[@]}" --out "$copy/target/ipc-matrix" >/dev/null
    "${start[@]}" "$bin" baseline accept $([ "$n" -eq 1 ] || echo --append) "${stored[@]}" >/dev/null
  done
  mkdir -p "$root/examples/$name/baselines/$leg" &&
    exec cp "$copy/baselines/$leg/quick.json" "$root/examples/$name/baselines/$leg/"
fi
[ -f "baselines/$leg/quick.json" ] ||
  die "examples/$name/baselines/$leg/quick.json is missing (scripts/example-counts.sh --accept 3)"
say "$name on $leg: ipc-matrix run --count --strict-instructions"
out="$("${run[@]}" --out "$copy/target/ipc-matrix" --baselines baselines --strict-instructions 2>&1)" ||
  { printf '%s\n' "$out" >&2; die "$name on $leg: the counted run failed"; }
grep -E '/rt|passed' <<<"$out" >&2 || true
say "$name on $leg: its fault ($fault), counted"
code=0
out="$(env "$fault" "${run[@]}" --filter "$cell" --out "$copy/target/fault" 2>&1)" || code=$?
grep '^FAIL' <<<"$out" >&2 || true
[ "$code" -eq 1 ] && grep -q 'round trip 5 of .*first difference at byte offset 100' <<<"$out" ||
  die "$name on $leg: the corrupted reply did not fail $cell at round trip 5, offset 100 (exit $code)"
