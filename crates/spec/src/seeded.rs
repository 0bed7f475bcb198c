//! What a `seed` in matrix.yaml stands for: a stream of pseudo-random words and the bytes
//! made of them. Words are written little-endian explicitly, so a seed gives the same
//! bytes on every CPU, big-endian ones included.

/// SplitMix64 (Steele, Lea & Flood, 2014): tiny, fast, and well-distributed for this job.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `len` bytes from `seed`; never one repeated byte, which would hide offset bugs.
pub fn pseudo_random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed ^ (len as u64).rotate_left(32);
    let mut out = Vec::with_capacity(len.saturating_add(8));
    while out.len() < len {
        out.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out.truncate(len);
    out
}
