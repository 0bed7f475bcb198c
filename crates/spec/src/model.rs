//! The serde model of matrix.yaml, schema version 1. Unknown keys are errors everywhere.

use crate::kinds::ScenarioWork;
use crate::reach::{ExternalPeer, Host};
use crate::stack::{StackName, StackNameError, StackTraits};
use crate::units::{ByteSize, Count, DurationSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The one schema version this build reads.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole matrix.yaml, read and checked (profile overrides are applied by
/// [`Spec::cells`]).
#[derive(Debug, Clone)]
pub struct Spec {
    pub version: u32,
    /// Seed of the deterministic payload bytes; the same seed gives the same bytes on every CPU.
    pub seed: u64,
    pub targets: Vec<Target>,
    pub profiles: BTreeMap<String, Profile>,
    pub scenarios: Vec<Scenario>,
}

/// One leg of the matrix: a CPU target and how its binaries run here.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub triple: String,
    pub runner: Runner,
    /// A failing leg blocks a merge (the GitHub job is required) when true.
    pub blocks_merge: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runner {
    /// The binary runs on a CPU of its own architecture.
    Native,
    /// The binary runs under QEMU user-mode emulation; its timings measure the emulator.
    Qemu,
}

impl Runner {
    pub fn as_str(self) -> &'static str {
        match self {
            Runner::Native => "native",
            Runner::Qemu => "qemu",
        }
    }
}

impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named set of overrides, e.g. `quick` (small counts) or `full` (the seeds' parameters).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub description: String,
    /// Overrides keyed by scenario name.
    #[serde(default)]
    pub scenarios: BTreeMap<String, Overrides>,
    /// How a run of this profile is judged against its baseline.
    #[serde(default)]
    pub regression: RegressionPolicy,
}

/// When a slower run counts as a regression, and what a regression does.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionPolicy {
    /// The smallest slow-down worth flagging, as a fraction (0.5: 50 % slower). A cell
    /// whose baseline is noisier than this gets a wider margin of its own.
    #[serde(default = "RegressionPolicy::default_min_change")]
    pub min_change: f64,
    /// A regression fails the run (as `--strict` does) instead of only warning.
    #[serde(default)]
    pub strict: bool,
}

impl RegressionPolicy {
    fn default_min_change() -> f64 {
        0.5
    }
}

impl Default for RegressionPolicy {
    fn default() -> Self {
        Self {
            min_change: Self::default_min_change(),
            strict: false,
        }
    }
}

/// The scenario fields a profile may change. Each applies only to the kinds that take
/// the field (`budget` to logging scenarios, `clients` to udp-load ones, ...).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    pub payloads: Option<Vec<ByteSize>>,
    pub iterations: Option<Count>,
    pub warmup: Option<u64>,
    pub timeout: Option<DurationSpec>,
    pub frame_deadline: Option<DurationSpec>,
    pub budget: Option<DurationSpec>,
    pub clients: Option<Vec<u32>>,
    pub server_threads: Option<Vec<u32>>,
    pub duration: Option<DurationSpec>,
}

/// What a scenario runs over: the name matrix.yaml lists, cell ids carry and results
/// store. Every transport but `file` is a channel between two processes
/// ([`TransportKind::channel`]), and so is a user's stack ([`TransportKind::Stack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransportKind {
    /// Shared memory segment (`shared_memory` crate) with a ring per direction.
    Shm,
    /// Local socket (`interprocess`; a Unix domain socket on Linux).
    Local,
    /// TCP over 127.0.0.1.
    Tcp,
    /// UDP over 127.0.0.1; one message per datagram.
    Udp,
    /// An anonymous pipe each way, inherited by the peer process.
    Pipe,
    /// iceoryx2 (zero-copy shared memory): a publish-subscribe service each way.
    Iceoryx2,
    /// A file in a private temporary directory: where `logging` cells write. Not a
    /// channel: no peer reads it.
    File,
    /// A user's stack, registered by the binary that carries it (`crate::stack`).
    Stack(StackName),
}

impl TransportKind {
    /// The transports that are channels, in [`ChannelKind::ALL`]'s order: what `echo`
    /// and `bulk` run over.
    pub const CHANNELS: [TransportKind; ChannelKind::ALL.len()] = {
        let mut out = [TransportKind::Shm; ChannelKind::ALL.len()];
        let mut i = 0;
        while i < out.len() {
            out[i] = ChannelKind::ALL[i].transport();
            i += 1;
        }
        out
    };

    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Local => "local",
            TransportKind::Tcp => "tcp",
            TransportKind::Udp => "udp",
            TransportKind::Pipe => "pipe",
            TransportKind::Iceoryx2 => "iceoryx2",
            TransportKind::File => "file",
            TransportKind::Stack(stack) => stack.as_str(),
        }
    }

    /// The transport of this name: a built-in one, or a user's stack by name (registered
    /// in this process or not: see [`TransportKind::is_known`]).
    pub fn named(name: &str) -> Result<TransportKind, StackNameError> {
        const BUILT_IN: [TransportKind; 7] = [
            TransportKind::Shm,
            TransportKind::Local,
            TransportKind::Tcp,
            TransportKind::Udp,
            TransportKind::Pipe,
            TransportKind::Iceoryx2,
            TransportKind::File,
        ];
        match BUILT_IN.iter().find(|t| t.as_str() == name) {
            Some(t) => Ok(*t),
            None => StackName::named(name).map(TransportKind::Stack),
        }
    }

    /// Built in, or a stack this process registered: what matrix.yaml may list.
    pub fn is_known(self) -> bool {
        match self {
            TransportKind::Stack(stack) => stack.traits().is_some(),
            _ => true,
        }
    }

    /// Comes in wake modes (see [`ChannelKind::has_wake_modes`]); `file` does not.
    pub fn has_wake_modes(self) -> bool {
        self.channel().is_some_and(ChannelKind::has_wake_modes)
    }

    /// The channel this transport is; `None` for `file`, which carries no messages
    /// between processes.
    pub const fn channel(self) -> Option<ChannelKind> {
        match self {
            TransportKind::Shm => Some(ChannelKind::Shm),
            TransportKind::Local => Some(ChannelKind::Local),
            TransportKind::Tcp => Some(ChannelKind::Tcp),
            TransportKind::Udp => Some(ChannelKind::Udp),
            TransportKind::Pipe => Some(ChannelKind::Pipe),
            TransportKind::Iceoryx2 => Some(ChannelKind::Iceoryx2),
            TransportKind::File => None,
            TransportKind::Stack(stack) => Some(ChannelKind::Stack(stack)),
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TransportKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TransportKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        TransportKind::named(&name).map_err(serde::de::Error::custom)
    }
}

/// A channel that carries messages between two processes: what the transport crate
/// opens. Each is the [`TransportKind`] of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChannelKind {
    /// Shared memory segment (`shared_memory` crate) with a ring per direction.
    Shm,
    /// Local socket (`interprocess`; a Unix domain socket on Linux).
    Local,
    /// TCP over 127.0.0.1.
    Tcp,
    /// UDP over 127.0.0.1; one message per datagram.
    Udp,
    /// An anonymous pipe each way, inherited by the peer process.
    Pipe,
    /// iceoryx2 (zero-copy shared memory): a publish-subscribe service each way.
    Iceoryx2,
    /// A user's stack (`crate::stack`); what it offers is in its [`StackTraits`].
    Stack(StackName),
}

impl ChannelKind {
    /// Every built-in channel.
    pub const ALL: [ChannelKind; 6] = [
        ChannelKind::Shm,
        ChannelKind::Local,
        ChannelKind::Tcp,
        ChannelKind::Udp,
        ChannelKind::Pipe,
        ChannelKind::Iceoryx2,
    ];

    /// The transport of the same name.
    pub const fn transport(self) -> TransportKind {
        match self {
            ChannelKind::Shm => TransportKind::Shm,
            ChannelKind::Local => TransportKind::Local,
            ChannelKind::Tcp => TransportKind::Tcp,
            ChannelKind::Udp => TransportKind::Udp,
            ChannelKind::Pipe => TransportKind::Pipe,
            ChannelKind::Iceoryx2 => TransportKind::Iceoryx2,
            ChannelKind::Stack(stack) => TransportKind::Stack(stack),
        }
    }

    pub fn as_str(self) -> &'static str {
        self.transport().as_str()
    }

    /// The user's stack this channel is, if it is one.
    pub fn stack(self) -> Option<StackName> {
        match self {
            ChannelKind::Stack(stack) => Some(stack),
            _ => None,
        }
    }

    /// The traits of a user's stack, or of a stack named by results alone (copying, no
    /// wake modes) when this process did not register it.
    fn stack_traits(stack: StackName) -> StackTraits {
        stack
            .traits()
            .unwrap_or(StackTraits::copying(ChannelKind::Local))
    }

    /// The built-in channel whose floor this one's cells are measured against: itself,
    /// or what a user's stack names ([`StackTraits::floor_like`]).
    pub fn floor_like(self) -> ChannelKind {
        match self {
            ChannelKind::Stack(stack) => Self::stack_traits(stack).floor_like,
            built_in => built_in,
        }
    }

    /// Comes in wake modes ([`WakeMode`]): a waiting side either sleeps until woken or
    /// spins. Its cells and conformance subjects are one per wake mode
    /// (`shm-blocking`, `iceoryx2-busy`); every other channel's are one.
    pub fn has_wake_modes(self) -> bool {
        match self {
            ChannelKind::Shm | ChannelKind::Iceoryx2 => true,
            ChannelKind::Local | ChannelKind::Tcp | ChannelKind::Udp | ChannelKind::Pipe => false,
            ChannelKind::Stack(stack) => Self::stack_traits(stack).wake_modes,
        }
    }

    /// The message paths it offers ([`MessagePath`]), its cells' default first: shared
    /// memory streams, iceoryx2 loans, every channel copies.
    pub fn message_paths(self) -> &'static [MessagePath] {
        match self {
            ChannelKind::Shm => &[
                MessagePath::Streamed,
                MessagePath::Copied,
                MessagePath::Loaned,
            ],
            ChannelKind::Iceoryx2 => &[MessagePath::Loaned, MessagePath::Copied],
            ChannelKind::Local | ChannelKind::Tcp | ChannelKind::Udp | ChannelKind::Pipe => {
                &[MessagePath::Copied]
            }
            ChannelKind::Stack(stack) => Self::stack_traits(stack).message_paths,
        }
    }

    /// Carries a byte stream that messages are framed on (a message larger than the
    /// kernel's buffer then takes as many reads and writes as the timing allows).
    pub fn is_byte_stream(self) -> bool {
        match self {
            ChannelKind::Local | ChannelKind::Tcp | ChannelKind::Pipe => true,
            ChannelKind::Shm | ChannelKind::Udp | ChannelKind::Iceoryx2 => false,
            ChannelKind::Stack(stack) => Self::stack_traits(stack).byte_stream,
        }
    }
}

impl From<ChannelKind> for TransportKind {
    fn from(channel: ChannelKind) -> Self {
        channel.transport()
    }
}

impl fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a round trip's bytes move between the cell's code and its transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessagePath {
    /// Copied into the transport from the request's buffer, and out of it into the
    /// reply's, on both sides.
    Copied,
    /// Shared memory's pipeline: request chunks copied in while reply chunks are copied
    /// out (`exchange`), the peer copying each chunk from slot to slot.
    Streamed,
    /// The transport's loans: the request written into the transport's own memory, the
    /// reply checked where it lies; the peer writes each request from where it lies into
    /// the reply's loan. The next request's loan is taken before the wait for the reply,
    /// as a zero-copy stack's own users (and benchmark) do.
    Loaned,
}

impl MessagePath {
    pub const ALL: [MessagePath; 3] = [
        MessagePath::Copied,
        MessagePath::Streamed,
        MessagePath::Loaned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MessagePath::Copied => "copied",
            MessagePath::Streamed => "streamed",
            MessagePath::Loaned => "loaned",
        }
    }
}

impl fmt::Display for MessagePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a waiting side learns that the other side has written: applies to the channels
/// that have wake modes ([`ChannelKind::has_wake_modes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeMode {
    /// Sleep in the kernel (futex) until woken.
    Blocking,
    /// Spin on the shared counter; costs a core, saves the wake-up.
    BusyPoll,
}

impl WakeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeMode::Blocking => "blocking",
            WakeMode::BusyPoll => "busy-poll",
        }
    }

    /// The short form used in cell names (`shm-busy`).
    pub fn short(self) -> &'static str {
        match self {
            WakeMode::Blocking => "blocking",
            WakeMode::BusyPoll => "busy",
        }
    }
}

/// One family of cells: a kind of measurement over some transports and payload sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub transports: Vec<TransportKind>,
    /// Wake modes for the transports that have them (`shm`); both when empty. Only given
    /// when such a transport is listed.
    pub wake: Vec<WakeMode>,
    pub payloads: Vec<ByteSize>,
    pub iterations: Count,
    /// Round trips done before measuring; not counted.
    pub warmup: u64,
    /// What its cells measure, and the fields of that kind alone.
    pub work: ScenarioWork,
    /// Where its peer runs: this host (loopback) or a network namespace.
    pub host: Host,
    /// A program the user brings as the peer, instead of ours.
    pub peer: Option<ExternalPeer>,
}

/// A serialization format of the sensor frame (`crates/codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodecKind {
    /// Cap'n Proto, through the `capnp` crate.
    Capnp,
    /// protobuf, through `prost`.
    Prost,
}

impl CodecKind {
    pub const ALL: [CodecKind; 2] = [CodecKind::Capnp, CodecKind::Prost];

    pub fn as_str(self) -> &'static str {
        match self {
            CodecKind::Capnp => "capnp",
            CodecKind::Prost => "prost",
        }
    }
}

impl std::fmt::Display for CodecKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in transport is the channel of its name, `file` alone excepted, and
    /// `ChannelKind::ALL` lists each channel once; every other name is a stack's.
    #[test]
    fn every_transport_but_file_is_a_listed_channel() {
        let accepted: Vec<TransportKind> = crate::stack::BUILT_IN_NAMES
            .iter()
            .map(|name| serde_json::from_str(&format!("\"{name}\"")).unwrap())
            .collect();
        assert!(accepted.contains(&TransportKind::File));
        let channels: Vec<ChannelKind> = accepted.iter().filter_map(|t| t.channel()).collect();
        assert_eq!(channels, ChannelKind::ALL);
        assert_eq!(channels.len() + 1, accepted.len());
        for channel in ChannelKind::ALL {
            let transport = TransportKind::from(channel);
            assert_eq!(transport.channel(), Some(channel));
            assert_eq!(transport.as_str(), channel.as_str());
            assert_eq!(
                serde_json::to_string(&transport).unwrap(),
                format!("\"{channel}\"")
            );
        }
        assert_eq!(
            TransportKind::CHANNELS,
            ChannelKind::ALL.map(TransportKind::from)
        );
        let other: TransportKind = serde_json::from_str("\"someones-ring\"").unwrap();
        assert!(matches!(other, TransportKind::Stack(_)), "{other:?}");
        assert!(!other.is_known(), "read, not registered");
        assert_eq!(other.as_str(), "someones-ring");
        let refused = serde_json::from_str::<TransportKind>("\"?\"").unwrap_err();
        assert!(refused.to_string().contains("shm, local, tcp"), "{refused}");
    }
}
