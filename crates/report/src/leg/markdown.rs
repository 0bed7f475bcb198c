//! `report.md`, which is also the job summary: the headline, then what changed (failures,
//! regressions, improvements, each with its ratio, interval and a text plot of both), then
//! everything else folded: the table of all cells, the sections per kind, notes grouped.
//! An unchanged run reads in one screen.

use super::changes::{gates, interval_strip, note_groups, Changes, Row};
use super::model::{codec_results, fan_results, headline, probe_range, stability, LegReport};
use super::seed_tables::seed_tables;
use crate::render::markdown::text;
use crate::units::{bytes, nanos, p_value, ratio, utc};
use ipc_matrix_baseline::{CellVerdict, Verdict, ALPHA};
use ipc_matrix_results::CellResult;
use std::fmt::Write;

pub fn markdown(report: &LegReport) -> String {
    let verdict = &report.verdict;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## ipc-matrix: `{}`, profile `{}`\n",
        verdict.leg, verdict.profile
    );
    let (cells, against) = headline(report);
    let _ = writeln!(md, "**{cells}** {against}\n");
    let changes = Changes::of(report);
    // What fails the run, before anything that only informs.
    let failing = super::changes::gating_lines(&changes);
    if !failing.is_empty() {
        let _ = writeln!(
            md,
            "> [!CAUTION]\n> {} regressed where it counts (a strict run fails on {}):",
            cells_text(failing.len()),
            if failing.len() == 1 { "it" } else { "them" }
        );
        for (id, what) in &failing {
            let _ = writeln!(md, "> - `{id}`: {}", text(what));
        }
        md.push('\n');
    }
    match &report.baseline {
        Some(b) => {
            let _ = writeln!(
                md,
                "Baseline: `{}`, accepted {} on {}.\n",
                b.path.display(),
                utc(b.baseline.accepted_at_unix),
                b.baseline.environment.cpu_model
            );
        }
        None => md.push_str(
            "No baseline for this leg and profile yet; `ipc-matrix baseline accept` makes this run the baseline.\n\n",
        ),
    }
    if let Some(why) = &verdict.informational {
        let _ = writeln!(md, "> [!NOTE]\n> Informational only: {why}.\n");
    }
    what_changed(&mut md, &changes);

    let _ = writeln!(
        md,
        "<details><summary>All {} cells: percentiles, rates, verdicts and instruction counts</summary>\n",
        report.results.len()
    );
    cell_table(&mut md, report.results.iter().zip(&verdict.cells));
    md.push_str("\n</details>\n");

    let stacks = super::stacks::stacks(report);
    if stacks.len() > 1 {
        fold(
            &mut md,
            &format!(
                "IPC stacks side by side at {}, fastest first",
                bytes(super::stacks::STACK_PAYLOAD)
            ),
            stacks.len(),
        );
        let _ = writeln!(md, "{}\n", super::stacks::STACKS_EXPLAINED);
        md.push_str(
            "| stack | cell | p50 | p99 | floor p50 | cell / floor | its own setup p50 | cell / own setup |\n",
        );
        md.push_str("|---|---|---:|---:|---:|---:|---:|---:|\n");
        for stack in &stacks {
            let r = stack.result;
            let dash = || "-".to_string();
            let _ = writeln!(
                md,
                "| {} | `{}` | {} | {} | {} | {} | {} | {} |",
                stack.name,
                r.cell.id,
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
            );
        }
        unfold(&mut md);
    }

    let floors = super::model::floor_rows(report);
    if !floors.is_empty() {
        fold(&mut md, "Next to the machine's floor", floors.len());
        let _ = writeln!(md, "{}\n", super::model::FLOORS_EXPLAINED);
        md.push_str("| cell | floor | floor p50 | cell p50 | cell / floor |\n");
        md.push_str("|---|---|---:|---:|---:|\n");
        for (result, floor) in &floors {
            let dash = || "-".to_string();
            let _ = writeln!(
                md,
                "| `{}` | {} ({}) | {} | {} | {} |",
                result.cell.id,
                floor.probe,
                bytes(floor.payload_bytes),
                nanos(floor.p50_ns),
                result.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                floor.ratio.map_or_else(dash, |r| format!("{r:.2}x")),
            );
        }
        for note in floors
            .iter()
            .filter_map(|(r, f)| super::model::below_floor(r, f))
        {
            let _ = writeln!(md, "\n> [!NOTE]\n> {}", text(&note));
        }
        unfold(&mut md);
    }

    let codec_cells = codec_results(report);
    if !codec_cells.is_empty() {
        fold(
            &mut md,
            "Serialization: a sensor frame encoded, sent, decoded and re-encoded by the peer, sent back and decoded",
            codec_cells.len(),
        );
        md.push_str("| codec | transport | payload | round trip p50 | p99 | encode p50 | decode p50 | MB/s | cold (first round trip) | encode instructions | decode instructions |\n");
        md.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in codec_cells {
            let dash = || "-".to_string();
            let stages = r.codec_ns;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.cell.work.codec().map_or_else(dash, |c| c.to_string()),
                r.cell.transport_label(),
                r.cell.payload_label,
                r.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                r.latency_ns.map_or_else(dash, |l| nanos(l.p99)),
                stages
                    .and_then(|s| s.encode_ns)
                    .map_or_else(dash, |l| nanos(l.p50)),
                stages
                    .and_then(|s| s.decode_ns)
                    .map_or_else(dash, |l| nanos(l.p50)),
                r.throughput
                    .map_or_else(dash, |t| format!("{:.1}", t.mb_per_s)),
                r.first_round_trip_ns.map_or_else(dash, nanos),
                counted(r.instructions.as_ref().and_then(|i| i.encode)),
                counted(r.instructions.as_ref().and_then(|i| i.decode)),
            );
        }
        unfold(&mut md);
    }

    let fans = fan_results(report);
    if !fans.is_empty() {
        fold(
            &mut md,
            "Fan-out and fan-in: one-way latency per frame; dropped: not delivered before its deadline, or missing",
            fans.len(),
        );
        md.push_str("| cell | frames | dropped | latency p50 | p99 | max | frames/s | total |\n");
        md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in fans {
            let dash = || "-".to_string();
            let frames = r.cell.warmup + r.cell.iterations;
            let _ = writeln!(
                md,
                "| `{}` | {frames} x 2 | {} | {} | {} | {} | {} | {:.2}s |",
                r.cell.id,
                r.lost,
                r.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
                r.latency_ns.map_or_else(dash, |l| nanos(l.p99)),
                r.latency_ns.map_or_else(dash, |l| nanos(l.max)),
                r.round_trips_per_sec
                    .map_or_else(dash, |v| format!("{v:.0}")),
                r.wall_seconds,
            );
        }
        unfold(&mut md);
    }

    for table in seed_tables(report) {
        fold(&mut md, table.title, table.rows.len());
        let _ = writeln!(md, "| {} |", table.header.join(" | "));
        let _ = writeln!(
            md,
            "|---|{}",
            "---:|".repeat(table.header.len().saturating_sub(1))
        );
        for row in table.rows {
            let mut cells = row.into_iter();
            let id = cells.next().unwrap_or_default();
            let rest: Vec<String> = cells.collect();
            let _ = writeln!(md, "| `{id}` | {} |", rest.join(" | "));
        }
        unfold(&mut md);
    }

    let stable: Vec<_> = report
        .results
        .iter()
        .filter_map(|r| Some((r, stability(&r.samples_ns)?)))
        .collect();
    if !stable.is_empty() {
        fold(&mut md, "Stability of long runs", stable.len());
        md.push_str("| cell | round trips | p50 first 10 % | p50 last 10 % | drift | p99.9 | max | p99 / p50 |\n");
        md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (r, s) in stable {
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {:.2}x | {} | {} | {:.2} |",
                r.cell.id,
                r.samples_ns.len(),
                nanos(s.first_tenth_p50_ns),
                nanos(s.last_tenth_p50_ns),
                s.drift,
                nanos(s.p999_ns),
                nanos(s.max_ns),
                s.p99_over_p50
            );
        }
        unfold(&mut md);
    }

    // A note of one cell is a line; notes shared by several cells are one folded line
    // with their count.
    let groups = note_groups(report);
    if !groups.is_empty() {
        md.push_str("\n### Notes\n\n");
        for group in &groups {
            if let [(id, note)] = group.cells.as_slice() {
                let _ = writeln!(md, "- `{id}`: {}", text(note));
            }
        }
        for group in groups.iter().filter(|g| g.cells.len() > 1) {
            let _ = writeln!(
                md,
                "\n<details><summary>{}: {}</summary>\n",
                text(&group.what),
                cells_text(group.cells.len())
            );
            for (id, note) in &group.cells {
                let _ = writeln!(md, "- `{id}`: {}", text(note));
            }
            md.push_str("\n</details>\n");
        }
    }

    if let Some(first) = report.results.first() {
        let env = &first.environment;
        let placement = match (first.placement.measurer_cpu, first.placement.peer_cpu) {
            (Some(m), Some(p)) => format!("measurer on CPU {m}, peer on CPU {p}"),
            _ => "left to the scheduler".into(),
        };
        let _ = writeln!(
            md,
            "\n<details><summary>Environment and method</summary>\n\n\
             - CPU: {} ({} logical cores); kernel {}\n\
             - runner: {}{}\n\
             - build: {} profile, opt-level {}, {}\n\
             - placement: {placement}\n\
             - machine probe (a cache line's round trip between the two CPUs, just before each cell): {}\n\
             - payloads: {}\n\
             - verdicts: batch medians of the run vs the baseline's; regressed when the Mann-Whitney p < {ALPHA} and the whole 95 % bootstrap interval of the median ratio lies above 1 + margin (the profile's `min_change`, wider for a noisy cell)\n\
             \n</details>",
            env.cpu_model,
            env.logical_cores,
            env.kernel,
            env.runner,
            env.qemu_version
                .as_deref()
                .map_or(String::new(), |v| format!(" ({v})")),
            env.build_profile,
            env.opt_level,
            env.rustc,
            probe_range(report),
            payload_list(report),
        );
    }
    let _ = writeln!(md, "\nReport written {}.", utc(report.generated_at_unix));
    md
}

fn payload_list(report: &LegReport) -> String {
    let mut sizes: Vec<u64> = report
        .results
        .iter()
        .map(|r| r.cell.payload_bytes)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes.into_iter().map(bytes).collect::<Vec<_>>().join(", ")
}

/// An instruction count, whole, or a dash when there is none.
fn counted(instructions: Option<f64>) -> String {
    instructions.map_or_else(|| "-".to_string(), |n| format!("{n:.0}"))
}

/// Opens a folded section: one line, `title (n cells)`, until [`unfold`].
fn fold(md: &mut String, title: &str, cells: usize) {
    let _ = writeln!(
        md,
        "\n<details><summary>{} ({})</summary>\n",
        text(title),
        cells_text(cells)
    );
}

fn unfold(md: &mut String) {
    md.push_str("\n</details>\n");
}

/// Failures with their reasons, then regressions and improvements with their ratios,
/// intervals and a text plot; one sentence when nothing changed.
fn what_changed(md: &mut String, changes: &Changes) {
    md.push_str("### What changed\n\n");
    if changes.is_quiet() {
        md.push_str("Nothing failed, regressed or improved: every cell with a baseline is within its margin of it.\n\n");
        return;
    }
    let gating: Vec<&str> = changes
        .regressed
        .iter()
        .filter(|(_, c)| gates(c, Verdict::Regressed))
        .map(|(_, c)| c.cell_id.as_str())
        .collect();
    if !gating.is_empty() {
        let _ = writeln!(
            md,
            "> [!WARNING]\n> {} regressed where it counts: {}.\n",
            cells_text(gating.len()),
            gating
                .iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !changes.failed.is_empty() {
        let _ = writeln!(md, "#### Failed ({})\n", changes.failed.len());
        md.push_str("| cell | failure | reason |\n|---|---|---|\n");
        for (result, _) in &changes.failed {
            if let Some(failure) = &result.outcome.failure {
                let _ = writeln!(
                    md,
                    "| `{}` | {:?} | {} |",
                    result.cell.id,
                    failure.kind,
                    cell_text(&failure.reason)
                );
            }
        }
        md.push('\n');
    }
    for (title, rows, verdict) in [
        ("Regressed", &changes.regressed, Verdict::Regressed),
        ("Improved", &changes.improved, Verdict::Improved),
    ] {
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(md, "#### {title} ({})\n", rows.len());
        change_table(md, rows, verdict);
    }
}

fn cells_text(n: usize) -> String {
    match n {
        1 => "1 cell".into(),
        n => format!("{n} cells"),
    }
}

/// The cells that moved one way: the timing change with its interval drawn as a strip,
/// and the instruction change, each marked when it only informs.
fn change_table(md: &mut String, rows: &[Row], verdict: Verdict) {
    md.push_str("| cell | baseline p50 | p50 | ratio (95 % CI) | against the baseline | p | instructions/round trip | gates |\n");
    md.push_str("|---|---:|---:|---:|---|---:|---:|---|\n");
    for (result, cell) in rows {
        let dash = || "-".to_string();
        let timing = cell.change.filter(|_| cell.verdict == verdict);
        let instructions = cell
            .instructions
            .as_ref()
            .filter(|i| i.verdict == verdict)
            .map_or_else(dash, |i| {
                format!(
                    "{} -> {:.0} ({:.3}x, margin {:.1} %)",
                    i.baseline.map_or_else(dash, |b| format!("{b:.0}")),
                    i.current,
                    i.ratio.unwrap_or(1.0),
                    i.margin * 100.0
                )
            });
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
            result.cell.id,
            cell.baseline_p50_ns.map_or_else(dash, nanos),
            result.latency_ns.map_or_else(dash, |l| nanos(l.p50)),
            timing.map_or_else(dash, |c| ratio(c.ratio, c.ci_low, c.ci_high)),
            timing.map_or_else(dash, |c| format!(
                "`{}`",
                interval_strip(c.ratio, c.ci_low, c.ci_high, c.margin)
            )),
            timing.map_or_else(dash, |c| p_value(c.p_value)),
            instructions,
            if gates(cell, verdict) {
                "yes"
            } else {
                "no (informational)"
            },
        );
    }
    md.push_str("\nAgainst the baseline, on a log scale from 0.5x to 2x: `│` is 1.0x, `░` the margin a change must clear, `━` the 95 % interval, `●` the estimate.\n\n");
}

/// Every cell in run order, one row each.
fn cell_table<'a>(md: &mut String, rows: impl Iterator<Item = (&'a CellResult, &'a CellVerdict)>) {
    md.push_str("| cell | result | p50 | p99 | p99.9 | round trips/s | MB/s | baseline p50 | ratio (95 % CI) | verdict | instructions/round trip | instructions |\n");
    md.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n");
    for (result, cell) in rows {
        let latency = result.latency_ns;
        let dash = || "-".to_string();
        let verdict_text = match (cell.verdict, cell.gating) {
            (Verdict::Regressed, true) => "**regressed**".to_string(),
            (Verdict::Improved, _) => "improved".to_string(),
            (v, true) => v.as_str().to_string(),
            (v, false) => format!("{} (informational)", v.as_str()),
        };
        let (instructions, instruction_verdict, regressed) =
            super::model::instruction_columns(cell);
        let instruction_verdict = if regressed {
            format!("**{instruction_verdict}**")
        } else {
            instruction_verdict
        };
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            result.cell.id,
            if result.outcome.passed {
                "pass"
            } else {
                "**FAIL**"
            },
            latency.map_or_else(dash, |l| nanos(l.p50)),
            latency.map_or_else(dash, |l| nanos(l.p99)),
            latency.map_or_else(dash, |l| nanos(l.p999)),
            result
                .round_trips_per_sec
                .map_or_else(dash, |v| format!("{v:.0}")),
            result
                .throughput
                .map_or_else(dash, |t| format!("{:.1}", t.mb_per_s)),
            cell.baseline_p50_ns.map_or_else(dash, nanos),
            cell.change
                .map_or_else(dash, |c| ratio(c.ratio, c.ci_low, c.ci_high)),
            verdict_text,
            instructions,
            instruction_verdict,
        );
    }
}

/// Prose inside a table cell: also without the pipes and line breaks that would end it.
fn cell_text(prose: &str) -> String {
    text(prose).replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leg::stacks::stacks;
    use ipc_matrix_results::fixture::{environment, passed, quick_cells};
    use ipc_matrix_spec::RegressionPolicy;

    /// A user's stack, read from results by a process that never registered it, is a
    /// stack of its own name on the page, next to its floor, as ours are.
    #[test]
    fn a_users_stack_read_from_results_stands_by_its_own_name() {
        let mut cells = quick_cells(
            "  - { name: echo, kind: echo, transports: [tcp, local], payloads: [200B], iterations: 10, timeout: 1s }\n",
        );
        cells[1].transport = ipc_matrix_spec::TransportKind::named("their-ring").unwrap();
        cells[1].id = "echo::their-ring::200B".into();
        let env = environment("native", "cpu");
        let results: Vec<CellResult> = cells
            .iter()
            .zip([3_000u64, 1_000])
            .map(|(cell, ns)| passed(cell, &env, vec![ns; 10]))
            .map(|r| serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap())
            .collect();
        assert_eq!(results[1].cell.transport.as_str(), "their-ring");
        let report = LegReport::new(results, None, RegressionPolicy::default(), 0);
        let names: Vec<String> = stacks(&report).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["their-ring", "tcp"]);
        let page = markdown(&report);
        assert!(
            page.contains("| their-ring | `echo::their-ring::200B` |"),
            "{page}"
        );
    }
}
