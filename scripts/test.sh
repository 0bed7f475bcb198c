#!/usr/bin/env bash
# The test command (also what CI runs): formatting, lints, then every test through
# nextest's `ci` profile, on this machine and on aarch64 under QEMU: unit tests, the
# fault-injection tests, and one test per cell of the quick profile. The aarch64 leg
# counts guest instructions as it runs; the host's cells run once more under QEMU for its
# own architecture to count them (scripts/count-pass.sh). Ends by writing each leg's
# reports (judged against baselines/, instructions included) and all legs side by side,
# then renders every report page written in headless Chromium (scripts/check-reports.sh):
# it fails when a page scrolls sideways at 1400 px, a plot or image does not render, or
# the console shows an error, and keeps screenshots in target/ipc-matrix/screenshots/.
# Also runs the transport crate's tests, and the reference C peer's cells, on s390x
# (big-endian) under QEMU. Builds the reference external peers (scripts/build-peers.sh). Installs
# cargo-nextest, the aarch64 and s390x rustup targets, their cross gcc and g++ and
# qemu-user, protoc, capnp and pyzmq (the interop tests' reference implementations) and
# chromium if missing (the browser check says it is skipped where there is no apt).
# Arguments go to both legs' `cargo nextest run` calls (not to the s390x transport run).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
ensure_nextest
ensure_interop_tools

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
cargo clippy --locked --workspace --all-targets -- -D warnings
say "workflow lints (actionlint, zizmor)"
scripts/lint-workflows.sh

# A failing suite still gets its reports: what was measured is kept and shown.
status=0
host="$(rustc -vV | sed -n 's/^host: //p')"
legs=("$host@native")
# The reference external peers (peers/): the C one built for each target its cells run on.
scripts/build-peers.sh "$host" >/dev/null
say "host suite: cargo nextest run --profile ci ($host)"
cargo nextest run --locked --workspace --profile ci "$@" || first_failure $?
cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$host.xml" || true

emulated=aarch64-unknown-linux-gnu
if [ "$host" != "$emulated" ]; then
  scripts/setup-target.sh "$emulated"
  scripts/build-peers.sh "$emulated" >/dev/null
  # Built first: the emulated suite counts guest instructions as it runs.
  ensure_count_plugin
  say "emulated suite: cargo nextest run --profile ci --target $emulated (QEMU user mode)"
  IPC_MATRIX_COUNT=on cargo nextest run --locked --workspace --profile ci --target "$emulated" "$@" ||
    first_failure $?
  cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$emulated.xml" || true
  legs+=("$emulated@qemu")
fi

# The transport crate alone on a big-endian CPU under QEMU: its conformance suite and
# property tests read and write headers and length prefixes, which little-endian CPUs
# cannot get wrong by accident. Not a leg: no cells, no reports; JUnit of its own.
big_endian=s390x-unknown-linux-gnu
if [ "$host" != "$big_endian" ]; then
  scripts/setup-target.sh "$big_endian"
  say "transport suite on $big_endian (big-endian, QEMU user mode)"
  cargo nextest run --locked -p ipc-matrix-transport --profile ci --target "$big_endian" ||
    first_failure $?
  cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$big_endian-transport.xml" || true
  # The C peer built for s390x, checked byte for byte by its cells (a big-endian program
  # of someone else's, through the external peer protocol).
  scripts/build-peers.sh "$big_endian" >/dev/null
  say "external C peer cells on $big_endian (QEMU user mode)"
  cargo nextest run --locked -p ipc-matrix --test matrix --profile ci --target "$big_endian" \
    -E 'test(/^echo-c-peer::/)' || first_failure $?
  cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$big_endian-c-peer.xml" || true
fi

# The host's instruction-count pass: its cells again under QEMU for its own architecture,
# counted on a fixed emulated CPU; the leg <host>@qemu is judged on instructions.
scripts/count-pass.sh "$host" || first_failure $?
legs+=("$host@qemu")

# Instruction regressions fail the test command: counts are deterministic, so a change
# that costs more instructions must come with its re-measured baseline. Timings only warn.
STRICT_INSTRUCTIONS=true write_reports "${legs[@]}" || first_failure $?
profile="$(suite_profile)"
# Every leg with results side by side: the count pass and the emulated leg give the
# instructions per architecture, the native leg its timings.
compared=()
for leg in "${legs[@]}"; do
  if [ -d "target/ipc-matrix/$leg/$profile/cells" ]; then
    compared+=("target/ipc-matrix/$leg/$profile")
  fi
done
if [ "${#compared[@]}" -gt 1 ]; then
  say "legs side by side: ${legs[*]}"
  ipc_matrix report --compare "${compared[@]}" >/dev/null || first_failure $?
fi
# Every page written, as a reader's browser shows it (after the self-test of the checks).
pages=()
for leg in "${legs[@]}"; do
  page="target/ipc-matrix/$leg/$profile/report.html"
  if [ -f "$page" ]; then pages+=("$page"); fi
done
comparison=target/ipc-matrix/compare/comparison.html
if [ "${#compared[@]}" -gt 1 ] && [ -f "$comparison" ]; then pages+=("$comparison"); fi
if [ "${#pages[@]}" -gt 0 ]; then
  scripts/check-reports.sh "${pages[@]}" || first_failure $?
fi
say "JUnit: target/nextest/ci/junit-<triple>.xml (and junit-$big_endian-transport.xml, junit-$big_endian-c-peer.xml)"
for leg in "${legs[@]}"; do
  say "reports of $leg: target/ipc-matrix/$leg/$profile/report.{md,html} and results.json"
done
[ "${#legs[@]}" -gt 1 ] && say "side by side: target/ipc-matrix/compare/comparison.{md,html}"
if compgen -G 'target/ipc-matrix/screenshots/*.png' >/dev/null; then
  say "screenshots: target/ipc-matrix/screenshots/<leg>.png (first screen), <leg>.full.png (whole page)"
fi
exit "$status"
