//! The client's side of the credit window ([MS-SMB2] 3.2.4.1.5, 3.2.5.1.4).
//!
//! The server hands out credits in each response; each request spends
//! `CreditCharge` of them (one per 64 KiB of payload with LARGE_MTU) and uses
//! as many consecutive message ids. A request is only sent when its whole
//! charge is available, so the client never exceeds what was granted.

/// Payload bytes one credit covers.
pub const CREDIT_UNIT_BYTES: usize = 65536;

/// Credits the client holds and how many it wants.
#[derive(Debug, Clone)]
pub struct Credits {
    /// Granted and not yet spent.
    available: u32,
    /// Spent on requests whose final response has not arrived.
    in_flight: u32,
    /// How many the client aims to hold (available + in flight).
    target: u32,
}

impl Credits {
    /// A new connection holds the one credit every connection starts with.
    pub fn new(target: u16) -> Credits {
        Credits {
            available: 1,
            in_flight: 0,
            target: u32::from(target.max(1)),
        }
    }

    pub fn available(&self) -> u32 {
        self.available
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// True when a request of `charge` credits may be sent now.
    pub fn can_spend(&self, charge: u16) -> bool {
        u32::from(charge.max(1)) <= self.available
    }

    /// Spend `charge` credits; `false` (and nothing spent) when not enough are held.
    pub fn spend(&mut self, charge: u16) -> bool {
        let c = u32::from(charge.max(1));
        if c > self.available {
            return false;
        }
        self.available -= c;
        self.in_flight += c;
        true
    }

    /// The CreditRequest to put in a request of `charge`: what replaces the
    /// charge plus what is missing to reach the target.
    pub fn request_for(&self, charge: u16) -> u16 {
        let held = self.available + self.in_flight;
        let missing = self.target.saturating_sub(held);
        let want = u32::from(charge.max(1)) + missing;
        u16::try_from(want).unwrap_or(u16::MAX)
    }

    /// A response arrived granting `granted` credits; `final_for` is the
    /// charge of the request it completes (None for an interim response).
    pub fn on_response(&mut self, granted: u16, final_for: Option<u16>) {
        self.available = self.available.saturating_add(u32::from(granted));
        if let Some(c) = final_for {
            self.in_flight = self.in_flight.saturating_sub(u32::from(c.max(1)));
        }
    }
}

/// CreditCharge for a payload of `len` bytes: ceil(len / 64 KiB), at least 1.
pub fn charge_for(len: usize) -> u16 {
    let c = len.div_ceil(CREDIT_UNIT_BYTES).max(1);
    u16::try_from(c).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charge_is_one_credit_per_64_kib_rounded_up() {
        assert_eq!(charge_for(0), 1);
        assert_eq!(charge_for(1), 1);
        assert_eq!(charge_for(65536), 1);
        assert_eq!(charge_for(65537), 2);
        assert_eq!(charge_for(1 << 20), 16);
        assert_eq!(charge_for(8 << 20), 128);
    }

    #[test]
    fn refuses_to_spend_more_than_granted() {
        let mut c = Credits::new(512);
        assert!(c.spend(1));
        assert!(!c.can_spend(1));
        assert!(!c.spend(1));
        c.on_response(10, Some(1));
        assert_eq!(c.available(), 10);
        assert!(!c.spend(11));
        assert!(c.spend(10));
        assert_eq!(c.in_flight(), 10);
    }

    #[test]
    fn asks_for_what_is_missing_to_reach_the_target() {
        let c = Credits::new(512);
        assert_eq!(c.request_for(1), 512);
        let mut c = Credits::new(4);
        c.on_response(3, None);
        assert_eq!(c.request_for(2), 2);
    }
}
