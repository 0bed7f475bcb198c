//! What the two front doors share: where the matrix and the results are, running a cell
//! and storing its result, and the one-line verdict printed for it; the doors themselves,
//! [`cli`] and [`door`] (nextest); and what a user's binary needs to bring its own stack
//! into them ([`stack_entry`], [`main!`], [`test_main!`]).

mod cell_process;
pub mod cli;
pub mod commit;
pub mod counted_run;
pub mod door;
pub mod error_text;
pub mod exit_guard;
pub mod format;
mod plugin_probe;
pub mod progress;
pub mod project;
pub mod reporting;
mod run_folder;
pub mod stack_entry;
pub mod term;
mod this_binary;

pub use run_folder::RunFolder;

use ipc_matrix_results::{write_result, CellResult};
use ipc_matrix_scenario::{run_cell, RunOptions};
use ipc_matrix_spec::Cell;
use std::path::{Path, PathBuf};

/// Exit codes of the `ipc-matrix` binary and the test harness.
pub mod exit_code {
    pub const OK: u8 = 0;
    /// At least one cell failed.
    pub const CELL_FAILED: u8 = 1;
    /// Bad command line or matrix file.
    pub const USAGE: u8 = 2;
    /// A cell regressed against its baseline and the run is strict.
    pub const REGRESSED: u8 = 3;
    /// The selection matched no cell.
    pub const NO_CELLS: u8 = 4;
}

/// Checks the `IPC_MATRIX_*` variables before anything runs, printing a line for each
/// problem: a value a variable does not accept is an error naming it (then this returns
/// false, for the caller to exit with [`exit_code::USAGE`]); an unknown name is a warning
/// (a typo would do nothing).
pub fn environment_is_accepted() -> bool {
    let problems = ipc_matrix_results::check_environment();
    let mut refused = false;
    for problem in problems {
        match problem {
            ipc_matrix_results::Problem::Refused(why) => {
                eprintln!("error: {why}");
                refused = true;
            }
            ipc_matrix_results::Problem::Unknown(why) => eprintln!("warning: {why}"),
        }
    }
    !refused
}

/// Where results go unless told otherwise: `<target dir>/ipc-matrix`.
pub fn default_out_dir(workspace: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("ipc-matrix")
}

/// What happened to a cell's result file.
pub enum Stored {
    At(PathBuf),
    /// Unoptimized builds measure the compiler's debug code, not the transport.
    NotOptimized,
    Failed(std::io::Error),
}

/// Removes what crashed runs left in /dev/shm and the temporary directory, and the
/// network namespaces and veth links of netns cells, once per process; returns the
/// removed paths the first time, nothing after.
pub fn remove_stale_artifacts_once() -> Vec<PathBuf> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let mut removed = Vec::new();
    SWEPT.call_once(|| {
        removed = ipc_matrix_transport::remove_stale_artifacts().paths;
        removed.extend(ipc_matrix_scenario::remove_stale_links());
    });
    removed
}

/// Runs one cell and stores its result (passed or failed: a failure is a result too).
pub fn run_and_store(cell: &Cell, options: &RunOptions, out: &Path) -> (CellResult, Stored) {
    remove_stale_artifacts_once();
    stored(run_cell(cell, options), out)
}

/// [`run_and_store`], the cells of a stack in a shared library each in a process of its
/// own (`cell_process`), as `ipc-matrix run` and the nextest door run them: the library's
/// code runs in the measuring process, and a crash, a stall or an exit there (whatever
/// its status) is then the cell's, told by the missing result, not the run's.
pub(crate) fn run_and_store_isolating_plugins(
    cell: &Cell,
    options: &RunOptions,
    out: &Path,
) -> (CellResult, Stored) {
    remove_stale_artifacts_once();
    // A fault (the harness's own trials) is not passed to a child: such a cell runs here.
    let result = if options.fault.is_none() && cell_process::needs_own_process(cell) {
        cell_process::run_in_own_process(cell, options)
    } else {
        run_cell(cell, options)
    };
    stored(result, out)
}

/// `result`, stored when it is an optimized build's.
fn stored(result: CellResult, out: &Path) -> (CellResult, Stored) {
    let stored = if result.environment.is_optimized() {
        match write_result(out, &result) {
            Ok(path) => Stored::At(path),
            Err(e) => Stored::Failed(e),
        }
    } else {
        Stored::NotOptimized
    };
    (result, stored)
}
