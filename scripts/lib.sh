# shellcheck shell=bash
# Shared helpers of the scripts in this folder; sourced, not run.
set -euo pipefail

# Each line says how long the outermost script has run (m:ss), so a log shows where the
# time went.
export SCRIPT_STARTED_AT="${SCRIPT_STARTED_AT:-$(date +%s)}"
say() {
  local t=$(($(date +%s) - SCRIPT_STARTED_AT))
  printf '==> [%d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*" >&2
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Found once, as this file is sourced: a script may change folders afterwards.
LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root() { cd "$LIB_DIR/.." && pwd; }

# Rust through rustup, with the toolchain rust-toolchain.toml pins and its components
# (clippy, rustfmt). On a fresh Debian/Ubuntu machine rustup comes first, without a
# default toolchain: the pinned one is the only one this repository builds with.
# Run from the repository root (where rust-toolchain.toml is).
ensure_rust() {
  if ! command -v rustup >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/rustup" ]; then
      export PATH="$HOME/.cargo/bin:$PATH"
    elif command -v cargo >/dev/null 2>&1; then
      say "cargo without rustup: rust-toolchain.toml is not applied; building with $(cargo --version)"
      return
    else
      command -v curl >/dev/null 2>&1 || die "cargo is missing and so is curl; install curl (apt-get install curl) or Rust (https://rustup.rs)"
      say "installing rustup (the toolchain itself is the one rust-toolchain.toml pins)"
      curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none
      export PATH="$HOME/.cargo/bin:$PATH"
    fi
  fi
  # rustup would install the pinned toolchain on the first cargo call (not its missing
  # components, and nothing with RUSTUP_AUTO_INSTALL=0); asked for here, both come
  # either way. `rustup toolchain install` alone reads rust-toolchain.toml (rustup 1.28+).
  if ! rustup show active-toolchain >/dev/null 2>&1 ||
    ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
    say "installing the toolchain rust-toolchain.toml pins, with clippy and rustfmt"
    rustup toolchain install ||
      die "rustup toolchain install failed (a rustup older than 1.28 needs: rustup self update)"
  fi
}

# cargo-nextest, if missing: a prebuilt binary is not assumed, so it is built once.
ensure_nextest() {
  if cargo nextest --version >/dev/null 2>&1; then return; fi
  say "installing cargo-nextest (cargo install --locked)"
  cargo install --locked cargo-nextest
}

# The cargo target the suite was built for: IPC_MATRIX_TARGET where it ran with
# `--target` (the GitHub legs, scripts/test-target.sh), else none: the host build of
# scripts/test.sh. Sets the array `suite_target` to the cargo arguments.
suite_target_args() {
  suite_target=()
  if [ -n "${IPC_MATRIX_TARGET:-}" ]; then suite_target=(--target "$IPC_MATRIX_TARGET"); fi
}

# The runner .cargo/config.toml names for a target (or CARGO_TARGET_<TRIPLE>_RUNNER), as
# words on one line; nothing for a target without one (run natively).
cargo_runner() { xtask runner "$1"; }

# The ipc-matrix CLI of the suite's own build, so nothing compiles twice. `cargo test
# --no-run` with the selection nextest builds (the workspace, the test profile, the
# suite's --target) finds every unit fresh after the suite; the binary it holds then
# runs, through the target's runner (QEMU for an emulated target: the report is the
# same, only slower). `cargo run -p ipc-matrix` would compile again: the whole graph
# into another folder without the suite's --target, and even with it the units whose
# features differ when only this package is selected (rustix, crossterm, comfy-table,
# the CLI). The counting plugin stays out of the report's process. It runs in the current
# folder (a user's copy, too); cargo runs in the repository, under its pinned toolchain.
ipc_matrix() {
  local suite_target runner=() root bin
  root="$(repo_root)"
  bin="${CARGO_TARGET_DIR:-$root/target}"
  suite_target_args
  if [ -n "${IPC_MATRIX_TARGET:-}" ]; then
    bin="$bin/$IPC_MATRIX_TARGET"
    read -r -a runner <<<"$(cargo_runner "$IPC_MATRIX_TARGET")"
  fi
  local here="$PWD"
  cd "$root"
  cargo test --no-run --locked --quiet --workspace "${suite_target[@]}"
  cd "$here"
  IPC_MATRIX_COUNT=off "${runner[@]}" "$bin/debug/ipc-matrix" "$@"
}

# A worked example (examples/<name>) as its user has it: copied into a new folder outside
# this repository, the Rust one's dependency on ipc-matrix pointed at this checkout.
# Prints the copy's folder; the caller removes it.
#   copy="$(example_copy rust-stack)"
example_copy() {
  local root copy
  root="$(repo_root)"
  copy="$(mktemp -d "${TMPDIR:-/tmp}/ipc-matrix-$1.XXXXXX")"
  # Not what a build in place left (target/, build/): the user's clone has none. Files
  # stamped now (-m), as a copy is: cargo, which builds in the shared target folder, then
  # sees them newer than what it built from the last copy (elsewhere) and builds again.
  tar -C "$root/examples/$1" --exclude=./target --exclude=./build -cf - . | tar -C "$copy" -xmf -
  if [ -f "$copy/Cargo.toml" ]; then
    sed -i "s|^ipc-matrix = { path = \"../../crates/cli\" }|ipc-matrix = { path = \"$root/crates/cli\" }|" \
      "$copy/Cargo.toml"
    grep -q "path = \"$root/crates/cli\"" "$copy/Cargo.toml" ||
      die "examples/$1/Cargo.toml: its ipc-matrix dependency line moved"
  fi
  printf '%s\n' "$copy"
}

# What counts guest instructions, both built for this machine: the QEMU plugin
# (crates/qemu-count) and the pinned QEMU that loads it (scripts/pinned-qemu.sh, built
# once). scripts/qemu-run counts with them.
ensure_count_plugin() {
  say "cargo build --release -p ipc-matrix-qemu-count (the instruction-count plugin)"
  cargo build --locked --quiet --release -p ipc-matrix-qemu-count
  scripts/pinned-qemu.sh >/dev/null
}

# The repository's tasks in Rust (xtask/: `cargo xtask` from the root), built once into a
# target folder of their own, so that a build of the workspace never waits for theirs.
#   xtask setup-target aarch64-unknown-linux-gnu
xtask() {
  local root target
  root="$(repo_root)"
  target="${CARGO_TARGET_DIR:-$root/target}"
  (cd "$root" && IPC_MATRIX_CARGO_TARGET_DIR="$target" CARGO_TARGET_DIR="$target/xtask" \
    cargo run --quiet --locked --manifest-path xtask/Cargo.toml -- "$@")
}

# The counted build of an architecture: static, against musl, its C and C++ compiled by
# zig, so that nothing it runs comes from the host's C library or compiler. The spec's
# rule (`ipc_matrix_spec::counted_target`, which crates/cli/tests/workflow.rs holds this
# to), kept here because the count pass in the second userland builds nothing.
#   counted_target x86_64-unknown-linux-gnu   -> x86_64-unknown-linux-musl
counted_target() {
  case "$1" in
    x86_64-unknown-linux-* ) printf 'x86_64-unknown-linux-musl\n' ;;
    aarch64-unknown-linux-* ) printf 'aarch64-unknown-linux-musl\n' ;;
    *) return 1 ;;
  esac
}

# Builds the cells of the counted builds given (the count passes' own build, as
# scripts/count-pass.sh selects it) in one cargo run, so that each one's serial tail
# (the last crates, the links) overlaps the other's work.
#   counted_build x86_64-unknown-linux-musl aarch64-unknown-linux-musl
counted_build() {
  local targets=() t
  for t in "$@"; do targets+=(--target "$t"); done
  say "the counted builds: $*"
  (
    zig_env "$@"
    cargo test --no-run --locked --quiet --workspace --test matrix "${targets[@]}"
  )
}

# zig (compiler, linker and C library of the counted builds) and cargo-zigbuild (which
# drives zig for cargo), both pinned, in a virtualenv under target/.
zig_venv() { printf '%s\n' "${CARGO_TARGET_DIR:-$(repo_root)/target}/zig-venv"; }
ensure_zig() { xtask ensure-zig; }

# Exports what `cargo zigbuild --target <triple>...` would set for cargo (each target's
# CC, CXX, AR, RANLIB and linker: zig wrappers), read from cargo-zigbuild itself, so
# that `cargo nextest run --target <triple>` builds exactly as cargo zigbuild does.
zig_env() {
  local venv line targets=() t
  for t in "$@"; do targets+=(--target "$t"); done
  ensure_zig
  venv="$(zig_venv)"
  # Made once, and whole before it is seen: two count passes may ask at once.
  if [ ! -x "$venv/print-env" ]; then
    printf '#!/bin/sh\nexec env -0\n' >"$venv/print-env.$$"
    chmod +x "$venv/print-env.$$"
    mv -f "$venv/print-env.$$" "$venv/print-env"
  fi
  while IFS= read -r -d '' line; do
    case "$line" in
      AR_* | BINDGEN_EXTRA_CLANG_ARGS_* | CARGO_TARGET_*_LINKER=* | CARGO_ZIGBUILD_* | \
        CC_* | CMAKE_TOOLCHAIN_FILE_* | CXX_* | RANLIB_*) export "${line?}" ;;
    esac
  done < <(PATH="$venv/bin:$PATH" CARGO="$venv/print-env" "$venv/bin/cargo-zigbuild" zigbuild "${targets[@]}")
  # The `ar` and `lib` wrappers are cargo-zigbuild itself, which finds zig by these (the
  # cc wrappers set them for themselves); else only a python3 on PATH with ziglang would do.
  export CARGO_ZIGBUILD_ZIG_COMMAND="$venv/bin/python3" CARGO_ZIGBUILD_ZIG_COMMAND_ARGS="-m ziglang"
  # Recorded with each count (its C library is this zig's musl).
  IPC_MATRIX_ZIG="zig $("$venv/bin/python3" -m ziglang version)"
  export IPC_MATRIX_ZIG
  fixed_paths_env "$@"
}

# Where the checkout, its target/ and cargo's home lie must not reach the counted code:
# the paths compiled into it (the dependencies' panic locations, libzmq's assertions) are
# written under fixed names, so any checkout on any machine builds the same bytes (a
# path's length moves every constant after it, and the counts with their alignment).
fixed_paths_env() {
  local root target home t var rust=() c=() from
  # As the compilers see them: with no symbolic link left.
  root="$(realpath -m "$(repo_root)")"
  target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"
  home="$(realpath -m "${CARGO_HOME:-$HOME/.cargo}")"
  local prefixes=("$home=/cargo-home" "$root=/ipc-matrix")
  # A target/ elsewhere than the checkout's (prefixes that overlap are mapped in an order
  # the compilers do not agree on).
  case "$target/" in "$root"/*) ;; *) prefixes+=("$target=/ipc-matrix-target") ;; esac
  for from in "${prefixes[@]}"; do
    case "$from" in
      *[[:space:]]*)
        say "warning: ${from%=*} holds a space, so it stays in the counted build: counts made in this folder may differ from counts made elsewhere"
        continue
        ;;
    esac
    rust+=("--remap-path-prefix=$from")
    c+=("-ffile-prefix-map=$from")
  done
  for t in "$@"; do
    var="$(printf '%s' "$t" | tr 'a-z-' 'A-Z_')"
    export "CARGO_TARGET_${var}_RUSTFLAGS=${rust[*]}"
    var="$(printf '%s' "$t" | tr '-' '_')"
    export "CFLAGS_${var}=${c[*]}" "CXXFLAGS_${var}=${c[*]}"
  done
}

# mdbook, which builds the book (docs/), pinned and built once into target/tools/, without
# its search and server features (the test command builds the book to check it). Prints
# the binary's path.
MDBOOK_VERSION=0.5.4
ensure_mdbook() {
  local root
  root="${CARGO_TARGET_DIR:-$(repo_root)/target}/tools/mdbook-$MDBOOK_VERSION"
  if [ ! -x "$root/bin/mdbook" ]; then
    say "installing mdbook $MDBOOK_VERSION into $root (cargo install --locked, once)"
    cargo install --locked --quiet "mdbook@$MDBOOK_VERSION" --no-default-features --root "$root" >&2
  fi
  printf '%s\n' "$root/bin/mdbook"
}

# The profile the suite ran (the harness reads the same variable).
suite_profile() { printf '%s' "${IPC_MATRIX_PROFILE:-quick}"; }

# Writes report.md, report.html and results.json for each leg given, judged against
# baselines/; a leg without results is skipped with a note. Returns the first failure.
write_reports() {
  local profile leg status=0
  profile="$(suite_profile)"
  for leg in "$@"; do
    if [ -d "target/ipc-matrix/$leg/$profile/cells" ]; then
      say "report: $leg ($profile)"
      # Instruction regressions fail the step where the leg blocks merges (or when asked):
      # counts are deterministic, so they gate on every leg; timings only warn.
      local strict=()
      [ "${STRICT_INSTRUCTIONS:-false}" = true ] && strict=(--strict-instructions)
      ipc_matrix report --profile "$profile" --leg "$leg" "${strict[@]}" ||
        first_failure $? "the report of $leg${strict[*]:+ (${strict[*]})}"
    else
      say "report: $leg has no results for profile $profile (no cell ran); skipped"
    fi
  done
  return "$status"
}

# For steps that must all run: remembers the first non-zero exit status in $status, and
# each failed step (the caller's line, or what the second argument names) in $failures,
# for failure_summary to repeat at the end, where a log's reader (CI shows a log's tail)
# finds it.
#   some_step || first_failure $?
#   some_step || first_failure $? "what it was"
failures=()
first_failure() {
  if [ "${status:-0}" -eq 0 ]; then status=$1; fi
  local what="${2:-}" line file
  read -r line _ file < <(caller 0)
  if [ -z "$what" ]; then
    what="$(sed -n "${line}p" "$file" 2>/dev/null | sed -e 's/^ *//' -e 's/ *|| *first_failure.*$//')"
  fi
  failures+=("exit $1 at ${file#"$(repo_root)/"}:$line: $what")
}

# Repeats every step first_failure saw fail, or says that none did.
failure_summary() {
  if [ "${#failures[@]}" -eq 0 ]; then
    say "every step passed"
    return 0
  fi
  say "${#failures[@]} step(s) failed:"
  local f
  for f in "${failures[@]}"; do printf '    %s\n' "$f" >&2; done
  failed_tests
}

# Names every test that failed in the JUnit files this script's nextest runs wrote (not
# older ones), with the start of its failure (its panic), so that a log's tail says which
# tests and why, not only which step.
failed_tests() {
  local files
  mapfile -t files < <(find "$(repo_root)/target/nextest" -name 'junit-*.xml' \
    -newermt "@$SCRIPT_STARTED_AT" 2>/dev/null | sort)
  [ "${#files[@]}" -gt 0 ] || return 0
  python3 - "${files[@]}" <<'PY' >&2 || true
import sys, xml.etree.ElementTree as tree

def why(case, lines=24, width=600):
    """The failure's panic and what follows it (else its stderr's end), bounded."""
    failed = case.find("failure") if case.find("failure") is not None else case.find("error")
    text = next((t for t in [failed.text, case.findtext("system-err")] if t and "panicked at" in t),
                case.findtext("system-err") or failed.text or failed.get("message") or "")
    at = text.find("panicked at")
    kept = text[at:].splitlines()[:lines] if at >= 0 else text.splitlines()[-lines:]
    return ["      | " + line[:width] for line in kept]

for path in sys.argv[1:]:
    for case in tree.parse(path).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            print(f"    test failed: {case.get('classname')} {case.get('name')} ({path.split('/target/')[-1]})")
            print(*why(case), sep="\n")
PY
}

# Installs Debian/Ubuntu packages with apt (through sudo when not root); fails without apt.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "apt-get install $*"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# protoc and capnp, the reference implementations the interop tests decode with, pyzmq
# on the system's libzmq, the stock ZeroMQ peer, and iproute2 for the second host's
# cells. Without them those tests are listed as ignored, so they are installed where apt
# allows.
ensure_interop_tools() {
  local missing=()
  command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
  command -v capnp >/dev/null 2>&1 || missing+=(capnproto)
  /usr/bin/python3 -c 'import zmq' >/dev/null 2>&1 || missing+=(python3-zmq)
  # The second host's link (`ip`, `tc`) and the test that drops CAP_NET_ADMIN (`setpriv`).
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
  [ "${#missing[@]}" -eq 0 ] && return 0
  apt_install "${missing[@]}" ||
    say "could not install ${missing[*]}: the interop tests that need them are listed as ignored"
}

# Headless Chromium and Python 3 for the browser check of the reports
# (scripts/check-reports.sh): Debian's chromium package where apt exists. Where neither the
# browser nor apt is there, says why the check is skipped and returns 1: never silently.
ensure_browser() {
  local missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  [ "${#missing[@]}" -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    say "skipped: no ${missing[*]} and no apt (the reports are not checked in a browser)"
    return 1
  fi
  apt_install "${missing[@]}" && return 0
  # Ubuntu, for one, ships Chromium only as a snap, which apt cannot install here.
  say "skipped: apt-get could not install ${missing[*]} (the reports are not checked in a browser)"
  return 1
}
