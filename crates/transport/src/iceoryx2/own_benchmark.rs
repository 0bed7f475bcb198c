//! iceoryx2 as its authors measure it: the setups of iceoryx2's own benchmarks
//! (`benchmarks/publish-subscribe` and `benchmarks/event` in its repository), timed round
//! trip by round trip so that their medians stand beside a cell's. Both are a ping-pong
//! of two threads, each pinned to one of the cell's CPUs, over two services (one each
//! way) of the single-threaded `ipc` service, made before either thread opens its ports.
//!
//! - [`publish_subscribe`]: services of `[u8]` with one publisher and one subscriber,
//!   history 0, a subscriber buffer of 1, safe overflow on, publishers sized for the
//!   payload; the next sample loaned before the wait for the reply; the payload never
//!   written or read (`loan_slice_uninit`, `assume_init`, as the benchmark does unless it
//!   is told `--send-copy`); busy waiting on `receive`.
//! - [`event`]: event services with one notifier and one listener, event ids up to 128
//!   (the benchmark's default); a round trip is a `notify` and the wait for the other
//!   side's; no payload at all.
//!
//! Where ours differs: its files live under a private root and prefix of the run, as a
//! channel's do ([`RunFiles`]), and either thread gives up at the deadline (the benchmark
//! waits for ever): the busy wait looks at the clock every 1024 spins, and the event
//! wait is `timed_wait` in slices of [`EVENT_WAIT_SLICE`] where the benchmark calls
//! `blocking_wait` (the same wait on the listener's socket, with a timeout).

use super::files::RunFiles;
use super::files::{config, iox, node, S};
use super::service_name;
use crate::error::TransportError;
use crate::platform::set_thread_cpus;
use crate::wait::keep_spinning;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::Node;
use iceoryx2::sample_mut::SampleMut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const A2B: &str = "own-benchmark.a2b";
const B2A: &str = "own-benchmark.b2a";

/// The longest single wait on a listener in [`event`]: its stop flag and deadline are
/// looked at between two.
pub const EVENT_WAIT_SLICE: Duration = Duration::from_millis(10);

/// The event benchmark's greatest event id (its `--max-event-id` default).
const EVENT_ID_MAX_VALUE: usize = 128;

/// Round trips of `payload` bytes in iceoryx2's own publish-subscribe benchmark setup:
/// the first `warmup` untimed, then `timed` each timed alone (nanoseconds, in order). The
/// threads are pinned to `cpus` where given; both give up at `deadline`.
pub fn publish_subscribe(
    payload: usize,
    rounds: (u64, u64),
    cpus: (Option<usize>, Option<usize>),
    deadline: Instant,
) -> Result<Vec<u64>, TransportError> {
    let service = |maker: &Node<S>, name: &str| {
        maker
            .service_builder(&service_name(name)?)
            .publish_subscribe::<[u8]>()
            .max_publishers(1)
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(1)
            .enable_safe_overflow(true)
            .create()
            .map(kept)
            .map_err(iox("creating an iceoryx2 benchmark service"))
    };
    let open = move |node: &Node<S>, sends: &str, receives: &str| {
        let open = |name: &str| {
            node.service_builder(&service_name(name)?)
                .publish_subscribe::<[u8]>()
                .open()
                .map_err(iox("opening an iceoryx2 benchmark service"))
        };
        let (tx, rx) = (open(sends)?, open(receives)?);
        Ok(PubSub {
            publisher: tx
                .publisher_builder()
                .initial_max_slice_len(payload)
                .create()
                .map_err(iox("creating an iceoryx2 benchmark publisher"))?,
            subscriber: rx
                .subscriber_builder()
                .create()
                .map_err(iox("creating an iceoryx2 benchmark subscriber"))?,
            payload,
            loaned: None,
        })
    };
    ping_pong(service, open, rounds, cpus, deadline)
}

/// Round trips in iceoryx2's own event benchmark setup (a notification each way, no
/// payload), as [`publish_subscribe`] times them.
pub fn event(
    rounds: (u64, u64),
    cpus: (Option<usize>, Option<usize>),
    deadline: Instant,
) -> Result<Vec<u64>, TransportError> {
    let service = |maker: &Node<S>, name: &str| {
        maker
            .service_builder(&service_name(name)?)
            .event()
            .max_notifiers(1)
            .max_listeners(1)
            .event_id_max_value(EVENT_ID_MAX_VALUE)
            .create()
            .map(kept)
            .map_err(iox("creating an iceoryx2 benchmark event service"))
    };
    let open = |node: &Node<S>, sends: &str, receives: &str| {
        let open = |name: &str| {
            node.service_builder(&service_name(name)?)
                .event()
                .open()
                .map_err(iox("opening an iceoryx2 benchmark event service"))
        };
        let (tx, rx) = (open(sends)?, open(receives)?);
        Ok(Event {
            notifier: tx
                .notifier_builder()
                .create()
                .map_err(iox("creating an iceoryx2 benchmark notifier"))?,
            listener: rx
                .listener_builder()
                .create()
                .map_err(iox("creating an iceoryx2 benchmark listener"))?,
        })
    };
    ping_pong(service, open, rounds, cpus, deadline)
}

/// How long a setup may take for `round_trips` round trips: generous, since it only has
/// to end (a microsecond a round trip is the publish-subscribe benchmark's own scale, a
/// few tens the event benchmark's).
pub fn deadline_for(round_trips: u64) -> Instant {
    Instant::now()
        + Duration::from_secs(10)
        + Duration::from_micros(round_trips.saturating_mul(100))
}

/// A made service, kept (boxed, whatever its kind) until both threads are done.
type Made = Box<dyn std::any::Any>;

fn kept<T: 'static>(service: T) -> Made {
    Box::new(service)
}

/// What a side says when the other stopped first (a timeout, so that the other side's
/// own error is the one reported).
const OTHER_SIDE_STOPPED: TransportError = TransportError::Timeout {
    what: OTHER_SIDE_STOPPED_WHAT,
};
const OTHER_SIDE_STOPPED_WHAT: &str =
    "the other side of iceoryx2's own benchmark setup, which stopped";

/// One side of a benchmark's ping-pong, on its own thread.
trait Participant {
    /// Gets ready to send (the publish-subscribe setup loans its next sample here).
    fn prepare(&mut self) -> Result<(), TransportError>;
    fn send(&mut self) -> Result<(), TransportError>;
    /// Waits for the other side's message, until `deadline` or until `stop` is set.
    fn wait(&mut self, deadline: Instant, stop: &AtomicBool) -> Result<(), TransportError>;
}

/// Runs the ping-pong: the service of each direction made by `service` on this thread,
/// then two pinned
/// threads, each opening its ports with `open` (sending on one service, receiving on the
/// other). Participant 1 prepares, then per round trip sends, prepares the next and waits
/// (timed from before its send to after its wait); participant 2 prepares, waits and
/// sends. An error on either side stops the other.
fn ping_pong<P, Service, Open>(
    service: Service,
    open: Open,
    (warmup, timed): (u64, u64),
    cpus: (Option<usize>, Option<usize>),
    deadline: Instant,
) -> Result<Vec<u64>, TransportError>
where
    P: Participant,
    Service: Fn(&Node<S>, &str) -> Result<Made, TransportError>,
    Open: Fn(&Node<S>, &str, &str) -> Result<P, TransportError> + Send + Sync + 'static,
{
    let run = RunFiles::create()?;
    let config = Arc::new(config(run.root.path(), &run.prefix)?);
    // Both services exist before either thread opens its ports, as the benchmarks make
    // them before they start their threads.
    let maker = node(&config)?;
    let made = [A2B, B2A]
        .iter()
        .map(|name| service(&maker, name))
        .collect::<Result<Vec<_>, _>>()?;
    let open = Arc::new(open);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let side = |sends: &'static str, receives: &'static str, cpu: Option<usize>| {
        let (config, stop, ready, open) = (
            Arc::clone(&config),
            Arc::clone(&stop),
            Arc::clone(&ready),
            Arc::clone(&open),
        );
        move |first: bool| -> Result<Vec<u64>, TransportError> {
            let opened = (|| {
                if let Some(cpu) = cpu {
                    set_thread_cpus(&[cpu])
                        .map_err(TransportError::io("pinning a benchmark thread"))?;
                }
                let node = node(&config)?;
                let ports = open(&node, sends, receives)?;
                Ok((node, ports))
            })();
            if opened.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            // Each side passes the barrier once, its ports open or not, so that neither
            // waits there for ever.
            ready.wait();
            let result = opened.and_then(|(_node, mut ports): (Node<S>, P)| {
                if stop.load(Ordering::Relaxed) {
                    return Err(OTHER_SIDE_STOPPED);
                }
                let mut times = Vec::with_capacity(if first { timed as usize } else { 0 });
                ports.prepare()?;
                for index in 0..warmup + timed {
                    if first {
                        let started = Instant::now();
                        // Round trips that keep succeeding end at the deadline too.
                        if started >= deadline {
                            return Err(TransportError::Timeout {
                                what: "the round trips of iceoryx2's own benchmark setup",
                            });
                        }
                        ports.send()?;
                        ports.prepare()?;
                        ports.wait(deadline, &stop)?;
                        if index >= warmup {
                            times.push(started.elapsed().as_nanos() as u64);
                        }
                    } else {
                        ports.wait(deadline, &stop)?;
                        ports.send()?;
                        ports.prepare()?;
                    }
                }
                Ok(times)
            });
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            result
        }
    };
    let (first, second) = (side(A2B, B2A, cpus.0), side(B2A, A2B, cpus.1));
    // Both participants are threads of their own, so that pinning one leaves the
    // caller's CPUs as they were.
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
    // The side that failed first is the one to say; the other stopped because of it.
    let stopped_by_the_other = |e: &TransportError| matches!(e, TransportError::Timeout { what } if *what == OTHER_SIDE_STOPPED_WHAT);
    match (times, responded) {
        (Ok(times), Ok(_)) => Ok(times),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
        (Err(e), Err(other)) if stopped_by_the_other(&e) => Err(other),
        (Err(e), Err(_)) => Err(e),
    }
}

/// A side of the publish-subscribe setup: its next sample is loaned in `prepare`.
struct PubSub {
    publisher: Publisher<S, [u8], ()>,
    subscriber: Subscriber<S, [u8], ()>,
    payload: usize,
    loaned: Option<SampleMut<S, [u8], ()>>,
}

impl Participant for PubSub {
    fn prepare(&mut self) -> Result<(), TransportError> {
        let sample = self
            .publisher
            .loan_slice_uninit(self.payload)
            .map_err(iox("loaning an iceoryx2 benchmark sample"))?;
        // SAFETY: the benchmark's own `assume_init` of an unwritten loan: the chunk lies
        // in a segment mapped from shared memory, whose bytes the kernel zeroed, and it is
        // never read.
        self.loaned = Some(unsafe { sample.assume_init() });
        Ok(())
    }

    fn send(&mut self) -> Result<(), TransportError> {
        let sample = self.loaned.take().ok_or_else(|| {
            TransportError::Corrupt("a benchmark sample was sent before it was loaned".into())
        })?;
        sample
            .send()
            .map(|_| ())
            .map_err(iox("sending an iceoryx2 benchmark sample"))
    }

    fn wait(&mut self, deadline: Instant, stop: &AtomicBool) -> Result<(), TransportError> {
        let mut spins = 0u32;
        loop {
            if self
                .subscriber
                .receive()
                .map_err(iox("receiving an iceoryx2 benchmark sample"))?
                .is_some()
            {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if !keep_spinning(spins) {
                stopped_or_late(deadline, stop, "reply in iceoryx2's own benchmark setup")?;
            }
        }
    }
}

/// A side of the event setup: a notifier on one service, a listener on the other.
struct Event {
    notifier: Notifier<S>,
    listener: Listener<S>,
}

impl Participant for Event {
    fn prepare(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    fn send(&mut self) -> Result<(), TransportError> {
        self.notifier
            .notify()
            .map(|_| ())
            .map_err(iox("notifying in iceoryx2's own event benchmark setup"))
    }

    /// Waits until at least one event arrived, as the benchmark's
    /// `while listener.blocking_wait(|_| {}) == 0 {}` does.
    fn wait(&mut self, deadline: Instant, stop: &AtomicBool) -> Result<(), TransportError> {
        loop {
            let mut events = 0usize;
            self.listener
                .timed_wait(|_| events += 1, EVENT_WAIT_SLICE)
                .map_err(iox("waiting in iceoryx2's own event benchmark setup"))?;
            if events > 0 {
                return Ok(());
            }
            stopped_or_late(deadline, stop, "event in iceoryx2's own benchmark setup")?;
        }
    }
}

/// A timeout once `deadline` has passed or the other side stopped.
fn stopped_or_late(
    deadline: Instant,
    stop: &AtomicBool,
    what: &'static str,
) -> Result<(), TransportError> {
    if stop.load(Ordering::Relaxed) {
        return Err(OTHER_SIDE_STOPPED);
    }
    match Instant::now() >= deadline {
        true => Err(TransportError::Timeout { what }),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round trip asked for is timed, in both setups.
    #[test]
    fn the_setups_time_each_round_trip_asked_for() {
        let pubsub = publish_subscribe(200, (10, 200), (None, None), deadline_for(210)).unwrap();
        let event = event((10, 200), (None, None), deadline_for(210)).unwrap();
        for times in [pubsub, event] {
            assert_eq!(times.len(), 200);
            assert!(times.iter().all(|&t| t > 0), "{times:?}");
        }
    }

    /// A deadline that has passed ends both threads with a timeout, never a hang, even
    /// while round trips still succeed.
    #[test]
    fn a_passed_deadline_ends_the_setups_with_a_timeout() {
        let rounds = (0, 1_000_000_000);
        let pubsub = publish_subscribe(200, rounds, (None, None), Instant::now());
        let event = event(rounds, (None, None), Instant::now());
        for ended in [pubsub, event] {
            match ended {
                Err(TransportError::Timeout { what }) => {
                    assert_ne!(what, OTHER_SIDE_STOPPED_WHAT)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// A side that cannot start (here: pinned to a CPU that does not exist) ends the
    /// setup with its own error, and the other side does not wait for it for ever.
    #[test]
    fn a_side_that_cannot_start_ends_the_setup_with_its_error() {
        let cpus = (None, Some(libc::CPU_SETSIZE as usize - 1));
        match event((0, 10), cpus, deadline_for(10)) {
            Err(TransportError::Io { context, .. }) => {
                assert_eq!(context, "pinning a benchmark thread")
            }
            other => panic!("{other:?}"),
        }
    }
}
