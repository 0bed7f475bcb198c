//! `qemu-run <arch> <gnu prefix | static> <program> [arguments]`: the cargo runner of the
//! emulated targets (scripts/qemu-run calls it): runs a target binary under QEMU user
//! mode, and becomes that QEMU (exec: the pid stays, and nothing is printed on stdout,
//! which nextest reads to list tests).
//!
//! It labels the run (`IPC_MATRIX_RUNNER=qemu`, QEMU's version) and tells the binary how
//! to start its peer process through the same emulator, so no binfmt_misc is needed. It
//! pins the emulated CPU model (`QEMU_CPU`, from [`crate::targets`]), so instruction
//! counts and the library code QEMU runs do not depend on the host or the QEMU version's
//! default. With the counting plugin built (`<target>/release/libipc_matrix_qemu_count.so`,
//! or `IPC_MATRIX_COUNT_PLUGIN`), every process it starts, the peer too, counts the guest
//! instructions of the windows the harness marks (`IPC_MATRIX_COUNT`: `on` counts or
//! stops, `off`, or `auto`, the default: counts when the plugin is built). A counted run
//! of an architecture the pinned QEMU covers (x86_64, aarch64) runs under that QEMU,
//! never the host's, so the emulator is the repository's too; an uncounted run of those
//! architectures takes it too, once it is built.

use crate::pinned_qemu;
use crate::repo::Repo;
use crate::sh::output;
use crate::targets::TARGETS;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the run cannot start, and the exit status that says so.
pub struct Refusal {
    pub code: u8,
    pub why: String,
}

fn refuse(code: u8, why: String) -> Refusal {
    Refusal { code, why }
}

/// What the counting needs, as `IPC_MATRIX_COUNT` and the files present decide it: the
/// plugin to load, or why the run is not counted.
#[derive(Debug, PartialEq)]
enum Counting {
    With(PathBuf),
    Without(String),
}

fn counting(asked: &str, plugin: &Path, uncounted: Option<String>) -> Result<Counting, Refusal> {
    let missing = || {
        format!(
            "no counting plugin at {} (cargo build --release -p ipc-matrix-qemu-count)",
            plugin.display()
        )
    };
    match asked {
        "off" => Ok(Counting::Without(
            uncounted.unwrap_or_else(|| "IPC_MATRIX_COUNT=off".into()),
        )),
        "auto" if !plugin.is_file() => Ok(Counting::Without(missing())),
        "on" if !plugin.is_file() => Err(refuse(
            2,
            format!("IPC_MATRIX_COUNT=on, but there is {}", missing()),
        )),
        "on" | "auto" => Ok(Counting::With(plugin.to_path_buf())),
        other => Err(refuse(
            2,
            format!("IPC_MATRIX_COUNT is '{other}'; it takes on, off or auto"),
        )),
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Becomes QEMU running `program`; returns only when it cannot.
pub fn qemu_run(repo: &Repo, arch: &str, gnu: &str, program: &[String]) -> Refusal {
    match prepare(repo, arch, gnu, program) {
        Ok(mut command) => {
            let e = command.exec();
            refuse(
                126,
                format!("{}: {e}", command.get_program().to_string_lossy()),
            )
        }
        Err(refusal) => refusal,
    }
}

fn prepare(repo: &Repo, arch: &str, gnu: &str, program: &[String]) -> Result<Command, Refusal> {
    let (first, rest) = program.split_first().ok_or_else(|| {
        refuse(
            2,
            "usage: qemu-run <arch> <gnu prefix|static> <program> [arguments]".into(),
        )
    })?;
    // A static build loads nothing, so no other root's files may stand in for the host's.
    let mut sysroot = if gnu == "static" {
        "/".to_owned()
    } else {
        format!("/usr/{gnu}")
    };
    // On a machine of the target's own architecture, run natively (GitHub's arm64
    // runners), unless the run asks for the emulator (the count pass of a native leg).
    let machine = output(Command::new("uname").arg("-m")).unwrap_or_default();
    if machine == arch {
        if var("IPC_MATRIX_EMULATE_NATIVE").as_deref() != Some("1") {
            let mut native = Command::new(first);
            native.args(rest);
            return Ok(native);
        }
        sysroot = "/".into();
    }
    let asked = var("IPC_MATRIX_COUNT").unwrap_or_else(|| "auto".into());
    let pinned =
        var("IPC_MATRIX_PINNED_QEMU").map_or_else(|| pinned_qemu::bin_dir(repo), PathBuf::from);
    let mut qemu = PathBuf::from(format!("qemu-{arch}"));
    // Counted or not: the host's QEMU may be another version, or absent (a fresh machine
    // installs qemu-user only for the architectures the pinned one does not cover).
    if pinned_qemu::COVERS.contains(&arch) {
        let built = pinned.join(format!("qemu-{arch}"));
        if built.is_file() {
            qemu = built;
        } else if asked == "on" {
            return Err(refuse(2, format!(
                "IPC_MATRIX_COUNT=on, but the pinned QEMU is not built at {} (scripts/pinned-qemu.sh); a count of the host's QEMU would depend on the host",
                pinned.display()
            )));
        }
    }
    if qemu.parent() == Some(Path::new("")) && !crate::sh::have(&qemu.to_string_lossy()) {
        return Err(refuse(
            127,
            format!(
                "{} not found; run scripts/setup-target.sh for this target",
                qemu.display()
            ),
        ));
    }
    let version = output(Command::new(&qemu).arg("--version"))
        .map_err(|e| refuse(127, format!("{e:#}")))?
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut command = Command::new(&qemu);
    if let Some(target) = TARGETS.iter().find(|t| t.qemu_arch == arch) {
        command.env("QEMU_CPU", target.cpu);
    }
    command
        .env("QEMU_LD_PREFIX", &sysroot)
        .env("IPC_MATRIX_RUNNER", "qemu")
        .env("IPC_MATRIX_QEMU_VERSION", &version)
        .env(
            "IPC_MATRIX_PEER_RUNNER",
            format!("{} -L {sysroot}", qemu.display()),
        );
    let plugin = var("IPC_MATRIX_COUNT_PLUGIN").map_or_else(
        || repo.target_dir.join("release/libipc_matrix_qemu_count.so"),
        PathBuf::from,
    );
    // No count is never taken for a pass: a cell asked to count checks that the plugin
    // runs in it, and an uncounted one says why (IPC_MATRIX_UNCOUNTED).
    match counting(&asked, &plugin, var("IPC_MATRIX_UNCOUNTED"))? {
        Counting::Without(why) => {
            command.env("IPC_MATRIX_UNCOUNTED", why);
        }
        Counting::With(plugin) => {
            // A QEMU built without plugin support (Debian 13's and Ubuntu 26.04's static
            // qemu-user) ignores QEMU_PLUGIN without a word: stop here, before anything runs.
            let help = output(Command::new(&qemu).arg("-h")).unwrap_or_default();
            if !help.lines().any(|l| l.starts_with("-plugin")) {
                return Err(refuse(2, format!(
                    "{version} cannot load plugins (built without plugin support), so it cannot count instructions; use a QEMU that loads plugins, or IPC_MATRIX_COUNT=off to run uncounted"
                )));
            }
            let counts = repo.target_dir.join("ipc-matrix/counts");
            std::fs::create_dir_all(&counts)
                .map_err(|e| refuse(2, format!("{}: {e}", counts.display())))?;
            // exec keeps this pid: an earlier process's file of the same pid must not
            // vouch that the plugin runs in this one.
            let _ = std::fs::remove_file(counts.join(format!("{}.jsonl", std::process::id())));
            command
                .env("QEMU_PLUGIN", plugin)
                .env("IPC_MATRIX_COUNT_FILE", counts.join("%p.jsonl"));
        }
    }
    command.arg("-L").arg(&sysroot).arg(first).args(rest);
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_follows_the_setting_and_the_plugin() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let absent = Path::new("/no/such/plugin.so");
        assert_eq!(
            counting("auto", &here, None).ok(),
            Some(Counting::With(here.clone()))
        );
        assert!(
            matches!(counting("auto", absent, None), Ok(Counting::Without(w)) if w.contains("no counting plugin"))
        );
        assert_eq!(counting("on", absent, None).err().map(|r| r.code), Some(2));
        assert_eq!(
            counting("off", &here, Some("why".into())).ok(),
            Some(Counting::Without("why".into()))
        );
        assert_eq!(
            counting("off", &here, None).ok(),
            Some(Counting::Without("IPC_MATRIX_COUNT=off".into()))
        );
        assert_eq!(counting("yes", &here, None).err().map(|r| r.code), Some(2));
    }
}
