//! What the module of a scenario kind (`kinds/<kind>.rs`) implements: [`KindSpec`], the
//! facts of the kind ([`About`]: its name, transports, keys and limits) and how its
//! scenarios become cells. The kind list (`kinds.rs`) calls it; a kind module imports
//! this, the reader of its keys (`keys.rs`) and the shared vocabulary (`model.rs`,
//! `units.rs`, `limits.rs`), never another kind or the list.

use crate::keys::Keys;
use crate::limits::SLACK;
use crate::model::{CodecKind, Overrides, TransportKind};
use crate::units::DurationSpec;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The settings a scenario holds and how its cells come out of them: implemented once per
/// settings type, which kinds may share (`echo` and `bulk`, `fan-out` and `fan-in`, `rpc`
/// and `req-rep`).
pub(crate) trait Settings: Sized {
    /// What one cell holds: the settings of that cell alone.
    type Cell;

    /// Reads the kind's own keys of a scenario entry (those it does not take are refused
    /// already); None when one is wrong, each problem pushed where it is.
    fn parse(keys: &mut Keys<'_>) -> Option<Self>;

    /// Applies a profile's overrides, each checked to name a key of this kind.
    fn override_with(&mut self, overrides: &Overrides);

    /// How many variants its cells come in (codecs, sinks, load shapes); None over 64 bits.
    fn variant_count(&self) -> Option<u64> {
        Some(1)
    }

    /// The settings of each variant's cells, in order.
    fn cells(&self) -> Vec<Self::Cell>;

    /// What sets a cell apart within its scenario and transport, in its id: the codec,
    /// the log sink, the load shape; None for kinds whose cells vary by nothing else.
    fn variant_label(_cell: &Self::Cell) -> Option<String> {
        None
    }

    /// The codec of the frames, for kinds that carry sensor frames.
    fn codec(_cell: &Self::Cell) -> Option<CodecKind> {
        None
    }
}

/// Everything the spec knows of one scenario kind, implemented in its module: its facts
/// and limits; its settings come from [`Settings`], which the methods below hand over to.
pub(crate) trait KindSpec {
    /// What a scenario of this kind holds: its settings, with a list where its cells vary
    /// (codecs, sinks, numbers of threads).
    type Scenario: Settings<Cell = Self::Cell>;
    /// What one cell of this kind holds: the settings of that cell alone.
    type Cell;

    /// Its name, transports, keys and limits.
    const ABOUT: About;

    /// See [`Settings::parse`].
    fn parse(keys: &mut Keys<'_>) -> Option<Self::Scenario> {
        Self::Scenario::parse(keys)
    }

    /// See [`Settings::override_with`].
    fn override_with(scenario: &mut Self::Scenario, overrides: &Overrides) {
        scenario.override_with(overrides);
    }

    /// See [`Settings::variant_count`].
    fn variant_count(scenario: &Self::Scenario) -> Option<u64> {
        scenario.variant_count()
    }

    /// See [`Settings::cells`].
    fn cells(scenario: &Self::Scenario) -> Vec<Self::Cell> {
        scenario.cells()
    }

    /// See [`Settings::variant_label`].
    fn variant_label(cell: &Self::Cell) -> Option<String> {
        Self::Scenario::variant_label(cell)
    }

    /// See [`Settings::codec`].
    fn codec(cell: &Self::Cell) -> Option<CodecKind> {
        Self::Scenario::codec(cell)
    }

    /// Roughly the bytes a cell's messages take over all its processes (the processes'
    /// own allowance is counted apart), given its payload and its round trips, warm-up
    /// included (None over 64 bits): by default [`About::payload_copies`] buffers of the
    /// payload. None when it does not fit 64 bits.
    fn messages_need(_cell: &Self::Cell, payload: u64, _round_trips: Option<u64>) -> Option<u64> {
        payload
            .checked_add(SLACK)?
            .checked_mul(Self::ABOUT.payload_copies)
    }

    /// Why `round_trips` messages of at most `longest` bytes are more than a cell of this
    /// kind can hold, if they are.
    fn check_volume(_round_trips: u64, _longest: u64) -> Option<String> {
        None
    }
}

/// The facts of a kind: names, what it runs over, what it takes, its limits.
#[derive(Debug)]
pub(crate) struct About {
    /// `kind:` in matrix.yaml, the kind in cell results and in messages.
    pub name: &'static str,
    /// The transports a scenario of this kind may list.
    pub transports: &'static [TransportKind],
    /// Its cells run over any channel, so a user's registered stack too.
    pub stacks: bool,
    /// The keys of a scenario of this kind beyond those every kind has (`name`, `kind`,
    /// `transports`, `wake`, `payloads`, `iterations`, `warmup`).
    pub keys: &'static [&'static str],
    /// The largest payload a cell of this kind may carry, in bytes.
    pub max_payload: u64,
    /// How a payload over [`About::max_payload`] is refused.
    pub over_max_payload: OverMaxPayload,
    /// The smallest payload: the stamp every message of the kind carries (0: none).
    pub stamp: u64,
    /// The most round trips (requests per client, lines), warm-up included, of a cell.
    pub max_round_trips: u64,
    /// What one round trip is called in messages (`round trips`, `lines`).
    pub round_trips: &'static str,
    /// How many processes a cell runs (the measuring one and its peers).
    pub processes: u64,
    /// How many payload-sized buffers a cell holds at once, over all its processes
    /// (what the default [`KindSpec::messages_need`] counts).
    pub payload_copies: u64,
}

/// How a payload over a kind's largest is refused.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OverMaxPayload {
    /// As larger than a cell of the kind carries.
    Carried,
    /// As not being one of these (`log line`).
    NotA(&'static str),
    /// Not here: the largest payload is one datagram, which every udp cell is held to.
    Datagram,
}

/// `value` replaced by a profile's override, when it gives one.
pub(crate) fn override_duration(given: &Option<DurationSpec>, value: &mut Duration) {
    if let Some(given) = given {
        *value = given.get();
    }
}

/// The settings of kinds whose cells make calls or requests, one at a time, each with a
/// deadline (`rpc`, `req-rep`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calls {
    /// The deadline of one call (one request and its reply).
    pub timeout: Duration,
}

impl Settings for Calls {
    type Cell = Calls;

    fn parse(keys: &mut Keys<'_>) -> Option<Calls> {
        Some(Calls {
            timeout: keys.timeout()?,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        override_duration(&overrides.timeout, &mut self.timeout);
    }

    fn cells(&self) -> Vec<Calls> {
        vec![*self]
    }
}
