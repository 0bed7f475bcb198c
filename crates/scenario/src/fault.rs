//! Faults the peer can be told to commit, to prove that the measuring side catches them.

use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Flip every bit of one byte in the middle of the reply.
    FlipByte,
    /// Reply with the last byte missing.
    Truncate,
    /// Reply with three bytes appended.
    ExtraBytes,
    /// Never reply again (sleep until killed).
    Stall,
    /// Exit with status 3 instead of replying.
    Exit,
}

impl FaultKind {
    pub const ALL: [FaultKind; 5] = [
        FaultKind::FlipByte,
        FaultKind::Truncate,
        FaultKind::ExtraBytes,
        FaultKind::Stall,
        FaultKind::Exit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::FlipByte => "flip-byte",
            FaultKind::Truncate => "truncate",
            FaultKind::ExtraBytes => "extra-bytes",
            FaultKind::Stall => "stall",
            FaultKind::Exit => "exit",
        }
    }
}

/// A fault committed on the reply to message `at` (0-based, warm-up included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    pub at: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.kind.as_str(), self.at)
    }
}

impl FromStr for Fault {
    type Err = String;
    /// `flip-byte@5`, `stall@0`, ...
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            let kinds: Vec<_> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
            format!(
                "`{s}` is not a fault; use KIND@INDEX with KIND one of {}",
                kinds.join(", ")
            )
        };
        let (kind, at) = s.split_once('@').ok_or_else(usage)?;
        let kind = FaultKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind)
            .ok_or_else(usage)?;
        Ok(Fault {
            kind,
            at: at.parse().map_err(|_| usage())?,
        })
    }
}
