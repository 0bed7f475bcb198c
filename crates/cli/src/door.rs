//! The nextest door: one test per cell of matrix.yaml (`echo::tcp::200B`), plus fault
//! trials, through libtest-mimic, in a test target with `harness = false`. This
//! repository's own (`crates/cli/tests/matrix.rs`) and a user's (`ipc_matrix::test_main!`)
//! are both this function.
//!
//! Environment: IPC_MATRIX_FILE (default: the nearest matrix.yaml at or above the test
//! crate's folder), IPC_MATRIX_PROFILE (default: quick), IPC_MATRIX_OUT (default:
//! `<target dir>/ipc-matrix`).

pub mod faults;

use crate::{default_out_dir, exit_code, run_and_store_isolating_plugins, RunFolder, Stored};
use ipc_matrix_results::Environment;
use ipc_matrix_scenario::{unmet_need, RunOptions};
use ipc_matrix_spec::Cell;
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Room for a folder compiled into the binary: a path in as many bytes as it has would
/// move every constant after it, and with them the alignments the counted code meets,
/// so that a checkout at another path counted other instructions (one per round trip in
/// most x86_64 cells). In a fixed room, the binary's layout is the same wherever it is
/// built.
pub const COMPILED_PATH_ROOM: usize = 4096;

/// A folder compiled into the binary, in [`COMPILED_PATH_ROOM`] bytes whatever its length:
/// `static DIR: CompiledPath = CompiledPath::new(env!("CARGO_MANIFEST_DIR"));`.
pub struct CompiledPath([u8; COMPILED_PATH_ROOM]);

impl CompiledPath {
    pub const fn new(path: &str) -> Self {
        let bytes = path.as_bytes();
        assert!(
            bytes.len() < COMPILED_PATH_ROOM,
            "a compiled-in path is longer than COMPILED_PATH_ROOM"
        );
        let mut room = [0u8; COMPILED_PATH_ROOM];
        let mut i = 0;
        while i < bytes.len() {
            room[i] = bytes[i];
            i += 1;
        }
        Self(room)
    }

    /// The path (up to its first NUL, which no Unix path holds).
    pub fn as_path(&self) -> &Path {
        use std::os::unix::ffi::OsStrExt;
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        Path::new(std::ffi::OsStr::from_bytes(&self.0[..len]))
    }
}

/// Runs the door of the test crate in `crate_dir` (its `CARGO_MANIFEST_DIR`): serves as a
/// peer when started as one; else one trial per cell of the profile, then `extra`.
pub fn run(crate_dir: &Path, extra: Vec<Trial>) -> ExitCode {
    ipc_matrix_scenario::serve_if_requested();
    crate::cell_process::serve_if_requested();
    crate::plugin_probe::serve_if_requested();
    // A cell's stack runs in this process: its exit(0) must not read as a pass.
    crate::exit_guard::arm();
    crate::exit_guard::run_as_ours(|| run_trials(crate_dir, extra))
}

/// [`run`], once this process is the test binary.
fn run_trials(crate_dir: &Path, extra: Vec<Trial>) -> ExitCode {
    use clap::Parser;
    let args = Arguments::try_parse().unwrap_or_else(|e| {
        let _ = e.print();
        crate::exit_guard::exit(e.exit_code())
    });
    if !crate::environment_is_accepted() {
        return ExitCode::from(exit_code::USAGE);
    }
    // The project is the test crate's: its nearest matrix.yaml's folder, whose target/
    // the results go to, also when IPC_MATRIX_FILE names a matrix elsewhere.
    let own = nearest_matrix(crate_dir);
    let matrix = match env_path("IPC_MATRIX_FILE").or_else(|| own.clone()) {
        Some(file) => file,
        None => {
            eprintln!(
                "error: no matrix.yaml in {} or above it; set IPC_MATRIX_FILE",
                crate_dir.display()
            );
            return ExitCode::from(exit_code::USAGE);
        }
    };
    let home = own.map_or_else(
        || crate_dir.to_path_buf(),
        |m| crate::project::project_root(&m),
    );
    // An external peer's relative command is found from matrix.yaml's folder.
    let project = crate::project::project_root(&matrix);
    let profile = std::env::var("IPC_MATRIX_PROFILE").unwrap_or_else(|_| "quick".into());
    let out = env_path("IPC_MATRIX_OUT").unwrap_or_else(|| default_out_dir(&home));

    let cells =
        match crate::project::load_matrix(&matrix).and_then(|spec| Ok(spec.cells(&profile)?)) {
            Ok(cells) => cells,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(exit_code::USAGE);
            }
        };
    let mut trials: Vec<Trial> = cells
        .into_iter()
        .map(|cell| {
            let (out, project) = (out.clone(), project.clone());
            // A cell this machine cannot run (a second host without CAP_NET_ADMIN) is
            // listed as ignored, saying what it needs: never passed silently.
            let need = unmet_need(&cell);
            let trial = Trial::test(cell.id.clone(), move || {
                run_matrix_cell(&cell, &out, &project)
            });
            match need {
                Some(need) => trial.with_ignored_flag(true).with_kind(need),
                None => trial,
            }
        })
        .collect();
    trials.extend(extra);

    // An empty selection is a mistake in the filter, never a silent pass.
    if !args.list && !args.ignored && !trials.iter().any(|t| selected(&args, t.name())) {
        eprintln!(
            "error: no test matches {:?}; `cargo nextest list` shows them",
            args.filter.as_deref().unwrap_or("")
        );
        return ExitCode::from(exit_code::NO_CELLS);
    }
    libtest_mimic::run(&args, trials).exit_code()
}

/// The nearest matrix.yaml in `dir` or a folder above it.
fn nearest_matrix(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("matrix.yaml"))
        .find(|file| file.is_file())
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key).map(PathBuf::from)
}

fn selected(args: &Arguments, name: &str) -> bool {
    let matches = |f: &str| {
        if args.exact {
            name == f
        } else {
            name.contains(f)
        }
    };
    args.filter.as_deref().is_none_or(matches) && !args.skip.iter().any(|s| matches(s))
}

fn run_matrix_cell(cell: &Cell, out: &Path, project: &Path) -> Result<(), Failed> {
    let options = RunOptions {
        project_dir: project.to_path_buf(),
        ..RunOptions::from_env()?
    };
    // Shared with the other cells of this nextest run; an `ipc-matrix run` writing into
    // the same folder holds it alone, and this cell then fails rather than mix results.
    let leg = Environment::capture().leg();
    let _folder = RunFolder::share(out, &leg, &cell.profile)?;
    // A plugin's cell in a process of its own, as `ipc-matrix run` runs it: its result
    // file is the proof that it ran to its end, which no exit status of the stack's is.
    let (result, stored) = run_and_store_isolating_plugins(cell, &options, out);
    println!("{}", crate::format::verdict_line(&result));
    match stored {
        Stored::At(path) => println!("result: {}", path.display()),
        Stored::NotOptimized => println!("note: unoptimized build; timings not stored"),
        Stored::Failed(e) => return Err(format!("storing the result: {e}").into()),
    }
    match result.outcome.failure {
        None => Ok(()),
        Some(failure) => Err(format!("{}: {}", cell.id, failure.reason).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths of any length take the same room, and come back as they went in.
    #[test]
    fn a_compiled_path_takes_the_same_room_whatever_its_length() {
        static SHORT: CompiledPath = CompiledPath::new("/w");
        static LONG: CompiledPath =
            CompiledPath::new("/tmp/a checkout/at a path of yet another length/crates/cli");
        assert_eq!(std::mem::size_of_val(&SHORT), COMPILED_PATH_ROOM);
        assert_eq!(std::mem::size_of_val(&LONG), COMPILED_PATH_ROOM);
        assert_eq!(SHORT.as_path(), Path::new("/w"));
        assert_eq!(
            LONG.as_path(),
            Path::new("/tmp/a checkout/at a path of yet another length/crates/cli")
        );
    }
}
