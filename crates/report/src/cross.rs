//! Legs side by side (`ipc-matrix report --compare DIR DIR...`): the same cells on
//! different CPUs or runners, with each leg's median round trip as a ratio to the first.

use crate::html::{escape, figure, page, table as html_table};
use crate::units::nanos;
use crate::{plots, write_atomically};
use ipc_matrix_results::CellResult;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One leg's results, named by its leg and profile.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub runner: String,
    pub results: Vec<CellResult>,
}

/// Every cell id that any leg has, in first-seen order.
fn cell_ids(columns: &[Column]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for column in columns {
        for r in &column.results {
            if !ids.contains(&r.cell.id) {
                ids.push(r.cell.id.clone());
            }
        }
    }
    ids
}

fn p50(column: &Column, id: &str) -> Option<u64> {
    column
        .results
        .iter()
        .find(|r| r.cell.id == id && r.outcome.passed)
        .and_then(|r| r.latency_ns)
        .map(|l| l.p50)
}

/// The header row and one row per cell: each leg's p50, and after the first leg, its
/// ratio to the first.
fn table(columns: &[Column]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["cell".to_string()];
    for (i, c) in columns.iter().enumerate() {
        header.push(c.name.clone());
        if i > 0 {
            header.push("ratio".into());
        }
    }
    let rows = cell_ids(columns)
        .into_iter()
        .map(|id| {
            let first = columns.first().and_then(|c| p50(c, &id));
            let mut row = vec![id.clone()];
            for (i, column) in columns.iter().enumerate() {
                let value = p50(column, &id);
                row.push(value.map_or("-".into(), nanos));
                if i > 0 {
                    row.push(match (first, value) {
                        (Some(a), Some(b)) if a > 0 => format!("{:.2}x", b as f64 / a as f64),
                        _ => "-".into(),
                    });
                }
            }
            row
        })
        .collect();
    (header, rows)
}

fn preamble(columns: &[Column]) -> String {
    let mut text = String::from(
        "Median round trip per cell; each ratio is to the first leg (2.00x: twice as slow).",
    );
    if columns.iter().any(|c| c.runner != "native") {
        text.push_str(" Emulated legs measure the emulator, not the CPU.");
    }
    text
}

pub fn markdown(columns: &[Column]) -> String {
    let (header, rows) = table(columns);
    let mut md = format!(
        "## ipc-matrix: legs side by side\n\n{}\n\n",
        preamble(columns)
    );
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(header.len() - 1));
    for row in rows {
        let _ = writeln!(md, "| `{}` | {} |", row[0], row[1..].join(" | "));
    }
    md
}

pub fn html(columns: &[Column]) -> String {
    let ids = cell_ids(columns);
    let series: Vec<(String, Vec<Option<f64>>)> = columns
        .iter()
        .map(|c| {
            let values = ids.iter().map(|id| p50(c, id).map(|v| v as f64)).collect();
            (c.name.clone(), values)
        })
        .collect();
    let plot = plots::grouped_bars(
        "Median round trip per leg",
        "p50 round trip",
        &ids,
        &series,
        &|v| nanos(v as u64),
    );
    let (header, rows) = table(columns);
    let body = format!(
        "<p>{}</p>\n{}\n{}",
        escape(&preamble(columns)),
        html_table(&header, &rows),
        figure(
            plot,
            "Median round trip of every cell on every leg (log scale)."
        )
    );
    page("ipc-matrix: legs side by side", &body)
}

/// Writes `comparison.md` and `comparison.html` into `out`.
pub fn write(out: &Path, columns: &[Column]) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out)?;
    let (md, page) = (out.join("comparison.md"), out.join("comparison.html"));
    write_atomically(&md, markdown(columns).as_bytes())?;
    write_atomically(&page, html(columns).as_bytes())?;
    Ok((md, page))
}
