//! The machine's floor for a cell: the simplest exchange of the cell's payload between the
//! cell's two CPUs that its transport could possibly do, measured in the same run, on the
//! same CPUs, with the same payload, and timed round trip by round trip as the cell times
//! its own. A cell's ratio to its floor says how much of its round trip is the transport's
//! and how much is the machine's.
//!
//! The probes are two threads of this process, one pinned to each of the cell's CPUs:
//! the hardware and the kernel do the same work for two threads as for two processes
//! (each CPU runs one task and otherwise idles), without a peer to start. Each probe
//! gives up at [`PROBE_DEADLINE`]; its other side then stops too.
//!
//! A cell's floor is measured with the cell: the host moves and slows the vCPUs over a run
//! (a cache line's round trip between them went from 63 to 325 ns and back within minutes
//! here), and a floor measured at the start of a run then stood for cells that ran on
//! another machine, as far as timing goes. The runner times it in blocks between the
//! cell's own round trips ([`InterleavedFloor`]); `ipc-matrix probe` times it alone
//! ([`floor_for`]).

use crate::spawn::PausedPeer;
use ipc_matrix_results::{Floor, FloorProbe, Placement};
use ipc_matrix_spec::{Cell, ChannelKind, ScenarioKind, WakeMode};
use ipc_matrix_transport::{futex_wait, futex_wake, set_thread_cpus};
use std::cell::UnsafeCell;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A probe runs as many round trips as its cell, warm-up and timed: on a VM, a blocking
/// ping-pong between two tasks that have just started is faster for its first tens of
/// milliseconds (here 28 us a round trip for about 2,000 round trips, then 42 us), and a
/// cell always starts a new peer. Within these bounds:
const MAX_WARMUP: u64 = 1_000;
const WARMUP_BUDGET: Duration = Duration::from_millis(500);
const MAX_ROUND_TRIPS: u64 = 20_000;
/// At least this many round trips are timed.
const MIN_ROUND_TRIPS: u64 = 1;
/// Time given to the timed round trips of one probe.
const TIME_BUDGET: Duration = Duration::from_secs(2);
/// A probe still running after this long has failed (an emulator, a stuck CPU).
const PROBE_DEADLINE: Duration = Duration::from_secs(20);
/// The longest wait of one socket call of a probe: its other side is gone.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an idle socket responder looks whether its probe was closed: it waits
/// between the blocks of a cell, for as long as the cell takes.
const RESPONDER_WAKE: Duration = Duration::from_millis(250);

/// The probe that stands for `cell`, if its kind has one: the request/reply kinds by
/// their transport (shared memory by its wake mode). Fan, load and logging cells have
/// none: no one exchange is their unit of work.
pub fn probe_for(cell: &Cell) -> Option<FloorProbe> {
    let request_reply = matches!(
        cell.kind(),
        ScenarioKind::Echo
            | ScenarioKind::Bulk
            | ScenarioKind::Codec
            | ScenarioKind::Rpc
            | ScenarioKind::ReqRep
    );
    if !request_reply {
        return None;
    }
    Some(match cell.transport.channel()? {
        // iceoryx2 is shared memory too: its floor is the same handoff.
        ChannelKind::Shm | ChannelKind::Iceoryx2 => match cell.wake.unwrap_or(WakeMode::Blocking) {
            WakeMode::BusyPoll => FloorProbe::Spin,
            WakeMode::Blocking => FloorProbe::Futex,
        },
        ChannelKind::Local => FloorProbe::UnixStream,
        ChannelKind::Tcp => FloorProbe::Tcp,
        ChannelKind::Udp => FloorProbe::Udp,
        ChannelKind::Pipe => FloorProbe::Pipe,
    })
}

/// A probe holds at most four copies of its payload (the request and reply of each end,
/// or of the measuring end and a buffer each way) and the shared-memory handoff two
/// rings of chunks besides, while the cell runs: measured only when the cell fits next
/// to those.
fn fits_in_memory(cell: &Cell) -> bool {
    let Some(available) = ipc_matrix_spec::available_memory() else {
        return true;
    };
    let rings = 2 * u64::from(RING) * cell.payload_bytes.min(CHUNK as u64);
    let probe_need = cell.payload_bytes.saturating_mul(4).saturating_add(rings);
    probe_need <= available && ipc_matrix_spec::check_memory(cell, available - probe_need).is_ok()
}

/// True when this run's cells run under an emulator (the runner is `qemu`).
pub fn emulated() -> bool {
    ipc_matrix_results::Environment::capture()
        .qemu_version
        .is_some()
}

/// The floor of `cell` on `placement`, measured now. The calling thread must already be
/// pinned to the measuring CPU. `None` when
/// the cell's kind has no floor, the CPUs are not pinned, the probe failed, or the run is
/// emulated (an emulator's floor is the emulator's, not the machine's).
pub fn floor_for(cell: &Cell, placement: Placement) -> Option<Floor> {
    if emulated() || !fits_in_memory(cell) {
        return None;
    }
    let probe = probe_for(cell)?;
    let rounds = (cell.warmup, cell.iterations);
    let (p50_ns, round_trips) = measured(probe, cell.payload_bytes, rounds, placement)?;
    Some(Floor {
        probe,
        payload_bytes: cell.payload_bytes,
        p50_ns,
        round_trips,
        ratio: None,
        blocks: 1,
    })
}

/// Blocks a cell's floor is timed in at most, one before each tenth (rounded up) of the
/// cell's own measured round trips: fewer when that leaves too few round trips for ten.
const BLOCKS: u64 = 10;

/// The floor of `cell` on `placement` as the cell runner measures it: in blocks between
/// the cell's own round trips (see [`InterleavedFloor`]). `None` as for [`floor_for`].
pub(crate) fn cell_floor(cell: &Cell, placement: Placement) -> Option<InterleavedFloor> {
    InterleavedFloor::open(cell, placement)
}

/// A floor timed in blocks, each just before a block of the cell's own measured round
/// trips, with one responder that lives as long as the cell's peer. Two consecutive
/// 1,000-round-trip medians of the same TCP ping-pong differed by up to 30 % on a busy
/// 2-vCPU VM, so a floor timed once before the cell gave ratios from 0.84x to 1.6x for
/// the same cell in consecutive runs; alternating the two lets whatever the machine does
/// meanwhile fall on both alike.
///
/// A busy-polling peer spins on its CPU between requests, and so would the spin probe's
/// responder between blocks: for those cells the peer is stopped (SIGSTOP) while a block
/// runs, and each block has a responder of its own that ends with the block.
pub(crate) struct InterleavedFloor {
    open: Option<OpenProbe>,
    /// Each block opens and closes its own probe, the peer stopped meanwhile.
    spins: bool,
    /// A block failed: no floor is reported.
    failed: bool,
    len: usize,
    peer_cpu: usize,
    probe: FloorProbe,
    payload_bytes: u64,
    /// The warm-up, run before the first block only.
    warmup: u64,
    /// Round trips to time over all blocks, shared out evenly.
    timed: u64,
    /// The cell's measured round trips between two blocks.
    every: u64,
    planned: u64,
    samples: Vec<u64>,
    blocks: u64,
}

impl InterleavedFloor {
    fn open(cell: &Cell, placement: Placement) -> Option<Self> {
        if emulated() || !fits_in_memory(cell) {
            return None;
        }
        placement.measurer_cpu?;
        let probe = probe_for(cell)?;
        let len = usize::try_from(cell.payload_bytes).ok()?;
        let peer_cpu = placement.peer_cpu?;
        let spins = probe == FloorProbe::Spin;
        let open = match spins {
            true => None,
            false => Some(open_probe(probe, len, peer_cpu).ok()?),
        };
        let rounds = Rounds::of((cell.warmup, cell.iterations));
        let every = cell.iterations.div_ceil(BLOCKS).max(1);
        Some(Self {
            open,
            spins,
            failed: false,
            len,
            peer_cpu,
            probe,
            payload_bytes: cell.payload_bytes,
            warmup: rounds.warmup,
            timed: rounds.timed,
            every,
            planned: cell.iterations.div_ceil(every).max(1),
            samples: Vec::with_capacity(rounds.timed as usize),
            blocks: 0,
        })
    }

    /// Runs a block of the floor when one is due before the cell's measured round trip
    /// `measured` (counted from 0), with the cell's `peer` stopped if it busy-polls. A
    /// block that fails ends the floor: none is reported.
    pub(crate) fn before_round_trip(
        &mut self,
        measured: u64,
        pause_peer: impl FnOnce() -> Option<PausedPeer>,
    ) {
        if self.failed || !measured.is_multiple_of(self.every) || self.blocks >= self.planned {
            return;
        }
        let left = self.timed.saturating_sub(self.samples.len() as u64);
        let rounds = Rounds {
            warmup: if self.blocks == 0 || self.spins {
                self.warmup
            } else {
                0
            },
            timed: left.div_ceil(self.planned - self.blocks).max(1),
            deadline: Instant::now() + PROBE_DEADLINE,
            budget: TIME_BUDGET / BLOCKS as u32,
        };
        let timed = match self.spins {
            true => self.spinning_block(rounds, pause_peer),
            false => match self.open.as_mut() {
                Some(open) => open.time(rounds),
                None => Err("the probe is not open".into()),
            },
        };
        match timed {
            Ok(samples) => {
                self.samples.extend(samples);
                self.blocks += 1;
            }
            Err(_) => {
                self.failed = true;
                let _ = self.open.take().map(OpenProbe::close);
            }
        }
    }

    /// A block of the spin probe on a responder of its own, the cell's peer stopped.
    fn spinning_block(
        &mut self,
        rounds: Rounds,
        pause_peer: impl FnOnce() -> Option<PausedPeer>,
    ) -> ProbeResult {
        let _paused = pause_peer().ok_or("the peer could not be stopped for the floor")?;
        run_probe(self.probe, self.len, rounds, self.peer_cpu)
    }

    /// Stops the responder; the floor of the blocks that ran (all of them unless the cell
    /// ended early), `None` if one failed.
    pub(crate) fn finish(mut self) -> Option<Floor> {
        if let Some(open) = self.open.take() {
            open.close().ok()?;
        }
        if self.failed {
            return None;
        }
        let (p50_ns, round_trips) = median(self.samples)?;
        Some(Floor {
            probe: self.probe,
            payload_bytes: self.payload_bytes,
            p50_ns,
            round_trips,
            ratio: None,
            blocks: self.blocks,
        })
    }
}

/// Median and count of the probe's round trips.
fn measured(
    probe: FloorProbe,
    payload: u64,
    rounds: (u64, u64),
    placement: Placement,
) -> Option<(u64, u64)> {
    placement.measurer_cpu?;
    let peer_cpu = placement.peer_cpu?;
    let len = usize::try_from(payload).ok()?;
    let samples = run_probe(probe, len, Rounds::of(rounds), peer_cpu).ok()?;
    median(samples)
}

fn median(mut samples: Vec<u64>) -> Option<(u64, u64)> {
    samples.sort_unstable();
    let count = samples.len() as u64;
    samples.get(samples.len() / 2).map(|&p50| (p50, count))
}

type ProbeResult = Result<Vec<u64>, String>;

/// How many round trips a probe runs, and until when.
#[derive(Clone, Copy)]
struct Rounds {
    warmup: u64,
    timed: u64,
    deadline: Instant,
    /// Time given to the timed round trips.
    budget: Duration,
}

impl Rounds {
    fn of((warmup, timed): (u64, u64)) -> Self {
        Self {
            warmup: warmup.min(MAX_WARMUP),
            timed: timed.clamp(MIN_ROUND_TRIPS, MAX_ROUND_TRIPS),
            deadline: Instant::now() + PROBE_DEADLINE,
            budget: TIME_BUDGET,
        }
    }
}

/// Runs `probe` from start to end: opened, timed, closed.
fn run_probe(probe: FloorProbe, len: usize, rounds: Rounds, peer_cpu: usize) -> ProbeResult {
    let mut open = open_probe(probe, len, peer_cpu)?;
    let timed = open.time(rounds);
    let closed = open.close();
    let samples = timed?;
    closed?;
    Ok(samples)
}

/// One round trip of a probe; the argument says when to stop waiting for the responder.
type RoundTrip = Box<dyn FnMut(&dyn Fn() -> bool) -> Result<(), String> + Send>;

/// A probe whose responder runs: timed in one go or in blocks, then closed.
struct OpenProbe {
    responder: std::thread::JoinHandle<Result<(), String>>,
    /// One round trip; `give_up` says when to stop waiting for the responder.
    one: RoundTrip,
    /// Tells the responder to stop, once `one` (and the ends it holds) is dropped.
    stop: Box<dyn FnOnce() + Send>,
}

impl OpenProbe {
    /// Times `rounds` round trips (see [`time_round_trips`]).
    fn time(&mut self, rounds: Rounds) -> ProbeResult {
        let responder = &self.responder;
        let give_up = || responder.is_finished() || Instant::now() > rounds.deadline;
        let one = &mut self.one;
        time_round_trips(rounds, || one(&give_up))
    }

    fn close(self) -> Result<(), String> {
        drop(self.one);
        (self.stop)();
        joined(self.responder)
    }
}

fn open_probe(probe: FloorProbe, len: usize, peer_cpu: usize) -> Result<OpenProbe, String> {
    match probe {
        FloorProbe::Spin => handoff(len, peer_cpu, Wait::Spin),
        FloorProbe::Futex => handoff(len, peer_cpu, Wait::Futex),
        FloorProbe::UnixStream => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(text)?;
            for (s, read) in [(&ours, CALL_TIMEOUT), (&theirs, RESPONDER_WAKE)] {
                s.set_read_timeout(Some(read)).map_err(text)?;
                s.set_write_timeout(Some(CALL_TIMEOUT)).map_err(text)?;
            }
            stream_ping_pong(
                len,
                peer_cpu,
                (ours.try_clone().map_err(text)?, ours),
                theirs,
            )
        }
        FloorProbe::Tcp => {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(text)?;
            let ours =
                std::net::TcpStream::connect(listener.local_addr().map_err(text)?).map_err(text)?;
            let (theirs, _) = listener.accept().map_err(text)?;
            for (s, read) in [(&ours, CALL_TIMEOUT), (&theirs, RESPONDER_WAKE)] {
                s.set_nodelay(true).map_err(text)?;
                s.set_read_timeout(Some(read)).map_err(text)?;
                s.set_write_timeout(Some(CALL_TIMEOUT)).map_err(text)?;
            }
            stream_ping_pong(
                len,
                peer_cpu,
                (ours.try_clone().map_err(text)?, ours),
                theirs,
            )
        }
        FloorProbe::Udp => udp_ping_pong(len, peer_cpu),
        FloorProbe::Pipe => {
            // Plain blocking pipes have no timeout. Both ends are threads of this process
            // that wait only for each other, and one that stops drops its ends (an end of
            // file for the other), so neither waits forever.
            let (request_read, request_write) = std::io::pipe().map_err(text)?;
            let (reply_read, reply_write) = std::io::pipe().map_err(text)?;
            stream_ping_pong(
                len,
                peer_cpu,
                (reply_read, request_write),
                Duplex(request_read, reply_write),
            )
        }
    }
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Times `one` round trip after round trip: the warm-up untimed (or as much as fits in
/// [`WARMUP_BUDGET`]), then the timed ones (or as many as fit in the budget, at least
/// [`MIN_ROUND_TRIPS`]), each timed by its own two clock reads as a cell's.
fn time_round_trips(rounds: Rounds, mut one: impl FnMut() -> Result<(), String>) -> ProbeResult {
    let deadline = rounds.deadline;
    let warmup_ends = Instant::now() + WARMUP_BUDGET;
    for _ in 0..rounds.warmup {
        one()?;
        let now = Instant::now();
        if now > deadline {
            return Err("the warm-up outlasted the probe's deadline".into());
        }
        if now > warmup_ends {
            break;
        }
    }
    let budget_ends = Instant::now() + rounds.budget;
    let mut samples = Vec::with_capacity(rounds.timed as usize);
    while (samples.len() as u64) < rounds.timed {
        let started = Instant::now();
        one()?;
        let ended = Instant::now();
        samples.push((ended - started).as_nanos() as u64);
        if ended > deadline {
            return Err("the probe outlasted its deadline".into());
        }
        if ended > budget_ends && samples.len() as u64 >= MIN_ROUND_TRIPS {
            break;
        }
    }
    Ok(samples)
}

/// Runs `serve` on a thread pinned to `cpu`; its error, if any, is returned by `join`.
fn responder(
    cpu: usize,
    serve: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        set_thread_cpus(&[cpu]).map_err(|e| format!("pinning the responder: {e}"))?;
        serve()
    })
}

fn joined(handle: std::thread::JoinHandle<Result<(), String>>) -> Result<(), String> {
    handle
        .join()
        .map_err(|_| "the responder panicked".to_string())?
}

/// A reader and a writer used as one stream (a pipe each way).
struct Duplex<R, W>(R, W);

impl<R: Read, W> Read for Duplex<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R, W: Write> Write for Duplex<R, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.1.flush()
    }
}

/// Ping-pong of `len` bytes over a byte stream: write it all, read it all back; the
/// responder reads it all, then writes it back. No framing: both sides know the length.
/// Closing drops our ends: the responder reads the end of the stream and stops.
fn stream_ping_pong<R, W, S>(
    len: usize,
    peer_cpu: usize,
    (mut rx, mut tx): (R, W),
    mut theirs: S,
) -> Result<OpenProbe, String>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
    S: Read + Write + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let responder = responder(peer_cpu, move || {
        let mut buf = vec![0u8; len];
        loop {
            // Between the blocks of a cell, as long as the cell takes: each read waits
            // at most RESPONDER_WAKE, and then goes on unless the probe is closed.
            let mut got = 0;
            while got < len {
                match theirs.read(&mut buf[got..]) {
                    // The measuring side closed its end: done.
                    Ok(0) => return Ok(()),
                    Ok(n) => got += n,
                    Err(e) if waits_on(&e, &stopped, "read")? => {}
                    Err(_) => return Ok(()),
                }
            }
            theirs
                .write_all(&buf)
                .map_err(|e| format!("responder write: {e}"))?;
        }
    });
    let request = vec![0x5au8; len];
    let mut reply = vec![0u8; len];
    Ok(OpenProbe {
        responder,
        one: Box::new(move |_| {
            tx.write_all(&request).map_err(|e| format!("write: {e}"))?;
            rx.read_exact(&mut reply).map_err(|e| format!("read: {e}"))
        }),
        stop: Box::new(move || stop.store(true, Ordering::Relaxed)),
    })
}

/// What an idle responder does when a read failed with `e`: waits on (`true`) when it
/// only gave up at the responder's wake-up timeout while the probe is open, stops
/// (`false`) once the probe is closed, and fails on anything else.
fn waits_on(e: &std::io::Error, stopped: &AtomicBool, doing: &str) -> Result<bool, String> {
    match ipc_matrix_transport::is_retry(e) {
        true => Ok(!stopped.load(Ordering::Relaxed)),
        false => Err(format!("responder {doing}: {e}")),
    }
}

/// Ping-pong of one datagram each way; closing sends the empty datagram that says
/// goodbye.
fn udp_ping_pong(len: usize, peer_cpu: usize) -> Result<OpenProbe, String> {
    let ours = std::net::UdpSocket::bind("127.0.0.1:0").map_err(text)?;
    let theirs = std::net::UdpSocket::bind("127.0.0.1:0").map_err(text)?;
    ours.connect(theirs.local_addr().map_err(text)?)
        .map_err(text)?;
    theirs
        .connect(ours.local_addr().map_err(text)?)
        .map_err(text)?;
    for (s, read) in [(&ours, CALL_TIMEOUT), (&theirs, RESPONDER_WAKE)] {
        s.set_read_timeout(Some(read)).map_err(text)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let responder = responder(peer_cpu, move || {
        let mut buf = vec![0u8; len.max(1)];
        loop {
            // As the stream responder: idle between blocks for as long as the cell takes.
            let got = match theirs.recv(&mut buf) {
                Ok(got) => got,
                Err(e) if waits_on(&e, &stopped, "recv")? => continue,
                Err(_) => return Ok(()),
            };
            // An empty datagram says goodbye.
            if got == 0 {
                return Ok(());
            }
            theirs
                .send(&buf[..got])
                .map_err(|e| format!("responder send: {e}"))?;
        }
    });
    let goodbye = ours.try_clone().map_err(text)?;
    let request = vec![0x5au8; len.max(1)];
    let mut reply = vec![0u8; len.max(1)];
    Ok(OpenProbe {
        responder,
        one: Box::new(move |_| {
            ours.send(&request).map_err(|e| format!("send: {e}"))?;
            let got = ours.recv(&mut reply).map_err(|e| format!("recv: {e}"))?;
            match got == request.len() {
                true => Ok(()),
                false => Err(format!("a reply of {got} bytes to {}", request.len())),
            }
        }),
        stop: Box::new(move || {
            stop.store(true, Ordering::Relaxed);
            let _ = goodbye.send(&[]);
        }),
    })
}

/// How the waiting side of a shared-memory handoff waits.
#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Spin,
    Futex,
}

/// The largest chunk a handoff copies at once, and the chunks in flight each way: as the
/// shared-memory transport's largest slot and its ring. A message longer than a chunk
/// streams through the ring, the reader copying one chunk out while the writer copies the
/// next in, and the chunks stay in the caches; copying the whole message at once would
/// go through memory twice (two copies of 100 MB took 21 ms here, where the transport's
/// round trip of 100 MB, four copies streamed, took 17.5 ms).
const CHUNK: usize = ipc_matrix_transport::SHM_CHUNK;
const RING: u32 = ipc_matrix_transport::SHM_RING_SLOTS;

/// A count on a cache line of its own, with the number of threads asleep on it.
#[repr(C, align(64))]
struct Line {
    count: AtomicU32,
    sleepers: AtomicU32,
}

impl Line {
    fn new() -> Self {
        Self {
            count: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    fn publish(&self, count: u32, wait: Wait) {
        match wait {
            Wait::Spin => self.count.store(count, Ordering::Release),
            Wait::Futex => {
                self.count.store(count, Ordering::SeqCst);
                if self.sleepers.load(Ordering::SeqCst) != 0 {
                    futex_wake(&self.count);
                }
            }
        }
    }

    /// Waits until `ready(count)` (or until `give_up` says so) and returns the count.
    fn wait_until(
        &self,
        ready: impl Fn(u32) -> bool,
        wait: Wait,
        give_up: &dyn Fn() -> bool,
    ) -> Result<u32, String> {
        let mut spins = 0u32;
        loop {
            let seen = self.count.load(Ordering::Acquire);
            if ready(seen) {
                return Ok(seen);
            }
            match wait {
                Wait::Spin => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if !spins.is_multiple_of(1024) {
                        continue;
                    }
                }
                Wait::Futex => {
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    let seen = self.count.load(Ordering::SeqCst);
                    if !ready(seen) {
                        let _ = futex_wait(&self.count, seen, Duration::from_millis(20));
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
            if give_up() {
                return Err("the other side stopped answering".into());
            }
        }
    }
}

/// One direction of a shared-memory handoff: a ring of chunk buffers, the writer's count
/// of chunks published and the reader's count of chunks taken, each on its own line.
struct Direction {
    published: Line,
    taken: Line,
    slots: Vec<UnsafeCell<Box<[u8]>>>,
}

// SAFETY: a slot is written only by the writer before it publishes the slot's chunk, and
// read only by the reader after it saw that (Release/Acquire on `published`) and before
// it counts the chunk taken (Release/Acquire on `taken`), never both at once.
unsafe impl Sync for Direction {}

/// Where each side of one direction is: the next chunk to publish or take, and the
/// reader's count as the writer last saw it.
#[derive(Default)]
struct Cursor {
    next: u32,
    taken_seen: u32,
}

impl Direction {
    fn new(len: usize) -> Self {
        let slot = len.clamp(1, CHUNK);
        Self {
            published: Line::new(),
            taken: Line::new(),
            slots: (0..RING)
                .map(|_| UnsafeCell::new(vec![0u8; slot].into_boxed_slice()))
                .collect(),
        }
    }

    /// Copies `chunk` (at most [`CHUNK`] bytes) into the next slot once it is free, and
    /// publishes it.
    fn put_chunk(
        &self,
        chunk: &[u8],
        cursor: &mut Cursor,
        wait: Wait,
        give_up: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        let n = cursor.next;
        if n.wrapping_sub(cursor.taken_seen) >= RING {
            cursor.taken_seen =
                self.taken
                    .wait_until(|taken| n.wrapping_sub(taken) < RING, wait, give_up)?;
        }
        let slot = self.slots[(n % RING) as usize].get();
        // SAFETY: see `Sync`: the reader has taken this slot's last chunk and does not
        // touch it until it sees this one published.
        unsafe { (&mut *slot)[..chunk.len()].copy_from_slice(chunk) };
        cursor.next = n.wrapping_add(1);
        self.published.publish(cursor.next, wait);
        Ok(())
    }

    /// True when the next slot is free (the reader's count looked at again if need be).
    fn has_room(&self, cursor: &mut Cursor) -> bool {
        if cursor.next.wrapping_sub(cursor.taken_seen) < RING {
            return true;
        }
        cursor.taken_seen = self.taken.count.load(Ordering::Acquire);
        cursor.next.wrapping_sub(cursor.taken_seen) < RING
    }

    /// True when the next chunk to take is published.
    fn is_ready(&self, cursor: &Cursor) -> bool {
        self.published.count.load(Ordering::Acquire) != cursor.next
    }

    /// Waits for the next chunk and copies it out into `out` (its length).
    fn take_chunk(
        &self,
        out: &mut [u8],
        cursor: &mut Cursor,
        wait: Wait,
        give_up: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        let n = cursor.next;
        self.published
            .wait_until(|published| published != n, wait, give_up)?;
        let slot = self.slots[(n % RING) as usize].get();
        // SAFETY: see `Sync`: the writer published this slot's chunk and does not touch
        // it again until it sees it taken.
        out.copy_from_slice(unsafe { &(&*slot)[..out.len()] });
        cursor.next = n.wrapping_add(1);
        self.taken.publish(cursor.next, wait);
        Ok(())
    }
}

/// The responder's side of a round trip of `len` bytes: each chunk copied straight from
/// the request's slot into the reply's, as soon as it is there.
fn echo_chunks(
    (requests, replies): (&Direction, &Direction),
    len: usize,
    (from, to): (&mut Cursor, &mut Cursor),
    wait: Wait,
    give_up: &dyn Fn() -> bool,
) -> Result<(), String> {
    for start in (0..len).step_by(CHUNK) {
        let chunk = (len - start).min(CHUNK);
        let n = from.next;
        requests
            .published
            .wait_until(|published| published != n, wait, give_up)?;
        let m = to.next;
        if m.wrapping_sub(to.taken_seen) >= RING {
            to.taken_seen =
                replies
                    .taken
                    .wait_until(|taken| m.wrapping_sub(taken) < RING, wait, give_up)?;
        }
        let (source, target) = (
            requests.slots[(n % RING) as usize].get(),
            replies.slots[(m % RING) as usize].get(),
        );
        // SAFETY: see `Sync`: the request's slot is published and not yet taken, the
        // reply's is free and not yet published; they are two different buffers.
        unsafe { (&mut *target)[..chunk].copy_from_slice(&(&*source)[..chunk]) };
        to.next = m.wrapping_add(1);
        replies.published.publish(to.next, wait);
        from.next = n.wrapping_add(1);
        requests.taken.publish(from.next, wait);
    }
    Ok(())
}

/// The measuring side's round trip: request chunks put while reply chunks are taken as
/// they come back. Waiting for a reply chunk when nothing else can be done is safe
/// because the responder echoes each chunk as it takes it.
fn exchange_chunks(
    (requests, replies): (&Direction, &Direction),
    (request, reply): (&[u8], &mut [u8]),
    (to, from): (&mut Cursor, &mut Cursor),
    wait: Wait,
    give_up: &dyn Fn() -> bool,
) -> Result<(), String> {
    let total = request.len().div_ceil(CHUNK);
    let (mut sent, mut got) = (0, 0);
    while got < total {
        let take = got < sent && replies.is_ready(from);
        if !take && sent < total && requests.has_room(to) {
            let start = sent * CHUNK;
            let end = (start + CHUNK).min(request.len());
            requests.put_chunk(&request[start..end], to, wait, give_up)?;
            sent += 1;
            continue;
        }
        // A reply chunk is there, or is due: all chunks are sent, or the ring is full.
        let start = got * CHUNK;
        let end = (start + CHUNK).min(reply.len());
        replies.take_chunk(&mut reply[start..end], from, wait, give_up)?;
        got += 1;
    }
    Ok(())
}

/// Ping-pong through shared buffers, as a shared-memory transport must at the least: the
/// payload copied into the request's buffers, straight from those into the reply's by the
/// responder, and out of those; each chunk published on a cache line of its own, a long
/// payload streamed through a ring of chunks, the reply's first chunks coming back while
/// the request's last ones are still being written.
fn handoff(len: usize, peer_cpu: usize, wait: Wait) -> Result<OpenProbe, String> {
    let request_way = Arc::new(Direction::new(len));
    let reply_way = Arc::new(Direction::new(len));
    let stop = Arc::new(AtomicBool::new(false));
    let responder = {
        let (request_way, reply_way, stop) = (request_way.clone(), reply_way.clone(), stop.clone());
        responder(peer_cpu, move || {
            let (mut from, mut to) = (Cursor::default(), Cursor::default());
            let stopped = || stop.load(Ordering::Relaxed);
            let ways = (&*request_way, &*reply_way);
            while !stopped() && echo_chunks(ways, len, (&mut from, &mut to), wait, &stopped).is_ok()
            {
            }
            Ok(())
        })
    };
    let request = vec![0x5au8; len];
    let mut reply = vec![0u8; len];
    let (mut to, mut from) = (Cursor::default(), Cursor::default());
    let (requests, replies) = (request_way.clone(), reply_way.clone());
    Ok(OpenProbe {
        responder,
        one: Box::new(move |give_up| {
            exchange_chunks(
                (&requests, &replies),
                (&request, &mut reply),
                (&mut to, &mut from),
                wait,
                give_up,
            )
        }),
        stop: Box::new(move || {
            stop.store(true, Ordering::Relaxed);
            for line in [&request_way.published, &reply_way.taken] {
                futex_wake(&line.count);
            }
        }),
    })
}

/// One floor of a selection of cells, and the cells it stands for.
#[derive(Debug, Clone)]
pub struct SelectedFloor {
    pub probe: FloorProbe,
    pub payload_bytes: u64,
    /// The cells' warm-up and timed round trips, which the probe repeats.
    pub rounds: (u64, u64),
    /// `None` when the probe could not run (not pinned, or it failed).
    pub floor: Option<Floor>,
    pub cells: Vec<String>,
}

/// Measures the floors of `cells` now (each distinct probe, payload and round trips once),
/// pinned as their cells would be; in the order of the cells that first need them.
pub fn measure_floors(cells: &[Cell]) -> Vec<SelectedFloor> {
    let mut placement = crate::placement::choose();
    let pinned = crate::placement::PinnedThread::pin(placement.measurer_cpu);
    if pinned.is_err() {
        placement = Placement::default();
    }
    let mut selected: Vec<SelectedFloor> = Vec::new();
    for cell in cells {
        let Some(probe) = probe_for(cell) else {
            continue;
        };
        let rounds = (cell.warmup, cell.iterations);
        let same = |f: &&mut SelectedFloor| {
            f.probe == probe && f.payload_bytes == cell.payload_bytes && f.rounds == rounds
        };
        match selected.iter_mut().find(same) {
            Some(known) => known.cells.push(cell.id.clone()),
            None => selected.push(SelectedFloor {
                probe,
                payload_bytes: cell.payload_bytes,
                rounds,
                floor: pinned.is_ok().then(|| floor_for(cell, placement)).flatten(),
                cells: vec![cell.id.clone()],
            }),
        }
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc_matrix_spec::Spec;

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
                        Ok::<(), String>(())
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
}
