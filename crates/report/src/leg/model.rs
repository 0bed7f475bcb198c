//! The leg's report as every page reads it: its results, judged against its baseline, and
//! what the pages say of them in the same words (the headline, the stability of a cell,
//! the floors, the instruction columns).

use ipc_matrix_baseline::{judge, Baseline, RunVerdict};
use ipc_matrix_results::{CellResult, Floor, MessagePath, BELOW_FLOOR};
use ipc_matrix_spec::RegressionPolicy;
use std::path::PathBuf;

/// A baseline and the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedBaseline {
    pub path: PathBuf,
    pub baseline: Baseline,
}

/// One leg's results for one profile, judged against its baseline.
#[derive(Debug, Clone)]
pub struct LegReport {
    pub results: Vec<CellResult>,
    pub verdict: RunVerdict,
    pub baseline: Option<LoadedBaseline>,
    pub generated_at_unix: u64,
    /// Result files of other runs found beside this run's, and left out.
    pub other_runs: usize,
    /// Result files of another result schema found beside this run's, and left out.
    pub other_schema: usize,
    /// The commit the run was made from, where known (history orders runs by it).
    pub commit: Option<String>,
}

impl LegReport {
    pub fn new(
        results: Vec<CellResult>,
        baseline: Option<LoadedBaseline>,
        policy: RegressionPolicy,
        generated_at_unix: u64,
    ) -> Self {
        let verdict = judge(&results, baseline.as_ref().map(|b| &b.baseline), policy);
        Self {
            results,
            verdict,
            baseline,
            generated_at_unix,
            other_runs: 0,
            other_schema: 0,
            commit: None,
        }
    }
}

/// What is said of result files of another schema, after their number.
pub const OTHER_SCHEMA_NOTE: &str = "results of another result schema (an older build) in the folder were left out; re-run their cells to judge them.";

/// The two sentences every report opens with: `9 cells: 9 passed, 0 failed.` and
/// `Against the baseline: 2 regressed, 0 improved, 7 unchanged, 0 new.`
pub fn headline(report: &LegReport) -> (String, String) {
    let passed = report.results.iter().filter(|r| r.outcome.passed).count();
    let verdict = &report.verdict;
    let run = report.results.first().map_or("", |r| r.run_id.as_str());
    let mut others = match report.other_runs {
        0 => String::new(),
        n => format!(" {n} results of other runs in the folder were not judged."),
    };
    if report.other_schema > 0 {
        others.push_str(&format!(" {} {}", report.other_schema, OTHER_SCHEMA_NOTE));
    }
    (
        format!(
            "Run {run}: {} cells: {passed} passed, {} failed.{others}",
            report.results.len(),
            report.results.len() - passed
        ),
        format!(
            "Against the baseline: {}, {} improved, {} unchanged, {} new.",
            regressed_text(verdict),
            verdict.count(ipc_matrix_baseline::Verdict::Improved),
            verdict.count(ipc_matrix_baseline::Verdict::Unchanged),
            verdict.count(ipc_matrix_baseline::Verdict::New),
        ),
    )
}

/// `3 regressed (1 only informational)`: regressions that warn, told apart from those
/// that only inform (an emulated leg, a machine that changed).
pub fn regressed_text(verdict: &ipc_matrix_baseline::RunVerdict) -> String {
    let all = verdict.count(ipc_matrix_baseline::Verdict::Regressed);
    let informing = all.saturating_sub(verdict.timing_regressions().count());
    let timing = match informing {
        0 => format!("{all} regressed"),
        n => format!("{all} regressed ({n} only informational)"),
    };
    let uncounted = verdict.uncounted().count();
    match (
        verdict.instruction_regressions().count() - uncounted,
        uncounted,
    ) {
        (0, 0) => timing,
        (n, 0) => format!("{timing}, {n} regressed in instructions"),
        (0, m) => format!("{timing}, {m} not counted where the baseline has counts"),
        (n, m) => format!(
            "{timing}, {n} regressed in instructions, {m} not counted where the baseline has counts"
        ),
    }
}

/// Runs at least this long get a stability row: drift and jitter over the run.
pub const STABILITY_MIN_SAMPLES: usize = 5000;

/// How a long run held up: the median of its first and last tenth (drift), and its tail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stability {
    pub first_tenth_p50_ns: u64,
    pub last_tenth_p50_ns: u64,
    /// last / first: above 1, the run slowed down as it went.
    pub drift: f64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// p99 / p50: how far the slow tail reaches.
    pub p99_over_p50: f64,
}

pub fn stability(samples: &[u64]) -> Option<Stability> {
    if samples.len() < STABILITY_MIN_SAMPLES {
        return None;
    }
    let tenth = samples.len() / 10;
    let median = ipc_matrix_baseline::stats::median;
    let first = median(&samples[..tenth]);
    let last = median(&samples[samples.len() - tenth..]);
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = |q: f64| sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)];
    Some(Stability {
        first_tenth_p50_ns: first,
        last_tenth_p50_ns: last,
        drift: last as f64 / first.max(1) as f64,
        p999_ns: rank(0.999),
        max_ns: sorted[sorted.len() - 1],
        p99_over_p50: rank(0.99) as f64 / rank(0.5).max(1) as f64,
    })
}

/// The `codec` cells, for the serialization section of a report.
pub fn codec_results(report: &LegReport) -> Vec<&CellResult> {
    report
        .results
        .iter()
        .filter(|r| matches!(r.cell.work, ipc_matrix_spec::Work::Codec(_)))
        .collect()
}

/// The fan-out and fan-in cells.
pub fn fan_results(report: &LegReport) -> Vec<&CellResult> {
    use ipc_matrix_spec::Work::{FanIn, FanOut};
    report
        .results
        .iter()
        .filter(|r| matches!(r.cell.work, FanOut(_) | FanIn(_)))
        .collect()
}

/// The transport as cell ids name it: `shm-busy`, `tcp`, ...
pub fn transport_label(result: &CellResult) -> String {
    result.cell.transport_label()
}

/// A counted cell's guest instructions per round trip (`1329`), the verdict on them
/// (`unchanged 1.000x`, `regressed 1.155x (informational)`), and whether that verdict is a
/// gating regression; dashes for a cell that was not counted.
pub fn instruction_columns(cell: &ipc_matrix_baseline::CellVerdict) -> (String, String, bool) {
    let Some(i) = &cell.instructions else {
        return match cell.count_missing() {
            true => ("-".into(), "not counted".into(), true),
            false => ("-".into(), "-".into(), false),
        };
    };
    let ratio = i.ratio.map_or(String::new(), |r| format!(" {r:.3}x"));
    let inform = if i.gating { "" } else { " (informational)" };
    (
        format!("{:.0}", i.current),
        format!("{}{ratio}{inform}", i.verdict.as_str()),
        cell.instructions_regressed(),
    )
}

/// What a floor is, in two sentences, for every report that shows ratios to floors.
pub const FLOORS_EXPLAINED: &str = "A floor is the simplest exchange of a cell's payload between the cell's two CPUs that its transport could possibly do (for shared memory, two threads handing the payload over through shared buffers, spinning or asleep on a futex, the responder copying it straight from the request's buffer into the reply's, a long payload streamed in 1 MiB chunks that come back while later ones are still being written; for sockets and pipes, one write and one read each way), timed on the same CPUs with the same payload and as many round trips; in a run, in up to ten blocks between blocks of the cell's own (a busy-polling peer, which would spin on the CPU the probe needs, stopped meanwhile). A cell's ratio is its median round trip over its floor's: 1.00x is what the machine allows, and everything above it is the transport, its framing and the harness.";

/// The cells of a report that have a floor, with it.
pub(crate) fn floor_rows(report: &LegReport) -> Vec<(&CellResult, Floor)> {
    report
        .results
        .iter()
        .filter_map(|r| r.floor.map(|f| (r, f)))
        .collect()
}

/// Why a cell ran faster than its floor, for a ratio under [`BELOW_FLOOR`]; `None` otherwise.
pub(crate) fn below_floor(result: &CellResult, floor: &Floor) -> Option<String> {
    let ratio = floor.ratio.filter(|&r| r < BELOW_FLOOR)?;
    if result.message_path == Some(MessagePath::Loaned) {
        return Some(format!(
            "{} ran at {ratio:.2}x its {} floor: its bytes go by the transport's loans (each request written once into the transport's memory, each reply checked where it lies, the peer writing each request straight into its reply's loan), while the floor's probe copies every message in and out of its buffers on both sides. A zero-copy stack may beat a copying floor, by the copies it avoids.",
            result.cell.id, floor.probe
        ));
    }
    let probes = match (result.core_to_core_ns, result.core_to_core_after_ns) {
        (Some(before), Some(after)) => format!(
            "a cache line took {before} ns between the CPUs before the cell and {after} ns after it"
        ),
        _ => "the machine probe was not taken".to_string(),
    };
    Some(format!(
        "{} ran at {ratio:.2}x its {} floor, faster than the exchange its probe times. The floor is timed by two threads of one process, {when}: the machine may have changed in between ({probes}), or the probe's path through the kernel differs from the transport's (a blocking wake that finds the other CPU still polling is faster than one that must interrupt it).",
        result.cell.id,
        floor.probe,
        when = match floor.blocks {
            1 => "just before the cell".to_string(),
            n => format!("in {n} blocks between the cell's own round trips"),
        }
    ))
}

/// `62-67 ns`, or `not taken` (unpinned, or emulated too slowly).
pub(crate) fn probe_range(report: &LegReport) -> String {
    let probes = report.results.iter().filter_map(|r| r.core_to_core_ns);
    match (probes.clone().min(), probes.max()) {
        (Some(low), Some(high)) if low == high => format!("{low} ns"),
        (Some(low), Some(high)) => format!("{low}-{high} ns"),
        _ => "not taken".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc_matrix_results::{fixture, FloorProbe};

    /// A loaned cell under its copying floor is explained by the copies it avoids; a
    /// copying one by the machine or the probe's path.
    #[test]
    fn a_cell_under_its_floor_is_explained_by_how_its_bytes_moved() {
        let cells = fixture::quick_cells(
            "  - { name: bulk, kind: bulk, transports: [iceoryx2], wake: [busy-poll], payloads: [1MB], iterations: 10, timeout: 1s }",
        );
        let environment = fixture::environment("native", "test CPU");
        let mut result = fixture::passed(&cells[0], &environment, vec![50_000; 10]);
        let floor = Floor {
            probe: FloorProbe::Spin,
            payload_bytes: 1_000_000,
            p50_ns: 70_000,
            round_trips: 10,
            ratio: Some(0.72),
            blocks: 1,
        };
        result.message_path = Some(MessagePath::Loaned);
        let loaned = below_floor(&result, &floor).unwrap();
        assert!(
            loaned.contains("loans") && loaned.contains("0.72x"),
            "{loaned}"
        );
        result.message_path = Some(MessagePath::Copied);
        let copied = below_floor(&result, &floor).unwrap();
        assert!(
            !copied.contains("loans") && copied.contains("machine may have changed"),
            "{copied}"
        );
        let at_floor = Floor {
            ratio: Some(1.2),
            ..floor
        };
        assert_eq!(below_floor(&result, &at_floor), None);
    }
}
