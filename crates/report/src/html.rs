//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network).

use crate::seed_tables::seed_tables;
use crate::units::{nanos, p_value, ratio, utc};
use crate::{codec_results, headline, plots, LegReport};
use ipc_matrix_baseline::Verdict;
use std::fmt::Write;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1280px;color:#222}\
table{border-collapse:collapse;font-size:.9rem;margin:1rem 0}\
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}\
th:first-child,td:first-child{text-align:left;font-family:monospace;white-space:nowrap}td{white-space:nowrap}\
.regressed{color:#b34700;font-weight:bold}.improved{color:#007a5a}.failed{color:#b00020;font-weight:bold}\
.note{background:#eef4fb;border-left:4px solid #0072b2;padding:.5rem 1rem}\
.warning{background:#fdf1e6;border-left:4px solid #d55e00;padding:.5rem 1rem}\
th[colspan]{text-align:center}tr.group th{background:#f2f2f2;text-align:left;font-family:system-ui,sans-serif}\
.informs{color:#8a4b00;font-style:italic}.wide{overflow-x:auto}.cpu{font-weight:normal;font-size:.8rem;color:#555}\
figure{margin:1.5rem 0}figcaption{font-size:.85rem;color:#555}svg{max-width:100%;height:auto}";

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(ch),
        }
    }
    out
}

pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n{body}\n</body>\n</html>\n",
        escape(title),
        escape(title)
    )
}

/// A plot with its caption, or the reason it could not be drawn.
pub fn figure(svg: Result<String, String>, caption: &str) -> String {
    match svg {
        Ok(svg) => format!(
            "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
            escape(caption)
        ),
        Err(why) => format!(
            "<p class=\"note\">Plot not drawn ({}): {}</p>",
            escape(caption),
            escape(&why)
        ),
    }
}

/// A table of already formatted text; cells are escaped here.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut html = String::from("<table>\n<tr>");
    for h in header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr>\n");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", escape(cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>");
    html
}

pub fn html(report: &LegReport) -> String {
    let verdict = &report.verdict;
    let title = format!("ipc-matrix: {}, profile {}", verdict.leg, verdict.profile);
    let mut body = String::new();
    let (cells, against) = headline(report);
    let _ = writeln!(
        body,
        "<p><strong>{}</strong> {}</p>",
        escape(&cells),
        escape(&against)
    );
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
    for cell in verdict.instruction_regressions() {
        if let Some(i) = &cell.instructions {
            let _ = writeln!(
                body,
                "<p class=\"warning\"><code>{}</code> regressed in instructions: {:.3}x the baseline's guest instructions per round trip.</p>",
                escape(&cell.cell_id),
                i.ratio.unwrap_or(1.0)
            );
        }
    }
    for cell in verdict.timing_regressions() {
        if let Some(change) = cell.change {
            let _ = writeln!(
                body,
                "<p class=\"warning\"><code>{}</code> regressed: {} slower (95 % interval), p = {}.</p>",
                escape(&cell.cell_id),
                ratio(change.ratio, change.ci_low, change.ci_high),
                p_value(change.p_value)
            );
        }
    }

    body.push_str("<table>\n<tr><th>cell</th><th>result</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>round trips/s</th><th>MB/s</th><th>baseline p50</th><th>ratio (95 % CI)</th><th>verdict</th><th>instructions/round trip</th><th>instructions</th></tr>\n");
    for (result, cell) in report.results.iter().zip(&verdict.cells) {
        let l = result.latency_ns;
        let dash = || "-".to_string();
        let class = match cell.verdict {
            Verdict::Regressed if cell.gating => "regressed",
            Verdict::Improved => "improved",
            Verdict::Failed => "failed",
            _ => "",
        };
        let verdict_text = if cell.gating {
            cell.verdict.as_str().to_string()
        } else {
            format!("{} (informational)", cell.verdict.as_str())
        };
        let (instructions, instruction_verdict, regressed) = crate::instruction_columns(cell);
        let instruction_class = if regressed { "regressed" } else { "" };
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td class=\"{instruction_class}\">{}</td></tr>",
            escape(&result.cell.id),
            if result.outcome.passed { "" } else { "failed" },
            if result.outcome.passed { "pass" } else { "FAIL" },
            l.map_or_else(dash, |l| nanos(l.p50)),
            l.map_or_else(dash, |l| nanos(l.p90)),
            l.map_or_else(dash, |l| nanos(l.p99)),
            l.map_or_else(dash, |l| nanos(l.p999)),
            l.map_or_else(dash, |l| nanos(l.max)),
            result.round_trips_per_sec.map_or_else(dash, |v| format!("{v:.0}")),
            result.throughput.map_or_else(dash, |t| format!("{:.1}", t.mb_per_s)),
            cell.baseline_p50_ns.map_or_else(dash, nanos),
            cell.change.map_or_else(dash, |c| ratio(c.ratio, c.ci_low, c.ci_high)),
            escape(&verdict_text),
            instructions,
            escape(&instruction_verdict),
        );
    }
    body.push_str("</table>\n");

    let floors = crate::floor_rows(report);
    if !floors.is_empty() {
        body.push_str("<h2 id=\"floors\">Next to the machine's floor</h2>\n");
        let _ = writeln!(body, "<p>{}</p>", escape(crate::FLOORS_EXPLAINED));
        body.push_str("<table>\n<tr><th>cell</th><th>floor</th><th>floor p50</th><th>cell p50</th><th>cell / floor</th></tr>\n");
        for (result, floor) in &floors {
            let dash = || "-".to_string();
            let _ = writeln!(
                body,
                "<tr><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&result.cell.id),
                floor.probe,
                crate::units::bytes(floor.payload_bytes),
                nanos(floor.p50_ns),
                result.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                floor.ratio.map_or_else(dash, |r| format!("{r:.2}x")),
            );
        }
        body.push_str("</table>\n");
        for note in floors.iter().filter_map(|(r, f)| crate::below_floor(r, f)) {
            let _ = writeln!(body, "<p class=\"note\">{}</p>", escape(&note));
        }
    }

    let problems: Vec<String> = report
        .results
        .iter()
        .filter_map(|r| {
            let f = r.outcome.failure.as_ref()?;
            Some(format!("{}: {}", r.cell.id, f.reason))
        })
        .chain(
            verdict
                .cells
                .iter()
                .flat_map(|c| c.notes.iter().map(move |n| format!("{}: {n}", c.cell_id))),
        )
        .chain(
            verdict
                .not_run
                .iter()
                .map(|id| format!("{id}: in the baseline, not in this run")),
        )
        .collect();
    if !problems.is_empty() {
        body.push_str("<h2>Failures and notes</h2>\n<ul>\n");
        for p in problems {
            let _ = writeln!(body, "<li>{}</li>", escape(&p));
        }
        body.push_str("</ul>\n");
    }

    for seed_table in seed_tables(report) {
        let _ = writeln!(body, "<h2>{}</h2>", escape(seed_table.title));
        body.push_str(&table(&seed_table.header, &seed_table.rows));
        body.push('\n');
    }

    body.push_str("<h2>Plots</h2>\n");
    if verdict.cells.iter().any(|c| c.change.is_some()) {
        body.push_str(&figure(
            plots::baseline_ratios(verdict),
            "Ratio of median round trips to the baseline's: the dot is the estimate, the bar its 95 % bootstrap interval, the grey band the margin a change must clear to count.",
        ));
    }
    body.push_str(&figure(
        plots::round_trip_vs_payload(&report.results),
        "Median round trip against payload size, one line per transport (log-log).",
    ));
    body.push_str(&figure(
        plots::percentile_bars(&report.results),
        "p50, p90, p99 and p99.9 round trip per cell (log scale).",
    ));
    body.push_str(&figure(
        plots::throughput_bars(&report.results),
        "Payload megabytes per second, request and reply counted (log scale).",
    ));
    let codec_cells = codec_results(report);
    if !codec_cells.is_empty() {
        // One row per transport and payload, one bar per codec.
        let mut rows: Vec<String> = Vec::new();
        for r in &codec_cells {
            let row = format!("{} {}", r.cell.transport_label(), r.cell.payload_label);
            if !rows.contains(&row) {
                rows.push(row);
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
                let values = rows
                    .iter()
                    .map(|row| {
                        codec_cells
                            .iter()
                            .find(|r| {
                                r.cell.work.codec() == Some(*codec)
                                    && format!(
                                        "{} {}",
                                        r.cell.transport_label(),
                                        r.cell.payload_label
                                    ) == *row
                            })
                            .and_then(|r| r.latency_ns)
                            .map(|l| l.p50 as f64)
                    })
                    .collect();
                (codec.to_string(), values)
            })
            .collect();
        body.push_str(&figure(
            plots::grouped_bars(
                "Sensor frame round trip by codec",
                "p50 round trip (encode, send, decode and re-encode at the peer, reply, decode)",
                &rows,
                &series,
                &|v| nanos(v as u64),
            ),
            "Cap'n Proto vs protobuf: median round trip of a sensor frame per transport and payload (log scale).",
        ));
    }
    body.push_str("<h2>Stability: round trip by message index</h2>\n");
    for result in report.results.iter().filter(|r| !r.samples_ns.is_empty()) {
        body.push_str(&figure(
            plots::latency_over_index(result),
            &format!(
                "{}: every timed round trip in order, and the median of each batch the verdict compares.",
                result.cell.id
            ),
        ));
    }

    if let Some(first) = report.results.first() {
        let env = &first.environment;
        let _ = writeln!(
            body,
            "<h2>Environment</h2>\n<p>CPU {} ({} logical cores), kernel {}, runner {}{}, {} build (opt-level {}), {}; machine probe (a cache line's round trip between the two CPUs, before each cell): {}.</p>",
            escape(&env.cpu_model),
            env.logical_cores,
            escape(&env.kernel),
            escape(&env.runner),
            env.qemu_version.as_deref().map_or(String::new(), |v| format!(" ({})", escape(v))),
            escape(&env.build_profile),
            escape(&env.opt_level),
            escape(&env.rustc),
            crate::markdown::probe_range(report),
        );
    }
    let _ = writeln!(
        body,
        "<p>Report written {}.</p>",
        utc(report.generated_at_unix)
    );
    page(&title, &body)
}
