//! `ipc-matrix run`: run the selected cells with a progress bar, print a summary, then
//! judge the stored results against the leg's baseline.

use crate::args::{regression_policy, Judging, Selection};
use crate::commands::report::report_legs;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use ipc_matrix::format::{summary_table, verdict_line};
use ipc_matrix::reporting::baselines_dir;
use ipc_matrix::{default_out_dir, exit_code, run_and_store, RunFolder, Stored};
use ipc_matrix_results::{Environment, Failure, FailureKind};
use ipc_matrix_scenario::RunOptions;
use ipc_matrix_spec::Cell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub fn run(
    selection: &Selection,
    out: Option<PathBuf>,
    fail_fast: bool,
    judging: Judging,
) -> Result<u8> {
    selection.cells().and_then(|cells| {
        let out = out.unwrap_or_else(|| default_out_dir(&selection.root()));
        let environment = Environment::capture();
        let leg = environment.leg();
        // Before any cell runs: the folder is writable, and no other run writes into it.
        let folder = RunFolder::claim(&out, &leg, &selection.profile)?;
        for path in folder.removed() {
            println!(
                "removed a temporary file of a crashed write: {}",
                path.display()
            );
        }
        let options = RunOptions::from_env().map_err(anyhow::Error::msg)?;
        let code = run_cells(&cells, &out, &options, fail_fast)?;
        if !environment.is_optimized() {
            return Ok(code); // nothing was stored to judge
        }
        let policy = regression_policy(&selection.matrix, &selection.profile)?;
        let baselines = baselines_dir(judging.baselines.clone(), &selection.matrix);
        let judged = report_legs(
            &out,
            &baselines,
            &[leg],
            &selection.profile,
            (policy, judging.gate()),
            Some(&options.run_id),
        )?;
        Ok(code.max(judged))
    })
}

fn run_cells(cells: &[Cell], out: &Path, options: &RunOptions, fail_fast: bool) -> Result<u8> {
    let progress = if std::io::stdout().is_terminal() {
        let bar = ProgressBar::new(cells.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    for path in ipc_matrix::remove_stale_artifacts_once() {
        println!("removed a leftover of a crashed run: {}", path.display());
    }
    let mut results = Vec::new();
    let mut not_stored = 0;
    let mut lost = 0;
    for cell in cells {
        progress.set_message(cell.id.clone());
        let (mut result, stored) = run_and_store(cell, options, out);
        match stored {
            Stored::At(_) => {}
            Stored::NotOptimized => not_stored += 1,
            // A result that is not on disk cannot be judged or reported: the cell fails.
            Stored::Failed(e) => {
                lost += 1;
                result.outcome.passed = false;
                result.outcome.failure.get_or_insert(Failure {
                    kind: FailureKind::Setup,
                    round_trip: None,
                    reason: format!("its result could not be stored: {e}"),
                });
                eprintln!("error: the result of {} was not stored: {e}", cell.id);
            }
        }
        let line = verdict_line(&result);
        if progress.is_hidden() {
            println!("{line}");
        } else {
            progress.println(line);
        }
        progress.inc(1);
        let failed = !result.outcome.passed;
        results.push(result);
        if failed && fail_fast {
            break;
        }
    }
    progress.finish_and_clear();

    println!("{}", summary_table(&results));
    let failed = results.iter().filter(|r| !r.outcome.passed).count();
    let run_dir = results
        .first()
        .map(|r| ipc_matrix_results::run_dir(out, &r.leg, &r.cell.profile))
        .unwrap_or_default();
    if not_stored > 0 {
        println!(
            "note: this is an unoptimized build; its {not_stored} results were not stored. \
             Build with --release to keep timings."
        );
    } else {
        println!("results: {}", run_dir.join("cells").display());
    }
    if lost > 0 {
        println!("{lost} results could not be stored; those cells count as failed");
    }
    println!(
        "run {}: {} cells: {} passed, {failed} failed{}",
        options.run_id,
        results.len(),
        results.len() - failed,
        if results.len() < cells.len() {
            format!(", {} not run (--fail-fast)", cells.len() - results.len())
        } else {
            String::new()
        }
    );
    Ok(if failed > 0 {
        exit_code::CELL_FAILED
    } else {
        exit_code::OK
    })
}
