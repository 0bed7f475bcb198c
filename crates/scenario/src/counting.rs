//! Guest instructions per measured round trip, counted under QEMU by the counting plugin
//! (`crates/qemu-count`) inside windows this crate marks (`crates/count-window`).
//!
//! Counting is on when this process runs under the plugin: `scripts/qemu-run` then sets
//! [`COUNT_FILE_ENV`] (the plugin's output, `%p` standing for the process id) and
//! `QEMU_CPU` (the emulated CPU model, fixed per architecture so the counts do not depend
//! on the host). Natively no marker is issued at all, so timings are untouched.
//!
//! Waiting for the other side is not counted: a transport pauses the count around every
//! wait (`ipc_matrix_count_window::pause`), ready or not, so a spin or a futex wait that
//! returns early changes no count.
//!
//! The measuring thread opens a window around each measured round trip (the request, the
//! wait, the reply; the reply check stays outside); the peer's serving thread around
//! each measured reply. A logging cell (no peer) opens one around the writes of each
//! measured batch of lines, and its counts are per line. Labels carry a number drawn per cell, so records of another
//! cell, or of an earlier process that had the same process id, are never summed in.

mod setup;

use ipc_matrix_results::InstructionCounts;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use ipc_matrix_count_window::COUNT_FILE_ENV;
/// The emulated CPU model QEMU runs (QEMU reads it; so does the guest, to record it).
pub const QEMU_CPU_ENV: &str = "QEMU_CPU";

const MEASURING: u64 = 1;
const PEER: u64 = 2;
const ENCODE: u64 = 3;
const DECODE: u64 = 4;

/// The counting of one cell.
#[derive(Debug, Clone)]
pub(crate) struct Counting {
    pattern: String,
    cell_label: u64,
    /// The API of the plugin that counts this process.
    plugin_api: u32,
}

/// What the peer needs to count its measured replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCounting {
    /// The label of the peer's windows.
    pub label: u64,
    /// Replies before this one are warm-up, and not counted.
    pub from_message: u64,
}

impl PeerCounting {
    /// Opens the window of message `index` when it is a measured one.
    pub(crate) fn open(this: Option<Self>, index: u64) {
        if let Some(counting) = this.filter(|c| index >= c.from_message) {
            ipc_matrix_count_window::open(counting.label);
        }
    }

    /// Closes the window of message `index` when it is a measured one.
    pub(crate) fn close(this: Option<Self>, index: u64) {
        if let Some(counting) = this.filter(|c| index >= c.from_message) {
            ipc_matrix_count_window::close(counting.label);
        }
    }
}

impl Counting {
    /// Counting for a new cell, when this process was asked to count ([`COUNT_FILE_ENV`]
    /// is set); an error when it was asked but no counting plugin runs in it (a QEMU
    /// without plugin support ignores `QEMU_PLUGIN` silently, and a native process has
    /// none): such a cell would pass with no count, which is no pass.
    pub(crate) fn for_cell() -> Result<Option<Self>, CountingError> {
        let Some(pattern) = std::env::var_os(COUNT_FILE_ENV) else {
            return Ok(None);
        };
        let pattern = pattern.into_string().map_err(CountingError::NotUtf8)?;
        if pattern.trim().is_empty() {
            return Ok(None);
        }
        // One file per process: the peer's is removed once read, so a pattern without
        // `%p` would name one file for both, or a file of someone else's.
        if !pattern.contains("%p") {
            return Err(CountingError::NoPid { pattern });
        }
        let plugin_api = loaded_plugin_api(&pattern)?;
        // 48 bits from the clock and the process: distinct per cell, with 8 bits left
        // for the side.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let mut state = now.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32);
        let mixed = ipc_matrix_spec::splitmix64(&mut state);
        // A transport's waits are paused (never counted) from now on in this process.
        ipc_matrix_count_window::mark_pauses();
        Ok(Some(Self {
            pattern,
            cell_label: (mixed & 0xFFFF_FFFF_FFFF) << 8,
            plugin_api,
        }))
    }

    /// The label of the measuring thread's windows.
    pub(crate) fn measuring_label(&self) -> u64 {
        self.cell_label | MEASURING
    }

    /// The labels of the measuring side's encoding and decoding windows (codec cells),
    /// nested inside its round-trip windows.
    pub(crate) fn codec_labels(&self) -> (u64, u64) {
        (self.cell_label | ENCODE, self.cell_label | DECODE)
    }

    /// What the peer is told, when it warms up for `warmup` messages.
    pub(crate) fn peer(&self, warmup: u64) -> PeerCounting {
        PeerCounting {
            label: self.cell_label | PEER,
            from_message: warmup,
        }
    }

    fn file_of(&self, pid: u32) -> PathBuf {
        PathBuf::from(self.pattern.replace("%p", &pid.to_string()))
    }

    /// Reads every side's windows: instructions per measured operation, over
    /// `operations` (round trips; a logging cell's lines), or with `None` per window (per
    /// frame or request of each process, every thread of it included). `peer_pids` are
    /// the peers' processes (their QEMU processes, whose pids the guests share); their
    /// files are removed once read.
    pub(crate) fn collect(
        &self,
        peer_pids: &[u32],
        operations: Option<u64>,
        timing_dependent: bool,
    ) -> InstructionCounts {
        let own_file = self.file_of(std::process::id());
        let own = self.closed_windows(&own_file, self.measuring_label());
        let mut peer: Option<(u128, u64)> = None;
        for &pid in peer_pids {
            let peer_file = self.file_of(pid);
            if let Some((sum, n)) = self.closed_windows(&peer_file, self.cell_label | PEER) {
                let (total, windows) = peer.unwrap_or_default();
                peer = Some((total + sum, windows + n));
            }
            // Removed only when the plugin wrote it (its record of starting in that
            // process is there): never a file that merely has the name.
            if let Ok(Some(_)) = ipc_matrix_count_window::loaded_plugin_api(&peer_file, pid) {
                let _ = std::fs::remove_file(peer_file);
            }
        }
        let per_window = |(sum, n): (u128, u64)| sum as f64 / n.max(1) as f64;
        let per_operation = |(sum, n): (u128, u64)| match operations {
            Some(operations) => sum as f64 / operations.max(1) as f64,
            None => per_window((sum, n)),
        };
        let (encode, decode) = self.codec_labels();
        InstructionCounts {
            measuring: own.map(per_operation),
            peer: peer.map(per_operation),
            encode: self.closed_windows(&own_file, encode).map(per_window),
            decode: self.closed_windows(&own_file, decode).map(per_window),
            windows: own.map_or(0, |(_, n)| n),
            cpu_model: std::env::var(QEMU_CPU_ENV).ok(),
            timing_dependent,
            setup: Some(setup::of_this_process(self.plugin_api)),
        }
    }

    /// The instructions of the closed windows of `label` in `file`, and their number; none
    /// when the file holds none (a file that cannot be read is reported on stderr).
    fn closed_windows(&self, file: &Path, label: u64) -> Option<(u128, u64)> {
        let (mut sum, mut n) = (0u128, 0u64);
        let read = ipc_matrix_count_window::for_each_record(file, |r| {
            if let (true, ipc_matrix_count_window::End::Close, Some(insns)) =
                (r.label == label, r.end, r.insns)
            {
                sum += u128::from(insns);
                n += 1;
            }
        });
        if let Err(e) = read {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("warning: instruction counts not read: {e}");
            }
            return None;
        }
        (n > 0).then_some((sum, n))
    }
}

/// The API of the plugin that counts this process, from its record of starting in this
/// process's count file. Looked for once: the plugin starts with the process, and the
/// file grows by every window of every cell the process runs.
fn loaded_plugin_api(pattern: &str) -> Result<u32, CountingError> {
    static LOADED: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    if let Some(&api) = LOADED.get() {
        return Ok(api);
    }
    let own = PathBuf::from(pattern.replace("%p", &std::process::id().to_string()));
    let api = match ipc_matrix_count_window::loaded_plugin_api(&own, std::process::id()) {
        Ok(Some(api)) => api,
        Ok(None) => {
            return Err(CountingError::NotLoaded {
                file: own,
                what: "holds no record of the plugin starting",
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CountingError::NotLoaded {
                file: own,
                what: "does not exist",
            })
        }
        Err(e) => return Err(CountingError::Unreadable(e)),
    };
    Ok(*LOADED.get_or_init(|| api))
}

/// Why a cell that was asked to be counted ([`COUNT_FILE_ENV`] set) cannot be: such a
/// cell would pass with no count, which is no pass.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CountingError {
    #[error("{COUNT_FILE_ENV} is not UTF-8 text: {}", .0.to_string_lossy())]
    NotUtf8(OsString),
    /// A pattern without `%p` would name one file for every process.
    #[error(
        "{COUNT_FILE_ENV} is {pattern:?}, which has no %p: it names the counting plugin's output of each process, with %p for the process id (scripts/qemu-run sets it)"
    )]
    NoPid { pattern: String },
    /// This process's count `file` has no record of the plugin starting (`what` says
    /// how).
    #[error(
        "instruction counting was asked for ({COUNT_FILE_ENV}), but no counting plugin runs in this process: its count file {} {what}. The emulator ignored the plugin (a QEMU built without plugin support, such as a static qemu-user, ignores QEMU_PLUGIN without a word) or the process is not emulated; run it through scripts/qemu-run with a QEMU that loads plugins",
        .file.display()
    )]
    NotLoaded { file: PathBuf, what: &'static str },
    /// This process's count file could not be read.
    #[error("instruction counting was asked for, but {0}")]
    Unreadable(#[source] std::io::Error),
}
