//! Fan-out and fan-in cells (seed 003's one-to-two and two-to-one): sensor frames between
//! the measuring process and two peer processes, with dropped frames counted.
//!
//! - Fan-out: the measuring side publishes every frame to two subscribers; each checks it
//!   field by field and acknowledges it with its one-way latency. The cell's latency of a
//!   frame is the slower subscriber's. A frame not acknowledged before its deadline is
//!   dropped (a late acknowledgement is recognised by its sequence number and skipped).
//! - Fan-in: two publishers stream frames as fast as their channels take them; the
//!   measuring side reads them in turn, checks each field by field and times its one-way
//!   latency from the stamp the publisher wrote (CLOCK_MONOTONIC is shared by all
//!   processes of a machine). A sequence gap, or a frame later than its deadline, is
//!   dropped. Queueing in the channels is part of the latency, as it is for a real
//!   subscriber that is outpaced.

use crate::codec_work::FRAME_SLACK;
use crate::context::{RunOptions, Tally};
use crate::counting::PeerCounting;
use crate::failure::{
    channel_of, expect_running_before_goodbye, peer_epilogue, setup_failure, transport_failure_kind,
};
use crate::peer::{monotonic_ns, ConfigError, PeerConfig, PeerError, ACK_BYTES};
use crate::spawn::{PeerProcess, GOODBYE_WITHIN};
use ipc_matrix_codec::{Codec, FrameCodec, SensorFrame};
use ipc_matrix_results::{Failure, FailureKind};
use ipc_matrix_spec::{Cell, Fan};
use ipc_matrix_transport::{listen, Channel, ListenOptions, TransportError};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

const PEERS: usize = 2;

/// Frames in a row a subscriber may leave unacknowledged before it counts as stuck.
const DROPPED_IN_A_ROW_LIMIT: u64 = 3;

/// The part a peer plays in a fan cell.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Role {
    /// Fan-out: checks every frame against the one `seed` and `payload` stand for and
    /// acknowledges it with its one-way latency.
    Subscriber { seed: u64, payload: usize },
    /// Fan-in: streams `frames` frames from source `source`, then says goodbye.
    Publisher {
        seed: u64,
        payload: usize,
        source: u32,
        frames: u64,
    },
}

/// A peer process and the channel to it.
struct Linked {
    peer: PeerProcess,
    channel: Box<dyn Channel>,
}

fn sizes(cell: &Cell) -> Result<(usize, usize), Failure> {
    let payload = usize::try_from(cell.payload_bytes).map_err(|_| {
        setup_failure(format!(
            "{} bytes do not fit in memory here",
            cell.payload_bytes
        ))
    })?;
    Ok((payload, payload + FRAME_SLACK))
}

/// Warm-up and measured frames together; checked, so a count that overflows is a set-up
/// failure rather than a cell that measured nothing.
fn total_frames(cell: &Cell) -> Result<u64, Failure> {
    cell.warmup.checked_add(cell.iterations).ok_or_else(|| {
        setup_failure(format!(
            "warmup {} + iterations {} overflow a 64-bit count",
            cell.warmup, cell.iterations
        ))
    })
}

/// Starts one peer per role and connects to each; their pids go to `tally`, whose
/// counting (per frame of each process) they share.
fn link(
    cell: &Cell,
    fan: &Fan,
    options: &RunOptions,
    roles: [Role; PEERS],
    tally: &mut Tally,
) -> Result<Vec<Linked>, Failure> {
    tally.count_per_window = true;
    let (_, max_message) = sizes(cell)?;
    let kind = channel_of(cell)?;
    let mut linked = Vec::new();
    for role in roles {
        let acceptor = listen(
            kind,
            ListenOptions {
                wake: cell.wake,
                max_message: max_message.max(ACK_BYTES),
                bind: None,
            },
        )
        .map_err(|e| setup_failure(format!("opening the {kind} channel: {e}")))?;
        // Publishers and subscribers ignore the reply delay; each peer's error names its index.
        let mut config = options.peer_config(
            cell,
            acceptor.address(),
            max_message + 1024,
            None,
            role,
            fan.frame_deadline,
        );
        config.count = tally.peer_counting(cell.warmup);
        let mut peer = PeerProcess::spawn(&options.peer_program, &config, &[])
            .map_err(|e| setup_failure(format!("starting peer {}: {e}", linked.len())))?;
        tally.peer_pids.push(peer.pid());
        let channel = acceptor
            .accept(peer.pid(), Instant::now() + options.setup_timeout)
            .map_err(|e| {
                let mut failure = setup_failure(format!("connecting peer {}: {e}", linked.len()));
                failure.reason.push_str(&peer_epilogue(&mut peer));
                failure
            })?;
        linked.push(Linked { peer, channel });
    }
    Ok(linked)
}

/// A failure at frame `index` of peer `k`, with what became of that peer.
fn failure(
    linked: &mut [Linked],
    k: usize,
    index: u64,
    kind: FailureKind,
    what: String,
) -> Failure {
    let epilogue = peer_epilogue(&mut linked[k].peer);
    Failure {
        kind,
        round_trip: Some(index),
        reason: format!("frame {index}, peer {k}: {what}{epilogue}"),
    }
}

/// A transport error while `doing` something with peer `k` at frame `index`.
fn transport_failure(
    linked: &mut [Linked],
    k: usize,
    index: u64,
    doing: &str,
    e: &TransportError,
) -> Failure {
    let kind = transport_failure_kind(e);
    failure(linked, k, index, kind, format!("{doing}: {e}"))
}

/// Says goodbye to every peer and expects each to exit cleanly.
fn goodbye(linked: &mut [Linked]) -> Result<(), Failure> {
    let deadline = Instant::now() + GOODBYE_WITHIN;
    for (k, link) in linked.iter_mut().enumerate() {
        expect_running_before_goodbye(
            &mut link.peer,
            &format!("peer {k}, a process the cell started"),
        )?;
        let sent = link.channel.send(&[], deadline);
        let status = link.peer.wait_until(deadline);
        if sent.is_err() || !status.is_some_and(|s| s.success()) {
            let epilogue = peer_epilogue(&mut link.peer);
            return Err(Failure {
                kind: FailureKind::Shutdown,
                round_trip: None,
                reason: format!("peer {k} did not stop cleanly after the last frame{epilogue}"),
            });
        }
    }
    Ok(())
}

fn enforce_loss(fan: &Fan, total: u64, dropped: u64) -> Result<(), Failure> {
    let sent = total.saturating_mul(PEERS as u64);
    let allowed = (fan.max_loss * sent as f64).floor() as u64;
    if dropped > allowed {
        return Err(Failure {
            kind: FailureKind::Timeout,
            round_trip: None,
            reason: format!(
                "{dropped} of {} frames were dropped; at most {allowed} may be (max_loss {})",
                sent, fan.max_loss
            ),
        });
    }
    Ok(())
}

pub(crate) fn fan_out(
    cell: &Cell,
    fan: &Fan,
    options: &RunOptions,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let codec: Codec = fan.codec;
    let (payload, _) = sizes(cell)?;
    let role = Role::Subscriber {
        seed: cell.seed,
        payload,
    };
    let mut linked = link(cell, fan, options, [role; PEERS], tally)?;
    let count_label = tally.counting.as_ref().map(|c| c.measuring_label());
    let mut frame = SensorFrame::sample(cell.seed, 0, payload);
    let (mut encoded, mut ack) = (Vec::new(), Vec::new());
    let total = total_frames(cell)?;
    let mut dropped_in_a_row = [0u64; PEERS];
    let started = Instant::now();
    for index in 0..total {
        // A measured frame's instructions are counted (under QEMU's plugin) from its
        // encoding to its last acknowledgement.
        let counted = count_label.filter(|_| index >= cell.warmup);
        if let Some(label) = counted {
            ipc_matrix_count_window::open(label);
        }
        frame.header.sequence = index;
        frame.header.sent_at_ns = monotonic_ns();
        codec.encode(&frame, &mut encoded);
        let deadline = Instant::now() + fan.frame_deadline;
        for k in 0..PEERS {
            if let Err(e) = linked[k].channel.send(&encoded, deadline) {
                return Err(transport_failure(&mut linked, k, index, "sending", &e));
            }
        }
        // The slowest acknowledgement so far and its subscriber; none once one is missing.
        let mut slowest = Some((0u64, 0usize));
        for k in 0..PEERS {
            let latency = loop {
                match linked[k].channel.recv(&mut ack, ACK_BYTES, deadline) {
                    Ok(()) if ack.len() == ACK_BYTES => {
                        let word = |at: usize| {
                            u64::from_le_bytes(ack[at..at + 8].try_into().expect("8 bytes"))
                        };
                        match word(0) {
                            // The late acknowledgement of a frame already counted as dropped.
                            sequence if sequence < index => continue,
                            sequence if sequence == index => break Some(word(8)),
                            sequence => {
                                return Err(failure(
                                    &mut linked,
                                    k,
                                    index,
                                    FailureKind::Protocol,
                                    format!(
                                        "acknowledged frame {sequence}, which was not sent yet"
                                    ),
                                ))
                            }
                        }
                    }
                    Ok(()) => {
                        let what = format!(
                            "an acknowledgement of {} bytes, expected {ACK_BYTES}",
                            ack.len()
                        );
                        return Err(failure(&mut linked, k, index, FailureKind::Protocol, what));
                    }
                    Err(TransportError::Timeout { .. }) => break None,
                    Err(e) => {
                        return Err(transport_failure(
                            &mut linked,
                            k,
                            index,
                            "waiting for the acknowledgement",
                            &e,
                        ));
                    }
                }
            };
            match latency {
                Some(ns) => {
                    dropped_in_a_row[k] = 0;
                    slowest = slowest.map(|s| if ns > s.0 { (ns, k) } else { s });
                }
                None => {
                    tally.lost += 1;
                    slowest = None;
                    dropped_in_a_row[k] += 1;
                    if dropped_in_a_row[k] >= DROPPED_IN_A_ROW_LIMIT {
                        let what = format!(
                            "{DROPPED_IN_A_ROW_LIMIT} frames in a row were not acknowledged within {:?}; the subscriber is stuck",
                            fan.frame_deadline
                        );
                        return Err(failure(&mut linked, k, index, FailureKind::Timeout, what));
                    }
                }
            }
        }
        if let Some(label) = counted {
            ipc_matrix_count_window::close(label);
        }
        if let Some((ns, k)) = slowest {
            // A one-way latency longer than the frame has existed is a damaged (or lying)
            // acknowledgement, not a measurement.
            let age = monotonic_ns().saturating_sub(frame.header.sent_at_ns);
            if ns > age {
                let what = format!(
                    "acknowledged with a one-way latency of {ns} ns, longer than the {age} ns \
                     since the frame was stamped"
                );
                return Err(failure(&mut linked, k, index, FailureKind::Protocol, what));
            }
            let latency = Duration::from_nanos(ns);
            if index == 0 {
                tally.first_round_trip = Some(latency);
            }
            if index >= cell.warmup {
                tally.recorder.record(latency);
            }
        }
    }
    tally.measured_time = started.elapsed();
    enforce_loss(fan, total, tally.lost)?;
    goodbye(&mut linked)
}

pub(crate) fn fan_in(
    cell: &Cell,
    fan: &Fan,
    options: &RunOptions,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let codec: Codec = fan.codec;
    let (payload, max_message) = sizes(cell)?;
    let total = total_frames(cell)?;
    let publisher = |source: u32| Role::Publisher {
        seed: cell.seed,
        payload,
        source,
        frames: total,
    };
    let mut linked = link(cell, fan, options, [publisher(0), publisher(1)], tally)?;
    let count_label = tally.counting.as_ref().map(|c| c.measuring_label());
    let mut expected: Vec<SensorFrame> = (0..PEERS as u32)
        .map(|source| {
            let mut frame = SensorFrame::sample(cell.seed, 0, payload);
            frame.header.source_id = source;
            frame
        })
        .collect();
    let mut next = [0u64; PEERS];
    let mut done = [false; PEERS];
    let mut message = Vec::new();
    let started = Instant::now();
    // Read the two streams in turn until both have said goodbye.
    while done.iter().any(|d| !d) {
        for k in 0..PEERS {
            if done[k] {
                continue;
            }
            let index = next[k];
            // Only a publisher's first frame may also wait for it to start; after that a
            // stopped publisher fails within the cell's frame deadline.
            let allowance = if index == 0 {
                options.setup_timeout
            } else {
                Duration::ZERO
            };
            let deadline = Instant::now() + allowance + fan.frame_deadline;
            // A measured frame's instructions are counted from its receipt to its check.
            let counted = count_label.filter(|_| index >= cell.warmup && index < total);
            if let Some(label) = counted {
                ipc_matrix_count_window::open(label);
            }
            if let Err(e) = linked[k]
                .channel
                .recv(&mut message, max_message + 1024, deadline)
            {
                return Err(transport_failure(
                    &mut linked,
                    k,
                    index,
                    "waiting for the frame",
                    &e,
                ));
            }
            if message.is_empty() {
                if index < total {
                    let what = format!("the publisher stopped after {index} of {total} frames");
                    return Err(failure(&mut linked, k, index, FailureKind::Protocol, what));
                }
                done[k] = true;
                continue;
            }
            let arrived = monotonic_ns();
            let frame = match codec.decode(&message) {
                Ok(frame) => frame,
                Err(e) => {
                    let what = format!("not a {codec} sensor frame: {e}");
                    return Err(failure(&mut linked, k, index, FailureKind::Protocol, what));
                }
            };
            let sequence = frame.header.sequence;
            if sequence < index {
                let what = format!("frame {sequence} arrived again or out of order");
                return Err(failure(&mut linked, k, index, FailureKind::Protocol, what));
            }
            tally.lost += sequence - index; // a gap: frames never delivered
            expected[k].header.sequence = sequence;
            expected[k].header.sent_at_ns = frame.header.sent_at_ns;
            if let Some(difference) = expected[k].first_difference(&frame) {
                let what = format!("the frame differs at {difference}");
                return Err(failure(&mut linked, k, index, FailureKind::Mismatch, what));
            }
            if let Some(label) = counted {
                ipc_matrix_count_window::close(label);
            }
            let latency = Duration::from_nanos(arrived.saturating_sub(frame.header.sent_at_ns));
            if latency > fan.frame_deadline {
                tally.lost += 1; // delivered, but after its deadline
            } else if sequence >= cell.warmup {
                tally.recorder.record(latency);
            }
            if sequence == 0 && k == 0 {
                tally.first_round_trip = Some(latency);
            }
            next[k] = sequence + 1;
        }
    }
    tally.measured_time = started.elapsed();
    enforce_loss(fan, total, tally.lost)?;
    // Publishers exit after their goodbye; make sure they did, cleanly.
    let deadline = Instant::now() + GOODBYE_WITHIN;
    for (k, link) in linked.iter_mut().enumerate() {
        if !link.peer.wait_until(deadline).is_some_and(|s| s.success()) {
            let epilogue = peer_epilogue(&mut link.peer);
            return Err(Failure {
                kind: FailureKind::Shutdown,
                round_trip: None,
                reason: format!(
                    "publisher {k} did not exit cleanly after its last frame{epilogue}"
                ),
            });
        }
    }
    Ok(())
}

/// The peer's side: the part its role gives it, with the cell's codec.
pub(crate) fn serve(config: &PeerConfig) -> Result<(), PeerError> {
    let mut channel = config.connect()?;
    let role: Role = config.role()?;
    let Some(codec) = config.codec else {
        return Err(ConfigError::NoCodec {
            role: format!("{role:?}"),
        }
        .into());
    };
    match role {
        Role::Subscriber { seed, payload } => {
            subscribe(channel.as_mut(), config, codec, seed, payload)
        }
        Role::Publisher {
            seed,
            payload,
            source,
            frames,
        } => publish(
            channel.as_mut(),
            config,
            codec,
            (seed, payload, source),
            frames,
        ),
    }
}

/// Fan-out subscriber: check each frame, acknowledge it with its one-way latency.
fn subscribe(
    channel: &mut dyn Channel,
    config: &PeerConfig,
    codec: Codec,
    seed: u64,
    payload: usize,
) -> Result<(), PeerError> {
    let mut expected = SensorFrame::sample(seed, 0, payload);
    let mut message = Vec::new();
    for index in 0u64.. {
        let deadline = Instant::now() + config.idle_timeout;
        // Open through the acknowledgement; the goodbye's window is never closed, so
        // never counted.
        PeerCounting::open(config.count, index);
        channel
            .recv(&mut message, config.limit, deadline)
            .map_err(|source| PeerError::ReceivingFrame { index, source })?;
        if message.is_empty() {
            return Ok(());
        }
        let arrived = monotonic_ns();
        let frame = codec
            .decode(&message)
            .map_err(|source| PeerError::NotAFrame {
                what: "frame",
                index,
                codec,
                source,
            })?;
        expected.header.sequence = frame.header.sequence;
        expected.header.sent_at_ns = frame.header.sent_at_ns;
        if let Some(difference) = expected.first_difference(&frame) {
            return Err(PeerError::FrameDiffers { index, difference });
        }
        let mut ack = frame.header.sequence.to_le_bytes().to_vec();
        ack.extend_from_slice(
            &arrived
                .saturating_sub(frame.header.sent_at_ns)
                .to_le_bytes(),
        );
        if let Some(fault) = config.fault.filter(|f| f.at == index) {
            fault.commit(&mut ack, channel.chunk_size())?;
        }
        channel
            .send(&ack, deadline)
            .map_err(|source| PeerError::Acknowledging { index, source })?;
        PeerCounting::close(config.count, index);
    }
    Ok(())
}

/// Fan-in publisher: stream stamped frames as fast as the channel takes them.
fn publish(
    channel: &mut dyn Channel,
    config: &PeerConfig,
    codec: Codec,
    (seed, payload, source): (u64, usize, u32),
    frames: u64,
) -> Result<(), PeerError> {
    let mut frame = SensorFrame::sample(seed, 0, payload);
    frame.header.source_id = source;
    let mut encoded = Vec::new();
    for sequence in 0..frames {
        PeerCounting::open(config.count, sequence);
        frame.header.sequence = sequence;
        frame.header.sent_at_ns = monotonic_ns();
        codec.encode(&frame, &mut encoded);
        if let Some(fault) = config.fault.filter(|f| f.at == sequence) {
            fault.commit(&mut encoded, channel.chunk_size())?;
        }
        channel
            .send(&encoded, Instant::now() + config.idle_timeout)
            .map_err(|source| PeerError::SendingFrame {
                index: sequence,
                source,
            })?;
        PeerCounting::close(config.count, sequence);
    }
    channel
        .send(&[], Instant::now() + config.idle_timeout)
        .map_err(PeerError::SayingGoodbye)
}
