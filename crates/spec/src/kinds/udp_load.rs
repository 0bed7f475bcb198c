//! `udp-load` (seed 004): client threads, each with its own UDP socket, send and wait for
//! the echo of a peer with several receiving threads; transactions per second, success
//! rate. One cell per number of clients and of server threads.

use crate::keys::{check_thread_counts, Keys};
use crate::kind_spec::{override_duration, About, KindSpec, OverMaxPayload, Settings};
use crate::limits::SLACK;
use crate::model::{Overrides, TransportKind};
use crate::units::UDP_MAX_PAYLOAD;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The most requests per client of a `udp-load` cell (warm-up included); its `duration`
/// usually ends it first. Every answered request keeps its time (24 bytes).
pub const MAX_LOAD_REQUESTS: u64 = 10_000_000;

/// Bytes kept per answered request: its start and its round trip.
const LOAD_SAMPLE: u64 = 24;

/// A `udp-load` scenario: one cell per number of clients and of server threads. Clients
/// send for `duration`; `timeout`: the deadline of one request; `max_loss`: the share of
/// requests that may go unanswered.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadScenario {
    pub clients: Vec<u32>,
    pub server_threads: Vec<u32>,
    pub duration: Duration,
    pub timeout: Duration,
    pub max_loss: f64,
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

/// Client threads sending UDP requests to a peer with several receiving threads.
pub(crate) struct UdpLoad;

impl Settings for LoadScenario {
    type Cell = Load;

    fn parse(keys: &mut Keys<'_>) -> Option<LoadScenario> {
        let raw = keys.raw;
        let clients = threads(keys, "clients", raw.clients.as_deref());
        let server_threads = threads(keys, "server_threads", raw.server_threads.as_deref());
        let duration = keys.required_duration(
            "duration",
            raw.duration.as_ref(),
            "how long the clients send, e.g. 5s",
        );
        let timeout = keys.timeout();
        let max_loss = keys.max_loss();
        Some(LoadScenario {
            clients: clients?,
            server_threads: server_threads?,
            duration: duration?,
            timeout: timeout?,
            max_loss: max_loss?,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        if let Some(given) = &overrides.clients {
            self.clients.clone_from(given);
        }
        if let Some(given) = &overrides.server_threads {
            self.server_threads.clone_from(given);
        }
        override_duration(&overrides.duration, &mut self.duration);
        override_duration(&overrides.timeout, &mut self.timeout);
    }

    fn variant_count(&self) -> Option<u64> {
        (self.clients.len() as u64).checked_mul(self.server_threads.len() as u64)
    }

    /// Clients, then server threads.
    fn cells(&self) -> Vec<Load> {
        let (duration, timeout, max_loss) = (self.duration, self.timeout, self.max_loss);
        self.clients
            .iter()
            .flat_map(|&clients| {
                self.server_threads.iter().map(move |&server_threads| Load {
                    shape: LoadShape {
                        clients,
                        server_threads,
                        duration,
                    },
                    timeout,
                    max_loss,
                })
            })
            .collect()
    }

    fn variant_label(load: &Load) -> Option<String> {
        Some(load.shape.label())
    }
}

impl KindSpec for UdpLoad {
    type Scenario = LoadScenario;
    type Cell = Load;
    const ABOUT: About = About {
        name: "udp-load",
        transports: &[TransportKind::Udp],
        stacks: false,
        keys: &[
            "clients",
            "server_threads",
            "duration",
            "timeout",
            "max_loss",
        ],
        max_payload: UDP_MAX_PAYLOAD,
        over_max_payload: OverMaxPayload::Datagram,
        stamp: 16,
        max_round_trips: MAX_LOAD_REQUESTS,
        round_trips: "requests per client",
        processes: 2,
        // Per client thread: request and reply (the clients are counted apart).
        payload_copies: 2,
    };

    /// Each client's buffers and kept samples, each server thread's message, and the
    /// samples gathered into one list at the end.
    fn messages_need(load: &Load, payload: u64, round_trips: Option<u64>) -> Option<u64> {
        let round_trips = round_trips?;
        let message = payload.checked_add(SLACK)?;
        let (clients, servers) = (
            u64::from(load.shape.clients),
            u64::from(load.shape.server_threads),
        );
        let per_client = message
            .checked_mul(Self::ABOUT.payload_copies)?
            .checked_add(LOAD_SAMPLE.checked_mul(round_trips)?)?;
        // The kept samples are gathered into one list at the end: twice.
        let gathered = LOAD_SAMPLE.checked_mul(round_trips)?.checked_mul(clients)?;
        per_client
            .checked_mul(clients)?
            .checked_add(message.checked_mul(servers)?)?
            .checked_add(gathered)
    }
}

/// Numbers of threads a udp-load scenario needs.
fn threads(keys: &mut Keys<'_>, key: &str, given: Option<&[u32]>) -> Option<Vec<u32>> {
    let Some(counts) = given.filter(|c| !c.is_empty()) else {
        let example = "[1, 4, 16]";
        let name = keys.name;
        keys.problem(
            key,
            format!("{name} scenarios need `{key}`, e.g. {example}"),
        );
        return None;
    };
    keys.check_list(key, |at, out| check_thread_counts(counts, at, out))
        .then(|| counts.to_vec())
}
