#!/usr/bin/env bash
# The instruction-count pass of a native leg: the same cells, run again under QEMU user
# mode for the machine's own architecture (qemu-x86_64 on x86_64, qemu-aarch64 on arm64)
# with the counting plugin and a fixed emulated CPU model (scripts/qemu-run). Its results
# form the leg `<triple>@qemu`, judged on guest instructions per round trip, which do not
# depend on the host, its load or its CPU model. Timings stay with the native pass.
# On an emulated leg there is nothing to do: its suite already ran under QEMU, counted.
#   scripts/count-pass.sh x86_64-unknown-linux-gnu [nextest arguments, e.g. -E 'test(/^echo::/)']
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
triple="${1:-}"
[ -n "$triple" ] || die "usage: scripts/count-pass.sh <target-triple> [nextest arguments]"
shift
host="$(rustc -vV | sed -n 's/^host: //p')"
if [ "$triple" != "$host" ]; then
  say "count pass: $triple is emulated here; its suite was counted as it ran"
  exit 0
fi
ensure_count_plugin
# The reference C peer its echo-c-peer cells start (built once; up to date after the suite).
scripts/build-peers.sh "$triple" >/dev/null
arch="$(uname -m)"
command -v "qemu-$arch" >/dev/null 2>&1 || apt_install qemu-user ||
  die "qemu-$arch is missing; install qemu-user"
var="CARGO_TARGET_$(printf '%s' "$triple" | tr 'a-z.-' 'A-Z__')_RUNNER"
say "count pass: the cells of $triple under qemu-$arch (leg $triple@qemu)"
# Cells only, unless told otherwise: the fault tests prove checks, which the native pass
# already did.
[ $# -gt 0 ] || set -- -E 'not test(/^fault::/)'
# The native suite's own build, so nothing compiles twice: its --target, if it had one
# (IPC_MATRIX_TARGET), and the workspace selected (`-p ipc-matrix` alone would resolve
# some dependencies' features otherwise and compile them, and the CLI, again).
suite_target_args
if [ -n "${IPC_MATRIX_TARGET:-}" ] && [ "$IPC_MATRIX_TARGET" != "$triple" ]; then
  die "IPC_MATRIX_TARGET is $IPC_MATRIX_TARGET, but this is the count pass of $triple"
fi
env "$var=$PWD/scripts/qemu-run $arch $arch-linux-gnu" IPC_MATRIX_EMULATE_NATIVE=1 IPC_MATRIX_COUNT=on \
  cargo nextest run --locked --workspace --test matrix --profile ci "${suite_target[@]}" "$@"
