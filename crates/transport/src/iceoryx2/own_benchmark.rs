//! iceoryx2 as its authors measure it: the setup of iceoryx2's own publish-subscribe
//! benchmark (`benchmarks/publish-subscribe` in its repository), timed round trip by
//! round trip so that its median stands beside a cell's. Two threads, each pinned to one
//! of the cell's CPUs; a service of `[u8]` each way with one publisher and one subscriber,
//! history 0, a subscriber buffer of 1, safe overflow on, publishers sized for the
//! payload; the next sample loaned before the wait for the reply; the payload never
//! written or read (`loan_slice_uninit`, `assume_init`, as the benchmark does unless it is
//! told `--send-copy`); the single-threaded `ipc` service; busy waiting on `receive`.
//!
//! Where ours differs: its files live under a private root and prefix of the run, as a
//! channel's do ([`RunFiles`]), and either thread gives up at the deadline (the benchmark
//! waits for ever), looking at the clock every 1024 spins.

use super::files::{config, iox, node, S};
use super::{service_name, RunFiles};
use crate::error::TransportError;
use crate::platform::set_thread_cpus;
use crate::wait::keep_spinning;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const A2B: &str = "own-benchmark.a2b";
const B2A: &str = "own-benchmark.b2a";

/// Round trips of `payload` bytes in iceoryx2's own benchmark setup: the first `warmup`
/// untimed, then `timed` each timed alone (nanoseconds, in order). The threads are pinned
/// to `cpus` where given; both give up at `deadline`.
pub fn publish_subscribe(
    payload: usize,
    (warmup, timed): (u64, u64),
    cpus: (Option<usize>, Option<usize>),
    deadline: Instant,
) -> Result<Vec<u64>, TransportError> {
    let run = RunFiles::create()?;
    let config = Arc::new(config(run.root.path(), &run.prefix)?);
    // Both services exist before either thread opens its ports: made by a node of this
    // thread, as the benchmark makes them before it starts its threads.
    let maker = node(&config)?;
    let made: Vec<_> = [A2B, B2A]
        .iter()
        .map(|name| {
            maker
                .service_builder(&service_name(name)?)
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                .subscriber_max_buffer_size(1)
                .enable_safe_overflow(true)
                .create()
                .map_err(iox("creating an iceoryx2 benchmark service"))
        })
        .collect::<Result<_, _>>()?;
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let side = |sends: &'static str, receives: &'static str, cpu: Option<usize>| {
        let (config, stop, ready) = (Arc::clone(&config), Arc::clone(&stop), Arc::clone(&ready));
        move |first: bool| -> Result<Vec<u64>, TransportError> {
            if let Some(cpu) = cpu {
                set_thread_cpus(&[cpu])
                    .map_err(TransportError::io("pinning a benchmark thread"))?;
            }
            let result = (|| {
                let node = node(&config)?;
                let open = |name: &str| {
                    node.service_builder(&service_name(name)?)
                        .publish_subscribe::<[u8]>()
                        .open()
                        .map_err(iox("opening an iceoryx2 benchmark service"))
                };
                let (tx, rx) = (open(sends)?, open(receives)?);
                let publisher = tx
                    .publisher_builder()
                    .initial_max_slice_len(payload)
                    .create()
                    .map_err(iox("creating an iceoryx2 benchmark publisher"))?;
                let subscriber = rx
                    .subscriber_builder()
                    .create()
                    .map_err(iox("creating an iceoryx2 benchmark subscriber"))?;
                let loan = || {
                    let sample = publisher
                        .loan_slice_uninit(payload)
                        .map_err(iox("loaning an iceoryx2 benchmark sample"))?;
                    // SAFETY: the benchmark's own `assume_init` of an unwritten loan: the
                    // chunk lies in a segment mapped from shared memory, whose bytes the
                    // kernel zeroed, and it is never read.
                    Ok::<_, TransportError>(unsafe { sample.assume_init() })
                };
                let wait = || -> Result<(), TransportError> {
                    let mut spins = 0u32;
                    loop {
                        if subscriber
                            .receive()
                            .map_err(iox("receiving an iceoryx2 benchmark sample"))?
                            .is_some()
                        {
                            return Ok(());
                        }
                        spins = spins.wrapping_add(1);
                        if !keep_spinning(spins)
                            && (Instant::now() >= deadline || stop.load(Ordering::Relaxed))
                        {
                            return Err(TransportError::Timeout {
                                what: "reply in iceoryx2's own benchmark setup",
                            });
                        }
                    }
                };
                let send = |sample: iceoryx2::sample_mut::SampleMut<S, [u8], ()>| {
                    sample
                        .send()
                        .map_err(iox("sending an iceoryx2 benchmark sample"))
                };
                ready.wait();
                let mut times = Vec::with_capacity(timed as usize);
                if first {
                    // Participant 1: sends, loans the next sample, waits for the reply.
                    let mut sample = loan()?;
                    for index in 0..warmup + timed {
                        let started = Instant::now();
                        send(sample)?;
                        sample = loan()?;
                        wait()?;
                        if index >= warmup {
                            times.push(started.elapsed().as_nanos() as u64);
                        }
                    }
                } else {
                    // Participant 2: loans the reply's sample, waits, sends it.
                    for _ in 0..warmup + timed {
                        let sample = loan()?;
                        wait()?;
                        send(sample)?;
                    }
                }
                Ok(times)
            })();
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            result
        }
    };
    // Both participants are threads of their own, so that pinning one leaves the
    // caller's CPUs as they were.
    let (first, second) = (side(A2B, B2A, cpus.0), side(B2A, A2B, cpus.1));
    let responder = std::thread::spawn(move || second(false));
    let sender = std::thread::spawn(move || first(true));
    let panicked = |_| {
        Err(TransportError::Corrupt(
            "a benchmark thread panicked".into(),
        ))
    };
    let times = sender.join().unwrap_or_else(panicked);
    let responded = responder.join().unwrap_or_else(panicked);
    drop(made);
    drop(maker);
    drop(run);
    // The first error is the one to say; a timeout of the other side follows from it.
    match (times, responded) {
        (Ok(times), Ok(_)) => Ok(times),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
        (Err(e), Err(other)) => match e {
            TransportError::Timeout { .. } => Err(other),
            e => Err(e),
        },
    }
}

/// How long the setup may take for `round_trips` round trips: generous, since it only
/// has to end (a microsecond a round trip is the benchmark's own scale).
pub fn deadline_for(round_trips: u64) -> Instant {
    Instant::now()
        + Duration::from_secs(10)
        + Duration::from_micros(round_trips.saturating_mul(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round trip asked for is timed.
    #[test]
    fn the_setup_times_each_round_trip_asked_for() {
        let times = publish_subscribe(200, (10, 200), (None, None), deadline_for(210)).unwrap();
        assert_eq!(times.len(), 200);
        assert!(times.iter().all(|&t| t > 0), "{times:?}");
    }

    /// A deadline that has passed ends both threads with a timeout, never a hang.
    #[test]
    fn a_passed_deadline_ends_the_setup_with_a_timeout() {
        match publish_subscribe(200, (0, 1_000_000_000), (None, None), Instant::now()) {
            Err(TransportError::Timeout { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
