//! `ipc-matrix run --count`: the run again, this same binary under QEMU user mode with the
//! instruction-counting plugin (`crates/qemu-count`) and a fixed emulated CPU model, as
//! `scripts/qemu-run` runs the count pass, so a repository without this one's scripts
//! counts guest instructions per round trip too. Its results are the leg
//! `<triple>@qemu`. Everything a count needs is checked before the emulator starts: the
//! emulator is there, answers in time and loads plugins (one built without plugin support
//! would run every cell uncounted, without a word), and the plugin is there. This process
//! stays the emulator's parent: the counted run says that it started and how it ended,
//! and only that is this command's status (an emulator's own status never is).
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
use std::time::{Duration, Instant};

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

/// Set in the counted run to the file where it says that it started, and how it ended.
const STATUS_ENV: &str = "IPC_MATRIX_COUNTED_STATUS";

/// How long an emulator may take to answer `-h` or `--version`.
const ASK_WITHIN: Duration = Duration::from_secs(10);

/// How long the emulator may take to end once the counted run under it has said that it
/// ended (its plugin writes its last counts then).
const ENDED_WITHIN: Duration = Duration::from_secs(30);

/// How long the emulator may take to start the run under it (a large binary, under QEMU,
/// on a loaded machine, takes seconds).
const START_WITHIN: Duration = ipc_matrix_transport::START_LIMIT;

/// What `--count` was given.
pub struct CountOptions {
    pub qemu: Option<PathBuf>,
    pub plugin: Option<PathBuf>,
}

/// Where `run --count` goes on.
pub enum Counted {
    /// This process runs under the counting emulator: the run goes on here, and says
    /// how it ended through [`Started::finish`].
    Here(Started),
    /// The run ran under the emulator, in a child; its exit status, checked.
    Done(u8),
}

/// The counted run's word to the process that started it.
pub struct Started {
    file: Option<PathBuf>,
}

impl Started {
    /// Says that the run ended with `code`, just before it does.
    pub fn finish(self, code: u8) {
        if let Some(file) = self.file {
            let _ = append(&file, &format!("exit {code}\n"));
        }
    }
}

fn append(file: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)?
        .write_all(line.as_bytes())
}

/// For `run --count`: in the process that runs under the counting emulator, the run goes
/// on here ([`Counted::Here`]); elsewhere the run is started again there, as a child of
/// this process, and its status is this one's ([`Counted::Done`]) only when the run said
/// it started and how it ended: an emulator that ends without running it, or that ends
/// it, never decides this command's status.
pub fn start(options: &CountOptions, out: &Path) -> Result<Counted> {
    if std::env::var_os(RUNNER_ENV).is_some_and(|v| v == "qemu") {
        if std::env::var_os("QEMU_PLUGIN").is_some() {
            let file = std::env::var_os(STATUS_ENV).map(PathBuf::from);
            // Not passed on to the cells' peers.
            std::env::remove_var(STATUS_ENV);
            if let Some(file) = &file {
                append(file, "started\n")
                    .with_context(|| format!("--count: telling {}", file.display()))?;
            }
            return Ok(Counted::Here(Started { file }));
        }
        bail!("--count: this run is under QEMU already, with no counting plugin (QEMU_PLUGIN); run it outside the emulator, or through scripts/qemu-run, which counts");
    }
    run_counted(options, out).map(Counted::Done)
}

/// Runs this run again under the counting emulator, in a child, and judges how it ended.
fn run_counted(options: &CountOptions, out: &Path) -> Result<u8> {
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
            "--count: the counting plugin {} is not there (or is not a file)",
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
    let help = ask(&qemu, "-h")?;
    let version = ask(&qemu, "--version")
        .ok()
        .and_then(|o| o.lines().next().map(str::to_owned))
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| format!("{} (its version unknown)", qemu.display()));
    let loads_plugins = help.lines().any(|l| l.starts_with("-plugin"));
    if !loads_plugins {
        bail!("--count: {version} ({}) cannot load plugins (built without plugin support), so it cannot count instructions; use a QEMU that loads plugins (--qemu FILE)", qemu.display());
    }
    let counts = std::path::absolute(out.join("counts"))
        .with_context(|| format!("--count: {}", out.display()))?;
    std::fs::create_dir_all(&counts)
        .with_context(|| format!("--count: creating {}", counts.display()))?;
    // A count file vouches that the plugin runs in the process of its pid: one left by a
    // process that is gone must not vouch for a new process given the same pid.
    remove_count_files_of_the_dead(&counts);
    let exe = std::env::current_exe().context("--count: this binary's path")?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let libraries = guest_libraries()?;
    let said = ipc_matrix_transport::PrivateDir::create()
        .context("--count: making a folder for the counted run's status")?;
    let status_file = said.path().join("status");
    std::fs::write(&status_file, "").with_context(|| status_file.display().to_string())?;
    let mut command = Command::new(&qemu);
    command
        .arg("-L")
        .arg(&libraries)
        .arg(&exe)
        .args(&args)
        .env("QEMU_CPU", cpu)
        .env("QEMU_LD_PREFIX", &libraries)
        .env("QEMU_PLUGIN", &plugin)
        .env(RUNNER_ENV, "qemu")
        .env(STATUS_ENV, &status_file)
        .env("IPC_MATRIX_QEMU_VERSION", &version)
        .env(
            ipc_matrix_scenario::PEER_RUNNER_ENV,
            format!("{} -L {}", qemu.display(), libraries.display()),
        )
        .env("IPC_MATRIX_COUNT_FILE", counts.join("%p.jsonl"));
    // SAFETY: prctl with integer arguments, between fork and exec: the counted run ends
    // with this process rather than run on unwatched.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("--count: starting {}", qemu.display()))?;
    let emulator = qemu.display().to_string();
    // The emulator knows the file's name.
    let said_lines = || {
        crate::this_binary::read_childs_word(&status_file, 4096, "a counted run's status")
            .unwrap_or_default()
    };
    // Started in time, or stopped.
    let begun = Instant::now();
    loop {
        if said_lines().lines().any(|l| l == "started") {
            break;
        }
        if let Some(status) = child
            .try_wait()
            .context("--count: waiting for the emulator")?
        {
            if said_lines().lines().any(|l| l == "started") {
                break;
            }
            bail!("--count: the emulator {emulator} {} before the run started under it: nothing was counted (is it a QEMU user-mode emulator for {qemu_arch}, and {} its counting plugin? its own message, if any, is above)", ended(status), plugin.display());
        }
        if begun.elapsed() > START_WITHIN {
            let _ = child.kill();
            let _ = child.wait();
            bail!("--count: the emulator {emulator} did not start the run under it in {START_WITHIN:?}, and was stopped: nothing was counted");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The run has its own deadlines, cell by cell; once it has said how it ended, the
    // emulator has ENDED_WITHIN to end too.
    let told = || {
        said_lines()
            .lines()
            .find_map(|l| l.strip_prefix("exit ").and_then(|c| c.parse::<u8>().ok()))
    };
    let mut ended_at: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .context("--count: waiting for the counted run")?
        {
            break status;
        }
        match ended_at {
            None if told().is_some() => ended_at = Some(Instant::now()),
            Some(at) if at.elapsed() > ENDED_WITHIN => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("error: --count: the counted run ended, and the emulator {emulator} did not in {ENDED_WITHIN:?}: it was stopped, and the run failed");
                return Ok(crate::exit_code::CELL_FAILED);
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let told = told();
    match (told, status.code()) {
        (Some(code), Some(ended)) if i32::from(code) == ended => Ok(code),
        (Some(code), _) => {
            eprintln!("error: --count: the counted run ended with status {code}, and then the emulator {emulator} {}: the run is not trusted", ended(status));
            Ok(crate::exit_code::CELL_FAILED)
        }
        (None, _) => {
            eprintln!("error: --count: the emulator {emulator} {} before the counted run under it had finished: what it ran is not trusted, and the run failed", ended(status));
            Ok(crate::exit_code::CELL_FAILED)
        }
    }
}

/// How a process ended, in words.
fn ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (_, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".to_owned(),
    }
}

/// What `qemu <flag>` prints on stdout, within [`ASK_WITHIN`]: an emulator that does not
/// answer is stopped (its process group with it) and refused.
fn ask(qemu: &Path, flag: &str) -> Result<String> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(qemu)
        .arg(flag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .with_context(|| {
            format!(
                "--count: cannot start the emulator {} (install qemu-user, or give --qemu FILE)",
                qemu.display()
            )
        })?;
    let mut stdout = child.stdout.take().expect("piped");
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = Vec::new();
        // At most a screenful of help: an emulator that floods is cut off.
        let _ = (&mut stdout).take(1 << 20).read_to_end(&mut text);
        let _ = send.send(text);
    });
    let stop = |child: &mut std::process::Child| {
        // SAFETY: a signal to the process group this child leads (made above).
        unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = child.wait();
    };
    let status = crate::this_binary::wait_within(&mut child, ASK_WITHIN, Duration::from_millis(5))
        .context("--count: waiting for the emulator")?;
    match status {
        None => {
            stop(&mut child);
            bail!(
                "--count: the emulator {} did not answer `{flag}` in {ASK_WITHIN:?}, and was stopped: give a QEMU user-mode emulator (--qemu FILE)",
                qemu.display()
            )
        }
        Some(_) => match receive.recv_timeout(Duration::from_secs(1)) {
            Ok(text) => Ok(String::from_utf8_lossy(&text).into_owned()),
            // Something it started holds its output open.
            Err(_) => {
                stop(&mut child);
                bail!(
                    "--count: the emulator {} answered `{flag}` and left a process holding its output open: give a QEMU user-mode emulator (--qemu FILE)",
                    qemu.display()
                )
            }
        },
    }
}

/// Removes each `<pid>.jsonl` in `counts` whose process is gone.
fn remove_count_files_of_the_dead(counts: &Path) {
    let Ok(entries) = std::fs::read_dir(counts) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !ipc_matrix_transport::process_alive(pid) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
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
