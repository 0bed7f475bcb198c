#!/usr/bin/env bash
# Writes one leg's reports, judged against baselines/, and on GitHub Actions adds its
# report.md to the job summary (regressions are also annotated as ::warning):
#   scripts/leg-report.sh x86_64-unknown-linux-gnu@native
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
leg="${1:?usage: scripts/leg-report.sh <triple>@<runner>}"
status=0
write_reports "$leg" || first_failure $?
report="target/ipc-matrix/$leg/$(suite_profile)/report.md"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  if [ -f "$report" ]; then
    cat "$report" >> "$GITHUB_STEP_SUMMARY"
  else
    printf '### %s\n\nNo cell results: the build or the harness failed before any cell ran.\n' "$leg" >> "$GITHUB_STEP_SUMMARY"
  fi
fi
exit "$status"
