//! `ipc-matrix run --count`: the run again, this same binary under QEMU user mode with the
//! instruction-counting plugin (`crates/qemu-count`) and a fixed emulated CPU model, as
//! `scripts/qemu-run` runs the count pass, so a repository without this one's scripts
//! counts guest instructions per round trip too. Its results are the leg
//! `<triple>@qemu`. Everything a count needs is checked before the emulator starts: the
//! emulator is there and loads plugins (one built without plugin support would run every
//! cell uncounted, without a word), and the plugin is there.
//!
//! What a count depends on is recorded with each result (the emulator's version, the CPU
//! model, the C library the guest ran): a binary linked against the host's C library is
//! counted with it, and judged against a baseline counted with another only as
//! information.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The emulated CPU model of each architecture (`std::env::consts::ARCH`), with QEMU's
/// name for it: the same as `scripts/qemu-run`'s, so a count means the same either way.
pub const CPU_MODELS: [(&str, &str, &str); 6] = [
    ("x86_64", "x86_64", "Nehalem-v1"),
    ("aarch64", "aarch64", "cortex-a72"),
    ("arm", "arm", "cortex-a15"),
    ("riscv64", "riscv64", "sifive-u54"),
    ("powerpc64", "ppc64le", "power9_v2.0"),
    ("s390x", "s390x", "qemu"),
];

/// The variable that says the process already runs under the emulator: the run is not
/// started again.
const RUNNER_ENV: &str = "IPC_MATRIX_RUNNER";

/// What `--count` was given.
pub struct CountOptions {
    pub qemu: Option<PathBuf>,
    pub plugin: Option<PathBuf>,
}

/// For `run --count`: returns in the process that runs under the counting emulator (the
/// run goes on, counted); elsewhere starts the run again there, in place of this process
/// (its exit status is the run's), and returns only with the reason it could not.
pub fn start(options: &CountOptions, out: &Path) -> Result<()> {
    if std::env::var_os(RUNNER_ENV).is_some_and(|v| v == "qemu") {
        if std::env::var_os("QEMU_PLUGIN").is_some() {
            return Ok(());
        }
        bail!("--count: this run is under QEMU already, with no counting plugin (QEMU_PLUGIN); run it outside the emulator, or through scripts/qemu-run, which counts");
    }
    match exec_counted(options, out)? {}
}

/// Starts this run again under the counting emulator, in place of this process.
fn exec_counted(options: &CountOptions, out: &Path) -> Result<std::convert::Infallible> {
    let arch = std::env::consts::ARCH;
    let Some(&(_, qemu_arch, cpu)) = CPU_MODELS.iter().find(|m| m.0 == arch) else {
        bail!("--count: no emulated CPU model is fixed for {arch}, so its counts would not mean the same on every machine");
    };
    let plugin = options
        .plugin
        .clone()
        .or_else(|| std::env::var_os("IPC_MATRIX_COUNT_PLUGIN").map(PathBuf::from))
        .context("--count needs the counting plugin: --count-plugin FILE or IPC_MATRIX_COUNT_PLUGIN (in a clone of ipc-matrix, `cargo build --release -p ipc-matrix-qemu-count` builds target/release/libipc_matrix_qemu_count.so)")?;
    if !plugin.is_file() {
        bail!(
            "--count: the counting plugin {} is not there",
            plugin.display()
        );
    }
    let plugin =
        std::fs::canonicalize(&plugin).with_context(|| format!("--count: {}", plugin.display()))?;
    let qemu = options
        .qemu
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("qemu-{qemu_arch}")));
    // The peer is started through the same emulator, its command split at whitespace.
    if qemu.to_string_lossy().contains(char::is_whitespace) {
        bail!(
            "--count: the emulator's path {} has whitespace; give one without",
            qemu.display()
        );
    }
    let help = Command::new(&qemu).arg("-h").output().with_context(|| {
        format!(
            "--count: cannot start the emulator {} (install qemu-user, or give --qemu FILE)",
            qemu.display()
        )
    })?;
    let version = Command::new(&qemu)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.lines().next().map(str::to_owned))
        .unwrap_or_else(|| format!("{} (its version unknown)", qemu.display()));
    let loads_plugins = String::from_utf8_lossy(&help.stdout)
        .lines()
        .any(|l| l.starts_with("-plugin"));
    if !loads_plugins {
        bail!("--count: {version} ({}) cannot load plugins (built without plugin support), so it cannot count instructions; use a QEMU that loads plugins (--qemu FILE)", qemu.display());
    }
    let counts = std::path::absolute(out.join("counts"))
        .with_context(|| format!("--count: {}", out.display()))?;
    std::fs::create_dir_all(&counts)
        .with_context(|| format!("--count: creating {}", counts.display()))?;
    // exec keeps this pid: an earlier process's file of the same pid must not vouch
    // that the plugin runs in this one.
    let _ = std::fs::remove_file(counts.join(format!("{}.jsonl", std::process::id())));
    let exe = std::env::current_exe().context("--count: this binary's path")?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let libraries = guest_libraries()?;
    let error = Command::new(&qemu)
        .arg("-L")
        .arg(&libraries)
        .arg(&exe)
        .args(&args)
        .env("QEMU_CPU", cpu)
        .env("QEMU_LD_PREFIX", &libraries)
        .env("QEMU_PLUGIN", &plugin)
        .env(RUNNER_ENV, "qemu")
        .env("IPC_MATRIX_QEMU_VERSION", &version)
        .env(
            ipc_matrix_scenario::PEER_RUNNER_ENV,
            format!("{} -L {}", qemu.display(), libraries.display()),
        )
        .env("IPC_MATRIX_COUNT_FILE", counts.join("%p.jsonl"))
        .exec();
    Err(error).with_context(|| format!("--count: starting {}", qemu.display()))
}

/// Where the counted processes' dynamic loader and libraries are found: the folder
/// `QEMU_LD_PREFIX` names when this binary was started under QEMU with one (a binary
/// built for another CPU, whose libraries live in a sysroot such as
/// `/usr/aarch64-linux-gnu`), else `/` (this machine's own, or none for a static build).
fn guest_libraries() -> Result<PathBuf> {
    let Some(prefix) = std::env::var_os("QEMU_LD_PREFIX").filter(|p| !p.is_empty()) else {
        return Ok(PathBuf::from("/"));
    };
    let prefix = PathBuf::from(prefix);
    if !prefix.is_dir() {
        bail!(
            "--count: QEMU_LD_PREFIX names {}, which is not a folder",
            prefix.display()
        );
    }
    // The peer's command is split at whitespace, like the emulator's.
    if prefix.to_string_lossy().contains(char::is_whitespace) {
        bail!(
            "--count: QEMU_LD_PREFIX {} has whitespace; give one without",
            prefix.display()
        );
    }
    Ok(prefix)
}
