//! Failures as the user reads them: what went wrong, at which round trip, and what
//! became of the peer (its exit status and stderr).

use crate::spawn::{describe, PeerProcess, GOODBYE_WITHIN};
use ipc_matrix_results::{printable, Failure, FailureKind};
use ipc_matrix_spec::{Cell, ChannelKind};
use ipc_matrix_transport::TransportError;
use std::time::{Duration, Instant};

pub(crate) fn setup_failure(reason: String) -> Failure {
    Failure {
        kind: FailureKind::Setup,
        round_trip: None,
        reason,
    }
}

/// The channel a cell's transport is, for a kind that opens one. matrix.yaml gives such a
/// kind only transports that are channels (`file` is where logging cells write), so a
/// cell that is none fails its set-up here, before anything starts.
pub(crate) fn channel_of(cell: &Cell) -> Result<ChannelKind, Failure> {
    cell.transport.channel().ok_or_else(|| {
        setup_failure(format!(
            "{} does not run over {}: it is not a channel between processes",
            cell.kind().as_str(),
            cell.transport
        ))
    })
}

/// A failure of round trip `index` of `total` (the first `warmup` are warm-up), with what
/// became of the peer.
pub(crate) fn round_trip_failure(
    peer: &mut PeerProcess,
    (index, total, warmup): (u64, u64, u64),
    kind: FailureKind,
    what: String,
) -> Failure {
    let phase = if index < warmup { " (warm-up)" } else { "" };
    Failure {
        kind,
        round_trip: Some(index),
        reason: format!(
            "round trip {index} of {total}{phase}: {what}{}",
            peer_epilogue(peer)
        ),
    }
}

/// The peer did not exit cleanly after its goodbye; `what` says how.
pub(crate) fn unclean_stop(peer: &mut PeerProcess, what: String) -> Failure {
    Failure {
        kind: FailureKind::Shutdown,
        round_trip: None,
        reason: format!(
            "the peer did not stop cleanly after the last round trip ({what}){}",
            peer_epilogue(peer)
        ),
    }
}

/// "; the peer exited (exit status 3); its stderr: ..." when there is something to say.
pub(crate) fn peer_epilogue(peer: &mut PeerProcess) -> String {
    // A peer that just failed may take a moment to exit; give it that moment.
    let status = peer.wait_until(Instant::now() + Duration::from_millis(200));
    let stderr = peer.stop();
    let mut out = String::new();
    if let Some(status) = status {
        out.push_str(&format!("; the peer exited ({})", describe(status)));
    }
    if !stderr.is_empty() {
        out.push_str(&format!("; its stderr: {stderr}"));
    }
    out
}

/// What a transport error says about the peer: a deadline passed, the peer is gone, or it
/// broke the protocol.
pub(crate) fn transport_failure_kind(e: &TransportError) -> FailureKind {
    match e {
        TransportError::Timeout { .. } => FailureKind::Timeout,
        TransportError::Closed
        | TransportError::Reset
        | TransportError::PeerGone(_)
        | TransportError::Io { .. } => FailureKind::PeerGone,
        // A user's stack's own error: its channel did not keep the contract.
        TransportError::TooLarge { .. }
        | TransportError::Corrupt(_)
        | TransportError::Loan(_)
        | TransportError::Stack(_) => FailureKind::Protocol,
        // The peer could not load the user's stack it was given.
        TransportError::Register(_) => FailureKind::Setup,
    }
}

/// The peer of a cell that starts one, as [`expect_running_before_goodbye`] names it.
pub(crate) const STARTED: &str = "the process the cell started";

/// Before its goodbye, the process the cell started (`who`: "the process the cell
/// started", "peer 2, a process the cell started") must still run, and hold the only
/// sockets among its own: one that exited already was never told goodbye, so the replies
/// came from something else (a process it left behind, in its group or not) or it stopped
/// on its own after the last one; and beside another process of its own (its group, its
/// descendants) that holds a socket, the replies may have come from that one. Either way
/// the cell did not measure the peer it started, to the end.
pub(crate) fn expect_running_before_goodbye(
    peer: &mut PeerProcess,
    who: &str,
) -> Result<(), Failure> {
    let shutdown = |reason: String| Failure {
        kind: FailureKind::Shutdown,
        round_trip: None,
        reason,
    };
    if let Some(status) = peer.exited() {
        return Err(shutdown(format!(
            "{who} had exited ({}) before it was told goodbye: a peer must serve until the goodbye and exit after it, and every reply must come from the process the cell started, not one it left behind{}",
            describe(status),
            peer_epilogue(peer)
        )));
    }
    let others = match peer.others_of_its_own() {
        Ok(others) => others,
        Err(e) => {
            return Err(shutdown(format!(
                "cannot tell which processes could have replied besides {who} (/proc: {e}){}",
                peer_epilogue(peer)
            )))
        }
    };
    if others.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = others
        .iter()
        .take(5)
        .map(|p| format!("{} ({})", p.pid, printable(&p.name)))
        .collect();
    let more = match others.len() > named.len() {
        true => format!(" and {} more", others.len() - named.len()),
        false => String::new(),
    };
    Err(shutdown(format!(
        "besides {who} (pid {}), process {}{more} of its own (in its process group or started by it) ran at the goodbye holding a socket, so the replies may not have come from the process started: a peer serves in the process the cell starts (a wrapper must `exec` it){}",
        peer.pid(),
        named.join(", "),
        peer_epilogue(peer)
    )))
}

/// How saying goodbye went wrong, before the peer's exit is awaited; it reads inside
/// "the peer did not stop cleanly after the last round trip (...)".
#[derive(Debug, thiserror::Error)]
pub(crate) enum GoodbyeError {
    #[error("goodbye not delivered: {0}")]
    NotDelivered(#[source] TransportError),
    /// The goodbye's round trip broke, in the words of the measuring side's loop.
    #[error("goodbye not answered: {0}")]
    NotAnswered(String),
    #[error("disconnecting: {0}")]
    Disconnecting(#[source] capnp::Error),
    #[error("the disconnect did not finish within {GOODBYE_WITHIN:?}")]
    DisconnectTimedOut,
}

/// After its goodbye was `said` (or not), the peer must exit cleanly by `deadline`
/// (at most [`GOODBYE_WITHIN`] from the goodbye).
pub(crate) fn expect_clean_exit(
    peer: &mut PeerProcess,
    said: Result<(), GoodbyeError>,
    deadline: Instant,
) -> Result<(), Failure> {
    match (said, peer.wait_until(deadline)) {
        (Ok(()), Some(status)) if status.success() => Ok(()),
        (Err(e), _) => Err(unclean_stop(peer, e.to_string())),
        (Ok(()), Some(status)) => Err(unclean_stop(peer, describe(status))),
        (Ok(()), None) => Err(unclean_stop(
            peer,
            format!("still running {GOODBYE_WITHIN:?} after its goodbye"),
        )),
    }
}
