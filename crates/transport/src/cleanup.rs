//! Names of everything a run leaves in shared places, and removal of what crashed runs
//! left behind. Every name carries the creating process id, so a later run can tell the
//! leftovers of dead processes from the live ones of a parallel run.

use crate::platform::{current_pid, process_alive};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of every shared-memory segment and temporary directory we create.
pub const ARTIFACT_PREFIX: &str = "ipc-matrix.";

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A fresh name `ipc-matrix.<pid>.<n>.<nanos>` unique within and across processes.
pub fn unique_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{ARTIFACT_PREFIX}{}.{}.{nanos:08x}",
        current_pid(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a new directory of mode 0700 under the system temporary directory.
pub fn private_temp_dir() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(unique_name());
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// A [`private_temp_dir`] removed with everything in it when dropped (a crash leaves it to
/// [`remove_stale_artifacts`]).
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    pub fn create() -> io::Result<Self> {
        Ok(Self {
            path: private_temp_dir()?,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What [`remove_stale_artifacts`] removed, for the user to see.
#[derive(Debug, Default)]
pub struct Removed {
    pub paths: Vec<PathBuf>,
}

/// Removes segments in /dev/shm and directories in the temporary directory that were
/// made by processes that no longer run. Those of live processes are left alone.
pub fn remove_stale_artifacts() -> Removed {
    let mut removed = Removed::default();
    for (dir, is_segment) in [
        (Path::new("/dev/shm").to_path_buf(), true),
        (std::env::temp_dir(), false),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = creator_pid(&name) else {
                continue;
            };
            if process_alive(pid) || !owned_by_us(&entry.path()) {
                continue;
            }
            let gone = if is_segment {
                std::fs::remove_file(entry.path()).is_ok()
            } else {
                std::fs::remove_dir_all(entry.path()).is_ok()
            };
            if gone {
                removed.paths.push(entry.path());
            }
        }
    }
    removed
}

fn creator_pid(name: &str) -> Option<u32> {
    name.strip_prefix(ARTIFACT_PREFIX)?
        .split('.')
        .next()?
        .parse()
        .ok()
}

fn owned_by_us(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == uid)
}
