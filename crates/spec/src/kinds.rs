//! The scenario kinds. Everything the spec knows of a kind (its settings, how its
//! scenario entry is read and checked, its names and its limits) is in its module under
//! `kinds/`, which implements [`KindSpec`]. This file lists them: one variant per kind in
//! [`ScenarioKind`] (its name), [`ScenarioWork`] (a scenario's settings) and [`Work`] (a
//! cell's), and the dispatch from each to the kind's module, exhaustive (no wildcard arm),
//! so that the compiler names every place a new kind fills in here.

mod codec;
mod echo;
mod fan;
mod logging;
mod req_rep;
mod rpc;
mod udp_load;

pub use crate::kind_spec::Calls;
pub use codec::{CodecScenario, Frames};
pub use echo::{EchoScenario, Echoes};
pub use fan::{Fan, FanScenario};
pub use logging::{LogSink, LogWrite, LoggingScenario};
pub use udp_load::{Load, LoadScenario, LoadShape};

use crate::keys::{self, Keys, Problems};
use crate::kind_spec::{About, KindSpec};
use crate::model::{CodecKind, Overrides, TransportKind};
use crate::raw::RawScenario;
use serde::{Deserialize, Serialize};

/// The kind of a scenario: what its cells measure. matrix.yaml names it with `kind:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioKind {
    /// Round-trip latency of small messages.
    Echo,
    /// Round trips of large messages; reports throughput as well as time per round trip.
    Bulk,
    /// A sensor frame encoded with a codec, sent, decoded and re-encoded by the peer, sent
    /// back and decoded: serialization and transport together, per codec.
    Codec,
    /// One publisher (the measuring side) to two subscriber processes: every frame to
    /// both, each acknowledged with its one-way latency; a frame not acknowledged before
    /// its deadline is dropped.
    FanOut,
    /// Two publisher processes streaming frames to one subscriber (the measuring side):
    /// one-way latency per frame; a sequence gap or a frame later than its deadline is
    /// dropped.
    FanIn,
    /// Seed 000's RPC: a Cap'n Proto RPC interface (`capnp-rpc`) with one method that
    /// takes bytes and returns them; the peer serves it.
    Rpc,
    /// Seed 001: ZeroMQ REQ/REP echo (`zmq`, libzmq built from source for every target).
    ReqRep,
    /// Seed 004: client threads, each with its own UDP socket, send and wait for the echo
    /// of a peer with several receiving threads; transactions per second, success rate.
    UdpLoad,
    /// Seed 002: the cost of writing log lines to a file, per way of writing them; the
    /// file is then read back and compared with what was logged.
    Logging,
}

/// The kind of a scenario with the settings that kind takes, and no others. A key the
/// kind does not take is refused where it is.
#[derive(Debug, Clone, PartialEq)]
pub enum ScenarioWork {
    Echo(EchoScenario),
    Bulk(EchoScenario),
    Codec(CodecScenario),
    FanOut(FanScenario),
    FanIn(FanScenario),
    Rpc(Calls),
    ReqRep(Calls),
    UdpLoad(LoadScenario),
    Logging(LoggingScenario),
}

/// What a cell measures: one variant per kind, holding that kind's own settings and no
/// others. Serialized with the kind's name under `kind` (`{"kind": "echo", ...}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Work {
    /// Round-trip latency of small messages.
    Echo(Echoes),
    /// Round trips of large messages.
    Bulk(Echoes),
    /// Sensor frames through a codec, there and back.
    Codec(Frames),
    /// One publisher to two subscriber processes.
    FanOut(Fan),
    /// Two publisher processes to one subscriber.
    FanIn(Fan),
    /// Calls of a Cap'n Proto RPC method.
    Rpc(Calls),
    /// ZeroMQ REQ/REP requests.
    ReqRep(Calls),
    /// Client threads sending UDP requests to a peer with several receiving threads.
    UdpLoad(Load),
    /// Log lines written to a file.
    Logging(LogWrite),
}

impl ScenarioKind {
    /// Every kind, in the order of matrix.yaml's list of them.
    pub const ALL: [ScenarioKind; 9] = [
        ScenarioKind::Echo,
        ScenarioKind::Bulk,
        ScenarioKind::Codec,
        ScenarioKind::FanOut,
        ScenarioKind::FanIn,
        ScenarioKind::Rpc,
        ScenarioKind::ReqRep,
        ScenarioKind::UdpLoad,
        ScenarioKind::Logging,
    ];

    /// The kind's name, transports, keys and limits.
    pub(crate) fn about(self) -> &'static About {
        match self {
            ScenarioKind::Echo => &echo::Echo::ABOUT,
            ScenarioKind::Bulk => &echo::Bulk::ABOUT,
            ScenarioKind::Codec => &codec::Codec::ABOUT,
            ScenarioKind::FanOut => &fan::FanOut::ABOUT,
            ScenarioKind::FanIn => &fan::FanIn::ABOUT,
            ScenarioKind::Rpc => &rpc::Rpc::ABOUT,
            ScenarioKind::ReqRep => &req_rep::ReqRep::ABOUT,
            ScenarioKind::UdpLoad => &udp_load::UdpLoad::ABOUT,
            ScenarioKind::Logging => &logging::Logging::ABOUT,
        }
    }

    /// The kind's variant of scenario entry `index`, or None with its problems pushed on
    /// `out`: first the keys of other kinds it gives, then its own.
    pub(crate) fn parse(
        self,
        raw: &RawScenario,
        index: usize,
        out: &mut Problems,
    ) -> Option<ScenarioWork> {
        let about = self.about();
        let mut keys = Keys::new(raw, about.name, index, out);
        for key in raw.given_keys() {
            if !about.keys.contains(&key) {
                keys.problem(key, self.not_taken(key));
            }
        }
        let keys = &mut keys;
        match self {
            ScenarioKind::Echo => echo::Echo::parse(keys).map(ScenarioWork::Echo),
            ScenarioKind::Bulk => echo::Bulk::parse(keys).map(ScenarioWork::Bulk),
            ScenarioKind::Codec => codec::Codec::parse(keys).map(ScenarioWork::Codec),
            ScenarioKind::FanOut => fan::FanOut::parse(keys).map(ScenarioWork::FanOut),
            ScenarioKind::FanIn => fan::FanIn::parse(keys).map(ScenarioWork::FanIn),
            ScenarioKind::Rpc => rpc::Rpc::parse(keys).map(ScenarioWork::Rpc),
            ScenarioKind::ReqRep => req_rep::ReqRep::parse(keys).map(ScenarioWork::ReqRep),
            ScenarioKind::UdpLoad => udp_load::UdpLoad::parse(keys).map(ScenarioWork::UdpLoad),
            ScenarioKind::Logging => logging::Logging::parse(keys).map(ScenarioWork::Logging),
        }
    }

    /// Why `round_trips` messages of at most `longest` bytes are more than a cell of this
    /// kind holds, if they are.
    pub(crate) fn check_volume(self, round_trips: u64, longest: u64) -> Option<String> {
        match self {
            ScenarioKind::Echo => echo::Echo::check_volume(round_trips, longest),
            ScenarioKind::Bulk => echo::Bulk::check_volume(round_trips, longest),
            ScenarioKind::Codec => codec::Codec::check_volume(round_trips, longest),
            ScenarioKind::FanOut => fan::FanOut::check_volume(round_trips, longest),
            ScenarioKind::FanIn => fan::FanIn::check_volume(round_trips, longest),
            ScenarioKind::Rpc => rpc::Rpc::check_volume(round_trips, longest),
            ScenarioKind::ReqRep => req_rep::ReqRep::check_volume(round_trips, longest),
            ScenarioKind::UdpLoad => udp_load::UdpLoad::check_volume(round_trips, longest),
            ScenarioKind::Logging => logging::Logging::check_volume(round_trips, longest),
        }
    }

    /// Why a scenario of this kind does not take `key`, one of another kind's keys.
    pub(crate) fn not_taken(self, key: &str) -> String {
        let takers: Vec<&str> = ScenarioKind::ALL
            .iter()
            .filter(|kind| kind.keys().contains(&key))
            .map(|kind| kind.as_str())
            .collect();
        keys::not_taken(self.as_str(), self.keys(), key, &takers)
    }

    pub fn as_str(self) -> &'static str {
        self.about().name
    }

    /// False for a kind whose cells start no peer process (logging): its cells are one
    /// process.
    pub fn has_peer(self) -> bool {
        self.about().processes > 1
    }

    /// The transports a scenario of this kind may list.
    pub fn transports(self) -> &'static [TransportKind] {
        self.about().transports
    }

    /// Its cells run over a user's registered stack too.
    pub fn takes_stacks(self) -> bool {
        self.about().stacks
    }

    /// The keys of a scenario of this kind beyond those every kind has (`name`, `kind`,
    /// `transports`, `wake`, `payloads`, `iterations`, `warmup`).
    pub fn keys(self) -> &'static [&'static str] {
        self.about().keys
    }

    /// The largest payload a cell of this kind may carry, in bytes.
    pub fn max_payload(self) -> u64 {
        self.about().max_payload
    }

    /// The most round trips (requests per client, lines), warm-up included, of a cell
    /// of this kind.
    pub fn max_round_trips(self) -> u64 {
        self.about().max_round_trips
    }
}

impl ScenarioWork {
    pub fn kind(&self) -> ScenarioKind {
        match self {
            ScenarioWork::Echo(_) => ScenarioKind::Echo,
            ScenarioWork::Bulk(_) => ScenarioKind::Bulk,
            ScenarioWork::Codec(_) => ScenarioKind::Codec,
            ScenarioWork::FanOut(_) => ScenarioKind::FanOut,
            ScenarioWork::FanIn(_) => ScenarioKind::FanIn,
            ScenarioWork::Rpc(_) => ScenarioKind::Rpc,
            ScenarioWork::ReqRep(_) => ScenarioKind::ReqRep,
            ScenarioWork::UdpLoad(_) => ScenarioKind::UdpLoad,
            ScenarioWork::Logging(_) => ScenarioKind::Logging,
        }
    }

    /// Applies a profile's overrides (checked when the spec was read: each names a key of
    /// this kind).
    pub(crate) fn override_with(&mut self, o: &Overrides) {
        match self {
            ScenarioWork::Echo(s) => echo::Echo::override_with(s, o),
            ScenarioWork::Bulk(s) => echo::Bulk::override_with(s, o),
            ScenarioWork::Codec(s) => codec::Codec::override_with(s, o),
            ScenarioWork::FanOut(s) => fan::FanOut::override_with(s, o),
            ScenarioWork::FanIn(s) => fan::FanIn::override_with(s, o),
            ScenarioWork::Rpc(s) => rpc::Rpc::override_with(s, o),
            ScenarioWork::ReqRep(s) => req_rep::ReqRep::override_with(s, o),
            ScenarioWork::UdpLoad(s) => udp_load::UdpLoad::override_with(s, o),
            ScenarioWork::Logging(s) => logging::Logging::override_with(s, o),
        }
    }

    /// How many kind variants its cells come in (codecs, sinks, load shapes); None over
    /// 64 bits.
    pub(crate) fn variant_count(&self) -> Option<u64> {
        match self {
            ScenarioWork::Echo(s) => echo::Echo::variant_count(s),
            ScenarioWork::Bulk(s) => echo::Bulk::variant_count(s),
            ScenarioWork::Codec(s) => codec::Codec::variant_count(s),
            ScenarioWork::FanOut(s) => fan::FanOut::variant_count(s),
            ScenarioWork::FanIn(s) => fan::FanIn::variant_count(s),
            ScenarioWork::Rpc(s) => rpc::Rpc::variant_count(s),
            ScenarioWork::ReqRep(s) => req_rep::ReqRep::variant_count(s),
            ScenarioWork::UdpLoad(s) => udp_load::UdpLoad::variant_count(s),
            ScenarioWork::Logging(s) => logging::Logging::variant_count(s),
        }
    }

    /// The work of each of its cells' variants, in order.
    pub(crate) fn works(&self) -> Vec<Work> {
        fn each<K: KindSpec>(s: &K::Scenario, work: fn(K::Cell) -> Work) -> Vec<Work> {
            K::cells(s).into_iter().map(work).collect()
        }
        match self {
            ScenarioWork::Echo(s) => each::<echo::Echo>(s, Work::Echo),
            ScenarioWork::Bulk(s) => each::<echo::Bulk>(s, Work::Bulk),
            ScenarioWork::Codec(s) => each::<codec::Codec>(s, Work::Codec),
            ScenarioWork::FanOut(s) => each::<fan::FanOut>(s, Work::FanOut),
            ScenarioWork::FanIn(s) => each::<fan::FanIn>(s, Work::FanIn),
            ScenarioWork::Rpc(s) => each::<rpc::Rpc>(s, Work::Rpc),
            ScenarioWork::ReqRep(s) => each::<req_rep::ReqRep>(s, Work::ReqRep),
            ScenarioWork::UdpLoad(s) => each::<udp_load::UdpLoad>(s, Work::UdpLoad),
            ScenarioWork::Logging(s) => each::<logging::Logging>(s, Work::Logging),
        }
    }
}

impl Work {
    pub fn kind(&self) -> ScenarioKind {
        match self {
            Work::Echo(_) => ScenarioKind::Echo,
            Work::Bulk(_) => ScenarioKind::Bulk,
            Work::Codec(_) => ScenarioKind::Codec,
            Work::FanOut(_) => ScenarioKind::FanOut,
            Work::FanIn(_) => ScenarioKind::FanIn,
            Work::Rpc(_) => ScenarioKind::Rpc,
            Work::ReqRep(_) => ScenarioKind::ReqRep,
            Work::UdpLoad(_) => ScenarioKind::UdpLoad,
            Work::Logging(_) => ScenarioKind::Logging,
        }
    }

    /// The message path the cell asks for (`paths` of an echo or bulk scenario), if any.
    pub fn message_path(&self) -> Option<crate::model::MessagePath> {
        match self {
            Work::Echo(echoes) | Work::Bulk(echoes) => echoes.path,
            _ => None,
        }
    }

    /// The codec of the frames, for the kinds that carry sensor frames.
    pub fn codec(&self) -> Option<CodecKind> {
        match self {
            Work::Echo(c) => echo::Echo::codec(c),
            Work::Bulk(c) => echo::Bulk::codec(c),
            Work::Codec(c) => codec::Codec::codec(c),
            Work::FanOut(c) => fan::FanOut::codec(c),
            Work::FanIn(c) => fan::FanIn::codec(c),
            Work::Rpc(c) => rpc::Rpc::codec(c),
            Work::ReqRep(c) => req_rep::ReqRep::codec(c),
            Work::UdpLoad(c) => udp_load::UdpLoad::codec(c),
            Work::Logging(c) => logging::Logging::codec(c),
        }
    }

    /// What sets a cell apart within its scenario and transport: the codec, the log sink
    /// or the load shape.
    pub fn variant_label(&self) -> Option<String> {
        match self {
            Work::Echo(c) => echo::Echo::variant_label(c),
            Work::Bulk(c) => echo::Bulk::variant_label(c),
            Work::Codec(c) => codec::Codec::variant_label(c),
            Work::FanOut(c) => fan::FanOut::variant_label(c),
            Work::FanIn(c) => fan::FanIn::variant_label(c),
            Work::Rpc(c) => rpc::Rpc::variant_label(c),
            Work::ReqRep(c) => req_rep::ReqRep::variant_label(c),
            Work::UdpLoad(c) => udp_load::UdpLoad::variant_label(c),
            Work::Logging(c) => logging::Logging::variant_label(c),
        }
    }

    /// Roughly the bytes the cell's messages take over all its processes, given its
    /// payload and its round trips (warm-up included; None over 64 bits).
    pub(crate) fn messages_need(&self, payload: u64, round_trips: Option<u64>) -> Option<u64> {
        let (p, r) = (payload, round_trips);
        match self {
            Work::Echo(c) => echo::Echo::messages_need(c, p, r),
            Work::Bulk(c) => echo::Bulk::messages_need(c, p, r),
            Work::Codec(c) => codec::Codec::messages_need(c, p, r),
            Work::FanOut(c) => fan::FanOut::messages_need(c, p, r),
            Work::FanIn(c) => fan::FanIn::messages_need(c, p, r),
            Work::Rpc(c) => rpc::Rpc::messages_need(c, p, r),
            Work::ReqRep(c) => req_rep::ReqRep::messages_need(c, p, r),
            Work::UdpLoad(c) => udp_load::UdpLoad::messages_need(c, p, r),
            Work::Logging(c) => logging::Logging::messages_need(c, p, r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ALL` holds every kind matrix.yaml accepts, each once, under the name its module
    /// gives it.
    #[test]
    fn every_kind_is_listed_once_under_its_name() {
        let refused = serde_json::from_str::<ScenarioKind>("\"?\"").unwrap_err();
        let accepted: Vec<String> = refused
            .to_string()
            .split('`')
            .skip(3)
            .step_by(2)
            .map(String::from)
            .collect();
        let listed: Vec<&str> = ScenarioKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(accepted, listed, "{refused}");
        for kind in ScenarioKind::ALL {
            let name = serde_json::to_string(&kind).unwrap();
            assert_eq!(name, format!("\"{}\"", kind.as_str()));
        }
    }
}
