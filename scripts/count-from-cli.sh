#!/usr/bin/env bash
# `ipc-matrix run --count` as a user has it, from a folder of its own that `ipc-matrix
# init` wrote (no script of this repository): its cells counted under the pinned QEMU
# with the counting plugin, the counts accepted as the baseline, then counted again with
# --strict-instructions, which must pass: the same counts, every cell counted.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$(repo_root)"
cd "$root"
ensure_count_plugin
ipc_matrix --help >/dev/null # built
target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target${IPC_MATRIX_TARGET:+/$IPC_MATRIX_TARGET}/debug/ipc-matrix"
arch="$(uname -m)"
qemu="$(scripts/pinned-qemu.sh)/qemu-$arch"
plugin="$target/release/libipc_matrix_qemu_count.so"
folder="$(mktemp -d "${TMPDIR:-/tmp}/ipc-matrix-count-from-cli.XXXXXX")"
trap 'rm -rf "$folder"' EXIT
cli() { (cd "$folder" && "$bin" "$@"); }
cli init --rev "$(git -C "$root" rev-parse HEAD)" >/dev/null
say "ipc-matrix run --count, from $folder"
cli run --count --qemu "$qemu" --count-plugin "$plugin" >/dev/null
cli baseline accept --leg "$arch-unknown-linux-gnu@qemu" >/dev/null
out="$(cli run --count --qemu "$qemu" --count-plugin "$plugin" --strict-instructions 2>&1)" ||
  die "count-from-cli.sh: the second counted run failed or moved: $out"
printf '%s\n' "$out" | grep -E '/rt' >&2
grep -q '/rt unchanged 1.000x' <<<"$out" ||
  die "count-from-cli.sh: no cell was counted the same twice: $out"
# A library that is not a QEMU plugin: the emulator refuses it before the run starts
# under it, and that is the command's refusal (2), never the emulator's status (1).
not_plugin="$(cc -print-file-name=libc.so.6)"
code=0
out="$(cli run --count --qemu "$qemu" --count-plugin "$not_plugin" 2>&1)" || code=$?
[[ $code == 2 && $out == *"before the run started under it"* ]] ||
  die "count-from-cli.sh: a library that is no plugin exited $code: $out"
