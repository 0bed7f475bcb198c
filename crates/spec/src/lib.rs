//! The `matrix.yaml` model.
//!
//! The path of a document through this crate:
//! `load` (size and nesting bounded, then parse into the raw model of `raw.rs`: unknown
//! keys refused, leaf values checked where they are read)
//! -> `validate` (rules that span fields and the [`limits`]; each scenario into its kind's
//! variant, [`ScenarioWork`], by its kind's module, keys its kind does not take refused;
//! each error located at its node, all of them from one more pass over the text)
//! -> [`Spec::cells`] (one [`Cell`] per test for a profile, each with its kind's [`Work`]).
//!
//! Each scenario kind has one module, `kinds/<kind>.rs`, holding all this crate knows of
//! it: its settings, how its entry is read and checked, its names and limits (the
//! `KindSpec` trait of `kind_spec.rs`). `kinds.rs` lists the kinds and dispatches to
//! their modules, and is the only file that names every kind. A kind module imports
//! what kinds share (`kind_spec.rs`, the reader of its keys in `keys.rs`, `model.rs`,
//! `units.rs`, `limits.rs`), never the list or another kind.

mod cell;
mod checks;
mod counted;
mod error;
mod events;
pub mod github;
mod keys;
mod kind_spec;
mod kinds;
pub mod limits;
mod locate;
mod model;
mod plugins;
mod raw;
mod reach;
mod seeded;
mod stack;
mod units;
mod validate;

pub use cell::{Cell, UnknownProfile, CELL_GROUP_FAULT};
pub use counted::{count_leg, counted_target};
pub use error::{SpecError, SpecErrors};
// Every kind's public types (its settings, in scenarios and in cells), and the kinds.
pub use kinds::*;
pub use limits::{available_memory, check_memory, mem_available, MemoryError};
pub use model::{
    ChannelKind, CodecKind, MessagePath, Overrides, Profile, RegressionPolicy, Runner, Scenario,
    Spec, Target, TransportKind, WakeMode, SCHEMA_VERSION,
};
pub use plugins::{Plugin, ARCH_PLACEHOLDER, MAX_LIBRARY_PATH_BYTES};
pub use reach::{ExternalPeer, Host, NetnsLink, DEFAULT_MTU, TARGET_PLACEHOLDER};
pub use seeded::{pseudo_random_bytes, splitmix64};
pub use stack::{StackName, StackNameError, StackTraits, BUILT_IN_NAMES, MAX_STACK_NAMES};
pub use units::{ByteSize, Count, DurationSpec, UnitError, UDP_MAX_PAYLOAD};
