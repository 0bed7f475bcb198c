//! `count-pass <triple> [nextest arguments]`: the instruction-count pass of a leg. Its
//! architecture's cells, built as the counted build (static against musl, C and C++
//! compiled by zig: [`ipc_matrix_spec::counted_target`]) and run under the pinned QEMU
//! with the counting plugin and a fixed emulated CPU model (scripts/qemu-run). Nothing
//! it counts comes from the host: not its C library, not its compiler, not its emulator.
//! Its results form the leg `<arch>-unknown-linux-musl@qemu`, judged on guest
//! instructions per round trip; timings stay with the leg's own pass.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{exit_code, run};
use crate::{peers, pinned_qemu, setup, zig};
use anyhow::{Context, Result};
use std::process::Command;

/// Cells only, unless told otherwise: the fault tests prove checks, which the leg's own
/// pass already did.
pub const DEFAULT_FILTER: [&str; 2] = ["-E", "not test(/^fault::/)"];

/// The counted build's cells as nextest builds and runs them, for `counted` (a
/// `*-unknown-linux-musl` triple) with nextest's profile of that architecture's count
/// passes (its JUnit file and run store its own: target/nextest/count-<arch>/). The
/// workspace is selected, as nextest's own builds select it, so that a later run with
/// other arguments finds the same units built.
pub fn nextest_args(counted: &str) -> Vec<String> {
    let arch = counted.split('-').next().unwrap_or(counted);
    [
        "nextest",
        "run",
        "--locked",
        "--workspace",
        "--test",
        "matrix",
        "--profile",
        &format!("count-{arch}"),
        "--target",
        counted,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// What counts guest instructions, both built for this machine: the QEMU plugin
/// (crates/qemu-count) and the pinned QEMU that loads it.
pub fn ensure_count_plugin(repo: &Repo) -> Result<()> {
    say("cargo build --release -p ipc-matrix-qemu-count (the instruction-count plugin)");
    run(Command::new("cargo").args([
        "build",
        "--locked",
        "--quiet",
        "--release",
        "-p",
        "ipc-matrix-qemu-count",
    ]))?;
    pinned_qemu::ensure(repo).map(drop)
}

/// Runs the count pass of `triple`; nextest's exit status. Prepared by the caller when
/// `IPC_MATRIX_COUNT_PASS_PREPARED=1` (the second userland: the build, the plugin, the
/// pinned QEMU and zig's settings come from the machine around it), else here.
pub fn count_pass(repo: &Repo, triple: &str, nextest: &[String]) -> Result<u8> {
    let counted = ipc_matrix_spec::counted_target(triple).with_context(|| {
        format!(
            "count pass: {triple} has no counted build (the pinned QEMU covers x86_64 and aarch64)"
        )
    })?;
    let mut env = Vec::new();
    if std::env::var("IPC_MATRIX_COUNT_PASS_PREPARED").as_deref() != Ok("1") {
        setup::setup_target(repo, counted)?;
        ensure_count_plugin(repo)?;
        // The reference C peer its echo-c-peer cells start, static like them.
        peers::build(repo, Some(counted))?;
        env = zig::env(repo, &[counted.to_owned()])?;
    }
    say(&format!(
        "count pass: the cells of {triple}, as {counted} under the pinned QEMU (leg {counted}@qemu)"
    ));
    let filter: Vec<String> = if nextest.is_empty() {
        DEFAULT_FILTER.map(str::to_owned).to_vec()
    } else {
        nextest.to_vec()
    };
    let status = Command::new("cargo")
        .args(nextest_args(counted))
        .args(&filter)
        .envs(env)
        .env("IPC_MATRIX_EMULATE_NATIVE", "1")
        .env("IPC_MATRIX_COUNT", "on")
        .status()
        .context("cargo nextest")?;
    Ok(exit_code(status))
}
