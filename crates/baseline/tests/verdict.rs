//! Verdicts on results with known round-trip times: what is flagged and what is not.

use ipc_matrix_baseline::{judge, Baseline, RunVerdict, Verdict};
use ipc_matrix_results::{fixture, CellResult, Environment, FailureKind};
use ipc_matrix_spec::{Cell, RegressionPolicy};

const SCENARIOS: &str = "
  - { name: echo, kind: echo, transports: [tcp, udp, local], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
";
const CPU: &str = "Test CPU @ 3.0GHz";

fn cells() -> Vec<Cell> {
    fixture::quick_cells(SCENARIOS)
}

/// 300 round trips around `center` ns with a deterministic +-10 % wobble and the odd
/// stall, as a quiet machine produces.
fn samples(center: u64, phase: u64) -> Vec<u64> {
    (0..300u64)
        .map(|i| {
            let wobble = (i * 7919 + phase * 104_729) % 21; // 0..=20
            let stall = if (i + phase).is_multiple_of(97) { 5 } else { 1 };
            center * (90 + wobble) / 100 * stall
        })
        .collect()
}

fn run(env: &Environment, centers: &[u64], phase: u64) -> Vec<CellResult> {
    cells()
        .iter()
        .zip(centers)
        .map(|(cell, &center)| fixture::passed(cell, env, samples(center, phase)))
        .collect()
}

fn native() -> Environment {
    fixture::environment("native", CPU)
}

fn verdicts(v: &RunVerdict) -> Vec<(&str, Verdict, bool)> {
    v.cells
        .iter()
        .map(|c| (c.cell_id.as_str(), c.verdict, c.gating))
        .collect()
}

fn baseline_of(results: &[CellResult]) -> Baseline {
    Baseline::from_results(results, 1_796_000_000).unwrap()
}

#[test]
fn the_same_times_again_are_unchanged() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let again = judge(
        &run(&native(), &[40_000, 35_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    for cell in &again.cells {
        assert_eq!(cell.verdict, Verdict::Unchanged, "{cell:?}");
        let change = cell.change.unwrap();
        assert!((0.9..1.1).contains(&change.ratio), "{change:?}");
    }
    assert_eq!(again.gating_regressions().count(), 0);
}

#[test]
fn a_doubled_round_trip_is_a_regression_on_that_cell_only() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let slowed = judge(
        &run(&native(), &[80_000, 35_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(
        verdicts(&slowed),
        [
            ("echo::tcp::200B", Verdict::Regressed, true),
            ("echo::udp::200B", Verdict::Unchanged, true),
            ("echo::local::200B", Verdict::Unchanged, true),
        ]
    );
    let change = slowed.cells[0].change.unwrap();
    assert!(change.ci_low > 1.8 && change.ci_high < 2.2, "{change:?}");
    assert!(change.p_value < 1e-6, "{change:?}");
}

#[test]
fn a_halved_round_trip_is_an_improvement_and_a_small_change_is_not_flagged() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let v = judge(
        &run(&native(), &[20_000, 42_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    // 1.2x slower is real here (p tiny) but below the 50 % margin.
    assert_eq!(
        verdicts(&v),
        [
            ("echo::tcp::200B", Verdict::Improved, true),
            ("echo::udp::200B", Verdict::Unchanged, true),
            ("echo::local::200B", Verdict::Unchanged, true),
        ]
    );
    // A stricter policy flags the 1.2x.
    let strict = RegressionPolicy {
        min_change: 0.1,
        strict: true,
    };
    let v = judge(
        &run(&native(), &[40_000, 42_000, 30_000], 2),
        Some(&base),
        strict,
    );
    assert_eq!(v.cells[1].verdict, Verdict::Regressed);
}

#[test]
fn a_noisy_baseline_widens_its_own_margin() {
    let cell = &cells()[0];
    // Stretches of round trips in one of two modes, 180 us and 380 us, as a 1 MB local
    // socket echo shows on a 2-vCPU VM.
    let mode = |i: u64, slow_in_ten: u64| {
        if (i / 10 * 7) % 10 < slow_in_ten {
            380_000
        } else {
            180_000
        }
    };
    let bimodal: Vec<u64> = (0..300u64).map(|i| mode(i, 4)).collect();
    let base = baseline_of(&[fixture::passed(cell, &native(), bimodal)]);
    let mostly_slow: Vec<u64> = (0..300u64).map(|i| mode(i, 8)).collect();
    let v = judge(
        &[fixture::passed(cell, &native(), mostly_slow)],
        Some(&base),
        RegressionPolicy::default(),
    );
    let judged = &v.cells[0];
    let change = judged.change.unwrap();
    assert!(change.margin > 0.5, "{change:?}");
    assert_eq!(judged.verdict, Verdict::Unchanged, "{change:?}");
}

#[test]
fn emulated_legs_and_other_cpus_only_inform() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let qemu = fixture::environment("qemu", CPU);
    let v = judge(
        &run(&qemu, &[80_000, 35_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(v.cells[0].verdict, Verdict::Regressed);
    assert!(!v.cells[0].gating);
    assert!(v.informational.as_deref().unwrap().contains("emulated"));
    assert_eq!(v.gating_regressions().count(), 0);

    let mut debug = native();
    debug.debug_assertions = true;
    let v = judge(
        &run(&debug, &[80_000, 35_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert!(v
        .informational
        .as_deref()
        .unwrap()
        .contains("built differently"));
    assert_eq!(v.gating_regressions().count(), 0);

    let other = fixture::environment("native", "Another CPU");
    let v = judge(
        &run(&other, &[80_000, 35_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert!(v.informational.as_deref().unwrap().contains("another CPU"));
    assert_eq!(v.gating_regressions().count(), 0);
}

#[test]
fn failed_new_and_missing_cells_are_named() {
    let all = run(&native(), &[40_000, 35_000, 30_000], 1);
    let base = baseline_of(&all[..2]); // local is not in the baseline
    let current = vec![
        fixture::failed(
            &cells()[0],
            &native(),
            FailureKind::Timeout,
            12,
            "no reply before the deadline",
        ),
        all[2].clone(),
    ];
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert_eq!(
        verdicts(&v),
        [
            ("echo::tcp::200B", Verdict::Failed, true),
            ("echo::local::200B", Verdict::New, true),
        ]
    );
    assert_eq!(v.not_run, ["echo::udp::200B"]);
}

#[test]
fn another_cpu_placement_only_informs() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let mut current = run(&native(), &[80_000, 35_000, 30_000], 2);
    current[0].placement = Default::default();
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert_eq!(v.cells[0].verdict, Verdict::Regressed);
    assert!(!v.cells[0].gating);
    assert!(v.cells[0].notes[0].contains("placement"));
}

#[test]
fn baselines_round_trip_through_their_file_and_refuse_other_versions() {
    let dir = std::env::temp_dir().join(format!("ipc-matrix-baseline-test-{}", std::process::id()));
    let path = dir.join("leg").join("quick.json");
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    base.save(&path).unwrap();
    assert_eq!(Baseline::load(&path).unwrap(), Some(base));
    assert_eq!(Baseline::load(&dir.join("none.json")).unwrap(), None);

    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"format_version\": 1", "\"format_version\": 99"),
    )
    .unwrap();
    let err = Baseline::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("baseline format 99") && err.contains("baseline accept"),
        "{err}"
    );
    std::fs::write(&path, "{ not json").unwrap();
    assert!(Baseline::load(&path)
        .unwrap_err()
        .to_string()
        .contains("not a baseline file"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runs_accepted_together_set_the_margin_by_their_spread() {
    let mut base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    // Two more accepted runs of unchanged code, in noisier hours: tcp at 1.25x and 1.5x.
    base.add_run(&run(&native(), &[50_000, 35_000, 30_000], 2), 1_796_000_100);
    base.add_run(&run(&native(), &[60_000, 35_000, 30_000], 3), 1_796_000_200);
    let tcp = &base.cells["echo::tcp::200B"];
    assert_eq!(tcp.runs.len(), 3);
    assert!(
        (tcp.run_to_run_spread() - 0.5).abs() < 0.03,
        "{}",
        tcp.run_to_run_spread()
    );
    // 3 sigma with sigma = R / d2(3) = 0.5 / 1.693.
    assert!(
        (tcp.run_to_run_noise() - 0.886).abs() < 0.05,
        "{}",
        tcp.run_to_run_noise()
    );

    // 1.7x the fastest run is within what unchanged code does here; 2.5x the middle is not.
    let v = judge(
        &run(&native(), &[68_000, 35_000, 30_000], 4),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(v.cells[0].verdict, Verdict::Unchanged, "{:?}", v.cells[0]);
    let v = judge(
        &run(&native(), &[125_000, 35_000, 30_000], 4),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(v.cells[0].verdict, Verdict::Regressed, "{:?}", v.cells[0]);

    // Only the last MAX_RUNS runs are kept.
    for i in 0..10 {
        base.add_run(
            &run(&native(), &[40_000, 35_000, 30_000], 3 + i),
            1_796_000_200 + i,
        );
    }
    assert_eq!(
        base.cells["echo::tcp::200B"].runs.len(),
        ipc_matrix_baseline::MAX_RUNS
    );
    assert_eq!(
        base.cells["echo::tcp::200B"].runs[0].accepted_at_unix,
        1_796_000_205
    );
}

#[test]
fn a_machine_that_changed_under_the_cell_only_informs() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let mut current = run(&native(), &[80_000, 35_000, 30_000], 2);
    // The fixture's probe is 150 ns; the host now takes 3x as long between the CPUs.
    current[0].core_to_core_ns = Some(450);
    current[1].core_to_core_ns = Some(180); // within 1.5x: still comparable
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert_eq!(v.cells[0].verdict, Verdict::Regressed);
    assert!(!v.cells[0].gating);
    assert!(
        v.cells[0].notes[0].contains("the machine changed"),
        "{:?}",
        v.cells[0].notes
    );
    assert!(v.cells[1].gating && v.cells[1].notes.is_empty());
    assert_eq!(v.gating_regressions().count(), 0);
}

#[test]
fn runs_taken_while_the_machine_was_elsewhere_do_not_set_the_margin() {
    let mut base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    base.add_run(&run(&native(), &[42_000, 35_000, 30_000], 2), 1_796_000_100);
    // A third run while the host had moved the CPUs apart: 3x slower, probe 3x too.
    let mut far = run(&native(), &[120_000, 35_000, 30_000], 3);
    for r in &mut far {
        r.core_to_core_ns = Some(450);
    }
    base.add_run(&far, 1_796_000_200);
    let tcp = &base.cells["echo::tcp::200B"];
    assert_eq!(tcp.runs.len(), 3);
    assert_eq!(tcp.typical_runs().len(), 2);
    assert!(tcp.run_to_run_spread() < 0.1, "{}", tcp.run_to_run_spread());
    // So a doubling is still caught.
    let v = judge(
        &run(&native(), &[82_000, 35_000, 30_000], 4),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(v.cells[0].verdict, Verdict::Regressed, "{:?}", v.cells[0]);
}

#[test]
fn a_cell_that_competed_for_the_cpus_only_informs() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let mut current = run(&native(), &[80_000, 35_000, 30_000], 2);
    current[0].cpu_pressure = Some(0.65);
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert_eq!(v.cells[0].verdict, Verdict::Regressed);
    assert!(!v.cells[0].gating);
    assert!(
        v.cells[0].notes[0].contains("the machine was busy"),
        "{:?}",
        v.cells[0].notes
    );
    assert_eq!(v.gating_regressions().count(), 0);

    // A cell that loads the CPUs itself (a fan cell) is judged against its own level.
    let mut loaded = run(&native(), &[40_000, 35_000, 30_000], 1);
    loaded[0].cpu_pressure = Some(0.8);
    let base = baseline_of(&loaded);
    current[0].cpu_pressure = Some(0.85);
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert!(v.cells[0].gating, "{:?}", v.cells[0].notes);
}

#[test]
fn a_machine_that_changed_during_the_cell_only_informs() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let mut current = run(&native(), &[80_000, 35_000, 30_000], 2);
    // Usual before the cell, 3x after it: the host moved the CPUs while it ran.
    current[0].core_to_core_after_ns = Some(450);
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert!(!v.cells[0].gating);
    assert!(
        v.cells[0].notes[0].contains("after this cell"),
        "{:?}",
        v.cells[0].notes
    );
}

#[test]
fn verdicts_are_named_and_counted() {
    let names: Vec<&str> = [
        Verdict::Improved,
        Verdict::Unchanged,
        Verdict::Regressed,
        Verdict::New,
        Verdict::Failed,
    ]
    .iter()
    .map(|v| v.as_str())
    .collect();
    assert_eq!(
        names,
        ["improved", "unchanged", "regressed", "new", "failed"]
    );

    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let v = judge(
        &run(&native(), &[80_000, 35_000, 15_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(
        verdicts(&v),
        [
            ("echo::tcp::200B", Verdict::Regressed, true),
            ("echo::udp::200B", Verdict::Unchanged, true),
            ("echo::local::200B", Verdict::Improved, true),
        ]
    );
    assert_eq!(v.count(Verdict::Regressed), 1);
    assert_eq!(v.count(Verdict::Unchanged), 1);
    assert_eq!(v.count(Verdict::Improved), 1);
    assert_eq!(v.count(Verdict::Failed), 0);
    let ids = |cells: Vec<&ipc_matrix_baseline::CellVerdict>| -> Vec<String> {
        cells.iter().map(|c| c.cell_id.clone()).collect()
    };
    assert_eq!(ids(v.timing_regressions().collect()), ["echo::tcp::200B"]);
    assert_eq!(ids(v.gating_regressions().collect()), ["echo::tcp::200B"]);

    // A regression that only informs is not a timing regression that gates.
    let mut current = run(&native(), &[80_000, 35_000, 15_000], 2);
    current[0].placement = Default::default();
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert_eq!(v.cells[0].verdict, Verdict::Regressed);
    assert_eq!(v.timing_regressions().count(), 0);
}

/// 300 round trips of exactly `ns` each: every batch median, and every bootstrap ratio,
/// is exact.
fn constant(cell: &Cell, ns: u64) -> CellResult {
    fixture::passed(cell, &native(), vec![ns; 300])
}

/// A change of exactly the margin (1.5x slower, or 1.5x faster, with min_change 0.5 and a
/// noiseless baseline) is not flagged; beyond it, it is.
#[test]
fn a_change_of_exactly_the_margin_is_unchanged() {
    let cell = &cells()[0];
    let judged = |base_ns: u64, current_ns: u64| {
        let base = baseline_of(&[constant(cell, base_ns)]);
        let v = judge(
            &[constant(cell, current_ns)],
            Some(&base),
            RegressionPolicy::default(),
        );
        let c = &v.cells[0];
        let change = c.change.unwrap();
        assert_eq!(change.margin, 0.5, "{change:?}");
        assert!(change.p_value < 1e-6, "{change:?}");
        (c.verdict, change)
    };
    let (verdict, change) = judged(1000, 1500);
    assert_eq!((change.ci_low, change.ci_high), (1.5, 1.5));
    assert_eq!(verdict, Verdict::Unchanged, "{change:?}");
    assert_eq!(judged(1000, 1501).0, Verdict::Regressed);
    let (verdict, change) = judged(1500, 1000);
    assert_eq!(change.ci_high, 1.0 / 1.5);
    assert_eq!(verdict, Verdict::Unchanged, "{change:?}");
    assert_eq!(judged(1501, 1000).0, Verdict::Improved);
    // 20 % faster, significant but within the margin.
    let (verdict, change) = judged(1000, 800);
    assert_eq!((verdict, change.ci_high), (Verdict::Unchanged, 0.8));
}

/// Fewer than MIN_BATCHES batch medians on either side support no verdict; exactly that
/// many do.
#[test]
fn too_few_samples_on_either_side_are_not_judged() {
    let cell = &cells()[0];
    let few = |ns: u64, n: usize| fixture::passed(cell, &native(), vec![ns; n]);
    let judged = |base: CellResult, current: CellResult| {
        let base = baseline_of(&[base]);
        judge(&[current], Some(&base), RegressionPolicy::default()).cells[0].clone()
    };
    for (base, current) in [
        (few(1000, 300), few(3000, 4)),
        (few(1000, 4), few(3000, 300)),
        (few(1000, 4), few(3000, 4)),
    ] {
        let v = judged(base, current);
        assert_eq!(v.verdict, Verdict::Unchanged);
        assert!(v.change.is_none());
        assert!(
            v.notes[0].starts_with("too few samples to judge"),
            "{:?}",
            v.notes
        );
    }
    let v = judged(few(1000, 5), few(3000, 5));
    assert!(v.notes.is_empty(), "{:?}", v.notes);
    assert_eq!(v.verdict, Verdict::Regressed, "{:?}", v.change);
}

/// The CPU pressure bar: exactly 0.3 (the baseline's own 0 plus 0.3) still gates; above
/// it, the verdict only informs.
#[test]
fn a_cell_at_the_pressure_bar_still_gates() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    let mut current = run(&native(), &[80_000, 35_000, 30_000], 2);
    current[0].cpu_pressure = Some(0.3);
    current[1].cpu_pressure = Some(0.300_001);
    let v = judge(&current, Some(&base), RegressionPolicy::default());
    assert!(v.cells[0].gating, "{:?}", v.cells[0].notes);
    assert!(!v.cells[1].gating);
}

/// The machine probe may move by 1.5x either way: a probe 0.8x or 1.5x the baseline's is
/// the same machine; 0.6x or 1.6x is not.
#[test]
fn a_probe_within_1_5x_either_way_is_the_same_machine() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    // The fixture's probe is 150 ns.
    for (probe, same) in [
        (120, true),
        (100, true),
        (225, true),
        (90, false),
        (240, false),
    ] {
        let mut current = run(&native(), &[40_000, 35_000, 30_000], 2);
        current[0].core_to_core_ns = Some(probe);
        let v = judge(&current, Some(&base), RegressionPolicy::default());
        assert_eq!(
            v.cells[0].gating, same,
            "{probe} ns: {:?}",
            v.cells[0].notes
        );
    }
}

#[test]
fn a_run_counts_its_verdicts_and_lists_only_gating_timing_regressions() {
    let base = baseline_of(&run(&native(), &[40_000, 35_000, 30_000], 1));
    // tcp twice as slow, udp twice as fast, local the same.
    let v = judge(
        &run(&native(), &[80_000, 17_500, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    let counts: Vec<usize> = [
        Verdict::Regressed,
        Verdict::Improved,
        Verdict::Unchanged,
        Verdict::New,
        Verdict::Failed,
    ]
    .iter()
    .map(|&verdict| v.count(verdict))
    .collect();
    assert_eq!(counts, [1, 1, 1, 0, 0]);
    let regressed: Vec<&str> = v.timing_regressions().map(|c| c.cell_id.as_str()).collect();
    assert_eq!(regressed, ["echo::tcp::200B"]);
    // The same slowdown on an emulated leg regresses but does not gate: not listed.
    let qemu = fixture::environment("qemu", CPU);
    let v = judge(
        &run(&qemu, &[80_000, 35_000, 30_000], 2),
        Some(&base),
        RegressionPolicy::default(),
    );
    assert_eq!(v.count(Verdict::Regressed), 1);
    assert_eq!(v.timing_regressions().count(), 0);
}
