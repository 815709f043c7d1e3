//! A break notification waits for the answer that tells its client of the lease or oplock it
//! breaks (issue 33, 1g). A CREATE is granted its lease or oplock when it is admitted; on the
//! I/O thread its answer followed at once, but a CREATE that parks after admission (its
//! overwrite's file system job on a share whose calls may wait on a network, its persistent
//! open's record stored in the cluster) or whose compound's answer waits for a later member
//! leaves a window in which another client's open breaks what it was granted. A client ignores
//! a lease break for a lease key it has no file for ([MS-SMB2] 3.2.5.19.2), an oplock break for
//! a FileId it does not know: it would never acknowledge it, and the open that caused it would
//! wait for the break's timeout. So a break of what such a CREATE was granted (its lease key, or
//! its FileId) is held until its answer is sent, then goes out. Only a CREATE admitted and not
//! yet answered holds one (the review of session 47, finding 2: a CREATE that only asked for a
//! lease or oplock held every break of the key or session, for as long as its job took). What
//! such a CREATE waits for (its overwrite's job, its record's store, a later member's lookup,
//! I/O or place behind an open's job) never waits for a break, so nothing waits on itself.

use super::{Connection, Job};
use crate::cmd::create::{granted_in_response, Granted};
use crate::cmd::LookupCont;
use crate::files::oplock::LeaseId;
use crate::server::{lock, Notice};

/// Breaks held this long at most (ms): past it they go out whatever waits, leaving their
/// holder 5 s of the 35 s break timeout (crates/files/src/oplock.rs) to acknowledge.
const HOLD_MS_MAX: u64 = 30_000;

/// Whether an answered CREATE member of `job`, its reply not sent yet, granted what `notice`
/// breaks.
fn replies_grant(job: &Job, notice: &Notice) -> bool {
    job.replies.iter().any(|r| {
        granted_in_response(r.hdr.command, r.hdr.status, &r.body)
            .is_some_and(|g| g.broken_by(notice))
    })
}

/// What the CREATE parked as `cont` was granted at admission, when it waits after it.
fn cont_grant(cont: &LookupCont) -> Option<Granted> {
    match cont {
        LookupCont::Changed(fin) => fin.granted(),
        LookupCont::Create(fin) => fin.granted(),
        _ => None,
    }
}

impl Connection {
    /// Whether an unfinished job of this connection holds a CREATE admitted and not answered
    /// that was granted what `notice` breaks: parked on a lookup, on file I/O, or behind an
    /// open's file system job.
    fn break_must_wait(&self, notice: &Notice) -> bool {
        if !matches!(
            notice,
            Notice::LeaseBreak { .. } | Notice::OplockBreak { .. }
        ) {
            return false;
        }
        self.lookups.values().any(|p| {
            replies_grant(p.job(), notice)
                || cont_grant(p.cont()).is_some_and(|g| g.broken_by(notice))
        }) || self
            .parked
            .values()
            .any(|(job, ..)| replies_grant(job, notice))
            || self.behind.jobs().any(|job| replies_grant(job, notice))
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
            } else if self.breaks_something_held(&notice) {
                self.send_notice(notice);
            }
        }
    }

    /// Whether what a held `notice` breaks is still there now that its CREATE was answered:
    /// one that failed (its overwrite refused) holds no lease or open, and its client, never
    /// told of it, is not sent a break of it (the review of session 47, finding 5).
    fn breaks_something_held(&self, notice: &Notice) -> bool {
        match notice {
            Notice::LeaseBreak { notification, .. } => {
                let client_guid = self.core.negotiated.as_ref().map(|n| n.client_guid);
                client_guid.is_some_and(|client_guid| {
                    let id = LeaseId {
                        client_guid,
                        key: notification.lease_key,
                    };
                    self.core.server.files.lease_file(id).is_some()
                })
            }
            Notice::OplockBreak {
                session_id,
                file_id,
                ..
            } => self
                .core
                .sessions
                .get(session_id)
                .is_some_and(|ch| lock(&ch.session).opens.contains_key(&file_id.volatile)),
            _ => true,
        }
    }
}
