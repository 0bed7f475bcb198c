//! Cap'n Proto: standard (unpacked) stream framing, one segment sized to fit the frame.

use crate::frame::{DecodeError, Header, Reading, SensorFrame, Status};
use crate::generated::sensor_frame_capnp::{sensor_frame, Status as WireStatus};
use capnp::message::{Builder, HeapAllocator, ReaderOptions};

pub fn encode(frame: &SensorFrame, out: &mut Vec<u8>) {
    // One first segment big enough for the whole frame: no segment table growth.
    let words = (frame.blob.len() + frame.label.len()) / 8 + 128;
    let mut message = Builder::new(HeapAllocator::new().first_segment_words(words as u32));
    let mut root = message.init_root::<sensor_frame::Builder>();
    {
        let mut header = root.reborrow().init_header();
        header.set_sequence(frame.header.sequence);
        header.set_sent_at_ns(frame.header.sent_at_ns);
        header.set_source_id(frame.header.source_id);
    }
    root.set_temperature_c(frame.temperature_c);
    root.set_pressure_pa(frame.pressure_pa);
    root.set_status(match frame.status {
        Status::Ok => WireStatus::Ok,
        Status::Degraded => WireStatus::Degraded,
        Status::Failed => WireStatus::Failed,
    });
    {
        let mut readings = root.reborrow().init_readings(frame.readings.len() as u32);
        for (i, r) in frame.readings.iter().enumerate() {
            let mut item = readings.reborrow().get(i as u32);
            item.set_channel(r.channel);
            item.set_value(r.value);
            item.set_quality(r.quality);
        }
    }
    root.set_label(frame.label.as_str());
    root.set_blob(&frame.blob);
    out.clear();
    capnp::serialize::write_message(&mut *out, &message).expect("writing to a Vec cannot fail");
}

pub fn decode(bytes: &[u8]) -> Result<SensorFrame, DecodeError> {
    let options = ReaderOptions {
        // The default limit (64 MiB of traversal) is below what a 26 MB frame may need
        // when read twice; allow what the bytes can hold, no more.
        traversal_limit_in_words: Some(bytes.len() / 8 * 2 + 1024),
        nesting_limit: 16,
    };
    let mut slice = bytes;
    let message = capnp::serialize::read_message_from_flat_slice(&mut slice, options)
        .map_err(|e| DecodeError(format!("capnp framing: {e}")))?;
    if !slice.is_empty() {
        return Err(DecodeError(format!(
            "capnp: {} bytes after the message",
            slice.len()
        )));
    }
    let capnp = |e: capnp::Error| DecodeError(format!("capnp: {e}"));
    let root = message.get_root::<sensor_frame::Reader>().map_err(capnp)?;
    let header = root.get_header().map_err(capnp)?;
    let status = match root
        .get_status()
        .map_err(|e| DecodeError(format!("capnp status: {e}")))?
    {
        WireStatus::Ok => Status::Ok,
        WireStatus::Degraded => Status::Degraded,
        WireStatus::Failed => Status::Failed,
    };
    let readings = root
        .get_readings()
        .map_err(capnp)?
        .iter()
        .map(|r| Reading {
            channel: r.get_channel(),
            value: r.get_value(),
            quality: r.get_quality(),
        })
        .collect();
    let label = root
        .get_label()
        .map_err(capnp)?
        .to_str()
        .map_err(|e| DecodeError(format!("capnp label: {e}")))?
        .to_string();
    Ok(SensorFrame {
        header: Header {
            sequence: header.get_sequence(),
            sent_at_ns: header.get_sent_at_ns(),
            source_id: header.get_source_id(),
        },
        temperature_c: root.get_temperature_c(),
        pressure_pa: root.get_pressure_pa(),
        status,
        readings,
        label,
        blob: root.get_blob().map_err(capnp)?.to_vec(),
    })
}
