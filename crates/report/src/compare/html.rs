//! `comparison.html`: the legs' counts and native timings as tables and charts, emulated
//! timings apart.

use super::model::{
    arranged, cell_ids, counted, counted_legs_text, emulated, emulated_table, grid,
    informs_anywhere, names, native, native_note, native_table, Column, Counted, Grid, GridRow,
    Part, CODEC_NOTE, COUNTS_NOTE, EMULATED_NOTE, INFORMS, INFORMS_NOTE,
};
use crate::render::charts::{self, ChartError, Series};
use crate::render::html::{escape, figure, page, table as html_table};
use crate::units::{instructions, nanos};
use std::fmt::Write;

/// A table of counts with a column group per leg (headed by its architecture and CPU
/// model) and a row heading each scenario.
fn grid_html(legs: &[Counted], grid: &Grid) -> String {
    let mut html = String::from("<div class=\"wide\"><table>\n<tr><th rowspan=\"2\">cell</th>");
    for leg in legs {
        let _ = write!(
            html,
            "<th colspan=\"2\" title=\"{}\">{}<br><span class=\"cpu\">{}</span></th>",
            escape(&leg.column.name),
            escape(&leg.label),
            escape(&leg.cpu)
        );
    }
    html.push_str("</tr>\n<tr>");
    for _ in legs {
        for part in grid.parts {
            let _ = write!(html, "<th>{}</th>", part.name());
        }
    }
    html.push_str("</tr>\n");
    let mut scenario = None;
    for row in &grid.rows {
        if scenario != Some(&row.scenario) {
            scenario = Some(&row.scenario);
            let _ = writeln!(
                html,
                "<tr class=\"group\"><th colspan=\"{}\">{}</th></tr>",
                1 + 2 * legs.len(),
                escape(&row.scenario)
            );
        }
        // The scenario heads its rows; each row names the rest of its cell id.
        let rest = row
            .id
            .strip_prefix(&format!("{}::", row.scenario))
            .unwrap_or(&row.id);
        let _ = write!(
            html,
            "<tr><td title=\"{}\">{}</td>",
            escape(&row.id),
            escape(rest)
        );
        for value in &row.values {
            match value {
                Some((_, true)) => {
                    let _ = write!(
                        html,
                        "<td class=\"informs\" title=\"depends on timing: informs only\">{}</td>",
                        escape(&GridRow::text(value))
                    );
                }
                _ => {
                    let _ = write!(html, "<td>{}</td>", escape(&GridRow::text(value)));
                }
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table></div>");
    html
}

/// The count of a cell on a leg that charts compare: both sides together (the measuring
/// side alone where a side is missing), unless it depends on timing.
fn chart_count(column: &Column, id: &str, both: bool) -> Option<f64> {
    let c = column.counts(id).filter(|c| !c.timing_dependent)?;
    if both {
        c.total(true)
    } else {
        c.measuring
    }
}

/// Per scenario, each other leg's geometric mean over cells of its count relative to the
/// first counted leg's; then the same for codec encoding and decoding.
fn relative_summary(legs: &[Counted], ids: &[(String, String)]) -> (Vec<String>, Vec<Series>) {
    let Some((reference, others)) = legs.split_first() else {
        return (Vec::new(), Vec::new());
    };
    let geometric_mean = |ratios: Vec<f64>| {
        (!ratios.is_empty())
            .then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
    };
    let round_trip = |leg: &Counted, scenario: &str| {
        let ratios = ids
            .iter()
            .filter(|(s, _)| s == scenario)
            .filter_map(|(_, id)| {
                // Both sides where both legs have both, else the measuring side.
                let both = [reference, leg]
                    .iter()
                    .all(|l| l.column.counts(id).is_some_and(|c| c.total(true).is_some()));
                let a = chart_count(reference.column, id, both)?;
                let b = chart_count(leg.column, id, both)?;
                (a > 0.0 && b > 0.0).then(|| b / a)
            })
            .collect();
        geometric_mean(ratios)
    };
    let stage = |leg: &Counted, part: Part| {
        let ratios = ids
            .iter()
            .filter_map(|(_, id)| {
                let a = part.value(reference.column.counts(id)?)?;
                let b = part.value(leg.column.counts(id)?)?;
                (a > 0.0 && b > 0.0).then(|| b / a)
            })
            .collect();
        geometric_mean(ratios)
    };
    let mut rows: Vec<String> = Vec::new();
    for (scenario, _) in ids {
        if !rows.contains(scenario) {
            rows.push(scenario.clone());
        }
    }
    let scenarios = rows.clone();
    rows.push("codec encoding".into());
    rows.push("codec decoding".into());
    let series: Vec<Series> = others
        .iter()
        .map(|leg| Series {
            name: leg.label.clone(),
            color: leg.color,
            values: scenarios
                .iter()
                .map(|s| round_trip(leg, s))
                .chain([stage(leg, Part::Encode), stage(leg, Part::Decode)])
                .collect(),
        })
        .collect();
    // Rows no leg has a value for are left out.
    let kept: Vec<usize> = (0..rows.len())
        .filter(|&i| series.iter().any(|s| s.values[i].is_some()))
        .collect();
    let rows = kept.iter().map(|&i| rows[i].clone()).collect();
    let series = series
        .into_iter()
        .map(|s| Series {
            values: kept.iter().map(|&i| s.values[i]).collect(),
            ..s
        })
        .collect();
    (rows, series)
}

/// Codec encoding and decoding side by side: one row per codec cell, one bar per counted
/// leg in each.
fn codec_chart(legs: &[Counted], grid: &Grid) -> Result<String, ChartError> {
    let rows: Vec<String> = grid.rows.iter().map(|r| r.id.clone()).collect();
    let panel = |part: Part, x_desc: &str| charts::Panel {
        x_desc: x_desc.into(),
        series: legs
            .iter()
            .filter_map(|leg| {
                let values: Vec<Option<f64>> = grid
                    .rows
                    .iter()
                    .map(|r| part.value(leg.column.counts(&r.id)?))
                    .collect();
                values.iter().any(Option::is_some).then(|| Series {
                    name: leg.label.clone(),
                    color: leg.color,
                    values,
                })
            })
            .collect(),
    };
    charts::series_bars(
        "Codec encoding and decoding: instructions per architecture",
        &rows,
        &[
            panel(Part::Encode, "instructions to encode one frame"),
            panel(Part::Decode, "instructions to decode one reply"),
        ],
        None,
        &instructions,
    )
}

/// `comparison.html`: the instruction tables, a summary chart of counts relative to the
/// first architecture and charts of codec encoding and decoding, the native legs' timings
/// (with a chart when there are two or more), and the emulated legs' timings apart.
pub fn html(columns: &[Column]) -> String {
    let columns = arranged(columns);
    let ids = cell_ids(&columns);
    let legs = counted(&columns);
    let mut body = String::new();
    if !legs.is_empty() {
        let counts = grid(&legs, &ids, [Part::Measuring, Part::Peer]);
        let _ = write!(
            body,
            "<h2>Instructions per round trip</h2>\n<p>{} Columns: {}.",
            escape(COUNTS_NOTE),
            escape(&counted_legs_text(&legs, false))
        );
        if informs_anywhere(&counts) {
            let _ = write!(
                body,
                " <span class=\"informs\">{INFORMS}</span>: {}",
                escape(INFORMS_NOTE)
            );
        }
        body.push_str("</p>\n");
        if legs.len() > 1 {
            let (rows, series) = relative_summary(&legs, &ids);
            let reference = &legs[0].label;
            body.push_str(&figure(
                charts::series_bars(
                    &format!("Instructions relative to {reference}, by scenario"),
                    &rows,
                    &[charts::Panel {
                        x_desc: format!(
                            "instructions / {reference}'s instructions, same cells (log scale)"
                        ),
                        series,
                    }],
                    Some(1.0),
                    &|v| format!("{v:.2}x"),
                ),
                &format!(
                    "Per scenario, the geometric mean over its cells of each architecture's instructions per round trip (both sides) divided by {reference}'s; counts that depend on timing are left out. The last rows: the same for codec encoding and decoding alone. A bar far from the others is code worth a look on that architecture; a count is not a time."
                ),
            ));
            body.push('\n');
        }
        body.push_str(&grid_html(&legs, &counts));
        body.push('\n');
        let codec = grid(&legs, &ids, [Part::Encode, Part::Decode]);
        if !codec.rows.is_empty() {
            let _ = writeln!(
                body,
                "<h2>Codec encoding and decoding (instructions per frame)</h2>\n<p>{}</p>",
                escape(CODEC_NOTE)
            );
            body.push_str(&grid_html(&legs, &codec));
            body.push('\n');
            body.push_str(&figure(
                codec_chart(&legs, &codec),
                "Instructions of the measuring side's encoding of one frame (left) and decoding of one reply (right), one bar per architecture (log scales); the table above has the numbers.",
            ));
            body.push('\n');
        }
    }
    let (native, emulated) = (native(&columns), emulated(&columns));
    if !native.is_empty() {
        let _ = writeln!(
            body,
            "<h2>Median round trip, native legs</h2>\n<p>{}</p>",
            escape(&native_note(&native))
        );
        let (header, rows) = native_table(&native, &ids);
        body.push_str(&html_table(&header, &rows));
        body.push('\n');
        if native.len() > 1 {
            let rows: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
            let arches: Vec<String> = native.iter().map(|c| c.architecture()).collect();
            let series: Vec<Series> = native
                .iter()
                .zip(&arches)
                .enumerate()
                .map(|(color, (c, arch))| Series {
                    // The architecture, unless two native legs share it.
                    name: if arches.iter().filter(|a| *a == arch).count() > 1 {
                        c.name.clone()
                    } else {
                        format!("{arch} native")
                    },
                    color,
                    values: ids
                        .iter()
                        .map(|(_, id)| c.p50(id).map(|v| v as f64))
                        .collect(),
                })
                .collect();
            body.push_str(&figure(
                charts::series_bars(
                    "Median round trip, native legs",
                    &rows,
                    &[charts::Panel {
                        x_desc: "p50 round trip (log scale)".into(),
                        series,
                    }],
                    None,
                    &|v| nanos(v as u64),
                ),
                "Median round trip of every cell on every native leg.",
            ));
            body.push('\n');
            let ratios: Vec<Series> = native
                .iter()
                .zip(&arches)
                .enumerate()
                .skip(1)
                .map(|(color, (c, arch))| Series {
                    name: format!("{arch} / {}", arches[0]),
                    color,
                    values: ids
                        .iter()
                        .map(|(_, id)| {
                            let first = native[0].p50(id)? as f64;
                            let value = c.p50(id)? as f64;
                            (first > 0.0).then(|| value / first)
                        })
                        .collect(),
                })
                .collect();
            body.push_str(&figure(
                charts::series_bars(
                    &format!("Median round trip relative to {}", native[0].name),
                    &rows,
                    &[charts::Panel {
                        x_desc: format!(
                            "p50 / {}'s p50 (log scale; 1.00x = as fast, right is slower)",
                            arches[0]
                        ),
                        series: ratios,
                    }],
                    Some(1.0),
                    &|v| format!("{v:.2}x"),
                ),
                "The ratios of the table above as bars from 1.00x: each native leg's median round trip over the first's, cell by cell.",
            ));
            body.push('\n');
        }
    }
    if !emulated.is_empty() {
        let _ = writeln!(
            body,
            "<h2>Median round trip, emulated legs (not a CPU measure)</h2>\n<p class=\"note\">Timings of {} are {}.</p>",
            escape(&names(&emulated)),
            escape(EMULATED_NOTE)
        );
        let (header, rows) = emulated_table(&emulated, &ids);
        body.push_str(&html_table(&header, &rows));
        body.push('\n');
    }
    page("ipc-matrix: legs side by side", &body)
}
