//! Deterministic pseudo-random payloads (see `ipc_matrix_spec::pseudo_random_bytes`),
//! stamped with the round-trip index.

pub use ipc_matrix_spec::pseudo_random_bytes;

use crate::verify::{compare, Mismatch};

/// A payload whose first 8 bytes also carry the round-trip index, so every request
/// differs from the one before and a late UDP reply can be told from the current one.
pub struct Payload {
    bytes: Vec<u8>,
    base_prefix: u64,
}

const STAMP: usize = 8;

impl Payload {
    pub fn new(seed: u64, len: usize) -> Self {
        let bytes = pseudo_random_bytes(seed, len);
        let base_prefix = prefix(&bytes).unwrap_or(0);
        Self { bytes, base_prefix }
    }

    /// Rewrites the stamp for round trip `index`.
    pub fn stamp(&mut self, index: u64) {
        if self.bytes.len() >= STAMP {
            let stamp = (self.base_prefix ^ index).to_le_bytes();
            self.bytes[..STAMP].copy_from_slice(&stamp);
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The round-trip index a message carries, if it is long enough to carry one.
    pub fn index_of(&self, message: &[u8]) -> Option<u64> {
        prefix(message).map(|p| p ^ self.base_prefix)
    }

    /// Checks `message` byte for byte against the request of round trip `index`: what a
    /// late reply to it must be. (Allocates: for late replies only.)
    pub fn check_as_request(&self, index: u64, message: &[u8]) -> Result<(), Mismatch> {
        let mut expected = self.bytes.clone();
        if expected.len() >= STAMP {
            expected[..STAMP].copy_from_slice(&(self.base_prefix ^ index).to_le_bytes());
        }
        compare(&expected, message)
    }
}

fn prefix(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(..STAMP)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_reply_is_checked_against_its_own_request() {
        let mut payload = Payload::new(3, 64);
        payload.stamp(4);
        let earlier = payload.bytes().to_vec();
        payload.stamp(9);
        assert_eq!(payload.index_of(&earlier), Some(4));
        assert!(payload.check_as_request(4, &earlier).is_ok());
        let mut corrupted = earlier.clone();
        corrupted[40] ^= 1;
        assert_eq!(
            payload.check_as_request(4, &corrupted).unwrap_err().offset,
            40
        );
        assert!(payload
            .check_as_request(4, &earlier[..63])
            .unwrap_err()
            .is_length());
    }

    #[test]
    fn bytes_are_deterministic_and_not_one_repeated_byte() {
        let a = pseudo_random_bytes(7, 1000);
        assert_eq!(a, pseudo_random_bytes(7, 1000));
        assert_ne!(a, pseudo_random_bytes(8, 1000));
        assert!(a.windows(2).any(|w| w[0] != w[1]));
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(
            distinct.len() > 200,
            "only {} distinct bytes",
            distinct.len()
        );
    }

    #[test]
    fn known_bytes_are_the_same_on_every_cpu() {
        // Computed independently of this code (SplitMix64 by hand); a big-endian CPU writing
        // words natively would fail this.
        assert_eq!(
            pseudo_random_bytes(1, 8),
            [0xb0, 0xfb, 0xd0, 0x05, 0x8a, 0x1b, 0xbe, 0x9e]
        );
    }

    #[test]
    fn stamps_round_trip() {
        let mut p = Payload::new(3, 200);
        p.stamp(41);
        let sent = p.bytes().to_vec();
        assert_eq!(p.index_of(&sent), Some(41));
        p.stamp(42);
        assert_ne!(sent, p.bytes());
    }
}
