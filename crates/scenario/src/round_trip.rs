//! The one measuring loop of the request/reply kinds (echo, bulk, codec, rpc, req-rep).
//!
//! A kind supplies an [`Endpoint`]: how one request goes out and its reply comes back over
//! its stack, and how the peer is told goodbye. The loop owns everything else, once:
//! the requests (stamped payloads or codec frames), warm-up, the timed region, the reply
//! check, loss accounting and the failure naming the round trip.

use crate::codec_work::CodecWork;
use crate::context::Tally;
use crate::failure::{round_trip_failure, setup_failure};
use crate::payload::Payload;
use crate::spawn::PeerProcess;
use crate::verify::compare;
use ipc_matrix_results::{CodecStages, Failure, FailureKind};
use ipc_matrix_spec::{Cell, CodecKind};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Consecutive lost replies (lossy transports only) after which the peer counts as
/// unresponsive.
const LOST_IN_A_ROW_LIMIT: u64 = 3;

/// The limits of a cell's round trips, from its kind's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The deadline of one round trip.
    pub(crate) timeout: Duration,
    /// The share of replies that may be lost (only a lossy transport loses any).
    pub(crate) max_loss: f64,
}

impl Limits {
    /// A kind whose transports lose nothing: a lost reply is a failure.
    pub(crate) fn lossless(timeout: Duration) -> Self {
        Self {
            timeout,
            max_loss: 0.0,
        }
    }
}

/// What became of one request.
pub(crate) enum Answer {
    /// The reply arrived; [`Endpoint::reply`] holds it.
    Replied,
    /// No reply before the deadline, on a transport that may lose messages.
    Lost,
}

/// A failure of one exchange, before the loop names the round trip: its kind and what
/// was being done.
pub(crate) type Broken = (FailureKind, String);

/// One side of a request/reply stack, connected to its peer.
pub(crate) trait Endpoint {
    /// Makes `request` ready before the round trip's clock starts, as its stamp is: an
    /// endpoint on loans writes it into the loan taken ahead, where a zero-copy stack's
    /// user makes a message in the first place. Others have nothing to do.
    fn stage(&mut self, _request: &[u8], _deadline: Instant) -> Result<(), Broken> {
        Ok(())
    }

    /// Sends one request (staged or not); fails once `deadline` passes.
    fn send(&mut self, request: &[u8], deadline: Instant) -> Result<(), Broken>;

    /// Waits for the next reply until `deadline`.
    fn receive(&mut self, deadline: Instant) -> Result<Answer, Broken>;

    /// One request and its reply, by `deadline`: [`Endpoint::send`], then
    /// [`Endpoint::receive`], unless the endpoint's stack takes the reply while the
    /// request still goes out.
    fn exchange(&mut self, request: &[u8], deadline: Instant) -> Result<Answer, Broken> {
        self.send(request, deadline)?;
        self.receive(deadline)
    }

    /// The reply last received. Read after the timer stops, so an endpoint that hands out
    /// a borrowed view of its stack's buffer adds no copy to the round trip.
    fn reply(&mut self) -> Result<&[u8], Broken>;

    /// True when messages may be lost in transit: a late reply to an earlier request may
    /// then arrive, and is skipped.
    fn is_lossy(&self) -> bool {
        false
    }

    /// The peer process, for failure messages that say what became of it.
    fn peer(&mut self) -> &mut PeerProcess;

    /// Tells the peer to stop and expects a clean exit within
    /// [`GOODBYE_WITHIN`](crate::spawn::GOODBYE_WITHIN).
    fn goodbye(&mut self) -> Result<(), Failure>;
}

/// What the requests are: stamped payload bytes, or sensor frames through a codec.
pub(crate) enum Requests {
    Payload(Payload),
    Frames(Box<CodecWork>),
}

impl Requests {
    /// Stamped payload bytes of `len` from `seed`.
    pub(crate) fn payload(seed: u64, len: usize) -> Self {
        Requests::Payload(Payload::new(seed, len))
    }

    /// Sensor frames in `codec`'s format, whose blob is `len` bytes from `seed`.
    pub(crate) fn frames(codec: CodecKind, seed: u64, len: usize) -> Self {
        Requests::Frames(Box::new(CodecWork::new(codec, seed, len)))
    }
}

/// Runs the cell's round trips (warm-up, then measured) through `endpoint`, checks every
/// reply, says goodbye, and counts into `tally`.
pub(crate) fn measure(
    cell: &Cell,
    limits: Limits,
    endpoint: &mut dyn Endpoint,
    mut requests: Requests,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let total = cell.warmup.checked_add(cell.iterations).ok_or_else(|| {
        setup_failure(format!(
            "warmup {} + iterations {} overflow a 64-bit count",
            cell.warmup, cell.iterations
        ))
    })?;
    let failed = |endpoint: &mut dyn Endpoint, index: u64, (kind, what): Broken| {
        let what = match kind {
            FailureKind::Timeout => format!("{what} (timeout {:?})", limits.timeout),
            _ => what,
        };
        round_trip_failure(endpoint.peer(), (index, total, cell.warmup), kind, what)
    };
    let mut lost_in_a_row = 0;
    tally.peer_pids = vec![endpoint.peer().pid()];
    let count_label = tally.counting.as_ref().map(|c| c.measuring_label());
    let progress = tally.progress.clone();
    if let (Requests::Frames(work), Some(counting)) = (&mut requests, &tally.counting) {
        work.count_with(counting.codec_labels());
    }
    for index in 0..total {
        let measured = index >= cell.warmup;
        if let (true, Some(floor)) = (measured, &mut tally.floor) {
            let peer = endpoint.peer();
            floor.before_round_trip(index - cell.warmup, || peer.pause());
        }
        if let (true, Some(own)) = (measured, &mut tally.own_setup) {
            let peer = endpoint.peer();
            own.before_round_trip(index - cell.warmup, || peer.pause());
        }
        match &mut requests {
            Requests::Payload(payload) => {
                payload.stamp(index);
                endpoint
                    .stage(payload.bytes(), Instant::now() + limits.timeout)
                    .map_err(|broken| failed(endpoint, index, broken))?;
            }
            Requests::Frames(work) => work.prepare(index),
        }
        // A measured round trip's instructions are counted (under QEMU's plugin) from here
        // to its end, the reply check left out.
        let counted = count_label.filter(|_| measured);
        if let Some(label) = counted {
            ipc_matrix_count_window::open(label);
        }
        // For a codec cell the round trip starts before encoding and ends after decoding.
        let started = Instant::now();
        let request = match &mut requests {
            Requests::Payload(payload) => payload.bytes(),
            Requests::Frames(work) => work.encode(measured),
        };
        // From the round trip's start: one clock read less inside the timed region.
        let deadline = started + limits.timeout;
        let mut answer = endpoint
            .exchange(request, deadline)
            .map_err(|broken| failed(endpoint, index, broken))?;
        let answer = loop {
            // A late reply to an earlier, already lost request: not this one's.
            if let (Answer::Replied, Requests::Payload(payload)) = (&answer, &requests) {
                if endpoint.is_lossy() {
                    let reply = match endpoint.reply() {
                        Ok(reply) => reply,
                        Err(broken) => return Err(failed(endpoint, index, broken)),
                    };
                    if let Some(earlier) = payload.index_of(reply).filter(|&i| i < index) {
                        // Every byte a peer sends is checked, late ones too: a late reply
                        // must be its own request's echo.
                        if let Err(mismatch) = payload.check_as_request(earlier, reply) {
                            let what = format!(
                                "a late reply carrying round trip {earlier}'s stamp differs from that request: {mismatch}"
                            );
                            let kind = mismatch.failure_kind();
                            return Err(failed(endpoint, earlier, (kind, what)));
                        }
                        answer = endpoint
                            .receive(deadline)
                            .map_err(|broken| failed(endpoint, index, broken))?;
                        continue;
                    }
                }
            }
            break answer;
        };
        let decoded = match (&answer, &mut requests) {
            (Answer::Replied, Requests::Frames(work)) => {
                let reply = match endpoint.reply() {
                    Ok(reply) => reply,
                    Err(broken) => return Err(failed(endpoint, index, broken)),
                };
                Some(work.decode(reply, measured))
            }
            _ => None,
        };
        let round_trip = started.elapsed();
        if let Some(label) = counted {
            ipc_matrix_count_window::close(label);
        }
        if let Requests::Frames(work) = &mut requests {
            work.record_times();
        }
        // For a progress display: after the timer and the counting window, one relaxed
        // store, nothing the round trips measure.
        if let Some(done) = &progress {
            done.store(index + 1, Ordering::Relaxed);
        }
        if let Answer::Lost = answer {
            tally.lost += 1;
            lost_in_a_row += 1;
            if lost_in_a_row >= LOST_IN_A_ROW_LIMIT {
                let what = format!(
                    "{lost_in_a_row} replies in a row were not received within {:?}; the peer is unresponsive",
                    limits.timeout
                );
                return Err(failed(endpoint, index, (FailureKind::Timeout, what)));
            }
            continue;
        }
        lost_in_a_row = 0;
        match (&requests, decoded) {
            (Requests::Frames(work), Some(decoded)) => {
                let codec = work.codec();
                let frame = decoded.map_err(|e| {
                    let what = format!("the reply is not a {codec} sensor frame: {e}");
                    failed(endpoint, index, (FailureKind::Protocol, what))
                })?;
                if let Some(difference) = work.difference(&frame) {
                    let what = format!("the decoded reply differs at {difference}");
                    return Err(failed(endpoint, index, (FailureKind::Mismatch, what)));
                }
            }
            (Requests::Payload(payload), _) => {
                let reply = match endpoint.reply() {
                    Ok(reply) => reply,
                    Err(broken) => return Err(failed(endpoint, index, broken)),
                };
                if let Err(mismatch) = compare(payload.bytes(), reply) {
                    let kind = mismatch.failure_kind();
                    return Err(failed(endpoint, index, (kind, mismatch.to_string())));
                }
            }
            (Requests::Frames(_), None) => unreachable!("a replied frame is decoded"),
        }
        tally.count_round_trip(index, cell.warmup, round_trip);
    }

    if let Requests::Frames(work) = requests {
        tally.codec_stages = Some(CodecStages {
            encode_ns: work.encode_times.stats(),
            decode_ns: work.decode_times.stats(),
        });
    }
    let allowed = (limits.max_loss * total as f64).floor() as u64;
    if tally.lost > allowed {
        return Err(Failure {
            kind: FailureKind::Timeout,
            round_trip: None,
            reason: format!(
                "{} of {total} replies were lost; at most {allowed} may be (max_loss {})",
                tally.lost, limits.max_loss
            ),
        });
    }
    endpoint.goodbye()
}
