//! Expansion of a spec into cells: one cell is one test, one result file, one table row.

use crate::kinds::{ScenarioKind, Work};
use crate::model::{Overrides, Runner, Scenario, Spec, Target, TransportKind, WakeMode};
use crate::reach::{ExternalPeer, Host};
use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

/// Test names starting with this group are the harness's own fault-injection tests,
/// so no scenario may use it as a name.
pub const CELL_GROUP_FAULT: &str = "fault";

/// Everything needed to run and label one measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Stable, readable test name: `<scenario>::[<variant>::]<transport[-wake]>::<payload>`,
    /// where the variant is the codec, the log sink or the load shape (`c4-s16`).
    pub id: String,
    pub scenario: String,
    pub transport: TransportKind,
    pub wake: Option<WakeMode>,
    pub payload_bytes: u64,
    pub payload_label: String,
    pub iterations: u64,
    pub warmup: u64,
    pub seed: u64,
    pub profile: String,
    /// The kind of the cell and the settings of that kind alone.
    pub work: Work,
    /// Where the peer runs: this host (loopback) or a network namespace.
    #[serde(default, skip_serializing_if = "Host::is_loopback")]
    pub host: Host,
    /// A program the user brings as the peer, instead of ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<ExternalPeer>,
}

impl Cell {
    /// The kind of scenario the cell belongs to.
    pub fn kind(&self) -> ScenarioKind {
        self.work.kind()
    }

    /// The transport as named in cell ids: `shm-busy`, `shm-blocking`, `tcp`, ...
    pub fn transport_label(&self) -> String {
        match self.wake {
            Some(wake) => format!("{}-{}", self.transport, wake.short()),
            None => self.transport.to_string(),
        }
    }

    /// What sets this cell apart within its scenario and transport: the codec, the log
    /// sink or the load shape.
    pub fn variant_label(&self) -> Option<String> {
        self.work.variant_label()
    }

    /// `<scenario>::[<variant>::]<transport[-wake]>::<payload>`.
    fn make_id(&self) -> String {
        match self.variant_label() {
            Some(variant) => format!(
                "{}::{variant}::{}::{}",
                self.scenario,
                self.transport_label(),
                self.payload_label
            ),
            None => format!(
                "{}::{}::{}",
                self.scenario,
                self.transport_label(),
                self.payload_label
            ),
        }
    }
}

impl Scenario {
    /// This scenario with a profile's overrides applied (checked when the spec was read:
    /// each names a field of this kind).
    fn overridden(&self, o: Option<&Overrides>) -> Scenario {
        let mut s = self.clone();
        let Some(o) = o else {
            return s;
        };
        if let Some(payloads) = &o.payloads {
            s.payloads = payloads.clone();
        }
        s.iterations = o.iterations.unwrap_or(s.iterations);
        s.warmup = o.warmup.unwrap_or(s.warmup);
        s.work.override_with(o);
        s
    }

    /// The transports of its cells, each with its wake mode: a transport that has wake
    /// modes (shm) once per wake mode (both when none is given), the others once.
    fn channels(&self) -> Vec<(TransportKind, Option<WakeMode>)> {
        let wakes = match self.wake.as_slice() {
            [] => &[WakeMode::Blocking, WakeMode::BusyPoll][..],
            given => given,
        };
        self.transports
            .iter()
            .flat_map(|&transport| match transport.has_wake_modes() {
                true => wakes.iter().map(|&w| (transport, Some(w))).collect(),
                false => vec![(transport, None)],
            })
            .collect()
    }

    /// Its cells: per transport (and wake mode), per variant, per payload.
    fn cells(&self, seed: u64, profile: &str) -> Vec<Cell> {
        let works = self.work.works();
        let mut cells = Vec::new();
        for (transport, wake) in self.channels() {
            for (work, payload) in works
                .iter()
                .flat_map(|work| self.payloads.iter().map(move |p| (work, p)))
            {
                cells.push(self.cell(seed, profile, (transport, wake), *work, payload));
            }
        }
        cells
    }

    fn cell(
        &self,
        seed: u64,
        profile: &str,
        (transport, wake): (TransportKind, Option<WakeMode>),
        work: Work,
        payload: &ByteSize,
    ) -> Cell {
        let mut cell = Cell {
            id: String::new(),
            scenario: self.name.clone(),
            transport,
            wake,
            payload_bytes: payload.bytes(),
            payload_label: payload.label().to_string(),
            iterations: self.iterations.get(),
            warmup: self.warmup,
            seed,
            profile: profile.to_string(),
            work,
            host: self.host.clone(),
            peer: self.peer.clone(),
        };
        cell.id = cell.make_id();
        cell
    }
}

impl Spec {
    pub fn profile_names(&self) -> Vec<&str> {
        self.profiles.keys().map(String::as_str).collect()
    }

    /// The declared target for a triple and runner, if any.
    pub fn target(&self, triple: &str, runner: Runner) -> Option<&Target> {
        self.targets
            .iter()
            .find(|t| t.triple == triple && t.runner == runner)
    }

    /// How many cells a profile expands into (what [`Spec::cells`] would return), counted
    /// without making them; None for an unknown profile or a count over 64 bits.
    pub fn cell_count(&self, profile: &str) -> Option<u64> {
        let overrides = &self.profiles.get(profile)?.scenarios;
        let mut total: u64 = 0;
        for scenario in &self.scenarios {
            let scenario = scenario.overridden(overrides.get(&scenario.name));
            let cells = (scenario.channels().len() as u64)
                .checked_mul(scenario.work.variant_count()?)?
                .checked_mul(scenario.payloads.len() as u64)?;
            total = total.checked_add(cells)?;
        }
        Some(total)
    }

    /// Every cell of a profile, in document order.
    pub fn cells(&self, profile: &str) -> Result<Vec<Cell>, UnknownProfile> {
        let overrides = &self
            .profiles
            .get(profile)
            .ok_or_else(|| UnknownProfile {
                profile: profile.to_string(),
                profiles: self.profile_names().into_iter().map(String::from).collect(),
            })?
            .scenarios;
        Ok(self
            .scenarios
            .iter()
            .flat_map(|scenario| {
                scenario
                    .overridden(overrides.get(&scenario.name))
                    .cells(self.seed, profile)
            })
            .collect())
    }
}

/// A profile matrix.yaml does not declare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no profile is named `{profile}`; the profiles are: {}", profiles.join(", "))]
pub struct UnknownProfile {
    pub profile: String,
    /// The profiles it declares.
    pub profiles: Vec<String>,
}
