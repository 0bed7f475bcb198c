//! `ipc-matrix run`: run the selected cells with a progress bar, print a summary, then
//! judge the stored results against the leg's baseline.

use crate::cli::args::{Judging, Selection};
use crate::cli::commands::report::report_legs;
use crate::format::{numbered_verdict_line, skipped_line, summary_table};
use crate::progress::{previous_seconds, Plan, Progress};
use crate::reporting::baselines_dir;
use crate::term::{console, MessageFormat, JSON_FORMAT_VERSION};
use crate::{default_out_dir, exit_code, say, say_always, say_verbose, RunFolder, Stored};
use anyhow::Result;
use ipc_matrix_report::units::nanos;
use ipc_matrix_results::{CellResult, Environment, Failure, FailureKind};
use ipc_matrix_scenario::{unmet_need, RunOptions};
use ipc_matrix_spec::Cell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub fn run(
    selection: &Selection,
    out: Option<PathBuf>,
    fail_fast: bool,
    judging: Judging,
) -> Result<u8> {
    let cells = selection.cells()?;
    let out = out.unwrap_or_else(|| default_out_dir(&selection.root()));
    let environment = Environment::capture();
    let leg = environment.leg();
    // Before any cell runs: the folder is writable, and no other run writes into it.
    let folder = RunFolder::claim(&out, &leg, &selection.profile)?;
    for path in folder.removed() {
        say!(
            "removed a temporary file of a crashed write: {}",
            path.display()
        );
    }
    let mut options = RunOptions::from_env().map_err(anyhow::Error::msg)?;
    options.project_dir = selection.root();
    let baselines = baselines_dir(judging.baselines.clone(), &selection.matrix);
    say_verbose!("matrix:      {}", selection.matrix.display());
    say_verbose!("results:     {}", folder.dir().join("cells").display());
    say_verbose!("baselines:   {}", baselines.display());
    say_verbose!(
        "environment: {}, {} CPUs, kernel {}, {}, {}, build {} (opt-level {})",
        environment.cpu_model,
        environment.logical_cores,
        environment.kernel,
        environment.rustc,
        leg,
        environment.build_profile,
        environment.opt_level
    );
    json_line(serde_json::json!({
        "type": "run-started",
        "version": JSON_FORMAT_VERSION,
        "run_id": options.run_id,
        "leg": leg,
        "profile": selection.profile,
        "cells": cells.len(),
        "matrix": absolute(&selection.matrix),
        "results_dir": absolute(&folder.dir().join("cells")),
    }));
    let ran = run_cells(&cells, &out, &mut options, fail_fast, folder.dir())?;
    // Nothing is judged when every cell was skipped: no result was stored.
    let judged = if environment.is_optimized() && !ran.results.is_empty() {
        let policy = selection.policy()?;
        report_legs(
            &out,
            &baselines,
            std::slice::from_ref(&leg),
            &selection.profile,
            (policy, judging.gate()),
            (Some(&options.run_id), None),
        )?
    } else {
        exit_code::OK // nothing was stored to judge
    };
    let mut code = ran.code.max(judged);
    // A run that ran no cell is never a pass: every selected cell was skipped here.
    if ran.results.is_empty() && ran.skipped > 0 && code == exit_code::OK {
        eprintln!(
            "error: none of the {} selected cells can run on this machine (each skipped above, saying what it lacks)",
            ran.skipped
        );
        code = exit_code::NO_CELLS;
    }
    let failed = ran.results.iter().filter(|r| !r.outcome.passed).count();
    let not_run = cells.len() - ran.results.len() - ran.skipped;
    json_line(serde_json::json!({
        "type": "run-finished",
        "version": JSON_FORMAT_VERSION,
        "run_id": options.run_id,
        "leg": leg,
        "profile": selection.profile,
        "cells": cells.len(),
        "passed": ran.results.len() - failed,
        "failed": failed,
        "skipped": ran.skipped,
        "not_run": not_run,
        "not_stored": ran.not_stored,
        "exit_code": code,
        "results_dir": (ran.not_stored == 0).then(|| absolute(&folder.dir().join("cells"))),
    }));
    say_always!(
        "run {}: {} cells: {} passed, {failed} failed{}{}",
        options.run_id,
        ran.results.len() + ran.skipped,
        ran.results.len() - failed,
        if ran.skipped > 0 {
            format!(
                ", {} skipped (this machine lacks what they need)",
                ran.skipped
            )
        } else {
            String::new()
        },
        if not_run > 0 {
            format!(", {not_run} not run (--fail-fast)")
        } else {
            String::new()
        }
    );
    Ok(code)
}

/// What the cells of a run came to.
struct Ran {
    results: Vec<CellResult>,
    code: u8,
    /// Results of an unoptimized build, not stored.
    not_stored: usize,
    /// Cells this machine cannot run (each named with its need as it came).
    skipped: usize,
}

/// `path` from the root, for tools that run elsewhere.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// One line of JSON on stdout, under `--message-format json`.
fn json_line(value: serde_json::Value) {
    if console().format == MessageFormat::Json {
        println!("{value}");
    }
}

fn run_cells(
    cells: &[Cell],
    out: &Path,
    options: &mut RunOptions,
    fail_fast: bool,
    run_dir: &Path,
) -> Result<Ran> {
    let previous = run_dir.join("cells");
    let plan = Plan::new(cells, |cell| previous_seconds(&previous, cell));
    let progress = Progress::new(
        plan,
        cells.len(),
        std::io::stderr().is_terminal(),
        console().color,
    );
    options.progress = progress.hook();
    for path in crate::remove_stale_artifacts_once() {
        say!("removed a leftover of a crashed run: {}", path.display());
    }
    let mut results = Vec::new();
    let mut not_stored = 0;
    let mut lost = 0;
    let mut skipped = 0;
    for (index, cell) in cells.iter().enumerate() {
        progress.start(index, &cell.id);
        let place = (index + 1, cells.len());
        // A cell this machine cannot run is named, with what it needs: never a pass.
        if let Some(need) = unmet_need(cell) {
            skipped += 1;
            progress.finish(index);
            progress.suspend(|| {
                say_always!("{}", skipped_line(&cell.id, &need, place));
                json_line(serde_json::json!({
                    "type": "cell-skipped",
                    "version": JSON_FORMAT_VERSION,
                    "run_id": options.run_id,
                    "index": place.0,
                    "total": place.1,
                    "id": cell.id,
                    "reason": need,
                }));
            });
            continue;
        }
        let (mut result, stored) = crate::run_and_store_isolating_plugins(cell, options, out);
        let file = match stored {
            Stored::At(path) => Some(path),
            Stored::NotOptimized => {
                not_stored += 1;
                None
            }
            // A result that is not on disk cannot be judged or reported: the cell fails.
            Stored::Failed(e) => {
                lost += 1;
                result.outcome.passed = false;
                result.outcome.failure.get_or_insert_with(|| Failure {
                    kind: FailureKind::Setup,
                    round_trip: None,
                    reason: format!("its result could not be stored: {e}"),
                });
                progress
                    .suspend(|| eprintln!("error: the result of {} was not stored: {e}", cell.id));
                None
            }
        };
        progress.finish(index);
        progress.suspend(|| {
            let line = numbered_verdict_line(&result, Some(place));
            if result.outcome.passed {
                say!("{line}");
            } else {
                say_always!("{line}");
            }
            for detail in details(&result, file.as_deref()) {
                say_verbose!("    {detail}");
            }
            json_line(cell_event(&result, place, file.as_deref()));
        });
        let failed = !result.outcome.passed;
        results.push(result);
        if failed && fail_fast {
            break;
        }
    }
    progress.clear();

    if !results.is_empty() {
        say!("{}", summary_table(&results));
    }
    let run_dir = results
        .first()
        .map(|r| ipc_matrix_results::run_dir(out, &r.leg, &r.cell.profile))
        .unwrap_or_default();
    if not_stored > 0 {
        say!(
            "note: this is an unoptimized build; its {not_stored} results were not stored. \
             Build with --release to keep timings."
        );
    } else if !results.is_empty() {
        say!("results: {}", run_dir.join("cells").display());
    }
    if lost > 0 {
        say_always!("{lost} results could not be stored; those cells count as failed");
    }
    let failed = results.iter().any(|r| !r.outcome.passed);
    Ok(Ran {
        results,
        code: if failed {
            exit_code::CELL_FAILED
        } else {
            exit_code::OK
        },
        not_stored,
        skipped,
    })
}

/// What `--verbose` adds under a cell's line: where it ran, the machine probes, its floor,
/// how long it took and where its result is.
fn details(result: &CellResult, file: Option<&Path>) -> Vec<String> {
    let mut lines = Vec::new();
    let or_dash = |ns: Option<u64>| ns.map_or_else(|| "-".to_string(), nanos);
    let cpus = match (result.placement.measurer_cpu, result.placement.peer_cpu) {
        (Some(m), Some(p)) => format!("measuring on CPU {m}, peer on CPU {p}"),
        (Some(m), None) => format!("measuring on CPU {m}"),
        _ => "CPUs left to the scheduler".to_string(),
    };
    let pressure = result
        .cpu_pressure
        .map_or_else(String::new, |p| format!("; CPU pressure {p:.2}"));
    lines.push(format!(
        "{cpus}; a cache line between them {} before, {} after{pressure}",
        or_dash(result.core_to_core_ns),
        or_dash(result.core_to_core_after_ns),
    ));
    if let Some(floor) = &result.floor {
        lines.push(format!(
            "floor: {} {} over {} round trips of {} B",
            floor.probe,
            nanos(floor.p50_ns),
            floor.round_trips,
            floor.payload_bytes
        ));
    }
    let mut took = format!(
        "{} round trips measured, {} lost, first {}; took {:.2} s",
        result.measured_round_trips,
        result.lost,
        or_dash(result.first_round_trip_ns),
        result.wall_seconds
    );
    if let Some(delay) = result.peer_delay_us {
        took.push_str(&format!("; peer slowed by {delay} us a reply"));
    }
    lines.push(took);
    if let Some(link) = result.cell.host.netns() {
        lines.push(format!(
            "peer on a second host: a network namespace over a veth link, MTU {}",
            link.mtu
        ));
    }
    if let Some(f) = result.load.and_then(|load| load.fragmentation) {
        lines.push(format!(
            "IP fragments on the second host: {} per request, {} requests reassembled, {} failed; {} fragments made for echoes",
            f.fragments_per_datagram()
                .map_or_else(|| "-".to_string(), |n| format!("{n:.1}")),
            f.reassembled,
            f.reassembly_failed,
            f.fragments_created
        ));
    }
    if let Some(file) = file {
        lines.push(format!("result: {}", file.display()));
    }
    lines
}

/// The `cell-finished` event of `--message-format json`.
fn cell_event(
    result: &CellResult,
    (index, total): (usize, usize),
    file: Option<&Path>,
) -> serde_json::Value {
    let l = result.latency_ns;
    serde_json::json!({
        "type": "cell-finished",
        "version": JSON_FORMAT_VERSION,
        "run_id": result.run_id,
        "index": index,
        "total": total,
        "id": result.cell.id,
        "kind": result.cell.kind().as_str(),
        "transport": result.cell.transport_label(),
        "payload_bytes": result.cell.payload_bytes,
        "passed": result.outcome.passed,
        "failure": result.outcome.failure,
        "measured_round_trips": result.measured_round_trips,
        "lost": result.lost,
        "p50_ns": l.map(|l| l.p50),
        "p99_ns": l.map(|l| l.p99),
        "max_ns": l.map(|l| l.max),
        "floor_probe": result.floor.map(|f| f.probe),
        "floor_p50_ns": result.floor.map(|f| f.p50_ns),
        "floor_ratio": result.floor.and_then(|f| f.ratio),
        "message_path": result.message_path.map(|p| p.as_str()),
        "wall_seconds": result.wall_seconds,
        "result_file": file.map(absolute),
    })
}
