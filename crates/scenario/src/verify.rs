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

/// Finds the first differing offset with block compares (memcmp) and a short scan of the
/// first block that differs.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    const BLOCK: usize = 4096;
    let (block, (x, y)) = a
        .chunks(BLOCK)
        .zip(b.chunks(BLOCK))
        .enumerate()
        .find(|(_, (x, y))| x != y)?;
    let within = x.iter().zip(y).position(|(p, q)| p != q)?;
    Some(block * BLOCK + within)
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
    use ipc_matrix_spec::{pseudo_random_bytes, splitmix64};

    /// The hex window of `bytes` around `offset`, written out independently of `compare`:
    /// up to 8 bytes before it, the byte itself and up to 8 after, where they exist.
    fn window_of(bytes: &[u8], offset: usize) -> String {
        let mut shown = Vec::new();
        for i in offset as isize - 8..=offset as isize + 8 {
            if i >= 0 && (i as usize) < bytes.len() {
                shown.push(format!("{:02x}", bytes[i as usize]));
            }
        }
        shown.join(" ")
    }

    /// `expected` with the byte at each of `offsets` flipped.
    fn flipped(expected: &[u8], offsets: &[usize]) -> Vec<u8> {
        let mut actual = expected.to_vec();
        for &offset in offsets {
            actual[offset] ^= 0xff;
        }
        actual
    }

    /// Checks everything `compare` reports for a same-length reply that first differs at
    /// `offset`.
    fn assert_flip_found(expected: &[u8], actual: &[u8], offset: usize) {
        let m = compare(expected, actual).unwrap_err();
        assert_eq!(m.offset, offset, "{m}");
        assert_eq!(
            (m.expected_len, m.actual_len),
            (expected.len(), actual.len())
        );
        assert!(!m.is_length(), "{m}");
        assert_eq!(m.failure_kind(), FailureKind::Mismatch);
        assert_eq!(m.expected_window, window_of(expected, offset), "{m}");
        assert_eq!(m.actual_window, window_of(actual, offset), "{m}");
        assert_eq!(
            m.to_string(),
            format!(
                "first difference at byte offset {offset}: expected [{}] actual [{}] \
                 (window from offset {})",
                window_of(expected, offset),
                window_of(actual, offset),
                offset.saturating_sub(8)
            )
        );
    }

    #[test]
    fn equal_bytes_pass() {
        assert!(compare(b"abc", b"abc").is_ok());
        assert!(compare(b"", b"").is_ok());
        let big = pseudo_random_bytes(3, 3 * 4096 + 5);
        assert!(compare(&big, &big.clone()).is_ok());
    }

    #[test]
    fn a_flipped_byte_is_found_with_its_window() {
        let expected: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let actual = flipped(&expected, &[5000]);
        let m = compare(&expected, &actual).unwrap_err();
        assert_eq!(m.offset, 5000);
        assert!(!m.is_length());
        // 5000 = 19 * 256 + 136 (0x88): bytes 0x80 ..= 0x90, the middle one flipped.
        assert_eq!(
            m.expected_window,
            "80 81 82 83 84 85 86 87 88 89 8a 8b 8c 8d 8e 8f 90"
        );
        assert_eq!(
            m.actual_window,
            "80 81 82 83 84 85 86 87 77 89 8a 8b 8c 8d 8e 8f 90"
        );
        assert_eq!(
            m.to_string(),
            "first difference at byte offset 5000: expected [80 81 82 83 84 85 86 87 88 89 8a \
             8b 8c 8d 8e 8f 90] actual [80 81 82 83 84 85 86 87 77 89 8a 8b 8c 8d 8e 8f 90] \
             (window from offset 4992)"
        );
    }

    /// The first byte, the last, the edges of the 8-byte stamp and of the 4096-byte
    /// blocks `compare` scans in (and of a shared-memory slot of 4096 bytes), and the
    /// middle, in a message of three blocks and a bit.
    #[test]
    fn a_flip_at_every_edge_is_found_at_its_offset() {
        let len = 3 * 4096 + 5;
        let expected = pseudo_random_bytes(17, len);
        for offset in [
            0,
            1,
            7,
            8,
            9,
            4095,
            4096,
            4097,
            8191,
            8192,
            12_287,
            12_288,
            len / 2,
            len - 2,
            len - 1,
        ] {
            assert_flip_found(&expected, &flipped(&expected, &[offset]), offset);
        }
        // A one-byte message, and a message of exactly one block.
        assert_flip_found(&[0x42], &[0xbd], 0);
        let block = pseudo_random_bytes(5, 4096);
        assert_flip_found(&block, &flipped(&block, &[4095]), 4095);
        assert_flip_found(&block, &flipped(&block, &[0]), 0);
    }

    #[test]
    fn a_flip_at_seeded_random_offsets_is_found_at_its_offset() {
        let len = 5 * 4096 + 123;
        let expected = pseudo_random_bytes(29, len);
        let mut state = 0x5eed_0ff5_u64;
        for _ in 0..200 {
            let offset = (splitmix64(&mut state) % len as u64) as usize;
            assert_flip_found(&expected, &flipped(&expected, &[offset]), offset);
        }
    }

    /// Only the first difference is reported, wherever the later ones are.
    #[test]
    fn of_several_differences_the_first_is_reported() {
        let expected = pseudo_random_bytes(41, 3 * 4096);
        for offsets in [
            [100, 5000],
            [4095, 4096],
            [4096, 4095],
            [0, 12_287],
            [12_287, 8192],
        ] {
            let first = *offsets.iter().min().unwrap();
            assert_flip_found(&expected, &flipped(&expected, &offsets), first);
        }
    }

    /// Checks everything `compare` reports for a reply of another length that agrees
    /// with `expected` up to `offset`.
    fn assert_length_found(expected: &[u8], actual: &[u8], offset: usize) {
        let m = compare(expected, actual).unwrap_err();
        assert_eq!(m.offset, offset, "{m}");
        assert_eq!(
            (m.expected_len, m.actual_len),
            (expected.len(), actual.len())
        );
        assert!(m.is_length(), "{m}");
        assert_eq!(m.failure_kind(), FailureKind::Length);
        assert_eq!(m.expected_window, window_of(expected, offset), "{m}");
        assert_eq!(m.actual_window, window_of(actual, offset), "{m}");
        assert_eq!(
            m.to_string(),
            format!(
                "reply is {} bytes, expected {}; first difference at byte offset {offset}: \
                 expected [{}] actual [{}] (window from offset {})",
                actual.len(),
                expected.len(),
                window_of(expected, offset),
                window_of(actual, offset),
                offset.saturating_sub(8)
            )
        );
    }

    #[test]
    fn truncation_and_extra_bytes_are_length_mismatches() {
        let m = compare(b"abcdef", b"abc").unwrap_err();
        assert_eq!((m.offset, m.is_length()), (3, true));
        assert!(m.to_string().starts_with("reply is 3 bytes, expected 6"));
        let m = compare(b"abc", b"abcxyz").unwrap_err();
        assert_eq!((m.offset, m.actual_len), (3, 6));
    }

    /// One byte short, one byte long, empty either way, at the block edges: the offset is
    /// where the shorter one ends.
    #[test]
    fn every_length_difference_is_found_where_the_shorter_ends() {
        for len in [1, 2, 8, 9, 200, 4095, 4096, 4097, 8192, 3 * 4096 + 5] {
            let expected = pseudo_random_bytes(len as u64, len);
            // One short: the last byte missing.
            assert_length_found(&expected, &expected[..len - 1], len - 1);
            // One long: a byte more.
            let mut long = expected.clone();
            long.push(0x5a);
            assert_length_found(&expected, &long, len);
            // Three more (the peer's extra-bytes fault).
            long.extend_from_slice(&[0xde, 0xad]);
            assert_length_found(&expected, &long, len);
            // Nothing at all, and something where nothing was expected.
            assert_length_found(&expected, &[], 0);
            assert_length_found(&[], &expected, 0);
            // Short, and different before it ends: the difference comes first.
            if len > 2 {
                let mut short = expected[..len - 1].to_vec();
                short[len / 3] ^= 0x01;
                assert_length_found(&expected, &short, len / 3);
            }
        }
    }

    #[test]
    fn a_length_difference_reads_with_both_windows() {
        let m = compare(b"0123456789abcdefghij", b"0123456789").unwrap_err();
        assert_eq!(
            m.to_string(),
            "reply is 10 bytes, expected 20; first difference at byte offset 10: expected \
             [32 33 34 35 36 37 38 39 61 62 63 64 65 66 67 68 69] actual [32 33 34 35 36 37 \
             38 39] (window from offset 2)"
        );
        let m = compare(b"xy", b"").unwrap_err();
        assert_eq!(
            m.to_string(),
            "reply is 0 bytes, expected 2; first difference at byte offset 0: expected \
             [78 79] actual [] (window from offset 0)"
        );
    }
}
