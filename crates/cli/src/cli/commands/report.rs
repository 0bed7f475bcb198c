//! `ipc-matrix report`: each leg's reports judged against its baseline, or with
//! `--compare` result folders side by side. `ipc-matrix run` ends with the same judging.

use crate::cli::args::{Gate, Judging, StoredResults};
use crate::reporting::{
    baselines_dir, github_annotations, leg_report, running_on_github, verdict_summary,
    verdict_table,
};
use crate::{exit_code, say, say_always, say_verbose};
use anyhow::{Context, Result};
use ipc_matrix_report::compare::Column;
use ipc_matrix_report::write_leg_report;
use ipc_matrix_spec::RegressionPolicy;
use std::path::{Path, PathBuf};

pub fn run(
    stored: &StoredResults,
    judging: Judging,
    compare: Option<&[PathBuf]>,
    out: Option<PathBuf>,
    (fail_on_blocking_regressions, same_counts_as): (bool, Option<&Path>),
) -> Result<u8> {
    let Some(folders) = compare else {
        let gate = judging.gate();
        return stored.policy().and_then(|policy| {
            let legs = stored.legs()?;
            if same_counts_as.is_some() && legs.len() != 1 {
                anyhow::bail!(
                    "--same-counts-as compares one leg; give --leg (the results hold {})",
                    legs.join(", ")
                );
            }
            report_legs(
                &stored.results_dir(),
                &baselines_dir(judging.baselines, &stored.matrix),
                &legs,
                &stored.profile,
                (policy, gate),
                (None, same_counts_as),
            )
        });
    };
    let out = out.unwrap_or_else(|| stored.results_dir().join("compare"));
    if !fail_on_blocking_regressions {
        if folders.len() < 2 {
            anyhow::bail!(
                "--compare needs two folders or more (given {})",
                folders.len()
            );
        }
        return compare_folders(folders, &out);
    }
    // The merge gate: every folder is gated, those with cell results are also compared
    // (a leg that failed early may have none). The gate's verdict comes first.
    let with_cells: Vec<PathBuf> = folders
        .iter()
        .filter(|dir| dir.join("cells").is_dir())
        .cloned()
        .collect();
    let compared = if with_cells.len() >= 2 {
        compare_folders(&with_cells, &out).map(|_| ())
    } else {
        println!(
            "{} of the {} folders given have cell results: nothing to put side by side",
            with_cells.len(),
            folders.len()
        );
        Ok(())
    };
    if let Err(e) = &compared {
        eprintln!(
            "error: the comparison failed: {}",
            crate::error_text::error_text(e)
        );
    }
    let code = super::blocking::gate(folders, &stored.matrix, &stored.profile, Some(&out))?;
    compared.map(|()| code)
}

/// Prints the ids of the cells of one leg whose instruction counts gate, judged against
/// the baselines as a report judges them (the run that finished last), one per line.
pub fn gating_cells(stored: &StoredResults, judging: Judging) -> Result<u8> {
    let policy = stored.policy()?;
    let legs = stored.legs()?;
    let [leg] = legs.as_slice() else {
        anyhow::bail!(
            "--gating-cells lists one leg's cells; give --leg (the results hold {})",
            legs.join(", ")
        );
    };
    let baselines = baselines_dir(judging.baselines, &stored.matrix);
    if !baselines.is_dir() {
        anyhow::bail!(
            "--gating-cells: no baselines folder at {}: without a baseline no count gates",
            baselines.display()
        );
    }
    let report = leg_report(
        &stored.results_dir(),
        &baselines,
        leg,
        &stored.profile,
        policy,
        None,
    )?;
    for cell in &report.verdict.cells {
        if cell.instructions.as_ref().is_some_and(|i| i.gating) {
            println!("{}", cell.cell_id);
        }
    }
    Ok(exit_code::OK)
}

/// Judges and writes the reports of `legs`, each of one run: `run` (the run just made),
/// else the run that finished last. Exit 3 when a gating regression meets a strict run,
/// else 0 (regressions then only warn).
pub fn report_legs(
    results: &Path,
    baselines: &Path,
    legs: &[String],
    profile: &str,
    (policy, gate): (RegressionPolicy, Gate),
    (run, same_counts_as): (Option<&str>, Option<&Path>),
) -> Result<u8> {
    let gate = if policy.strict { Gate::Every } else { gate };
    let strict = gate != Gate::Warn;
    if !baselines.is_dir() {
        let missing = format!("no baselines folder at {}", baselines.display());
        if strict {
            // Every cell would be "new": a strict run that judges nothing must not pass.
            anyhow::bail!(
                "{missing}; a strict run needs baselines to judge against: give --baselines <folder>, or make a first baseline with `ipc-matrix baseline accept` and run without --strict"
            );
        }
        say!("note: {missing}; every cell is new (`ipc-matrix baseline accept` makes one)");
    }
    let mut regressions = 0;
    let mut differing_counts = false;
    for leg in legs {
        let report = leg_report(results, baselines, leg, profile, policy, run)?;
        let dir = ipc_matrix_results::run_dir(results, leg, profile);
        let written = write_leg_report(&dir, &report)
            .with_context(|| format!("writing the reports into {}", dir.display()))?;
        if report
            .verdict
            .cells
            .iter()
            .any(|c| c.change.is_some() || c.instructions.is_some())
        {
            say!("{}", verdict_table(&report));
        }
        // A note of one cell is printed whole; notes several cells share are one line with
        // their count and the first cells (all of them under --verbose).
        for group in ipc_matrix_report::leg::changes::note_groups(&report) {
            match group.cells.as_slice() {
                [(id, note)] => say!("note: {id}: {note}"),
                cells => {
                    let shown: Vec<&str> =
                        cells.iter().take(3).map(|(id, _)| id.as_str()).collect();
                    let more = cells.len().saturating_sub(shown.len());
                    say!(
                        "note: {}: {} cells ({}{})",
                        group.what,
                        cells.len(),
                        shown.join(", "),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    );
                    for (id, note) in cells {
                        say_verbose!("  {id}: {note}");
                    }
                }
            }
        }
        say!("{}", verdict_summary(&report));
        if report.other_schema > 0 {
            say!(
                "note: {} results in {} were written with another result schema (not {}) and were left out; re-run their cells (`ipc-matrix run`) to judge them",
                report.other_schema,
                dir.display(),
                ipc_matrix_results::RESULT_SCHEMA_VERSION
            );
        }
        if report.other_runs > 0 {
            say!(
                "note: {} results of other runs in {} were not judged",
                report.other_runs,
                dir.display()
            );
        }
        if running_on_github() {
            for line in github_annotations(&report) {
                say_always!("{line}");
            }
        }
        for cell in report.verdict.gating_regressions() {
            match &cell.uncounted {
                Some(why) => eprintln!("warning: {}: {}: {why}", report.verdict.leg, cell.cell_id),
                None => eprintln!(
                    "warning: {}: {} regressed",
                    report.verdict.leg, cell.cell_id
                ),
            }
        }
        regressions += match gate {
            Gate::Instructions => report.verdict.instruction_regressions().count(),
            Gate::Warn | Gate::Every => report.verdict.gating_regressions().count(),
        };
        say!(
            "reports: {}\n         {}\n         {}",
            written.markdown.display(),
            written.html.display(),
            written.json.display()
        );
        if let Some(other) = same_counts_as {
            let same = super::same_counts::compare(&report, other)?;
            say_always!(
                "instruction counts of {} here and in {}:\n\n{}",
                report.verdict.leg,
                other.display(),
                same.table
            );
            for cell in &same.differing {
                eprintln!(
                    "error: {}: {cell}: its count gates and is not the same in {}",
                    report.verdict.leg,
                    other.display()
                );
            }
            regressions += same.differing.len();
            differing_counts = !same.differing.is_empty();
        }
    }
    if differing_counts {
        // Not the same to the last digit is a failure whatever the gate: it was asked.
        return Ok(exit_code::REGRESSED);
    }
    Ok(match (regressions, strict) {
        (0, _) => exit_code::OK,
        (_, true) => {
            eprintln!(
                "error: {regressions} regression(s) and the run is strict{}",
                match gate {
                    Gate::Instructions => " about instructions",
                    Gate::Warn | Gate::Every => "",
                }
            );
            exit_code::REGRESSED
        }
        (_, false) => exit_code::OK,
    })
}

fn compare_folders(folders: &[PathBuf], out: &Path) -> Result<u8> {
    let columns = folders
        .iter()
        .map(|dir| {
            let run = ipc_matrix_results::read_run(dir, None).with_context(|| {
                format!(
                    "--compare {}: expected <results>/<leg>/<profile>",
                    dir.display()
                )
            })?;
            if run.other_schema > 0 || run.other_runs > 0 {
                say!(
                    "note: {}: {} result(s) of another result schema and {} of other runs left out; the column is run {}",
                    ipc_matrix_results::printable(&dir.display().to_string()),
                    run.other_schema,
                    run.other_runs,
                    run.run_id
                );
            }
            let results = run.results;
            let first = results.first().with_context(|| {
                format!(
                    "{}: no cell results of this result schema ({} of another left out)",
                    dir.display(),
                    run.other_schema
                )
            })?;
            Ok(Column {
                name: format!("{} ({})", first.leg, first.cell.profile),
                runner: first.environment.runner.clone(),
                results,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Two folders of the same leg and profile (before and after a change): name them by path.
    let mut columns = columns;
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    for (column, dir) in columns.iter_mut().zip(folders) {
        if names.iter().filter(|n| **n == column.name).count() > 1 {
            column.name = dir.display().to_string();
        }
    }
    let (md, html) = ipc_matrix_report::compare::write(out, &columns)?;
    println!("{}", ipc_matrix_report::compare::markdown(&columns));
    println!(
        "comparison: {}\n            {}",
        md.display(),
        html.display()
    );
    Ok(exit_code::OK)
}
