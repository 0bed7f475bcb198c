//! The `Channel` contract, each clause written once as a check that runs against any
//! transport. A `Subject` is one transport in one wake mode; [`super::table`] lists
//! them, and which subjects each applies to; the loaned path's are in [`super::loaned`].
//!
//! UDP is lossy, and some clauses mean something else there; each check says how it
//! adapts: a reply may be lost (resend, or count it lost, never accept a wrong one), and a
//! send never waits for the reader (the datagram is dropped at the receiving socket).

use super::peer::{
    count_answer, CHUNKED, CHUNKED_SEED, COUNT_QUERY, LATE_BY, LIE_ANNOUNCED, LIE_LIMIT, LIE_SEED,
    ORDERED, SLOT,
};
use super::subject::{
    exits_cleanly_on_the_goodbye, open, open_for, sizes_for, with_stderr, Subject,
};
use super::support::{
    bytes, compare, index_of, ordered, shown, HandMadeSegment, Peer, OP, PROMPT, SETUP,
};
use super::support::{violated, CheckFailure};
use crate::address::PeerAddress;
use crate::error::TransportError;
use ipc_matrix_spec::{ChannelKind, WakeMode};
use std::time::{Duration, Instant};

/// Every size from 0 to the limit comes back whole and unchanged. UDP: a reply that does
/// not come within a second is asked for again (at most 3 times); a late reply to an
/// earlier message is skipped; any other reply fails.
pub(super) fn sizes(subject: Subject) -> Result<(), CheckFailure> {
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
                        return Err(violated!("the reply to {what}: {e}"))
                            .map_err(with_stderr(&mut peer))
                    }
                }
            }
        }
        compare(&format!("the reply to {what}"), &message, &reply)?;
        sent.push(message);
    }
    if subject.lossy() {
        return Ok(());
    }
    // Every message reached the peer process: a reply could also come from the stack's
    // own side of the channel.
    let byte_sum = sent
        .iter()
        .flatten()
        .fold(0u64, |s, &b| s.wrapping_add(u64::from(b)));
    channel
        .send(COUNT_QUERY, Instant::now() + OP)
        .and_then(|()| channel.recv(&mut reply, limit, Instant::now() + OP))
        .map_err(|e| format!("asking the peer what reached it: {e}"))
        .map_err(with_stderr(&mut peer))?;
    let expected = count_answer(sent.len() as u64, byte_sum);
    if reply != expected.as_bytes() {
        return Err(violated!(
            "the peer was to answer {expected:?}; the answer: {}",
            shown(&reply)
        ));
    }
    Ok(())
}

/// Messages of one byte either side of every shared-memory slot boundary, and of four
/// whole slots, arrive byte for byte in each direction, each checked by its receiver
/// alone (an echo could hide a fault that the two directions share): the peer checks the
/// ones it receives and says so, then sends them back as its own messages, which this
/// side checks. Over shared memory these messages stream through in 2 to 4 chunks of a
/// slot each (and the channel says so: `chunk_size`); over a stream they take many reads.
pub(super) fn chunk_boundaries(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "chunks")?;
    // Shared memory says it cuts messages into slots; streams cut where the kernel does.
    // A user's stack cuts where it does.
    let chunk = (subject.kind == ChannelKind::Shm).then_some(SLOT);
    if !subject.is_stack() && channel.chunk_size() != chunk {
        return Err(violated!(
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
        return Err(violated!("the peer's verdict: {}", shown(&buf)));
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
pub(super) fn exchange_echo(subject: Subject) -> Result<(), CheckFailure> {
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
        return Err(violated!("the goodbye left a {}-byte reply", reply.len()));
    }
    exits_cleanly_on_the_goodbye(&mut peer, "the peer")?;
    let after = Instant::now() + Duration::from_millis(100);
    match channel.recv(&mut reply, exchange_limit, after) {
        Ok(()) => Err(violated!(
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
pub(super) fn exchange_with_a_late_peer(subject: Subject) -> Result<(), CheckFailure> {
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
        // How late the peer is counts from its start, before `start` (the channel was
        // opened meanwhile): on a loaded machine its reply may come sooner after `start`
        // than LATE_BY, so only the deadline bounds it.
        Ok(()) if subject.is_stack() && took < wait + PROMPT => {
            compare("the late peer's reply", &request, &reply)
        }
        other => Err(violated!(
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
pub(super) fn ordering(subject: Subject) -> Result<(), CheckFailure> {
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
        return Err(violated!("the peer received: {}", shown(&buf)));
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

fn ordering_lossy(subject: Subject) -> Result<(), CheckFailure> {
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
                        return Err(violated!(
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
                        return Err(violated!("{lost} replies lost by round trip {i}"));
                    }
                    break;
                }
                Err(e) => {
                    return Err(violated!("round trip {i}: {e}")).map_err(with_stderr(&mut peer))
                }
            }
        }
    }
    Ok(())
}

/// A receive with nothing coming returns Timeout at its deadline, promptly.
pub(super) fn receive_deadline(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "stall")?;
    let wait = Duration::from_millis(200);
    let start = Instant::now();
    let result = channel.recv(&mut Vec::new(), subject.limit(), start + wait);
    let took = start.elapsed();
    match result {
        Err(TransportError::Timeout { .. }) if took >= wait && took < wait + PROMPT => Ok(()),
        Err(TransportError::Timeout { .. }) => Err(violated!(
            "Timeout after {took:?}, for a deadline {wait:?} away"
        )),
        other => Err(violated!("expected Timeout, got {other:?} after {took:?}"))
            .map_err(with_stderr(&mut peer)),
    }
}

/// A send into a channel whose reader stalls returns Timeout at its deadline once the
/// channel is full (after at most 256 MiB). UDP: the reader's socket drops what it cannot
/// hold, so no send waits: each must return by its deadline, and none may be a Timeout.
pub(super) fn send_deadline(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "stall")?;
    let wait = Duration::from_millis(300);
    if subject.lossy() {
        let datagram = bytes(0xda7a, subject.limit());
        for i in 0..200 {
            let start = Instant::now();
            let result = channel.send(&datagram, start + wait);
            let took = start.elapsed();
            if result.is_err() || took > wait + PROMPT {
                return Err(violated!("datagram {i}: {result:?} after {took:?}"));
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
                return Err(violated!(
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
pub(super) fn peer_death(subject: Subject) -> Result<(), CheckFailure> {
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
                return Err(violated!(
                    "after the peer's death: {result:?} after {:?}",
                    start.elapsed()
                ));
            }
        }
    } else {
        let result = channel.recv(&mut buf, subject.limit(), Instant::now() + OP);
        let took = start.elapsed();
        if !gone(&result) || took > PROMPT {
            return Err(violated!(
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
                return Err(violated!(
                    "sends after the peer's death: {result:?} after {:?}",
                    sending.elapsed()
                ));
            }
        }
    }
    use std::os::unix::process::ExitStatusExt;
    match peer.wait_exit(PROMPT) {
        Some(status) if status.signal() == Some(libc::SIGKILL) => Ok(()),
        other => Err(violated!(
            "the peer was to die of SIGKILL: {other:?}, {}",
            peer.finish()
        )),
    }
}

/// A message longer than the receiver's limit is refused from its announced length,
/// before anything is allocated for it (the buffer stays empty; a user's stack may have
/// made room up to the limit), while one of exactly the limit is received. Stream
/// transports: the peer writes frames by hand and announces 2^60 bytes. Shared memory,
/// UDP and users' stacks: the peer sends limit + 1 bytes.
pub(super) fn oversized_refused(subject: Subject) -> Result<(), CheckFailure> {
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
    // A user's stack may need room before it knows a message's length (a shared
    // library's receive writes into the caller's buffer): never more than the limit.
    let allowed = if subject.is_stack() { LIE_LIMIT } else { 0 };
    let mut fresh = Vec::new();
    match channel.recv(&mut fresh, LIE_LIMIT, Instant::now() + OP) {
        Err(TransportError::TooLarge { announced, limit })
            if announced == expected && limit == LIE_LIMIT && fresh.capacity() <= allowed =>
        {
            Ok(())
        }
        other => Err(violated!(
            "expected TooLarge {{ announced: {expected}, limit: {LIE_LIMIT} }} with at most \
             {allowed} bytes allocated, got {other:?} with {} bytes allocated",
            fresh.capacity()
        ))
        .map_err(with_stderr(&mut peer)),
    }
}

/// A peer attaching to a segment whose header does not fit it refuses with an error that
/// says why and exits; it does not crash. The header of the reported defect (a 4096-byte
/// segment, 2^31 slots of 4294967280 bytes: 64-bit sizes that wrap around to 4096) is the
/// first case; a header that fits is accepted.
pub(super) fn hostile_header_refused(subject: Subject) -> Result<(), CheckFailure> {
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
                return Err(violated!(
                    "{case}: the peer ended with {:?} (signal {:?}), stderr {stderr:?}; \
                     expected {}",
                    code,
                    status.and_then(|s| s.signal()),
                    refusal.map_or_else(
                        || "success".to_string(),
                        |w| format!("a refusal naming {w:?}")
                    )
                ))
            }
        }
    }
    Ok(())
}
