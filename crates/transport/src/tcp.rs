//! TCP over 127.0.0.1 on an ephemeral port, Nagle off (TCP_NODELAY) on both ends.

use crate::framing::{poll_accept, remaining, Framed, TimedStream};
use crate::{Acceptor, Channel, PeerAddress, TransportError};
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
}

pub struct TcpAcceptor {
    listener: TcpListener,
    addr: SocketAddr,
}

impl TcpAcceptor {
    pub fn bind() -> Result<Self, TransportError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(TransportError::io("binding 127.0.0.1:0"))?;
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
