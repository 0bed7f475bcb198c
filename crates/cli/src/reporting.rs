//! From stored results to reports and verdicts: what `ipc-matrix report`, `ipc-matrix run`
//! and `ipc-matrix baseline accept` share.

use crate::term::{fit, painted, Fitted, Paint};
use anyhow::{Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TableCell, CellAlignment, Table};
use ipc_matrix_baseline::{baseline_path, Baseline, Verdict};
use ipc_matrix_report::units::{nanos, p_value, ratio};
use ipc_matrix_report::{LegReport, LoadedBaseline};
use ipc_matrix_results::{read_run, run_dir};
use ipc_matrix_spec::RegressionPolicy;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where baselines are committed, relative to the workspace.
pub const DEFAULT_BASELINES: &str = "baselines";

pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The legs under `results` that have results for `profile`, sorted.
pub fn legs_with_results(results: &Path, profile: &str) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(results).with_context(|| {
        format!(
            "{}: no results folder; run the cells first (`ipc-matrix run` or `cargo nextest run`)",
            results.display()
        )
    })?;
    let mut legs: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(profile).join("cells").is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    legs.sort();
    Ok(legs)
}

/// Reads one leg's results and its baseline, and judges them.
pub fn leg_report(
    results: &Path,
    baselines: &Path,
    leg: &str,
    profile: &str,
    policy: RegressionPolicy,
    run: Option<&str>,
) -> Result<LegReport> {
    let dir = run_dir(results, leg, profile);
    let read = read_run(&dir, run).with_context(|| format!("reading the results of {leg}"))?;
    if read.results.is_empty() {
        match run {
            Some(run) => anyhow::bail!("{}: no cell results of run {run}", dir.display()),
            None => anyhow::bail!("{}: no cell results", dir.display()),
        }
    }
    let path = baseline_path(baselines, leg, profile);
    let baseline = Baseline::load(&path)?;
    if let Some(found) = &baseline {
        if found.leg != leg || found.profile != profile {
            anyhow::bail!(
                "{}: this baseline was recorded for {} ({}), not {leg} ({profile}); it was moved or copied",
                path.display(),
                found.leg,
                found.profile
            );
        }
    }
    let baseline = baseline.map(|baseline| LoadedBaseline { path, baseline });
    let mut report = LegReport::new(read.results, baseline, policy, now_unix());
    report.other_runs = read.other_runs;
    report.other_schema = read.other_schema;
    report.commit = crate::commit::current_commit();
    Ok(report)
}

/// The terminal view of a verdict: one row per cell, fitted to the terminal (margin, p,
/// baseline p50, instructions and p50 left out first), verdicts coloured.
pub fn verdict_table(report: &LegReport) -> Fitted {
    fit(verdict_rows(report), &[0], &[5, 4, 1, 7, 2])
}

fn verdict_rows(report: &LegReport) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "cell",
        "baseline p50",
        "p50",
        "ratio (95% CI)",
        "p",
        "margin",
        "verdict",
        "instructions",
    ]);
    let right = |s: String| TableCell::new(s).set_alignment(CellAlignment::Right);
    for cell in &report.verdict.cells {
        let dash = || "-".to_string();
        let mut verdict = cell.verdict.as_str().to_string();
        if !cell.gating {
            verdict.push_str(" (informational)");
        }
        table.add_row(vec![
            TableCell::new(&cell.cell_id),
            right(cell.baseline_p50_ns.map_or_else(dash, nanos)),
            right(cell.current_p50_ns.map_or_else(dash, nanos)),
            right(
                cell.change
                    .map_or_else(dash, |c| ratio(c.ratio, c.ci_low, c.ci_high)),
            ),
            right(cell.change.map_or_else(dash, |c| p_value(c.p_value))),
            right(
                cell.change
                    .map_or_else(dash, |c| format!("{:.0}%", c.margin * 100.0)),
            ),
            match (cell.verdict, cell.gating) {
                (Verdict::Regressed, true) => painted(verdict, Paint::Warn),
                (Verdict::Failed, _) => painted(verdict, Paint::Bad),
                (Verdict::Improved, true) => painted(verdict, Paint::Good),
                (_, false) => painted(verdict, Paint::Dim),
                _ => TableCell::new(verdict),
            },
            TableCell::new(instructions_text(report, cell)),
        ]);
    }
    table
}

/// One line: `x86_64-unknown-linux-gnu@native (quick): 0 regressed, 0 improved, 9 unchanged, 0 new, 0 failed`.
pub fn verdict_summary(report: &LegReport) -> String {
    let v = &report.verdict;
    let mut line = format!(
        "{} ({}): {}, {} improved, {} unchanged, {} new, {} failed",
        v.leg,
        v.profile,
        ipc_matrix_report::regressed_text(v),
        v.count(Verdict::Improved),
        v.count(Verdict::Unchanged),
        v.count(Verdict::New),
        v.count(Verdict::Failed),
    );
    if let Some(why) = &v.informational {
        line.push_str(&format!("; informational only: {why}"));
    }
    line
}

/// Lines for GitHub Actions' log (`::warning ...`), one per gating regression.
pub fn github_annotations(report: &LegReport) -> Vec<String> {
    report
        .verdict
        .gating_regressions()
        .filter_map(|cell| {
            let c = cell.change?;
            Some(format!(
                "::warning title=ipc-matrix regression ({})::{} is {} slower than its baseline (95% interval), p = {}",
                report.verdict.leg,
                cell.cell_id,
                ratio(c.ratio, c.ci_low, c.ci_high),
                p_value(c.p_value)
            ))
        })
        .collect()
}

pub fn running_on_github() -> bool {
    std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// The baselines folder: `--baselines`, else `baselines/` next to the matrix file.
pub fn baselines_dir(explicit: Option<PathBuf>, matrix: &Path) -> PathBuf {
    explicit.unwrap_or_else(|| match matrix.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(DEFAULT_BASELINES),
        _ => PathBuf::from(DEFAULT_BASELINES),
    })
}

/// `1329/rt unchanged 1.000x`: a counted cell's guest instructions per round trip (per
/// line for a logging cell: `412/line`) and their verdict, as the reports give them.
fn instructions_text(report: &LegReport, cell: &ipc_matrix_baseline::CellVerdict) -> String {
    let per = match report.results.iter().find(|r| r.cell.id == cell.cell_id) {
        Some(r) if !r.cell.kind().has_peer() => "line",
        _ => "rt",
    };
    match ipc_matrix_report::instruction_columns(cell) {
        (count, verdict, _) if cell.instructions.is_some() => {
            format!("{count}/{per} {verdict}")
        }
        _ => "-".into(),
    }
}
