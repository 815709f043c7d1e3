//! [MS-SMB2] 3.3.5.14 Receiving an SMB2 LOCK Request, over the byte-range lock
//! table of [`crate::locks`] ([MS-FSA] 2.1.5.8, 2.1.5.9).
//!
//! - Unlocks (3.3.5.14.1): when the first element unlocks, every element must
//!   be exactly SMB2_LOCKFLAG_UNLOCK; a range not held is RANGE_NOT_LOCKED and
//!   stops the processing (earlier unlocks stay done).
//! - Locks (3.3.5.14.2): each element is SHARED or EXCLUSIVE, optionally with
//!   FAIL_IMMEDIATELY; with more than one element every one must have
//!   FAIL_IMMEDIATELY. When an element cannot be granted, the ranges this
//!   request already locked are unlocked again and the request fails with
//!   LOCK_NOT_GRANTED, or, for a single blocking element, waits: it goes async
//!   and is retried every [`limits::BLOCKING_LOCK_RETRY_MS`] until granted,
//!   cancelled, or its open is closed (then RANGE_NOT_LOCKED).

use ringshare_wire::consts::LockFlags;
use ringshare_wire::lock::{LockElement, LockRequest, LockResponse};
use ringshare_wire::NtStatus;

use crate::cmd::AsyncWork;
use crate::conn::{ConnCore, Handled, Reply, Req};
use crate::limits;
use crate::locks::{self, ByteRangeLock};
use crate::opens;
use crate::server::lock;

const SHARED: u32 = LockFlags::SHARED_LOCK.bits();
const EXCLUSIVE: u32 = LockFlags::EXCLUSIVE_LOCK.bits();
const UNLOCK: u32 = LockFlags::UNLOCK.bits();
const FAIL_IMMEDIATELY: u32 = LockFlags::FAIL_IMMEDIATELY.bits();

/// A blocking lock waiting for its range.
pub(crate) struct PendingLock {
    pub retry_at_ms: u64,
    pub open_id: u64,
    lock: ByteRangeLock,
}

fn ok_body() -> Vec<u8> {
    let mut b = Vec::with_capacity(4);
    LockResponse.encode(&mut b);
    b
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let lr = LockRequest::decode(req.msg).map_err(|e| e.status())?;
    if lr.locks.len() > limits::LOCK_ELEMENTS_MAX {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let retry_at_ms = core.now.mono_ms + limits::BLOCKING_LOCK_RETRY_MS;
    let open = opens::find(core, req, lr.file_id)?;
    let owner = open.id;
    let first = lr.locks[0];
    if first.flags.bits() & UNLOCK != 0 {
        let mut e = lock(&open.entry);
        for el in &lr.locks {
            if el.flags.bits() != UNLOCK {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            if !e.locks.unlock(el.offset, el.length, owner) {
                return Err(NtStatus::RANGE_NOT_LOCKED);
            }
        }
        return Ok(Handled::Reply(Reply::ok(ok_body())));
    }
    let many = lr.locks.len() > 1;
    for el in &lr.locks {
        let kind = el.flags.bits() & !FAIL_IMMEDIATELY;
        if kind != SHARED && kind != EXCLUSIVE {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if many && el.flags.bits() & FAIL_IMMEDIATELY == 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    let mut e = lock(&open.entry);
    if e.locks.count_owned_by(owner) + lr.locks.len() > limits::LOCKS_PER_OPEN_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    // A byte-range lock breaks the read caching of other opens.
    let mut breaks = Vec::new();
    crate::oplock::on_change(&mut e, owner, core.now.mono_ms, &mut breaks);
    crate::oplock::send(&core.server, breaks);
    let mut taken: Vec<LockElement> = Vec::new();
    for el in &lr.locks {
        let failure = if locks::check_range(el.offset, el.length).is_err() {
            Some(NtStatus::INVALID_LOCK_RANGE)
        } else {
            let l = ByteRangeLock {
                offset: el.offset,
                length: el.length,
                exclusive: el.flags.bits() & EXCLUSIVE != 0,
                owner,
            };
            if e.locks.try_lock(l) {
                taken.push(*el);
                None
            } else if el.flags.bits() & FAIL_IMMEDIATELY == 0 {
                // Only a single-element request can get here: wait for the range.
                return Ok(Handled::Async(AsyncWork::Lock(PendingLock {
                    retry_at_ms,
                    open_id: owner,
                    lock: l,
                })));
            } else {
                Some(NtStatus::LOCK_NOT_GRANTED)
            }
        };
        if let Some(status) = failure {
            for t in taken.iter().rev() {
                e.locks.unlock(t.offset, t.length, owner);
            }
            return Err(status);
        }
    }
    Ok(Handled::Reply(Reply::ok(ok_body())))
}

pub(crate) fn poll(
    core: &mut ConnCore,
    session_id: u64,
    p: &mut PendingLock,
) -> Option<Result<Reply, NtStatus>> {
    let Some(open) = opens::by_id(core, session_id, p.open_id) else {
        return Some(Err(NtStatus::RANGE_NOT_LOCKED));
    };
    if lock(&open.entry).locks.try_lock(p.lock) {
        return Some(Ok(Reply::ok(ok_body())));
    }
    p.retry_at_ms = core.now.mono_ms + limits::BLOCKING_LOCK_RETRY_MS;
    None
}

/// A waiting lock holds nothing, so cancelling it has nothing to undo.
pub(crate) fn cancel(_core: &mut ConnCore, _session_id: u64, _p: &PendingLock) {}
