#!/usr/bin/env bash
# The test command (also what CI runs): formatting, lints, every test through nextest's
# `ci` profile on this machine and on the other of x86_64 and aarch64 under QEMU, the
# instruction-count passes of both (and again in a second userland, which must count
# the same), the transport crate on s390x (big-endian), the worked examples of a user's
# own stack, every leg's reports judged against baselines/, the reports rendered in
# headless Chromium, and the workflow's merge gate run here with act (four runs).
# Installs what it needs where apt allows. A failing step never hides what the others
# measure: each failure is repeated at the end.
# The steps, in order, and why: xtask/src/test_command.rs.
#   scripts/test.sh [nextest arguments, e.g. -E 'test(/^echo::/)']
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
ensure_nextest
ensure_interop_tools
xtask test "$@"
