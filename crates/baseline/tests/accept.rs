//! Accepting a run as the baseline: which cells the new baseline keeps, adds and drops.

use ipc_matrix_baseline::{
    accept, AcceptError, AcceptMode, Accepted, Baseline, NotRunFate, Refusal, RefusalReason,
    MAX_RUNS,
};
use ipc_matrix_results::{fixture, CellResult, Environment, FailureKind};
use ipc_matrix_spec::Cell;

const SCENARIOS: &str = "
  - { name: echo, kind: echo, transports: [tcp, udp, local], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
";
const TCP: &str = "echo::tcp::200B";
const UDP: &str = "echo::udp::200B";
const LOCAL: &str = "echo::local::200B";

fn cells() -> Vec<Cell> {
    let cells = fixture::quick_cells(SCENARIOS);
    let ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, [TCP, UDP, LOCAL]);
    cells
}

fn env(cpu_model: &str) -> Environment {
    fixture::environment("native", cpu_model)
}

/// 300 round trips of exactly `ns` each: a cell's batch medians are then all `ns`.
fn passed(cell: &Cell, ns: u64) -> CellResult {
    fixture::passed(cell, &env("Test CPU"), vec![ns; 300])
}

/// One passing result per cell, every round trip of `ns`.
fn run(ns: u64) -> Vec<CellResult> {
    cells().iter().map(|c| passed(c, ns)).collect()
}

fn failed(cell: &Cell) -> CellResult {
    fixture::failed(
        cell,
        &env("Test CPU"),
        FailureKind::Timeout,
        4,
        "no reply before the deadline",
    )
}

fn slowed(cell: &Cell, ns: u64) -> CellResult {
    let mut result = passed(cell, ns);
    result.peer_delay_us = Some(50);
    result
}

/// The baseline of one accepted run of every cell at `ns`, accepted at time 1.
fn old_baseline(ns: u64) -> Baseline {
    Baseline::from_results(&run(ns), 1).unwrap()
}

fn ok(accepted: Result<Accepted, AcceptError>) -> Accepted {
    accepted.unwrap_or_else(|e| panic!("{e}"))
}

fn ids(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|s| s.to_string()).collect()
}

/// The accepted-at times of a cell's runs, oldest first.
fn run_times(baseline: &Baseline, id: &str) -> Vec<u64> {
    baseline.cells[id]
        .runs
        .iter()
        .map(|r| r.accepted_at_unix)
        .collect()
}

#[test]
fn a_failed_cell_keeps_its_old_entry() {
    let old = old_baseline(40_000);
    let cells = cells();
    let results = [
        passed(&cells[0], 20_000),
        failed(&cells[1]),
        passed(&cells[2], 20_000),
    ];
    for mode in [AcceptMode::Replace, AcceptMode::Append] {
        let accepted = ok(accept(Some(&old), &results, mode, 2));
        assert_eq!(accepted.baseline.cells[UDP], old.cells[UDP], "{mode:?}");
        assert_ne!(accepted.baseline.cells[TCP], old.cells[TCP], "{mode:?}");
        assert_eq!(
            accepted.refused,
            [Refusal {
                cell_id: UDP.into(),
                reason: RefusalReason::Failed,
                kept_old_entry: true,
            }],
            "{mode:?}"
        );
        assert!(accepted.dropped.is_empty(), "{mode:?}");
    }
}

#[test]
fn a_cell_run_with_a_slowed_peer_keeps_its_old_entry() {
    let old = old_baseline(40_000);
    let cells = cells();
    let results = [
        passed(&cells[0], 40_000),
        passed(&cells[1], 40_000),
        slowed(&cells[2], 90_000),
    ];
    for mode in [AcceptMode::Replace, AcceptMode::Append] {
        let accepted = ok(accept(Some(&old), &results, mode, 2));
        assert_eq!(accepted.baseline.cells[LOCAL], old.cells[LOCAL], "{mode:?}");
        assert_eq!(run_times(&accepted.baseline, LOCAL), [1], "{mode:?}");
        assert_eq!(
            accepted.refused,
            [Refusal {
                cell_id: LOCAL.into(),
                reason: RefusalReason::SlowedPeer,
                kept_old_entry: true,
            }],
            "{mode:?}"
        );
    }
    // The cells that ran normally took the new run.
    let appended = ok(accept(Some(&old), &results, AcceptMode::Append, 2));
    assert_eq!(run_times(&appended.baseline, TCP), [1, 2]);
    let replaced = ok(accept(Some(&old), &results, AcceptMode::Replace, 2));
    assert_eq!(run_times(&replaced.baseline, TCP), [2]);
}

#[test]
fn a_result_timed_at_0_ns_throughout_is_no_measurement_and_is_refused() {
    let old = old_baseline(40_000);
    let cells = cells();
    let results = [
        passed(&cells[0], 40_000),
        passed(&cells[1], 0),
        passed(&cells[2], 40_000),
    ];
    for mode in [AcceptMode::Replace, AcceptMode::Append] {
        let accepted = ok(accept(Some(&old), &results, mode, 2));
        assert_eq!(accepted.baseline.cells[UDP], old.cells[UDP], "{mode:?}");
        assert_eq!(
            accepted.refused,
            [Refusal {
                cell_id: UDP.into(),
                reason: RefusalReason::NothingMeasured,
                kept_old_entry: true,
            }],
            "{mode:?}"
        );
    }
    // Without an old entry it is left out; a run of nothing else has nothing to accept.
    let fresh = ok(accept(None, &results, AcceptMode::Replace, 2));
    assert!(!fresh.baseline.cells.contains_key(UDP));
    let zeros: Vec<CellResult> = cells.iter().map(|c| passed(c, 0)).collect();
    assert_eq!(
        accept(None, &zeros, AcceptMode::Replace, 2),
        Err(AcceptError::NoPassingCell)
    );
}

#[test]
fn a_refused_cell_without_an_old_entry_is_left_out() {
    let cells = cells();
    let results = [
        passed(&cells[0], 40_000),
        failed(&cells[1]),
        slowed(&cells[2], 40_000),
    ];
    let accepted = ok(accept(None, &results, AcceptMode::Replace, 2));
    let kept: Vec<&String> = accepted.baseline.cells.keys().collect();
    assert_eq!(kept, [TCP]);
    assert_eq!(
        accepted.refused,
        [
            Refusal {
                cell_id: UDP.into(),
                reason: RefusalReason::Failed,
                kept_old_entry: false,
            },
            Refusal {
                cell_id: LOCAL.into(),
                reason: RefusalReason::SlowedPeer,
                kept_old_entry: false,
            },
        ]
    );
    assert_eq!(accepted.added, ids(&[TCP]));
}

#[test]
fn a_new_cell_is_added() {
    let cells = cells();
    // The old baseline knew tcp and udp only.
    let old = Baseline::from_results(&run(40_000)[..2], 1).unwrap();
    for mode in [AcceptMode::Replace, AcceptMode::Append] {
        let accepted = ok(accept(Some(&old), &run(40_000), mode, 2));
        assert_eq!(accepted.added, ids(&[LOCAL]), "{mode:?}");
        assert!(accepted.dropped.is_empty(), "{mode:?}");
        assert_eq!(run_times(&accepted.baseline, LOCAL), [2], "{mode:?}");
        assert_eq!(
            accepted.baseline.cells[LOCAL].payload_bytes,
            cells[2].payload_bytes
        );
    }
    // Without an old baseline every accepted cell is new (sorted by id).
    let fresh = ok(accept(None, &run(40_000), AcceptMode::Replace, 2));
    assert_eq!(fresh.added, ids(&[LOCAL, TCP, UDP]));
}

#[test]
fn replacing_drops_the_cells_not_run_and_appending_keeps_them() {
    let old = old_baseline(40_000);
    let only_tcp = &run(30_000)[..1];

    assert_eq!(AcceptMode::Replace.not_run_fate(), NotRunFate::Dropped);
    let replaced = ok(accept(Some(&old), only_tcp, AcceptMode::Replace, 2));
    assert_eq!(replaced.dropped, ids(&[LOCAL, UDP]));
    let kept: Vec<&String> = replaced.baseline.cells.keys().collect();
    assert_eq!(kept, [TCP]);
    assert!(replaced.added.is_empty());

    assert_eq!(AcceptMode::Append.not_run_fate(), NotRunFate::Kept);
    let appended = ok(accept(Some(&old), only_tcp, AcceptMode::Append, 2));
    assert!(appended.dropped.is_empty());
    assert_eq!(appended.baseline.cells[UDP], old.cells[UDP]);
    assert_eq!(appended.baseline.cells[LOCAL], old.cells[LOCAL]);
    assert_eq!(run_times(&appended.baseline, TCP), [1, 2]);
}

#[test]
fn appending_keeps_the_last_five_runs_of_a_cell() {
    // The number the book (guide/baselines.md) and `baseline accept --help` promise.
    assert_eq!(MAX_RUNS, 5);
    let mut baseline = old_baseline(40_000);
    for at in 2..=8 {
        baseline = ok(accept(
            Some(&baseline),
            &run(40_000 + at),
            AcceptMode::Append,
            at,
        ))
        .baseline;
    }
    for id in [TCP, UDP, LOCAL] {
        assert_eq!(run_times(&baseline, id), [4, 5, 6, 7, 8], "{id}");
        // The newest run is the last one, with its own timings.
        assert_eq!(baseline.cells[id].runs[4].p50_ns, 40_008, "{id}");
    }
    assert_eq!(baseline.accepted_at_unix, 8);
}

#[test]
fn replacing_starts_every_cell_afresh() {
    let mut baseline = old_baseline(40_000);
    for at in 2..=3 {
        baseline = ok(accept(
            Some(&baseline),
            &run(40_000),
            AcceptMode::Append,
            at,
        ))
        .baseline;
    }
    assert_eq!(run_times(&baseline, TCP), [1, 2, 3]);
    let replaced = ok(accept(
        Some(&baseline),
        &run(20_000),
        AcceptMode::Replace,
        4,
    ));
    for id in [TCP, UDP, LOCAL] {
        assert_eq!(run_times(&replaced.baseline, id), [4], "{id}");
        assert_eq!(replaced.baseline.cells[id].runs[0].p50_ns, 20_000, "{id}");
    }
}

#[test]
fn appending_results_from_another_cpu_model_is_refused() {
    let old = old_baseline(40_000);
    let other: Vec<CellResult> = cells()
        .iter()
        .map(|c| fixture::passed(c, &env("Other CPU"), vec![40_000; 300]))
        .collect();
    assert_eq!(
        accept(Some(&old), &other, AcceptMode::Append, 2),
        Err(AcceptError::OtherCpuModel {
            baseline: "Test CPU".into(),
            results: "Other CPU".into(),
        })
    );
    // Replacing is how a baseline moves to another machine.
    let replaced = ok(accept(Some(&old), &other, AcceptMode::Replace, 2));
    assert_eq!(replaced.baseline.environment.cpu_model, "Other CPU");
}

#[test]
fn a_new_baseline_needs_a_passing_cell() {
    let old = old_baseline(40_000);
    let cells = cells();
    let all_failed: Vec<CellResult> = cells.iter().map(failed).collect();
    assert_eq!(
        accept(None, &all_failed, AcceptMode::Replace, 2),
        Err(AcceptError::NoPassingCell)
    );
    assert_eq!(
        accept(Some(&old), &all_failed, AcceptMode::Replace, 2),
        Err(AcceptError::NoPassingCell)
    );
    assert_eq!(
        accept(None, &all_failed, AcceptMode::Append, 2),
        Err(AcceptError::NoPassingCell)
    );
    // Appended to an existing baseline, failures only keep what was there.
    let appended = ok(accept(Some(&old), &all_failed, AcceptMode::Append, 2));
    assert_eq!(appended.baseline.cells, old.cells);
    assert_eq!(appended.refused.len(), 3);
    assert!(appended.refused.iter().all(|r| r.kept_old_entry));
}

/// A count of `insns` per round trip on both sides of `cell`.
fn counted(cell: &Cell, ns: u64, insns: Option<f64>) -> CellResult {
    let mut result = passed(cell, ns);
    result.instructions = insns.map(|n| ipc_matrix_results::InstructionCounts {
        measuring: Some(n),
        peer: Some(n),
        encode: None,
        decode: None,
        windows: 300,
        cpu_model: Some("Nehalem-v1".into()),
        timing_dependent: false,
        setup: None,
    });
    result
}

#[test]
fn an_uncounted_run_does_not_replace_counts_it_keeps_the_counted_entry() {
    let cells = cells();
    let old = Baseline::from_results(
        &[
            counted(&cells[0], 100, Some(900.0)),
            counted(&cells[1], 100, Some(800.0)),
        ],
        1,
    )
    .unwrap();
    // The tcp cell passed but was not counted (a QEMU without the plugin, say).
    let now = [
        counted(&cells[0], 100, None),
        counted(&cells[1], 100, Some(800.0)),
    ];
    let accepted = ok(accept(Some(&old), &now, AcceptMode::Replace, 2));
    assert_eq!(
        accepted.refused,
        [Refusal {
            cell_id: TCP.into(),
            reason: RefusalReason::Uncounted,
            kept_old_entry: true,
        }]
    );
    let kept = &accepted.baseline.cells[TCP];
    assert!(kept.runs.iter().all(|r| r.instructions.is_some()));
    // A counted run replaces it as usual.
    let recounted = counted(&cells[0], 100, Some(950.0));
    assert!(ok(accept(Some(&old), &[recounted], AcceptMode::Replace, 3))
        .refused
        .is_empty());
}
