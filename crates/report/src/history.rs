//! History: several runs' `results.json` (for example the artifacts of successive
//! commits) read back and drawn as per-cell trends, in order of time, each run labelled
//! with its commit: the median round trip against the baseline's band, and guest
//! instructions per round trip where the cells were counted.
//!
//! Writes `history.md` (per leg, the cells that moved most first) and `history.html`
//! (the same, with a plot per cell).

mod html;
mod markdown;
mod model;

pub use html::html;
pub use markdown::markdown;
pub use model::{
    arrange, trends, LegHistory, Run, StoredCell, StoredChange, StoredInstructions, StoredReport,
    StoredVerdict, Trend, READABLE_SCHEMAS,
};

use std::path::{Path, PathBuf};

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
