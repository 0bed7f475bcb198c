//! The largest matrix.yaml this build reads and the largest cells it runs, and what a
//! cell needs in memory. A value beyond a limit is refused when the file is loaded, with
//! its file:line:column and path, before anything is allocated for it (the book:
//! docs/src/reference/matrix-yaml.md, "Limits of matrix.yaml").

use crate::cell::Cell;

/// The largest matrix file read, in bytes (1 MiB; the repository's is about 10 KiB).
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// The deepest nesting of sequences and mappings (the repository's file nests 6 deep).
/// The YAML scanner's work per token grows with the depth: 100,000 nested brackets took
/// 26 s before this bound.
pub const MAX_DEPTH: usize = 64;

/// The longest scenario, profile or target name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// The longest cell id, in bytes: `<cell id>.json` is a file name (`cells/`), and file
/// names on Linux file systems hold at most 255 bytes.
pub const MAX_CELL_ID_BYTES: usize = 255 - ".json".len();

/// The most cells one profile expands into (the repository's full profile has about 200).
pub const MAX_CELLS: usize = 10_000;

/// The largest payload of `echo`, `bulk` and `req-rep` cells: 1 GiB. The measuring side
/// holds the request and a reply buffer, the peer one message: about 3 GiB in all.
pub const MAX_PAYLOAD: u64 = 1 << 30;

/// The largest payload of kinds that carry it inside a Cap'n Proto or protobuf message
/// (`codec`, `fan-out`, `fan-in`, `rpc`): 256 MiB. Cap'n Proto caps one `Data` field at
/// 2^29 - 1 bytes (512 MiB), and each process holds the frame and its encoding several
/// times (about 8 payloads in all).
pub const MAX_FRAME_PAYLOAD: u64 = 256 << 20;

/// The most round trips (warm-up included) of a cell that waits for each reply: 100
/// million, an hour or more at the 30-40 us a blocking round trip takes here. The full
/// profile's largest is 51,000.
pub const MAX_ROUND_TRIPS: u64 = 100_000_000;

/// What one process of a cell needs besides its messages: histograms, the samples kept,
/// a shared-memory segment (8 MiB at most), thread stacks, the runtime.
pub(crate) const PROCESS_OVERHEAD: u64 = 32 << 20;
/// Room above a payload for a frame's structure, a reply's slack.
pub(crate) const SLACK: u64 = 8 << 10;

/// iceoryx2 channels map their messages in shared segments beside the processes' own
/// memory: per direction, a chunk per message in flight plus two (one being written, one
/// being read) of the largest message.
///
/// Messages in flight per direction: one, the subscriber buffer iceoryx2's own
/// publish-subscribe benchmark sets. A round trip never has more, and a deeper buffer
/// made it slower (the publisher's pool then rotates through more chunks); a sender with
/// more to send waits for each message to be taken.
pub const ICEORYX2_IN_FLIGHT: usize = 1;
/// Room above a payload in an iceoryx2 chunk: a peer told to append bytes to its reply
/// sends them, and the measuring side reports the reply too long.
pub const ICEORYX2_SLACK: usize = 1024;

/// The bytes of the shared segments of an iceoryx2 channel carrying `payload`-byte
/// messages, both directions.
fn iceoryx2_segments(payload: u64) -> Option<u64> {
    let chunk = payload.checked_add(ICEORYX2_SLACK as u64)?;
    chunk
        .checked_mul(ICEORYX2_IN_FLIGHT as u64 + 2)?
        .checked_mul(2)
}

impl Cell {
    /// Round trips in all, warm-up included; None when the sum does not fit 64 bits
    /// (never for a cell of a validated spec).
    pub fn round_trips(&self) -> Option<u64> {
        self.warmup.checked_add(self.iterations)
    }

    /// Roughly the bytes of memory a cell needs while it runs, over all its processes:
    /// its payload-sized buffers, the lines of a logging cell, the samples of a load
    /// cell, and a fixed allowance per process. None when the number does not fit 64
    /// bits. Compare it with the memory available before starting the cell
    /// ([`check_memory`]).
    pub fn memory_need(&self) -> Option<u64> {
        let overhead = PROCESS_OVERHEAD.checked_mul(self.kind().about().processes)?;
        let messages = self
            .work
            .messages_need(self.payload_bytes, self.round_trips())?;
        let segments = match self.transport.channel() {
            Some(crate::ChannelKind::Iceoryx2) => iceoryx2_segments(self.payload_bytes)?,
            _ => 0,
        };
        overhead.checked_add(messages)?.checked_add(segments)
    }
}

/// A cell that needs more memory than the machine has available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "{cell} needs about {} MiB of memory and {} MiB are available; use a smaller payload or fewer iterations",
        need.div_ceil(1 << 20),
        available / (1 << 20)
    )]
    MoreThanAvailable {
        cell: String,
        /// Bytes.
        need: u64,
        /// Bytes.
        available: u64,
    },
    #[error(
        "{cell} needs more memory than 64 bits count; use a smaller payload or fewer iterations"
    )]
    MoreThan64Bits { cell: String },
}

/// Refuses to start a cell that needs more memory than is available (`available`:
/// bytes, e.g. [`mem_available`] of `/proc/meminfo`), rather than have the kernel kill it
/// or an allocation abort it halfway.
pub fn check_memory(cell: &Cell, available: u64) -> Result<(), MemoryError> {
    match cell.memory_need() {
        Some(need) if need <= available => Ok(()),
        Some(need) => Err(MemoryError::MoreThanAvailable {
            cell: cell.id.clone(),
            need,
            available,
        }),
        None => Err(MemoryError::MoreThan64Bits {
            cell: cell.id.clone(),
        }),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemAvailable:")?;
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// `MemAvailable` of this machine (`/proc/meminfo`), in bytes; None where there is none.
pub fn available_memory() -> Option<u64> {
    mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iceoryx2_segments_hold_a_message_in_flight_and_two_more_each_way() {
        // 100 MB: one message in flight and two more chunks, each way: about 600 MB.
        let big = iceoryx2_segments(100_000_000).unwrap();
        assert_eq!(big, 2 * 3 * (100_000_000 + 1024));
        assert_eq!(iceoryx2_segments(200), Some(2 * 3 * (200 + 1024)));
        assert_eq!(iceoryx2_segments(u64::MAX), None);
    }

    #[test]
    fn mem_available_reads_meminfo() {
        let text = "MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(mem_available(text), Some(22_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(
            mem_available("MemAvailable: 99999999999999999999 kB\n"),
            None
        );
    }
}

#[cfg(test)]
mod need {
    use super::*;
    use crate::{Spec, Work};
    use std::path::Path;

    fn full_cells() -> Vec<Cell> {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../matrix.yaml");
        Spec::load(&file).unwrap().cells("full").unwrap()
    }

    #[test]
    fn the_repository_cells_need_what_their_buffers_take() {
        let cells = full_cells();
        let need = |id: &str| {
            let cell = cells.iter().find(|c| c.id == id).unwrap();
            cell.memory_need().unwrap()
        };
        let mib = 1 << 20;
        // Three 100 MB buffers and two processes' allowance.
        assert_eq!(
            need("bulk::tcp::100MB"),
            3 * (100_000_000 + SLACK) + 2 * PROCESS_OVERHEAD
        );
        // 300,000 lines of 64 B, twice, in one process.
        assert_eq!(
            need("logging::buffered::file::64B"),
            2 * 300_000 * 64 + PROCESS_OVERHEAD
        );
        assert!(need("udp-load::c16-s16::udp::65507B") < 1024 * mib);
        assert!(cells.iter().all(|c| c.memory_need().unwrap() < 2048 * mib));
    }

    #[test]
    fn needs_beyond_64_bits_or_the_memory_available_are_refused() {
        let mut cell = full_cells()
            .into_iter()
            .find(|c| c.id == "bulk::tcp::100MB")
            .unwrap();
        assert!(check_memory(&cell, 8 << 30).is_ok());
        let e = check_memory(&cell, 100 << 20).unwrap_err();
        assert!(
            matches!(e, MemoryError::MoreThanAvailable { available, .. } if available == 100 << 20)
        );
        assert!(
            e.to_string().starts_with(
                "bulk::tcp::100MB needs about 351 MiB of memory and 100 MiB are available"
            ),
            "{e}"
        );
        cell.payload_bytes = u64::MAX;
        assert_eq!(cell.memory_need(), None);
        let e = check_memory(&cell, u64::MAX).unwrap_err();
        assert!(matches!(e, MemoryError::MoreThan64Bits { .. }));
        assert!(e.to_string().contains("more memory than 64 bits count"));
        cell.work = Work::Logging(crate::LogWrite {
            sink: crate::LogSink::Buffered,
            budget: std::time::Duration::from_secs(1),
        });
        cell.payload_bytes = 64;
        cell.iterations = u64::MAX;
        assert_eq!(cell.memory_need(), None);
    }
}
