#!/usr/bin/env bash
# Builds the seqpacket stack as a shared library for this CPU, or for another with its C
# compiler: `CC=aarch64-linux-gnu-gcc ./build.sh aarch64`. The library goes where
# matrix.yaml looks for it: build/<cpu>/libseqpacket.so.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
arch="${1:-$(uname -m)}"
include="${IPC_MATRIX_INCLUDE:-$here/../../crates/transport/include}"
mkdir -p "$here/build/$arch"
"${CC:-cc}" -std=c11 -shared -fPIC -O2 -Wall -Wextra -Werror -I "$include" \
  -o "$here/build/$arch/libseqpacket.so" "$here/seqpacket.c"
echo "$here/build/$arch/libseqpacket.so"
