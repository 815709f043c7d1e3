//! The connections' deadlines (their core's timers and the send-stall limit), kept in order so
//! that a loop turn looks only at the connections it touched and at those due, not at every
//! connection of the thread twice (the next wait's timeout, then the timers due).
//!
//! A connection's deadline can only come earlier through something the thread did with it: a
//! request or completion fed to its core (every one ends in [`Worker::drain`]), a send started,
//! its accept. Those mark it ([`Worker::mark_timers`]) and its deadline is read again before the
//! timers fire and before the next wait. A deadline that moved later, or went, is found so when
//! its old time comes (read again, and put back if it is still there). What another connection
//! changes (a session shared by two channels whose last open closes on the other) is found by a
//! look at every connection at most every [`RESCAN_MS`], on a turn that happens anyway, well
//! before any deadline of its kind is due (those are minutes: the idle limit).

use std::collections::BTreeSet;

use super::*;

/// How often (at most) a turn reads every connection's deadline again.
const RESCAN_MS: u64 = 200;

/// The deadlines in order, and the connections to read again.
#[derive(Default)]
pub(super) struct Timers {
    /// (monotonic ms, connection slot): each connection at most once, at the time in its
    /// `Conn::timer`, which is its deadline or earlier (then read again and put back).
    due: BTreeSet<(u64, u32)>,
    /// Connections marked since their deadlines were last read (each once: `Conn::timer_marked`).
    marked: Vec<u32>,
    /// When the next turn reads every connection's deadline again.
    rescan_at: u64,
}

impl Timers {
    /// When the earliest deadline of the connections is due, or a little earlier (a deadline
    /// that moved later is read again at its old time).
    pub(super) fn first(&self) -> Option<u64> {
        self.due.first().map(|(at, _)| *at)
    }
}

/// The connection's deadline now: its core's next timer, or its send's stall limit.
fn deadline(c: &Conn, stall_ms: u64) -> Option<u64> {
    let stall = c.sending.then_some(c.send_since + stall_ms);
    match (c.conn.poll_timeout(), stall) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Worker {
    /// The connection's deadline may have changed: read it again before the timers fire or the
    /// loop waits.
    pub(super) fn mark_timers(&mut self, slot: u32) {
        if let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) {
            if !c.timer_marked {
                c.timer_marked = true;
                self.timers.marked.push(slot);
            }
        }
    }

    /// Reads again the deadlines of the marked connections, or of all once [`RESCAN_MS`] passed.
    pub(super) fn settle_timers(&mut self) {
        let now = self.clock.mono_ms;
        if now >= self.timers.rescan_at {
            self.timers.rescan_at = now + RESCAN_MS;
            for slot in 0..self.conns.len() as u32 {
                self.reschedule(slot);
            }
            // The marked ones were read with the rest.
            self.timers.marked.clear();
            return;
        }
        let mut marked = std::mem::take(&mut self.timers.marked);
        for &slot in &marked {
            self.reschedule(slot);
        }
        marked.clear();
        self.timers.marked = marked;
    }

    /// Puts the connection in order at its deadline now, if that is earlier than where it is.
    /// (One that moved later, or went, stays where it was until then: a busy connection's idle
    /// limit moves with every request, and is read again only when its old time comes.)
    fn reschedule(&mut self, slot: u32) {
        let stall_ms = self.shared.send_stall_ms;
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        c.timer_marked = false;
        let Some(at) = deadline(c, stall_ms) else {
            return;
        };
        if c.timer.is_some_and(|old| old <= at) {
            return;
        }
        if let Some(old) = c.timer.replace(at) {
            self.timers.due.remove(&(old, slot));
        }
        self.timers.due.insert((at, slot));
    }

    /// The connection goes: so does its deadline.
    pub(super) fn forget_timer(&mut self, slot: u32, c: &Conn) {
        if let Some(at) = c.timer {
            self.timers.due.remove(&(at, slot));
        }
    }

    /// The connections whose deadline has come: a send stalled past its limit closes the
    /// connection; a core timer runs. A deadline that moved later is put back at its new time.
    pub(super) fn fire_conn_timers(&mut self) {
        self.settle_timers();
        let now = self.clock.mono_ms;
        let stall_ms = self.shared.send_stall_ms;
        while let Some(&(at, slot)) = self.timers.due.first() {
            if at > now {
                break;
            }
            self.timers.due.remove(&(at, slot));
            let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
                continue;
            };
            c.timer = None;
            if c.sending && c.send_since + stall_ms <= now {
                tracing::warn!(
                    worker = self.index,
                    "peer took no data for {} s (send timeout); closing the connection",
                    stall_ms / 1000
                );
                self.close(slot);
                continue;
            }
            if c.conn.poll_timeout().is_some_and(|d| d <= now) {
                c.conn.handle_timeout(self.clock);
                // Marked by the drain: read again before the loop waits.
                self.drain(slot);
            } else {
                self.reschedule(slot);
            }
        }
    }
}
