//! Stacks a user brings: channels that the binary carrying them registers by name when it
//! starts (`ipc_matrix::main!`, `ipc_matrix::test_main!`), beside the built-in transports.
//!
//! A stack's name is a [`StackName`]: small and `Copy`, as every transport kind is, and
//! ordered by its text. A name read from a results file is known by its text alone (its
//! [`StackTraits`] are `None`): reports and baselines need nothing more. matrix.yaml may
//! list only a stack this process registered, which is checked with the scenario.

use crate::model::{ChannelKind, MessagePath};
use std::sync::RwLock;

/// The facts of a user's stack that the matrix needs to make and judge its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackTraits {
    /// Its cells come in wake modes (`<name>-blocking`, `<name>-busy`), handed to its
    /// listen call, as shared memory's do.
    pub wake_modes: bool,
    /// The message paths it offers, its cells' default first: [`MessagePath::Copied`]
    /// always (send and recv), [`MessagePath::Loaned`] when its channel has loans.
    pub message_paths: &'static [MessagePath],
    /// The built-in channel whose floor its cells are measured against: the simplest
    /// exchange of what it does (`Shm` for shared memory, by wake mode; `Local` for a
    /// Unix socket; `Tcp`, `Udp`, `Pipe`).
    pub floor_like: ChannelKind,
    /// It carries a byte stream that messages are framed on.
    pub byte_stream: bool,
}

impl StackTraits {
    /// A stack that copies (send and recv), with no wake modes, measured against the
    /// floor of `floor_like`.
    pub const fn copying(floor_like: ChannelKind) -> Self {
        Self {
            wake_modes: false,
            message_paths: &[MessagePath::Copied],
            floor_like,
            byte_stream: false,
        }
    }
}

/// A user's stack by name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StackName(u16);

struct Entry {
    name: &'static str,
    traits: Option<StackTraits>,
}

/// Every name this process has met; a name is leaked once and kept for the process's
/// life (there are at most [`MAX_STACK_NAMES`]).
static NAMES: RwLock<Vec<Entry>> = RwLock::new(Vec::new());

/// How many stack names one process holds at most: a results folder naming more is
/// refused rather than grow without bound.
pub const MAX_STACK_NAMES: usize = 1024;

/// The built-in transports' names, which no stack may take.
pub const BUILT_IN_NAMES: [&str; 7] = ["shm", "local", "tcp", "udp", "pipe", "iceoryx2", "file"];

/// Why a name cannot be a stack's, or a stack cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackNameError {
    #[error(
        "`{name}` is not a transport: the built-in ones are {}; a stack's name is a-z, 0-9 and `-`, starting with a letter, at most 40 bytes",
        BUILT_IN_NAMES.join(", ")
    )]
    Malformed { name: String },
    #[error("`{name}` is a built-in transport, not a stack")]
    BuiltIn { name: String },
    #[error("more than {MAX_STACK_NAMES} stack names in one process")]
    TooMany,
    #[error("stack `{name}`: every stack offers the copied path (send and recv)")]
    NoCopiedPath { name: String },
    #[error("stack `{name}`: the streamed path is shared memory's own; offer copied and loaned")]
    StreamedPath { name: String },
    #[error("stack `{name}`: floor_like names a built-in channel, not a stack")]
    FloorLikeAStack { name: String },
    #[error("stack `{name}` is registered twice")]
    RegisteredTwice { name: String },
}

impl StackName {
    /// The stack named `name`, registered or not: an identifier (a-z, 0-9, `-`, starting
    /// with a letter, at most 40 bytes) that no built-in transport has.
    pub fn named(name: &str) -> Result<StackName, StackNameError> {
        check_name(name)?;
        if let Some(found) = Self::find(name) {
            return Ok(found);
        }
        let mut names = NAMES.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = names.iter().position(|e| e.name == name) {
            return Ok(StackName(i as u16));
        }
        if names.len() >= MAX_STACK_NAMES {
            return Err(StackNameError::TooMany);
        }
        names.push(Entry {
            name: Box::leak(name.to_owned().into_boxed_str()),
            traits: None,
        });
        Ok(StackName((names.len() - 1) as u16))
    }

    /// Registers the stack `name` with its traits, for this process's cells and peers.
    /// Refused when the name is taken by a built-in transport or by another registered
    /// stack.
    pub fn register(name: &str, traits: StackTraits) -> Result<StackName, StackNameError> {
        let name_owned = || name.to_string();
        if !traits.message_paths.contains(&MessagePath::Copied) {
            return Err(StackNameError::NoCopiedPath { name: name_owned() });
        }
        if traits.message_paths.contains(&MessagePath::Streamed) {
            return Err(StackNameError::StreamedPath { name: name_owned() });
        }
        if traits.floor_like.stack().is_some() {
            return Err(StackNameError::FloorLikeAStack { name: name_owned() });
        }
        let stack = Self::named(name)?;
        let mut names = NAMES.write().unwrap_or_else(|e| e.into_inner());
        let entry = &mut names[stack.0 as usize];
        if entry.traits.is_some() {
            return Err(StackNameError::RegisteredTwice { name: name_owned() });
        }
        entry.traits = Some(traits);
        Ok(stack)
    }

    /// The stack of this name this process has met, if any.
    pub fn find(name: &str) -> Option<StackName> {
        let names = NAMES.read().unwrap_or_else(|e| e.into_inner());
        names
            .iter()
            .position(|e| e.name == name)
            .map(|i| StackName(i as u16))
    }

    /// The stacks this process registered, by name.
    pub fn registered() -> Vec<StackName> {
        let names = NAMES.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<StackName> = (0..names.len())
            .filter(|&i| names[i].traits.is_some())
            .map(|i| StackName(i as u16))
            .collect();
        drop(names);
        out.sort();
        out
    }

    pub fn as_str(self) -> &'static str {
        NAMES.read().unwrap_or_else(|e| e.into_inner())[self.0 as usize].name
    }

    /// Its traits, when this process registered it; `None` for a name read from results.
    pub fn traits(self) -> Option<StackTraits> {
        NAMES.read().unwrap_or_else(|e| e.into_inner())[self.0 as usize].traits
    }
}

pub(crate) fn check_name(name: &str) -> Result<(), StackNameError> {
    let well_formed = !name.is_empty()
        && name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !well_formed {
        return Err(StackNameError::Malformed {
            name: name.to_string(),
        });
    }
    if BUILT_IN_NAMES.contains(&name) {
        return Err(StackNameError::BuiltIn {
            name: name.to_string(),
        });
    }
    Ok(())
}

impl PartialOrd for StackName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StackName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::fmt::Debug for StackName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StackName({:?})", self.as_str())
    }
}

/// A stack's name as text; one that is not a well-formed stack name is refused where it
/// is read (a peer's address, a results file), never taken for another transport.
impl serde::Serialize for StackName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for StackName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        StackName::named(&text).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for StackName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_back_as_itself_and_an_ill_formed_one_is_refused() {
        let name = StackName::named("read-back").unwrap();
        let text = serde_json::to_string(&name).unwrap();
        assert_eq!(text, "\"read-back\"");
        assert_eq!(serde_json::from_str::<StackName>(&text).unwrap(), name);
        for bad in ["\"tcp\"", "\"Not-A-Name\"", "\"\"", "\"a b\"", "7"] {
            let why = serde_json::from_str::<StackName>(bad)
                .unwrap_err()
                .to_string();
            assert!(!why.is_empty(), "{bad} was read as a stack name");
        }
    }

    #[test]
    fn a_name_is_one_stack_and_registers_once() {
        let read = StackName::named("from-results-only").unwrap();
        assert_eq!(read, StackName::named("from-results-only").unwrap());
        assert_eq!(read.as_str(), "from-results-only");
        assert_eq!(read.traits(), None);
        let traits = StackTraits::copying(ChannelKind::Local);
        let mine = StackName::register("registered-here", traits).unwrap();
        assert_eq!(mine.traits(), Some(traits));
        assert!(StackName::registered().contains(&mine));
        assert!(!StackName::registered().contains(&read));
        let twice = StackName::register("registered-here", traits).unwrap_err();
        assert!(matches!(twice, StackNameError::RegisteredTwice { .. }));
        assert!(twice.to_string().contains("registered twice"), "{twice}");
    }

    #[test]
    fn built_in_names_and_ill_formed_names_are_refused() {
        for name in ["tcp", "shm", "file"] {
            let e = StackName::named(name).unwrap_err();
            assert_eq!(e, StackNameError::BuiltIn { name: name.into() });
            assert!(e.to_string().contains("built-in"), "{e}");
        }
        for name in ["", "Upper", "9lives", "a b", "a/b", &"x".repeat(41)] {
            let e = StackName::named(name).unwrap_err();
            assert!(matches!(e, StackNameError::Malformed { .. }), "{name}: {e}");
            assert!(e.to_string().contains("not a transport"), "{name}: {e}");
        }
        let streamed = StackTraits {
            message_paths: &[MessagePath::Copied, MessagePath::Streamed],
            ..StackTraits::copying(ChannelKind::Shm)
        };
        assert!(StackName::register("streams", streamed).is_err());
        let no_copy = StackTraits {
            message_paths: &[MessagePath::Loaned],
            ..StackTraits::copying(ChannelKind::Shm)
        };
        assert!(StackName::register("loans-only", no_copy).is_err());
    }
}
