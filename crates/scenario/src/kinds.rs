//! One module per scenario kind, each holding its measuring side and its serving side,
//! and the dispatch to them: what the runner does around a kind's cell ([`harness`]),
//! its measuring side ([`run`]) and the peer's side ([`serve`], on the kind the peer was
//! started for). Each is an exhaustive match, no wildcard arm, so the compiler names
//! every place a new kind fills in here. A kind's peer is told its part in the kind
//! (`PeerConfig::role`) in terms the kind's module defines and reads itself.
//!
//! A kind imports the shared pieces below it (`round_trip`, `context`, `failure`,
//! `spawn`, `peer`, `verify`, ...) and nothing from its siblings, from this list or from
//! the runner above.

mod echo;
mod fan;
mod logging;
mod req_rep;
mod rpc;
mod udp_load;

use crate::context::{RunOptions, Tally};
use crate::peer::{ConfigError, PeerConfig, PeerError};
use crate::round_trip::Limits;
use ipc_matrix_results::{Failure, Placement};
use ipc_matrix_spec::{Cell, ScenarioKind, Work};

/// What the runner does around a kind's measuring side.
pub(crate) struct Harness {
    /// The measuring thread and the peer get CPUs of their own.
    pub(crate) pinned: bool,
    /// The cell's instructions are counted, when it runs under QEMU's counting plugin.
    pub(crate) counted: bool,
    /// The cell passes only when every iteration it declared was measured or lost.
    pub(crate) measures_every_iteration: bool,
}

/// What the runner does around a cell of this work's kind.
pub(crate) fn harness(work: &Work) -> Harness {
    let request_reply = Harness {
        pinned: true,
        counted: true,
        measures_every_iteration: true,
    };
    match work {
        Work::Echo(_) | Work::Bulk(_) | Work::Codec(_) | Work::Rpc(_) | Work::ReqRep(_) => {
            request_reply
        }
        // Counted per frame of each process (both peers' windows are read).
        Work::FanOut(_) | Work::FanIn(_) => request_reply,
        // Many threads on each side: it uses the machine as it is, and runs for its
        // duration (`iterations` only caps it).
        Work::UdpLoad(_) => Harness {
            pinned: false,
            counted: true,
            measures_every_iteration: false,
        },
        // It reads its whole file back and compares it, line by line.
        Work::Logging(_) => Harness {
            pinned: true,
            counted: true,
            measures_every_iteration: false,
        },
    }
}

/// Runs the measuring side of `cell`'s kind, filling in `tally`.
pub(crate) fn run(
    cell: &Cell,
    options: &RunOptions,
    placement: &Placement,
    tally: &mut Tally,
) -> Result<(), Failure> {
    match &cell.work {
        Work::Echo(echoes) | Work::Bulk(echoes) => {
            let limits = Limits {
                timeout: echoes.timeout,
                max_loss: echoes.max_loss,
            };
            echo::echo(cell, (None, limits), options, placement.peer_cpu, tally)
        }
        Work::Codec(frames) => {
            let limits = Limits::lossless(frames.timeout);
            let codec = Some(frames.codec);
            echo::echo(cell, (codec, limits), options, placement.peer_cpu, tally)
        }
        Work::FanOut(fan) => fan::fan_out(cell, fan, options, tally),
        Work::FanIn(fan) => fan::fan_in(cell, fan, options, tally),
        Work::UdpLoad(load) => udp_load::udp_load(cell, load, options, tally),
        Work::Rpc(calls) => rpc::rpc(cell, calls, options, placement.peer_cpu, tally),
        Work::ReqRep(calls) => req_rep::req_rep(cell, calls, options, placement.peer_cpu, tally),
        Work::Logging(write) => {
            logging::logging(cell, write, &placement.cpus(), options.fault, tally)
        }
    }
}

/// Serves the peer's part in its cell's kind until the measuring side says goodbye.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), PeerError> {
    match config.kind {
        ScenarioKind::Echo | ScenarioKind::Bulk | ScenarioKind::Codec => echo::serve(config),
        ScenarioKind::FanOut | ScenarioKind::FanIn => fan::serve(config),
        ScenarioKind::Rpc => rpc::serve(config),
        ScenarioKind::ReqRep => req_rep::serve(config),
        ScenarioKind::UdpLoad => udp_load::serve(config),
        ScenarioKind::Logging => Err(ConfigError::NoPeer(config.kind).into()),
    }
}
