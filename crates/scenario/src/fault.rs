//! Faults the peer can be told to commit, to prove that the measuring side catches them.

use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Flip every bit of one byte of the reply: the one its [`Spot`] names.
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

/// Which byte of a message a [`FaultKind::FlipByte`] fault flips: the edges of the
/// message, the edges of the chunks a transport carries it in, or a seeded offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spot {
    /// Byte `len / 2`.
    #[default]
    Middle,
    /// Byte 0.
    First,
    /// Byte `len - 1`.
    Last,
    /// The last byte of chunk `n` (0-based) of a message carried in chunks: byte
    /// `(n + 1) * chunk - 1`.
    ChunkEnd(u32),
    /// The first byte of chunk `n` (0-based) of a message carried in chunks: byte
    /// `n * chunk`.
    ChunkStart(u32),
    /// Byte `splitmix64(seed) % len` (the first word [`ipc_matrix_spec::splitmix64`]
    /// draws from state `seed`).
    Random(u64),
}

impl Spot {
    /// The offset this spot names in a message of `len` bytes that its transport carries
    /// in chunks of `chunk` bytes (`None`: in one piece); `None` when the message has no
    /// such byte (it is empty, or shorter, or not carried in chunks).
    pub fn offset(self, len: usize, chunk: Option<usize>) -> Option<usize> {
        let at_chunk = |n: u32, end: bool| {
            let chunk = chunk.filter(|&c| c > 0)?;
            let start = (n as usize).checked_mul(chunk)?;
            if end {
                start.checked_add(chunk - 1)
            } else {
                Some(start)
            }
        };
        let offset = match self {
            Spot::Middle => len / 2,
            Spot::First => 0,
            Spot::Last => len.checked_sub(1)?,
            Spot::ChunkEnd(n) => at_chunk(n, true)?,
            Spot::ChunkStart(n) => at_chunk(n, false)?,
            Spot::Random(seed) => {
                let mut state = seed;
                let word = ipc_matrix_spec::splitmix64(&mut state);
                (word % u64::try_from(len).ok().filter(|&l| l > 0)?) as usize
            }
        };
        (offset < len).then_some(offset)
    }

    fn name(self) -> String {
        match self {
            Spot::Middle => "middle".into(),
            Spot::First => "first".into(),
            Spot::Last => "last".into(),
            Spot::ChunkEnd(n) => format!("chunk-end-{n}"),
            Spot::ChunkStart(n) => format!("chunk-start-{n}"),
            Spot::Random(seed) => format!("random-{seed}"),
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "middle" => Spot::Middle,
            "first" => Spot::First,
            "last" => Spot::Last,
            _ => {
                if let Some(n) = name.strip_prefix("chunk-end-") {
                    Spot::ChunkEnd(n.parse().ok()?)
                } else if let Some(n) = name.strip_prefix("chunk-start-") {
                    Spot::ChunkStart(n.parse().ok()?)
                } else {
                    Spot::Random(name.strip_prefix("random-")?.parse().ok()?)
                }
            }
        })
    }
}

/// A fault committed on the reply to message `at` (0-based, warm-up included), at `spot`
/// for a flipped byte (the other kinds ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    pub at: u64,
    #[serde(default)]
    pub spot: Spot,
}

impl Fault {
    /// `kind` at message `at`; a flipped byte in the middle.
    pub fn new(kind: FaultKind, at: u64) -> Self {
        Self {
            kind,
            at,
            spot: Spot::Middle,
        }
    }

    /// The byte at `spot` of message `at` flipped.
    pub fn flip(spot: Spot, at: u64) -> Self {
        Self {
            kind: FaultKind::FlipByte,
            at,
            spot,
        }
    }

    /// Commits this fault on `message`, carried in chunks of `chunk` bytes (`None`: in
    /// one piece). A stall never returns; an exit ends the process. A flip whose spot
    /// names no byte of the message is an error, never a reply left intact.
    pub fn commit(self, message: &mut Vec<u8>, chunk: Option<usize>) -> Result<(), FaultError> {
        match self.kind {
            FaultKind::FlipByte => {
                let offset =
                    self.spot
                        .offset(message.len(), chunk)
                        .ok_or(FaultError::NoSuchByte {
                            fault: self,
                            len: message.len(),
                            chunk,
                        })?;
                message[offset] ^= 0xff;
            }
            FaultKind::Truncate => {
                message.pop();
            }
            FaultKind::ExtraBytes => message.extend_from_slice(&[0xde, 0xad, 0xbe]),
            FaultKind::Stall => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            FaultKind::Exit => std::process::exit(3),
        }
        Ok(())
    }
}

/// A fault that cannot be committed on the message it was asked for: never a reply left
/// intact instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// A flip whose spot names no byte of a `len`-byte message carried in chunks of
    /// `chunk` bytes (`None`: in one piece).
    #[error("fault {fault}: no such byte in a {len}-byte message ({})", carried(*.chunk))]
    NoSuchByte {
        fault: Fault,
        len: usize,
        chunk: Option<usize>,
    },
}

/// How a message is carried, as [`FaultError::NoSuchByte`] says it.
fn carried(chunk: Option<usize>) -> String {
    match chunk {
        Some(c) => format!("chunks of {c} bytes"),
        None => "carried in one piece".into(),
    }
}

/// Text that is not a fault: what [`Fault`]'s `FromStr` refuses, quoted, with the forms
/// it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a fault; use KIND@INDEX with KIND one of {}, or \
     flip-byte:SPOT@INDEX with SPOT one of middle, first, last, chunk-end-N, \
     chunk-start-N, random-SEED",
    kind_names()
)]
pub struct ParseFaultError {
    /// The text refused.
    pub text: String,
}

/// The names of the fault kinds, for [`ParseFaultError`].
fn kind_names() -> String {
    let kinds: Vec<_> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
    kinds.join(", ")
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.spot) {
            (FaultKind::FlipByte, spot) if spot != Spot::Middle => {
                write!(f, "{}:{}@{}", self.kind.as_str(), spot.name(), self.at)
            }
            _ => write!(f, "{}@{}", self.kind.as_str(), self.at),
        }
    }
}

impl FromStr for Fault {
    type Err = ParseFaultError;
    /// `flip-byte@5`, `flip-byte:last@5`, `flip-byte:chunk-start-1@0`,
    /// `flip-byte:random-42@3`, `stall@0`, ...
    fn from_str(s: &str) -> Result<Self, ParseFaultError> {
        let usage = || ParseFaultError {
            text: s.to_string(),
        };
        let (kind, at) = s.split_once('@').ok_or_else(usage)?;
        let (kind, spot) = match kind.split_once(':') {
            Some((kind, spot)) => (kind, Some(spot)),
            None => (kind, None),
        };
        let kind = FaultKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind)
            .ok_or_else(usage)?;
        let spot = match spot {
            None => Spot::Middle,
            Some(name) if kind == FaultKind::FlipByte => Spot::parse(name).ok_or_else(usage)?,
            Some(_) => return Err(usage()),
        };
        Ok(Fault {
            kind,
            at: at.parse().map_err(|_| usage())?,
            spot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spots_name_the_edges_of_the_message_and_of_its_chunks() {
        let chunk = Some(4096);
        let len = 2 * 4096 + 10;
        assert_eq!(Spot::Middle.offset(len, None), Some(4101));
        assert_eq!(Spot::First.offset(len, None), Some(0));
        assert_eq!(Spot::Last.offset(len, None), Some(len - 1));
        assert_eq!(Spot::ChunkEnd(0).offset(len, chunk), Some(4095));
        assert_eq!(Spot::ChunkStart(1).offset(len, chunk), Some(4096));
        assert_eq!(Spot::ChunkEnd(1).offset(len, chunk), Some(8191));
        assert_eq!(Spot::ChunkStart(2).offset(len, chunk), Some(8192));
        assert_eq!(Spot::ChunkStart(0).offset(len, chunk), Some(0));
        // Past the end, or no chunks at all: no such byte.
        assert_eq!(Spot::ChunkEnd(2).offset(len, chunk), None);
        assert_eq!(Spot::ChunkStart(3).offset(len, chunk), None);
        assert_eq!(Spot::ChunkStart(1).offset(len, None), None);
        assert_eq!(Spot::ChunkStart(1).offset(len, Some(0)), None);
        assert_eq!(Spot::ChunkEnd(u32::MAX).offset(len, Some(usize::MAX)), None);
        assert_eq!(Spot::Last.offset(1, None), Some(0));
        for spot in [Spot::Middle, Spot::First, Spot::Last, Spot::Random(1)] {
            assert_eq!(spot.offset(0, None), None, "{spot:?}");
        }
    }

    #[test]
    fn a_random_spot_is_the_first_splitmix64_word_of_its_seed_modulo_the_length() {
        // splitmix64 from state 0: 0xe220a8397b1dcdaf (the reference sequence).
        assert_eq!(
            Spot::Random(0).offset(1000, None),
            Some((0xe220_a839_7b1d_cdaf_u64 % 1000) as usize)
        );
        assert_eq!(Spot::Random(0).offset(1000, None), Some(535));
        assert_eq!(Spot::Random(0).offset(1, None), Some(0));
        // Another seed, another offset: the spot is not a constant.
        assert_ne!(
            Spot::Random(1).offset(1 << 20, None),
            Spot::Random(2).offset(1 << 20, None)
        );
    }

    #[test]
    fn commit_flips_exactly_the_byte_named() {
        let original: Vec<u8> = (0..=255u8).collect();
        for (spot, offset) in [
            (Spot::First, 0),
            (Spot::Last, 255),
            (Spot::Middle, 128),
            (Spot::ChunkEnd(0), 99),
            (Spot::ChunkStart(2), 200),
        ] {
            let mut message = original.clone();
            Fault::flip(spot, 0)
                .commit(&mut message, Some(100))
                .unwrap();
            let changed: Vec<usize> = (0..256).filter(|&i| message[i] != original[i]).collect();
            assert_eq!(changed, vec![offset], "{spot:?}");
            assert_eq!(message[offset], !original[offset]);
        }
        let mut message = original.clone();
        Fault::new(FaultKind::Truncate, 0)
            .commit(&mut message, None)
            .unwrap();
        assert_eq!(message, original[..255]);
        let mut message = original.clone();
        Fault::new(FaultKind::ExtraBytes, 0)
            .commit(&mut message, None)
            .unwrap();
        assert_eq!(message.len(), 259);
        assert_eq!(&message[..256], &original[..]);
    }

    #[test]
    fn a_flip_that_names_no_byte_is_an_error_and_leaves_the_message() {
        let mut message = vec![7u8; 10];
        let e = Fault::flip(Spot::ChunkStart(1), 4)
            .commit(&mut message, None)
            .unwrap_err();
        assert_eq!(
            e,
            FaultError::NoSuchByte {
                fault: Fault::flip(Spot::ChunkStart(1), 4),
                len: 10,
                chunk: None
            }
        );
        assert_eq!(
            e.to_string(),
            "fault flip-byte:chunk-start-1@4: no such byte in a 10-byte message (carried in one piece)"
        );
        assert_eq!(message, vec![7u8; 10]);
        let e = Fault::flip(Spot::Last, 0)
            .commit(&mut Vec::new(), Some(64))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("0-byte message (chunks of 64 bytes)"),
            "{e}"
        );
    }

    #[test]
    fn faults_read_back_what_they_print() {
        for fault in [
            Fault::new(FaultKind::FlipByte, 5),
            Fault::new(FaultKind::Stall, 0),
            Fault::new(FaultKind::Exit, 9),
            Fault::new(FaultKind::Truncate, 1),
            Fault::new(FaultKind::ExtraBytes, 2),
            Fault::flip(Spot::First, 4),
            Fault::flip(Spot::Last, 4),
            Fault::flip(Spot::ChunkEnd(0), 4),
            Fault::flip(Spot::ChunkStart(12), 4),
            Fault::flip(Spot::Random(u64::MAX), 4),
        ] {
            assert_eq!(fault.to_string().parse::<Fault>(), Ok(fault), "{fault}");
        }
        assert_eq!(Fault::flip(Spot::Last, 4).to_string(), "flip-byte:last@4");
        assert_eq!(
            "flip-byte:middle@3".parse::<Fault>(),
            Ok(Fault::new(FaultKind::FlipByte, 3))
        );
        for bad in [
            "flip-byte",
            "flip@3",
            "flip-byte:@3",
            "flip-byte:edge@3",
            "flip-byte:chunk-end-x@3",
            "stall:first@3",
            "flip-byte:first@x",
        ] {
            assert!(bad.parse::<Fault>().is_err(), "{bad}");
        }
        assert_eq!(
            "flip@3".parse::<Fault>().unwrap_err().to_string(),
            "`flip@3` is not a fault; use KIND@INDEX with KIND one of flip-byte, truncate, \
             extra-bytes, stall, exit, or flip-byte:SPOT@INDEX with SPOT one of middle, first, \
             last, chunk-end-N, chunk-start-N, random-SEED"
        );
    }
}
