//! Reports, per leg and across legs:
//! - `report.md`: GitHub-flavoured Markdown, fit for a job summary ([`markdown`]);
//! - `report.html`: one self-contained page with SVG plots, no network ([`html`], [`plots`]);
//! - `results.json`: the versioned document tools read ([`document`]);
//! - `history.md` / `history.html`: several runs' `results.json` as per-cell trends
//!   ([`history`]);
//! - `comparison.md` / `comparison.html`: legs side by side, sorted by architecture:
//!   instruction counts per architecture, native timings with ratios ([`cross`]).
//!
//! Layers, each module using only those below it: `units` and `model` (the leg's report
//! and what every page says of it in the same words); `changes`, `seed_tables`, `stacks`,
//! `plots` and `document`; `markdown`, then `html` (the leg's page, and the HTML helpers
//! the other pages borrow); `cross` and `history`; this file, which writes a leg's files.

pub mod changes;
pub mod cross;
pub mod document;
pub mod history;
mod html;
mod markdown;
mod model;
pub mod plots;
mod seed_tables;
pub mod stacks;
pub mod units;

use ipc_matrix_results::write_all_or_none;
pub use ipc_matrix_results::write_atomically;
use std::io;
use std::path::{Path, PathBuf};

pub use document::REPORT_SCHEMA_VERSION;
pub use html::html;
pub use markdown::markdown;
pub use model::{
    codec_results, fan_results, headline, instruction_columns, regressed_text, stability,
    transport_label, LegReport, LoadedBaseline, Stability, FLOORS_EXPLAINED, OTHER_SCHEMA_NOTE,
    STABILITY_MIN_SAMPLES,
};

/// The files one report consists of.
#[derive(Debug, Clone)]
pub struct Written {
    pub markdown: PathBuf,
    pub html: PathBuf,
    pub json: PathBuf,
}

/// Writes `report.md`, `report.html` and `results.json` into `dir`.
pub fn write_leg_report(dir: &Path, report: &LegReport) -> io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let written = Written {
        markdown: dir.join("report.md"),
        html: dir.join("report.html"),
        json: dir.join("results.json"),
    };
    let (markdown, html, json) = (markdown(report), html(report), report.json());
    write_all_or_none(&[
        (&written.markdown, markdown.as_bytes()),
        (&written.html, html.as_bytes()),
        (&written.json, json.as_bytes()),
    ])?;
    Ok(written)
}
