//! The `matrix.yaml` model.
//!
//! The path of a document through this crate:
//! `load` (size and nesting bounded, then parse: unknown keys refused, leaf values checked
//! where they are read)
//! -> `validate` (rules that span fields and the [`limits`], each error located at its
//! node; all of them from one more pass over the text)
//! -> [`Spec::cells`] (one [`Cell`] per test for a profile).

mod cell;
mod checks;
mod error;
mod events;
pub mod limits;
mod locate;
mod model;
mod seeded;
mod units;
mod validate;

pub use cell::{Cell, LoadShape, CELL_GROUP_FAULT};
pub use error::{SpecError, SpecErrors};
pub use limits::{available_memory, check_memory, mem_available};
pub use model::{
    CodecKind, LogSink, Overrides, Profile, RegressionPolicy, Runner, Scenario, ScenarioKind, Spec,
    Target, TransportKind, WakeMode, SCHEMA_VERSION,
};
pub use seeded::{pseudo_random_bytes, splitmix64};
pub use units::{ByteSize, Count, DurationSpec, UDP_MAX_PAYLOAD};
