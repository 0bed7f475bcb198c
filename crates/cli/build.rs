//! Records the commit this binary was built from (`IPCM_BUILT_FROM_COMMIT`: not under
//! `IPC_MATRIX_`, whose names are the variables the binary reads), read from
//! `.git` itself, no `git` process: `ipc-matrix init` pins the workflow it writes to it.
//! A build outside a checkout (a crate from a registry) records none.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed=build.rs");
    let Some(git) = manifest
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.exists())
    else {
        return;
    };
    // A worktree or submodule has a file `.git` naming its folder.
    let git = match std::fs::read_to_string(&git) {
        Ok(text) => match text.trim().strip_prefix("gitdir: ") {
            Some(dir) => git.parent().expect("has one").join(dir),
            None => return,
        },
        Err(_) => git,
    };
    if let Some(commit) = head(&git) {
        println!("cargo:rustc-env=IPCM_BUILT_FROM_COMMIT={commit}");
    }
}

/// The commit `HEAD` names, telling cargo to build again when it moves.
fn head(git: &Path) -> Option<String> {
    watch(&git.join("HEAD"));
    let head = std::fs::read_to_string(git.join("HEAD")).ok()?;
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref: ") else {
        return is_commit(head).then(|| head.to_owned());
    };
    let common = std::fs::read_to_string(git.join("commondir"))
        .map(|c| git.join(c.trim()))
        .unwrap_or_else(|_| git.to_path_buf());
    watch(&common.join("packed-refs"));
    for base in [git, common.as_path()] {
        let file = base.join(reference);
        if let Ok(id) = std::fs::read_to_string(&file) {
            watch(&file);
            let id = id.trim();
            if is_commit(id) {
                return Some(id.to_owned());
            }
        }
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (id, name) = line.split_once(' ')?;
        (name == reference && is_commit(id)).then(|| id.to_owned())
    })
}

/// Builds again when `file` changes; a file that is not there is not watched (cargo would
/// run this script on every build for it).
fn watch(file: &Path) {
    if file.exists() {
        println!("cargo:rerun-if-changed={}", file.display());
    }
}

fn is_commit(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}
