//! Reports rendered from fixed inputs: the Markdown and the cross-leg table are exact
//! snapshots; the HTML page is checked for what makes it usable offline.

use ipc_matrix_baseline::Baseline;
use ipc_matrix_report::cross::{self, Column};
use ipc_matrix_report::{html, markdown, LegReport, LoadedBaseline, REPORT_SCHEMA_VERSION};
use ipc_matrix_results::{fixture, CellResult};
use ipc_matrix_spec::{Cell, RegressionPolicy};
use std::path::PathBuf;

const SCENARIOS: &str = "
  - { name: echo, kind: echo, transports: [shm, tcp, udp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
  - { name: bulk, kind: bulk, transports: [tcp], payloads: [1MB], iterations: 60, warmup: 0, timeout: 5s }
";
const CPU: &str = "Test CPU @ 3.0GHz";

fn cells() -> Vec<Cell> {
    fixture::quick_cells(SCENARIOS)
}

/// `count` round trips around `center` ns with a deterministic wobble.
fn samples(center: u64, count: u64, phase: u64) -> Vec<u64> {
    (0..count)
        .map(|i| center * (90 + (i * 7919 + phase * 104_729) % 21) / 100)
        .collect()
}

/// shm-blocking, shm-busy, tcp, udp, bulk tcp; `centers` in that order, 0 for a failure.
fn run(runner: &str, centers: [u64; 5], phase: u64) -> Vec<CellResult> {
    let env = fixture::environment(runner, CPU);
    cells()
        .iter()
        .zip(centers)
        .map(|(cell, center)| match center {
            0 => fixture::failed(cell, &env, 17, "reply is 199 bytes, expected 200 (<peer>)"),
            _ => fixture::passed(cell, &env, samples(center, cell.iterations, phase)),
        })
        .collect()
}

fn report() -> LegReport {
    let base = run("native", [35_000, 320, 45_000, 40_000, 450_000], 1);
    let baseline = LoadedBaseline {
        path: PathBuf::from("baselines/x86_64-unknown-linux-gnu@native/quick.json"),
        baseline: Baseline::from_results(&base, 1_795_000_000).unwrap(),
    };
    // tcp slowed on purpose to twice its time; udp failed.
    let mut current = run("native", [36_000, 330, 90_000, 0, 440_000], 2);
    current[2].peer_delay_us = Some(45);
    LegReport::new(
        current,
        Some(baseline),
        RegressionPolicy::default(),
        1_796_000_000,
    )
}

#[test]
fn markdown_report() {
    insta::assert_snapshot!(markdown(&report()));
}

#[test]
fn results_json_is_versioned_and_carries_every_cell() {
    let json: serde_json::Value = serde_json::from_str(&report().json()).unwrap();
    assert_eq!(json["schema_version"], REPORT_SCHEMA_VERSION);
    assert_eq!(json["leg"], "x86_64-unknown-linux-gnu@native");
    assert_eq!(json["summary"]["regressed"], 1);
    assert_eq!(json["summary"]["failed"], 1);
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5);
    assert_eq!(cells[2]["verdict"]["verdict"], "regressed");
    assert_eq!(
        cells[2]["result"]["samples_ns"].as_array().unwrap().len(),
        300
    );
    assert_eq!(cells[3]["verdict"]["verdict"], "failed");
}

#[test]
fn html_report_is_self_contained_with_its_plots() {
    let page = html(&report());
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Ratios, round trip vs payload, percentiles, throughput, and one per passed cell.
    assert_eq!(page.matches("<svg").count(), 4 + 4, "{page}");
    assert_eq!(page.matches("</svg>").count(), 8);
    for outside in ["<script", "<link", "src=", "url(", "@import"] {
        assert!(
            !page.contains(outside),
            "the page loads something: {outside}"
        );
    }
    // Text from results is escaped, not interpreted.
    assert!(page.contains("(&lt;peer&gt;)"));
    assert!(!page.contains("(<peer>)"));
    assert!(page.contains("echo::tcp::200B</code> regressed"));
}

#[test]
fn emulated_leg_is_labelled_informational() {
    let base = run("native", [35_000, 320, 45_000, 40_000, 450_000], 1);
    let emulated = LegReport::new(
        run("qemu", [350_000, 3_200, 450_000, 400_000, 4_500_000], 2),
        Some(LoadedBaseline {
            path: PathBuf::from("baselines/x.json"),
            baseline: Baseline::from_results(&base, 1_795_000_000).unwrap(),
        }),
        RegressionPolicy::default(),
        1_796_000_000,
    );
    let md = markdown(&emulated);
    assert!(md.contains("Informational only: emulated leg"), "{md}");
    assert!(md.contains("regressed (informational)"), "{md}");
    assert!(!md.contains("[!WARNING]"), "{md}");
}

#[test]
fn legs_side_by_side() {
    let native = Column {
        name: "x86_64-unknown-linux-gnu@native (quick)".into(),
        runner: "native".into(),
        results: run("native", [35_000, 320, 45_000, 40_000, 450_000], 1),
    };
    let emulated = Column {
        name: "aarch64-unknown-linux-gnu@qemu (quick)".into(),
        runner: "qemu".into(),
        results: run("qemu", [350_000, 3_200, 90_000, 0, 4_500_000], 2),
    };
    let columns = [native, emulated];
    insta::assert_snapshot!(cross::markdown(&columns));
    let page = cross::html(&columns);
    assert_eq!(page.matches("<svg").count(), 1);
}

const CODEC_SCENARIOS: &str = "
  - { name: ser, kind: codec, codecs: [capnp, prost], transports: [tcp], payloads: [64KiB], iterations: 6000, warmup: 0, timeout: 1s }
";

fn codec_report() -> LegReport {
    let env = fixture::environment("native", CPU);
    let cells = fixture::quick_cells(CODEC_SCENARIOS);
    let results = cells
        .iter()
        .zip([70_000u64, 90_000])
        .map(|(cell, center)| {
            // A run that slows by a fifth towards its end.
            let samples: Vec<u64> = samples(center, 6000, 1)
                .into_iter()
                .enumerate()
                .map(|(i, v)| if i >= 5400 { v * 6 / 5 } else { v })
                .collect();
            let mut result = fixture::passed(cell, &env, samples);
            result.codec_ns = Some(ipc_matrix_results::CodecStages {
                encode_ns: result.latency_ns.map(|mut l| {
                    l.p50 /= 20;
                    l
                }),
                decode_ns: result.latency_ns.map(|mut l| {
                    l.p50 /= 30;
                    l
                }),
            });
            result
        })
        .collect();
    LegReport::new(results, None, RegressionPolicy::default(), 1_796_000_000)
}

#[test]
fn serialization_and_stability_sections() {
    let report = codec_report();
    insta::assert_snapshot!(markdown(&report));
    let page = html(&report);
    assert!(page.contains("Sensor frame round trip by codec"));
    assert!(
        page.contains("Cap&#39;n Proto vs protobuf") || page.contains("Cap'n Proto vs protobuf")
    );
}

const SEED_SCENARIOS: &str = "
  - { name: req-rep, kind: req-rep, transports: [tcp], payloads: [8192B, 1B], iterations: 100, warmup: 0, timeout: 1s }
  - { name: udp-load, kind: udp-load, transports: [udp], clients: [4], server_threads: [1], duration: 1s, payloads: [65507B], iterations: 100, warmup: 0, timeout: 2s, max_loss: 0.5 }
  - { name: logging, kind: logging, transports: [file], sinks: [tracing-non-blocking], payloads: [64B], iterations: 300, warmup: 0, budget: 1s }
";

#[test]
fn request_reply_load_and_logging_sections() {
    let env = fixture::environment("native", CPU);
    let results: Vec<CellResult> = fixture::quick_cells(SEED_SCENARIOS)
        .iter()
        .map(|cell| {
            let mut result = fixture::passed(cell, &env, samples(100_000, 100, 3));
            match cell.kind() {
                ipc_matrix_spec::ScenarioKind::UdpLoad => {
                    result.load = Some(ipc_matrix_results::LoadStats {
                        sent: 1000,
                        answered: 900,
                        timeouts: 100,
                        late_replies: 7,
                        success_rate: 0.9,
                        transactions_per_sec: 450.0,
                        server_received: Some(930),
                    });
                }
                ipc_matrix_spec::ScenarioKind::Logging => {
                    result.logging = Some(ipc_matrix_results::LoggingStats {
                        lines: 300,
                        bytes: 19_200,
                        ns_per_line: 1_250.0,
                        drain_ns: 141_000_000,
                    });
                    // Per line, and no peer: the count is the logging thread's alone.
                    result.instructions = Some(ipc_matrix_results::InstructionCounts {
                        measuring: Some(412.4),
                        peer: None,
                        encode: None,
                        decode: None,
                        windows: 3,
                        cpu_model: Some("Nehalem-v1".into()),
                        timing_dependent: false,
                    });
                }
                _ => {}
            }
            result
        })
        .collect();
    let report = LegReport::new(results, None, RegressionPolicy::default(), 1_796_000_000);
    let md = markdown(&report);
    for wanted in [
        // Sizes in matrix order (1 B before 8192 B), whatever order the results came in.
        "| `req-rep::tcp::1B` | 100 |",
        "| `udp-load::c4-s1::udp::65507B` | 4 | 1 | 65507B | 450 | 90.00 % | 1000 | 100 | 7 | 930 |",
        "| `logging::tracing-non-blocking::file::64B` | 300 | 0.000s | 1.2us |",
        "| 141.00ms |",
        // The logging table's instructions per line, and the main table's instruction
        // column: per line, judged without a peer's count.
        "| 141.00ms | 9992 | 412 |",
        "| 412 | new |",
    ] {
        assert!(md.contains(wanted), "missing `{wanted}` in:\n{md}");
    }
    let section = &md[md
        .find("### Request/reply")
        .expect("the request/reply section")..];
    let one_byte = section.find("req-rep::tcp::1B").expect("1 B row");
    let eight_k = section.find("req-rep::tcp::8192B").expect("8 KiB row");
    assert!(one_byte < eight_k, "{md}");
    let page = html(&report);
    assert!(page.contains("UDP under load"));
    assert!(page.contains("<td>90.00 %</td>"));
}
