//! mdbook, which builds the book (docs/), pinned and built once into
//! `<target>/tools/mdbook-<version>/`, without its search and server features (the test
//! command builds the book to check it).

use crate::repo::Repo;
use crate::say::say;
use crate::sh::run;
use anyhow::Result;
use std::path::PathBuf;
use std::process::{Command, Stdio};

pub const VERSION: &str = "0.5.4";

/// The mdbook binary, installed first if missing.
pub fn ensure(repo: &Repo) -> Result<PathBuf> {
    let root = repo.target_dir.join(format!("tools/mdbook-{VERSION}"));
    let bin = root.join("bin/mdbook");
    if !bin.is_file() {
        say(&format!(
            "installing mdbook {VERSION} into {} (cargo install --locked, once)",
            root.display()
        ));
        run(Command::new("cargo")
            .args(["install", "--locked", "--quiet"])
            .arg(format!("mdbook@{VERSION}"))
            .arg("--no-default-features")
            .arg("--root")
            .arg(&root)
            // This task's stdout is the binary's path alone.
            .stdout(Stdio::from(std::io::stderr())))?;
    }
    Ok(bin)
}
