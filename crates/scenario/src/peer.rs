//! The peer: the same binary started as `<exe> serve --config <json>`. It connects to the
//! measuring side, echoes every message until an empty one says goodbye, and commits the
//! fault it was told to commit, if any.

use crate::fault::{Fault, FaultKind};
use ipc_matrix_codec::{Codec, FrameCodec, SensorFrame};
use ipc_matrix_transport::Channel;
use ipc_matrix_transport::{connect, die_with_parent, set_thread_cpus, PeerAddress};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The first argument that turns a binary of ours into a peer.
pub const SERVE_ARG: &str = "serve";
/// Microseconds the peer waits before each reply: the documented way to slow a peer
/// down and see a regression flagged.
pub const PEER_DELAY_ENV: &str = "IPC_MATRIX_PEER_DELAY_US";
/// A regular expression choosing the cells whose peer is slowed; all cells when unset.
pub const PEER_DELAY_CELLS_ENV: &str = "IPC_MATRIX_PEER_DELAY_CELLS";

/// A delay added by the peer before every reply, to the cells it applies to.
#[derive(Debug, Clone)]
pub struct PeerDelay {
    pub per_reply: Duration,
    pub cells: Option<regex::Regex>,
}

impl PeerDelay {
    /// Reads [`PEER_DELAY_ENV`] and [`PEER_DELAY_CELLS_ENV`]; `None` when no delay is set.
    pub fn from_env() -> Result<Option<Self>, String> {
        let Ok(micros) = std::env::var(PEER_DELAY_ENV) else {
            return Ok(None);
        };
        let per_reply = micros
            .trim()
            .parse::<u64>()
            .map(Duration::from_micros)
            .map_err(|_| {
                format!("{PEER_DELAY_ENV}={micros:?} is not a whole number of microseconds")
            })?;
        let cells = match std::env::var(PEER_DELAY_CELLS_ENV) {
            Ok(pattern) => Some(regex::Regex::new(&pattern).map_err(|e| {
                format!("{PEER_DELAY_CELLS_ENV}={pattern:?} is not a regular expression: {e}")
            })?),
            Err(_) => None,
        };
        Ok(Some(Self { per_reply, cells }))
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
    /// The CPU the peer pins itself to.
    pub cpu: Option<usize>,
    /// `codec` cells: decode every message as a sensor frame in this format and reply with
    /// it encoded again, rather than echoing the bytes.
    pub codec: Option<Codec>,
    /// What the peer does; echo unless a fan cell says otherwise.
    #[serde(default)]
    pub role: PeerRole,
}

/// The part a peer plays in a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeerRole {
    /// Replies to every message (echo, bulk and codec cells).
    #[default]
    Echo,
    /// Fan-out: checks every frame against the one `seed` and `payload` stand for and
    /// acknowledges it with its one-way latency.
    Subscriber { seed: u64, payload: usize },
    /// Fan-in: streams `frames` frames from source `source`, then says goodbye.
    Publisher {
        seed: u64,
        payload: usize,
        source: u32,
        frames: u64,
    },
    /// UDP under load: echoes datagrams with `threads` receiving threads; the channel
    /// it connects is the control channel.
    UdpServer { threads: u32 },
    /// ZeroMQ REP: connects to the measuring side's REQ socket at `address` and echoes.
    ZmqReply,
    /// Cap'n Proto RPC: connects to the measuring side and serves the `Echo` interface.
    RpcServer,
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

/// If this process was started as a peer, serves and exits; otherwise returns at once.
/// Call it first thing in `main` of every binary that may act as a peer.
pub fn serve_if_requested() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(SERVE_ARG) {
        return;
    }
    let code = match parse(&args[2..]).and_then(serve) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ipc-matrix peer: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn parse(args: &[String]) -> Result<PeerConfig, String> {
    match args {
        [flag, json] if flag == "--config" => {
            serde_json::from_str(json).map_err(|e| format!("bad --config: {e}"))
        }
        _ => Err(format!(
            "usage: {SERVE_ARG} --config <json> (started by ipc-matrix itself, not by hand)"
        )),
    }
}

fn serve(config: PeerConfig) -> Result<(), String> {
    if !die_with_parent(config.parent) {
        return Err("the measuring process exited before the peer started".into());
    }
    if let Some(cpu) = config.cpu {
        set_thread_cpus(&[cpu]).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    }
    let idle = config.idle_timeout;
    // These roles speak their own protocol over their own sockets.
    match config.role {
        PeerRole::ZmqReply => return crate::req_rep::serve(&config),
        PeerRole::RpcServer => return crate::rpc::serve(&config),
        _ => {}
    }
    let mut channel =
        connect(&config.address, Instant::now() + idle).map_err(|e| format!("connecting: {e}"))?;
    match (config.role, config.codec) {
        (PeerRole::Echo, _) => {}
        (PeerRole::UdpServer { threads }, _) => {
            return crate::udp_load::serve(
                channel.as_mut(),
                threads,
                config.limit,
                idle,
                config.fault,
                config.delay,
            )
        }
        (PeerRole::Subscriber { seed, payload }, Some(codec)) => {
            return subscribe(channel.as_mut(), &config, codec, seed, payload)
        }
        (
            PeerRole::Publisher {
                seed,
                payload,
                source,
                frames,
            },
            Some(codec),
        ) => {
            return publish(
                channel.as_mut(),
                idle,
                codec,
                (seed, payload, source),
                frames,
            )
        }
        (PeerRole::ZmqReply | PeerRole::RpcServer, _) => unreachable!("served above"),
        (role, None) => return Err(format!("role {role:?} needs a codec")),
    }
    let mut message = Vec::new();
    for index in 0u64.. {
        // One clock read per message: the reply shares the request's deadline.
        let deadline = Instant::now() + idle;
        channel
            .recv(&mut message, config.limit, deadline)
            .map_err(|e| format!("message {index}: {e}"))?;
        if message.is_empty() {
            return Ok(());
        }
        if let Some(codec) = config.codec {
            let frame = codec
                .decode(&message)
                .map_err(|e| format!("message {index} is not a {codec} sensor frame: {e}"))?;
            codec.encode(&frame, &mut message);
        }
        if let Some(delay) = config.delay {
            spin_for(delay);
        }
        if let Some(fault) = config.fault.filter(|f| f.at == index) {
            commit(fault.kind, &mut message);
        }
        channel
            .send(&message, deadline)
            .map_err(|e| format!("reply {index}: {e}"))?;
    }
    Ok(())
}

/// Fan-out subscriber: check each frame, acknowledge it with its one-way latency.
fn subscribe(
    channel: &mut dyn Channel,
    config: &PeerConfig,
    codec: Codec,
    seed: u64,
    payload: usize,
) -> Result<(), String> {
    let mut expected = SensorFrame::sample(seed, 0, payload);
    let mut message = Vec::new();
    for index in 0u64.. {
        let deadline = Instant::now() + config.idle_timeout;
        channel
            .recv(&mut message, config.limit, deadline)
            .map_err(|e| format!("frame {index}: {e}"))?;
        if message.is_empty() {
            return Ok(());
        }
        let arrived = monotonic_ns();
        let frame = codec
            .decode(&message)
            .map_err(|e| format!("frame {index} is not a {codec} sensor frame: {e}"))?;
        expected.header.sequence = frame.header.sequence;
        expected.header.sent_at_ns = frame.header.sent_at_ns;
        if let Some(difference) = expected.first_difference(&frame) {
            return Err(format!("frame {index} differs at {difference}"));
        }
        let mut ack = frame.header.sequence.to_le_bytes().to_vec();
        ack.extend_from_slice(
            &arrived
                .saturating_sub(frame.header.sent_at_ns)
                .to_le_bytes(),
        );
        if let Some(fault) = config.fault.filter(|f| f.at == index) {
            commit(fault.kind, &mut ack);
        }
        channel
            .send(&ack, deadline)
            .map_err(|e| format!("acknowledging frame {index}: {e}"))?;
    }
    Ok(())
}

/// Fan-in publisher: stream stamped frames as fast as the channel takes them.
fn publish(
    channel: &mut dyn Channel,
    idle: Duration,
    codec: Codec,
    (seed, payload, source): (u64, usize, u32),
    frames: u64,
) -> Result<(), String> {
    let mut frame = SensorFrame::sample(seed, 0, payload);
    frame.header.source_id = source;
    let mut encoded = Vec::new();
    for sequence in 0..frames {
        frame.header.sequence = sequence;
        frame.header.sent_at_ns = monotonic_ns();
        codec.encode(&frame, &mut encoded);
        channel
            .send(&encoded, Instant::now() + idle)
            .map_err(|e| format!("sending frame {sequence}: {e}"))?;
    }
    channel
        .send(&[], Instant::now() + idle)
        .map_err(|e| format!("saying goodbye: {e}"))
}

/// Waits `delay` before a reply. A spin, not a sleep: sleeping adds the timer slack
/// (50 us by default) on top.
pub(crate) fn spin_for(delay: Duration) {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

pub(crate) fn commit(kind: FaultKind, message: &mut Vec<u8>) {
    match kind {
        FaultKind::FlipByte => {
            let middle = message.len() / 2;
            message[middle] ^= 0xff;
        }
        FaultKind::Truncate => {
            message.pop();
        }
        FaultKind::ExtraBytes => message.extend_from_slice(&[0xde, 0xad, 0xbe]),
        FaultKind::Stall => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        FaultKind::Exit => std::process::exit(3),
    }
}
