//! `ipc-matrix`: run the matrix from the command line, with a progress bar and a summary.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use ipc_matrix::format::{summary_table, verdict_line};
use ipc_matrix::{default_out_dir, exit_code, run_and_store, Stored};
use ipc_matrix_scenario::RunOptions;
use ipc_matrix_spec::{Cell, Spec};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ipc-matrix",
    version,
    about = "Cross-architecture test matrix for inter-process communication",
    long_about = "Runs the echo cells declared in matrix.yaml: each cell starts a peer process, \
echoes deterministic payloads over one transport (shared memory, local socket, TCP, UDP), \
checks every reply byte for byte, and records round-trip percentiles as JSON under \
<out>/<target-triple>@<runner>/cells/."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the cells of a profile and print a summary; exits 1 if any cell fails.
    Run {
        #[command(flatten)]
        selection: Selection,
        /// Folder for results; default: <target dir>/ipc-matrix.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Stop at the first failing cell.
        #[arg(long)]
        fail_fast: bool,
    },
    /// List the cells a profile and filter select, one per line.
    List {
        #[command(flatten)]
        selection: Selection,
    },
    /// Print the legs (targets) of matrix.yaml; with --github, as the JSON job matrix the
    /// GitHub workflow reads with fromJSON.
    Matrix {
        /// The matrix file.
        #[arg(long, value_name = "FILE", default_value = "matrix.yaml")]
        matrix: PathBuf,
        /// Print one line of JSON: {"include": [{target, runner, os, blocks_merge, leg}]}.
        #[arg(long)]
        github: bool,
    },
}

#[derive(clap::Args)]
struct Selection {
    /// The matrix file.
    #[arg(long, value_name = "FILE", default_value = "matrix.yaml")]
    matrix: PathBuf,
    /// Profile of matrix.yaml to expand (e.g. quick, full).
    #[arg(long, default_value = "quick")]
    profile: String,
    /// Keep cells whose id contains EXPR, or matches it when written /regex/; repeatable
    /// (a cell is kept if any filter matches).
    #[arg(long, value_name = "EXPR")]
    filter: Vec<String>,
}

impl Selection {
    fn cells(&self) -> Result<Vec<Cell>> {
        let spec = Spec::load(&self.matrix).map_err(|e| anyhow::anyhow!("{e}"))?;
        let cells = spec.cells(&self.profile).map_err(anyhow::Error::msg)?;
        let filters = self
            .filter
            .iter()
            .map(
                |f| match f.strip_prefix('/').and_then(|f| f.strip_suffix('/')) {
                    Some(re) => regex::Regex::new(re)
                        .map(Filter::Regex)
                        .with_context(|| format!("--filter {f}: not a valid regular expression")),
                    None => Ok(Filter::Contains(f.clone())),
                },
            )
            .collect::<Result<Vec<_>>>()?;
        let selected: Vec<Cell> = cells
            .into_iter()
            .filter(|c| filters.is_empty() || filters.iter().any(|f| f.matches(&c.id)))
            .collect();
        if selected.is_empty() {
            return Err(NoCells(format!(
                "no cell of profile `{}` matches {:?}; `ipc-matrix list --profile {}` shows them",
                self.profile, self.filter, self.profile
            ))
            .into());
        }
        Ok(selected)
    }
}

/// An empty selection: its own error, so that it gets its own exit code.
#[derive(Debug)]
struct NoCells(String);

impl std::fmt::Display for NoCells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoCells {}

enum Filter {
    Contains(String),
    Regex(regex::Regex),
}

impl Filter {
    fn matches(&self, id: &str) -> bool {
        match self {
            Filter::Contains(s) => id.contains(s.as_str()),
            Filter::Regex(re) => re.is_match(id),
        }
    }
}

fn main() -> ExitCode {
    ipc_matrix_scenario::serve_if_requested();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::List { selection } => selection.cells().map(|cells| {
            for cell in cells {
                println!("{}", cell.id);
            }
            exit_code::OK
        }),
        Command::Matrix { matrix, github } => legs(&matrix, github),
        Command::Run {
            selection,
            out,
            fail_fast,
        } => selection.cells().and_then(|cells| {
            let out = out.unwrap_or_else(|| default_out_dir(Path::new(".")));
            run(&cells, &out, fail_fast)
        }),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(if e.is::<NoCells>() {
                exit_code::NO_CELLS
            } else {
                exit_code::USAGE
            })
        }
    }
}

fn legs(matrix: &Path, github: bool) -> Result<u8> {
    let spec = Spec::load(matrix).map_err(|e| anyhow::anyhow!("{e}"))?;
    let jobs = ipc_matrix::github::job_matrix(&spec).map_err(anyhow::Error::msg)?;
    if github {
        println!("{jobs}");
    } else {
        for job in jobs["include"].as_array().into_iter().flatten() {
            println!(
                "{}  blocks merge: {}  GitHub runner: {}",
                job["leg"].as_str().unwrap_or_default(),
                job["blocks_merge"],
                job["os"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(exit_code::OK)
}

fn run(cells: &[Cell], out: &Path, fail_fast: bool) -> Result<u8> {
    let progress = if std::io::stdout().is_terminal() {
        let bar = ProgressBar::new(cells.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    for path in ipc_matrix::remove_stale_artifacts_once() {
        println!("removed a leftover of a crashed run: {}", path.display());
    }
    let options = RunOptions::from_env().map_err(anyhow::Error::msg)?;
    let mut results = Vec::new();
    let mut not_stored = 0;
    for cell in cells {
        progress.set_message(cell.id.clone());
        let (result, stored) = run_and_store(cell, &options, out);
        let line = verdict_line(&result);
        match stored {
            Stored::At(_) => {}
            Stored::NotOptimized => not_stored += 1,
            Stored::Failed(e) => {
                eprintln!("warning: the result of {} was not stored: {e}", cell.id)
            }
        }
        if progress.is_hidden() {
            println!("{line}");
        } else {
            progress.println(line);
        }
        progress.inc(1);
        let failed = !result.outcome.passed;
        results.push(result);
        if failed && fail_fast {
            break;
        }
    }
    progress.finish_and_clear();

    println!("{}", summary_table(&results));
    let failed = results.iter().filter(|r| !r.outcome.passed).count();
    let run_dir = results
        .first()
        .map(|r| ipc_matrix_results::run_dir(out, &r.leg, &r.cell.profile))
        .unwrap_or_default();
    if not_stored > 0 {
        println!(
            "note: this is an unoptimized build; its {not_stored} results were not stored. \
             Build with --release to keep timings."
        );
    } else {
        println!("results: {}", run_dir.join("cells").display());
    }
    println!(
        "{} cells: {} passed, {failed} failed{}",
        results.len(),
        results.len() - failed,
        if results.len() < cells.len() {
            format!(", {} not run (--fail-fast)", cells.len() - results.len())
        } else {
            String::new()
        }
    );
    Ok(if failed > 0 {
        exit_code::CELL_FAILED
    } else {
        exit_code::OK
    })
}
