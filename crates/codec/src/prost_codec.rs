//! protobuf through prost: the generated message, length-delimited by the transport.

use crate::frame::{DecodeError, Header, Reading, SensorFrame, Status};
use crate::generated::proto;
use prost::Message;

pub fn encode(frame: &SensorFrame, out: &mut Vec<u8>) {
    let message = proto::SensorFrame {
        header: Some(proto::Header {
            sequence: frame.header.sequence,
            sent_at_ns: frame.header.sent_at_ns,
            source_id: frame.header.source_id,
        }),
        temperature_c: frame.temperature_c,
        pressure_pa: frame.pressure_pa,
        status: match frame.status {
            Status::Ok => proto::Status::Ok,
            Status::Degraded => proto::Status::Degraded,
            Status::Failed => proto::Status::Failed,
        } as i32,
        readings: frame
            .readings
            .iter()
            .map(|r| proto::Reading {
                channel: r.channel,
                value: r.value,
                quality: u32::from(r.quality),
            })
            .collect(),
        label: frame.label.clone(),
        blob: frame.blob.clone(),
    };
    out.clear();
    out.reserve(message.encoded_len());
    message.encode(out).expect("the buffer was reserved");
}

pub fn decode(bytes: &[u8]) -> Result<SensorFrame, DecodeError> {
    let message =
        proto::SensorFrame::decode(bytes).map_err(|e| DecodeError(format!("protobuf: {e}")))?;
    let header = message
        .header
        .ok_or_else(|| DecodeError("protobuf: no header".into()))?;
    let status = match proto::Status::try_from(message.status) {
        Ok(proto::Status::Ok) => Status::Ok,
        Ok(proto::Status::Degraded) => Status::Degraded,
        Ok(proto::Status::Failed) => Status::Failed,
        Err(_) => {
            return Err(DecodeError(format!(
                "protobuf: unknown status {}",
                message.status
            )))
        }
    };
    let readings = message
        .readings
        .iter()
        .map(|r| {
            let quality = u8::try_from(r.quality)
                .map_err(|_| DecodeError(format!("protobuf: quality {} over 255", r.quality)))?;
            Ok(Reading {
                channel: r.channel,
                value: r.value,
                quality,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    Ok(SensorFrame {
        header: Header {
            sequence: header.sequence,
            sent_at_ns: header.sent_at_ns,
            source_id: header.source_id,
        },
        temperature_c: message.temperature_c,
        pressure_pa: message.pressure_pa,
        status,
        readings,
        label: message.label,
        blob: message.blob,
    })
}
