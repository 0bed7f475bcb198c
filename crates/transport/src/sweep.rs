//! The sweep: removes what crashed runs left behind, each kind of artefact judged by its
//! own life lock ([`crate::artifact`]): shared-memory segments, private directories (with
//! the iceoryx2 channel whose root one was), and iceoryx2's names in /dev/shm whose root
//! is already gone.

use crate::artifact::{abandoned, is_directory, life_lock_of, ours_in, SHM_DIR};
use std::path::{Path, PathBuf};

/// What [`remove_stale_artifacts`] removed, for the user to see.
#[derive(Debug, Default)]
pub struct Removed {
    pub paths: Vec<PathBuf>,
}

/// Removes segments in /dev/shm and private directories in the temporary directory and in
/// /dev/shm (where those for sockets go when the temporary directory's path is too long)
/// whose creators are gone: their life lock is free. Those of live processes, in this PID namespace or
/// any other, are left alone. A directory that was the root of an iceoryx2 channel takes
/// its segments with it (`iox2.<hash of its name>.*` in /dev/shm, which carry no lock of
/// their own and are never judged alone): see `iceoryx2::sweep::remove_run`.
pub fn remove_stale_artifacts() -> Removed {
    remove_stale_artifacts_in(Path::new(SHM_DIR), &std::env::temp_dir())
}

/// [`remove_stale_artifacts`] over the given folders (tests sweep folders of their own).
pub fn remove_stale_artifacts_in(segments: &Path, temp: &Path) -> Removed {
    let mut removed = Removed::default();
    crate::shm::sweep::remove_stale_segments(segments, &mut removed.paths);
    for parent in [temp, segments] {
        remove_stale_private_dirs(parent, segments, &mut removed.paths);
    }
    crate::iceoryx2::sweep::remove_orphans(segments, &mut removed.paths);
    removed
}

/// Removes the private directories in `parent` whose creators are gone. One may be the
/// root of an iceoryx2 channel, whose segments are in `segments` under a prefix of its
/// own: they go first.
fn remove_stale_private_dirs(parent: &Path, segments: &Path, removed: &mut Vec<PathBuf>) {
    for (path, pid) in ours_in(parent) {
        if !is_directory(&path) || !abandoned(&path, &life_lock_of(&path), pid) {
            continue;
        }
        removed.extend(crate::iceoryx2::sweep::remove_run(&path, segments));
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
}
