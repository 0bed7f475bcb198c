//! Shared memory's part of the sweep ([`crate::sweep`]): segments whose creator is gone.
//! A segment is its own life lock: its creator holds a lock on it until the peer has
//! mapped it and it is unlinked.

use crate::artifact::{abandoned, is_directory, ours_in};
use std::path::{Path, PathBuf};

/// Removes the segments of ours in `segments` whose creators are gone.
pub(crate) fn remove_stale_segments(segments: &Path, removed: &mut Vec<PathBuf>) {
    for (path, pid) in ours_in(segments) {
        // Private directories for sockets may live here too: they are not segments.
        if is_directory(&path) {
            continue;
        }
        if abandoned(&path, &path, pid) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
}
