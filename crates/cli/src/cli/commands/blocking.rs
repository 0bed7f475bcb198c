//! `ipc-matrix report --compare DIR... --fail-on-blocking-regressions`: the gate of the
//! workflow's side-by-side job. It reads each leg folder's results.json (written by the
//! leg's own `report`) and fails when a leg that blocks merges has a regression that
//! gates, or has no report at all.
//!
//! Which legs block merges comes from matrix.yaml: `<triple>@<runner>` when that target
//! has `blocks_merge: true`, and its count leg too (`<arch>-unknown-linux-musl@qemu`, the
//! native leg's instruction-count pass: `ipc_matrix_spec::count_leg`).
//!
//! Which regressions gate is what the blocking legs themselves fail on
//! (`report --strict-instructions`): guest instruction counts, deterministic, always;
//! timings only where the profile's regression policy is strict, since a timing
//! regression on a shared runner otherwise only warns.
//!
//! A blocking leg without a report fails the gate: that leg failed before its report was
//! written (the build, the harness, the report step itself), and passing would pass a
//! leg nobody judged.
//!
//! A local run of the workflow (`cargo xtask workflow`, under act, which sets `ACT=true`)
//! cannot run every leg here (an arm64 runner's, say): it names the legs it left out in
//! [`LEGS_NOT_RUN_ENV`], and the gate lists them as not run instead of missing. Outside
//! act the variable is refused: on GitHub every blocking leg must have its report.

use crate::exit_code;
use anyhow::{Context, Result};
use ipc_matrix_spec::Spec;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The blocking legs a local run of the workflow left out, comma-separated; read only
/// where act runs the job (`ACT=true`).
pub const LEGS_NOT_RUN_ENV: &str = "IPC_MATRIX_LEGS_NOT_RUN";

/// The legs a local run left out, or an error when the variable is set outside act.
fn legs_not_run() -> Result<Vec<String>> {
    let Some(value) = std::env::var_os(LEGS_NOT_RUN_ENV).filter(|v| !v.is_empty()) else {
        return Ok(Vec::new());
    };
    if std::env::var("ACT").as_deref() != Ok("true") {
        anyhow::bail!(
            "{LEGS_NOT_RUN_ENV} is set, but this is not a local run under act (ACT=true): \
             a merge gate judges every leg that blocks merges"
        );
    }
    Ok(value
        .to_string_lossy()
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Bound on a results.json read (every sample of every cell is in it).
const REPORT_BOUND: u64 = 512 << 20;

/// What became of one leg folder given to the gate.
#[derive(Debug)]
enum Finding {
    /// A report: its cells whose instruction count regressed and gates or is missing
    /// (each with what: "`id` (instructions)", "`id` (not counted: ...)"), and those
    /// whose round trip did (a timing verdict that gates, not an informational one).
    Report {
        instructions: Vec<String>,
        timings: Vec<String>,
    },
    /// No results.json, or one that cannot be read: why.
    NoReport(String),
}

/// Runs the gate over `folders` (`<results>/<leg>/<profile>`), the blocking legs taken
/// from `matrix` and `profile` the profile every blocking leg must have a report of.
/// Prints a Markdown section to stdout (the job summary), and keeps it as `gate.md` in
/// `out` when given; an error line per failure to stderr. Exit 3 when a blocking leg
/// regressed, else 1 when a blocking leg has no report, else 0.
pub fn gate(folders: &[PathBuf], matrix: &Path, profile: &str, out: Option<&Path>) -> Result<u8> {
    let spec = crate::project::load_matrix(matrix).map_err(anyhow::Error::msg)?;
    let not_run = legs_not_run()?;
    let mut seen: Vec<(String, String, PathBuf, Finding)> = Vec::new();
    for dir in folders {
        let (leg, leg_profile, finding) = read_folder(dir);
        seen.push((leg, leg_profile, dir.clone(), finding));
    }
    for leg in expected_legs(&spec) {
        if not_run.contains(&leg) {
            continue;
        }
        if !seen.iter().any(|(l, p, _, _)| *l == leg && p == profile) {
            let why = format!("no folder of profile `{profile}` among the results given");
            seen.push((
                leg,
                profile.to_string(),
                PathBuf::new(),
                Finding::NoReport(why),
            ));
        }
    }

    let (mut regressed, mut missing) = (0, 0);
    let mut blocking_lines = Vec::new();
    let mut other_lines = Vec::new();
    for (leg, leg_profile, dir, finding) in &seen {
        let blocks = blocks_merge(&spec, leg);
        let policy = crate::cli::args::regression_policy(&spec, leg_profile).ok();
        let name = format!("`{leg}` ({leg_profile})");
        let line = match finding {
            Finding::Report {
                instructions,
                timings,
            } => {
                // Counts always gate; timings where the profile is strict, else they warn.
                let strict = policy.is_some_and(|p| p.strict);
                let mut fails: Vec<String> = instructions.clone();
                let timed = timings.iter().map(|c| format!("`{c}` (round trip)"));
                let warns: Vec<String> = if strict {
                    fails.extend(timed);
                    Vec::new()
                } else {
                    timed.collect()
                };
                let mut text = match (blocks, fails.is_empty()) {
                    (_, true) => format!("{name}: no regression that gates"),
                    (true, false) => {
                        regressed += 1;
                        eprintln!(
                            "error: {leg} blocks merges and regressed: {}",
                            fails.join(", ")
                        );
                        format!("{name}: **regressed**: {}", fails.join(", "))
                    }
                    (false, false) => format!(
                        "{name}: regressed: {} (does not block merges)",
                        fails.join(", ")
                    ),
                };
                if !warns.is_empty() {
                    text.push_str(&format!(
                        "; round trips regressed (a warning: the profile is not strict): {}",
                        warns.join(", ")
                    ));
                }
                text
            }
            Finding::NoReport(why) => {
                let place = if dir.as_os_str().is_empty() {
                    String::new()
                } else {
                    format!(" in {}", dir.display())
                };
                if blocks {
                    missing += 1;
                    eprintln!(
                        "error: {leg} blocks merges and has no report{place}: {why}; the leg \
                         failed before its report was written"
                    );
                    format!("{name}: **no report**{place}: {why}")
                } else {
                    format!("{name}: no report{place}: {why} (does not block merges)")
                }
            }
        };
        if blocks {
            blocking_lines.push(line);
        } else {
            other_lines.push(line);
        }
    }

    let mut section = String::from("\n### Legs that block merges\n\n");
    for line in &blocking_lines {
        section.push_str(&format!("- {line}\n"));
    }
    if !not_run.is_empty() {
        section.push_str(&format!(
            "\nNot run in this local run ({LEGS_NOT_RUN_ENV}; on GitHub each must have its report): {}\n",
            not_run.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if !other_lines.is_empty() {
        section.push_str("\nLegs that do not block merges:\n\n");
        for line in &other_lines {
            section.push_str(&format!("- {line}\n"));
        }
    }
    let code = if regressed > 0 {
        eprintln!("error: {regressed} leg(s) that block merges regressed");
        exit_code::REGRESSED
    } else if missing > 0 {
        eprintln!("error: {missing} leg(s) that block merges have no report");
        exit_code::CELL_FAILED
    } else {
        section.push_str("\nNo leg that blocks merges regressed.\n");
        exit_code::OK
    };
    print!("{section}");
    if let Some(out) = out {
        // Beside the comparison, so that an uploaded comparison keeps its verdict.
        let file = out.join("gate.md");
        std::fs::create_dir_all(out)
            .and_then(|()| std::fs::write(&file, section.trim_start()))
            .with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(code)
}

/// The legs the workflow runs: each target's own, and the count pass `<triple>@qemu` of
/// each native target. Each is listed, with or without a report; only those of blocking
/// targets fail the gate without one.
fn expected_legs(spec: &Spec) -> Vec<String> {
    let mut legs: Vec<String> = Vec::new();
    for t in &spec.targets {
        let mut own = vec![format!("{}@{}", t.triple, t.runner)];
        own.extend(ipc_matrix_spec::count_leg(&t.triple, t.runner));
        for leg in own {
            if !legs.contains(&leg) {
                legs.push(leg);
            }
        }
    }
    legs
}

/// Whether `leg` (`<triple>@<runner>`) blocks merges: its target does, or it is the
/// count leg of a target that does (a native leg's count pass reports under it).
fn blocks_merge(spec: &Spec, leg: &str) -> bool {
    spec.targets.iter().filter(|t| t.blocks_merge).any(|t| {
        format!("{}@{}", t.triple, t.runner) == leg
            || ipc_matrix_spec::count_leg(&t.triple, t.runner).as_deref() == Some(leg)
    })
}

/// The leg and profile of a folder (from its results.json, else from its path:
/// `<leg>/<profile>`) and what its report says.
fn read_folder(dir: &Path) -> (String, String, Finding) {
    let from_path = |n: usize| {
        dir.ancestors()
            .nth(n)
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "?".into())
    };
    let (path_leg, path_profile) = (from_path(1), from_path(0));
    let file = dir.join("results.json");
    if !file.is_file() {
        let why = if dir.join("cells").is_dir() {
            "cell results but no results.json (its report step did not finish)"
        } else {
            "no results.json and no cell results"
        };
        return (path_leg, path_profile, Finding::NoReport(why.into()));
    }
    match read_report(&file) {
        Ok((leg, profile, finding)) => (leg, profile, finding),
        Err(e) => (
            path_leg,
            path_profile,
            Finding::NoReport(crate::error_text::error_text(&e)),
        ),
    }
}

/// Reads a results.json: its leg, its profile, and its cells whose instruction count or
/// round trip regressed with a verdict that gates (informational verdicts are left out).
fn read_report(file: &Path) -> Result<(String, String, Finding)> {
    let bytes = ipc_matrix_results::read_bounded(file, REPORT_BOUND, "a report")?;
    let doc: Value =
        serde_json::from_slice(&bytes).with_context(|| format!("{}: not JSON", file.display()))?;
    let version = doc["schema_version"].as_u64();
    if version != Some(u64::from(ipc_matrix_report::REPORT_SCHEMA_VERSION)) {
        anyhow::bail!(
            "{}: report schema {version:?}, not {} (written by another version)",
            file.display(),
            ipc_matrix_report::REPORT_SCHEMA_VERSION
        );
    }
    let text = |v: &Value, what: &str| {
        v.as_str()
            .map(String::from)
            .with_context(|| format!("{}: no {what}", file.display()))
    };
    let leg = text(&doc["leg"], "leg")?;
    let profile = text(&doc["profile"], "profile")?;
    let cells = doc["cells"]
        .as_array()
        .with_context(|| format!("{}: no cells", file.display()))?;
    let (mut instructions, mut timings) = (Vec::new(), Vec::new());
    let mut either = 0;
    for cell in cells {
        let verdict = &cell["verdict"];
        let id = text(&verdict["cell_id"], "cell_id")?;
        let regressed = |v: &Value| v["verdict"].as_str() == Some("regressed");
        let gates = |v: &Value| v["gating"].as_bool() == Some(true);
        let counts = &verdict["instructions"];
        // No count where the baseline has one fails as a regressed count does.
        let uncounted = verdict["uncounted"].as_str();
        let (timing, count) = (
            regressed(verdict) && gates(verdict),
            regressed(counts) && gates(counts),
        );
        either += u64::from(timing || count || uncounted.is_some());
        if timing {
            timings.push(id.clone());
        }
        match uncounted {
            Some(why) => instructions.push(format!("`{id}` ({why})")),
            None if count => instructions.push(format!("`{id}` (instructions)")),
            None => {}
        }
    }
    // The summary counts the same cells: a report that disagrees with itself is refused.
    let summary = doc["summary"]["gating_regressions"].as_u64();
    if summary != Some(either) {
        anyhow::bail!(
            "{}: summary.gating_regressions is {summary:?}, but {either} cell(s) regressed and gate",
            file.display()
        );
    }
    Ok((
        leg,
        profile,
        Finding::Report {
            instructions,
            timings,
        },
    ))
}
