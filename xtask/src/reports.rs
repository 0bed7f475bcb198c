//! The ipc-matrix CLI of the suite's own build, and the reports of each leg it writes.
//!
//! `ipc-matrix <arguments>` runs the CLI the suite just built, so nothing compiles twice:
//! `cargo test --no-run` with the selection nextest builds (the workspace, the test
//! profile, the suite's `--target`: `IPC_MATRIX_TARGET`) finds every unit fresh after the
//! suite, and the binary it holds then runs through the target's runner (QEMU for an
//! emulated target: the report is the same, only slower). `cargo run -p ipc-matrix`
//! would compile again: the whole graph into another folder without the suite's
//! `--target`, and even with it the units whose features differ when only this package
//! is selected. The counting plugin stays out of the report's process. The CLI runs in
//! the folder the task was started in (a user's copy, too).
//!
//! `reports [--strict-instructions] <leg>...`: report.md, report.html and results.json
//! of each leg, judged against baselines/; a leg without results is skipped, saying so.

use crate::cargo_config;
use crate::repo::Repo;
use crate::say::say;
use crate::sh::{describe, exit_code, run};
use anyhow::{Context, Result};
use std::process::Command;
use std::sync::Mutex;

/// The cargo arguments of the suite's own build of the CLI: the selection nextest builds
/// (crates/cli/tests/workflow.rs's counterpart checks the count pass against it).
pub fn suite_build_args(target: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = ["test", "--no-run", "--locked", "--quiet", "--workspace"]
        .map(str::to_owned)
        .to_vec();
    if let Some(target) = target {
        args.extend(["--target".to_owned(), target.to_owned()]);
    }
    args
}

/// The cargo target the suite was built for: `IPC_MATRIX_TARGET` where it ran with
/// `--target` (the GitHub legs, scripts/test-target.sh), else none (the host build).
pub fn suite_target() -> Option<String> {
    std::env::var("IPC_MATRIX_TARGET")
        .ok()
        .filter(|t| !t.is_empty())
}

/// `ipc-matrix report` of one leg and profile, on the results under `results`, then `extra`.
pub fn leg_report_args(
    results: &std::path::Path,
    leg: &str,
    profile: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "report".into(),
        "--results".into(),
        results.to_string_lossy().into_owned(),
        "--leg".into(),
        leg.into(),
        "--profile".into(),
        profile.into(),
    ];
    args.extend(extra.iter().map(|e| (*e).to_owned()));
    args
}

/// The CLI of the suite built for `target` (the host's when none), made fresh (nothing
/// compiles when the suite ran), as a command with `args`, run in the repository's root
/// (where matrix.yaml is).
pub fn cli(repo: &Repo, target: Option<&str>, args: &[String]) -> Result<Command> {
    // Once per target and task: cargo's look at a fresh workspace takes seconds, and a
    // task asks for reports several times with nothing built in between.
    static MADE_FRESH: Mutex<Vec<Option<String>>> = Mutex::new(Vec::new());
    let key = target.map(str::to_owned);
    let mut made = MADE_FRESH.lock().unwrap_or_else(|e| e.into_inner());
    if !made.contains(&key) {
        run(Command::new("cargo").args(suite_build_args(target)))?;
        made.push(key);
    }
    drop(made);
    let mut bin = repo.target_dir.clone();
    let mut words = Vec::new();
    if let Some(target) = target {
        bin.push(target);
        if let Some(runner) = cargo_config::runner(&repo.root, target)? {
            words = runner;
        }
    }
    bin.push("debug/ipc-matrix");
    // A runner's relative path with a folder in it is the repository's, as cargo takes it.
    if let Some(program) = words.first_mut() {
        if program.contains('/') && !program.starts_with('/') {
            *program = repo.root.join(&*program).to_string_lossy().into_owned();
        }
    }
    words.push(bin.to_string_lossy().into_owned());
    let mut command = Command::new(&words[0]);
    command
        .args(&words[1..])
        .args(args)
        .current_dir(&repo.root)
        .env("IPC_MATRIX_COUNT", "off");
    Ok(command)
}

/// Runs the CLI (see [`cli`]); its exit status.
pub fn ipc_matrix(repo: &Repo, target: Option<&str>, args: &[String]) -> Result<u8> {
    let mut command = cli(repo, target, args)?;
    let status = command.status().with_context(|| describe(&command))?;
    Ok(exit_code(status))
}

/// The profile the suite ran (the harness reads the same variable).
pub fn suite_profile() -> String {
    std::env::var("IPC_MATRIX_PROFILE")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "quick".into())
}

/// Writes each leg's reports; the first failure's exit status (0 when none failed), each
/// failure said as it happens.
pub fn write(repo: &Repo, target: Option<&str>, legs: &[String], strict: bool) -> Result<u8> {
    let profile = suite_profile();
    let mut first = 0;
    for leg in legs {
        let results = repo.target_dir.join("ipc-matrix").join(leg).join(&profile);
        if !results.join("cells").is_dir() {
            say(&format!(
                "report: {leg} has no results for profile {profile} (no cell ran); skipped"
            ));
            continue;
        }
        say(&format!("report: {leg} ({profile})"));
        // Instruction regressions fail where the leg blocks merges (or when asked):
        // counts are deterministic, so they gate on every leg; timings only warn.
        let mut args: Vec<String> = ["report", "--profile", &profile, "--leg", leg]
            .map(str::to_owned)
            .to_vec();
        if strict {
            args.push("--strict-instructions".into());
        }
        let code = ipc_matrix(repo, target, &args).unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            1
        });
        if code != 0 {
            say(&format!(
                "failed (exit {code}): the report of {leg}{}",
                if strict {
                    " (--strict-instructions)"
                } else {
                    ""
                }
            ));
            if first == 0 {
                first = code;
            }
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::suite_build_args;
    use crate::count_pass::nextest_args;

    /// Whether cargo's `args` select the workspace, as nextest's own builds select it (a
    /// package selected alone resolves its features apart: a second graph).
    fn selects_the_workspace(args: &[String]) -> bool {
        args.iter().any(|a| a == "--workspace")
            && !args
                .iter()
                .any(|a| a == "-p" || a == "--package" || a.starts_with("--package="))
    }

    /// The reports' CLI comes from the suite's own build (`cargo test --no-run`, the
    /// workspace, the suite's target), and the count pass builds the counted target with
    /// the workspace selected: neither compiles a second graph.
    #[test]
    fn the_reports_reuse_the_suite_build_and_the_count_pass_builds_the_counted_one() {
        let suite = suite_build_args(Some("aarch64-unknown-linux-gnu"));
        assert_eq!(suite[..2], ["test", "--no-run"]);
        assert!(selects_the_workspace(&suite), "{suite:?}");
        assert!(suite
            .windows(2)
            .any(|w| w == ["--target", "aarch64-unknown-linux-gnu"]));
        assert!(!suite_build_args(None).iter().any(|a| a == "--target"));
        let counted = "x86_64-unknown-linux-musl";
        let pass = nextest_args(counted);
        assert_eq!(pass[..2], ["nextest", "run"]);
        assert!(selects_the_workspace(&pass), "{pass:?}");
        assert!(pass.windows(2).any(|w| w == ["--target", counted]));
        assert!(pass.windows(2).any(|w| w == ["--profile", "count-x86_64"]));
        // The check itself catches a package selected alone.
        let mut alone = pass.clone();
        alone.extend(["-p".into(), "ipc-matrix".into()]);
        assert!(!selects_the_workspace(&alone));
    }
}
