//! iceoryx2 (zero-copy shared memory, <https://iceoryx.io>): two publish-subscribe
//! services of `[u8]`, one per direction (measuring side -> peer, peer -> measuring side),
//! and in blocking mode an event service per direction to wake the reader.
//!
//! Request-response would fit an echo, not the [`Channel`] contract: either side sends
//! many messages back to back (the conformance suite sends 10,000), without a request
//! pending. Publish-subscribe maps one to one: a send loans a chunk of the sender's
//! segment (`loan_slice_uninit`), copies the caller's bytes into it once
//! (`write_from_slice`) and publishes its offset; a receive copies the chunk once into the
//! caller's buffer and returns it. No other copy is made. The loaned path ([`Loans`])
//! makes neither: the caller fills the loaned sample and compares the received one in
//! place (held unread until the caller reads it: [`Loans::hold`]), and the peer's loaned
//! echo writes the request's sample into the reply's loan.
//!
//! - **Flow control.** One message in flight each way ([`IN_FLIGHT`], the subscriber
//!   buffer of iceoryx2's own benchmark). Safe overflow is off (the default overwrites the
//!   oldest message), every segment is allocated once, sized for the largest message
//!   (`Static`), and a full queue holds the sender in iceoryx2's retry loop, through a
//!   backpressure handler that gives up at the send's deadline or once the other process
//!   is gone (without one, iceoryx2 retries for ever).
//! - **Waiting.** Nothing in iceoryx2 notices a dead peer, and receiving never blocks:
//!   busy-poll spins on `receive`, looking at the clock every `SPINS_PER_CHECK` spins and
//!   at the other process every `LIVENESS_PERIOD`, as `shm.rs` does, but with no pause
//!   instruction between looks (shm's has one), as iceoryx2's own benchmark spins;
//!   blocking waits on the direction's event
//!   listener, in slices of at most `LIVENESS_PERIOD` and at least 1 ms (iceoryx2 turns a
//!   timeout under a microsecond into "wait for ever").
//! - **Trust.** iceoryx2 builds a received slice from the length the sender wrote in the
//!   sample's header. That length is checked against the receiver's limit and the most the
//!   sender's publisher may loan before a byte is read, so a lying sender cannot make this
//!   side read past a chunk; the chunk's offset itself is iceoryx2's to check. Its model is
//!   a cooperative peer of the same user, less strict than `shm.rs`, which checks every
//!   offset the other side writes.
//! - **Files** ([`files`]). Every file iceoryx2 makes lives under a root directory that
//!   is a [`PrivateDir`](crate::artifact::PrivateDir) of the measuring side, or in
//!   /dev/shm under a prefix made from that directory's name ([`files::prefix_of`]):
//!   `iox2.`, not our own `ipc-matrix.`, so the sweep of /dev/shm never judges them by a
//!   lock they do not have; `<prefix>alive`, locked by the
//!   measuring side while the channel lives, speaks for them all. They go when the
//!   channel is dropped and, after a crash, when the next sweep removes the directory
//!   ([`sweep::remove_run`]), or finds the prefix's lock free with the directory already gone.
//! - **Process.** No signal handlers (`SignalHandlingMode::Disabled`), no configuration
//!   file looked up (`Config::default()`, never `Config::global_config()`), and ports of
//!   `ipc::Service`, the single-threaded service, as iceoryx2's users take it when ports
//!   stay on one thread (a channel's do; see the `Send` of [`Iceoryx2Channel`]): the
//!   thread-safe one adds a mutex to every send and receive.

mod files;
pub mod own_benchmark;
pub(crate) mod sweep;

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel, Loans};
use crate::error::TransportError;
use crate::platform::{current_pid, ensure_alive, process_alive};
use crate::wait::{keep_spinning, remaining, LivenessChecks, LIVENESS_PERIOD};
use files::{check_socket_path, config, iox, node, RunFiles, PREFIX_START, S};
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::port::{BackpressureAction, BackpressureInfo, LoanError, SendError};
use iceoryx2::prelude::{
    AllocationStrategy, BackpressureStrategy, Node, PayloadHeader, PortFactory, ServiceName,
};
use iceoryx2::sample::Sample;
use iceoryx2::sample_mut::SampleMut;
use iceoryx2::sample_mut_uninit::SampleMutUninit;
use iceoryx2::service::port_factory::event::PortFactory as EventService;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory as PubSubService;
use ipc_matrix_spec::WakeMode;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One direction's publish-subscribe service.
type Messages = PubSubService<S, [u8], ()>;

/// Bytes a sender may send beyond the largest message its channel was made for: a peer
/// told to append bytes to its reply sends them, and the measuring side reports the reply
/// too long, rather than the peer failing to loan room for it.
const SLACK: usize = ipc_matrix_spec::limits::ICEORYX2_SLACK;

/// The services of one channel, by direction.
const TO_PEER: &str = "to-peer";
const TO_MEASURING: &str = "to-measuring";
const WAKE_SUFFIX: &str = ".wake";

/// Messages in flight per direction: the subscriber buffer of iceoryx2's own benchmark
/// (the spec counts the segments they take in a cell's memory need).
const IN_FLIGHT: usize = ipc_matrix_spec::limits::ICEORYX2_IN_FLIGHT;

fn service_name(name: &str) -> Result<ServiceName, TransportError> {
    ServiceName::new(name).map_err(iox("naming an iceoryx2 service"))
}

/// The settings of one direction's publish-subscribe service: one publisher, one
/// subscriber, two nodes, no history, [`IN_FLIGHT`] messages in flight, none lost.
fn pubsub(
    node: &Node<S>,
    name: &str,
) -> Result<iceoryx2::service::builder::publish_subscribe::Builder<[u8], (), S>, TransportError> {
    Ok(node
        .service_builder(&service_name(name)?)
        .publish_subscribe::<[u8]>()
        .max_publishers(1)
        .max_subscribers(1)
        .max_nodes(2)
        .history_size(0)
        .subscriber_max_buffer_size(IN_FLIGHT)
        .subscriber_max_borrowed_samples(1)
        .enable_safe_overflow(false))
}

fn event(
    node: &Node<S>,
    name: &str,
) -> Result<iceoryx2::service::builder::event::Builder<S>, TransportError> {
    Ok(node
        .service_builder(&service_name(&format!("{name}{WAKE_SUFFIX}"))?)
        .event()
        .max_notifiers(1)
        .max_listeners(1)
        .max_nodes(2))
}

/// Why the backpressure handler gave up a send.
const GAVE_UP_NOT: u8 = 0;
const GAVE_UP_DEADLINE: u8 = 1;
const GAVE_UP_GONE: u8 = 2;

/// What the backpressure handler (which iceoryx2 calls while the other side's queue is
/// full) needs to know of the send in progress: its deadline, the other process, when it
/// last looked at that process; and what it decided.
struct SendWatch {
    epoch: Instant,
    /// The send's deadline, in nanoseconds after `epoch`.
    deadline: AtomicU64,
    /// The other process; 0 until the measuring side has accepted its peer.
    other: AtomicU32,
    /// How long this send had been held when the handler last looked at the other
    /// process, plus LIVENESS_PERIOD: when it looks next (nanoseconds).
    next_look: AtomicU64,
    gave_up: AtomicU8,
}

impl SendWatch {
    fn new(other: u32) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            deadline: AtomicU64::new(u64::MAX),
            other: AtomicU32::new(other),
            next_look: AtomicU64::new(0),
            gave_up: AtomicU8::new(GAVE_UP_NOT),
        })
    }

    fn begin(&self, deadline: Instant) {
        let at = deadline.saturating_duration_since(self.epoch).as_nanos();
        self.deadline
            .store(u64::try_from(at).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.next_look.store(0, Ordering::Relaxed);
        self.gave_up.store(GAVE_UP_NOT, Ordering::Relaxed);
    }

    /// Retry, unless the deadline has passed or the other process is gone (looked at
    /// when the send is first held, then every LIVENESS_PERIOD).
    fn decide(&self, info: &BackpressureInfo) -> BackpressureAction {
        let now = self.epoch.elapsed().as_nanos();
        if now >= u128::from(self.deadline.load(Ordering::Relaxed)) {
            self.gave_up.store(GAVE_UP_DEADLINE, Ordering::Relaxed);
            return BackpressureAction::DiscardDataAndFail;
        }
        let held = u64::try_from(info.elapsed_time.as_nanos()).unwrap_or(u64::MAX);
        if held >= self.next_look.load(Ordering::Relaxed) {
            let period = LIVENESS_PERIOD.as_nanos() as u64;
            self.next_look
                .store(held.saturating_add(period), Ordering::Relaxed);
            if !process_alive(self.other.load(Ordering::Relaxed)) {
                self.gave_up.store(GAVE_UP_GONE, Ordering::Relaxed);
                return BackpressureAction::DiscardDataAndFail;
            }
        }
        BackpressureAction::Retry
    }
}

/// One side's iceoryx2 objects. Fields drop in this order: ports, then their services,
/// then the node, which removes what it made (and, dropped, cleans up after dead nodes of
/// the same root and prefix: `cleanup_dead_nodes_on_destruction`).
struct Ends {
    publisher: Publisher<S, [u8], ()>,
    subscriber: Subscriber<S, [u8], ()>,
    /// Blocking mode: the notifier of the direction this side sends on, the listener of
    /// the one it receives on.
    wake: Option<(Notifier<S>, Listener<S>)>,
    tx: Messages,
    rx: Messages,
    /// Blocking mode: the event services of the direction this side sends on and of the
    /// one it receives on.
    wake_services: Option<(EventService<S>, EventService<S>)>,
    _node: Node<S>,
}

/// Creates this side's ports on the two directions' services (`tx` it sends on, `rx` it
/// receives on), publishers sized for `max_message` plus SLACK.
fn ports(
    node: Node<S>,
    (tx, rx): (Messages, Messages),
    wake_services: Option<(EventService<S>, EventService<S>)>,
    max_message: usize,
    watch: &Arc<SendWatch>,
) -> Result<Ends, TransportError> {
    // The listener first: once the other side sees this side's publisher and subscriber,
    // everything it notifies is there.
    let wake = match &wake_services {
        Some((tx_wake, rx_wake)) => {
            let listener = rx_wake
                .listener_builder()
                .create()
                .map_err(iox("creating the iceoryx2 listener"))?;
            let notifier = tx_wake
                .notifier_builder()
                .create()
                .map_err(iox("creating the iceoryx2 notifier"))?;
            Some((notifier, listener))
        }
        None => None,
    };
    let subscriber = rx
        .subscriber_builder()
        .buffer_size(IN_FLIGHT)
        .create()
        .map_err(iox("creating the iceoryx2 subscriber"))?;
    let handler_watch = Arc::clone(watch);
    let publisher = tx
        .publisher_builder()
        .initial_max_slice_len(max_message.saturating_add(SLACK))
        .allocation_strategy(AllocationStrategy::Static)
        .max_loaned_samples(1)
        .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
        .set_backpressure_handler(move |info: &BackpressureInfo| handler_watch.decide(info))
        .create()
        .map_err(iox("creating the iceoryx2 publisher"))?;
    Ok(Ends {
        publisher,
        subscriber,
        wake,
        tx,
        rx,
        wake_services,
        _node: node,
    })
}

pub struct Iceoryx2Acceptor {
    ends: Ends,
    /// Declared after `ends`: dropped after them.
    run: RunFiles,
    wake: WakeMode,
    max_message: usize,
    watch: Arc<SendWatch>,
}

impl Iceoryx2Acceptor {
    /// Creates the services of both directions and this side's ports, under a new private
    /// root directory and prefix.
    pub fn create(wake: WakeMode, max_message: usize) -> Result<Self, TransportError> {
        let run = RunFiles::create()?;
        if wake == WakeMode::Blocking {
            check_socket_path(run.root.path(), &run.prefix)?;
        }
        let config = config(run.root.path(), &run.prefix)?;
        let node = node(&config)?;
        let tx = pubsub(&node, TO_PEER)?
            .create()
            .map_err(iox("creating the iceoryx2 service to the peer"))?;
        let rx = pubsub(&node, TO_MEASURING)?
            .create()
            .map_err(iox("creating the iceoryx2 service from the peer"))?;
        let wake_services = match wake {
            WakeMode::Blocking => Some((
                event(&node, TO_PEER)?
                    .create()
                    .map_err(iox("creating the iceoryx2 event service to the peer"))?,
                event(&node, TO_MEASURING)?
                    .create()
                    .map_err(iox("creating the iceoryx2 event service from the peer"))?,
            )),
            WakeMode::BusyPoll => None,
        };
        let watch = SendWatch::new(0);
        let ends = ports(node, (tx, rx), wake_services, max_message, &watch)?;
        Ok(Self {
            ends,
            run,
            wake,
            max_message,
            watch,
        })
    }

    /// The peer has made its ports: a subscriber on the service to it, a publisher on the
    /// service from it and, in blocking mode, a listener on the wake service to it.
    fn peer_ready(&self) -> bool {
        self.ends.tx.dynamic_config().number_of_subscribers() >= 1
            && self.ends.rx.dynamic_config().number_of_publishers() >= 1
            && self
                .ends
                .wake_services
                .as_ref()
                .is_none_or(|(to_peer, _)| to_peer.dynamic_config().number_of_listeners() >= 1)
    }
}

impl Acceptor for Iceoryx2Acceptor {
    fn address(&self) -> PeerAddress {
        PeerAddress::Iceoryx2 {
            root: self.run.root.path().to_path_buf(),
            prefix: self.run.prefix.clone(),
            wake: self.wake,
            max_message: self.max_message,
            owner_pid: current_pid(),
        }
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        loop {
            // Alive first, ready second: a peer that made its ports and exited in between
            // has connected (its death shows later).
            let alive = ensure_alive(peer, "before it opened its iceoryx2 ports");
            if self.peer_ready() {
                break;
            }
            alive?;
            remaining(deadline, "the peer's iceoryx2 ports")?;
            std::thread::sleep(Duration::from_millis(1));
        }
        self.watch.other.store(peer, Ordering::Relaxed);
        let Self {
            ends,
            run,
            wake,
            max_message,
            watch,
        } = *self;
        Ok(Box::new(Iceoryx2Channel {
            loaned: None,
            borrowed: None,
            unread: None,
            ends,
            _run: Some(run),
            wake,
            other_pid: peer,
            max_incoming: max_message.saturating_add(SLACK),
            watch,
        }))
    }
}

/// The peer's side: opens the services the measuring side made under `root` and
/// `prefix`, and makes its ports.
pub fn connect(
    root: &Path,
    prefix: &str,
    wake: WakeMode,
    max_message: usize,
    owner: u32,
    deadline: Instant,
) -> Result<Iceoryx2Channel, TransportError> {
    if !prefix.starts_with(PREFIX_START) {
        return Err(TransportError::Corrupt(format!(
            "the iceoryx2 prefix {prefix:?} does not start with {PREFIX_START:?}"
        )));
    }
    let config = config(root, prefix)?;
    let node = node(&config)?;
    // The services exist before the peer is started; opening retries until the deadline
    // all the same.
    let open_pubsub = |name: &str, what: &'static str| loop {
        match pubsub(&node, name)?.open() {
            Ok(service) => return Ok(service),
            Err(e) => {
                if remaining(deadline, what).is_err() {
                    return Err(iox(what)(e));
                }
                ensure_alive(owner, "before its iceoryx2 services could be opened")?;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    let tx = open_pubsub(
        TO_MEASURING,
        "opening the iceoryx2 service to the measuring side",
    )?;
    let rx = open_pubsub(
        TO_PEER,
        "opening the iceoryx2 service from the measuring side",
    )?;
    let wake_services = match wake {
        WakeMode::Blocking => Some((
            event(&node, TO_MEASURING)?.open().map_err(iox(
                "opening the iceoryx2 event service to the measuring side",
            ))?,
            event(&node, TO_PEER)?.open().map_err(iox(
                "opening the iceoryx2 event service from the measuring side",
            ))?,
        )),
        WakeMode::BusyPoll => None,
    };
    let watch = SendWatch::new(owner);
    let ends = ports(node, (tx, rx), wake_services, max_message, &watch)?;
    Ok(Iceoryx2Channel {
        loaned: None,
        borrowed: None,
        unread: None,
        ends,
        _run: None,
        wake,
        other_pid: owner,
        max_incoming: max_message.saturating_add(SLACK),
        watch,
    })
}

pub struct Iceoryx2Channel {
    /// The loaned path ([`Loans`]): the open loan, and the borrowed sample. Declared
    /// first: given back before the ports go.
    loaned: Option<SampleMut<S, [u8], ()>>,
    borrowed: Option<Sample<S, [u8], ()>>,
    /// The limit of a sample [`Loans::hold`] holds, while its length is unchecked.
    unread: Option<usize>,
    ends: Ends,
    /// The measuring side's files; declared after `ends`, so removed after them.
    _run: Option<RunFiles>,
    wake: WakeMode,
    other_pid: u32,
    /// The longest message the other side's publisher may loan.
    max_incoming: usize,
    watch: Arc<SendWatch>,
}

// SAFETY: the ports are of `ipc::Service`, the single-threaded service iceoryx2's users
// take when ports stay on one thread: its objects share reference counts that are not
// atomic (`Rc`), which is all that makes them not `Send`. Every iceoryx2 object of a
// channel (node, services, ports, the loaned and the borrowed sample) is in this struct
// and none is handed out (samples are lent only as slices borrowed from the channel), so
// a move takes every holder of each count at once, and `&mut self` lets one thread at a
// time use them. A cell makes, uses and drops its channel on one thread anyway.
unsafe impl Send for Iceoryx2Channel {}

impl Iceoryx2Channel {
    /// PeerGone when the other process has exited; Closed when it lives but has dropped
    /// its publisher (an orderly close).
    fn other_side(&self) -> Result<(), TransportError> {
        ensure_alive(self.other_pid, "while waiting")?;
        if self.ends.rx.dynamic_config().number_of_publishers() == 0 {
            return Err(TransportError::Closed);
        }
        Ok(())
    }

    /// The error of a send that could not be made, once the other process was looked at.
    fn failed_send(&self, context: &'static str, why: String) -> TransportError {
        match ensure_alive(self.other_pid, "before the message was delivered") {
            Err(gone) => gone,
            Ok(()) => TransportError::Io {
                context,
                source: std::io::Error::other(why),
            },
        }
    }

    /// Waits for a sample and copies it into `buf`.
    fn take(
        &self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let sample = self.next_sample(limit, deadline)?;
        buf.clear();
        buf.extend_from_slice(sample.payload());
        Ok(())
    }

    /// Waits for the next sample, whose length is checked (within `limit` and what the
    /// other side's publisher may loan) before its payload is read.
    fn next_sample(
        &self,
        limit: usize,
        deadline: Instant,
    ) -> Result<Sample<S, [u8], ()>, TransportError> {
        let sample = self.wait_for_sample(deadline)?;
        self.check_length(&sample, limit)?;
        Ok(sample)
    }

    /// Waits for the next sample; nothing of it is read (its header neither).
    fn wait_for_sample(&self, deadline: Instant) -> Result<Sample<S, [u8], ()>, TransportError> {
        {
            // Instructions spent waiting depend on how long the other side takes: never
            // counted, and paused on every call, ready or not, as shm.rs does.
            let _waiting = ipc_matrix_count_window::pause();
            let mut liveness = LivenessChecks::default();
            // The other side found gone, reported only after one more look: what it
            // published before it exited still counts.
            let mut gone: Option<TransportError> = None;
            let mut spins = 0u32;
            loop {
                if let Some(sample) = self
                    .ends
                    .subscriber
                    .receive()
                    .map_err(iox("receiving an iceoryx2 sample"))?
                {
                    return Ok(sample);
                }
                if let Some(e) = gone.take() {
                    return Err(e);
                }
                match (&self.ends.wake, self.wake) {
                    (Some((_, listener)), WakeMode::Blocking) => {
                        // `remaining` is at least 1 ms: iceoryx2 waits for ever on a
                        // timeout under a microsecond.
                        let wait = remaining(deadline, "message")?.min(LIVENESS_PERIOD);
                        listener
                            .timed_wait(|_| {}, wait)
                            .map_err(iox("waiting on the iceoryx2 listener"))?;
                    }
                    // No pause instruction between looks, as iceoryx2's own benchmark
                    // spins: on some CPUs one pause outlasts a whole handover.
                    _ => {
                        spins = spins.wrapping_add(1);
                        if keep_spinning(spins) {
                            continue;
                        }
                    }
                }
                let now = Instant::now();
                remaining(deadline, "message")?;
                if liveness.due(now) {
                    gone = self.other_side().err();
                }
            }
        }
    }

    /// Checks the length the sender wrote in `sample`'s header, before the slice it makes
    /// is read: within `limit` and what the other side's publisher may loan.
    fn check_length(
        &self,
        sample: &Sample<S, [u8], ()>,
        limit: usize,
    ) -> Result<(), TransportError> {
        let announced = sample.header().number_of_elements();
        if announced > self.max_incoming as u64 {
            return Err(TransportError::Corrupt(format!(
                "a sample announces {announced} bytes, more than the {} its sender may loan",
                self.max_incoming
            )));
        }
        if announced > limit as u64 {
            return Err(TransportError::TooLarge { announced, limit });
        }
        Ok(())
    }

    /// Loans a sample of `len` bytes from this side's publisher.
    fn loan_sample(
        &self,
        len: usize,
    ) -> Result<SampleMutUninit<S, [MaybeUninit<u8>], ()>, TransportError> {
        match self.ends.publisher.loan_slice_uninit(len) {
            Ok(sample) => Ok(sample),
            Err(LoanError::ExceedsMaxLoanSize) => Err(TransportError::Io {
                context: "loaning an iceoryx2 sample",
                source: std::io::Error::other(format!(
                    "a {len}-byte message is larger than the {} bytes this channel's \
                     publisher was made for",
                    self.max_incoming
                )),
            }),
            Err(LoanError::ExceedsMaxLoans) => Err(TransportError::Loan(
                "a loan is already open: commit it before sending again".into(),
            )),
            Err(e) => Err(self.failed_send("loaning an iceoryx2 sample", format!("{e:?}"))),
        }
    }

    /// Sends a filled sample (`send` of a sample, after `self.watch.begin`): `Ok(true)`
    /// once delivered and the other side woken, `Ok(false)` when it was delivered to no
    /// one while the other side's subscriber exists (it has not yet attached to this
    /// publisher's queue, and the queue is full: iceoryx2 does not wait for that).
    fn deliver(&self, sample: SampleMut<S, [u8], ()>) -> Result<bool, TransportError> {
        match sample.send() {
            Ok(0) => {
                let _waiting = ipc_matrix_count_window::pause();
                if self.ends.tx.dynamic_config().number_of_subscribers() == 0 {
                    ensure_alive(self.other_pid, "before the message was delivered")?;
                    return Err(TransportError::Closed);
                }
                Ok(false)
            }
            Ok(_) => {
                if let Some((notifier, _)) = &self.ends.wake {
                    if let Err(e) = notifier.notify() {
                        return Err(self.failed_send("waking the other side", format!("{e:?}")));
                    }
                }
                Ok(true)
            }
            Err(SendError::UnableToDeliver) => match self.watch.gave_up.load(Ordering::Relaxed) {
                GAVE_UP_GONE => Err(TransportError::PeerGone(format!(
                    "process {} exited while its queue was full",
                    self.other_pid
                ))),
                _ => Err(TransportError::Timeout {
                    what: "room in the other side's queue (it does not read)",
                }),
            },
            Err(e) => Err(self.failed_send("sending an iceoryx2 sample", format!("{e:?}"))),
        }
    }
}

impl Channel for Iceoryx2Channel {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        self.watch.begin(deadline);
        let mut liveness = LivenessChecks::default();
        loop {
            // The one copy: the caller's bytes into the loaned chunk.
            let sample = self.loan_sample(message.len())?.write_from_slice(message);
            if self.deliver(sample)? {
                return Ok(());
            }
            // Delivered to no one (see `deliver`): sent again until it is taken or the
            // deadline passes.
            let _waiting = ipc_matrix_count_window::pause();
            let now = Instant::now();
            remaining(
                deadline,
                "room in the other side's queue (it does not read)",
            )?;
            if liveness.due(now) {
                ensure_alive(self.other_pid, "before the message was delivered")?;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        if self.borrowed.is_some() {
            return Err(TransportError::Loan(
                "a message is borrowed: release it before receiving again".into(),
            ));
        }
        self.take(buf, limit, deadline)
    }

    fn loans(&mut self) -> Option<&mut dyn Loans> {
        Some(self)
    }
}

impl Loans for Iceoryx2Channel {
    fn max_loan(&self) -> usize {
        self.max_incoming
    }

    fn loan(&mut self, len: usize, _deadline: Instant) -> Result<&mut [u8], TransportError> {
        if self.loaned.is_some() {
            return Err(TransportError::Loan("a loan is already open".into()));
        }
        if len > self.max_incoming {
            return Err(TransportError::Loan(format!(
                "a {len}-byte message is longer than a loan holds ({} bytes, one sample)",
                self.max_incoming
            )));
        }
        let sample = self.loan_sample(len)?;
        // SAFETY: the chunk lies in a data segment mapped from shared memory, whose pages
        // the kernel zeroed when it was made and which only ever holds bytes written
        // through it: every byte is initialized, with what the chunk held before, until
        // the caller fills it. iceoryx2's own benchmark sends such loans unwritten.
        let sample = unsafe { sample.assume_init() };
        Ok(self.loaned.insert(sample).payload_mut())
    }

    fn loaned(&mut self) -> Option<&mut [u8]> {
        self.loaned.as_mut().map(|sample| sample.payload_mut())
    }

    fn cancel(&mut self) {
        // A loan dropped unsent goes back to the publisher's pool.
        self.loaned = None;
    }

    fn commit(&mut self, deadline: Instant) -> Result<(), TransportError> {
        let sample = self
            .loaned
            .take()
            .ok_or_else(|| TransportError::Loan("no loan is open to commit".into()))?;
        self.watch.begin(deadline);
        match self.deliver(sample)? {
            true => Ok(()),
            false => Err(TransportError::Loan(
                "the sample was delivered to no one (the other side's subscriber had not attached to this publisher's full queue), and a loan is sent once".into(),
            )),
        }
    }

    fn borrow(&mut self, limit: usize, deadline: Instant) -> Result<&[u8], TransportError> {
        if self.borrowed.is_some() {
            return Err(TransportError::Loan("a message is already borrowed".into()));
        }
        let sample = self.next_sample(limit, deadline)?;
        Ok(self.borrowed.insert(sample).payload())
    }

    fn borrowed(&self) -> Option<&[u8]> {
        match self.unread {
            Some(_) => None,
            None => self.borrowed.as_ref().map(|sample| sample.payload()),
        }
    }

    /// The sample is taken off the queue and nothing of it is read: its header lies in
    /// the other side's cache until [`Loans::held`] reads it.
    fn hold(&mut self, limit: usize, deadline: Instant) -> Result<(), TransportError> {
        if self.borrowed.is_some() {
            return Err(TransportError::Loan("a message is already borrowed".into()));
        }
        self.borrowed = Some(self.wait_for_sample(deadline)?);
        self.unread = Some(limit);
        Ok(())
    }

    fn held(&mut self) -> Result<&[u8], TransportError> {
        let sample = self
            .borrowed
            .as_ref()
            .ok_or_else(|| TransportError::Loan("no message is held".into()))?;
        if let Some(limit) = self.unread {
            self.check_length(sample, limit)?;
            self.unread = None;
        }
        Ok(sample.payload())
    }

    fn release(&mut self) {
        self.borrowed = None;
        self.unread = None;
    }

    /// The request's sample is written straight into the reply's loan: one copy, where
    /// the copying echo makes two (out of the sample, into the loan). The next reply's
    /// loan, of this one's length, is taken (and [`warm`]ed) before the wait for the next
    /// request, as iceoryx2's users (and its benchmark's second participant) do; a
    /// request of another length gets a loan of its own, and the goodbye gives the loan
    /// back.
    fn echo_loaned(&mut self, limit: usize, deadline: Instant) -> Result<usize, TransportError> {
        if self.borrowed.is_some() {
            return Err(TransportError::Loan(
                "a message is borrowed: release it before echoing".into(),
            ));
        }
        let request = self.next_sample(limit, deadline)?;
        let len = request.payload().len();
        let ahead = self.loaned.take();
        if len == 0 {
            return Ok(0);
        }
        let mut reply = match ahead.filter(|sample| sample.payload().len() == len) {
            Some(sample) => sample,
            // SAFETY: as in `loan`: every byte of a chunk is initialized, and this one is
            // written whole right below.
            None => unsafe { self.loan_sample(len)?.assume_init() },
        };
        reply.payload_mut().copy_from_slice(request.payload());
        self.watch.begin(deadline);
        if !self.deliver(reply)? {
            return Err(TransportError::Loan(
                "the reply was delivered to no one (the other side's subscriber had not attached to this publisher's full queue), and a loan is sent once".into(),
            ));
        }
        // The request goes back once the reply is out: its release is off the path of the
        // round trip.
        drop(request);
        // SAFETY: as in `loan`; the next echo writes it whole before it is sent.
        let mut next = unsafe { self.loan_sample(len)?.assume_init() };
        warm(next.payload_mut());
        self.loaned = Some(next);
        Ok(len)
    }
}

/// Writes a byte of every cache line of `room`, a loan taken ahead: while this side
/// waits, its lines come into this CPU's cache, and the echo that fills the loan later
/// writes there instead of fetching each line from the other side's CPU first. (What a
/// user who fills a loan as the data comes gets; the bytes are overwritten by the echo.)
fn warm(room: &mut [u8]) {
    for byte in room.iter_mut().step_by(64) {
        // SAFETY: a valid, exclusive byte of the loan; volatile, so that the write is
        // made although the echo overwrites it.
        unsafe { std::ptr::write_volatile(byte, 0) };
    }
}
