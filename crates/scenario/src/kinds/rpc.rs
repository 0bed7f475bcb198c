//! RPC echo (seed 000's QRemoteObject): the peer serves the Cap'n Proto interface
//! `Echo.sendRawData(data) -> (data)` (`crates/codec/schema/echo_rpc.capnp`) through
//! `capnp-rpc`, over a local socket or TCP; the measuring side calls it once per round
//! trip and compares the returned bytes with what it sent. Both sides run a
//! single-threaded tokio runtime, as capnp-rpc objects are not `Send`.

use crate::context::{RunOptions, Tally};
use crate::counting::PeerCounting;
use crate::failure::{
    expect_clean_exit, expect_running_before_goodbye, peer_epilogue, setup_failure, GoodbyeError,
    STARTED,
};
use crate::fault::Fault;
use crate::peer::{extra_work, spin_for, ConfigError, PeerConfig, PeerError};
use crate::round_trip::{self, Answer, Broken, Endpoint, Limits, Requests};
use crate::spawn::{PeerProcess, GOODBYE_WITHIN};
use capnp::capability::{Promise, Response};
use capnp::message::ReaderOptions;
use capnp_rpc::{rpc_twoparty_capnp::Side, twoparty, RpcSystem};
use futures::io::{BufReader, BufWriter};
use futures::AsyncReadExt;
use ipc_matrix_codec::echo_rpc_capnp::echo;
use ipc_matrix_results::{Failure, FailureKind};
use ipc_matrix_spec::{Calls, Cell};
use ipc_matrix_transport::{process_alive, PeerAddress, PrivateDir, SocketEndpoint, SocketKind};
use std::cell::Cell as Counter;
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::Runtime;
use tokio::task::{JoinHandle, LocalSet};
use tokio_util::compat::TokioAsyncReadCompatExt;

/// How often a wait looks whether the peer is still alive.
const POLL_SLICE: Duration = Duration::from_millis(50);
/// Words a message may hold beyond its payload (structure, the RPC envelope).
const ENVELOPE_WORDS: u64 = 1024;

/// The reader limit for messages carrying `payload` bytes: enough for one payload, so a
/// lying peer cannot make us traverse (or allocate for) more.
fn reader_options(payload: usize) -> ReaderOptions {
    let mut options = ReaderOptions::new();
    options.traversal_limit_in_words(Some((payload as u64 / 8 + ENVELOPE_WORDS) as usize));
    options
}

fn runtime() -> Result<tokio::runtime::Runtime, PeerError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(PeerError::Runtime)
}

/// The reading half of a connection, whichever kind of stream it is.
type Incoming = Box<dyn futures::AsyncRead + Unpin>;

/// A connected stream of either kind, split and buffered for capnp-rpc.
fn vat_network<S>(stream: S, side: Side, payload: usize) -> twoparty::VatNetwork<Incoming>
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let (reader, writer) = stream.compat().split();
    twoparty::VatNetwork::new(
        Box::new(BufReader::new(reader)) as Incoming,
        BufWriter::new(writer),
        side,
        reader_options(payload),
    )
}

/// Runs an `rpc` cell.
pub(crate) fn rpc(
    cell: &Cell,
    calls: &Calls,
    options: &RunOptions,
    peer_cpu: Option<usize>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let runtime = runtime().map_err(|e| setup_failure(e.to_string()))?;
    let local = LocalSet::new();
    let len = cell.payload_bytes as usize;
    let count = tally.peer_counting(cell.warmup);
    let connected = local.block_on(
        &runtime,
        connect_peer(cell, calls, options, (peer_cpu, count), len),
    )?;
    let mut endpoint = RpcEndpoint {
        runtime,
        local,
        connected,
        pending: None,
        response: None,
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

enum Listener {
    Tcp(tokio::net::TcpListener),
    Local(tokio::net::UnixListener),
}

/// The RPC connection to a started peer, with the client of its `Echo` object.
struct Connected {
    peer: PeerProcess,
    client: Option<echo::Client>,
    disconnector: capnp_rpc::Disconnector<twoparty::VatId>,
    system: JoinHandle<Result<(), capnp::Error>>,
}

/// Opens the listener, starts the peer and waits for it to connect.
async fn connect_peer(
    cell: &Cell,
    calls: &Calls,
    options: &RunOptions,
    (peer_cpu, count): (Option<usize>, Option<PeerCounting>),
    len: usize,
) -> Result<Connected, Failure> {
    let listen_failure = |e: std::io::Error| setup_failure(format!("opening the listener: {e}"));
    // Holds the socket file of a local listener; removed once the peer is connected.
    let mut private_dir = None;
    let (listener, address) = match cell.transport.channel().and_then(SocketKind::of) {
        Some(SocketKind::Tcp) => {
            // Loopback, or this host's end of the link to a second host.
            let on = options
                .second_host
                .as_ref()
                .map_or(Ipv4Addr::LOCALHOST, |h| h.host);
            let listener = tokio::net::TcpListener::bind((on, 0))
                .await
                .map_err(listen_failure)?;
            let addr = listener.local_addr().map_err(listen_failure)?;
            (Listener::Tcp(listener), PeerAddress::Tcp { addr })
        }
        Some(SocketKind::Unix) => {
            const SOCKET: &str = "rpc.sock";
            let dir = PrivateDir::for_sockets(1 + SOCKET.len()).map_err(listen_failure)?;
            let path = dir.path().join(SOCKET);
            let listener = tokio::net::UnixListener::bind(&path).map_err(listen_failure)?;
            private_dir = Some(dir);
            (Listener::Local(listener), PeerAddress::Local { path })
        }
        None => {
            return Err(setup_failure(format!(
                "rpc does not run over {}",
                cell.transport
            )))
        }
    };
    let mut config = options.peer_config(cell, address, len, peer_cpu, (), calls.timeout);
    config.count = count;
    let mut peer = options.start_peer(&config)?;
    let setup_deadline = Instant::now() + options.setup_timeout;
    let network = loop {
        let accepted = tokio::time::timeout(POLL_SLICE, async {
            match &listener {
                Listener::Tcp(l) => l.accept().await.map(|(stream, _)| {
                    let _ = stream.set_nodelay(true);
                    vat_network(stream, Side::Client, len)
                }),
                Listener::Local(l) => l
                    .accept()
                    .await
                    .map(|(stream, _)| vat_network(stream, Side::Client, len)),
            }
        })
        .await;
        match accepted {
            Ok(Ok(network)) => break network,
            Ok(Err(e)) => return Err(setup_failure(format!("accepting the peer: {e}"))),
            Err(_) if Instant::now() < setup_deadline && process_alive(peer.pid()) => {}
            Err(_) => {
                return Err(setup_failure(format!(
                    "the peer did not connect within {:?}{}",
                    options.setup_timeout,
                    peer_epilogue(&mut peer)
                )))
            }
        }
    };
    // The socket file and its directory go as soon as the peer is connected.
    drop(listener);
    drop(private_dir);

    let mut rpc_system = RpcSystem::new(Box::new(network), None);
    let client: echo::Client = rpc_system.bootstrap(Side::Server);
    let disconnector = rpc_system.get_disconnector();
    let system = tokio::task::spawn_local(rpc_system);
    Ok(Connected {
        peer,
        client: Some(client),
        disconnector,
        system,
    })
}

type EchoResponse = Response<echo::send_raw_data_results::Owned>;

/// The measuring side: one `sendRawData` call per round trip, driven on a
/// single-threaded runtime between calls.
struct RpcEndpoint {
    runtime: Runtime,
    local: LocalSet,
    connected: Connected,
    pending: Option<Promise<EchoResponse, capnp::Error>>,
    response: Option<EchoResponse>,
}

impl Endpoint for RpcEndpoint {
    fn send(&mut self, request: &[u8], _deadline: Instant) -> Result<(), Broken> {
        let client = self.connected.client.as_ref().ok_or_else(|| {
            (
                FailureKind::Protocol,
                "the connection was already closed".into(),
            )
        })?;
        let mut call = client.send_raw_data_request();
        call.get().set_data(request);
        // The call goes out when the runtime next runs, while waiting for its reply.
        self.pending = Some(call.send().promise);
        self.response = None;
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Answer, Broken> {
        let pending = self
            .pending
            .take()
            .ok_or_else(|| (FailureKind::Protocol, "no call in flight".into()))?;
        let left = deadline.saturating_duration_since(Instant::now());
        // The timer is made inside the runtime: tokio's timers need its context.
        let answered = self.local.block_on(&self.runtime, async move {
            tokio::time::timeout(left, pending).await
        });
        match answered {
            Ok(Ok(response)) => {
                self.response = Some(response);
                Ok(Answer::Replied)
            }
            Ok(Err(e)) => {
                let kind = match e.kind {
                    capnp::ErrorKind::Disconnected => FailureKind::PeerGone,
                    _ => FailureKind::Protocol,
                };
                Err((kind, format!("the call failed: {e}")))
            }
            Err(_) => Err((FailureKind::Timeout, "no reply before the deadline".into())),
        }
    }

    fn reply(&mut self) -> Result<&[u8], Broken> {
        let response = self
            .response
            .as_ref()
            .ok_or_else(|| (FailureKind::Protocol, "no reply received".into()))?;
        response
            .get()
            .and_then(|r| r.get_data())
            .map_err(|e| (FailureKind::Protocol, format!("reading the reply: {e}")))
    }

    fn peer(&mut self) -> &mut PeerProcess {
        &mut self.connected.peer
    }

    /// Goodbye: disconnect; the peer's RPC system ends and the peer exits.
    fn goodbye(&mut self) -> Result<(), Failure> {
        expect_running_before_goodbye(&mut self.connected.peer, STARTED)?;
        let deadline = Instant::now() + GOODBYE_WITHIN;
        self.response = None;
        self.connected.client = None;
        let Connected {
            disconnector,
            system,
            peer,
            ..
        } = &mut self.connected;
        let disconnected = self.local.block_on(&self.runtime, async {
            tokio::time::timeout(GOODBYE_WITHIN, disconnector).await
        });
        system.abort();
        let said = match disconnected {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(GoodbyeError::Disconnecting(e)),
            Err(_) => Err(GoodbyeError::DisconnectTimedOut),
        };
        expect_clean_exit(peer, said, deadline)
    }
}

/// The peer's side: connect, serve `Echo` until the measuring side disconnects.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), PeerError> {
    let runtime = runtime()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let deadline = Instant::now() + config.idle_timeout;
        let network = loop {
            let connected = match config.address.socket() {
                Some(SocketEndpoint::Tcp(addr)) => {
                    tokio::net::TcpStream::connect(addr).await.map(|stream| {
                        let _ = stream.set_nodelay(true);
                        vat_network(stream, Side::Server, config.limit)
                    })
                }
                Some(SocketEndpoint::Unix(path)) => tokio::net::UnixStream::connect(path)
                    .await
                    .map(|stream| vat_network(stream, Side::Server, config.limit)),
                None => return Err(ConfigError::NotRpc(config.address.clone()).into()),
            };
            match connected {
                Ok(network) => break network,
                Err(e) if Instant::now() >= deadline => return Err(PeerError::ConnectingSocket(e)),
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        };
        let server: echo::Client = capnp_rpc::new_client(EchoServer {
            fault: config.fault,
            delay: config.delay,
            extra_work: config.extra_work,
            calls: Counter::new(0),
            count: config.count,
        });
        RpcSystem::new(Box::new(network), Some(server.client))
            .await
            .map_err(PeerError::Serving)
    })
}

/// The `Echo` object: returns the bytes it was given.
struct EchoServer {
    fault: Option<Fault>,
    delay: Option<Duration>,
    extra_work: Option<u64>,
    calls: Counter<u64>,
    /// The peer's instruction counting: one window on the serving thread from the first
    /// measured call until the connection ends (the RPC system's own work between calls
    /// happens outside the method), divided by the round trips afterwards.
    count: Option<PeerCounting>,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(count) = self.count.filter(|c| self.calls.get() > c.from_message) {
            ipc_matrix_count_window::close(count.label);
        }
    }
}

impl echo::Server for EchoServer {
    fn send_raw_data(
        self: Rc<Self>,
        params: echo::SendRawDataParams,
        mut results: echo::SendRawDataResults,
    ) -> impl std::future::Future<Output = Result<(), capnp::Error>> + 'static {
        let index = self.calls.get();
        self.calls.set(index + 1);
        if let Some(count) = self.count.filter(|c| index == c.from_message) {
            ipc_matrix_count_window::open(count.label);
        }
        let echoed = params.get().and_then(|p| p.get_data()).and_then(|data| {
            if let Some(delay) = self.delay {
                spin_for(delay);
            }
            if let Some(units) = self.extra_work {
                extra_work(units);
            }
            match self.fault.filter(|f| f.at == index) {
                None => {
                    results.get().set_data(data);
                    Ok(())
                }
                Some(fault) => {
                    let mut damaged = data.to_vec();
                    // The Data field goes whole, inside the RPC system's own message.
                    fault
                        .commit(&mut damaged, None)
                        .map_err(|e| capnp::Error::failed(e.to_string()))?;
                    results.get().set_data(&damaged);
                    Ok(())
                }
            }
        });
        std::future::ready(echoed)
    }
}
