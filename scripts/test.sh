#!/usr/bin/env bash
# The test command (also what CI runs): formatting, lints, then every test through
# nextest's `ci` profile: unit tests, the fault-injection tests, and one test per cell of
# the quick profile. Installs cargo-nextest if it is missing.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
ensure_nextest

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
cargo clippy --locked --workspace --all-targets -- -D warnings
say "cargo nextest run --profile ci (host: $(rustc -vV | sed -n 's/^host: //p'))"
cargo nextest run --locked --workspace --profile ci "$@"
say "JUnit: target/nextest/ci/junit.xml; cell results: target/ipc-matrix/"
