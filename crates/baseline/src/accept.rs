//! Accepting a run as the baseline: which cells the new baseline keeps.
//!
//! - Replacing (the default), the new baseline holds the run's passing, timed cells;
//!   cells of the old baseline the run did not produce are dropped.
//! - Appending, each passing cell's run joins its accepted runs (the last [`MAX_RUNS`]
//!   are kept) and cells the run did not produce keep their entry. Runs from another CPU
//!   model are refused: their spread would be the CPUs', not the noise's.
//! - Either way, a cell that failed or ran with a slowed peer (`peer_delay_us`) says
//!   nothing about its usual timings: it keeps its old entry, or stays out if it had none.
//!
//! [`MAX_RUNS`]: crate::MAX_RUNS

use crate::file::Baseline;
use ipc_matrix_results::CellResult;

/// Replace the baseline with the run, or add the run to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptMode {
    Replace,
    Append,
}

impl AcceptMode {
    /// What becomes of a baseline cell the accepted results do not have.
    pub fn not_run_fate(self) -> NotRunFate {
        match self {
            AcceptMode::Replace => NotRunFate::Dropped,
            AcceptMode::Append => NotRunFate::Kept,
        }
    }
}

/// What becomes of a baseline cell the accepted results do not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRunFate {
    Kept,
    Dropped,
}

impl NotRunFate {
    pub fn as_str(self) -> &'static str {
        match self {
            NotRunFate::Kept => "kept",
            NotRunFate::Dropped => "dropped",
        }
    }
}

/// Why a result is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    Failed,
    /// It passed, but its peer was slowed on purpose.
    SlowedPeer,
    /// It passed uncounted (or its peer did) where the old baseline has its counts:
    /// accepting it would make the next uncounted run pass.
    Uncounted,
    /// Every round trip it timed took 0 ns: a clock that did not run, or a result file
    /// that was not measured. A baseline of it would call every real run a regression.
    NothingMeasured,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Failed => "failed",
            RefusalReason::SlowedPeer => "ran with a slowed peer",
            RefusalReason::Uncounted => "was not counted, and its baseline entry has counts",
            RefusalReason::NothingMeasured => {
                "timed every round trip at 0 ns, which is no measurement"
            }
        }
    }
}

/// A result that was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub cell_id: String,
    pub reason: RefusalReason,
    /// Whether the cell's entry of the old baseline stays in the new one (else the cell
    /// had none and is left out).
    pub kept_old_entry: bool,
}

/// The baseline to write, and how it differs from the old one.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub baseline: Baseline,
    /// Cells the new baseline has and the old one had not, sorted.
    pub added: Vec<String>,
    /// Cells the old baseline had and the new one has not, sorted.
    pub dropped: Vec<String>,
    /// Results not accepted, in the order of the results.
    pub refused: Vec<Refusal>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    #[error("the baseline was measured on {baseline}, these results on {results}; accept without --append to replace it")]
    OtherCpuModel { baseline: String, results: String },
    #[error("no passing cell to accept")]
    NoPassingCell,
}

/// Whether `result` timed round trips and every one of them at 0 ns.
fn measured_nothing(result: &CellResult) -> bool {
    let all_zero_samples =
        !result.samples_ns.is_empty() && result.samples_ns.iter().all(|&ns| ns == 0);
    let zero_latency = result
        .latency_ns
        .as_ref()
        .is_some_and(|l| l.count > 0 && l.max == 0);
    all_zero_samples || zero_latency
}

/// Whether `result` has no count (or no peer count) where `old`'s entry of its cell has.
fn loses_counts(old: Option<&Baseline>, result: &CellResult) -> bool {
    let peered = result.cell.kind().has_peer();
    let counted = |c: &ipc_matrix_results::InstructionCounts| c.total(peered).is_some();
    let had = old
        .and_then(|b| b.cells.get(&result.cell.id))
        .is_some_and(|e| {
            e.runs
                .iter()
                .any(|r| r.instructions.as_ref().is_some_and(counted))
        });
    had && !result.instructions.as_ref().is_some_and(counted)
}

/// The baseline that accepting `results` (one leg and profile) makes of `old`, stamped
/// `accepted_at_unix`. See the module documentation for the rules.
pub fn accept(
    old: Option<&Baseline>,
    results: &[CellResult],
    mode: AcceptMode,
    accepted_at_unix: u64,
) -> Result<Accepted, AcceptError> {
    let (keep, refuse): (Vec<&CellResult>, Vec<&CellResult>) = results.iter().partition(|r| {
        r.outcome.passed
            && r.peer_delay_us.is_none()
            && r.peer_extra_work.is_none()
            && !loses_counts(old, r)
            && !measured_nothing(r)
    });
    let keep: Vec<CellResult> = keep.into_iter().cloned().collect();
    let mut baseline = match old {
        Some(old) if mode == AcceptMode::Append => {
            if let Some(first) = results.first() {
                if old.environment.cpu_model != first.environment.cpu_model {
                    return Err(AcceptError::OtherCpuModel {
                        baseline: old.environment.cpu_model.clone(),
                        results: first.environment.cpu_model.clone(),
                    });
                }
            }
            let mut appended = old.clone();
            appended.add_run(&keep, accepted_at_unix);
            appended
        }
        _ => Baseline::from_results(&keep, accepted_at_unix).ok_or(AcceptError::NoPassingCell)?,
    };
    let mut refused = Vec::new();
    for r in refuse {
        let reason = if !r.outcome.passed {
            RefusalReason::Failed
        } else if loses_counts(old, r) {
            RefusalReason::Uncounted
        } else if measured_nothing(r) {
            RefusalReason::NothingMeasured
        } else {
            RefusalReason::SlowedPeer
        };
        let entry = old.and_then(|b| b.cells.get(&r.cell.id));
        if let Some(entry) = entry {
            baseline.cells.insert(r.cell.id.clone(), entry.clone());
        }
        refused.push(Refusal {
            cell_id: r.cell.id.clone(),
            reason,
            kept_old_entry: entry.is_some(),
        });
    }
    let had = |id: &String| old.is_some_and(|b| b.cells.contains_key(id));
    let added = baseline
        .cells
        .keys()
        .filter(|id| !had(id))
        .cloned()
        .collect();
    let dropped = old
        .map(|b| {
            b.cells
                .keys()
                .filter(|id| !baseline.cells.contains_key(*id))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Ok(Accepted {
        baseline,
        added,
        dropped,
        refused,
    })
}
