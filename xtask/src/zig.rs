//! zig (compiler, linker and C library of the counted builds) and cargo-zigbuild (which
//! drives zig for cargo), both pinned, from PyPI into a virtualenv under the target
//! folder.

use crate::say::say;
use crate::sh::{apt_install, run, succeeds};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const ZIGLANG: &str = "ziglang==0.17.1";
pub const CARGO_ZIGBUILD: &str = "cargo-zigbuild==0.24.1";

/// The virtualenv's folder: `<target dir>/zig-venv`.
pub fn venv(target_dir: &Path) -> PathBuf {
    target_dir.join("zig-venv")
}

/// Makes the virtualenv with both, unless it works already.
pub fn ensure(target_dir: &Path) -> Result<(), String> {
    let venv = venv(target_dir);
    let python = venv.join("bin/python3");
    if venv.join("bin/cargo-zigbuild").is_file()
        && succeeds(Command::new(&python).args(["-m", "ziglang", "version"]))
    {
        return Ok(());
    }
    if !succeeds(Command::new("python3").arg("--version")) {
        apt_install(&["python3".into(), "python3-venv".into()]).map_err(|e| {
            format!("python3 is missing (the counted builds' zig comes from PyPI): {e}")
        })?;
    }
    let make = || succeeds(Command::new("python3").arg("-m").arg("venv").arg(&venv));
    if !make() {
        apt_install(&["python3-venv".into()])?;
        if !make() {
            return Err("python3 -m venv failed (install python3-venv)".into());
        }
    }
    say(&format!(
        "installing zig ({ZIGLANG}) and cargo-zigbuild ({CARGO_ZIGBUILD}) into {}",
        venv.display()
    ));
    run(Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary",
            ":all:",
        ])
        .args([ZIGLANG, CARGO_ZIGBUILD]))
}
