//! The `matrix.yaml` model.
//!
//! The path of a document through this crate:
//! `load` (size and nesting bounded, then parse into the raw model of `raw.rs`: unknown
//! keys refused, leaf values checked where they are read)
//! -> `validate` (rules that span fields and the [`limits`]; each scenario into its kind's
//! variant, [`ScenarioWork`], by `kinds.rs`, keys its kind does not take refused; each
//! error located at its node, all of them from one more pass over the text)
//! -> [`Spec::cells`] (one [`Cell`] per test for a profile).

mod cell;
mod checks;
mod error;
mod events;
mod kinds;
pub mod limits;
mod locate;
mod model;
mod raw;
mod seeded;
mod units;
mod validate;

pub use cell::{
    Calls, Cell, Echoes, Fan, Frames, Load, LoadShape, LogWrite, Work, CELL_GROUP_FAULT,
};
pub use error::{SpecError, SpecErrors};
pub use limits::{available_memory, check_memory, mem_available};
pub use model::{
    CodecKind, LogSink, Overrides, Profile, RegressionPolicy, Runner, Scenario, ScenarioKind,
    ScenarioWork, Spec, Target, TransportKind, WakeMode, SCHEMA_VERSION,
};
pub use seeded::{pseudo_random_bytes, splitmix64};
pub use units::{ByteSize, Count, DurationSpec, UDP_MAX_PAYLOAD};
