//! Verdicts on guest instructions per round trip: deterministic counts gate where timing
//! only informs, with a margin of 1 % (or the accepted runs' spread), and never gate when
//! the count depends on timing, the emulated CPU or the compiler differs.

use ipc_matrix_baseline::{judge, Baseline, RunVerdict, Verdict, INSTRUCTION_MIN_CHANGE};
use ipc_matrix_results::{fixture, CellResult, CountingSetup, InstructionCounts};
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
        setup: None,
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

/// The first cell's notes hold one containing `text`.
fn assert_has_note(v: &RunVerdict, text: &str) {
    let notes = &v.cells[0].notes;
    assert!(notes.iter().any(|n| n.contains(text)), "{notes:?}");
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
fn a_side_that_moved_does_not_gate_though_the_total_hides_it() {
    // aarch64's iceoryx2 echo: the peer moved by 0.00017 %, the total by 0.00008 %, under
    // the 0.0001 % the perturbed runs are held to.
    let base = baseline_of(&[counted(2767.0, 2381.0), counted(2767.0, 2381.004)]);
    let v = judged(counted(2767.0, 2381.0), &base);
    let i = v.cells[0].instructions.as_ref().unwrap();
    assert!(!i.gating, "{i:?}");
    assert_has_note(&v, "moved by 0.0002 %");
    // Both sides the same in every run: it gates.
    let exact = baseline_of(&[counted(2767.0, 2381.0), counted(2767.0, 2381.0)]);
    assert!(
        judged(counted(2767.0, 2381.0), &exact).cells[0]
            .instructions
            .as_ref()
            .unwrap()
            .gating
    );
}

#[test]
fn accepted_runs_that_spread_widen_the_margin_and_only_inform() {
    // Accepted counts 2000 and 2100: the centre is 2100 (the upper median of two) and the
    // margin three times their range relative to it, 3 x 100 / 2100 = 14.3 %. A count
    // that moved between the baseline's runs (made under perturbations) does not gate.
    let base = baseline_of(&[counted(1000.0, 1000.0), counted(1100.0, 1000.0)]);
    let v = judged(counted(1200.0, 1000.0), &base);
    let i = v.cells[0].instructions.as_ref().unwrap();
    assert!((i.margin - 3.0 * 100.0 / 2100.0).abs() < 1e-9, "{i:?}");
    assert_eq!(i.verdict, Verdict::Unchanged);
    assert!(!i.gating);
    let regressed = judged(counted(3000.0, 1000.0), &base);
    assert_eq!(instruction_verdict(&regressed), (Verdict::Regressed, false));
    assert_eq!(regressed.gating_regressions().count(), 0);
    assert_has_note(
        &regressed,
        "moved by 10.0000 % between the baseline's 2 accepted runs",
    );
}

#[test]
fn accepted_runs_within_the_invariance_limit_still_gate() {
    // 0.000025 % apart: the rounding of a mean over thousands of windows, not a
    // dependence.
    let base = baseline_of(&[
        counted(100_000.0, 100_000.0),
        counted(100_000.05, 100_000.0),
    ]);
    let v = judged(counted(110_000.0, 100_000.0), &base);
    assert_eq!(instruction_verdict(&v), (Verdict::Regressed, true));
    assert_eq!(v.instruction_regressions().count(), 1);
}

fn setup(c_library: &str, libc_digest: &str) -> CountingSetup {
    CountingSetup {
        emulator: "qemu 7.2.22".into(),
        plugin_api: 1,
        c_library: c_library.into(),
        linkage: "dynamic".into(),
        libraries: vec![
            format!("libc.so.6 {libc_digest}"),
            "libgcc_s.so.1 00112233aabbccdd".into(),
        ],
    }
}

fn counted_with(measuring: f64, setup: Option<CountingSetup>) -> CellResult {
    let mut result = counted(measuring, 1000.0);
    result.instructions.as_mut().unwrap().setup = setup;
    result
}

#[test]
fn a_count_made_with_another_c_library_or_emulator_only_informs_and_says_how_to_reaccept() {
    let then = setup("glibc 2.36", "1111111111111111");
    let base = baseline_of(&[counted_with(1000.0, Some(then.clone()))]);
    // The same setup: a regression gates.
    let same = judged(counted_with(1500.0, Some(then.clone())), &base);
    assert_eq!(instruction_verdict(&same), (Verdict::Regressed, true));
    // Another C library: it only informs, naming what differs and the command.
    let other = judged(
        counted_with(1500.0, Some(setup("glibc 2.41", "2222222222222222"))),
        &base,
    );
    assert_eq!(instruction_verdict(&other), (Verdict::Regressed, false));
    assert_eq!(other.gating_regressions().count(), 0);
    let note = other.cells[0]
        .notes
        .iter()
        .find(|n| n.starts_with("informational: counted with"))
        .expect("a note on the setup");
    assert_eq!(
        note,
        "informational: counted with glibc 2.41, libc.so.6 2222222222222222, the baseline with glibc 2.36, libc.so.6 1111111111111111; re-accept with `ipc-matrix baseline accept --leg x86_64-unknown-linux-gnu@qemu --profile quick`, or in this repository `scripts/accept-baseline.sh 3 x86_64-unknown-linux-gnu@qemu`"
    );
    // Another emulator, the same libraries.
    let mut newer = then.clone();
    newer.emulator = "qemu 10.0.2".into();
    newer.plugin_api = 2;
    let v = judged(counted_with(1000.0, Some(newer)), &base);
    assert_eq!(instruction_verdict(&v), (Verdict::Unchanged, false));
    assert!(v.cells[0].notes.iter().any(|n| n.starts_with(
        "informational: counted with qemu 10.0.2, plugin API 2, the baseline with qemu 7.2.22, plugin API 1;"
    )));
    // A baseline that recorded no setup cannot vouch for one.
    let unrecorded = baseline_of(&[counted_with(1000.0, None)]);
    let v = judged(counted_with(1500.0, Some(then)), &unrecorded);
    assert_eq!(instruction_verdict(&v), (Verdict::Regressed, false));
    assert!(v.cells[0]
        .notes
        .iter()
        .any(|n| n.contains("the baseline with a setup it did not record")));
}

#[test]
fn no_count_where_the_baseline_has_one_fails_the_instruction_gate_naming_why() {
    let base = baseline_of(&[counted(1000.0, 1000.0)]);
    let mut uncounted = counted(1000.0, 1000.0);
    uncounted.instructions = None;
    uncounted.uncounted = Some("no counting plugin at /x/libipc_matrix_qemu_count.so".into());
    let v = judged(uncounted, &base);
    assert!(v.cells[0].count_missing());
    assert_eq!(v.instruction_regressions().count(), 1);
    assert_eq!(v.gating_regressions().count(), 1);
    assert_eq!(
        v.cells[0].uncounted.as_deref(),
        Some("not counted: no counting plugin at /x/libipc_matrix_qemu_count.so")
    );
    // The peer's count missing is no count either.
    let mut half = counted(1000.0, 1000.0);
    half.instructions.as_mut().unwrap().peer = None;
    let v = judged(half, &base);
    assert_eq!(v.instruction_regressions().count(), 1);
    assert!(v.cells[0]
        .uncounted
        .as_deref()
        .unwrap()
        .contains("the peer has no count"));
    // A failed cell is failed, not uncounted; a baseline without counts expects none.
    let mut failed = counted(1000.0, 1000.0);
    failed.instructions = None;
    failed.outcome.passed = false;
    assert!(!judged(failed, &base).cells[0].count_missing());
    let mut never = counted(1000.0, 1000.0);
    never.instructions = None;
    let plain = baseline_of(std::slice::from_ref(&never));
    assert_eq!(judged(never, &plain).instruction_regressions().count(), 0);
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
