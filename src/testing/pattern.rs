//! The test pattern that the `srb_fill_pattern` kernel (csrc/testing/producers.cu) writes, computed on
//! the host, so tests and the harness can check every byte of a readback.

/// SplitMix64's output function (Steele, Lea, Flood: "Fast splittable pseudorandom number
/// generators", OOPSLA 2014), identical to `srb_mix` in `csrc/testing/producers.cu`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Byte `i` of a buffer that `srb_fill_pattern(dst, n, seed)` filled.
pub fn byte_at(seed: u64, i: u64) -> u8 {
    (mix(seed.wrapping_add(i / 8)) >> (8 * (i % 8))) as u8
}

/// The first `n` bytes of a buffer filled with `seed`.
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    (0..n as u64).map(|i| byte_at(seed, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_splitmix64_reference_values() {
        // First outputs of SplitMix64 seeded with 0 (state advanced by the golden gamma).
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn bytes_are_little_endian_words() {
        let b = bytes(3, 16);
        assert_eq!(&b[..8], &mix(3).to_le_bytes());
        assert_eq!(&b[8..], &mix(4).to_le_bytes());
    }
}
