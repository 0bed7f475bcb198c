#!/usr/bin/env bash
# The worked examples counted on each CPU as their users count on another CPU: the stack
# built for it (examples/rust-stack's CLI static against musl by zig, on x86_64 and
# aarch64; examples/c-stack's library by that CPU's C compiler, loaded by ipc-matrix built
# for it, on this CPU, aarch64 and s390x), counted under QEMU by `run --count`, judged
# --strict-instructions against the example's committed baselines; then its fault.
#   scripts/example-counts.sh              # count and judge
#   scripts/example-counts.sh --accept 3   # count 3 times, perturbed, into examples/*/baselines
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$(repo_root)" runs=0 status=0
cd "$root"
[ $# -eq 0 ] || { [ "$1" = --accept ] && [ $# -le 2 ] && runs="${2:-3}" && [[ "$runs" =~ ^[1-9][0-9]*$ ]]; } ||
  die "usage: scripts/example-counts.sh [--accept RUNS]"
target="${CARGO_TARGET_DIR:-$root/target}" host="$(rustc -vV | sed -n 's/^host: //p')"
c_cpus=("$host" s390x-unknown-linux-gnu)
[ "${host%%-*}" = aarch64 ] || c_cpus+=(aarch64-unknown-linux-gnu)
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl "${c_cpus[@]:1}"; do scripts/setup-target.sh "$t" >&2; done
ensure_count_plugin
PINNED_QEMU="$(scripts/pinned-qemu.sh)" COUNT_PLUGIN="$target/release/libipc_matrix_qemu_count.so"
export PINNED_QEMU COUNT_PLUGIN
rust="$(example_copy rust-stack)" c="$(example_copy c-stack)"
trap 'rm -rf "$rust" "$c"' EXIT
say "the examples' stacks, built for each CPU"
(zig_env x86_64-unknown-linux-musl aarch64-unknown-linux-musl && cd "$rust" && CARGO_TARGET_DIR="$target" \
  cargo build --locked --quiet --profile test --bin udgram-matrix --target x86_64-unknown-linux-musl --target aarch64-unknown-linux-musl)
ipc_matrix --version >/dev/null
cargo build --locked --quiet --profile test -p ipc-matrix --bin ipc-matrix --target "${c_cpus[1]}" ${c_cpus[2]:+--target "${c_cpus[2]}"}
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
  scripts/example-on-cpu.sh "$rust" "$t" "$target/$t/debug/udgram-matrix" UDGRAM_CORRUPT_REPLY=7 echo::udgram::200B "$runs" ||
    first_failure $? "examples/rust-stack on $t"
done
for t in "${c_cpus[@]}"; do
  read -r _ _ gnu <<<"$(cargo_runner "$t")" && cc="$gnu-gcc" bin="$target/$t/debug/ipc-matrix"
  [ "$t" != "$host" ] || cc=cc bin="$target${IPC_MATRIX_TARGET:+/$IPC_MATRIX_TARGET}/debug/ipc-matrix"
  CC="$cc" IPC_MATRIX_INCLUDE="$root/crates/transport/include" "$c/build.sh" "${t%%-*}" >/dev/null
  scripts/example-on-cpu.sh "$c" "$t" "$bin" SEQPACKET_CORRUPT_REPLY=6 echo::seqpacket::200B "$runs" ||
    first_failure $? "examples/c-stack on $t"
done
failure_summary
exit "$status"
