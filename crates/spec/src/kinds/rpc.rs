//! `rpc` (seed 000): a Cap'n Proto RPC interface (`capnp-rpc`) with one method that takes
//! bytes and returns them; the peer serves it.

use crate::kind_spec::{About, Calls, KindSpec, OverMaxPayload};
use crate::limits::{MAX_FRAME_PAYLOAD, MAX_ROUND_TRIPS};
use crate::model::TransportKind;

/// Calls of a Cap'n Proto RPC method.
pub(crate) struct Rpc;

impl KindSpec for Rpc {
    type Scenario = Calls;
    type Cell = Calls;
    const ABOUT: About = About {
        name: "rpc",
        transports: &[TransportKind::Local, TransportKind::Tcp],
        stacks: false,
        keys: &["timeout"],
        // The payload travels inside a Cap'n Proto message.
        max_payload: MAX_FRAME_PAYLOAD,
        over_max_payload: OverMaxPayload::Carried,
        stamp: 0,
        max_round_trips: MAX_ROUND_TRIPS,
        round_trips: "round trips",
        processes: 2,
        // Request, its encoding and the response; the peer's request and response.
        payload_copies: 6,
    };
}
