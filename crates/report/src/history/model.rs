//! History's model: the part of `results.json` it reads, the runs of each leg in order, and
//! each cell's trend across them.

use crate::schema::REPORT_SCHEMA_VERSION;
use crate::units::utc;
use ipc_matrix_results::CellResult;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

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
pub(super) fn most_moved(trends: &[Trend]) -> Vec<&Trend> {
    let mut sorted: Vec<&Trend> = trends.iter().collect();
    sorted.sort_by(|a, b| {
        let far = |t: &Trend| t.moved().map_or(0.0, |m| m.ln().abs());
        far(b).total_cmp(&far(a))
    });
    sorted
}
