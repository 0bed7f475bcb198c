//! One realistic message in two serialization formats: a sensor frame in Cap'n Proto
//! (`schema/sensor_frame.capnp`, the `capnp` crate) and protobuf
//! (`schema/sensor_frame.proto`, `prost`). Code is generated at build time with no system
//! tools (see build.rs). Decoding yields the same plain [`SensorFrame`] from either, so a
//! round trip is checked field by field and the blob byte for byte.
//!
//! Layers, each module using only those below it: `frame` (the plain frame) and
//! `generated` (the schemas' code); `capnp_codec` and `prost_codec`; this file, which
//! picks one by [`Codec`].

mod capnp_codec;
mod frame;
mod generated;
mod prost_codec;

pub use frame::{DecodeError, Header, Reading, SensorFrame, Status, READINGS, STRUCTURE_BYTES};
pub use generated::echo_rpc_capnp;

/// The schemas, for tools that decode with the reference implementations.
pub const CAPNP_SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/sensor_frame.capnp");
pub const PROTO_SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/sensor_frame.proto");

/// The serialization formats, as matrix.yaml names them.
pub use ipc_matrix_spec::CodecKind as Codec;

/// Encoding and decoding a [`SensorFrame`] in a [`Codec`]'s format.
pub trait FrameCodec {
    /// Encodes `frame` into `out` (cleared first).
    fn encode(self, frame: &SensorFrame, out: &mut Vec<u8>);
    fn decode(self, bytes: &[u8]) -> Result<SensorFrame, DecodeError>;
}

impl FrameCodec for Codec {
    fn encode(self, frame: &SensorFrame, out: &mut Vec<u8>) {
        match self {
            Codec::Capnp => capnp_codec::encode(frame, out),
            Codec::Prost => prost_codec::encode(frame, out),
        }
    }

    fn decode(self, bytes: &[u8]) -> Result<SensorFrame, DecodeError> {
        match self {
            Codec::Capnp => capnp_codec::decode(bytes),
            Codec::Prost => prost_codec::decode(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_codecs_round_trip_every_field() {
        for payload in [0, 200, 65_536, 1_000_003] {
            let frame = SensorFrame::sample(7, 42, payload);
            for codec in Codec::ALL {
                let mut bytes = Vec::new();
                codec.encode(&frame, &mut bytes);
                let back = codec.decode(&bytes).unwrap();
                assert_eq!(frame.first_difference(&back), None, "{codec} {payload}");
                assert_eq!(frame, back);
            }
        }
    }

    #[test]
    fn a_changed_field_is_named() {
        let frame = SensorFrame::sample(7, 42, 1000);
        let mut other = frame.clone();
        other.readings[3].value += 1.0;
        assert!(frame
            .first_difference(&other)
            .unwrap()
            .starts_with("readings[3]"));
        let mut other = frame.clone();
        other.blob[100] ^= 1;
        assert!(frame
            .first_difference(&other)
            .unwrap()
            .starts_with("blob[100]"));
    }

    #[test]
    fn damaged_bytes_are_refused_not_misread() {
        let frame = SensorFrame::sample(7, 42, 1000);
        for codec in Codec::ALL {
            let mut bytes = Vec::new();
            codec.encode(&frame, &mut bytes);
            let cut = codec.decode(&bytes[..bytes.len() / 2]);
            assert!(cut.is_err(), "{codec}: half a message decoded");
        }
    }

    #[test]
    fn frames_are_about_the_payload_size() {
        for codec in Codec::ALL {
            let mut bytes = Vec::new();
            codec.encode(&SensorFrame::sample(1, 1, 65_536), &mut bytes);
            let size = bytes.len() as f64;
            assert!((60_000.0..70_000.0).contains(&size), "{codec}: {size}");
        }
    }
}
