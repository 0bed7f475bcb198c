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

pub(super) type ProbeResult = Result<Vec<u64>, String>;

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
pub(super) type RoundTrip = Box<dyn FnMut(&dyn Fn() -> bool) -> Result<(), String> + Send>;

/// A probe whose responder runs: timed in one go or in blocks, then closed.
pub(super) struct OpenProbe {
    pub(super) responder: std::thread::JoinHandle<Result<(), String>>,
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

    pub(super) fn close(self) -> Result<(), String> {
        drop(self.one);
        (self.stop)();
        joined(self.responder)
    }
}

pub(super) fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Times `one` round trip after round trip: the warm-up untimed (or as much as fits in
/// [`WARMUP_BUDGET`]), then the timed ones (or as many as fit in the budget, at least
/// [`MIN_ROUND_TRIPS`]), each timed by its own two clock reads as a cell's.
pub(super) fn time_round_trips(
    rounds: Rounds,
    mut one: impl FnMut() -> Result<(), String>,
) -> ProbeResult {
    let deadline = rounds.deadline;
    let warmup_ends = Instant::now() + WARMUP_BUDGET;
    for _ in 0..rounds.warmup {
        one()?;
        let now = Instant::now();
        if now > deadline {
            return Err("the warm-up outlasted the probe's deadline".into());
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
            return Err("the probe outlasted its deadline".into());
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
    serve: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        set_thread_cpus(&[cpu]).map_err(|e| format!("pinning the responder: {e}"))?;
        serve()
    })
}

pub(super) fn joined(handle: std::thread::JoinHandle<Result<(), String>>) -> Result<(), String> {
    handle
        .join()
        .map_err(|_| "the responder panicked".to_string())?
}
