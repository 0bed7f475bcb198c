//! ZeroMQ REQ/REP echo (seed 001) through the `zmq` crate, whose libzmq is built from
//! source for every target. The measuring side's REQ socket binds (TCP on 127.0.0.1, or
//! IPC in a private directory) and the peer's REP socket connects; every request waits for
//! its echo, which must equal it byte for byte. An empty message says goodbye.

use crate::context::{RunOptions, Tally};
use crate::failure::{round_trip_failure, setup_failure, unclean_stop};
use crate::fault::Fault;
use crate::payload::Payload;
use crate::peer::{commit, spin_for, PeerConfig, PeerRole};
use crate::spawn::PeerProcess;
use crate::verify::compare;
use ipc_matrix_results::{Failure, FailureKind};
use ipc_matrix_spec::{Cell, TransportKind};
use ipc_matrix_transport::{process_alive, PeerAddress, PrivateDir};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Longest wait in one poll, so a dead peer is noticed within this much.
const POLL_SLICE: Duration = Duration::from_millis(50);
/// Bytes a reply may exceed its request by and still be read (and reported as too long);
/// libzmq drops the connection on a longer one.
const REPLY_SLACK: usize = 1024;
/// How long the peer's libzmq may take to deliver its last reply when it exits.
const PEER_LINGER_MS: i32 = 1000;

/// The endpoint a peer address stands for.
pub fn endpoint(address: &PeerAddress) -> Result<String, String> {
    match address {
        PeerAddress::Tcp { addr } => Ok(format!("tcp://{addr}")),
        PeerAddress::Local { path } => Ok(format!("ipc://{}", path.display())),
        other => Err(format!("ZeroMQ runs over tcp or ipc, not {other:?}")),
    }
}

/// Runs a `req-rep` cell.
pub(crate) fn req_rep(
    cell: &Cell,
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
    // Kept until the cell ends; removed with its socket file when dropped.
    let mut _private_dir = None;
    let address = match cell.transport {
        TransportKind::Tcp => {
            socket
                .bind("tcp://127.0.0.1:*")
                .map_err(|e| zmq_setup("binding tcp://127.0.0.1:*", e))?;
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
        TransportKind::Local => {
            let dir = PrivateDir::create()
                .map_err(|e| setup_failure(format!("creating a private directory: {e}")))?;
            let path = dir.path().join("req-rep.ipc");
            let address = PeerAddress::Local { path };
            let endpoint = endpoint(&address).map_err(setup_failure)?;
            socket
                .bind(&endpoint)
                .map_err(|e| zmq_setup(&format!("binding {endpoint}"), e))?;
            _private_dir = Some(dir);
            address
        }
        other => return Err(setup_failure(format!("req-rep does not run over {other}"))),
    };
    // libzmq applies the limit to the handshake's commands too: never below the slack.
    let config = options.peer_config(
        cell,
        address,
        len + REPLY_SLACK,
        peer_cpu,
        PeerRole::ZmqReply,
    );
    let mut peer = options.start_peer(&config)?;

    let total = cell.warmup + cell.iterations;
    let mut payload = Payload::new(cell.seed, len);
    let mut reply = zmq::Message::new();
    for index in 0..total {
        // The first request also waits for the peer to start and connect.
        let timeout = match index {
            0 => options.setup_timeout + cell.timeout,
            _ => cell.timeout,
        };
        payload.stamp(index);
        let started = Instant::now();
        let deadline = started + timeout;
        let failed = |peer: &mut PeerProcess, kind, what: String| {
            round_trip_failure(peer, (index, total, cell.warmup), kind, what)
        };
        wait_for(&socket, zmq::POLLOUT, deadline, &mut peer)
            .and_then(|()| {
                socket
                    .send(payload.bytes(), zmq::DONTWAIT)
                    .map_err(|e| (FailureKind::PeerGone, format!("sending the request: {e}")))
            })
            .and_then(|()| wait_for(&socket, zmq::POLLIN, deadline, &mut peer))
            .and_then(|()| {
                socket
                    .recv(&mut reply, zmq::DONTWAIT)
                    .map_err(|e| (FailureKind::Protocol, format!("receiving the reply: {e}")))
            })
            .map_err(|(kind, what)| {
                let limit = match kind {
                    FailureKind::Timeout => format!(" (timeout {timeout:?})"),
                    _ => String::new(),
                };
                failed(&mut peer, kind, format!("{what}{limit}"))
            })?;
        let round_trip = started.elapsed();
        if reply.get_more() {
            return Err(failed(
                &mut peer,
                FailureKind::Protocol,
                "the reply has more than one part".into(),
            ));
        }
        if let Err(mismatch) = compare(payload.bytes(), &reply) {
            let kind = mismatch.failure_kind();
            return Err(failed(&mut peer, kind, mismatch.to_string()));
        }
        tally.count_round_trip(index, cell.warmup, round_trip);
    }
    goodbye(&socket, &mut peer)
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
        match socket.poll(events, slice) {
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

/// An empty request says goodbye; the peer echoes it and exits.
fn goodbye(socket: &zmq::Socket, peer: &mut PeerProcess) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(5);
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
        });
    match (said, peer.wait_until(deadline)) {
        (Ok(()), Some(status)) if status.success() => Ok(()),
        (said, status) => Err(unclean_stop(
            peer,
            match (said, status) {
                (Err((_, e)), _) => format!("goodbye not answered: {e}"),
                (_, Some(status)) => crate::spawn::describe(status),
                (_, None) => "still running after 5s".into(),
            },
        )),
    }
}

/// The peer's side: a REP socket that connects and echoes until an empty message.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), String> {
    let endpoint = endpoint(&config.address)?;
    let context = zmq::Context::new();
    let socket = context
        .socket(zmq::REP)
        .map_err(|e| format!("creating the REP socket: {e}"))?;
    let idle_ms = config.idle_timeout.as_millis().min(i32::MAX as u128) as i32;
    socket
        .set_linger(PEER_LINGER_MS)
        .and_then(|()| socket.set_maxmsgsize(config.limit as i64))
        .and_then(|()| socket.set_rcvtimeo(idle_ms))
        .and_then(|()| socket.set_sndtimeo(idle_ms))
        .map_err(|e| format!("setting socket options: {e}"))?;
    socket
        .connect(&endpoint)
        .map_err(|e| format!("connecting to {endpoint}: {e}"))?;
    let fault: Option<Fault> = config.fault;
    for index in 0u64.. {
        let mut message = socket
            .recv_bytes(0)
            .map_err(|e| format!("message {index}: {e}"))?;
        let last = message.is_empty();
        if !last {
            if let Some(delay) = config.delay {
                spin_for(delay);
            }
            if let Some(fault) = fault.filter(|f| f.at == index) {
                commit(fault.kind, &mut message);
            }
        }
        socket
            .send(message, 0)
            .map_err(|e| format!("reply {index}: {e}"))?;
        if last {
            return Ok(());
        }
    }
    Ok(())
}
