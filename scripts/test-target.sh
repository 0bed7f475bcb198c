#!/usr/bin/env bash
# Runs the whole test suite for one target of matrix.yaml, set up first if needed, and
# writes that leg's reports:
#   scripts/test-target.sh s390x-unknown-linux-gnu            (under QEMU on x86_64)
#   scripts/test-target.sh x86_64-unknown-linux-gnu           (this machine, natively)
#   scripts/test-target.sh aarch64-unknown-linux-musl         (a counted build, pinned QEMU)
# Extra arguments go to `cargo nextest run` (e.g. -E 'test(/shm/)').
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
triple="${1:-}"
[ -n "$triple" ] || die "usage: scripts/test-target.sh <target-triple> [nextest arguments]"
shift
ensure_rust
ensure_nextest
ensure_interop_tools
scripts/setup-target.sh "$triple"
scripts/build-peers.sh "$triple" >/dev/null
status=0
host="$(rustc -vV | sed -n 's/^host: //p')"
# An emulated leg counts as it runs, or stops saying why (scripts/qemu-run).
count=off
if [ "$triple" != "$host" ]; then
  ensure_count_plugin
  count=on
  # The counted build of this machine's own architecture runs under QEMU too.
  [ "${triple%%-*}" != "$(uname -m)" ] || export IPC_MATRIX_EMULATE_NATIVE=1
fi
say "cargo nextest run --profile ci --target $triple"
(
  # A counted build (static, musl) compiles with zig (scripts/lib.sh zig_env).
  if [ "$(counted_target "$triple" || true)" = "$triple" ]; then zig_env "$triple"; fi
  IPC_MATRIX_COUNT="$count" cargo nextest run --locked --workspace --profile ci --target "$triple" "$@"
) || first_failure $?
cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$triple.xml" || true
if [ "$triple" = "$host" ]; then leg="$triple@native"; else leg="$triple@qemu"; fi
# The reports run the CLI of the suite just built for $triple (lib.sh ipc_matrix); for a
# counted build, which compiles with zig's settings, the host's.
[ "$(counted_target "$triple" || true)" = "$triple" ] || export IPC_MATRIX_TARGET="$triple"
write_reports "$leg" || first_failure $?
say "JUnit: target/nextest/ci/junit-$triple.xml; reports: target/ipc-matrix/$leg/$(suite_profile)/"
exit "$status"
