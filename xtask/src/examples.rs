//! `example-copy <name>`: a worked example (`examples/<name>`) as its user has it, copied
//! into a new folder outside this repository, the Rust one's dependency on ipc-matrix
//! pointed at this checkout. Prints the copy's folder; the caller removes it.

use crate::repo::Repo;
use crate::sh::describe;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The line of an example's Cargo.toml that names ipc-matrix by its place in this
/// repository.
const IN_REPOSITORY: &str = r#"ipc-matrix = { path = "../../crates/cli" }"#;

/// A new folder under TMPDIR, `ipc-matrix-<name>.<suffix>`, made by this process alone.
fn new_folder(name: &str) -> Result<PathBuf> {
    let tmp = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..100u32 {
        let folder = tmp.join(format!(
            "ipc-matrix-{name}.{}{:08x}",
            std::process::id(),
            nanos.wrapping_add(attempt)
        ));
        match std::fs::create_dir(&folder) {
            Ok(()) => return Ok(folder),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| folder.display().to_string()),
        }
    }
    bail!("no new folder could be made in {}", tmp.display())
}

/// The example's Cargo.toml text with ipc-matrix taken from `cli` instead.
fn pointed_at(manifest: &str, cli: &Path) -> Option<String> {
    manifest.lines().any(|l| l == IN_REPOSITORY).then(|| {
        manifest.replacen(
            IN_REPOSITORY,
            &format!(r#"ipc-matrix = {{ path = "{}" }}"#, cli.display()),
            1,
        )
    })
}

pub fn copy(repo: &Repo, name: &str) -> Result<PathBuf> {
    let source = repo.root.join("examples").join(name);
    if name.contains('/') || !source.is_dir() {
        bail!("no example {name} under examples/");
    }
    let copy = new_folder(name)?;
    // Not what a build in place left (target/, build/): the user's clone has none. Files
    // stamped now (-m), as a copy is: cargo, which builds in the shared target folder, then
    // sees them newer than what it built from the last copy (elsewhere) and builds again.
    let mut pack = Command::new("tar");
    pack.arg("-C")
        .arg(&source)
        .args(["--exclude=./target", "--exclude=./build", "-cf", "-", "."])
        .stdout(Stdio::piped());
    let mut packing = pack.spawn().with_context(|| describe(&pack))?;
    let mut unpack = Command::new("tar");
    unpack.arg("-C").arg(&copy).arg("-xmf").arg("-");
    if let Some(out) = packing.stdout.take() {
        unpack.stdin(out);
    }
    let unpacked = unpack.status().is_ok_and(|s| s.success());
    // The pipe's read end goes with the command: a packing tar never waits on it.
    drop(unpack);
    let packed = packing.wait().is_ok_and(|s| s.success());
    if !(packed && unpacked) {
        let _ = std::fs::remove_dir_all(&copy);
        bail!("copying examples/{name} to {} failed", copy.display());
    }
    let manifest = copy.join("Cargo.toml");
    if let Ok(text) = std::fs::read_to_string(&manifest) {
        let pointed = pointed_at(&text, &repo.root.join("crates/cli")).with_context(|| {
            format!("examples/{name}/Cargo.toml: its line `{IN_REPOSITORY}` moved")
        });
        let written = pointed.and_then(|t| {
            std::fs::write(&manifest, t).with_context(|| manifest.display().to_string())
        });
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&copy);
            return Err(e);
        }
    }
    Ok(copy)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dependency_is_pointed_at_the_checkout_or_its_move_is_said() {
        let manifest = "[dependencies]\nipc-matrix = { path = \"../../crates/cli\" }\n";
        let cli = std::path::Path::new("/r/crates/cli");
        assert_eq!(
            super::pointed_at(manifest, cli).unwrap(),
            "[dependencies]\nipc-matrix = { path = \"/r/crates/cli\" }\n"
        );
        assert!(super::pointed_at("[dependencies]\nipc-matrix = \"1\"\n", cli).is_none());
    }
}
