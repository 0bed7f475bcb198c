//! One leg's page: `report.md` ([`markdown()`]), `report.html` ([`html()`], its charts in
//! [`plots`]) and `results.json` ([`document`]), of one leg's run judged against its
//! baseline.
//!
//! Layers, top-down, each module using only those below it:
//! 1. this file, which writes the three files;
//! 2. `markdown`, `html` and `document`: the three formats, none using another;
//! 3. `changes` (what changed, in the order a reviewer reads it), `seed_tables` (the seeds'
//!    own measures), `stacks` (IPC stacks side by side) and `plots` (the leg's charts);
//! 4. `model`: the leg's report as every format reads it, and what they say of it in the
//!    same words.

pub mod changes;
pub mod document;
mod html;
mod markdown;
mod model;
pub mod plots;
mod seed_tables;
pub mod stacks;

pub use html::html;
pub use markdown::markdown;
pub use model::{
    codec_results, fan_results, headline, instruction_columns, regressed_text, stability,
    transport_label, LegReport, LoadedBaseline, Stability, FLOORS_EXPLAINED, OTHER_SCHEMA_NOTE,
    STABILITY_MIN_SAMPLES,
};

use ipc_matrix_results::write_all_or_none;
use std::io;
use std::path::{Path, PathBuf};

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
