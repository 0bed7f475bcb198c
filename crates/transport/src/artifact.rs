//! What a run makes in shared places (segments in /dev/shm, private directories, unnamed
//! files), its names, and the life locks that tell a live creator's from an abandoned one
//! (the sweeps that remove the abandoned ones: [`crate::sweep`]).
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
pub(crate) const LIFE_LOCK_FILE: &str = ".alive";
/// A free lock on an artefact younger than this may be one whose creator has not locked
/// it yet (it creates, then locks): such an artefact is left to a later sweep.
pub(crate) const CREATION_GRACE: Duration = Duration::from_secs(1);
/// Artefacts without a life lock (made by an older ipc-matrix, or caught in the instant
/// between creation and locking) are left alone unless their creator's id is gone and they
/// are at least this old.
const UNLOCKED_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// Where POSIX shared memory segments appear as files on Linux.
pub(crate) const SHM_DIR: &str = "/dev/shm";

/// A Unix socket's name (`sun_path`) holds at most this many bytes before its NUL.
pub(crate) const MAX_SOCKET_PATH: usize = 107;

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
pub(crate) enum Liveness {
    /// Its creator holds the lock.
    Alive,
    /// The lock is free: its creator is gone.
    Abandoned,
    /// It has no lock to ask.
    Unknown,
}

pub(crate) fn liveness(lock_path: &Path) -> Liveness {
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
/// it to [`crate::remove_stale_artifacts`], which sees the lock released).
pub struct PrivateDir {
    path: PathBuf,
    _alive: LifeLock,
}

impl PrivateDir {
    /// A private directory in the temporary directory.
    pub fn create() -> io::Result<Self> {
        Self::create_at(std::env::temp_dir().join(unique_name()))
    }

    /// A private directory for Unix sockets whose names take `tail` bytes after the
    /// directory's path (the `/` included): in the temporary directory when they fit in
    /// a socket's name there, else in /dev/shm, whose path is short on every Linux. The
    /// sweep looks for private directories in both.
    pub fn for_sockets(tail: usize) -> io::Result<Self> {
        let name = unique_name();
        let temp = std::env::temp_dir();
        let parent = socket_parent(&temp, name.len(), tail).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a socket's name under {}/{name} or {SHM_DIR}/{name} would be more than the \
                     {MAX_SOCKET_PATH} bytes a socket's name holds; set TMPDIR to a shorter \
                     directory",
                    temp.display()
                ),
            )
        })?;
        let path = parent.join(name);
        Self::create_at(path.clone())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    fn create_at(path: PathBuf) -> io::Result<Self> {
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

/// Where a private directory named by `name_len` bytes goes whose sockets take `tail`
/// bytes after its path: `temp` when the sockets' names fit there, else /dev/shm when
/// they fit there; `None` when they fit in neither.
fn socket_parent(temp: &Path, name_len: usize, tail: usize) -> Option<PathBuf> {
    let fits = |parent: &Path| parent.as_os_str().len() + 1 + name_len + tail <= MAX_SOCKET_PATH;
    [temp, Path::new(SHM_DIR)]
        .into_iter()
        .find(|parent| fits(parent))
        .map(Path::to_path_buf)
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

pub(crate) fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|modified| {
            SystemTime::now()
                .duration_since(modified)
                .is_ok_and(|a| a >= age)
        })
}

pub(crate) fn creator_pid(name: &str) -> Option<u32> {
    name.strip_prefix(ARTIFACT_PREFIX)?
        .split('.')
        .next()?
        .parse()
        .ok()
}

pub(crate) fn owned_by_us(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == uid)
}

/// Whether `path` is a directory itself (not a link to one).
pub(crate) fn is_directory(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// The life lock of the private directory `dir` (see [`PrivateDir`]).
pub(crate) fn life_lock_of(dir: &Path) -> PathBuf {
    dir.join(LIFE_LOCK_FILE)
}

/// Whether a sweep may remove `path`, made by process `pid`, whose life lock is the file
/// `lock`: its lock is free and it is past its creation's grace, or it has no lock, its
/// creator's id is gone and it is a day old.
pub(crate) fn abandoned(path: &Path, lock: &Path, pid: u32) -> bool {
    match liveness(lock) {
        Liveness::Alive => false,
        Liveness::Abandoned => older_than(path, CREATION_GRACE),
        Liveness::Unknown => !process_alive(pid) && older_than(path, UNLOCKED_GRACE),
    }
}

/// The artefacts of ours in `dir` (named by [`unique_name`], owned by this user), with
/// their creators' ids.
pub(crate) fn ours_in(dir: &Path) -> Vec<(PathBuf, u32)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = creator_pid(&entry.file_name().to_string_lossy())?;
            let path = entry.path();
            owned_by_us(&path).then_some((path, pid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_stay_in_the_temporary_directory_while_their_names_fit() {
        let name = unique_name().len();
        let tmp = Some(PathBuf::from("/tmp"));
        let shm = Some(PathBuf::from(SHM_DIR));
        let tail = MAX_SOCKET_PATH - "/tmp/".len() - name;
        assert_eq!(socket_parent(Path::new("/tmp"), name, tail), tmp);
        let long = PathBuf::from("/tmp").join("d".repeat(60));
        assert_eq!(socket_parent(&long, name, 20), shm);
        assert_eq!(socket_parent(&long, name, 10), Some(long.clone()));
        // Too long for /dev/shm too: no place, and the caller says so.
        let over = MAX_SOCKET_PATH - "/dev/shm/".len() - name + 1;
        assert_eq!(socket_parent(&long, name, over), None);
        assert_eq!(socket_parent(Path::new("/tmp"), name, tail + 1), None);
    }

    #[test]
    fn a_socket_directory_under_a_long_temporary_directory_holds_a_socket() {
        // TMPDIR cannot be changed in a threaded test process: the placement is checked
        // above; this checks a directory /dev/shm holds works for a socket.
        let dir = PrivateDir::create_at(Path::new(SHM_DIR).join(unique_name())).unwrap();
        let socket = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::os::unix::net::UnixStream::connect(&socket).unwrap();
        drop(listener);
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
    }
}
