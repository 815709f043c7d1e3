//! The process-wide replay cache of authenticators (RFC 4120 3.2.3).
//!
//! An AP-REQ seen once is refused again while its authenticator could still pass the clock-skew
//! check. Entries are keyed by a hash of the authenticator's ciphertext (as MIT's hash-based
//! cache is): only the holder of the ticket's session key can make a new one, so two different
//! legitimate authenticators never collide, and a copied AP-REQ always does. One cache serves
//! every connection and session of the server, since a replay is sent on a connection of the
//! attacker's choosing.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// The most authenticators remembered at once. Each is about 60 bytes; past this (more than
/// the logons of ten minutes at over 400 a second) new logons are refused until entries expire,
/// rather than forgetting ones that could be replayed.
pub const ENTRIES_MAX: usize = 262_144;

/// What the cache says of an authenticator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First time: remembered now.
    New,
    /// Seen before: a replay.
    Replay,
    /// The cache is full of live entries.
    Full,
}

#[derive(Default)]
struct Inner {
    /// Hash → the Unix time it may be forgotten.
    live: HashMap<[u8; 32], i64>,
    /// Insertion order, for expiry.
    order: VecDeque<([u8; 32], i64)>,
}

/// A thread-safe replay cache; share one per process.
#[derive(Default)]
pub struct ReplayCache {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for ReplayCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplayCache({} entries)", self.len())
    }
}

impl ReplayCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.live.len()).unwrap_or(0)
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record the authenticator `ciphertext`, to be remembered until `forget_at` (Unix seconds);
    /// `now` expires older entries first.
    pub fn check(&self, ciphertext: &[u8], forget_at: i64, now: i64) -> Seen {
        let key: [u8; 32] = Sha256::digest(ciphertext).into();
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let inner = &mut *g;
        // Entries are forgotten in insertion order; a later one that expires sooner waits for
        // those before it (its window is the same skew, so the wait is short).
        while let Some((k, at)) = inner.order.front().copied() {
            if at > now {
                break;
            }
            inner.order.pop_front();
            if inner.live.get(&k) == Some(&at) {
                inner.live.remove(&k);
            }
        }
        if let Some(at) = inner.live.get(&key) {
            if *at > now {
                return Seen::Replay;
            }
        }
        if inner.live.len() >= ENTRIES_MAX {
            return Seen::Full;
        }
        inner.live.insert(key, forget_at);
        inner.order.push_back((key, forget_at));
        Seen::New
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authenticator_is_refused_the_second_time_until_it_expires() {
        let c = ReplayCache::new();
        assert_eq!(c.check(b"a", 1600, 1000), Seen::New);
        assert_eq!(c.check(b"b", 1600, 1000), Seen::New);
        assert_eq!(c.check(b"a", 1600, 1200), Seen::Replay);
        assert_eq!(c.len(), 2);
        // Past its window it is forgotten (and its ticket's authenticator would fail the skew
        // check anyway).
        assert_eq!(c.check(b"a", 2300, 1700), Seen::New);
        assert_eq!(c.len(), 1);
    }
}
