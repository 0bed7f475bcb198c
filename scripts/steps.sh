# shellcheck shell=bash
# Steps that must all run; sourced by scripts/lib.sh.
# For steps that must all run: `some_step || first_failure $? ["what it was"]` keeps the
# first non-zero status in $status and each failure for failure_summary, which repeats
# them at the end (where a log's reader finds them), with the tests that failed.
failures=()
first_failure() {
  if [ "${status:-0}" -eq 0 ]; then status=$1; fi
  local line file
  read -r line _ file < <(caller 0)
  failures+=("exit $1 at ${file#"$(repo_root)/"}:$line${2:+: $2}")
}
failure_summary() {
  [ "${#failures[@]}" -gt 0 ] || { say "every step passed"; return 0; }
  say "${#failures[@]} step(s) failed:"
  printf '    %s\n' "${failures[@]}" >&2
  xtask failed-tests || true
}
