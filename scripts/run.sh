#!/usr/bin/env bash
# The main job: build optimized and run the matrix (`ipc-matrix run`), default profile
# quick. Extra arguments go to `ipc-matrix run`, e.g. --profile full --filter shm.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
ensure_rust
cargo build --release --locked -p ipc-matrix
# The reference external peers its echo-c-peer and echo-python-peer cells start.
scripts/build-peers.sh >/dev/null
exec ./target/release/ipc-matrix run "$@"
