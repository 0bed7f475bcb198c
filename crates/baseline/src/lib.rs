//! Baselines and verdicts: what a leg's timings were when last accepted
//! (`baselines/<leg>/<profile>.json`), and whether a run is faster, slower or the same,
//! decided so that the noise of a shared machine does not raise false alarms.
//!
//! Layers, each module using only those below it: `stats` (medians, spreads, tests) and
//! `machine` (whether the machine was in the same state); `file` (the baseline on disk);
//! `verdict` (a run judged against it); `accept` (a run made the new baseline).

mod accept;
mod file;
mod machine;
pub mod stats;
mod verdict;

pub use accept::{accept, AcceptError, AcceptMode, Accepted, NotRunFate, Refusal, RefusalReason};
pub use file::{
    baseline_path, Baseline, BaselineCell, BaselineError, BaselineRun, BASELINE_FORMAT_VERSION,
    MAX_BATCHES, MAX_CELLS, MAX_FILE_BYTES, MAX_RUNS,
};
pub use machine::MACHINE_CHANGE_LIMIT;
pub use verdict::{
    judge, CellVerdict, Change, InstructionVerdict, RunVerdict, Verdict, ALPHA,
    BUSY_MACHINE_PRESSURE, INSTRUCTION_INVARIANCE, INSTRUCTION_MIN_CHANGE,
    INSTRUCTION_NOISE_FACTOR, MIN_BATCHES,
};
