//! Expansion of a spec into cells: one cell is one test, one result file, one table row.

use crate::model::{
    CodecKind, LogSink, Runner, ScenarioKind, Spec, Target, TransportKind, WakeMode,
};
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
    pub kind: ScenarioKind,
    pub transport: TransportKind,
    pub wake: Option<WakeMode>,
    pub payload_bytes: u64,
    pub payload_label: String,
    pub iterations: u64,
    pub warmup: u64,
    pub timeout: Duration,
    pub max_loss: f64,
    pub seed: u64,
    pub profile: String,
    /// `codec` scenarios: the serialization format of the sensor frames exchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec: Option<CodecKind>,
    /// `udp-load` cells: client threads, server threads and how long the clients send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadShape>,
    /// `logging` cells: how the lines are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<LogSink>,
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

impl Cell {
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
        self.codec
            .map(|c| c.to_string())
            .or_else(|| self.sink.map(|s| s.to_string()))
            .or_else(|| self.load.map(|l| l.label()))
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
            let o = overrides.get(&scenario.name);
            let payloads = o
                .and_then(|o| o.payloads.as_ref())
                .map_or(scenario.payloads.len(), Vec::len);
            let clients = o
                .and_then(|o| o.clients.as_ref())
                .map_or(scenario.clients.len(), Vec::len);
            let servers = o
                .and_then(|o| o.server_threads.as_ref())
                .map_or(scenario.server_threads.len(), Vec::len);
            let has_duration =
                o.and_then(|o| o.duration.as_ref()).is_some() || scenario.duration.is_some();
            let loads = if has_duration {
                (clients as u64).checked_mul(servers as u64)?
            } else {
                1
            };
            let codecs = if scenario.kind.uses_codecs() {
                scenario.codecs.len() as u64
            } else {
                1
            };
            let sinks = scenario.sinks.len().max(1) as u64;
            for &transport in &scenario.transports {
                let wakes = match transport {
                    TransportKind::Shm if scenario.wake.is_empty() => 2,
                    TransportKind::Shm => scenario.wake.len() as u64,
                    _ => 1,
                };
                let cells = wakes
                    .checked_mul(codecs)?
                    .checked_mul(sinks)?
                    .checked_mul(loads)?
                    .checked_mul(payloads as u64)?;
                total = total.checked_add(cells)?;
            }
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
        let mut cells = Vec::new();
        for scenario in &self.scenarios {
            let o = overrides.get(&scenario.name).cloned().unwrap_or_default();
            let payloads = o.payloads.unwrap_or_else(|| scenario.payloads.clone());
            let iterations = o.iterations.unwrap_or(scenario.iterations).get();
            let warmup = o.warmup.unwrap_or(scenario.warmup);
            let timeout = o.timeout.as_ref().unwrap_or(&scenario.timeout).get();
            let clients = o.clients.unwrap_or_else(|| scenario.clients.clone());
            let server_threads = o
                .server_threads
                .unwrap_or_else(|| scenario.server_threads.clone());
            let duration = o
                .duration
                .as_ref()
                .or(scenario.duration.as_ref())
                .map(|d| d.get());
            for &transport in &scenario.transports {
                let wakes: Vec<Option<WakeMode>> = match transport {
                    TransportKind::Shm if scenario.wake.is_empty() => {
                        vec![Some(WakeMode::Blocking), Some(WakeMode::BusyPoll)]
                    }
                    TransportKind::Shm => scenario.wake.iter().copied().map(Some).collect(),
                    _ => vec![None],
                };
                let codecs: Vec<Option<CodecKind>> = if scenario.kind.uses_codecs() {
                    scenario.codecs.iter().copied().map(Some).collect()
                } else {
                    vec![None]
                };
                let sinks: Vec<Option<LogSink>> = if scenario.sinks.is_empty() {
                    vec![None]
                } else {
                    scenario.sinks.iter().copied().map(Some).collect()
                };
                let loads: Vec<Option<LoadShape>> = match &duration {
                    Some(duration) => clients
                        .iter()
                        .flat_map(|&clients| {
                            server_threads.iter().map(move |&server_threads| {
                                Some(LoadShape {
                                    clients,
                                    server_threads,
                                    duration: *duration,
                                })
                            })
                        })
                        .collect(),
                    None => vec![None],
                };
                for &wake in &wakes {
                    for &codec in &codecs {
                        for &sink in &sinks {
                            for &load in &loads {
                                for payload in &payloads {
                                    let mut cell = Cell {
                                        id: String::new(),
                                        scenario: scenario.name.clone(),
                                        kind: scenario.kind,
                                        transport,
                                        wake,
                                        payload_bytes: payload.bytes(),
                                        payload_label: payload.label().to_string(),
                                        iterations,
                                        warmup,
                                        timeout,
                                        max_loss: scenario.max_loss,
                                        seed: self.seed,
                                        profile: profile.to_string(),
                                        codec,
                                        load,
                                        sink,
                                    };
                                    cell.id = match cell.variant_label() {
                                        Some(variant) => format!(
                                            "{}::{variant}::{}::{}",
                                            cell.scenario,
                                            cell.transport_label(),
                                            cell.payload_label
                                        ),
                                        None => format!(
                                            "{}::{}::{}",
                                            cell.scenario,
                                            cell.transport_label(),
                                            cell.payload_label
                                        ),
                                    };
                                    cells.push(cell);
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(cells)
    }
}
