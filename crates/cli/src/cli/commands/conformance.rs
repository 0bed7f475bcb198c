//! `ipc-matrix conformance`: the transport conformance suite (the checks of the `Channel`
//! contract every built-in transport passes) against a user's stacks, in one call: the
//! stacks in shared libraries that matrix.yaml's `plugins:` names, and those the binary
//! registers itself (`ipc_matrix::main!`). Its peers are this binary started again.

use crate::cli::args::NoCells;
use crate::exit_code;
use crate::term::Verbosity;
use anyhow::{bail, Result};
use ipc_matrix_spec::StackName;
use ipc_matrix_transport::conformance::{self, Arguments, CheckFailure, ColorSetting};
use ipc_matrix_transport::FORK_TO_EXEC_LIMIT;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// Set in a check's own process to the test name of the one check it runs.
const ONE_CHECK_ENV: &str = "IPC_MATRIX_CONFORMANCE_CHECK";

/// Set in a check's own process to the file it writes when its check passed: the word of
/// a process that reached its end, which no exit status (a stack's `_exit(0)`) can give.
const VERDICT_ENV: &str = "IPC_MATRIX_CONFORMANCE_VERDICT";

/// What a check's own process writes into its verdict file when the check passed.
const PASSED: &str = "passed";

/// How much of a check process's stderr is kept for its failure: its end.
const STDERR_KEPT: usize = 8 * 1024;

/// What to check and how.
pub struct Conformance<'a> {
    /// The matrix file whose plugins to load, when there is one.
    pub matrix: Option<&'a Path>,
    /// Only these stacks; every registered one when empty.
    pub stacks: &'a [String],
    /// The largest message, for stacks that cannot say theirs.
    pub max_message: Option<usize>,
    /// The test harness's own arguments (a filter, `--exact`, `--list`, ...).
    pub harness: &'a [String],
}

pub fn run(what: &Conformance<'_>) -> Result<u8> {
    if let Some(matrix) = what.matrix {
        crate::project::load_matrix(matrix).map_err(anyhow::Error::msg)?;
    }
    let registered = ipc_matrix_transport::registered_stacks();
    let chosen: Vec<StackName> = if what.stacks.is_empty() {
        registered
    } else {
        let mut chosen = Vec::new();
        for name in what.stacks {
            match registered.iter().find(|s| s.as_str() == name) {
                // Named twice, checked once.
                Some(stack) if chosen.contains(stack) => {}
                Some(&stack) => chosen.push(stack),
                None => bail!(
                    "--stack {name}: no such stack; the stacks here are: {}",
                    names(&registered)
                ),
            }
        }
        chosen
    };
    if chosen.is_empty() {
        return Err(NoCells(
            "no stack to check: name one in matrix.yaml's plugins: (a shared library with the C ABI), or register one in your binary (ipc_matrix::main!)".into(),
        )
        .into());
    }
    let mut subjects = Vec::new();
    for stack in chosen {
        subjects.extend(
            conformance::stack_subjects_up_to(stack, what.max_message)
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        );
    }
    // In a check's own process (started by `check_in_own_process`): that check, here.
    if let Some(name) = std::env::var_os(ONE_CHECK_ENV) {
        let name = name.to_string_lossy();
        return match conformance::run_one(&subjects, &name) {
            Some(Ok(())) => {
                if let Some(verdict) = std::env::var_os(VERDICT_ENV) {
                    std::fs::write(&verdict, PASSED).map_err(|e| {
                        anyhow::anyhow!(
                            "writing the check's verdict {}: {e}",
                            verdict.to_string_lossy()
                        )
                    })?;
                }
                Ok(exit_code::OK)
            }
            Some(Err(why)) => {
                eprintln!("{why}");
                Ok(exit_code::CELL_FAILED)
            }
            None => bail!("{ONE_CHECK_ENV}={name}: no such check among these stacks"),
        };
    }
    // Parsed here, not by clap's exit: `-- --help` is 0 and a bad argument 2, ours.
    let mut args = <Arguments as clap::Parser>::try_parse_from(
        std::iter::once("ipc-matrix conformance".to_owned()).chain(what.harness.iter().cloned()),
    )
    .unwrap_or_else(|e| {
        let _ = e.print();
        crate::exit_guard::exit(e.exit_code())
    });
    // The command line's own --color and --quiet, unless the harness's arguments say.
    let console = crate::term::console();
    if args.color.is_none() {
        args.color = Some(match console.color {
            true => ColorSetting::Always,
            false => ColorSetting::Never,
        });
    }
    args.quiet |= console.verbosity == Verbosity::Quiet;
    // libtest refuses no threads; the harness would wait for one forever.
    if args.test_threads == Some(0) {
        bail!("--test-threads 0: the checks need at least one thread");
    }
    let conclusion = conformance::run_elsewhere(&args, subjects, Arc::new(check_in_own_process));
    if conclusion.has_failed() {
        return Ok(exit_code::CELL_FAILED);
    }
    // A filter that selects no check (a mistyped --exact name), or arguments that leave
    // every check ignored (`--bench`), ran nothing: not a pass.
    let ran = conclusion.num_passed + conclusion.num_failed;
    if !args.list && ran == 0 {
        return Err(NoCells(format!(
            "the harness's arguments ({}) selected none of the {} checks; `ipc-matrix conformance -- --list` names them",
            what.harness.join(" "),
            conclusion.num_filtered_out
        ))
        .into());
    }
    Ok(exit_code::OK)
}

fn names(stacks: &[StackName]) -> String {
    if stacks.is_empty() {
        return "none".into();
    }
    stacks
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs the check `name` in a child of this binary with this command line, so that a
/// crash or a hang in the stack's code (a shared library's, most often) is that check's
/// failure, named, and the other checks still run.
fn check_in_own_process(name: &str) -> Result<(), CheckFailure> {
    let not_started = |what| {
        move |e: std::io::Error| CheckFailure::NotStarted {
            what,
            why: e.to_string(),
        }
    };
    let folder = ipc_matrix_transport::PrivateDir::create()
        .map_err(not_started("making a folder for the check's verdict"))?;
    let verdict = folder.path().join("verdict");
    let mut command = crate::this_binary::command().map_err(not_started("finding this binary"))?;
    command
        .args(std::env::args_os().skip(1))
        .env(ONE_CHECK_ENV, name)
        .env(VERDICT_ENV, &verdict)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = ipc_matrix_transport::spawn_within(&mut command, FORK_TO_EXEC_LIMIT)
        .map_err(not_started("starting the check's process"))?;
    let stderr = child.stderr.take();
    let (said_tx, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut stderr) = stderr {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut chunk) {
                kept.extend_from_slice(&chunk[..n]);
                let over = kept.len().saturating_sub(STDERR_KEPT);
                kept.drain(..over);
            }
        }
        let _ = said_tx.send(String::from_utf8_lossy(&kept).trim().to_owned());
    });
    // Inside the harness's own limit, so that this check fails and the others go on.
    let limit = conformance::CHECK_LIMIT - Duration::from_secs(10);
    let status = crate::this_binary::wait_within(&mut child, limit, Duration::from_millis(20))
        .map_err(not_started("waiting for the check's process"))?;
    let Some(status) = status else {
        return Err(CheckFailure::Hung { limit });
    };
    // A peer the check started may hold the pipe open a little longer.
    let said = said
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or_default();
    use std::os::unix::process::ExitStatusExt;
    let passed = crate::this_binary::read_childs_word(&verdict, 64, "a check's verdict")
        .is_some_and(|v| v == PASSED);
    match (status.code(), status.signal()) {
        (Some(0), _) if passed => Ok(()),
        // Ended with 0 by code that is not ours, before the check said it passed.
        (Some(0), _) => Err(CheckFailure::Unfinished { said }),
        (Some(1), _) if !said.is_empty() => Err(CheckFailure::Violated(said)),
        (_, Some(signal)) => Err(CheckFailure::Killed {
            signal,
            name: signal_name(signal),
            said,
        }),
        (code, _) => Err(CheckFailure::Exited { code, said }),
    }
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}
