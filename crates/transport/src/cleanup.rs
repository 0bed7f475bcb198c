//! Names of everything a run leaves in shared places, and removal of what crashed runs
//! left behind.
//!
//! Liveness is an advisory lock, not a process id: the creator of a segment or a private
//! directory holds a lock on it ([`LifeLock`]) for as long as it exists, and the kernel
//! drops that lock when the creator dies, however it dies. A sweep removes only what it
//! can lock itself. A process id would not do: in another PID namespace (a container,
//! `unshare -p`) the creator's id means nothing, and a live run's files were removed.

use crate::platform::{current_pid, process_alive};
use std::fs::{File, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The file inside a private directory whose lock says its creator is alive.
const LIFE_LOCK_FILE: &str = ".alive";
/// A free lock on an artefact younger than this may be one whose creator has not locked
/// it yet (it creates, then locks): such an artefact is left to a later sweep.
const CREATION_GRACE: Duration = Duration::from_secs(1);
/// Artefacts without a life lock (made by an older ipc-matrix, or caught in the instant
/// between creation and locking) are left alone unless their creator's id is gone and they
/// are at least this old.
const UNLOCKED_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

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

/// A shared advisory lock held on an artefact by its creator for the artefact's life.
pub(crate) struct LifeLock {
    _file: File,
}

impl LifeLock {
    /// Locks `path` (which must exist) for the life of the returned guard.
    pub(crate) fn hold(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        file.lock_shared()?;
        Ok(Self { _file: file })
    }
}

/// What a sweep may do with an artefact, judged by its life lock.
enum Liveness {
    /// Its creator holds the lock.
    Alive,
    /// The lock is free: its creator is gone.
    Abandoned,
    /// It has no lock to ask.
    Unknown,
}

fn liveness(lock_path: &Path) -> Liveness {
    let Ok(file) = File::open(lock_path) else {
        return Liveness::Unknown;
    };
    match file.try_lock() {
        Ok(()) => Liveness::Abandoned,
        Err(TryLockError::WouldBlock) => Liveness::Alive,
        Err(TryLockError::Error(_)) => Liveness::Unknown,
    }
}

/// A new directory of mode 0700 under the system temporary directory, locked by its
/// creator ([`LifeLock`]) and removed with everything in it when dropped (a crash leaves
/// it to [`remove_stale_artifacts`], which sees the lock released).
pub struct PrivateDir {
    path: PathBuf,
    _alive: LifeLock,
}

impl PrivateDir {
    pub fn create() -> io::Result<Self> {
        let path = std::env::temp_dir().join(unique_name());
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let lock = path.join(LIFE_LOCK_FILE);
        let alive = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&lock)
            .and_then(|_| LifeLock::hold(&lock));
        match alive {
            Ok(alive) => Ok(Self {
                path,
                _alive: alive,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                Err(e)
            }
        }
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

/// A new file without a name, readable and writable by this process alone: nothing of it
/// is ever on disk for a crash to leave behind. Its space is freed when its last
/// descriptor closes, however the process ends (`kill -9` included).
///
/// It is made with `O_TMPFILE` in the system temporary directory (mode 0600, no directory
/// entry at any moment). Where the file system cannot (`EOPNOTSUPP`, or `EISDIR` from a
/// kernel without `O_TMPFILE`), it is created in a [`PrivateDir`] and unlinked at once, and
/// the directory removed: a crash in those few system calls leaves a locked private
/// directory, which the next run's sweep removes.
///
/// Code that must open it by a path (a library that opens its own file) can use
/// `/proc/self/fd/<descriptor>`, which opens this same file.
pub fn unnamed_file() -> io::Result<File> {
    let dir = std::env::temp_dir();
    let made = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(&dir);
    match made {
        Ok(file) => Ok(file),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
            let private = PrivateDir::create()?;
            let path = private.path().join("unnamed");
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            std::fs::remove_file(&path)?;
            drop(private);
            Ok(file)
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("creating an unnamed file in {}: {e}", dir.display()),
        )),
    }
}

/// What [`remove_stale_artifacts`] removed, for the user to see.
#[derive(Debug, Default)]
pub struct Removed {
    pub paths: Vec<PathBuf>,
}

/// Removes segments in /dev/shm and directories in the temporary directory whose creators
/// are gone: their life lock is free. Those of live processes, in this PID namespace or
/// any other, are left alone. A directory that was the root of an iceoryx2 channel takes
/// its segments with it (`iox2.<hash of its name>.*` in /dev/shm, which carry no lock of
/// their own and are never judged alone): see `iceoryx2::remove_run`.
pub fn remove_stale_artifacts() -> Removed {
    remove_stale_artifacts_in(Path::new("/dev/shm"), &std::env::temp_dir())
}

/// [`remove_stale_artifacts`] over the given folders (tests sweep folders of their own).
pub fn remove_stale_artifacts_in(segments: &Path, temp: &Path) -> Removed {
    let mut removed = Removed::default();
    for (dir, is_segment) in [(segments, true), (temp, false)] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = creator_pid(&name) else {
                continue;
            };
            if !owned_by_us(&path) {
                continue;
            }
            let lock = if is_segment {
                path.clone()
            } else {
                path.join(LIFE_LOCK_FILE)
            };
            let abandoned = match liveness(&lock) {
                Liveness::Alive => false,
                Liveness::Abandoned => older_than(&path, CREATION_GRACE),
                Liveness::Unknown => !process_alive(pid) && older_than(&path, UNLOCKED_GRACE),
            };
            if !abandoned {
                continue;
            }
            let gone = if is_segment {
                std::fs::remove_file(&path).is_ok()
            } else {
                // A private directory may be the root of an iceoryx2 channel, whose
                // segments are in /dev/shm under a prefix of its own: they go first.
                removed
                    .paths
                    .extend(crate::iceoryx2::remove_run(&path, segments));
                std::fs::remove_dir_all(&path).is_ok()
            };
            if gone {
                removed.paths.push(path);
            }
        }
    }
    remove_stale_iceoryx2(segments, &mut removed);
    removed
}

/// Removes the /dev/shm names of iceoryx2 channels whose creator is gone although their
/// root directory is not there for the sweep above to find (a sweep of an older
/// ipc-matrix removed it): the names of a prefix go when its `<prefix>alive` lock is
/// free, or when there is no such file (it is made before any other name of the prefix
/// and removed with them), once the names are over a second old.
fn remove_stale_iceoryx2(segments: &Path, removed: &mut Removed) {
    let Ok(entries) = std::fs::read_dir(segments) else {
        return;
    };
    let mut by_prefix: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(prefix) = crate::iceoryx2::prefix_in(&name) {
            if owned_by_us(&entry.path()) {
                by_prefix
                    .entry(prefix.to_string())
                    .or_default()
                    .push(entry.path());
            }
        }
    }
    for (prefix, paths) in by_prefix {
        let lock = segments.join(format!("{prefix}{}", crate::iceoryx2::ALIVE));
        let abandoned = match liveness(&lock) {
            Liveness::Alive => false,
            Liveness::Abandoned | Liveness::Unknown => {
                paths.iter().all(|p| older_than(p, CREATION_GRACE))
            }
        };
        if abandoned {
            for path in paths {
                if std::fs::remove_file(&path).is_ok() {
                    removed.paths.push(path);
                }
            }
        }
    }
}

fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|modified| {
            SystemTime::now()
                .duration_since(modified)
                .is_ok_and(|a| a >= age)
        })
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
