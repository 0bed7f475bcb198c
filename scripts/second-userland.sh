#!/usr/bin/env bash
# The proof that a count depends only on what the repository pins: an architecture's
# count pass, run again inside a second Linux userland (Debian 13 "trixie": another C
# library, Python, shell and kernel-facing tools; made with debootstrap into
# target/userland/, once), must count every cell that gates (judged against baselines/ by
# `ipc-matrix report --gating-cells`) the same, measuring and peer, as the count pass on
# this machine did, and pass against baselines/ too. Only those cells run in there: the
# others only inform.
#   scripts/second-userland.sh [<triple>]  (after scripts/count-pass.sh <triple>, default
#                                           the host's; as root or with sudo)
#   scripts/second-userland.sh --prepare   (only make the userland, e.g. while other work runs)
# The userland runs in a mount namespace of its own (unshare): /proc, /sys, /dev (with
# /dev/shm), the checkout and the Rust toolchain are bound into it and vanish with it.
# Nothing is built in there: the count pass finds this machine's counted build fresh.
# Extra arguments after the triple go to the count pass (nextest filters) in place of the
# gating cells.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"
root="$(repo_root)"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if [ "${IPC_MATRIX_SKIP_SECOND_USERLAND:-0}" = 1 ]; then
    say "skipped: the second userland (IPC_MATRIX_SKIP_SECOND_USERLAND=1)"
    exit 0
  fi
  sudo -n true 2>/dev/null ||
    die "the second userland needs root (debootstrap, mounts, chroot): run as root or with passwordless sudo, or set IPC_MATRIX_SKIP_SECOND_USERLAND=1 to leave this proof out, knowingly"
  sudo=(sudo)
fi
host="$(rustc -vV | sed -n 's/^host: //p')"
prepare_only=0
if [ "${1:-}" = --prepare ]; then
  prepare_only=1
  shift
fi
triple="${1:-$host}"
[ $# -eq 0 ] || shift
counted="$(counted_target "$triple")" || die "second userland: $triple has no counted build"
leg="$counted@qemu"
profile="$(suite_profile)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
here="$target_dir/ipc-matrix/$leg/$profile"
[ "$prepare_only" = 1 ] || [ -d "$here/cells" ] ||
  die "second userland: no count pass results at $here (run scripts/count-pass.sh $triple first)"

suite=trixie
userland="$target_dir/userland/$suite"
# What the userland needs to run the count pass: the pinned QEMU's libraries (glib),
# `ip` for the second host's cells, python3 for the Python peer (minbase has the shell
# tools of the scripts).
packages=libglib2.0-0t64,iproute2,python3
if [ ! -f "$userland/.made" ] || [ "$(cat "$userland/.made")" != "$packages" ]; then
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap ||
    die "debootstrap is missing and apt-get could not install it"
  keyring=()
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
    apt_install debian-archive-keyring || true
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
    keyring=(--keyring /usr/share/keyrings/debian-archive-keyring.gpg)
  say "debootstrap $suite into $userland (once)"
  "${sudo[@]}" rm -rf "$userland"
  mkdir -p "$(dirname "$userland")"
  "${sudo[@]}" debootstrap --variant=minbase "${keyring[@]}" --include="$packages" \
    "$suite" "$userland" http://deb.debian.org/debian >"$target_dir/userland/$suite.log" 2>&1 ||
    { tail -n 20 "$target_dir/userland/$suite.log" >&2; die "debootstrap $suite failed (log: $target_dir/userland/$suite.log)"; }
  printf '%s\n' "$packages" | "${sudo[@]}" tee "$userland/.made" >/dev/null
fi
[ "$prepare_only" = 0 ] || exit 0
say "second userland: $(sed -n 's/^PRETTY_NAME=//p' "$userland/etc/os-release" | tr -d '"'), $(ls "$userland"/usr/lib/*-linux-gnu/libc.so.6 >/dev/null 2>&1 && "${sudo[@]}" chroot "$userland" ldd --version 2>/dev/null | head -n1)"

# The count pass's environment as this machine has it, so that cargo in there finds the
# counted build fresh: the zig wrappers' settings (their paths are never run: nothing
# compiles) and the toolchain's folders.
zig_env "$counted"
if [ $# -eq 0 ]; then
  ids="$(ipc_matrix report --results "$target_dir/ipc-matrix" --leg "$leg" \
    --profile "$profile" --gating-cells)" ||
    die "second userland: could not tell which cells of $leg gate (above)"
  gating=()
  [ -z "$ids" ] || mapfile -t gating <<<"$ids"
  if [ "${#gating[@]}" -eq 0 ]; then
    say "second userland: no cell of $leg gates (no baseline of it?): nothing to count again"
    exit 0
  fi
  filter="test(=${gating[0]})"
  for id in "${gating[@]:1}"; do filter+=" | test(=$id)"; done
  set -- -E "$filter"
  say "second userland: the ${#gating[@]} cells of $leg whose counts gate"
fi
cargo_home="${CARGO_HOME:-$HOME/.cargo}" rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
there="$target_dir/ipc-matrix/second-userland"
rm -rf "${there:?}/$leg"
mkdir -p "$there"
binds=("$root" "$cargo_home" "$rustup_home" "$HOME/.cache/cargo-zigbuild")
# cargo-nextest, wherever it was installed (cargo's bin folder, or /usr/local/bin).
nextest="$(command -v cargo-nextest)" || die "cargo-nextest is not in PATH"
binds+=("$nextest")
[ "$target_dir" = "$root/target" ] || binds+=("$target_dir")
say "count pass of $triple in the second userland (results: $there/$leg)"
status=0
# The same binaries must run in there: a build in there would mean its environment
# differs from the build's out here (and would fail, zig's Python being this one's).
built() { stat -c '%n %Y' "$target_dir/$counted/debug/deps/"matrix-* 2>/dev/null | sort; }
before="$(built)"
pass=(HOME="$HOME" PATH="$cargo_home/bin:$(dirname "$nextest"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" TERM=dumb
  CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" IPC_MATRIX_OUT="$there"
  IPC_MATRIX_PROFILE="$profile" IPC_MATRIX_COUNT_PASS_PREPARED=1)
[ -z "${CARGO_TARGET_DIR:-}" ] || pass+=(CARGO_TARGET_DIR="$CARGO_TARGET_DIR")
# What zig_env set for the counted build out here (its compilers, its linker, the flags
# that keep paths out of it), so that the build in there finds nothing to do.
while IFS= read -r -d '' line; do
  case "$line" in
    AR_*musl=* | BINDGEN_EXTRA_CLANG_ARGS_*musl=* | CARGO_TARGET_*MUSL_LINKER=* | \
      CARGO_ZIGBUILD_* | IPC_MATRIX_ZIG=* | CC_*musl=* | CMAKE_TOOLCHAIN_FILE_*musl=* | CXX_*musl=* | RANLIB_*musl=* | \
      CARGO_TARGET_*MUSL_RUSTFLAGS=* | CFLAGS_*musl=* | CXXFLAGS_*musl=*)
      pass+=("$line") ;;
  esac
done < <(env -0)
# shellcheck disable=SC2016 # expanded inside the namespace
"${sudo[@]}" env -i "${pass[@]}" unshare --mount --propagation private bash -euo pipefail -c '
    userland="$1" root="$2"; shift 2
    # Its root a mount point of its own: `ip netns` makes / a slave mount, which a plain
    # folder cannot be.
    mount --bind "$userland" "$userland"
    for dir in /proc /sys /dev; do mount --rbind "$dir" "$userland$dir"; done
    binds=()
    while [ "$1" != -- ]; do binds+=("$1"); shift; done
    shift
    for path in "${binds[@]}"; do
      if [ -d "$path" ]; then
        mkdir -p "$userland$path"
      elif [ -f "$path" ]; then
        mkdir -p "$(dirname "$userland$path")" && touch "$userland$path"
      else
        continue
      fi
      mount --rbind "$path" "$userland$path"
    done
    exec chroot "$userland" bash -c "cd \"\$0\" && exec scripts/count-pass.sh \"\$@\"" "$root" "$@"
  ' second-userland "$userland" "$root" "${binds[@]}" -- "$triple" "$@" || status=$?
if [ "$(built)" != "$before" ]; then
  say "the count pass in the second userland built the counted binary again: the environment given to it (above) differs from the one its build out here had"
  first_failure 1 "the second userland built the counted binary again"
fi
# The results in there were written by root of the namespace: the report reads them here.
# Judged against the committed baselines; then this machine's run, cell by cell, against
# them: a cell that gates here and was not counted there fails too.
ipc_matrix report --results "$there" --leg "$leg" --profile "$profile" --strict-instructions ||
  first_failure $?
ipc_matrix report --results "$target_dir/ipc-matrix" --leg "$leg" --profile "$profile" \
  --same-counts-as "$there/$leg/$profile" || first_failure $?
exit "$status"
