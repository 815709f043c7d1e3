//! The command sequence window and credits ([MS-SMB2] 3.3.1.1, 3.3.1.2, 3.3.5.2.3).
//!
//! The window holds the message ids a client may still use. It starts as {0}.
//! A request with MessageId m and CreditCharge c consumes m..m+c, each of which
//! must be in the window and unused; a response that grants n credits appends
//! the next n ids. The window never holds more than [`limits::CREDITS_MAX`] ids,
//! so the bitmap is bounded whatever the client does.

use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditError {
    /// A message id outside the window, or one already used.
    NotInWindow { message_id: u64 },
    /// A charge of more ids than the window can ever hold.
    ChargeTooLarge,
}

/// Ids the window tracks at most ([`limits::CREDITS_MAX`]), and the bits that say which are
/// usable: id `i` is bit `i % SPAN` (the tracked ids, `low..low + len`, are fewer than SPAN,
/// so no two share a bit).
const SPAN: usize = limits::CREDITS_MAX as usize;
const WORDS: usize = SPAN / 64;
const _: () = assert!(SPAN.is_multiple_of(64) && SPAN > 0);

#[derive(Debug)]
pub struct CreditWindow {
    /// The lowest id still tracked.
    low: u64,
    /// Ids tracked from `low` on (usable, or consumed but not yet below `low`).
    len: u32,
    /// Bit `id % SPAN` of a tracked id: set while the id is usable; clear for every id not
    /// tracked. (A bitmap: a request's id is checked and cleared with a few instructions.)
    usable: Box<[u64; WORDS]>,
    /// Ids granted so far that are still usable.
    outstanding: u32,
}

impl Default for CreditWindow {
    fn default() -> Self {
        CreditWindow::new()
    }
}

/// The word and bit of `id`.
fn at(id: u64) -> (usize, u64) {
    let i = (id % SPAN as u64) as usize;
    (i / 64, 1u64 << (i % 64))
}

impl CreditWindow {
    pub fn new() -> CreditWindow {
        let mut w = CreditWindow {
            low: 0,
            len: 0,
            usable: Box::new([0; WORDS]),
            outstanding: 0,
        };
        w.grant(1);
        w
    }

    /// Credits the client holds now.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// The next id the server would grant.
    fn high(&self) -> u64 {
        self.low + u64::from(self.len)
    }

    fn is_usable(&self, id: u64) -> bool {
        let (w, b) = at(id);
        self.usable[w] & b != 0
    }

    /// Check that `message_id .. message_id + charge` are all usable, without consuming.
    pub fn check(&self, message_id: u64, charge: u16) -> Result<(), CreditError> {
        let charge = u64::from(charge.max(1));
        if charge > u64::from(limits::CREDITS_MAX) {
            return Err(CreditError::ChargeTooLarge);
        }
        let end = message_id
            .checked_add(charge)
            .ok_or(CreditError::NotInWindow { message_id })?;
        if message_id < self.low || end > self.high() {
            return Err(CreditError::NotInWindow { message_id });
        }
        for id in message_id..end {
            if !self.is_usable(id) {
                return Err(CreditError::NotInWindow { message_id: id });
            }
        }
        Ok(())
    }

    /// Consume the ids of one request.
    pub fn consume(&mut self, message_id: u64, charge: u16) -> Result<(), CreditError> {
        self.check(message_id, charge)?;
        let charge = u64::from(charge.max(1));
        for id in message_id..message_id + charge {
            let (w, b) = at(id);
            self.usable[w] &= !b;
        }
        self.outstanding -= charge as u32;
        // The consumed ids at the front leave the window (each id once: amortized O(1)).
        while self.len > 0 && !self.is_usable(self.low) {
            self.low += 1;
            self.len -= 1;
        }
        Ok(())
    }

    /// How many credits to grant for a response: what the client asked for (at
    /// least one), bounded per response and by the window size, and never
    /// leaving the client with none.
    pub fn grant_for(&self, requested: u16) -> u16 {
        let room = (u32::from(limits::CREDITS_MAX)).saturating_sub(self.window_span());
        let want = u32::from(requested.clamp(1, limits::CREDITS_GRANT_PER_RESPONSE_MAX));
        let mut g = want.min(room);
        if self.outstanding == 0 && g == 0 {
            g = 1;
        }
        g as u16
    }

    /// Ids tracked (usable or consumed-but-not-yet-below-low): bounds memory.
    fn window_span(&self) -> u32 {
        self.len
    }

    /// Extend the window by `n` ids.
    pub fn grant(&mut self, n: u16) {
        let room = u32::from(limits::CREDITS_MAX).saturating_sub(self.window_span());
        let n = u32::from(n).min(room);
        for id in self.high()..self.high() + u64::from(n) {
            let (w, b) = at(id);
            self.usable[w] |= b;
        }
        self.len += n;
        self.outstanding += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_starts_with_message_id_zero_only() {
        let mut w = CreditWindow::new();
        assert_eq!(
            w.check(1, 1),
            Err(CreditError::NotInWindow { message_id: 1 })
        );
        w.consume(0, 1).unwrap();
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn a_message_id_cannot_be_used_twice() {
        let mut w = CreditWindow::new();
        w.consume(0, 0).unwrap();
        w.grant(10);
        w.consume(1, 1).unwrap();
        assert!(w.consume(1, 1).is_err());
        assert!(w.consume(0, 1).is_err());
    }

    #[test]
    fn multi_credit_requests_consume_every_id_they_cover() {
        let mut w = CreditWindow::new();
        w.consume(0, 1).unwrap();
        w.grant(8);
        w.consume(1, 4).unwrap();
        assert_eq!(w.outstanding(), 4);
        assert!(
            w.consume(4, 2).is_err(),
            "4 was consumed by the charge of 4 at 1"
        );
        assert!(w.consume(6, 4).is_err(), "past the window");
        w.consume(5, 4).unwrap();
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn ids_may_be_used_out_of_order() {
        let mut w = CreditWindow::new();
        w.consume(0, 1).unwrap();
        w.grant(3);
        w.consume(3, 1).unwrap();
        w.consume(1, 1).unwrap();
        w.consume(2, 1).unwrap();
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn the_window_never_exceeds_the_credit_limit_whatever_the_client_asks() {
        let mut w = CreditWindow::new();
        for _ in 0..100 {
            let g = w.grant_for(u16::MAX);
            w.grant(g);
        }
        assert!(w.outstanding() <= u32::from(limits::CREDITS_MAX));
        assert_eq!(w.grant_for(u16::MAX), 0);
    }

    #[test]
    fn a_client_with_no_credits_is_always_granted_one() {
        let mut w = CreditWindow::new();
        w.consume(0, 1).unwrap();
        assert_eq!(w.grant_for(0), 1);
    }

    #[test]
    fn the_window_wraps_its_bitmap_and_keeps_every_rule_past_the_limit() {
        // Ids far past CREDITS_MAX, used out of order and in charges that straddle the
        // bitmap's end: each usable once, none outside the window, the span bounded.
        let mut w = CreditWindow::new();
        w.consume(0, 1).unwrap();
        w.grant(limits::CREDITS_MAX);
        let mut next = 1u64;
        for round in 0..5u64 {
            let n = u64::from(limits::CREDITS_MAX);
            // The last id of the window first, then the rest in charges of 3.
            let last = next + n - 1;
            w.consume(last, 1).unwrap();
            assert!(w.consume(last, 1).is_err(), "round {round}: used twice");
            let mut id = next;
            while id < last {
                let c = (last - id).min(3);
                w.consume(id, c as u16).unwrap();
                assert!(w.check(id, 1).is_err());
                id += c;
            }
            assert_eq!(w.outstanding(), 0);
            assert!(w.check(last + 1, 1).is_err(), "not granted yet");
            next = last + 1;
            w.grant(limits::CREDITS_MAX);
            assert_eq!(w.window_span(), u32::from(limits::CREDITS_MAX));
        }
        w.consume(next, 1).unwrap();
        assert!(w.check(next + u64::from(limits::CREDITS_MAX), 1).is_err());
    }

    #[test]
    fn an_id_left_unused_holds_the_window_back_until_it_is_used() {
        let mut w = CreditWindow::new();
        w.consume(0, 1).unwrap();
        w.grant(limits::CREDITS_MAX);
        for id in 2..=u64::from(limits::CREDITS_MAX) {
            w.consume(id, 1).unwrap();
        }
        // Id 1 is still usable: the window spans 1.. and has no room to grant.
        assert_eq!(w.grant_for(100), 0);
        w.grant(100);
        assert!(w.check(u64::from(limits::CREDITS_MAX) + 1, 1).is_err());
        w.consume(1, 1).unwrap();
        assert_eq!(w.outstanding(), 0);
        assert_eq!(w.grant_for(100), 100);
        w.grant(100);
        w.consume(u64::from(limits::CREDITS_MAX) + 100, 1).unwrap();
    }

    #[test]
    fn huge_message_ids_and_charges_are_refused_without_overflow() {
        let w = CreditWindow::new();
        assert!(w.check(u64::MAX, 2).is_err());
        assert_eq!(w.check(0, u16::MAX), Err(CreditError::ChargeTooLarge));
    }
}
