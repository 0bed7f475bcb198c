#!/usr/bin/env bash
# Prints a Markdown summary of one leg's cell results (for $GITHUB_STEP_SUMMARY):
#   scripts/leg-summary.sh x86_64-unknown-linux-gnu@native
set -euo pipefail
leg="${1:?usage: scripts/leg-summary.sh <triple>@<runner>}"
dir="$(dirname "$0")/../target/ipc-matrix/$leg/cells"
echo "### $leg"
if [ ! -d "$dir" ]; then
  echo "No cell results (the build or the harness failed before any cell ran)."
  exit 0
fi
python3 - "$dir" <<'PY'
import json, pathlib, sys
rows = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(path.read_text())
    lat = r.get("latency_ns") or {}
    us = lambda k: f"{lat[k] / 1000:.1f}" if k in lat else "-"
    verdict = "pass" if r["outcome"]["passed"] else "**FAIL**"
    rows.append(f"| `{r['cell']['id']}` | {verdict} | {us('p50')} | {us('p99')} | {us('max')} | {r['lost']} |")
env = r["environment"] if rows else {}
print(f"runner: {env.get('runner', '?')} {env.get('qemu_version') or ''}, CPU: {env.get('cpu_model', '?')}\n")
print("| cell | result | p50 us | p99 us | max us | lost |\n|---|---|---:|---:|---:|---:|")
print("\n".join(rows))
PY
