#!/usr/bin/env bash
# Prepares this machine to build and run tests for a target triple: the rustup target,
# the cross C toolchain (linker) and qemu-user, from apt on Debian/Ubuntu. Idempotent:
# installs only what is missing and says what it did.
#   scripts/setup-target.sh aarch64-unknown-linux-gnu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"

triple="${1:-}"
[ -n "$triple" ] || die "usage: scripts/setup-target.sh <target-triple>"
host="$(rustc -vV | sed -n 's/^host: //p')"

# A counted build (static, musl, compiled by zig): the rustup target, zig and
# cargo-zigbuild (pinned, from PyPI) and the pinned QEMU; no cross gcc, no sysroot.
case "$triple" in
  x86_64-unknown-linux-musl | aarch64-unknown-linux-musl)
    if rustup target list --installed | grep -qx "$triple"; then
      say "rustup target $triple: already installed"
    else
      say "rustup target add $triple"
      rustup target add "$triple"
    fi
    ensure_zig
    say "the pinned QEMU: $(scripts/pinned-qemu.sh)"
    exit 0 ;;
esac

# Per target: the cross gcc prefix, Debian's libc6-dev-*-cross suffix, the qemu binary.
case "$triple" in
  "$host") say "$triple is this machine's own target; nothing to set up"; exit 0 ;;
  aarch64-unknown-linux-gnu)       gnu=aarch64-linux-gnu;     libc=arm64;   qemu=qemu-aarch64 ;;
  armv7-unknown-linux-gnueabihf)   gnu=arm-linux-gnueabihf;   libc=armhf;   qemu=qemu-arm ;;
  riscv64gc-unknown-linux-gnu)     gnu=riscv64-linux-gnu;     libc=riscv64; qemu=qemu-riscv64 ;;
  s390x-unknown-linux-gnu)         gnu=s390x-linux-gnu;       libc=s390x;   qemu=qemu-s390x ;;
  powerpc64le-unknown-linux-gnu)   gnu=powerpc64le-linux-gnu; libc=ppc64el; qemu=qemu-ppc64le ;;
  *) die "no recipe for $triple; known: aarch64-unknown-linux-gnu, armv7-unknown-linux-gnueabihf, riscv64gc-unknown-linux-gnu, s390x-unknown-linux-gnu, powerpc64le-unknown-linux-gnu" ;;
esac

if rustup target list --installed | grep -qx "$triple"; then
  say "rustup target $triple: already installed"
else
  say "rustup target add $triple"
  rustup target add "$triple"
fi

missing=()
command -v "$gnu-gcc" >/dev/null 2>&1 || missing+=("gcc-$gnu" "libc6-dev-$libc-cross")
# g++: libzmq (the req-rep cells) is C++ and is compiled for the target.
command -v "$gnu-g++" >/dev/null 2>&1 || missing+=("g++-$gnu")
command -v "$qemu" >/dev/null 2>&1 || missing+=(qemu-user)
if [ ${#missing[@]} -eq 0 ]; then
  say "$gnu-gcc, $gnu-g++ and $qemu: already installed"
  exit 0
fi
apt_install "${missing[@]}" ||
  die "could not install ${missing[*]} with apt-get: install them (or their equivalents) by hand; this script knows Debian and Ubuntu only"
say "installed: ${missing[*]}"
