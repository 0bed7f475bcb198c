#!/usr/bin/env bash
# Mutation testing of the code that decides whether a run is right (cargo-mutants, one
# planted bug at a time, against the tests of the crate the file is in); what it does,
# where it writes and its exit status: xtask/src/mutants.rs. Not part of the test
# command (an hour or more on two cores).
#   scripts/mutants.sh [MINUTES [FILE...]]   (budget default 20 min; default files there)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
xtask mutants "$@"
