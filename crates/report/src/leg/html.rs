//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network),
//! 1400 px wide at most. It opens with the headline and a list of contents, then what
//! changed (each failure, regression and improvement with its ratio, interval and plot),
//! the table of all cells with the unchanged ones collapsed, the floors, and one section
//! per scenario kind with the plots that suit it; notes shared by many cells are grouped.

use super::changes::{gates, note_groups, Changes, Row};
use super::model::{headline, LegReport};
use super::plots;
use super::seed_tables::{seed_tables, SeedTable};
use crate::render::charts;
use crate::render::html::{breakable, escape, figure, page, table};
use crate::units::{bytes, nanos, p_value, ratio, utc};
use ipc_matrix_baseline::{CellVerdict, Verdict};
use ipc_matrix_results::CellResult;
use ipc_matrix_spec::ScenarioKind;
use std::fmt::Write;

/// One row per cell: its percentiles, rates, baseline and verdicts. Informational
/// verdicts are in italics (the legend says so).
fn cell_table(rows: &[Row]) -> String {
    let mut html = String::from("<table>\n<tr><th>cell</th><th>p50</th><th>p99</th><th>p99.9</th><th>round trips/s</th><th>MB/s</th><th>baseline p50</th><th>ratio (95 % CI)</th><th>verdict</th><th>vs floor</th><th>instructions/ round trip</th><th>instructions vs baseline</th></tr>\n");
    for (result, cell) in rows {
        let l = result.latency_ns;
        let dash = || "-".to_string();
        let class = match cell.verdict {
            Verdict::Regressed if cell.gating => "regressed",
            Verdict::Improved => "improved",
            Verdict::Failed => "failed",
            _ if !cell.gating => "informs",
            _ => "",
        };
        let (instructions, instruction_verdict, regressed) =
            super::model::instruction_columns(cell);
        let instruction_class = match &cell.instructions {
            _ if regressed => "regressed",
            Some(i) if !i.gating => "informs",
            _ => "",
        };
        let _ = writeln!(
            html,
            "<tr id=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td>{}</td><td class=\"{instruction_class}\">{}</td></tr>",
            row_anchor(&result.cell.id),
            breakable(&result.cell.id),
            l.map_or_else(dash, |l| nanos(l.p50)),
            l.map_or_else(dash, |l| nanos(l.p99)),
            l.map_or_else(dash, |l| nanos(l.p999)),
            result.round_trips_per_sec.map_or_else(dash, |v| format!("{v:.0}")),
            result.throughput.map_or_else(dash, |t| format!("{:.1}", t.mb_per_s)),
            cell.baseline_p50_ns.map_or_else(dash, nanos),
            cell.change.map_or_else(dash, |c| ratio(c.ratio, c.ci_low, c.ci_high)),
            cell.verdict.as_str(),
            result.floor.and_then(|f| f.ratio).map_or_else(dash, |r| format!("{r:.2}x")),
            instructions,
            escape(&instruction_verdict.replace(" (informational)", "")),
        );
    }
    html.push_str("</table>\n");
    html
}

/// An id fit for an anchor: the cell id with its colons and other punctuation as dashes.
fn row_anchor(id: &str) -> String {
    let slug: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("cell-{slug}")
}

fn scenario_anchor(scenario: &str) -> String {
    format!(
        "scenario-{}",
        row_anchor(scenario).trim_start_matches("cell-")
    )
}

fn kind_anchor(kind: ScenarioKind) -> String {
    format!("kind-{}", kind.as_str())
}

/// What a kind's section is called.
fn kind_title(kind: ScenarioKind) -> &'static str {
    match kind {
        ScenarioKind::Echo => "Echo: small messages, round trip",
        ScenarioKind::Bulk => "Bulk: large messages, round trip and throughput",
        ScenarioKind::Codec => "Serialization: a sensor frame through a codec and a transport",
        ScenarioKind::FanOut => "Fan-out: one publisher, two subscribers",
        ScenarioKind::FanIn => "Fan-in: two publishers, one subscriber",
        ScenarioKind::Rpc => "RPC: Cap'n Proto, one request in flight",
        ScenarioKind::ReqRep => "Request/reply: ZeroMQ REQ/REP",
        ScenarioKind::UdpLoad => "UDP under load",
        ScenarioKind::Logging => "Logging to a file",
    }
}

/// One failure, regression or improvement: what moved, by how much and how sure, and
/// the cell's round trips in order next to the baseline's median.
fn change_card(result: &CellResult, cell: &CellVerdict, verdict: Verdict) -> String {
    let mut html = String::new();
    let gating = gates(cell, verdict);
    let _ = writeln!(
        html,
        "<section class=\"change\" id=\"change-{}\"><h3><code>{}</code> {}{}</h3>",
        row_anchor(&result.cell.id).trim_start_matches("cell-"),
        escape(&result.cell.id),
        verdict.as_str(),
        if gating || verdict == Verdict::Failed {
            ""
        } else {
            " <span class=\"informs\">(informational)</span>"
        }
    );
    if let Some(failure) = &result.outcome.failure {
        let _ = writeln!(
            html,
            "<p class=\"warning\">{:?}: {}</p>",
            failure.kind,
            escape(&failure.reason)
        );
    }
    if let Some(change) = cell.change.filter(|_| cell.verdict == verdict) {
        let _ = writeln!(
            html,
            "<p>Median round trip {} &rarr; {}: <strong>{}</strong> (95 % interval), p = {}; a change must clear {:.1} % to count.</p>",
            cell.baseline_p50_ns.map_or_else(|| "-".into(), nanos),
            cell.current_p50_ns.map_or_else(|| "-".into(), nanos),
            ratio(change.ratio, change.ci_low, change.ci_high),
            p_value(change.p_value),
            change.margin * 100.0
        );
    }
    if let Some(why) = cell
        .uncounted
        .as_ref()
        .filter(|_| verdict == Verdict::Regressed)
    {
        let _ = writeln!(html, "<p class=\"warning\">{}</p>", escape(why));
    }
    if let Some(i) = cell.instructions.as_ref().filter(|i| i.verdict == verdict) {
        let _ = writeln!(
            html,
            "<p>Guest instructions per round trip {} &rarr; {:.0}: <strong>{:.3}x</strong>; a change must clear {:.1} % to count{}.</p>",
            i.baseline.map_or_else(|| "-".into(), |b| format!("{b:.0}")),
            i.current,
            i.ratio.unwrap_or(1.0),
            i.margin * 100.0,
            if i.gating { "" } else { " (this count only informs)" }
        );
    }
    if !result.samples_ns.is_empty() {
        html.push_str(&figure(
            plots::latency_over_index(result, cell.baseline_p50_ns),
            &format!(
                "{}: every timed round trip in order, the median of each batch the verdict compares, and the baseline's median.",
                result.cell.id
            ),
        ));
    }
    html.push_str("</section>\n");
    html
}

pub fn html(report: &LegReport) -> String {
    let verdict = &report.verdict;
    let title = format!("ipc-matrix: {}, profile {}", verdict.leg, verdict.profile);
    let changes = Changes::of(report);
    let kinds: Vec<ScenarioKind> = ScenarioKind::ALL
        .into_iter()
        .filter(|k| report.results.iter().any(|r| r.cell.kind() == *k))
        .collect();
    let floors = super::model::floor_rows(report);
    let groups = note_groups(report);
    let mut body = String::new();
    let (cells, against) = headline(report);
    let _ = writeln!(
        body,
        "<p><strong>{}</strong> {}</p>",
        escape(&cells),
        escape(&against)
    );
    // What fails the run, on the first screen, before anything that only informs.
    let failing = super::changes::gating_lines(&changes);
    if !failing.is_empty() {
        let _ = writeln!(
            body,
            "<div class=\"failing\" id=\"failing\"><p class=\"warning\"><strong>{} where it counts</strong> (a strict run fails on {}):</p><ul>",
            match failing.len() {
                1 => "1 cell regressed".to_string(),
                n => format!("{n} cells regressed"),
            },
            if failing.len() == 1 { "it" } else { "them" }
        );
        for (id, what) in &failing {
            let _ = writeln!(
                body,
                "<li><a href=\"#change-{}\"><code>{}</code></a>: {}</li>",
                row_anchor(id).trim_start_matches("cell-"),
                escape(id),
                escape(what)
            );
        }
        body.push_str("</ul></div>\n");
    }
    match &report.baseline {
        Some(b) => {
            let _ = writeln!(
                body,
                "<p>Baseline: <code>{}</code>, accepted {} on {}.</p>",
                escape(&b.path.display().to_string()),
                utc(b.baseline.accepted_at_unix),
                escape(&b.baseline.environment.cpu_model)
            );
        }
        None => body.push_str("<p>No baseline for this leg and profile yet.</p>\n"),
    }
    if let Some(why) = &verdict.informational {
        let _ = writeln!(
            body,
            "<p class=\"note\">Informational only: {}.</p>",
            escape(why)
        );
    }

    // Contents: the fixed sections, then each kind with its scenarios.
    body.push_str("<nav><h2>Contents</h2>\n<ul>\n<li><a href=\"#changes\">What changed</a></li>\n<li><a href=\"#cells\">All cells</a></li>\n");
    if !floors.is_empty() {
        body.push_str("<li><a href=\"#floors\">Next to the machine's floor</a></li>\n");
    }
    if super::stacks::stacks(report).len() > 1 {
        body.push_str("<li><a href=\"#stacks\">IPC stacks side by side</a></li>\n");
    }
    for kind in &kinds {
        let _ = write!(
            body,
            "<li><a href=\"#{}\">{}</a>",
            kind_anchor(*kind),
            escape(kind_title(*kind))
        );
        let scenarios = scenarios_of(report, *kind);
        if scenarios.len() > 1 || scenarios.first().is_some_and(|s| s != kind.as_str()) {
            body.push_str(": ");
            let links: Vec<String> = scenarios
                .iter()
                .map(|s| {
                    format!(
                        "<a href=\"#{}\"><code>{}</code></a>",
                        scenario_anchor(s),
                        escape(s)
                    )
                })
                .collect();
            body.push_str(&links.join(", "));
        }
        body.push_str("</li>\n");
    }
    if !groups.is_empty() {
        body.push_str("<li><a href=\"#notes\">Notes</a></li>\n");
    }
    body.push_str("<li><a href=\"#environment\">Environment</a></li>\n</ul></nav>\n");

    body.push_str("<h2 id=\"changes\">What changed</h2>\n");
    if changes.is_quiet() {
        body.push_str("<p>Nothing failed, regressed or improved: every cell with a baseline is within its margin of it.</p>\n");
    }
    for (title, rows, v) in [
        ("Failed", &changes.failed, Verdict::Failed),
        ("Regressed", &changes.regressed, Verdict::Regressed),
        ("Improved", &changes.improved, Verdict::Improved),
    ] {
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(body, "<h3>{title} ({})</h3>", rows.len());
        for (result, cell) in rows {
            body.push_str(&change_card(result, cell, v));
        }
    }
    if verdict.cells.iter().any(|c| c.change.is_some()) {
        body.push_str(&figure(
            plots::baseline_ratios(verdict),
            "Median round trip of every cell with a baseline, as a ratio to the baseline's: the dot is the estimate, the bar its 95 % bootstrap interval, the grey band the margin a change must clear to count. Filled: the verdict gates; hollow: it only informs.",
        ));
    }

    body.push_str("<h2 id=\"cells\">All cells</h2>\n<p class=\"quiet\">Verdicts in <span class=\"informs\">italics</span> only inform (an emulated leg, another CPU, a busy or changed machine, a count that depends on timing). <em>vs floor</em>: the median round trip over its floor's (below).</p>\n");
    let moved: Vec<Row> = changes
        .failed
        .iter()
        .chain(&changes.regressed)
        .chain(&changes.improved)
        .copied()
        .collect();
    if !moved.is_empty() {
        body.push_str(&cell_table(&moved));
    }
    if !changes.rest.is_empty() {
        let _ = writeln!(
            body,
            "<details><summary>{} unchanged or new {}</summary>\n{}</details>",
            changes.rest.len(),
            if changes.rest.len() == 1 {
                "cell"
            } else {
                "cells"
            },
            cell_table(&changes.rest)
        );
    }

    if !floors.is_empty() {
        body.push_str("<h2 id=\"floors\">Next to the machine's floor</h2>\n");
        let _ = writeln!(body, "<p>{}</p>", escape(super::model::FLOORS_EXPLAINED));
        let rows: Vec<Vec<String>> = floors
            .iter()
            .map(|(result, floor)| {
                let dash = || "-".to_string();
                vec![
                    result.cell.id.clone(),
                    format!("{} ({})", floor.probe, bytes(floor.payload_bytes)),
                    nanos(floor.p50_ns),
                    result.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                    floor.ratio.map_or_else(dash, |r| format!("{r:.2}x")),
                ]
            })
            .collect();
        body.push_str(&table(
            &["cell", "floor", "floor p50", "cell p50", "cell / floor"].map(String::from),
            &rows,
        ));
        body.push('\n');
        body.push_str(&figure(
            plots::floor_ratios(&floors),
            "Each cell's median round trip over its floor's: 1.00x is what the machine allows.",
        ));
        for note in floors
            .iter()
            .filter_map(|(r, f)| super::model::below_floor(r, f))
        {
            let _ = writeln!(body, "<p class=\"note\">{}</p>", escape(&note));
        }
    }

    body.push_str(&stacks_section(report));

    let seed = seed_tables(report);
    for kind in &kinds {
        body.push_str(&kind_section(report, *kind, &seed));
    }

    if !groups.is_empty() {
        body.push_str("<h2 id=\"notes\">Notes</h2>\n<ul>\n");
        for group in &groups {
            match group.cells.as_slice() {
                [(id, note)] => {
                    let _ = writeln!(
                        body,
                        "<li><code>{}</code>: {}</li>",
                        escape(id),
                        escape(note)
                    );
                }
                cells => {
                    let _ = write!(
                        body,
                        "<li><details><summary>{}: {} cells</summary><ul>",
                        escape(&group.what),
                        cells.len()
                    );
                    for (id, note) in cells {
                        let _ = write!(
                            body,
                            "<li><code>{}</code>: {}</li>",
                            escape(id),
                            escape(note)
                        );
                    }
                    body.push_str("</ul></details></li>\n");
                }
            }
        }
        body.push_str("</ul>\n");
    }

    if let Some(first) = report.results.first() {
        let env = &first.environment;
        let _ = writeln!(
            body,
            "<h2 id=\"environment\">Environment</h2>\n<p>CPU {} ({} logical cores), kernel {}, runner {}{}, {} build (opt-level {}), {}; machine probe (a cache line's round trip between the two CPUs, before each cell): {}.</p>",
            escape(&env.cpu_model),
            env.logical_cores,
            escape(&env.kernel),
            escape(&env.runner),
            env.qemu_version.as_deref().map_or(String::new(), |v| format!(" ({})", escape(v))),
            escape(&env.build_profile),
            escape(&env.opt_level),
            escape(&env.rustc),
            super::model::probe_range(report),
        );
    }
    let _ = writeln!(
        body,
        "<p>Report written {}.</p>",
        utc(report.generated_at_unix)
    );
    page(&title, &body)
}

/// The scenarios of a kind, in run order.
fn scenarios_of(report: &LegReport, kind: ScenarioKind) -> Vec<String> {
    let mut scenarios: Vec<String> = Vec::new();
    for r in report.results.iter().filter(|r| r.cell.kind() == kind) {
        if !scenarios.contains(&r.cell.scenario) {
            scenarios.push(r.cell.scenario.clone());
        }
    }
    scenarios
}

/// A kind's section: its table of the seed's measures where it has one, then per
/// scenario the plot that suits the kind, and every cell's round trips in order, folded.
fn kind_section(report: &LegReport, kind: ScenarioKind, seed: &[SeedTable]) -> String {
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<h2 id=\"{}\">{}</h2>",
        kind_anchor(kind),
        escape(kind_title(kind))
    );
    for seed_table in seed.iter().filter(|t| t.kinds.contains(&kind)) {
        let rows: Vec<Vec<String>> = seed_table
            .rows
            .iter()
            .filter(|row| {
                row.first().is_some_and(|id| {
                    report
                        .results
                        .iter()
                        .any(|r| r.cell.id == *id && r.cell.kind() == kind)
                })
            })
            .cloned()
            .collect();
        let _ = writeln!(html, "<p>{}</p>", escape(seed_table.title));
        html.push_str(&table(&seed_table.header, &rows));
    }
    if kind == ScenarioKind::Codec {
        html.push_str(&codec_section(report));
    }
    for scenario in scenarios_of(report, kind) {
        let results: Vec<CellResult> = report
            .results
            .iter()
            .filter(|r| r.cell.scenario == scenario && r.cell.kind() == kind)
            .cloned()
            .collect();
        let _ = writeln!(
            html,
            "<h3 id=\"{}\"><code>{}</code></h3>",
            scenario_anchor(&scenario),
            escape(&scenario)
        );
        let payloads = {
            let mut p: Vec<u64> = results.iter().map(|r| r.cell.payload_bytes).collect();
            p.sort_unstable();
            p.dedup();
            p.len()
        };
        let unit = match kind {
            ScenarioKind::FanOut | ScenarioKind::FanIn => "one-way latency per frame",
            ScenarioKind::Logging => "time per line (batch means)",
            _ => "round trip",
        };
        if payloads > 2 {
            html.push_str(&figure(
                plots::round_trip_vs_payload(&results),
                &format!("{scenario}: median {unit} against payload size, one line per transport (log-log)."),
            ));
        } else {
            html.push_str(&figure(
                plots::percentile_bars(&results, unit),
                &format!("{scenario}: p50, p90, p99 and p99.9 {unit} per cell (log scale)."),
            ));
        }
        if kind == ScenarioKind::Bulk {
            html.push_str(&figure(
                plots::throughput_bars(&results),
                &format!("{scenario}: payload megabytes per second, request and reply counted (log scale)."),
            ));
        }
        let timed: Vec<&CellResult> = results
            .iter()
            .filter(|r| !r.samples_ns.is_empty())
            .collect();
        if !timed.is_empty() {
            let _ = writeln!(
                html,
                "<details><summary>Every {unit} in order, per cell ({} plots)</summary>",
                timed.len()
            );
            for result in timed {
                let baseline = report
                    .verdict
                    .cells
                    .iter()
                    .find(|c| c.cell_id == result.cell.id)
                    .and_then(|c| c.baseline_p50_ns);
                html.push_str(&figure(
                    plots::latency_over_index(result, baseline),
                    &format!(
                        "{}: every timed {unit} in order, the median of each batch the verdict compares, and the baseline's median.",
                        result.cell.id
                    ),
                ));
            }
            html.push_str("</details>\n");
        }
    }
    html
}

/// The codec cells' stages and the chart comparing codecs per transport and payload.
fn codec_section(report: &LegReport) -> String {
    let codec_cells = super::model::codec_results(report);
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = codec_cells
        .iter()
        .map(|r| {
            let stages = r.codec_ns;
            vec![
                r.cell.id.clone(),
                r.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                r.latency_ns.map_or_else(dash, |l| nanos(l.p99)),
                stages
                    .and_then(|s| s.encode_ns)
                    .map_or_else(dash, |l| nanos(l.p50)),
                stages
                    .and_then(|s| s.decode_ns)
                    .map_or_else(dash, |l| nanos(l.p50)),
                r.first_round_trip_ns.map_or_else(dash, nanos),
                r.instructions
                    .as_ref()
                    .and_then(|i| i.encode)
                    .map_or_else(dash, |n| format!("{n:.0}")),
                r.instructions
                    .as_ref()
                    .and_then(|i| i.decode)
                    .map_or_else(dash, |n| format!("{n:.0}")),
            ]
        })
        .collect();
    let mut html = table(
        &[
            "cell",
            "round trip p50",
            "p99",
            "encode p50",
            "decode p50",
            "cold (first round trip)",
            "encode instructions",
            "decode instructions",
        ]
        .map(String::from),
        &rows,
    );
    // One row per transport and payload, one bar per codec.
    let mut labels: Vec<String> = Vec::new();
    for r in &codec_cells {
        let row = format!("{} {}", r.cell.transport_label(), r.cell.payload_label);
        if !labels.contains(&row) {
            labels.push(row);
        }
    }
    let mut codecs: Vec<_> = codec_cells
        .iter()
        .filter_map(|r| r.cell.work.codec())
        .collect();
    codecs.sort();
    codecs.dedup();
    let series: Vec<(String, Vec<Option<f64>>)> = codecs
        .iter()
        .map(|codec| {
            let values = labels
                .iter()
                .map(|row| {
                    codec_cells
                        .iter()
                        .find(|r| {
                            r.cell.work.codec() == Some(*codec)
                                && format!("{} {}", r.cell.transport_label(), r.cell.payload_label)
                                    == *row
                        })
                        .and_then(|r| r.latency_ns)
                        .map(|l| l.p50 as f64)
                })
                .collect();
            (codec.to_string(), values)
        })
        .collect();
    html.push_str(&figure(
        charts::grouped_bars(
            "Sensor frame round trip by codec",
            "p50 round trip (log scale)",
            &labels,
            &series,
            &|v| nanos(v as u64),
        ),
        "Cap'n Proto vs protobuf: median round trip of a sensor frame per transport and payload (log scale).",
    ));
    html
}

/// Every request/reply cell of the stack payload, fastest first, as a table and a chart
/// of its median next to its floor's.
fn stacks_section(report: &LegReport) -> String {
    let stacks = super::stacks::stacks(report);
    if stacks.len() < 2 {
        return String::new();
    }
    let payload = bytes(super::stacks::STACK_PAYLOAD);
    let mut html = format!(
        "<h2 id=\"stacks\">IPC stacks side by side at {payload}</h2>\n<p>Every request/reply cell of {payload}, fastest first: our shared-memory ring, the sockets and pipes, and the stacks on top of them, each next to the floor measured for it.</p>\n"
    );
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = stacks
        .iter()
        .map(|s| {
            let r = s.result;
            vec![
                r.cell.id.clone(),
                s.name.clone(),
                r.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                r.latency_ns.map_or_else(dash, |l| nanos(l.p99)),
                r.floor
                    .map_or_else(dash, |f| format!("{} ({})", nanos(f.p50_ns), f.probe)),
                r.floor
                    .and_then(|f| f.ratio)
                    .map_or_else(dash, |x| format!("{x:.2}x")),
                r.own_setup.as_ref().map_or_else(dash, |o| nanos(o.p50_ns)),
                r.own_setup
                    .as_ref()
                    .and_then(|o| o.ratio)
                    .map_or_else(dash, |x| format!("{x:.2}x")),
            ]
        })
        .collect();
    html.push_str(&format!(
        "<p>{}</p>\n",
        escape(super::stacks::STACKS_EXPLAINED)
    ));
    html.push_str(&table(
        &[
            "cell",
            "stack",
            "p50",
            "p99",
            "floor p50",
            "cell / floor",
            "its own setup p50",
            "cell / own setup",
        ]
        .map(String::from),
        &rows,
    ));
    let labels: Vec<String> = stacks.iter().map(|s| s.name.clone()).collect();
    let series = vec![
        charts::Series {
            name: "median round trip".into(),
            color: 0,
            values: stacks
                .iter()
                .map(|s| s.result.latency_ns.map(|l| l.p50 as f64))
                .collect(),
        },
        charts::Series {
            name: "its floor".into(),
            color: 1,
            values: stacks
                .iter()
                .map(|s| s.result.floor.map(|f| f.p50_ns as f64))
                .collect(),
        },
        charts::Series {
            name: "its own benchmark setup".into(),
            color: 2,
            values: stacks
                .iter()
                .map(|s| s.result.own_setup.as_ref().map(|o| o.p50_ns as f64))
                .collect(),
        },
    ];
    html.push_str(&figure(
        charts::series_bars(
            &format!("IPC stacks at {payload}: median round trip and floor"),
            &labels,
            &[charts::Panel {
                x_desc: "round trip (log scale)".into(),
                series,
            }],
            None,
            &|v| nanos(v as u64),
        ),
        "Median round trip of each stack (fastest first) and, where one was measured, the floor of its transport: the simplest exchange of the payload the machine allows between the same two CPUs.",
    ));
    html
}
