#!/usr/bin/env bash
# The emulator that counts, pinned: QEMU user mode with plugin support, built from one
# source package (Debian 12's 1:7.2+dfsg-7+deb12u18, QEMU 7.2.22; each file checked
# against its SHA-256) for the architectures whose cells are counted. Distributions
# ship other releases (Ubuntu 24.04: 8.2, which gives guests a vDSO, so clock reads run
# guest code) or builds that cannot load plugins at all (Debian 13, Ubuntu 26.04), so a
# count made with the host's QEMU would depend on the host. Built once into
# target/pinned/qemu-<release>/ (about 4 minutes on 2 cores); later calls find it there.
# Prints the folder of the binaries (qemu-x86_64, qemu-aarch64).
#   scripts/pinned-qemu.sh
# IPC_MATRIX_QEMU_SOURCE=DIR takes the three source files from DIR instead of Debian's
# archive (a mirror, or a cache of CI's).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"

release=7.2.22
package=7.2+dfsg-7+deb12u18
targets=x86_64-linux-user,aarch64-linux-user
sources=(
  "qemu_$package.dsc 6b6bd27b947ec89e40a1d6b26d9c9f3c698ca691da13163e0483f6061bbb20b3"
  "qemu_7.2+dfsg.orig.tar.xz 91aca71520040edc40b8d437aa3004dae614f58e286cf653ee8996c07af2962f"
  "qemu_$package.debian.tar.xz 28a1c86310ee53b6bf1854cffe6f6be6ed29a08db7d05759f8ac57b8d6a6cb2f"
)
pool=http://deb.debian.org/debian/pool/main/q/qemu

root="${CARGO_TARGET_DIR:-$PWD/target}/pinned/qemu-$release"
stamp="$root/built-from"
# What the build is made of: a change to any of it builds again.
identity="$package $targets plugins"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$identity" ] &&
  [ -x "$root/bin/qemu-x86_64" ] && [ -x "$root/bin/qemu-aarch64" ]; then
  printf '%s\n' "$root/bin"
  exit 0
fi

missing=()
for tool in curl:curl dpkg-source:dpkg-dev gcc:gcc make:make ninja:ninja-build \
  meson:meson pkg-config:pkg-config flex:flex bison:bison python3:python3 xz:xz-utils; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
pkg-config --exists glib-2.0 2>/dev/null || missing+=(libglib2.0-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  apt_install "${missing[@]}" || die "building the pinned QEMU needs ${missing[*]}"
fi

work="$root.build"
rm -rf "$work" "$root"
mkdir -p "$work/src"
for entry in "${sources[@]}"; do
  file="${entry%% *}" sum="${entry#* }"
  if [ -n "${IPC_MATRIX_QEMU_SOURCE:-}" ]; then
    cp "$IPC_MATRIX_QEMU_SOURCE/$file" "$work/src/$file" ||
      die "IPC_MATRIX_QEMU_SOURCE=$IPC_MATRIX_QEMU_SOURCE has no $file"
  else
    url="$pool/${file//+/%2b}"
    say "fetching $url"
    curl --fail --silent --show-error --location --retry 3 -o "$work/src/$file" "$url" ||
      die "could not fetch $url (set IPC_MATRIX_QEMU_SOURCE to a folder holding $file)"
  fi
  printf '%s  %s\n' "$sum" "$work/src/$file" | sha256sum --check --quiet ||
    die "$file does not have the pinned SHA-256 $sum"
done
say "building QEMU $release ($package) user mode with plugins: $targets"
dpkg-source --no-check -x "$work/src/qemu_$package.dsc" "$work/qemu" >/dev/null
mkdir -p "$work/build"
(
  cd "$work/build"
  "$work/qemu/configure" --prefix="$root" --target-list="$targets" \
    --with-pkgversion="Debian 1:$package, built by ipc-matrix" \
    --without-default-features --enable-plugins --disable-werror --disable-docs \
    >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log" >&2; exit 1; }
  ninja qemu-x86_64 qemu-aarch64 >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; exit 1; }
  mkdir -p "$root/bin"
  cp qemu-x86_64 qemu-aarch64 "$root/bin/"
) || die "the QEMU build failed (logs in $work)"
"$root/bin/qemu-x86_64" -h | grep -- '^-plugin' >/dev/null ||
  die "the pinned QEMU was built without plugin support"
printf '%s\n' "$identity" >"$stamp"
rm -rf "$work"
printf '%s\n' "$root/bin"
