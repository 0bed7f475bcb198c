//! A stack as its own authors measure it, beside the cell that measures it through the
//! harness: for an iceoryx2 echo cell that busy-polls, iceoryx2's own publish-subscribe
//! benchmark setup ([`ipc_matrix_transport::iceoryx2_own_benchmark`]), timed just before
//! the cell on the cell's two CPUs with its payload, round trip by round trip as the cell
//! times its own. The cell's ratio to it is what the harness adds (its byte checks, its
//! deadlines and liveness looks, a peer process rather than a thread).
//!
//! iceoryx2's event benchmark (`blocking_wait`) is not reproduced: blocking cells have
//! their futex floor only.

use crate::measure::Recorder;
use ipc_matrix_results::{OwnSetup, Placement};
use ipc_matrix_spec::{Cell, ChannelKind, ScenarioKind, WakeMode};
use ipc_matrix_transport::iceoryx2_own_benchmark::{deadline_for, publish_subscribe};
use std::time::Duration;

/// Round trips of the setup: untimed, then timed (at most as many as the cell's own).
const WARMUP: u64 = 100;
const MOST_TIMED: u64 = 10_000;

/// What the setup is, as a result names it.
pub const IOX2_PUBLISH_SUBSCRIBE: &str = "iceoryx2 publish-subscribe benchmark setup (ipc service, history 0, subscriber buffer 1, next sample loaned before the wait, payload untouched, two pinned threads)";

/// The cell's stack's own setup, timed now on the cell's CPUs; `None` for a cell whose
/// stack has none here, and when it could not run (the cell is what is measured; its
/// stack's setup only stands beside it).
pub(crate) fn for_cell(cell: &Cell, placement: Placement) -> Option<OwnSetup> {
    let own = cell.kind() == ScenarioKind::Echo
        && cell.transport.channel() == Some(ChannelKind::Iceoryx2)
        && cell.wake == Some(WakeMode::BusyPoll)
        && cell.peer.is_none();
    if !own {
        return None;
    }
    let payload = usize::try_from(cell.payload_bytes).ok()?;
    let timed = cell.iterations.clamp(1, MOST_TIMED);
    let cpus = (placement.measurer_cpu, placement.peer_cpu);
    let times =
        publish_subscribe(payload, (WARMUP, timed), cpus, deadline_for(WARMUP + timed)).ok()?;
    // Into the recorder the cell's own round trips go through: the same percentiles.
    let mut recorder = Recorder::new();
    for &ns in &times {
        recorder.record(Duration::from_nanos(ns));
    }
    let stats = recorder.stats()?;
    Some(OwnSetup {
        setup: IOX2_PUBLISH_SUBSCRIBE.into(),
        p50_ns: stats.p50,
        mean_ns: stats.mean as u64,
        round_trips: stats.count,
        ratio: None,
    })
}
