//! Where and how a peer reaches the measuring side's end of a channel, serialized onto
//! the peer's command line.

use ipc_matrix_spec::{ChannelKind, WakeMode};
use serde::{Deserialize, Serialize};
use std::os::fd::RawFd;
use std::time::Instant;

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
    /// A user's stack (`crate::stack`), by name, and the address its acceptor gave; for
    /// a stack in a shared library (`crate::plugin`), the library, which the peer loads.
    Stack {
        stack: ipc_matrix_spec::StackName,
        address: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        library: Option<std::path::PathBuf>,
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
            ChannelKind::Shm
            | ChannelKind::Udp
            | ChannelKind::Pipe
            | ChannelKind::Iceoryx2
            | ChannelKind::Stack(_) => None,
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
            PeerAddress::Stack { stack, .. } => ChannelKind::Stack(*stack),
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
            PeerAddress::Shm { .. }
            | PeerAddress::Udp { .. }
            | PeerAddress::Iceoryx2 { .. }
            | PeerAddress::Stack { .. } => return None,
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
            | PeerAddress::Iceoryx2 { .. }
            | PeerAddress::Stack { .. } => None,
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
            | PeerAddress::Iceoryx2 { .. }
            | PeerAddress::Stack { .. } => Vec::new(),
        }
    }
}
