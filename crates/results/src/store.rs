//! Where results live: `<out>/<triple>@<runner>/<profile>/cells/<cell>.json`, each written
//! to a temporary file and renamed, so a crash never leaves half a result. Keeping profiles
//! apart means a report never mixes a quick run's cells with a full run's.

use crate::schema::{CellResult, MAX_RESULT_FILE_BYTES, RESULT_SCHEMA_VERSION};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// `<triple>@native` or `<triple>@qemu`, the triple of lowercase letters, digits, `_`,
/// `.` and `-`: the name of a leg's results folder, and nothing that leaves it.
pub fn is_leg_name(name: &str) -> bool {
    let Some((triple, runner)) = name.split_once('@') else {
        return false;
    };
    matches!(runner, "native" | "qemu")
        && !triple.is_empty()
        && !triple.starts_with('.')
        && triple
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}

/// The folder of one leg's results for one profile, where its reports are written too.
pub fn run_dir(out: &Path, leg: &str, profile: &str) -> PathBuf {
    out.join(leg).join(profile)
}

/// `echo::tcp::200B` -> `echo.tcp.200B.json`.
pub fn cell_file_name(cell_id: &str) -> String {
    format!("{}.json", cell_id.replace("::", "."))
}

/// Set by nextest for every test process of one `cargo nextest run`: the cells of one
/// nextest run share it.
pub const NEXTEST_RUN_ID_ENV: &str = "NEXTEST_RUN_ID";

/// This process's run: nextest's run id when nextest started it, else one made once per
/// process from the time and the process id. Every result this process writes carries it.
pub fn run_id() -> &'static str {
    static RUN_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUN_ID.get_or_init(|| match std::env::var(NEXTEST_RUN_ID_ENV) {
        Ok(id) if !id.trim().is_empty() => format!("nextest-{}", id.trim()),
        _ => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            format!(
                "{}-{:09}-{}",
                now.as_secs(),
                now.subsec_nanos(),
                std::process::id()
            )
        }
    })
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so
/// a reader never sees half a file; the temporary file is removed when anything fails.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_all_or_none(&[(path, bytes)])
}

/// What ends the name of a temporary file while it is written: `.tmp<pid>`.
const TEMPORARY_MARK: &str = ".tmp";

/// `report.md` -> `report.md.tmp<pid>`, not `report.tmp<pid>`: files may share a stem.
fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!("{TEMPORARY_MARK}{}", std::process::id()));
    path.with_file_name(name)
}

/// True for a name [`temporary_path`] makes: `<name>.tmp<digits>`.
fn is_temporary_name(name: &str) -> bool {
    name.rsplit_once(TEMPORARY_MARK).is_some_and(|(stem, pid)| {
        !stem.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Writes every file to a temporary name first and renames them only when all were
/// written: on a full disk no file is updated (and no temporary file stays), so files
/// that belong together (a report's three) never describe two different runs.
///
/// Each temporary file is locked (an advisory `flock`) by its writer from its creation
/// until it is renamed, so [`remove_stale_temporary_files`] can tell one whose writer
/// crashed (the kernel released its lock) from one being written.
pub fn write_all_or_none(files: &[(&Path, &[u8])]) -> io::Result<()> {
    let remove_all = || {
        for (path, _) in files {
            let _ = std::fs::remove_file(temporary_path(path));
        }
    };
    let located =
        |path: &Path, e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    // A rename within one folder needs no space; it fails only when something is in the
    // way, which is checked before anything is renamed.
    if let Some((path, _)) = files.iter().find(|(path, _)| path.is_dir()) {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{}: a folder is in the way", path.display()),
        ));
    }
    // The locks are held until every file is renamed.
    let mut held = Vec::with_capacity(files.len());
    for (path, bytes) in files {
        match write_locked(&temporary_path(path), bytes) {
            Ok(file) => held.push(file),
            Err(e) => {
                remove_all();
                return Err(located(path, e));
            }
        }
    }
    for (path, _) in files {
        if let Err(e) = std::fs::rename(temporary_path(path), path) {
            remove_all();
            return Err(located(path, e));
        }
    }
    Ok(())
}

/// Creates `path`, locks it, writes `bytes`; returns it still locked.
fn write_locked(path: &Path, bytes: &[u8]) -> io::Result<std::fs::File> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => io::Error::new(
            io::ErrorKind::WouldBlock,
            "another writer of this process holds the temporary file",
        ),
        std::fs::TryLockError::Error(e) => e,
    })?;
    file.write_all(bytes)?;
    Ok(file)
}

/// A temporary file modified more recently than this may belong to a writer between
/// creating and locking it: it is left to a later sweep.
const TEMPORARY_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Removes, from `dir` (not below it), the temporary files of [`write_all_or_none`]
/// (`<name>.tmp<pid>`) whose writers are gone: a crash during a write leaves one. A file
/// is removed only when its writer's lock is free (the kernel releases it with the
/// writer, however it ends) and it was last modified over a second ago; files of any
/// other name are kept. Returns the paths removed.
///
/// Meant for a folder this process holds alone (`ipc-matrix run` calls it once it holds
/// the results folder's lock exclusively); the lock on each file keeps it safe even
/// against a writer that does not take the folder's lock.
pub fn remove_stale_temporary_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_temporary_name) {
            continue;
        }
        let path = entry.path();
        let old_file = std::fs::symlink_metadata(&path).is_ok_and(|m| {
            m.is_file()
                && m.modified().is_ok_and(|modified| {
                    std::time::SystemTime::now()
                        .duration_since(modified)
                        .is_ok_and(|age| age >= TEMPORARY_GRACE)
                })
        });
        if !old_file {
            continue;
        }
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        // Held: its writer is alive. Taken: its writer is gone, and while this lock is
        // held no writer of that name can be between creating and locking it.
        if file.try_lock().is_ok() && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Writes one result under `<out>/<leg>/<profile>/cells/` and returns its path.
pub fn write_result(out: &Path, result: &CellResult) -> io::Result<PathBuf> {
    for (what, name) in [
        ("leg", result.leg.as_str()),
        ("profile", &result.cell.profile),
    ] {
        one_folder(what, name)?;
    }
    let dir = run_dir(out, &result.leg, &result.cell.profile).join("cells");
    std::fs::create_dir_all(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let path = dir.join(cell_file_name(&result.cell.id));
    let json = serde_json::to_vec_pretty(result).map_err(io::Error::other)?;
    // The error names the file already.
    write_atomically(&path, &json)?;
    Ok(path)
}

/// A leg or profile names one folder below `out`: never a path that leaves it, a hidden
/// folder, or a name with a control character in it.
fn one_folder(what: &str, name: &str) -> io::Result<()> {
    let fits = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    match fits {
        true => Ok(()),
        false => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the {what} {:?} is not a folder name of letters, digits, `-`, `_`, `.` and `@`; no result is stored under it",
                crate::printable(name)
            ),
        )),
    }
}

/// The results of one run, read from a run folder.
#[derive(Debug, Clone)]
pub struct RunResults {
    /// The run judged: the one asked for, else the one that finished last.
    pub run_id: String,
    /// Its results, sorted by cell id.
    pub results: Vec<CellResult>,
    /// Result files in the folder from other runs, left out.
    pub other_runs: usize,
    /// Result files of another result schema ([`RESULT_SCHEMA_VERSION`]), left out: an
    /// older build wrote them, and their cells must be run again to be judged.
    pub other_schema: usize,
}

/// Reads the results of one run from a run folder ([`run_dir`]): the run `wanted`, or
/// the one whose result finished last. Results of other runs, and of another result
/// schema, are counted, never mixed in.
/// A result whose leg or profile contradicts its folder, or two results of one cell in
/// one run, are errors that name the files.
pub fn read_run(run_dir: &Path, wanted: Option<&str>) -> io::Result<RunResults> {
    let cells = run_dir.join("cells");
    let entries = std::fs::read_dir(&cells)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", cells.display())))?;
    let (folder_profile, folder_leg) = (
        run_dir.file_name().and_then(|n| n.to_str()),
        run_dir
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str()),
    );
    let mut current: Vec<(PathBuf, CellResult)> = Vec::new();
    let mut other_versions = 0;
    let located =
        |e: io::Error, path: &Path| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    for entry in entries {
        let path = entry.map_err(|e| located(e, &cells))?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let bytes = read_bounded(&path, MAX_RESULT_FILE_BYTES, "a result file")?;
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(u64::from(RESULT_SCHEMA_VERSION)) {
            other_versions += 1;
            continue;
        }
        let result: CellResult = serde_json::from_value(value)
            .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
        let contradiction = match (folder_leg, folder_profile) {
            (Some(leg), _) if leg != result.leg => Some(format!("leg {}", result.leg)),
            (_, Some(profile)) if profile != result.cell.profile => {
                Some(format!("profile {}", result.cell.profile))
            }
            _ => None,
        };
        if let Some(what) = contradiction {
            return Err(io::Error::other(format!(
                "{}: this result says {what}, but it is stored under {}; it was moved or edited",
                path.display(),
                run_dir.display()
            )));
        }
        current.push((path, result));
    }
    let run_id = match wanted {
        Some(id) => id.to_string(),
        None => current
            .iter()
            .max_by(|(_, a), (_, b)| {
                (a.finished_at_unix, &a.run_id).cmp(&(b.finished_at_unix, &b.run_id))
            })
            .map(|(_, r)| r.run_id.clone())
            .unwrap_or_default(),
    };
    let total = current.len();
    current.retain(|(_, r)| r.run_id == run_id);
    current.sort_by(|(_, a), (_, b)| a.cell.id.cmp(&b.cell.id));
    if let Some(pair) = current
        .windows(2)
        .find(|w| w[0].1.cell.id == w[1].1.cell.id)
    {
        return Err(io::Error::other(format!(
            "{} and {} both hold cell {} of run {run_id}",
            pair[0].0.display(),
            pair[1].0.display(),
            pair[0].1.cell.id
        )));
    }
    Ok(RunResults {
        run_id,
        other_runs: total - current.len(),
        other_schema: other_versions,
        results: current.into_iter().map(|(_, r)| r).collect(),
    })
}

/// Reads the results of the run that finished last in a run folder ([`read_run`]).
pub fn read_results(run_dir: &Path) -> io::Result<Vec<CellResult>> {
    read_run(run_dir, None).map(|run| run.results)
}

/// The bytes of `path`, refused with an error naming the file and the bound when it holds
/// more than `bound` bytes (`what` says what it is): the size is checked before anything
/// is read, and the read stops one byte past the bound, should the file grow meanwhile.
pub fn read_bounded(path: &Path, bound: u64, what: &str) -> io::Result<Vec<u8>> {
    let located = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let too_large = |size: u64| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {size} bytes, more than the {bound} bytes ({}) {what} may hold; it was not written by ipc-matrix",
                path.display(),
                mebibytes(bound)
            ),
        )
    };
    let file = open_regular(path).map_err(located)?;
    let size = file.metadata().map_err(located)?.len();
    if size > bound {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(bound + 1)
        .read_to_end(&mut bytes)
        .map_err(located)?;
    if bytes.len() as u64 > bound {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file that is not a regular one is, in words (`a FIFO`), as [`open_regular`] says.
pub use ipc_matrix_count_window::describe_file_kind;
/// Opens `path` for reading if it is a regular file; a FIFO, socket or device is refused
/// before a byte is read (the same check as the count files').
pub use ipc_matrix_count_window::open_regular_file as open_regular;

/// `16777216` -> `16 MiB`.
fn mebibytes(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_where_a_result_belongs_is_refused_not_waited_on() {
        let dir = std::env::temp_dir().join(format!("results-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("cell.json");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string naming a path in the temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let error = read_bounded(&fifo, 1 << 20, "a result").unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        let text = error.to_string();
        assert!(
            text.contains("cell.json") && text.contains("a FIFO"),
            "{text}"
        );
    }

    #[test]
    fn temporary_names_are_recognised_and_nothing_else() {
        let made = temporary_path(Path::new("/x/echo.tcp.200B.json"));
        let name = made.file_name().unwrap().to_str().unwrap();
        assert!(is_temporary_name(name), "{name}");
        assert!(is_temporary_name("report.md.tmp12"));
        assert!(is_temporary_name(".write-check.tmp7"));
        for other in [
            "echo.tcp.200B.json",
            "notes.tmp",
            ".tmp12",
            "a.tmp12x",
            "a.tmp-3",
            "keep.tmpfile",
        ] {
            assert!(!is_temporary_name(other), "{other}");
        }
    }
}
