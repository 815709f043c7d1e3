//! LOCK on a share whose calls may wait on a network (issue 33, step 6; FUSE, CephFS, where
//! ceph-fuse asks the MDS for every POSIX lock): with `posix locking` the POSIX lock that
//! mirrors each SMB lock on the open's descriptor is set in a file system job of the open's
//! order, never on the I/O thread. A LOCK waits for its take's job, then the lock table
//! decides on the I/O thread; what is given back or released after is a job nobody waits for.
//! The share is the FUSE-like in-memory share of support/fuse.rs, whose descriptors count the
//! locks set on them (`Calls::lock_sets`) and refuse them while a "local program" holds one
//! (`Calls::locked`).

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::fuse::*;
use support::*;

const EXCLUSIVE: u32 = 2;
const UNLOCK: u32 = 4;
const FAIL_IMMEDIATELY: u32 = 0x10;

/// A LOCK of `c`'s with its jobs held: what was answered before they ran, the locks set on the
/// I/O thread meanwhile, and the jobs.
fn lock_with_jobs_held(
    c: &mut Client,
    calls: &Calls,
    f: ringshare_wire::FileId,
    elements: &[(u64, u64, u32)],
) -> (Vec<Resp>, usize, Vec<ringshare_core::LookupRequest>) {
    let sets = calls.lock_sets.load(Ordering::SeqCst);
    c.hold_lookups = true;
    let m = c.lock_msg(f, elements);
    let (_, early) = send_signed(c, m);
    let set_meanwhile = calls.lock_sets.load(Ordering::SeqCst) - sets;
    (early, set_meanwhile, std::mem::take(&mut c.held_lookups))
}

#[test]
fn a_lock_on_a_share_that_may_wait_on_a_network_takes_its_posix_lock_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let f = file_holding(&mut c, "locked", b"0123456789");
    let (early, set, held) = lock_with_jobs_held(&mut c, &calls, f, &[(0, 4, EXCLUSIVE)]);
    assert!(early.is_empty(), "the LOCK waits for its job");
    assert_eq!(set, 0, "no POSIX lock set on the I/O thread");
    assert_eq!(held.len(), 1, "one job");
    c.run_jobs(held);
    assert_eq!(calls.lock_sets.load(Ordering::SeqCst), 1, "set in the job");
    let answers = c.pump();
    c.hold_lookups = false;
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS]
    );
    // The lock is in the table: another open's LOCK of the range is refused there.
    let g = c
        .create("locked", 0x0012_019f, D::OPEN, 0)
        .expect("second open");
    assert_eq!(
        c.lock(g, &[(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::LOCK_NOT_GRANTED
    );
}

#[test]
fn a_local_programs_lock_the_job_meets_refuses_a_lock_that_may_not_wait() {
    let (mut c, calls) = fuse_client(true);
    let f = file_holding(&mut c, "theirs", b"0123456789");
    calls.locked.store(true, Ordering::SeqCst);
    let elements = [(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)];
    let (early, set, held) = lock_with_jobs_held(&mut c, &calls, f, &elements);
    assert!(early.is_empty() && set == 0);
    c.run_jobs(held);
    let answers = c.pump();
    c.hold_lookups = false;
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::LOCK_NOT_GRANTED]
    );
    calls.locked.store(false, Ordering::SeqCst);
    assert_eq!(
        c.lock(f, &elements).status(),
        NtStatus::SUCCESS,
        "nothing of the refused LOCK is left in the table"
    );
}

/// A blocking LOCK a local program's lock is in the way of goes async (STATUS_PENDING) and is
/// tried again later, each try's POSIX lock in a job; granted once the program let go.
#[test]
fn a_blocking_lock_waiting_for_a_local_programs_lock_is_tried_again_in_jobs() {
    let (mut c, calls) = fuse_client(true);
    let f = file_holding(&mut c, "waits", b"0123456789");
    calls.locked.store(true, Ordering::SeqCst);
    let (early, _, held) = lock_with_jobs_held(&mut c, &calls, f, &[(0, 4, EXCLUSIVE)]);
    assert!(early.is_empty());
    c.run_jobs(held);
    let interim = c.pump();
    assert_eq!(
        interim.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::PENDING],
        "it waits"
    );
    let sets = calls.lock_sets.load(Ordering::SeqCst);
    assert!(c.tick(5_000).is_empty(), "tried again: asks its job");
    assert_eq!(calls.lock_sets.load(Ordering::SeqCst), sets, "not here");
    let again = std::mem::take(&mut c.held_lookups);
    assert_eq!(again.len(), 1, "the try's job");
    calls.locked.store(false, Ordering::SeqCst);
    c.run_jobs(again);
    let mut answers = c.pump();
    answers.extend(c.tick(0));
    c.hold_lookups = false;
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS],
        "granted"
    );
}

/// An UNLOCK is decided and answered on the I/O thread; its range's POSIX lock is released in a
/// job nobody waits for, run before the open's next job. So is a lock the table refused after
/// the job took it on the descriptor (given back).
#[test]
fn an_unlock_and_a_refused_lock_set_their_posix_locks_back_in_jobs_nobody_waits_for() {
    let (mut c, calls) = fuse_client(true);
    let f = file_holding(&mut c, "back", b"0123456789");
    assert_eq!(c.lock(f, &[(0, 4, EXCLUSIVE)]).status(), NtStatus::SUCCESS);
    let (early, set, held) = lock_with_jobs_held(&mut c, &calls, f, &[(0, 4, UNLOCK)]);
    assert_eq!(
        early.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS],
        "answered at once"
    );
    assert_eq!((set, held.len()), (0, 1), "released in a job");
    c.run_jobs(held);
    assert_eq!(calls.lock_sets.load(Ordering::SeqCst), 2, "the release");
    c.hold_lookups = false;

    // Another open holds the range in the table: this LOCK's job takes it on its descriptor,
    // the table refuses it, and it is given back in a job.
    let g = c
        .create("back", 0x0012_019f, D::OPEN, 0)
        .expect("second open");
    assert_eq!(c.lock(g, &[(0, 4, EXCLUSIVE)]).status(), NtStatus::SUCCESS);
    let sets = calls.lock_sets.load(Ordering::SeqCst);
    let elements = [(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)];
    let (early, _, held) = lock_with_jobs_held(&mut c, &calls, f, &elements);
    assert!(early.is_empty());
    c.run_jobs(held);
    assert_eq!(calls.lock_sets.load(Ordering::SeqCst), sets + 1, "taken");
    let answers = c.pump();
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::LOCK_NOT_GRANTED]
    );
    let back = std::mem::take(&mut c.held_lookups);
    assert_eq!(back.len(), 1, "given back in a job");
    assert_eq!(calls.lock_sets.load(Ordering::SeqCst), sets + 1, "not here");
    c.run_jobs(back);
    c.hold_lookups = false;
    assert_eq!(calls.lock_sets.load(Ordering::SeqCst), sets + 2);
}

#[test]
fn a_lock_on_a_local_share_sets_its_posix_lock_at_once_without_a_job() {
    let (mut c, calls) = fuse_client(false);
    let f = file_holding(&mut c, "local", b"0123456789");
    let (early, set, held) = lock_with_jobs_held(&mut c, &calls, f, &[(0, 4, EXCLUSIVE)]);
    c.hold_lookups = false;
    assert_eq!(
        early.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS]
    );
    assert_eq!((set, held.len()), (1, 0));
}

/// What a held lookup is, in the words of its job (`what`).
fn what(r: &ringshare_core::LookupRequest) -> &'static str {
    match &r.ask {
        ringshare_core::Lookup::Fs(j) => j.what,
        _ => "not a file system job",
    }
}

/// The review of session 46, finding 2: a compound [UNLOCK r, LOCK r] of one open asks the UNLOCK's release job before the LOCK's take
/// job (what earlier members posted goes out before a member parks): the pool
/// runs one open's jobs in the order asked, so the release never undoes the take. Before, the
/// release was posted after the whole compound ran: the SMB lock held, its POSIX mirror did
/// not.
#[test]
fn an_unlocks_release_reaches_the_pool_before_the_next_compound_members_take() {
    let (mut c, _calls) = fuse_client(true);
    let f = file_holding(&mut c, "order", b"0123456789");
    assert_eq!(c.lock(f, &[(0, 4, EXCLUSIVE)]).status(), NtStatus::SUCCESS);
    c.hold_lookups = true;
    let unlock = c.lock_msg(f, &[(0, 4, UNLOCK)]);
    let lock = c.lock_msg(f, &[(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)]);
    let early = c.compound(vec![unlock, lock], false);
    assert!(early.is_empty(), "both wait: the LOCK for its take's job");
    let held = std::mem::take(&mut c.held_lookups);
    let order: Vec<&str> = held.iter().map(what).collect();
    assert_eq!(
        order,
        ["setting a LOCK's POSIX locks back", "a LOCK's POSIX locks"],
        "the UNLOCK's release must reach the pool before the LOCK's take"
    );
}

/// The review of session 46, finding 1: a LOCK's take job took the POSIX lock on the descriptor; its connection goes before
/// the answer is taken (or the LOCK, run again, never reaches `taken`: a lock-sequence replay
/// found, the session expired). The answer is let go on the pool (`let_go_unused`), which gives
/// the POSIX lock back: the table never had it. On a durable open the descriptor
/// stays open while the open waits for its reconnect: without it the range stayed
/// POSIX-locked, and a local program, and another SMB open's own take, were refused the range
/// no SMB lock holds.
#[test]
fn a_posix_lock_a_take_job_took_is_given_back_when_its_lock_is_abandoned_on_a_durable_open() {
    use ringshare_wire::create::{encode_durable_request, tag, CreateContext};
    let (mut a, calls) = fuse_client(true);
    a.put_file("d", b"0123456789");
    let ctx = vec![CreateContext::new(
        tag::DURABLE_HANDLE_REQUEST,
        encode_durable_request(),
    )];
    let m = a.create_msg_caching_ctx("d", 0x0012_019f, SHARE_ALL, D::OPEN, 9, ctx);
    let (_, r) = send_signed(&mut a, m);
    let r = if r.is_empty() { a.pump() } else { r };
    assert_eq!(r[0].status(), NtStatus::SUCCESS);
    let cr = ringshare_wire::create::CreateResponse::decode(&r[0].msg).unwrap();
    assert!(
        cr.contexts
            .iter()
            .any(|c| c.tag() == ringshare_wire::create::ContextTag::DurableHandleRequest),
        "a durable open"
    );
    let f = cr.file_id;
    let sets = calls.lock_sets.load(std::sync::atomic::Ordering::SeqCst);
    a.hold_lookups = true;
    let m = a.lock_msg(f, &[(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)]);
    let (_, early) = send_signed(&mut a, m);
    assert!(early.is_empty(), "the LOCK waits for its take's job");
    let held = std::mem::take(&mut a.held_lookups);
    assert_eq!(held.len(), 1);
    let done: Vec<_> = held.into_iter().map(|r| (r.id, r.run())).collect();
    assert_eq!(
        calls.lock_sets.load(std::sync::atomic::Ordering::SeqCst) - sets,
        1,
        "the job took the POSIX lock"
    );
    a.conn.shutdown(a.now);
    for (id, d) in done {
        a.conn.complete_lookup(a.now, id, d);
    }
    a.pump();
    let after = std::mem::take(&mut a.held_lookups);
    let whats: Vec<&str> = after.iter().map(what).collect();
    let sets = calls.lock_sets.load(std::sync::atomic::Ordering::SeqCst);
    a.run_any(after);
    assert_eq!(
        calls.lock_sets.load(std::sync::atomic::Ordering::SeqCst) - sets,
        1,
        "given back on the pool"
    );
    // The durable open is kept (its descriptor open): another connection reconnects it.
    let mut b = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    let ctx = vec![CreateContext::new(
        tag::DURABLE_HANDLE_RECONNECT,
        ringshare_wire::create::encode_durable_reconnect(f),
    )];
    let m = b.create_msg_caching_ctx("d", 0x0012_019f, SHARE_ALL, D::OPEN, 9, ctx);
    let (_, r) = send_signed(&mut b, m);
    let r = if r.is_empty() { b.pump() } else { r };
    let g = ringshare_wire::create::CreateResponse::decode(&r[0].msg)
        .unwrap()
        .file_id;
    assert_eq!(
        whats,
        ["letting go of what a job made"],
        "the take's answer let go on the pool (the durable open's descriptor stays open)"
    );
    assert_eq!(
        b.lock(g, &[(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::SUCCESS,
        "the reconnected open locks the range: nothing holds it"
    );
}

/// The review of session 46, finding 6: a blocking LOCK waiting for another SMB open's lock
/// (the table, not a local program) is tried every BLOCKING_LOCK_RETRY_MS (10 ms); on an
/// offloaded share each try was a take job and a give-back job (FUSE SETLK requests; on
/// ceph-fuse MDS calls), 199 a second. It looks at the table first now: no job while the
/// range is held there; granted once it is free.
#[test]
fn a_blocking_lock_waiting_for_another_opens_lock_asks_no_job_until_the_table_frees_the_range() {
    use std::sync::atomic::Ordering::SeqCst;
    let (mut c, calls) = fuse_client(true);
    let f1 = file_holding(&mut c, "busy", b"0123456789");
    assert_eq!(c.lock(f1, &[(0, 4, EXCLUSIVE)]).status(), NtStatus::SUCCESS);
    let f2 = c
        .create("busy", 0x0012_019f, D::OPEN, 0)
        .expect("second open");
    c.hold_lookups = true;
    let m = c.lock_msg(f2, &[(0, 4, EXCLUSIVE)]);
    let (_, mut got) = send_signed(&mut c, m);
    let (sets, mut jobs) = (calls.lock_sets.load(SeqCst), 0);
    for _ in 0..100 {
        let held = std::mem::take(&mut c.held_lookups);
        jobs += held.len();
        c.run_jobs(held);
        got.extend(c.pump());
        got.extend(c.tick(10));
    }
    assert_eq!(
        (jobs, calls.lock_sets.load(SeqCst) - sets),
        (2, 2),
        "the first try's take and its give-back; no job and no POSIX lock call after, while \
         the table holds the range (199 of each before)"
    );
    assert_eq!(
        got.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::PENDING],
        "it waits"
    );
    c.hold_lookups = false;
    assert_eq!(c.lock(f1, &[(0, 4, UNLOCK)]).status(), NtStatus::SUCCESS);
    let granted = c.tick(10);
    assert_eq!(
        granted.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS],
        "granted once the range is free"
    );
}
