//! The message both codecs carry: a sensor frame, as in seed 003. A header (sequence
//! number, timestamp, source), scalar readings of several types, repeated structured
//! items, a UTF-8 label and a blob sized by the cell's payload.

use ipc_matrix_spec::{pseudo_random_bytes, splitmix64};

#[derive(Debug, Clone, PartialEq)]
pub struct SensorFrame {
    pub header: Header,
    pub temperature_c: f64,
    pub pressure_pa: f32,
    pub status: Status,
    pub readings: Vec<Reading>,
    pub label: String,
    pub blob: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sequence: u64,
    pub sent_at_ns: u64,
    pub source_id: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub channel: u32,
    pub value: f64,
    pub quality: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Degraded,
    Failed,
}

/// Readings per frame.
pub const READINGS: usize = 4;
/// About what a frame weighs besides its blob (header, scalars, readings, label, framing);
/// a frame for a payload of N bytes carries a blob of N minus this.
pub const STRUCTURE_BYTES: usize = 160;

impl SensorFrame {
    /// The frame a seed and a sequence number stand for, about `payload_bytes` long when
    /// encoded: the same on every CPU.
    pub fn sample(seed: u64, sequence: u64, payload_bytes: usize) -> Self {
        let mut state = seed ^ sequence.rotate_left(17);
        let mut word = || splitmix64(&mut state);
        // Values exactly representable in binary, so text renderings agree too.
        let mut decimal = |scale: f64| (word() % 2_000_000) as f64 / scale - 1000.0;
        let temperature_c = decimal(1024.0);
        let pressure_pa = (101_325.0 + decimal(4.0)) as f32;
        let readings = (0..READINGS as u32)
            .map(|channel| Reading {
                channel,
                value: decimal(256.0),
                quality: (channel * 31 % 101) as u8,
            })
            .collect();
        let status = match sequence % 3 {
            0 => Status::Ok,
            1 => Status::Degraded,
            _ => Status::Failed,
        };
        Self {
            header: Header {
                sequence,
                sent_at_ns: 1_796_000_000_000_000_000 + sequence * 1_000,
                source_id: (seed % 10_000) as u32,
            },
            temperature_c,
            pressure_pa,
            status,
            readings,
            label: format!("capteur-{}-Straße-µ", seed % 100),
            blob: pseudo_random_bytes(
                seed ^ sequence,
                payload_bytes.saturating_sub(STRUCTURE_BYTES),
            ),
        }
    }

    /// The first field where `actual` differs from `self`, named by its path, or `None`.
    /// The blob is compared byte for byte and a difference named by its offset.
    pub fn first_difference(&self, actual: &SensorFrame) -> Option<String> {
        let e = self;
        let a = actual;
        macro_rules! field {
            ($path:literal, $e:expr, $a:expr) => {
                if $e != $a {
                    return Some(format!("{}: expected {:?}, got {:?}", $path, $e, $a));
                }
            };
        }
        field!("header.sequence", e.header.sequence, a.header.sequence);
        field!(
            "header.sent_at_ns",
            e.header.sent_at_ns,
            a.header.sent_at_ns
        );
        field!("header.source_id", e.header.source_id, a.header.source_id);
        field!(
            "temperature_c",
            e.temperature_c.to_bits(),
            a.temperature_c.to_bits()
        );
        field!(
            "pressure_pa",
            e.pressure_pa.to_bits(),
            a.pressure_pa.to_bits()
        );
        field!("status", e.status, a.status);
        field!("readings.len", e.readings.len(), a.readings.len());
        for (i, (re, ra)) in e.readings.iter().zip(&a.readings).enumerate() {
            if re.channel != ra.channel
                || re.value.to_bits() != ra.value.to_bits()
                || re.quality != ra.quality
            {
                return Some(format!("readings[{i}]: expected {re:?}, got {ra:?}"));
            }
        }
        field!("label", e.label.as_str(), a.label.as_str());
        field!("blob.len", e.blob.len(), a.blob.len());
        if let Some(offset) = e.blob.iter().zip(&a.blob).position(|(x, y)| x != y) {
            return Some(format!(
                "blob[{offset}]: expected {:#04x}, got {:#04x}",
                e.blob[offset], a.blob[offset]
            ));
        }
        None
    }
}

/// Bytes that are not a sensor frame in the expected format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}
