//! `ipc-matrix conformance`: the transport conformance suite (the checks of the `Channel`
//! contract every built-in transport passes) against a user's stacks, in one call: the
//! stacks in shared libraries that matrix.yaml's `plugins:` names, and those the binary
//! registers itself (`ipc_matrix::main!`). Its peers are this binary started again.

use crate::cli::args::NoCells;
use crate::exit_code;
use anyhow::{bail, Result};
use ipc_matrix_spec::StackName;
use ipc_matrix_transport::conformance::{self, Arguments};
use std::path::Path;

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
    let args = Arguments::from_iter(
        std::iter::once("ipc-matrix conformance".to_owned()).chain(what.harness.iter().cloned()),
    );
    // libtest refuses no threads; the harness would wait for one forever.
    if args.test_threads == Some(0) {
        bail!("--test-threads 0: the checks need at least one thread");
    }
    let conclusion = conformance::run(&args, subjects);
    if conclusion.has_failed() {
        return Ok(exit_code::CELL_FAILED);
    }
    // A filter that selects no check (a mistyped --exact name) is not a pass.
    let ran = conclusion.num_passed + conclusion.num_ignored;
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
