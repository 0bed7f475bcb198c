use super::*;
use ipc_matrix_spec::Spec;
use std::sync::Arc;
use std::time::Duration;

const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: echo, kind: echo, transports: [shm, local, tcp, udp, pipe], wake: [busy-poll, blocking], payloads: [200B], iterations: 10, timeout: 5s }
  - { name: bulk, kind: bulk, transports: [shm, tcp], wake: [busy-poll], payloads: [64KiB], iterations: 10, timeout: 5s }
  - { name: logging, kind: logging, transports: [file], sinks: [buffered], payloads: [64B], iterations: 10, budget: 30s }
  - { name: fan, kind: fan-out, transports: [tcp], codecs: [prost], payloads: [200B], iterations: 10, frame_deadline: 5s }
"#;

fn cells() -> Vec<Cell> {
    let spec = Spec::parse(MATRIX, std::path::Path::new("matrix.yaml")).unwrap();
    spec.cells("quick").unwrap()
}

#[test]
fn each_request_reply_cell_stands_on_the_probe_of_its_transport() {
    let probes: Vec<(String, Option<FloorProbe>)> = cells()
        .iter()
        .map(|cell| (cell.id.clone(), probe_for(cell)))
        .collect();
    let expected = [
        ("echo::shm-busy::200B", Some(FloorProbe::Spin)),
        ("echo::shm-blocking::200B", Some(FloorProbe::Futex)),
        ("echo::local::200B", Some(FloorProbe::UnixStream)),
        ("echo::tcp::200B", Some(FloorProbe::Tcp)),
        ("echo::udp::200B", Some(FloorProbe::Udp)),
        ("echo::pipe::200B", Some(FloorProbe::Pipe)),
        ("bulk::shm-busy::64KiB", Some(FloorProbe::Spin)),
        ("bulk::tcp::64KiB", Some(FloorProbe::Tcp)),
        ("logging::buffered::file::64B", None),
        ("fan::prost::tcp::200B", None),
    ];
    for (id, probe) in expected {
        let found = probes.iter().find(|(cell, _)| cell == id);
        assert_eq!(found.map(|(_, p)| *p), Some(probe), "{id} in {probes:?}");
    }
}

/// Every probe runs to the end on two CPUs, timing as many round trips as asked, each
/// a positive number of nanoseconds.
#[test]
fn every_probe_times_the_round_trips_asked_for() {
    let Some(peer_cpu) = crate::placement::choose().peer_cpu else {
        eprintln!("skipped: fewer than two CPUs to pin the probes to");
        return;
    };
    let probes = [
        FloorProbe::Spin,
        FloorProbe::Futex,
        FloorProbe::UnixStream,
        FloorProbe::Tcp,
        FloorProbe::Udp,
        FloorProbe::Pipe,
    ];
    for probe in probes {
        // One byte, a short message, and one of several chunks (the last one short).
        for len in [1, 200, 2 * CHUNK + 5] {
            if probe == FloorProbe::Udp && len > 65_507 {
                continue;
            }
            let samples = run_probe(probe, len, Rounds::of((3, 25)), peer_cpu)
                .unwrap_or_else(|e| panic!("{probe} of {len} bytes: {e}"));
            assert_eq!(samples.len(), 25, "{probe} of {len} bytes");
            assert!(samples.iter().all(|&ns| ns > 0), "{probe}: {samples:?}");
        }
    }
}

/// The cells' placement with this thread pinned to its measuring CPU; `None` (and a
/// note) where the probes cannot be pinned to two CPUs or nothing is measured.
fn pinned_for_interleaved_floors() -> Option<(Placement, crate::placement::PinnedThread)> {
    let placement = crate::placement::choose();
    if placement.peer_cpu.is_none() || emulated() {
        eprintln!("skipped: no two CPUs to pin the probes to, or emulated");
        return None;
    }
    let pinned = crate::placement::PinnedThread::pin(placement.measurer_cpu).unwrap();
    Some((placement, pinned))
}

/// A floor interleaved with its cell times all of the cell's round trips, shared out
/// over blocks at even spacing (ten at most; fewer when the cell has fewer round
/// trips than ten times the spacing), and only when a block is due; the peer of a
/// busy-polling cell is stopped while each block runs and continued after it.
#[test]
fn an_interleaved_floor_times_the_cells_round_trips_in_blocks() {
    let Some((placement, _pinned)) = pinned_for_interleaved_floors() else {
        return;
    };
    let cells = cells();
    let by_id = |id: &str| cells.iter().find(|c| c.id == id).unwrap().clone();
    // A stand-in for a busy-polling peer: a process in a group of its own.
    let mut peer = std::process::Command::new("sleep");
    std::os::unix::process::CommandExt::process_group(&mut peer, 0);
    let mut peer = peer.arg("30").spawn().unwrap();
    let pid = peer.id();
    for (id, iterations, blocks) in [
        ("echo::tcp::200B", 10, 10),
        ("echo::udp::200B", 25, 9),
        ("echo::shm-blocking::200B", 100, 10),
        ("echo::pipe::200B", 3, 3),
        ("echo::shm-busy::200B", 20, 10),
    ] {
        let mut cell = by_id(id);
        cell.iterations = iterations;
        let mut floor = cell_floor(&cell, placement).expect(id);
        let spins = floor.probe == FloorProbe::Spin;
        let mut timed_before = Vec::new();
        let mut pauses = 0;
        for measured in 0..iterations {
            floor.before_round_trip(measured, || {
                pauses += 1;
                let paused = crate::spawn::pause_group(pid);
                assert!(crate::spawn::stopped(pid as i32), "{id}: not stopped");
                paused
            });
            assert!(
                !crate::spawn::partly_stopped(pid as i32),
                "{id}: still stopped"
            );
            timed_before.push(floor.samples.len() as u64);
        }
        let floor = floor.finish().expect("measured");
        assert_eq!(
            (floor.blocks, floor.round_trips),
            (blocks, iterations),
            "{id}"
        );
        assert_eq!(pauses, if spins { blocks } else { 0 }, "{id}");
        // Blocks ran only before every `every`-th round trip of the cell.
        let every = iterations.div_ceil(BLOCKS);
        for (measured, pair) in timed_before.windows(2).enumerate() {
            let due = (measured as u64 + 1).is_multiple_of(every);
            assert_eq!(
                pair[1] > pair[0],
                due,
                "{id}: after {measured}: {timed_before:?}"
            );
        }
    }
    let _ = peer.kill();
    let _ = peer.wait();
}

/// A floor's responder waits between blocks for as long as the cell takes, well past
/// its socket's timeout, and the floor is not lost.
#[test]
fn a_floors_responder_outlasts_a_long_gap_between_blocks() {
    let Some((placement, _pinned)) = pinned_for_interleaved_floors() else {
        return;
    };
    let cells = cells();
    for id in [
        "echo::tcp::200B",
        "echo::udp::200B",
        "echo::local::200B",
        "echo::pipe::200B",
        "echo::shm-blocking::200B",
    ] {
        let mut cell = cells.iter().find(|c| c.id == id).unwrap().clone();
        cell.iterations = 2;
        let mut floor = cell_floor(&cell, placement).expect(id);
        floor.before_round_trip(0, || None);
        std::thread::sleep(RESPONDER_WAKE * 3);
        floor.before_round_trip(1, || None);
        let floor = floor.finish().unwrap_or_else(|| panic!("{id}: lost"));
        assert_eq!((floor.blocks, floor.round_trips), (2, 2), "{id}");
    }
}

/// The shared-memory handoff echoes every byte, in order, for a payload of one chunk,
/// of one byte more, and of more chunks than its ring holds, spinning or asleep.
#[test]
fn the_handoff_echoes_every_byte_through_its_pipeline() {
    for wait in [Wait::Spin, Wait::Futex] {
        for len in [1, CHUNK, CHUNK + 1, (RING as usize + 1) * CHUNK + 7] {
            let (requests, replies) =
                (Arc::new(Direction::new(len)), Arc::new(Direction::new(len)));
            let deadline = Instant::now() + Duration::from_secs(20);
            let give_up = move || Instant::now() > deadline;
            let responder = {
                let (requests, replies) = (requests.clone(), replies.clone());
                std::thread::spawn(move || {
                    let (mut from, mut to) = (Cursor::default(), Cursor::default());
                    for _ in 0..2 {
                        echo_chunks(
                            (&requests, &replies),
                            len,
                            (&mut from, &mut to),
                            wait,
                            &give_up,
                        )?;
                    }
                    Ok::<(), ProbeError>(())
                })
            };
            let (mut to, mut from) = (Cursor::default(), Cursor::default());
            for round in 0..2u8 {
                let request: Vec<u8> = (0..len).map(|i| (i % 253) as u8 ^ round).collect();
                let mut reply = vec![0u8; len];
                exchange_chunks(
                    (&requests, &replies),
                    (&request, &mut reply),
                    (&mut to, &mut from),
                    wait,
                    &give_up,
                )
                .unwrap();
                assert!(reply == request, "{len} bytes, round {round}");
            }
            responder.join().unwrap().unwrap();
        }
    }
}

/// A floor is measured for its cell: its probe, payload and round trips.
#[test]
fn a_floor_is_measured_with_its_cells_payload_and_round_trips() {
    let cells = cells();
    let shm = cells
        .iter()
        .find(|c| c.id == "echo::shm-busy::200B")
        .unwrap();
    let placement = crate::placement::choose();
    if placement.peer_cpu.is_none() {
        eprintln!("skipped: fewer than two CPUs to pin the probes to");
        return;
    }
    let _pinned = crate::placement::PinnedThread::pin(placement.measurer_cpu).unwrap();
    if emulated() {
        // An emulator's floor is its own: none is measured.
        assert_eq!(floor_for(shm, placement), None);
        return;
    }
    let floor = floor_for(shm, placement).expect("measured");
    assert_eq!(floor.probe, FloorProbe::Spin);
    assert_eq!(floor.payload_bytes, 200);
    assert_eq!(floor.round_trips, shm.iterations);
    assert!(floor.p50_ns > 0);
    assert_eq!(floor.ratio, None);
    assert_eq!(floor.blocks, 1);
}
