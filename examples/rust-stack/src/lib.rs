//! `udgram`: a small IPC stack of its own, one Unix datagram socket on each side in a
//! private folder, measured by ipc-matrix from outside its workspace.
//!
//! A message is one datagram (the kernel keeps its bounds, never loses or reorders one on
//! a Unix socket), so there is no framing. Each wait is cut into slices of at most
//! [`SLICE`], so that a deadline is kept and a dead peer is noticed within one. The peer
//! is looked for (`process_alive` reads `/proc/<pid>/stat`) only once a slice has run out:
//! a message that is there is taken at once, and what a round trip costs does not depend
//! on the peer's pid or its /proc line.

use ipc_matrix::stack_entry::{
    process_alive, Channel, ChannelKind, ListenOptions, Stack, StackAcceptor, StackTraits,
    TransportError,
};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest wait between two looks at the deadline and the peer.
pub const SLICE: Duration = Duration::from_millis(10);
/// The largest message: what a Unix datagram socket's default send buffer takes whole.
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Fault injection for the fault test of this stack, read by the peer's side: the
/// reply number (1-based, counting every message the peer sends) whose middle byte the
/// stack itself flips.
pub const CORRUPT_REPLY_ENV: &str = "UDGRAM_CORRUPT_REPLY";
/// What the peer sends first, so that the measuring side learns its address.
const HELLO: &[u8] = b"udgram-hello";

/// The stack: `udgram` in matrix.yaml and in cell ids.
pub struct UnixDatagramStack;

impl Stack for UnixDatagramStack {
    fn name(&self) -> &'static str {
        "udgram"
    }

    /// Copies (send and recv), no wake modes; a Unix socket's floor.
    fn traits(&self) -> StackTraits {
        StackTraits::copying(ChannelKind::Local)
    }

    /// One datagram each.
    fn max_message(&self) -> Option<usize> {
        Some(MAX_MESSAGE)
    }

    fn listen(&self, options: &ListenOptions) -> Result<Box<dyn StackAcceptor>, TransportError> {
        if options.max_message > MAX_MESSAGE {
            return Err(TransportError::Stack(format!(
                "udgram carries messages of at most {MAX_MESSAGE} bytes, not {}",
                options.max_message
            )));
        }
        let dir = private_dir().map_err(|source| TransportError::Io {
            context: "making udgram's private folder",
            source,
        })?;
        let socket =
            UnixDatagram::bind(dir.path.join("m.sock")).map_err(|source| TransportError::Io {
                context: "binding udgram's measuring socket",
                source,
            })?;
        Ok(Box::new(Acceptor { dir, socket }))
    }

    fn connect(
        &self,
        address: &str,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let dir = Path::new(address);
        let io = |context| move |source| TransportError::Io { context, source };
        let socket =
            UnixDatagram::bind(dir.join("p.sock")).map_err(io("binding udgram's peer socket"))?;
        socket
            .connect(dir.join("m.sock"))
            .map_err(io("connecting udgram's peer socket"))?;
        let mut channel = DatagramChannel {
            socket,
            peer: None,
            corrupt: corrupt_reply_from_env(),
            sent: 0,
            _dir: None,
        };
        channel.send(HELLO, deadline)?;
        Ok(Box::new(channel))
    }
}

struct Acceptor {
    dir: PrivateDir,
    socket: UnixDatagram,
}

impl StackAcceptor for Acceptor {
    fn address(&self) -> String {
        self.dir.path.display().to_string()
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let Acceptor { dir, socket } = *self;
        let mut channel = DatagramChannel {
            socket,
            peer: Some(peer),
            corrupt: None,
            sent: 0,
            _dir: Some(dir),
        };
        let mut hello = Vec::new();
        channel.recv(&mut hello, HELLO.len(), deadline)?;
        if hello != HELLO {
            return Err(TransportError::Corrupt(format!(
                "the peer's first datagram is {} bytes, not udgram's hello",
                hello.len()
            )));
        }
        let path = channel
            ._dir
            .as_ref()
            .map(|d| d.path.join("p.sock"))
            .unwrap_or_default();
        channel
            .socket
            .connect(path)
            .map_err(|source| TransportError::Io {
                context: "connecting udgram's measuring socket",
                source,
            })?;
        Ok(Box::new(channel))
    }
}

/// One end of a udgram channel.
struct DatagramChannel {
    socket: UnixDatagram,
    /// The peer process, on the measuring side: a wait gives up once it has exited.
    peer: Option<u32>,
    /// On the peer's side, the reply to spoil (see [`CORRUPT_REPLY_ENV`]).
    corrupt: Option<u64>,
    sent: u64,
    /// The measuring side owns the folder, removed when the channel ends.
    _dir: Option<PrivateDir>,
}

impl DatagramChannel {
    /// Sets the next wait's slice: what is left of `deadline`, at most [`SLICE`]; an error
    /// once the deadline has passed, or once a slice has run out (`waited`) and the peer
    /// has exited.
    fn slice(
        &self,
        deadline: Instant,
        what: &'static str,
        waited: bool,
    ) -> Result<Duration, TransportError> {
        if let Some(peer) = self.peer.filter(|_| waited) {
            if !process_alive(peer) {
                return Err(TransportError::PeerGone(format!(
                    "process {peer} has exited"
                )));
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TransportError::Timeout { what });
        }
        Ok(left.min(SLICE))
    }
}

impl DatagramChannel {
    /// The length of the next datagram, waiting for one as a receive does; it stays on
    /// the socket.
    fn next_length(&self) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        // SAFETY: a zero-length receive into no memory; MSG_TRUNC makes it return the
        // datagram's whole length, MSG_PEEK leaves the datagram queued.
        let n = unsafe {
            libc::recv(
                self.socket.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_PEEK | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

fn is_wait(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

impl Channel for DatagramChannel {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        self.sent += 1;
        let spoiled;
        let message = match self.corrupt {
            Some(n) if n == self.sent && !message.is_empty() => {
                let mut copy = message.to_vec();
                copy[message.len() / 2] ^= 0x01;
                spoiled = copy;
                &spoiled[..]
            }
            _ => message,
        };
        let mut waited = false;
        loop {
            let slice = self.slice(deadline, "send", waited)?;
            waited = true;
            self.socket
                .set_write_timeout(Some(slice))
                .map_err(|source| TransportError::Io {
                    context: "udgram send timeout",
                    source,
                })?;
            match self.socket.send(message) {
                Ok(n) if n == message.len() => return Ok(()),
                Ok(n) => {
                    return Err(TransportError::Stack(format!(
                        "udgram sent {n} of {} bytes",
                        message.len()
                    )))
                }
                Err(e) if is_wait(&e) => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    return Err(TransportError::PeerGone("its socket is closed".into()))
                }
                Err(source) => {
                    return Err(TransportError::Io {
                        context: "udgram send",
                        source,
                    })
                }
            }
        }
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        // One byte more than the limit: a longer datagram shows as filling it. A buffer
        // without that room yet is not grown before the datagram's length is known, so
        // that a datagram over the limit is refused with nothing allocated for it.
        let room = limit.min(MAX_MESSAGE) + 1;
        let peek_first = buf.capacity() < room;
        buf.clear();
        if !peek_first {
            buf.resize(room, 0);
        }
        let mut waited = false;
        loop {
            let slice = self.slice(deadline, "message", waited)?;
            waited = true;
            self.socket
                .set_read_timeout(Some(slice))
                .map_err(|source| TransportError::Io {
                    context: "udgram receive timeout",
                    source,
                })?;
            if peek_first {
                match self.next_length() {
                    Ok(n) if n > limit => {
                        // Taken off the socket, as a refused datagram is.
                        let _ = self.socket.recv(&mut [0u8; 1]);
                        return Err(TransportError::TooLarge {
                            announced: n as u64,
                            limit,
                        });
                    }
                    Ok(n) => buf.resize(n + 1, 0),
                    Err(e) if is_wait(&e) => continue,
                    Err(source) => {
                        return Err(TransportError::Io {
                            context: "udgram receive",
                            source,
                        })
                    }
                }
            }
            match self.socket.recv(buf) {
                Ok(n) if n > limit => {
                    buf.clear();
                    return Err(TransportError::TooLarge {
                        announced: n as u64,
                        limit,
                    });
                }
                Ok(n) => {
                    buf.truncate(n);
                    return Ok(());
                }
                Err(e) if is_wait(&e) => continue,
                Err(source) => {
                    buf.clear();
                    return Err(TransportError::Io {
                        context: "udgram receive",
                        source,
                    });
                }
            }
        }
    }
}

fn corrupt_reply_from_env() -> Option<u64> {
    std::env::var(CORRUPT_REPLY_ENV).ok()?.parse().ok()
}

/// A folder only this user may enter, removed when dropped.
struct PrivateDir {
    path: PathBuf,
}

fn private_dir() -> std::io::Result<PrivateDir> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("udgram-{}-{n}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    Ok(PrivateDir { path })
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
