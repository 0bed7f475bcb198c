//! The contract every transport keeps: [`Channel`], whole messages, each send and receive
//! bounded by a deadline, and [`Acceptor`], the measuring side's half before the peer
//! has connected.

use crate::address::PeerAddress;
use crate::error::TransportError;
use std::time::Instant;

/// A message channel between two processes.
pub trait Channel: Send {
    /// Sends one whole message, or fails once `deadline` passes.
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError>;

    /// Receives one whole message into `buf` (replacing its contents). A message longer
    /// than `limit` is refused before it is read: a lying peer cannot make us allocate.
    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError>;

    /// The measuring side's round trip with a peer that echoes as it receives (one that
    /// calls [`Channel::echo`] for every message): sends `request` and receives the reply
    /// into `reply` (replacing its contents; one longer than `limit` is refused as by
    /// [`Channel::recv`]), both by `deadline`. An empty request is the goodbye, which gets
    /// no reply: it is sent and `reply` is left empty.
    ///
    /// A transport may take reply bytes while later request bytes are still going out
    /// (shared memory does, chunk by chunk). That is only safe when the peer echoes as it
    /// receives: a peer that receives the whole message before it replies may leave both
    /// sides waiting, and `exchange` then fails with a Timeout at `deadline` (never later);
    /// use `send` and `recv` with such a peer. The default is `send`, then `recv`.
    fn exchange(
        &mut self,
        request: &[u8],
        reply: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        self.send(request, deadline)?;
        if request.is_empty() {
            reply.clear();
            return Ok(());
        }
        self.recv(reply, limit, deadline)
    }

    /// The peer's side of [`Channel::exchange`]: receives one message (refused as by
    /// [`Channel::recv`] when longer than `limit`) and sends it back unchanged, both by
    /// `deadline`, returning its length. An empty message, the goodbye, is received and
    /// not sent back: `Ok(0)`. A transport may send the first bytes back before the last
    /// have arrived (shared memory does, chunk by chunk, copying each straight from the
    /// request's slot into the reply's); `scratch` is where the message is held by those
    /// that need the whole of it (the default: `recv` into it, then `send` it).
    fn echo(
        &mut self,
        scratch: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<usize, TransportError> {
        self.recv(scratch, limit, deadline)?;
        if !scratch.is_empty() {
            self.send(scratch, deadline)?;
        }
        Ok(scratch.len())
    }

    /// True when messages may be lost in transit (UDP); a timeout then means "lost".
    fn is_lossy(&self) -> bool {
        false
    }

    /// The size of the chunks a message is carried in, when the transport cuts every
    /// message longer than that into chunks of exactly that size, the last one shorter
    /// (shared memory: one slot each); `None` when a message goes whole (a datagram) or
    /// where it is cut is the kernel's choice (a byte stream).
    fn chunk_size(&self) -> Option<usize> {
        None
    }
}

/// The measuring side's half of a channel before the peer has connected.
pub trait Acceptor {
    /// What the peer needs to connect; serialized onto its command line.
    fn address(&self) -> PeerAddress;
    /// Waits for the peer, process `peer`, to connect; gives up early if that process dies.
    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError>;
}
