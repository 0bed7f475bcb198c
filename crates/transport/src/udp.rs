//! UDP over 127.0.0.1 (or a link to a second host): one message per datagram. Datagrams may be lost, so the channel is
//! lossy: a receive that times out means "lost", and the caller decides what that costs.

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
use crate::wait::remaining;
use ipc_matrix_spec::UDP_MAX_PAYLOAD;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// The peer's first datagram: tells the measuring side where the peer is.
const HELLO: &[u8] = b"ipc-matrix udp hello v1";
const MAX_CALL_WAIT: Duration = Duration::from_millis(250);

pub struct UdpAcceptor {
    socket: UdpSocket,
    addr: SocketAddr,
}

impl UdpAcceptor {
    /// Binds an ephemeral port of `on` (127.0.0.1 when `None`).
    pub fn bind(on: Option<Ipv4Addr>) -> Result<Self, TransportError> {
        let socket = bind_on(on.unwrap_or(Ipv4Addr::LOCALHOST))?;
        let addr = socket
            .local_addr()
            .map_err(TransportError::io("reading the bound address"))?;
        Ok(Self { socket, addr })
    }
}

impl Acceptor for UdpAcceptor {
    fn address(&self) -> PeerAddress {
        PeerAddress::Udp { addr: self.addr }
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let mut channel = UdpChannel::new(self.socket);
        let mut hello = Vec::new();
        let from = loop {
            remaining(deadline, "hello from the peer")?;
            crate::platform::ensure_alive(peer, "before it said hello")?;
            let slice = (Instant::now() + Duration::from_millis(20)).min(deadline);
            match channel.recv_from(&mut hello, HELLO.len(), slice, "hello from the peer") {
                Ok(from) if hello == HELLO => break from,
                Ok(_)
                | Err(TransportError::Timeout { .. })
                | Err(TransportError::TooLarge { .. }) => {}
                Err(e) => return Err(e),
            }
        };
        channel
            .socket
            .connect(from)
            .map_err(TransportError::io("connecting to the peer's address"))?;
        Ok(Box::new(channel))
    }
}

/// A UDP socket on an ephemeral port of `on`.
fn bind_on(on: Ipv4Addr) -> Result<UdpSocket, TransportError> {
    UdpSocket::bind((on, 0)).map_err(|e| {
        TransportError::io("binding an ephemeral UDP port")(io::Error::new(
            e.kind(),
            format!("{on}:0: {e}"),
        ))
    })
}

pub fn connect(addr: SocketAddr, deadline: Instant) -> Result<impl Channel, TransportError> {
    // Loopback to loopback; to another host (across a link), from whichever address the
    // route to it gives.
    let socket = bind_on(if addr.ip().is_loopback() {
        Ipv4Addr::LOCALHOST
    } else {
        Ipv4Addr::UNSPECIFIED
    })?;
    socket
        .connect(addr)
        .map_err(TransportError::io("connecting the UDP socket"))?;
    let mut channel = UdpChannel::new(socket);
    channel.send(HELLO, deadline)?;
    Ok(channel)
}

pub struct UdpChannel {
    socket: UdpSocket,
    read_timeout: Option<Duration>,
    datagram: Box<[u8]>,
}

impl UdpChannel {
    fn new(socket: UdpSocket) -> Self {
        Self {
            socket,
            read_timeout: None,
            // One byte more than the largest datagram, so an oversized one is noticed.
            datagram: vec![0u8; UDP_MAX_PAYLOAD as usize + 1].into_boxed_slice(),
        }
    }

    fn recv_from(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
        what: &'static str,
    ) -> Result<SocketAddr, TransportError> {
        loop {
            let wait = remaining(deadline, what)?.min(MAX_CALL_WAIT);
            if self.read_timeout != Some(wait) {
                self.socket
                    .set_read_timeout(Some(wait))
                    .map_err(TransportError::io("setting the receive timeout"))?;
                self.read_timeout = Some(wait);
            }
            match self.socket.recv_from(&mut self.datagram) {
                Ok((n, from)) => {
                    if n > limit {
                        return Err(TransportError::TooLarge {
                            announced: n as u64,
                            limit,
                        });
                    }
                    buf.clear();
                    buf.extend_from_slice(&self.datagram[..n]);
                    return Ok(from);
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    return Err(TransportError::PeerGone(
                        "nothing listens on its UDP port any more".into(),
                    ))
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(TransportError::io("receiving a datagram")(e)),
            }
        }
    }
}

impl Channel for UdpChannel {
    fn send(&mut self, message: &[u8], _deadline: Instant) -> Result<(), TransportError> {
        if message.len() as u64 > UDP_MAX_PAYLOAD {
            return Err(TransportError::TooLarge {
                announced: message.len() as u64,
                limit: UDP_MAX_PAYLOAD as usize,
            });
        }
        match self.socket.send(message) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Err(
                TransportError::PeerGone("nothing listens on its UDP port any more".into()),
            ),
            Err(e) => Err(TransportError::io("sending a datagram")(e)),
        }
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        self.recv_from(buf, limit, deadline, "reply datagram")
            .map(|_| ())
    }

    fn is_lossy(&self) -> bool {
        true
    }

    /// A datagram of ours reached the peer's port after its socket was closed: the
    /// kernel answered "port unreachable", which this socket (connected to the peer's
    /// address since its hello) holds as its pending error until a call reports it.
    fn refused_after_close(&mut self) -> bool {
        self.socket
            .take_error()
            .is_ok_and(|e| e.is_some_and(|e| e.kind() == io::ErrorKind::ConnectionRefused))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram that reaches the peer's port after its socket was closed is told (the
    /// kernel answers "port unreachable"), once; one left unread in a socket still open,
    /// closed after it arrived, is not.
    #[test]
    fn a_datagram_to_a_closed_socket_is_told_once_and_one_left_unread_is_not() {
        let deadline = Instant::now() + Duration::from_secs(5);
        for closed_first in [true, false] {
            let acceptor = Box::new(UdpAcceptor::bind(None).unwrap());
            let PeerAddress::Udp { addr } = acceptor.address() else {
                unreachable!("a UDP acceptor has a UDP address")
            };
            let peer = connect(addr, deadline).unwrap();
            let mut ours = acceptor.accept(std::process::id(), deadline).unwrap();
            assert!(!ours.refused_after_close(), "nothing was refused yet");
            if closed_first {
                drop(peer);
                ours.send(&[], deadline).unwrap();
                let told = std::iter::repeat_with(|| {
                    std::thread::sleep(Duration::from_millis(5));
                    ours.refused_after_close()
                })
                .take(200)
                .any(|told| told);
                assert!(told, "the closed port's refusal was not told");
                assert!(!ours.refused_after_close(), "told twice");
            } else {
                ours.send(&[], deadline).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                drop(peer);
                std::thread::sleep(Duration::from_millis(50));
                assert!(!ours.refused_after_close(), "an unread datagram was told");
            }
        }
    }
}
