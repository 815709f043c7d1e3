//! The per-file arbitration seam (issue 18, docs/research/2026-11-26-cluster-seam.md):
//! the decisions a file's share-mode entry makes for an open — may it
//! happen, what caching it gets, what breaks first, what its close frees —
//! taken here, in one place, instead of by each command.
//!
//! Single node: these run on the file's [`FileEntry`] in this process, as
//! they always did. A cluster build will route the same calls for a file
//! homed on another node to that node; commands will not change.

use std::sync::{Arc, Mutex};

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::access::{self, DELETE};
use crate::locks::ByteRangeLock;
use crate::oplock::{self, Grant, Route, Wish};
use crate::server::{lock, FileEntry, FileKey, ServerState, ShareEntry};

/// What a new open asks of its file.
pub(crate) struct OpenAsk<'a> {
    /// The open's id (lock and share-mode owner) and persistent id.
    pub owner: u64,
    pub persistent_id: u64,
    /// Where its breaks go.
    pub route: Route,
    pub wish: &'a Wish,
    /// The oplock level asked for, and the lease asked for with its id.
    pub requested: u8,
    pub lease_req: Option<&'a ringshare_wire::create::Lease>,
    /// Where the file is, recorded by the first open of it.
    pub share: &'a str,
    pub path: &'a RelPath,
    pub is_dir: bool,
    /// The connection that waits when the open must wait for breaks.
    pub conn_id: u64,
    pub now_ms: u64,
}

/// Admit an open of `key` (whose entry is `entry`): `Ok(Some(grant))` when
/// it joined the file's opens with that caching; `Ok(None)` when it must
/// wait for breaks (sent; the connection is woken to try again);
/// `Err(status)` when the file refuses it (DELETE_PENDING, a sharing
/// violation, streams open that do not share delete).
pub(crate) fn admit(
    server: &ServerState,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Result<Option<Grant>, NtStatus> {
    let wish = ask.wish;
    crate::durable::purge_for_open(server, entry, wish);
    let mut breaks = Vec::new();
    let joined = {
        let mut e = lock(entry);
        if e.delete_pending {
            Err(NtStatus::DELETE_PENDING)
        } else if oplock::before_open(&mut e, wish, ask.now_ms, &mut breaks) {
            oplock::add_waiter(&mut e, ask.conn_id);
            Ok(None)
        } else {
            access::check_sharing(&e.opens, wish.access, wish.share_access)
                .and_then(|()| open_streams_allow(server, &e, wish.access, wish.truncate))
                .map(|()| {
                    if e.opens.is_empty() {
                        e.share = ask.share.to_string();
                        e.path = ask.path.clone();
                        e.is_dir = ask.is_dir;
                    }
                    e.opens.push(ShareEntry {
                        owner: ask.owner,
                        access: wish.access,
                        share_access: wish.share_access,
                        caching: oplock::Caching {
                            route: ask.route,
                            file_id: (ask.persistent_id, ask.owner),
                            ..Default::default()
                        },
                    });
                    let g = oplock::grant(
                        &mut e,
                        ask.owner,
                        wish.truncate,
                        ask.requested,
                        ask.lease_req,
                        wish.lease,
                        ask.route,
                    );
                    if let (Some(lid), oplock::LEVEL_LEASE) = (wish.lease, g.level) {
                        server.set_lease_file(lid, key);
                    }
                    Some(g)
                })
        }
    };
    oplock::send(server, breaks);
    joined
}

/// An admitted open leaves before it was ever used (its CREATE failed
/// after [`admit`]): a close that asked for nothing (it holds no locks).
pub(crate) fn withdraw(server: &ServerState, key: FileKey, entry: &Mutex<FileEntry>, owner: u64) {
    close(server, key, entry, owner, false);
}

/// What a close leaves behind in its file's entry.
pub(crate) struct Closed {
    /// The file's delete is pending and this was its last open: remove it.
    pub remove: bool,
    /// No open of the file is left.
    pub last_open: bool,
    /// Where the file is now, and whether it is a directory.
    pub path: RelPath,
    pub is_dir: bool,
    /// This close set delete-on-close and others still hold the file.
    pub newly_pending: bool,
}

/// Open `owner` of `key` closes (`delete_on_close`: it had asked for
/// that): its share-mode entry, lease and byte-range locks go, opens waiting
/// on the file try again.
pub(crate) fn close(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    delete_on_close: bool,
) -> Closed {
    let mut wakes = Vec::new();
    let closed = {
        let mut e = lock(entry);
        let lease = e
            .opens
            .iter()
            .find(|s| s.owner == owner)
            .and_then(|s| s.caching.lease);
        e.opens.retain(|s| s.owner != owner);
        if let Some(gone) = oplock::after_close(&mut e, lease) {
            server.forget_lease(gone, key);
        }
        oplock::wake_waiters(&mut e, &mut wakes);
        e.locks.release_owner(owner);
        let was_pending = e.delete_pending;
        if delete_on_close {
            e.delete_pending = true;
        }
        Closed {
            remove: e.delete_pending && e.opens.is_empty(),
            last_open: e.opens.is_empty(),
            path: e.path.clone(),
            is_dir: e.is_dir,
            newly_pending: e.delete_pending && !was_pending && !e.opens.is_empty(),
        }
    };
    oplock::send(server, wakes);
    closed
}

/// One range a LOCK asks for: the lock, or the status its range earns
/// (INVALID_LOCK_RANGE), and whether it may wait for the range.
pub(crate) struct LockAsk {
    pub lock: Result<ByteRangeLock, NtStatus>,
    pub fail_immediately: bool,
}

/// What a LOCK gets.
pub(crate) enum Locked {
    /// Every range is held.
    Granted,
    /// The (single) range is held by another: try again later.
    Wait(ByteRangeLock),
    /// Nothing was taken.
    Refused(NtStatus),
}

/// Open `owner` locks these ranges of its file, all or none: a lock first
/// breaks other opens' read caching. At most `max` locks per open.
pub(crate) fn lock_ranges(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Locked {
    let mut e = lock(entry);
    if e.locks.count_owned_by(owner) + asks.len() > max {
        return Locked::Refused(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let mut breaks = Vec::new();
    oplock::on_change(&mut e, owner, now_ms, &mut breaks);
    oplock::send(server, breaks);
    let mut taken: Vec<ByteRangeLock> = Vec::new();
    for a in asks {
        let failure = match a.lock {
            Err(status) => status,
            Ok(l) if e.locks.try_lock(l) => {
                taken.push(l);
                continue;
            }
            // Only a single-range request may wait for its range.
            Ok(l) if !a.fail_immediately => return Locked::Wait(l),
            Ok(_) => NtStatus::LOCK_NOT_GRANTED,
        };
        for t in taken.iter().rev() {
            e.locks.unlock(t.offset, t.length, owner);
        }
        return Locked::Refused(failure);
    }
    Locked::Granted
}

/// A waiting lock tries its range again: true when it is now held.
pub(crate) fn retry_lock(entry: &Mutex<FileEntry>, l: ByteRangeLock) -> bool {
    lock(entry).locks.try_lock(l)
}

/// Open `owner` unlocks these (offset, length) ranges, in order; the first
/// that is refused (a bad element: its status) or that it does not hold
/// (RANGE_NOT_LOCKED) ends the request, and those before it stay unlocked
/// ([MS-SMB2] 3.3.5.14.1 processes the elements in order).
pub(crate) fn unlock_ranges(
    entry: &Mutex<FileEntry>,
    owner: u64,
    ranges: impl Iterator<Item = Result<(u64, u64), NtStatus>>,
) -> Result<(), NtStatus> {
    let mut e = lock(entry);
    for range in ranges {
        let (offset, length) = range?;
        if !e.locks.unlock(offset, length, owner) {
            return Err(NtStatus::RANGE_NOT_LOCKED);
        }
    }
    Ok(())
}

/// Whether the named streams of a file open now let one more open of the
/// file have `access`: a DELETE open needs every stream open to share
/// delete ([MS-FSA] 2.1.5.1.2: the streams go with the file), and an
/// overwrite, which removes the streams, none open.
fn open_streams_allow(
    server: &ServerState,
    e: &FileEntry,
    access: u32,
    overwrite: bool,
) -> Result<(), NtStatus> {
    if e.streams.is_empty() {
        return Ok(());
    }
    if overwrite {
        return Err(NtStatus::SHARING_VIOLATION);
    }
    if access & DELETE == 0 {
        return Ok(());
    }
    for (_, key) in &e.streams {
        if let Some(se) = server.existing_file_entry(*key) {
            access::check_sharing(&lock(&se).opens, DELETE, 7)?;
        }
    }
    Ok(())
}
