//! `ipc-matrix report --compare DIR... --fail-on-blocking-regressions`, the gate of the
//! workflow's side-by-side job, on leg folders made the way the legs make them: stored
//! results judged by `ipc-matrix report` against baselines accepted from earlier ones.

mod common;

use common::{text, Scratch};
use ipc_matrix_results::{fixture, write_result, CellResult, InstructionCounts};
use std::process::Output;

/// x86_64 blocks merges, natively and (its count pass) as `x86_64-unknown-linux-musl@qemu`;
/// s390x under QEMU does not.
const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
  - { triple: s390x-unknown-linux-gnu, runner: qemu, blocks_merge: false }
profiles:
  quick: { description: test }
  gate:
    description: a profile whose timing regressions fail the run
    regression: { min_change: 0.5, strict: true }
scenarios:
  - { name: echo, kind: echo, transports: [tcp, udp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
"#;

const NATIVE: &str = "x86_64-unknown-linux-gnu@native";
const COUNTED: &str = "x86_64-unknown-linux-musl@qemu";
const S390X: &str = "s390x-unknown-linux-gnu@qemu";
const LEGS: [&str; 3] = [NATIVE, COUNTED, S390X];

/// How one leg's cells ran: the tcp round trip and the tcp cell's instructions per round
/// trip (the udp cell stays at 40 us and 10,000 instructions).
#[derive(Clone, Copy)]
struct Run {
    tcp_ns: u64,
    tcp_instructions: f64,
}

const USUAL: Run = Run {
    tcp_ns: 45_000,
    tcp_instructions: 20_000.0,
};

/// Stores the cells of `leg` for `profile` under `results` (a count for `@qemu` legs).
fn store(s: &Scratch, results: &str, leg: &str, profile: &str, run: Run, phase: u64) {
    let (triple, runner) = leg.split_once('@').unwrap();
    let env = fixture::target_environment(triple, runner, "Test CPU");
    let cells = fixture::cells(MATRIX, profile);
    for (cell, (ns, count)) in cells
        .iter()
        .zip([(run.tcp_ns, run.tcp_instructions), (40_000, 10_000.0)])
    {
        let samples = (0..300u64)
            .map(|i| ns * (90 + (i * 7919 + phase * 104_729) % 21) / 100)
            .collect();
        let mut result: CellResult = fixture::passed(cell, &env, samples);
        if runner == "qemu" && count.is_nan() {
            // Not counted: the runner says why.
            result.uncounted =
                Some("no counting plugin at /nowhere/libipc_matrix_qemu_count.so".into());
        } else if runner == "qemu" {
            result.instructions = Some(InstructionCounts {
                measuring: Some(count * 0.6),
                peer: Some(count * 0.4),
                encode: None,
                decode: None,
                windows: 300,
                cpu_model: Some("cortex-a72".into()),
                timing_dependent: false,
                setup: None,
            });
        }
        write_result(&s.path(results), &result).unwrap();
    }
}

/// Baselines accepted from a usual run of every leg, then a run in `now` (each leg as
/// `runs` says, else as usual) judged by `ipc-matrix report` into each leg's results.json.
fn judged(name: &str, profile: &str, runs: &[(&str, Run)]) -> Scratch {
    let s = Scratch::new(&format!("gate-{name}"), MATRIX);
    for leg in LEGS {
        store(&s, "base", leg, profile, USUAL, 1);
        let run = runs
            .iter()
            .find(|(l, _)| *l == leg)
            .map_or(USUAL, |(_, r)| *r);
        store(&s, "now", leg, profile, run, 2);
    }
    let accept = s.run(&[
        "baseline",
        "accept",
        "--profile",
        profile,
        "--results",
        "base",
        "--baselines",
        "baselines",
    ]);
    assert!(accept.status.success(), "{}", text(&accept));
    let report = s.run(&[
        "report",
        "--profile",
        profile,
        "--results",
        "now",
        "--baselines",
        "baselines",
    ]);
    // A strict profile's report exits 3 on a regression; its reports are written either way.
    assert!(
        matches!(report.status.code(), Some(0 | 3)),
        "{}",
        text(&report)
    );
    s
}

/// The gate over the given legs' folders in `now`.
fn gate(s: &Scratch, profile: &str, legs: &[&str]) -> Output {
    let folders: Vec<String> = legs.iter().map(|l| format!("now/{l}/{profile}")).collect();
    let mut args = vec![
        "report",
        "--profile",
        profile,
        "--fail-on-blocking-regressions",
        "--out",
        "cmp",
        "--compare",
    ];
    args.extend(folders.iter().map(String::as_str));
    s.run(&args)
}

fn summary_of(s: &Scratch, leg: &str, profile: &str) -> serde_json::Value {
    let file = s.path(&format!("now/{leg}/{profile}/results.json"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    doc["summary"].clone()
}

#[test]
fn legs_without_a_gating_regression_pass_and_are_put_side_by_side() {
    let s = judged("pass", "quick", &[]);
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("No leg that blocks merges regressed."),
        "{all}"
    );
    for leg in [NATIVE, COUNTED] {
        assert!(
            all.contains(&format!("`{leg}` (quick): no regression that gates")),
            "{all}"
        );
    }
    let md = std::fs::read_to_string(s.path("cmp/comparison.md")).unwrap();
    assert!(md.contains("echo::tcp::200B"), "{md}");
}

#[test]
fn an_instruction_regression_of_a_blocking_leg_fails_naming_the_leg_and_the_cell() {
    let more = Run {
        tcp_instructions: 24_000.0, // 20 % more than the baseline: far over its 1 % margin
        ..USUAL
    };
    let s = judged("counted", "quick", &[(COUNTED, more)]);
    assert_eq!(summary_of(&s, COUNTED, "quick")["gating_regressions"], 1);
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(3), "{all}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "error: {COUNTED} blocks merges and regressed: `echo::tcp::200B` (instructions)"
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!("`{NATIVE}` (quick): no regression that gates")),
        "{all}"
    );
}

#[test]
fn no_count_where_the_baseline_has_one_fails_the_strict_report_and_the_gate_naming_why() {
    let uncounted = Run {
        tcp_instructions: f64::NAN,
        ..USUAL
    };
    let s = judged("uncounted", "quick", &[(COUNTED, uncounted)]);
    assert_eq!(summary_of(&s, COUNTED, "quick")["gating_regressions"], 1);
    let report = s.run(&[
        "report",
        "--profile",
        "quick",
        "--leg",
        COUNTED,
        "--results",
        "now",
        "--baselines",
        "baselines",
        "--strict-instructions",
    ]);
    let all = text(&report);
    assert_eq!(report.status.code(), Some(3), "{all}");
    assert!(
        all.contains(&format!(
            "warning: {COUNTED}: echo::tcp::200B: not counted: no counting plugin at /nowhere/libipc_matrix_qemu_count.so"
        )),
        "{all}"
    );
    assert!(
        all.contains("1 not counted where the baseline has counts"),
        "{all}"
    );
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(3), "{all}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "error: {COUNTED} blocks merges and regressed: `echo::tcp::200B` (not counted: no counting plugin at"
        )),
        "{all}"
    );
}

#[test]
fn the_same_regression_of_a_leg_that_does_not_block_merges_only_informs() {
    let more = Run {
        tcp_instructions: 24_000.0,
        ..USUAL
    };
    let s = judged("informs", "quick", &[(S390X, more)]);
    assert_eq!(summary_of(&s, S390X, "quick")["gating_regressions"], 1);
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!(
            "`{S390X}` (quick): regressed: `echo::tcp::200B` (instructions) (does not block merges)"
        )),
        "{all}"
    );
}

#[test]
fn a_round_trip_regression_of_a_blocking_leg_fails_only_where_the_profile_is_strict() {
    let slow = Run {
        tcp_ns: 90_000,
        ..USUAL
    };
    let s = judged("warned", "quick", &[(NATIVE, slow)]);
    assert_eq!(summary_of(&s, NATIVE, "quick")["gating_regressions"], 1);
    let warned = gate(&s, "quick", &LEGS);
    let all = text(&warned);
    assert_eq!(warned.status.code(), Some(0), "{all}");
    assert!(
        all.contains("round trips regressed (a warning: the profile is not strict): `echo::tcp::200B` (round trip)"),
        "{all}"
    );

    let s = judged("strict", "gate", &[(NATIVE, slow)]);
    let failed = gate(&s, "gate", &LEGS);
    let all = text(&failed);
    assert_eq!(failed.status.code(), Some(3), "{all}");
    assert!(
        all.contains(&format!(
            "error: {NATIVE} blocks merges and regressed: `echo::tcp::200B` (round trip)"
        )),
        "{all}"
    );
}

#[test]
fn a_blocking_leg_without_a_report_fails_and_is_named() {
    let s = judged("missing", "quick", &[]);
    // The count pass's folder is not among those given: that leg produced nothing.
    let out = gate(&s, "quick", &[NATIVE, S390X]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!(
            "error: {COUNTED} blocks merges and has no report: no folder of profile `quick` among the results given"
        )),
        "{all}"
    );

    // Cell results without results.json: the leg's report step did not finish.
    std::fs::remove_file(s.path(&format!("now/{NATIVE}/quick/results.json"))).unwrap();
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!("error: {NATIVE} blocks merges and has no report in now/{NATIVE}/quick: cell results but no results.json")),
        "{all}"
    );
    // ... the other legs are still put side by side.
    assert!(s.path("cmp/comparison.md").is_file());
}

#[test]
fn a_leg_that_does_not_block_merges_may_have_no_report_and_no_folder_at_all_fails() {
    let s = judged("optional", "quick", &[]);
    std::fs::remove_file(s.path(&format!("now/{S390X}/quick/results.json"))).unwrap();
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!(
            "`{S390X}` (quick): no report in now/{S390X}/quick"
        )),
        "{all}"
    );

    // No leg produced anything (every build failed): the gate fails, it does not pass
    // an empty run.
    let out = gate(&s, "quick", &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    for leg in [NATIVE, COUNTED] {
        assert!(
            all.contains(&format!("error: {leg} blocks merges and has no report")),
            "{all}"
        );
    }
    assert!(
        all.contains("0 of the 0 folders given have cell results"),
        "{all}"
    );
}

#[test]
fn a_report_that_contradicts_its_own_summary_is_no_report() {
    let s = judged("contradicts", "quick", &[]);
    let file = s.path(&format!("now/{NATIVE}/quick/results.json"));
    let doc = std::fs::read_to_string(&file).unwrap();
    let field = "\"gating_regressions\": 0";
    assert!(doc.contains(field), "the summary's field was not found");
    let forged = doc.replacen(field, "\"gating_regressions\": 2", 1);
    std::fs::write(&file, forged).unwrap();
    let out = gate(&s, "quick", &LEGS);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("summary.gating_regressions is Some(2), but 0 cell(s) regressed and gate"),
        "{all}"
    );
}

#[test]
fn without_the_gate_compare_still_needs_two_folders() {
    let s = judged("two", "quick", &[]);
    let one = s.run(&["report", "--compare", &format!("now/{NATIVE}/quick")]);
    assert_eq!(one.status.code(), Some(2), "{}", text(&one));
    assert!(text(&one).contains("--compare needs two folders or more (given 1)"));
    let flag_alone = s.run(&["report", "--fail-on-blocking-regressions"]);
    assert_eq!(flag_alone.status.code(), Some(2), "{}", text(&flag_alone));
}

/// `baseline accept --artifacts DIR`: what the legs uploaded, downloaded as `gh run
/// download -D DIR` writes it (a folder per artifact, the upload's paths inside).
#[test]
fn baselines_are_accepted_from_downloaded_artifacts_and_a_leg_in_two_is_refused() {
    let s = Scratch::new("gate-artifacts", MATRIX);
    store(
        &s,
        "dl/results-native/ipc-matrix",
        NATIVE,
        "quick",
        USUAL,
        1,
    );
    store(
        &s,
        "dl/results-native/ipc-matrix",
        COUNTED,
        "quick",
        USUAL,
        1,
    );
    store(&s, "dl/results-s390x/ipc-matrix", S390X, "quick", USUAL, 1);
    let accept = |dir: &str| {
        s.run(&[
            "baseline",
            "accept",
            "--profile",
            "quick",
            "--artifacts",
            dir,
            "--baselines",
            "baselines",
        ])
    };
    let out = accept("dl");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    for leg in LEGS {
        let baseline = s.path(&format!("baselines/{leg}/quick.json"));
        assert!(
            baseline.is_file(),
            "{leg}: no {}: {all}",
            baseline.display()
        );
    }
    // The accepted counts judge the same results as unchanged.
    let report = s.run(&[
        "report",
        "--profile",
        "quick",
        "--leg",
        COUNTED,
        "--results",
        "dl/results-native/ipc-matrix",
        "--baselines",
        "baselines",
        "--strict-instructions",
    ]);
    assert_eq!(report.status.code(), Some(0), "{}", text(&report));
    // The same leg in its own artifact and another: its own is taken.
    let own = format!("dl/results-{S390X}/ipc-matrix");
    store(&s, &own, S390X, "quick", USUAL, 2);
    let out = accept("dl");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!("{S390X}: from dl/results-{S390X}/ipc-matrix")),
        "{all}"
    );
    // In two artifacts, neither its own: which one is meant is not guessed.
    std::fs::remove_dir_all(s.path(&format!("dl/results-{S390X}"))).unwrap();
    store(&s, "dl/results-again/ipc-matrix", S390X, "quick", USUAL, 2);
    let out = accept("dl");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains(&format!(
            "{S390X}: results of profile `quick` in two artifacts"
        )),
        "{all}"
    );
    // A leg asked for that no artifact holds is an error, not a silent nothing.
    let out = s.run(&[
        "baseline",
        "accept",
        "--profile",
        "quick",
        "--artifacts",
        "dl/results-native",
        "--leg",
        S390X,
        "--baselines",
        "baselines",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("--leg {S390X}: no results")),
        "{}",
        text(&out)
    );
    // A folder without results says what it expected.
    std::fs::create_dir_all(s.path("empty/results-x")).unwrap();
    let out = accept("empty");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out).contains("no results of profile `quick` in any artifact"),
        "{}",
        text(&out)
    );
}

/// The gate's arguments over the given legs' folders in `now`.
fn gate_command(s: &Scratch, legs: &[&str]) -> std::process::Command {
    let folders: Vec<String> = legs.iter().map(|l| format!("now/{l}/quick")).collect();
    let mut args = vec![
        "report",
        "--profile",
        "quick",
        "--fail-on-blocking-regressions",
        "--out",
        "cmp",
        "--compare",
    ];
    args.extend(folders.iter().map(String::as_str));
    s.command(&args)
}

#[test]
fn a_leg_that_does_not_block_merges_and_left_nothing_is_listed_as_such() {
    let s = judged("listed", "quick", &[]);
    let out = gate(&s, "quick", &[NATIVE, COUNTED]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!(
            "`{S390X}` (quick): no report: no folder of profile `quick` among the results given (does not block merges)"
        )),
        "{all}"
    );
    // The section is kept beside the comparison, verdict included.
    let kept = std::fs::read_to_string(s.path("cmp/gate.md")).unwrap();
    assert!(
        kept.contains("No leg that blocks merges regressed."),
        "{kept}"
    );
    assert!(
        kept.contains(&format!("`{S390X}` (quick): no report")),
        "{kept}"
    );
}

#[test]
fn legs_a_local_run_left_out_are_named_and_only_under_act() {
    let s = judged("not-run", "quick", &[]);
    // The native leg's folder only: its count leg was not run here, and says so.
    let out = gate_command(&s, &[NATIVE])
        .env("ACT", "true")
        .env("IPC_MATRIX_LEGS_NOT_RUN", COUNTED)
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!("Not run in this local run (IPC_MATRIX_LEGS_NOT_RUN; on GitHub each must have its report): `{COUNTED}`")),
        "{all}"
    );
    // A leg that was run and left no report still fails, not-run list or not.
    let out = gate_command(&s, &[])
        .env("ACT", "true")
        .env("IPC_MATRIX_LEGS_NOT_RUN", COUNTED)
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!("error: {NATIVE} blocks merges and has no report")),
        "{all}"
    );
    // Outside act the list is refused: on GitHub every blocking leg must have its report.
    let out = gate_command(&s, &[NATIVE])
        .env_remove("ACT")
        .env("IPC_MATRIX_LEGS_NOT_RUN", COUNTED)
        .output()
        .unwrap();
    let all = text(&out);
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("IPC_MATRIX_LEGS_NOT_RUN is set, but this is not a local run under act"),
        "{all}"
    );
}
