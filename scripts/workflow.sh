#!/usr/bin/env bash
# A job of a workflow (and the jobs it needs) run on this machine with act, in host mode,
# with local stand-ins for GitHub's actions and services (xtask/src/workflow.rs):
#   scripts/workflow.sh [--file F] [--job J] [--matrix key:value]... [--env NAME=VALUE]... [--event E]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
xtask workflow "$@"
