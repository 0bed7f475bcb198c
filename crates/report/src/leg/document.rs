//! `results.json`: everything a report shows, in one versioned document, for tools.
//!
//! Schema (version [`REPORT_SCHEMA_VERSION`]; bump on any change a reader would notice):
//! - `schema_version`: integer.
//! - `leg`: `<target-triple>@<runner>`; `profile`: the matrix.yaml profile.
//! - `generated_at_unix`: when the report was written.
//! - `commit`: the commit the run was made from (`GITHUB_SHA`, or the checkout's `HEAD`),
//!   or `null`.
//! - `environment`: the machine and build of the first result (see `ipc-matrix-results`).
//! - `baseline`: `null`, or `{path, accepted_at_unix, cpu_model}` of the baseline compared with.
//! - `summary`: counts of cells `passed`, `failed`, and per verdict `regressed`,
//!   `improved`, `unchanged`, `new`; `gating_regressions`; `informational`: why verdicts
//!   only inform (an emulated leg, a baseline from another CPU), or `null`.
//! - `cells`: per cell, `result` (the cell result, schema `ipc-matrix-results` v4, with
//!   every timed round trip in `samples_ns`) and `verdict` (`verdict`: improved |
//!   unchanged | regressed | new | failed; `change`: `{ratio, ci_low, ci_high, p_value,
//!   margin}` or `null`; `gating`; `notes`).
//! - `not_run`: baseline cells this run did not produce.

use super::model::LegReport;
use crate::schema::REPORT_SCHEMA_VERSION;
use ipc_matrix_baseline::{CellVerdict, Verdict};
use ipc_matrix_results::{CellResult, Environment};
use serde::Serialize;

#[derive(Serialize)]
pub struct Document<'a> {
    pub schema_version: u32,
    pub leg: &'a str,
    pub profile: &'a str,
    pub generated_at_unix: u64,
    pub commit: Option<&'a str>,
    pub environment: Option<&'a Environment>,
    pub baseline: Option<BaselineRef<'a>>,
    pub summary: Summary<'a>,
    pub cells: Vec<CellEntry<'a>>,
    pub not_run: &'a [String],
}

#[derive(Serialize)]
pub struct BaselineRef<'a> {
    pub path: String,
    pub accepted_at_unix: u64,
    pub cpu_model: &'a str,
}

#[derive(Serialize)]
pub struct Summary<'a> {
    pub passed: usize,
    pub failed: usize,
    pub regressed: usize,
    pub improved: usize,
    pub unchanged: usize,
    pub new: usize,
    pub gating_regressions: usize,
    pub informational: Option<&'a str>,
}

#[derive(Serialize)]
pub struct CellEntry<'a> {
    pub result: &'a CellResult,
    pub verdict: &'a CellVerdict,
}

impl<'a> Document<'a> {
    pub fn new(report: &'a LegReport) -> Self {
        let verdict = &report.verdict;
        let passed = report.results.iter().filter(|r| r.outcome.passed).count();
        Self {
            schema_version: REPORT_SCHEMA_VERSION,
            leg: &verdict.leg,
            profile: &verdict.profile,
            generated_at_unix: report.generated_at_unix,
            commit: report.commit.as_deref(),
            environment: report.results.first().map(|r| &r.environment),
            baseline: report.baseline.as_ref().map(|b| BaselineRef {
                path: b.path.display().to_string(),
                accepted_at_unix: b.baseline.accepted_at_unix,
                cpu_model: &b.baseline.environment.cpu_model,
            }),
            summary: Summary {
                passed,
                failed: report.results.len() - passed,
                regressed: verdict.count(Verdict::Regressed),
                improved: verdict.count(Verdict::Improved),
                unchanged: verdict.count(Verdict::Unchanged),
                new: verdict.count(Verdict::New),
                gating_regressions: verdict.gating_regressions().count(),
                informational: verdict.informational.as_deref(),
            },
            cells: report
                .results
                .iter()
                .zip(&verdict.cells)
                .map(|(result, verdict)| CellEntry { result, verdict })
                .collect(),
            not_run: &verdict.not_run,
        }
    }
}

impl LegReport {
    /// `results.json`.
    pub fn json(&self) -> String {
        let mut json = serde_json::to_string_pretty(&Document::new(self))
            .expect("the report document always serializes");
        json.push('\n');
        json
    }
}
