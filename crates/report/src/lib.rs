//! Reports, per leg and across legs:
//! - `report.md`: GitHub-flavoured Markdown, fit for a job summary ([`markdown`]);
//! - `report.html`: one self-contained page with SVG plots, no network ([`html`],
//!   [`leg::plots`]);
//! - `results.json`: the versioned document tools read ([`leg::document`]);
//! - `history.md` / `history.html`: several runs' `results.json` as per-cell trends
//!   ([`history`]);
//! - `comparison.md` / `comparison.html`: legs side by side, sorted by architecture:
//!   instruction counts per architecture, native timings with ratios ([`compare`]).
//!
//! Layers, top-down; each module uses only its own layer's siblings and the layers below
//! it, and no page uses another page:
//! 1. this file: the crate's names, re-exported from the layers below;
//! 2. the pages, one folder each with its model, its Markdown and its HTML: `leg` (one
//!    leg's report and `results.json`, and what they are drawn from), `compare` (legs side
//!    by side) and `history` (runs over time);
//! 3. `render`: what several pages are drawn with, HTML (escaping, the page and its style,
//!    figures, tables), Markdown (prose made safe) and charts (the SVG canvas, palette and
//!    axes, bars and trends of plain values);
//! 4. `units` (numbers as people read them) and `schema` (the version of `results.json`,
//!    which the leg's page writes and history reads).

pub mod compare;
pub mod history;
pub mod leg;
mod render;
mod schema;
pub mod units;

pub use ipc_matrix_results::write_atomically;

pub use leg::{
    codec_results, fan_results, headline, html, instruction_columns, markdown, regressed_text,
    stability, transport_label, write_leg_report, LegReport, LoadedBaseline, Stability, Written,
    FLOORS_EXPLAINED, OTHER_SCHEMA_NOTE, STABILITY_MIN_SAMPLES,
};
pub use render::charts::ChartError;
pub use schema::REPORT_SCHEMA_VERSION;
