//! `fan-out` (one publisher, the measuring side, to two subscriber processes) and
//! `fan-in` (two publisher processes to one subscriber, the measuring side): sensor
//! frames with their one-way latency, one cell per codec; a frame later than its
//! deadline is dropped.

use crate::keys::Keys;
use crate::kind_spec::{override_duration, About, KindSpec, OverMaxPayload, Settings};
use crate::limits::{MAX_FRAME_PAYLOAD, MAX_ROUND_TRIPS};
use crate::model::{CodecKind, Overrides, TransportKind};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A `fan-out` or `fan-in` scenario: its codecs (one cell each) and the settings of
/// every cell.
#[derive(Debug, Clone, PartialEq)]
pub struct FanScenario {
    pub codecs: Vec<CodecKind>,
    pub frame_deadline: Duration,
    pub max_loss: f64,
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

/// One publisher (the measuring side) to two subscriber processes: every frame to both,
/// each acknowledged with its one-way latency; a frame not acknowledged before its
/// deadline is dropped.
pub(crate) struct FanOut;

/// Two publisher processes streaming frames to one subscriber (the measuring side):
/// one-way latency per frame; a sequence gap or a frame later than its deadline is
/// dropped.
pub(crate) struct FanIn;

const fn about(name: &'static str) -> About {
    About {
        name,
        transports: &[TransportKind::Shm, TransportKind::Local, TransportKind::Tcp],
        stacks: false,
        keys: &["codecs", "frame_deadline", "max_loss"],
        max_payload: MAX_FRAME_PAYLOAD,
        over_max_payload: OverMaxPayload::Carried,
        stamp: 0,
        max_round_trips: MAX_ROUND_TRIPS,
        round_trips: "round trips",
        processes: 3,
        // Fan-out: frame and encoding; each of two subscribers its expected frame,
        // message and decoded frame. Fan-in: two expected frames, message and decoded
        // frame; each of two publishers a frame and its encoding.
        payload_copies: 8,
    }
}

impl Settings for FanScenario {
    type Cell = Fan;

    fn parse(keys: &mut Keys<'_>) -> Option<FanScenario> {
        let raw = keys.raw;
        let codecs = keys.codecs();
        let frame_deadline = keys.required_duration(
            "frame_deadline",
            raw.frame_deadline.as_ref(),
            "how late a frame may arrive before it counts as dropped, e.g. 2s",
        );
        let max_loss = keys.max_loss();
        Some(FanScenario {
            codecs: codecs?,
            frame_deadline: frame_deadline?,
            max_loss: max_loss?,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        override_duration(&overrides.frame_deadline, &mut self.frame_deadline);
    }

    fn variant_count(&self) -> Option<u64> {
        Some(self.codecs.len() as u64)
    }

    fn cells(&self) -> Vec<Fan> {
        self.codecs
            .iter()
            .map(|&codec| Fan {
                codec,
                frame_deadline: self.frame_deadline,
                max_loss: self.max_loss,
            })
            .collect()
    }

    fn variant_label(fan: &Fan) -> Option<String> {
        Some(fan.codec.to_string())
    }

    fn codec(fan: &Fan) -> Option<CodecKind> {
        Some(fan.codec)
    }
}

impl KindSpec for FanOut {
    type Scenario = FanScenario;
    type Cell = Fan;
    const ABOUT: About = about("fan-out");
}

impl KindSpec for FanIn {
    type Scenario = FanScenario;
    type Cell = Fan;
    const ABOUT: About = about("fan-in");
}
