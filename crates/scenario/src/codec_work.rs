//! The codec half of a `codec` cell: the sensor frame of round trip i, encoding it and
//! decoding the reply, each also timed on its own. The peer decodes every frame and
//! encodes it again before replying, so a round trip holds two encodes and two decodes.

use crate::measure::Recorder;
use ipc_matrix_codec::{Codec, DecodeError, FrameCodec, SensorFrame};
use std::time::{Duration, Instant};

/// Room above the payload for a frame's structure (header, readings, label, framing).
pub const FRAME_SLACK: usize = 4096;

pub struct CodecWork {
    codec: Codec,
    frame: SensorFrame,
    encoded: Vec<u8>,
    pub encode_times: Recorder,
    pub decode_times: Recorder,
    /// The last measured encoding's and decoding's times, not yet recorded (see
    /// [`CodecWork::record_times`]).
    unrecorded: (Option<Duration>, Option<Duration>),
    /// Labels of the instruction-counting windows of encoding and decoding, when counted.
    count: Option<(u64, u64)>,
}

impl CodecWork {
    pub fn new(codec: Codec, seed: u64, payload_bytes: usize) -> Self {
        Self {
            codec,
            // One frame, built once: only its header changes from round trip to round trip.
            frame: SensorFrame::sample(seed, 0, payload_bytes),
            encoded: Vec::with_capacity(payload_bytes + FRAME_SLACK),
            encode_times: Recorder::new(),
            decode_times: Recorder::new(),
            unrecorded: (None, None),
            count: None,
        }
    }

    /// Counts the instructions of each measured encoding and decoding in windows of their
    /// own (`labels`: encode, decode).
    pub fn count_with(&mut self, labels: (u64, u64)) {
        self.count = Some(labels);
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The frame of round trip `index` (untimed).
    pub fn prepare(&mut self, index: u64) {
        self.frame.header.sequence = index;
        self.frame.header.sent_at_ns = 1_796_000_000_000_000_000 + index;
    }

    /// Encodes the prepared frame; the time is kept when `measured`, to be recorded by
    /// [`CodecWork::record_times`].
    pub fn encode(&mut self, measured: bool) -> &[u8] {
        let window = self.count.filter(|_| measured).map(|(encode, _)| encode);
        window.inspect(|&label| ipc_matrix_count_window::open(label));
        let started = Instant::now();
        self.codec.encode(&self.frame, &mut self.encoded);
        window.inspect(|&label| ipc_matrix_count_window::close(label));
        if measured {
            self.unrecorded.0 = Some(started.elapsed());
        }
        &self.encoded
    }

    /// Decodes a reply; the time is kept when `measured`, to be recorded by
    /// [`CodecWork::record_times`].
    pub fn decode(&mut self, reply: &[u8], measured: bool) -> Result<SensorFrame, DecodeError> {
        let window = self.count.filter(|_| measured).map(|(_, decode)| decode);
        window.inspect(|&label| ipc_matrix_count_window::open(label));
        let started = Instant::now();
        let decoded = self.codec.decode(reply);
        window.inspect(|&label| ipc_matrix_count_window::close(label));
        if measured {
            self.unrecorded.1 = Some(started.elapsed());
        }
        decoded
    }

    /// Records the times kept since the last call. The round trip calls it once its
    /// timer has stopped and its counting window has closed: a recording's cost depends
    /// on the times themselves (the histogram's minimum and maximum, the growth of the
    /// sample list), so inside the window it made the count move with timing.
    pub fn record_times(&mut self) {
        if let Some(encoded) = self.unrecorded.0.take() {
            self.encode_times.record(encoded);
        }
        if let Some(decoded) = self.unrecorded.1.take() {
            self.decode_times.record(decoded);
        }
    }

    /// The first field where a decoded reply differs from the frame sent.
    pub fn difference(&self, decoded: &SensorFrame) -> Option<String> {
        self.frame.first_difference(decoded)
    }
}
