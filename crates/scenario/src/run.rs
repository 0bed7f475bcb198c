//! The cell runner: one cell from start to result. It pins the measuring thread, probes
//! the machine before and after, hands the cell to its kind (`kinds::run`) and turns the
//! tally into a [`CellResult`].

use crate::context::{RunOptions, Tally};
use crate::counting::{Counting, COUNT_FILE_ENV};
use crate::failure::setup_failure;
use crate::floor::{cell_floor, InterleavedFloor};
use crate::kinds::{self, Harness};
use crate::own_setup::InterleavedOwnSetup;
use crate::placement::{self, PinnedThread};
use crate::pressure::PressureMeter;
use crate::probe::core_to_core_ns;
use crate::second_host::Link;
use ipc_matrix_results::{
    CellResult, Environment, Failure, FailureKind, Outcome, OwnSetup, Placement, Throughput,
    RESULT_SCHEMA_VERSION,
};
use ipc_matrix_spec::{
    available_memory, check_memory, Cell, ChannelKind, LogSink, LogWrite, TransportKind, Work,
};
use ipc_matrix_transport::WakeMode;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

/// Runs one cell to the end and describes what happened; never panics on a bad peer.
pub fn run_cell(cell: &Cell, options: &RunOptions) -> CellResult {
    let started = Instant::now();
    if let Some(done) = &options.progress {
        done.store(0, Ordering::Relaxed);
    }
    let environment = Environment::capture();
    let harness = kinds::harness(&cell.work);
    let mut placement = if harness.pinned {
        placement::choose()
    } else {
        Placement::default()
    };
    let pinned = PinnedThread::pin(placement.measurer_cpu);
    if pinned.is_err() {
        placement = Placement::default();
    }
    let probe = || pinned.is_ok().then(|| core_to_core_ns(placement)).flatten();
    let probe_before = probe();
    // The machine's floor of this cell, timed in blocks between the cell's own round
    // trips.
    let interleaved_floor = pinned
        .is_ok()
        .then(|| cell_floor(cell, placement))
        .flatten();
    // The stack as its own authors measure it, timed on the cell's CPUs in blocks
    // between the cell's own round trips too.
    let own_setup = pinned
        .is_ok()
        .then(|| InterleavedOwnSetup::open(cell, placement))
        .flatten();
    // Asked to count but not counted: the cell fails at its start rather than pass
    // with no count.
    let counting = match harness.counted {
        true => Counting::for_cell().map_err(|e| setup_failure(e.to_string())),
        false => Ok(None),
    };
    let (counting, uncountable) = match counting {
        Ok(counting) => (counting, None),
        Err(failure) => (None, Some(failure)),
    };
    let uncounted = match (&counting, environment.runner.as_str(), harness.counted) {
        (None, "qemu", true) => Some(uncounted_reason()),
        _ => None,
    };
    let mut tally = Tally {
        counting,
        progress: options.progress.clone(),
        floor: interleaved_floor,
        own_setup,
        ..Tally::default()
    };
    let pressure = PressureMeter::start();
    // Refused before anything is allocated when the machine cannot hold the cell now.
    let memory = uncountable.map_or(Ok(()), Err).and_then(|()| {
        available_memory()
            .map_or(Ok(()), |available| check_memory(cell, available))
            .map_err(|e| setup_failure(e.to_string()))
    });
    // A netns cell's second host, made before its peer starts and removed (dropped)
    // after the cell, its peer stopped.
    let link = memory.and_then(|()| {
        Link::for_cell(cell)
            .map_err(|e| setup_failure(format!("{}: making its second host: {e}", cell.id)))
    });
    let on_second_host;
    let options = match &link {
        Ok(Some(link)) => {
            on_second_host = RunOptions {
                second_host: link.host().cloned(),
                ..options.clone()
            };
            &on_second_host
        }
        _ => options,
    };
    let failure = match &link {
        Err(failure) => Some(failure.clone()),
        Ok(_) => kinds::run(cell, options, &placement, &mut tally)
            .and_then(|()| measured_all(cell, &harness, &tally))
            .err(),
    };
    drop(link);
    let floor = tally.floor.take().and_then(InterleavedFloor::finish);
    let own_setup = tally.own_setup.take().and_then(InterleavedOwnSetup::finish);
    let cpu_pressure = pressure.share();
    // Per round trip; per frame or request of each process (fan, udp-load); per line
    // for a logging cell, which has no peer.
    let instructions = match (&tally.counting, &failure) {
        (Some(counting), None) if !tally.peer_pids.is_empty() || !cell.kind().has_peer() => {
            let operations = match tally.operations_counted {
                Some(lines) => Some(lines),
                None if tally.count_per_window => None,
                None => Some(tally.recorder.count().saturating_add(tally.lost)),
            };
            Some(counting.collect(
                &tally.peer_pids,
                operations,
                counts_depend_on_timing(cell, options, tally.lost),
            ))
        }
        _ => None,
    };
    // Again after the cell: the host may move the CPUs while it runs.
    let probe_after = probe();
    drop(pinned);
    let recorder = &tally.recorder;
    let measured = recorder.count();
    let seconds = tally.measured_time.as_secs_f64();
    let per_second = |n: f64| (seconds > 0.0).then(|| n / seconds);
    // Operations per second: round trips; lines for a logging cell; answered requests
    // for a load cell (whose time is the sending time of all clients together).
    let (operations, moved_bytes) = match (&tally.logging, &tally.load) {
        (Some(logging), _) => (logging.lines as f64, logging.bytes as f64),
        (None, Some(load)) => (
            load.answered as f64,
            2.0 * cell.payload_bytes as f64 * load.answered as f64,
        ),
        (None, None) => (
            measured as f64,
            2.0 * cell.payload_bytes as f64 * measured as f64,
        ),
    };
    CellResult {
        schema_version: RESULT_SCHEMA_VERSION,
        leg: environment.leg(),
        run_id: options.run_id.clone(),
        cell: cell.clone(),
        outcome: Outcome {
            passed: failure.is_none(),
            failure,
        },
        measured_round_trips: measured,
        lost: tally.lost,
        latency_ns: recorder.stats(),
        samples_ns: recorder.samples().to_vec(),
        codec_ns: tally.codec_stages,
        first_round_trip_ns: tally.first_round_trip.map(|d| d.as_nanos() as u64),
        placement,
        core_to_core_ns: probe_before,
        core_to_core_after_ns: probe_after,
        floor: floor.map(|floor| ipc_matrix_results::Floor {
            ratio: recorder
                .stats()
                .map(|stats| stats.p50 as f64 / floor.p50_ns.max(1) as f64),
            ..floor
        }),
        cpu_pressure,
        peer_delay_us: options.peer_delay_for(cell).map(|d| d.as_micros() as u64),
        peer_extra_work: options.peer_extra_work_for(cell),
        message_path: tally.message_path,
        goodbye: tally.goodbye.take(),
        own_setup: own_setup.map(|own| OwnSetup {
            ratio: recorder
                .stats()
                .map(|stats| stats.p50 as f64 / own.p50_ns.max(1) as f64),
            ..own
        }),
        load: tally.load,
        logging: tally.logging,
        instructions,
        uncounted,
        round_trips_per_sec: per_second(operations),
        throughput: per_second(moved_bytes).map(|bytes| Throughput {
            mb_per_s: bytes / 1e6,
            mbit_per_s: bytes * 8.0 / 1e6,
        }),
        wall_seconds: started.elapsed().as_secs_f64(),
        finished_at_unix: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        environment,
    }
}

/// The result of a cell that did not run to its end where it was asked to (its own
/// process died or stalled: `ipc-matrix run` runs a plugin's cells so): failed with
/// `failure`, nothing measured, after `wall_seconds`.
pub fn unfinished_cell(
    cell: &Cell,
    options: &RunOptions,
    failure: Failure,
    wall_seconds: f64,
) -> CellResult {
    CellResult {
        schema_version: RESULT_SCHEMA_VERSION,
        leg: Environment::capture().leg(),
        run_id: options.run_id.clone(),
        cell: cell.clone(),
        outcome: Outcome {
            passed: false,
            failure: Some(failure),
        },
        measured_round_trips: 0,
        lost: 0,
        latency_ns: None,
        samples_ns: Vec::new(),
        codec_ns: None,
        first_round_trip_ns: None,
        placement: Placement::default(),
        core_to_core_ns: None,
        core_to_core_after_ns: None,
        floor: None,
        cpu_pressure: None,
        peer_delay_us: options.peer_delay_for(cell).map(|d| d.as_micros() as u64),
        peer_extra_work: options.peer_extra_work_for(cell),
        message_path: None,
        goodbye: None,
        own_setup: None,
        load: None,
        logging: None,
        instructions: None,
        uncounted: None,
        round_trips_per_sec: None,
        throughput: None,
        wall_seconds,
        finished_at_unix: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        environment: Environment::capture(),
    }
}

/// Why an emulated process was not asked to count: the runner says why
/// ([`UNCOUNTED_ENV`]), else it is not the runner that counts.
fn uncounted_reason() -> String {
    std::env::var_os(UNCOUNTED_ENV)
        .map(|why| ipc_matrix_results::printable(&why.to_string_lossy()).into_owned())
        .filter(|why| !why.trim().is_empty())
        .unwrap_or_else(|| {
            format!("the emulator's runner did not ask for counts ({COUNT_FILE_ENV} is not set)")
        })
}

/// Set by `scripts/qemu-run` when it runs a program without counting it: why.
pub const UNCOUNTED_ENV: &str = "IPC_MATRIX_UNCOUNTED";

/// A cell that measured fewer round trips (frames) than it declared never passes, whatever
/// its kind reported: lost ones count as accounted for, nothing else does. Kinds that
/// account for their work otherwise are not held to it.
fn measured_all(cell: &Cell, harness: &Harness, tally: &Tally) -> Result<(), Failure> {
    if !harness.measures_every_iteration {
        return Ok(());
    }
    let declared = cell.iterations;
    let accounted = tally.recorder.count().saturating_add(tally.lost);
    if accounted >= declared {
        return Ok(());
    }
    Err(Failure {
        kind: FailureKind::Setup,
        round_trip: None,
        reason: format!(
            "measured {} and lost {} of the {declared} round trips declared; a cell that measured less than it declared does not pass",
            tally.recorder.count(),
            tally.lost
        ),
    })
}

/// Messages of this size or more over a stream (the kernel's usual socket and pipe
/// buffer) take as many reads and writes as the timing allows: a payload of exactly this
/// size is over it on the wire, with its length prefix or encoding.
const STREAM_BUFFER: u64 = 64 * 1024;

/// A count that depends on timing informs and never gates: a spun peer delay, a cell that
/// lost something (a datagram or frame waited out to its deadline, after which a late
/// reply may be read), stream messages of [`STREAM_BUFFER`] or more (three runs of
/// `bulk::local::1MB` differed by 23 % in instructions, `bulk::tcp::1MB` under aarch64 by
/// 36 %, `serialize::prost::tcp::64KiB` by 0.11 % between two count passes), or a non-blocking log writer (the logging thread waits, spinning first,
/// whenever the worker's queue is full), or a peer on a second host (the veth link's
/// segments and acknowledgements arrive as the timing allows: two count passes of
/// `req-rep-netns::tcp::256B` under aarch64 differed by 1.7 %, its 8192 B by 1.7 %
/// between the runs of one baseline), or iceoryx2 woken by its listener (what happens
/// around the wait, outside the paused window, depends on whether the other side's
/// notification is already there: under aarch64 `echo::iceoryx2-blocking::200B` read
/// 5,209.95-5,210.00 instructions per round trip in five count passes here and 5,209.10
/// and 5,209.35 in two in a second userland, up to 0.016 % apart, while the same cell
/// busy-polling read the same to the last digit), or a stack that waits by trying, on
/// threads of its own or by readiness (ZeroMQ's I/O thread under `req-rep`, capnp-rpc's
/// tokio reactor under `rpc`): known by what the cell is, not left to the acceptance's
/// perturbed runs to show, which can miss it by chance (their counts moved by 0.06-0.37 %
/// on x86_64 and 0.25-1.26 % on aarch64 between the runs of one baseline, but by only
/// 0.0093 % in one acceptance of aarch64's `req-rep::local::64B`, which would then have
/// gated and failed the next pass). Shared-memory waits, busy-poll
/// included, are not counted at all (the transport pauses the count while it waits), so
/// their cells gate: three count passes of `echo::shm-busy::200B` differed by 0.15 %.
fn counts_depend_on_timing(cell: &Cell, options: &RunOptions, lost: u64) -> bool {
    let stream = cell
        .transport
        .channel()
        .is_some_and(ChannelKind::is_byte_stream);
    lost > 0
        || matches!(
            cell.work,
            Work::Logging(LogWrite {
                sink: LogSink::TracingNonBlocking,
                ..
            })
        )
        || options.peer_delay_for(cell).is_some()
        || (stream && cell.payload_bytes >= STREAM_BUFFER)
        || !cell.host.is_loopback()
        || (cell.transport == TransportKind::Iceoryx2 && cell.wake == Some(WakeMode::Blocking))
        || matches!(cell.work, Work::ReqRep(_) | Work::Rpc(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc_matrix_spec::{Calls, Echoes};
    use std::time::Duration;

    fn cell(scenario: &str, transport: TransportKind, work: Work) -> Cell {
        Cell {
            id: format!("{scenario}::{transport}::200B"),
            scenario: scenario.into(),
            transport,
            wake: None,
            payload_bytes: 200,
            payload_label: "200B".into(),
            iterations: 10,
            warmup: 1,
            seed: 1,
            profile: "quick".into(),
            work,
            host: Default::default(),
            peer: None,
        }
    }

    /// The stacks that wait on threads of their own or by readiness inform by what they
    /// are, whatever an acceptance's runs happened to show; a plain echo over the same
    /// sockets gates.
    #[test]
    fn zeromq_and_capnp_rpc_counts_depend_on_timing_and_an_echo_s_do_not() {
        let options = RunOptions::default();
        let calls = || Calls {
            timeout: Duration::from_secs(5),
        };
        for transport in [TransportKind::Local, TransportKind::Tcp] {
            let req_rep = cell("req-rep", transport, Work::ReqRep(calls()));
            let rpc = cell("rpc", transport, Work::Rpc(calls()));
            let echo = cell(
                "echo",
                transport,
                Work::Echo(Echoes::new(Duration::from_secs(5), 0.0)),
            );
            assert!(
                counts_depend_on_timing(&req_rep, &options, 0),
                "{transport}"
            );
            assert!(counts_depend_on_timing(&rpc, &options, 0), "{transport}");
            assert!(!counts_depend_on_timing(&echo, &options, 0), "{transport}");
            assert!(
                counts_depend_on_timing(&echo, &options, 1),
                "a loss: {transport}"
            );
        }
    }
}
