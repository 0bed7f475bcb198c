//! The tables of the seeds' own measures, for kinds whose headline is not a round trip:
//! request/reply rates (seeds 000 and 001), UDP under load (004) and logging (002). Built
//! once as text and rendered by both report formats.

use super::model::LegReport;
use crate::units::nanos;
use ipc_matrix_results::CellResult;
use ipc_matrix_spec::{LoadShape, ScenarioKind, Work};

/// One titled table of formatted text.
pub struct SeedTable {
    /// The kinds whose cells it holds.
    pub kinds: &'static [ScenarioKind],
    pub title: &'static str,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The clients and server threads of a `udp-load` cell.
fn load_shape(result: &CellResult) -> Option<LoadShape> {
    match result.cell.work {
        Work::UdpLoad(load) => Some(load.shape),
        _ => None,
    }
}

pub fn seed_tables(report: &LegReport) -> Vec<SeedTable> {
    // In matrix order: scenario, transport, shape, then payload size.
    let of = |kinds: &[ScenarioKind]| -> Vec<&CellResult> {
        let mut results: Vec<&CellResult> = report
            .results
            .iter()
            .filter(|r| kinds.contains(&r.cell.kind()))
            .collect();
        results.sort_by_key(|r| {
            (
                r.cell.scenario.clone(),
                r.cell.transport_label(),
                load_shape(r).map(|l| (l.clients, l.server_threads)),
                r.cell.payload_bytes,
            )
        });
        results
    };
    let dash = || "-".to_string();
    let p = |r: &CellResult, pick: fn(&ipc_matrix_results::LatencyStats) -> u64| {
        r.latency_ns.map_or_else(dash, |l| nanos(pick(&l)))
    };
    let header = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut tables = Vec::new();

    let request_reply = of(&[ScenarioKind::Rpc, ScenarioKind::ReqRep]);
    if !request_reply.is_empty() {
        tables.push(SeedTable {
            kinds: &[ScenarioKind::Rpc, ScenarioKind::ReqRep],
            title: "Request/reply: Cap'n Proto RPC and ZeroMQ REQ/REP, one request in flight",
            header: header(&[
                "cell",
                "requests",
                "requests/s",
                "p50",
                "p99",
                "max",
                "MB/s one way",
            ]),
            rows: request_reply
                .into_iter()
                .map(|r| {
                    vec![
                        r.cell.id.clone(),
                        r.measured_round_trips.to_string(),
                        r.round_trips_per_sec
                            .map_or_else(dash, |v| format!("{v:.0}")),
                        p(r, |l| l.p50),
                        p(r, |l| l.p99),
                        p(r, |l| l.max),
                        r.round_trips_per_sec.map_or_else(dash, |v| {
                            format!("{:.1}", v * r.cell.payload_bytes as f64 / 1e6)
                        }),
                    ]
                })
                .collect(),
        });
    }

    let loads: Vec<_> = of(&[ScenarioKind::UdpLoad])
        .into_iter()
        .filter_map(|r| Some((r, load_shape(r)?, r.load)))
        .collect();
    if !loads.is_empty() {
        // Cells whose peer ran on a second host counted the IP fragments on its link:
        // columns of their own, beside the success rate, and the seed's figure across
        // two real hosts to read them by.
        let fragmented = loads
            .iter()
            .any(|(_, _, stats)| stats.is_some_and(|s| s.fragmentation.is_some()));
        let mut columns = vec![
            "cell",
            "clients",
            "server threads",
            "payload",
            "transactions/s",
            "success rate",
        ];
        if fragmented {
            columns.extend([
                "IP fragments per request",
                "requests reassembled / failed",
                "fragments made for echoes",
            ]);
        }
        columns.extend([
            "sent",
            "lost",
            "late echoes",
            "server received",
            "p50",
            "p99",
        ]);
        tables.push(SeedTable {
            kinds: &[ScenarioKind::UdpLoad],
            title: if fragmented {
                "UDP under load: each client waits for its echo; lost = no echo before the deadline. IP fragments: counted on the peer's second host (a network namespace); seed 004, across two LAN hosts: success rate drops at 65507 B (about 90 %)"
            } else {
                "UDP under load: each client waits for its echo; lost = no echo before the deadline"
            },
            header: header(&columns),
            rows: loads
                .into_iter()
                .map(|(r, shape, stats)| {
                    let fragments = stats.and_then(|s| s.fragmentation);
                    let fragment_cells = fragmented.then(|| {
                        [
                            fragments
                                .and_then(|f| f.fragments_per_datagram())
                                .map_or_else(dash, |n| format!("{n:.1}")),
                            fragments.map_or_else(dash, |f| {
                                format!("{} / {}", f.reassembled, f.reassembly_failed)
                            }),
                            fragments.map_or_else(dash, |f| f.fragments_created.to_string()),
                        ]
                    });
                    let mut row = vec![
                        r.cell.id.clone(),
                        shape.clients.to_string(),
                        shape.server_threads.to_string(),
                        r.cell.payload_label.clone(),
                        stats.map_or_else(dash, |s| format!("{:.0}", s.transactions_per_sec)),
                        stats.map_or_else(dash, |s| format!("{:.2} %", s.success_rate * 100.0)),
                    ];
                    row.extend(fragment_cells.into_iter().flatten());
                    row.extend([
                        stats.map_or_else(dash, |s| s.sent.to_string()),
                        stats.map_or_else(dash, |s| s.timeouts.to_string()),
                        stats.map_or_else(dash, |s| s.late_replies.to_string()),
                        stats
                            .and_then(|s| s.server_received)
                            .map_or_else(dash, |n| n.to_string()),
                        p(r, |l| l.p50),
                        p(r, |l| l.p99),
                    ]);
                    row
                })
                .collect(),
        });
    }

    let logging = of(&[ScenarioKind::Logging]);
    if !logging.is_empty() {
        tables.push(SeedTable {
            kinds: &[ScenarioKind::Logging],
            title: "Logging: lines written, then read back and compared (per line: all lines, close included; batches of 1000, per line: the measured batches' writes alone, as instructions/line)",
            header: header(&[
                "cell", "lines", "total", "per line", "batch p50", "batch p99", "after the last line",
                "lines/s", "instructions/line",
            ]),
            rows: logging
                .into_iter()
                .map(|r| {
                    let stats = r.logging;
                    vec![
                        r.cell.id.clone(),
                        stats.map_or_else(dash, |s| s.lines.to_string()),
                        stats.map_or_else(dash, |s| {
                            format!("{:.3}s", s.ns_per_line * s.lines as f64 / 1e9)
                        }),
                        stats.map_or_else(dash, |s| nanos(s.ns_per_line.round() as u64)),
                        p(r, |l| l.p50),
                        p(r, |l| l.p99),
                        stats.map_or_else(dash, |s| nanos(s.drain_ns)),
                        r.round_trips_per_sec.map_or_else(dash, |v| format!("{v:.0}")),
                        r.instructions
                            .as_ref()
                            .and_then(|i| i.measuring)
                            .map_or_else(dash, |n| format!("{n:.0}")),
                    ]
                })
                .collect(),
        });
    }
    tables
}
