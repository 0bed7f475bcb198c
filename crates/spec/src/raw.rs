//! matrix.yaml as serde reads it, before its kinds are told apart: every key any kind
//! takes is known here, so an unknown key is refused by serde where it is. Which of them
//! a scenario's kind takes is decided by its kind (`kinds.rs`), with located errors.

use crate::kinds::{LogSink, ScenarioKind};
use crate::model::{CodecKind, MessagePath, Profile, Target, TransportKind, WakeMode};
use crate::plugins::RawPlugin;
use crate::reach::{RawHost, RawLink, RawPeer};
use crate::units::{ByteSize, Count, DurationSpec};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpec {
    pub version: u32,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub targets: Vec<Target>,
    pub profiles: BTreeMap<String, Profile>,
    pub scenarios: Vec<RawScenario>,
    /// Stacks in shared libraries, by name (`plugins.rs`).
    #[serde(default)]
    pub plugins: BTreeMap<String, RawPlugin>,
}

fn default_seed() -> u64 {
    0x1bc_3a7e_2026
}

/// A scenario as written: the keys every kind has, and every kind's own keys as options.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: String,
    pub kind: ScenarioKind,
    pub transports: Vec<TransportKind>,
    #[serde(default)]
    pub wake: Vec<WakeMode>,
    pub payloads: Vec<ByteSize>,
    pub iterations: Count,
    #[serde(default)]
    pub warmup: u64,
    pub timeout: Option<DurationSpec>,
    pub frame_deadline: Option<DurationSpec>,
    pub budget: Option<DurationSpec>,
    pub max_loss: Option<f64>,
    pub paths: Option<Vec<MessagePath>>,
    pub codecs: Option<Vec<CodecKind>>,
    pub clients: Option<Vec<u32>>,
    pub server_threads: Option<Vec<u32>>,
    pub duration: Option<DurationSpec>,
    pub sinks: Option<Vec<LogSink>>,
    /// Where the peer runs (`reach.rs`): keys every kind may write, checked there.
    pub host: Option<RawHost>,
    pub mtu: Option<u32>,
    pub link: Option<RawLink>,
    pub peer: Option<RawPeer>,
}

impl RawScenario {
    /// The kind-specific keys written in this scenario, in the order of the struct.
    pub fn given_keys(&self) -> Vec<&'static str> {
        [
            ("timeout", self.timeout.is_some()),
            ("frame_deadline", self.frame_deadline.is_some()),
            ("budget", self.budget.is_some()),
            ("max_loss", self.max_loss.is_some()),
            ("paths", self.paths.is_some()),
            ("codecs", self.codecs.is_some()),
            ("clients", self.clients.is_some()),
            ("server_threads", self.server_threads.is_some()),
            ("duration", self.duration.is_some()),
            ("sinks", self.sinks.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, given)| given.then_some(key))
        .collect()
    }
}
