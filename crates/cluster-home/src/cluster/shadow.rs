//! A node's record of its own opens of files homed elsewhere (the *shadow*
//! entry of each such file): share modes, caching, leases, byte-range
//! locks and delete-pending, as the home answered them. It decides
//! nothing while the file is homed elsewhere; it is what this node hands
//! a new home that rebuilds the file's state after the old home died
//! ([`super::reclaim`]). Breaks are recorded at their target state as they
//! pass (the holder acknowledges down to it, or the home's timer lowers it).

use ringshare_wire::NtStatus;

use crate::decide::OpenAsk;
use crate::files::locks::ByteRangeLock;
use crate::files::oplock::Break;
use crate::files::oplock::{self, Caching, Grant, Lease, LeaseId};
use crate::server::{lock, FileEntry, FileTable, ShareEntry};

/// The home's answer about the file's delete pending (asked, or set first): the entry follows
/// it. `Ok((pending, newly))` as [`crate::decide::delete_pending`].
pub fn delete_pending(
    e: &std::sync::Mutex<FileEntry>,
    answer: Result<super::msg::Answer, NtStatus>,
) -> Result<(bool, bool), NtStatus> {
    match answer? {
        super::msg::Answer::Pending { was, now } => {
            lock(e).delete_pending = now;
            Ok((now, now && !was))
        }
        super::msg::Answer::Refused(s) => Err(s),
        a => Err(super::unexpected(&a)),
    }
}

/// The home admitted `ask` with `g`.
pub fn admitted(e: &mut FileEntry, ask: &OpenAsk<'_>, g: &Grant) {
    e.name_if_unused(ask.share, ask.path, ask.is_dir);
    let lease = ask.wish.lease.filter(|_| g.level == oplock::LEVEL_LEASE);
    e.opens.push(ShareEntry {
        owner: ask.owner,
        access: ask.wish.access,
        share_access: ask.wish.share_access,
        caching: Caching {
            level: g.level,
            lease,
            route: ask.route,
            file_id: (ask.persistent_id, ask.owner),
            ..Default::default()
        },
        who: ask.who.cloned(),
        posix: ask.posix,
    });
    if let Some(id) = lease {
        match e.leases.iter_mut().find(|l| l.id == id) {
            Some(l) => {
                l.state = g.lease_state;
                l.epoch = g.epoch;
                l.route = ask.route;
            }
            None => e.leases.push(Lease {
                id,
                state: g.lease_state,
                breaking_to: None,
                required: 0,
                break_deadline_ms: 0,
                epoch: g.epoch,
                v2: g.v2,
                parent_key: g.parent_key,
                route: ask.route,
            }),
        }
    }
}

/// Open `owner` closed: its share-mode entry, locks and (when no other
/// open of this node names it) its lease go.
pub fn closed(e: &mut FileEntry, owner: u64) {
    crate::decide::remove_open(e, owner);
}

/// The home granted these locks.
pub fn locked(e: &mut FileEntry, locks: impl IntoIterator<Item = ByteRangeLock>) {
    for l in locks {
        if !e.locks.try_lock(l) {
            tracing::debug!(?l, "a granted lock overlaps this node's record");
        }
    }
}

/// The home took these locks away.
pub fn unlocked(e: &mut FileEntry, owner: u64, ranges: &[Result<(u64, u64), NtStatus>]) {
    for (offset, length) in ranges.iter().map_while(|r| r.ok()) {
        e.locks.unlock(offset, length, owner);
    }
}

/// An oplock of `owner` is now at `level`.
pub(crate) fn oplock_now(e: &mut FileEntry, owner: u64, level: u8) {
    if let Some(o) = e.opens.iter_mut().find(|o| o.owner == owner) {
        o.caching.level = level;
    }
}

/// Lease `id` is now at `state`.
pub(crate) fn lease_now(e: &mut FileEntry, id: LeaseId, state: u32) {
    if let Some(l) = e.leases.iter_mut().find(|l| l.id == id) {
        l.state = state;
    }
}

/// A break for a connection of this node passes by from the file's home:
/// record its target state in the shadow entry.
pub(crate) fn break_passes(files: &FileTable, notice: &Break) {
    match notice {
        Break::Lease { notification, .. } => {
            // The lease's client is the connection's; the key names it.
            let ids = files.leases_keyed(notification.lease_key);
            for (id, key) in ids {
                if let Some(e) = files.existing(key) {
                    lease_now(&mut lock(&e), id, notification.new_lease_state.0);
                }
            }
        }
        Break::Oplock { file_id, level, .. } => {
            // Rare (a break of an oplock held through another node's
            // file): the entry is found by looking at each.
            let owner = file_id.volatile;
            let entries = files.all();
            for e in entries {
                oplock_now(&mut lock(&e), owner, *level);
            }
        }
        Break::Retry => {}
    }
}
