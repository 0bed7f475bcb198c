//! `build-peer [triple]`: the reference external peers (protocol v1). Builds the C peer
//! (`peers/c/echo_peer.c`) for a target triple with that triple's gcc (a counted build's
//! static, by zig), into `peers/c/build/<triple>/c-echo-peer`, where matrix.yaml names it
//! (`peers/c/build/{target}/c-echo-peer`), and makes sure python3 is there for the Python
//! peer (`peers/python`). Rebuilds only when the source, or this file (which holds the
//! flags), is newer than the binary; a missing compiler is installed with apt where
//! possible.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{apt_install, have, host_triple, run};
use crate::targets::target;
use crate::zig;
use anyhow::{anyhow, bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SOURCE: &str = "peers/c/echo_peer.c";
/// This file: its flags are part of what the binary is built from.
const RECIPE: &str = "xtask/src/peers.rs";
const FLAGS: &[&str] = &[
    "-std=c11",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_GNU_SOURCE",
];

/// The compilers that may build for `triple`, the first that works taken; the packages
/// that bring them; the environment they run in.
struct Compilers {
    names: Vec<String>,
    packages: Vec<String>,
    env: Vec<(String, String)>,
    is_static: bool,
}

fn compilers(repo: &Repo, triple: &str, host: Option<&str>) -> Result<Compilers> {
    if ipc_matrix_spec::counted_target(triple) == Some(triple) {
        let env = zig::env(repo, &[triple.to_owned()])?;
        let var = format!("CC_{}", triple.replace('-', "_"));
        let cc = env
            .iter()
            .rev()
            .find(|(name, _)| *name == var)
            .map(|(_, value)| value.clone())
            .with_context(|| format!("cargo-zigbuild set no {var}"))?;
        return Ok(Compilers {
            names: vec![cc],
            packages: Vec::new(),
            env,
            is_static: true,
        });
    }
    let recipe = target(triple)?;
    let gnu = recipe.gnu;
    // The host's own gcc (or its prefixed name) builds natively; any other triple needs
    // the cross gcc and the target's libc headers.
    let (names, packages) = if Some(triple) == host {
        (
            vec!["gcc".to_owned(), format!("{gnu}-gcc")],
            vec!["gcc".to_owned(), "libc6-dev".to_owned()],
        )
    } else {
        (
            vec![format!("{gnu}-gcc")],
            vec![
                format!("gcc-{gnu}"),
                format!("libc6-dev-{}-cross", recipe.libc),
            ],
        )
    };
    Ok(Compilers {
        names,
        packages,
        env: Vec::new(),
        is_static: false,
    })
}

/// The first compiler that can preprocess `#include <stdio.h>` (a cross gcc without its
/// libc headers is as good as none).
fn working(compilers: &Compilers) -> Option<String> {
    compilers.names.iter().find_map(|cc| {
        let works = (cc.contains('/') || have(cc))
            && Command::new(cc)
                .args(["-E", "-x", "c", "-"])
                .envs(compilers.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .and_then(|mut child| {
                    if let Some(mut stdin) = child.stdin.take() {
                        stdin.write_all(b"#include <stdio.h>\n")?;
                    }
                    child.wait()
                })
                .is_ok_and(|status| status.success());
        works.then(|| cc.clone())
    })
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Builds the C peer for `triple` (this machine's when none) unless it is up to date;
/// its path, relative to the repository's root.
pub fn build(repo: &Repo, triple: Option<&str>) -> Result<PathBuf> {
    let host = host_triple().ok();
    let triple = triple.or(host.as_deref()).context(
        "rustc not found to name this machine's triple: usage: cargo xtask build-peer <target-triple>",
    )?;
    // The Python peer runs on the host's python3 (`#!/usr/bin/env python3`).
    if !have("python3") {
        apt_install(&["python3".into()]).map_err(|e| {
            anyhow!("python3 is missing and could not be installed ({e:#}): the Python peer's cells need it")
        })?;
    }
    let compilers = compilers(repo, triple, host.as_deref())?;
    let out = PathBuf::from(format!("peers/c/build/{triple}"));
    let bin = out.join("c-echo-peer");
    let built = modified(&repo.root.join(&bin));
    if built.is_some_and(|b| {
        [SOURCE, RECIPE]
            .iter()
            .all(|from| modified(&repo.root.join(from)).is_some_and(|m| b > m))
    }) {
        say(&format!("c-echo-peer for {triple}: up to date"));
        return Ok(bin);
    }
    let cc = match working(&compilers) {
        Some(cc) => cc,
        None => {
            let (names, packages) = (compilers.names.join(" "), compilers.packages.join(" "));
            if compilers.packages.is_empty() {
                bail!("{names} does not work for {triple}");
            }
            apt_install(&compilers.packages).map_err(|e| {
                anyhow!("no working {names} for {triple}, and {packages} could not be installed ({e:#}): install them (or their equivalents) by hand")
            })?;
            working(&compilers).with_context(|| {
                format!("{names} still missing or without libc headers after installing {packages}")
            })?
        }
    };
    std::fs::create_dir_all(repo.root.join(&out)).with_context(|| out.display().to_string())?;
    say(&format!("{cc}: {SOURCE} -> {}", bin.display()));
    // Into a temporary name first: a failed build leaves no binary newer than the source,
    // and a concurrent reader never runs a half-written one.
    let partial = out.join(format!("c-echo-peer.tmp.{}", std::process::id()));
    let mut compile = Command::new(&cc);
    compile
        .args(FLAGS)
        .args(compilers.is_static.then_some("-static"))
        .arg("-o")
        .arg(&partial)
        .arg(SOURCE)
        .envs(compilers.env.iter().map(|(k, v)| (k, v)))
        // This task's stdout is the binary's path alone.
        .stdout(std::io::stderr());
    if let Err(e) = run(&mut compile) {
        let _ = std::fs::remove_file(&partial);
        bail!("{e:#} (the C peer for {triple})");
    }
    std::fs::rename(&partial, &bin).with_context(|| bin.display().to_string())?;
    Ok(bin)
}
