#!/usr/bin/env bash
# The test command (also what CI runs): formatting, lints, then every test through
# nextest's `ci` profile, on this machine and on aarch64 under QEMU: unit tests, the
# fault-injection tests, and one test per cell of the quick profile. Installs
# cargo-nextest, the aarch64 rustup target, its cross linker and qemu-user if missing.
# Arguments go to both `cargo nextest run` calls.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
ensure_nextest

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
cargo clippy --locked --workspace --all-targets -- -D warnings
say "workflow lints (actionlint, zizmor)"
scripts/lint-workflows.sh
host="$(rustc -vV | sed -n 's/^host: //p')"
say "host suite: cargo nextest run --profile ci ($host)"
cargo nextest run --locked --workspace --profile ci "$@"
cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$host.xml"

emulated=aarch64-unknown-linux-gnu
if [ "$host" != "$emulated" ]; then
  scripts/setup-target.sh "$emulated"
  say "emulated suite: cargo nextest run --profile ci --target $emulated (QEMU user mode)"
  cargo nextest run --locked --workspace --profile ci --target "$emulated" "$@"
  cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$emulated.xml"
fi
say "JUnit: target/nextest/ci/junit-<triple>.xml; cell results: target/ipc-matrix/<triple>@<runner>/"
