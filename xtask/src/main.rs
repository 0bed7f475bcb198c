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
//! - `ensure-zig`, `zig-env <triple>...`: the counted builds' zig and cargo-zigbuild,
//!   pinned, from PyPI; what a counted build compiles with, as `export` lines.
//! - `count-plugin`: the instruction-count plugin and the pinned QEMU.
//! - `build-peer [triple]`: the reference C peer; prints its path.
//! - `count-pass <triple> [nextest arguments]`: a leg's instruction-count pass.
//! - `second-userland [--prepare] [<triple> [nextest arguments]]`: that pass again in a
//!   second userland, which must count the same.
//! - `ipc-matrix <arguments>`: the CLI of the suite's own build (`IPC_MATRIX_TARGET`).
//! - `reports [--strict-instructions] <leg>...`: each leg's reports.
//! - `test-target <triple> [nextest arguments]`: one target's suite and its reports.
//! - `accept-baseline [runs] [leg]`: a leg's baseline measured afresh.
//! - `big-endian-peer <triple>`: the C peer of a big-endian CPU, checked by this machine.
//! - `mutants [MINUTES [FILE...]]`: mutation testing of the verdict's code.
//! - `workflow [--file F] [--job J] [--matrix key:value]...`: a workflow's jobs run here
//!   with act (the local workflow runner).
//! - `workflow-proof [init]`: the test command's local runs of our workflow (the plan,
//!   the merge gate green, a planted regression, a broken blocking leg, a failing
//!   non-blocking one) and of `init`'s; `init`: that one alone.
//!
//! Layers, top down: this file (the command line); the legs (`legs`, `second_userland`,
//! `count_pass`, `big_endian_peer`, `mutants`); what they build and run (`reports`,
//! `peers`, `setup`, `pinned_qemu`, `zig`, `fixed_paths`); what they read
//! (`cargo_config`, `targets`); `sh`, `say` and `repo` (where the tasks work) below.

mod big_endian_peer;
mod cargo_config;
mod count_pass;
mod examples;
mod fixed_paths;
mod legs;
mod mdbook;
mod mutants;
mod peers;
mod pinned_qemu;
mod qemu_run;
mod repo;
mod reports;
mod say;
mod second_userland;
mod setup;
mod sh;
mod steps;
mod targets;
mod test_command;
mod tools;
mod workflow;
mod workflow_proof;
mod zig;

use anyhow::{bail, Context, Result};
use repo::Repo;
use std::process::ExitCode;

const USAGE: &str =
    "usage: cargo xtask <task> [arguments]; the tasks are listed in xtask/src/main.rs:
  counted-target|runner|target|setup-target|big-endian-peer <triple>
  zig-env <triple>...   build-peer [triple]   count-plugin   pinned-qemu   ensure-zig
  count-pass <triple> [nextest arguments]   test-target <triple> [nextest arguments]
  second-userland [--prepare] [<triple> [nextest arguments]]
  ipc-matrix <arguments>   reports [--strict-instructions] <leg>...
  accept-baseline [runs] [leg]   mutants [MINUTES [FILE...]]
  workflow [--file F] [--job J] [--matrix key:value]... [--env NAME=VALUE]... [--event E]
  workflow-proof [init]";

/// Runs one task; the exit status it asks for.
fn run(repo: &Repo, args: &[String]) -> Result<u8> {
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
        ["build-peer"] => println!("{}", peers::build(repo, None)?.display()),
        ["build-peer", triple] => println!("{}", peers::build(repo, Some(triple))?.display()),
        ["count-pass", triple, nextest @ ..] => {
            let nextest: Vec<String> = nextest.iter().map(|w| (*w).to_owned()).collect();
            return count_pass::count_pass(repo, triple, &nextest);
        }
        ["ipc-matrix", ..] => {
            // In the folder the task was started in: a user's copy, too.
            let mut cli = reports::cli(repo, reports::suite_target().as_deref(), &args[1..])?;
            let status = cli
                .current_dir(&repo.caller_dir)
                .status()
                .with_context(|| sh::describe(&cli))?;
            return Ok(sh::exit_code(status));
        }
        ["reports", "--strict-instructions", legs @ ..] => {
            let legs: Vec<String> = legs.iter().map(|w| (*w).to_owned()).collect();
            return reports::write(repo, reports::suite_target().as_deref(), &legs, true);
        }
        ["reports", legs @ ..] => {
            let legs: Vec<String> = legs.iter().map(|w| (*w).to_owned()).collect();
            return reports::write(repo, reports::suite_target().as_deref(), &legs, false);
        }
        ["count-plugin"] => count_pass::ensure_count_plugin(repo)?,
        ["test-target", triple, nextest @ ..] => {
            let nextest: Vec<String> = nextest.iter().map(|w| (*w).to_owned()).collect();
            return legs::test_target(repo, triple, &nextest);
        }
        ["accept-baseline", rest @ ..] if rest.len() <= 2 => {
            let runs =
                match rest.first() {
                    None => 3,
                    Some(n) => n.parse::<u32>().ok().filter(|&n| n >= 1).context(
                        "usage: cargo xtask accept-baseline [runs >= 1] [target-triple]",
                    )?,
                };
            legs::accept_baseline(repo, runs, rest.get(1).copied())?;
        }
        ["big-endian-peer", triple] => return big_endian_peer::big_endian_peer(repo, triple),
        ["second-userland", ..] => return second_userland::second_userland(repo, &args[1..]),
        ["test", nextest @ ..] => {
            let nextest: Vec<String> = nextest.iter().map(|w| (*w).to_owned()).collect();
            return test_command::test(repo, &nextest);
        }
        ["prepare"] => test_command::prepare(repo)?,
        ["counted-leg", triple, nextest @ ..] => {
            let nextest: Vec<String> = nextest.iter().map(|w| (*w).to_owned()).collect();
            return Ok(test_command::counted_leg(repo, triple, &nextest));
        }
        ["example-copy", name] => println!("{}", examples::copy(repo, name)?.display()),
        ["interop-tools"] => tools::interop_tools(),
        ["browser"] => return Ok(u8::from(!tools::browser())),
        ["failed-tests"] => {
            steps::print_failed_tests(&repo.target_dir.join("nextest"), steps::started())
        }
        ["ensure-zig"] => zig::ensure(&repo.target_dir)?,
        ["zig-env", triples @ ..] if !triples.is_empty() => {
            print!("{}", zig::exports(&zig::env(repo, &args[1..])?));
        }
        ["mutants", ..] => return mutants::mutants(repo, &args[1..]),
        ["workflow", ..] => return workflow::workflow(repo, &args[1..]),
        ["workflow-proof"] => return workflow_proof::prove(repo, false),
        ["workflow-proof", "init"] => return workflow_proof::prove(repo, true),
        _ => bail!(USAGE),
    }
    Ok(0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo = Repo::here();
    // The runner runs the target binary where cargo or nextest started it.
    if let [task, arch, gnu, program @ ..] = args.as_slice() {
        if task == "qemu-run" {
            let refusal = qemu_run::qemu_run(&repo, arch, gnu, program);
            eprintln!("error: {}", refusal.why);
            return ExitCode::from(refusal.code);
        }
    }
    // Progress lines count from the outermost task's start, in the processes it starts too.
    if std::env::var_os("SCRIPT_STARTED_AT").is_none() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        std::env::set_var("SCRIPT_STARTED_AT", now.to_string());
    }
    if let Err(e) = std::env::set_current_dir(&repo.root) {
        eprintln!("error: {}: {e}", repo.root.display());
        return ExitCode::FAILURE;
    }
    match run(&repo, &args) {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            // The whole chain, as "doing X: cause".
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
