#!/usr/bin/env bash
# Renders report pages in headless Chromium (scripts/check-reports.py) and fails when one
# scrolls sideways at 1400 px, shows an image or SVG that did not render, or logs a console
# error (console.error, an uncaught exception, a failed load). The checker's self-test runs
# first: each check must fail on a small page made to break it, and a good page must pass.
# Screenshots of each page (its first screen and the whole page) go to
# target/ipc-matrix/screenshots/, replacing the last check's. Installs chromium with apt if
# missing; where there is neither, says so and skips (exit 0).
#   scripts/check-reports.sh                # every report page under target/ipc-matrix
#   scripts/check-reports.sh PAGE.html...   # these pages
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$(repo_root)"
checker="$root/scripts/check-reports.py"
shots="$root/target/ipc-matrix/screenshots"

pages=("$@")
if [ "${#pages[@]}" -eq 0 ]; then
  cd "$root"
  profile="$(suite_profile)"
  for page in target/ipc-matrix/*/"$profile"/report.html target/ipc-matrix/compare/comparison.html; do
    if [ -f "$page" ]; then pages+=("$page"); fi
  done
  [ "${#pages[@]}" -gt 0 ] || die "no report pages under target/ipc-matrix (profile $profile): write them first (ipc-matrix report)"
fi

# The last check's screenshots go first, so none outlives the page it showed.
rm -f "$shots"/*.png
ensure_browser || exit 0

status=0
say "browser check: self-test (each check must catch its fault)"
python3 "$checker" --self-test || first_failure $?
say "browser check: ${#pages[@]} report pages at 1400 px"
python3 "$checker" --out "$shots" "${pages[@]}" || first_failure $?
exit "$status"
