//! One contract, [`Channel`]: whole messages, each send and receive bounded by a deadline.
//!
//! A channel has two ends in two processes. The measuring process calls [`listen`], which
//! returns an [`Acceptor`] and the [`PeerAddress`] to hand to the peer; the peer calls
//! [`connect`] with that address (for a pipe, the peer must first inherit the descriptors
//! [`PeerAddress::inherited_fds`] names). One file per transport; Linux specifics in
//! `platform`.

mod cleanup;
mod error;
mod framing;
mod iceoryx2;
mod local;
mod pipe;
mod platform;
mod shm;
mod tcp;
mod udp;

pub use cleanup::{
    remove_stale_artifacts, remove_stale_artifacts_in, unnamed_file, PrivateDir, ARTIFACT_PREFIX,
};
pub use error::TransportError;
pub use framing::is_retry;
pub use ipc_matrix_spec::{ChannelKind, WakeMode};
pub use platform::{
    allowed_cpus, die_with_parent, futex_wait, futex_wake, process_alive, set_thread_cpus,
    thread_states, FutexWake,
};

use serde::{Deserialize, Serialize};
use std::os::fd::RawFd;
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

/// Where and how the peer connects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "kebab-case")]
pub enum PeerAddress {
    Shm {
        os_id: String,
        wake: WakeMode,
    },
    Local {
        path: std::path::PathBuf,
    },
    Tcp {
        addr: std::net::SocketAddr,
    },
    Udp {
        addr: std::net::SocketAddr,
    },
    /// Descriptors the peer inherits from the measuring side (see `inherited_fds`).
    Pipe {
        read_fd: RawFd,
        write_fd: RawFd,
    },
    /// iceoryx2 services under a private root directory and /dev/shm prefix, made by
    /// process `owner_pid` for messages of up to `max_message` bytes.
    Iceoryx2 {
        root: std::path::PathBuf,
        prefix: String,
        wake: WakeMode,
        max_message: usize,
        owner_pid: u32,
    },
}

/// The kind of socket a stack that opens its own sockets (ZeroMQ, Cap'n Proto RPC) can
/// bind, for the transports that are such sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    /// TCP on 127.0.0.1, or on this host's end of a link to a second host.
    Tcp,
    /// A Unix stream socket in a private directory.
    Unix,
}

impl SocketKind {
    /// The socket `kind` stands for; `None` for channels that are not sockets a stack
    /// can bind (each listed here, so a new channel decides).
    pub fn of(kind: ChannelKind) -> Option<SocketKind> {
        match kind {
            ChannelKind::Tcp => Some(SocketKind::Tcp),
            ChannelKind::Local => Some(SocketKind::Unix),
            ChannelKind::Shm | ChannelKind::Udp | ChannelKind::Pipe | ChannelKind::Iceoryx2 => None,
        }
    }
}

/// Where a stack that opens its own sockets finds its peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketEndpoint {
    Tcp(std::net::SocketAddr),
    Unix(std::path::PathBuf),
}

impl PeerAddress {
    /// The channel this address belongs to.
    pub fn channel(&self) -> ChannelKind {
        match self {
            PeerAddress::Shm { .. } => ChannelKind::Shm,
            PeerAddress::Local { .. } => ChannelKind::Local,
            PeerAddress::Tcp { .. } => ChannelKind::Tcp,
            PeerAddress::Udp { .. } => ChannelKind::Udp,
            PeerAddress::Pipe { .. } => ChannelKind::Pipe,
            PeerAddress::Iceoryx2 { .. } => ChannelKind::Iceoryx2,
        }
    }

    /// The bare byte stream under a stream channel's framing, written by hand: for a peer
    /// that tests the framing with bytes no [`Channel`] would send (a lying length
    /// prefix). `None` for channels that are not byte streams.
    pub fn connect_unframed(
        &self,
        deadline: Instant,
    ) -> Option<std::io::Result<Box<dyn std::io::Write>>> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let stream: std::io::Result<Box<dyn std::io::Write>> = match self {
            PeerAddress::Tcp { addr } => std::net::TcpStream::connect_timeout(addr, timeout)
                .map(|s| Box::new(s) as Box<dyn std::io::Write>),
            PeerAddress::Local { path } => std::os::unix::net::UnixStream::connect(path)
                .map(|s| Box::new(s) as Box<dyn std::io::Write>),
            PeerAddress::Pipe { write_fd, .. } => {
                use std::os::fd::FromRawFd;
                // SAFETY: the descriptor was inherited for this process, which gives it
                // up to the returned stream and uses it nowhere else.
                Ok(Box::new(unsafe { std::fs::File::from_raw_fd(*write_fd) }))
            }
            PeerAddress::Shm { .. } | PeerAddress::Udp { .. } | PeerAddress::Iceoryx2 { .. } => {
                return None
            }
        };
        Some(stream)
    }

    /// The socket this address names, for stacks that open their own sockets; `None`
    /// for transports that are not such sockets.
    pub fn socket(&self) -> Option<SocketEndpoint> {
        match self {
            PeerAddress::Tcp { addr } => Some(SocketEndpoint::Tcp(*addr)),
            PeerAddress::Local { path } => Some(SocketEndpoint::Unix(path.clone())),
            PeerAddress::Shm { .. }
            | PeerAddress::Udp { .. }
            | PeerAddress::Pipe { .. }
            | PeerAddress::Iceoryx2 { .. } => None,
        }
    }

    /// Descriptors of the measuring process that the peer must inherit: whoever starts the
    /// peer clears FD_CLOEXEC on exactly these, in the child (every other descriptor of
    /// ours stays close-on-exec). Empty for transports the peer reaches by name.
    pub fn inherited_fds(&self) -> Vec<RawFd> {
        match self {
            PeerAddress::Pipe { read_fd, write_fd } => vec![*read_fd, *write_fd],
            PeerAddress::Shm { .. }
            | PeerAddress::Local { .. }
            | PeerAddress::Tcp { .. }
            | PeerAddress::Udp { .. }
            | PeerAddress::Iceoryx2 { .. } => Vec::new(),
        }
    }
}

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

/// Opens the measuring side of a channel of `kind`.
pub fn listen(
    kind: ChannelKind,
    options: ListenOptions,
) -> Result<Box<dyn Acceptor>, TransportError> {
    Ok(match kind {
        ChannelKind::Shm => Box::new(shm::ShmAcceptor::create(
            options.wake.unwrap_or(WakeMode::Blocking),
            options.max_message,
        )?),
        ChannelKind::Local => Box::new(local::LocalAcceptor::bind()?),
        ChannelKind::Tcp => Box::new(tcp::TcpAcceptor::bind(options.bind)?),
        ChannelKind::Udp => Box::new(udp::UdpAcceptor::bind(options.bind)?),
        ChannelKind::Pipe => Box::new(pipe::PipeAcceptor::create()?),
        ChannelKind::Iceoryx2 => Box::new(iceoryx2::Iceoryx2Acceptor::create(
            options.wake.unwrap_or(WakeMode::Blocking),
            options.max_message,
        )?),
    })
}

/// Connects the peer's side of a channel.
pub fn connect(
    address: &PeerAddress,
    deadline: Instant,
) -> Result<Box<dyn Channel>, TransportError> {
    Ok(match address {
        PeerAddress::Shm { os_id, wake } => Box::new(shm::attach(os_id, *wake, deadline)?),
        PeerAddress::Local { path } => Box::new(local::connect(path, deadline)?),
        PeerAddress::Tcp { addr } => Box::new(tcp::connect(*addr, deadline)?),
        PeerAddress::Udp { addr } => Box::new(udp::connect(*addr, deadline)?),
        PeerAddress::Pipe { read_fd, write_fd } => Box::new(pipe::connect(*read_fd, *write_fd)?),
        PeerAddress::Iceoryx2 {
            root,
            prefix,
            wake,
            max_message,
            owner_pid,
        } => Box::new(iceoryx2::connect(
            root,
            prefix,
            *wake,
            *max_message,
            *owner_pid,
            deadline,
        )?),
    })
}
