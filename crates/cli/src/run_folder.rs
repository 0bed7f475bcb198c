//! A run's hold on its results folder (`<out>/<leg>/<profile>`): checked writable before
//! any cell runs, and locked, so two runs never write into one folder unnoticed.
//!
//! `ipc-matrix run` holds the lock exclusively for the whole run. Cells run by nextest hold
//! it shared while they store their result: the processes of one nextest run share the
//! folder, and a CLI run into the same folder is refused rather than mixed in. A crash
//! releases the lock with the process (it is an advisory `flock`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = ".lock";

pub struct RunFolder {
    dir: PathBuf,
    _lock: File,
}

impl RunFolder {
    /// Claims the folder of `leg` and `profile` under `out` for one run, alone.
    pub fn claim(out: &Path, leg: &str, profile: &str) -> io::Result<Self> {
        Self::hold(out, leg, profile, true)
    }

    /// Shares the folder with the other processes of the same run (nextest's cells).
    pub fn share(out: &Path, leg: &str, profile: &str) -> io::Result<Self> {
        Self::hold(out, leg, profile, false)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn hold(out: &Path, leg: &str, profile: &str, alone: bool) -> io::Result<Self> {
        let dir = ipc_matrix_results::run_dir(out, leg, profile);
        let cells = dir.join("cells");
        let located = |e: io::Error, path: &Path, doing: &str| {
            io::Error::new(e.kind(), format!("cannot {doing} {}: {e}", path.display()))
        };
        std::fs::create_dir_all(&cells).map_err(|e| located(e, &cells, "create"))?;
        // Writable now, not only after every cell has run.
        let probe = cells.join(".write-check");
        ipc_matrix_results::write_atomically(&probe, b"ok")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| located(e, &cells, "write results into"))?;
        let path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| located(e, &path, "open the lock file"))?;
        let taken = if alone {
            lock.try_lock()
        } else {
            lock.try_lock_shared()
        };
        match taken {
            Ok(()) => Ok(Self { dir, _lock: lock }),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "another ipc-matrix run is writing results into {}; wait for it to finish, or give this run another --out",
                    dir.display()
                ),
            )),
            Err(TryLockError::Error(e)) => Err(located(e, &path, "lock")),
        }
    }
}
