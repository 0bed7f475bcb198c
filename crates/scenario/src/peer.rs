//! What a peer is told (its configuration: the cell's kind, its part in it) and the
//! pieces every kind's serving side shares: its channel, the reply delay and the shared
//! clock (the fault it commits is `fault`).

use crate::counting::PeerCounting;
use crate::fault::{Fault, FaultError};
use ipc_matrix_codec::{Codec, DecodeError};
use ipc_matrix_spec::ScenarioKind;
use ipc_matrix_transport::{connect, Channel, PeerAddress, TransportError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The first argument that turns a binary of ours into a peer.
pub const SERVE_ARG: &str = "serve";
/// Microseconds the peer waits before each reply: the documented way to slow a peer
/// down and see a regression flagged.
pub const PEER_DELAY_ENV: &str = "IPC_MATRIX_PEER_DELAY_US";
/// Units of deterministic work (a fixed loop, not a timed spin) the peer does before each
/// reply: the documented way to add instructions on purpose and see the instruction
/// verdict flag it, on every leg.
pub const PEER_EXTRA_WORK_ENV: &str = "IPC_MATRIX_PEER_EXTRA_WORK";
/// A regular expression choosing the cells whose peer is slowed; all cells when unset.
pub const PEER_DELAY_CELLS_ENV: &str = "IPC_MATRIX_PEER_DELAY_CELLS";

/// A delay (a timed spin) and extra work (a fixed loop) added by the peer before every
/// reply, to the cells it applies to.
#[derive(Debug, Clone)]
pub struct PeerDelay {
    pub per_reply: Duration,
    pub extra_work: u64,
    pub cells: Option<regex::Regex>,
}

impl PeerDelay {
    /// Reads [`PEER_DELAY_ENV`], [`PEER_EXTRA_WORK_ENV`] and [`PEER_DELAY_CELLS_ENV`];
    /// `None` when neither a delay nor extra work is set.
    pub fn from_env() -> Result<Option<Self>, EnvError> {
        let number = |key: &'static str, unit: &'static str| -> Result<u64, EnvError> {
            match std::env::var(key) {
                Ok(value) => value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| EnvError::NotANumber { key, value, unit }),
                Err(_) => Ok(0),
            }
        };
        let per_reply = Duration::from_micros(number(PEER_DELAY_ENV, "microseconds")?);
        let extra_work = number(PEER_EXTRA_WORK_ENV, "work units")?;
        if per_reply.is_zero() && extra_work == 0 {
            return Ok(None);
        }
        let cells = match std::env::var(PEER_DELAY_CELLS_ENV) {
            Ok(pattern) => {
                Some(
                    regex::Regex::new(&pattern).map_err(|source| EnvError::NotARegex {
                        key: PEER_DELAY_CELLS_ENV,
                        pattern,
                        source,
                    })?,
                )
            }
            Err(_) => None,
        };
        Ok(Some(Self {
            per_reply,
            extra_work,
            cells,
        }))
    }

    pub fn applies_to(&self, cell_id: &str) -> bool {
        self.cells.as_ref().is_none_or(|re| re.is_match(cell_id))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerConfig {
    pub address: PeerAddress,
    /// The measuring process; the peer dies with it.
    pub parent: u32,
    /// Largest message the peer accepts.
    pub limit: usize,
    /// The peer gives up when no message arrives for this long.
    pub idle_timeout: Duration,
    pub fault: Option<Fault>,
    /// Added before every reply (see [`PEER_DELAY_ENV`]).
    pub delay: Option<Duration>,
    /// Units of deterministic work before every reply (see [`PEER_EXTRA_WORK_ENV`]).
    #[serde(default)]
    pub extra_work: Option<u64>,
    /// The CPU the peer pins itself to.
    pub cpu: Option<usize>,
    /// `codec` cells: decode every message as a sensor frame in this format and reply with
    /// it encoded again, rather than echoing the bytes.
    pub codec: Option<Codec>,
    /// The kind of the cell: whose serving side the peer runs.
    pub kind: ScenarioKind,
    /// The peer's part in its kind, in the kind's own terms (which of two publishers, how
    /// many threads); null where all its peers play the same part.
    #[serde(default)]
    pub role: serde_json::Value,
    /// Count the guest instructions of the measured replies (under QEMU's plugin).
    #[serde(default)]
    pub count: Option<PeerCounting>,
    /// `echo`, `bulk` and `codec` cells: the messages the measuring side sends before its
    /// goodbye. Over a channel that loses nothing, a peer whose goodbye comes after
    /// another number fails: its requests were lost or made up on the way (a stack that
    /// answered the measuring side itself would pass every byte check).
    #[serde(default)]
    pub messages: Option<u64>,
    /// `echo` and `bulk` cells: echo every message as it is received
    /// ([`Channel::echo`]), since the measuring side takes each reply with
    /// [`Channel::exchange`], which over shared memory only a peer that echoes as it
    /// receives answers. Set only where nothing needs the whole message first: no codec,
    /// no fault, no delay or extra work.
    #[serde(default)]
    pub echoes_as_it_receives: bool,
    /// `echo` and `bulk` cells over a transport with loans (iceoryx2): echo every
    /// message from where it lies into the reply's loan ([`Loans::echo_loaned`]), as the
    /// measuring side loans its requests and borrows its replies. Set only where nothing
    /// needs the whole message first, as above.
    ///
    /// [`Loans::echo_loaned`]: ipc_matrix_transport::Loans::echo_loaned
    #[serde(default)]
    pub echoes_from_loans: bool,
}

impl PeerConfig {
    /// Whether something the peer does needs each whole message before it replies: a
    /// codec (decode, encode), a fault (at an offset of the whole), a delay or extra work
    /// (before the reply). Such a peer cannot echo as it receives.
    pub(crate) fn needs_whole_messages(&self) -> bool {
        self.codec.is_some()
            || self.fault.is_some()
            || self.delay.is_some()
            || self.extra_work.is_some()
    }

    /// Whether the peer does something to each whole message besides its fault: a codec,
    /// a delay or extra work. The loaned path commits a fault (in the reply's loan) but
    /// none of these.
    pub(crate) fn works_on_whole_messages(&self) -> bool {
        self.codec.is_some() || self.delay.is_some() || self.extra_work.is_some()
    }

    /// The peer's part in its kind, as the kind's measuring side wrote it.
    pub(crate) fn role<R: DeserializeOwned>(&self) -> Result<R, ConfigError> {
        R::deserialize(&self.role).map_err(|source| ConfigError::Role {
            role: self.role.clone(),
            source,
        })
    }

    /// Connects the peer's side of the cell's channel, within the idle deadline.
    pub(crate) fn connect(&self) -> Result<Box<dyn Channel>, PeerError> {
        connect(&self.address, Instant::now() + self.idle_timeout).map_err(PeerError::Connecting)
    }
}

/// An environment variable that asks for what cannot be done, named with its value.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// `key` holds no whole number (of `unit`).
    #[error("{key}={value:?} is not a whole number of {unit}")]
    NotANumber {
        key: &'static str,
        value: String,
        unit: &'static str,
    },
    /// `key` holds no regular expression.
    #[error("{key}={pattern:?} is not a regular expression: {source}")]
    NotARegex {
        key: &'static str,
        pattern: String,
        #[source]
        source: regex::Error,
    },
}

/// A peer's configuration that its kind cannot serve: its part in the kind, its address,
/// how it is told to echo.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The role is not one of the kind's.
    #[error("bad role {role}: {source}")]
    Role {
        role: serde_json::Value,
        #[source]
        source: serde_json::Error,
    },
    /// The role (as the kind prints it) works on frames, and the cell gave no codec.
    #[error("role {role} needs a codec")]
    NoCodec { role: String },
    /// A ZeroMQ peer's address that is neither tcp nor ipc.
    #[error("ZeroMQ runs over tcp or ipc, not {0:?}")]
    NotZmq(PeerAddress),
    /// An rpc peer's address that is neither tcp nor a local socket.
    #[error("rpc runs over tcp or a local socket, not {0:?}")]
    NotRpc(PeerAddress),
    /// A kind without a peer process.
    #[error("{} cells start no peer", .0.as_str())]
    NoPeer(ScenarioKind),
    /// Told to echo as it receives, with something that needs each whole message.
    #[error(
        "told to echo as it receives, yet a codec, a fault, a delay or extra \
         work needs each whole message first"
    )]
    EchoAsReceived,
    /// Told to echo from loans, with something that needs each whole message.
    #[error(
        "told to echo from loans, yet a codec, a delay or extra work needs each whole \
         message first"
    )]
    EchoFromLoans,
    /// Told to echo from loans over a transport without them.
    #[error("told to echo from loans, but the transport has no loaned path")]
    NoLoans,
}

/// What a peer process fails with (its serving side, and its start): each reads as the
/// end of its one line on stderr, `ipc-matrix peer: ...`, which the measuring side quotes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PeerError {
    // Its start: the command line, the measuring process, its CPU.
    #[error("an argument is not UTF-8: {}", .0.to_string_lossy())]
    ArgumentNotUtf8(OsString),
    #[error("bad --config: {0}")]
    BadConfig(#[source] serde_json::Error),
    #[error("usage: {SERVE_ARG} --config <json> (started by ipc-matrix itself, not by hand)")]
    Usage,
    #[error("the measuring process exited before the peer started")]
    ParentGone,
    #[error("pinning to CPU {cpu}: {source}")]
    Pinning {
        cpu: usize,
        #[source]
        source: std::io::Error,
    },
    /// What it was told, which its kind cannot serve.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The fault it was told to commit.
    #[error(transparent)]
    Fault(#[from] FaultError),

    // Its channel, at message (or frame) `index`.
    #[error("connecting: {0}")]
    Connecting(#[source] TransportError),
    #[error("message {index}: {source}")]
    Receiving {
        index: u64,
        #[source]
        source: TransportError,
    },
    #[error("reply {index}: {source}")]
    Replying {
        index: u64,
        #[source]
        source: TransportError,
    },
    #[error("echoing message {index}: {source}")]
    Echoing {
        index: u64,
        #[source]
        source: TransportError,
    },
    #[error("echoing message {index} from loans: {source}")]
    EchoingFromLoans {
        index: u64,
        #[source]
        source: LoanedEchoError,
    },
    #[error("frame {index}: {source}")]
    ReceivingFrame {
        index: u64,
        #[source]
        source: TransportError,
    },
    #[error("acknowledging frame {index}: {source}")]
    Acknowledging {
        index: u64,
        #[source]
        source: TransportError,
    },
    #[error("sending frame {index}: {source}")]
    SendingFrame {
        index: u64,
        #[source]
        source: TransportError,
    },
    #[error("saying goodbye: {0}")]
    SayingGoodbye(#[source] TransportError),

    // What it was sent.
    /// Message or frame (`what`) `index` does not decode.
    #[error("{what} {index} is not a {codec} sensor frame: {source}")]
    NotAFrame {
        what: &'static str,
        index: u64,
        codec: Codec,
        #[source]
        source: DecodeError,
    },
    /// A frame decoded, but not to the one sent.
    #[error("frame {index} differs at {difference}")]
    FrameDiffers { index: u64, difference: String },
    /// The goodbye came after another number of messages than the measuring side sends.
    #[error(
        "the goodbye came after {echoed} messages, where the measuring side sends {sent}: the transport lost requests or made them up on the way"
    )]
    GoodbyeAfter { echoed: u64, sent: u64 },

    // An rpc peer: its runtime, its socket, its RPC system.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("connecting: {0}")]
    ConnectingSocket(#[source] std::io::Error),
    #[error("serving: {0}")]
    Serving(#[source] capnp::Error),

    // A ZeroMQ peer: its socket, at message `index`.
    #[error("creating the REP socket: {0}")]
    ZmqSocket(#[source] zmq::Error),
    #[error("setting socket options: {0}")]
    ZmqOptions(#[source] zmq::Error),
    #[error("connecting to {endpoint}: {source}")]
    ZmqConnecting {
        endpoint: String,
        #[source]
        source: zmq::Error,
    },
    #[error("message {index}: {source}")]
    AwaitingRequest {
        index: u64,
        #[source]
        source: RequestWaitError,
    },
    #[error("message {index}: {source}")]
    ZmqReceiving {
        index: u64,
        #[source]
        source: zmq::Error,
    },
    #[error("reply {index}: {source}")]
    ZmqReplying {
        index: u64,
        #[source]
        source: zmq::Error,
    },

    // A udp-load peer: its datagram socket, its threads, its control channel.
    #[error("binding {on}:0: {source}")]
    Binding {
        on: Ipv4Addr,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the address: {0}")]
    LocalAddress(#[source] std::io::Error),
    #[error("setting the receive timeout: {0}")]
    ReceiveTimeout(#[source] std::io::Error),
    #[error("announcing {address}: {source}")]
    Announcing {
        address: SocketAddr,
        #[source]
        source: TransportError,
    },
    #[error("receiving: {0}")]
    ReceivingDatagram(#[source] std::io::Error),
    #[error("a thread panicked")]
    ThreadPanicked,
    #[error("waiting for the goodbye: {0}")]
    AwaitingGoodbye(#[source] TransportError),
    #[error("reporting the count: {0}")]
    ReportingCount(#[source] TransportError),
}

/// Where an echo from loans failed: its channel's loaned path, or, with a fault
/// committed, the fault or the reply's own loan.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoanedEchoError {
    #[error(transparent)]
    Channel(#[from] TransportError),
    #[error(transparent)]
    Fault(#[from] FaultError),
    #[error("loaning the reply: {0}")]
    Loaning(#[source] TransportError),
    #[error("sending the reply: {0}")]
    Sending(#[source] TransportError),
}

/// Why a ZeroMQ peer's wait for its next request ended without one.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestWaitError {
    #[error("no request within {0:?}")]
    Idle(Duration),
    #[error("polling: {0}")]
    Polling(#[source] zmq::Error),
}

/// An acknowledgement: the frame's sequence number and its one-way latency (ns), LE.
pub const ACK_BYTES: usize = 16;

/// Nanoseconds of CLOCK_MONOTONIC, which every process of the machine shares: a frame
/// stamped by one process can be timed on arrival by another.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer given.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a peer does before each reply when told to be slower: the timed spin, then the
/// deterministic work.
pub(crate) fn before_reply(config: &PeerConfig) {
    if let Some(delay) = config.delay {
        spin_for(delay);
    }
    if let Some(units) = config.extra_work {
        extra_work(units);
    }
}

/// `units` rounds of a fixed computation: the same guest instructions every time, on
/// every CPU, whatever the timing (unlike [`spin_for`]).
pub(crate) fn extra_work(units: u64) -> u64 {
    let mut state = units;
    for _ in 0..units {
        state = std::hint::black_box(ipc_matrix_spec::splitmix64(&mut state));
    }
    state
}

/// Waits `delay` before a reply. A spin, not a sleep: sleeping adds the timer slack
/// (50 us by default) on top.
pub(crate) fn spin_for(delay: Duration) {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}
