//! Verdicts on guest instructions per round trip: deterministic counts gate where timing
//! only informs, with a margin of 1 % (or the accepted runs' spread), and never gate when
//! the count depends on timing, the emulated CPU or the compiler differs.

use ipc_matrix_baseline::{judge, Baseline, RunVerdict, Verdict, INSTRUCTION_MIN_CHANGE};
use ipc_matrix_results::{fixture, CellResult, InstructionCounts};
use ipc_matrix_spec::RegressionPolicy;

const SCENARIOS: &str = "
  - { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
";

/// One emulated result of `echo::tcp::200B` whose round trips cost `measuring + peer`
/// guest instructions.
fn counted(measuring: f64, peer: f64) -> CellResult {
    let cell = &fixture::quick_cells(SCENARIOS)[0];
    let env = fixture::environment("qemu", "Test CPU");
    let samples = (0..300u64).map(|i| 80_000 + (i * 7919) % 4000).collect();
    let mut result = fixture::passed(cell, &env, samples);
    result.instructions = Some(InstructionCounts {
        measuring: Some(measuring),
        peer: Some(peer),
        encode: None,
        decode: None,
        windows: 300,
        cpu_model: Some("cortex-a72".into()),
        timing_dependent: false,
    });
    result
}

fn baseline_of(runs: &[CellResult]) -> Baseline {
    let mut baseline = Baseline::from_results(&runs[..1], 1).unwrap();
    for (n, run) in runs.iter().enumerate().skip(1) {
        baseline.add_run(std::slice::from_ref(run), 1 + n as u64);
    }
    baseline
}

fn judged(current: CellResult, baseline: &Baseline) -> RunVerdict {
    judge(&[current], Some(baseline), RegressionPolicy::default())
}

fn instruction_verdict(v: &RunVerdict) -> (Verdict, bool) {
    let i = v.cells[0]
        .instructions
        .as_ref()
        .expect("a counted cell is judged");
    (i.verdict, i.gating)
}

#[test]
fn the_same_count_is_unchanged_and_more_instructions_regress_and_gate_on_an_emulated_leg() {
    let base = baseline_of(&[counted(1329.0, 858.0)]);
    let same = judged(counted(1329.0, 858.0), &base);
    assert_eq!(instruction_verdict(&same), (Verdict::Unchanged, true));
    assert_eq!(same.gating_regressions().count(), 0);
    // 5 % more on the peer side: 43 instructions of 2187, 2 % in all, over the 1 % margin.
    let more = judged(counted(1329.0, 858.0 * 1.05), &base);
    assert_eq!(instruction_verdict(&more), (Verdict::Regressed, true));
    // The timing verdict of an emulated leg only informs; the count still gates.
    assert!(more.informational.is_some());
    assert!(!more.cells[0].gating);
    assert_eq!(more.gating_regressions().count(), 1);
    assert_eq!(more.instruction_regressions().count(), 1);
    let fewer = judged(counted(1200.0, 800.0), &base);
    assert_eq!(instruction_verdict(&fewer), (Verdict::Improved, true));
}

#[test]
fn a_change_within_the_margin_is_unchanged() {
    let base = baseline_of(&[counted(1000.0, 1000.0)]);
    let within = 2000.0 * (1.0 + INSTRUCTION_MIN_CHANGE * 0.9);
    let v = judged(counted(within - 1000.0, 1000.0), &base);
    assert_eq!(instruction_verdict(&v), (Verdict::Unchanged, true));
}

#[test]
fn accepted_runs_that_spread_widen_the_margin() {
    // Accepted counts 2000 and 2100: the centre is 2100 (the upper median of two) and the
    // margin three times their range relative to it, 3 x 100 / 2100 = 14.3 %.
    let base = baseline_of(&[counted(1000.0, 1000.0), counted(1100.0, 1000.0)]);
    let v = judged(counted(1200.0, 1000.0), &base);
    let i = v.cells[0].instructions.as_ref().unwrap();
    assert!((i.margin - 3.0 * 100.0 / 2100.0).abs() < 1e-9, "{i:?}");
    assert_eq!(i.verdict, Verdict::Unchanged);
}

#[test]
fn a_timing_dependent_count_only_informs() {
    let base = baseline_of(&[counted(1000.0, 1000.0)]);
    let mut current = counted(2000.0, 1000.0);
    current.instructions.as_mut().unwrap().timing_dependent = true;
    let v = judged(current, &base);
    assert_eq!(instruction_verdict(&v), (Verdict::Regressed, false));
    assert_eq!(v.gating_regressions().count(), 0);
}

#[test]
fn another_emulated_cpu_or_another_compiler_only_informs() {
    let base = baseline_of(&[counted(1000.0, 1000.0)]);
    let mut other_cpu = counted(2000.0, 1000.0);
    other_cpu.instructions.as_mut().unwrap().cpu_model = Some("max".into());
    let v = judged(other_cpu, &base);
    assert_eq!(instruction_verdict(&v), (Verdict::Regressed, false));
    assert!(v.cells[0]
        .notes
        .iter()
        .any(|n| n.contains("another emulated CPU")));

    let mut other_rustc = counted(2000.0, 1000.0);
    other_rustc.environment.rustc = "rustc 1.99.0".into();
    let v = judged(other_rustc, &base);
    assert_eq!(instruction_verdict(&v), (Verdict::Regressed, false));
    assert!(v.cells[0]
        .notes
        .iter()
        .any(|n| n.contains("compiled by rustc 1.99.0")));
}

#[test]
fn a_cell_without_a_counted_baseline_is_new() {
    let mut uncounted = counted(1000.0, 1000.0);
    uncounted.instructions = None;
    let base = baseline_of(&[uncounted]);
    let v = judged(counted(1000.0, 1000.0), &base);
    assert_eq!(instruction_verdict(&v), (Verdict::New, true));
    assert_eq!(v.gating_regressions().count(), 0);
}

/// A change of exactly the margin is within it: 101 or 99 instructions where the baseline
/// counted 100 are unchanged (1 % either way), 102 and 98 are not.
#[test]
fn a_change_of_exactly_the_margin_is_unchanged() {
    assert_eq!(101.0 / 100.0, 1.0 + INSTRUCTION_MIN_CHANGE);
    assert_eq!(99.0 / 100.0, 1.0 - INSTRUCTION_MIN_CHANGE);
    let base = baseline_of(&[counted(60.0, 40.0)]);
    for (measuring, expected) in [
        (61.0, Verdict::Unchanged),
        (59.0, Verdict::Unchanged),
        (62.0, Verdict::Regressed),
        (58.0, Verdict::Improved),
    ] {
        let v = judged(counted(measuring, 40.0), &base);
        assert_eq!(
            instruction_verdict(&v),
            (expected, true),
            "{measuring} + 40"
        );
    }
}
