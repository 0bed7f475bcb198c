//! zig (compiler, linker and C library of the counted builds) and cargo-zigbuild (which
//! drives zig for cargo), both pinned, from PyPI into a virtualenv under the target
//! folder.

use crate::fixed_paths;
use crate::repo::Repo;
use crate::say::say;
use crate::sh::{apt_install, output, output_bytes, run, succeeds};
use anyhow::{bail, Context, Result};
use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const ZIGLANG: &str = "ziglang==0.17.1";
pub const CARGO_ZIGBUILD: &str = "cargo-zigbuild==0.24.1";

/// The virtualenv's folder: `<target dir>/zig-venv`.
pub fn venv(target_dir: &Path) -> PathBuf {
    target_dir.join("zig-venv")
}

/// Makes the virtualenv with both, unless it works already.
pub fn ensure(target_dir: &Path) -> Result<()> {
    let venv = venv(target_dir);
    let python = venv.join("bin/python3");
    if venv.join("bin/cargo-zigbuild").is_file()
        && succeeds(Command::new(&python).args(["-m", "ziglang", "version"]))
    {
        return Ok(());
    }
    if !succeeds(Command::new("python3").arg("--version")) {
        apt_install(&["python3".into(), "python3-venv".into()])
            .context("python3 is missing (the counted builds' zig comes from PyPI)")?;
    }
    let make = || succeeds(Command::new("python3").arg("-m").arg("venv").arg(&venv));
    if !make() {
        apt_install(&["python3-venv".into()])?;
        if !make() {
            bail!("python3 -m venv failed (install python3-venv)");
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

/// What a counted build of `triples` compiles with, as variables for cargo: what
/// `cargo zigbuild --target <triple>...` would set (each target's CC, CXX, AR, RANLIB and
/// linker: zig wrappers), read from cargo-zigbuild itself, so that `cargo nextest run
/// --target <triple>` builds exactly as cargo zigbuild does; then how the wrappers find
/// zig, the zig recorded with each count, and the paths kept out of the build
/// ([`fixed_paths`]). Later entries win.
pub fn env(repo: &Repo, triples: &[String]) -> Result<Vec<(String, String)>> {
    ensure(&repo.target_dir)?;
    let venv = venv(&repo.target_dir);
    // cargo-zigbuild runs `$CARGO` with what it set: a `cargo` that prints its
    // environment. Made once, and whole before it is seen: two count passes may ask at once.
    let print_env = venv.join("print-env");
    if !print_env.is_file() {
        let partial = venv.join(format!("print-env.{}", std::process::id()));
        std::fs::write(&partial, "#!/bin/sh\nexec env -0\n")
            .and_then(|()| std::fs::set_permissions(&partial, Permissions::from_mode(0o755)))
            .and_then(|()| std::fs::rename(&partial, &print_env))
            .with_context(|| print_env.display().to_string())?;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(venv.join("bin")).chain(std::env::split_paths(&path)))
            .context("PATH")?;
    let mut zigbuild = Command::new(venv.join("bin/cargo-zigbuild"));
    zigbuild
        .arg("zigbuild")
        .env("PATH", path)
        .env("CARGO", &print_env);
    for triple in triples {
        zigbuild.args(["--target", triple]);
    }
    let printed = output_bytes(&mut zigbuild)?;
    let mut vars: Vec<(String, String)> = printed
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (name, value) = entry.split_once('=')?;
            wanted(name).then(|| (name.to_owned(), value.to_owned()))
        })
        .collect();
    let python = venv.join("bin/python3");
    // The `ar` and `lib` wrappers are cargo-zigbuild itself, which finds zig by these (the
    // cc wrappers set them for themselves); else only a python3 on PATH with ziglang would do.
    vars.push((
        "CARGO_ZIGBUILD_ZIG_COMMAND".into(),
        python.to_string_lossy().into_owned(),
    ));
    vars.push((
        "CARGO_ZIGBUILD_ZIG_COMMAND_ARGS".into(),
        "-m ziglang".into(),
    ));
    // Recorded with each count (its C library is this zig's musl).
    let version = output(Command::new(&python).args(["-m", "ziglang", "version"]))?;
    vars.push(("IPC_MATRIX_ZIG".into(), format!("zig {version}")));
    let home = std::env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    let prefixes = fixed_paths::prefixes(&repo.root, &repo.target_dir, &home);
    vars.extend(fixed_paths::env(&prefixes, triples));
    Ok(vars)
}

/// Whether cargo-zigbuild's variable `name` is one a build needs.
fn wanted(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "AR_",
        "BINDGEN_EXTRA_CLANG_ARGS_",
        "CARGO_ZIGBUILD_",
        "CC_",
        "CMAKE_TOOLCHAIN_FILE_",
        "CXX_",
        "RANLIB_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
        || (name.starts_with("CARGO_TARGET_") && name.ends_with("_LINKER"))
}

/// `vars` as lines of `export NAME='value'`, for a shell's `eval`.
pub fn exports(vars: &[(String, String)]) -> String {
    vars.iter()
        .map(|(name, value)| format!("export {name}='{}'\n", value.replace('\'', "'\\''")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_build_needs_is_kept_and_exports_survive_quotes() {
        assert!(wanted("CC_x86_64_unknown_linux_musl"));
        assert!(wanted("CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER"));
        assert!(!wanted("CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUNNER"));
        assert!(!wanted("PATH"));
        let printed = exports(&[("A".into(), "it's $HOME".into())]);
        assert_eq!(printed, "export A='it'\\''s $HOME'\n");
        let out = output(Command::new("sh").args(["-c", &format!("{printed}printf %s \"$A\"")]));
        assert_eq!(out.unwrap(), "it's $HOME");
    }
}
