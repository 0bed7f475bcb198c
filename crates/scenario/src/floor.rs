//! The machine's floor for a cell: the simplest exchange of the cell's payload between the
//! cell's two CPUs that its transport could possibly do, measured in the same run, on the
//! same CPUs, with the same payload, and timed round trip by round trip as the cell times
//! its own. A cell's ratio to its floor says how much of its round trip is the transport's
//! and how much is the machine's.
//!
//! The probes are two threads of this process, one pinned to each of the cell's CPUs:
//! the hardware and the kernel do the same work for two threads as for two processes
//! (each CPU runs one task and otherwise idles), without a peer to start. Each probe
//! gives up at [`PROBE_DEADLINE`]; its other side then stops too.
//!
//! A cell's floor is measured with the cell: the host moves and slows the vCPUs over a run
//! (a cache line's round trip between them went from 63 to 325 ns and back within minutes
//! here), and a floor measured at the start of a run then stood for cells that ran on
//! another machine, as far as timing goes. The runner times it in blocks between the
//! cell's own round trips ([`InterleavedFloor`]); `ipc-matrix probe` times it alone
//! ([`floor_for`]).
//!
//! Layers: `timing` (a probe's round trips, its responder thread) below the probes,
//! `stream` (byte streams, UDP) and `handoff` (shared memory); this file picks a cell's
//! probe, opens it and times it, alone or in blocks between the cell's own.

mod handoff;
mod stream;
#[cfg(test)]
mod tests;
mod timing;

use crate::blocks::{Schedule, BLOCKS};
use crate::spawn::PausedPeer;
use handoff::*;
use ipc_matrix_results::{Floor, FloorProbe, Placement};
use ipc_matrix_spec::{Cell, ChannelKind, ScenarioKind, WakeMode};
use stream::*;
use timing::*;

use std::time::Instant;

/// The probe that stands for `cell`, if its kind has one: the request/reply kinds by
/// their transport (shared memory by its wake mode). Fan, load and logging cells have
/// none: no one exchange is their unit of work.
pub fn probe_for(cell: &Cell) -> Option<FloorProbe> {
    let request_reply = matches!(
        cell.kind(),
        ScenarioKind::Echo
            | ScenarioKind::Bulk
            | ScenarioKind::Codec
            | ScenarioKind::Rpc
            | ScenarioKind::ReqRep
    );
    if !request_reply {
        return None;
    }
    // A user's stack is measured against the floor of the built-in channel it names.
    Some(match cell.transport.channel()?.floor_like() {
        // iceoryx2 is shared memory too: its floor is the same handoff.
        ChannelKind::Shm | ChannelKind::Iceoryx2 => match cell.wake.unwrap_or(WakeMode::Blocking) {
            WakeMode::BusyPoll => FloorProbe::Spin,
            WakeMode::Blocking => FloorProbe::Futex,
        },
        ChannelKind::Local => FloorProbe::UnixStream,
        ChannelKind::Tcp => FloorProbe::Tcp,
        ChannelKind::Udp => FloorProbe::Udp,
        ChannelKind::Pipe => FloorProbe::Pipe,
        ChannelKind::Stack(_) => return None,
    })
}

/// A probe holds at most four copies of its payload (the request and reply of each end,
/// or of the measuring end and a buffer each way) and the shared-memory handoff two
/// rings of chunks besides, while the cell runs: measured only when the cell fits next
/// to those.
fn fits_in_memory(cell: &Cell) -> bool {
    let Some(available) = ipc_matrix_spec::available_memory() else {
        return true;
    };
    let rings = 2 * u64::from(RING) * cell.payload_bytes.min(CHUNK as u64);
    let probe_need = cell.payload_bytes.saturating_mul(4).saturating_add(rings);
    probe_need <= available && ipc_matrix_spec::check_memory(cell, available - probe_need).is_ok()
}

/// True when this run's cells run under an emulator (the runner is `qemu`).
pub fn emulated() -> bool {
    ipc_matrix_results::Environment::capture()
        .qemu_version
        .is_some()
}

/// The floor of `cell` on `placement`, measured now. The calling thread must already be
/// pinned to the measuring CPU. `None` when
/// the cell's kind has no floor, the CPUs are not pinned, the probe failed, or the run is
/// emulated (an emulator's floor is the emulator's, not the machine's).
pub fn floor_for(cell: &Cell, placement: Placement) -> Option<Floor> {
    if emulated() || !fits_in_memory(cell) {
        return None;
    }
    let probe = probe_for(cell)?;
    let rounds = (cell.warmup, cell.iterations);
    let (p50_ns, round_trips) = measured(probe, cell.payload_bytes, rounds, placement)?;
    Some(Floor {
        probe,
        payload_bytes: cell.payload_bytes,
        p50_ns,
        round_trips,
        ratio: None,
        blocks: 1,
    })
}

/// The floor of `cell` on `placement` as the cell runner measures it: in blocks between
/// the cell's own round trips (see [`InterleavedFloor`]). `None` as for [`floor_for`].
pub(crate) fn cell_floor(cell: &Cell, placement: Placement) -> Option<InterleavedFloor> {
    InterleavedFloor::open(cell, placement)
}

/// A floor timed in blocks, each just before a block of the cell's own measured round
/// trips ([`Schedule`]), with one responder that lives as long as the cell's peer.
///
/// A busy-polling peer spins on its CPU between requests, and so would the spin probe's
/// responder between blocks: for those cells the peer is stopped (SIGSTOP) while a block
/// runs, and each block has a responder of its own that ends with the block.
pub(crate) struct InterleavedFloor {
    open: Option<OpenProbe>,
    /// Each block opens and closes its own probe, the peer stopped meanwhile.
    spins: bool,
    /// A block failed: no floor is reported.
    failed: bool,
    len: usize,
    peer_cpu: usize,
    probe: FloorProbe,
    payload_bytes: u64,
    /// The warm-up, run before the first block only.
    warmup: u64,
    schedule: Schedule,
    samples: Vec<u64>,
}

impl InterleavedFloor {
    fn open(cell: &Cell, placement: Placement) -> Option<Self> {
        if emulated() || !fits_in_memory(cell) {
            return None;
        }
        placement.measurer_cpu?;
        let probe = probe_for(cell)?;
        let len = usize::try_from(cell.payload_bytes).ok()?;
        let peer_cpu = placement.peer_cpu?;
        let spins = probe == FloorProbe::Spin;
        let open = match spins {
            true => None,
            false => Some(open_probe(probe, len, peer_cpu).ok()?),
        };
        let rounds = Rounds::of((cell.warmup, cell.iterations));
        Some(Self {
            open,
            spins,
            failed: false,
            len,
            peer_cpu,
            probe,
            payload_bytes: cell.payload_bytes,
            warmup: rounds.warmup,
            schedule: Schedule::new(cell.iterations, rounds.timed),
            samples: Vec::with_capacity(rounds.timed as usize),
        })
    }

    /// Runs a block of the floor when one is due before the cell's measured round trip
    /// `measured` (counted from 0), with the cell's `peer` stopped if it busy-polls. A
    /// block that fails ends the floor: none is reported.
    pub(crate) fn before_round_trip(
        &mut self,
        measured: u64,
        pause_peer: impl FnOnce() -> Option<PausedPeer>,
    ) {
        if self.failed {
            return;
        }
        let Some(timed) = self.schedule.due(measured, self.samples.len() as u64) else {
            return;
        };
        let rounds = Rounds {
            warmup: if self.schedule.first() || self.spins {
                self.warmup
            } else {
                0
            },
            timed,
            deadline: Instant::now() + PROBE_DEADLINE,
            budget: TIME_BUDGET / BLOCKS as u32,
        };
        let timed = match self.spins {
            true => self.spinning_block(rounds, pause_peer),
            false => match self.open.as_mut() {
                Some(open) => open.time(rounds),
                None => Err(ProbeError::NotOpen),
            },
        };
        match timed {
            Ok(samples) => {
                self.samples.extend(samples);
                self.schedule.ran_one();
            }
            Err(_) => {
                self.failed = true;
                let _ = self.open.take().map(OpenProbe::close);
            }
        }
    }

    /// A block of the spin probe on a responder of its own, the cell's peer stopped.
    fn spinning_block(
        &mut self,
        rounds: Rounds,
        pause_peer: impl FnOnce() -> Option<PausedPeer>,
    ) -> ProbeResult {
        let _paused = pause_peer().ok_or(ProbeError::PeerNotStopped)?;
        run_probe(self.probe, self.len, rounds, self.peer_cpu)
    }

    /// Stops the responder; the floor of the blocks that ran (all of them unless the cell
    /// ended early), `None` if one failed.
    pub(crate) fn finish(mut self) -> Option<Floor> {
        if let Some(open) = self.open.take() {
            open.close().ok()?;
        }
        if self.failed {
            return None;
        }
        let (p50_ns, round_trips) = median(self.samples)?;
        Some(Floor {
            probe: self.probe,
            payload_bytes: self.payload_bytes,
            p50_ns,
            round_trips,
            ratio: None,
            blocks: self.schedule.blocks_run(),
        })
    }
}

/// Median and count of the probe's round trips.
fn measured(
    probe: FloorProbe,
    payload: u64,
    rounds: (u64, u64),
    placement: Placement,
) -> Option<(u64, u64)> {
    placement.measurer_cpu?;
    let peer_cpu = placement.peer_cpu?;
    let len = usize::try_from(payload).ok()?;
    let samples = run_probe(probe, len, Rounds::of(rounds), peer_cpu).ok()?;
    median(samples)
}

/// Runs `probe` from start to end: opened, timed, closed.
fn run_probe(probe: FloorProbe, len: usize, rounds: Rounds, peer_cpu: usize) -> ProbeResult {
    let mut open = open_probe(probe, len, peer_cpu)?;
    let timed = open.time(rounds);
    let closed = open.close();
    let samples = timed?;
    closed?;
    Ok(samples)
}

fn open_probe(probe: FloorProbe, len: usize, peer_cpu: usize) -> Result<OpenProbe, ProbeError> {
    match probe {
        FloorProbe::Spin => handoff(len, peer_cpu, Wait::Spin),
        FloorProbe::Futex => handoff(len, peer_cpu, Wait::Futex),
        FloorProbe::UnixStream => {
            let (ours, theirs) =
                std::os::unix::net::UnixStream::pair().map_err(ProbeError::Setup)?;
            for (s, read) in [(&ours, CALL_TIMEOUT), (&theirs, RESPONDER_WAKE)] {
                s.set_read_timeout(Some(read)).map_err(ProbeError::Setup)?;
                s.set_write_timeout(Some(CALL_TIMEOUT))
                    .map_err(ProbeError::Setup)?;
            }
            stream_ping_pong(
                len,
                peer_cpu,
                (ours.try_clone().map_err(ProbeError::Setup)?, ours),
                theirs,
            )
        }
        FloorProbe::Tcp => {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(ProbeError::Setup)?;
            let ours =
                std::net::TcpStream::connect(listener.local_addr().map_err(ProbeError::Setup)?)
                    .map_err(ProbeError::Setup)?;
            let (theirs, _) = listener.accept().map_err(ProbeError::Setup)?;
            for (s, read) in [(&ours, CALL_TIMEOUT), (&theirs, RESPONDER_WAKE)] {
                s.set_nodelay(true).map_err(ProbeError::Setup)?;
                s.set_read_timeout(Some(read)).map_err(ProbeError::Setup)?;
                s.set_write_timeout(Some(CALL_TIMEOUT))
                    .map_err(ProbeError::Setup)?;
            }
            stream_ping_pong(
                len,
                peer_cpu,
                (ours.try_clone().map_err(ProbeError::Setup)?, ours),
                theirs,
            )
        }
        FloorProbe::Udp => udp_ping_pong(len, peer_cpu),
        FloorProbe::Pipe => {
            // Plain blocking pipes have no timeout. Both ends are threads of this process
            // that wait only for each other, and one that stops drops its ends (an end of
            // file for the other), so neither waits forever.
            let (request_read, request_write) = std::io::pipe().map_err(ProbeError::Setup)?;
            let (reply_read, reply_write) = std::io::pipe().map_err(ProbeError::Setup)?;
            stream_ping_pong(
                len,
                peer_cpu,
                (reply_read, request_write),
                Duplex(request_read, reply_write),
            )
        }
    }
}

/// One floor of a selection of cells, and the cells it stands for.
#[derive(Debug, Clone)]
pub struct SelectedFloor {
    pub probe: FloorProbe,
    pub payload_bytes: u64,
    /// The cells' warm-up and timed round trips, which the probe repeats.
    pub rounds: (u64, u64),
    /// `None` when the probe could not run (not pinned, or it failed).
    pub floor: Option<Floor>,
    pub cells: Vec<String>,
}

/// Measures the floors of `cells` now (each distinct probe, payload and round trips once),
/// pinned as their cells would be; in the order of the cells that first need them.
pub fn measure_floors(cells: &[Cell]) -> Vec<SelectedFloor> {
    let mut placement = crate::placement::choose();
    let pinned = crate::placement::PinnedThread::pin(placement.measurer_cpu);
    if pinned.is_err() {
        placement = Placement::default();
    }
    let mut selected: Vec<SelectedFloor> = Vec::new();
    for cell in cells {
        let Some(probe) = probe_for(cell) else {
            continue;
        };
        let rounds = (cell.warmup, cell.iterations);
        let same = |f: &&mut SelectedFloor| {
            f.probe == probe && f.payload_bytes == cell.payload_bytes && f.rounds == rounds
        };
        match selected.iter_mut().find(same) {
            Some(known) => known.cells.push(cell.id.clone()),
            None => selected.push(SelectedFloor {
                probe,
                payload_bytes: cell.payload_bytes,
                rounds,
                floor: pinned.is_ok().then(|| floor_for(cell, placement)).flatten(),
                cells: vec![cell.id.clone()],
            }),
        }
    }
    selected
}
