//! [MS-SMB2] 3.3.5.14 Receiving an SMB2 LOCK Request, over the byte-range lock
//! table of [`crate::files::locks`] ([MS-FSA] 2.1.5.8, 2.1.5.9).
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
//! - With `posix locking` (the share's, default yes) each lock is also taken as a POSIX
//!   lock on the open's descriptor, before the table is asked ([`posix`]): a local
//!   program's lock in the way makes it LOCK_NOT_GRANTED, or a blocking one wait, tried
//!   again every [`posix::poll_ms`].
//! - Lock sequences (3.3.5.14): on a durable open, or on a 3.x connection
//!   that can be one of several channels, a request naming a bucket (1-64)
//!   whose last successful number it repeats is a replay: it succeeds
//!   without doing anything. Any other request empties the bucket first and
//!   fills it when it succeeds (Samba's order).

use ringshare_wire::consts::LockFlags;
use ringshare_wire::lock::{LockRequest, LockResponse};
use ringshare_wire::NtStatus;

use std::sync::Arc;

use crate::arbiter::{self, Decision};
use crate::cmd::ids::ASK_IDS;
use crate::cmd::AsyncWork;
use crate::cmd::{Handled, LookupCont, Polled};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::locks::{self, ByteRangeLock};
use crate::limits;
use crate::server::lock;
use crate::state::Open;

mod posix;

const SHARED: u32 = LockFlags::SHARED_LOCK.bits();
const EXCLUSIVE: u32 = LockFlags::EXCLUSIVE_LOCK.bits();
const UNLOCK: u32 = LockFlags::UNLOCK.bits();
const FAIL_IMMEDIATELY: u32 = LockFlags::FAIL_IMMEDIATELY.bits();

/// A blocking lock waiting for its range.
pub(crate) struct PendingLock {
    pub retry_at_ms: u64,
    pub open_id: u64,
    lock: ByteRangeLock,
    /// The lock-sequence bucket and number to record when granted.
    sequence: Option<(usize, u8)>,
    /// The lookup under way: its file's home (another node) asked again, or, once granted,
    /// its persistent open's record stored. Not tried again meanwhile.
    asking: Option<u64>,
    /// The lock is held (its record is being stored): it succeeds.
    granted: bool,
    /// A CANCEL came while its home was asked: it ends with the answer (cancelled unless
    /// the home granted it meanwhile).
    cancelled: bool,
    /// Tries in a row a local program's POSIX lock was in the way of ([`posix`]).
    posix_tries: u32,
    /// The lookup under way is the job that takes its POSIX lock ([`posix::take_job`]).
    taking: bool,
}

impl PendingLock {
    pub(crate) fn deadline_ms(&self) -> Option<u64> {
        self.asking.is_none().then_some(self.retry_at_ms)
    }

    pub(crate) fn asked(&mut self, id: u64) {
        self.asking = Some(id);
    }

    pub(crate) fn asks(&self, id: u64) -> bool {
        self.asking == Some(id)
    }

    pub(crate) fn cancel_when_answered(&mut self) -> bool {
        self.cancelled |= self.asking.is_some();
        self.asking.is_some()
    }
}

/// The lock-sequence bucket (0-based) and number a LOCK names, when the
/// server checks them for this open ([MS-SMB2] 3.3.5.14).
fn sequence_of(core: &ConnCore, lr: &LockRequest, open: &Open) -> Option<(usize, u8)> {
    let dialect = core.dialect()?.0;
    let index = lr.lock_sequence_index as usize;
    if dialect == ringshare_wire::consts::Dialect::SMB2_0_2.0
        || !(1..=64).contains(&index)
        || !core.server.config.lock_sequence_checking
    {
        return None;
    }
    let multi_channel =
        dialect >= ringshare_wire::consts::Dialect::SMB3_0.0 && core.server.config.multi_channel;
    (multi_channel || lock(&open.state).durable.is_some())
        .then_some((index - 1, lr.lock_sequence_number))
}

/// A LOCK succeeded: its lock sequence is remembered, and the record of a persistent open on
/// a cluster node is stored again with its locks as they are now, away from the I/O thread;
/// the LOCK is answered once it is ([`LookupCont::Answer`]; a record not stored is logged and
/// the lock holds on this node).
fn granted(core: &ConnCore, open: &Open, sequence: Option<(usize, u8)>) -> Handled {
    let reply = Reply::ok(ok_body());
    remember(open, sequence);
    match crate::cluster::ca::to_store(&core.server.node, open) {
        Some(ask) => Handled::lookup(
            crate::lookup::Lookup::Cluster(ask),
            LookupCont::Answer {
                reply,
                closed: None,
            },
        ),
        None => Handled::Reply(reply),
    }
}

/// Note the lock sequence of the request that succeeded.
fn remember(open: &Open, sequence: Option<(usize, u8)>) {
    if let Some((i, n)) = sequence {
        let mut st = lock(&open.state);
        st.lock_sequences
            .get_or_insert_with(|| Box::new([crate::state::NO_LOCK_SEQUENCE; 64]))[i] = n;
    }
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
    let open = handles::find(core, req, lr.file_id)?;
    let owner = open.id;
    let sequence = sequence_of(core, &lr, &open);
    if let Some((i, n)) = sequence {
        let mut st = lock(&open.state);
        let buckets = st
            .lock_sequences
            .get_or_insert_with(|| Box::new([crate::state::NO_LOCK_SEQUENCE; 64]));
        if buckets[i] == n {
            return Ok(Handled::Reply(Reply::ok(ok_body())));
        }
        buckets[i] = crate::state::NO_LOCK_SEQUENCE;
    }
    let first = lr.locks[0];
    if first.flags.bits() & UNLOCK != 0 {
        let ranges = lr.locks.iter().map(|el| {
            if el.flags.bits() == UNLOCK {
                Ok((el.offset, el.length))
            } else {
                Err(NtStatus::INVALID_PARAMETER)
            }
        });
        let ranges: arbiter::Ranges = ranges.collect();
        let node = &core.server.node;
        // Kept for the descriptor's locks only when the share mirrors them.
        let asked = posix::mirrored(&open).then(|| ranges.clone());
        return match arbiter::unlock_or_ask(node, open.key, &open.entry, owner, ranges) {
            Decision::Made(done) => {
                if let Some(asked) = &asked {
                    unlocked(core, &open, asked, &done);
                }
                done.map(|()| granted(core, &open, sequence))
            }
            Decision::Ask(ask, ranges) => Ok(at_home(ask, open, sequence, Asked::Unlock(ranges))),
        };
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
    let asks: Vec<arbiter::LockAsk> = lr
        .locks
        .iter()
        .map(|el| arbiter::LockAsk {
            lock: locks::check_range(el.offset, el.length)
                .map(|()| ByteRangeLock {
                    offset: el.offset,
                    length: el.length,
                    exclusive: el.flags.bits() & EXCLUSIVE != 0,
                    owner,
                })
                .map_err(|_| NtStatus::INVALID_LOCK_RANGE),
            fail_immediately: el.flags.bits() & FAIL_IMMEDIATELY != 0,
        })
        .collect();
    let new = new_locks(&asks);
    if new.len() == asks.len() && !taken(core, &open, &new)? {
        // A local program's POSIX lock is in the way.
        if many || first.flags.bits() & FAIL_IMMEDIATELY != 0 {
            return Err(NtStatus::LOCK_NOT_GRANTED);
        }
        return Ok(waiting(core, &open, sequence, new[0], 1));
    }
    let max = limits::LOCKS_PER_OPEN_MAX;
    let now = core.now.mono_ms;
    let (key, entry) = (open.key, &open.entry);
    match arbiter::lock_or_ask(&core.server, key, entry, owner, &asks, max, now) {
        Decision::Made(locked) => decided(core, &open, sequence, &new, locked),
        Decision::Ask(ask, here) => Ok(at_home(ask, open, sequence, Asked::Lock(asks, here))),
    }
}

/// Whether `new` was taken on the open's descriptor ([`posix::take`]). On a share whose calls
/// may wait on a network in a file system job ([`posix::take_job`]), the LOCK parked meanwhile
/// (Err([`ASK_IDS`]), [`crate::cmd::ids::parked`]): it runs again with the job's answer, having
/// changed nothing before it asked.
fn taken(core: &mut ConnCore, open: &Arc<Open>, new: &[ByteRangeLock]) -> Result<bool, NtStatus> {
    if !posix::in_jobs(open) {
        return Ok(posix::take(open, new));
    }
    match core.domain_answer.take() {
        Some(crate::lookup::DomainAnswer::Fs(done, _)) => Ok(posix::taken(&done)),
        other => {
            core.domain_answer = other;
            let job = posix::take_job(open, new.to_vec());
            core.ids_wanted = Some(crate::lookup::Lookup::Fs(job));
            Err(ASK_IDS)
        }
    }
}

/// A LOCK or UNLOCK parked while its file's home (another node) decides ([`answered`]).
pub(crate) struct AtHome {
    open: Arc<Open>,
    sequence: Option<(usize, u8)>,
    asked: Asked,
}

/// What a parked LOCK asked of the home (true: of this node, the file's home, whose decision
/// a home-call thread makes).
enum Asked {
    Lock(Vec<arbiter::LockAsk>, bool),
    Unlock(arbiter::Ranges),
}

fn at_home(
    ask: crate::lookup::HomeAsk,
    open: Arc<Open>,
    sequence: Option<(usize, u8)>,
    asked: Asked,
) -> Handled {
    Handled::lookup(
        crate::lookup::Lookup::Home(ask),
        LookupCont::Lock(Box::new(AtHome {
            open,
            sequence,
            asked,
        })),
    )
}

/// The file's home answered a parked LOCK or UNLOCK: it is answered as one decided at once
/// would be (a lock that must wait goes async; a persistent open's record is stored first).
pub(crate) fn answered(
    core: &mut ConnCore,
    fin: AtHome,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    let (open, answer) = (&fin.open, done.home());
    match &fin.asked {
        Asked::Unlock(ranges) => {
            let done = arbiter::unlock_answered(&open.entry, open.id, ranges, answer);
            unlocked(core, open, ranges, &done);
            done?;
            Ok(granted(core, open, fin.sequence))
        }
        Asked::Lock(asks, here) => {
            let locked = arbiter::lock_answered(&open.entry, (open.id, *here), asks, answer);
            decided(core, open, fin.sequence, &new_locks(asks), locked)
        }
    }
}

/// The LOCK's answer once its locks are decided: granted, waiting (async, retried every
/// [`limits::BLOCKING_LOCK_RETRY_MS`]) or refused.
fn decided(
    core: &mut ConnCore,
    open: &Arc<Open>,
    sequence: Option<(usize, u8)>,
    new: &[ByteRangeLock],
    locked: arbiter::Locked,
) -> Result<Handled, NtStatus> {
    if matches!(locked, arbiter::Locked::Granted) {
        posix::keep(open, new);
    } else {
        give_back(core, open, new);
    }
    match locked {
        arbiter::Locked::Granted => Ok(granted(core, open, sequence)),
        arbiter::Locked::Wait(l) => Ok(waiting(core, open, sequence, l, 0)),
        arbiter::Locked::Refused(status) => Err(status),
    }
}

/// A blocking lock goes async, tried again after [`limits::BLOCKING_LOCK_RETRY_MS`] when
/// another open's lock is in the way, after [`posix::poll_ms`] when a local program's is
/// (`posix_tries` > 0).
fn waiting(
    core: &ConnCore,
    open: &Open,
    sequence: Option<(usize, u8)>,
    lock: ByteRangeLock,
    posix_tries: u32,
) -> Handled {
    Handled::Async(Box::new(AsyncWork::Lock(PendingLock {
        retry_at_ms: core.now.mono_ms + retry_ms(posix_tries),
        open_id: open.id,
        lock,
        sequence,
        asking: None,
        granted: false,
        cancelled: false,
        posix_tries,
        taking: false,
    })))
}

fn retry_ms(posix_tries: u32) -> u64 {
    if posix_tries == 0 {
        limits::BLOCKING_LOCK_RETRY_MS
    } else {
        posix::poll_ms(posix_tries)
    }
}

/// The locks a LOCK asks for, those with a valid range.
fn new_locks(asks: &[arbiter::LockAsk]) -> Vec<ByteRangeLock> {
    asks.iter().filter_map(|a| a.lock.ok()).collect()
}

/// An UNLOCK was decided: the ranges it released are released on the descriptor too.
fn unlocked(
    core: &mut ConnCore,
    open: &Arc<Open>,
    ranges: &arbiter::Ranges,
    done: &Result<(), NtStatus>,
) {
    if !posix::mirrored(open) {
        return;
    }
    let ranges: Vec<(u64, u64)> = ranges.iter().map_while(|r| r.ok()).collect();
    if let Some(s) = posix::release(open, open.id, &ranges, done.is_ok()) {
        s.apply(open, &mut core.cluster_posts);
    }
}

/// The table did not grant `new`, taken on the descriptor: given back ([`posix::give_back`]).
fn give_back(core: &mut ConnCore, open: &Arc<Open>, new: &[ByteRangeLock]) {
    if let Some(s) = posix::give_back(open, new) {
        s.apply(open, &mut core.cluster_posts);
    }
}

/// Try a waiting lock again: at once when its file is homed here, else by asking the home
/// away from the I/O thread ([`retried`] takes the answer).
pub(crate) fn poll(core: &mut ConnCore, session_id: u64, p: &mut PendingLock) -> Polled {
    if p.asking.is_some() {
        return Polled::Wait;
    }
    let Some(open) = handles::by_id(core, session_id, p.open_id) else {
        return Polled::Done(Err(NtStatus::RANGE_NOT_LOCKED));
    };
    if posix::in_jobs(&open) {
        if still_held_here(core, &open, p.lock) {
            // Another open's lock is in the way in the table, here: no job, no POSIX lock
            // taken and given back at every try (the review of session 46, finding 6).
            p.retry_at_ms = core.now.mono_ms + limits::BLOCKING_LOCK_RETRY_MS;
            return Polled::Wait;
        }
        // Its POSIX lock taken in a job first ([`retried`] goes on with the answer).
        p.taking = true;
        return Polled::Ask(crate::lookup::Lookup::Fs(posix::take_job(
            &open,
            vec![p.lock],
        )));
    }
    let took = posix::take(&open, &[p.lock]);
    after_take(core, &open, p, took)
}

/// Whether the table of a file homed on this node still has a lock in the way of `l` (a look
/// only: the try itself takes it, [`after_take`]). A file homed elsewhere is asked at each try.
fn still_held_here(core: &ConnCore, open: &Open, l: ByteRangeLock) -> bool {
    let here = matches!(
        core.server.node.home_of(open.key),
        crate::cluster::Home::Here
    );
    let intent = locks::Intent::Lock {
        exclusive: l.exclusive,
    };
    here && lock(&open.entry)
        .locks
        .conflicts(l.offset, l.length, intent, l.owner)
}

/// A waiting lock's try once its POSIX lock was taken (`took`) or a local program's was in the
/// way (tried again after [`posix::poll_ms`]): the table asked again, at once when its file is
/// homed here, else by asking the home ([`retried`] takes the answer).
fn after_take(core: &mut ConnCore, open: &Arc<Open>, p: &mut PendingLock, took: bool) -> Polled {
    if !took {
        p.posix_tries += 1;
        p.retry_at_ms = core.now.mono_ms + retry_ms(p.posix_tries);
        return Polled::Wait;
    }
    p.posix_tries = 0;
    match arbiter::retry_lock_or_ask(&core.server.node, open.key, &open.entry, p.lock) {
        Decision::Made(true) => {
            posix::keep(open, &[p.lock]);
            held(core, open, p)
        }
        Decision::Made(false) => {
            give_back(core, open, &[p.lock]);
            p.retry_at_ms = core.now.mono_ms + limits::BLOCKING_LOCK_RETRY_MS;
            Polled::Wait
        }
        Decision::Ask(ask, ()) => Polled::Ask(crate::lookup::Lookup::Home(ask)),
    }
}

/// The answer to what a waiting lock asked ([`poll`]) is in: the home's to its retry, or,
/// once granted, the store's to its record.
pub(crate) fn retried(
    core: &mut ConnCore,
    session_id: u64,
    p: &mut PendingLock,
    done: crate::lookup::LookupDone,
) -> Polled {
    p.asking = None;
    if p.granted {
        return Polled::Done(Ok(Reply::ok(ok_body())));
    }
    let taking = std::mem::take(&mut p.taking);
    // Its open closed meanwhile: the close reaches the home after the retry, and frees the
    // lock there if it was granted. A take's answer is let go on the pool (what it holds is
    // given back there: [`posix::taken`]).
    let Some(open) = handles::by_id(core, session_id, p.open_id) else {
        if let crate::lookup::LookupDone::Fs(done) = done {
            crate::cmd::create::let_go_unused(core, done);
        }
        return Polled::Done(Err(NtStatus::RANGE_NOT_LOCKED));
    };
    if taking {
        // Its POSIX lock's job answered ([`poll`]).
        let took = matches!(&done, crate::lookup::LookupDone::Fs(d) if posix::taken(d));
        if p.cancelled {
            if took {
                give_back(core, &open, &[p.lock]);
            }
            return Polled::Done(Err(NtStatus::CANCELLED));
        }
        return after_take(core, &open, p, took);
    }
    if arbiter::retry_answered(&open.entry, p.lock, done.home()) {
        posix::keep(&open, &[p.lock]);
        return held(core, &open, p);
    }
    give_back(core, &open, &[p.lock]);
    if p.cancelled {
        Polled::Done(Err(NtStatus::CANCELLED))
    } else {
        p.retry_at_ms = core.now.mono_ms + limits::BLOCKING_LOCK_RETRY_MS;
        Polled::Wait
    }
}

/// A waiting lock is held: it succeeds once its persistent open's record is stored ([`granted`]).
fn held(core: &ConnCore, open: &Open, p: &mut PendingLock) -> Polled {
    p.granted = true;
    match granted(core, open, p.sequence) {
        Handled::Lookup(parked) => Polled::Ask(parked.ask),
        Handled::Reply(reply) => Polled::Done(Ok(reply)),
        _ => Polled::Done(Err(NtStatus::INTERNAL_ERROR)),
    }
}

/// A waiting lock holds nothing, so cancelling it has nothing to undo.
pub(crate) fn cancel(_core: &mut ConnCore, _session_id: u64, _p: &PendingLock) {}
