//! `ipc-matrix`: run the matrix from the command line, with a progress bar and a summary.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use ipc_matrix::format::{summary_table, verdict_line};
use ipc_matrix::reporting::{
    baselines_dir, github_annotations, leg_report, legs_with_results, now_unix, running_on_github,
    verdict_summary, verdict_table,
};
use ipc_matrix::{default_out_dir, exit_code, run_and_store, Stored};
use ipc_matrix_baseline::{baseline_path, Baseline};
use ipc_matrix_report::cross::Column;
use ipc_matrix_report::write_leg_report;
use ipc_matrix_results::Environment;
use ipc_matrix_scenario::RunOptions;
use ipc_matrix_spec::{Cell, RegressionPolicy, Spec};
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
        /// Result folders (`<results>/<leg>/<profile>`) to put side by side, first one the
        /// reference; writes comparison.md and comparison.html.
        #[arg(long, num_args = 2.., value_name = "DIR", conflicts_with_all = ["leg", "strict"])]
        compare: Vec<PathBuf>,
        /// Where --compare writes; default: <results>/compare.
        #[arg(long, value_name = "DIR", requires = "compare")]
        out: Option<PathBuf>,
    },
    /// Manage the committed baselines (baselines/<leg>/<profile>.json).
    Baseline {
        #[command(subcommand)]
        action: BaselineAction,
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

/// Which stored results a command reads.
#[derive(clap::Args)]
struct StoredResults {
    /// The matrix file (for the profile's regression policy).
    #[arg(long, value_name = "FILE", default_value = "matrix.yaml")]
    matrix: PathBuf,
    /// The profile whose results are read.
    #[arg(long, default_value = "quick")]
    profile: String,
    /// Folder the results are in; default: <target dir>/ipc-matrix.
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,
    /// Only this leg (`<triple>@<runner>`); repeatable; default: every leg with results.
    #[arg(long, value_name = "LEG")]
    leg: Vec<String>,
}

impl StoredResults {
    fn results_dir(&self) -> PathBuf {
        self.results
            .clone()
            .unwrap_or_else(|| default_out_dir(Path::new(".")))
    }

    fn policy(&self) -> Result<RegressionPolicy> {
        regression_policy(&self.matrix, &self.profile)
    }

    /// The legs asked for, or every leg with results of the profile (at least one).
    fn legs(&self) -> Result<Vec<String>> {
        if !self.leg.is_empty() {
            return Ok(self.leg.clone());
        }
        let results = self.results_dir();
        let legs = legs_with_results(&results, &self.profile)?;
        if legs.is_empty() {
            return Err(NoCells(format!(
                "no results of profile `{}` under {}; run the cells first",
                self.profile,
                results.display()
            ))
            .into());
        }
        Ok(legs)
    }
}

/// How a run is judged against its baseline.
#[derive(clap::Args)]
struct Judging {
    /// Folder of the baselines; default: baselines/ next to the matrix file.
    #[arg(long, value_name = "DIR")]
    baselines: Option<PathBuf>,
    /// A regression fails (exit 3) instead of warning; also set per profile in matrix.yaml.
    #[arg(long)]
    strict: bool,
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
            judging,
        } => selection.cells().and_then(|cells| {
            let out = out.unwrap_or_else(|| default_out_dir(Path::new(".")));
            let code = run(&cells, &out, fail_fast)?;
            if !Environment::capture().is_optimized() {
                return Ok(code); // nothing was stored to judge
            }
            let policy = regression_policy(&selection.matrix, &selection.profile)?;
            let baselines = baselines_dir(judging.baselines.clone(), &selection.matrix);
            let leg = Environment::capture().leg();
            let judged = report_legs(
                &out,
                &baselines,
                &[leg],
                &selection.profile,
                policy,
                judging.strict,
            )?;
            Ok(code.max(judged))
        }),
        Command::Report {
            stored,
            judging,
            compare,
            out,
        } => {
            if compare.is_empty() {
                stored.policy().and_then(|policy| {
                    report_legs(
                        &stored.results_dir(),
                        &baselines_dir(judging.baselines, &stored.matrix),
                        &stored.legs()?,
                        &stored.profile,
                        policy,
                        judging.strict,
                    )
                })
            } else {
                let out = out.unwrap_or_else(|| stored.results_dir().join("compare"));
                compare_folders(&compare, &out)
            }
        }
        Command::Baseline {
            action:
                BaselineAction::Accept {
                    stored,
                    baselines,
                    append,
                    dry_run,
                },
        } => stored.policy().and_then(|policy| {
            accept(
                &stored.results_dir(),
                &baselines_dir(baselines, &stored.matrix),
                &stored.legs()?,
                &stored.profile,
                policy,
                Acceptance { append, dry_run },
            )
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

fn regression_policy(matrix: &Path, profile: &str) -> Result<RegressionPolicy> {
    let spec = Spec::load(matrix).map_err(|e| anyhow::anyhow!("{e}"))?;
    let profiles = spec.profile_names().join(", ");
    spec.profiles
        .get(profile)
        .map(|p| p.regression)
        .ok_or_else(|| {
            anyhow::anyhow!("no profile is named `{profile}`; the profiles are: {profiles}")
        })
}

/// Judges and writes the reports of `legs`; exit 3 when a gating regression meets a
/// strict run, else 0 (regressions then only warn).
fn report_legs(
    results: &Path,
    baselines: &Path,
    legs: &[String],
    profile: &str,
    policy: RegressionPolicy,
    strict_flag: bool,
) -> Result<u8> {
    let strict = strict_flag || policy.strict;
    let mut regressions = 0;
    for leg in legs {
        let report = leg_report(results, baselines, leg, profile, policy)?;
        let dir = ipc_matrix_results::run_dir(results, leg, profile);
        let written = write_leg_report(&dir, &report)
            .with_context(|| format!("writing the reports into {}", dir.display()))?;
        if report.verdict.cells.iter().any(|c| c.change.is_some()) {
            println!("{}", verdict_table(&report));
        }
        for cell in &report.verdict.cells {
            for note in &cell.notes {
                println!("note: {}: {note}", cell.cell_id);
            }
        }
        println!("{}", verdict_summary(&report));
        if running_on_github() {
            for line in github_annotations(&report) {
                println!("{line}");
            }
        }
        for cell in report.verdict.gating_regressions() {
            eprintln!(
                "warning: {}: {} regressed",
                report.verdict.leg, cell.cell_id
            );
        }
        regressions += report.verdict.gating_regressions().count();
        println!(
            "reports: {}\n         {}\n         {}",
            written.markdown.display(),
            written.html.display(),
            written.json.display()
        );
    }
    Ok(match (regressions, strict) {
        (0, _) => exit_code::OK,
        (_, true) => {
            eprintln!("error: {regressions} regression(s) and the run is strict");
            exit_code::REGRESSED
        }
        (_, false) => exit_code::OK,
    })
}

fn compare_folders(folders: &[PathBuf], out: &Path) -> Result<u8> {
    let columns = folders
        .iter()
        .map(|dir| {
            let results = ipc_matrix_results::read_results(dir).with_context(|| {
                format!(
                    "--compare {}: expected <results>/<leg>/<profile>",
                    dir.display()
                )
            })?;
            let first = results
                .first()
                .with_context(|| format!("{}: no cell results", dir.display()))?;
            Ok(Column {
                name: format!("{} ({})", first.leg, first.cell.profile),
                runner: first.environment.runner.clone(),
                results,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Two folders of the same leg and profile (before and after a change): name them by path.
    let mut columns = columns;
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    for (column, dir) in columns.iter_mut().zip(folders) {
        if names.iter().filter(|n| **n == column.name).count() > 1 {
            column.name = dir.display().to_string();
        }
    }
    let (md, html) = ipc_matrix_report::cross::write(out, &columns)?;
    println!("{}", ipc_matrix_report::cross::markdown(&columns));
    println!(
        "comparison: {}\n            {}",
        md.display(),
        html.display()
    );
    Ok(exit_code::OK)
}

struct Acceptance {
    append: bool,
    dry_run: bool,
}

/// Shows how the results differ from the baseline, then stores them as the baseline (or
/// as one more run of it).
fn accept(
    results: &Path,
    baselines: &Path,
    legs: &[String],
    profile: &str,
    policy: RegressionPolicy,
    how: Acceptance,
) -> Result<u8> {
    for leg in legs {
        let report = leg_report(results, baselines, leg, profile, policy)?;
        let path = baseline_path(baselines, leg, profile);
        match &report.baseline {
            Some(_) => println!(
                "{leg} ({profile}): stored results against {}",
                path.display()
            ),
            None => println!("{leg} ({profile}): no baseline yet at {}", path.display()),
        }
        println!("{}", verdict_table(&report));
        for id in &report.verdict.not_run {
            let fate = if how.append { "kept" } else { "dropped" };
            println!("  {id}: in the baseline, not in these results: {fate}");
        }
        let (keep, refuse): (Vec<_>, Vec<_>) = report
            .results
            .iter()
            .cloned()
            .partition(|r| r.outcome.passed && r.peer_delay_us.is_none());
        let old = report.baseline.as_ref().map(|b| &b.baseline);
        let mut baseline = match old {
            Some(old) if how.append => {
                if old.environment.cpu_model != report.results[0].environment.cpu_model {
                    anyhow::bail!(
                        "{leg}: the baseline was measured on {}, these results on {}; \
                         accept without --append to replace it",
                        old.environment.cpu_model,
                        report.results[0].environment.cpu_model
                    );
                }
                let mut appended = old.clone();
                appended.add_run(&keep, now_unix());
                appended
            }
            _ => Baseline::from_results(&keep, now_unix())
                .with_context(|| format!("{leg}: no passing cell to accept"))?,
        };
        for r in &refuse {
            let why = if r.outcome.passed {
                "ran with a slowed peer"
            } else {
                "failed"
            };
            match old.and_then(|b| b.cells.get(&r.cell.id)) {
                Some(entry) => {
                    println!("  {}: {why}; its baseline entry is kept", r.cell.id);
                    baseline.cells.insert(r.cell.id.clone(), entry.clone());
                }
                None => println!("  {}: {why}; not accepted", r.cell.id),
            }
        }
        let runs = baseline
            .cells
            .values()
            .map(|c| c.runs.len())
            .max()
            .unwrap_or(0);
        if how.dry_run {
            println!("dry run: {} not written", path.display());
        } else {
            baseline.save(&path)?;
            println!(
                "wrote {} ({} cells, up to {runs} accepted run(s) each)",
                path.display(),
                baseline.cells.len()
            );
        }
    }
    Ok(exit_code::OK)
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
