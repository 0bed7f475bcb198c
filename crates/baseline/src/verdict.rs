//! Current run vs baseline, per cell: improved, unchanged or regressed, with the ratio of
//! median round trips and how sure we are of it.
//!
//! A cell is called regressed only when both hold:
//! - the Mann-Whitney test finds the two samples of batch medians different at p < 0.01;
//! - the whole 95 % bootstrap interval of the ratio lies above 1 + margin, where the
//!   margin is the profile's `min_change` or, for a noisier cell, its noise: three
//!   standard deviations of the movement between the baseline's accepted runs (how far
//!   unchanged code moves from run to run here), or, while the baseline holds a single
//!   run, twice the relative interquartile spread of that run's batch medians.
//!
//! Improved mirrors it below 1 / (1 + margin). Anything else is unchanged: a run-to-run
//! wobble on a shared machine is neither. The margin exists because batches within one
//! run do not see the run-to-run variation (another tenant, CPU frequency); with the
//! processes pinned, medians of unchanged small-message runs moved by up to 1.7x here
//! in a noisy hour, and a 1 MB local-socket echo flips between two modes (180 us and
//! 380 us) from run to run. A baseline accepted from several runs
//! (`ipc-matrix baseline accept --append`) measures that movement instead of guessing it.

use crate::file::{Baseline, BaselineCell};
use crate::machine::same_machine_state;
use crate::stats::{batch_medians, bootstrap_ratio_interval, mann_whitney_p, median, seed_of};
use ipc_matrix_results::{CellResult, InstructionCounts};
use ipc_matrix_spec::RegressionPolicy;
use serde::Serialize;

/// Significance level of the Mann-Whitney test.
pub const ALPHA: f64 = 0.01;
/// A noisy cell's margin, in units of the relative interquartile spread of its batch
/// medians within one accepted run (2 IQR is about 2.7 sigma of a normal sample).
pub const NOISE_MARGIN_FACTOR: f64 = 2.0;
/// Above this share of a cell's time with some task waiting for a CPU (more than its
/// baseline shows, by this much), other work was competing with the cell and its verdict
/// only informs. Quiet cells here read 0-0.15; with a compile running next to them,
/// 0.5-0.9; fan cells, which run three processes on two CPUs, 0.3-0.95 on their own.
pub const BUSY_MACHINE_PRESSURE: f64 = 0.3;
/// Fewer batch medians than this on either side cannot support a verdict.
pub const MIN_BATCHES: usize = 5;
/// The smallest change in instructions per round trip worth a verdict: counts of one
/// cell repeat within 0.5 % here, so 1 % is above their noise and far below timing's.
pub const INSTRUCTION_MIN_CHANGE: f64 = 0.01;
/// A cell whose accepted counts spread wider gets this many times their relative range as
/// its margin.
pub const INSTRUCTION_NOISE_FACTOR: f64 = 3.0;
/// Accepted counts of one cell that differ by more than this (relative to their median)
/// moved with something besides the code: the baseline's runs are made under
/// perturbations (another path length, a larger environment, CPU hogs), and a count that
/// moves under any of them depends on the process's incidental state or on timing, so it
/// only informs. A cell that gates counts the same to the last instruction under them:
/// the limit only absorbs the rounding of a mean over thousands of windows (the book's
/// instruction-counts page says which cells move, and why).
/// `report --same-counts-as` holds a second count of a gating cell to this limit too (or
/// to its accepted runs' noise, when wider).
pub const INSTRUCTION_INVARIANCE: f64 = 0.000_001;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Improved,
    Unchanged,
    Regressed,
    /// The baseline has no such cell.
    New,
    /// The cell failed; it has no timing to compare.
    Failed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Unchanged => "unchanged",
            Verdict::Regressed => "regressed",
            Verdict::New => "new",
            Verdict::Failed => "failed",
        }
    }
}

/// How large a change is and how sure we are of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// median(current) / median(baseline) of the batch medians; 2.0 = twice as slow.
    pub ratio: f64,
    /// The 95 % bootstrap interval of the ratio.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Two-sided Mann-Whitney p-value.
    pub p_value: f64,
    /// The ratio must clear 1 + margin (or fall under 1 / (1 + margin)) to count.
    pub margin: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellVerdict {
    pub cell_id: String,
    pub verdict: Verdict,
    pub change: Option<Change>,
    pub baseline_p50_ns: Option<u64>,
    pub current_p50_ns: Option<u64>,
    /// False when this verdict only informs (an emulated leg, a baseline from another CPU,
    /// another CPU placement, a machine probe that moved): such a regression never warns
    /// or fails.
    pub gating: bool,
    /// What a reader should know, e.g. "peer slowed by 50 us on purpose".
    pub notes: Vec<String>,
    /// The verdict on guest instructions per round trip, when the cell was counted.
    pub instructions: Option<InstructionVerdict>,
    /// Why a passing cell whose baseline has instruction counts has none in this run: no
    /// count is not a pass, so this gates as an instruction regression does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncounted: Option<String>,
}

/// Guest instructions per round trip (both sides) against the baseline's. The count does
/// not depend on the host, its load or its CPU model, so it gates where timing only
/// informs: on emulated legs, on other CPUs, on a busy machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstructionVerdict {
    pub verdict: Verdict,
    pub current: f64,
    /// The median over the baseline's accepted runs.
    pub baseline: Option<f64>,
    /// current / baseline.
    pub ratio: Option<f64>,
    /// The ratio must clear 1 + margin (or fall under 1 - margin) to count.
    pub margin: f64,
    /// False when the count depends on timing (a spun delay, a lossy
    /// transport) or the emulated CPU model differs from the baseline's.
    pub gating: bool,
}

impl CellVerdict {
    /// The instruction count regressed, and that gates.
    pub fn instructions_regressed(&self) -> bool {
        self.instructions
            .as_ref()
            .is_some_and(|i| i.gating && i.verdict == Verdict::Regressed)
    }

    /// The baseline has instruction counts and this passing run has none.
    pub fn count_missing(&self) -> bool {
        self.uncounted.is_some()
    }

    /// What fails an instruction gate: a regressed count, or a missing one.
    pub fn fails_instruction_gate(&self) -> bool {
        self.instructions_regressed() || self.count_missing()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunVerdict {
    pub leg: String,
    pub profile: String,
    /// Why no verdict of this run gates, when none does.
    pub informational: Option<String>,
    pub cells: Vec<CellVerdict>,
    /// Cells in the baseline that this run did not produce.
    pub not_run: Vec<String>,
}

impl RunVerdict {
    /// Regressions that warn (or, under --strict, fail): in time where timing gates, and
    /// in instructions wherever the count gates.
    pub fn gating_regressions(&self) -> impl Iterator<Item = &CellVerdict> {
        self.cells
            .iter()
            .filter(|c| (c.gating && c.verdict == Verdict::Regressed) || c.fails_instruction_gate())
    }

    /// Cells whose round-trip time regressed and gates.
    pub fn timing_regressions(&self) -> impl Iterator<Item = &CellVerdict> {
        self.cells
            .iter()
            .filter(|c| c.gating && c.verdict == Verdict::Regressed)
    }

    /// Cells whose instruction count regressed and gates, or is missing where the
    /// baseline has one.
    pub fn instruction_regressions(&self) -> impl Iterator<Item = &CellVerdict> {
        self.cells.iter().filter(|c| c.fails_instruction_gate())
    }

    /// Cells whose baseline has instruction counts and whose passing run has none.
    pub fn uncounted(&self) -> impl Iterator<Item = &CellVerdict> {
        self.cells.iter().filter(|c| c.count_missing())
    }

    pub fn count(&self, verdict: Verdict) -> usize {
        self.cells.iter().filter(|c| c.verdict == verdict).count()
    }
}

/// Judges every result against `baseline` (which may be absent: every cell is then new).
pub fn judge(
    results: &[CellResult],
    baseline: Option<&Baseline>,
    policy: RegressionPolicy,
) -> RunVerdict {
    let (leg, profile) = results
        .first()
        .map(|r| (r.leg.clone(), r.cell.profile.clone()))
        .or_else(|| baseline.map(|b| (b.leg.clone(), b.profile.clone())))
        .unwrap_or_default();
    let informational = run_wide_reason(results, baseline);
    let reaccept = match leg.ends_with("@qemu") {
        // A counted baseline is made of runs under perturbations (see
        // INSTRUCTION_INVARIANCE); the script makes them.
        true => format!(
            "ipc-matrix baseline accept --leg {leg} --profile {profile}`, or in this repository `scripts/accept-baseline.sh 3 {leg}"
        ),
        false => format!("ipc-matrix baseline accept --leg {leg} --profile {profile}"),
    };
    let cells = results
        .iter()
        .map(|result| {
            let mut verdict = judge_cell(result, baseline, policy, &reaccept);
            verdict.gating &= informational.is_none();
            verdict
        })
        .collect();
    let not_run = baseline
        .map(|b| {
            b.cells
                .keys()
                .filter(|id| !results.iter().any(|r| &r.cell.id == *id))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    RunVerdict {
        leg,
        profile,
        informational,
        cells,
        not_run,
    }
}

fn run_wide_reason(results: &[CellResult], baseline: Option<&Baseline>) -> Option<String> {
    let current = &results.first()?.environment;
    if current.runner != "native" {
        return Some(format!(
            "emulated leg ({}): its timings measure the emulator, so its verdicts only inform",
            current.runner
        ));
    }
    let baseline = baseline?;
    let then = &baseline.environment;
    if (then.opt_level.as_str(), then.debug_assertions)
        != (current.opt_level.as_str(), current.debug_assertions)
    {
        return Some(format!(
            "the baseline was built differently (opt-level {}, debug assertions {}; this run: opt-level {}, debug assertions {}), so its verdicts only inform",
            then.opt_level, then.debug_assertions, current.opt_level, current.debug_assertions
        ));
    }
    if baseline.environment.cpu_model != current.cpu_model {
        return Some(format!(
            "the baseline was measured on another CPU ({}; this run: {}), so its verdicts only inform",
            baseline.environment.cpu_model, current.cpu_model
        ));
    }
    None
}

fn judge_cell(
    result: &CellResult,
    baseline: Option<&Baseline>,
    policy: RegressionPolicy,
    reaccept: &str,
) -> CellVerdict {
    let mut verdict = CellVerdict {
        cell_id: result.cell.id.clone(),
        verdict: Verdict::New,
        change: None,
        baseline_p50_ns: None,
        current_p50_ns: result.latency_ns.map(|l| l.p50),
        gating: true,
        notes: Vec::new(),
        instructions: None,
        uncounted: None,
    };
    if let Some(units) = result.peer_extra_work {
        verdict.notes.push(format!(
            "peer did {units} units of extra work per reply on purpose"
        ));
    }
    if let Some(us) = result.peer_delay_us {
        verdict
            .notes
            .push(format!("peer slowed by {us} us per reply on purpose"));
    }
    if let Some(unseen) = &result.goodbye {
        verdict.notes.push(unseen.clone());
    }
    let base = baseline.and_then(|b| b.cells.get(&result.cell.id));
    if result.outcome.passed {
        let compiled_by = baseline.map(|b| b.environment.rustc.as_str());
        verdict.instructions =
            judge_instructions(result, base, compiled_by, reaccept, &mut verdict.notes);
        let peered = result.cell.kind().has_peer();
        let base_counted = base.is_some_and(|b| {
            b.runs.iter().any(|r| {
                r.instructions
                    .as_ref()
                    .is_some_and(|c| c.total(peered).is_some())
            })
        });
        let counted = result.instructions.as_ref();
        if base_counted && counted.and_then(|c| c.total(peered)).is_none() {
            let why = match (&result.uncounted, counted) {
                (Some(why), _) => format!("not counted: {why}"),
                (None, Some(c)) if c.measuring.is_some() => {
                    "not counted: the peer has no count (its process ran without the counting plugin, or wrote no window)".to_string()
                }
                (None, _) => format!(
                    "not counted: the baseline has instruction counts and this run ({} runner) has none",
                    result.environment.runner
                ),
            };
            verdict.notes.push(why.clone());
            verdict.uncounted = Some(why);
        }
    }
    if let Some(base) = base {
        verdict.baseline_p50_ns = Some(base.median_ns());
        if base.placement != result.placement {
            verdict.gating = false;
            verdict.notes.push(format!(
                "CPU placement differs from the baseline's ({:?} vs {:?})",
                result.placement, base.placement
            ));
        }
        // What the cell causes itself is not interference: the bar sits above it.
        let usual = base.cpu_pressure().unwrap_or(0.0);
        let busy = BUSY_MACHINE_PRESSURE.max(usual + BUSY_MACHINE_PRESSURE);
        if let Some(share) = result.cpu_pressure.filter(|s| *s > busy) {
            verdict.gating = false;
            verdict.notes.push(format!(
                "the machine was busy: some task waited for a CPU during {:.0} % of this cell (Linux pressure stall information)",
                share * 100.0
            ));
        }
        let probes = [
            ("before", result.core_to_core_ns),
            ("after", result.core_to_core_after_ns),
        ];
        if let Some(then) = base.core_to_core_ns() {
            let moved = probes.iter().find_map(|&(when, now)| {
                let now = now?;
                (!same_machine_state(now, then)).then_some((when, now))
            });
            if let Some((when, now)) = moved {
                verdict.gating = false;
                verdict.notes.push(format!(
                    "the machine changed: a cache line took {now} ns between the two CPUs {when} this cell, {then} ns in the baseline"
                ));
            }
        }
    }
    if !result.outcome.passed {
        verdict.verdict = Verdict::Failed;
        return verdict;
    }
    let Some(base) = base else {
        return verdict;
    };
    let current = batch_medians(&result.samples_ns);
    let pooled = base.pooled_batch_medians();
    let baseline = &pooled;
    if current.len() < MIN_BATCHES || baseline.len() < MIN_BATCHES {
        verdict.verdict = Verdict::Unchanged;
        verdict.notes.push(format!(
            "too few samples to judge ({} and {} batch medians; at least {MIN_BATCHES} each)",
            baseline.len(),
            current.len()
        ));
        return verdict;
    }
    // With one accepted run, the cell's spread within it is all that is known of its
    // noise; with more, the movement between runs is measured and says more.
    let noise = match base.typical_runs().len() {
        1 => NOISE_MARGIN_FACTOR * base.within_run_spread(),
        _ => base.run_to_run_noise(),
    };
    let margin = policy.min_change.max(noise);
    let (ci_low, ci_high) = bootstrap_ratio_interval(baseline, &current, seed_of(&result.cell.id));
    let change = Change {
        ratio: median(&current) as f64 / median(baseline).max(1) as f64,
        ci_low,
        ci_high,
        p_value: mann_whitney_p(baseline, &current),
        margin,
    };
    let significant = change.p_value < ALPHA;
    verdict.verdict = if significant && change.ci_low > 1.0 + margin {
        Verdict::Regressed
    } else if significant && change.ci_high < 1.0 / (1.0 + margin) {
        Verdict::Improved
    } else {
        Verdict::Unchanged
    };
    verdict.change = Some(change);
    verdict
}

/// The instruction verdict of a passing, counted cell.
fn judge_instructions(
    result: &CellResult,
    base: Option<&BaselineCell>,
    compiled_by: Option<&str>,
    reaccept: &str,
    notes: &mut Vec<String>,
) -> Option<InstructionVerdict> {
    let counts = result.instructions.as_ref()?;
    let peered = result.cell.kind().has_peer();
    let current = counts.total(peered)?;
    let accepted: Vec<&InstructionCounts> = base
        .map(|b| {
            b.runs
                .iter()
                .filter_map(|r| r.instructions.as_ref())
                .collect()
        })
        .unwrap_or_default();
    let mut totals: Vec<f64> = accepted.iter().filter_map(|c| c.total(peered)).collect();
    totals.sort_by(f64::total_cmp);
    let mut verdict = InstructionVerdict {
        verdict: Verdict::New,
        current,
        baseline: None,
        ratio: None,
        margin: INSTRUCTION_MIN_CHANGE,
        gating: !counts.timing_dependent,
    };
    if counts.timing_dependent {
        notes.push(
            "its instruction count depends on timing (a spun delay, a lossy transport, a stream message over the kernel's buffer, a peer on a second host, or a stack that waits on threads of its own or by readiness), so it only informs".into(),
        );
    }
    let Some(centre) = (!totals.is_empty()).then(|| totals[totals.len() / 2]) else {
        return Some(verdict);
    };
    if let Some(then) = accepted.last().and_then(|c| c.cpu_model.clone()) {
        if counts.cpu_model.as_deref() != Some(then.as_str()) {
            verdict.gating = false;
            notes.push(format!(
                "instructions were counted on another emulated CPU ({}; the baseline: {then}), so they only inform",
                counts.cpu_model.as_deref().unwrap_or("unknown")
            ));
        }
    }
    // Another emulator, plugin or C library counts other code: news, not a regression.
    if let Some(note) = setup_difference(counts, accepted.last().copied(), reaccept) {
        verdict.gating = false;
        notes.push(note);
    }
    // Another compiler emits other code: its counts are news, not a regression of ours.
    if let Some(then) = compiled_by.filter(|then| *then != result.environment.rustc) {
        verdict.gating = false;
        notes.push(format!(
            "compiled by {} (the baseline: {then}), so its instruction count only informs",
            result.environment.rustc
        ));
    }
    let spread = (totals[totals.len() - 1] - totals[0]) / centre.max(1.0);
    verdict.margin = INSTRUCTION_MIN_CHANGE.max(INSTRUCTION_NOISE_FACTOR * spread);
    // Invariance holds each side to the limit on its own: in a total, a side that moved
    // can hide behind the other's count (iceoryx2's peer moved by 0.00017 %, its total by
    // 0.00008 %).
    let side_spread = |side: fn(&InstructionCounts) -> Option<f64>| {
        let counts: Vec<f64> = accepted.iter().filter_map(|c| side(c)).collect();
        let (low, high) = counts
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &c| {
                (l.min(c), h.max(c))
            });
        if counts.is_empty() {
            0.0
        } else {
            (high - low) / low.max(1.0)
        }
    };
    let spread = spread
        .max(side_spread(|c| c.measuring))
        .max(side_spread(|c| c.peer));
    if spread > INSTRUCTION_INVARIANCE && !counts.timing_dependent {
        verdict.gating = false;
        notes.push(format!(
            "its instruction count moved by {:.4} % between the baseline's {} accepted runs (made under perturbations: other path lengths, a larger environment, CPU hogs), so it depends on more than the code and only informs",
            spread * 100.0,
            totals.len()
        ));
    }
    let ratio = current / centre.max(1.0);
    verdict.baseline = Some(centre);
    verdict.ratio = Some(ratio);
    verdict.verdict = if ratio > 1.0 + verdict.margin {
        Verdict::Regressed
    } else if ratio < 1.0 - verdict.margin {
        Verdict::Improved
    } else {
        Verdict::Unchanged
    };
    Some(verdict)
}

/// The note of a count made with another counting setup than its baseline's (or where
/// either has none recorded): it informs, and says how to re-accept.
fn setup_difference(
    now: &InstructionCounts,
    then: Option<&InstructionCounts>,
    reaccept: &str,
) -> Option<String> {
    let then = then?;
    let (now_text, then_text) = match (&now.setup, &then.setup) {
        (Some(a), Some(b)) => a.difference(b)?,
        (None, None) => return None,
        (Some(a), None) => (a.summary(), "a setup it did not record".into()),
        (None, Some(b)) => ("a setup it did not record".into(), b.summary()),
    };
    Some(format!(
        "informational: counted with {now_text}, the baseline with {then_text}; re-accept with `{reaccept}`"
    ))
}
