//! Byte-exact comparison of a reply with its request, memcmp first, and a report of
//! the first difference that a human can read.

use ipc_matrix_results::FailureKind;
use std::fmt;

/// Bytes shown either side of the first difference.
const WINDOW: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub expected_len: usize,
    pub actual_len: usize,
    /// First offset where the bytes differ, or where the shorter one ends.
    pub offset: usize,
    pub expected_window: String,
    pub actual_window: String,
}

impl Mismatch {
    pub fn is_length(&self) -> bool {
        self.expected_len != self.actual_len
    }

    /// How a cell reports it: a wrong length, or wrong bytes.
    pub fn failure_kind(&self) -> FailureKind {
        if self.is_length() {
            FailureKind::Length
        } else {
            FailureKind::Mismatch
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_length() {
            write!(
                f,
                "reply is {} bytes, expected {}; ",
                self.actual_len, self.expected_len
            )?;
        }
        write!(
            f,
            "first difference at byte offset {}: expected [{}] actual [{}] (window from offset {})",
            self.offset,
            self.expected_window,
            self.actual_window,
            self.offset.saturating_sub(WINDOW)
        )
    }
}

/// Ok when `actual` is exactly `expected`.
pub fn compare(expected: &[u8], actual: &[u8]) -> Result<(), Mismatch> {
    if expected == actual {
        return Ok(());
    }
    let common = expected.len().min(actual.len());
    let offset = first_difference(&expected[..common], &actual[..common]).unwrap_or(common);
    let window = |bytes: &[u8]| {
        let start = offset.saturating_sub(WINDOW).min(bytes.len());
        let end = (offset + WINDOW + 1).min(bytes.len());
        hex(&bytes[start..end])
    };
    Err(Mismatch {
        expected_len: expected.len(),
        actual_len: actual.len(),
        offset,
        expected_window: window(expected),
        actual_window: window(actual),
    })
}

/// Finds the first differing offset with block compares (memcmp) and a short scan.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    const BLOCK: usize = 4096;
    let mut start = 0;
    while start < a.len() {
        let end = (start + BLOCK).min(a.len());
        if a[start..end] != b[start..end] {
            return (start..end).find(|&i| a[i] != b[i]);
        }
        start = end;
    }
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_bytes_pass() {
        assert!(compare(b"abc", b"abc").is_ok());
    }

    #[test]
    fn a_flipped_byte_is_found_with_its_window() {
        let expected: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut actual = expected.clone();
        actual[5000] ^= 0xff;
        let m = compare(&expected, &actual).unwrap_err();
        assert_eq!(m.offset, 5000);
        assert!(!m.is_length());
        assert!(m.expected_window.contains("88"), "{m}");
        assert_eq!(m.expected_window.split(' ').count(), 17);
        assert!(m.to_string().contains("offset 5000"));
    }

    #[test]
    fn truncation_and_extra_bytes_are_length_mismatches() {
        let m = compare(b"abcdef", b"abc").unwrap_err();
        assert_eq!((m.offset, m.is_length()), (3, true));
        assert!(m.to_string().starts_with("reply is 3 bytes, expected 6"));
        let m = compare(b"abc", b"abcxyz").unwrap_err();
        assert_eq!((m.offset, m.actual_len), (3, 6));
    }
}
