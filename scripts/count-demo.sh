#!/usr/bin/env bash
# Guest instruction counts under QEMU user mode, shown and checked: builds the count-demo
# example (crates/count-window) for each target, then runs the plugin's integration test
# (crates/qemu-count/tests/counting.rs: each window reported as documented, twice the
# loop twice the instructions, nothing outside a window or in other threads, three runs
# agreeing). Installs the cross toolchain and qemu-user if missing. Prints the counts.
#   scripts/count-demo.sh                                   # this machine and aarch64
#   scripts/count-demo.sh s390x-unknown-linux-gnu           # named targets only
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust

host="$(rustc -vV | sed -n 's/^host: //p')"
[ "$#" -gt 0 ] || set -- "$host" aarch64-unknown-linux-gnu
command -v "qemu-$(uname -m)" >/dev/null 2>&1 || scripts/setup-target.sh aarch64-unknown-linux-gnu

filters=()
for triple in "$@"; do
  case "$triple" in
    x86_64-* | aarch64-* | s390x-*) arch="${triple%%-*}" ;;
    armv7-*) arch=arm ;; riscv64gc-*) arch=riscv64 ;; powerpc64le-*) arch=powerpc64 ;;
    *) die "no counting recipe for $triple" ;;
  esac
  filters+=("count::$arch")
  if [ "$triple" != "$host" ]; then
    scripts/setup-target.sh "$triple"
    say "count-demo for $triple"
    cargo build --locked --quiet --release --target "$triple" -p ipc-matrix-count-window --example count-demo
  fi
done

# This machine's guest is the test binary itself; cargo builds the plugin first.
# --include-ignored: a guest this script built must run, not be skipped.
for filter in "${filters[@]}"; do
  say "counting under QEMU: $filter"
  cargo test --locked --quiet -p ipc-matrix-qemu-count --test counting -- \
    --include-ignored --nocapture --exact "$filter"
done
