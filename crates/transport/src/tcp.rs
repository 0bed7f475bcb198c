//! TCP over 127.0.0.1 (or a link to a second host) on an ephemeral port, Nagle off
//! (TCP_NODELAY) on both ends.

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
use crate::framing::{Framed, TimedStream};
use crate::wait::{poll_accept, remaining};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

impl TimedStream for TcpStream {
    fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        TcpStream::set_read_timeout(self, Some(t))
    }
    fn set_write_timeout(&mut self, t: Duration) -> io::Result<()> {
        TcpStream::set_write_timeout(self, Some(t))
    }
    fn take_pending_error(&mut self) -> Option<io::Error> {
        self.take_error().ok().flatten()
    }
}

pub struct TcpAcceptor {
    listener: TcpListener,
    addr: SocketAddr,
}

impl TcpAcceptor {
    /// Listens on an ephemeral port of `on` (127.0.0.1 when `None`).
    pub fn bind(on: Option<Ipv4Addr>) -> Result<Self, TransportError> {
        let on = on.unwrap_or(Ipv4Addr::LOCALHOST);
        let listener = TcpListener::bind((on, 0)).map_err(|e| {
            TransportError::io("binding an ephemeral TCP port")(std::io::Error::new(
                e.kind(),
                format!("{on}:0: {e}"),
            ))
        })?;
        let addr = listener
            .local_addr()
            .map_err(TransportError::io("reading the bound address"))?;
        listener
            .set_nonblocking(true)
            .map_err(TransportError::io("making accept non-blocking"))?;
        Ok(Self { listener, addr })
    }
}

impl Acceptor for TcpAcceptor {
    fn address(&self) -> PeerAddress {
        PeerAddress::Tcp { addr: self.addr }
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let (stream, _) = poll_accept(|| self.listener.accept(), peer, deadline)?;
        Ok(Box::new(framed(stream)?))
    }
}

pub fn connect(addr: SocketAddr, deadline: Instant) -> Result<impl Channel, TransportError> {
    let wait = remaining(deadline, "connection")?;
    let stream = TcpStream::connect_timeout(&addr, wait)
        .map_err(TransportError::io("connecting over TCP"))?;
    framed(stream)
}

fn framed(stream: TcpStream) -> Result<Framed<TcpStream>, TransportError> {
    stream
        .set_nonblocking(false)
        .map_err(TransportError::io("making the stream blocking"))?;
    stream
        .set_nodelay(true)
        .map_err(TransportError::io("setting TCP_NODELAY"))?;
    Framed::new(stream).map_err(TransportError::io("setting socket timeouts"))
}
