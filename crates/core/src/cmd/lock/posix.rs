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

use crate::files::locks::{self, ByteRangeLock};
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
pub(super) fn give_back(open: &Open, new: &[ByteRangeLock]) {
    if mirrored(open) {
        let held = lock(&open.state).posix_locks.clone();
        set(open, &held, new);
    }
}

/// An UNLOCK of `ranges` went through in the table (`all`: every one; else up to the first
/// the open does not hold, as the table stops there): each leaves the open's list (its
/// exclusive lock first, as the table prefers) and its range is set from what is left.
pub(super) fn release(open: &Open, owner: u64, ranges: &[(u64, u64)], all: bool) {
    if !mirrored(open) {
        return;
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
    set(open, &held, &within);
}
