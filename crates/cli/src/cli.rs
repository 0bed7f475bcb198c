//! `ipc-matrix`: run the matrix from the command line, with a progress bar and a summary.
//!
//! This file parses the command line and dispatches; each command lives in
//! `commands/<command>.rs`, the argument groups commands share in `args.rs`. It is the
//! library's, so that a binary of a user's own (`ipc_matrix::main!`) is the same CLI.

mod args;
mod commands;

use crate::exit_code;
use crate::term::{Console, MessageFormat, Verbosity};
use args::{Judging, NoCells, Selection, StoredResults, Text};
use clap::builder::styling::{AnsiColor, Effects, Styles};
use clap::{ColorChoice, CommandFactory, FromArgMatches, Parser, Subcommand};
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
<out>/<target-triple>@<runner>/cells/.",
    styles = STYLES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Colour the output: auto (when it goes to a terminal and NO_COLOR is not set),
    /// always, never.
    #[arg(long, value_name = "WHEN", global = true, default_value = "auto")]
    color: ColorChoice,
    /// Print only failures, warnings and the final summary line.
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print more: the environment, each cell's CPUs, probes, floor, wall time and result
    /// file, and the folders used.
    #[arg(long, short, global = true)]
    verbose: bool,
}

/// The colours of the help, as cargo's.
const STYLES: Styles = Styles::styled()
    .header(AnsiColor::Green.on_default().effects(Effects::BOLD))
    .usage(AnsiColor::Green.on_default().effects(Effects::BOLD))
    .literal(AnsiColor::Cyan.on_default().effects(Effects::BOLD))
    .placeholder(AnsiColor::Cyan.on_default())
    .error(AnsiColor::Red.on_default().effects(Effects::BOLD))
    .valid(AnsiColor::Cyan.on_default().effects(Effects::BOLD))
    .invalid(AnsiColor::Yellow.on_default().effects(Effects::BOLD));

/// What `list`, `run` and `probe` print on stdout.
#[derive(clap::Args)]
struct Output {
    /// human: text; json: JSON Lines, one object per line (the book:
    /// docs/src/reference/machine-readable-output.md), and human text on stderr.
    #[arg(long, value_name = "FMT", default_value = "human")]
    message_format: MessageFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run the cells of a profile and print a summary; exits 1 if any cell fails.
    Run {
        #[command(flatten)]
        selection: Selection,
        /// Folder for results; default: <target dir>/ipc-matrix, the target dir being
        /// $CARGO_TARGET_DIR or target/ in the matrix file's folder.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Stop at the first failing cell.
        #[arg(long)]
        fail_fast: bool,
        /// Count each cell's guest instructions per round trip: the run again, this binary
        /// under QEMU user mode with the counting plugin and a fixed CPU model (leg
        /// <triple>@qemu). Stops before any cell runs when the emulator cannot load
        /// plugins or the plugin is not there.
        #[arg(long)]
        count: bool,
        /// The QEMU user-mode emulator --count runs under; default: qemu-<arch> on PATH.
        #[arg(long, value_name = "FILE", requires = "count")]
        qemu: Option<PathBuf>,
        /// The counting plugin (libipc_matrix_qemu_count.so, `cargo build --release -p
        /// ipc-matrix-qemu-count`); default: $IPC_MATRIX_COUNT_PLUGIN.
        #[arg(long, value_name = "FILE", requires = "count")]
        count_plugin: Option<PathBuf>,
        #[command(flatten)]
        judging: Judging,
        #[command(flatten)]
        output: Output,
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
        /// matrix file, and the instruction-count pass of a blocking native target,
        /// `<arch>-unknown-linux-musl@qemu`; instruction counts gate, round trips where the
        /// profile is strict), else
        /// 1 when such a leg of --profile has no results.json among the folders. Any
        /// number of folders then; those without cell results are gated, not compared.
        #[arg(long, requires = "compare")]
        fail_on_blocking_regressions: bool,
        /// Also compare each leg's instruction counts with those of another run of it
        /// (`<results>/<leg>/<profile>`: the same commit counted in another userland, on
        /// another machine), cell by cell, to the last digit: exit 3 when a cell whose
        /// count gates differs at all. Counts that only inform are shown with how far they
        /// moved.
        #[arg(long, value_name = "DIR", conflicts_with = "compare")]
        same_counts_as: Option<PathBuf>,
        /// Only print the ids of the leg's cells whose instruction counts gate (judged
        /// against the baselines), one per line, and write no report: the cells a second
        /// count of the same commit must count the same (scripts/second-userland.sh).
        #[arg(long, conflicts_with_all = ["compare", "same_counts_as"])]
        gating_cells: bool,
    },
    /// Draw per-cell trends from several runs' results.json (for example the artifacts of
    /// successive commits), ordered by time and labelled by commit, with the baseline's
    /// band; instruction counts too. Writes history.md and history.html.
    History {
        /// Folders to search for results.json (recursively), or results.json files.
        #[arg(required = true, num_args = 1.., value_name = "DIR")]
        paths: Vec<PathBuf>,
        /// Where to write; default: <target dir>/ipc-matrix/history, the target dir next to
        /// the nearest matrix.yaml (or in the current folder when there is none).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Only this leg (`<triple>@<runner>`); repeatable.
        #[arg(long, value_name = "LEG", value_parser = args::leg())]
        leg: Vec<String>,
    },
    /// Manage the committed baselines (baselines/<leg>/<profile>.json).
    Baseline {
        #[command(subcommand)]
        action: BaselineAction,
    },
    /// Measure the machine's floor of each selected cell (the simplest exchange of its
    /// payload between its two CPUs that its transport could do) and print them; `run`
    /// times each cell's floor in blocks between the cell's own round trips.
    Probe {
        #[command(flatten)]
        selection: Selection,
        /// The same as --message-format json: one line of JSON per floor.
        #[arg(long, conflicts_with = "message_format")]
        json: bool,
        #[command(flatten)]
        output: Output,
    },
    /// List the cells a profile and filter select, one per line.
    List {
        #[command(flatten)]
        selection: Selection,
        #[command(flatten)]
        output: Output,
    },
    /// Write what a repository needs to measure its own stack: a commented matrix.yaml,
    /// baselines/ (with a README saying how to fill it) and a GitHub workflow
    /// (.github/workflows/ipc-matrix.yml) that installs this ipc-matrix, pinned by commit,
    /// and runs each target on a runner of its CPU. Writes over nothing unless --force.
    Init {
        /// The repository's folder.
        #[arg(default_value = ".", value_name = "DIR")]
        dir: PathBuf,
        /// Your stack in a shared library with the C ABI (include/ipc_matrix_stack.h):
        /// its name and its library's path from DIR, `{arch}` for the CPU's name.
        #[arg(long, value_name = "NAME=LIBRARY", value_parser = commands::init::plugin_parser())]
        plugin: Option<commands::init::PluginArg>,
        /// The commit of ipc-matrix the workflow installs; default: the one this binary
        /// was built from.
        #[arg(long, value_name = "COMMIT")]
        rev: Option<String>,
        /// Write over the files that are already there.
        #[arg(long)]
        force: bool,
    },
    /// Run the transport conformance suite (the checks of the Channel contract every
    /// built-in transport passes: sizes, ordering, deadlines, a dead peer, oversized
    /// messages, the loaned path) against your stacks: those matrix.yaml's plugins: names
    /// and those this binary registers. One test <stack>::<check> each; exits 1 if one
    /// fails.
    Conformance {
        /// The matrix file whose plugins to load; default: the nearest matrix.yaml in the
        /// current folder or above, when there is one.
        #[arg(long, value_name = "FILE")]
        matrix: Option<PathBuf>,
        /// Check only this stack (repeatable); default: every stack there is.
        #[arg(long = "stack", value_name = "NAME", value_parser = Text)]
        stacks: Vec<String>,
        /// The largest message to check with (e.g. 64KiB), for a stack whose limit is
        /// lower than the suite's (4 MiB) and cannot say so itself (a shared library).
        #[arg(long, value_name = "SIZE", value_parser = byte_size)]
        max_message: Option<u64>,
        /// The test harness's arguments, after `--`: a filter, --exact, --list, ...
        #[arg(last = true, value_name = "HARNESS_ARGS", value_parser = Text)]
        harness: Vec<String>,
    },
    /// Print the legs (targets) of matrix.yaml; with --github, as the JSON job matrix the
    /// GitHub workflow reads with fromJSON.
    Matrix {
        /// The matrix file; default: the nearest matrix.yaml in the current folder or above.
        #[arg(long, value_name = "FILE")]
        matrix: Option<PathBuf>,
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
        /// Accept what CI legs uploaded: a folder of downloaded artifacts (as `gh run
        /// download -D DIR` writes them: one folder per artifact, each holding
        /// `<leg>/<profile>/` results somewhere inside). Every leg found is accepted
        /// (`--leg` narrows it); a leg found in two artifacts is taken from its own
        /// (`results-<leg>`), else refused.
        #[arg(long, value_name = "DIR", conflicts_with = "results")]
        artifacts: Option<PathBuf>,
    },
}

/// The `ipc-matrix` command line: serves as a peer when started as one, else parses the
/// arguments and runs the command.
pub fn main() -> ExitCode {
    ipc_matrix_scenario::serve_if_requested();
    ipc_matrix_transport::conformance::serve_if_requested();
    crate::cell_process::serve_if_requested();
    crate::plugin_probe::serve_if_requested();
    crate::exit_guard::arm();
    crate::exit_guard::run_as_ours(run)
}

/// [`main`], once this process is the command: every status it returns is the command's.
fn run() -> ExitCode {
    let color = crate::term::color_arg(std::env::args_os());
    let matches = Cli::command()
        .color(color)
        .try_get_matches()
        .unwrap_or_else(|e| crate::exit_guard::exit(clap_exit(&e)));
    let mut cli =
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| crate::exit_guard::exit(clap_exit(&e)));
    let format = match &cli.command {
        Command::List { output, .. } | Command::Run { output, .. } => output.message_format,
        Command::Probe { output, json, .. } if *json => MessageFormat::Json,
        Command::Probe { output, .. } => output.message_format,
        _ => MessageFormat::Human,
    };
    let verbosity = match (cli.quiet, cli.verbose) {
        (true, _) => Verbosity::Quiet,
        (false, true) => Verbosity::Verbose,
        (false, false) => Verbosity::Normal,
    };
    crate::term::set(Console::new(verbosity, format, cli.color));
    if !crate::environment_is_accepted() {
        return ExitCode::from(exit_code::USAGE);
    }
    let outcome = resolve(&mut cli.command).and_then(|()| dispatch(cli.command));
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Paths and values from outside are in it.
            eprintln!(
                "error: {}",
                ipc_matrix_results::printable(&crate::error_text::error_text(&e))
            );
            ExitCode::from(error_code(&e))
        }
    }
}

/// The exit status of a command that failed with `e`.
fn error_code(e: &anyhow::Error) -> u8 {
    if e.is::<NoCells>() {
        exit_code::NO_CELLS
    } else {
        exit_code::USAGE
    }
}

/// Prints clap's message (help, version, or an error) as clap would, and its status.
fn clap_exit(e: &clap::Error) -> i32 {
    let _ = e.print();
    e.exit_code()
}

/// Finds the matrix file of the commands that read one, unless given.
fn resolve(command: &mut Command) -> anyhow::Result<()> {
    match command {
        Command::List { selection, .. }
        | Command::Probe { selection, .. }
        | Command::Run { selection, .. } => selection.resolve(),
        Command::Report { stored, .. }
        | Command::Baseline {
            action: BaselineAction::Accept { stored, .. },
        } => stored.resolve(),
        Command::History { out, .. } => {
            // History reads results from anywhere: it needs no matrix file, but writes
            // next to one when there is one above, as the other commands do.
            if out.is_none() {
                let root = crate::project::matrix_file(None)
                    .map(|m| crate::project::project_root(&m))
                    .unwrap_or_else(|_| PathBuf::from("."));
                *out = Some(crate::default_out_dir(&root).join("history"));
            }
            Ok(())
        }
        Command::Matrix { matrix, .. } => {
            *matrix =
                Some(crate::project::matrix_file(matrix.as_deref()).map_err(anyhow::Error::msg)?);
            Ok(())
        }
        // It writes the matrix file.
        Command::Init { .. } => Ok(()),
        // A binary of a user's own may have its stacks without a matrix file.
        Command::Conformance { matrix, .. } => {
            if matrix.is_none() {
                *matrix = crate::project::matrix_file(None).ok();
            }
            Ok(())
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::List { selection, .. } => commands::list::run(&selection),
        Command::Probe { selection, .. } => commands::probe::run(&selection),
        Command::Init {
            dir,
            plugin,
            rev,
            force,
        } => commands::init::run(&dir, plugin.as_ref(), rev.as_deref(), force),
        Command::Conformance {
            matrix,
            stacks,
            max_message,
            harness,
        } => commands::conformance::run(&commands::conformance::Conformance {
            matrix: matrix.as_deref(),
            stacks: &stacks,
            max_message: max_message.map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
            harness: &harness,
        }),
        Command::Matrix { matrix, github } => {
            commands::matrix::run(&matrix.expect("resolved"), github)
        }
        Command::Run {
            selection,
            out,
            fail_fast,
            count,
            qemu,
            count_plugin,
            judging,
            ..
        } => {
            if !count {
                return commands::run::run(&selection, out, fail_fast, judging);
            }
            let results = out
                .clone()
                .unwrap_or_else(|| crate::default_out_dir(&selection.root()));
            let options = crate::counted_run::CountOptions {
                qemu,
                plugin: count_plugin,
            };
            match crate::counted_run::start(&options, &results)? {
                crate::counted_run::Counted::Done(code) => Ok(code),
                crate::counted_run::Counted::Here(started) => {
                    let outcome = commands::run::run(&selection, out, fail_fast, judging);
                    started.finish(match &outcome {
                        Ok(code) => *code,
                        Err(e) => error_code(e),
                    });
                    outcome
                }
            }
        }
        Command::Report {
            stored,
            judging,
            gating_cells: true,
            ..
        } => commands::report::gating_cells(&stored, judging),
        Command::Report {
            stored,
            judging,
            compare,
            out,
            fail_on_blocking_regressions,
            same_counts_as,
            gating_cells: false,
        } => commands::report::run(
            &stored,
            judging,
            compare.as_deref(),
            out,
            (fail_on_blocking_regressions, same_counts_as.as_deref()),
        ),
        Command::History { paths, out, leg } => {
            commands::history::run(&paths, &out.expect("resolved"), &leg)
        }
        Command::Baseline {
            action:
                BaselineAction::Accept {
                    stored,
                    baselines,
                    append,
                    dry_run,
                    artifacts,
                },
        } => match artifacts {
            Some(dir) => commands::baseline::accept_artifacts(
                &stored,
                &dir,
                baselines,
                commands::baseline::Acceptance { append, dry_run },
            ),
            None => commands::baseline::accept(
                &stored,
                baselines,
                commands::baseline::Acceptance { append, dry_run },
            ),
        },
    }
}

/// A size as matrix.yaml writes one (`200B`, `64KiB`, `1MB`).
fn byte_size(text: &str) -> Result<u64, ipc_matrix_spec::UnitError> {
    ipc_matrix_spec::ByteSize::parse(text).map(|size| size.bytes())
}
