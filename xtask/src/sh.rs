//! Running other programs: the machine's tools, apt for what is missing.

use crate::say::say;
use anyhow::{bail, Context, Result};
use std::process::{Command, Stdio};

/// Whether `program` is on PATH (as `command -v` finds it).
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let candidate = dir.join(program);
            std::fs::metadata(&candidate).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// Runs `command`, its output shown; an error names it and how it ended.
pub fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| describe(command))?;
    if !status.success() {
        bail!("{} failed ({status})", describe(command));
    }
    Ok(())
}

/// Runs `command` quietly; whether it succeeded.
pub fn succeeds(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The stdout of `command`, trimmed; an error when it fails.
pub fn output(command: &mut Command) -> Result<String> {
    let out = output_bytes(command)?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// The stdout of `command` as it printed it (its stderr shown); an error when it fails.
pub fn output_bytes(command: &mut Command) -> Result<Vec<u8>> {
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| describe(command))?;
    if !out.status.success() {
        bail!("{} failed ({})", describe(command), out.status);
    }
    Ok(out.stdout)
}

/// A child's exit status as this process passes it on (a signal as 128 + its number).
pub fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

/// A command as it would be typed.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|w| w.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The packages of the programs not on PATH, from `(program, package)` pairs.
pub fn missing_packages(needed: &[(&str, &str)]) -> Vec<String> {
    needed
        .iter()
        .filter(|(program, _)| !have(program))
        .map(|(_, package)| (*package).to_owned())
        .collect()
}

/// The last `n` lines of `text`, for a failure's log shown where it is reported.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_ok_and(|uid| uid == "0")
}

/// Installs Debian/Ubuntu packages with apt (through sudo when not root); an error
/// without apt, or when apt fails.
pub fn apt_install(packages: &[String]) -> Result<()> {
    if !have("apt-get") {
        bail!("no apt-get to install {}", packages.join(" "));
    }
    let apt = |args: &[&str]| {
        let mut command = if is_root() {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        command
    };
    say(&format!("apt-get install {}", packages.join(" ")));
    run(apt(&["update", "-qq"]).stdout(Stdio::null()))?;
    let mut install = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
    install.args(packages).stdout(Stdio::null());
    run(&mut install)
}

/// The host's target triple (`rustc -vV`).
pub fn host_triple() -> Result<String> {
    let info = output(Command::new("rustc").arg("-vV"))?;
    info.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host")
}

/// Adds `triple` to the pinned toolchain with rustup, unless it is there.
pub fn rustup_target(triple: &str) -> Result<()> {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if installed.lines().any(|l| l.trim() == triple) {
        say(&format!("rustup target {triple}: already installed"));
        return Ok(());
    }
    say(&format!("rustup target add {triple}"));
    run(Command::new("rustup").args(["target", "add", triple]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_described_as_typed_and_its_failure_named() {
        let mut c = Command::new("sh");
        c.args(["-c", "exit 3"]);
        assert_eq!(describe(&c), "sh -c exit 3");
        let e = format!("{:#}", run(&mut c).unwrap_err());
        assert!(
            e.starts_with("sh -c exit 3 failed") && e.contains('3'),
            "{e}"
        );
        // A command that cannot start: its words, then why (the cause kept in the chain).
        let e = format!(
            "{:#}",
            run(&mut Command::new("no-such-program-here")).unwrap_err()
        );
        assert!(e.starts_with("no-such-program-here: "), "{e}");
        assert!(have("sh"));
        assert!(!have("no-such-program-here"));
        assert_eq!(
            output(Command::new("sh").args(["-c", "echo ' hi '"])).unwrap(),
            "hi"
        );
    }
}
