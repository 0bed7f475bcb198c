//! UDP under load (seed 004): client threads, each with its own socket, send a request and
//! wait for its echo (or its deadline) before the next, for the cell's duration; the peer
//! process receives on one socket with several threads and echoes every datagram.
//!
//! Every request starts with a 16-byte stamp (client, request number, a check word) and
//! the rest is the seeded payload; the echo must equal the request byte for byte. An echo
//! that arrives after its request was given up is recognised by its stamp and counted as
//! late. Losses count against `max_loss`; a wrong byte fails the cell at once. A request
//! still waiting when the window closes counts neither way, so the rate is answered
//! requests over the window itself.
//!
//! The peer and the clients are not pinned: a load test uses the machine as it is.

use crate::context::{RunOptions, Tally};
use crate::counting::PeerCounting;
use crate::failure::{peer_epilogue, setup_failure};
use crate::fault::{Fault, FaultKind};
use crate::measure::Recorder;
use crate::payload::pseudo_random_bytes;
use crate::peer::{before_reply, PeerConfig, PeerError};
use crate::second_host::{fragmentation_between, fragmentation_of};
use crate::spawn::{describe, PeerProcess, GOODBYE_WITHIN};
use crate::verify::compare;
use ipc_matrix_results::{Failure, FailureKind, Fragmentation, LoadStats};
use ipc_matrix_spec::{Cell, ChannelKind, Load as LoadSettings, LoadShape};
use ipc_matrix_transport::{listen, Channel, ListenOptions};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Client number, request number and a check word, little-endian, at the front of every
/// request.
const STAMP_BYTES: usize = 16;
const STAMP_CHECK: u32 = 0x1bc0_4d0a;
/// How often a waiting thread looks at the shared stop flag.
const POLL: Duration = Duration::from_millis(50);

/// One client's tally.
#[derive(Default)]
struct ClientTally {
    sent: u64,
    answered: u64,
    timeouts: u64,
    late: u64,
    /// (nanoseconds since the measured window opened, round trip) of answered requests.
    timed: Vec<(u64, Duration)>,
}

/// Runs a `udp-load` cell.
pub(crate) fn udp_load(
    cell: &Cell,
    settings: &LoadSettings,
    options: &RunOptions,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let shape = settings.shape;
    let len = cell.payload_bytes as usize;
    let control = listen(
        ChannelKind::Local,
        ListenOptions {
            wake: None,
            max_message: 64,
            bind: None,
        },
    )
    .map_err(|e| setup_failure(format!("opening the control channel: {e}")))?;
    let warmup_budget = warmup_budget(cell, settings.timeout)?;
    // On a second host, the peer listens on its end of the link, the clients send from
    // theirs; otherwise both are on loopback.
    let link = options.second_host.as_ref();
    let role = Server {
        threads: shape.server_threads,
        bind: link.map(|h| h.peer),
    };
    let mut config =
        options.peer_config(cell, control.address(), len, None, role, settings.timeout);
    // Counted per request: every client thread's and every server thread's.
    config.count = tally.peer_counting(cell.warmup);
    tally.count_per_window = true;
    // The goodbye comes after the whole load, not after one round trip: set-up, every
    // client's warm-up, the window, and one more request's deadline.
    config.idle_timeout = options.setup_timeout + warmup_budget + shape.duration + settings.timeout;
    let mut peer = options.start_peer(&config)?;
    tally.peer_pids.push(peer.pid());
    let setup_deadline = Instant::now() + options.setup_timeout;
    let mut channel = control.accept(peer.pid(), setup_deadline).map_err(|e| {
        setup_failure(format!(
            "connecting the peer's control channel: {e}{}",
            peer_epilogue(&mut peer)
        ))
    })?;
    let mut announced = Vec::new();
    let server = channel
        .recv(&mut announced, 64, setup_deadline)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            String::from_utf8_lossy(&announced)
                .parse::<SocketAddr>()
                .map_err(|e| format!("the peer announced {announced:?}, not an address: {e}"))
        })
        // Load only ever goes to loopback or to the peer's end of the cell's own link.
        .and_then(|server| match link {
            Some(h) if server.ip() != h.peer => Err(format!(
                "the peer announced {server}, not on its end of the link ({})",
                h.peer
            )),
            None if !server.ip().is_loopback() => Err(format!(
                "the peer announced {server}, not a loopback address"
            )),
            _ => Ok(server),
        })
        .map_err(|e| {
            setup_failure(format!(
                "learning the peer's UDP address: {e}{}",
                peer_epilogue(&mut peer)
            ))
        })?;

    // The second host's IP counters from before any datagram: its namespace carries
    // this cell's traffic alone (the control channel is a Unix socket).
    let counters = |peer: &mut PeerProcess| -> Result<Option<Fragmentation>, Failure> {
        link.map(|_| {
            fragmentation_of(peer.pid()).map_err(|e| {
                setup_failure(format!(
                    "reading the second host's IP counters: {e}{}",
                    peer_epilogue(peer)
                ))
            })
        })
        .transpose()
    };
    let before = counters(&mut peer)?;
    let load = Load::new(
        cell,
        settings,
        (server, link.map_or(Ipv4Addr::LOCALHOST, |h| h.host)),
        (options.setup_timeout, warmup_budget),
        tally.counting.as_ref().map(|c| c.measuring_label()),
    );
    let outcome = load.run();
    let after = counters(&mut peer);
    let goodbye = stop_server(channel.as_mut(), &mut peer);
    let (clients, elapsed) = outcome.map_err(|mut failure| {
        failure.reason.push_str(&peer_epilogue(&mut peer));
        failure
    })?;

    let mut timed: Vec<(u64, Duration)> = Vec::new();
    let mut stats = LoadStats {
        sent: 0,
        answered: 0,
        timeouts: 0,
        late_replies: 0,
        success_rate: 0.0,
        transactions_per_sec: 0.0,
        server_received: goodbye.as_ref().ok().copied(),
        fragmentation: None,
    };
    for client in clients {
        stats.sent += client.sent;
        stats.answered += client.answered;
        stats.timeouts += client.timeouts;
        stats.late_replies += client.late;
        timed.extend(client.timed);
    }
    // In the order the requests were sent, so the samples read as a timeline.
    timed.sort_unstable_by_key(|(at, _)| *at);
    tally.recorder = Recorder::new();
    for (_, round_trip) in timed {
        tally.recorder.record(round_trip);
    }
    stats.success_rate = stats.answered as f64 / stats.sent.max(1) as f64;
    stats.transactions_per_sec = stats.answered as f64 / elapsed.as_secs_f64();
    stats.fragmentation = match (before, after?) {
        (Some(before), Some(after)) => Some(fragmentation_between(&before, &after)),
        _ => None,
    };
    tally.measured_time = elapsed;
    tally.lost = stats.timeouts;
    tally.load = Some(stats);

    goodbye.map_err(|reason| Failure {
        kind: FailureKind::Shutdown,
        round_trip: None,
        reason: format!("{reason}{}", peer_epilogue(&mut peer)),
    })?;
    let required = 1.0 - settings.max_loss;
    if stats.answered == 0 || stats.success_rate < required {
        return Err(Failure {
            kind: FailureKind::Timeout,
            round_trip: None,
            reason: format!(
                "{} of {} requests were answered ({:.1} %), {} timed out after {:?}; at least {:.1} % must be (max_loss {})",
                stats.answered,
                stats.sent,
                stats.success_rate * 100.0,
                stats.timeouts,
                settings.timeout,
                required * 100.0,
                settings.max_loss
            ),
        });
    }
    Ok(())
}

/// The longest every client's warm-up may take: each warm-up request its full `timeout`,
/// plus one. Checked: a warm-up count too large for it is a set-up failure, not a hang.
fn warmup_budget(cell: &Cell, timeout: Duration) -> Result<Duration, Failure> {
    u32::try_from(cell.warmup)
        .ok()
        .and_then(|warmup| warmup.checked_add(1))
        .and_then(|requests| timeout.checked_mul(requests))
        .ok_or_else(|| {
            setup_failure(format!(
                "warmup {} x timeout {:?} overflows any deadline",
                cell.warmup, timeout
            ))
        })
}

/// Says goodbye on the control channel; the peer answers with the number of datagrams
/// its threads received, then exits.
fn stop_server(channel: &mut dyn Channel, peer: &mut PeerProcess) -> Result<u64, String> {
    let deadline = Instant::now() + GOODBYE_WITHIN;
    channel
        .send(&[], deadline)
        .map_err(|e| format!("the peer did not take its goodbye: {e}"))?;
    let mut count = Vec::new();
    channel
        .recv(&mut count, 8, deadline)
        .map_err(|e| format!("the peer did not report its count: {e}"))?;
    let received = <[u8; 8]>::try_from(count.as_slice())
        .map(u64::from_le_bytes)
        .map_err(|_| format!("the peer reported {count:?}, not a count"))?;
    match peer.wait_until(deadline) {
        Some(status) if status.success() => Ok(received),
        Some(status) => Err(format!("the peer stopped with {}", describe(status))),
        None => Err(format!(
            "the peer still ran {GOODBYE_WITHIN:?} after its goodbye"
        )),
    }
}

/// The client side of a load cell.
struct Load<'a> {
    cell: &'a Cell,
    shape: LoadShape,
    /// The deadline of one request.
    timeout: Duration,
    server: SocketAddr,
    /// The address the clients' sockets bind: loopback, or this host's end of the link.
    local: Ipv4Addr,
    setup_timeout: Duration,
    /// How long the clients' warm-ups may take, at most ([`warmup_budget`]).
    warmup_budget: Duration,
    /// Set by the first client that fails, so the others stop.
    abort: AtomicBool,
    /// Clients done with their warm-up; the measured window opens when all are.
    ready: AtomicUsize,
    first_failure: Mutex<Option<Failure>>,
    /// The label of the clients' counting windows, when the cell is counted.
    count_label: Option<u64>,
}

impl<'a> Load<'a> {
    fn new(
        cell: &'a Cell,
        settings: &LoadSettings,
        (server, local): (SocketAddr, Ipv4Addr),
        (setup_timeout, warmup_budget): (Duration, Duration),
        count_label: Option<u64>,
    ) -> Self {
        Self {
            count_label,
            warmup_budget,
            cell,
            shape: settings.shape,
            timeout: settings.timeout,
            server,
            local,
            setup_timeout,
            abort: AtomicBool::new(false),
            ready: AtomicUsize::new(0),
            first_failure: Mutex::new(None),
        }
    }

    /// Runs every client to the end; their tallies and the length of the measured window.
    fn run(&self) -> Result<(Vec<ClientTally>, Duration), Failure> {
        let clients = self.shape.clients as usize;
        let (tallies, elapsed) = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|client| scope.spawn(move || self.client(client as u32)))
                .collect();
            // The window opens when every client has warmed up (or one has failed).
            let setup_deadline = Instant::now() + self.setup_timeout + self.warmup_budget;
            while self.ready.load(Ordering::Acquire) < clients
                && !self.abort.load(Ordering::Acquire)
                && Instant::now() < setup_deadline
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            let opened = Instant::now();
            let tallies: Vec<Option<ClientTally>> = handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect();
            (tallies, opened.elapsed())
        });
        if let Some(failure) = self
            .first_failure
            .lock()
            .map(|mut f| f.take())
            .unwrap_or(None)
        {
            return Err(failure);
        }
        let tallies: Option<Vec<ClientTally>> = tallies.into_iter().collect();
        let tallies = tallies.ok_or_else(|| Failure {
            kind: FailureKind::Setup,
            round_trip: None,
            reason: "a client thread panicked".into(),
        })?;
        Ok((tallies, elapsed))
    }

    fn fail(&self, failure: Failure) -> Option<ClientTally> {
        self.abort.store(true, Ordering::Release);
        if let Ok(mut first) = self.first_failure.lock() {
            first.get_or_insert(failure);
        }
        None
    }

    /// One client: warm-up, wait for the others, then requests until the window closes.
    fn client(&self, client: u32) -> Option<ClientTally> {
        let cell = self.cell;
        let failure = |request: u64, kind: FailureKind, what: String| Failure {
            kind,
            round_trip: Some(request),
            reason: format!("client {client}, request {request}: {what}"),
        };
        let socket = match open_client_socket(self.local, self.server) {
            Ok(socket) => socket,
            Err(e) => {
                return self.fail(setup_failure(format!(
                    "client {client}: opening its socket: {e}"
                )))
            }
        };
        let mut request =
            pseudo_random_bytes(cell.seed ^ u64::from(client), cell.payload_bytes as usize);
        let mut reply = vec![0u8; request.len() + 1];
        let mut tally = ClientTally::default();
        let mut window: Option<(Instant, Instant)> = None;
        // The receive timeout last set: changing it is a system call, so only when it
        // differs (near a request's deadline), not once per request.
        let mut read_timeout = Some(POLL);
        for index in 0u64.. {
            if self.abort.load(Ordering::Acquire) {
                return None;
            }
            if index == cell.warmup {
                self.ready.fetch_add(1, Ordering::AcqRel);
                while self.ready.load(Ordering::Acquire) < self.shape.clients as usize {
                    if self.abort.load(Ordering::Acquire) {
                        return None;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                let opened = Instant::now();
                window = Some((opened, opened + self.shape.duration));
            }
            let measured = window.is_some();
            if let Some((_, closes)) = window {
                if Instant::now() >= closes || index - cell.warmup >= cell.iterations {
                    return Some(tally);
                }
            }
            // A measured request's instructions are counted (under QEMU's plugin) from
            // its stamp to its echo or its deadline. A request the window's end cuts off
            // leaves its window open, never closed, so never counted.
            let counted = self.count_label.filter(|_| measured);
            if let Some(label) = counted {
                ipc_matrix_count_window::open(label);
            }
            stamp(&mut request, client, index);
            let started = Instant::now();
            if let Err(e) = socket.send(&request) {
                let kind = gone_or_io(&e);
                return self.fail(failure(index, kind, format!("sending: {e}")));
            }
            if measured {
                tally.sent += 1;
            }
            let deadline = started + self.timeout;
            let answered = loop {
                let now = Instant::now();
                // A request still waiting when the window closes is neither answered
                // nor lost: the window, and so the rate, ends on time.
                if window.is_some_and(|(_, closes)| now >= closes) {
                    tally.sent -= 1;
                    return Some(tally);
                }
                let left = deadline.saturating_duration_since(now);
                if left.is_zero() {
                    break false;
                }
                let wait = Some(left.min(POLL));
                if read_timeout != wait && socket.set_read_timeout(wait).is_ok() {
                    read_timeout = wait;
                }
                match socket.recv(&mut reply) {
                    Ok(n) => match stamp_of(&reply[..n]) {
                        Some((c, i)) if c == client && i < index => {
                            if measured {
                                tally.late += 1;
                            }
                        }
                        _ => {
                            if let Err(mismatch) = compare(&request, &reply[..n]) {
                                let kind = mismatch.failure_kind();
                                return self.fail(failure(index, kind, mismatch.to_string()));
                            }
                            break true;
                        }
                    },
                    Err(e) if nothing_yet(&e) => {
                        if self.abort.load(Ordering::Acquire) {
                            return None;
                        }
                    }
                    Err(e) => {
                        let kind = gone_or_io(&e);
                        return self.fail(failure(
                            index,
                            kind,
                            format!("waiting for the echo: {e}"),
                        ));
                    }
                }
            };
            let round_trip = started.elapsed();
            if let Some(label) = counted {
                ipc_matrix_count_window::close(label);
            }
            match (measured, answered, window) {
                (true, true, Some((opened, _))) => {
                    tally.answered += 1;
                    let at = started.saturating_duration_since(opened).as_nanos() as u64;
                    tally.timed.push((at, round_trip));
                }
                (true, false, _) => tally.timeouts += 1,
                _ => {}
            }
        }
        Some(tally)
    }
}

/// A receive that ended without a datagram: its timeout passed, or a signal came.
fn nothing_yet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn gone_or_io(e: &io::Error) -> FailureKind {
    if e.kind() == io::ErrorKind::ConnectionRefused {
        FailureKind::PeerGone
    } else {
        FailureKind::Protocol
    }
}

fn open_client_socket(local: Ipv4Addr, server: SocketAddr) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind((local, 0))?;
    socket.connect(server)?;
    // Every receive is bounded from the start; the client shortens this near a deadline.
    socket.set_read_timeout(Some(POLL))?;
    Ok(socket)
}

fn stamp(request: &mut [u8], client: u32, index: u64) {
    request[..4].copy_from_slice(&client.to_le_bytes());
    request[4..12].copy_from_slice(&index.to_le_bytes());
    request[12..STAMP_BYTES].copy_from_slice(&STAMP_CHECK.to_le_bytes());
}

/// The client and request number a datagram carries, if it carries a whole stamp.
fn stamp_of(datagram: &[u8]) -> Option<(u32, u64)> {
    let stamp = datagram.get(..STAMP_BYTES)?;
    let check = u32::from_le_bytes(stamp[12..16].try_into().ok()?);
    (check == STAMP_CHECK).then(|| {
        (
            u32::from_le_bytes(stamp[..4].try_into().expect("4 bytes")),
            u64::from_le_bytes(stamp[4..12].try_into().expect("8 bytes")),
        )
    })
}

/// The peer's part: it echoes datagrams with `threads` receiving threads; the channel it
/// connects is the control channel.
#[derive(Debug, Serialize, Deserialize)]
struct Server {
    threads: u32,
    /// The address to listen on: the peer's end of the link to a second host; loopback
    /// when `None`.
    #[serde(default)]
    bind: Option<Ipv4Addr>,
}

/// The peer's side: announce the socket's address on the control channel, echo with the
/// role's threads until the goodbye, then report how many datagrams came in.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), PeerError> {
    let mut control = config.connect()?;
    let Server { threads, bind } = config.role()?;
    let idle = config.idle_timeout;
    let on = bind.unwrap_or(Ipv4Addr::LOCALHOST);
    let socket = UdpSocket::bind((on, 0)).map_err(|source| PeerError::Binding { on, source })?;
    let address = socket.local_addr().map_err(PeerError::LocalAddress)?;
    socket
        .set_read_timeout(Some(POLL))
        .map_err(PeerError::ReceiveTimeout)?;
    control
        .send(address.to_string().as_bytes(), Instant::now() + idle)
        .map_err(|source| PeerError::Announcing { address, source })?;
    let state = ServerState::default();
    let outcome = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| echo_datagrams(&socket, config, &state)))
            .collect();
        let mut goodbye = Vec::new();
        let heard = control.recv(&mut goodbye, 0, Instant::now() + idle);
        state.stop.store(true, Ordering::Release);
        let worker_errors: Vec<PeerError> = workers
            .into_iter()
            .filter_map(|w| w.join().unwrap_or(Err(PeerError::ThreadPanicked)).err())
            .collect();
        heard.map_err(PeerError::AwaitingGoodbye).and_then(|()| {
            match worker_errors.into_iter().next() {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })
    });
    outcome?;
    control
        .send(
            &state.received.load(Ordering::Acquire).to_le_bytes(),
            Instant::now() + idle,
        )
        .map_err(PeerError::ReportingCount)
}

/// What the peer's threads share.
#[derive(Default)]
struct ServerState {
    /// Set when the goodbye came.
    stop: AtomicBool,
    /// Datagrams received by all threads.
    received: AtomicU64,
    /// Set by a `stall` fault: no thread replies any more.
    stalled: AtomicBool,
}

fn echo_datagrams(
    socket: &UdpSocket,
    config: &PeerConfig,
    state: &ServerState,
) -> Result<(), PeerError> {
    let (limit, fault) = (config.limit, config.fault);
    let ServerState {
        stop,
        received,
        stalled,
    } = state;
    let mut datagram = vec![0u8; limit + 1];
    while !stop.load(Ordering::Acquire) {
        let (n, from) = match socket.recv_from(&mut datagram) {
            Ok(got) => got,
            Err(e) if nothing_yet(&e) => continue,
            Err(e) => return Err(PeerError::ReceivingDatagram(e)),
        };
        let index = received.fetch_add(1, Ordering::AcqRel);
        if stalled.load(Ordering::Acquire) {
            continue;
        }
        // Counted from here to the echo sent, for measured requests (by their stamp).
        let counted = config
            .count
            .zip(stamp_of(&datagram[..n]))
            .map(|(count, (_, request))| (count, request));
        if let Some((count, request)) = counted {
            PeerCounting::open(Some(count), request);
        }
        let mut damaged;
        let reply: &[u8] = match fault.filter(|f| f.at == index) {
            None => &datagram[..n],
            // Several threads reply: a stall stops them all, rather than blocking one.
            Some(Fault {
                kind: FaultKind::Stall,
                ..
            }) => {
                stalled.store(true, Ordering::Release);
                continue;
            }
            Some(fault) => {
                damaged = datagram[..n].to_vec();
                // A datagram goes whole.
                fault.commit(&mut damaged, None)?;
                &damaged
            }
        };
        before_reply(config);
        // A full send buffer loses the echo, as the network would; the client times out.
        let _ = socket.send_to(reply, from);
        if let Some((count, request)) = counted {
            PeerCounting::close(Some(count), request);
        }
    }
    Ok(())
}
