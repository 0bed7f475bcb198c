//! What a cell's run leaves behind: one versioned JSON document per cell, in one folder
//! per leg (`<out>/<triple>@<runner>/cells/`), with the environment it came from.
//!
//! Layers, each module using only those below it: `printable` (outside text made safe
//! for terminals); `variables` (the environment variables and what each accepts);
//! `environment` (where a run ran, and its leg's name); `schema` (a cell's result); `store` (results on disk); `fixture`
//! (results made up for other crates' tests).

mod environment;
#[doc(hidden)]
pub mod fixture;
mod printable;
mod schema;
mod store;
mod variables;

pub use environment::{leg_name, Environment, RUNNER_ENV};
pub use printable::printable;
pub use schema::{
    CellResult, CodecStages, CountingSetup, Failure, FailureKind, Floor, FloorProbe, Fragmentation,
    InstructionCounts, LatencyStats, LoadStats, LoggingStats, MessagePath, Outcome, OwnSetup,
    Placement, Throughput, BELOW_FLOOR, MAX_RESULT_FILE_BYTES, MAX_SAMPLES_KEPT,
    RESULT_SCHEMA_VERSION,
};
pub use store::{
    cell_file_name, describe_file_kind, is_leg_name, open_regular, read_bounded, read_results,
    read_run, remove_stale_temporary_files, run_dir, run_id, write_all_or_none, write_atomically,
    write_result, RunResults, NEXTEST_RUN_ID_ENV,
};
pub use variables::{
    check_environment, read_variable, Problem, Variable, VariableError, VARIABLES,
};
