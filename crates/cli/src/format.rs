//! Human-readable numbers and the summary table.

use crate::term::{console, fit, painted, Fitted, Paint};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TableCell, CellAlignment, Table};
use ipc_matrix_report::units::{bytes, nanos};
use ipc_matrix_results::{printable, CellResult, Floor};
use ipc_matrix_scenario::SelectedFloor;

/// One line per finished cell: verdict, id, and the headline numbers.
pub fn verdict_line(result: &CellResult) -> String {
    numbered_verdict_line(result, None)
}

/// A cell this machine cannot run, and what it needs: `SKIP [ 3/81] echo-netns::tcp::200B:
/// needs CAP_NET_ADMIN`.
pub fn skipped_line(id: &str, need: &str, (n, total): (usize, usize)) -> String {
    let width = total.to_string().len();
    let word = console().paint(Paint::Warn, "SKIP");
    format!("{word} [{n:>width$}/{total}] {id}: {need}")
}

/// [`verdict_line`], with the cell's place in the run after the verdict when given:
/// `PASS [ 3/81] echo::tcp::200B  p50 ...`. The verdict is coloured when the console is.
pub fn numbered_verdict_line(result: &CellResult, place: Option<(usize, usize)>) -> String {
    let id = &result.cell.id;
    let verdict = |word: &str, paint: Paint| {
        let word = console().paint(paint, word);
        match place {
            Some((n, total)) => {
                let width = total.to_string().len();
                format!("{word} [{n:>width$}/{total}]")
            }
            None => word,
        }
    };
    match (&result.outcome.failure, &result.latency_ns) {
        // The reason quotes a peer, matrix.yaml and the environment.
        (Some(failure), _) => format!(
            "{} {id}: {}",
            verdict("FAIL", Paint::Bad),
            printable(&failure.reason)
        ),
        (None, Some(l)) => {
            // A logging cell's timings are per line (batch means), the others' per round trip.
            let mut line = format!(
                "{} {id}  p50 {}  p99 {}  max {}",
                verdict("PASS", Paint::Good),
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
        (None, None) => format!("{} {id}", verdict("PASS", Paint::Good)),
    }
}

/// The summary of a run, one row per cell, fitted to the terminal.
pub fn summary_table(results: &[CellResult]) -> Fitted {
    fit(summary_rows(results), &[0], &SUMMARY_DROP_ORDER)
}

/// The summary's columns left out first when the terminal is narrow: Mbit/s, p90,
/// mean, p99.9, round trips/s, lost, MB/s, max, vs floor, p99; the cell, its result and
/// p50 stay.
pub const SUMMARY_DROP_ORDER: [usize; 10] = [11, 4, 8, 6, 9, 12, 10, 7, 3, 5];

/// The summary's rows, as wide as they are.
pub fn summary_rows(results: &[CellResult]) -> Table {
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
            if r.outcome.passed {
                painted("pass", Paint::Good)
            } else {
                painted("FAIL", Paint::Bad)
            },
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
/// stands for; fitted to the terminal (round trips, then payload, left out first).
pub fn floor_table(floors: &[SelectedFloor]) -> Fitted {
    fit(floor_rows(floors), &[0], &[2, 1])
}

fn floor_rows(floors: &[SelectedFloor]) -> Table {
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
                    .map_or_else(|| "not measured".into(), |f| nanos(f.p50_ns)),
            ),
            TableCell::new(cells),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::{fit_to, strip_ansi};
    use ipc_matrix_results::{fixture, FailureKind};

    /// One result per cell of the repository's quick profile (the longest ids there are),
    /// every other one failed.
    fn results() -> Vec<CellResult> {
        let cells = fixture::cells(include_str!("../../../matrix.yaml"), "quick");
        let environment = fixture::environment("native", "test CPU");
        cells
            .iter()
            .enumerate()
            .map(|(i, cell)| match i % 2 {
                0 => fixture::passed(cell, &environment, vec![41_000, 45_000, 1_250_000]),
                _ => fixture::failed(cell, &environment, FailureKind::Mismatch, 3, "differs"),
            })
            .collect()
    }

    fn widest(text: &str) -> usize {
        text.lines()
            .map(|l| strip_ansi(l).chars().count())
            .max()
            .unwrap()
    }

    #[test]
    fn the_summary_fits_80_columns_with_every_cell_id_whole() {
        let results = results();
        for color in [false, true] {
            let fitted = fit_to(
                summary_rows(&results),
                Some(80),
                color,
                &[0],
                &SUMMARY_DROP_ORDER,
            );
            let text = fitted.to_string();
            assert!(widest(&text) <= 80, "wider than 80:\n{text}");
            for r in &results {
                assert!(
                    text.lines()
                        .any(|l| strip_ansi(l).contains(&format!(" {} ", r.cell.id))),
                    "{} is not on one line:\n{text}",
                    r.cell.id
                );
            }
            // What matters most stays; what was left out is said.
            let header = strip_ansi(text.lines().nth(1).unwrap());
            for kept in ["cell", "result", "p50"] {
                assert!(header.contains(kept), "{header}");
            }
            assert!(!fitted.left_out.is_empty());
            assert!(text.contains("(not shown, to fit: Mbit/s"), "{text}");
            assert_eq!(text.contains("\x1b["), color, "{text}");
        }
    }

    #[test]
    fn a_wide_terminal_or_none_shows_every_column() {
        let results = results();
        for width in [None, Some(400)] {
            let fitted = fit_to(
                summary_rows(&results),
                width,
                false,
                &[0],
                &SUMMARY_DROP_ORDER,
            );
            assert!(fitted.left_out.is_empty());
            let text = fitted.to_string();
            assert!(widest(&text) > 80);
            let header = text.lines().nth(1).unwrap();
            for column in ["p90", "p99.9", "round trips/s", "Mbit/s", "lost"] {
                assert!(header.contains(column), "{header}");
            }
        }
    }

    #[test]
    fn a_numbered_line_says_the_cells_place_after_its_verdict() {
        let results = results();
        let line = numbered_verdict_line(&results[0], Some((3, 12)));
        assert!(line.starts_with("PASS [ 3/12] "), "{line}");
        let line = numbered_verdict_line(&results[1], Some((12, 12)));
        assert!(line.starts_with("FAIL [12/12] "), "{line}");
        assert!(verdict_line(&results[0]).starts_with(&format!("PASS {}", results[0].cell.id)));
    }
}
