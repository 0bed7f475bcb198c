//! `history.md`: per leg, one row per cell with its median in the newest runs.

use super::model::{most_moved, trends, LegHistory, Run};
use crate::render::markdown::text;
use crate::units::{instructions, nanos};
use std::fmt::Write;

/// Runs shown as columns in Markdown: the newest ones.
const MARKDOWN_RUNS: usize = 8;

/// `history.md`: per leg, the runs, then one row per cell (most moved first) with its
/// median in each of the newest runs and its instructions in the newest.
pub fn markdown(legs: &[LegHistory], skipped: &[String]) -> String {
    let mut md = String::from("## ipc-matrix: history\n\n");
    for leg in legs {
        let runs = &leg.runs;
        let shown = runs.len().min(MARKDOWN_RUNS);
        let from = runs.len() - shown;
        let _ = writeln!(
            md,
            "### `{}`, profile `{}`: {} {}, {} to {}\n",
            leg.leg,
            leg.profile,
            runs.len(),
            if runs.len() == 1 { "run" } else { "runs" },
            runs.first().map_or(String::new(), Run::label),
            runs.last().map_or(String::new(), Run::label),
        );
        md.push_str("Median round trip per run, oldest to newest; the cells that moved most first (`moved`: newest over oldest).\n\n");
        let mut header = String::from("| cell | moved |");
        let mut rule = String::from("|---|---:|");
        for run in &runs[from..] {
            let _ = write!(header, " {} |", run.label());
            rule.push_str("---:|");
        }
        header.push_str(" baseline p50 | instructions/round trip (newest) |");
        rule.push_str("---:|---:|");
        let _ = writeln!(md, "{header}\n{rule}");
        for trend in most_moved(&trends(leg)) {
            let mut row = format!(
                "| `{}` | {} |",
                trend.id,
                trend
                    .moved()
                    .map_or_else(|| "-".into(), |m| format!("{m:.2}x"))
            );
            for (p50, failed) in trend.p50_ns[from..].iter().zip(&trend.failed[from..]) {
                let cell = match (p50, failed) {
                    (_, true) => "**FAIL**".to_string(),
                    (Some(v), _) => nanos(*v),
                    (None, _) => "-".into(),
                };
                let _ = write!(row, " {cell} |");
            }
            let _ = writeln!(
                md,
                "{row} {} | {} |",
                trend.band.map_or_else(|| "-".into(), |(b, _)| nanos(b)),
                trend
                    .instructions
                    .last()
                    .copied()
                    .flatten()
                    .map_or_else(|| "-".into(), instructions)
            );
        }
        md.push('\n');
    }
    skipped_notes(&mut md, skipped);
    md
}

fn skipped_notes(out: &mut String, skipped: &[String]) {
    if skipped.is_empty() {
        return;
    }
    out.push_str("### Left out\n\n");
    for s in skipped {
        let _ = writeln!(out, "- {}", text(s));
    }
}
