//! `req-rep` (seed 001): ZeroMQ REQ/REP echo (`zmq`, libzmq built from source for every
//! target).

use crate::kind_spec::{About, Calls, KindSpec, OverMaxPayload};
use crate::limits::{MAX_PAYLOAD, MAX_ROUND_TRIPS};
use crate::model::TransportKind;

/// ZeroMQ REQ/REP requests.
pub(crate) struct ReqRep;

impl KindSpec for ReqRep {
    type Scenario = Calls;
    type Cell = Calls;
    const ABOUT: About = About {
        name: "req-rep",
        transports: &[TransportKind::Local, TransportKind::Tcp],
        stacks: false,
        keys: &["timeout"],
        max_payload: MAX_PAYLOAD,
        over_max_payload: OverMaxPayload::Carried,
        stamp: 0,
        max_round_trips: MAX_ROUND_TRIPS,
        round_trips: "round trips",
        processes: 2,
        // Request, the library's message and the reply; the peer's message and its copy.
        payload_copies: 5,
    };
}
