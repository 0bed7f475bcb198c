#!/usr/bin/env bash
# Prepares the reference external peers (protocol v1): builds the C peer
# (peers/c/echo_peer.c) for a target triple with that triple's gcc, into
# peers/c/build/<triple>/c-echo-peer, where matrix.yaml names it
# (`peers/c/build/{target}/c-echo-peer`), and makes sure python3 is there for the Python
# peer (peers/python). Prints the C binary's path on stdout (progress goes to stderr):
#   scripts/build-peers.sh                            (this machine's triple, rustc -vV)
#   scripts/build-peers.sh s390x-unknown-linux-gnu    (cross; run with qemu-s390x -L /usr/s390x-linux-gnu)
#   scripts/build-peers.sh x86_64-unknown-linux-musl  (a counted build: static, by zig)
# Rebuilds only when the source (or this script, which holds the flags) is newer than
# the binary. A missing compiler is installed with apt where possible.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$(repo_root)"

host=""
if command -v rustc >/dev/null 2>&1; then host="$(rustc -vV | sed -n 's/^host: //p')"; fi
triple="${1:-$host}"
[ -n "$triple" ] || die "rustc not found to name this machine's triple: usage: scripts/build-peers.sh <target-triple>"
[ $# -le 1 ] || die "usage: scripts/build-peers.sh [target-triple]"

# A counted build's peer is static against musl, compiled by zig (scripts/lib.sh zig_env).
case "$triple" in
  x86_64-unknown-linux-musl | aarch64-unknown-linux-musl)
    zig_env "$triple"
    var="CC_${triple//-/_}"
    compilers=("${!var}")
    packages=() ;;
esac

# Per target: the Debian gcc prefix and the libc6-dev-*-cross suffix (as setup-target.sh).
case "$triple" in
  *-musl) ;;
  x86_64-unknown-linux-gnu)        gnu=x86_64-linux-gnu;      libc=amd64 ;;
  aarch64-unknown-linux-gnu)       gnu=aarch64-linux-gnu;     libc=arm64 ;;
  armv7-unknown-linux-gnueabihf)   gnu=arm-linux-gnueabihf;   libc=armhf ;;
  riscv64gc-unknown-linux-gnu)     gnu=riscv64-linux-gnu;     libc=riscv64 ;;
  s390x-unknown-linux-gnu)         gnu=s390x-linux-gnu;       libc=s390x ;;
  powerpc64le-unknown-linux-gnu)   gnu=powerpc64le-linux-gnu; libc=ppc64el ;;
  *) die "no recipe for $triple; known: x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu, x86_64-unknown-linux-musl, aarch64-unknown-linux-musl, armv7-unknown-linux-gnueabihf, riscv64gc-unknown-linux-gnu, s390x-unknown-linux-gnu, powerpc64le-unknown-linux-gnu" ;;
esac

# The host's own gcc (or its prefixed name) builds natively; any other triple needs the
# cross gcc and the target's libc headers.
if [[ "$triple" == *-musl ]]; then
  :
elif [ "$triple" = "$host" ]; then
  compilers=(gcc "$gnu-gcc")
  packages=(gcc libc6-dev)
else
  compilers=("$gnu-gcc")
  packages=("gcc-$gnu" "libc6-dev-$libc-cross")
fi
find_cc() {
  local c
  for c in "${compilers[@]}"; do
    # A cross gcc without its libc headers is as good as none.
    if command -v "$c" >/dev/null 2>&1 && printf '#include <stdio.h>\n' | "$c" -E -x c - >/dev/null 2>&1; then
      cc="$c"
      return 0
    fi
  done
  return 1
}

# The Python peer runs on the host's python3 (`#!/usr/bin/env python3`).
if ! command -v python3 >/dev/null 2>&1; then
  apt_install python3 || die "python3 is missing and apt-get could not install it: the Python peer's cells need it"
fi

src=peers/c/echo_peer.c
out="peers/c/build/$triple"
bin="$out/c-echo-peer"
if [ -x "$bin" ] && [ "$bin" -nt "$src" ] && [ "$bin" -nt "${BASH_SOURCE[0]}" ]; then
  say "c-echo-peer for $triple: up to date"
  printf '%s\n' "$bin"
  exit 0
fi

cc=""
if ! find_cc; then
  apt_install "${packages[@]}" ||
    die "no working ${compilers[*]} for $triple, and apt-get could not install ${packages[*]}: install them (or their equivalents) by hand"
  find_cc || die "${compilers[*]} still missing or without libc headers after installing ${packages[*]}"
fi

mkdir -p "$out"
say "$cc: $src -> $bin"
# Into a temporary name first: a failed build leaves no binary newer than the source,
# and a concurrent reader never runs a half-written one.
static=()
[[ "$triple" == *-musl ]] && static=(-static)
"$cc" -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE "${static[@]}" -o "$bin.tmp.$$" "$src" ||
  { rm -f "$bin.tmp.$$"; die "$cc failed to build $src"; }
mv -f "$bin.tmp.$$" "$bin"
printf '%s\n' "$bin"
