//! The command sequence window and credits ([MS-SMB2] 3.3.1.1, 3.3.1.2, 3.3.5.2.3).
//!
//! The window holds the message ids a client may still use. It starts as {0}.
//! A request with MessageId m and CreditCharge c consumes m..m+c, each of which
//! must be in the window and unused; a response that grants n credits appends
//! the next n ids. The window never holds more than [`limits::CREDITS_MAX`] ids,
//! so the bitmap is bounded whatever the client does.

use std::collections::VecDeque;

use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditError {
    /// A message id outside the window, or one already used.
    NotInWindow { message_id: u64 },
    /// A charge of more ids than the window can ever hold.
    ChargeTooLarge,
}

#[derive(Debug)]
pub struct CreditWindow {
    /// The lowest id still tracked; `avail[i]` says whether `low + i` is usable.
    low: u64,
    avail: VecDeque<bool>,
    /// Ids granted so far that are still usable.
    outstanding: u32,
}

impl Default for CreditWindow {
    fn default() -> Self {
        CreditWindow::new()
    }
}

impl CreditWindow {
    pub fn new() -> CreditWindow {
        let mut avail = VecDeque::new();
        avail.push_back(true);
        CreditWindow {
            low: 0,
            avail,
            outstanding: 1,
        }
    }

    /// Credits the client holds now.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// The next id the server would grant.
    fn high(&self) -> u64 {
        self.low + self.avail.len() as u64
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
            if !self.avail[(id - self.low) as usize] {
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
            self.avail[(id - self.low) as usize] = false;
        }
        self.outstanding -= charge as u32;
        while self.avail.front() == Some(&false) {
            self.avail.pop_front();
            self.low += 1;
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
        self.avail.len() as u32
    }

    /// Extend the window by `n` ids.
    pub fn grant(&mut self, n: u16) {
        let room = u32::from(limits::CREDITS_MAX).saturating_sub(self.window_span());
        let n = u32::from(n).min(room);
        for _ in 0..n {
            self.avail.push_back(true);
        }
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
    fn huge_message_ids_and_charges_are_refused_without_overflow() {
        let w = CreditWindow::new();
        assert!(w.check(u64::MAX, 2).is_err());
        assert_eq!(w.check(0, u16::MAX), Err(CreditError::ChargeTooLarge));
    }
}
