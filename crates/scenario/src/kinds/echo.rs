//! The echo scenario (`echo`, `bulk` and `codec` kinds) over a [`Channel`] of the
//! transport crate: the measuring side is an [`Endpoint`] of the shared round-trip loop;
//! the peer echoes every message (decoding and encoding it again for a codec cell).

use crate::codec_work::FRAME_SLACK;
use crate::context::{RunOptions, Tally};
use crate::counting::PeerCounting;
use crate::failure::{
    channel_of, expect_clean_exit, peer_epilogue, setup_failure, transport_failure_kind,
};
use crate::peer::{before_reply, PeerConfig};
use crate::round_trip::{self, Answer, Broken, Endpoint, Limits, Requests};
use crate::spawn::{PeerProcess, GOODBYE_WITHIN};
use ipc_matrix_codec::FrameCodec;
use ipc_matrix_results::{Failure, FailureKind};
use ipc_matrix_spec::{Cell, CodecKind};
use ipc_matrix_transport::{listen, Channel, ListenOptions, TransportError};
use std::time::Instant;

/// How long a message that follows the goodbye is waited for, once the peer has exited.
const NOTHING_AFTER_GOODBYE: std::time::Duration = std::time::Duration::from_millis(20);
/// Bytes a reply may exceed its request by and still be read (and reported as too long).
const REPLY_SLACK: usize = 1024;

/// Runs an `echo` or `bulk` cell (`codec` None: the payload bytes are echoed) or a
/// `codec` cell (sensor frames in that codec's format).
pub(crate) fn echo(
    cell: &Cell,
    (codec, limits): (Option<CodecKind>, Limits),
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
    // A frame is its payload plus some structure; echo messages are the payload exactly.
    let max_message = len + codec.map_or(0, |_| FRAME_SLACK);
    let limit = max_message + REPLY_SLACK;
    let kind = channel_of(cell)?;
    let acceptor = listen(
        kind,
        ListenOptions {
            wake: cell.wake,
            max_message,
            bind: options.second_host.as_ref().map(|h| h.host),
        },
    )
    .map_err(|e| setup_failure(format!("opening the {kind} channel: {e}")))?;
    let mut config = options.peer_config(
        cell,
        acceptor.address(),
        limit,
        peer_cpu,
        (),
        limits.timeout,
    );
    config.count = tally.peer_counting(cell.warmup);
    let mut peer = options.start_cell_peer(cell, &config)?;
    let channel = acceptor
        .accept(peer.pid(), Instant::now() + options.setup_timeout)
        .map_err(|e| {
            let mut failure = setup_failure(format!("connecting the peer: {e}"));
            failure.reason.push_str(&peer_epilogue(&mut peer));
            failure
        })?;
    let mut endpoint = ChannelEndpoint {
        channel,
        peer,
        reply: Vec::with_capacity(limit),
        limit,
    };
    let requests = match codec {
        Some(codec) => Requests::frames(codec, cell.seed, len),
        None => Requests::payload(cell.seed, len),
    };
    round_trip::measure(cell, limits, &mut endpoint, requests, tally)
}

/// The measuring side of a channel to an echoing peer.
struct ChannelEndpoint {
    channel: Box<dyn Channel>,
    peer: PeerProcess,
    reply: Vec<u8>,
    limit: usize,
}

impl Endpoint for ChannelEndpoint {
    fn send(&mut self, request: &[u8], deadline: Instant) -> Result<(), Broken> {
        self.channel
            .send(request, deadline)
            .map_err(|e| broken("sending the request", e))
    }

    fn receive(&mut self, deadline: Instant) -> Result<Answer, Broken> {
        match self.channel.recv(&mut self.reply, self.limit, deadline) {
            Ok(()) => Ok(Answer::Replied),
            Err(TransportError::Timeout { .. }) if self.channel.is_lossy() => Ok(Answer::Lost),
            Err(e) => Err(broken("waiting for the reply", e)),
        }
    }

    fn reply(&self) -> Result<&[u8], Broken> {
        Ok(&self.reply)
    }

    fn is_lossy(&self) -> bool {
        self.channel.is_lossy()
    }

    fn peer(&mut self) -> &mut PeerProcess {
        &mut self.peer
    }

    /// An empty message says goodbye; the peer exits cleanly, and nothing follows (a
    /// reply to the goodbye, or a second reply to an earlier request).
    fn goodbye(&mut self) -> Result<(), Failure> {
        let deadline = Instant::now() + GOODBYE_WITHIN;
        let said = self
            .channel
            .send(&[], deadline)
            .map_err(|e| format!("goodbye not delivered: {e}"));
        expect_clean_exit(&mut self.peer, said, deadline)?;
        // The peer is gone: a stream reads its end at once, a datagram socket only what
        // was already sent.
        let after = Instant::now() + NOTHING_AFTER_GOODBYE;
        match self.channel.recv(&mut self.reply, self.limit, after) {
            Ok(()) => Err(Failure {
                kind: FailureKind::Protocol,
                round_trip: None,
                reason: format!(
                    "the peer sent a message of {} bytes after its last reply, which no request asked for (a reply to the goodbye, or a second reply)",
                    self.reply.len()
                ),
            }),
            Err(_) => Ok(()),
        }
    }
}

fn broken(doing: &str, e: TransportError) -> Broken {
    (transport_failure_kind(&e), format!("{doing}: {e}"))
}

/// The peer's side: echo every message (decoded and encoded again for a codec cell)
/// until an empty one says goodbye, committing the fault asked for.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), String> {
    let mut channel = config.connect()?;
    let idle = config.idle_timeout;
    let mut message = Vec::new();
    for index in 0u64.. {
        // One clock read per message: the reply shares the request's deadline.
        let deadline = Instant::now() + idle;
        PeerCounting::open(config.count, index);
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
        before_reply(config);
        if let Some(fault) = config.fault.filter(|f| f.at == index) {
            fault.commit(&mut message, channel.chunk_size())?;
        }
        channel
            .send(&message, deadline)
            .map_err(|e| format!("reply {index}: {e}"))?;
        PeerCounting::close(config.count, index);
    }
    Ok(())
}
