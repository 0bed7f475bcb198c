//! `echo` (round-trip latency of small messages) and `bulk` (round trips of large ones,
//! with their throughput): the payload bytes, echoed by the peer.

use crate::keys::Keys;
use crate::kind_spec::{override_duration, About, KindSpec, OverMaxPayload, Settings};
use crate::limits::{MAX_PAYLOAD, MAX_ROUND_TRIPS};
use crate::model::{Overrides, TransportKind};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The settings of `echo` and `bulk` scenarios and of their cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Echoes {
    /// The deadline of one round trip: a reply later than this fails the cell (over udp:
    /// is lost).
    pub timeout: Duration,
    /// The share of replies that may be lost before the cell fails (0.0 ..= 1.0); only
    /// udp loses any.
    pub max_loss: f64,
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
        keys: &["timeout", "max_loss"],
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

impl Settings for Echoes {
    type Cell = Echoes;

    /// `timeout` and `max_loss`: a loss is allowed only over udp.
    fn parse(keys: &mut Keys<'_>) -> Option<Echoes> {
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
        Some(Echoes {
            timeout: timeout?,
            max_loss: max_loss?,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        override_duration(&overrides.timeout, &mut self.timeout);
    }

    fn cells(&self) -> Vec<Echoes> {
        vec![*self]
    }
}

impl KindSpec for Echo {
    type Scenario = Echoes;
    type Cell = Echoes;
    const ABOUT: About = about("echo");
}

impl KindSpec for Bulk {
    type Scenario = Echoes;
    type Cell = Echoes;
    const ABOUT: About = about("bulk");
}
