//! A file's home answering another node: each [`Call`] runs the same
//! `*_here` decision in [`crate::arbiter`] that a local request runs, on
//! this node's entry of the file, with this node's clock.

use ringshare_wire::NtStatus;

use super::msg::{Answer, Call};
use super::{grant, node_of, Home};
use crate::arbiter::{self, IoAsk, LockAsk, Locked, OpenAsk};
use crate::files::locks::ByteRangeLock;
use crate::server::{lock, FileKey, ServerState};

/// Decide `call` here, where the file is homed; `now_ms` is this node's clock.
pub(crate) fn serve(server: &ServerState, call: Call, now_ms: u64) -> Answer {
    if let Some(answer) = serve_anywhere(server, &call) {
        return answer;
    }
    let Some(key) = key_of(&call) else {
        return Answer::Refused(NtStatus::INVALID_PARAMETER);
    };
    if server.home_of(key) != Home::Here {
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
            let Some(entry) = server.existing_file_entry(key) else {
                return Answer::Refused(NtStatus::FILE_CLOSED);
            };
            let (c, lease_gone) = arbiter::close_here(server, key, &entry, owner, delete_on_close);
            server.drop_file_entry_if_unused(key);
            Answer::Closed(c, lease_gone)
        }
        Call::Lock {
            key,
            owner,
            asks,
            max,
            ..
        } => lock_ranges(server, key, owner, asks, max as usize, now_ms),
        Call::RetryLock(key, l) => match server.existing_file_entry(key) {
            Some(entry) => Answer::Flag(crate::server::lock(&entry).locks.try_lock(l)),
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::Unlock { key, owner, ranges } => match server.existing_file_entry(key) {
            Some(entry) => match arbiter::unlock_ranges_here(&entry, owner, ranges.into_iter()) {
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
            if let Some(entry) = server.existing_file_entry(key) {
                arbiter::changed_here(server, &entry, owner, now_ms);
            }
            Answer::Done
        }
        Call::DeletePending(key, set) => match server.existing_file_entry(key) {
            Some(entry) => {
                let was = crate::server::lock(&entry).delete_pending;
                let (now, _) = arbiter::delete_pending_here(&entry, set);
                Answer::Pending { was, now }
            }
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::Rename {
            key,
            owner,
            conn_id,
            ..
        } => match server.existing_file_entry(key) {
            Some(entry) => Answer::Flag(arbiter::rename_waits_here(
                server, &entry, owner, conn_id, now_ms,
            )),
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::Moved(key, to) => {
            if let Some(entry) = server.existing_file_entry(key) {
                crate::server::lock(&entry).path = to;
            }
            Answer::Done
        }
        Call::AckOplock { key, owner, level } => match server.existing_file_entry(key) {
            Some(entry) => match arbiter::ack_oplock_here(server, &entry, owner, level) {
                Ok(l) => Answer::Level(u32::from(l)),
                Err(s) => Answer::Refused(s),
            },
            None => Answer::Refused(NtStatus::FILE_CLOSED),
        },
        Call::AckLease { key, id, state, .. } => {
            match arbiter::ack_lease_here(server, key, id, state, now_ms) {
                Ok(s) => Answer::Level(s),
                Err(s) => Answer::Refused(s),
            }
        }
        Call::Transfer(key, moved) => {
            let Some(entry) = server.existing_file_entry(key) else {
                return Answer::Refused(NtStatus::OBJECT_NAME_NOT_FOUND);
            };
            match super::handover::transfer_here(server, key, &entry, &moved) {
                Ok(mut t) => {
                    t.grant = grant::give(&mut lock(&entry), node_of(moved.to)).0;
                    Answer::Transferred(Box::new(t))
                }
                Err(s) => Answer::Refused(s),
            }
        }
        Call::Reclaim { .. }
        | Call::Revoke { .. }
        | Call::GiveUp(_)
        | Call::CloseParked(_)
        | Call::Interest { .. } => Answer::Refused(NtStatus::INVALID_PARAMETER),
    }
}

/// The calls asked of any node, not of a file's home; `None` for the others.
fn serve_anywhere(server: &ServerState, call: &Call) -> Option<Answer> {
    Some(match call {
        Call::Reclaim { parts, after } => {
            let (records, next) = super::reclaim::records(server, parts, *after);
            Answer::Records { records, next }
        }
        Call::Revoke { key, clear } => {
            grant::give_back(server, *key, *clear);
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
        Call::GiveUp(ask) => match super::handover::give_up(server, ask) {
            Ok(h) => Answer::GivenUp(Box::new(h)),
            Err(s) => Answer::Refused(s),
        },
        _ => return None,
    })
}

/// An open asked of the file's home: admitted (with the node's I/O grant), to wait, or refused.
fn admit(server: &ServerState, key: FileKey, ask: &super::msg::Ask, now_ms: u64) -> Answer {
    let entry = server.file_entry(key);
    let open = OpenAsk {
        owner: ask.owner,
        persistent_id: ask.persistent_id,
        route: ask.route,
        wish: &ask.wish,
        requested: ask.requested,
        lease_req: ask.lease_req.as_ref(),
        share: &ask.share,
        path: &ask.path,
        is_dir: ask.is_dir,
        conn_id: ask.conn_id,
        now_ms,
        who: ask.who.as_ref(),
    };
    let r = arbiter::admit_here(server, key, &entry, &open);
    if !matches!(r, Ok(Some(_))) {
        server.drop_file_entry_if_unused(key);
    }
    match r {
        Ok(Some(g)) => {
            let io = grant::give(&mut lock(&entry), node_of(ask.owner));
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
    let Some(entry) = server.existing_file_entry(key) else {
        return Answer::Refused(NtStatus::FILE_CLOSED);
    };
    let asks: Vec<LockAsk> = asks
        .into_iter()
        .map(|(lock, fail_immediately)| LockAsk {
            lock,
            fail_immediately,
        })
        .collect();
    match arbiter::lock_ranges_here(server, key, &entry, owner, &asks, max, now_ms) {
        Locked::Granted => Answer::Done,
        Locked::Wait(_) => Answer::Wait,
        Locked::Refused(s) => Answer::Refused(s),
    }
}

/// A READ or WRITE checked against the file's locks at its home, with the node's I/O grant.
fn io_check(server: &ServerState, key: FileKey, io: IoAsk) -> Answer {
    let Some(entry) = server.existing_file_entry(key) else {
        return Answer::Refused(NtStatus::FILE_CLOSED);
    };
    let owner = io.owner;
    let r = arbiter::io_check_here(server, &entry, io);
    let grant = grant::give(&mut lock(&entry), node_of(owner)).0;
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

fn key_of(call: &Call) -> Option<FileKey> {
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
        Call::Reclaim { .. }
        | Call::Revoke { .. }
        | Call::GiveUp(_)
        | Call::CloseParked(_)
        | Call::Interest { .. } => return None,
    })
}
