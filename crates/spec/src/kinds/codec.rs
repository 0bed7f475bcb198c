//! `codec`: a sensor frame encoded with a codec, sent, decoded and re-encoded by the peer,
//! sent back and decoded: serialization and transport together, one cell per codec.

use crate::keys::Keys;
use crate::kind_spec::{override_duration, About, KindSpec, OverMaxPayload, Settings};
use crate::limits::{MAX_FRAME_PAYLOAD, MAX_ROUND_TRIPS};
use crate::model::{CodecKind, Overrides, TransportKind};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A `codec` scenario: its codecs (one cell each) and the deadline of one round trip.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecScenario {
    pub codecs: Vec<CodecKind>,
    pub timeout: Duration,
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

/// Sensor frames through a codec, there and back.
pub(crate) struct Codec;

impl Settings for CodecScenario {
    type Cell = Frames;

    fn parse(keys: &mut Keys<'_>) -> Option<CodecScenario> {
        let codecs = keys.codecs();
        let timeout = keys.timeout();
        Some(CodecScenario {
            codecs: codecs?,
            timeout: timeout?,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        override_duration(&overrides.timeout, &mut self.timeout);
    }

    fn variant_count(&self) -> Option<u64> {
        Some(self.codecs.len() as u64)
    }

    fn cells(&self) -> Vec<Frames> {
        let timeout = self.timeout;
        self.codecs
            .iter()
            .map(|&codec| Frames { codec, timeout })
            .collect()
    }

    fn variant_label(frames: &Frames) -> Option<String> {
        Some(frames.codec.to_string())
    }

    fn codec(frames: &Frames) -> Option<CodecKind> {
        Some(frames.codec)
    }
}

impl KindSpec for Codec {
    type Scenario = CodecScenario;
    type Cell = Frames;
    const ABOUT: About = About {
        name: "codec",
        transports: &[TransportKind::Shm, TransportKind::Local, TransportKind::Tcp],
        stacks: true,
        keys: &["codecs", "timeout"],
        max_payload: MAX_FRAME_PAYLOAD,
        over_max_payload: OverMaxPayload::Carried,
        stamp: 0,
        max_round_trips: MAX_ROUND_TRIPS,
        round_trips: "round trips",
        processes: 2,
        // Payload, frame, encoding, reply, decoded reply; the peer's message, decoded
        // frame, re-encoding.
        payload_copies: 8,
    };
}
