//! RPC echo (seed 000's QRemoteObject): the peer serves the Cap'n Proto interface
//! `Echo.sendRawData(data) -> (data)` (`crates/codec/schema/echo_rpc.capnp`) through
//! `capnp-rpc`, over a local socket or TCP; the measuring side calls it once per round
//! trip and compares the returned bytes with what it sent. Both sides run a
//! single-threaded tokio runtime, as capnp-rpc objects are not `Send`.

use crate::context::{RunOptions, Tally};
use crate::failure::{peer_epilogue, round_trip_failure, setup_failure, unclean_stop};
use crate::fault::Fault;
use crate::payload::Payload;
use crate::peer::{commit, spin_for, PeerConfig, PeerRole};
use crate::spawn::PeerProcess;
use crate::verify::compare;
use capnp::message::ReaderOptions;
use capnp_rpc::{rpc_twoparty_capnp::Side, twoparty, RpcSystem};
use futures::io::{BufReader, BufWriter};
use futures::AsyncReadExt;
use ipc_matrix_codec::echo_rpc_capnp::echo;
use ipc_matrix_results::{Failure, FailureKind};
use ipc_matrix_spec::{Cell, TransportKind};
use ipc_matrix_transport::{process_alive, PeerAddress, PrivateDir};
use std::cell::Cell as Counter;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
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

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))
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
    options: &RunOptions,
    peer_cpu: Option<usize>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let runtime = runtime().map_err(setup_failure)?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, call_echo(cell, options, peer_cpu, tally))
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Local(tokio::net::UnixListener),
}

async fn call_echo(
    cell: &Cell,
    options: &RunOptions,
    peer_cpu: Option<usize>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let len = cell.payload_bytes as usize;
    let listen_failure = |e: std::io::Error| setup_failure(format!("opening the listener: {e}"));
    // Holds the socket file of a local listener; removed once the peer is connected.
    let mut private_dir = None;
    let (listener, address) = match cell.transport {
        TransportKind::Tcp => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(listen_failure)?;
            let addr = listener.local_addr().map_err(listen_failure)?;
            (Listener::Tcp(listener), PeerAddress::Tcp { addr })
        }
        TransportKind::Local => {
            let dir = PrivateDir::create().map_err(listen_failure)?;
            let path = dir.path().join("rpc.sock");
            let listener = tokio::net::UnixListener::bind(&path).map_err(listen_failure)?;
            private_dir = Some(dir);
            (Listener::Local(listener), PeerAddress::Local { path })
        }
        other => return Err(setup_failure(format!("rpc does not run over {other}"))),
    };
    let config = options.peer_config(cell, address, len, peer_cpu, PeerRole::RpcServer);
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

    let total = cell.warmup + cell.iterations;
    let mut payload = Payload::new(cell.seed, len);
    for index in 0..total {
        payload.stamp(index);
        let failed = |peer: &mut PeerProcess, kind, what: String| {
            round_trip_failure(peer, (index, total, cell.warmup), kind, what)
        };
        let started = Instant::now();
        let mut request = client.send_raw_data_request();
        request.get().set_data(payload.bytes());
        let response = match tokio::time::timeout(cell.timeout, request.send().promise).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                let kind = match e.kind {
                    capnp::ErrorKind::Disconnected => FailureKind::PeerGone,
                    _ => FailureKind::Protocol,
                };
                return Err(failed(&mut peer, kind, format!("the call failed: {e}")));
            }
            Err(_) => {
                return Err(failed(
                    &mut peer,
                    FailureKind::Timeout,
                    format!("no reply before the deadline (timeout {:?})", cell.timeout),
                ))
            }
        };
        let round_trip = started.elapsed();
        let data = response.get().and_then(|r| r.get_data()).map_err(|e| {
            failed(
                &mut peer,
                FailureKind::Protocol,
                format!("reading the reply: {e}"),
            )
        })?;
        if let Err(mismatch) = compare(payload.bytes(), data) {
            let kind = mismatch.failure_kind();
            return Err(failed(&mut peer, kind, mismatch.to_string()));
        }
        tally.count_round_trip(index, cell.warmup, round_trip);
    }

    // Goodbye: disconnect; the peer's RPC system ends and the peer exits.
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(5);
    let disconnected = tokio::time::timeout(Duration::from_secs(5), disconnector).await;
    system.abort();
    match (disconnected, peer.wait_until(deadline)) {
        (Ok(Ok(())), Some(status)) if status.success() => Ok(()),
        (disconnected, status) => Err(unclean_stop(
            &mut peer,
            match (disconnected, status) {
                (Err(_), _) => "the disconnect did not finish within 5s".to_string(),
                (Ok(Err(e)), _) => format!("disconnecting: {e}"),
                (_, Some(status)) => crate::spawn::describe(status),
                (_, None) => "still running after 5s".into(),
            },
        )),
    }
}

/// The peer's side: connect, serve `Echo` until the measuring side disconnects.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), String> {
    let runtime = runtime()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let deadline = Instant::now() + config.idle_timeout;
        let network = loop {
            let connected = match &config.address {
                PeerAddress::Tcp { addr } => {
                    tokio::net::TcpStream::connect(addr).await.map(|stream| {
                        let _ = stream.set_nodelay(true);
                        vat_network(stream, Side::Server, config.limit)
                    })
                }
                PeerAddress::Local { path } => tokio::net::UnixStream::connect(path)
                    .await
                    .map(|stream| vat_network(stream, Side::Server, config.limit)),
                other => {
                    return Err(format!(
                        "rpc runs over tcp or a local socket, not {other:?}"
                    ))
                }
            };
            match connected {
                Ok(network) => break network,
                Err(e) if Instant::now() >= deadline => return Err(format!("connecting: {e}")),
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        };
        let server: echo::Client = capnp_rpc::new_client(EchoServer {
            fault: config.fault,
            delay: config.delay,
            calls: Counter::new(0),
        });
        RpcSystem::new(Box::new(network), Some(server.client))
            .await
            .map_err(|e| format!("serving: {e}"))
    })
}

/// The `Echo` object: returns the bytes it was given.
struct EchoServer {
    fault: Option<Fault>,
    delay: Option<Duration>,
    calls: Counter<u64>,
}

impl echo::Server for EchoServer {
    fn send_raw_data(
        self: Rc<Self>,
        params: echo::SendRawDataParams,
        mut results: echo::SendRawDataResults,
    ) -> impl std::future::Future<Output = Result<(), capnp::Error>> + 'static {
        let index = self.calls.get();
        self.calls.set(index + 1);
        let echoed = params.get().and_then(|p| p.get_data()).map(|data| {
            if let Some(delay) = self.delay {
                spin_for(delay);
            }
            match self.fault.filter(|f| f.at == index) {
                None => results.get().set_data(data),
                Some(fault) => {
                    let mut damaged = data.to_vec();
                    commit(fault.kind, &mut damaged);
                    results.get().set_data(&damaged);
                }
            }
        });
        std::future::ready(echoed)
    }
}
