//! `ipc-matrix-legs [--matrix FILE]`: the JSON job matrix of the GitHub workflow, one line,
//! the same as `ipc-matrix matrix --github` prints (both call
//! [`ipc_matrix_spec::github::job_matrix`]).
//!
//! It exists so that the workflow's plan job builds this crate only (a YAML parser and
//! serde) instead of the whole `ipc-matrix` binary (libzmq from source, Cap'n Proto, ...).

use ipc_matrix_spec::github::job_matrix;
use ipc_matrix_spec::Spec;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: ipc-matrix-legs [--matrix FILE]   (default: matrix.yaml)";

fn main() -> ExitCode {
    // As the OS gives them: a FILE need not be UTF-8.
    let mut args = std::env::args_os().skip(1);
    let mut matrix = PathBuf::from("matrix.yaml");
    while let Some(arg) = args.next() {
        match arg.to_string_lossy().as_ref() {
            "--matrix" => match args.next() {
                Some(file) => matrix = PathBuf::from(file),
                None => return usage_error("--matrix needs a FILE"),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                return usage_error(&format!("unexpected argument `{}`", other.escape_debug()))
            }
        }
    }
    let printed = match Spec::load(&matrix) {
        Ok(spec) => job_matrix(&spec).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match printed {
        Ok(jobs) => {
            println!("{}", jobs.to_json());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}\n{USAGE}");
    ExitCode::from(2)
}
