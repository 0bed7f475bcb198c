#!/usr/bin/env bash
# The reference C peer built for a big-endian CPU (s390x), checked by this machine's own
# harness: its echo cells with that peer started through QEMU user mode (a program of
# someone else's, of another byte order, through the external peer protocol; every
# reply checked byte for byte). Needs no build of the workspace for that CPU: the peer
# is the only emulated process. Results go to target/ipc-matrix/big-endian-peer/, apart
# from the native leg's.
#   scripts/big-endian-peer.sh s390x-unknown-linux-gnu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
triple="${1:-}"
[ -n "$triple" ] || die "usage: scripts/big-endian-peer.sh <target-triple>"
runner="$(cargo_runner "$triple")"
[ -n "$runner" ] || die "$triple has no runner in .cargo/config.toml"
peer="$(scripts/build-peers.sh "$triple")"
dir="${CARGO_TARGET_DIR:-$PWD/target}/ipc-matrix/big-endian-peer"
mkdir -p "$dir"
# The matrix: matrix.yaml's echo-c-peer cells, with the peer behind the target's runner.
# Absolute paths: the harness resolves a relative command from the matrix file's folder.
command_json="$(printf '%s\n' $runner "$PWD/$peer" | python3 -c '
import json, os, sys
words = [w for w in sys.stdin.read().split("\n") if w]
if "/" in words[0] and not os.path.isabs(words[0]):
    words[0] = os.path.abspath(words[0])
print(json.dumps(words))')"
cat >"$dir/matrix.yaml" <<EOF
# Written by scripts/big-endian-peer.sh: the C peer of $triple, behind its runner.
version: 1
targets:
  - { triple: $(rustc -vV | sed -n 's/^host: //p'), runner: native, blocks_merge: false }
profiles:
  quick: { description: the reference C peer on $triple }
scenarios:
  - name: echo-c-peer-$triple
    kind: echo
    transports: [tcp, udp, local]
    payloads: [200B, 60KiB]
    iterations: 1000
    warmup: 100
    timeout: 5s
    peer: { command: $command_json }
EOF
IPC_MATRIX_COUNT=off ipc_matrix run --matrix "$dir/matrix.yaml" --out "$dir/results"
