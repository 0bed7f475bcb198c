//! `mutants [MINUTES [FILE...]]`: mutation testing of the code that decides whether a
//! run is right. cargo-mutants plants one bug at a time (an operator swapped, a function
//! returning a default, a condition negated, ...) in the byte comparison, the framing,
//! the shared-memory ring, the verdict and its statistics, and runs the tests of the
//! crate the file is in against each. A mutant no test notices ("missed") is a bug the
//! tests would let through, or a change that makes no difference; those are excluded
//! with their reason in .cargo/mutants.toml.
//!
//! MINUTES is the whole run's budget (default 20): a file still running when it ends is
//! stopped and reported as partial, files not started as not run. Builds in
//! `<target dir>/mutants-build/` (MUTANTS_TARGET_DIR overrides it), where nothing else may
//! build meanwhile; writes `<target dir>/mutants/<file>/mutants.out/` (cargo-mutants' own
//! output) and `<target dir>/mutants/summary.md`, which it also prints. Exit status: 0
//! when every file was tested whole and nothing was missed, 1 when a mutant was missed,
//! 2 when the budget ran out first. A mutant that makes the tests hang (a timeout) is
//! listed and does not fail. Not part of the test command: about 430 mutants, an hour or
//! more on two cores.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{output, run};
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";

/// The files mutated when none are named.
pub const DEFAULT_FILES: &[&str] = &[
    "crates/scenario/src/verify.rs",
    "crates/transport/src/shm/channel.rs",
    "crates/transport/src/framing.rs",
    "crates/baseline/src/verdict.rs",
    "crates/baseline/src/stats.rs",
];

/// A mutant's tests time out after 4 times the unmutated tests' time, and never sooner
/// than this many seconds: 60 for the transport crate (its conformance suite takes about
/// 5 s here, far more under load), 15 for the others (a mutant that makes a loop endless
/// costs the whole timeout, and stats.rs has dozens). MUTANTS_MIN_TEST_TIMEOUT overrides.
fn min_test_timeout(file: &str) -> String {
    std::env::var("MUTANTS_MIN_TEST_TIMEOUT").unwrap_or_else(|_| {
        if file.starts_with("crates/transport/") {
            "60"
        } else {
            "15"
        }
        .into()
    })
}

/// What one file's run came to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub caught: usize,
    pub missed: usize,
    pub timeouts: usize,
    pub unviable: usize,
}

impl Tally {
    fn read(out: &Path) -> Self {
        let lines = |name: &str| {
            std::fs::read_to_string(out.join(name))
                .map(|t| t.lines().filter(|l| !l.is_empty()).count())
                .unwrap_or(0)
        };
        Self {
            caught: lines("caught.txt"),
            missed: lines("missed.txt"),
            timeouts: lines("timeout.txt"),
            unviable: lines("unviable.txt"),
        }
    }

    fn done(&self) -> usize {
        self.caught + self.missed + self.timeouts + self.unviable
    }
}

/// The state of a file's run from cargo-mutants' exit code and what it did, and the exit
/// status it asks for (0, 1 or 2).
pub fn state(code: Option<i32>, budget_spent: bool, tally: &Tally, listed: usize) -> (String, u8) {
    let done = tally.done();
    if budget_spent {
        (format!("partial: budget spent after {done} of {listed}"), 2)
    } else if code == Some(4) {
        ("the unmutated tests fail (see log)".into(), 1)
    } else if done < listed {
        let code = code.map_or("a signal".into(), |c| c.to_string());
        (
            format!("stopped after {done} of {listed} (exit {code}, see log)"),
            1,
        )
    } else if tally.missed > 0 {
        ("done".into(), 1)
    } else {
        ("done".into(), 0)
    }
}

pub fn mutants(repo: &Repo, args: &[String]) -> Result<u8> {
    let (minutes, files) = match args.split_first() {
        None => (20, Vec::new()),
        Some((m, rest)) => (
            m.parse::<u64>()
                .map_err(|_| anyhow!("the budget is a whole number of minutes, not '{m}'"))?,
            rest.to_vec(),
        ),
    };
    let files: Vec<String> = if files.is_empty() {
        DEFAULT_FILES.iter().map(|f| f.to_string()).collect()
    } else {
        files
    };
    for f in &files {
        if !repo.root.join(f).is_file() {
            bail!("no file {f}");
        }
    }
    let version = output(Command::new("cargo").args(["mutants", "--version"])).unwrap_or_default();
    if version != format!("cargo-mutants {CARGO_MUTANTS_VERSION}") {
        say(&format!(
            "installing cargo-mutants {CARGO_MUTANTS_VERSION} (cargo install --locked)"
        ));
        run(Command::new("cargo")
            .args(["install", "--locked"])
            .arg(format!("cargo-mutants@{CARGO_MUTANTS_VERSION}")))?;
    }
    // The copies cargo-mutants builds in share a target folder of their own: dependencies
    // are built once, not once per copy, and nothing else builds there. Cargo records a
    // workspace file by its path inside the workspace, so a build of this tree into the
    // same folder would take a mutant's artifacts for up to date (and the other way round).
    let build_dir = std::env::var_os("MUTANTS_TARGET_DIR")
        .map_or_else(|| repo.target_dir.join("mutants-build"), Into::into);
    let build_timeout = std::env::var("MUTANTS_BUILD_TIMEOUT").unwrap_or_else(|_| "900".into());
    let out = repo.target_dir.join("mutants");
    std::fs::create_dir_all(&out).with_context(|| out.display().to_string())?;
    let deadline = Instant::now() + Duration::from_secs(minutes * 60);
    let mut summary = format!(
        "# Mutants (budget {minutes} min, cargo-mutants {CARGO_MUTANTS_VERSION})\n\n\
         | file | mutants | caught | missed | timeout | unviable | state |\n\
         |---|---:|---:|---:|---:|---:|---|\n"
    );
    let mut notes = Vec::new();
    let mut status = 0u8;
    for f in &files {
        let dir = out.join(f.trim_end_matches(".rs").replace('/', "_"));
        let listed = output(
            Command::new("cargo")
                .args(["mutants", "--list", "--colors", "never", "--file", f])
                .current_dir(&repo.root)
                .env("CARGO_TARGET_DIR", &build_dir)
                .stderr(Stdio::null()),
        )
        .map(|l| l.lines().filter(|l| !l.is_empty()).count())
        .unwrap_or(0);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            summary += &format!("| `{f}` | {listed} | | | | | not run: budget spent |\n");
            status = 2;
            continue;
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        let log = dir.join("log.txt");
        say(&format!(
            "cargo mutants --file {f} ({listed} mutants, {}s of budget left; log: {})",
            left.as_secs(),
            log.display()
        ));
        let log_file = std::fs::File::create(&log)?;
        let err = log_file.try_clone()?;
        // `timeout` stops it with SIGINT at the budget (SIGKILL 120 s later), as a user's
        // Ctrl-C would, so that cargo-mutants writes what it found so far.
        let code = Command::new("timeout")
            .args(["--signal=INT", "--kill-after=120"])
            .arg(left.as_secs().max(1).to_string())
            .args([
                "cargo",
                "mutants",
                "--file",
                f,
                "--jobs",
                "1",
                "--no-shuffle",
            ])
            .args(["--colors", "never", "--timeout-multiplier", "4"])
            .args(["--minimum-test-timeout", &min_test_timeout(f)])
            .args([
                "--build-timeout",
                &build_timeout,
                "--copy-target=false",
                "--output",
            ])
            .arg(&dir)
            .current_dir(&repo.root)
            .env("CARGO_TARGET_DIR", &build_dir)
            .stdout(log_file)
            .stderr(err)
            .status()
            .context("timeout cargo mutants")?
            .code();
        let tally = Tally::read(&dir.join("mutants.out"));
        let spent = matches!(code, Some(124 | 130 | 137));
        let (state, asks) = state(code, spent, &tally, listed);
        status = status.max(asks);
        summary += &format!(
            "| `{f}` | {listed} | {} | {} | {} | {} | {state} |\n",
            tally.caught, tally.missed, tally.timeouts, tally.unviable
        );
        for (file, label) in [
            ("missed.txt", "missed"),
            ("timeout.txt", "timeout (the tests hung)"),
        ] {
            if let Ok(text) = std::fs::read_to_string(dir.join("mutants.out").join(file)) {
                notes.extend(
                    text.lines()
                        .filter(|l| !l.is_empty())
                        .map(|l| format!("- {label}: {l}")),
                );
            }
        }
    }
    summary += "\n";
    if notes.is_empty() {
        summary += "No mutant was missed in what ran.\n";
    } else {
        summary += "## Missed and timed out\n";
        summary += &(notes.join("\n") + "\n");
    }
    summary += "\nExcluded as equivalent (each with its reason): .cargo/mutants.toml\n";
    let path = out.join("summary.md");
    std::fs::write(&path, &summary).with_context(|| path.display().to_string())?;
    print!("{summary}");
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_run_is_done_partial_or_stopped_and_asks_for_its_status() {
        let all = Tally {
            caught: 8,
            missed: 0,
            timeouts: 1,
            unviable: 1,
        };
        assert_eq!(state(Some(0), false, &all, 10), ("done".into(), 0));
        let missed = Tally { missed: 2, ..all };
        assert_eq!(state(Some(2), false, &missed, 12).1, 1);
        let (text, code) = state(
            Some(130),
            true,
            &Tally {
                caught: 3,
                ..Tally::default()
            },
            10,
        );
        assert_eq!(
            (text.as_str(), code),
            ("partial: budget spent after 3 of 10", 2)
        );
        assert_eq!(state(Some(4), false, &Tally::default(), 10).1, 1);
        let (text, code) = state(
            None,
            false,
            &Tally {
                caught: 1,
                ..Tally::default()
            },
            10,
        );
        assert_eq!(
            (text.as_str(), code),
            ("stopped after 1 of 10 (exit a signal, see log)", 1)
        );
    }

    #[test]
    fn the_default_files_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for f in DEFAULT_FILES {
            assert!(root.join(f).is_file(), "{f}");
        }
    }
}
