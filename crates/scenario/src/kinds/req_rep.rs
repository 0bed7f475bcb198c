//! ZeroMQ REQ/REP echo (seed 001) through the `zmq` crate, whose libzmq is built from
//! source for every target. The measuring side's REQ socket binds (TCP on 127.0.0.1 or on
//! the link to a second host, or IPC in a private directory) and the peer's REP socket
//! connects; every request waits for its echo, which must equal it byte for byte. An
//! empty message says goodbye.

use crate::context::{RunOptions, Tally};
use crate::counting::PeerCounting;
use crate::failure::{
    expect_clean_exit, expect_running_before_goodbye, setup_failure, GoodbyeError, STARTED,
};
use crate::fault::Fault;
use crate::peer::{before_reply, ConfigError, PeerConfig, PeerError, RequestWaitError};
use crate::round_trip::{self, Answer, Broken, Endpoint, Limits, Requests};
use crate::spawn::{PeerProcess, GOODBYE_WITHIN};
use ipc_matrix_results::{Failure, FailureKind};
use ipc_matrix_spec::{Calls, Cell};
use ipc_matrix_transport::{process_alive, PeerAddress, PrivateDir, SocketEndpoint, SocketKind};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// Longest wait in one poll, so a dead peer is noticed within this much.
const POLL_SLICE: Duration = Duration::from_millis(50);
/// Bytes a reply may exceed its request by and still be read (and reported as too long);
/// libzmq drops the connection on a longer one.
const REPLY_SLACK: usize = 1024;
/// How long the peer's libzmq may take to deliver its last reply when it exits.
const PEER_LINGER_MS: i32 = 1000;

/// The endpoint a peer address stands for.
pub fn endpoint(address: &PeerAddress) -> Result<String, ConfigError> {
    match address.socket() {
        Some(SocketEndpoint::Tcp(addr)) => Ok(format!("tcp://{addr}")),
        Some(SocketEndpoint::Unix(path)) => Ok(format!("ipc://{}", path.display())),
        None => Err(ConfigError::NotZmq(address.clone())),
    }
}

/// Runs a `req-rep` cell.
pub(crate) fn req_rep(
    cell: &Cell,
    calls: &Calls,
    options: &RunOptions,
    peer_cpu: Option<usize>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let len = cell.payload_bytes as usize;
    let context = zmq::Context::new();
    let zmq_setup = |what: &str, e: zmq::Error| setup_failure(format!("{what}: {e}"));
    let socket = context
        .socket(zmq::REQ)
        .map_err(|e| zmq_setup("creating the REQ socket", e))?;
    socket
        .set_linger(0)
        .and_then(|()| socket.set_maxmsgsize((len + REPLY_SLACK) as i64))
        .map_err(|e| zmq_setup("setting socket options", e))?;
    // Holds the IPC socket file until the peer has connected (its first reply).
    let mut private_dir = None;
    let address = match cell.transport.channel().and_then(SocketKind::of) {
        Some(SocketKind::Tcp) => {
            // Loopback, or this host's end of the link to a second host.
            let on = options
                .second_host
                .as_ref()
                .map_or(Ipv4Addr::LOCALHOST, |h| h.host);
            let wildcard = format!("tcp://{on}:*");
            socket
                .bind(&wildcard)
                .map_err(|e| zmq_setup(&format!("binding {wildcard}"), e))?;
            let bound = socket
                .get_last_endpoint()
                .map_err(|e| zmq_setup("reading the bound endpoint", e))?
                .map_err(|raw| setup_failure(format!("the bound endpoint {raw:?} is not text")))?;
            let addr: SocketAddr = bound
                .trim_start_matches("tcp://")
                .parse()
                .map_err(|e| setup_failure(format!("the bound endpoint {bound}: {e}")))?;
            PeerAddress::Tcp { addr }
        }
        Some(SocketKind::Unix) => {
            const SOCKET: &str = "req-rep.ipc";
            let dir = PrivateDir::for_sockets(1 + SOCKET.len())
                .map_err(|e| setup_failure(format!("creating a private directory: {e}")))?;
            let path = dir.path().join(SOCKET);
            let address = PeerAddress::Local { path };
            let endpoint = endpoint(&address).map_err(|e| setup_failure(e.to_string()))?;
            socket
                .bind(&endpoint)
                .map_err(|e| zmq_setup(&format!("binding {endpoint}"), e))?;
            private_dir = Some(dir);
            address
        }
        None => {
            return Err(setup_failure(format!(
                "req-rep does not run over {}",
                cell.transport
            )))
        }
    };
    // libzmq applies the limit to the handshake's commands too: never below the slack.
    let mut config = options.peer_config(
        cell,
        address,
        len + REPLY_SLACK,
        peer_cpu,
        (),
        calls.timeout,
    );
    config.count = tally.peer_counting(cell.warmup);
    let peer = options.start_peer(&config)?;
    let mut endpoint = ZmqEndpoint {
        socket,
        peer,
        reply: zmq::Message::new(),
        connecting: Some(options.setup_timeout),
        private_dir,
    };
    let requests = Requests::payload(cell.seed, len);
    round_trip::measure(
        cell,
        Limits::lossless(calls.timeout),
        &mut endpoint,
        requests,
        tally,
    )
}

/// The measuring side's REQ socket, bound, with the REP peer connecting to it.
struct ZmqEndpoint {
    socket: zmq::Socket,
    peer: PeerProcess,
    reply: zmq::Message,
    /// Until the first reply, the peer may still be starting and connecting: the first
    /// round trip may take this much longer.
    connecting: Option<Duration>,
    /// The IPC socket file's private directory; removed once the peer has connected.
    private_dir: Option<PrivateDir>,
}

impl ZmqEndpoint {
    fn extended(&self, deadline: Instant) -> Instant {
        deadline + self.connecting.unwrap_or_default()
    }
}

impl Endpoint for ZmqEndpoint {
    fn send(&mut self, request: &[u8], deadline: Instant) -> Result<(), Broken> {
        let deadline = self.extended(deadline);
        wait_for(&self.socket, zmq::POLLOUT, deadline, &mut self.peer)?;
        self.socket
            .send(request, zmq::DONTWAIT)
            .map_err(|e| (FailureKind::PeerGone, format!("sending the request: {e}")))
    }

    fn receive(&mut self, deadline: Instant) -> Result<Answer, Broken> {
        let deadline = self.extended(deadline);
        wait_for(&self.socket, zmq::POLLIN, deadline, &mut self.peer)?;
        self.socket
            .recv(&mut self.reply, zmq::DONTWAIT)
            .map_err(|e| (FailureKind::Protocol, format!("receiving the reply: {e}")))?;
        if self.reply.get_more() {
            return Err((
                FailureKind::Protocol,
                "the reply has more than one part".into(),
            ));
        }
        // The peer is connected: its socket file is no longer needed.
        self.connecting = None;
        self.private_dir = None;
        Ok(Answer::Replied)
    }

    fn reply(&mut self) -> Result<&[u8], Broken> {
        Ok(&self.reply)
    }

    fn peer(&mut self) -> &mut PeerProcess {
        &mut self.peer
    }

    /// An empty request says goodbye; the peer echoes it and exits.
    fn goodbye(&mut self) -> Result<(), Failure> {
        expect_running_before_goodbye(&mut self.peer, STARTED)?;
        let deadline = Instant::now() + GOODBYE_WITHIN;
        let (socket, peer) = (&self.socket, &mut self.peer);
        let said = wait_for(socket, zmq::POLLOUT, deadline, peer)
            .and_then(|()| {
                socket
                    .send(&[][..], zmq::DONTWAIT)
                    .map_err(|e| (FailureKind::Shutdown, e.to_string()))
            })
            .and_then(|()| wait_for(socket, zmq::POLLIN, deadline, peer))
            .and_then(|()| {
                socket
                    .recv_bytes(zmq::DONTWAIT)
                    .map(|_| ())
                    .map_err(|e| (FailureKind::Shutdown, e.to_string()))
            })
            .map_err(|(_, e)| GoodbyeError::NotAnswered(e));
        expect_clean_exit(&mut self.peer, said, deadline)
    }
}

/// Waits until `socket` is ready for `events`; a timeout or a dead peer is an error.
fn wait_for(
    socket: &zmq::Socket,
    events: zmq::PollEvents,
    deadline: Instant,
    peer: &mut PeerProcess,
) -> Result<(), (FailureKind, String)> {
    let what = if events == zmq::POLLIN {
        "reply"
    } else {
        "room to send"
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err((
                FailureKind::Timeout,
                format!("no {what} before the deadline"),
            ));
        }
        let slice = left.min(POLL_SLICE).as_millis().max(1) as i64;
        // libzmq's poll looks at the socket, sleeps and looks again: how often depends on
        // when the other side answers, so it is not counted.
        let polled = {
            let _waiting = ipc_matrix_count_window::pause();
            socket.poll(events, slice)
        };
        match polled {
            Ok(n) if n > 0 => return Ok(()),
            Ok(_) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err((FailureKind::Protocol, format!("polling: {e}"))),
        }
        if !process_alive(peer.pid()) || peer.wait_until(Instant::now()).is_some() {
            return Err((
                FailureKind::PeerGone,
                format!(
                    "the peer is gone: process {} exited while waiting for {what}",
                    peer.pid()
                ),
            ));
        }
    }
}

/// The peer's side: a REP socket that connects and echoes until an empty message.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), PeerError> {
    let endpoint = endpoint(&config.address)?;
    let context = zmq::Context::new();
    let socket = context.socket(zmq::REP).map_err(PeerError::ZmqSocket)?;
    let idle_ms = config.idle_timeout.as_millis().min(i32::MAX as u128) as i32;
    socket
        .set_linger(PEER_LINGER_MS)
        .and_then(|()| socket.set_maxmsgsize(config.limit as i64))
        .and_then(|()| socket.set_rcvtimeo(idle_ms))
        .and_then(|()| socket.set_sndtimeo(idle_ms))
        .map_err(PeerError::ZmqOptions)?;
    socket
        .connect(&endpoint)
        .map_err(|source| PeerError::ZmqConnecting { endpoint, source })?;
    let fault: Option<Fault> = config.fault;
    for index in 0u64.. {
        PeerCounting::open(config.count, index);
        // The wait for the request is not counted (how often libzmq looks depends on when
        // it comes); taking it, once it is there, is.
        wait_for_request(&socket, config.idle_timeout)
            .map_err(|source| PeerError::AwaitingRequest { index, source })?;
        let mut message = socket
            .recv_bytes(zmq::DONTWAIT)
            .map_err(|source| PeerError::ZmqReceiving { index, source })?;
        let last = message.is_empty();
        if !last {
            before_reply(config);
            if let Some(fault) = fault.filter(|f| f.at == index) {
                // A ZeroMQ message goes whole.
                fault.commit(&mut message, None)?;
            }
        }
        socket
            .send(message, 0)
            .map_err(|source| PeerError::ZmqReplying { index, source })?;
        PeerCounting::close(config.count, index);
        if last {
            return Ok(());
        }
    }
    Ok(())
}

/// The peer's wait for its next request, paused in the count; an error after `idle`.
fn wait_for_request(socket: &zmq::Socket, idle: Duration) -> Result<(), RequestWaitError> {
    let deadline = Instant::now() + idle;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RequestWaitError::Idle(idle));
        }
        let slice = left.min(POLL_SLICE).as_millis().max(1) as i64;
        let polled = {
            let _waiting = ipc_matrix_count_window::pause();
            socket.poll(zmq::POLLIN, slice)
        };
        match polled {
            Ok(n) if n > 0 => return Ok(()),
            Ok(_) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err(RequestWaitError::Polling(e)),
        }
    }
}
