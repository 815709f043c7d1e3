//! `posix locking` (Samba's share option, default yes): each SMB byte-range lock an open
//! holds is also a POSIX lock on the open's own descriptor, an open-file-description lock
//! taken without waiting (`F_OFD_SETLK`, through [`ringshare_vfs::Node::posix_lock`]), so a
//! local program's fcntl lock stops an SMB LOCK (LOCK_NOT_GRANTED, or a blocking one waits,
//! tried again every [`poll_ms`]) and an SMB lock stops a local program's.
//!
//! - Ranges are mapped as Samba's posix.c does ([`locks::posix_range`]): zero lengths and
//!   ranges past `off_t` are not mirrored.
//! - The locks of one descriptor merge and split by range, so after every change the parts
//!   of the changed ranges are set from the open's whole list ([`locks::posix_plan`]): one
//!   open's overlapping or stacked locks never release each other's ranges.
//! - A LOCK first takes its ranges on the descriptor, then asks the lock table (the file's
//!   home decides); what the table refuses is given back ([`give_back`]), what it grants
//!   joins the open's list ([`keep`]). An UNLOCK sets its ranges from what is left
//!   ([`release`]). A CLOSE needs nothing: the descriptor's locks go with it.
//! - Two opens of one file have their own descriptors. Their POSIX locks conflict only
//!   where the table's do (shared with shared never), except for a moment while another
//!   open's request waits on the table or an UNLOCK's ranges are being set: a blocking
//!   lock is tried again then, as for a local program.
//! - A backend without descriptors (the in-memory one, named streams) mirrors nothing.
//! - On a share whose calls may wait on a network ([`in_jobs`]: FUSE, CephFS, whose locks
//!   ceph-fuse asks the MDS for) the descriptor's locks are set in file system jobs of the
//!   open's order (issue 33, step 6), never on the I/O thread: a LOCK's take is a job the
//!   LOCK waits for ([`take_job`]); what is given back or released after the table decided
//!   is a job nobody waits for ([`Setting`]), run before the open's next job.

use std::sync::Arc;

use crate::files::locks::{self, ByteRangeLock};
use crate::fsjob::{Carried, FsDone, FsJob};
use crate::server::lock;
use crate::state::Open;

/// How long a blocking lock a local program's POSIX lock is in the way of waits before it
/// is tried again, growing by as much at each try up to ten times it: Samba 4.22's polling
/// for a lock "blocked on a posix lock" (`lock spin time`, 200 ms by default: 0.2 s, 0.4 s,
/// ... 2 s; source3/smbd/smb2_lock.c).
const POLL_STEP_MS: u64 = 200;

/// The wait before a blocking lock's `tries`th try against a local program's lock.
pub(super) fn poll_ms(tries: u32) -> u64 {
    POLL_STEP_MS * u64::from(tries.clamp(1, 10))
}

/// Whether the open's SMB locks are also its descriptor's POSIX locks.
pub(super) fn mirrored(open: &Open) -> bool {
    open.share.posix_locking && !open.is_dir
}

/// Sets the descriptor's locks on the ranges of `within` from `held`; `false` at the first
/// part another descriptor's lock is in the way of (the parts before it are set). A part the
/// descriptor cannot lock (a file system without POSIX locks: an error other than a
/// conflict) is left as it is and the others are set.
fn set(open: &Open, held: &[ByteRangeLock], within: &[ByteRangeLock]) -> bool {
    for l in within {
        let Some(range) = locks::posix_range(l.offset, l.length) else {
            continue;
        };
        for (start, len, kind) in locks::posix_plan(held, range) {
            match open.node.posix_lock(kind, start, len) {
                Ok(true) => {}
                Ok(false) => return false,
                Err(_) => {}
            }
        }
    }
    true
}

/// Takes `new` (a LOCK's ranges) on the open's descriptor besides what it holds: `false`,
/// with nothing changed, when a lock of another descriptor (a local program's) is in the way.
pub(super) fn take(open: &Open, new: &[ByteRangeLock]) -> bool {
    if !mirrored(open) {
        return true;
    }
    let held = lock(&open.state).posix_locks.clone();
    let mut after = held.clone();
    after.extend_from_slice(new);
    if set(open, &after, new) {
        return true;
    }
    set(open, &held, new);
    false
}

/// The table granted `new`, taken by [`take`]: they join the open's list.
pub(super) fn keep(open: &Open, new: &[ByteRangeLock]) {
    if mirrored(open) {
        lock(&open.state).posix_locks.extend_from_slice(new);
    }
}

/// The table did not grant `new`, taken by [`take`]: their ranges are set back from the
/// open's list (only ever weaker: nothing can be in the way).
pub(super) fn give_back(open: &Open, new: &[ByteRangeLock]) -> Option<Setting> {
    mirrored(open).then(|| Setting {
        held: lock(&open.state).posix_locks.clone(),
        within: new.to_vec(),
    })
}

/// An UNLOCK of `ranges` went through in the table (`all`: every one; else up to the first
/// the open does not hold, as the table stops there): each leaves the open's list (its
/// exclusive lock first, as the table prefers) and its range is set from what is left.
pub(super) fn release(
    open: &Open,
    owner: u64,
    ranges: &[(u64, u64)],
    all: bool,
) -> Option<Setting> {
    if !mirrored(open) {
        return None;
    }
    let mut within = Vec::with_capacity(ranges.len());
    let held = {
        let mut st = lock(&open.state);
        for &(offset, length) in ranges {
            let same = |l: &ByteRangeLock| l.offset == offset && l.length == length;
            let found = st
                .posix_locks
                .iter()
                .position(|l| same(l) && l.exclusive)
                .or_else(|| st.posix_locks.iter().position(same));
            match found {
                Some(i) => {
                    st.posix_locks.remove(i);
                }
                None if !all => break,
                None => {}
            }
            within.push(ByteRangeLock {
                offset,
                length,
                exclusive: false,
                owner,
            });
        }
        st.posix_locks.clone()
    };
    Some(Setting { held, within })
}

/// Ranges of the descriptor to set again from the open's list, once the table decided
/// ([`give_back`], [`release`]): `within`'s parts as `held` has them. Only ever weaker than
/// what the descriptor holds, so nothing can be in the way.
pub(super) struct Setting {
    held: Vec<ByteRangeLock>,
    within: Vec<ByteRangeLock>,
}

impl Setting {
    /// Set here, or, on a share whose calls may wait on a network, in a job of the open's
    /// order nobody waits for (`posts`: the connection's posted lookups).
    pub(super) fn apply(self, open: &Arc<Open>, posts: &mut Vec<crate::lookup::Lookup>) {
        if !in_jobs(open) {
            set(open, &self.held, &self.within);
            return;
        }
        let o = Arc::clone(open);
        let job = job_of(open, "setting a LOCK's POSIX locks back", move || {
            set(&o, &self.held, &self.within);
            Carried::new((), false)
        });
        posts.push(crate::lookup::Lookup::Fs(job));
    }
}

/// Whether the descriptor's locks are set in file system jobs: the open's share mirrors them
/// and its calls may wait on a network ([`crate::config::ShareDef::offloaded`]).
pub(super) fn in_jobs(open: &Open) -> bool {
    mirrored(open) && open.share.offloaded()
}

/// [`take`] of `new` as a file system job of the open's order; it answers whether it took them
/// ([`taken`]).
pub(super) fn take_job(open: &Arc<Open>, new: Vec<ByteRangeLock>) -> FsJob {
    let o = Arc::clone(open);
    job_of(open, "a LOCK's POSIX locks", move || {
        let took = take(&o, &new);
        // Holding a lock to give back, it is let go on the pool when nobody takes it.
        Carried::new(Taken { open: o, new, took }, took)
    })
}

/// What a [`take_job`] carries back: the locks it took on the open's descriptor, given back
/// where it is dropped unless the LOCK went on with them ([`taken`]): a LOCK whose connection
/// went, or that stopped before it took the answer, leaves no POSIX lock the table does not
/// have (on a durable open the descriptor stays open for the reconnect; the review of session
/// 46, finding 1).
struct Taken {
    open: Arc<Open>,
    new: Vec<ByteRangeLock>,
    took: bool,
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.took {
            if let Some(s) = give_back(&self.open, &self.new) {
                set(&self.open, &s.held, &s.within);
            }
        }
    }
}

/// What a [`take_job`] answered: whether it took the locks (a job that could not run, or an
/// answer of another kind, took nothing). The LOCK goes on with them: they are its now.
pub(super) fn taken(done: &FsDone) -> bool {
    match done {
        FsDone::Made(m) => m.take::<Taken>().is_some_and(|mut t| {
            let took = t.took;
            t.took = false;
            took
        }),
        _ => false,
    }
}

/// A job of `open`'s order, acting as its user, on its share.
fn job_of(
    open: &Open,
    what: &'static str,
    calls: impl FnOnce() -> Carried + Send + 'static,
) -> FsJob {
    let (who, order, share) = crate::cmd::job_of_open(open);
    FsJob::answer_made(who, order, share, what, calls)
}
