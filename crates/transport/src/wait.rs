//! Waiting with a deadline, the bottom of every transport: what is left of a deadline,
//! which failed calls are tried again, how often a spinning waiter looks at the clock, and
//! how often any waiter looks whether the other process still lives.

use crate::error::TransportError;

// The small functions here are `#[inline]`: every transport's waiting loop calls them, and
// without it whether they are inlined depends on which of the crate's codegen units they
// land in, so that moving code between files moved the instructions a round trip counts
// (iceoryx2's echo by 1.4-1.8 %).
use std::io;
use std::time::{Duration, Instant};

/// How often a waiter checks that the other process still lives.
pub(crate) const LIVENESS_PERIOD: Duration = Duration::from_millis(20);
/// Spins between two looks at the clock in busy-poll mode.
const SPINS_PER_CHECK: u32 = 1024;

/// Time left before `deadline`, or the timeout error naming what did not arrive.
#[inline]
pub fn remaining(deadline: Instant, what: &'static str) -> Result<Duration, TransportError> {
    let now = Instant::now();
    if now >= deadline {
        return Err(TransportError::Timeout { what });
    }
    Ok((deadline - now).max(Duration::from_millis(1)))
}

/// Polls a non-blocking `accept` until it yields a connection, the deadline passes, or
/// process `peer` dies first. Whether the peer lives is looked at before each accept: a
/// peer that connected, did all it had to and exited in between is still accepted.
pub fn poll_accept<T>(
    mut accept: impl FnMut() -> io::Result<T>,
    peer: u32,
    deadline: Instant,
) -> Result<T, TransportError> {
    loop {
        let alive = crate::platform::ensure_alive(peer, "before it connected");
        match accept() {
            Ok(connection) => return Ok(connection),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                alive?;
                remaining(deadline, "connection from the peer")?;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(TransportError::io("accepting the peer")(e)),
        }
    }
}

/// A blocking call that gave up at its timeout (or would block, or was interrupted): the
/// caller looks at its own deadline and tries again.
#[inline]
pub fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Whether a spinning waiter spins on without looking at the clock (its deadline, the
/// other side's liveness) after `spins` spins: it looks every SPINS_PER_CHECK. Looking
/// more often only costs time.
#[inline]
pub(crate) fn keep_spinning(spins: u32) -> bool {
    !spins.is_multiple_of(SPINS_PER_CHECK)
}

/// When a waiter looks whether the other process still lives: LIVENESS_PERIOD after it
/// began to wait, then every LIVENESS_PERIOD. Looking more often only costs time.
#[derive(Default)]
pub(crate) struct LivenessChecks {
    next: Option<Instant>,
}

impl LivenessChecks {
    #[inline]
    pub(crate) fn due(&mut self, now: Instant) -> bool {
        let at = *self.next.get_or_insert(now + LIVENESS_PERIOD);
        if now < at {
            return false;
        }
        self.next = Some(now + LIVENESS_PERIOD);
        true
    }
}

#[cfg(test)]
mod accepting {
    use super::*;

    fn deadline() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// A child that exits by itself after `seconds`, not reaped (a zombie counts as gone).
    fn short_lived(seconds: &str) -> std::process::Child {
        std::process::Command::new("sleep")
            .arg(seconds)
            .spawn()
            .expect("starting sleep")
    }

    fn would_block<T>() -> io::Result<T> {
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// The peer connects, does all it has to and exits between a look at the listener and
    /// the look at the peer: its connection is in the queue and is accepted.
    #[test]
    fn a_peer_that_connected_and_exited_is_accepted() {
        let mut peer = short_lived("30");
        let pid = peer.id();
        let mut calls = 0;
        let result = poll_accept(
            || {
                calls += 1;
                if calls == 1 {
                    peer.kill().unwrap();
                    peer.wait().unwrap();
                    would_block()
                } else {
                    Ok("connection")
                }
            },
            pid,
            deadline(),
        );
        assert_eq!(result.ok(), Some("connection"));
        // Killed in the first look (and reaped there).
        assert!(!peer.wait().unwrap().success());
    }

    #[test]
    fn a_dead_peer_that_never_connected_is_gone_at_once() {
        let mut peer = short_lived("0");
        peer.wait().unwrap();
        let start = Instant::now();
        match poll_accept(would_block::<()>, peer.id(), deadline()) {
            Err(TransportError::PeerGone(why)) => {
                assert_eq!(
                    why,
                    format!("process {} exited before it connected", peer.id())
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_live_peer_that_never_connects_times_out_and_other_errors_end_the_wait() {
        let start = Instant::now();
        let wait = Duration::from_millis(50);
        let result = poll_accept(would_block::<()>, std::process::id(), start + wait);
        assert!(
            matches!(
                result,
                Err(TransportError::Timeout {
                    what: "connection from the peer"
                })
            ),
            "{result:?}"
        );
        assert!(start.elapsed() >= wait);
        let result = poll_accept(
            || Err::<(), _>(io::ErrorKind::PermissionDenied.into()),
            std::process::id(),
            deadline(),
        );
        assert!(
            matches!(
                result,
                Err(TransportError::Io {
                    context: "accepting the peer",
                    ..
                })
            ),
            "{result:?}"
        );
    }
}
