//! The per-file decisions made on this node's entry of a file (issue 30): may an open join the
//! file, what caching it gets and what breaks first, what a close frees, whether a byte-range
//! lock or an I/O may happen, delete-pending, a rename's wait, a break's acknowledgment. Each
//! runs the rules of crate::files on the file's [`FileEntry`] here and delivers the breaks it
//! made ([`ServerState::send_breaks`]).
//!
//! They are the `*_here` halves of `crate::arbiter` (crates/core)'s decisions: the arbiter (in the cluster
//! layer above) runs them when the file is homed here, and a file's home runs them for another
//! node (`crate::cluster::home` (crates/core)). Two decisions are wanted below the cluster layer too, by the
//! close of an open ([`crate::opens`]) and by a session's end ([`crate::durable`]): [`close`]
//! and [`delete_pending`] decide here, or ask the cluster layer through the hooks it set
//! ([`crate::server::ClusterHooks`]) when the file is homed elsewhere. Nothing here names the
//! cluster.

use std::sync::{Arc, Mutex};

use ringshare_wire::NtStatus;

use crate::files::access::{self, DELETE};
use crate::files::locks::{ByteRangeLock, Intent};
use crate::files::oplock::{self, Grant, LeaseId, Route, Wish};
pub use crate::link::Closed;
use crate::link::Home;
use crate::server::{lock, FileEntry, FileKey, FileTable, NodeState, ServerState, ShareEntry};
use ringshare_vfs::RelPath;

/// The node to ask about `key`: `None` when it is decided here; FILE_NOT_AVAILABLE when no
/// node decides for it now.
pub fn home(here: &NodeState, key: FileKey) -> Result<Option<u16>, NtStatus> {
    match here.home_of(key) {
        Home::Here => Ok(None),
        Home::Node(n) => Ok(Some(n)),
        Home::Unavailable => {
            tracing::debug!(?key, "no node decides for this file now");
            Err(NtStatus::FILE_NOT_AVAILABLE)
        }
    }
}

/// What a new open asks of its file.
pub struct OpenAsk<'a> {
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
    /// A POSIX open ([`ShareEntry::posix`]).
    pub posix: bool,
}

/// The access a new open is checked with against the other opens' share modes
/// ([MS-FSA] 2.1.5.1.2.1): an open that overwrites or supersedes an existing
/// file writes it, whatever it asked for, so it needs the others' FILE_SHARE_WRITE
/// (smbtorture 4.22 smb2.acls.OVERWRITE_READ_ONLY_FILE; Samba counts the O_TRUNC
/// as FILE_WRITE_DATA the same way).
fn sharing_access(wish: &Wish) -> u32 {
    if wish.truncate {
        wish.access | access::FILE_WRITE_DATA
    } else {
        wish.access
    }
}

/// `crate::arbiter::admit_or_ask` (crates/cluster-home) decided on the file's entry here (after the parked opens in its
/// way were closed and other nodes gave back their I/O grants: `crate::cluster::home` (crates/core)).
pub fn admit_decided(
    server: &ServerState,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Result<Option<Grant>, NtStatus> {
    let wish = ask.wish;
    let mut breaks = Vec::new();
    let mut listed = false;
    let joined = {
        let mut e = lock(entry);
        if e.delete_pending {
            Err(NtStatus::DELETE_PENDING)
        } else if oplock::before_open(&mut e, wish, ask.now_ms, &mut breaks) {
            oplock::add_waiter(&mut e, ask.conn_id);
            Ok(None)
        } else {
            access::check_sharing(&e.opens, sharing_access(wish), wish.share_access)
                .and_then(|()| open_streams_allow(&server.files, &e, wish.access, wish.truncate))
                .map(|()| {
                    if e.opens.is_empty() {
                        e.share.clear(); // keeps its room (a reused entry)
                        e.share.push_str(ask.share);
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
                        posix: ask.posix,
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
                        server.files.set_lease_file(lid, key);
                        listed = ask.is_dir && server.files.note_dir_lease(key);
                    }
                    Some(g)
                })
        }
    };
    server.send_breaks(breaks);
    if listed {
        // The first lease of a directory this node decides for: the other
        // nodes send it their changes from before this open's answer.
        crate::notify::tell_wants(server);
    }
    joined
}

/// Open `owner` of `key` closes (`delete_on_close`: it had asked for
/// that): its share-mode entry, lease and byte-range locks go, opens waiting
/// on the file try again. `who` is the open's user (a close sent again
/// later removes the file as that user, as the close would have). Decided
/// here when the file is homed here; else by its home, through the cluster
/// layer ([`crate::server::ClusterHooks::close_elsewhere`]).
pub fn close(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    delete_on_close: bool,
    who: &ringshare_vfs::Who,
) -> Closed {
    let node = match home(&server.node, key) {
        Ok(None) => return close_here(server, key, entry, owner, delete_on_close).0,
        Ok(Some(node)) => Some(node),
        Err(_) => None,
    };
    match server.node.hooks() {
        Some(h) => h.close_elsewhere(server, node, key, entry, owner, delete_on_close, who),
        // (A file is homed elsewhere only on a cluster node, which has the hooks.)
        None => close_here(server, key, entry, owner, delete_on_close).0,
    }
}

/// [`close`] on the file's entry here; also the lease that left the file.
pub fn close_here(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    delete_on_close: bool,
) -> (Closed, Option<LeaseId>) {
    let mut wakes = Vec::new();
    let closed = {
        let mut e = lock(entry);
        if delete_on_close {
            e.delete_parent_key = oplock::parent_key_of(&e, owner);
        }
        let gone = remove_open(&mut e, owner);
        if let Some(gone) = gone {
            server.lease_left(gone, key);
        }
        oplock::wake_waiters(&mut e, &mut wakes);
        let was_pending = e.delete_pending;
        if delete_on_close {
            e.delete_pending = true;
        }
        let closed = Closed {
            remove: e.removable(),
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
pub fn remove_open(e: &mut FileEntry, owner: u64) -> Option<LeaseId> {
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
pub struct LockAsk {
    pub lock: Result<ByteRangeLock, NtStatus>,
    pub fail_immediately: bool,
}

/// What a LOCK gets.
pub enum Locked {
    /// Every range is held.
    Granted,
    /// The (single) range is held by another: try again later.
    Wait(ByteRangeLock),
    /// Nothing was taken.
    Refused(NtStatus),
}

/// `crate::arbiter::lock_ranges` (crates/core) decided on the file's entry here (after every node gave
/// back the "no byte-range locks" part of its I/O grant: `crate::cluster::home` (crates/core)).
/// The parked opens its breaks go to are added to `parked` (for [`crate::changes`] to close).
pub fn lock_decided(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
    parked: &mut Vec<(u64, u64)>,
) -> Locked {
    if lock(entry).locks.count_owned_by(owner) + asks.len() > max {
        return Locked::Refused(NtStatus::INSUFFICIENT_RESOURCES);
    }
    changed_here(server, entry, owner, now_ms, parked);
    let mut e = lock(entry);
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

/// `crate::arbiter::unlock_ranges` (crates/core) on the file's entry here.
pub fn unlock_ranges_here(
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
pub struct IoAsk {
    pub owner: u64,
    pub offset: u64,
    pub length: u64,
    /// A write (else a read) of the range.
    pub write: bool,
    /// The I/O changes the file: other opens' read caching breaks.
    pub change: bool,
    pub now_ms: u64,
}

/// `crate::arbiter::io_check` (crates/core) on the file's entry here.
pub fn io_check_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    io: IoAsk,
    parked: &mut Vec<(u64, u64)>,
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
    send_noting_parked(server, entry, breaks, parked);
    Ok(writers)
}

/// `crate::arbiter::changed` (crates/core) on the file's entry here.
pub fn changed_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    now_ms: u64,
    parked: &mut Vec<(u64, u64)>,
) {
    let mut breaks = Vec::new();
    oplock::on_change(&mut lock(entry), owner, now_ms, &mut breaks);
    send_noting_parked(server, entry, breaks, parked);
}

/// Send `breaks` (made on `entry`), and add to `parked` the parked durable opens among those
/// they go to: nobody would hear them ([`oplock::parked_broken`]); [`crate::changes`] closes them.
fn send_noting_parked(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    breaks: oplock::Breaks,
    parked: &mut Vec<(u64, u64)>,
) {
    if breaks.iter().any(|(r, _)| *r == oplock::DISCONNECTED) {
        parked.extend(oplock::parked_broken(&lock(entry), &breaks));
    }
    server.send_breaks(breaks);
}

/// Whether the file's delete is pending; with `set`, make it so (or not)
/// first. `Ok((pending, newly))`: newly, it became pending now. Decided here
/// when the file is homed here; else by its home, through the cluster layer
/// ([`crate::server::ClusterHooks::delete_pending_at`]).
pub fn delete_pending(
    node: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    set: Option<bool>,
) -> Result<(bool, bool), NtStatus> {
    match (home(node, key)?, node.hooks()) {
        (Some(at), Some(h)) => h.delete_pending_at(node, at, key, entry, set),
        _ => Ok(delete_pending_here(entry, set)),
    }
}

/// [`delete_pending`] on the file's entry here.
pub fn delete_pending_here(entry: &Mutex<FileEntry>, set: Option<bool>) -> (bool, bool) {
    let mut e = lock(entry);
    let was = e.delete_pending;
    if let Some(v) = set {
        e.delete_pending = v;
    }
    (e.delete_pending, e.delete_pending && !was)
}

/// `crate::arbiter::rename_waits_or_ask` (crates/cluster-home) on the file's entry here.
pub fn rename_waits_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    conn_id: u64,
    now_ms: u64,
    parked: &mut Vec<(u64, u64)>,
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
    // A parked open whose handle caching the rename breaks is closed: the wait ends with it.
    send_noting_parked(server, entry, breaks, parked);
    wait
}

/// `crate::arbiter::ack_oplock_or_ask` (crates/core) on the file's entry here.
pub fn ack_oplock_here(
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

/// `crate::arbiter::ack_lease_or_ask` (crates/core) on the file's entry here.
pub fn ack_lease_here(
    server: &ServerState,
    key: FileKey,
    id: LeaseId,
    state: u32,
    now_ms: u64,
) -> Result<u32, NtStatus> {
    let entry = server
        .files
        .existing(key)
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
    files: &FileTable,
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
        if let Some(se) = files.existing(*key) {
            access::check_sharing(&lock(&se).opens, DELETE, 7)?;
        }
    }
    Ok(())
}
