//! The echo scenario (`echo`, `bulk` and `codec` kinds): request, reply, compare, time.

use crate::codec_work::{CodecWork, FRAME_SLACK};
use crate::context::{RunOptions, Tally};
use crate::failure::{peer_epilogue, round_trip_failure, setup_failure, unclean_stop};
use crate::payload::Payload;
use crate::peer::{commit, spin_for, PeerConfig, PeerRole};
use crate::spawn::{describe, PeerProcess};
use crate::verify::compare;
use ipc_matrix_codec::FrameCodec;
use ipc_matrix_results::{CodecStages, Failure, FailureKind};
use ipc_matrix_spec::Cell;
use ipc_matrix_transport::{listen, Channel, ListenOptions, TransportError};
use std::time::{Duration, Instant};

/// Consecutive lost UDP replies after which the peer counts as unresponsive.
const LOST_IN_A_ROW_LIMIT: u64 = 3;
/// Bytes a reply may exceed its request by and still be read (and reported as too long).
const REPLY_SLACK: usize = 1024;

pub(crate) fn echo(
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

/// The peer's side: echo every message (decoded and encoded again for a codec cell)
/// until an empty one says goodbye, committing the fault asked for.
pub(crate) fn serve(channel: &mut dyn Channel, config: &PeerConfig) -> Result<(), String> {
    let idle = config.idle_timeout;
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
