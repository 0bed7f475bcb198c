//! The echo scenario (`echo` and `bulk` kinds): request, reply, compare, time.

use crate::codec_work::{CodecWork, FRAME_SLACK};
use crate::fan;
use crate::fault::Fault;
use crate::logging;
use crate::measure::Recorder;
use crate::payload::Payload;
use crate::peer::{PeerConfig, PeerDelay, PeerRole};
use crate::placement::{self, PinnedThread};
use crate::pressure::PressureMeter;
use crate::probe::core_to_core_ns;
use crate::req_rep;
use crate::rpc;
use crate::spawn::{describe, PeerProcess};
use crate::udp_load;
use crate::verify::compare;
use ipc_matrix_results::{
    CellResult, CodecStages, Environment, Failure, FailureKind, LoadStats, LoggingStats, Outcome,
    Placement, Throughput, RESULT_SCHEMA_VERSION,
};
use ipc_matrix_spec::{Cell, ScenarioKind};
use ipc_matrix_transport::{listen, Channel, ListenOptions, PeerAddress, TransportError};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// Consecutive lost UDP replies after which the peer counts as unresponsive.
const LOST_IN_A_ROW_LIMIT: u64 = 3;
/// Bytes a reply may exceed its request by and still be read (and reported as too long).
const REPLY_SLACK: usize = 1024;

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
}

impl RunOptions {
    /// The defaults plus what the environment asks for ([`crate::PEER_DELAY_ENV`]).
    pub fn from_env() -> Result<Self, String> {
        Ok(Self {
            peer_delay: PeerDelay::from_env()?,
            ..Self::default()
        })
    }

    /// The peer's configuration for `cell`: what every kind shares (its parent, its idle
    /// deadline, the fault and the delay asked for); the kind gives the rest.
    pub(crate) fn peer_config(
        &self,
        cell: &Cell,
        address: PeerAddress,
        limit: usize,
        cpu: Option<usize>,
        role: PeerRole,
    ) -> PeerConfig {
        PeerConfig {
            address,
            parent: std::process::id(),
            limit,
            idle_timeout: self.setup_timeout + cell.timeout * 2,
            fault: self.fault,
            delay: self.peer_delay_for(cell),
            cpu,
            codec: cell.codec,
            role,
        }
    }

    /// Starts the peer process with `config`.
    pub(crate) fn start_peer(&self, config: &PeerConfig) -> Result<PeerProcess, Failure> {
        PeerProcess::spawn(&self.peer_program, config)
            .map_err(|e| setup_failure(format!("starting the peer: {e}")))
    }

    pub(crate) fn peer_delay_for(&self, cell: &Cell) -> Option<Duration> {
        let delay = self.peer_delay.as_ref()?;
        delay.applies_to(&cell.id).then_some(delay.per_reply)
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            peer_program: std::env::current_exe().unwrap_or_else(|_| "ipc-matrix".into()),
            setup_timeout: Duration::from_secs(30),
            fault: None,
            peer_delay: None,
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
}

impl Tally {
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

/// Runs one cell to the end and describes what happened; never panics on a bad peer.
pub fn run_cell(cell: &Cell, options: &RunOptions) -> CellResult {
    let started = Instant::now();
    let environment = Environment::capture();
    // A load cell runs many threads on each side: it uses the machine as it is.
    let mut placement = match cell.kind {
        ScenarioKind::UdpLoad => Placement::default(),
        _ => placement::choose(),
    };
    let pinned = PinnedThread::pin(placement.measurer_cpu);
    if pinned.is_err() {
        placement = Placement::default();
    }
    let probe = || pinned.is_ok().then(|| core_to_core_ns(placement)).flatten();
    let probe_before = probe();
    let mut tally = Tally::default();
    let pressure = PressureMeter::start();
    let failure = match cell.kind {
        ScenarioKind::FanOut => fan::fan_out(cell, options, &mut tally),
        ScenarioKind::FanIn => fan::fan_in(cell, options, &mut tally),
        ScenarioKind::UdpLoad => udp_load::udp_load(cell, options, &mut tally),
        ScenarioKind::Rpc => rpc::rpc(cell, options, placement.peer_cpu, &mut tally),
        ScenarioKind::ReqRep => req_rep::req_rep(cell, options, placement.peer_cpu, &mut tally),
        ScenarioKind::Logging => {
            logging::logging(cell, &placement.cpus(), options.fault, &mut tally)
        }
        _ => echo(cell, options, placement.peer_cpu, &mut tally),
    }
    .err();
    let cpu_pressure = pressure.share();
    // Again after the cell: the host may move the CPUs while it runs.
    let probe_after = probe();
    drop(pinned);
    let recorder = &tally.recorder;
    let measured = recorder.count();
    let seconds = tally.measured_time.as_secs_f64();
    let per_second = |n: f64| (seconds > 0.0).then(|| n / seconds);
    // Operations per second: round trips; lines for a logging cell; answered requests
    // for a load cell (whose time is the sending time of all clients together).
    let (operations, moved_bytes) = match (&tally.logging, &tally.load) {
        (Some(logging), _) => (logging.lines as f64, logging.bytes as f64),
        (None, Some(load)) => (
            load.answered as f64,
            2.0 * cell.payload_bytes as f64 * load.answered as f64,
        ),
        (None, None) => (
            measured as f64,
            2.0 * cell.payload_bytes as f64 * measured as f64,
        ),
    };
    CellResult {
        schema_version: RESULT_SCHEMA_VERSION,
        leg: environment.leg(),
        cell: cell.clone(),
        outcome: Outcome {
            passed: failure.is_none(),
            failure,
        },
        measured_round_trips: measured,
        lost: tally.lost,
        latency_ns: recorder.stats(),
        samples_ns: recorder.samples().to_vec(),
        codec_ns: tally.codec_stages,
        first_round_trip_ns: tally.first_round_trip.map(|d| d.as_nanos() as u64),
        placement,
        core_to_core_ns: probe_before,
        core_to_core_after_ns: probe_after,
        cpu_pressure,
        peer_delay_us: options.peer_delay_for(cell).map(|d| d.as_micros() as u64),
        load: tally.load,
        logging: tally.logging,
        round_trips_per_sec: per_second(operations),
        throughput: per_second(moved_bytes).map(|bytes| Throughput {
            mb_per_s: bytes / 1e6,
            mbit_per_s: bytes * 8.0 / 1e6,
        }),
        wall_seconds: started.elapsed().as_secs_f64(),
        finished_at_unix: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        environment,
    }
}

pub(crate) fn setup_failure(reason: String) -> Failure {
    Failure {
        kind: FailureKind::Setup,
        round_trip: None,
        reason,
    }
}

fn echo(
    cell: &Cell,
    options: &RunOptions,
    peer_cpu: Option<usize>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let len = usize::try_from(cell.payload_bytes).map_err(|_| {
        setup_failure(format!(
            "{} bytes do not fit in memory here",
            cell.payload_bytes
        ))
    })?;
    let mut codec_work = cell
        .codec
        .map(|codec| CodecWork::new(codec, cell.seed, len));
    // A frame is its payload plus some structure; echo messages are the payload exactly.
    let max_message = len + codec_work.as_ref().map_or(0, |_| FRAME_SLACK);
    let limit = max_message + REPLY_SLACK;
    let acceptor = listen(
        cell.transport,
        ListenOptions {
            wake: cell.wake,
            max_message,
        },
    )
    .map_err(|e| setup_failure(format!("opening the {} channel: {e}", cell.transport)))?;
    let config = options.peer_config(cell, acceptor.address(), limit, peer_cpu, PeerRole::Echo);
    let mut peer = options.start_peer(&config)?;
    let mut channel = acceptor
        .accept(peer.pid(), Instant::now() + options.setup_timeout)
        .map_err(|e| {
            let mut failure = setup_failure(format!("connecting the peer: {e}"));
            failure.reason.push_str(&peer_epilogue(&mut peer));
            failure
        })?;

    let total = cell.warmup + cell.iterations;
    let mut run = Exchange {
        channel: channel.as_mut(),
        peer: &mut peer,
        total,
        warmup: cell.warmup,
        timeout: cell.timeout,
    };
    let mut payload = Payload::new(cell.seed, len);
    let mut reply = Vec::with_capacity(limit);
    let mut lost_in_a_row = 0;
    for index in 0..total {
        let measured = index >= cell.warmup;
        payload.stamp(index);
        if let Some(work) = codec_work.as_mut() {
            work.prepare(index);
        }
        // For a codec cell the round trip starts before encoding and ends after decoding.
        let started = Instant::now();
        let request = match codec_work.as_mut() {
            Some(work) => work.encode(measured),
            None => payload.bytes(),
        };
        let deadline = Instant::now() + cell.timeout;
        run.channel
            .send(request, deadline)
            .map_err(|e| run.transport_failure(index, "sending the request", e))?;
        let answered = loop {
            match run.channel.recv(&mut reply, limit, deadline) {
                // A late reply to an earlier, already lost request: not this one's.
                Ok(())
                    if run.channel.is_lossy()
                        && payload.index_of(&reply).is_some_and(|i| i < index) => {}
                Ok(()) => break true,
                Err(TransportError::Timeout { .. }) if run.channel.is_lossy() => break false,
                Err(e) => return Err(run.transport_failure(index, "waiting for the reply", e)),
            }
        };
        let decoded = match codec_work.as_mut() {
            Some(work) if answered => Some(work.decode(&reply, measured)),
            _ => None,
        };
        let round_trip = started.elapsed();
        if !answered {
            tally.lost += 1;
            lost_in_a_row += 1;
            if lost_in_a_row >= LOST_IN_A_ROW_LIMIT {
                return Err(run.failure(
                    index,
                    FailureKind::Timeout,
                    format!(
                        "{lost_in_a_row} replies in a row were not received within {:?}; the peer is unresponsive",
                        cell.timeout
                    ),
                ));
            }
            continue;
        }
        lost_in_a_row = 0;
        if let (Some(work), Some(decoded)) = (codec_work.as_ref(), decoded) {
            let codec = work.codec();
            let frame = decoded.map_err(|e| {
                run.failure(
                    index,
                    FailureKind::Protocol,
                    format!("the reply is not a {codec} sensor frame: {e}"),
                )
            })?;
            if let Some(difference) = work.difference(&frame) {
                return Err(run.failure(
                    index,
                    FailureKind::Mismatch,
                    format!("the decoded reply differs at {difference}"),
                ));
            }
        } else if let Err(mismatch) = compare(payload.bytes(), &reply) {
            let kind = mismatch.failure_kind();
            return Err(run.failure(index, kind, mismatch.to_string()));
        }
        tally.count_round_trip(index, cell.warmup, round_trip);
    }

    tally.codec_stages = codec_work.map(|work| CodecStages {
        encode_ns: work.encode_times.stats(),
        decode_ns: work.decode_times.stats(),
    });
    let allowed = (cell.max_loss * total as f64).floor() as u64;
    if tally.lost > allowed {
        return Err(Failure {
            kind: FailureKind::Timeout,
            round_trip: None,
            reason: format!(
                "{} of {total} replies were lost; at most {allowed} may be (max_loss {})",
                tally.lost, cell.max_loss
            ),
        });
    }
    run.goodbye()
}

/// The state of a running exchange, for failure messages that name the round trip and
/// say what became of the peer.
struct Exchange<'a> {
    channel: &'a mut dyn Channel,
    peer: &'a mut PeerProcess,
    total: u64,
    warmup: u64,
    timeout: Duration,
}

impl Exchange<'_> {
    fn failure(&mut self, index: u64, kind: FailureKind, what: String) -> Failure {
        round_trip_failure(self.peer, (index, self.total, self.warmup), kind, what)
    }

    fn transport_failure(&mut self, index: u64, doing: &str, e: TransportError) -> Failure {
        let kind = match e {
            TransportError::Timeout { .. } => FailureKind::Timeout,
            TransportError::Closed | TransportError::PeerGone(_) => FailureKind::PeerGone,
            TransportError::TooLarge { .. } | TransportError::Corrupt(_) => FailureKind::Protocol,
            TransportError::Io { .. } => FailureKind::PeerGone,
        };
        let limit = match e {
            TransportError::Timeout { .. } => format!(" (timeout {:?})", self.timeout),
            _ => String::new(),
        };
        self.failure(index, kind, format!("{doing}: {e}{limit}"))
    }

    /// Tells the peer to stop (an empty message) and expects a clean exit.
    fn goodbye(&mut self) -> Result<(), Failure> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let sent = self.channel.send(&[], deadline);
        match (sent, self.peer.wait_until(deadline)) {
            (Ok(()), Some(status)) if status.success() => Ok(()),
            (sent, status) => Err(unclean_stop(
                self.peer,
                match (sent, status) {
                    (Err(e), _) => format!("goodbye not delivered: {e}"),
                    (_, Some(status)) => describe(status),
                    (_, None) => "still running after 5s".into(),
                },
            )),
        }
    }
}

/// A failure of round trip `index` of `total` (the first `warmup` are warm-up), with what
/// became of the peer.
pub(crate) fn round_trip_failure(
    peer: &mut PeerProcess,
    (index, total, warmup): (u64, u64, u64),
    kind: FailureKind,
    what: String,
) -> Failure {
    let phase = if index < warmup { " (warm-up)" } else { "" };
    Failure {
        kind,
        round_trip: Some(index),
        reason: format!(
            "round trip {index} of {total}{phase}: {what}{}",
            peer_epilogue(peer)
        ),
    }
}

/// The peer did not exit cleanly after its goodbye; `what` says how.
pub(crate) fn unclean_stop(peer: &mut PeerProcess, what: String) -> Failure {
    Failure {
        kind: FailureKind::Shutdown,
        round_trip: None,
        reason: format!(
            "the peer did not stop cleanly after the last round trip ({what}){}",
            peer_epilogue(peer)
        ),
    }
}

/// "; the peer exited (exit status 3); its stderr: ..." when there is something to say.
pub(crate) fn peer_epilogue(peer: &mut PeerProcess) -> String {
    // A peer that just failed may take a moment to exit; give it that moment.
    let status = peer.wait_until(Instant::now() + Duration::from_millis(200));
    let stderr = peer.stop();
    let mut out = String::new();
    if let Some(status) = status {
        out.push_str(&format!("; the peer exited ({})", describe(status)));
    }
    if !stderr.is_empty() {
        out.push_str(&format!("; its stderr: {stderr}"));
    }
    out
}
