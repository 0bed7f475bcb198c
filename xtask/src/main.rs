//! The repository's own tasks, in Rust; the scripts under `scripts/` call them through
//! `cargo xtask` (an alias in `.cargo/config.toml`), from the repository's root:
//!
//! - `counted-target <triple>`: the counted build of a triple's architecture; exit 1,
//!   silently, for an architecture without one.
//! - `runner <triple>`: the runner cargo uses for a target (`CARGO_TARGET_<TRIPLE>_RUNNER`,
//!   else `.cargo/config.toml`, read as TOML), as one line of words; nothing when the
//!   target runs natively.
//! - `target <triple>`: a target's recipe (`gnu=… libc=… qemu=… cpu=…`).
//! - `setup-target <triple>`: the rustup target, cross compilers, QEMU or zig it needs.
//! - `pinned-qemu`: builds the pinned QEMU once; prints its folder of binaries.
//! - `ensure-zig`: the counted builds' zig and cargo-zigbuild, pinned, from PyPI.
//! - `mutants [MINUTES [FILE...]]`: mutation testing of the verdict's code.
//!
//! Layers, top down: this file (the command line); the tasks (`setup`, `pinned_qemu`,
//! `zig`, `mutants`); what they read (`cargo_config`, `targets`); `sh` and `say` below.

mod cargo_config;
mod mutants;
mod pinned_qemu;
mod say;
mod setup;
mod sh;
mod targets;
mod zig;

use std::path::PathBuf;
use std::process::ExitCode;

/// Where the tasks work: the repository, and its cargo target folder
/// (`IPC_MATRIX_CARGO_TARGET_DIR`, which the scripts set when this task is built in a
/// folder of its own; else `CARGO_TARGET_DIR`; else the repository's `target/`).
pub struct Repo {
    pub root: PathBuf,
    pub target_dir: PathBuf,
}

impl Repo {
    fn here() -> Self {
        // The folder above this crate's manifest; the binary may run from anywhere.
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default();
        let target_dir = std::env::var_os("IPC_MATRIX_CARGO_TARGET_DIR")
            .or_else(|| std::env::var_os("CARGO_TARGET_DIR"))
            .map(PathBuf::from)
            .map(|t| if t.is_absolute() { t } else { root.join(t) })
            .unwrap_or_else(|| root.join("target"));
        Self { root, target_dir }
    }
}

const USAGE: &str = "usage: cargo xtask <counted-target|runner|target|setup-target> <triple>\n       cargo xtask pinned-qemu | ensure-zig | mutants [MINUTES [FILE...]]";

/// Runs one task; the exit status it asks for.
fn run(repo: &Repo, args: &[String]) -> Result<u8, String> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["counted-target", triple] => match ipc_matrix_spec::counted_target(triple) {
            Some(counted) => println!("{counted}"),
            None => return Ok(1),
        },
        ["runner", triple] => {
            if let Some(words) = cargo_config::runner(&repo.root, triple)? {
                println!("{}", words.join(" "));
            }
        }
        ["target", triple] => {
            let t = targets::target(triple)?;
            println!(
                "gnu={} libc={} qemu=qemu-{} cpu={}",
                t.gnu, t.libc, t.qemu_arch, t.cpu
            );
        }
        ["setup-target", triple] => setup::setup_target(repo, triple)?,
        ["pinned-qemu"] => println!("{}", pinned_qemu::ensure(repo)?.display()),
        ["ensure-zig"] => zig::ensure(&repo.target_dir)?,
        ["mutants", ..] => return mutants::mutants(repo, &args[1..]),
        _ => return Err(USAGE.into()),
    }
    Ok(0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&Repo::here(), &args) {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
