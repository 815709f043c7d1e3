//! Maps keyed by ids this server hands out (sessions, trees, opens, I/O in
//! flight), looked up several times per request. The standard map's SipHash
//! guards against keys an attacker chooses; these keys are the server's own
//! (a client can only name them in lookups, never pick what is inserted), so
//! one multiplication serves (measured in docs/architecture.md).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from an id the server handed out.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Odd, with its bits well spread (2^64 / the golden ratio): the top bits of
/// `id * K` (which the map's control bytes use) depend on every bit of the
/// id, and its low bits (the bucket) differ for consecutive ids.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes integer ids with one multiplication.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(K);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn consecutive_ids_land_in_different_buckets_and_differ_in_their_top_bits() {
        let b = BuildHasherDefault::<IdHasher>::default();
        let hashes: Vec<u64> = (1..=64u64).map(|i| b.hash_one(i)).collect();
        let buckets: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 63).collect();
        assert_eq!(buckets.len(), 64);
        let tops: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(tops.len() > 32, "{} distinct top-7-bit values", tops.len());
    }

    #[test]
    fn an_id_map_finds_what_was_put_in() {
        let mut m: IdMap<u64, u32> = IdMap::default();
        for i in 0..1000u64 {
            m.insert(i << 20, i as u32);
        }
        assert!((0..1000u64).all(|i| m.get(&(i << 20)) == Some(&(i as u32))));
    }
}
