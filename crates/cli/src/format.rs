//! Human-readable numbers and the summary table.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TableCell, CellAlignment, Table};
use ipc_matrix_report::units::{bytes, nanos};
use ipc_matrix_results::{CellResult, Floor};
use ipc_matrix_scenario::SelectedFloor;

/// One line per finished cell: verdict, id, and the headline numbers.
pub fn verdict_line(result: &CellResult) -> String {
    let id = &result.cell.id;
    match (&result.outcome.failure, &result.latency_ns) {
        (Some(failure), _) => format!("FAIL {id}: {}", failure.reason),
        (None, Some(l)) => {
            // A logging cell's timings are per line (batch means), the others' per round trip.
            let mut line = format!(
                "PASS {id}  p50 {}  p99 {}  max {}",
                nanos(l.p50),
                nanos(l.p99),
                nanos(l.max)
            );
            if let Some(floor) = result.floor {
                line.push_str(&format!("  {}", vs_floor(&floor)));
            }
            if let Some(t) = result
                .throughput
                .filter(|_| result.cell.payload_bytes >= 1 << 20)
            {
                line.push_str(&format!("  {:.0} MB/s", t.mb_per_s));
            }
            if result.lost > 0 {
                line.push_str(&format!("  lost {}", result.lost));
            }
            if let Some(load) = result.load {
                line.push_str(&format!(
                    "  {:.0} transactions/s  {:.2} % answered",
                    load.transactions_per_sec,
                    load.success_rate * 100.0
                ));
            }
            if let Some(logging) = result.logging {
                line.push_str(&format!(
                    "  {} per line over {} lines",
                    nanos(logging.ns_per_line.round() as u64),
                    logging.lines
                ));
            }
            line
        }
        (None, None) => format!("PASS {id}"),
    }
}

pub fn summary_table(results: &[CellResult]) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "cell",
        "result",
        "p50",
        "vs floor",
        "p90",
        "p99",
        "p99.9",
        "max",
        "mean",
        "round trips/s",
        "MB/s",
        "Mbit/s",
        "lost",
    ]);
    for r in results {
        let l = r.latency_ns;
        let t = r.throughput;
        let cell = |s: String| TableCell::new(s).set_alignment(CellAlignment::Right);
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        table.add_row(vec![
            TableCell::new(&r.cell.id),
            TableCell::new(if r.outcome.passed { "pass" } else { "FAIL" }),
            cell(or_dash(l.map(|l| nanos(l.p50)))),
            cell(or_dash(
                r.floor.and_then(|f| f.ratio).map(|x| format!("{x:.2}x")),
            )),
            cell(or_dash(l.map(|l| nanos(l.p90)))),
            cell(or_dash(l.map(|l| nanos(l.p99)))),
            cell(or_dash(l.map(|l| nanos(l.p999)))),
            cell(or_dash(l.map(|l| nanos(l.max)))),
            cell(or_dash(l.map(|l| nanos(l.mean as u64)))),
            cell(or_dash(r.round_trips_per_sec.map(|v| format!("{v:.0}")))),
            cell(or_dash(t.map(|t| format!("{:.1}", t.mb_per_s)))),
            cell(or_dash(t.map(|t| format!("{:.1}", t.mbit_per_s)))),
            cell(r.lost.to_string()),
        ]);
    }
    table
}

/// `1.31x its spin floor (160ns)`.
pub fn vs_floor(floor: &Floor) -> String {
    match floor.ratio {
        Some(ratio) => format!(
            "{ratio:.2}x its {} floor ({})",
            floor.probe,
            nanos(floor.p50_ns)
        ),
        None => format!("{} floor {}", floor.probe, nanos(floor.p50_ns)),
    }
}

/// The floors of a selection: probe, payload, round trips, median, and the cells each
/// stands for.
pub fn floor_table(floors: &[SelectedFloor]) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header(["floor", "payload", "round trips", "p50", "cells"]);
    for selected in floors {
        let right = |s: String| TableCell::new(s).set_alignment(CellAlignment::Right);
        let cells = match selected.cells.as_slice() {
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} and {} more", rest.len()),
            [] => String::new(),
        };
        table.add_row(vec![
            TableCell::new(selected.probe.as_str()),
            right(bytes(selected.payload_bytes)),
            right(format!("{} + {}", selected.rounds.0, selected.rounds.1)),
            right(
                selected
                    .floor
                    .map_or("not measured".into(), |f| nanos(f.p50_ns)),
            ),
            TableCell::new(cells),
        ]);
    }
    table
}
