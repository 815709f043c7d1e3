//! The seeded data pattern for `--verify`: every 8-byte word is a function
//! of the seed and its absolute file offset, so any range read back can be
//! checked without remembering what was written.

fn word(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fill `buf` with the pattern of the file range starting at `offset`.
pub fn fill(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut i = 0usize;
    while i < buf.len() {
        let at = offset + i as u64;
        let w = word(seed, at / 8).to_le_bytes();
        let from = (at % 8) as usize;
        let n = (8 - from).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&w[from..from + n]);
        i += n;
    }
}

/// The first offset in `data` (read at `offset`) that differs from the pattern.
pub fn first_mismatch(seed: u64, offset: u64, data: &[u8]) -> Option<u64> {
    let mut i = 0usize;
    while i < data.len() {
        let at = offset + i as u64;
        let w = word(seed, at / 8).to_le_bytes();
        let from = (at % 8) as usize;
        let n = (8 - from).min(data.len() - i);
        if let Some(k) = (0..n).find(|&k| data[i + k] != w[from + k]) {
            return Some(at + k as u64);
        }
        i += n;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_range_checks_at_any_alignment_and_a_flipped_byte_is_found() {
        let mut buf = vec![0u8; 1000];
        fill(7, 13, &mut buf);
        assert_eq!(first_mismatch(7, 13, &buf), None);
        assert_eq!(first_mismatch(7, 20, &buf[7..]), None);
        assert!(first_mismatch(8, 13, &buf).is_some());
        buf[500] ^= 1;
        assert_eq!(first_mismatch(7, 13, &buf), Some(513));
    }
}
