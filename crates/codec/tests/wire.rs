//! Wire identity: the bytes each codec produces for fixed frames, as sizes and SHA-256
//! digests, in one snapshot with no per-architecture suffix. The same snapshot must pass
//! on every CPU of the matrix (x86_64, aarch64, big-endian s390x); a codec or a frame
//! builder that writes native-endian words, or reads them, fails it on some CPU.

use ipc_matrix_codec::{Codec, FrameCodec, SensorFrame};
use sha2::{Digest, Sha256};
use std::fmt::Write;

#[test]
fn encoded_bytes_are_the_same_on_every_cpu() {
    let mut table = String::new();
    for (seed, sequence) in [(1u64, 0u64), (0x01bc_3a7e_2026, 7), (u64::MAX, 1_000_001)] {
        for payload in [0usize, 200, 65_536, 6_500_000] {
            let frame = SensorFrame::sample(seed, sequence, payload);
            for codec in Codec::ALL {
                let mut bytes = Vec::new();
                codec.encode(&frame, &mut bytes);
                // Decoding on this CPU gives the frame back, field by field.
                let back = codec.decode(&bytes).unwrap();
                assert_eq!(frame.first_difference(&back), None);
                let digest = Sha256::digest(&bytes);
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                let _ = writeln!(
                    table,
                    "seed {seed:#x} seq {sequence} payload {payload:>7} {codec:<5} {:>8} B sha256 {hex}",
                    bytes.len()
                );
            }
        }
    }
    insta::assert_snapshot!(table);
}
