//! Baselines and verdicts: what a leg's timings were when last accepted
//! (`baselines/<leg>/<profile>.json`), and whether a run is faster, slower or the same,
//! decided so that the noise of a shared machine does not raise false alarms.

mod accept;
mod file;
pub mod stats;
mod verdict;

pub use accept::{accept, AcceptError, AcceptMode, Accepted, NotRunFate, Refusal, RefusalReason};
pub use file::{
    baseline_path, Baseline, BaselineCell, BaselineError, BaselineRun, BASELINE_FORMAT_VERSION,
    MAX_BATCHES, MAX_CELLS, MAX_FILE_BYTES, MAX_RUNS,
};
pub use verdict::{
    judge, CellVerdict, Change, InstructionVerdict, RunVerdict, Verdict, ALPHA,
    BUSY_MACHINE_PRESSURE, INSTRUCTION_INVARIANCE, INSTRUCTION_MIN_CHANGE,
    INSTRUCTION_NOISE_FACTOR, MACHINE_CHANGE_LIMIT, MIN_BATCHES,
};
