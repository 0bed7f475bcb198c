//! `ipc-matrix report --same-counts-as DIR`: a leg's counts against another run's of the
//! same leg (another userland, another machine), cell by cell. A cell that gates must
//! count the same (within the invariance limit its baseline's runs are held to, 0.0001 %);
//! one whose baseline runs moved only informs.

mod common;

use common::{text, Scratch};
use ipc_matrix_results::{fixture, write_result, CellResult, InstructionCounts};

const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-musl, runner: qemu, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: echo, kind: echo, transports: [tcp, udp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
"#;

const LEG: &str = "x86_64-unknown-linux-musl@qemu";

/// Stores a run of both cells under `results`: tcp and udp counted as given.
fn store(s: &Scratch, results: &str, tcp: f64, udp: f64) {
    let env = fixture::target_environment("x86_64-unknown-linux-musl", "qemu", "Test CPU");
    for (cell, count) in fixture::cells(MATRIX, "quick").iter().zip([tcp, udp]) {
        let mut result: CellResult = fixture::passed(cell, &env, vec![40_000; 300]);
        result.instructions = Some(InstructionCounts {
            measuring: Some(count),
            peer: Some(count / 2.0),
            encode: None,
            decode: None,
            windows: 300,
            cpu_model: Some("Nehalem-v1".into()),
            timing_dependent: false,
            setup: None,
        });
        write_result(&s.path(results), &result).unwrap();
    }
}

/// A baseline of two runs: tcp counted the same in both (it gates), udp 1 % apart (its
/// count moved under the perturbations, so it only informs).
fn with_baseline(name: &str) -> Scratch {
    let s = Scratch::new(&format!("same-counts-{name}"), MATRIX);
    store(&s, "base1", 10_000.0, 5_000.0);
    store(&s, "base2", 10_000.0, 5_050.0);
    for (i, base) in ["base1", "base2"].into_iter().enumerate() {
        let mut args = vec![
            "baseline",
            "accept",
            "--results",
            base,
            "--baselines",
            "baselines",
        ];
        if i > 0 {
            args.push("--append");
        }
        let out = s.run(&args);
        assert!(out.status.success(), "{}", text(&out));
    }
    s
}

fn compared(s: &Scratch) -> (Option<i32>, String) {
    let there = s.path(&format!("there/{LEG}/quick"));
    let out = s.run(&[
        "report",
        "--results",
        "here",
        "--baselines",
        "baselines",
        "--leg",
        LEG,
        "--same-counts-as",
        there.to_str().unwrap(),
    ]);
    (out.status.code(), text(&out))
}

#[test]
fn counts_the_same_here_and_there_pass_and_are_shown_cell_by_cell() {
    let s = with_baseline("same");
    store(&s, "here", 10_000.0, 5_020.0);
    store(&s, "there", 10_000.0, 5_030.0);
    let (code, all) = compared(&s);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        all.contains("| `echo::tcp::200B` | 10000.000 | 10000.000 |"),
        "{all}"
    );
    assert!(all.contains("the same |"), "{all}");
    assert!(all.contains("informs only"), "{all}");
    assert!(
        all.contains("1 cells counted the same to the last digit"),
        "{all}"
    );
}

#[test]
fn a_gating_cell_that_counts_more_there_than_its_noise_fails_naming_it() {
    let s = with_baseline("differs");
    store(&s, "here", 10_000.0, 5_000.0);
    // 3 instructions more per round trip: 0.02 %, where its accepted runs agreed exactly.
    store(&s, "there", 10_003.0, 5_000.0);
    let (code, all) = compared(&s);
    assert_eq!(code, Some(3), "{all}");
    assert!(
        all.contains("error: x86_64-unknown-linux-musl@qemu: echo::tcp::200B"),
        "{all}"
    );
    assert!(all.contains("its count gates and is not the same"), "{all}");
    assert!(!all.contains("echo::udp::200B (+"), "{all}");
}

#[test]
fn a_gating_cell_within_the_invariance_limit_is_the_same() {
    let s = with_baseline("within");
    store(&s, "here", 10_000.0, 5_000.0);
    // 0.00008 % (both sides): a mean over thousands of windows, rounded otherwise, below
    // 0.0001 %.
    store(&s, "there", 10_000.008, 5_000.0);
    let (code, all) = compared(&s);
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains("the same within 0.0001 %"), "{all}");
}

#[test]
fn a_cell_counted_here_and_not_there_fails_when_it_gates() {
    let s = with_baseline("missing");
    store(&s, "here", 10_000.0, 5_000.0);
    let env = fixture::target_environment("x86_64-unknown-linux-musl", "qemu", "Test CPU");
    let cells = fixture::cells(MATRIX, "quick");
    for cell in &cells {
        let result: CellResult = fixture::passed(cell, &env, vec![40_000; 300]);
        write_result(&s.path("there"), &result).unwrap();
    }
    let (code, all) = compared(&s);
    assert_eq!(code, Some(3), "{all}");
    assert!(all.contains("echo::tcp::200B (not counted there)"), "{all}");
}

#[test]
fn same_counts_of_several_legs_at_once_is_refused() {
    let s = with_baseline("two-legs");
    store(&s, "here", 10_000.0, 5_000.0);
    let out = s.run(&[
        "report",
        "--results",
        "here",
        "--same-counts-as",
        "there",
        "--leg",
        LEG,
        "--leg",
        "x86_64-unknown-linux-gnu@native",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--same-counts-as compares one leg"),
        "{}",
        text(&out)
    );
}

/// `report --gating-cells` over the run stored in `here`.
fn gating_cells(s: &Scratch) -> std::process::Output {
    s.run(&[
        "report",
        "--results",
        "here",
        "--baselines",
        "baselines",
        "--leg",
        LEG,
        "--gating-cells",
    ])
}

#[test]
fn gating_cells_lists_the_cells_whose_counts_gate_and_no_other() {
    let s = with_baseline("gating-list");
    store(&s, "here", 10_000.0, 5_000.0);
    let out = gating_cells(&s);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // udp's accepted runs moved by 1 %: it only informs, so a second count need not run it.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "echo::tcp::200B\n");
    // Nothing is written: it only lists.
    assert!(!s.path(&format!("here/{LEG}/quick/report.md")).exists());
}

#[test]
fn gating_cells_without_baselines_is_an_error_not_an_empty_list() {
    let s = Scratch::new("same-counts-gating-no-baselines", MATRIX);
    store(&s, "here", 10_000.0, 5_000.0);
    let out = gating_cells(&s);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    assert!(text(&out).contains("no baselines folder"), "{}", text(&out));
}

#[test]
fn a_cell_that_only_informs_may_be_left_out_there() {
    let s = with_baseline("informs-left-out");
    store(&s, "here", 10_000.0, 5_000.0);
    store(&s, "there", 10_000.0, 5_000.0);
    // The second count ran the gating cells only: udp's result is not there.
    let udp = s.path(&format!("there/{LEG}/quick/cells/echo.udp.200B.json"));
    std::fs::remove_file(&udp).unwrap();
    let (code, all) = compared(&s);
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains("not counted there"), "{all}");
    assert!(
        !all.contains("echo::udp::200B (not counted there)"),
        "{all}"
    );
}
