//! A stack as its own authors measure it, beside the cell that measures it through the
//! harness: for an iceoryx2 echo cell, iceoryx2's own benchmark setup
//! ([`ipc_matrix_transport::iceoryx2_own_benchmark`]) on the cell's two CPUs: its
//! publish-subscribe setup (with the cell's payload) beside a cell that busy-polls, its
//! event setup (`blocking_wait`, no payload) beside a blocking one. The setup is timed
//! round trip by round trip as the cell times its own, in blocks between the cell's own
//! round trips as its floor is ([`Schedule`]), a busy-polling peer stopped meanwhile. The
//! cell's ratio to it is what the harness adds (its byte checks, its deadlines and
//! liveness looks, a peer process rather than a thread, and for a blocking cell the
//! payload too, which the event setup does not carry).
//!
//! Not under an emulator: an emulator's setup is the emulator's, as its floor is.

use crate::blocks::Schedule;
use crate::floor::emulated;
use crate::measure::Recorder;
use crate::spawn::PausedPeer;
use ipc_matrix_results::{OwnSetup, Placement};
use ipc_matrix_spec::{Cell, ChannelKind, ScenarioKind, WakeMode};
use ipc_matrix_transport::iceoryx2_own_benchmark::{deadline_for, event, publish_subscribe};
use std::time::Duration;

/// Round trips of the setup: untimed before the first block, then timed (as many as the
/// cell's own, at most this many).
const WARMUP: u64 = 100;
const MOST_TIMED: u64 = 10_000;

/// What the setups are, as a result names them.
pub const IOX2_PUBLISH_SUBSCRIBE: &str = "iceoryx2 publish-subscribe benchmark setup (ipc service, history 0, subscriber buffer 1, next sample loaned before the wait, payload untouched, two pinned threads)";
pub const IOX2_EVENT: &str = "iceoryx2 event benchmark setup (ipc service, one notifier and one listener each way, a notification each way and no payload, two pinned threads)";

/// Which of its stack's setups a cell stands beside.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Setup {
    PublishSubscribe { payload: usize },
    Event,
}

/// The cell's stack's own setup, timed in blocks between the cell's measured round trips.
pub(crate) struct InterleavedOwnSetup {
    setup: Setup,
    cpus: (Option<usize>, Option<usize>),
    schedule: Schedule,
    samples: Vec<u64>,
    /// A block failed: no setup is reported (the cell is what is measured; its stack's
    /// setup only stands beside it).
    failed: bool,
}

impl InterleavedOwnSetup {
    /// `None` for a cell whose stack has no setup here, and under an emulator.
    pub(crate) fn open(cell: &Cell, placement: Placement) -> Option<Self> {
        let iceoryx2_echo = cell.kind() == ScenarioKind::Echo
            && cell.transport.channel() == Some(ChannelKind::Iceoryx2)
            && cell.peer.is_none();
        if !iceoryx2_echo || emulated() {
            return None;
        }
        let setup = match cell.wake? {
            WakeMode::BusyPoll => Setup::PublishSubscribe {
                payload: usize::try_from(cell.payload_bytes).ok()?,
            },
            WakeMode::Blocking => Setup::Event,
        };
        let timed = cell.iterations.clamp(1, MOST_TIMED);
        Some(Self {
            setup,
            cpus: (placement.measurer_cpu, placement.peer_cpu),
            schedule: Schedule::new(cell.iterations, timed),
            samples: Vec::with_capacity(timed as usize),
            failed: false,
        })
    }

    /// Runs a block of the setup when one is due before the cell's measured round trip
    /// `measured`, with the cell's peer stopped if it busy-polls (it would spin on one of
    /// the setup's CPUs). A block that fails ends the setup.
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
        // Each block is a new pair of threads and services: warmed up each time.
        let rounds = (WARMUP, timed);
        let deadline = deadline_for(WARMUP + timed);
        let block = match self.setup {
            Setup::PublishSubscribe { payload } => match pause_peer() {
                Some(_paused) => publish_subscribe(payload, rounds, self.cpus, deadline).ok(),
                None => None,
            },
            Setup::Event => event(rounds, self.cpus, deadline).ok(),
        };
        match block {
            Some(times) => {
                self.samples.extend(times);
                self.schedule.ran_one();
            }
            None => self.failed = true,
        }
    }

    /// The setup as the blocks that ran measured it; `None` if one failed or none ran.
    pub(crate) fn finish(self) -> Option<OwnSetup> {
        if self.failed {
            return None;
        }
        // Into the recorder the cell's own round trips go through: the same percentiles.
        let mut recorder = Recorder::new();
        for &ns in &self.samples {
            recorder.record(Duration::from_nanos(ns));
        }
        let stats = recorder.stats()?;
        Some(OwnSetup {
            setup: match self.setup {
                Setup::PublishSubscribe { .. } => IOX2_PUBLISH_SUBSCRIBE,
                Setup::Event => IOX2_EVENT,
            }
            .into(),
            p50_ns: stats.p50,
            mean_ns: stats.mean as u64,
            round_trips: stats.count,
            blocks: self.schedule.blocks_run(),
            ratio: None,
        })
    }
}
