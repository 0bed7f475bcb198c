//! The other end of every check: a separate OS process (this binary, started again by
//! `support::Peer`), playing one role. Each role ends on its own (at worst after
//! PEER_IDLE), and dies with its parent.

use super::support::{
    bytes, compare, ordered, PEER_ADDRESS_ENV, PEER_IDLE, PEER_LIMIT_ENV, PEER_PARENT_ENV, SETUP,
};
use crate::address::PeerAddress;
use crate::contract::Channel;
use crate::error::TransportError;
use crate::open::connect;
use crate::platform::die_with_parent;
use std::io::Write;
use std::time::{Duration, Instant};

/// Messages each way in the ordering check.
pub const ORDERED: u64 = 10_000;
/// The receiving limit of the oversized-message check.
pub const LIE_LIMIT: usize = 1000;
/// What a stream liar announces: far more than any memory.
pub const LIE_ANNOUNCED: u64 = 1 << 60;
/// Seed of the one honest message the liar sends first.
pub const LIE_SEED: u64 = 0x11e;
/// A shared-memory slot of a channel sized for `support::LIMIT`: its largest, 1 MiB.
pub const SLOT: usize = 1 << 20;
/// The chunk-boundary check's messages, each way: one byte either side of every slot
/// boundary, and four whole slots (the whole ring, and the limit).
pub const CHUNKED: [usize; 9] = [
    SLOT - 1,
    SLOT,
    SLOT + 1,
    2 * SLOT - 1,
    2 * SLOT,
    2 * SLOT + 1,
    3 * SLOT - 1,
    3 * SLOT + 1,
    4 * SLOT,
];
/// Seed of the chunk-boundary check's message `i`: this plus `i`.
pub const CHUNKED_SEED: u64 = 0xc4_0000;
/// How long the `late-echo` peer waits before it starts to receive.
pub const LATE_BY: Duration = Duration::from_millis(500);

/// Asked of the `echo` peer: how many messages reached it (not itself counted).
pub const COUNT_QUERY: &[u8] = b"ipc-matrix conformance: how many messages reached you?";

/// The `echo` peer's answer to [`COUNT_QUERY`]: the messages and the sum of their bytes.
pub fn count_answer(received: u64, byte_sum: u64) -> String {
    format!("{received} messages reached the peer, their bytes summing to {byte_sum}")
}

/// Runs `role` and exits: 0 when it went as planned, 3 with the reason on stderr if not.
pub fn main(role: &str) -> ! {
    let code = match run(role) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("conformance peer ({role}): {e}");
            3
        }
    };
    std::process::exit(code)
}

fn run(role: &str) -> Result<(), String> {
    let parent: u32 = std::env::var(PEER_PARENT_ENV)
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or("no parent process id")?;
    if !die_with_parent(parent) {
        return Err("the parent is gone".into());
    }
    let address: PeerAddress = serde_json::from_str(
        &std::env::var(PEER_ADDRESS_ENV).map_err(|_| "no address in the environment")?,
    )
    .map_err(|e| format!("reading the address: {e}"))?;
    let limit: usize = std::env::var(PEER_LIMIT_ENV)
        .ok()
        .and_then(|l| l.parse().ok())
        .ok_or("no message limit in the environment")?;
    let framed_here =
        address.channel().is_byte_stream() && !matches!(address, PeerAddress::Stack { .. });
    if role == "liar" && framed_here {
        return lie_on_the_wire(&address);
    }
    let mut channel = connect(&address, Instant::now() + SETUP).map_err(|e| e.to_string())?;
    let channel = channel.as_mut();
    let idle = || Instant::now() + PEER_IDLE;
    let mut buf = Vec::new();
    match role {
        // Echoes every message until the other side closes.
        // [`COUNT_QUERY`] is answered with how many messages reached it and their bytes'
        // sum, so that a stack that answers the measuring side itself is caught.
        "echo" => {
            let (mut received, mut sum) = (0u64, 0u64);
            loop {
                match channel.recv(&mut buf, limit, idle()) {
                    Ok(()) if buf == COUNT_QUERY => {
                        let answer = count_answer(received, sum);
                        channel
                            .send(answer.as_bytes(), idle())
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(()) => {
                        received += 1;
                        sum = buf.iter().fold(sum, |s, &b| s.wrapping_add(u64::from(b)));
                        channel.send(&buf, idle()).map_err(|e| e.to_string())?;
                    }
                    Err(e) if e.is_closed() || matches!(e, TransportError::PeerGone(_)) => {
                        return Ok(())
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        // Echoes every message with `echo` (as it receives it, where the transport can)
        // until the goodbye, which it does not send back, then exits.
        "echoer" => loop {
            match channel.echo(&mut buf, limit, idle()) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        },
        // Echoes every message on the loaned path (`echo_loaned`: from where it lies into
        // the reply's loan) until the goodbye, which it does not send back, then exits.
        "loan-echoer" => {
            let loans = channel.loans().ok_or("no loaned path")?;
            loop {
                match loans.echo_loaned(limit, idle()) {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        // Waits LATE_BY, then receives one whole message before it sends it back: a peer
        // that does not echo as it receives.
        "late-echo" => {
            std::thread::sleep(LATE_BY);
            channel
                .recv(&mut buf, limit, idle())
                .map_err(|e| e.to_string())?;
            channel.send(&buf, idle()).map_err(|e| e.to_string())?;
            wait_for_close(channel)
        }
        // Receives ORDERED messages and checks each, says "ok" (or what was wrong), then
        // sends ORDERED messages of its own.
        "sink-source" => {
            let mut verdict = String::from("ok");
            for i in 0..ORDERED {
                channel
                    .recv(&mut buf, limit, idle())
                    .map_err(|e| format!("message {i}: {e}"))?;
                if verdict == "ok" {
                    if let Err(e) = compare(&format!("message {i}"), &ordered(i), &buf) {
                        verdict = e.to_string();
                    }
                }
            }
            channel
                .send(verdict.as_bytes(), idle())
                .map_err(|e| e.to_string())?;
            for i in 0..ORDERED {
                channel
                    .send(&ordered(i), idle())
                    .map_err(|e| format!("message {i}: {e}"))?;
            }
            wait_for_close(channel)
        }
        // Receives the CHUNKED messages and checks each byte of each, says "ok" (or the
        // first difference), then sends them itself.
        "chunks" => {
            let mut verdict = String::from("ok");
            for (i, &len) in CHUNKED.iter().enumerate() {
                channel
                    .recv(&mut buf, limit, idle())
                    .map_err(|e| format!("the {len}-byte message: {e}"))?;
                if verdict == "ok" {
                    let what = format!("the {len}-byte message, as the peer received it");
                    if let Err(e) = compare(&what, &bytes(CHUNKED_SEED + i as u64, len), &buf) {
                        verdict = e.to_string();
                    }
                }
            }
            channel
                .send(verdict.as_bytes(), idle())
                .map_err(|e| e.to_string())?;
            for (i, &len) in CHUNKED.iter().enumerate() {
                channel
                    .send(&bytes(CHUNKED_SEED + i as u64, len), idle())
                    .map_err(|e| format!("the {len}-byte message: {e}"))?;
            }
            wait_for_close(channel)
        }
        // Connected, and neither reads nor writes.
        "stall" => {
            std::thread::sleep(PEER_IDLE);
            Ok(())
        }
        // Dies by SIGKILL on the first message: no goodbye, no orderly close.
        "die" => {
            channel
                .recv(&mut buf, limit, idle())
                .map_err(|e| e.to_string())?;
            // SAFETY: kill with integer arguments.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            Err("still alive after SIGKILL".into())
        }
        // Shared memory and UDP: one message of LIE_LIMIT bytes, then one byte more.
        "liar" => {
            let honest = bytes(LIE_SEED, LIE_LIMIT);
            channel.send(&honest, idle()).map_err(|e| e.to_string())?;
            let over = bytes(LIE_SEED + 1, LIE_LIMIT + 1);
            channel.send(&over, idle()).map_err(|e| e.to_string())?;
            wait_for_close(channel)
        }
        // Attached (the check is that `connect` refuses what it must): one message, so a
        // layout that does not fit the mapping would be written through.
        "attach" => channel
            .send(b"attached", Instant::now() + Duration::from_secs(1))
            .map_err(|e| format!("attached, but sending failed: {e}")),
        other => Err(format!("no role {other:?}")),
    }
}

/// Waits (at most PEER_IDLE) for the other side to close, so nothing sent is cut off.
fn wait_for_close(channel: &mut dyn Channel) -> Result<(), String> {
    let mut buf = Vec::new();
    match channel.recv(&mut buf, 1 << 20, Instant::now() + PEER_IDLE) {
        Ok(()) => Err("an unexpected message".into()),
        Err(e) if e.is_closed() || matches!(e, TransportError::PeerGone(_)) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// A stream peer that writes frames by hand: one honest frame of LIE_LIMIT bytes (its
/// length as 8 little-endian bytes, whatever this CPU's byte order), then a header that
/// announces LIE_ANNOUNCED bytes, followed by a few.
fn lie_on_the_wire(address: &PeerAddress) -> Result<(), String> {
    let mut wire = (LIE_LIMIT as u64).to_le_bytes().to_vec();
    wire.extend_from_slice(&bytes(LIE_SEED, LIE_LIMIT));
    wire.extend_from_slice(&LIE_ANNOUNCED.to_le_bytes());
    wire.extend_from_slice(&bytes(LIE_SEED + 2, 64));
    let mut stream = address
        .connect_unframed(Instant::now() + SETUP)
        .ok_or("not a byte stream")?
        .map_err(|e| e.to_string())?;
    stream.write_all(&wire).map_err(|e| e.to_string())?;
    stream.flush().map_err(|e| e.to_string())?;
    // Keep the stream open until the measuring side has read what it needs and is gone.
    std::thread::sleep(PEER_IDLE);
    Ok(())
}
