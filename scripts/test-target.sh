#!/usr/bin/env bash
# Runs the whole test suite for one target of matrix.yaml, set up first if needed:
#   scripts/test-target.sh s390x-unknown-linux-gnu            (under QEMU on x86_64)
#   scripts/test-target.sh x86_64-unknown-linux-gnu           (this machine, natively)
# Extra arguments go to `cargo nextest run` (e.g. -E 'test(/shm/)').
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
triple="${1:-}"
[ -n "$triple" ] || die "usage: scripts/test-target.sh <target-triple> [nextest arguments]"
shift
ensure_rust
ensure_nextest
scripts/setup-target.sh "$triple"
say "cargo nextest run --profile ci --target $triple"
cargo nextest run --locked --workspace --profile ci --target "$triple" "$@"
cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$triple.xml"
say "JUnit: target/nextest/ci/junit-$triple.xml; cell results: target/ipc-matrix/$triple@*/"
