//! Results built from given round-trip times, for the tests of everything that reads
//! results (verdicts, reports, the CLI). Nothing here produces a measurement.

use crate::environment::Environment;
use crate::schema::{
    CellResult, Failure, FailureKind, LatencyStats, Outcome, Placement, Throughput,
    RESULT_SCHEMA_VERSION,
};
use ipc_matrix_spec::Cell;

/// The cells a matrix document expands into for `profile`; panics on a bad document.
pub fn cells(matrix_yaml: &str, profile: &str) -> Vec<Cell> {
    ipc_matrix_spec::Spec::parse(matrix_yaml, std::path::Path::new("matrix.yaml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .cells(profile)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The cells of a one-target matrix whose `quick` profile runs `scenarios` (YAML list
/// items, one per line, as under `scenarios:`).
pub fn quick_cells(scenarios: &str) -> Vec<Cell> {
    let matrix = format!(
        "version: 1\ntargets:\n  - {{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }}\nprofiles:\n  quick: {{ description: test }}\nscenarios:\n{scenarios}"
    );
    cells(&matrix, "quick")
}

/// A fixed environment: x86_64, the given runner and CPU model, an optimized build.
pub fn environment(runner: &str, cpu_model: &str) -> Environment {
    target_environment("x86_64-unknown-linux-gnu", runner, cpu_model)
}

/// A fixed environment of another target: `triple`, the given runner and CPU model, an
/// optimized build.
pub fn target_environment(triple: &str, runner: &str, cpu_model: &str) -> Environment {
    let arch = triple.split('-').next().unwrap_or(triple);
    Environment {
        target_triple: triple.into(),
        runner: runner.into(),
        qemu_version: (runner == "qemu").then(|| format!("qemu-{arch} version 7.2.0")),
        cpu_model: cpu_model.into(),
        logical_cores: 2,
        kernel: "6.1.0".into(),
        rustc: "rustc 1.95.0".into(),
        build_profile: "test".into(),
        opt_level: "3".into(),
        debug_assertions: false,
    }
}

/// The run every fixture result belongs to.
pub const FIXTURE_RUN_ID: &str = "fixture-run";

/// A passing result whose statistics are computed from `samples_ns` (nearest-rank
/// percentiles), pinned to CPUs 0 and 1, finished at a fixed time.
pub fn passed(cell: &Cell, environment: &Environment, samples_ns: Vec<u64>) -> CellResult {
    let mut sorted = samples_ns.clone();
    sorted.sort_unstable();
    let rank =
        |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    let total: u64 = samples_ns.iter().sum();
    let mean = total as f64 / samples_ns.len() as f64;
    let variance = samples_ns
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / samples_ns.len() as f64;
    let seconds = total as f64 / 1e9;
    let bytes = 2.0 * cell.payload_bytes as f64 * samples_ns.len() as f64;
    CellResult {
        schema_version: RESULT_SCHEMA_VERSION,
        leg: environment.leg(),
        run_id: FIXTURE_RUN_ID.into(),
        cell: cell.clone(),
        outcome: Outcome {
            passed: true,
            failure: None,
        },
        measured_round_trips: samples_ns.len() as u64,
        lost: 0,
        latency_ns: Some(LatencyStats {
            count: samples_ns.len() as u64,
            min: sorted[0],
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            p999: rank(0.999),
            max: sorted[sorted.len() - 1],
            mean,
            stdev: variance.sqrt(),
        }),
        message_path: None,
        own_setup: None,
        load: None,
        logging: None,
        instructions: None,
        uncounted: None,
        goodbye: None,
        round_trips_per_sec: Some(samples_ns.len() as f64 / seconds),
        throughput: Some(Throughput {
            mb_per_s: bytes / seconds / 1e6,
            mbit_per_s: bytes * 8.0 / seconds / 1e6,
        }),
        samples_ns,
        codec_ns: None,
        first_round_trip_ns: Some(sorted[sorted.len() - 1]),
        placement: Placement {
            measurer_cpu: Some(0),
            peer_cpu: Some(1),
        },
        core_to_core_ns: Some(150),
        core_to_core_after_ns: Some(150),
        floor: None,
        cpu_pressure: Some(0.0),
        peer_delay_us: None,
        peer_extra_work: None,
        wall_seconds: seconds + 0.05,
        finished_at_unix: 1_796_000_000,
        environment: environment.clone(),
    }
}

/// A result that failed at round trip `at`, as a failure of `kind` with `reason`.
pub fn failed(
    cell: &Cell,
    environment: &Environment,
    kind: FailureKind,
    at: u64,
    reason: &str,
) -> CellResult {
    let mut result = passed(cell, environment, vec![1]);
    result.outcome = Outcome {
        passed: false,
        failure: Some(Failure {
            kind,
            round_trip: Some(at),
            reason: reason.into(),
        }),
    };
    result.measured_round_trips = 0;
    result.latency_ns = None;
    result.round_trips_per_sec = None;
    result.throughput = None;
    result.samples_ns = Vec::new();
    result
}
