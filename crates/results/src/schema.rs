//! The result schema. One serde struct is the export format; bump
//! [`RESULT_SCHEMA_VERSION`] on any change a reader would notice.

use ipc_matrix_spec::Cell;
use serde::{Deserialize, Serialize};

use crate::environment::Environment;

/// 4: the cell carries its kind's settings in `work` (`{"kind": "echo", "timeout": ...}`,
/// `{"kind": "fan-out", "codec": ..., "frame_deadline": ...}`, `{"kind": "logging",
/// "sink": ..., "budget": ...}`), instead of `kind` beside optional `codec`, `load` and
/// `sink` and a `timeout` and `max_loss` every kind had. Results of version 3 (every
/// result names its run, `run_id`) and before are left out of reports: re-run their
/// cells.
pub const RESULT_SCHEMA_VERSION: u32 = 4;
/// Results keep at most this many raw round-trip times (the first ones).
pub const MAX_SAMPLES_KEPT: usize = 100_000;
/// The largest result file read, in bytes (16 MiB). A result keeps at most
/// [`MAX_SAMPLES_KEPT`] samples, which ipc-matrix writes in about 2 MB; a larger file was
/// not written by it and is refused, with its path, before it is read into memory.
pub const MAX_RESULT_FILE_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    pub schema_version: u32,
    /// `<triple>@<runner>`, e.g. `x86_64-unknown-linux-gnu@native`.
    pub leg: String,
    /// The run this result belongs to ([`crate::run_id`]): a report judges the results of
    /// one run and never mixes in another run's.
    pub run_id: String,
    pub cell: Cell,
    pub outcome: Outcome,
    /// Round trips that were timed (warm-up excluded) and answered.
    pub measured_round_trips: u64,
    /// Requests whose reply never came (UDP only; other transports fail instead).
    pub lost: u64,
    /// Percentiles of the round-trip time; absent when nothing was measured.
    pub latency_ns: Option<LatencyStats>,
    /// Every timed round trip in nanoseconds, in the order they happened (lost ones
    /// left out), at most [`MAX_SAMPLES_KEPT`]: the input of baselines, comparisons and
    /// the latency-over-index plots.
    pub samples_ns: Vec<u64>,
    /// The very first round trip (index 0, a warm-up one when there is warm-up): the cold
    /// cost, with first-touch allocations, page faults and lazy set-up inside.
    pub first_round_trip_ns: Option<u64>,
    /// `codec` cells: the encoding and the decoding of the measuring side alone, each
    /// also inside the round trip.
    pub codec_ns: Option<CodecStages>,
    /// CPUs the two processes were pinned to.
    pub placement: Placement,
    /// Round trip of one cache line between those two CPUs just before the cell, in
    /// nanoseconds: how the machine itself was doing (absent when not pinned).
    pub core_to_core_ns: Option<u64>,
    /// The same probe taken just after the cell.
    pub core_to_core_after_ns: Option<u64>,
    /// The machine's floor for this cell, measured in the same run with the same CPUs and
    /// payload, and the cell's median over it. Absent for kinds without one (fan, udp-load,
    /// logging) and when the probe could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
    /// The share of the cell's time in which some task waited for a CPU (Linux pressure
    /// stall information): other work competing with the cell. Absent without PSI.
    pub cpu_pressure: Option<f64>,
    /// A delay the peer was told to add before each reply (`IPC_MATRIX_PEER_DELAY_US`);
    /// such a result measures a deliberately slowed peer.
    pub peer_delay_us: Option<u64>,
    /// Units of deterministic work the peer was told to do before each reply
    /// (`IPC_MATRIX_PEER_EXTRA_WORK`): more instructions on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_extra_work: Option<u64>,
    /// The cell's stack as its own authors measure it: their benchmark's setup, timed on
    /// the cell's CPUs with its payload just before the cell (iceoryx2's busy-poll echo
    /// cells). Absent for stacks without one, and when the setup could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_setup: Option<OwnSetup>,
    /// How the round trips' bytes moved between the cell's code and its transport, for
    /// kinds over a channel (`echo`, `bulk`, `codec`): absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_path: Option<MessagePath>,
    /// What the check of the peer's goodbye could not see, in a cell that passed: over
    /// datagrams (UDP), a goodbye left unread in a socket still open when it arrived
    /// leaves no trace (one that finds the socket closed fails the cell). Absent where
    /// the goodbye is seen whole, and in results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodbye: Option<String>,
    /// `udp-load` cells: what the clients sent and what came back.
    #[serde(default)]
    pub load: Option<LoadStats>,
    /// `logging` cells: lines written and what they cost.
    #[serde(default)]
    pub logging: Option<LoggingStats>,
    /// Guest instructions per measured round trip, when the cell ran under QEMU with the
    /// counting plugin: it depends on the code and on `setup`, `cpu_model` and the
    /// compiler, not on the host's speed, load or CPU model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<InstructionCounts>,
    /// Why an emulated cell that could have been counted has no counts (the runner found
    /// no plugin, or was told not to count): a gate that expects counts names this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncounted: Option<String>,
    /// Round trips per second (logging cells: lines; udp-load cells: answered requests).
    pub round_trips_per_sec: Option<f64>,
    /// Payload bytes moved per second, counting the request and the reply (logging
    /// cells: bytes written to the file).
    pub throughput: Option<Throughput>,
    /// Wall time of the whole cell, peer start-up and checks included.
    pub wall_seconds: f64,
    pub finished_at_unix: u64,
    pub environment: Environment,
}

/// A stack's own benchmark setup, timed round trip by round trip as the cell times its
/// own ([`CellResult::own_setup`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnSetup {
    /// What ran: the benchmark it reproduces and its settings.
    pub setup: String,
    pub p50_ns: u64,
    /// The mean round trip: what the stack's own benchmark prints (as half of it, one way).
    pub mean_ns: u64,
    /// Round trips timed.
    pub round_trips: u64,
    /// Blocks it was timed in, each just before a tenth of the cell's own measured round
    /// trips, as its floor is; 1 when it was timed once before the cell (results written
    /// before the setup was interleaved read as 1).
    #[serde(default = "one_block")]
    pub blocks: u64,
    /// The cell's median round trip over `p50_ns`: what the harness adds to the stack as
    /// its authors use it (absent when the cell measured nothing).
    pub ratio: Option<f64>,
}

/// How a round trip's bytes move (defined with the cells, which may ask for one).
pub use ipc_matrix_spec::MessagePath;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub passed: bool,
    pub failure: Option<Failure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// 0-based index of the round trip, warm-up included, when the failure belongs to one.
    pub round_trip: Option<u64>,
    pub reason: String,
}

/// What went wrong, for tools and tests to act on without parsing prose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The peer process could not be started or connected.
    Setup,
    /// A reply of the right length with different bytes.
    Mismatch,
    /// A reply shorter or longer than the request.
    Length,
    /// No reply before the deadline (or, for UDP, too many lost).
    Timeout,
    /// The peer process exited or closed the channel.
    PeerGone,
    /// The peer sent something that is not a valid frame.
    Protocol,
    /// The peer did not shut down cleanly after the run.
    Shutdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub count: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
    pub stdev: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Megabits (10^6 bits) per second.
    pub mbit_per_s: f64,
}

/// CPUs the measuring thread and the peer process were pinned to; `None` when left to the
/// scheduler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub measurer_cpu: Option<usize>,
    pub peer_cpu: Option<usize>,
}

impl Placement {
    /// The CPUs chosen, both sides; empty when left to the scheduler.
    pub fn cpus(&self) -> Vec<usize> {
        self.measurer_cpu.into_iter().chain(self.peer_cpu).collect()
    }
}

/// Percentiles of one codec's encode and decode times (measuring side), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CodecStages {
    pub encode_ns: Option<LatencyStats>,
    pub decode_ns: Option<LatencyStats>,
}

/// The outcome of a `udp-load` cell, all clients together.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadStats {
    /// Requests sent.
    pub sent: u64,
    /// Requests whose exact echo came back before their deadline.
    pub answered: u64,
    /// Requests given up at their deadline.
    pub timeouts: u64,
    /// Echoes that arrived after their request had been given up (and were ignored).
    pub late_replies: u64,
    /// answered / sent.
    pub success_rate: f64,
    /// Answered requests per second of sending.
    pub transactions_per_sec: f64,
    /// Datagrams the peer's threads received; with `sent` it tells where losses happened.
    pub server_received: Option<u64>,
    /// IP fragmentation on the peer's host, when it is a second host (a network
    /// namespace that carries this cell's traffic alone); absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragmentation: Option<Fragmentation>,
}

/// What the IP layer of a `udp-load` cell's second host counted during the cell
/// (`/proc/<peer>/net/snmp`, after the peer started minus before the load ended):
/// requests larger than the link's MTU arrive in fragments, replies leave in them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fragmentation {
    /// Fragments received that needed reassembly (ReasmReqds).
    pub fragments_received: u64,
    /// Datagrams reassembled from them (ReasmOKs).
    pub reassembled: u64,
    /// Reassemblies that failed, a fragment lost or timed out (ReasmFails).
    pub reassembly_failed: u64,
    /// Datagrams sent in fragments (FragOKs): the replies.
    pub fragmented: u64,
    /// Fragments created for them (FragCreates).
    pub fragments_created: u64,
    /// Datagrams that needed fragmenting but could not be (FragFails).
    pub fragmentation_failed: u64,
}

impl Fragmentation {
    /// Fragments per reassembled datagram received; `None` when none was reassembled.
    pub fn fragments_per_datagram(&self) -> Option<f64> {
        (self.reassembled > 0).then(|| self.fragments_received as f64 / self.reassembled as f64)
    }
}

/// The outcome of a `logging` cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoggingStats {
    pub lines: u64,
    /// Bytes of the file, all lines together.
    pub bytes: u64,
    /// From the first line until every line was in the file (flush, close, and for a
    /// non-blocking writer the wait for its worker), per line.
    pub ns_per_line: f64,
    /// From returning from the last logging call until every line was in the file.
    pub drain_ns: u64,
}

/// Guest instructions per measured round trip (a logging cell: per line written),
/// counted under QEMU user mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstructionCounts {
    /// The measuring thread's instructions per round trip (request, wait, reply, and for
    /// codec cells the encoding and decoding; not the reply check). Logging cells: the
    /// logging thread's per line of the measured batches (the writes; not creating the
    /// file, closing it or reading it back).
    pub measuring: Option<f64>,
    /// The peer's serving thread's instructions per reply.
    pub peer: Option<f64>,
    /// Codec cells: the measuring side's encoding of one frame (part of `measuring`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encode: Option<f64>,
    /// Codec cells: the measuring side's decoding of one reply (part of `measuring`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<f64>,
    /// Windows counted: one per measured round trip; for logging cells, one per measured
    /// batch of lines.
    pub windows: u64,
    /// The emulated CPU model (`QEMU_CPU`), which fixes the library code QEMU runs.
    pub cpu_model: Option<String>,
    /// The count depends on timing (a lossy transport, a spun peer delay, a stream message over the kernel's buffer,
    /// a peer on a second host):
    /// it informs and never gates.
    pub timing_dependent: bool,
    /// What else the count depends on: the emulator, the plugin, the guest's C library.
    /// Absent in counts made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<CountingSetup>,
}

/// Everything besides the code that a guest's instruction count depends on, as the
/// counted process saw it. Counts are comparable only when their setups are equal (the
/// emulated CPU model and the compiler are recorded beside it: `cpu_model`, `rustc`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountingSetup {
    /// The emulator and its release, `qemu 7.2.22`: QEMU 8.1 and later give some guests
    /// a vDSO, whose clock reads run guest code that 7.2 leaves to the host.
    pub emulator: String,
    /// The plugin API version the counting plugin was built for.
    pub plugin_api: u32,
    /// The C library the guest ran, `glibc 2.36`: its memcpy, its socket calls and its
    /// locks are counted with the cell's code.
    pub c_library: String,
    /// `dynamic` (shared objects loaded at start) or `static`.
    pub linkage: String,
    /// Every shared object the guest had mapped, `<file name> <first 16 hex digits of its
    /// SHA-256>`, sorted: two C libraries of the same version built differently differ
    /// here.
    pub libraries: Vec<String>,
}

impl CountingSetup {
    /// `qemu 7.2.22, plugin API 1, glibc 2.36 (dynamic)`.
    pub fn summary(&self) -> String {
        format!(
            "{}, plugin API {}, {} ({})",
            self.emulator, self.plugin_api, self.c_library, self.linkage
        )
    }

    /// What differs between `self` (a run's) and `then` (a baseline's), as two phrases
    /// naming only the differing parts: (`glibc 2.41`, `glibc 2.36`). `None` when equal.
    pub fn difference(&self, then: &CountingSetup) -> Option<(String, String)> {
        let mut now_parts = Vec::new();
        let mut then_parts = Vec::new();
        let mut differ = |now: String, was: String| {
            if now != was {
                now_parts.push(now);
                then_parts.push(was);
            }
        };
        differ(self.emulator.clone(), then.emulator.clone());
        differ(
            format!("plugin API {}", self.plugin_api),
            format!("plugin API {}", then.plugin_api),
        );
        differ(self.c_library.clone(), then.c_library.clone());
        differ(
            format!("{} linkage", self.linkage),
            format!("{} linkage", then.linkage),
        );
        let only_in = |a: &[String], b: &[String]| -> Vec<String> {
            a.iter().filter(|l| !b.contains(l)).cloned().collect()
        };
        let (new, old) = (
            only_in(&self.libraries, &then.libraries),
            only_in(&then.libraries, &self.libraries),
        );
        if !new.is_empty() || !old.is_empty() {
            let list = |l: Vec<String>| match l.is_empty() {
                true => "no other libraries".to_string(),
                false => l.join(", "),
            };
            now_parts.push(list(new));
            then_parts.push(list(old));
        }
        (!now_parts.is_empty()).then(|| (now_parts.join(", "), then_parts.join(", ")))
    }
}

impl InstructionCounts {
    /// Every side of the cell together, per round trip (per line): the measuring side and,
    /// for a cell with a peer (`peered`), the peer; `None` unless each was counted.
    pub fn total(&self, peered: bool) -> Option<f64> {
        match peered {
            true => Some(self.measuring? + self.peer?),
            false => self.measuring,
        }
    }
}

/// The simplest exchange of a cell's payload between its two CPUs that its transport
/// could possibly do: what the machine allows before any transport code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FloorProbe {
    /// Two threads spinning on one cache line each way, the payload copied into and out of
    /// shared buffers each way, a long payload streamed through a ring of 1 MiB chunks
    /// (shared memory, busy-poll).
    Spin,
    /// The same handoff, the waiter asleep on a futex and woken by the publisher (shared
    /// memory, blocking).
    Futex,
    /// One write(2) and one read(2) each way over a Unix stream socket pair, no framing.
    UnixStream,
    /// The same over a TCP connection on 127.0.0.1 with TCP_NODELAY.
    Tcp,
    /// One send(2) and one recv(2) of a datagram each way on 127.0.0.1.
    Udp,
    /// One write(2) and one read(2) each way over a pair of anonymous pipes.
    Pipe,
}

impl FloorProbe {
    pub const fn as_str(self) -> &'static str {
        match self {
            FloorProbe::Spin => "spin",
            FloorProbe::Futex => "futex",
            FloorProbe::UnixStream => "unix-stream",
            FloorProbe::Tcp => "tcp",
            FloorProbe::Udp => "udp",
            FloorProbe::Pipe => "pipe",
        }
    }
}

impl std::fmt::Display for FloorProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A floor probe's outcome for one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub probe: FloorProbe,
    pub payload_bytes: u64,
    /// Median round trip of the probe, each timed alone as a cell times its own.
    pub p50_ns: u64,
    /// Round trips timed.
    pub round_trips: u64,
    /// The cell's median round trip over `p50_ns`; absent when the cell measured nothing.
    pub ratio: Option<f64>,
    /// Blocks the probe's round trips were timed in, each just before a block of the
    /// cell's own; 1 when all were timed just before the cell (results written before
    /// floors were interleaved read as 1).
    #[serde(default = "one_block")]
    pub blocks: u64,
}

fn one_block() -> u64 {
    1
}

/// A ratio to the floor under this is a cell faster than what its probe says the machine
/// allows: the probe did something the cell avoids, or the machine changed between the
/// two. Reports explain every such ratio.
pub const BELOW_FLOOR: f64 = 0.95;
