//! `echo` (round-trip latency of small messages) and `bulk` (round trips of large ones,
//! with their throughput): the payload bytes, echoed by the peer.

use crate::keys::Keys;
use crate::kind_spec::{override_duration, About, KindSpec, OverMaxPayload, Settings};
use crate::limits::{MAX_PAYLOAD, MAX_ROUND_TRIPS};
use crate::model::{MessagePath, Overrides, TransportKind};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The settings of an `echo` or `bulk` scenario: its cells', and the message paths they
/// come in.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoScenario {
    pub echoes: Echoes,
    /// `paths`: one cell per path, named by it; empty for one cell per transport on the
    /// transport's own path (the first of [`crate::ChannelKind::message_paths`]).
    pub paths: Vec<MessagePath>,
}

/// The settings of an `echo` or `bulk` cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Echoes {
    /// The deadline of one round trip: a reply later than this fails the cell (over udp:
    /// is lost).
    pub timeout: Duration,
    /// The share of replies that may be lost before the cell fails (0.0 ..= 1.0); only
    /// udp loses any.
    pub max_loss: f64,
    /// The message path the cell asked for (its id names it); `None`: the transport's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<MessagePath>,
}

impl Echoes {
    /// A cell's settings on its transport's own path.
    pub fn new(timeout: Duration, max_loss: f64) -> Self {
        Echoes {
            timeout,
            max_loss,
            path: None,
        }
    }
}

/// Round-trip latency of small messages.
pub(crate) struct Echo;

/// Round trips of large messages; reports throughput as well as time per round trip.
pub(crate) struct Bulk;

const fn about(name: &'static str) -> About {
    About {
        name,
        // Every channel: every transport that carries messages between two processes.
        transports: &TransportKind::CHANNELS,
        stacks: true,
        keys: &["timeout", "max_loss", "paths"],
        max_payload: MAX_PAYLOAD,
        over_max_payload: OverMaxPayload::Carried,
        stamp: 0,
        max_round_trips: MAX_ROUND_TRIPS,
        round_trips: "round trips",
        processes: 2,
        // Request and reply buffer; the peer's message.
        payload_copies: 3,
    }
}

impl Settings for EchoScenario {
    type Cell = Echoes;

    /// `timeout`, `max_loss` (a loss is allowed only over udp) and `paths` (each offered
    /// by every transport listed, and not with an external peer).
    fn parse(keys: &mut Keys<'_>) -> Option<EchoScenario> {
        let timeout = keys.timeout();
        let max_loss = keys.max_loss();
        if keys.raw.max_loss.is_some() && !keys.raw.transports.contains(&TransportKind::Udp) {
            let kind = keys.name;
            keys.problem(
                "max_loss",
                format!(
                    "only udp loses messages, and this {kind} scenario does not list it; remove `max_loss` or add udp to transports"
                ),
            );
            return None;
        }
        let paths = match keys.raw.paths.clone() {
            None => Vec::new(),
            Some(given) => paths(keys, &given)?,
        };
        Some(EchoScenario {
            echoes: Echoes::new(timeout?, max_loss?),
            paths,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        override_duration(&overrides.timeout, &mut self.echoes.timeout);
    }

    fn variant_count(&self) -> Option<u64> {
        Some(self.paths.len().max(1) as u64)
    }

    fn cells(&self) -> Vec<Echoes> {
        match self.paths.as_slice() {
            [] => vec![self.echoes],
            paths => paths
                .iter()
                .map(|&path| Echoes {
                    path: Some(path),
                    ..self.echoes
                })
                .collect(),
        }
    }

    fn variant_label(cell: &Echoes) -> Option<String> {
        cell.path.map(|path| path.to_string())
    }
}

/// `paths`: at least one, none twice, each offered by every transport of the scenario;
/// with an external peer, the copying path only (the peer protocol copies).
fn paths(keys: &mut Keys<'_>, given: &[MessagePath]) -> Option<Vec<MessagePath>> {
    let needs = format!(
        "`paths` lists at least one message path: {}",
        MessagePath::ALL.map(MessagePath::as_str).join(", ")
    );
    let paths = keys.list("paths", Some(given), &needs)?;
    if keys.raw.peer.is_some() {
        if let Some(other) = paths.iter().find(|&&p| p != MessagePath::Copied) {
            keys.problem(
                "paths",
                format!("an external peer serves the peer protocol, which copies: it has no {other} path; list `copied` only, or remove `peer`"),
            );
            return None;
        }
    }
    let mut ok = true;
    for transport in keys.raw.transports.clone() {
        let offered = transport.channel().map_or(&[][..], |c| c.message_paths());
        for path in &paths {
            if !offered.contains(path) {
                let offers: Vec<_> = offered.iter().map(|p| p.as_str()).collect();
                keys.problem(
                    "paths",
                    format!(
                        "{transport} has no {path} path (it offers {}); list {transport} in a scenario of its own, or remove `{path}`",
                        offers.join(", ")
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(paths)
}

impl KindSpec for Echo {
    type Scenario = EchoScenario;
    type Cell = Echoes;
    const ABOUT: About = about("echo");
}

impl KindSpec for Bulk {
    type Scenario = EchoScenario;
    type Cell = Echoes;
    const ABOUT: About = about("bulk");
}
