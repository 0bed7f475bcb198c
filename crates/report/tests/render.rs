//! Reports rendered from fixed inputs: the Markdown and the cross-leg table are exact
//! snapshots; the HTML page is checked for what makes it usable offline.

use ipc_matrix_baseline::Baseline;
use ipc_matrix_report::compare::{self, Column};
use ipc_matrix_report::{html, markdown, LegReport, LoadedBaseline, REPORT_SCHEMA_VERSION};
use ipc_matrix_results::{fixture, CellResult, FailureKind};
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
            0 => fixture::failed(
                cell,
                &env,
                FailureKind::Length,
                17,
                "reply is 199 bytes, expected 200 (<peer>)",
            ),
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
    // The ratio chart; the regressed cell's round trips in order next to its baseline;
    // per scenario its percentiles (and bulk its throughput) and every passed cell's
    // round trips in order: echo 1 + 3, bulk 2 + 1.
    // The stacks side by side at 200 B.
    assert_eq!(page.matches("<svg").count(), 1 + 1 + 4 + 3 + 1, "{page}");
    assert_eq!(page.matches("</svg>").count(), 10);
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
fn what_changed_comes_first_and_the_unchanged_cells_are_folded() {
    let report = report();
    let md = markdown(&report);
    let at = |text: &str| {
        md.find(text)
            .unwrap_or_else(|| panic!("no `{text}` in:\n{md}"))
    };
    // The failure and the regression, each with its reason or ratio, before the fold.
    assert!(at("#### Failed (1)") < at("#### Regressed (1)"));
    let fold = at("<details><summary>All 5 cells");
    assert!(at("reply is 199 bytes") < fold);
    assert!(at("| 2.00x (2.00-2.01) | `0.5x") < fold);
    // Unchanged cells appear only inside the fold.
    assert!(at("`echo::shm-busy::200B`") > fold, "{md}");

    let page = html(&report);
    let at = |text: &str| page.find(text).unwrap_or_else(|| panic!("no `{text}`"));
    let folded = at("<details><summary>3 unchanged or new cells</summary>");
    assert!(at("<h3>Regressed (1)</h3>") < folded);
    assert!(at("id=\"cell-echo--shm-busy--200B\"") > folded);
    assert!(at("id=\"cell-echo--tcp--200B\"") < folded);
}

/// What fails the run opens the page, before the contents and every card (the first
/// screen), and the Markdown, before what changed.
#[test]
fn what_fails_the_run_comes_before_anything_that_only_informs() {
    let report = report();
    let page = html(&report);
    let at = |text: &str| page.find(text).unwrap_or_else(|| panic!("no `{text}`"));
    let failing = at("id=\"failing\"");
    assert!(failing < at("<nav>"));
    assert!(failing < at("<h2 id=\"changes\">"));
    let block = &page[failing..failing + page[failing..].find("</div>").unwrap()];
    assert!(
        block.contains("<code>echo::tcp::200B</code></a>: time 2.00x"),
        "{block}"
    );
    // Its line leads to the cell's card below.
    assert!(
        block.contains("href=\"#change-echo--tcp--200B\""),
        "{block}"
    );
    assert_eq!(page.matches("id=\"change-echo--tcp--200B\"").count(), 1);
    let md = markdown(&report);
    assert!(md.find("[!CAUTION]").unwrap() < md.find("### What changed").unwrap());
}

#[test]
fn every_entry_of_the_contents_leads_to_its_section() {
    let page = html(&report());
    let nav = &page[page.find("<nav>").unwrap()..page.find("</nav>").unwrap()];
    let targets: Vec<&str> = nav
        .split("href=\"#")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    for wanted in [
        "changes",
        "cells",
        "kind-echo",
        "kind-bulk",
        "notes",
        "environment",
    ] {
        assert!(targets.contains(&wanted), "{wanted} not in {targets:?}");
    }
    for target in targets {
        assert_eq!(
            page.matches(&format!("id=\"{target}\"")).count(),
            1,
            "the contents link to #{target}, which the page has not exactly once"
        );
    }
}

#[test]
fn notes_shared_by_cells_are_one_folded_line_with_their_count() {
    let mut report = report();
    for cell in &mut report.verdict.cells[..3] {
        cell.notes.push(format!(
            "the machine changed: a cache line took {} ns between the two CPUs",
            cell.cell_id.len()
        ));
    }
    let md = markdown(&report);
    assert_eq!(
        md.matches("<summary>the machine changed: 3 cells</summary>")
            .count(),
        1,
        "{md}"
    );
    assert_eq!(
        md.matches("- `echo::shm-busy::200B`: the machine changed: a cache line")
            .count(),
        1,
        "{md}"
    );
    // A note of one cell stays a line of its own.
    assert!(
        md.contains("- `echo::tcp::200B`: peer slowed by 45 us per reply on purpose"),
        "{md}"
    );
    let page = html(&report);
    assert!(page.contains("<summary>the machine changed: 3 cells</summary>"));
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

/// One leg's results for `cells`: `triple` under `runner`, medians `scale` times the
/// native x86_64 ones.
fn leg(triple: &str, runner: &str, cells: &[Cell], scale: u64) -> Column {
    let env = fixture::target_environment(triple, runner, CPU);
    let results: Vec<CellResult> = cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            let center = (20_000 + 5_000 * i as u64) * scale;
            fixture::passed(cell, &env, samples(center, 40, i as u64))
        })
        .collect();
    Column {
        name: format!("{}@{runner} (quick)", triple),
        runner: runner.into(),
        results,
    }
}

#[test]
fn emulated_leg_next_to_native_legs_gets_no_timing_ratio() {
    let cells = cells();
    // Given out of order; the emulated aarch64 leg measured the emulator.
    let columns = [
        leg("aarch64-unknown-linux-gnu", "qemu", &cells, 10),
        leg("aarch64-unknown-linux-gnu", "native", &cells, 2),
        leg("x86_64-unknown-linux-gnu", "native", &cells, 1),
    ];
    let md = compare::markdown(&columns);
    insta::assert_snapshot!(md);
    // The one ratio is between the two native legs (each cell twice as slow); none is
    // the emulated leg's (it would read 10.00x).
    assert!(md.contains("| x86_64-unknown-linux-gnu@native (quick) p50 | aarch64-unknown-linux-gnu@native (quick) p50 | ratio |"), "{md}");
    assert_eq!(md.matches("| 2.00x |").count(), cells.len(), "{md}");
    assert!(!md.contains("10.00x"), "{md}");
    assert!(
        md.contains(
            "Timings of aarch64-unknown-linux-gnu@qemu (quick) are emulated, not a CPU measure"
        ),
        "{md}"
    );
    let page = compare::html(&columns);
    assert!(
        page.contains(
            "<th>aarch64-unknown-linux-gnu@qemu (quick) p50 (emulated, not a CPU measure)</th>"
        ),
        "{page}"
    );
    assert!(!page.contains("10.00x"));
    // The native legs' medians are charted, then their ratios; the emulated leg's are not.
    assert_eq!(page.matches("<svg").count(), 2);
    let chart = svg_texts(&page[page.find("<svg").unwrap()..page.find("</svg>").unwrap()]);
    assert!(chart.contains(&"x86_64 native".to_string()), "{chart:?}");
    assert!(chart.contains(&"aarch64 native".to_string()), "{chart:?}");
    assert!(!chart.iter().any(|t| t.contains("qemu")), "{chart:?}");
    let second = &page[page.rfind("<svg").unwrap()..page.rfind("</svg>").unwrap()];
    let ratios = svg_texts(second);
    assert!(
        ratios.contains(&"aarch64 / x86_64".to_string()),
        "{ratios:?}"
    );
    // aarch64 runs every cell at twice x86_64's median: one 2.00x bar per cell, and the
    // axis tick.
    assert_eq!(
        ratios.iter().filter(|t| *t == "2.00x").count(),
        cells.len() + 1,
        "{ratios:?}"
    );
    assert!(!ratios.iter().any(|t| t.contains("qemu")), "{ratios:?}");
}

#[test]
fn legs_are_sorted_by_architecture_whatever_order_they_come_in() {
    let cells = cells();
    let columns: Vec<Column> = [
        ("powerpc64le-unknown-linux-gnu", "qemu"),
        ("riscv64gc-unknown-linux-gnu", "qemu"),
        ("x86_64-unknown-linux-gnu", "qemu"),
        ("armv7-unknown-linux-gnueabihf", "qemu"),
        ("s390x-unknown-linux-gnu", "qemu"),
        ("x86_64-unknown-linux-gnu", "native"),
        ("aarch64-unknown-linux-gnu", "qemu"),
    ]
    .iter()
    .map(|(triple, runner)| leg(triple, runner, &cells, 1))
    .collect();
    let order: Vec<String> = compare::arranged(&columns)
        .iter()
        .map(|c| format!("{} {}", c.architecture(), c.emulated()))
        .collect();
    assert_eq!(
        order,
        [
            "x86_64 false",
            "x86_64 true",
            "aarch64 true",
            "s390x true",
            "armv7 true",
            "riscv64 true",
            "ppc64le true"
        ]
    );
    let md = compare::markdown(&columns);
    assert!(md.contains("Timings of x86_64-unknown-linux-gnu@qemu (quick), aarch64-unknown-linux-gnu@qemu (quick), s390x-unknown-linux-gnu@qemu (quick), armv7-unknown-linux-gnueabihf@qemu (quick), riscv64gc-unknown-linux-gnu@qemu (quick), powerpc64le-unknown-linux-gnu@qemu (quick) are emulated"), "{md}");
}

#[test]
fn architectures_of_target_triples() {
    for (triple, arch) in [
        ("x86_64-unknown-linux-gnu", "x86_64"),
        ("aarch64-unknown-linux-gnu", "aarch64"),
        ("s390x-unknown-linux-gnu", "s390x"),
        ("armv7-unknown-linux-gnueabihf", "armv7"),
        ("riscv64gc-unknown-linux-gnu", "riscv64"),
        ("powerpc64le-unknown-linux-gnu", "ppc64le"),
        ("i686-unknown-linux-gnu", "i686"),
    ] {
        assert_eq!(compare::architecture(triple), arch);
    }
}

const COUNTED_SCENARIOS: &str = "
  - { name: echo, kind: echo, transports: [shm, tcp], payloads: [200B], iterations: 40, warmup: 0, timeout: 1s }
  - { name: ser, kind: codec, codecs: [capnp, prost], transports: [tcp], payloads: [200B, 64KiB], iterations: 40, warmup: 0, timeout: 1s }
";

/// A counted leg of `triple` (always emulated: counts are made under QEMU) on the emulated
/// CPU `cpu`: each cell's counts are its x86_64 ones times `factor`, and `prost_encode`
/// times more for prost's encoding. Busy-poll counts depend on timing, as in the matrix.
fn counted_leg(triple: &str, cpu: &str, factor: f64, prost_encode: f64) -> Column {
    let mut column = leg(triple, "qemu", &fixture::quick_cells(COUNTED_SCENARIOS), 10);
    for (i, r) in column.results.iter_mut().enumerate() {
        let base = 1_000.0 * (i + 1) as f64 * factor;
        let codec = r.cell.work.codec().map(|c| c.to_string());
        let payload = r.cell.payload_bytes as f64;
        r.instructions = Some(ipc_matrix_results::InstructionCounts {
            measuring: Some(base * 3.0),
            peer: Some(base * 2.0),
            encode: codec.as_ref().map(|c| {
                let encode = (400.0 + payload / 8.0) * factor;
                if c == "prost" {
                    encode * prost_encode
                } else {
                    encode
                }
            }),
            decode: codec.as_ref().map(|_| (300.0 + payload / 20.0) * factor),
            windows: 40,
            cpu_model: Some(cpu.into()),
            timing_dependent: r.cell.wake == Some(ipc_matrix_spec::WakeMode::BusyPoll),
            setup: None,
        });
    }
    column
}

fn three_counted_architectures() -> Vec<Column> {
    // Given out of order, with a native x86_64 leg (timings, no counts) among them.
    let mut native = leg(
        "x86_64-unknown-linux-gnu",
        "native",
        &fixture::quick_cells(COUNTED_SCENARIOS),
        1,
    );
    native
        .results
        .iter_mut()
        .for_each(|r| r.instructions = None);
    vec![
        // s390x: fewer instructions (it moves memory in long instructions), but prost's
        // encoding takes forty times as many as elsewhere.
        counted_leg("s390x-unknown-linux-gnu", "qemu", 0.5, 40.0),
        native,
        counted_leg("aarch64-unknown-linux-gnu", "cortex-a72", 1.2, 1.0),
        counted_leg("x86_64-unknown-linux-gnu", "Nehalem-v1", 1.0, 1.0),
    ]
}

/// The text of every `<text>` element of an SVG drawing: labels, legends, values.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let inner = &t[t.find('>')? + 1..t.find("</text>")?];
            Some(inner.trim().to_string())
        })
        .collect()
}

#[test]
fn instructions_side_by_side_per_architecture() {
    let columns = three_counted_architectures();
    let md = compare::markdown(&columns);
    insta::assert_snapshot!(md);
    // The instruction tables lead, in architecture order, encode and decode apart.
    assert!(
        md.find("### Instructions per round trip").unwrap()
            < md.find("### Median round trip").unwrap()
    );
    assert!(md.contains("| cell | x86_64 measuring | x86_64 peer | aarch64 measuring | aarch64 peer | s390x measuring | s390x peer |"), "{md}");
    assert!(md.contains("| cell | x86_64 encode | x86_64 decode | aarch64 encode | aarch64 decode | s390x encode | s390x decode |"), "{md}");
    assert!(
        md.contains(
            "x86_64 on Nehalem-v1 (`x86_64-unknown-linux-gnu@qemu (quick)`), aarch64 on cortex-a72"
        ),
        "{md}"
    );
    // prost's pathological encoding on s390x: 40 x 0.5 x (400 + 200 / 8).
    assert!(
        md.contains("| `ser::prost::tcp::200B` | 425 | 310 | 510 | 372 | 8500 | 155 |"),
        "{md}"
    );
    // Busy-poll counts are marked; the others are not.
    assert!(
        md.contains("| `echo::shm-busy::200B` | 6000† | 4000† | 7200† | 4800† | 3000† | 2000† |"),
        "{md}"
    );
    assert!(
        md.contains("| `echo::shm-blocking::200B` | 3000 | 2000 |"),
        "{md}"
    );
    assert!(md.contains("†: depends on timing"), "{md}");
    // The native leg's timings alone get no ratio; the counted legs' timings are not compared.
    assert!(
        md.contains("| cell | x86_64-unknown-linux-gnu@native (quick) p50 |\n"),
        "{md}"
    );
    assert!(!md.contains("| ratio |"), "{md}");

    let page = compare::html(&columns);
    for outside in ["<script", "<link", "src=", "url(", "@import"] {
        assert!(
            !page.contains(outside),
            "the page loads something: {outside}"
        );
    }
    // Relative to x86_64 by scenario; codec encoding and decoding.
    assert_eq!(page.matches("<svg").count(), 2, "{page}");
    assert!(page.contains("Instructions relative to x86_64, by scenario"));
    let codec = svg_texts(&page[page.rfind("<svg").unwrap()..page.rfind("</svg>").unwrap()]);
    for wanted in [
        "Codec encoding and decoding: instructions per architecture",
        "instructions to encode one frame",
        "instructions to decode one reply",
        "ser::prost::tcp::64KiB",
        "x86_64",
        "aarch64",
        "s390x",
    ] {
        assert!(codec.contains(&wanted.to_string()), "{wanted}: {codec:?}");
    }
    assert!(
        page.contains("s390x<br><span class=\"cpu\">qemu</span>"),
        "{page}"
    );
    assert!(
        page.contains("<td class=\"informs\" title=\"depends on timing: informs only\">6000†</td>")
    );
    assert!(page.contains("<tr class=\"group\"><th colspan=\"7\">ser</th></tr>"));
    // The summary leaves the timing-dependent busy-poll cell out: echo on aarch64 is
    // 1.20x x86_64 in every other cell.
    let summary = svg_texts(&page[page.find("<svg").unwrap()..page.find("</svg>").unwrap()]);
    for wanted in [
        "echo",
        "ser",
        "codec encoding",
        "codec decoding",
        "aarch64",
        "s390x",
    ] {
        assert!(
            summary.contains(&wanted.to_string()),
            "{wanted}: {summary:?}"
        );
    }
    // Each bar's value, per leg in row order (echo, ser, codec encoding, codec decoding):
    // aarch64 at 1.20x throughout; s390x at 0.50x but for its encoding, the geometric mean
    // of 0.5 (capnp) and 20 (prost).
    let bars = [
        "1.20x", "1.20x", "1.20x", "1.20x", "0.50x", "0.50x", "3.16x", "0.50x",
    ];
    assert!(summary.windows(8).any(|w| w == bars), "{summary:?}");

    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("instructions_side_by_side");
    let (md_file, html_file) = compare::write(&out, &columns).unwrap();
    assert_eq!(std::fs::read_to_string(md_file).unwrap(), md);
    assert_eq!(std::fs::read_to_string(html_file).unwrap(), page);
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
                        fragmentation: None,
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
                        setup: None,
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
        .find("<summary>Request/reply")
        .expect("the request/reply section")..];
    let one_byte = section.find("req-rep::tcp::1B").expect("1 B row");
    let eight_k = section.find("req-rep::tcp::8192B").expect("8 KiB row");
    assert!(one_byte < eight_k, "{md}");
    let page = html(&report);
    assert!(page.contains("UDP under load"));
    assert!(page.contains("<td>90.00 %</td>"));
}

#[test]
fn a_load_cell_on_a_second_host_shows_its_ip_fragments_beside_the_seed() {
    let env = fixture::environment("native", CPU);
    let scenarios = "
  - { name: udp-load-netns, kind: udp-load, host: netns, transports: [udp], clients: [1], server_threads: [1], duration: 1s, payloads: [65507B], iterations: 100, warmup: 0, timeout: 2s, max_loss: 0.5 }
";
    let results: Vec<CellResult> = fixture::quick_cells(scenarios)
        .iter()
        .map(|cell| {
            let mut result = fixture::passed(cell, &env, samples(100_000, 100, 3));
            result.load = Some(ipc_matrix_results::LoadStats {
                sent: 100,
                answered: 98,
                timeouts: 2,
                late_replies: 0,
                success_rate: 0.98,
                transactions_per_sec: 98.0,
                server_received: Some(99),
                fragmentation: Some(ipc_matrix_results::Fragmentation {
                    fragments_received: 4455,
                    reassembled: 99,
                    reassembly_failed: 1,
                    fragmented: 99,
                    fragments_created: 4455,
                    fragmentation_failed: 0,
                }),
            });
            result
        })
        .collect();
    let report = LegReport::new(results, None, RegressionPolicy::default(), 1_796_000_000);
    let md = markdown(&report);
    for wanted in [
        "| IP fragments per request | requests reassembled / failed | fragments made for echoes |",
        "| 98.00 % | 45.0 | 99 / 1 | 4455 | 100 | 2 | 0 | 99 |",
        "seed 004, across two LAN hosts: success rate drops at 65507 B (about 90 %)",
    ] {
        assert!(md.contains(wanted), "missing `{wanted}` in:\n{md}");
    }
}

#[test]
fn a_line_of_round_trip_vs_payload_never_joins_two_scenarios() {
    // Two scenarios over the same transport, each at two payloads.
    let cells = fixture::quick_cells(
        "
  - { name: small, kind: echo, transports: [tcp], payloads: [64B, 256B], iterations: 50, warmup: 0, timeout: 1s }
  - { name: large, kind: bulk, transports: [tcp], payloads: [64KiB, 1MB], iterations: 50, warmup: 0, timeout: 5s }
",
    );
    let env = fixture::environment("native", CPU);
    let results: Vec<CellResult> = cells
        .iter()
        .zip([1_000, 2_000, 60_000, 5_000_000])
        .map(|(cell, center)| fixture::passed(cell, &env, samples(center, cell.iterations, 0)))
        .collect();
    let svg = ipc_matrix_report::leg::plots::round_trip_vs_payload(&results).unwrap();
    let legend = svg_texts(&svg);
    assert!(legend.contains(&"small tcp".to_string()), "{legend:?}");
    assert!(legend.contains(&"large tcp".to_string()), "{legend:?}");
    // The lines drawn 2 px wide: one per scenario and one per legend entry, each through
    // two points, none through all four.
    let lines: Vec<&str> = svg
        .split("<polyline")
        .skip(1)
        .filter(|l| l.contains("stroke-width=\"2\""))
        .map(|l| &l[l.find("points=\"").unwrap() + 8..])
        .map(|l| &l[..l.find('"').unwrap()])
        .collect();
    assert_eq!(lines.len(), 4, "{svg}");
    for points in lines {
        assert_eq!(points.split_whitespace().count(), 2, "{points}");
    }
}

#[test]
fn the_stacks_of_200_bytes_are_side_by_side_fastest_first() {
    let report = report();
    let md = markdown(&report);
    let section = &md[md
        .find("<summary>IPC stacks side by side at 200 B, fastest first (3 cells)</summary>")
        .expect(&md)..];
    // shm-busy (330 ns), shm-blocking (36 us), tcp (90 us); the failed udp cell is not a
    // stack it could compare.
    let at = |id: &str| {
        section
            .find(id)
            .unwrap_or_else(|| panic!("{id} in {section}"))
    };
    assert!(at("| shm-busy | `echo::shm-busy::200B`") < at("| shm-blocking |"));
    assert!(at("| shm-blocking |") < at("| tcp | `echo::tcp::200B`"));
    assert!(!section[..section.find("</details>").unwrap()].contains("udp"));
    let page = html(&report);
    assert_eq!(page.matches("id=\"stacks\"").count(), 1);
    assert!(page.contains("href=\"#stacks\""));
}

#[test]
fn a_plot_with_nothing_to_draw_says_what_is_missing() {
    use ipc_matrix_report::{leg::plots, ChartError};
    let verdict = ipc_matrix_baseline::RunVerdict {
        leg: "native".into(),
        profile: "quick".into(),
        informational: None,
        cells: Vec::new(),
        not_run: Vec::new(),
    };
    let nothing = plots::baseline_ratios(&verdict).unwrap_err();
    assert_eq!(
        nothing,
        ChartError::NothingToDraw("no cell has a baseline to compare with")
    );
    assert_eq!(
        nothing.to_string(),
        "no cell has a baseline to compare with"
    );
    assert_eq!(
        plots::floor_ratios(&[]).unwrap_err().to_string(),
        "no values to draw"
    );
}
