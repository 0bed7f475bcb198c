//! This repository's nextest door (`ipc_matrix::door`): one test per cell of matrix.yaml
//! (`echo::tcp::200B`), plus the harness's own fault-injection tests
//! (`fault::tcp::flip-byte`), which prove that every transport's cell fails, with the
//! right reason, when its peer misbehaves.

use ipc_matrix::door::faults::{
    check_fault, echo_fault_trials, echo_variants, failure_under_fault, fault_cell, loaned_cells,
    reported_offset, timeout_for, took_the_asked_path, FAULT_AT,
};
use ipc_matrix::door::CompiledPath;
use ipc_matrix_codec::{FrameCodec, SensorFrame};
use ipc_matrix_results::FailureKind;
use ipc_matrix_scenario::{run_cell, Fault, FaultKind, RunOptions, Spot};
use ipc_matrix_spec::{
    Calls, Cell, ChannelKind, CodecKind, Echoes, Fan, Frames, Load, LoadShape, LogSink, LogWrite,
    ScenarioKind, TransportKind, WakeMode, Work, CELL_GROUP_FAULT,
};
use libtest_mimic::{Failed, Trial};
use std::process::ExitCode;
use std::time::Duration;

/// Size classes when this process is counted (see `CountedHeap`); glibc's malloc otherwise.
#[global_allocator]
static HEAP: ipc_matrix_scenario::CountedHeap = ipc_matrix_scenario::CountedHeap::new();

fn main() -> ExitCode {
    let mut trials = echo_fault_trials(&ChannelKind::ALL);
    trials.extend(fault_trials());
    static CRATE_DIR: CompiledPath = CompiledPath::new(env!("CARGO_MANIFEST_DIR"));
    ipc_matrix::door::run(CRATE_DIR.as_path(), trials)
}

/// The fault trials beyond the echo ones (`ipc_matrix::door::faults`): other kinds' peers,
/// chunk edges, overflows.
fn fault_trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    // The ZeroMQ REP peer and the Cap'n Proto RPC server, over TCP and a local socket:
    // the same faults, the same verdicts.
    for scenario in [ScenarioKind::ReqRep, ScenarioKind::Rpc] {
        for transport in [TransportKind::Tcp, TransportKind::Local] {
            for kind in FaultKind::ALL {
                let mut cell = fault_cell(transport, None);
                cell.work = work_of(scenario, transport);
                let name = format!(
                    "{CELL_GROUP_FAULT}::{}-{transport}::{}",
                    scenario.as_str(),
                    kind.as_str()
                );
                cell.id = name.clone();
                trials.push(Trial::test(name, move || check_fault(&cell, kind)));
            }
        }
    }
    // A codec cell's peer decodes and re-encodes: a damaged frame must be caught by the
    // decoder (truncated) or by the field-by-field check (a flipped blob byte).
    for codec in CodecKind::ALL {
        for kind in [FaultKind::FlipByte, FaultKind::Truncate] {
            let mut cell = fault_cell(TransportKind::Tcp, None);
            cell.work = Work::Codec(Frames {
                codec,
                timeout: timeout_for(TransportKind::Tcp),
            });
            cell.payload_bytes = 1000;
            let name = format!("{CELL_GROUP_FAULT}::codec-{codec}::{}", kind.as_str());
            cell.id = name.clone();
            trials.push(Trial::test(name, move || check_codec_fault(&cell, kind)));
        }
    }
    // A fan-out subscriber that dies, hangs or garbles its acknowledgement.
    for kind in [FaultKind::Exit, FaultKind::Stall, FaultKind::Truncate] {
        let mut cell = fault_cell(TransportKind::Tcp, None);
        cell.work = Work::FanOut(Fan {
            codec: CodecKind::Capnp,
            frame_deadline: Duration::from_millis(300),
            max_loss: 0.0,
        });
        let name = format!("{CELL_GROUP_FAULT}::fan-out::{}", kind.as_str());
        cell.id = name.clone();
        trials.push(Trial::test(name, move || check_fan_out_fault(&cell, kind)));
    }
    // A fan-in publisher that stops: the cell fails on the frame's own deadline, not
    // after the set-up allowance.
    let mut cell = fault_cell(TransportKind::Tcp, None);
    cell.work = Work::FanIn(Fan {
        codec: CodecKind::Capnp,
        frame_deadline: Duration::from_millis(300),
        max_loss: 0.0,
    });
    cell.id = format!("{CELL_GROUP_FAULT}::fan-in::stall");
    trials.push(Trial::test(cell.id.clone(), move || {
        let options = RunOptions {
            fault: Some(Fault::new(FaultKind::Stall, FAULT_AT)),
            setup_timeout: Duration::from_secs(20),
            ..RunOptions::default()
        };
        let result = run_cell(&cell, &options);
        let failure = result
            .outcome
            .failure
            .ok_or("passed with a stalled publisher")?;
        if failure.kind != FailureKind::Timeout || failure.round_trip != Some(FAULT_AT) {
            return Err(format!(
                "expected a timeout at frame {FAULT_AT}, got {:?} at {:?}: {}",
                failure.kind, failure.round_trip, failure.reason
            )
            .into());
        }
        // The stalled frame's deadline is its own; only a first frame may also wait
        // out the set-up allowance (20 s here).
        if result.wall_seconds >= options.setup_timeout.as_secs_f64() {
            return Err(format!(
                "failed only after {:.1}s: the set-up allowance was applied to frame {FAULT_AT}",
                result.wall_seconds
            )
            .into());
        }
        println!("{}: failed as expected: {}", cell.id, failure.reason);
        Ok(())
    }));
    // A UDP echo server under load that garbles, cuts, stops answering or dies.
    for kind in [
        FaultKind::FlipByte,
        FaultKind::Truncate,
        FaultKind::Stall,
        FaultKind::Exit,
    ] {
        let mut cell = fault_cell(TransportKind::Udp, None);
        cell.work = Work::UdpLoad(Load {
            shape: LoadShape {
                clients: 1,
                server_threads: 2,
                duration: Duration::from_millis(800),
            },
            timeout: Duration::from_millis(300),
            max_loss: 0.0,
        });
        let name = format!("{CELL_GROUP_FAULT}::udp-load::{}", kind.as_str());
        cell.id = name.clone();
        trials.push(Trial::test(name, move || check_load_fault(&cell, kind)));
    }
    // A log file that lost a line or holds two lines swapped (damaged after the writer
    // closed it): the read-back check must name the line.
    for sink in [LogSink::Buffered, LogSink::TracingNonBlocking] {
        for kind in [FaultKind::Truncate, FaultKind::FlipByte] {
            let mut cell = fault_cell(TransportKind::File, None);
            cell.work = Work::Logging(LogWrite {
                sink,
                budget: timeout_for(TransportKind::File),
            });
            cell.payload_bytes = 64;
            cell.iterations = 50;
            cell.warmup = 0;
            let name = format!("{CELL_GROUP_FAULT}::logging-{sink}::{}", kind.as_str());
            cell.id = name.clone();
            trials.push(Trial::test(name, move || check_logging_fault(&cell, kind)));
        }
    }
    // A file system too slow for the cell's budget: the write stops there, named.
    let mut cell = fault_cell(TransportKind::File, None);
    cell.work = Work::Logging(LogWrite {
        sink: LogSink::WritePerLine,
        budget: Duration::from_millis(1),
    });
    cell.payload_bytes = 64;
    cell.iterations = 300_000;
    cell.id = format!("{CELL_GROUP_FAULT}::logging-write-per-line::deadline");
    trials.push(Trial::test(cell.id.clone(), move || {
        let failure = run_cell(&cell, &RunOptions::default())
            .outcome
            .failure
            .ok_or("300,000 lines were written within 1 ms")?;
        // Either the check between batches stops it, or, on a loaded machine, the
        // watchdog at twice the budget does first: both name the budget and the cell.
        if failure.kind != FailureKind::Timeout
            || !(failure
                .reason
                .contains("took longer than the cell's budget (1ms)")
                || failure.reason.contains("x the cell's budget of 1ms"))
            || !failure.reason.contains(&cell.id)
        {
            return Err(format!(
                "expected a timeout, got {:?}: {}",
                failure.kind, failure.reason
            )
            .into());
        }
        println!("{}: failed as expected: {}", cell.id, failure.reason);
        Ok(())
    }));
    // A write that never returns (the writer stalls at line 500, every sink): the cell
    // fails at twice its budget, naming the line's batch, and does not wait for it.
    for sink in [
        LogSink::Buffered,
        LogSink::WritePerLine,
        LogSink::TracingBlocking,
        LogSink::TracingNonBlocking,
    ] {
        let mut cell = fault_cell(TransportKind::File, None);
        let budget = Duration::from_millis(300);
        cell.work = Work::Logging(LogWrite { sink, budget });
        cell.payload_bytes = 64;
        cell.iterations = 300_000;
        cell.warmup = 0;
        cell.id = format!("{CELL_GROUP_FAULT}::logging-{sink}::stall");
        trials.push(Trial::test(cell.id.clone(), move || {
            let options = RunOptions {
                fault: Some(Fault::new(FaultKind::Stall, 500)),
                ..RunOptions::default()
            };
            let started = std::time::Instant::now();
            let result = run_cell(&cell, &options);
            let took = started.elapsed();
            let failure = result
                .outcome
                .failure
                .ok_or("a logging cell whose write never returned passed")?;
            let expected = [
                cell.id.as_str(),
                "the batch of lines from line 0 of 300000 did not end within 600ms",
                "budget of 300ms",
            ];
            if failure.kind != FailureKind::Timeout
                || !expected.iter().all(|e| failure.reason.contains(e))
            {
                return Err(format!(
                    "expected a timeout saying {expected:?}, got {:?}: {}",
                    failure.kind, failure.reason
                )
                .into());
            }
            // Twice the budget, plus building the lines and the probes around the cell.
            if took > Duration::from_secs(5) {
                return Err(format!("the cell took {took:?} to fail").into());
            }
            println!(
                "{}: failed as expected in {took:?}: {}",
                cell.id, failure.reason
            );
            Ok(())
        }));
    }
    trials.extend(edge_trials());
    trials.extend(overflow_trials());
    trials.extend(progress_trials());
    // A payload no machine here holds: refused before anything is allocated.
    let mut cell = fault_cell(TransportKind::Tcp, None);
    cell.work = work_of(ScenarioKind::Bulk, TransportKind::Tcp);
    cell.payload_bytes = 1 << 40;
    cell.id = format!("{CELL_GROUP_FAULT}::memory::bulk-1TiB");
    trials.push(Trial::test(cell.id.clone(), move || {
        let failure = run_cell(&cell, &RunOptions::default())
            .outcome
            .failure
            .ok_or("a 1 TiB round trip passed")?;
        if failure.kind != FailureKind::Setup || !failure.reason.contains("of memory and") {
            return Err(format!(
                "expected a set-up failure naming the memory, got {:?}: {}",
                failure.kind, failure.reason
            )
            .into());
        }
        println!("{}: failed as expected: {}", cell.id, failure.reason);
        Ok(())
    }));
    trials
}

/// The slot of a shared-memory channel sized for a message over 1 MiB: its largest. A
/// longer message streams through in chunks of this size.
const SHM_SLOT: usize = ipc_matrix_transport::SHM_CHUNK;

/// A byte flipped at the edges: the first and the last byte of the reply and one at a
/// seeded offset, on every transport and every request/reply kind; and, where a message
/// travels in chunks (shared memory, in each wake mode), the bytes either side of every
/// chunk boundary. Each must fail its round trip as a mismatch at exactly that offset.
fn edge_trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    let add = |trials: &mut Vec<Trial>, mut cell: Cell, name: String, spot: Spot| {
        let offset = expected_offset(spot, cell.payload_bytes as usize);
        cell.id = name.clone();
        trials.push(Trial::test(name, move || check_flip(&cell, spot, offset)));
    };
    let edges = |name: &str| {
        [
            ("flip-first-byte", Spot::First),
            ("flip-last-byte", Spot::Last),
            ("flip-random-byte", Spot::Random(fnv1a(name))),
        ]
    };
    for (transport, wake) in echo_variants() {
        let cell = fault_cell(transport, wake);
        let prefix = format!("{CELL_GROUP_FAULT}::{}", cell.transport_label());
        for (what, spot) in edges(&prefix) {
            add(&mut trials, cell.clone(), format!("{prefix}::{what}"), spot);
        }
    }
    for (prefix, cell) in loaned_cells(&echo_variants()) {
        for (what, spot) in edges(&prefix) {
            add(&mut trials, cell.clone(), format!("{prefix}::{what}"), spot);
        }
    }
    for wake in [WakeMode::Blocking, WakeMode::BusyPoll] {
        let mut cell = fault_cell(TransportKind::Shm, Some(wake));
        cell.work = work_of(ScenarioKind::Bulk, TransportKind::Shm);
        // Three chunks, the last one of 100 bytes.
        cell.payload_bytes = (2 * SHM_SLOT + 100) as u64;
        cell.payload_label = "2MiB+100B".into();
        let prefix = format!("{CELL_GROUP_FAULT}::{}", cell.transport_label());
        for (what, spot) in [
            ("flip-chunk-0-end", Spot::ChunkEnd(0)),
            ("flip-chunk-1-start", Spot::ChunkStart(1)),
            ("flip-chunk-1-end", Spot::ChunkEnd(1)),
            ("flip-chunk-2-start", Spot::ChunkStart(2)),
            ("flip-chunked-last-byte", Spot::Last),
        ] {
            add(&mut trials, cell.clone(), format!("{prefix}::{what}"), spot);
        }
    }
    for scenario in [ScenarioKind::ReqRep, ScenarioKind::Rpc] {
        for transport in [TransportKind::Tcp, TransportKind::Local] {
            let mut cell = fault_cell(transport, None);
            cell.work = work_of(scenario, transport);
            let prefix = format!("{CELL_GROUP_FAULT}::{}-{transport}", scenario.as_str());
            for (what, spot) in edges(&prefix) {
                add(&mut trials, cell.clone(), format!("{prefix}::{what}"), spot);
            }
        }
    }
    let mut cell = fault_cell(TransportKind::Udp, None);
    cell.work = Work::UdpLoad(Load {
        shape: LoadShape {
            clients: 1,
            server_threads: 2,
            duration: Duration::from_millis(800),
        },
        timeout: Duration::from_millis(300),
        max_loss: 0.0,
    });
    let prefix = format!("{CELL_GROUP_FAULT}::udp-load");
    for (what, spot) in edges(&prefix) {
        add(&mut trials, cell.clone(), format!("{prefix}::{what}"), spot);
    }
    // A codec cell's peer re-encodes the frame, then flips a byte of the encoding: the
    // first (framing) cannot be decoded; the last and a seeded one are blob bytes (1000 B
    // frames carry an 840-byte blob, a multiple of 8, so the encoding ends with it and no
    // padding) and are named by their blob index. Over shared memory, a frame of three
    // chunks is flipped either side of the first boundary.
    for codec in CodecKind::ALL {
        let mut cell = fault_cell(TransportKind::Tcp, None);
        cell.work = Work::Codec(Frames {
            codec,
            timeout: timeout_for(TransportKind::Tcp),
        });
        cell.payload_bytes = 1000;
        let prefix = format!("{CELL_GROUP_FAULT}::codec-{codec}");
        for (what, spot) in edges(&prefix) {
            cell.id = format!("{prefix}::{what}");
            let cell = cell.clone();
            trials.push(Trial::test(cell.id.clone(), move || {
                check_codec_flip(&cell, spot)
            }));
        }
        let mut cell = fault_cell(TransportKind::Shm, Some(WakeMode::Blocking));
        cell.work = Work::Codec(Frames {
            codec,
            timeout: timeout_for(TransportKind::Shm),
        });
        cell.payload_bytes = (2 * SHM_SLOT + 100) as u64;
        let prefix = format!(
            "{CELL_GROUP_FAULT}::codec-{codec}-{}",
            cell.transport_label()
        );
        for (what, spot) in [
            ("flip-chunk-0-end", Spot::ChunkEnd(0)),
            ("flip-chunk-1-start", Spot::ChunkStart(1)),
        ] {
            cell.id = format!("{prefix}::{what}");
            let cell = cell.clone();
            trials.push(Trial::test(cell.id.clone(), move || {
                check_codec_flip(&cell, spot)
            }));
        }
    }
    // Fan-out: a subscriber's acknowledgement (the frame's sequence number, then its
    // one-way latency) with its first byte flipped names a frame not sent yet; with its
    // last byte flipped claims a latency longer than the frame has existed. Fan-in: a
    // publisher's frame that cannot be decoded, or whose last blob byte is wrong.
    for (what, spot, expected, detail) in [
        (
            "flip-first-byte",
            Spot::First,
            FailureKind::Protocol,
            "acknowledged frame 251, which was not sent yet",
        ),
        (
            "flip-last-byte",
            Spot::Last,
            FailureKind::Protocol,
            "ns since the frame was stamped",
        ),
    ] {
        let mut cell = fault_cell(TransportKind::Tcp, None);
        cell.work = work_of(ScenarioKind::FanOut, TransportKind::Tcp);
        cell.id = format!("{CELL_GROUP_FAULT}::fan-out::{what}");
        trials.push(Trial::test(cell.id.clone(), move || {
            check_fan_flip(&cell, spot, expected, detail)
        }));
    }
    for (what, spot, expected, detail) in [
        (
            "flip-first-byte",
            Spot::First,
            FailureKind::Protocol,
            "not a capnp sensor frame",
        ),
        (
            "flip-last-byte",
            Spot::Last,
            FailureKind::Mismatch,
            // 200 B frames carry a 40-byte blob.
            "the frame differs at blob[39]: expected ",
        ),
    ] {
        let mut cell = fault_cell(TransportKind::Tcp, None);
        cell.work = work_of(ScenarioKind::FanIn, TransportKind::Tcp);
        cell.id = format!("{CELL_GROUP_FAULT}::fan-in::{what}");
        trials.push(Trial::test(cell.id.clone(), move || {
            check_fan_flip(&cell, spot, expected, detail)
        }));
    }
    trials
}

/// The offset `spot` names in a reply of `len` bytes, worked out here rather than asked
/// of the fault: chunks are [`SHM_SLOT`] bytes; a random spot is the first SplitMix64
/// word of its seed, modulo the length.
fn expected_offset(spot: Spot, len: usize) -> usize {
    match spot {
        Spot::Middle => len / 2,
        Spot::First => 0,
        Spot::Last => len - 1,
        Spot::ChunkEnd(n) => (n as usize + 1) * SHM_SLOT - 1,
        Spot::ChunkStart(n) => n as usize * SHM_SLOT,
        Spot::Random(seed) => {
            let mut state = seed;
            (ipc_matrix_spec::splitmix64(&mut state) % len as u64) as usize
        }
    }
}

/// FNV-1a of a test's name: each random spot has a seed of its own.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Runs `cell` with its peer flipping the byte at `spot` of reply [`FAULT_AT`]: it must
/// fail that round trip as a mismatch (not a length difference) at exactly `offset`.
fn check_flip(cell: &Cell, spot: Spot, offset: usize) -> Result<(), Failed> {
    let options = RunOptions {
        fault: Some(Fault::flip(spot, FAULT_AT)),
        ..RunOptions::default()
    };
    let result = run_cell(cell, &options);
    took_the_asked_path(cell, &result)?;
    let failure = result
        .outcome
        .failure
        .ok_or_else(|| format!("the cell passed although the peer flipped byte {offset}"))?;
    if failure.kind != FailureKind::Mismatch
        || failure.round_trip != Some(FAULT_AT)
        || reported_offset(&failure.reason) != Some(offset)
    {
        return Err(format!(
            "expected a mismatch at round trip {FAULT_AT}, byte offset {offset}; got {:?} at \
             {:?}, byte offset {:?}: {}",
            failure.kind,
            failure.round_trip,
            reported_offset(&failure.reason),
            failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

/// The reply to [`FAULT_AT`] of a codec cell with its byte at `spot` flipped. A blob byte
/// fails as a mismatch named by its blob index, worked out from where the blob lies in
/// the encoding; any other byte as decoding the damaged encoding here says: a reply that
/// is not a frame, or a frame differing at the field it names.
fn check_codec_flip(cell: &Cell, spot: Spot) -> Result<(), Failed> {
    let Work::Codec(Frames { codec, .. }) = cell.work else {
        unreachable!("a codec cell")
    };
    // The frame of round trip FAULT_AT as the peer re-encodes it (see
    // crates/scenario/src/codec_work.rs: only the header changes per round trip).
    let mut frame = SensorFrame::sample(cell.seed, 0, cell.payload_bytes as usize);
    frame.header.sequence = FAULT_AT;
    frame.header.sent_at_ns = 1_796_000_000_000_000_000 + FAULT_AT;
    let mut encoded = Vec::new();
    codec.encode(&frame, &mut encoded);
    let blob_at = encoded
        .windows(frame.blob.len())
        .position(|w| w == frame.blob)
        .ok_or("the blob is not in the encoding")?;
    let offset = expected_offset(spot, encoded.len());
    let (expected, detail) = if (blob_at..blob_at + frame.blob.len()).contains(&offset) {
        let i = offset - blob_at;
        (
            FailureKind::Mismatch,
            format!(
                "the decoded reply differs at blob[{i}]: expected {:#04x}, got {:#04x}",
                frame.blob[i], !frame.blob[i]
            ),
        )
    } else {
        encoded[offset] ^= 0xff;
        match codec.decode(&encoded) {
            Err(e) => (
                FailureKind::Protocol,
                format!("the reply is not a {codec} sensor frame: {e}"),
            ),
            Ok(damaged) => match frame.first_difference(&damaged) {
                Some(difference) => (
                    FailureKind::Mismatch,
                    format!("the decoded reply differs at {difference}"),
                ),
                None => return Err(format!("byte {offset} carries nothing").into()),
            },
        }
    };
    let options = RunOptions {
        fault: Some(Fault::flip(spot, FAULT_AT)),
        ..RunOptions::default()
    };
    let failure = run_cell(cell, &options)
        .outcome
        .failure
        .ok_or_else(|| format!("the cell passed although the peer flipped byte {offset}"))?;
    if failure.kind != expected
        || failure.round_trip != Some(FAULT_AT)
        || !failure.reason.contains(&detail)
    {
        return Err(format!(
            "expected {expected:?} at round trip {FAULT_AT} saying `{detail}`, got {:?} at \
             {:?}: {}",
            failure.kind, failure.round_trip, failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

/// A fan cell whose peers flip the byte at `spot` of frame (or acknowledgement)
/// [`FAULT_AT`]: `expected` at that frame, saying `detail`.
fn check_fan_flip(
    cell: &Cell,
    spot: Spot,
    expected: FailureKind,
    detail: &str,
) -> Result<(), Failed> {
    let options = RunOptions {
        fault: Some(Fault::flip(spot, FAULT_AT)),
        ..RunOptions::default()
    };
    let failure = run_cell(cell, &options)
        .outcome
        .failure
        .ok_or("the cell passed although its peers flipped a byte")?;
    if failure.kind != expected
        || failure.round_trip != Some(FAULT_AT)
        || !failure.reason.contains(detail)
    {
        return Err(format!(
            "expected {expected:?} at frame {FAULT_AT} saying `{detail}`, got {:?} at {:?}: {}",
            failure.kind, failure.round_trip, failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

/// `warmup + iterations` that overflow 64 bits, one cell of every kind: each must fail at
/// set-up, never pass with nothing measured and never hang.
fn overflow_trials() -> Vec<Trial> {
    let kinds = [
        (ScenarioKind::Echo, TransportKind::Tcp),
        (ScenarioKind::Codec, TransportKind::Tcp),
        (ScenarioKind::Rpc, TransportKind::Tcp),
        (ScenarioKind::ReqRep, TransportKind::Tcp),
        (ScenarioKind::FanOut, TransportKind::Tcp),
        (ScenarioKind::FanIn, TransportKind::Tcp),
        (ScenarioKind::UdpLoad, TransportKind::Udp),
        (ScenarioKind::Logging, TransportKind::File),
    ];
    kinds
        .into_iter()
        .map(|(kind, transport)| {
            let mut cell = fault_cell(transport, None);
            cell.work = work_of(kind, transport);
            cell.iterations = 1;
            cell.warmup = u64::MAX;
            cell.id = format!("{CELL_GROUP_FAULT}::overflow::{}", kind.as_str());
            Trial::test(cell.id.clone(), move || {
                let result = run_cell(&cell, &RunOptions::default());
                let failure = result.outcome.failure.ok_or_else(|| {
                    format!(
                        "passed with warmup {} + iterations 1 ({} round trips measured)",
                        u64::MAX,
                        result.measured_round_trips
                    )
                })?;
                if failure.kind != FailureKind::Setup || !failure.reason.contains("overflow") {
                    return Err(format!(
                        "expected a set-up failure naming the overflow, got {:?}: {}",
                        failure.kind, failure.reason
                    )
                    .into());
                }
                println!("{}: failed as expected: {}", cell.id, failure.reason);
                Ok(())
            })
        })
        .collect()
}

/// The progress hook of every kind that runs the request/reply loop: it advances while
/// the cell runs (a value between none and all is seen from another thread), never goes
/// back, and ends at warm-up + round trips.
fn progress_trials() -> Vec<Trial> {
    [
        ScenarioKind::Echo,
        ScenarioKind::Codec,
        ScenarioKind::Rpc,
        ScenarioKind::ReqRep,
    ]
    .into_iter()
    .map(|kind| {
        let mut cell = fault_cell(TransportKind::Tcp, None);
        cell.work = work_of(kind, TransportKind::Tcp);
        cell.iterations = 3000;
        cell.warmup = 10;
        cell.id = format!("{CELL_GROUP_FAULT}::progress::{}", kind.as_str());
        Trial::test(cell.id.clone(), move || check_progress(&cell))
    })
    .collect()
}

fn check_progress(cell: &Cell) -> Result<(), Failed> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let done = Arc::new(AtomicU64::new(u64::MAX));
    let options = RunOptions {
        progress: Some(done.clone()),
        ..RunOptions::default()
    };
    let total = cell.warmup + cell.iterations;
    let finished = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (done, finished) = (done.clone(), finished.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !finished.load(Ordering::Relaxed) {
                let now = done.load(Ordering::Relaxed);
                if seen.last() != Some(&now) {
                    seen.push(now);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            seen
        })
    };
    let result = run_cell(cell, &options);
    finished.store(true, Ordering::Relaxed);
    let seen = watcher.join().expect("the watcher does not panic");
    if let Some(failure) = result.outcome.failure {
        return Err(format!("{}: {}", cell.id, failure.reason).into());
    }
    let last = done.load(Ordering::Relaxed);
    if last != total {
        return Err(format!("ended at {last} round trips done, expected {total}").into());
    }
    let within: Vec<u64> = seen.iter().copied().filter(|&v| v != u64::MAX).collect();
    if !within.windows(2).all(|w| w[0] <= w[1]) {
        return Err(format!("went back: {within:?}").into());
    }
    if !within.iter().any(|&v| v > 0 && v < total) {
        return Err(format!("never seen between 0 and {total}: {within:?}").into());
    }
    println!(
        "{}: {} distinct values seen, ended at {last}",
        cell.id,
        within.len()
    );
    Ok(())
}

fn check_load_fault(cell: &Cell, kind: FaultKind) -> Result<(), Failed> {
    let failure = failure_under_fault(cell, kind)?;
    let (expected, at, detail) = match kind {
        FaultKind::FlipByte => (
            FailureKind::Mismatch,
            Some(FAULT_AT),
            "client 0, request 4: first difference at byte offset 100",
        ),
        FaultKind::Truncate => (
            FailureKind::Length,
            Some(FAULT_AT),
            "client 0, request 4: reply is 199 bytes, expected 200",
        ),
        FaultKind::Stall => (FailureKind::Timeout, None, "timed out after 300ms"),
        // The echo of request 4 never comes; sending request 5 learns that nothing
        // listens any more.
        _ => (
            FailureKind::PeerGone,
            Some(FAULT_AT + 1),
            "the peer exited (exit status 3)",
        ),
    };
    let offset = match kind {
        FaultKind::FlipByte => Some(100),
        FaultKind::Truncate => Some(199),
        _ => None,
    };
    if failure.kind != expected
        || failure.round_trip != at
        || !failure.reason.contains(detail)
        || reported_offset(&failure.reason) != offset
    {
        return Err(format!(
            "expected {expected:?} at {at:?} saying `{detail}` (byte offset {offset:?}), got              {:?} at {:?}: {}",
            failure.kind, failure.round_trip, failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

fn check_logging_fault(cell: &Cell, kind: FaultKind) -> Result<(), Failed> {
    let failure = failure_under_fault(cell, kind)?;
    let detail = match kind {
        FaultKind::Truncate => {
            "(49 whole lines), 3200 were logged (50 lines); first difference at byte 262, line 4"
        }
        _ => "first difference at byte 262, line 4: expected \"0000004 ",
    };
    if failure.kind != FailureKind::Mismatch || !failure.reason.contains(detail) {
        return Err(format!(
            "expected a mismatch saying `{detail}`, got {:?}: {}",
            failure.kind, failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

fn check_fan_out_fault(cell: &Cell, kind: FaultKind) -> Result<(), Failed> {
    let failure = failure_under_fault(cell, kind)?;
    // Both subscribers commit the fault; the first one read fails the cell.
    let (expected, at, detail) = match kind {
        FaultKind::Exit => (FailureKind::PeerGone, FAULT_AT, "exit status 3"),
        FaultKind::Stall => (
            FailureKind::Timeout,
            FAULT_AT + 2,
            "3 frames in a row were not acknowledged",
        ),
        _ => (
            FailureKind::Protocol,
            FAULT_AT,
            "an acknowledgement of 15 bytes",
        ),
    };
    if failure.kind != expected
        || failure.round_trip != Some(at)
        || !failure.reason.contains(detail)
    {
        return Err(format!(
            "expected {expected:?} at frame {at} saying `{detail}`, got {:?} at {:?}: {}",
            failure.kind, failure.round_trip, failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

fn check_codec_fault(cell: &Cell, kind: FaultKind) -> Result<(), Failed> {
    let failure = failure_under_fault(cell, kind)?;
    let (expected, detail) = match kind {
        FaultKind::FlipByte => (FailureKind::Mismatch, "the decoded reply differs at blob["),
        _ => (FailureKind::Protocol, "the reply is not a"),
    };
    if failure.kind != expected
        || failure.round_trip != Some(FAULT_AT)
        || !failure.reason.contains(detail)
    {
        return Err(format!(
            "expected {expected:?} at round trip {FAULT_AT} saying `{detail}`, got {:?} at {:?}: {}",
            failure.kind, failure.round_trip, failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}

/// The settings of a fault test's cell of `kind`: capnp frames, one client and one
/// server thread for 200 ms, a buffered log, no loss allowed.
fn work_of(kind: ScenarioKind, transport: TransportKind) -> Work {
    let timeout = timeout_for(transport);
    let (codec, max_loss) = (CodecKind::Capnp, 0.0);
    [
        Work::Echo(Echoes::new(timeout, max_loss)),
        Work::Bulk(Echoes::new(timeout, max_loss)),
        Work::Codec(Frames { codec, timeout }),
        Work::FanOut(Fan {
            codec,
            frame_deadline: timeout,
            max_loss,
        }),
        Work::FanIn(Fan {
            codec,
            frame_deadline: timeout,
            max_loss,
        }),
        Work::Rpc(Calls { timeout }),
        Work::ReqRep(Calls { timeout }),
        Work::UdpLoad(Load {
            shape: LoadShape {
                clients: 1,
                server_threads: 1,
                duration: Duration::from_millis(200),
            },
            timeout,
            max_loss,
        }),
        Work::Logging(LogWrite {
            sink: LogSink::Buffered,
            budget: timeout,
        }),
    ]
    .into_iter()
    .find(|work| work.kind() == kind)
    .unwrap_or_else(|| panic!("the fault tests have no {} cell", kind.as_str()))
}
