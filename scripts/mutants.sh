#!/usr/bin/env bash
# Mutation testing of the code that decides whether a run is right: cargo-mutants plants
# one bug at a time (an operator swapped, a function returning a default, a condition
# negated, ...) in the byte comparison, the stream framing, the shared-memory transport,
# the verdict and its statistics, and runs the tests of the crate the file is in against
# each. A mutant no test notices ("missed") is a bug the tests would let through, or a
# change that makes no difference; those are excluded with their reason in
# .cargo/mutants.toml.
#
# Usage: scripts/mutants.sh [MINUTES [FILE...]]
#   MINUTES  the time budget of the whole run (default 20). A file still running when it
#            ends is stopped and reported as partial; files not started, as not run.
#   FILE     the files to mutate (default: the five below).
#
# Builds in mutants-build/ under $CARGO_TARGET_DIR (default target/; MUTANTS_TARGET_DIR
# overrides it), which nothing else may build in while it runs. Writes, under
# $CARGO_TARGET_DIR: mutants/<file>/mutants.out/ (cargo-mutants' own output: caught.txt,
# missed.txt, timeout.txt, unviable.txt, logs) and mutants/summary.md, which it also
# prints. Exit status: 0 when every file was tested
# whole and nothing was missed, 1 when a mutant was missed, 2 when the budget ran out
# first. A mutant that makes the tests hang (a timeout) is listed, and does not fail.
#
# Not part of scripts/test.sh: every mutant is a build and a test run of its crate
# (about 430 mutants in all; an hour or more on two cores).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"

CARGO_MUTANTS_VERSION=27.1.0
# A mutant's tests time out after 4 times the unmutated tests' time, and never sooner
# than this many seconds: 60 for the transport crate (its conformance suite takes about
# 5 s here, far more under load), 15 for the others (their tests take about a second; a
# mutant that makes a loop endless costs the whole timeout, and stats.rs has dozens). A
# mutant that makes a test hang shows as a timeout, which the summary lists apart. Its
# build times out after this many seconds.
min_test_timeout() {
  case "$1" in
    crates/transport/*) echo "${MUTANTS_MIN_TEST_TIMEOUT:-60}" ;;
    *) echo "${MUTANTS_MIN_TEST_TIMEOUT:-15}" ;;
  esac
}
BUILD_TIMEOUT=${MUTANTS_BUILD_TIMEOUT:-900}

budget_minutes=${1:-20}
[[ "$budget_minutes" =~ ^[0-9]+$ ]] || die "the budget is a whole number of minutes, not '$budget_minutes'"
shift || true
files=("$@")
if [ "${#files[@]}" -eq 0 ]; then
  files=(
    crates/scenario/src/verify.rs
    crates/transport/src/shm.rs
    crates/transport/src/framing.rs
    crates/baseline/src/verdict.rs
    crates/baseline/src/stats.rs
  )
fi
for f in "${files[@]}"; do [ -f "$f" ] || die "no file $f"; done

ensure_rust
if ! cargo mutants --version 2>/dev/null | grep -qx "cargo-mutants $CARGO_MUTANTS_VERSION"; then
  say "installing cargo-mutants $CARGO_MUTANTS_VERSION (cargo install --locked)"
  cargo install --locked "cargo-mutants@$CARGO_MUTANTS_VERSION"
fi

# The copies cargo-mutants builds in share a target folder of their own: dependencies are
# built once, not once per copy, and nothing else builds there. Cargo records a workspace
# file by its path inside the workspace, so a build of this tree into the same folder
# would take a mutant's artifacts for up to date (and the other way round).
base_target="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TARGET_DIR="${MUTANTS_TARGET_DIR:-$base_target/mutants-build}"
out="$base_target/mutants"
mkdir -p "$out"
deadline=$(( $(date +%s) + budget_minutes * 60 ))

lines() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }

summary="$out/summary.md"
{
  echo "# Mutants ($(date -u +%Y-%m-%dT%H:%MZ), budget ${budget_minutes} min, cargo-mutants $CARGO_MUTANTS_VERSION)"
  echo
  echo "| file | mutants | caught | missed | timeout | unviable | state |"
  echo "|---|---:|---:|---:|---:|---:|---|"
} > "$summary"
missed_list=""
status=0
for f in "${files[@]}"; do
  name="${f//\//_}"
  name="${name%.rs}"
  dir="$out/$name"
  listed=$(cargo mutants --list --file "$f" --colors never 2>/dev/null | grep -c . || true)
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -le 0 ]; then
    echo "| \`$f\` | $listed | | | | | not run: budget spent |" >> "$summary"
    status=2
    continue
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  say "cargo mutants --file $f ($listed mutants, ${left}s of budget left; log: $dir/log.txt)"
  set +e
  timeout --signal=INT --kill-after=120 "$left" \
    cargo mutants --file "$f" --jobs 1 --no-shuffle --colors never \
      --timeout-multiplier 4 --minimum-test-timeout "$(min_test_timeout "$f")" \
      --build-timeout "$BUILD_TIMEOUT" \
      --copy-target=false --output "$dir" > "$dir/log.txt" 2>&1
  rc=$?
  set -e
  m="$dir/mutants.out"
  caught=$(lines "$m/caught.txt")
  missed=$(lines "$m/missed.txt")
  timeouts=$(lines "$m/timeout.txt")
  unviable=$(lines "$m/unviable.txt")
  done_count=$(( caught + missed + timeouts + unviable ))
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 130 ] || [ "$rc" -eq 137 ]; then
    state="partial: budget spent after $done_count of $listed"
    status=2
  elif [ "$rc" -eq 4 ]; then
    state="the unmutated tests fail (see log)"
    status=1
  elif [ "$done_count" -lt "$listed" ]; then
    state="stopped after $done_count of $listed (exit $rc, see log)"
    status=1
  else
    state="done"
  fi
  echo "| \`$f\` | $listed | $caught | $missed | $timeouts | $unviable | $state |" >> "$summary"
  if [ "$missed" -gt 0 ]; then
    [ "$status" -eq 0 ] && status=1
    missed_list+=$'\n'"$(sed 's/^/- missed: /' "$m/missed.txt")"
  fi
  if [ "$timeouts" -gt 0 ]; then
    missed_list+=$'\n'"$(sed 's/^/- timeout (the tests hung): /' "$m/timeout.txt")"
  fi
done
{
  echo
  if [ -n "$(printf '%s' "$missed_list" | tr -d '[:space:]')" ]; then
    echo "## Missed and timed out"
    printf '%s\n' "$missed_list" | grep . || true
  else
    echo "No mutant was missed in what ran."
  fi
  echo
  echo "Excluded as equivalent (each with its reason): .cargo/mutants.toml"
} >> "$summary"
cat "$summary"
exit "$status"
