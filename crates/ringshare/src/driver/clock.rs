//! The driver's clocks and random source: what the sans-I/O core is given.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ringshare_core::{Entropy, Now};

/// Bytes from the kernel's random source.
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, out: &mut [u8]) {
        if getrandom::fill(out).is_err() {
            // getrandom cannot fail on Linux once the pool is initialised; refuse
            // to go on with predictable values if it ever does.
            panic!("the kernel's random source failed");
        }
    }
}

pub fn now(started: Instant) -> Now {
    let mono_ms = started.elapsed().as_millis() as u64;
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    // FILETIME: 100 ns since 1601-01-01.
    let filetime = (unix.as_nanos() / 100) as u64 + 116_444_736_000_000_000;
    Now { mono_ms, filetime }
}

/// Monotonic microseconds since the first call (the metrics' clock).
pub fn mono_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}
