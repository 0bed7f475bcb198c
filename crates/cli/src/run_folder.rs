//! A run's hold on its results folder (`<out>/<leg>/<profile>`): checked writable before
//! any cell runs, and locked, so two runs never write into one folder unnoticed.
//!
//! `ipc-matrix run` holds the lock exclusively for the whole run. Cells run by nextest hold
//! it shared while they store their result: the processes of one nextest run share the
//! folder, and a CLI run into the same folder is refused rather than mixed in. A crash
//! releases the lock with the process (it is an advisory `flock`).
//!
//! Every result in `cells/` is written by a holder of the lock, and the write check is made
//! once the lock is held. So once `ipc-matrix run` holds it exclusively, no other writer of
//! results is active, and the temporary files (`<name>.tmp<pid>`) a crashed writer left
//! are removed then ([`remove_stale_temporary_files`], which also asks each file's own
//! lock: reports are written into the folder by `ipc-matrix report` without the folder's
//! lock).

use ipc_matrix_results::remove_stale_temporary_files;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = ".lock";

pub struct RunFolder {
    dir: PathBuf,
    removed: Vec<PathBuf>,
    _lock: File,
}

impl RunFolder {
    /// Claims the folder of `leg` and `profile` under `out` for one run, alone, and removes
    /// the temporary files crashed writers left in it and in its `cells/`.
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

    /// The temporary files of crashed writers removed when the folder was claimed.
    pub fn removed(&self) -> &[PathBuf] {
        &self.removed
    }

    fn hold(out: &Path, leg: &str, profile: &str, alone: bool) -> io::Result<Self> {
        let dir = ipc_matrix_results::run_dir(out, leg, profile);
        let cells = dir.join("cells");
        let located = |e: io::Error, path: &Path, doing: &str| {
            io::Error::new(e.kind(), format!("cannot {doing} {}: {e}", path.display()))
        };
        std::fs::create_dir_all(&cells).map_err(|e| located(e, &cells, "create"))?;
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
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "another ipc-matrix run is writing results into {}; wait for it to finish, or give this run another --out",
                    dir.display()
                ),
            )),
            Err(TryLockError::Error(e)) => return Err(located(e, &path, "lock")),
        }
        // Writable now, not only after every cell has run. The check's name is this
        // process's own: the processes of a nextest run check at the same time.
        let probe = cells.join(format!(".write-check-{}", std::process::id()));
        ipc_matrix_results::write_atomically(&probe, b"ok")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| located(e, &cells, "write results into"))?;
        let mut removed = Vec::new();
        if alone {
            for folder in [&dir, &cells] {
                removed.extend(
                    remove_stale_temporary_files(folder)
                        .map_err(|e| located(e, folder, "clean"))?,
                );
            }
        }
        Ok(Self {
            dir,
            removed,
            _lock: lock,
        })
    }
}
