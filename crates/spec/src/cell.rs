//! Expansion of a spec into cells: one cell is one test, one result file, one table row.

use crate::model::{
    CodecKind, LogSink, Overrides, Runner, Scenario, ScenarioKind, ScenarioWork, Spec, Target,
    TransportKind, WakeMode,
};
use crate::units::{ByteSize, DurationSpec};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Test names starting with this group are the harness's own fault-injection tests,
/// so no scenario may use it as a name.
pub const CELL_GROUP_FAULT: &str = "fault";

/// Everything needed to run and label one measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Stable, readable test name: `<scenario>::[<variant>::]<transport[-wake]>::<payload>`,
    /// where the variant is the codec, the log sink or the load shape (`c4-s16`).
    pub id: String,
    pub scenario: String,
    pub transport: TransportKind,
    pub wake: Option<WakeMode>,
    pub payload_bytes: u64,
    pub payload_label: String,
    pub iterations: u64,
    pub warmup: u64,
    pub seed: u64,
    pub profile: String,
    /// The kind of the cell and the settings of that kind alone.
    pub work: Work,
}

/// What a cell measures: one variant per kind, holding that kind's own settings and no
/// others. Serialized with the kind's name under `kind` (`{"kind": "echo", ...}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Work {
    /// Round-trip latency of small messages.
    Echo(Echoes),
    /// Round trips of large messages.
    Bulk(Echoes),
    /// Sensor frames through a codec, there and back.
    Codec(Frames),
    /// One publisher to two subscriber processes.
    FanOut(Fan),
    /// Two publisher processes to one subscriber.
    FanIn(Fan),
    /// Calls of a Cap'n Proto RPC method.
    Rpc(Calls),
    /// ZeroMQ REQ/REP requests.
    ReqRep(Calls),
    /// Client threads sending UDP requests to a peer with several receiving threads.
    UdpLoad(Load),
    /// Log lines written to a file.
    Logging(LogWrite),
}

/// `echo` and `bulk` cells: the payload bytes, echoed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Echoes {
    /// The deadline of one round trip: a reply later than this fails the cell (over udp:
    /// is lost).
    pub timeout: Duration,
    /// The share of replies that may be lost before the cell fails (0.0 ..= 1.0); only
    /// udp loses any.
    pub max_loss: f64,
}

/// `codec` cells: a sensor frame encoded, echoed by a peer that decodes and re-encodes
/// it, and decoded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Frames {
    /// The serialization format of the frames.
    pub codec: CodecKind,
    /// The deadline of one round trip, encoding and decoding included.
    pub timeout: Duration,
}

/// `fan-out` and `fan-in` cells: frames streamed to or from two peers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fan {
    /// The serialization format of the frames.
    pub codec: CodecKind,
    /// How late a frame may be acknowledged (fan-out) or arrive (fan-in) before it
    /// counts as dropped; also how long the measuring side waits for a stopped peer.
    pub frame_deadline: Duration,
    /// The share of frames that may be dropped before the cell fails (0.0 ..= 1.0).
    pub max_loss: f64,
}

/// `rpc` and `req-rep` cells: calls or requests, one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calls {
    /// The deadline of one call (one request and its reply).
    pub timeout: Duration,
}

/// `udp-load` cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Client threads, server threads and how long the clients send.
    pub shape: LoadShape,
    /// The deadline of one request: a client gives up on its echo after this, and the
    /// request counts as lost.
    pub timeout: Duration,
    /// The share of requests that may go unanswered before the cell fails (0.0 ..= 1.0).
    pub max_loss: f64,
}

/// `logging` cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogWrite {
    /// How the lines are written.
    pub sink: LogSink,
    /// The time the whole write may take: a file system that stops taking lines fails
    /// the cell once it has passed.
    pub budget: Duration,
}

/// The shape of a `udp-load` cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadShape {
    /// Client threads, each with its own socket, each waiting for its reply before the
    /// next request.
    pub clients: u32,
    /// The peer's threads receiving from (and replying through) its one socket.
    pub server_threads: u32,
    /// How long the clients keep sending.
    pub duration: Duration,
}

impl LoadShape {
    /// `c4-s16`: 4 clients, 16 server threads.
    pub fn label(&self) -> String {
        format!("c{}-s{}", self.clients, self.server_threads)
    }
}

impl Work {
    pub fn kind(&self) -> ScenarioKind {
        match self {
            Work::Echo(_) => ScenarioKind::Echo,
            Work::Bulk(_) => ScenarioKind::Bulk,
            Work::Codec(_) => ScenarioKind::Codec,
            Work::FanOut(_) => ScenarioKind::FanOut,
            Work::FanIn(_) => ScenarioKind::FanIn,
            Work::Rpc(_) => ScenarioKind::Rpc,
            Work::ReqRep(_) => ScenarioKind::ReqRep,
            Work::UdpLoad(_) => ScenarioKind::UdpLoad,
            Work::Logging(_) => ScenarioKind::Logging,
        }
    }

    /// The codec of the frames, for the kinds that carry sensor frames.
    pub fn codec(&self) -> Option<CodecKind> {
        match self {
            Work::Codec(frames) => Some(frames.codec),
            Work::FanOut(fan) | Work::FanIn(fan) => Some(fan.codec),
            _ => None,
        }
    }

    /// What sets a cell apart within its scenario and transport: the codec, the log sink
    /// or the load shape.
    pub fn variant_label(&self) -> Option<String> {
        match self {
            Work::Logging(write) => Some(write.sink.to_string()),
            Work::UdpLoad(load) => Some(load.shape.label()),
            work => work.codec().map(|codec| codec.to_string()),
        }
    }
}

impl Cell {
    /// The kind of scenario the cell belongs to.
    pub fn kind(&self) -> ScenarioKind {
        self.work.kind()
    }

    /// The transport as named in cell ids: `shm-busy`, `shm-blocking`, `tcp`, ...
    pub fn transport_label(&self) -> String {
        match self.wake {
            Some(wake) => format!("{}-{}", self.transport, wake.short()),
            None => self.transport.to_string(),
        }
    }

    /// What sets this cell apart within its scenario and transport: the codec, the log
    /// sink or the load shape.
    pub fn variant_label(&self) -> Option<String> {
        self.work.variant_label()
    }

    /// `<scenario>::[<variant>::]<transport[-wake]>::<payload>`.
    fn make_id(&self) -> String {
        match self.variant_label() {
            Some(variant) => format!(
                "{}::{variant}::{}::{}",
                self.scenario,
                self.transport_label(),
                self.payload_label
            ),
            None => format!(
                "{}::{}::{}",
                self.scenario,
                self.transport_label(),
                self.payload_label
            ),
        }
    }
}

impl Scenario {
    /// This scenario with a profile's overrides applied (checked when the spec was read:
    /// each names a field of this kind).
    fn overridden(&self, o: Option<&Overrides>) -> Scenario {
        let mut s = self.clone();
        let Some(o) = o else {
            return s;
        };
        if let Some(payloads) = &o.payloads {
            s.payloads = payloads.clone();
        }
        s.iterations = o.iterations.unwrap_or(s.iterations);
        s.warmup = o.warmup.unwrap_or(s.warmup);
        let set = |given: &Option<DurationSpec>, value: &mut Duration| {
            if let Some(given) = given {
                *value = given.get();
            }
        };
        match &mut s.work {
            ScenarioWork::Echo { timeout, .. }
            | ScenarioWork::Bulk { timeout, .. }
            | ScenarioWork::Codec { timeout, .. }
            | ScenarioWork::Rpc { timeout }
            | ScenarioWork::ReqRep { timeout } => set(&o.timeout, timeout),
            ScenarioWork::FanOut { frame_deadline, .. }
            | ScenarioWork::FanIn { frame_deadline, .. } => set(&o.frame_deadline, frame_deadline),
            ScenarioWork::UdpLoad {
                clients,
                server_threads,
                duration,
                timeout,
                ..
            } => {
                if let Some(given) = &o.clients {
                    clients.clone_from(given);
                }
                if let Some(given) = &o.server_threads {
                    server_threads.clone_from(given);
                }
                set(&o.duration, duration);
                set(&o.timeout, timeout);
            }
            ScenarioWork::Logging { budget, .. } => set(&o.budget, budget),
        }
        s
    }

    /// The transports of its cells, each with its wake mode: shm once per wake mode
    /// (both when none is given), the others once.
    fn channels(&self) -> Vec<(TransportKind, Option<WakeMode>)> {
        let wakes = match self.wake.as_slice() {
            [] => &[WakeMode::Blocking, WakeMode::BusyPoll][..],
            given => given,
        };
        self.transports
            .iter()
            .flat_map(|&transport| match transport {
                TransportKind::Shm => wakes.iter().map(|&w| (transport, Some(w))).collect(),
                _ => vec![(transport, None)],
            })
            .collect()
    }

    /// How many kind variants its cells come in (codecs, sinks, load shapes); None over
    /// 64 bits.
    fn variant_count(&self) -> Option<u64> {
        match &self.work {
            ScenarioWork::Codec { codecs, .. }
            | ScenarioWork::FanOut { codecs, .. }
            | ScenarioWork::FanIn { codecs, .. } => Some(codecs.len() as u64),
            ScenarioWork::UdpLoad {
                clients,
                server_threads,
                ..
            } => (clients.len() as u64).checked_mul(server_threads.len() as u64),
            ScenarioWork::Logging { sinks, .. } => Some(sinks.len() as u64),
            ScenarioWork::Echo { .. }
            | ScenarioWork::Bulk { .. }
            | ScenarioWork::Rpc { .. }
            | ScenarioWork::ReqRep { .. } => Some(1),
        }
    }

    /// The work of each of its cells' variants, in order: one per codec, sink or load
    /// shape (clients, then server threads), else one.
    fn works(&self) -> Vec<Work> {
        match self.work.clone() {
            ScenarioWork::Echo { timeout, max_loss } => {
                vec![Work::Echo(Echoes { timeout, max_loss })]
            }
            ScenarioWork::Bulk { timeout, max_loss } => {
                vec![Work::Bulk(Echoes { timeout, max_loss })]
            }
            ScenarioWork::Codec { codecs, timeout } => codecs
                .into_iter()
                .map(|codec| Work::Codec(Frames { codec, timeout }))
                .collect(),
            ScenarioWork::FanOut {
                codecs,
                frame_deadline,
                max_loss,
            } => codecs
                .into_iter()
                .map(|codec| {
                    Work::FanOut(Fan {
                        codec,
                        frame_deadline,
                        max_loss,
                    })
                })
                .collect(),
            ScenarioWork::FanIn {
                codecs,
                frame_deadline,
                max_loss,
            } => codecs
                .into_iter()
                .map(|codec| {
                    Work::FanIn(Fan {
                        codec,
                        frame_deadline,
                        max_loss,
                    })
                })
                .collect(),
            ScenarioWork::Rpc { timeout } => vec![Work::Rpc(Calls { timeout })],
            ScenarioWork::ReqRep { timeout } => vec![Work::ReqRep(Calls { timeout })],
            ScenarioWork::UdpLoad {
                clients,
                server_threads,
                duration,
                timeout,
                max_loss,
            } => clients
                .iter()
                .flat_map(|&clients| {
                    server_threads.iter().map(move |&server_threads| {
                        Work::UdpLoad(Load {
                            shape: LoadShape {
                                clients,
                                server_threads,
                                duration,
                            },
                            timeout,
                            max_loss,
                        })
                    })
                })
                .collect(),
            ScenarioWork::Logging { sinks, budget } => sinks
                .into_iter()
                .map(|sink| Work::Logging(LogWrite { sink, budget }))
                .collect(),
        }
    }

    /// Its cells: per transport (and wake mode), per variant, per payload.
    fn cells(&self, seed: u64, profile: &str) -> Vec<Cell> {
        let works = self.works();
        let mut cells = Vec::new();
        for (transport, wake) in self.channels() {
            for (work, payload) in works
                .iter()
                .flat_map(|work| self.payloads.iter().map(move |p| (work, p)))
            {
                cells.push(self.cell(seed, profile, (transport, wake), *work, payload));
            }
        }
        cells
    }

    fn cell(
        &self,
        seed: u64,
        profile: &str,
        (transport, wake): (TransportKind, Option<WakeMode>),
        work: Work,
        payload: &ByteSize,
    ) -> Cell {
        let mut cell = Cell {
            id: String::new(),
            scenario: self.name.clone(),
            transport,
            wake,
            payload_bytes: payload.bytes(),
            payload_label: payload.label().to_string(),
            iterations: self.iterations.get(),
            warmup: self.warmup,
            seed,
            profile: profile.to_string(),
            work,
        };
        cell.id = cell.make_id();
        cell
    }
}

impl Spec {
    pub fn profile_names(&self) -> Vec<&str> {
        self.profiles.keys().map(String::as_str).collect()
    }

    /// The declared target for a triple and runner, if any.
    pub fn target(&self, triple: &str, runner: Runner) -> Option<&Target> {
        self.targets
            .iter()
            .find(|t| t.triple == triple && t.runner == runner)
    }

    /// How many cells a profile expands into (what [`Spec::cells`] would return), counted
    /// without making them; None for an unknown profile or a count over 64 bits.
    pub fn cell_count(&self, profile: &str) -> Option<u64> {
        let overrides = &self.profiles.get(profile)?.scenarios;
        let mut total: u64 = 0;
        for scenario in &self.scenarios {
            let scenario = scenario.overridden(overrides.get(&scenario.name));
            let cells = (scenario.channels().len() as u64)
                .checked_mul(scenario.variant_count()?)?
                .checked_mul(scenario.payloads.len() as u64)?;
            total = total.checked_add(cells)?;
        }
        Some(total)
    }

    /// Every cell of a profile, in document order.
    pub fn cells(&self, profile: &str) -> Result<Vec<Cell>, String> {
        let overrides = &self
            .profiles
            .get(profile)
            .ok_or_else(|| {
                format!(
                    "no profile is named `{profile}`; the profiles are: {}",
                    self.profile_names().join(", ")
                )
            })?
            .scenarios;
        Ok(self
            .scenarios
            .iter()
            .flat_map(|scenario| {
                scenario
                    .overridden(overrides.get(&scenario.name))
                    .cells(self.seed, profile)
            })
            .collect())
    }
}
