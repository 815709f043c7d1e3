//! `failed logon backoff` (off by default): after that many failed logons
//! from one address, with no ten-minute pause between them, the answer to
//! every further logon from that address waits: half a second, doubling with
//! each further failure, at most five seconds. Ten minutes without a failure
//! end it. The password is still checked at once; only the answer waits, and
//! the connection reads nothing else meanwhile (conn/held.rs), so one
//! connection cannot guess faster by sending its guesses without waiting.
//! Nothing is refused: an address is not an account, and a correct password
//! from a backed-off address still logs on, after the same wait.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::peers::Table;
use crate::sync::lock;

/// Failures are forgotten after this long without one (milliseconds).
pub(crate) const FORGET_MS: u64 = 10 * 60_000;
/// The first wait (milliseconds); each further failure doubles it.
pub(crate) const DELAY_FIRST_MS: u64 = 500;
/// The longest wait (milliseconds).
pub(crate) const DELAY_MAX_MS: u64 = 5_000;
/// Addresses tracked at most.
pub(crate) const ADDRESSES_MAX: usize = 4096;

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last_ms: u64,
}

/// Failed logons by address ([module docs](self)).
pub struct LogonBackoff {
    /// Failures before answers wait; 0 = off.
    after: AtomicU32,
    failures: Mutex<Table<IpAddr, Failures>>,
}

impl LogonBackoff {
    pub fn new(after: u32) -> Self {
        LogonBackoff {
            after: AtomicU32::new(after),
            failures: Mutex::new(Table::new(ADDRESSES_MAX)),
        }
    }

    /// Turn it on (after `after` failures) or off (0).
    pub(crate) fn set_after(&self, after: u32) {
        self.after.store(after, Ordering::Relaxed);
    }

    /// How long the answer to a logon from `ip` waits at `now_ms`.
    pub fn delay_ms(&self, ip: Option<IpAddr>, now_ms: u64) -> u64 {
        let after = self.after.load(Ordering::Relaxed);
        let (Some(ip), true) = (ip, after > 0) else {
            return 0;
        };
        let f = match lock(&self.failures).get(&ip) {
            Some(f) if now_ms.saturating_sub(f.last_ms) < FORGET_MS => *f,
            _ => return 0,
        };
        let Some(over) = f.count.checked_sub(after) else {
            return 0;
        };
        (DELAY_FIRST_MS << over.min(16)).min(DELAY_MAX_MS)
    }

    /// A logon from `ip` failed at `now_ms`.
    pub fn failed(&self, ip: Option<IpAddr>, now_ms: u64) {
        let Some(ip) = ip.filter(|_| self.after.load(Ordering::Relaxed) > 0) else {
            return;
        };
        let mut t = lock(&self.failures);
        let fresh = || Failures {
            count: 0,
            last_ms: now_ms,
        };
        let f = t.entry(ip, now_ms, fresh, |_, _| {});
        if now_ms.saturating_sub(f.last_ms) >= FORGET_MS {
            *f = fresh();
        }
        f.count = f.count.saturating_add(1);
        f.last_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn answers_wait_only_after_the_set_number_of_failures_and_longer_with_each_up_to_five_seconds()
    {
        let b = LogonBackoff::new(3);
        let a = ip("192.0.2.7");
        let mut waits = Vec::new();
        for t in 0..9 {
            waits.push(b.delay_ms(a, t));
            b.failed(a, t);
        }
        assert_eq!(waits, [0, 0, 0, 500, 1000, 2000, 4000, 5000, 5000]);
        // Another address is not slowed.
        assert_eq!(b.delay_ms(ip("192.0.2.8"), 10), 0);
    }

    #[test]
    fn ten_minutes_without_a_failure_end_the_backoff() {
        let b = LogonBackoff::new(1);
        let a = ip("2001:db8::1");
        b.failed(a, 0);
        b.failed(a, 1000);
        assert_eq!(b.delay_ms(a, 1000 + FORGET_MS - 1), 1000);
        assert_eq!(b.delay_ms(a, 1000 + FORGET_MS), 0);
        // The count starts again.
        b.failed(a, 1000 + FORGET_MS);
        assert_eq!(b.delay_ms(a, 1000 + FORGET_MS), 500);
    }

    #[test]
    fn off_by_default_and_when_set_to_zero_nothing_waits() {
        let b = LogonBackoff::new(0);
        let a = ip("192.0.2.7");
        for t in 0..100 {
            b.failed(a, t);
        }
        assert_eq!(b.delay_ms(a, 100), 0);
        assert_eq!(lock(&b.failures).len(), 0);
        // Turned on by a reload: failures count from then on.
        b.set_after(2);
        b.failed(a, 200);
        b.failed(a, 201);
        assert_eq!(b.delay_ms(a, 202), 500);
        assert_eq!(b.delay_ms(None, 202), 0);
    }
}
