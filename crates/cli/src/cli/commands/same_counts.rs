//! `ipc-matrix report --same-counts-as DIR`: a leg's instruction counts against another
//! run's of the same leg, cell by cell: the proof that a count depends only on what the
//! repository pins (the same commit counted in another userland, on another machine). A
//! cell whose count gates (its verdict against the baseline gates) fails when the two
//! differ by more than its accepted runs' noise: the invariance limit the baseline's
//! perturbed runs are held to (`INSTRUCTION_INVARIANCE`, 0.0001 %), or three times their
//! spread when wider, as a verdict's margin widens. The host's C library moved counts by
//! 1-10 %, so that is far above the noise. A cell that only informs (timing-dependent,
//! or moved under the baseline's perturbations) is shown with how far it moved. Counts
//! equal to the last digit are told apart from those within the limit.

use anyhow::{Context, Result};
use ipc_matrix_baseline::{INSTRUCTION_INVARIANCE, INSTRUCTION_NOISE_FACTOR};
use ipc_matrix_report::LegReport;
use ipc_matrix_results::{read_run, CellResult};
use std::fmt::Write;
use std::path::Path;

/// One side's counts of a cell: measuring and peer instructions per round trip.
type Pair = (Option<f64>, Option<f64>);

fn counts_of(result: &CellResult) -> Option<Pair> {
    let counts = result.instructions.as_ref()?;
    Some((counts.measuring, counts.peer))
}

/// The comparison: a Markdown table and the cells that gate and differ.
pub struct SameCounts {
    pub table: String,
    pub differing: Vec<String>,
}

/// Compares `report`'s counts with those of the run in `other` (`<results>/<leg>/<profile>`).
pub fn compare(report: &LegReport, other: &Path) -> Result<SameCounts> {
    // The run there that finished last, as a report of that folder judges it.
    let theirs = read_run(other, None)
        .with_context(|| {
            format!(
                "--same-counts-as {}: expected <results>/<leg>/<profile>",
                other.display()
            )
        })?
        .results;
    if theirs.is_empty() {
        anyhow::bail!("--same-counts-as {}: no cell results", other.display());
    }
    let mut table = String::from(
        "| cell | measuring | there | peer | there | |\n|---|---:|---:|---:|---:|---|\n",
    );
    let (mut same, mut within, mut informs) = (0, 0, 0);
    let mut differing = Vec::new();
    for result in &report.results {
        let id = &result.cell.id;
        let Some(ours) = counts_of(result) else {
            continue;
        };
        let there = theirs.iter().find(|r| r.cell.id == *id).and_then(counts_of);
        let gates = report
            .verdict
            .cells
            .iter()
            .find(|v| v.cell_id == *id)
            .and_then(|v| v.instructions.as_ref())
            .is_some_and(|i| i.gating);
        let verdict = match there {
            None => {
                if gates {
                    differing.push(format!("{id} (not counted there)"));
                }
                "not counted there".to_string()
            }
            Some(t) if t == ours => {
                same += 1;
                "the same".to_string()
            }
            Some(t) => {
                let moved = moved_by(ours.0, t.0).max(moved_by(ours.1, t.1));
                let limit =
                    INSTRUCTION_INVARIANCE.max(INSTRUCTION_NOISE_FACTOR * spread(report, id));
                if !gates {
                    informs += 1;
                    format!("moved by {:.4} % (informs only)", moved * 100.0)
                } else if moved <= limit {
                    within += 1;
                    format!("the same within {:.4} %", moved * 100.0)
                } else {
                    differing.push(format!("{id} ({:+.4} %)", moved * 100.0));
                    format!("**differs by {:.4} %, and gates**", moved * 100.0)
                }
            }
        };
        let (m, p) = ours;
        let (tm, tp) = there.unwrap_or((None, None));
        let _ = writeln!(
            table,
            "| `{id}` | {} | {} | {} | {} | {verdict} |",
            number(m),
            number(tm),
            number(p),
            number(tp)
        );
    }
    let _ = writeln!(
        table,
        "\n{same} cells counted the same to the last digit, {within} within their accepted runs' noise (at least {:.4} %), {informs} moved that only inform, {} differ that gate.",
        INSTRUCTION_INVARIANCE * 100.0,
        differing.len()
    );
    Ok(SameCounts { table, differing })
}

/// The relative range of cell `id`'s accepted counts (both sides together) in the
/// report's baseline: 0 without one.
fn spread(report: &LegReport, id: &str) -> f64 {
    let Some(cell) = report
        .baseline
        .as_ref()
        .and_then(|b| b.baseline.cells.get(id))
    else {
        return 0.0;
    };
    let mut totals: Vec<f64> = cell
        .runs
        .iter()
        .filter_map(|r| r.instructions.as_ref())
        .map(|c| c.measuring.unwrap_or(0.0) + c.peer.unwrap_or(0.0))
        .collect();
    totals.sort_by(f64::total_cmp);
    match (totals.first(), totals.last()) {
        (Some(low), Some(high)) => (high - low) / totals[totals.len() / 2].max(1.0),
        _ => 0.0,
    }
}

fn moved_by(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) if a != b => (a - b).abs() / b.abs().max(1.0),
        (Some(_), None) | (None, Some(_)) => f64::INFINITY,
        _ => 0.0,
    }
}

fn number(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}
