//! The per-file arbitration seam (issue 18, docs/research/2026-11-26-cluster-seam.md):
//! the decisions a file's share-mode entry makes for an open — may it
//! happen, what caching it gets, what breaks first, what its close frees —
//! taken here, in one place, instead of by each command.
//!
//! Each decision runs on the file's [`FileEntry`] in this process when the
//! file is homed here (always, outside a cluster: the `*_here` functions,
//! today's code), and is asked of the file's home node otherwise
//! ([`crate::cluster`]); commands do not know which. A node keeps a
//! *shadow* entry for a file homed elsewhere: its own opens (without
//! caching, so it never breaks anything itself), for what stays local
//! (write times, status).

use std::sync::{Arc, Mutex};

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::cluster::grant::{self, IoGrant};
use crate::cluster::msg::{self, Answer, Call};
use crate::cluster::{self, shadow, Home};
use crate::files::access::{self, DELETE};
use crate::files::locks::{ByteRangeLock, Intent};
use crate::files::oplock::{self, Grant, LeaseId, Route, Wish};
use crate::server::{lock, FileEntry, FileKey, ServerState, ShareEntry};

/// The node to ask about `key`: `None` when it is decided here.
fn home(server: &ServerState, key: FileKey) -> Result<Option<u16>, NtStatus> {
    match server.home_of(key) {
        Home::Here => Ok(None),
        Home::Node(n) => Ok(Some(n)),
        Home::Unavailable => {
            tracing::debug!(?key, "no node decides for this file now");
            Err(NtStatus::FILE_NOT_AVAILABLE)
        }
    }
}

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
    /// The open's user (kept with its share-mode entry).
    pub who: Option<&'a ringshare_vfs::Who>,
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
    let Some(node) = home(server, key)? else {
        return admit_here(server, key, entry, ask);
    };
    let owned = msg::Ask {
        owner: ask.owner,
        persistent_id: ask.persistent_id,
        route: ask.route,
        wish: ask.wish.clone(),
        requested: ask.requested,
        lease_req: ask.lease_req.cloned(),
        share: ask.share.to_string(),
        path: ask.path.clone(),
        is_dir: ask.is_dir,
        conn_id: ask.conn_id,
        now_ms: ask.now_ms,
        who: ask.who.cloned(),
    };
    match cluster::ask(server, node, Call::Admit(key, Box::new(owned)))? {
        Answer::Admitted(g, io) => {
            {
                let mut e = lock(entry);
                shadow::admitted(&mut e, ask, &g);
                e.grants.held = IoGrant(io);
            }
            if let (Some(lid), oplock::LEVEL_LEASE) = (ask.wish.lease, g.level) {
                server.set_lease_file(lid, key);
            }
            Ok(Some(g))
        }
        Answer::Wait => Ok(None),
        Answer::Refused(s) => Err(s),
        a => Err(cluster::unexpected(&a)),
    }
}

/// [`admit`] on the file's entry here. On a cluster node, other nodes
/// first give back the I/O grants this open makes wrong (an open that may
/// write, or that may cache, ends theirs).
pub(crate) fn admit_here(
    server: &ServerState,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Result<Option<Grant>, NtStatus> {
    let asker = cluster::node_of(ask.owner);
    let mut take = 0;
    if access::can_write(ask.wish.access) {
        take |= IoGrant::NO_FOREIGN_WRITERS;
    }
    if ask.requested != oplock::LEVEL_NONE || ask.lease_req.is_some() {
        take |= IoGrant::NO_FOREIGN_CACHING;
    }
    let take = |n| if n == asker { 0 } else { take };
    grant::after_revoking(server, key, entry, take, || {
        admit_decided(server, key, entry, ask)
    })?
}

fn admit_decided(
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
                        who: ask.who.cloned(),
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
    server.send_breaks(breaks);
    joined
}

/// An admitted open leaves before it was ever used (its CREATE failed
/// after [`admit`]): a close that asked for nothing (it holds no locks).
pub(crate) fn withdraw(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    who: &ringshare_vfs::Who,
) {
    close(server, key, entry, owner, false, who);
}

/// What a close leaves behind in its file's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
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
/// on the file try again. `who` is the open's user (a close sent again
/// later removes the file as that user, as the close would have).
pub(crate) fn close(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    delete_on_close: bool,
    who: &ringshare_vfs::Who,
) -> Closed {
    let node = match home(server, key) {
        Ok(None) => return close_here(server, key, entry, owner, delete_on_close).0,
        Ok(Some(node)) => Some(node),
        Err(_) => None,
    };
    // The shadow entry lets the open go whatever the home answers.
    let (path, is_dir, share) = {
        let mut e = lock(entry);
        shadow::closed(&mut e, owner);
        (e.path.clone(), e.is_dir, e.share.clone())
    };
    let call = Call::Close {
        key,
        owner,
        delete_on_close,
    };
    match node.map(|n| cluster::ask(server, n, call)) {
        Some(Ok(Answer::Closed(closed, lease_gone))) => {
            if let Some(id) = lease_gone {
                server.forget_lease(id, key);
            }
            closed
        }
        other => {
            // The home is gone, busy rebuilding or did not answer: the close
            // is sent again until a home takes it (the home that rebuilds
            // the file's state may have this open from before the close).
            tracing::warn!(
                ?other,
                ?key,
                "a file's home did not take a close; sent again later"
            );
            lock(&server.unsent_closes).push(cluster::UnsentClose {
                key,
                owner,
                delete_on_close,
                share,
                who: who.clone(),
            });
            Closed {
                remove: false,
                last_open: false,
                path,
                is_dir,
                newly_pending: false,
            }
        }
    }
}

/// [`close`] on the file's entry here; also the lease that left the file.
pub(crate) fn close_here(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    delete_on_close: bool,
) -> (Closed, Option<LeaseId>) {
    let mut wakes = Vec::new();
    let closed = {
        let mut e = lock(entry);
        let gone = remove_open(&mut e, owner);
        if let Some(gone) = gone {
            server.forget_lease(gone, key);
        }
        oplock::wake_waiters(&mut e, &mut wakes);
        let was_pending = e.delete_pending;
        if delete_on_close {
            e.delete_pending = true;
        }
        let closed = Closed {
            remove: e.delete_pending && e.opens.is_empty(),
            last_open: e.opens.is_empty(),
            path: e.path.clone(),
            is_dir: e.is_dir,
            newly_pending: e.delete_pending && !was_pending && !e.opens.is_empty(),
        };
        (closed, gone)
    };
    server.send_breaks(wakes);
    closed
}

/// Open `owner` leaves the entry: its share-mode entry, its byte-range
/// locks, and its lease when no other open names it (returned).
pub(crate) fn remove_open(e: &mut FileEntry, owner: u64) -> Option<LeaseId> {
    let lease = e
        .opens
        .iter()
        .find(|s| s.owner == owner)
        .and_then(|s| s.caching.lease);
    e.opens.retain(|s| s.owner != owner);
    e.locks.release_owner(owner);
    oplock::after_close(e, lease)
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

/// Open `owner` locks these ranges of file `key`, all or none: a lock
/// first breaks other opens' read caching. At most `max` locks per open.
pub(crate) fn lock_ranges(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Locked {
    let node = match home(server, key) {
        Ok(None) => return lock_ranges_here(server, key, entry, owner, asks, max, now_ms),
        Ok(Some(node)) => node,
        Err(s) => return Locked::Refused(s),
    };
    let call = Call::Lock {
        key,
        owner,
        asks: asks.iter().map(|a| (a.lock, a.fail_immediately)).collect(),
        max: max.min(u32::MAX as usize) as u32,
        now_ms,
    };
    match cluster::ask(server, node, call) {
        Ok(Answer::Done) => {
            let granted = asks.iter().filter_map(|a| a.lock.ok());
            shadow::locked(&mut lock(entry), granted);
            Locked::Granted
        }
        Ok(Answer::Wait) => match asks {
            [LockAsk { lock: Ok(l), .. }] => Locked::Wait(*l),
            _ => Locked::Refused(NtStatus::INTERNAL_ERROR),
        },
        Ok(Answer::Refused(s)) | Err(s) => Locked::Refused(s),
        Ok(a) => Locked::Refused(cluster::unexpected(&a)),
    }
}

/// [`lock_ranges`] on the file's entry here. On a cluster node, every
/// node first gives back the "no byte-range locks" part of its I/O grant.
pub(crate) fn lock_ranges_here(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Locked {
    let take = |_| IoGrant::NO_LOCKS;
    grant::after_revoking(server, key, entry, take, || {
        lock_decided(server, entry, owner, asks, max, now_ms)
    })
    .unwrap_or_else(Locked::Refused)
}

fn lock_decided(
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
    server.send_breaks(breaks);
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
pub(crate) fn retry_lock(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    l: ByteRangeLock,
) -> bool {
    match home(server, key) {
        Ok(None) => lock(entry).locks.try_lock(l),
        Ok(Some(node)) => {
            let held = matches!(
                cluster::ask(server, node, Call::RetryLock(key, l)),
                Ok(Answer::Flag(true))
            );
            if held {
                shadow::locked(&mut lock(entry), [l]);
            }
            held
        }
        Err(_) => false,
    }
}

/// Open `owner` unlocks these (offset, length) ranges, in order; the first
/// that is refused (a bad element: its status) or that it does not hold
/// (RANGE_NOT_LOCKED) ends the request, and those before it stay unlocked
/// ([MS-SMB2] 3.3.5.14.1 processes the elements in order).
pub(crate) fn unlock_ranges(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    ranges: impl Iterator<Item = Result<(u64, u64), NtStatus>>,
) -> Result<(), NtStatus> {
    let Some(node) = home(server, key)? else {
        return unlock_ranges_here(entry, owner, ranges);
    };
    let ranges: Vec<_> = ranges.collect();
    let call = Call::Unlock {
        key,
        owner,
        ranges: ranges.clone(),
    };
    cluster::ask_for(server, node, call, |a| {
        matches!(a, Answer::Done).then_some(())
    })?;
    shadow::unlocked(&mut lock(entry), owner, &ranges);
    Ok(())
}

/// [`unlock_ranges`] on the file's entry here.
pub(crate) fn unlock_ranges_here(
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

/// One I/O of a range by open `owner`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IoAsk {
    pub owner: u64,
    pub offset: u64,
    pub length: u64,
    /// A write (else a read) of the range.
    pub write: bool,
    /// The I/O changes the file: other opens' read caching breaks.
    pub change: bool,
    pub now_ms: u64,
}

/// May this I/O happen (no other open's byte-range lock covers it:
/// FILE_LOCK_CONFLICT otherwise)? `Ok(writers)`: whether an open of the
/// file (this one too) may write it.
pub(crate) fn io_check(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    io: IoAsk,
) -> Result<bool, NtStatus> {
    let Some(node) = home(server, key)? else {
        return io_check_here(server, entry, io);
    };
    // With an I/O grant, this node decides (no network).
    if let Some(writers) = grant::local_io(&lock(entry), io.owner, io.write, io.change) {
        return Ok(writers);
    }
    let call = Call::Io {
        key,
        owner: io.owner,
        offset: io.offset,
        length: io.length,
        write: io.write,
        change: io.change,
        now_ms: io.now_ms,
    };
    let (conflict, writers, grant) = cluster::ask_for(server, node, call, |a| match a {
        Answer::Io {
            conflict,
            writers,
            grant,
        } => Some((*conflict, *writers, *grant)),
        _ => None,
    })?;
    lock(entry).grants.held = IoGrant(grant);
    if conflict {
        Err(NtStatus::FILE_LOCK_CONFLICT)
    } else {
        Ok(writers)
    }
}

/// [`io_check`] on the file's entry here.
pub(crate) fn io_check_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    io: IoAsk,
) -> Result<bool, NtStatus> {
    let mut breaks = Vec::new();
    let writers = {
        let mut e = lock(entry);
        let intent = if io.write {
            Intent::Write
        } else {
            Intent::Read
        };
        if e.locks.conflicts(io.offset, io.length, intent, io.owner) {
            return Err(NtStatus::FILE_LOCK_CONFLICT);
        }
        if io.change {
            oplock::on_change(&mut e, io.owner, io.now_ms, &mut breaks);
        }
        e.opens.iter().any(|o| access::can_write(o.access))
    };
    server.send_breaks(breaks);
    Ok(writers)
}

/// Open `owner` changed the file other than by a WRITE (its size): other
/// opens' read caching breaks.
pub(crate) fn changed(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    now_ms: u64,
) {
    match home(server, key) {
        Ok(None) => changed_here(server, entry, owner, now_ms),
        Ok(Some(node)) => {
            let call = Call::Changed { key, owner, now_ms };
            if let Err(s) = cluster::ask(server, node, call) {
                tracing::warn!(?key, %s, "a file's home did not hear of a change");
            }
        }
        Err(_) => {}
    }
}

/// [`changed`] on the file's entry here.
pub(crate) fn changed_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    now_ms: u64,
) {
    let mut breaks = Vec::new();
    oplock::on_change(&mut lock(entry), owner, now_ms, &mut breaks);
    server.send_breaks(breaks);
}

/// Whether the file's delete is pending; with `set`, make it so (or not)
/// first. `Ok((pending, newly))`: newly, it became pending now.
pub(crate) fn delete_pending(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    set: Option<bool>,
) -> Result<(bool, bool), NtStatus> {
    let Some(node) = home(server, key)? else {
        return Ok(delete_pending_here(entry, set));
    };
    let (was, now) = cluster::ask_for(server, node, Call::DeletePending(key, set), |a| match a {
        Answer::Pending { was, now } => Some((*was, *now)),
        _ => None,
    })?;
    lock(entry).delete_pending = now;
    Ok((now, now && !was))
}

/// [`delete_pending`] on the file's entry here.
pub(crate) fn delete_pending_here(entry: &Mutex<FileEntry>, set: Option<bool>) -> (bool, bool) {
    let mut e = lock(entry);
    let was = e.delete_pending;
    if let Some(v) = set {
        e.delete_pending = v;
    }
    (e.delete_pending, e.delete_pending && !was)
}

/// Before open `owner` renames its file: others give up caching handles.
/// True when the rename must wait for their acknowledgments (connection
/// `conn_id` is woken to try again).
pub(crate) fn rename_waits(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    conn_id: u64,
    now_ms: u64,
) -> Result<bool, NtStatus> {
    let Some(node) = home(server, key)? else {
        return Ok(rename_waits_here(server, entry, owner, conn_id, now_ms));
    };
    let call = Call::Rename {
        key,
        owner,
        conn_id,
        now_ms,
    };
    cluster::ask_for(server, node, call, Answer::flag)
}

/// [`rename_waits`] on the file's entry here.
pub(crate) fn rename_waits_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    conn_id: u64,
    now_ms: u64,
) -> bool {
    let mut breaks = Vec::new();
    let wait = {
        let mut e = lock(entry);
        let wait = oplock::before_rename(&mut e, owner, now_ms, &mut breaks);
        if wait {
            oplock::add_waiter(&mut e, conn_id);
        }
        wait
    };
    server.send_breaks(breaks);
    wait
}

/// The file now lives at `to` (a rename): where its last close removes it.
pub(crate) fn moved(server: &ServerState, key: FileKey, entry: &Mutex<FileEntry>, to: &RelPath) {
    lock(entry).path = to.clone();
    if let Ok(Some(node)) = home(server, key) {
        if let Err(s) = cluster::ask(server, node, Call::Moved(key, to.clone())) {
            tracing::warn!(?key, %s, "a file's home did not hear of a rename");
        }
    }
}

/// Open `owner` acknowledges an oplock break to `level`: the level it now
/// holds. Opens waiting on the file try again.
pub(crate) fn ack_oplock(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    level: u8,
) -> Result<u8, NtStatus> {
    let Some(node) = home(server, key)? else {
        return ack_oplock_here(server, entry, owner, level);
    };
    let l = cluster::ask_for(
        server,
        node,
        Call::AckOplock { key, owner, level },
        Answer::level,
    )?;
    shadow::oplock_now(&mut lock(entry), owner, l as u8);
    Ok(l as u8)
}

/// [`ack_oplock`] on the file's entry here.
pub(crate) fn ack_oplock_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    level: u8,
) -> Result<u8, NtStatus> {
    let mut breaks = Vec::new();
    let r = {
        let mut e = lock(entry);
        let r = oplock::ack_oplock(&mut e, owner, level);
        oplock::wake_waiters(&mut e, &mut breaks);
        r
    };
    server.send_breaks(breaks);
    r
}

/// Lease `id` on file `key` is acknowledged at `state`: the state it now
/// has. Opens waiting on the file try again.
pub(crate) fn ack_lease(
    server: &ServerState,
    key: FileKey,
    id: LeaseId,
    state: u32,
    now_ms: u64,
) -> Result<u32, NtStatus> {
    let Some(node) = home(server, key)? else {
        return ack_lease_here(server, key, id, state, now_ms);
    };
    let call = Call::AckLease {
        key,
        id,
        state,
        now_ms,
    };
    let l = cluster::ask_for(server, node, call, Answer::level)?;
    if let Some(e) = server.existing_file_entry(key) {
        shadow::lease_now(&mut lock(&e), id, l);
    }
    Ok(l)
}

/// [`ack_lease`] on the file's entry here.
pub(crate) fn ack_lease_here(
    server: &ServerState,
    key: FileKey,
    id: LeaseId,
    state: u32,
    now_ms: u64,
) -> Result<u32, NtStatus> {
    let entry = server
        .existing_file_entry(key)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let mut breaks = Vec::new();
    let r = {
        let mut e = lock(&entry);
        let r = oplock::ack_lease(&mut e, id, state, now_ms, &mut breaks);
        oplock::wake_waiters(&mut e, &mut breaks);
        r
    };
    server.send_breaks(breaks);
    r
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
