//! A call answered after its caller stopped waiting (issue 33; docs/cluster-internals.md,
//! "A call answered too late"): the caller told its client FILE_NOT_AVAILABLE ("try again") at the
//! call's 2 s, but the home, slow rather than stopped, carried the call out all the same. The
//! caller's transport keeps reading the connection for a while and hands the late answer here;
//! what the answer says was done that the client does not know of is undone at the same node
//! by calls of the kinds every node reads (no new message kind, no protocol level), so the
//! home holds nothing for that client's sake that the client cannot release:
//! - a LOCK granted ([`Call::Lock`] answered `Done`) or a waiting lock's retry granted
//!   ([`Call::RetryLock`] answered `Flag(true)`): each range is unlocked, one call per range
//!   (an UNLOCK stops at the first range not held);
//! - an open admitted ([`Call::Admit`] answered `Admitted`): it is closed there (its lease
//!   leaves the file with it when no other open holds it);
//! - a delete-pending set or cleared ([`Call::DeletePending`] whose answer says it changed):
//!   it is set back, unless an answer in time since told this node the same change;
//! - a reconnect's open moved to a new id ([`Call::Transfer`] answered `Transferred`): it
//!   moves back to the id this node keeps it parked by for the next reconnect;
//! - a persistent open entered again for its keeper ([`Call::Adopt`] answered `Flag(true)`):
//!   it is closed there, as the keeper closes an adoption it does not keep.
//!
//! A CLOSE answered late is finished here as its answer in time would have been
//! ([`finish_close`]).
//!
//! Every other call leaves nothing its client would have to release ([`undo_of`] says why,
//! kind by kind). A call answered in time is never undone: its client learnt the answer.
//!
//! The home itself undoes the same when it sees, once it decided, that the caller stopped
//! waiting already ([`undone_here`]: its answer is then not sent): as soon as it can, and for
//! callers of older builds too. One side only undoes a call: the home looks once, before it
//! would send the answer, and the caller undoes only an answer it reads.

use super::ask;
use super::msg::{self, Answer, Call, Moved};
use crate::files::oplock::DISCONNECTED as PARKED;
use crate::server::{lock, FileTable, ServerState};

/// The calls that undo at the home what `call`, answered `answer` after its caller stopped
/// waiting, did there; empty when it did nothing its client would have to release:
/// - CLOSE: nothing to undo (its client was told the close succeeded; the close waits to be
///   sent again, `HomeClose::withdraw`): [`answered`] finishes it as the answer in time
///   would have ([`finish_close`]). UNLOCK: a range freed blocks nobody. IO, CHANGED,
///   RENAME: breaks sent and a check made, nothing held (the I/O grant the home noted for the
///   caller's node is one the node did not store: it asks again, and gives back nothing when
///   revoked). MOVED: the
///   rename happened; the home follows it. ACK_OPLOCK, ACK_LEASE: the client lowered its
///   caching itself. REVOKE, CLOSE_PARKED: what the home asked for was done. RECLAIM: read
///   only. INTEREST: changes sent to a node that asked for them. GIVE_UP: kept for the next
///   reconnect (`NodeState::given_up`).
/// - A LOCK that was told to wait, or refused, holds nothing.
pub fn undo_of(call: &Call, answer: &Answer) -> Vec<Call> {
    match (call, answer) {
        (
            Call::Lock {
                key, owner, asks, ..
            },
            Answer::Done,
        ) => asks
            .iter()
            .filter_map(|(l, _)| l.ok())
            .map(|l| Call::Unlock {
                key: *key,
                owner: *owner,
                ranges: vec![Ok((l.offset, l.length))],
            })
            .collect(),
        (Call::RetryLock(key, l), Answer::Flag(true)) => vec![Call::Unlock {
            key: *key,
            owner: l.owner,
            ranges: vec![Ok((l.offset, l.length))],
        }],
        (Call::Admit(key, ask), Answer::Admitted(..)) => vec![Call::Close {
            key: *key,
            owner: ask.owner,
            delete_on_close: false,
        }],
        // A persistent open entered again for its keeper (level 5's take-back): the keeper,
        // told nothing, does not keep it; its entry goes, as the keeper's own undo of an
        // adoption it does not keep closes it (takeback::undo_adopt). Left, it would refuse
        // every later ADOPT of the open (an open of its persistent id is there, routed nowhere).
        (Call::Adopt(rec), Answer::Flag(true)) => vec![Call::Close {
            key: rec.state.key,
            owner: rec.file_id.volatile,
            delete_on_close: false,
        }],
        (Call::DeletePending(key, Some(_)), Answer::Pending { was, now }) if was != now => {
            vec![Call::DeletePending(*key, Some(*was))]
        }
        // A reconnect's move to a new id: the reconnect failed (FILE_NOT_AVAILABLE), and this
        // node keeps the open parked under its old id for the next one (handover::keep), whose
        // move would find no such open at the home: it goes back to that id, disconnected.
        // (A move back, or a move to the same id, is never undone: the latter's reconnect
        // succeeded.)
        (Call::Transfer(key, m), Answer::Transferred(_)) if m.from != m.to && m.route != PARKED => {
            let back = Moved {
                from: m.to,
                to: m.from,
                route: PARKED,
                who: m.who.clone(),
            };
            vec![Call::Transfer(*key, Box::new(back))]
        }
        _ => Vec::new(),
    }
}

/// Node `node` answered `answer` (bytes as they came) to `call` (bytes as sent) after this
/// node stopped waiting: undo what [`undo_of`] names, at that node. Runs on the transport's
/// thread that read the late answer (never a client's I/O thread): the undo calls wait for
/// their answers; one answered late again undoes nothing more (an UNLOCK, a CLOSE or a
/// DELETE_PENDING that sets back is never undone).
pub fn answered(server: &ServerState, node: u16, call: &[u8], answer: &[u8]) {
    let (Ok(msg::Message::Call(call)), Ok(msg::Message::Answer(answer))) =
        (msg::Message::decode(call), msg::Message::decode(answer))
    else {
        return;
    };
    if let (Call::Close { key, owner, .. }, Answer::Closed(closed, lease)) = (&call, &answer) {
        finish_close(server, *key, *owner, closed, *lease);
        return;
    }
    for undo in undo_of(&call, &answer) {
        if let (Call::DeletePending(key, Some(was)), false) =
            (&undo, unlearnt(&server.files, &undo))
        {
            tracing::info!(
                node,
                ?key,
                was,
                "cluster: a late delete-pending kept (a later answer told this node so)"
            );
            continue;
        }
        let what = format!("{undo:?}");
        match ask(&server.node, node, undo) {
            Ok(Answer::Closed(_, Some(lease))) => {
                if let Some(key) = super::home::key_of(&call) {
                    server.lease_left(lease, key);
                }
                tracing::info!(node, "cluster: a late answer undone: {what}");
            }
            Ok(a) => tracing::info!(node, ?a, "cluster: a late answer undone: {what}"),
            Err(s) => tracing::warn!(node, ?s, "cluster: a late answer not undone: {what}"),
        }
    }
}

/// This node, `call`'s home, answered `answer` (bytes as they would travel) and its caller has
/// stopped waiting meanwhile (its side of the connection is shut): what [`undo_of`] names is
/// undone here, as its caller's calls would undo it, and true (the answer is not sent: the
/// caller, reading no answer, undoes nothing). False, and nothing done, when there is nothing
/// to undo: the answer is sent, and a late CLOSE is finished by its caller ([`answered`]).
pub fn undone_here(server: &ServerState, call: &[u8], answer: &[u8], now_ms: u64) -> bool {
    let (Ok(msg::Message::Call(call)), Ok(msg::Message::Answer(answer))) =
        (msg::Message::decode(call), msg::Message::decode(answer))
    else {
        return false;
    };
    let undo = undo_of(&call, &answer);
    if undo.is_empty() {
        return false;
    }
    for u in undo {
        let what = format!("{u:?}");
        let a = super::home::serve(server, u, now_ms);
        tracing::info!(
            ?a,
            "cluster: a call its caller stopped waiting for undone here: {what}"
        );
    }
    true
}

/// A CLOSE of open `owner` of `key` answered late: its client was told the close succeeded
/// and the close waits to be sent again (`HomeClose::withdraw`), where a home that finds no
/// such open says FILE_CLOSED and nothing more. It is done now, as the answer in time would
/// have done it: the lease that left the file with it leaves here, and the file goes when the
/// close was its last with the delete pending (a resend would have left it there).
fn finish_close(
    server: &ServerState,
    key: crate::server::FileKey,
    owner: u64,
    closed: &crate::link::Closed,
    lease: Option<crate::files::oplock::LeaseId>,
) {
    let unsent = {
        let mut unsent = lock(&server.node.unsent_closes);
        let at = unsent.iter().position(|u| u.key == key && u.owner == owner);
        at.map(|i| unsent.remove(i))
    };
    let Some(u) = unsent else {
        // Not waiting to be sent again: sent already (a resend that found no open did nothing
        // more: docs/cluster.md, "Limits").
        return;
    };
    if let Some(id) = lease {
        server.lease_left(id, key);
    }
    server.files.drop_if_unused(key);
    let share = server.shares().share(&u.share).cloned();
    if let (true, Some(s)) = (closed.remove, share) {
        crate::opens::remove_file(server, &s, &u.who, &closed.path, closed.is_dir, None);
    }
    tracing::info!(?key, owner, "cluster: a close answered late is done");
}

/// Whether the delete-pending `undo` sets back is still what this node last heard from the
/// file's home (its shadow entry): a later call's answer in time (its client's retry of the
/// SET_INFO) told a client the change, which then stays. (A retry still on its way when the
/// late answer is read is not seen here: docs/cluster.md says so.) Other undos: always.
fn unlearnt(files: &FileTable, undo: &Call) -> bool {
    match undo {
        Call::DeletePending(key, Some(was)) => files
            .existing(*key)
            .is_none_or(|e| lock(&e).delete_pending == *was),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::locks::ByteRangeLock;
    use crate::server::FileKey;
    use ringshare_wire::NtStatus;

    const KEY: FileKey = FileKey {
        dev: 1,
        ino: 2,
        stream: 0,
    };

    fn range(offset: u64, length: u64) -> ByteRangeLock {
        ByteRangeLock {
            offset,
            length,
            exclusive: true,
            owner: 9,
        }
    }

    #[test]
    fn a_lock_granted_late_is_unlocked_range_by_range_and_one_refused_or_waiting_is_not() {
        let call = Call::Lock {
            key: KEY,
            owner: 9,
            asks: vec![(Ok(range(0, 10)), true), (Ok(range(20, 5)), true)],
            max: 10,
            now_ms: 0,
        };
        let unlock = |o, l| Call::Unlock {
            key: KEY,
            owner: 9,
            ranges: vec![Ok((o, l))],
        };
        assert_eq!(
            undo_of(&call, &Answer::Done),
            [unlock(0, 10), unlock(20, 5)]
        );
        assert!(undo_of(&call, &Answer::Wait).is_empty());
        let refused = Answer::Refused(NtStatus::LOCK_NOT_GRANTED);
        assert!(undo_of(&call, &refused).is_empty());
        let retry = Call::RetryLock(KEY, range(3, 4));
        assert_eq!(undo_of(&retry, &Answer::Flag(true)), [unlock(3, 4)]);
        assert!(undo_of(&retry, &Answer::Flag(false)).is_empty());
    }

    #[test]
    fn a_delete_pending_changed_late_is_set_back_and_one_unchanged_is_left() {
        let set = Call::DeletePending(KEY, Some(true));
        let changed = Answer::Pending {
            was: false,
            now: true,
        };
        let back = Call::DeletePending(KEY, Some(false));
        assert_eq!(undo_of(&set, &changed), [back]);
        let same = Answer::Pending {
            was: true,
            now: true,
        };
        assert!(undo_of(&set, &same).is_empty());
        assert!(undo_of(&Call::DeletePending(KEY, None), &changed).is_empty());
    }

    #[test]
    fn a_reconnects_move_answered_late_moves_back_parked_and_a_move_back_or_rejoin_does_not() {
        let conn = crate::files::oplock::Route {
            conn_id: 5,
            session_id: 6,
        };
        let moved = |from, to, route| {
            let m = Moved {
                from,
                to,
                route,
                who: None,
            };
            Call::Transfer(KEY, Box::new(m))
        };
        let open = crate::files::ShareEntry {
            owner: 2,
            access: 3,
            share_access: 7,
            caching: crate::files::oplock::Caching {
                level: 0,
                breaking_to: None,
                break_deadline_ms: 0,
                lease: None,
                route: conn,
                file_id: (1, 2),
            },
            who: None,
            posix: false,
        };
        let t = crate::cluster::msg::Transferred {
            open,
            lease: None,
            locks: Vec::new(),
            delete_pending: false,
            grant: 0,
        };
        let done = Answer::Transferred(Box::new(t));
        assert_eq!(undo_of(&moved(1, 2, conn), &done), [moved(2, 1, PARKED)]);
        assert!(
            undo_of(&moved(2, 1, PARKED), &done).is_empty(),
            "a move back"
        );
        assert!(undo_of(&moved(1, 1, conn), &done).is_empty(), "a rejoin");
        let refused = Answer::Refused(NtStatus::OBJECT_NAME_NOT_FOUND);
        assert!(undo_of(&moved(1, 2, conn), &refused).is_empty());
    }

    #[test]
    fn a_persistent_open_adopted_late_is_closed_under_the_id_it_was_entered_by() {
        let state = msg::HandOver {
            key: KEY,
            path: ringshare_vfs::RelPath::from_components(["f.txt"]).unwrap(),
            is_dir: false,
            access: 3,
            share_access: 7,
            create_options: 0,
            position: 0,
            mode: 0,
            kind: 2,
            timeout_ms: 60_000,
            durable_create_guid: [8; 16],
            durable_client_guid: [3; 16],
            persistent: true,
            create_guid: None,
            create_action: 1,
            lock_sequences: None,
            notify_on_close: 0,
            posix_rename: false,
            posix: false,
        };
        let rec = msg::CaRecord {
            keeper: 1,
            file_id: ringshare_wire::FileId {
                persistent: 12,
                volatile: 20,
            },
            share: "share".into(),
            uid: 1001,
            user: "alice".into(),
            who: None,
            state,
            lease: None,
            locks: Vec::new(),
        };
        let adopt = Call::Adopt(Box::new(rec));
        let close = Call::Close {
            key: KEY,
            owner: 20,
            delete_on_close: false,
        };
        assert_eq!(undo_of(&adopt, &Answer::Flag(true)), [close]);
        assert!(
            undo_of(&adopt, &Answer::Flag(false)).is_empty(),
            "not entered"
        );
    }

    #[test]
    fn the_undo_of_an_undo_is_nothing() {
        let unlock = Call::Unlock {
            key: KEY,
            owner: 9,
            ranges: vec![Ok((0, 1))],
        };
        assert!(undo_of(&unlock, &Answer::Done).is_empty());
        let close = Call::Close {
            key: KEY,
            owner: 9,
            delete_on_close: false,
        };
        let closed = Answer::Refused(NtStatus::FILE_CLOSED);
        assert!(undo_of(&close, &closed).is_empty());
    }
}
