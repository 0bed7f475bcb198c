//! Timing a probe: its round trips (warm-up, then timed, within a budget), the responder
//! thread on the other CPU, and what a probe that is open holds.

use ipc_matrix_transport::set_thread_cpus;
use std::time::{Duration, Instant};

/// A probe runs as many round trips as its cell, warm-up and timed: on a VM, a blocking
/// ping-pong between two tasks that have just started is faster for its first tens of
/// milliseconds (here 28 us a round trip for about 2,000 round trips, then 42 us), and a
/// cell always starts a new peer. Within these bounds:
pub(super) const MAX_WARMUP: u64 = 1_000;
pub(super) const WARMUP_BUDGET: Duration = Duration::from_millis(500);
pub(super) const MAX_ROUND_TRIPS: u64 = 20_000;
/// At least this many round trips are timed.
pub(super) const MIN_ROUND_TRIPS: u64 = 1;
/// Time given to the timed round trips of one probe.
pub(super) const TIME_BUDGET: Duration = Duration::from_secs(2);
/// A probe still running after this long has failed (an emulator, a stuck CPU).
pub(super) const PROBE_DEADLINE: Duration = Duration::from_secs(20);
/// The longest wait of one socket call of a probe: its other side is gone.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an idle socket responder looks whether its probe was closed: it waits
/// between the blocks of a cell, for as long as the cell takes.
pub(super) const RESPONDER_WAKE: Duration = Duration::from_millis(250);

pub(super) fn median(mut samples: Vec<u64>) -> Option<(u64, u64)> {
    samples.sort_unstable();
    let count = samples.len() as u64;
    samples.get(samples.len() / 2).map(|&p50| (p50, count))
}

pub(super) type ProbeResult = Result<Vec<u64>, ProbeError>;

/// Why a probe failed: its set-up, a round trip, its deadline, its responder thread, or
/// a block of it between a cell's round trips.
#[derive(Debug, thiserror::Error)]
pub(super) enum ProbeError {
    /// Making its sockets or pipes.
    #[error("{0}")]
    Setup(#[source] std::io::Error),
    /// A round trip's `doing` (write, read, send, recv) failed.
    #[error("{doing}: {source}")]
    RoundTrip {
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A datagram reply of `got` bytes to a request of `sent`.
    #[error("a reply of {got} bytes to {sent}")]
    ShortReply { got: usize, sent: usize },
    /// A shared-memory wait that was told to give up.
    #[error("the other side stopped answering")]
    Stopped,
    #[error("the warm-up outlasted the probe's deadline")]
    WarmupOutlasted,
    #[error("the probe outlasted its deadline")]
    Outlasted,
    #[error("pinning the responder: {0}")]
    Pinning(#[source] std::io::Error),
    /// The responder's `doing` (read, recv, write, send) failed.
    #[error("responder {doing}: {source}")]
    Responder {
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the responder panicked")]
    ResponderPanicked,
    /// A block of a probe that was not opened.
    #[error("the probe is not open")]
    NotOpen,
    /// A block of the spin probe, whose busy-polling peer could not be stopped.
    #[error("the peer could not be stopped for the floor")]
    PeerNotStopped,
}

/// How many round trips a probe runs, and until when.
#[derive(Clone, Copy)]
pub(super) struct Rounds {
    pub(super) warmup: u64,
    pub(super) timed: u64,
    pub(super) deadline: Instant,
    /// Time given to the timed round trips.
    pub(super) budget: Duration,
}

impl Rounds {
    pub(super) fn of((warmup, timed): (u64, u64)) -> Self {
        Self {
            warmup: warmup.min(MAX_WARMUP),
            timed: timed.clamp(MIN_ROUND_TRIPS, MAX_ROUND_TRIPS),
            deadline: Instant::now() + PROBE_DEADLINE,
            budget: TIME_BUDGET,
        }
    }
}

/// One round trip of a probe; the argument says when to stop waiting for the responder.
pub(super) type RoundTrip = Box<dyn FnMut(&dyn Fn() -> bool) -> Result<(), ProbeError> + Send>;

/// A probe whose responder runs: timed in one go or in blocks, then closed.
pub(super) struct OpenProbe {
    pub(super) responder: std::thread::JoinHandle<Result<(), ProbeError>>,
    /// One round trip; `give_up` says when to stop waiting for the responder.
    pub(super) one: RoundTrip,
    /// Tells the responder to stop, once `one` (and the ends it holds) is dropped.
    pub(super) stop: Box<dyn FnOnce() + Send>,
}

impl OpenProbe {
    /// Times `rounds` round trips (see [`time_round_trips`]).
    pub(super) fn time(&mut self, rounds: Rounds) -> ProbeResult {
        let responder = &self.responder;
        let give_up = || responder.is_finished() || Instant::now() > rounds.deadline;
        let one = &mut self.one;
        time_round_trips(rounds, || one(&give_up))
    }

    pub(super) fn close(self) -> Result<(), ProbeError> {
        drop(self.one);
        (self.stop)();
        joined(self.responder)
    }
}

/// Times `one` round trip after round trip: the warm-up untimed (or as much as fits in
/// [`WARMUP_BUDGET`]), then the timed ones (or as many as fit in the budget, at least
/// [`MIN_ROUND_TRIPS`]), each timed by its own two clock reads as a cell's.
pub(super) fn time_round_trips(
    rounds: Rounds,
    mut one: impl FnMut() -> Result<(), ProbeError>,
) -> ProbeResult {
    let deadline = rounds.deadline;
    let warmup_ends = Instant::now() + WARMUP_BUDGET;
    for _ in 0..rounds.warmup {
        one()?;
        let now = Instant::now();
        if now > deadline {
            return Err(ProbeError::WarmupOutlasted);
        }
        if now > warmup_ends {
            break;
        }
    }
    let budget_ends = Instant::now() + rounds.budget;
    let mut samples = Vec::with_capacity(rounds.timed as usize);
    while (samples.len() as u64) < rounds.timed {
        let started = Instant::now();
        one()?;
        let ended = Instant::now();
        samples.push((ended - started).as_nanos() as u64);
        if ended > deadline {
            return Err(ProbeError::Outlasted);
        }
        if ended > budget_ends && samples.len() as u64 >= MIN_ROUND_TRIPS {
            break;
        }
    }
    Ok(samples)
}

/// Runs `serve` on a thread pinned to `cpu`; its error, if any, is returned by `join`.
pub(super) fn responder(
    cpu: usize,
    serve: impl FnOnce() -> Result<(), ProbeError> + Send + 'static,
) -> std::thread::JoinHandle<Result<(), ProbeError>> {
    std::thread::spawn(move || {
        set_thread_cpus(&[cpu]).map_err(ProbeError::Pinning)?;
        serve()
    })
}

pub(super) fn joined(
    handle: std::thread::JoinHandle<Result<(), ProbeError>>,
) -> Result<(), ProbeError> {
    handle.join().map_err(|_| ProbeError::ResponderPanicked)?
}
