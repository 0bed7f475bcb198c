//! What every kind's measuring side is given (the run's options) and what it fills in
//! (the tally of round trips), shared below the kinds.

use crate::counting::{Counting, PeerCounting};
use crate::external::{self, ExternalPeerConfig};
use crate::failure::setup_failure;
use crate::fault::Fault;
use crate::floor::InterleavedFloor;
use crate::measure::Recorder;
use crate::own_setup::InterleavedOwnSetup;
use crate::peer::{EnvError, PeerConfig, PeerDelay};
use crate::second_host::SecondHost;
use crate::spawn::{PeerProcess, PEER_RUNNER_ENV, SETUP_ALLOWANCE};
use ipc_matrix_results::{CodecStages, Environment, Failure, LoadStats, LoggingStats, MessagePath};
use ipc_matrix_spec::Cell;
use ipc_matrix_transport::PeerAddress;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The binary started as the peer; this process's own binary by default.
    pub peer_program: PathBuf,
    /// Deadline for starting the peer and connecting (QEMU start-up is slow).
    pub setup_timeout: Duration,
    /// A fault the peer commits, for the harness's own tests.
    pub fault: Option<Fault>,
    /// A deliberate slow-down of the peer, to see a regression flagged.
    pub peer_delay: Option<PeerDelay>,
    /// The run the results belong to; this process's run by default.
    pub run_id: String,
    /// Round trips done so far (warm-up included, lost ones too) by the cell running now,
    /// for a progress display: set to 0 as a cell starts, then stored after each round
    /// trip by the request/reply loop (echo, bulk, codec, rpc, req-rep), outside the timed
    /// region, with a relaxed store. The other kinds leave it at 0.
    pub progress: Option<Arc<AtomicU64>>,
    /// The folder an external peer's relative command is found from: matrix.yaml's.
    pub project_dir: PathBuf,
    /// The second host the cell's peer runs on: set by the cell runner, for the cell's
    /// time, on a `host: netns` cell; the measuring side binds to its `host` address.
    pub second_host: Option<SecondHost>,
}

impl RunOptions {
    /// The defaults plus what the environment asks for ([`crate::peer::PEER_DELAY_ENV`]).
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            peer_delay: PeerDelay::from_env()?,
            ..Self::default()
        })
    }

    /// The peer's configuration for `cell`: what every kind shares (its parent, its idle
    /// deadline, the fault and the delay asked for, the cell's kind and the codec of its
    /// frames); the kind gives the rest, and its `role` (the peer's part in the kind, in
    /// the kind's own terms; `()` where all its peers play the same part). `exchange` is
    /// the longest the measuring side waits for one exchange with the peer (a round
    /// trip's timeout, a frame's deadline): the peer gives up after set-up and twice that
    /// without a message.
    pub(crate) fn peer_config(
        &self,
        cell: &Cell,
        address: PeerAddress,
        limit: usize,
        cpu: Option<usize>,
        role: impl Serialize,
        exchange: Duration,
    ) -> PeerConfig {
        PeerConfig {
            address,
            parent: std::process::id(),
            limit,
            idle_timeout: self.setup_timeout + exchange * 2,
            fault: self.fault,
            delay: self.peer_delay_for(cell),
            extra_work: self.peer_extra_work_for(cell),
            cpu,
            codec: cell.work.codec(),
            kind: cell.kind(),
            role: serde_json::to_value(role).expect("a role is plain data"),
            count: None,
            echoes_as_it_receives: false,
            echoes_from_loans: false,
            messages: None,
        }
    }

    /// Starts the peer process with `config`.
    pub(crate) fn start_peer(&self, config: &PeerConfig) -> Result<PeerProcess, Failure> {
        PeerProcess::spawn(&self.peer_program, config, &self.peer_place())
            .map_err(|e| setup_failure(format!("starting the peer: {e}")))
    }

    /// Starts the cell's peer: ours with `config`, or the program the scenario names
    /// (`peer: { command }`) with the external peer protocol's form of it.
    pub(crate) fn start_cell_peer(
        &self,
        cell: &Cell,
        config: &PeerConfig,
    ) -> Result<PeerProcess, Failure> {
        let Some(external) = &cell.peer else {
            return self.start_peer(config);
        };
        let triple = Environment::capture().target_triple;
        // Under QEMU the peer runner is the emulator: a program of the host's CPU there
        // (a shell, an interpreter) runs as it is.
        let emulated = std::env::var(PEER_RUNNER_ENV).is_ok_and(|r| !r.trim().is_empty());
        let command = external::resolve(external, &self.project_dir, &triple, emulated)
            .map_err(|e| setup_failure(format!("starting the peer: {e}")))?;
        let protocol = ExternalPeerConfig::of(cell, config)
            .map_err(|e| setup_failure(format!("starting the peer: {e}")))?;
        PeerProcess::spawn_external(
            &command,
            &protocol,
            (config.cpu, &self.project_dir),
            &self.peer_place(),
        )
        .map_err(|e| setup_failure(format!("starting the peer: {e}")))
    }

    /// The words that start the cell's peer where it runs: on a second host, `ip netns
    /// exec <namespace>`; here, none.
    fn peer_place(&self) -> Vec<String> {
        self.second_host
            .as_ref()
            .map(|host| crate::second_host::exec_in(&host.namespace))
            .unwrap_or_default()
    }

    pub(crate) fn peer_delay_for(&self, cell: &Cell) -> Option<Duration> {
        let delay = self.peer_delay.as_ref()?;
        (delay.applies_to(&cell.id) && !delay.per_reply.is_zero()).then_some(delay.per_reply)
    }

    pub(crate) fn peer_extra_work_for(&self, cell: &Cell) -> Option<u64> {
        let delay = self.peer_delay.as_ref()?;
        (delay.applies_to(&cell.id) && delay.extra_work > 0).then_some(delay.extra_work)
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            peer_program: std::env::current_exe().unwrap_or_else(|_| "ipc-matrix".into()),
            setup_timeout: SETUP_ALLOWANCE,
            fault: None,
            peer_delay: None,
            run_id: ipc_matrix_results::run_id().to_string(),
            progress: None,
            project_dir: std::env::current_dir().unwrap_or_else(|_| ".".into()),
            second_host: None,
        }
    }
}

#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) recorder: Recorder,
    pub(crate) first_round_trip: Option<Duration>,
    pub(crate) codec_stages: Option<CodecStages>,
    pub(crate) measured_time: Duration,
    pub(crate) lost: u64,
    pub(crate) load: Option<LoadStats>,
    pub(crate) logging: Option<LoggingStats>,
    /// How the round trips' bytes moved (kinds over a channel).
    pub(crate) message_path: Option<MessagePath>,
    /// What the check of the peer's goodbye could not see, when the cell passed it
    /// ([`CellResult::goodbye`](ipc_matrix_results::CellResult::goodbye)).
    pub(crate) goodbye: Option<String>,
    /// The cell's instruction counting, when it runs under QEMU's counting plugin (set by
    /// the runner; the request/reply loop and the peer open and close its windows).
    pub(crate) counting: Option<Counting>,
    /// The peer processes, whose counts are read after they exit.
    pub(crate) peer_pids: Vec<u32>,
    /// Counts are averaged per window (one per frame or request of each process: fan
    /// and udp-load cells) rather than per round trip (request/reply cells, whose rpc
    /// peer counts all its calls in one window).
    pub(crate) count_per_window: bool,
    /// What the measuring side's counting windows held when they are not one per round
    /// trip: the lines of a logging cell's measured batches (its counts are per line).
    pub(crate) operations_counted: Option<u64>,
    /// Where the request/reply loop stores the round trips done ([`RunOptions::progress`]).
    pub(crate) progress: Option<Arc<AtomicU64>>,
    /// The cell's floor, timed in blocks between its measured round trips by the
    /// request/reply loop.
    pub(crate) floor: Option<InterleavedFloor>,
    /// The cell's stack's own benchmark setup, timed in blocks beside its floor's.
    pub(crate) own_setup: Option<InterleavedOwnSetup>,
}

impl Tally {
    /// What the peer is told to count: its measured replies, after `warmup` messages,
    /// when this cell is counted.
    pub(crate) fn peer_counting(&self, warmup: u64) -> Option<PeerCounting> {
        self.counting.as_ref().map(|c| c.peer(warmup))
    }

    /// Counts round trip `index`: the first is kept as the cold cost, those after the
    /// warm-up are measured.
    pub(crate) fn count_round_trip(&mut self, index: u64, warmup: u64, round_trip: Duration) {
        if index == 0 {
            self.first_round_trip = Some(round_trip);
        }
        if index >= warmup {
            self.recorder.record(round_trip);
            self.measured_time += round_trip;
        }
    }
}
