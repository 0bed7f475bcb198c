//! Legs side by side (`ipc-matrix report --compare DIR DIR...`), in the order of
//! [`ARCHITECTURES`] whatever order they were given in:
//! - guest instructions per round trip on every counted leg, the measuring side and the
//!   peer apart, and for codec cells the encoding and the decoding apart too: counted under
//!   QEMU with one fixed CPU model per architecture; a count depends on the code, the
//!   compiler, the emulator and the guest's C library, each recorded with it;
//! - the median round trip of native legs, with ratios between native legs only. An
//!   emulated leg's timings measure the emulator on its host, not the CPU: they are shown
//!   apart, labelled so, and never as a ratio.

use crate::html::{escape, figure, page, table as html_table};
use crate::plots;
use crate::units::{instructions, nanos};
use ipc_matrix_results::write_atomically;
use ipc_matrix_results::{CellResult, InstructionCounts};
use plots::Series;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The architectures, in the order their columns are shown.
pub const ARCHITECTURES: [&str; 6] = ["x86_64", "aarch64", "s390x", "armv7", "riscv64", "ppc64le"];

/// The architecture of a target triple as the columns name it: `x86_64`,
/// `armv7` (`armv7-unknown-linux-gnueabihf`), `riscv64` (`riscv64gc-...`), `ppc64le`
/// (`powerpc64le-...`); another triple's first part.
pub fn architecture(triple: &str) -> String {
    let first = triple.split('-').next().unwrap_or(triple);
    [
        ("x86_64", "x86_64"),
        ("aarch64", "aarch64"),
        ("s390x", "s390x"),
        ("armv7", "armv7"),
        ("riscv64", "riscv64"),
        ("powerpc64le", "ppc64le"),
        ("ppc64le", "ppc64le"),
    ]
    .iter()
    .find(|(prefix, _)| first.starts_with(prefix))
    .map_or_else(|| first.to_string(), |(_, arch)| arch.to_string())
}

/// One leg's results, named by its leg and profile.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub runner: String,
    pub results: Vec<CellResult>,
}

impl Column {
    /// The architecture of the target its results were built for (without results, of
    /// the leg its name starts with).
    pub fn architecture(&self) -> String {
        match self.results.first() {
            Some(r) => architecture(&r.environment.target_triple),
            None => architecture(self.name.split('@').next().unwrap_or(&self.name)),
        }
    }

    /// The leg ran under an emulator: its runner (or a result's) is not `native`, or a
    /// result's leg is `<triple>@qemu` (also the count pass of a native leg). Its timings
    /// then measure the emulator on its host, not the CPU.
    pub fn emulated(&self) -> bool {
        self.runner != "native"
            || self
                .results
                .iter()
                .any(|r| r.environment.runner != "native" || r.leg.ends_with("@qemu"))
    }

    fn passed(&self, id: &str) -> Option<&CellResult> {
        self.results
            .iter()
            .find(|r| r.cell.id == id && r.outcome.passed)
    }

    fn p50(&self, id: &str) -> Option<u64> {
        self.passed(id)?.latency_ns.map(|l| l.p50)
    }

    fn counts(&self, id: &str) -> Option<&InstructionCounts> {
        self.passed(id)?.instructions.as_ref()
    }

    /// The emulated CPU models its counts were made on (`QEMU_CPU`), in first-seen order.
    fn cpu_models(&self) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        for r in &self.results {
            if let Some(model) = r.instructions.as_ref().and_then(|i| i.cpu_model.clone()) {
                if !models.contains(&model) {
                    models.push(model);
                }
            }
        }
        models
    }
}

/// The columns in the order of [`ARCHITECTURES`] (other architectures after them), a
/// native leg before an emulated one of the same architecture, otherwise as given.
pub fn arranged(columns: &[Column]) -> Vec<&Column> {
    let rank = |c: &Column| {
        let arch = c.architecture();
        let known = ARCHITECTURES.iter().position(|a| *a == arch);
        (known.unwrap_or(ARCHITECTURES.len()), c.emulated())
    };
    let mut sorted: Vec<&Column> = columns.iter().collect();
    sorted.sort_by_key(|c| rank(c));
    sorted
}

/// Every cell id that any leg has, with its scenario: scenarios in first-seen order, and
/// cells in first-seen order within each.
fn cell_ids(columns: &[&Column]) -> Vec<(String, String)> {
    let mut ids: Vec<(String, String)> = Vec::new();
    for column in columns {
        for r in &column.results {
            if !ids.iter().any(|(_, id)| *id == r.cell.id) {
                ids.push((r.cell.scenario.clone(), r.cell.id.clone()));
            }
        }
    }
    let mut scenarios: Vec<String> = Vec::new();
    for (scenario, _) in &ids {
        if !scenarios.contains(scenario) {
            scenarios.push(scenario.clone());
        }
    }
    ids.sort_by_key(|(scenario, _)| scenarios.iter().position(|s| s == scenario));
    ids
}

/// A leg with instruction counts: its column, its short header (the architecture, or the
/// leg's name when two counted legs share one), the CPU model QEMU emulated, and its
/// colour in the charts.
struct Counted<'a> {
    column: &'a Column,
    label: String,
    cpu: String,
    color: usize,
}

fn counted<'a>(columns: &[&'a Column]) -> Vec<Counted<'a>> {
    let with_counts: Vec<&Column> = columns
        .iter()
        .copied()
        .filter(|c| c.results.iter().any(|r| r.instructions.is_some()))
        .collect();
    let arches: Vec<String> = with_counts.iter().map(|c| c.architecture()).collect();
    with_counts
        .iter()
        .zip(&arches)
        .enumerate()
        .map(|(color, (column, arch))| {
            let shared = arches.iter().filter(|a| *a == arch).count() > 1;
            let models = column.cpu_models();
            Counted {
                column,
                label: if shared {
                    column.name.clone()
                } else {
                    arch.clone()
                },
                cpu: if models.is_empty() {
                    "CPU model not recorded".into()
                } else {
                    models.join(" / ")
                },
                color,
            }
        })
        .collect()
}

/// What one instruction column counts.
#[derive(Debug, Clone, Copy)]
enum Part {
    Measuring,
    Peer,
    Encode,
    Decode,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Measuring => "measuring",
            Part::Peer => "peer",
            Part::Encode => "encode",
            Part::Decode => "decode",
        }
    }

    fn value(self, counts: &InstructionCounts) -> Option<f64> {
        match self {
            Part::Measuring => counts.measuring,
            Part::Peer => counts.peer,
            Part::Encode => counts.encode,
            Part::Decode => counts.decode,
        }
    }

    /// The round-trip windows of a cell whose count depends on timing only inform; the
    /// encoding and decoding windows hold no wait and no read, so they never do.
    fn informs(self, counts: &InstructionCounts) -> bool {
        counts.timing_dependent && matches!(self, Part::Measuring | Part::Peer)
    }
}

/// The mark of a count that depends on timing (it informs only).
const INFORMS: &str = "†";

/// One table of counts: per cell, per counted leg, one column per part.
struct Grid {
    parts: [Part; 2],
    rows: Vec<GridRow>,
}

struct GridRow {
    scenario: String,
    id: String,
    /// Per leg, per part: the count, and whether it only informs.
    values: Vec<Option<(f64, bool)>>,
}

impl GridRow {
    fn text(value: &Option<(f64, bool)>) -> String {
        match value {
            Some((n, false)) => instructions(*n),
            Some((n, true)) => format!("{}{INFORMS}", instructions(*n)),
            None => "-".into(),
        }
    }
}

/// The rows of the cells with a count of `parts` on some leg.
fn grid(legs: &[Counted], ids: &[(String, String)], parts: [Part; 2]) -> Grid {
    let rows = ids
        .iter()
        .filter_map(|(scenario, id)| {
            let values: Vec<Option<(f64, bool)>> = legs
                .iter()
                .flat_map(|leg| {
                    let counts = leg.column.counts(id);
                    parts.map(|part| counts.and_then(|c| Some((part.value(c)?, part.informs(c)))))
                })
                .collect();
            values.iter().any(Option::is_some).then(|| GridRow {
                scenario: scenario.clone(),
                id: id.clone(),
                values,
            })
        })
        .collect();
    Grid { parts, rows }
}

fn grid_markdown(md: &mut String, legs: &[Counted], grid: &Grid) {
    let _ = write!(md, "| cell |");
    for leg in legs {
        for part in grid.parts {
            let _ = write!(md, " {} {} |", leg.label, part.name());
        }
    }
    let _ = writeln!(md, "\n|---|{}", "---:|".repeat(legs.len() * 2));
    for row in &grid.rows {
        let values: Vec<String> = row.values.iter().map(GridRow::text).collect();
        let _ = writeln!(md, "| `{}` | {} |", row.id, values.join(" | "));
    }
}

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

fn informs_anywhere(grid: &Grid) -> bool {
    grid.rows
        .iter()
        .any(|r| r.values.iter().any(|v| matches!(v, Some((_, true)))))
}

/// What the counted columns are: `x86_64 on Nehalem-v1 (<leg>), aarch64 on ...`, the
/// legs' names in code spans when `code`.
fn counted_legs_text(legs: &[Counted], code: bool) -> String {
    legs.iter()
        .map(|leg| {
            let (open, close) = if code { ("`", "`") } else { ("", "") };
            if leg.label == leg.column.name {
                format!("{open}{}{close} on {}", leg.label, leg.cpu)
            } else {
                format!(
                    "{} on {} ({open}{}{close})",
                    leg.label, leg.cpu, leg.column.name
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

const COUNTS_NOTE: &str = "Guest instructions per round trip, measuring side and peer, counted under QEMU on one fixed emulated CPU per architecture. A count depends on the code, the compilers, the emulated CPU model, the emulator and the C library the guest ran, each recorded with it, and on nothing else (paths, environment, machine speed and load; a cell whose count moved by more than 0.01 % under those when its baseline was made only informs). The count legs (`<arch>-unknown-linux-musl@qemu`) take none of these from the host: a static build against musl, compiled by zig, under the pinned QEMU, so they count the same on every machine. A count made with another compiler, emulator or C library than its baseline's only informs. Instruction sets differ (s390x moves 256 bytes in one instruction): read how a cell's count moves between architectures, not a count as a speed.";
const INFORMS_NOTE: &str = "depends on timing (a busy-poll wait, UDP, a delayed peer, a stream message of 64 KiB or more) and only informs.";
const CODEC_NOTE: &str = "The measuring side's encoding of one frame and decoding of one reply, each a window of its own inside the round trip: a codec that costs one CPU far more than the others shows here.";
const EMULATED_NOTE: &str = "emulated, not a CPU measure: their round trips measure the emulator on the host that ran it, so they are never compared";

/// The legs whose timings are compared: native ones.
fn native<'a>(columns: &[&'a Column]) -> Vec<&'a Column> {
    columns.iter().copied().filter(|c| !c.emulated()).collect()
}

fn emulated<'a>(columns: &[&'a Column]) -> Vec<&'a Column> {
    columns.iter().copied().filter(|c| c.emulated()).collect()
}

/// Native legs' medians, each after the first with its ratio to the first.
fn native_table(native: &[&Column], ids: &[(String, String)]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["cell".to_string()];
    for (i, c) in native.iter().enumerate() {
        header.push(format!("{} p50", c.name));
        if i > 0 {
            header.push("ratio".into());
        }
    }
    let rows = ids
        .iter()
        .map(|(_, id)| {
            let first = native.first().and_then(|c| c.p50(id));
            let mut row = vec![id.clone()];
            for (i, column) in native.iter().enumerate() {
                let value = column.p50(id);
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

/// Emulated legs' medians, labelled, without ratios.
fn emulated_table(
    emulated: &[&Column],
    ids: &[(String, String)],
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["cell".to_string()];
    header.extend(
        emulated
            .iter()
            .map(|c| format!("{} p50 (emulated, not a CPU measure)", c.name)),
    );
    let rows = ids
        .iter()
        .map(|(_, id)| {
            std::iter::once(id.clone())
                .chain(emulated.iter().map(|c| c.p50(id).map_or("-".into(), nanos)))
                .collect()
        })
        .collect();
    (header, rows)
}

fn native_note(native: &[&Column]) -> String {
    match native {
        [] => String::new(),
        [only] => format!(
            "Median round trip per cell on {} (the one native leg: no ratio).",
            only.name
        ),
        [first, ..] => format!(
            "Median round trip per cell; each ratio is to {} (2.00x: twice as slow).",
            first.name
        ),
    }
}

fn names(columns: &[&Column]) -> String {
    columns
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn markdown_table(md: &mut String, (header, rows): (Vec<String>, Vec<Vec<String>>)) {
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(header.len() - 1));
    for row in rows {
        let _ = writeln!(md, "| `{}` | {} |", row[0], row[1..].join(" | "));
    }
}

/// `comparison.md`: the instruction tables first when some leg was counted, then the
/// native legs' timings; emulated timings are only named (the HTML page lists them),
/// unless nothing else is there to show.
pub fn markdown(columns: &[Column]) -> String {
    let columns = arranged(columns);
    let ids = cell_ids(&columns);
    let legs = counted(&columns);
    let mut md = String::from("## ipc-matrix: legs side by side\n");
    if !legs.is_empty() {
        let counts = grid(&legs, &ids, [Part::Measuring, Part::Peer]);
        let _ = write!(
            md,
            "\n### Instructions per round trip\n\n{COUNTS_NOTE} Columns: {}.",
            counted_legs_text(&legs, true)
        );
        if informs_anywhere(&counts) {
            let _ = write!(md, " {INFORMS}: {INFORMS_NOTE}");
        }
        md.push_str("\n\n");
        grid_markdown(&mut md, &legs, &counts);
        let codec = grid(&legs, &ids, [Part::Encode, Part::Decode]);
        if !codec.rows.is_empty() {
            let _ = writeln!(
                md,
                "\n### Codec encoding and decoding (instructions per frame)\n\n{CODEC_NOTE}\n"
            );
            grid_markdown(&mut md, &legs, &codec);
        }
    }
    let (native, emulated) = (native(&columns), emulated(&columns));
    if !native.is_empty() {
        let _ = writeln!(
            md,
            "\n### Median round trip, native legs\n\n{}\n",
            native_note(&native)
        );
        markdown_table(&mut md, native_table(&native, &ids));
    }
    if !emulated.is_empty() {
        if native.is_empty() && legs.is_empty() {
            let _ = writeln!(
                md,
                "\n### Median round trip, emulated legs\n\nTimings {EMULATED_NOTE}.\n"
            );
            markdown_table(&mut md, emulated_table(&emulated, &ids));
        } else {
            let _ = writeln!(
                md,
                "\nTimings of {} are {EMULATED_NOTE} (comparison.html lists them).",
                names(&emulated)
            );
        }
    }
    md
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
fn codec_chart(legs: &[Counted], grid: &Grid) -> Result<String, String> {
    let rows: Vec<String> = grid.rows.iter().map(|r| r.id.clone()).collect();
    let panel = |part: Part, x_desc: &str| plots::Panel {
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
    plots::series_bars(
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
                plots::series_bars(
                    &format!("Instructions relative to {reference}, by scenario"),
                    &rows,
                    &[plots::Panel {
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
                plots::series_bars(
                    "Median round trip, native legs",
                    &rows,
                    &[plots::Panel {
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
                plots::series_bars(
                    &format!("Median round trip relative to {}", native[0].name),
                    &rows,
                    &[plots::Panel {
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

/// Writes `comparison.md` and `comparison.html` into `out`.
pub fn write(out: &Path, columns: &[Column]) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out)?;
    let (md, page) = (out.join("comparison.md"), out.join("comparison.html"));
    write_atomically(&md, markdown(columns).as_bytes())?;
    write_atomically(&page, html(columns).as_bytes())?;
    Ok((md, page))
}
