//! History: several runs' `results.json` (for example the artifacts of successive
//! commits) read back and drawn as per-cell trends, in order of time, each run labelled
//! with its commit: the median round trip against the baseline's band, and guest
//! instructions per round trip where the cells were counted.
//!
//! Writes `history.md` (per leg, the cells that moved most first) and `history.html`
//! (the same, with a plot per cell).

use crate::document::REPORT_SCHEMA_VERSION;
use crate::html::{escape, figure, page};
use crate::units::{instructions, nanos, utc};
use ipc_matrix_results::CellResult;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Report schemas whose `results.json` history can read: 2 has no commit, 3 has.
pub const READABLE_SCHEMAS: [u32; 2] = [2, REPORT_SCHEMA_VERSION];

/// The part of a `results.json` history needs.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredReport {
    pub schema_version: u32,
    pub leg: String,
    pub profile: String,
    pub generated_at_unix: u64,
    /// The commit the run was made from, where the report knew it.
    #[serde(default)]
    pub commit: Option<String>,
    pub cells: Vec<StoredCell>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StoredCell {
    pub result: CellResult,
    pub verdict: StoredVerdict,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StoredVerdict {
    pub verdict: String,
    pub baseline_p50_ns: Option<u64>,
    pub change: Option<StoredChange>,
    pub instructions: Option<StoredInstructions>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct StoredChange {
    pub ratio: f64,
    pub margin: f64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct StoredInstructions {
    pub current: f64,
    pub baseline: Option<f64>,
    pub margin: f64,
}

/// One run of a leg, as history shows it.
#[derive(Debug, Clone)]
pub struct Run {
    pub file: PathBuf,
    pub report: StoredReport,
    /// When the run's cells finished (the last of them).
    pub finished_at_unix: u64,
    pub run_id: String,
    /// A digest of the file's bytes, where the reader gave one: two files of one run id
    /// whose digests differ are not one run read twice.
    pub digest: Option<u64>,
}

impl Run {
    pub fn new(file: PathBuf, report: StoredReport) -> Self {
        let finished_at_unix = report
            .cells
            .iter()
            .map(|c| c.result.finished_at_unix)
            .max()
            .unwrap_or(report.generated_at_unix);
        let run_id = report
            .cells
            .first()
            .map(|c| c.result.run_id.clone())
            .unwrap_or_default();
        Run {
            file,
            report,
            finished_at_unix,
            run_id,
            digest: None,
        }
    }

    /// What a plot's axis calls the run: its short commit, or its day and time.
    pub fn short_label(&self) -> String {
        match &self.report.commit {
            Some(commit) => commit[..commit.len().min(7)].to_string(),
            None => utc(self.finished_at_unix)[5..16].to_string(),
        }
    }

    /// `a1b2c3d 2026-11-30 14:03 UTC`, or the time alone.
    pub fn label(&self) -> String {
        let time = utc(self.finished_at_unix);
        match &self.report.commit {
            Some(commit) => format!("{} {time}", &commit[..commit.len().min(7)]),
            None => time,
        }
    }
}

/// Runs of one leg and profile, oldest first.
pub struct LegHistory {
    pub leg: String,
    pub profile: String,
    pub runs: Vec<Run>,
}

/// Sorts runs into legs (by architecture order of their names) and each leg's runs by
/// time, then commit; a run found twice (the same run id, e.g. one artifact downloaded
/// twice) is kept once. Returns the legs and a note per duplicate left out, naming it and
/// the file kept, and saying whether their contents differ.
pub fn arrange(runs: Vec<Run>) -> (Vec<LegHistory>, Vec<String>) {
    let mut legs: BTreeMap<(String, String), Vec<Run>> = BTreeMap::new();
    for run in runs {
        legs.entry((run.report.leg.clone(), run.report.profile.clone()))
            .or_default()
            .push(run);
    }
    let mut dropped = Vec::new();
    let legs = legs
        .into_iter()
        .map(|((leg, profile), mut runs)| {
            runs.sort_by(|a, b| {
                (a.finished_at_unix, &a.report.commit, &a.run_id).cmp(&(
                    b.finished_at_unix,
                    &b.report.commit,
                    &b.run_id,
                ))
            });
            let mut kept: Vec<Run> = Vec::with_capacity(runs.len());
            for run in runs {
                let first = kept
                    .iter()
                    .find(|k| !run.run_id.is_empty() && k.run_id == run.run_id);
                match first {
                    None => kept.push(run),
                    Some(first) => dropped.push(format!(
                        "{} is run {} of {leg} ({profile}) again, read once from {}{}",
                        run.file.display(),
                        run.run_id,
                        first.file.display(),
                        match (first.digest, run.digest) {
                            (Some(a), Some(b)) if a != b => "; the two files differ, so one of them was edited or is not that run's: check which",
                            _ => "",
                        }
                    )),
                }
            }
            LegHistory {
                leg,
                profile,
                runs: kept,
            }
        })
        .collect();
    (legs, dropped)
}

/// One cell across the runs of a leg: its median and instruction count per run (`None`
/// where the run lacks it or the cell failed), and the baseline as the last run saw it.
pub struct Trend {
    pub id: String,
    pub p50_ns: Vec<Option<u64>>,
    pub instructions: Vec<Option<f64>>,
    pub failed: Vec<bool>,
    /// The baseline median and the margin a change must clear, from the newest run that
    /// judged the cell.
    pub band: Option<(u64, f64)>,
    pub instruction_band: Option<(f64, f64)>,
}

impl Trend {
    /// Newest median over oldest: how far the cell moved across the history.
    pub fn moved(&self) -> Option<f64> {
        let mut measured = self.p50_ns.iter().flatten();
        let first = *measured.next()?;
        let last = *measured.last()?;
        (first > 0).then(|| last as f64 / first as f64)
    }
}

/// The trends of every cell of a leg, in the order of the newest run (cells the newest
/// run lacks follow).
pub fn trends(leg: &LegHistory) -> Vec<Trend> {
    let mut ids: Vec<String> = Vec::new();
    for run in leg.runs.iter().rev() {
        for cell in &run.report.cells {
            if !ids.contains(&cell.result.cell.id) {
                ids.push(cell.result.cell.id.clone());
            }
        }
    }
    ids.into_iter()
        .map(|id| {
            let cells: Vec<Option<&StoredCell>> = leg
                .runs
                .iter()
                .map(|run| run.report.cells.iter().find(|c| c.result.cell.id == id))
                .collect();
            let passed = |c: &&StoredCell| c.result.outcome.passed;
            let band = cells.iter().rev().flatten().find_map(|c| {
                Some((
                    c.verdict.baseline_p50_ns?,
                    c.verdict.change.map_or(0.0, |ch| ch.margin),
                ))
            });
            let instruction_band = cells.iter().rev().flatten().find_map(|c| {
                let i = c.verdict.instructions?;
                Some((i.baseline?, i.margin))
            });
            Trend {
                p50_ns: cells
                    .iter()
                    .map(|c| {
                        c.filter(passed)
                            .and_then(|c| c.result.latency_ns)
                            .map(|l| l.p50)
                    })
                    .collect(),
                instructions: cells
                    .iter()
                    .map(|c| {
                        c.filter(passed)
                            .and_then(|c| c.verdict.instructions)
                            .map(|i| i.current)
                    })
                    .collect(),
                failed: cells
                    .iter()
                    .map(|c| c.is_some_and(|c| !c.result.outcome.passed))
                    .collect(),
                band,
                instruction_band,
                id,
            }
        })
        .collect()
}

/// Trends sorted by how far they moved, most first (either way, on a log scale).
fn most_moved(trends: &[Trend]) -> Vec<&Trend> {
    let mut sorted: Vec<&Trend> = trends.iter().collect();
    sorted.sort_by(|a, b| {
        let far = |t: &Trend| t.moved().map_or(0.0, |m| m.ln().abs());
        far(b).total_cmp(&far(a))
    });
    sorted
}

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
                trend.moved().map_or("-".into(), |m| format!("{m:.2}x"))
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
                trend.band.map_or("-".into(), |(b, _)| nanos(b)),
                trend
                    .instructions
                    .last()
                    .copied()
                    .flatten()
                    .map_or("-".into(), instructions)
            );
        }
        md.push('\n');
    }
    skipped_notes(&mut md, skipped, false);
    md
}

/// `history.html`: per leg, the runs, then per cell (most moved first) a plot of its
/// median over the runs with the baseline's band, and of its instruction count.
pub fn html(legs: &[LegHistory], skipped: &[String]) -> String {
    let mut body = String::new();
    body.push_str("<nav><h2>Contents</h2><ul>");
    for (i, leg) in legs.iter().enumerate() {
        let _ = write!(
            body,
            "<li><a href=\"#leg-{i}\">{} ({}), {} runs</a></li>",
            escape(&leg.leg),
            escape(&leg.profile),
            leg.runs.len()
        );
    }
    body.push_str("</ul></nav>\n");
    for (i, leg) in legs.iter().enumerate() {
        let _ = writeln!(
            body,
            "<h2 id=\"leg-{i}\">{} ({})</h2>\n<p>Runs, oldest first: {}.</p>",
            escape(&leg.leg),
            escape(&leg.profile),
            escape(
                &leg.runs
                    .iter()
                    .map(Run::label)
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        );
        let labels: Vec<String> = leg.runs.iter().map(Run::short_label).collect();
        let trends = trends(leg);
        let sorted = most_moved(&trends);
        // The ten that moved most are open; the rest are folded.
        for (k, trend) in sorted.iter().enumerate() {
            if k == 10 {
                let _ = writeln!(
                    body,
                    "<details><summary>{} more cells</summary>",
                    sorted.len() - 10
                );
            }
            let _ = writeln!(
                body,
                "<h3><code>{}</code> {}</h3>",
                escape(&trend.id),
                trend
                    .moved()
                    .map_or(String::new(), |m| format!("moved {m:.2}x"))
            );
            body.push_str(&figure(
                crate::plots::trend(
                    &format!("{}: median round trip per run", trend.id),
                    "p50 round trip (log scale)",
                    &labels,
                    &trend.p50_ns.iter().map(|v| v.map(|v| v as f64)).collect::<Vec<_>>(),
                    trend.band.map(|(b, m)| (b as f64, m)),
                    &|v| nanos(v as u64),
                ),
                "The median round trip of each run (a gap: the cell failed or did not run), the baseline's median (dashed) and the band a change must leave to count.",
            ));
            if trend.instructions.iter().any(Option::is_some) {
                body.push_str(&figure(
                    crate::plots::trend(
                        &format!("{}: guest instructions per round trip per run", trend.id),
                        "instructions per round trip (log scale)",
                        &labels,
                        &trend.instructions,
                        trend.instruction_band,
                        &instructions,
                    ),
                    "Guest instructions per round trip counted under QEMU in each run, the baseline's count (dashed) and its band.",
                ));
            }
        }
        if sorted.len() > 10 {
            body.push_str("</details>\n");
        }
    }
    let mut notes = String::new();
    skipped_notes(&mut notes, skipped, true);
    body.push_str(&notes);
    page("ipc-matrix: history", &body)
}

fn skipped_notes(out: &mut String, skipped: &[String], html: bool) {
    if skipped.is_empty() {
        return;
    }
    if html {
        out.push_str("<h2>Left out</h2>\n<ul>\n");
        for s in skipped {
            let _ = writeln!(out, "<li>{}</li>", escape(s));
        }
        out.push_str("</ul>\n");
    } else {
        out.push_str("### Left out\n\n");
        for s in skipped {
            let _ = writeln!(out, "- {}", crate::markdown::text(s));
        }
    }
}

/// Writes `history.md` and `history.html` into `out`.
pub fn write(
    out: &Path,
    legs: &[LegHistory],
    skipped: &[String],
) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out)?;
    let (md, page) = (out.join("history.md"), out.join("history.html"));
    ipc_matrix_results::write_all_or_none(&[
        (&md, markdown(legs, skipped).as_bytes()),
        (&page, html(legs, skipped).as_bytes()),
    ])?;
    Ok((md, page))
}
