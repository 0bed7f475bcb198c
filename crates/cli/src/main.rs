//! `ipc-matrix`: run the matrix from the command line, with a progress bar and a summary.
//!
//! This file parses the command line and dispatches; each command lives in
//! `commands/<command>.rs`, the argument groups commands share in `args.rs`.

mod args;
mod commands;

use args::{Judging, NoCells, Selection, StoredResults};
use clap::{Parser, Subcommand};
use ipc_matrix::exit_code;
use std::path::PathBuf;
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
        #[command(flatten)]
        judging: Judging,
    },
    /// Write report.md, report.html and results.json for each leg with stored results,
    /// judged against its baseline; with --compare, put result folders side by side.
    Report {
        #[command(flatten)]
        stored: StoredResults,
        #[command(flatten)]
        judging: Judging,
        /// Result folders (`<results>/<leg>/<profile>`) to put side by side, in any order
        /// (shown by architecture: x86_64, aarch64, s390x, armv7, riscv64, ppc64le):
        /// instruction counts per architecture, native timings with ratios to the first
        /// native leg; writes comparison.md and comparison.html.
        #[arg(long, num_args = 0.., value_name = "DIR", conflicts_with_all = ["leg", "strict", "strict_instructions"])]
        compare: Option<Vec<PathBuf>>,
        /// Where --compare writes; default: <results>/compare.
        #[arg(long, value_name = "DIR", requires = "compare")]
        out: Option<PathBuf>,
        /// With --compare, also the merge gate over the folders' results.json: exit 3 when
        /// a leg that blocks merges regressed (a target with `blocks_merge: true` in the
        /// matrix file, and the instruction-count pass `<triple>@qemu` of a blocking native
        /// target; instruction counts gate, round trips where the profile is strict), else
        /// 1 when such a leg of --profile has no results.json among the folders. Any
        /// number of folders then; those without cell results are gated, not compared.
        #[arg(long, requires = "compare")]
        fail_on_blocking_regressions: bool,
    },
    /// Manage the committed baselines (baselines/<leg>/<profile>.json).
    Baseline {
        #[command(subcommand)]
        action: BaselineAction,
    },
    /// Measure the machine's floor of each selected cell (the simplest exchange of its
    /// payload between its two CPUs that its transport could do) and print them; `run`
    /// measures each cell's floor just before the cell.
    Probe {
        #[command(flatten)]
        selection: Selection,
        /// Print one line of JSON per floor instead of the table.
        #[arg(long)]
        json: bool,
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

#[derive(Subcommand)]
enum BaselineAction {
    /// Show how the stored results differ from the baseline, then make them the baseline.
    /// Failed cells and cells run with a slowed peer keep their old entry.
    Accept {
        #[command(flatten)]
        stored: StoredResults,
        /// Folder of the baselines; default: baselines/ next to the matrix file.
        #[arg(long, value_name = "DIR")]
        baselines: Option<PathBuf>,
        /// Add the results as one more run of the existing baseline (the last 5 runs of
        /// each cell are kept) instead of replacing it: the spread between accepted runs
        /// then widens each cell's margin by what this machine's noise really is.
        #[arg(long)]
        append: bool,
        /// Show the difference only; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

fn main() -> ExitCode {
    ipc_matrix_scenario::serve_if_requested();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::List { selection } => commands::list::run(&selection),
        Command::Probe { selection, json } => commands::probe::run(&selection, json),
        Command::Matrix { matrix, github } => commands::matrix::run(&matrix, github),
        Command::Run {
            selection,
            out,
            fail_fast,
            judging,
        } => commands::run::run(&selection, out, fail_fast, judging),
        Command::Report {
            stored,
            judging,
            compare,
            out,
            fail_on_blocking_regressions,
        } => commands::report::run(
            &stored,
            judging,
            compare.as_deref(),
            out,
            fail_on_blocking_regressions,
        ),
        Command::Baseline {
            action:
                BaselineAction::Accept {
                    stored,
                    baselines,
                    append,
                    dry_run,
                },
        } => commands::baseline::accept(
            &stored,
            baselines,
            commands::baseline::Acceptance { append, dry_run },
        ),
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
