//! `ipc-matrix history`: several runs' `results.json` (for example the artifacts of
//! successive commits) as per-cell trends: `history.md` and `history.html`.

use crate::{exit_code, say, say_always};
use anyhow::{bail, Context, Result};
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
    let mut skipped = Vec::new();
    for path in paths {
        // The path itself, not what a link names: a link to a file or folder is
        // followed, anything else is named for what it is.
        let kind = match std::fs::metadata(path) {
            Ok(metadata) => metadata.file_type(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{}: no such file or folder", path.display())
            }
            Err(e) => bail!("{}: {e}", path.display()),
        };
        if kind.is_file() {
            files.push(path.clone());
        } else if kind.is_dir() {
            let mut too_deep = Vec::new();
            find_reports(path, 0, &mut files, &mut too_deep)
                .with_context(|| format!("searching {}", path.display()))?;
            if let Some(first) = too_deep.first() {
                skipped.push(format!(
                    "{} folder(s) more than {MAX_DEPTH} levels below {} were not searched, the first {}; give a deeper folder to read them",
                    too_deep.len(),
                    path.display(),
                    first.display()
                ));
            }
        } else {
            bail!(
                "{}: {}, not a results.json or a folder of them",
                path.display(),
                ipc_matrix_results::describe_file_kind(kind)
            );
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
    let mut other_legs = 0;
    for file in files {
        let (report, digest) = match read_report(&file)? {
            Read::Report(report, digest) => (report, digest),
            Read::OtherSchema(schema) => {
                skipped.push(format!(
                    "{}: report schema {schema}, history reads {READABLE_SCHEMAS:?}; left out",
                    file.display(),
                ));
                continue;
            }
        };
        if !legs.is_empty() && !legs.contains(&report.leg) {
            other_legs += 1;
            continue;
        }
        let mut run = Run::new(file, *report);
        run.digest = Some(digest);
        runs.push(run);
    }
    if runs.is_empty() {
        let mut why = format!(
            "no results.json of a run that history reads under {}{}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if legs.is_empty() {
                String::new()
            } else {
                format!(" for {} ({other_legs} of other legs)", legs.join(", "))
            }
        );
        for note in &skipped {
            why.push_str(&format!("\n  {note}"));
        }
        bail!(why);
    }
    let count = runs.len();
    let (legs, duplicates) = history::arrange(runs);
    let count = count - duplicates.len();
    skipped.extend(duplicates);
    let (md, page) = history::write(out, &legs, &skipped)
        .with_context(|| format!("writing the history into {}", out.display()))?;
    for note in &skipped {
        say!("note: {}", ipc_matrix_results::printable(note));
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

/// Every `results.json` under `dir`, not following symbolic links; the folders below the
/// depth limit go to `too_deep`, for a note.
fn find_reports(
    dir: &Path,
    depth: usize,
    found: &mut Vec<PathBuf>,
    too_deep: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        too_deep.push(dir.to_path_buf());
        return Ok(());
    }
    let mut entries = std::fs::read_dir(dir)?.collect::<std::io::Result<Vec<_>>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let kind = entry.file_type()?;
        if kind.is_dir() {
            find_reports(&entry.path(), depth + 1, found, too_deep)?;
        } else if kind.is_file() && entry.file_name() == "results.json" {
            found.push(entry.path());
        }
    }
    Ok(())
}

/// A results.json history reads, with a digest of its bytes, or the schema of one it
/// does not.
enum Read {
    Report(Box<StoredReport>, u64),
    OtherSchema(u32),
}

/// The schema, read before the rest: a report of another schema may have another layout.
#[derive(serde::Deserialize)]
struct Schema {
    schema_version: u32,
}

fn read_report(file: &Path) -> Result<Read> {
    // A regular file of bounded size only: a FIFO is refused, not waited on.
    let bytes = ipc_matrix_results::read_bounded(file, MAX_REPORT_BYTES, "a results.json")?;
    let not_a_report = || {
        format!(
            "{}: not a results.json of `ipc-matrix report` (written by `ipc-matrix report` or `run`)",
            file.display()
        )
    };
    let schema: Schema = serde_json::from_slice(&bytes).with_context(not_a_report)?;
    if !READABLE_SCHEMAS.contains(&schema.schema_version) {
        return Ok(Read::OtherSchema(schema.schema_version));
    }
    let report = serde_json::from_slice(&bytes).with_context(not_a_report)?;
    use std::hash::{Hash, Hasher};
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut digest);
    Ok(Read::Report(Box::new(report), digest.finish()))
}
