//! Steps that must all run: the first failure's exit status is kept, and each failed step
//! is repeated at the end, where a log's reader finds it (CI shows a log's tail), with
//! every test that failed in the JUnit files this run's nextest runs wrote and the start
//! of its failure (its panic).

use crate::say::say;
use crate::sh::{describe, exit_code};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// When this run started: JUnit files older than that are another run's.
pub fn started() -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(crate::say::started_at())
}

#[derive(Default)]
pub struct Steps {
    first: u8,
    failures: Vec<String>,
}

impl Steps {
    /// The first failure's exit status; 0 when every step passed.
    pub fn status(&self) -> u8 {
        self.first
    }

    /// Records `what` as failed with `code` (nothing when `code` is 0).
    pub fn record(&mut self, code: u8, what: &str) {
        if code == 0 {
            return;
        }
        if self.first == 0 {
            self.first = code;
        }
        self.failures.push(format!("exit {code}: {what}"));
    }

    /// Records a task's outcome: its exit status, or an error (exit 1) said here, with
    /// its whole chain of causes.
    pub fn outcome(&mut self, outcome: Result<u8>, what: &str) {
        match outcome {
            Ok(code) => self.record(code, what),
            Err(e) => {
                eprintln!("error: {e:#}");
                self.record(1, &format!("{what}: {e:#}"));
            }
        }
    }

    /// Runs `command`, recording its failure under its own words.
    pub fn run(&mut self, command: &mut Command) {
        let what = describe(command);
        match command.status() {
            Ok(status) => self.record(exit_code(status), &what),
            Err(e) => self.record(127, &format!("{what}: {e}")),
        }
    }

    /// Adds what another run of steps said of its own failures (the lines of its summary).
    pub fn nested(&mut self, lines: impl IntoIterator<Item = String>) {
        self.failures
            .extend(lines.into_iter().map(|l| format!("  in there: {l}")));
    }

    /// Repeats every failed step, or says that none failed; then the tests that failed in
    /// the JUnit files under `nextest` written since `since`.
    pub fn summary(&self, nextest: &Path, since: SystemTime) {
        if self.failures.is_empty() {
            say("every step passed");
            return;
        }
        say(&format!("{} step(s) failed:", self.failures.len()));
        for failure in &self.failures {
            eprintln!("    {failure}");
        }
        print_failed_tests(nextest, since);
    }
}

/// Names every test that failed in the JUnit files under `nextest` written since `since`,
/// with the start of its failure.
pub fn print_failed_tests(nextest: &Path, since: SystemTime) {
    for file in junit_files(nextest, since) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file
            .to_string_lossy()
            .split("/target/")
            .last()
            .unwrap_or_default()
            .to_owned();
        for (name, why) in failed_tests(&text) {
            eprintln!("    test failed: {name} ({shown})");
            for line in why {
                eprintln!("      | {line}");
            }
        }
    }
}

/// The `junit-*.xml` files under `dir` (at any depth) written since `since`, sorted.
fn junit_files(dir: &Path, since: SystemTime) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if meta.is_dir() {
                folders.push(path);
            } else if name.starts_with("junit-")
                && name.ends_with(".xml")
                && meta.modified().is_ok_and(|m| m >= since)
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Each failed test case of a JUnit file: `<classname> <name>`, and the start of its
/// failure: from its panic (else its stderr's end), at most 24 lines of 600 characters.
pub fn failed_tests(junit: &str) -> Vec<(String, Vec<String>)> {
    const LINES: usize = 24;
    const WIDTH: usize = 600;
    let Ok(doc) = roxmltree::Document::parse(junit) else {
        return vec![("(a JUnit file that is not XML)".into(), Vec::new())];
    };
    let mut failed = Vec::new();
    for case in doc.descendants().filter(|n| n.has_tag_name("testcase")) {
        let child = |tag: &str| case.children().find(|c| c.has_tag_name(tag));
        let Some(failure) = child("failure").or_else(|| child("error")) else {
            continue;
        };
        let stderr = child("system-err").and_then(|n| n.text()).unwrap_or("");
        let text = [failure.text().unwrap_or(""), stderr]
            .into_iter()
            .find(|t| t.contains("panicked at"))
            .unwrap_or(if stderr.is_empty() {
                failure
                    .text()
                    .or_else(|| failure.attribute("message"))
                    .unwrap_or("")
            } else {
                stderr
            });
        let kept: Vec<&str> = match text.find("panicked at") {
            Some(at) => text[at..].lines().take(LINES).collect(),
            None => {
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(LINES)..].to_vec()
            }
        };
        let why = kept
            .into_iter()
            .map(|l| l.chars().take(WIDTH).collect())
            .collect();
        let name = format!(
            "{} {}",
            case.attribute("classname").unwrap_or(""),
            case.attribute("name").unwrap_or("")
        );
        failed.push((name, why));
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_test_is_named_with_its_panic() {
        let junit = r#"<testsuites><testsuite name="s">
            <testcase classname="crate::bin" name="passes"/>
            <testcase classname="crate::bin" name="fails">
              <failure message="x">thread 'fails' panicked at src/a.rs:3:5:
boom</failure>
              <system-err>noise before
thread 'fails' panicked at src/a.rs:3:5:
boom
more</system-err>
            </testcase>
            <testcase classname="crate::bin" name="errs"><error message="timed out"/></testcase>
        </testsuite></testsuites>"#;
        let failed = failed_tests(junit);
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0].0, "crate::bin fails");
        assert_eq!(failed[0].1, ["panicked at src/a.rs:3:5:", "boom"]);
        assert_eq!(failed[1].0, "crate::bin errs");
        assert_eq!(failed[1].1, ["timed out"]);
    }

    #[test]
    fn the_first_failure_sets_the_status_and_every_failure_is_kept() {
        let mut steps = Steps::default();
        steps.record(0, "passed");
        assert_eq!(steps.status(), 0);
        steps.record(100, "a");
        steps.outcome(Err(anyhow::anyhow!("cause").context("broke")), "b");
        steps.run(Command::new("sh").args(["-c", "exit 3"]));
        assert_eq!(steps.status(), 100);
        assert_eq!(
            steps.failures,
            [
                "exit 100: a",
                "exit 1: b: broke: cause",
                "exit 3: sh -c exit 3"
            ]
        );
    }
}
