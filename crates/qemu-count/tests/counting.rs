//! The plugin against the demo workload (`ipc_matrix_count_window::demo`) under QEMU
//! user mode: every window is reported as documented, the count scales with the work
//! (twice the loop, twice the instructions), work outside windows and other threads'
//! work is not counted, and three runs give the same counts.
//!
//! The host guest is this test binary itself, started again under `qemu-<host arch>`
//! with `QEMU_COUNT_GUEST` set. Cross guests are the `count-demo` example built for
//! their target (`scripts/count-demo.sh` builds them and runs this test); a missing
//! example, QEMU or sysroot lists that guest as ignored, never passed silently. Under
//! emulation (the aarch64 leg of `scripts/test.sh`) every trial is ignored: the plugin
//! built there is for the wrong architecture.

use ipc_matrix_count_window::{demo, parse_records, End, Record};
use libtest_mimic::{Arguments, Failed, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Set (to "iterations,threads") when this binary runs as the guest.
const GUEST_ENV: &str = "QEMU_COUNT_GUEST";
const ITERATIONS: u64 = 100_000;
const THREADS: usize = 4;
const RUNS: usize = 3;
const PLUGIN_FILE: &str = "libipc_matrix_qemu_count.so";

/// A guest architecture: the Rust arch name, its target triple, QEMU's name for it, the
/// sysroot (`-L`) and the fixed CPU model (see the plugin's crate docs).
struct Arch {
    arch: &'static str,
    triple: &'static str,
    qemu: &'static str,
    sysroot: &'static str,
    cpu: &'static str,
}

const ARCHES: &[Arch] = &[
    Arch {
        arch: "x86_64",
        triple: "x86_64-unknown-linux-gnu",
        qemu: "x86_64",
        sysroot: "/",
        cpu: "Nehalem-v1",
    },
    Arch {
        arch: "aarch64",
        triple: "aarch64-unknown-linux-gnu",
        qemu: "aarch64",
        sysroot: "/usr/aarch64-linux-gnu",
        cpu: "cortex-a72",
    },
    Arch {
        arch: "s390x",
        triple: "s390x-unknown-linux-gnu",
        qemu: "s390x",
        sysroot: "/usr/s390x-linux-gnu",
        cpu: "qemu",
    },
    Arch {
        arch: "arm",
        triple: "armv7-unknown-linux-gnueabihf",
        qemu: "arm",
        sysroot: "/usr/arm-linux-gnueabihf",
        cpu: "cortex-a15",
    },
    Arch {
        arch: "riscv64",
        triple: "riscv64gc-unknown-linux-gnu",
        qemu: "riscv64",
        sysroot: "/usr/riscv64-linux-gnu",
        cpu: "sifive-u54",
    },
    Arch {
        arch: "powerpc64",
        triple: "powerpc64le-unknown-linux-gnu",
        qemu: "ppc64le",
        sysroot: "/usr/powerpc64le-linux-gnu",
        cpu: "power9_v2.0",
    },
];

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var(GUEST_ENV) {
        let (iterations, threads) = spec.split_once(',').expect("iterations,threads");
        demo::run(iterations.parse().unwrap(), threads.parse().unwrap());
        return ExitCode::SUCCESS;
    }
    let args = Arguments::from_args();
    let emulated = std::env::var("IPC_MATRIX_RUNNER").is_ok_and(|r| r == "qemu");
    let plugin = plugin_path();
    let exe = std::env::current_exe().expect("own path");
    let mut trials = Vec::new();
    for arch in ARCHES {
        let host = arch.arch == std::env::consts::ARCH;
        let guest = if host {
            exe.clone()
        } else {
            target_root(&exe)
                .join(arch.triple)
                .join("release/examples/count-demo")
        };
        let qemu = format!("/usr/bin/qemu-{}", arch.qemu);
        let missing = if emulated {
            Some("runs on the host only".to_string())
        } else if plugin.is_none() {
            Some(format!("needs {PLUGIN_FILE}"))
        } else if !Path::new(&qemu).exists() {
            Some(format!("needs {qemu}"))
        } else if !Path::new(arch.sysroot).is_dir() {
            Some(format!("needs {}", arch.sysroot))
        } else if !guest.exists() {
            Some(format!("needs count-demo for {}", arch.triple))
        } else {
            None
        };
        let plugin = plugin.clone().unwrap_or_default();
        let trial = Trial::test(format!("count::{}", arch.arch), move || {
            check_guest(arch, &qemu, &plugin, &guest, host)
        });
        trials.push(match missing {
            Some(kind) => trial.with_ignored_flag(true).with_kind(kind),
            None => trial,
        });
    }
    libtest_mimic::run(&args, trials).exit_code()
}

/// `$QEMU_COUNT_PLUGIN`, else the plugin cargo built next to this test
/// (`<target>/<profile>/deps/counting-*` and `<target>/<profile>/libipc_matrix_qemu_count.so`).
fn plugin_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("QEMU_COUNT_PLUGIN") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.join(PLUGIN_FILE), deps.parent()?.join(PLUGIN_FILE)]
        .into_iter()
        .find(|p| p.exists())
}

/// `<target>` of `<target>/<profile>/deps/this-test`.
fn target_root(exe: &Path) -> PathBuf {
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Runs the guest under the plugin once; returns its records.
fn run_once(
    arch: &Arch,
    qemu: &str,
    plugin: &Path,
    guest: &Path,
    host: bool,
    dir: &Path,
) -> Result<Vec<Record>, Failed> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut command = Command::new(qemu);
    command
        .args(["-L", arch.sysroot, "-cpu", arch.cpu, "-plugin"])
        .arg(format!(
            "{},out={}/counts.%p.jsonl",
            plugin.display(),
            dir.display()
        ))
        .arg(guest);
    guest_args(&mut command, host);
    let output = command.output().map_err(|e| format!("{qemu}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{qemu} {}: {}; stderr: {}",
            guest.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    // `%p` became QEMU's pid: exactly one file.
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if files.len() != 1 {
        return Err(format!(
            "expected one counts.<pid>.jsonl in {}, found {files:?}",
            dir.display()
        )
        .into());
    }
    output_pid(&files)?;
    let text = std::fs::read_to_string(&files[0]).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(parse_records(&text))
}

/// The pid part of the only file's name, checked to be a number.
fn output_pid(files: &[PathBuf]) -> Result<u32, Failed> {
    let name = files
        .first()
        .and_then(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_prefix("counts.")
        .and_then(|n| n.strip_suffix(".jsonl"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("output file {name:?} is not counts.<pid>.jsonl").into())
}

fn guest_args(command: &mut Command, host: bool) {
    if host {
        command.env(GUEST_ENV, format!("{ITERATIONS},{THREADS}"));
    } else {
        command.args([ITERATIONS.to_string(), THREADS.to_string()]);
    }
}

/// The one record of `label` with `end`.
fn one(records: &[Record], label: u64, end: End) -> Result<&Record, Failed> {
    let found: Vec<&Record> = records
        .iter()
        .filter(|r| r.label == label && r.end == end)
        .collect();
    match found.as_slice() {
        [r] => Ok(r),
        _ => Err(format!("label {label}: expected one {end:?} record, found {found:?}").into()),
    }
}

fn insns(records: &[Record], label: u64, end: End) -> Result<u64, Failed> {
    one(records, label, end)?
        .insns
        .ok_or_else(|| format!("label {label}: no count").into())
}

fn close_to(what: &str, actual: f64, expected: f64, tolerance: f64) -> Result<(), Failed> {
    if (actual / expected - 1.0).abs() <= tolerance {
        Ok(())
    } else {
        Err(format!("{what}: {actual:.0}, expected {expected:.0} within {tolerance}").into())
    }
}

/// Checks one run's records against the workload.
fn check_run(records: &[Record]) -> Result<(), Failed> {
    let one_ = insns(records, demo::ONE, End::Close)? as f64;
    let two = insns(records, demo::TWO, End::Close)? as f64;
    let empty = insns(records, demo::EMPTY, End::Close)? as f64;
    let main_tid = one(records, demo::ONE, End::Close)?.tid;
    // The loop alone: twice the iterations, twice the instructions.
    close_to(
        "loop x2 over loop x1",
        (two - empty) / (one_ - empty),
        2.0,
        0.001,
    )?;
    // Ten times the work ran outside before each window: counted, it would dwarf this.
    close_to(
        "window x1 vs the extra of window x2",
        one_ - empty,
        two - one_,
        0.01,
    )?;
    close_to(
        "a window with a 64-bit label",
        insns(records, demo::WIDE, End::Close)? as f64,
        empty,
        0.0,
    )?;
    if empty > 1000.0 {
        return Err(format!("an empty window counted {empty} instructions").into());
    }
    // One window per thread, each counting only its own thread's loop.
    let workers: Vec<&Record> = records
        .iter()
        .filter(|r| r.label == demo::PER_THREAD)
        .collect();
    let mut tids: Vec<u32> = workers.iter().map(|r| r.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    if workers.len() != THREADS || tids.len() != THREADS || tids.contains(&main_tid) {
        return Err(
            format!("expected one window in each of {THREADS} threads: {workers:?}").into(),
        );
    }
    for w in &workers {
        if w.end != End::Close {
            return Err(format!("worker window not closed: {w:?}").into());
        }
        close_to("a worker's window", w.insns.unwrap_or(0) as f64, one_, 0.01)?;
    }
    close_to(
        "window before its reopen",
        insns(records, demo::REOPENED, End::Reopen)? as f64,
        one_,
        0.01,
    )?;
    close_to(
        "window after its reopen",
        insns(records, demo::REOPENED, End::Close)? as f64,
        one_,
        0.01,
    )?;
    if one(records, demo::UNMATCHED, End::CloseWithoutOpen)?
        .insns
        .is_some()
    {
        return Err("a close without open has a count".into());
    }
    let exited = one(records, demo::THREAD_EXIT, End::ThreadExit)?;
    if exited.tid == main_tid || (exited.insns.unwrap_or(0) as f64) < one_ - empty {
        return Err(format!("thread exit inside a window: {exited:?}").into());
    }
    let inner = insns(records, demo::INNER, End::Close)? as f64;
    close_to("inner window", inner, one_, 0.01)?;
    close_to(
        "outer window (inner + another loop)",
        insns(records, demo::OUTER, End::Close)? as f64,
        2.0 * one_,
        0.01,
    )?;
    close_to(
        "a window with paused stretches",
        insns(records, demo::PAUSED, End::Close)? as f64,
        one_,
        0.01,
    )?;
    let last = one(records, demo::PROCESS_EXIT, End::ProcessExit)?;
    if last.tid != main_tid || (last.insns.unwrap_or(0) as f64) < one_ - empty {
        return Err(format!("process exit inside a window: {last:?}").into());
    }
    // The plugin's first record says that it runs in this process, and with what API.
    let loaded = records.first().filter(|r| r.end == End::Loaded);
    if loaded.is_none_or(|r| r.pid != last.pid || r.plugin_api.is_none()) {
        return Err(format!("no loaded record first: {records:?}").into());
    }
    let expected = 1 + 4 + THREADS + 2 + 1 + 1 + 2 + 1 + 1;
    if records.len() != expected {
        return Err(format!(
            "expected {expected} records, found {}: {records:?}",
            records.len()
        )
        .into());
    }
    Ok(())
}

/// Runs the guest [`RUNS`] times: every run checked, and the counts the same in all.
fn check_guest(
    arch: &Arch,
    qemu: &str,
    plugin: &Path,
    guest: &Path,
    host: bool,
) -> Result<(), Failed> {
    let base = std::env::temp_dir().join(format!(
        "qemu-count-test-{}-{}",
        std::process::id(),
        arch.arch
    ));
    if host {
        // Without the plugin the markers are harmless: natively and under plain QEMU.
        let mut native = Command::new(guest);
        guest_args(&mut native, host);
        let mut plain = Command::new(qemu);
        plain
            .args(["-L", arch.sysroot, "-cpu", arch.cpu])
            .arg(guest);
        guest_args(&mut plain, host);
        for mut command in [native, plain] {
            let status = command.status().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(format!("{command:?} without the plugin: {status}").into());
            }
        }
    }
    // (label, end) -> the counts of each run, in order.
    let mut counts: BTreeMap<(u64, String), Vec<Vec<u64>>> = BTreeMap::new();
    for run in 0..RUNS {
        let records = run_once(arch, qemu, plugin, guest, host, &base.join(run.to_string()))?;
        check_run(&records).map_err(|e| format!("run {run}: {}", e.message().unwrap_or("")))?;
        let mut this: BTreeMap<(u64, String), Vec<u64>> = BTreeMap::new();
        for r in &records {
            this.entry((r.label, format!("{:?}", r.end)))
                .or_default()
                .push(r.insns.unwrap_or(0));
        }
        for (key, mut values) in this {
            values.sort_unstable();
            counts.entry(key).or_default().push(values);
        }
    }
    println!(
        "{} (-cpu {}), {RUNS} runs, {ITERATIONS} iterations:",
        arch.arch, arch.cpu
    );
    let mut worst: f64 = 0.0;
    for ((label, end), runs) in &counts {
        let flat: Vec<u64> = runs.iter().flatten().copied().collect();
        let (lo, hi) = (*flat.iter().min().unwrap(), *flat.iter().max().unwrap());
        let spread = if lo == 0 {
            0.0
        } else {
            hi as f64 / lo as f64 - 1.0
        };
        println!(
            "  label {label:>2} {end:<16} {runs:?}  spread {:.6} %",
            spread * 100.0
        );
        // A window left open through a thread's exit also counts the exit path, whose
        // locks depend on the other threads' timing: reported, not required to repeat.
        if end == "ThreadExit" {
            continue;
        }
        let first = &runs[0];
        for other in &runs[1..] {
            for (a, b) in first.iter().zip(other) {
                let d = (*a as f64 - *b as f64).abs() / (*a).max(1) as f64;
                worst = worst.max(d);
            }
        }
    }
    if worst > 0.000_01 {
        return Err(format!(
            "counts differ between runs by {:.6} % (more than 0.001 %)",
            worst * 100.0
        )
        .into());
    }
    Ok(())
}
