//! The contract every transport keeps: [`Channel`], whole messages, each send and receive
//! bounded by a deadline; [`Loans`], the loaned (zero-copy) path of a transport that has
//! one; [`Acceptor`], the measuring side's half before the peer has connected; and
//! [`ListenOptions`], what shapes the measuring side's half.

use crate::address::PeerAddress;
use crate::error::TransportError;
use ipc_matrix_spec::WakeMode;
use std::time::Instant;

/// Options of the measuring side that shape the channel.
#[derive(Debug, Clone, Copy)]
pub struct ListenOptions {
    pub wake: Option<WakeMode>,
    /// Largest message the cell will send; sizes the shared-memory ring's slots and
    /// iceoryx2's segments.
    pub max_message: usize,
    /// The address a TCP or UDP channel listens on: this host's end of a link to a
    /// second host (a network namespace); `None` for 127.0.0.1. Other channels ignore it.
    pub bind: Option<std::net::Ipv4Addr>,
}

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

    /// After the other side has closed its end and that close was read: whether bytes of
    /// ours reached it after it had closed, which a stream's kernel answers with a reset
    /// that no later receive reports (TCP). `false` (the default) where the transport
    /// cannot tell, or such bytes fail their send instead (a Unix socket's EPIPE).
    fn reset_after_close(&mut self) -> bool {
        false
    }

    /// After the other side has exited: whether a message of ours found its end already
    /// closed, which a datagram's kernel answers with "port unreachable" (UDP: the
    /// connected socket's pending error, `ECONNREFUSED`), and which no receive has
    /// reported since. Asked once, it forgets. `false` (the default) where the transport
    /// cannot tell. A datagram that reached an open end and was left unread there leaves
    /// no trace either way.
    fn refused_after_close(&mut self) -> bool {
        false
    }

    /// The loaned path ([`Loans`]), when this transport has one: shared memory and
    /// iceoryx2 do. `None` (the default): only the copying path above.
    fn loans(&mut self) -> Option<&mut dyn Loans> {
        None
    }
}

/// The loaned (zero-copy) path of a transport that has one ([`Channel::loans`]): a
/// message is written straight into the transport's own memory and read where it lies,
/// with no copy in from the caller's buffer and none out into it.
///
/// Sending is loan, fill, commit: [`Loans::loan`] lends room for one message, which the
/// caller fills (every byte: the room holds what it held before, never memory that was
/// not written) and [`Loans::commit`] sends. Receiving is borrow, compare, release:
/// [`Loans::borrow`] lends the next message where it lies until [`Loans::release`]
/// (or hold, read, release: [`Loans::hold`] takes it unread, [`Loans::held`] lends it
/// once its length is checked, as the measuring side does to end a round trip). One
/// loan and one borrowed message at a time, each way; either may be open while the other
/// is (a loan taken ahead of the wait for a reply). A message on the loaned path is at
/// most [`Loans::max_loan`] bytes; both paths carry the same messages, so a loaned send
/// is received by either path on the other side, and so is a copied one.
///
/// The copying path of the same side while a loan or a borrowed message is open is
/// refused (iceoryx2), or takes the loan's room or the borrowed message, after which the
/// loan's commit is refused and the release gives back nothing (shared memory, whose
/// copying path does not look at loans, so that its round trips cost what they did):
/// never a message made of both, never one lost.
pub trait Loans {
    /// The longest message a loan or a borrow holds: one shared-memory slot, one sample.
    fn max_loan(&self) -> usize;

    /// Lends room for a message of `len` bytes (at most [`Loans::max_loan`]) in the
    /// transport's memory, waiting by `deadline` for the room to be free. Fails when a
    /// loan is already open.
    fn loan(&mut self, len: usize, deadline: Instant) -> Result<&mut [u8], TransportError>;

    /// The open loan's room again, to fill a loan taken ahead; `None` when none is open.
    fn loaned(&mut self) -> Option<&mut [u8]>;

    /// Gives the open loan back unsent; nothing when none is open.
    fn cancel(&mut self);

    /// Sends the open loan as filled, by `deadline`. Fails when no loan is open. The
    /// goodbye (an empty message) is a loan of 0 bytes, committed.
    fn commit(&mut self, deadline: Instant) -> Result<(), TransportError>;

    /// Lends the next message where it lies, waiting by `deadline`; one longer than
    /// `limit` is refused as by [`Channel::recv`]. Fails when a message is already
    /// borrowed, or when the next one is longer than a loan (a peer that sent it on the
    /// copying path): the loaned path takes only what it can lend whole.
    fn borrow(&mut self, limit: usize, deadline: Instant) -> Result<&[u8], TransportError>;

    /// The borrowed message again; `None` when none is borrowed (or one is held unread).
    fn borrowed(&self) -> Option<&[u8]>;

    /// Waits by `deadline` for the next message and holds it without reading it: where
    /// the measuring side's round trip ends, as a zero-copy stack's own benchmark ends it
    /// (it never reads the message). [`Loans::held`] then reads it, its length checked
    /// against `limit`, once the clock has stopped. Fails as [`Loans::borrow`] does; a
    /// transport that must read a message to hand it over borrows it here.
    fn hold(&mut self, limit: usize, deadline: Instant) -> Result<(), TransportError> {
        self.borrow(limit, deadline).map(|_| ())
    }

    /// The message [`Loans::hold`] holds, lent where it lies once its length is checked
    /// (a message too long fails here, and stays held until [`Loans::release`]); the
    /// borrowed message again after [`Loans::borrow`]. Fails when none is held.
    fn held(&mut self) -> Result<&[u8], TransportError> {
        self.borrowed()
            .ok_or_else(|| TransportError::Loan("no message is held".into()))
    }

    /// Gives the borrowed message back to the transport; nothing when none is borrowed.
    fn release(&mut self);

    /// The peer's side of a loaned round trip: borrows the next message, writes it into
    /// a loan of the same length (or forwards it, where the transport can), commits and
    /// releases, all by `deadline`; returns its length. The goodbye is borrowed and not
    /// sent back: `Ok(0)`. A transport whose users loan ahead (iceoryx2) then takes the
    /// next reply's loan, of this length, before it returns: the loan stays open until
    /// the next echo uses it (or [`Loans::cancel`] gives it back).
    fn echo_loaned(&mut self, limit: usize, deadline: Instant) -> Result<usize, TransportError>;
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
