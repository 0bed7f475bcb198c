//! `ipc-matrix history`: several runs' `results.json` (for example the artifacts of
//! successive commits) as per-cell trends: `history.md` and `history.html`.

use anyhow::{bail, Context, Result};
use ipc_matrix::{exit_code, say, say_always};
use ipc_matrix_report::history::{self, Run, StoredReport, READABLE_SCHEMAS};
use std::path::{Path, PathBuf};

/// Folders deeper than this below a given path are not searched (an artifact holds
/// `ipc-matrix/<leg>/<profile>/results.json`).
const MAX_DEPTH: usize = 8;
/// A `results.json` larger than this is refused rather than read into memory: the full
/// profile's, with every round trip, is tens of megabytes.
const MAX_REPORT_BYTES: u64 = 1 << 30;

pub fn run(paths: &[PathBuf], out: &Path, legs: &[String]) -> Result<u8> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_file() {
            files.push(path.clone());
        } else if path.is_dir() {
            find_reports(path, 0, &mut files)
                .with_context(|| format!("searching {}", path.display()))?;
        } else {
            bail!("{}: no such file or folder", path.display());
        }
    }
    // One file reached by two paths (`out` and `./out`) is one file.
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .map(|f| std::fs::canonicalize(&f).unwrap_or(f))
        .collect();
    files.sort();
    files.dedup();
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for file in files {
        let report = read_report(&file)?;
        if !READABLE_SCHEMAS.contains(&report.schema_version) {
            skipped.push(format!(
                "{}: report schema {}, history reads {READABLE_SCHEMAS:?}",
                file.display(),
                report.schema_version
            ));
            continue;
        }
        if !legs.is_empty() && !legs.contains(&report.leg) {
            continue;
        }
        runs.push(Run::new(file, report));
    }
    if runs.is_empty() {
        bail!(
            "no results.json of a run under {}{}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if legs.is_empty() {
                String::new()
            } else {
                format!(" for {}", legs.join(", "))
            }
        );
    }
    let count = runs.len();
    let (legs, duplicates) = history::arrange(runs);
    if duplicates > 0 {
        skipped.push(format!(
            "{duplicates} results.json of a run already read (the same run id) were read once"
        ));
    }
    let (md, page) = history::write(out, &legs, &skipped)
        .with_context(|| format!("writing the history into {}", out.display()))?;
    for note in &skipped {
        say!("note: {note}");
    }
    let plural = |n: usize, word: &str| match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    };
    say_always!(
        "history of {} over {}: {} and {}",
        plural(count, "run"),
        plural(legs.len(), "leg"),
        md.display(),
        page.display()
    );
    Ok(exit_code::OK)
}

/// Every `results.json` under `dir`, not following symbolic links.
fn find_reports(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            find_reports(&entry.path(), depth + 1, found)?;
        } else if kind.is_file() && entry.file_name() == "results.json" {
            found.push(entry.path());
        }
    }
    Ok(())
}

fn read_report(file: &Path) -> Result<StoredReport> {
    let size = std::fs::metadata(file)
        .with_context(|| format!("{}", file.display()))?
        .len();
    if size > MAX_REPORT_BYTES {
        bail!(
            "{}: {size} bytes, more than a report's {MAX_REPORT_BYTES}; not a results.json of ipc-matrix",
            file.display()
        );
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a results.json of `ipc-matrix report` (written by `ipc-matrix report` or `run`)",
            file.display()
        )
    })
}
