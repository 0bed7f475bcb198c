//! The echo scenario (`echo`, `bulk` and `codec` kinds) over a [`Channel`] of the
//! transport crate: the measuring side is an [`Endpoint`] of the shared round-trip loop;
//! the peer echoes every message (decoding and encoding it again for a codec cell).

use crate::codec_work::FRAME_SLACK;
use crate::context::{RunOptions, Tally};
use crate::counting::PeerCounting;
use crate::failure::{
    channel_of, expect_clean_exit, expect_running_before_goodbye, peer_epilogue, setup_failure,
    transport_failure_kind, GoodbyeError, STARTED,
};
use crate::peer::{before_reply, ConfigError, LoanedEchoError, PeerConfig, PeerError};
use crate::round_trip::{self, Answer, Broken, Endpoint, Limits, Requests};
use crate::spawn::{PeerProcess, GOODBYE_WITHIN};
use ipc_matrix_codec::FrameCodec;
use ipc_matrix_results::{Failure, FailureKind, MessagePath};
use ipc_matrix_spec::{Cell, CodecKind};
use ipc_matrix_transport::{listen, Channel, ChannelKind, ListenOptions, Loans, TransportError};
use std::time::Instant;

/// How long a message that follows the goodbye is waited for, once the peer has exited.
const NOTHING_AFTER_GOODBYE: std::time::Duration = std::time::Duration::from_millis(20);
/// Bytes a reply may exceed its request by and still be read (and reported as too long).
const REPLY_SLACK: usize = 1024;
/// What a passing cell over datagrams says of its goodbye ([`CellResult::goodbye`]): a
/// goodbye that reaches a closed socket is seen (the kernel answers "port unreachable"),
/// one left unread in a socket still open is not.
///
/// [`CellResult::goodbye`]: ipc_matrix_results::CellResult::goodbye
const GOODBYE_UNSEEN_OVER_DATAGRAMS: &str =
    "an unread goodbye cannot be seen over datagrams if the peer's socket was still open when it arrived";

/// Runs an `echo` or `bulk` cell (`codec` None: the payload bytes are echoed) or a
/// `codec` cell (sensor frames in that codec's format).
pub(crate) fn echo(
    cell: &Cell,
    (codec, limits): (Option<CodecKind>, Limits),
    options: &RunOptions,
    peer_cpu: Option<usize>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let len = usize::try_from(cell.payload_bytes).map_err(|_| {
        setup_failure(format!(
            "{} bytes do not fit in memory here",
            cell.payload_bytes
        ))
    })?;
    // A frame is its payload plus some structure; echo messages are the payload exactly.
    let max_message = len + codec.map_or(0, |_| FRAME_SLACK);
    let limit = max_message + REPLY_SLACK;
    let kind = channel_of(cell)?;
    let acceptor = listen(
        kind,
        ListenOptions {
            wake: cell.wake,
            max_message,
            bind: options.second_host.as_ref().map(|h| h.host),
        },
    )
    .map_err(|e| setup_failure(format!("opening the {kind} channel: {e}")))?;
    let mut config = options.peer_config(
        cell,
        acceptor.address(),
        limit,
        peer_cpu,
        (),
        limits.timeout,
    );
    config.count = tally.peer_counting(cell.warmup);
    let path = message_path(kind, (cell, codec), &config).map_err(setup_failure)?;
    config.echoes_as_it_receives = path == MessagePath::Streamed;
    config.echoes_from_loans = path == MessagePath::Loaned;
    config.messages = Some(cell.warmup.saturating_add(cell.iterations));
    tally.message_path = Some(path);
    let mut peer = options.start_cell_peer(cell, &config)?;
    let mut channel = acceptor
        .accept(peer.pid(), Instant::now() + options.setup_timeout)
        .map_err(|e| {
            let mut failure = setup_failure(format!("connecting the peer: {e}"));
            failure.reason.push_str(&peer_epilogue(&mut peer));
            failure
        })?;
    let requests = match codec {
        Some(codec) => Requests::frames(codec, cell.seed, len),
        None => Requests::payload(cell.seed, len),
    };
    if path == MessagePath::Loaned {
        // A loan holds a whole message (one shared-memory slot, one iceoryx2 sample).
        let most = channel.loans().map_or(0, |loans| loans.max_loan());
        if max_message > most {
            return Err(setup_failure(format!(
                "the loaned path of {kind} lends at most {most} bytes a message, and this cell's messages are {max_message}; the copying or streamed path carries them"
            )));
        }
        let mut endpoint = LoanedEndpoint {
            channel,
            peer,
            limit,
            staged: false,
        };
        return round_trip::measure(cell, limits, &mut endpoint, requests, tally);
    }
    let lossy = channel.is_lossy();
    let mut endpoint = ChannelEndpoint {
        channel,
        peer,
        reply: Vec::with_capacity(limit),
        limit,
        exchanges: path == MessagePath::Streamed,
    };
    let measured = round_trip::measure(cell, limits, &mut endpoint, requests, tally);
    // The goodbye was checked as far as datagrams let it be: the result says how far.
    if measured.is_ok() && lossy {
        tally.goodbye = Some(GOODBYE_UNSEEN_OVER_DATAGRAMS.to_string());
    }
    measured
}

/// How the cell's round trips move their bytes. A cell that asks for a path (its
/// scenario's `paths`) takes it, or fails at its start when its transport has none such
/// or the run's peer needs whole messages for it (a fault is committed on the loaned
/// path too, in the reply's loan). Otherwise, where nothing needs the whole message
/// first (no codec, no fault, no delay or extra work) and the peer is our own, the
/// transport's own path (the first of [`ChannelKind::message_paths`]):
/// - over shared memory, **streamed**: each round trip is one [`Channel::exchange`], and
///   the peer echoes as it receives, chunk by chunk, slot to slot;
/// - over a transport whose users loan (iceoryx2), **loaned**: the measuring side writes
///   each request into a loan taken before the wait for the previous reply and checks
///   each reply where it lies; the peer echoes from its loans.
///
/// Everything else is **copied** (a send then a receive, each copying): the others'
/// exchange is a send then a receive anyway, so their round trips (and counts) stay as
/// they were.
fn message_path(
    kind: ChannelKind,
    (cell, codec): (&Cell, Option<CodecKind>),
    config: &PeerConfig,
) -> Result<MessagePath, String> {
    if let Some(asked) = cell.work.message_path() {
        if !kind.message_paths().contains(&asked) {
            return Err(format!(
                "the cell asks for the {asked} path, which {kind} has not"
            ));
        }
        let refused = match asked {
            MessagePath::Copied => false,
            MessagePath::Loaned => cell.peer.is_some() || config.works_on_whole_messages(),
            MessagePath::Streamed => cell.peer.is_some() || config.needs_whole_messages(),
        };
        return match refused {
            false => Ok(asked),
            true => Err(format!(
                "the cell asks for the {asked} path, but its peer needs each whole message first (an external peer, or a delay or extra work; on the streamed path a fault too)"
            )),
        };
    }
    if cell.peer.is_some() || codec.is_some() || config.needs_whole_messages() {
        return Ok(MessagePath::Copied);
    }
    Ok(kind.message_paths()[0])
}

/// The measuring side of a channel to an echoing peer, on the copying path (or streamed:
/// one [`Channel::exchange`] a round trip). Its methods are what they were before the
/// loaned path existed, which has an endpoint of its own ([`LoanedEndpoint`]): so the
/// other transports' round trips (and their counts) stay as they were.
struct ChannelEndpoint {
    channel: Box<dyn Channel>,
    peer: PeerProcess,
    reply: Vec<u8>,
    limit: usize,
    /// The peer echoes as it receives ([`PeerConfig::echoes_as_it_receives`]): a round
    /// trip is one [`Channel::exchange`].
    exchanges: bool,
}

impl Endpoint for ChannelEndpoint {
    fn send(&mut self, request: &[u8], deadline: Instant) -> Result<(), Broken> {
        self.channel
            .send(request, deadline)
            .map_err(|e| broken("sending the request", e))
    }

    fn receive(&mut self, deadline: Instant) -> Result<Answer, Broken> {
        match self.channel.recv(&mut self.reply, self.limit, deadline) {
            Ok(()) => Ok(Answer::Replied),
            Err(TransportError::Timeout { .. }) if self.channel.is_lossy() => Ok(Answer::Lost),
            Err(e) => Err(broken("waiting for the reply", e)),
        }
    }

    fn exchange(&mut self, request: &[u8], deadline: Instant) -> Result<Answer, Broken> {
        if !self.exchanges {
            self.send(request, deadline)?;
            return self.receive(deadline);
        }
        self.channel
            .exchange(request, &mut self.reply, self.limit, deadline)
            .map(|()| Answer::Replied)
            .map_err(|e| broken("exchanging the request for its reply", e))
    }

    fn reply(&mut self) -> Result<&[u8], Broken> {
        Ok(&self.reply)
    }

    fn is_lossy(&self) -> bool {
        self.channel.is_lossy()
    }

    fn peer(&mut self) -> &mut PeerProcess {
        &mut self.peer
    }

    fn goodbye(&mut self) -> Result<(), Failure> {
        goodbye(
            self.channel.as_mut(),
            &mut self.peer,
            (&mut self.reply, self.limit),
        )
    }
}

/// The measuring side on the transport's loans ([`MessagePath::Loaned`]): each request
/// written into a loan, the next request's loan taken before the wait for the reply, each
/// reply checked where it lies.
struct LoanedEndpoint {
    channel: Box<dyn Channel>,
    peer: PeerProcess,
    limit: usize,
    /// The open loan holds the next request ([`Endpoint::stage`]).
    staged: bool,
}

impl LoanedEndpoint {
    fn loans(&mut self) -> Result<&mut dyn Loans, Broken> {
        // `_else`: on every round trip, so the error's text is made only when it happens.
        self.channel.loans().ok_or_else(|| {
            (
                FailureKind::Setup,
                "the transport has no loaned path, yet the cell was to loan".into(),
            )
        })
    }
}

impl Endpoint for LoanedEndpoint {
    /// Writes `request` into the loan taken ahead when it has the request's length (else
    /// into a new one), before the clock starts.
    fn stage(&mut self, request: &[u8], deadline: Instant) -> Result<(), Broken> {
        let loans = self.loans()?;
        if loans
            .loaned()
            .is_none_or(|room| room.len() != request.len())
        {
            loans.cancel();
            loans
                .loan(request.len(), deadline)
                .map_err(|e| broken("loaning the request", e))?;
        }
        let room = loans.loaned().expect("a loan is open");
        room.copy_from_slice(request);
        self.staged = true;
        Ok(())
    }

    /// Commits the staged request (staged here if it was not), then takes the next
    /// request's loan, before the wait for this one's reply, as a zero-copy stack's users
    /// do, and releases the previous reply.
    fn send(&mut self, request: &[u8], deadline: Instant) -> Result<(), Broken> {
        if !std::mem::take(&mut self.staged) {
            self.stage(request, deadline)?;
            self.staged = false;
        }
        let loans = self.loans()?;
        loans
            .commit(deadline)
            .map_err(|e| broken("sending the request", e))?;
        loans
            .loan(request.len(), deadline)
            .map_err(|e| broken("loaning the next request", e))?;
        // The previous reply, checked by now, goes back while this request is on its way.
        loans.release();
        Ok(())
    }

    /// Waits for the reply and holds it: its length and bytes are read once the clock has
    /// stopped ([`Endpoint::reply`]).
    fn receive(&mut self, deadline: Instant) -> Result<Answer, Broken> {
        let limit = self.limit;
        match self.loans()?.hold(limit, deadline) {
            Ok(()) => Ok(Answer::Replied),
            Err(e) => Err(broken("waiting for the reply", e)),
        }
    }

    fn reply(&mut self) -> Result<&[u8], Broken> {
        self.loans()?
            .held()
            .map_err(|e| broken("reading the reply where it lies", e))
    }

    fn peer(&mut self) -> &mut PeerProcess {
        &mut self.peer
    }

    fn goodbye(&mut self) -> Result<(), Failure> {
        // The loan taken ahead and the last reply go back: the goodbye and what follows
        // it take the copying path.
        if let Some(loans) = self.channel.loans() {
            loans.cancel();
            loans.release();
        }
        let mut after = Vec::new();
        goodbye(
            self.channel.as_mut(),
            &mut self.peer,
            (&mut after, self.limit),
        )
    }
}

/// An empty message says goodbye; the peer exits cleanly, and nothing follows (a
/// reply to the goodbye, or a second reply to an earlier request).
fn goodbye(
    channel: &mut dyn Channel,
    peer: &mut PeerProcess,
    (reply, limit): (&mut Vec<u8>, usize),
) -> Result<(), Failure> {
    expect_running_before_goodbye(peer, STARTED)?;
    let deadline = Instant::now() + GOODBYE_WITHIN;
    let said = channel
        .send(&[], deadline)
        .map_err(GoodbyeError::NotDelivered);
    expect_clean_exit(peer, said, deadline)?;
    // A datagram's goodbye that reached the peer's port after its socket was closed: the
    // peer stopped after its last reply without reading on. (One left unread in a socket
    // still open, closed after it arrived, leaves no trace: see the result's `goodbye`.)
    if channel.refused_after_close() {
        return Err(Failure {
            kind: FailureKind::Shutdown,
            round_trip: None,
            reason: "the peer exited without reading its goodbye: its socket was closed when the goodbye arrived (the kernel answered port unreachable; a peer must read on until the empty message and exit after it)".into(),
        });
    }
    // The peer is gone: a stream reads its end at once, a datagram socket only what
    // was already sent.
    let after = Instant::now() + NOTHING_AFTER_GOODBYE;
    match channel.recv(reply, limit, after) {
        Ok(()) => Err(Failure {
            kind: FailureKind::Protocol,
            round_trip: None,
            reason: format!(
                "the peer sent a message of {} bytes after its last reply, which no request asked for (a reply to the goodbye, or a second reply)",
                reply.len()
            ),
        }),
        // A stream's end closed with the goodbye still unread in it, or closed before
        // the goodbye reached it (its kernel then reset the connection): the peer
        // exited after its last reply without reading on.
        Err(TransportError::Reset) => Err(Failure {
            kind: FailureKind::Shutdown,
            round_trip: None,
            reason: "the peer exited without reading its goodbye: it closed its connection with the goodbye unread (a peer must read on until the empty message and exit after it)".into(),
        }),
        Err(TransportError::Closed) if channel.reset_after_close() => Err(Failure {
            kind: FailureKind::Shutdown,
            round_trip: None,
            reason: "the peer exited without reading its goodbye: it closed its connection before the goodbye reached it, and its kernel reset the connection (a peer must read on until the empty message and exit after it)".into(),
        }),
        Err(_) => Ok(()),
    }
}

fn broken(doing: &str, e: TransportError) -> Broken {
    (transport_failure_kind(&e), format!("{doing}: {e}"))
}

/// The peer's side: echo every message (decoded and encoded again for a codec cell)
/// until an empty one says goodbye, committing the fault asked for.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), PeerError> {
    let mut channel = config.connect()?;
    if config.echoes_as_it_receives {
        return echo_as_received(config, channel.as_mut());
    }
    if config.echoes_from_loans {
        return echo_from_loans(config, channel.as_mut());
    }
    let idle = config.idle_timeout;
    let mut message = Vec::new();
    for index in 0u64.. {
        // One clock read per message: the reply shares the request's deadline.
        let deadline = Instant::now() + idle;
        PeerCounting::open(config.count, index);
        channel
            .recv(&mut message, config.limit, deadline)
            .map_err(|source| PeerError::Receiving { index, source })?;
        if message.is_empty() {
            return goodbye_after(config, &*channel, index);
        }
        if let Some(codec) = config.codec {
            let frame = codec
                .decode(&message)
                .map_err(|source| PeerError::NotAFrame {
                    what: "message",
                    index,
                    codec,
                    source,
                })?;
            codec.encode(&frame, &mut message);
        }
        before_reply(config);
        if let Some(fault) = config.fault.filter(|f| f.at == index) {
            fault.commit(&mut message, channel.chunk_size())?;
        }
        channel
            .send(&message, deadline)
            .map_err(|source| PeerError::Replying { index, source })?;
        PeerCounting::close(config.count, index);
    }
    Ok(())
}

/// The goodbye came after `echoed` messages: fine when that is what the measuring side
/// sends ([`PeerConfig::messages`]), or when `channel` may lose messages (and the measuring
/// side asks again for a reply that was lost).
fn goodbye_after(config: &PeerConfig, channel: &dyn Channel, echoed: u64) -> Result<(), PeerError> {
    match config.messages {
        Some(sent) if sent != echoed && !channel.is_lossy() => {
            Err(PeerError::GoodbyeAfter { echoed, sent })
        }
        _ => Ok(()),
    }
}

/// The peer's side when it echoes as it receives ([`PeerConfig::echoes_as_it_receives`]):
/// every message goes back through [`Channel::echo`] (over shared memory chunk by chunk,
/// as it arrives) until an empty one says goodbye.
fn echo_as_received(config: &PeerConfig, channel: &mut dyn Channel) -> Result<(), PeerError> {
    if config.needs_whole_messages() {
        return Err(ConfigError::EchoAsReceived.into());
    }
    let idle = config.idle_timeout;
    let mut scratch = Vec::new();
    for index in 0u64.. {
        // One clock read per message: the reply shares the request's deadline.
        let deadline = Instant::now() + idle;
        PeerCounting::open(config.count, index);
        let echoed = channel
            .echo(&mut scratch, config.limit, deadline)
            .map_err(|source| PeerError::Echoing { index, source })?;
        if echoed == 0 {
            return goodbye_after(config, &*channel, index);
        }
        PeerCounting::close(config.count, index);
    }
    Ok(())
}

/// The peer's side when it echoes from loans ([`PeerConfig::echoes_from_loans`]): every
/// message goes back through [`Loans::echo_loaned`] until an empty one says goodbye.
fn echo_from_loans(config: &PeerConfig, channel: &mut dyn Channel) -> Result<(), PeerError> {
    if config.works_on_whole_messages() {
        return Err(ConfigError::EchoFromLoans.into());
    }
    let chunk = channel.chunk_size();
    let loans = channel.loans().ok_or(ConfigError::NoLoans)?;
    let idle = config.idle_timeout;
    for index in 0u64.. {
        // One clock read per message: the reply shares the request's deadline.
        let deadline = Instant::now() + idle;
        PeerCounting::open(config.count, index);
        let echoed = match config.fault.filter(|f| f.at == index) {
            Some(fault) => echo_loaned_with(fault, (loans, chunk), config.limit, deadline)
                .map_err(|source| PeerError::EchoingFromLoans { index, source })?,
            None => loans.echo_loaned(config.limit, deadline).map_err(|e| {
                PeerError::EchoingFromLoans {
                    index,
                    source: e.into(),
                }
            })?,
        };
        if echoed == 0 {
            return goodbye_after(config, &*channel, index);
        }
        PeerCounting::close(config.count, index);
    }
    Ok(())
}

/// One loaned echo with `fault` committed: the request borrowed, the fault applied to a
/// copy of it (a flipped byte at its spot, a byte less, bytes more), and that sent from
/// a loan of its length; its length, 0 for the goodbye.
fn echo_loaned_with(
    fault: crate::fault::Fault,
    (loans, chunk): (&mut dyn Loans, Option<usize>),
    limit: usize,
    deadline: Instant,
) -> Result<usize, LoanedEchoError> {
    let mut message = loans.borrow(limit, deadline)?.to_vec();
    loans.release();
    if message.is_empty() {
        return Ok(0);
    }
    fault.commit(&mut message, chunk)?;
    // A loan an earlier echo took ahead has the request's length, not the spoiled reply's.
    loans.cancel();
    loans
        .loan(message.len(), deadline)
        .map_err(LoanedEchoError::Loaning)?
        .copy_from_slice(&message);
    loans.commit(deadline).map_err(LoanedEchoError::Sending)?;
    Ok(message.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Fault, FaultKind};
    use ipc_matrix_spec::{Echoes, ExternalPeer, Work};
    use ipc_matrix_transport::{PeerAddress, WakeMode};
    use std::time::Duration;

    fn cell(kind: ChannelKind) -> Cell {
        Cell {
            id: format!("bulk::{kind}::64KiB"),
            scenario: "bulk".into(),
            transport: kind.transport(),
            wake: kind.has_wake_modes().then_some(WakeMode::BusyPoll),
            payload_bytes: 64 << 10,
            payload_label: "64KiB".into(),
            iterations: 10,
            warmup: 1,
            seed: 1,
            profile: "quick".into(),
            work: Work::Echo(Echoes::new(Duration::from_secs(5), 0.0)),
            host: Default::default(),
            peer: None,
        }
    }

    fn config(address: PeerAddress) -> PeerConfig {
        PeerConfig {
            address,
            parent: std::process::id(),
            limit: 1 << 20,
            idle_timeout: Duration::from_secs(10),
            fault: None,
            delay: None,
            extra_work: None,
            cpu: None,
            codec: None,
            kind: cell(ChannelKind::Shm).kind(),
            role: serde_json::Value::Null,
            count: None,
            echoes_as_it_receives: false,
            echoes_from_loans: false,
            messages: None,
        }
    }

    /// Only a shared-memory cell with our own peer, where nothing needs the whole message
    /// first, streams; only such an iceoryx2 cell loans; everything else copies.
    #[test]
    fn the_message_path_streams_or_loans_exactly_where_nothing_needs_the_whole_message() {
        let address = PeerAddress::Tcp {
            addr: "127.0.0.1:40000".parse().unwrap(),
        };
        let plain = config(address);
        let path = |kind, codec, config: &PeerConfig| {
            message_path(kind, (&cell(kind), codec), config).unwrap()
        };
        assert_eq!(path(ChannelKind::Shm, None, &plain), MessagePath::Streamed);
        assert_eq!(
            path(ChannelKind::Iceoryx2, None, &plain),
            MessagePath::Loaned
        );
        for kind in [
            ChannelKind::Tcp,
            ChannelKind::Local,
            ChannelKind::Pipe,
            ChannelKind::Udp,
        ] {
            assert_eq!(path(kind, None, &plain), MessagePath::Copied);
        }
        for kind in [ChannelKind::Shm, ChannelKind::Iceoryx2] {
            assert_eq!(
                path(kind, Some(CodecKind::Prost), &plain),
                MessagePath::Copied
            );
            let changed: [fn(&mut PeerConfig); 3] = [
                |c| c.fault = Some(Fault::new(FaultKind::FlipByte, 3)),
                |c| c.delay = Some(Duration::from_micros(5)),
                |c| c.extra_work = Some(10),
            ];
            for change in changed {
                let mut config = plain.clone();
                change(&mut config);
                assert_eq!(path(kind, None, &config), MessagePath::Copied);
            }
            let mut external = cell(kind);
            external.peer = Some(ExternalPeer {
                command: vec!["peer".into()],
            });
            assert_eq!(
                message_path(kind, (&external, None), &plain),
                Ok(MessagePath::Copied)
            );
        }
    }

    /// A cell that asks for a path takes it where its transport has it, a fault
    /// included on the loaned path; it is refused where the transport has none such or
    /// its peer must work on whole messages.
    #[test]
    fn a_cell_that_asks_for_a_path_takes_it_or_is_refused_saying_why() {
        let plain = config(PeerAddress::Tcp {
            addr: "127.0.0.1:40000".parse().unwrap(),
        });
        let asking = |kind: ChannelKind, path: MessagePath| {
            let mut cell = cell(kind);
            cell.work = Work::Echo(Echoes {
                path: Some(path),
                ..Echoes::new(Duration::from_secs(5), 0.0)
            });
            cell
        };
        let mut faulty = plain.clone();
        faulty.fault = Some(Fault::new(FaultKind::FlipByte, 3));
        let mut delayed = plain.clone();
        delayed.delay = Some(Duration::from_micros(5));
        for kind in ChannelKind::ALL {
            for &path in kind.message_paths() {
                let cell = asking(kind, path);
                assert_eq!(message_path(kind, (&cell, None), &plain), Ok(path));
                let with_fault = message_path(kind, (&cell, None), &faulty);
                match path {
                    MessagePath::Streamed => assert!(with_fault.is_err()),
                    _ => assert_eq!(with_fault, Ok(path)),
                }
                let with_delay = message_path(kind, (&cell, None), &delayed);
                match path {
                    MessagePath::Copied => assert_eq!(with_delay, Ok(path)),
                    _ => assert!(with_delay.unwrap_err().contains("whole message")),
                }
            }
        }
        let refused = message_path(
            ChannelKind::Tcp,
            (&asking(ChannelKind::Tcp, MessagePath::Loaned), None),
            &plain,
        );
        assert!(refused.unwrap_err().contains("which tcp has not"));
    }

    /// The peer's side told to echo as it receives: messages of several slots come back
    /// byte for byte through `exchange`, and the goodbye ends it cleanly. Told so with a
    /// fault to commit, it refuses rather than skip the fault.
    #[test]
    fn a_peer_that_echoes_as_it_receives_serves_exchanges_until_the_goodbye() {
        for wake in [WakeMode::Blocking, WakeMode::BusyPoll] {
            let acceptor = listen(
                ChannelKind::Shm,
                ListenOptions {
                    wake: Some(wake),
                    max_message: 4096,
                    bind: None,
                },
            )
            .unwrap();
            let mut config = config(acceptor.address());
            config.echoes_as_it_receives = true;
            let peer = std::thread::spawn(move || serve(&config));
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut channel = acceptor.accept(std::process::id(), deadline).unwrap();
            let mut reply = Vec::new();
            for len in [1, 4096, 4097, 9 * 4096 + 100] {
                let request: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
                channel
                    .exchange(&request, &mut reply, 1 << 20, deadline)
                    .unwrap();
                assert!(reply == request, "{wake:?}: {len} bytes");
            }
            channel
                .exchange(&[], &mut reply, 1 << 20, deadline)
                .unwrap();
            peer.join().unwrap().unwrap();
        }
        let acceptor = listen(
            ChannelKind::Shm,
            ListenOptions {
                wake: Some(WakeMode::Blocking),
                max_message: 4096,
                bind: None,
            },
        )
        .unwrap();
        let mut config = config(acceptor.address());
        config.echoes_as_it_receives = true;
        config.fault = Some(Fault::new(FaultKind::Truncate, 0));
        let refused = serve(&config).unwrap_err();
        assert!(
            matches!(refused, PeerError::Config(ConfigError::EchoAsReceived)),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("told to echo as it receives"),
            "{refused}"
        );
    }
}
