//! The `Channel` contract, each clause written once as a check that runs against any
//! transport. A `Subject` is one transport in one wake mode; `main.rs` makes one test per
//! subject and check.
//!
//! UDP is lossy, and some clauses mean something else there; each check says how it
//! adapts: a reply may be lost (resend, or count it lost, never accept a wrong one), and a
//! send never waits for the reader (the datagram is dropped at the receiving socket).

use super::peer::{
    CHUNKED, CHUNKED_SEED, LATE_BY, LIE_ANNOUNCED, LIE_LIMIT, LIE_SEED, ORDERED, SLOT,
};
use super::support::{
    bytes, compare, exchange_limit_of, index_of, limit_of, ordered, HandMadeSegment, Peer,
    EXCHANGE_LIMIT, LIMIT, OP, PROMPT, SETUP,
};
use crate::address::PeerAddress;
use crate::contract::{Channel, ListenOptions};
use crate::error::TransportError;
use crate::open::listen;
use ipc_matrix_spec::{ChannelKind, MessagePath, StackName, WakeMode};
use std::time::{Duration, Instant};

/// One transport in one wake mode, and the largest messages it is checked with.
#[derive(Debug, Clone, Copy)]
pub struct Subject {
    pub kind: ChannelKind,
    pub wake: Option<WakeMode>,
    /// The largest message of most checks.
    limit: usize,
    /// The largest message of the exchange checks.
    exchange_limit: usize,
}

impl Subject {
    /// A built-in transport, checked up to its limits (`support::limit_of`).
    fn built_in(kind: ChannelKind, wake: Option<WakeMode>) -> Self {
        Self {
            kind,
            wake,
            limit: limit_of(kind),
            exchange_limit: exchange_limit_of(kind),
        }
    }

    /// `shm-blocking`, `shm-busy`, or the transport's name.
    pub fn name(self) -> String {
        match self.wake {
            Some(WakeMode::Blocking) => format!("{}-blocking", self.kind),
            Some(WakeMode::BusyPoll) => format!("{}-busy", self.kind),
            None => self.kind.to_string(),
        }
    }

    fn lossy(self) -> bool {
        self.kind == ChannelKind::Udp
    }

    fn limit(self) -> usize {
        self.limit
    }

    /// A user's stack ([`crate::Stack`]), whose framing, if any, is its own.
    fn is_stack(self) -> bool {
        matches!(self.kind, ChannelKind::Stack(_))
    }

    /// A byte stream that this crate frames, which a peer can lie on by writing frames by
    /// hand.
    fn framed_here(self) -> bool {
        self.kind.is_byte_stream() && !self.is_stack()
    }
}

/// Every built-in transport and wake mode the contract is checked for: every channel,
/// those that have wake modes (shared memory) in each of them.
pub fn subjects() -> Vec<Subject> {
    let mut subjects = Vec::new();
    for kind in ChannelKind::ALL {
        for wake in wake_modes(kind) {
            subjects.push(Subject::built_in(kind, wake));
        }
    }
    subjects
}

/// The subjects of the registered stack `name`: one per wake mode where it has them,
/// checked with messages up to its [`crate::Stack::max_message`] (at most the built-in
/// transports' limits).
pub fn stack_subjects(name: StackName) -> Result<Vec<Subject>, TransportError> {
    let kind = ChannelKind::Stack(name);
    let max = crate::stack::max_message_of(name)?.unwrap_or(usize::MAX);
    if max <= LIE_LIMIT {
        return Err(TransportError::Stack(format!(
            "stack `{name}` carries messages of at most {max} bytes; the conformance suite needs more than {LIE_LIMIT}"
        )));
    }
    Ok(wake_modes(kind)
        .into_iter()
        .map(|wake| Subject {
            kind,
            wake,
            limit: LIMIT.min(max),
            exchange_limit: EXCHANGE_LIMIT.min(max),
        })
        .collect())
}

/// Each wake mode of `kind`, or none.
fn wake_modes(kind: ChannelKind) -> Vec<Option<WakeMode>> {
    if kind.has_wake_modes() {
        vec![Some(WakeMode::Blocking), Some(WakeMode::BusyPoll)]
    } else {
        vec![None]
    }
}

pub struct Check {
    pub name: &'static str,
    pub applies: fn(Subject) -> bool,
    pub run: fn(Subject) -> Result<(), String>,
}

fn always(_: Subject) -> bool {
    true
}

fn shm_only(subject: Subject) -> bool {
    subject.kind == ChannelKind::Shm
}

/// Transports whose messages may be larger than a datagram.
fn not_datagrams(subject: Subject) -> bool {
    !subject.lossy()
}

/// Transports that carry the chunk-boundary check's largest message (four slots).
fn carries_four_slots(subject: Subject) -> bool {
    !subject.lossy() && subject.limit() >= CHUNKED[CHUNKED.len() - 1]
}

pub const CHECKS: &[Check] = &[
    Check {
        name: "sizes",
        applies: always,
        run: sizes,
    },
    Check {
        name: "chunk-boundaries",
        applies: carries_four_slots,
        run: chunk_boundaries,
    },
    Check {
        name: "exchange-echo",
        applies: not_datagrams,
        run: exchange_echo,
    },
    Check {
        name: "exchange-with-a-late-peer",
        applies: not_datagrams,
        run: exchange_with_a_late_peer,
    },
    Check {
        name: "ordering",
        applies: always,
        run: ordering,
    },
    Check {
        name: "receive-deadline",
        applies: always,
        run: receive_deadline,
    },
    Check {
        name: "send-deadline",
        applies: always,
        run: send_deadline,
    },
    Check {
        name: "peer-death",
        applies: always,
        run: peer_death,
    },
    Check {
        name: "oversized-refused",
        applies: always,
        run: oversized_refused,
    },
    Check {
        name: "hostile-header-refused",
        applies: shm_only,
        run: hostile_header_refused,
    },
    Check {
        name: "loans-offered-as-listed",
        applies: always,
        run: loans_offered_as_listed,
    },
    Check {
        name: "loaned-echo",
        applies: has_loans,
        run: loaned_echo,
    },
    Check {
        name: "loaned-and-copying-paths-meet",
        applies: has_loans,
        run: loaned_and_copying_paths_meet,
    },
    Check {
        name: "loans-refuse-misuse",
        applies: has_loans,
        run: loans_refuse_misuse,
    },
];

/// The transports that list the loaned path ([`crate::Loans`]) among their message
/// paths.
fn has_loans(subject: Subject) -> bool {
    subject.kind.message_paths().contains(&MessagePath::Loaned)
}

/// The measuring side of a channel of `subject` to a new peer playing `role`.
fn open(subject: Subject, role: &str) -> Result<(Box<dyn Channel>, Peer), String> {
    open_for(subject, role, subject.limit())
}

/// [`open`] for messages of up to `max_message` bytes (shared memory: still slots of at
/// most 1 MiB).
fn open_for(
    subject: Subject,
    role: &str,
    max_message: usize,
) -> Result<(Box<dyn Channel>, Peer), String> {
    let acceptor = listen(
        subject.kind,
        ListenOptions {
            wake: subject.wake,
            max_message,
            bind: None,
        },
    )
    .map_err(|e| format!("listening: {e}"))?;
    let mut peer = Peer::spawn(role, &acceptor.address(), max_message)?;
    match acceptor.accept(peer.pid(), Instant::now() + SETUP) {
        Ok(channel) => Ok((channel, peer)),
        Err(e) => Err(format!(
            "accepting the peer: {e}; its stderr: {}",
            peer.finish()
        )),
    }
}

/// Adds the peer's stderr to a failure.
fn with_stderr(peer: &mut Peer) -> impl FnOnce(String) -> String + '_ {
    move |e| format!("{e}; the peer's stderr: {:?}", peer.finish())
}

/// Message sizes from 0 to the limit: around the 8-byte frame header and 64-byte lines,
/// around one shared-memory slot (1 MiB for a channel sized for LIMIT: exactly one slot
/// and one byte more, which streams as two chunks), several slots, and the limit itself.
fn sizes_for(limit: usize) -> Vec<usize> {
    const SLOT: usize = 1 << 20;
    let mut sizes = vec![
        0,
        1,
        2,
        7,
        8,
        9,
        63,
        64,
        65,
        4095,
        4096,
        4097,
        65_507,
        65_535,
        65_536,
        65_537,
        SLOT - 1,
        SLOT,
        SLOT + 1,
        3 * SLOT + 17,
        limit - 1,
        limit,
    ];
    sizes.retain(|&s| s <= limit);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Every size from 0 to the limit comes back whole and unchanged. UDP: a reply that does
/// not come within a second is asked for again (at most 3 times); a late reply to an
/// earlier message is skipped; any other reply fails.
fn sizes(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "echo")?;
    let limit = subject.limit();
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let mut reply = Vec::new();
    for (i, &len) in sizes_for(limit).iter().enumerate() {
        let message = bytes(0x5eed_0000 + i as u64, len);
        let what = format!("the {len}-byte message");
        let mut tries = 0;
        'resend: loop {
            tries += 1;
            let wait = if subject.lossy() {
                Duration::from_secs(1)
            } else {
                OP
            };
            let deadline = Instant::now() + wait;
            channel
                .send(&message, Instant::now() + OP)
                .map_err(|e| format!("sending {what}: {e}"))
                .map_err(with_stderr(&mut peer))?;
            loop {
                match channel.recv(&mut reply, limit, deadline) {
                    Ok(()) if subject.lossy() && reply != message && sent.contains(&reply) => {}
                    Ok(()) => break 'resend,
                    Err(TransportError::Timeout { .. }) if subject.lossy() && tries < 3 => {
                        continue 'resend
                    }
                    Err(e) => {
                        return Err(format!("the reply to {what}: {e}"))
                            .map_err(with_stderr(&mut peer))
                    }
                }
            }
        }
        compare(&format!("the reply to {what}"), &message, &reply)?;
        if subject.lossy() {
            sent.push(message);
        }
    }
    Ok(())
}

/// Messages of one byte either side of every shared-memory slot boundary, and of four
/// whole slots, arrive byte for byte in each direction, each checked by its receiver
/// alone (an echo could hide a fault that the two directions share): the peer checks the
/// ones it receives and says so, then sends them back as its own messages, which this
/// side checks. Over shared memory these messages stream through in 2 to 4 chunks of a
/// slot each (and the channel says so: `chunk_size`); over a stream they take many reads.
fn chunk_boundaries(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "chunks")?;
    // Shared memory says it cuts messages into slots; streams cut where the kernel does.
    // A user's stack cuts where it does.
    let chunk = (subject.kind == ChannelKind::Shm).then_some(SLOT);
    if !subject.is_stack() && channel.chunk_size() != chunk {
        return Err(format!(
            "the channel's chunk size is {:?}, not {chunk:?}",
            channel.chunk_size()
        ));
    }
    let limit = subject.limit();
    let message = |i: usize| bytes(CHUNKED_SEED + i as u64, CHUNKED[i]);
    for (i, &len) in CHUNKED.iter().enumerate() {
        channel
            .send(&message(i), Instant::now() + OP)
            .map_err(|e| format!("sending the {len}-byte message: {e}"))
            .map_err(with_stderr(&mut peer))?;
    }
    let mut buf = Vec::new();
    channel
        .recv(&mut buf, limit, Instant::now() + OP)
        .map_err(|e| format!("the peer's verdict: {e}"))
        .map_err(with_stderr(&mut peer))?;
    if buf != b"ok" {
        return Err(String::from_utf8_lossy(&buf).into_owned());
    }
    for (i, &len) in CHUNKED.iter().enumerate() {
        channel
            .recv(&mut buf, limit, Instant::now() + OP)
            .map_err(|e| format!("receiving the {len}-byte message: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(&format!("the peer's {len}-byte message"), &message(i), &buf)?;
    }
    Ok(())
}

/// `exchange` with a peer that `echo`es, from 1 byte to more than a shared-memory ring
/// (four and a half slots): every reply is its request byte for byte. The goodbye (an
/// empty exchange) leaves the reply empty, is not sent back, and the peer exits cleanly
/// on it. Over shared memory both sides are the transport's own (the request and its
/// reply stream through at once, chunk by chunk); elsewhere they are the contract's
/// defaults (send then recv; recv then send). UDP: not checked, a datagram's reply may be
/// lost (the defaults are the same as a stream's).
fn exchange_echo(subject: Subject) -> Result<(), String> {
    let exchange_limit = subject.exchange_limit;
    let (mut channel, mut peer) = open_for(subject, "echoer", exchange_limit)?;
    let mut sizes = sizes_for(subject.limit());
    sizes.retain(|&len| len > 0);
    if !sizes.contains(&exchange_limit) {
        sizes.push(exchange_limit);
    }
    let mut reply = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let request = bytes(0xec40_0000 + i as u64, len);
        channel
            .exchange(&request, &mut reply, exchange_limit, Instant::now() + OP)
            .map_err(|e| format!("exchanging the {len}-byte message: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the reply to the {len}-byte message"),
            &request,
            &reply,
        )?;
    }
    channel
        .exchange(&[], &mut reply, exchange_limit, Instant::now() + OP)
        .map_err(|e| format!("the goodbye: {e}"))
        .map_err(with_stderr(&mut peer))?;
    if !reply.is_empty() {
        return Err(format!("the goodbye left a {}-byte reply", reply.len()));
    }
    exits_cleanly_on_the_goodbye(&mut peer, "the peer")?;
    let after = Instant::now() + Duration::from_millis(100);
    match channel.recv(&mut reply, exchange_limit, after) {
        Ok(()) => Err(format!(
            "a {}-byte message after the goodbye: it was sent back",
            reply.len()
        )),
        Err(_) => Ok(()),
    }
}

/// `exchange` with a peer that receives the whole request before it replies, and starts
/// late (LATE_BY), with a request larger than a shared-memory ring. Shared memory takes
/// reply chunks while it sends, which only a peer that echoes as it receives makes safe:
/// with this one it must not hang, but fail with a Timeout at its deadline once the
/// request's slots are full and no reply chunk comes. Every other transport sends the
/// whole request, then receives (the default), and gets its reply. A user's stack may do
/// either: its reply must be the request, or its exchange a Timeout at the deadline.
fn exchange_with_a_late_peer(subject: Subject) -> Result<(), String> {
    let limit = subject.exchange_limit;
    let (mut channel, mut peer) = open_for(subject, "late-echo", limit)?;
    let request = bytes(0x1a7e, limit);
    let mut reply = Vec::new();
    if subject.kind != ChannelKind::Shm && !subject.is_stack() {
        channel
            .exchange(&request, &mut reply, limit, Instant::now() + OP)
            .map_err(|e| format!("exchanging with the late peer: {e}"))
            .map_err(with_stderr(&mut peer))?;
        return compare("the late peer's reply", &request, &reply);
    }
    let wait = LATE_BY * 3;
    let start = Instant::now();
    let result = channel.exchange(&request, &mut reply, limit, start + wait);
    let took = start.elapsed();
    match result {
        Err(TransportError::Timeout { .. }) if took >= wait && took < wait + PROMPT => Ok(()),
        Ok(()) if subject.is_stack() && took < wait + PROMPT => {
            compare("the late peer's reply", &request, &reply)
        }
        other => Err(format!(
            "expected a Timeout at the deadline, {wait:?} away; got {other:?} after {took:?}"
        ))
        .map_err(with_stderr(&mut peer)),
    }
}

/// 10,000 messages arrive in the order sent, each whole, both ways: the peer checks the
/// ones it receives (sent back to back, without waiting for replies), then sends as many.
/// UDP: back to back would overflow the receiving socket by design, so each message is a
/// round trip; a lost reply is counted (at most 10), and the replies that arrive must carry
/// strictly increasing indices and exactly their message's bytes.
fn ordering(subject: Subject) -> Result<(), String> {
    if subject.lossy() {
        return ordering_lossy(subject);
    }
    let (mut channel, mut peer) = open(subject, "sink-source")?;
    let limit = subject.limit();
    for i in 0..ORDERED {
        channel
            .send(&ordered(i), Instant::now() + OP)
            .map_err(|e| format!("sending message {i}: {e}"))
            .map_err(with_stderr(&mut peer))?;
    }
    let mut buf = Vec::new();
    channel
        .recv(&mut buf, limit, Instant::now() + OP)
        .map_err(|e| format!("the peer's verdict: {e}"))
        .map_err(with_stderr(&mut peer))?;
    if buf != b"ok" {
        return Err(format!(
            "the peer received: {}",
            String::from_utf8_lossy(&buf)
        ));
    }
    for i in 0..ORDERED {
        channel
            .recv(&mut buf, limit, Instant::now() + OP)
            .map_err(|e| format!("receiving message {i}: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(&format!("message {i}"), &ordered(i), &buf)?;
    }
    Ok(())
}

fn ordering_lossy(subject: Subject) -> Result<(), String> {
    const MAX_LOST: u64 = 10;
    let (mut channel, mut peer) = open(subject, "echo")?;
    let limit = subject.limit();
    let mut last: Option<u64> = None;
    let mut lost = 0;
    let mut buf = Vec::new();
    for i in 0..ORDERED {
        channel
            .send(&ordered(i), Instant::now() + OP)
            .map_err(|e| format!("sending message {i}: {e}"))
            .map_err(with_stderr(&mut peer))?;
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            match channel.recv(&mut buf, limit, deadline) {
                Ok(()) => {
                    let j = index_of(&buf).ok_or("a reply shorter than an index")?;
                    if j > i || last.is_some_and(|l| j <= l) {
                        return Err(format!(
                            "round trip {i}: a reply to message {j} after one to {last:?}"
                        ));
                    }
                    compare(&format!("the reply to message {j}"), &ordered(j), &buf)?;
                    last = Some(j);
                    if j == i {
                        break;
                    }
                }
                Err(TransportError::Timeout { .. }) => {
                    lost += 1;
                    if lost > MAX_LOST {
                        return Err(format!("{lost} replies lost by round trip {i}"));
                    }
                    break;
                }
                Err(e) => {
                    return Err(format!("round trip {i}: {e}")).map_err(with_stderr(&mut peer))
                }
            }
        }
    }
    Ok(())
}

/// A receive with nothing coming returns Timeout at its deadline, promptly.
fn receive_deadline(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "stall")?;
    let wait = Duration::from_millis(200);
    let start = Instant::now();
    let result = channel.recv(&mut Vec::new(), subject.limit(), start + wait);
    let took = start.elapsed();
    match result {
        Err(TransportError::Timeout { .. }) if took >= wait && took < wait + PROMPT => Ok(()),
        Err(TransportError::Timeout { .. }) => Err(format!(
            "Timeout after {took:?}, for a deadline {wait:?} away"
        )),
        other => Err(format!("expected Timeout, got {other:?} after {took:?}"))
            .map_err(with_stderr(&mut peer)),
    }
}

/// A send into a channel whose reader stalls returns Timeout at its deadline once the
/// channel is full (after at most 256 MiB). UDP: the reader's socket drops what it cannot
/// hold, so no send waits: each must return by its deadline, and none may be a Timeout.
fn send_deadline(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "stall")?;
    let wait = Duration::from_millis(300);
    if subject.lossy() {
        let datagram = bytes(0xda7a, subject.limit());
        for i in 0..200 {
            let start = Instant::now();
            let result = channel.send(&datagram, start + wait);
            let took = start.elapsed();
            if result.is_err() || took > wait + PROMPT {
                return Err(format!("datagram {i}: {result:?} after {took:?}"));
            }
        }
        return Ok(());
    }
    let message = bytes(0xf111, subject.limit().min(256 << 10));
    for i in 0..(256 << 20) / message.len() {
        let start = Instant::now();
        let result = channel.send(&message, start + wait);
        let took = start.elapsed();
        match result {
            Ok(()) => {}
            Err(TransportError::Timeout { .. }) if took >= wait && took < wait + PROMPT => {
                return Ok(())
            }
            other => {
                return Err(format!(
                    "send {i}: expected Ok or Timeout, got {other:?} after {took:?}"
                ))
                .map_err(with_stderr(&mut peer))
            }
        }
    }
    Err("256 MiB went into a channel nobody reads".into())
}

/// When the peer dies (SIGKILL, no goodbye), a receive says so at once, however far its
/// deadline, and sends fail within PROMPT too. UDP: the dead peer's port is noticed
/// through the ICMP error a datagram sent to it causes, so each probe is a send and
/// then a short receive.
fn peer_death(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "die")?;
    channel
        .send(b"die", Instant::now() + OP)
        .map_err(|e| format!("sending die: {e}"))?;
    let start = Instant::now();
    let gone = |r: &Result<(), TransportError>| matches!(r, Err(e) if e.is_closed() || matches!(e, TransportError::PeerGone(_)));
    let mut buf = Vec::new();
    if subject.lossy() {
        loop {
            let _ = channel.send(b"are you there", Instant::now() + OP);
            let result = channel.recv(
                &mut buf,
                subject.limit(),
                Instant::now() + Duration::from_millis(50),
            );
            if gone(&result) {
                break;
            }
            if !matches!(result, Err(TransportError::Timeout { .. })) || start.elapsed() > PROMPT {
                return Err(format!(
                    "after the peer's death: {result:?} after {:?}",
                    start.elapsed()
                ));
            }
        }
    } else {
        let result = channel.recv(&mut buf, subject.limit(), Instant::now() + OP);
        let took = start.elapsed();
        if !gone(&result) || took > PROMPT {
            return Err(format!(
                "a receive after the peer's death: {result:?} after {took:?}"
            ));
        }
        let message = bytes(0xdead, subject.limit().min(64 << 10));
        let sending = Instant::now();
        loop {
            let result = channel.send(&message, Instant::now() + OP);
            if gone(&result) {
                break;
            }
            if result.is_err() || sending.elapsed() > PROMPT {
                return Err(format!(
                    "sends after the peer's death: {result:?} after {:?}",
                    sending.elapsed()
                ));
            }
        }
    }
    use std::os::unix::process::ExitStatusExt;
    match peer.wait_exit(PROMPT) {
        Some(status) if status.signal() == Some(libc::SIGKILL) => Ok(()),
        other => Err(format!(
            "the peer was to die of SIGKILL: {other:?}, {}",
            peer.finish()
        )),
    }
}

/// A message longer than the receiver's limit is refused from its announced length,
/// before anything is allocated for it (the buffer stays empty), while one of exactly the
/// limit is received. Stream transports: the peer writes frames by hand and announces
/// 2^60 bytes. Shared memory and UDP: the peer sends limit + 1 bytes.
fn oversized_refused(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "liar")?;
    let mut buf = Vec::new();
    channel
        .recv(&mut buf, LIE_LIMIT, Instant::now() + OP)
        .map_err(|e| format!("the message of exactly the limit: {e}"))
        .map_err(with_stderr(&mut peer))?;
    compare(
        "the message of exactly the limit",
        &bytes(LIE_SEED, LIE_LIMIT),
        &buf,
    )?;
    // A stream reports the length its header announced; a message transport, the
    // length of the message it refused.
    let expected = if subject.framed_here() {
        LIE_ANNOUNCED
    } else {
        LIE_LIMIT as u64 + 1
    };
    let mut fresh = Vec::new();
    match channel.recv(&mut fresh, LIE_LIMIT, Instant::now() + OP) {
        Err(TransportError::TooLarge { announced, limit })
            if announced == expected && limit == LIE_LIMIT && fresh.capacity() == 0 =>
        {
            Ok(())
        }
        other => Err(format!(
            "expected TooLarge {{ announced: {expected}, limit: {LIE_LIMIT} }} with nothing \
             allocated, got {other:?} with {} bytes allocated",
            fresh.capacity()
        ))
        .map_err(with_stderr(&mut peer)),
    }
}

/// A peer attaching to a segment whose header does not fit it refuses with an error that
/// says why and exits; it does not crash. The header of the reported defect (a 4096-byte
/// segment, 2^31 slots of 4294967280 bytes: 64-bit sizes that wrap around to 4096) is the
/// first case; a header that fits is accepted.
fn hostile_header_refused(subject: Subject) -> Result<(), String> {
    let cases: [(usize, u32, u32, Option<&str>); 5] = [
        (4096, 4_294_967_280, 1 << 31, Some("overflows")),
        (8192, u32::MAX, u32::MAX, Some("overflows")),
        (
            4096,
            64,
            1,
            Some("4352 bytes, but the mapping is 4096 bytes"),
        ),
        (
            4351,
            64,
            1,
            Some("4352 bytes, but the mapping is 4351 bytes"),
        ),
        (4352, 64, 1, None),
    ];
    for (len, slot_size, slots, refusal) in cases {
        let case = format!("{len}-byte segment, {slots} slots of {slot_size} bytes");
        let segment = HandMadeSegment::create(len, slot_size, slots)?;
        let address = PeerAddress::Shm {
            os_id: segment.os_id.clone(),
            wake: subject.wake.unwrap_or(WakeMode::Blocking),
        };
        let mut peer = Peer::spawn("attach", &address, subject.limit())?;
        let status = peer.wait_exit(SETUP);
        let stderr = peer.finish();
        use std::os::unix::process::ExitStatusExt;
        let code = status.and_then(|s| s.code());
        match refusal {
            Some(why) if code == Some(3) && stderr.contains(why) => {}
            None if code == Some(0) => {}
            _ => {
                return Err(format!(
                    "{case}: the peer ended with {:?} (signal {:?}), stderr {stderr:?}; \
                     expected {}",
                    code,
                    status.and_then(|s| s.signal()),
                    refusal.map_or("success".to_string(), |w| format!("a refusal naming {w:?}"))
                ))
            }
        }
    }
    Ok(())
}

/// Sizes for the loaned path: every size of [`sizes_for`] that one loan holds, and the
/// largest it holds.
fn loan_sizes(subject: Subject, max_loan: usize) -> Vec<usize> {
    let mut sizes = sizes_for(subject.limit().min(max_loan));
    sizes.retain(|&len| len > 0);
    if !sizes.contains(&max_loan.min(subject.limit())) {
        sizes.push(max_loan.min(subject.limit()));
    }
    sizes
}

/// The loaned path's goodbye (a loan of 0 bytes, committed); the peer then exits 0, and
/// sends nothing after it.
fn loaned_goodbye(channel: &mut dyn Channel, peer: &mut Peer) -> Result<(), String> {
    let loans = channel.loans().ok_or("the loaned path went away")?;
    let _ = loans
        .loan(0, Instant::now() + OP)
        .map_err(|e| format!("loaning the goodbye: {e}"))?;
    loans
        .commit(Instant::now() + OP)
        .map_err(|e| format!("the goodbye: {e}"))
        .map_err(with_stderr(peer))?;
    exits_cleanly_on_the_goodbye(peer, "the peer")
}

/// The peer (`who`) exits 0 within PROMPT of its goodbye.
fn exits_cleanly_on_the_goodbye(peer: &mut Peer, who: &str) -> Result<(), String> {
    match peer.wait_exit(PROMPT) {
        Some(status) if status.success() => Ok(()),
        other => Err(format!(
            "{who} was to exit cleanly on the goodbye: {other:?}, {}",
            peer.finish()
        )),
    }
}

/// Every transport says whether it has the loaned path, and those that have it are the
/// ones checked for it here ([`has_loans`]): a transport that gains one gains its checks.
fn loans_offered_as_listed(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "echo")?;
    let offered = channel.loans().map(|loans| loans.max_loan());
    let _ = peer.finish();
    match (offered, has_loans(subject)) {
        (Some(0), _) => Err("a loaned path whose loans hold 0 bytes".into()),
        (Some(_), true) | (None, false) => Ok(()),
        (Some(max), false) => Err(format!(
            "a loaned path (up to {max} bytes) that has_loans does not list, so it goes unchecked"
        )),
        (None, true) => Err("no loaned path, but has_loans lists one".into()),
    }
}

/// The loaned path both ways: the measuring side fills each request in its loan and
/// commits it, takes the next loan before it waits for the reply (as a zero-copy
/// stack's users do), and compares each reply where it lies before it releases it; the
/// peer echoes each request from where it lies into the reply's loan (`echo_loaned`).
/// Every size a loan holds, up to the largest.
fn loaned_echo(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "loan-echoer")?;
    let loans = channel.loans().ok_or("no loaned path")?;
    let sizes = loan_sizes(subject, loans.max_loan());
    let deadline = || Instant::now() + OP;
    let request = |i: usize| bytes(0x10a4_0000 + i as u64, sizes[i]);
    loans
        .loan(sizes[0], deadline())
        .map_err(|e| e.to_string())?
        .copy_from_slice(&request(0));
    for (i, &len) in sizes.iter().enumerate() {
        loans
            .commit(deadline())
            .map_err(|e| format!("committing the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        if let Some(&following) = sizes.get(i + 1) {
            loans
                .loan(following, deadline())
                .map_err(|e| format!("loaning ahead for the {following}-byte request: {e}"))?
                .copy_from_slice(&request(i + 1));
        }
        let reply = loans
            .borrow(subject.limit(), deadline())
            .map_err(|e| format!("borrowing the reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the reply to the {len}-byte request"),
            &request(i),
            reply,
        )?;
        loans.release();
    }
    loaned_goodbye(channel.as_mut(), &mut peer)
}

/// A loaned message is received on the copying path and a copied one on the loaned path:
/// the loaned measuring side with a peer that echoes by copying, and a copying measuring
/// side with a peer that echoes from its loans.
fn loaned_and_copying_paths_meet(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "echoer")?;
    let loans = channel.loans().ok_or("no loaned path")?;
    let max = loans.max_loan();
    for (i, &len) in loan_sizes(subject, max).iter().enumerate() {
        let request = bytes(0x3ee7_0000 + i as u64, len);
        let room = loans
            .loan(len, Instant::now() + OP)
            .map_err(|e| e.to_string())?;
        room.copy_from_slice(&request);
        loans
            .commit(Instant::now() + OP)
            .map_err(|e| format!("committing the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        let reply = loans
            .borrow(subject.limit(), Instant::now() + OP)
            .map_err(|e| format!("borrowing the copied reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the copied reply to the loaned {len}-byte request"),
            &request,
            reply,
        )?;
        loans.release();
    }
    loaned_goodbye(channel.as_mut(), &mut peer)?;

    let (mut channel, mut peer) = open(subject, "loan-echoer")?;
    let mut reply = Vec::new();
    for (i, &len) in loan_sizes(subject, max).iter().enumerate() {
        let request = bytes(0x3ee8_0000 + i as u64, len);
        channel
            .send(&request, Instant::now() + OP)
            .map_err(|e| format!("sending the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        channel
            .recv(&mut reply, subject.limit(), Instant::now() + OP)
            .map_err(|e| format!("receiving the loaned reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the loaned reply to the copied {len}-byte request"),
            &request,
            &reply,
        )?;
    }
    channel
        .send(&[], Instant::now() + OP)
        .map_err(|e| format!("the goodbye: {e}"))?;
    exits_cleanly_on_the_goodbye(&mut peer, "the loan-echoing peer")
}

/// What the loaned path cannot do it refuses, saying so, and the channel goes on: a
/// commit with no loan open, a second loan, a loan larger than a loan holds, a second
/// borrow. The copying path over an open loan or a borrowed message is refused, or (where
/// the copying path does not look at loans, so as to cost what it did) takes the loan's
/// room or the borrowed message, after which the loan's commit is refused and the borrow
/// gives back nothing: never a message made of both, never one lost. A release with
/// nothing borrowed does nothing.
fn loans_refuse_misuse(subject: Subject) -> Result<(), String> {
    let (mut channel, mut peer) = open(subject, "echoer")?;
    let deadline = || Instant::now() + OP;
    let refused = |what: &str, result: Result<(), TransportError>| match result {
        Err(TransportError::Loan(_)) => Ok(()),
        other => Err(format!(
            "{what}: {other:?}, where the loaned path refuses it"
        )),
    };
    let loans = channel.loans().ok_or("no loaned path")?;
    let max = loans.max_loan();
    refused("a commit with no loan open", loans.commit(deadline()))?;
    refused(
        "a loan larger than a loan holds",
        loans.loan(max + 1, deadline()).map(|_| ()),
    )?;
    loans.release();
    let request = bytes(0x3150, 200.min(max));
    loans
        .loan(request.len(), deadline())
        .map_err(|e| e.to_string())?
        .copy_from_slice(&request);
    refused("a second loan", loans.loan(1, deadline()).map(|_| ()))?;
    // A copying send while a loan is open: refused (iceoryx2), or it takes the loan's
    // room for its own message, which goes out whole, and the stale loan's commit is
    // refused (shared memory, whose copying path never looks at loans). Never a message
    // made of both.
    let expected = match channel.send(b"copied", deadline()) {
        Err(TransportError::Loan(_)) => {
            let loans = channel.loans().ok_or("the loaned path went away")?;
            loans
                .commit(deadline())
                .map_err(|e| format!("committing after the refused send: {e}"))
                .map_err(with_stderr(&mut peer))?;
            request.clone()
        }
        Ok(()) => {
            let loans = channel.loans().ok_or("the loaned path went away")?;
            refused(
                "the commit of a loan whose room the copying path took",
                loans.commit(deadline()),
            )?;
            b"copied".to_vec()
        }
        Err(e) => return Err(format!("a copying send while a loan is open: {e}")),
    };
    let loans = channel.loans().ok_or("the loaned path went away")?;
    let reply = loans
        .borrow(subject.limit(), deadline())
        .map_err(|e| format!("borrowing the reply: {e}"))
        .map_err(with_stderr(&mut peer))?;
    compare("the reply after the refusals", &expected, reply)?;
    refused(
        "a second borrow",
        loans.borrow(subject.limit(), deadline()).map(|_| ()),
    )?;
    // A copying receive while a message is borrowed: refused (iceoryx2), or it takes
    // that message, whose borrow is then stale (shared memory). Never a later message.
    let mut copy = Vec::new();
    match channel.recv(&mut copy, subject.limit(), deadline()) {
        Err(TransportError::Loan(_)) => {}
        Ok(()) => {
            compare(
                "a copying receive of the borrowed message",
                &expected,
                &copy,
            )?;
            let loans = channel.loans().ok_or("the loaned path went away")?;
            if loans.borrowed().is_some() {
                return Err("a message taken by the copying path is still borrowed".into());
            }
        }
        Err(e) => {
            return Err(format!(
                "a copying receive while a message is borrowed: {e}"
            ))
        }
    }
    let loans = channel.loans().ok_or("the loaned path went away")?;
    loans.release();
    loans.release();
    // Both paths go on as before.
    let mut reply = Vec::new();
    channel
        .send(&request, deadline())
        .and_then(|()| channel.recv(&mut reply, subject.limit(), deadline()))
        .map_err(|e| format!("a round trip after the refusals: {e}"))
        .map_err(with_stderr(&mut peer))?;
    compare("the copied reply after the refusals", &request, &reply)?;
    cancelled_loans_send_nothing(channel.as_mut(), &mut peer, subject)?;
    loaned_goodbye(channel.as_mut(), &mut peer)
}

/// An open loan is found again (`loaned`) and given back unsent (`cancel`): nothing of
/// it arrives, and the copying path goes on; a borrowed message is found again
/// (`borrowed`) until it is released.
fn cancelled_loans_send_nothing(
    channel: &mut dyn Channel,
    peer: &mut Peer,
    subject: Subject,
) -> Result<(), String> {
    let deadline = || Instant::now() + OP;
    let loans = channel.loans().ok_or("no loaned path")?;
    if loans.loaned().is_some() || loans.borrowed().is_some() {
        return Err("a loan or a borrowed message open after its commit or release".into());
    }
    let cancelled = bytes(0xca9c, 100.min(loans.max_loan()));
    loans
        .loan(cancelled.len(), deadline())
        .map_err(|e| e.to_string())?;
    loans
        .loaned()
        .ok_or("the open loan is not found again")?
        .copy_from_slice(&cancelled);
    loans.cancel();
    if loans.loaned().is_some() {
        return Err("a cancelled loan is still open".into());
    }
    let request = bytes(0xca9d, 150.min(loans.max_loan()));
    channel
        .send(&request, deadline())
        .map_err(|e| format!("a copying send after a cancelled loan: {e}"))
        .map_err(with_stderr(peer))?;
    let loans = channel.loans().ok_or("the loaned path went away")?;
    let reply = loans
        .borrow(subject.limit(), deadline())
        .map_err(|e| format!("the reply after a cancelled loan: {e}"))
        .map_err(with_stderr(peer))?
        .to_vec();
    compare("the reply after a cancelled loan", &request, &reply)?;
    if loans.borrowed() != Some(&reply[..]) {
        return Err("the borrowed message is not found again as it was borrowed".into());
    }
    loans.release();
    if loans.borrowed().is_some() {
        return Err("a released message is still borrowed".into());
    }
    Ok(())
}
