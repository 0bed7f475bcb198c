#!/usr/bin/env bash
# The instruction-count pass of a leg: its architecture's cells, built as the counted
# build (static against musl, C and C++ compiled by zig: scripts/lib.sh counted_target)
# and run under the pinned QEMU (scripts/pinned-qemu.sh) with the counting plugin and a
# fixed emulated CPU model (scripts/qemu-run). Nothing it counts comes from the host:
# not its C library, not its compiler, not its emulator. Its results form the leg
# `<arch>-unknown-linux-musl@qemu`, judged on guest instructions per round trip.
# Timings stay with the leg's own pass.
#   scripts/count-pass.sh x86_64-unknown-linux-gnu [nextest arguments, e.g. -E 'test(/^echo::/)']
#   scripts/count-pass.sh aarch64-unknown-linux-gnu   (another architecture: under qemu-aarch64)
# The counted triple itself (x86_64-unknown-linux-musl) names the same pass.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
triple="${1:-}"
[ -n "$triple" ] || die "usage: scripts/count-pass.sh <target-triple> [nextest arguments]"
shift
counted="$(counted_target "$triple")" ||
  die "count pass: $triple has no counted build (the pinned QEMU covers x86_64 and aarch64)"
# Prepared by the caller (scripts/second-userland.sh: the build, the plugin, the pinned
# QEMU and zig's settings come from the machine around it), or here.
if [ "${IPC_MATRIX_COUNT_PASS_PREPARED:-0}" != 1 ]; then
  scripts/setup-target.sh "$counted"
  ensure_count_plugin
  # The reference C peer its echo-c-peer cells start, static like them.
  scripts/build-peers.sh "$counted" >/dev/null
  zig_env "$counted"
fi
say "count pass: the cells of $triple, as $counted under the pinned QEMU (leg $counted@qemu)"
# Cells only, unless told otherwise: the fault tests prove checks, which the leg's own
# pass already did. The workspace is selected, as nextest's own builds select it, so
# that a later run with other arguments finds the same units built.
[ $# -gt 0 ] || set -- -E 'not test(/^fault::/)'
# nextest's profile of this architecture's count passes (.config/nextest.toml): its
# JUnit file and run store are its own (target/nextest/count-<arch>/).
IPC_MATRIX_EMULATE_NATIVE=1 IPC_MATRIX_COUNT=on \
  cargo nextest run --locked --workspace --test matrix --profile "count-${counted%%-*}" \
  --target "$counted" "$@"
