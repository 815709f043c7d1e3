//! The seeded data pattern for `--verify`: every 8-byte word is a function
//! of the seed and its absolute file offset, so any range read back can be
//! checked without remembering what was written.
//!
//! `--data` picks what the words are ([`set_data`], once per run, before any
//! connection starts): random (the default: incompressible), text-like (each
//! 8-byte word one of 256 English words, so compressors find matches as in
//! prose: LZ77 takes it to about a third), or zeros.

use std::sync::atomic::{AtomicU8, Ordering};

/// `--data`: what the bench writes and expects to read.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Data {
    #[default]
    Random,
    Text,
    Zeros,
}

static DATA: AtomicU8 = AtomicU8::new(0);

/// Set the kind of data for the whole run.
pub fn set_data(d: Data) {
    DATA.store(d as u8, Ordering::Relaxed);
}

const WORDS: [&str; 64] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "file", "server", "share",
    "client", "read", "write", "data", "network", "packet", "window", "credit", "session", "tree",
    "open", "close", "lease",
];

/// One of 256 8-byte words: a word, capitalised or not, then a space, a
/// comma, a full stop or a newline, padded with spaces.
fn text_word(i: u64) -> [u8; 8] {
    let w = WORDS[(i & 63) as usize].as_bytes();
    let mut out = [b' '; 8];
    out[..w.len()].copy_from_slice(w);
    if i & 64 != 0 {
        out[0] = out[0].to_ascii_uppercase();
    }
    out[w.len()] = [b' ', b',', b'.', b'\n'][((i >> 7) & 1) as usize * 2 + usize::from(i & 1 == 0)];
    out
}

fn word(seed: u64, index: u64) -> u64 {
    match DATA.load(Ordering::Relaxed) {
        1 => u64::from_le_bytes(text_word(random_word(seed, index) >> 56)),
        2 => 0,
        _ => random_word(seed, index),
    }
}

fn random_word(seed: u64, index: u64) -> u64 {
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
