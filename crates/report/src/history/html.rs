//! `history.html`: per leg, a plot per cell of its median and its count over the runs.

use super::model::{most_moved, trends, LegHistory, Run};
use crate::render::charts;
use crate::render::html::{escape, figure, page};
use crate::units::{instructions, nanos};
use std::fmt::Write;

/// `history.html`: per leg, the runs, then per cell (most moved first) a plot of its
/// median over the runs with the baseline's band, and of its instruction count.
pub fn html(legs: &[LegHistory], skipped: &[String]) -> String {
    let mut body = String::new();
    body.push_str("<nav><h2>Contents</h2><ul>");
    for (i, leg) in legs.iter().enumerate() {
        let _ = write!(
            body,
            "<li><a href=\"#leg-{i}\">{} ({}), {} runs</a></li>",
            escape(&leg.leg),
            escape(&leg.profile),
            leg.runs.len()
        );
    }
    body.push_str("</ul></nav>\n");
    for (i, leg) in legs.iter().enumerate() {
        let _ = writeln!(
            body,
            "<h2 id=\"leg-{i}\">{} ({})</h2>\n<p>Runs, oldest first: {}.</p>",
            escape(&leg.leg),
            escape(&leg.profile),
            escape(
                &leg.runs
                    .iter()
                    .map(Run::label)
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        );
        let labels: Vec<String> = leg.runs.iter().map(Run::short_label).collect();
        let trends = trends(leg);
        let sorted = most_moved(&trends);
        // The ten that moved most are open; the rest are folded.
        for (k, trend) in sorted.iter().enumerate() {
            if k == 10 {
                let _ = writeln!(
                    body,
                    "<details><summary>{} more cells</summary>",
                    sorted.len() - 10
                );
            }
            let _ = writeln!(
                body,
                "<h3><code>{}</code> {}</h3>",
                escape(&trend.id),
                trend
                    .moved()
                    .map_or(String::new(), |m| format!("moved {m:.2}x"))
            );
            body.push_str(&figure(
                charts::trend(
                    &format!("{}: median round trip per run", trend.id),
                    "p50 round trip (log scale)",
                    &labels,
                    &trend.p50_ns.iter().map(|v| v.map(|v| v as f64)).collect::<Vec<_>>(),
                    trend.band.map(|(b, m)| (b as f64, m)),
                    &|v| nanos(v as u64),
                ),
                "The median round trip of each run (a gap: the cell failed or did not run), the baseline's median (dashed) and the band a change must leave to count.",
            ));
            if trend.instructions.iter().any(Option::is_some) {
                body.push_str(&figure(
                    charts::trend(
                        &format!("{}: guest instructions per round trip per run", trend.id),
                        "instructions per round trip (log scale)",
                        &labels,
                        &trend.instructions,
                        trend.instruction_band,
                        &instructions,
                    ),
                    "Guest instructions per round trip counted under QEMU in each run, the baseline's count (dashed) and its band.",
                ));
            }
        }
        if sorted.len() > 10 {
            body.push_str("</details>\n");
        }
    }
    let mut notes = String::new();
    skipped_notes(&mut notes, skipped);
    body.push_str(&notes);
    page("ipc-matrix: history", &body)
}

fn skipped_notes(out: &mut String, skipped: &[String]) {
    if skipped.is_empty() {
        return;
    }
    out.push_str("<h2>Left out</h2>\n<ul>\n");
    for s in skipped {
        let _ = writeln!(out, "<li>{}</li>", escape(s));
    }
    out.push_str("</ul>\n");
}
