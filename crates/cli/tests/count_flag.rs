//! `ipc-matrix run --count`: the run again under QEMU with the counting plugin, checked
//! before anything runs. With stand-in emulators (shell scripts): one that cannot load
//! plugins stops the run naming it; a missing plugin or emulator stops it saying how to
//! get one; and one that can is started as the count pass's runner starts QEMU (the CPU
//! model, the plugin, the count file, the peer through the same emulator). The real
//! emulator counts in scripts/count-from-cli.sh, which the test command runs.

mod common;

use common::{text, Scratch};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 50, warmup: 0, timeout: 5s }"
);

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `run --count` in `s` with these extra arguments, outside any emulator.
fn run_count(s: &Scratch, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["run", "--count", "--out", "results"];
    all.extend_from_slice(args);
    let out = s
        .command(&all)
        .env_remove("IPC_MATRIX_RUNNER")
        .env_remove("QEMU_PLUGIN")
        .env_remove("IPC_MATRIX_COUNT_PLUGIN")
        .env_remove("IPC_MATRIX_COUNT_FILE")
        .output()
        .unwrap();
    (out.status.code(), text(&out))
}

#[test]
fn a_count_under_a_qemu_that_cannot_load_plugins_stops_before_any_cell_naming_it() {
    let s = Scratch::new("count-flag-no-plugins", MATRIX);
    let ran = s.path("ran");
    let plugin = script(&s.0, "plugin.so", "");
    // As Debian 13's static qemu-user: its -h lists no -plugin.
    let qemu = script(
        &s.0,
        "qemu",
        &format!(
            "case \"$1\" in\n  --version) echo 'qemu-x version 10.0.2 (Debian 1:10.0.2+ds-2)' ;;\n  -h) echo '-cpu model   select CPU' ;;\n  *) touch {} ;;\nesac",
            ran.display()
        ),
    );
    let (code, all) = run_count(
        &s,
        &[
            "--qemu",
            qemu.to_str().unwrap(),
            "--count-plugin",
            plugin.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("version 10.0.2") && all.contains("cannot load plugins"),
        "{all}"
    );
    assert!(!ran.exists(), "the emulator was started on the run");
    assert!(
        !s.path("results")
            .join("x86_64-unknown-linux-gnu@qemu")
            .exists(),
        "{all}"
    );
}

#[test]
fn a_count_without_its_plugin_or_its_emulator_stops_saying_how_to_get_one() {
    let s = Scratch::new("count-flag-missing", MATRIX);
    let (code, all) = run_count(&s, &["--qemu", "/bin/true"]);
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("--count needs the counting plugin")
            && all.contains("cargo build --release -p ipc-matrix-qemu-count"),
        "{all}"
    );
    let (code, all) = run_count(
        &s,
        &["--count-plugin", s.path("nowhere.so").to_str().unwrap()],
    );
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("nowhere.so is not there"), "{all}");
    let plugin = script(&s.0, "plugin.so", "");
    let (code, all) = run_count(
        &s,
        &[
            "--qemu",
            s.path("no-qemu").to_str().unwrap(),
            "--count-plugin",
            plugin.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("cannot start the emulator") && all.contains("no-qemu"),
        "{all}"
    );
    // The emulator's options need --count.
    let out = s.command(&["run", "--qemu", "/bin/true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn a_count_starts_this_binary_under_the_emulator_as_the_count_pass_does() {
    let s = Scratch::new("count-flag-started", MATRIX);
    let plugin = script(&s.0, "plugin.so", "");
    let seen = s.path("seen");
    // An emulator that loads plugins, writes down how it was started, and exits 7.
    let qemu = script(
        &s.0,
        "qemu",
        &format!(
            "case \"$1\" in\n  --version) echo 'qemu-x version 7.2.22' ;;\n  -h) echo '-plugin      [file=]<file>[,<argname>=<argvalue>]' ;;\n  *) echo \"$* cpu=$QEMU_CPU plugin=$QEMU_PLUGIN runner=$IPC_MATRIX_RUNNER count=$IPC_MATRIX_COUNT_FILE peer=$IPC_MATRIX_PEER_RUNNER version=$IPC_MATRIX_QEMU_VERSION\" > {}; exit 7 ;;\nesac",
            seen.display()
        ),
    );
    let (code, all) = run_count(
        &s,
        &[
            "--qemu",
            qemu.to_str().unwrap(),
            "--count-plugin",
            plugin.to_str().unwrap(),
        ],
    );
    // It never started the run under it: its status is not the run's.
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("exited with status 7 before the run started under it"),
        "{all}"
    );
    let seen = std::fs::read_to_string(&seen).unwrap();
    let model = match std::env::consts::ARCH {
        "x86_64" => "Nehalem-v1",
        "aarch64" => "cortex-a72",
        other => panic!("no model written down here for {other}"),
    };
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_ipc-matrix")).unwrap();
    for part in [
        format!("-L / {} run --count --out results", exe.display()),
        format!("cpu={model}"),
        format!(
            "plugin={}",
            std::fs::canonicalize(&plugin).unwrap().display()
        ),
        "runner=qemu".to_owned(),
        format!("count={}", s.path("results/counts/%p.jsonl").display()),
        format!("peer={} -L /", qemu.display()),
        "version=qemu-x version 7.2.22".to_owned(),
    ] {
        assert!(seen.contains(&part), "`{part}` not in: {seen}");
    }
}

/// A stand-in emulator that loads plugins (by its `-h`) and otherwise runs `run`.
fn emulator(s: &Scratch, run: &str) -> PathBuf {
    script(
        &s.0,
        "qemu",
        &format!("case \"$1\" in\n  --version) echo 'qemu-x version 7.2.22' ;;\n  -h) echo '-plugin      [file=]<file>' ;;\n  *) {run} ;;\nesac"),
    )
}

fn count_with(s: &Scratch, qemu: &Path) -> (Option<i32>, String) {
    let plugin = script(&s.0, "plugin.so", "");
    run_count(
        s,
        &[
            "--qemu",
            qemu.to_str().unwrap(),
            "--count-plugin",
            plugin.to_str().unwrap(),
        ],
    )
}

#[test]
fn an_emulator_that_runs_nothing_and_exits_0_fails_the_run() {
    let s = Scratch::new("count-flag-exit0", MATRIX);
    let qemu = emulator(&s, "exit 0");
    let (code, all) = count_with(&s, &qemu);
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("exited with status 0 before the run started under it"),
        "{all}"
    );
    assert!(!s
        .path("results")
        .join("x86_64-unknown-linux-gnu@qemu")
        .exists());
    assert!(!all.contains("PASS"), "{all}");
}

#[test]
fn an_emulator_that_never_answers_is_stopped_and_refused() {
    let s = Scratch::new("count-flag-silent", MATRIX);
    let qemu = script(&s.0, "qemu", "exec sleep 600");
    let (code, all) = count_with(&s, &qemu);
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("did not answer `-h`"), "{all}");
}

#[test]
fn an_emulator_that_ends_the_run_or_overrides_its_status_fails_the_run() {
    // Stand-ins that say what a counted run says through IPC_MATRIX_COUNTED_STATUS (that
    // it started; how it ended), then exit 0 whatever it said.
    for (name, said, expected) in [
        (
            "ends-it",
            "started",
            "before the counted run under it had finished",
        ),
        (
            "overrides-it",
            "started\\nexit 3",
            "the counted run ended with status 3, and then the emulator",
        ),
    ] {
        let s = Scratch::new(&format!("count-flag-{name}"), MATRIX);
        let qemu = emulator(
            &s,
            &format!("printf '{said}\\n' >> \"$IPC_MATRIX_COUNTED_STATUS\"; exit 0"),
        );
        let (code, all) = count_with(&s, &qemu);
        assert_eq!(code, Some(1), "{name}: {all}");
        assert!(all.contains(expected), "{name}: {all}");
    }
    // One that agrees with the run it started is the run's status.
    let s = Scratch::new("count-flag-agrees", MATRIX);
    let qemu = emulator(
        &s,
        "printf 'started\\nexit 3\\n' >> \"$IPC_MATRIX_COUNTED_STATUS\"; exit 3",
    );
    let (code, all) = count_with(&s, &qemu);
    assert_eq!(code, Some(3), "{all}");
}

#[test]
fn an_emulator_that_outlives_the_run_or_plants_a_fifo_is_stopped_not_waited_on() {
    // The run said it ended; the emulator lingers: stopped after its grace, the run failed.
    let s = Scratch::new("count-flag-lingers", MATRIX);
    let qemu = emulator(
        &s,
        "printf 'started\\nexit 0\\n' >> \"$IPC_MATRIX_COUNTED_STATUS\"; exec sleep 600",
    );
    let (code, all) = count_with(&s, &qemu);
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("did not in 30s: it was stopped"), "{all}");
    // A FIFO where the run's status goes is refused, never read from.
    let s = Scratch::new("count-flag-fifo", MATRIX);
    let qemu = emulator(
        &s,
        "rm -f \"$IPC_MATRIX_COUNTED_STATUS\"; mkfifo \"$IPC_MATRIX_COUNTED_STATUS\"; exit 0",
    );
    let (code, all) = count_with(&s, &qemu);
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("before the run started under it"), "{all}");
}
