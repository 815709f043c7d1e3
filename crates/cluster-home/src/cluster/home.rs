//! A file's home answering another node: each [`Call`] runs the same
//! `*_here` decision ([`crate::decide`]) that a local request runs, on
//! this node's entry of the file, with this node's clock. The two
//! decisions that first take back other nodes' I/O grants are here too
//! ([`admit_here`], [`lock_ranges_here`]): [`crate::arbiter`] runs them for
//! a request of this node, on its I/O thread when they call no other node
//! ([`admit_in_place`], [`lock_ranges_in_place`]), else on a home-call
//! thread ([`admit_away`], [`lock_away`]).

use std::sync::{Arc, Mutex};

use ringshare_wire::NtStatus;

use super::grant::{self, IoGrant};
use super::msg::{Answer, Call};
use super::{node_of, Home};
use crate::decide::{self, IoAsk, LockAsk, Locked, OpenAsk};
use crate::files::access;
use crate::files::locks::ByteRangeLock;
use crate::files::oplock::{self, Grant};
use crate::lookup::HomeAsk;
use crate::server::{lock, FileEntry, FileKey, NodeState, ServerState};

/// Decide `call` here, where the file is homed; `now_ms` is this node's clock.
pub fn serve(server: &ServerState, call: Call, now_ms: u64) -> Answer {
    if let Some(answer) = serve_anywhere(server, &call, now_ms) {
        return answer;
    }
    let Some(key) = key_of(&call) else {
        return Answer::Refused(NtStatus::INVALID_PARAMETER);
    };
    if server.node.home_of(key) != Home::Here {
        // The partition moved (or this node is fenced): the caller asks again.
        return Answer::Refused(NtStatus::FILE_NOT_AVAILABLE);
    }
    match call {
        Call::Admit(key, ask) => admit(server, key, &ask, now_ms),
        Call::Close {
            key,
            owner,
            delete_on_close,
        } => {
            let Some(entry) = server.files.existing(key) else {
                return Answer::Refused(NtStatus::FILE_CLOSED);
            };
            let (c, lease_gone) = decide::close_here(server, key, &entry, owner, delete_on_close);
            server.files.drop_if_unused(key);
            Answer::Closed(c, lease_gone)
        }
        Call::Lock {
            key,
            owner,
            asks,
            max,
            ..
        } => lock_ranges(server, key, owner, asks, max as usize, now_ms),
        Call::RetryLock(key, l) => match server.files.existing(key) {
            Some(entry) => Answer::Flag(crate::server::lock(&entry).locks.try_lock(l)),
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::Unlock { key, owner, ranges } => match server.files.existing(key) {
            Some(entry) => match decide::unlock_ranges_here(&entry, owner, ranges.into_iter()) {
                Ok(()) => Answer::Done,
                Err(s) => Answer::Refused(s),
            },
            None => Answer::Refused(NtStatus::RANGE_NOT_LOCKED),
        },
        Call::Io {
            key,
            owner,
            offset,
            length,
            write,
            change,
            ..
        } => {
            let io = IoAsk {
                owner,
                offset,
                length,
                write,
                change,
                now_ms,
            };
            io_check(server, key, io)
        }
        Call::Changed { key, owner, .. } => {
            if let Some(entry) = server.files.existing(key) {
                crate::changes::changed_here(server, &entry, owner, now_ms);
            }
            Answer::Done
        }
        Call::DeletePending(key, set) => match server.files.existing(key) {
            Some(entry) => {
                let was = crate::server::lock(&entry).delete_pending;
                let (now, _) = decide::delete_pending_here(&entry, set);
                Answer::Pending { was, now }
            }
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::Rename {
            key,
            owner,
            conn_id,
            ..
        } => match server.files.existing(key) {
            Some(entry) => Answer::Flag(crate::changes::rename_waits_here(
                server, &entry, owner, conn_id, now_ms,
            )),
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::Moved(key, to) => {
            if let Some(entry) = server.files.existing(key) {
                crate::server::lock(&entry).path = to;
            }
            Answer::Done
        }
        Call::AckOplock { key, owner, level } => match server.files.existing(key) {
            Some(entry) => match decide::ack_oplock_here(server, &entry, owner, level) {
                Ok(l) => Answer::Level(u32::from(l)),
                Err(s) => Answer::Refused(s),
            },
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::AckLease { key, id, state, .. } => {
            match decide::ack_lease_here(server, key, id, state, now_ms) {
                Ok(s) => Answer::Level(s),
                Err(s) => Answer::Refused(s),
            }
        }
        Call::Transfer(key, moved) => {
            let Some(entry) = server.files.existing(key) else {
                return Answer::Refused(NtStatus::OBJECT_NAME_NOT_FOUND);
            };
            match super::handover::transfer_here(&server.node, key, &entry, &moved) {
                Ok(mut t) => {
                    t.grant = grant_for(&server.node, &entry, moved.to).0;
                    Answer::Transferred(Box::new(t))
                }
                Err(s) => Answer::Refused(s),
            }
        }
        Call::Adopt(rec) => Answer::Flag(super::takeback::adopt_here(&server.files, &rec)),
        Call::Reclaim { .. }
        | Call::Revoke { .. }
        | Call::GiveUp(_)
        | Call::CloseParked(_)
        | Call::Interest { .. } => Answer::Refused(NtStatus::INVALID_PARAMETER),
    }
}

/// The level a call asked at: 3 when it asked for POSIX flags, else one below.
fn asked_at(posix: bool) -> u16 {
    if posix {
        3
    } else {
        2
    }
}

/// The calls asked of any node, not of a file's home; `None` for the others.
fn serve_anywhere(server: &ServerState, call: &Call, now_ms: u64) -> Option<Answer> {
    Some(match call {
        Call::Reclaim {
            parts,
            after,
            posix,
        } => {
            let (records, next) = super::reclaim::records(server, parts, *after);
            // An asker that does not read the POSIX flags gets the records it always read.
            Answer::Records { records, next }.lowered(asked_at(*posix))
        }
        Call::Revoke { key, clear } => {
            grant::give_back(&server.files, *key, *clear);
            Answer::Done
        }
        Call::CloseParked(ids) => {
            super::handover::close_parked(server, ids);
            Answer::Done
        }
        Call::Interest { from } => {
            super::notify::interest(server, *from, true);
            Answer::Done
        }
        Call::GiveUp(ask) => match super::handover::give_up(server, ask, now_ms) {
            Ok(h) => Answer::GivenUp(Box::new(h)).lowered(asked_at(ask.posix)),
            Err(s) => Answer::Refused(s),
        },
        _ => return None,
    })
}

/// The I/O grant for the node that made open `owner`, which asked (given and recorded). None
/// for an open under this node's own number (issue 33): a node of an older build keeps it, made
/// by this node's last life (docs/cluster-internals.md "Upgrading: the history"); recorded as
/// this node's,
/// the grant was one no revocation could take back (this node does not call itself), and every
/// later move or lock of the file failed (FILE_NOT_AVAILABLE) for good. None either for an
/// open another node serves under that id (routed to a connection of another node: a node kept
/// a dead node's open under its id, and a new home entered it from its record,
/// `super::ca::adopt_kept_by_others`): the grant would be recorded for the node the id names,
/// which has no such open (or is gone: every later open of the file waited for its revocation
/// and was FILE_NOT_AVAILABLE), while the node serving the open went on with it.
fn grant_for(here: &NodeState, entry: &Mutex<FileEntry>, owner: u64) -> IoGrant {
    let node = node_of(owner);
    if here.link().is_some_and(|l| l.node() == node) {
        return IoGrant::default();
    }
    let mut e = lock(entry);
    let served_elsewhere = e.opens.iter().any(|o| {
        o.owner == owner && o.caching.route.conn_id != 0 && node_of(o.caching.route.conn_id) != node
    });
    if served_elsewhere {
        return IoGrant::default();
    }
    grant::give(&mut e, node)
}

/// An open asked of the file's home: admitted (with the node's I/O grant), to wait, or refused.
fn admit(server: &ServerState, key: FileKey, ask: &super::msg::Ask, now_ms: u64) -> Answer {
    let entry = server.files.entry(key);
    let open = ask.open_ask(now_ms);
    let r = admit_here(server, key, &entry, &open);
    // A peer connection's thread may wait: the records of the parked opens it closed go now.
    for forget in server.node.take_posted() {
        let _ = (forget.run)();
    }
    if !matches!(r, Ok(Some(_))) {
        server.files.drop_if_unused(key);
    }
    match r {
        Ok(Some(g)) => {
            let io = grant_for(&server.node, &entry, ask.owner);
            Answer::Admitted(g, io.0)
        }
        Ok(None) => Answer::Wait,
        Err(s) => Answer::Refused(s),
    }
}

/// Byte-range locks asked of the file's home.
fn lock_ranges(
    server: &ServerState,
    key: FileKey,
    owner: u64,
    asks: Vec<(Result<ByteRangeLock, NtStatus>, bool)>,
    max: usize,
    now_ms: u64,
) -> Answer {
    let Some(entry) = server.files.existing(key) else {
        return Answer::Refused(NtStatus::FILE_CLOSED);
    };
    // The open closed before its LOCK arrived (its connection ended while the LOCK was on its
    // way): a lock granted now would outlive it.
    if !crate::server::lock(&entry)
        .opens
        .iter()
        .any(|o| o.owner == owner)
    {
        return Answer::Refused(NtStatus::FILE_CLOSED);
    }
    let asks: Vec<LockAsk> = asks
        .into_iter()
        .map(|(lock, fail_immediately)| LockAsk {
            lock,
            fail_immediately,
        })
        .collect();
    match lock_ranges_here(server, key, &entry, owner, &asks, max, now_ms) {
        Locked::Granted => Answer::Done,
        Locked::Wait(_) => Answer::Wait,
        Locked::Refused(s) => Answer::Refused(s),
    }
}

/// A READ or WRITE checked against the file's locks at its home, with the node's I/O grant.
fn io_check(server: &ServerState, key: FileKey, io: IoAsk) -> Answer {
    let Some(entry) = server.files.existing(key) else {
        return Answer::Refused(NtStatus::FILE_CLOSED);
    };
    let owner = io.owner;
    let r = crate::changes::io_check_here(server, &entry, io);
    let grant = grant_for(&server.node, &entry, owner).0;
    match r {
        Ok(writers) => Answer::Io {
            conflict: false,
            writers,
            grant,
        },
        Err(NtStatus::FILE_LOCK_CONFLICT) => Answer::Io {
            conflict: true,
            writers: false,
            grant,
        },
        Err(s) => Answer::Refused(s),
    }
}

/// The file a call is about (`None`: a call asked of any node).
pub(crate) fn key_of(call: &Call) -> Option<FileKey> {
    Some(match call {
        Call::Admit(key, _)
        | Call::Close { key, .. }
        | Call::Lock { key, .. }
        | Call::RetryLock(key, _)
        | Call::Unlock { key, .. }
        | Call::Io { key, .. }
        | Call::Changed { key, .. }
        | Call::DeletePending(key, _)
        | Call::Rename { key, .. }
        | Call::Moved(key, _)
        | Call::AckOplock { key, .. }
        | Call::AckLease { key, .. }
        | Call::Transfer(key, _) => *key,
        Call::Adopt(rec) => rec.state.key,
        Call::Reclaim { .. }
        | Call::Revoke { .. }
        | Call::GiveUp(_)
        | Call::CloseParked(_)
        | Call::Interest { .. } => return None,
    })
}

/// [`crate::decide::admit`] on the file's entry here: the parked opens in its way are
/// closed first ([`purge_for_open`]). On a cluster node, other nodes
/// first give back the I/O grants this open makes wrong (an open that may
/// write, or that may cache, ends theirs). It may call other nodes: not on a client's I/O
/// thread ([`admit_in_place`]).
pub(crate) fn admit_here(
    server: &ServerState,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Result<Option<Grant>, NtStatus> {
    let take = revoked_for(ask);
    grant::after_revoking(&server.node, key, entry, take, || {
        let in_the_way = oplock::parked_in_the_way(&lock(entry), ask.wish);
        purge_for_open(server, in_the_way);
        decide::admit_decided(server, key, entry, ask)
    })?
}

/// [`admit_here`] on a client's I/O thread: `None`, and nothing changed, when deciding needs
/// calls to other nodes (they hold I/O grants the open ends, or keep disconnected opens in its
/// way): [`admit_away`] has it decided where a call may wait. The common case (neither) is
/// decided here, with no more work than [`admit_here`]'s.
pub fn admit_in_place(
    server: &ServerState,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Option<Result<Option<Grant>, NtStatus>> {
    grant::in_place(&server.node, entry, revoked_for(ask), || {
        let in_the_way = oplock::parked_in_the_way(&lock(entry), ask.wish);
        let elsewhere = |(_, v): &(u64, u64)| super::handover::holder(&server.node, *v).is_some();
        if in_the_way.iter().any(elsewhere) {
            return None;
        }
        purge_for_open(server, in_the_way);
        Some(decide::admit_decided(server, key, entry, ask))
    })
}

/// The parts of other nodes' I/O grants an open `ask` ends (none of the asker's node's own).
fn revoked_for(ask: &OpenAsk<'_>) -> impl Fn(u16) -> u8 {
    let asker = node_of(ask.owner);
    let mut take = 0;
    if access::can_write(ask.wish.access) {
        take |= IoGrant::NO_FOREIGN_WRITERS;
    }
    if ask.requested != oplock::LEVEL_NONE || ask.lease_req.is_some() {
        take |= IoGrant::NO_FOREIGN_CACHING;
    }
    move |n| if n == asker { 0 } else { take }
}

/// An open of a client of this node, the file's home, that [`admit_in_place`] could not decide
/// on the client's I/O thread: the call a home-call thread carries (addressed to this node; it
/// reaches no peer connection) runs [`admit_here`] there, as a peer connection's thread runs it
/// for another node's client, and answers as the home answers a peer ([`Answer::Admitted`] with
/// no I/O grant: the asker's node is the home; [`Answer::Wait`]; [`Answer::Refused`]), which
/// [`crate::arbiter::admit_answered`] reads without a shadow entry to follow (the entry is the
/// file's own). `withdrawn`: the request went before the answer; an open admitted for it is
/// closed again. The partition moved away meanwhile: FILE_NOT_AVAILABLE, as a peer's call.
pub fn admit_away(
    server: &Arc<ServerState>,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
    withdrawn: Arc<std::sync::atomic::AtomicBool>,
) -> Result<HomeAsk, NtStatus> {
    let me = server.node.link().ok_or(NtStatus::INTERNAL_ERROR)?.node();
    let (server, entry) = (Arc::clone(server), Arc::clone(entry));
    let owned = super::msg::Ask::of(ask);
    let run = move || {
        if server.node.home_of(key) != Home::Here {
            return Ok(answer_bytes(Answer::Refused(NtStatus::FILE_NOT_AVAILABLE)));
        }
        let open = owned.open_ask(owned.now_ms);
        let answer = match admit_here(&server, key, &entry, &open) {
            Ok(Some(g)) => {
                if withdrawn.load(std::sync::atomic::Ordering::SeqCst) {
                    decide::close_here(&server, key, &entry, owned.owner, false);
                }
                Answer::Admitted(g, 0)
            }
            Ok(None) => Answer::Wait,
            Err(s) => Answer::Refused(s),
        };
        Ok(answer_bytes(answer))
    };
    Ok(HomeAsk::job(me, super::order_of(key), Box::new(run)))
}

/// `answer` as a peer's answer comes back ([`super::answer_of`] reads it).
fn answer_bytes(answer: Answer) -> Vec<u8> {
    super::msg::Message::Answer(answer).encode()
}

/// [`crate::decide::lock_ranges`] on the file's entry here. On a cluster node, every
/// node first gives back the "no byte-range locks" part of its I/O grant. It may call other
/// nodes: not on a client's I/O thread ([`lock_ranges_in_place`]).
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
    grant::after_revoking(&server.node, key, entry, take, || {
        crate::changes::lock_decided(server, entry, owner, asks, max, now_ms)
    })
    .unwrap_or_else(Locked::Refused)
}

/// [`lock_ranges_here`] on a client's I/O thread: `None`, and nothing changed, when another
/// node holds an I/O grant that says "no byte-range locks" (taking it back is a call):
/// [`lock_away`] has it decided where a call may wait.
pub fn lock_ranges_in_place(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Option<Locked> {
    grant::in_place(
        &server.node,
        entry,
        |_| IoGrant::NO_LOCKS,
        || {
            Some(crate::changes::lock_decided(
                server, entry, owner, asks, max, now_ms,
            ))
        },
    )
}

/// A LOCK of a client of this node, the file's home, that [`lock_ranges_in_place`] could not
/// decide on the client's I/O thread: a home-call thread runs [`lock_ranges_here`] (as
/// [`admit_away`]), answering as the home answers a peer's LOCK. An open that closed before its
/// LOCK is decided is refused FILE_CLOSED (as a peer's is), and locks granted to an open that
/// closed while they were decided (its close, decided on its I/O thread, is not carried after
/// this call as a peer's CLOSE is) go again: a lock never outlives its open.
pub fn lock_away(
    server: &Arc<ServerState>,
    key: FileKey,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Result<HomeAsk, NtStatus> {
    let me = server.node.link().ok_or(NtStatus::INTERNAL_ERROR)?.node();
    let server = Arc::clone(server);
    let wanted: Vec<_> = asks.iter().map(|a| (a.lock, a.fail_immediately)).collect();
    let run = move || {
        if server.node.home_of(key) != Home::Here {
            return Ok(answer_bytes(Answer::Refused(NtStatus::FILE_NOT_AVAILABLE)));
        }
        let Some(entry) = server.files.existing(key) else {
            return Ok(answer_bytes(Answer::Refused(NtStatus::FILE_CLOSED)));
        };
        let open = |e: &FileEntry| e.opens.iter().any(|o| o.owner == owner);
        if !open(&lock(&entry)) {
            return Ok(answer_bytes(Answer::Refused(NtStatus::FILE_CLOSED)));
        }
        let asks: Vec<LockAsk> = wanted
            .iter()
            .map(|(lock, fail_immediately)| LockAsk {
                lock: *lock,
                fail_immediately: *fail_immediately,
            })
            .collect();
        let answer = match lock_ranges_here(&server, key, &entry, owner, &asks, max, now_ms) {
            Locked::Granted => {
                let mut e = lock(&entry);
                if !open(&e) {
                    e.locks.release_owner(owner);
                    Answer::Refused(NtStatus::FILE_CLOSED)
                } else {
                    Answer::Done
                }
            }
            Locked::Wait(_) => Answer::Wait,
            Locked::Refused(s) => Answer::Refused(s),
        };
        Ok(answer_bytes(answer))
    };
    Ok(HomeAsk::job(me, super::order_of(key), Box::new(run)))
}

/// Before a new open joins its file: close the parked opens `ids` whose oplock or lease it
/// would have to break ([`crate::files::oplock::parked_in_the_way`]).
fn purge_for_open(server: &ServerState, ids: Vec<(u64, u64)>) {
    if ids.is_empty() {
        return;
    }
    // On a cluster node, some may be kept by the nodes their clients used.
    let (here, elsewhere): (Vec<_>, Vec<_>) = ids
        .into_iter()
        .partition(|(_, v)| super::handover::holder(&server.node, *v).is_none());
    super::handover::close_parked_elsewhere(&server.node, &elsewhere);
    // A persistent open's record goes after, away from this thread (the I/O thread of the
    // CREATE, or the home-call thread that decides it for a client of this node: the
    // connection posts it; the peer connection's thread that answers another node's CREATE:
    // `admit` asks it in place).
    crate::durable::purge(server, &here, "another open would have to break");
}
