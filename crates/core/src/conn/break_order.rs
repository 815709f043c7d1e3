//! A break notification waits for the answer that tells its client of the lease or oplock it
//! breaks (issue 33, 1g). A CREATE is granted its lease or oplock when it is admitted; on the
//! I/O thread its answer followed at once, but a CREATE that parks after admission (its
//! overwrite's file system job on a share whose calls may wait on a network, its persistent
//! open's record stored in the cluster) or whose compound's answer waits for a later member
//! leaves a window in which another client's open breaks what it was granted. A client ignores
//! a lease break for a lease key it has no file for ([MS-SMB2] 3.2.5.19.2), an oplock break for
//! a FileId it does not know: it would never acknowledge it, and the open that caused it would
//! wait for the break's timeout. So a break for a lease key (an oplock, in a session) that a
//! CREATE of an unfinished job of this connection asks for is held until no such job is left,
//! then sent, after the answer. What such a job waits for (a lookup, a file system job, file
//! I/O, a job of the same open before it) never waits for a break, so nothing waits on
//! itself; a CREATE waiting for breaks (async) holds nothing.

use ringshare_wire::consts::{Command, OplockLevel};
use ringshare_wire::create::{ContextTag, CreateRequest, Lease};
use ringshare_wire::header::Header;

use super::{Connection, Job};
use crate::server::Notice;

/// Breaks held this long at most (ms): past it they go out whatever waits (a bound, not a
/// case: what holds them ends on its own).
const HOLD_MS_MAX: u64 = 35_000;

/// What a CREATE member asks to be granted: its lease key, or an oplock.
#[derive(PartialEq)]
enum Asks {
    Lease([u8; 16]),
    Oplock,
}

/// What CREATE member `msg` of a job asks to be granted, if anything.
fn asks_of(msg: &[u8]) -> Option<(u64, Asks)> {
    let hdr = Header::decode(msg).ok()?;
    if hdr.command != Command::CREATE {
        return None;
    }
    let cr = CreateRequest::decode(msg).ok()?;
    let level = cr.requested_oplock_level;
    if level == OplockLevel::LEASE {
        let ctx = cr
            .contexts
            .iter()
            .find(|c| c.tag() == ContextTag::RequestLease)?;
        let lease = Lease::decode(&ctx.data).ok()?;
        return Some((hdr.session_id, Asks::Lease(lease.key)));
    }
    (level != OplockLevel::NONE).then_some((hdr.session_id, Asks::Oplock))
}

/// Whether a CREATE member of `job` asks for what `notice` breaks.
fn job_asks(job: &Job, notice: &Notice) -> bool {
    job.members.iter().any(|&(start, end)| {
        let Some(msg) = job.frame.get(start..end) else {
            return false;
        };
        match (asks_of(msg), notice) {
            (Some((_, Asks::Lease(k))), Notice::LeaseBreak { notification, .. }) => {
                k == notification.lease_key
            }
            (Some((s, Asks::Oplock)), Notice::OplockBreak { session_id, .. }) => {
                // A related member's SessionId may be all ones: it is the chain's.
                s == *session_id || s == u64::MAX
            }
            _ => false,
        }
    })
}

impl Connection {
    /// Whether an unfinished job of this connection has a CREATE asking for what `notice`
    /// breaks: parked on a lookup, on file I/O, or behind an open's file system job.
    fn break_must_wait(&self, notice: &Notice) -> bool {
        if !matches!(
            notice,
            Notice::LeaseBreak { .. } | Notice::OplockBreak { .. }
        ) {
            return false;
        }
        self.lookups.values().any(|p| job_asks(p.job(), notice))
            || self.parked.values().any(|(job, ..)| job_asks(job, notice))
            || self.behind.jobs().any(|job| job_asks(job, notice))
    }

    /// Send `notice`, or hold it while the answer its client must hear first is not sent.
    pub(super) fn send_or_hold(&mut self, notice: Notice) {
        if self.break_must_wait(&notice) {
            tracing::debug!(peer = %self.core.peer, "a break waits for its CREATE's answer");
            self.held_breaks.push((self.core.now.mono_ms, notice));
            return;
        }
        self.send_notice(notice);
    }

    /// When the oldest held break goes out whatever waits.
    pub(super) fn held_breaks_deadline(&self) -> Option<u64> {
        self.held_breaks
            .first()
            .map(|(since, _)| since + HOLD_MS_MAX)
    }

    /// The held breaks whose CREATEs were answered (or that waited too long) go out, in the
    /// order they came; called once the outputs are drained, so after those answers.
    pub(super) fn release_breaks(&mut self) {
        if self.held_breaks.is_empty() || self.closing {
            return;
        }
        let now = self.core.now.mono_ms;
        let held = std::mem::take(&mut self.held_breaks);
        for (since, notice) in held {
            if now.saturating_sub(since) < HOLD_MS_MAX && self.break_must_wait(&notice) {
                self.held_breaks.push((since, notice));
            } else {
                self.send_notice(notice);
            }
        }
    }
}
