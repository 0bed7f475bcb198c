//! `scripts/qemu-run`, the runner of every emulated leg, asked to count: it stops before
//! running anything where the count would not come from the pinned emulator, or where
//! the emulator cannot load the plugin (a QEMU built without plugin support ignores
//! `QEMU_PLUGIN` without a word), saying so; and it counts under the pinned QEMU, not the
//! host's, when the pinned one is there.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A folder of its own under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ipcm-qemu-run-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// An executable script `name` in this folder.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

impl Scratch {
    /// A stand-in QEMU at bin/qemu-<arch>: prints `version` for --version, runs `help`
    /// for -h and `run` for anything else.
    fn fake_qemu(&self, arch: &str, version: &str, help: &str, run: &str) -> PathBuf {
        std::fs::create_dir_all(self.0.join("bin")).unwrap();
        self.script(
            &format!("bin/qemu-{arch}"),
            &format!(
                "case \"$1\" in\n  --version) echo '{version}' ;;\n  -h) {help} ;;\n  *) {run} ;;\nesac"
            ),
        )
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// This machine's architecture as QEMU names its user-mode binary (the counted ones).
fn arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        a @ ("x86_64" | "aarch64") => Some(a),
        _ => None,
    }
}

/// qemu-run for `arch` with `env`, running `program`: what it printed and its exit code.
fn qemu_run(arch: &str, env: &[(&str, &Path)], count: &str, program: &Path) -> Output {
    let mut command = Command::new(repo().join("scripts/qemu-run"));
    command
        .args([arch, "static"])
        .arg(program)
        .env("IPC_MATRIX_EMULATE_NATIVE", "1")
        .env("IPC_MATRIX_COUNT", count)
        .env_remove("QEMU_PLUGIN")
        .env_remove("IPC_MATRIX_COUNT_FILE");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_count_without_the_pinned_qemu_stops_before_running_anything() {
    let Some(arch) = arch() else { return };
    let s = Scratch::new("no-pinned");
    let ran = s.0.join("ran");
    let program = s.script("program", &format!("touch {}", ran.display()));
    let plugin = s.script("plugin.so", "");
    let out = qemu_run(
        arch,
        &[
            ("IPC_MATRIX_PINNED_QEMU", &s.0.join("nowhere")),
            ("IPC_MATRIX_COUNT_PLUGIN", &plugin),
        ],
        "on",
        &program,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the pinned QEMU is not built"),
        "{}",
        stderr(&out)
    );
    assert!(!ran.exists(), "the program ran");
}

#[test]
fn a_count_under_a_qemu_that_cannot_load_plugins_stops_naming_it() {
    let Some(arch) = arch() else { return };
    let s = Scratch::new("no-plugins");
    let ran = s.0.join("ran");
    let program = s.script("program", &format!("touch {}", ran.display()));
    let plugin = s.script("plugin.so", "");
    // A QEMU as Debian 13's static qemu-user is: its -h lists no -plugin.
    s.fake_qemu(
        arch,
        &format!("qemu-{arch} version 10.0.2 (Debian 1:10.0.2+ds-2)"),
        &format!("echo 'usage: qemu-{arch} [options] program [arguments...]'; echo '-cpu model   select CPU'"),
        &format!("touch {}", ran.display()),
    );
    let out = qemu_run(
        arch,
        &[
            ("IPC_MATRIX_PINNED_QEMU", &s.0.join("bin")),
            ("IPC_MATRIX_COUNT_PLUGIN", &plugin),
        ],
        "on",
        &program,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("version 10.0.2") && err.contains("cannot load plugins"),
        "{err}"
    );
    assert!(!ran.exists(), "the program ran");
}

#[test]
fn a_count_runs_under_the_pinned_qemu_with_the_plugin() {
    let Some(arch) = arch() else { return };
    let s = Scratch::new("pinned");
    let seen = s.0.join("seen");
    let program = s.script("program", "true");
    let plugin = s.script("plugin.so", "");
    // A QEMU that loads plugins and writes down how it was started.
    let fake = s.fake_qemu(
        arch,
        &format!("qemu-{arch} version 7.2.22"),
        "echo '-plugin      [file=]<file>[,<argname>=<argvalue>]'",
        &format!(
            "echo \"$0 $* plugin=$QEMU_PLUGIN count=$IPC_MATRIX_COUNT_FILE\" > {}",
            seen.display()
        ),
    );
    let out = qemu_run(
        arch,
        &[
            ("IPC_MATRIX_PINNED_QEMU", &s.0.join("bin")),
            ("IPC_MATRIX_COUNT_PLUGIN", &plugin),
            ("CARGO_TARGET_DIR", &s.0.join("target")),
        ],
        "on",
        &program,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = std::fs::read_to_string(&seen).expect("the pinned QEMU ran");
    assert!(seen.starts_with(&fake.display().to_string()), "{seen}");
    assert!(
        seen.contains(&format!("plugin={}", plugin.display())),
        "{seen}"
    );
    assert!(seen.contains("%p.jsonl"), "{seen}");
    // A static build runs with no other root's files standing in for the host's.
    assert!(seen.contains(" -L / "), "{seen}");
}

/// `ipc-matrix run --count` fixes the same emulated CPU model per architecture as this
/// runner does, so a count means the same whichever started the emulator: each
/// architecture's QEMU, as the runner starts it, is given the model of
/// `counted_run::CPU_MODELS`.
#[test]
fn run_count_and_qemu_run_fix_the_same_cpu_models() {
    let scratch = Scratch::new("cpu-models");
    let path = format!(
        "{}:{}",
        scratch.0.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (_, qemu_arch, model) in ipc_matrix::counted_run::CPU_MODELS {
        scratch.fake_qemu(qemu_arch, "QEMU stand-in", "true", "echo \"cpu=$QEMU_CPU\"");
        let out = Command::new(repo().join("scripts/qemu-run"))
            .args([qemu_arch, "static", "/bin/true"])
            .env("PATH", &path)
            .env("IPC_MATRIX_PINNED_QEMU", scratch.0.join("bin"))
            .env("IPC_MATRIX_EMULATE_NATIVE", "1")
            .env("IPC_MATRIX_COUNT", "off")
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            printed.trim(),
            format!("cpu={model}"),
            "{qemu_arch}: scripts/qemu-run and counted_run::CPU_MODELS differ ({})",
            stderr(&out)
        );
    }
}
