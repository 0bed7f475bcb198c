//! Floors are measured in the same run as the cells they stand for: `run` times each in
//! blocks between its cell's round trips and stores it with the cell's result, with the
//! cell's ratio to it; `probe` measures and lists them. What the ratios are is for
//! benchmarks and reports;
//! these tests hold that floors exist, match their cells and are computed right.

mod common;

use common::{leg, text, Scratch};
use ipc_matrix_results::{read_run, run_dir, FloorProbe};

/// The suite runs under QEMU (the tests' binaries and the `ipc-matrix` they start).
fn emulated() -> bool {
    std::env::var(ipc_matrix_results::RUNNER_ENV).is_ok_and(|runner| runner == "qemu")
}

const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [shm, tcp, local], wake: [busy-poll], payloads: [200B], iterations: 200, warmup: 10, timeout: 5s }",
    "- { name: bulk, kind: bulk, transports: [shm], wake: [busy-poll], payloads: [64KiB], iterations: 30, warmup: 2, timeout: 5s }",
    "- { name: logging, kind: logging, transports: [file], sinks: [buffered], payloads: [64B], iterations: 200, budget: 30s }",
);

#[test]
fn a_run_stores_each_cells_floor_and_its_ratio_to_it() {
    let s = Scratch::new("floors-run", MATRIX);
    let output = s.run(&["run", "--out", "out", "--baselines", "baselines"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    if emulated() {
        let stored = read_run(&run_dir(&s.path("out"), &leg(), "quick"), None).unwrap();
        assert!(stored.results.iter().all(|r| r.floor.is_none()));
        return;
    }
    let stored = read_run(&run_dir(&s.path("out"), &leg(), "quick"), None).unwrap();
    let mut seen = Vec::new();
    for result in &stored.results {
        let id = result.cell.id.as_str();
        let expected = match id {
            "echo::shm-busy::200B" => Some(FloorProbe::Spin),
            "echo::tcp::200B" => Some(FloorProbe::Tcp),
            "echo::local::200B" => Some(FloorProbe::UnixStream),
            "bulk::shm-busy::64KiB" => Some(FloorProbe::Spin),
            _ => None,
        };
        seen.push(id.to_string());
        let floor = result.floor;
        assert_eq!(floor.map(|f| f.probe), expected, "{id}");
        let Some(floor) = floor else { continue };
        assert_eq!(floor.payload_bytes, result.cell.payload_bytes, "{id}");
        assert_eq!(floor.round_trips, result.cell.iterations, "{id}");
        // Timed in ten blocks between the cell's own round trips (a busy-polling peer
        // stopped meanwhile).
        assert_eq!(floor.blocks, 10, "{id}");
        assert!(floor.p50_ns > 0, "{id}");
        let p50 = result.latency_ns.unwrap().p50 as f64;
        let ratio = floor.ratio.unwrap();
        assert!(
            (ratio - p50 / floor.p50_ns as f64).abs() < 1e-9,
            "{id}: ratio {ratio} for p50 {p50} over {}",
            floor.p50_ns
        );
    }
    seen.sort();
    assert_eq!(seen.len(), 5, "{seen:?}");
    // The report lists them next to their floors.
    let report =
        std::fs::read_to_string(run_dir(&s.path("out"), &leg(), "quick").join("report.md"))
            .unwrap();
    assert!(
        report.contains("<details><summary>Next to the machine's floor (4 cells)</summary>"),
        "{report}"
    );
    assert!(
        report.contains("| `echo::shm-busy::200B` | spin (200 B) |"),
        "{report}"
    );
}

#[test]
fn probe_lists_one_floor_per_probe_payload_and_round_trips() {
    let s = Scratch::new("floors-probe", MATRIX);
    let output = s.run(&["probe", "--json"]);
    if emulated() {
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(text(&output).contains("not measured under an emulator"));
        return;
    }
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let probes: Vec<&str> = lines.iter().map(|l| l["probe"].as_str().unwrap()).collect();
    assert_eq!(probes, ["spin", "tcp", "unix-stream", "spin"], "{lines:?}");
    for line in &lines {
        assert!(line["p50_ns"].as_u64().unwrap() > 0, "{line}");
        assert_eq!(line["cells"].as_array().unwrap().len(), 1, "{line}");
    }
    let table = s.run(&["probe", "--filter", "logging"]);
    assert_eq!(table.status.code(), Some(0), "{}", text(&table));
    assert!(text(&table).contains("none of the selected cells has a floor"));
}
