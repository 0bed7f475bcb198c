#!/usr/bin/env bash
# The test command (also what CI runs): formatting, lints, then every test through
# nextest's `ci` profile, on this machine and on the other of x86_64 and aarch64 under
# QEMU: unit tests, the fault-injection tests, and one test per cell of the quick
# profile. The emulated leg is that architecture's counted build (static, musl, by zig)
# under the pinned QEMU and counts guest instructions as it runs; the host's cells run
# once more, as its own architecture's counted build, to count them
# (scripts/count-pass.sh), and that count pass once more in a second userland, which
# must count the same (scripts/second-userland.sh). Ends by writing each leg's
# reports (judged against baselines/, instructions included) and all legs side by side,
# then renders every report page written in headless Chromium (scripts/check-reports.sh):
# it fails when a page scrolls sideways at 1400 px, a plot or image does not render, or
# the console shows an error, and keeps screenshots in target/ipc-matrix/screenshots/.
# Runs the worked examples of a user's own stack (examples/rust-stack in Rust,
# examples/c-stack in C) from copies outside this repository (scripts/example-stacks.sh),
# and counts them on x86_64, aarch64 (and the C one on s390x) under QEMU, judged against
# their committed baselines (scripts/example-counts.sh).
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

# A failing suite still gets its reports: what was measured is kept and shown.
status=0
host="$(rustc -vV | sed -n 's/^host: //p')"
case "$host" in
  aarch64-*) other=x86_64-unknown-linux-gnu ;;
  *) other=aarch64-unknown-linux-gnu ;;
esac
counted="$(counted_target "$host")" other_counted="$(counted_target "$other")"
legs=("$host@native")
mkdir -p target/ipc-matrix
# Built while the linters run and the host suite compiles (nothing is timed then), and
# waited for before anything is: the pinned QEMU that counts, the second userland, and
# mdbook.
# One after the other: both may install packages, and apt takes one at a time.
(scripts/pinned-qemu.sh && scripts/second-userland.sh --prepare && ensure_mdbook >/dev/null) \
  >target/ipc-matrix/prepare.log 2>&1 &
prepared=$!
# Says what failed of a background step, with its log's end.
waited() {
  local pid="$1" what="$2" log="$3"
  wait "$pid" && return 0
  local code=$?
  tail -n 20 "$log" >&2
  say "failed: $what (log: $log)"
  return "$code"
}

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
# In the test profile, the one the suite builds: the build scripts (libzmq's C++ among
# them) and proc macros it compiles and runs are the suite's, not done twice.
cargo clippy --locked --workspace --all-targets --profile test -- -D warnings
say "xtask: cargo fmt --check, clippy -D warnings, its tests"
xtask_cargo() { CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/xtask" cargo "$1" --manifest-path xtask/Cargo.toml "${@:2}"; }
xtask_cargo fmt -- --check
xtask_cargo clippy --locked --all-targets --quiet -- -D warnings
xtask_cargo test --locked --quiet || first_failure $? "the xtask's tests"
say "workflow lints (actionlint, zizmor)"
scripts/lint-workflows.sh

# The reference external peers (peers/): the C one built for each target its cells run on.
scripts/build-peers.sh "$host" >/dev/null
say "host suite: cargo nextest run --profile ci ($host)"
cargo nextest run --no-run --locked --workspace --profile ci "$@" || first_failure $?
waited "$prepared" "the pinned QEMU, the second userland or mdbook" target/ipc-matrix/prepare.log ||
  first_failure $?
# The book: every page SUMMARY.md names must exist (create-missing = false); its links
# are checked by the host suite (crates/cli/tests/book.rs).
say "the book: mdbook build docs"
"$(ensure_mdbook)" build docs 2>&1 | tail -n 3 >&2 || first_failure $?
cargo nextest run --locked --workspace --profile ci "$@" || first_failure $?
cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$host.xml" || true
# A user's own stack from outside this repository: the worked example, copied elsewhere.
scripts/example-stacks.sh || first_failure $?

# The counts of both architectures: the cells of this one and of the other, each as its
# counted build (static against musl, compiled by zig) under the pinned QEMU
# (scripts/count-pass.sh), built together, so that each build's tail overlaps the other.
# The other architecture's count pass is also its suite here (its unit tests run on
# GitHub's machines of that architecture); the transport crate's tests run on it too.
for t in "$counted" "$other_counted"; do scripts/setup-target.sh "$t"; done
ensure_count_plugin
# Counting from the command line, in a user's folder (ipc-matrix init), no script of ours.
scripts/count-from-cli.sh || first_failure $?
counted_build "$counted" "$other_counted" || first_failure $?
# Both architectures' count passes at once, each followed by its second count in a second
# userland (Debian 13), which must count every cell that gates the same, to the last
# instruction, and pass against baselines/ too. A pass keeps about one CPU busy (QEMU
# runs a cell's two processes, mostly one at a time), and what it counts does not depend
# on what else runs (the baselines were accepted from runs with two CPU hogs). The other
# architecture's passes run in the background; their output is shown when they end.
other_log="target/ipc-matrix/count-pass-$other_counted.log"
(
  status=0
  scripts/count-pass.sh "$other" "$@" || first_failure $?
  cp "target/nextest/count-${other_counted%%-*}/junit.xml" "target/nextest/ci/junit-$other_counted.xml" || true
  scripts/second-userland.sh "$other" || first_failure $?
  failure_summary
  exit "$status"
) >"$other_log" 2>&1 &
other_pass=$!
# The host's instruction-count pass: its cells again, as its architecture's counted
# build; the leg <arch>-unknown-linux-musl@qemu is judged on instructions.
scripts/count-pass.sh "$host" || first_failure $?
cp "target/nextest/count-${counted%%-*}/junit.xml" "target/nextest/ci/junit-$counted.xml" || true
scripts/second-userland.sh "$host" || first_failure $?
other_status=0
wait "$other_pass" || other_status=$?
cat "$other_log" >&2
if [ "$other_status" -ne 0 ]; then
  say "failed: the count passes of $other_counted (log: $other_log)"
  first_failure "$other_status" "the count passes of $other_counted (log: $other_log)"
  # What failed in there, step by step: the background shell's own summary.
  while IFS= read -r line; do
    failures+=("  in there: ${line#    }")
  done < <(grep '^    exit ' "$other_log")
fi
legs+=("$other_counted@qemu" "$counted@qemu")
say "transport suite on $other_counted (the pinned QEMU)"
(
  zig_env "$other_counted"
  IPC_MATRIX_COUNT=off cargo nextest run --locked -p ipc-matrix-transport --profile ci \
    --target "$other_counted"
) || first_failure $?
cp target/nextest/ci/junit.xml "target/nextest/ci/junit-$other_counted-transport.xml" || true

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
  # The C peer built for s390x, checked byte for byte by this machine's harness (a
  # big-endian program of someone else's, through the external peer protocol).
  scripts/build-peers.sh "$big_endian" >/dev/null
  say "external C peer cells with the peer on $big_endian (QEMU user mode)"
  scripts/big-endian-peer.sh "$big_endian" || first_failure $?
fi
# The worked examples counted on each CPU, as their users count on CPUs of other kinds,
# judged against the examples' committed baselines, each with its fault.
scripts/example-counts.sh || first_failure $?

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
say "JUnit: target/nextest/ci/junit-<triple>.xml (and junit-<triple>-transport.xml)"
for leg in "${legs[@]}"; do
  say "reports of $leg: target/ipc-matrix/$leg/$profile/report.{md,html} and results.json"
done
[ "${#legs[@]}" -gt 1 ] && say "side by side: target/ipc-matrix/compare/comparison.{md,html}"
if compgen -G 'target/ipc-matrix/screenshots/*.png' >/dev/null; then
  say "screenshots: target/ipc-matrix/screenshots/<leg>.png (first screen), <leg>.full.png (whole page)"
fi
failure_summary
exit "$status"
