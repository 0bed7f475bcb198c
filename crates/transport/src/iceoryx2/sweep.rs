//! iceoryx2's part of the sweep ([`crate::sweep`]): what a crashed run left of its
//! channels, found by their root directory or, once that is gone, by their prefix's lock.

use super::files::{config, node, prefix_in, prefix_of, remove_segments, segments_of, ALIVE};
use crate::artifact::{liveness, older_than, owned_by_us, Liveness, CREATION_GRACE};
use std::path::{Path, PathBuf};

/// Removes what a crashed run left of an iceoryx2 channel whose root was `dir` (its
/// creator gone, its lock free): first iceoryx2's own cleanup, run as any process of that
/// root and prefix would: creating a node cleans up after the dead nodes it finds
/// (`cleanup_dead_nodes_on_creation`: their ports leave their services, their segments and
/// connections go), and `try_cleanup_dead_nodes` asks again; then every /dev/shm name of
/// the prefix that is left (the node counter, which iceoryx2 never removes). The caller
/// removes the directory. Returns the /dev/shm paths that were there and are gone.
pub(crate) fn remove_run(dir: &Path, segments: &Path) -> Vec<PathBuf> {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let prefix = prefix_of(&name);
    let found = segments_of(segments, &prefix);
    if dir.join("nodes").is_dir() {
        if let Ok(config) = config(dir, &prefix) {
            if let Ok(node) = node(&config) {
                let _ = node.try_cleanup_dead_nodes();
            }
        }
    }
    remove_segments(segments, &prefix);
    found.into_iter().filter(|path| !path.exists()).collect()
}

/// Removes the /dev/shm names of iceoryx2 channels whose creator is gone although their
/// root directory is not there for the sweep above to find (a sweep of an older
/// ipc-matrix removed it): the names of a prefix go when its `<prefix>alive` lock is
/// free, or when there is no such file (it is made before any other name of the prefix
/// and removed with them), once the names are over a second old.
pub(crate) fn remove_orphans(segments: &Path, removed: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(segments) else {
        return;
    };
    let mut by_prefix: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(prefix) = prefix_in(&name) {
            if owned_by_us(&entry.path()) {
                by_prefix
                    .entry(prefix.to_string())
                    .or_default()
                    .push(entry.path());
            }
        }
    }
    for (prefix, paths) in by_prefix {
        let lock = segments.join(format!("{prefix}{}", ALIVE));
        let abandoned = match liveness(&lock) {
            Liveness::Alive => false,
            Liveness::Abandoned | Liveness::Unknown => {
                paths.iter().all(|p| older_than(p, CREATION_GRACE))
            }
        };
        if abandoned {
            for path in paths {
                if std::fs::remove_file(&path).is_ok() {
                    removed.push(path);
                }
            }
        }
    }
}
