//! Interim responses ([MS-SMB2] 3.3.4.2): a request that waits half a second for a file system
//! job (a share whose calls may wait on a network), a call or file I/O gets STATUS_PENDING with
//! an AsyncId, as Samba 4.22 sends one after 500 ms, so its client waits for the answer without
//! its request timer; the answer then carries the AsyncId and grants no credits
//! (crates/core/src/conn/interim.rs).

use crate::support;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

/// FileStandardInformation of `f`, as a QUERY_INFO message.
fn standard_info(c: &mut Client, f: FileId) -> Vec<u8> {
    c.query_info_msg(f, 1, 5, 4096)
}

#[test]
fn a_request_waiting_half_a_second_for_its_file_system_job_is_answered_pending_then_async() {
    let (mut c, _) = fuse_client(true);
    let f = file_holding(&mut c, "slow", b"bytes");
    c.hold_lookups = true;
    let m = standard_info(&mut c, f);
    let (mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "waits for its job");
    assert!(c.tick(499).is_empty(), "nothing before half a second");
    let interim = c.tick(1);
    assert_eq!(interim.len(), 1, "one interim response");
    let i = &interim[0];
    assert_eq!(i.status(), NtStatus::PENDING);
    assert_eq!(i.hdr.message_id, mid);
    let async_id = i.hdr.async_id().expect("an AsyncId");
    assert!(
        i.hdr.credits > 0,
        "the credits granted with the interim response"
    );
    assert!(c.tick(2_000).is_empty(), "one interim response only");
    let (answers, _) = c.run_held_jobs_to_the_end();
    assert_eq!(answers.len(), 1);
    let a = &answers[0];
    assert_eq!(a.status(), NtStatus::SUCCESS);
    assert_eq!((a.hdr.message_id, a.hdr.async_id()), (mid, Some(async_id)));
    assert_eq!(a.hdr.credits, 0, "granted with the interim response");
}

#[test]
fn a_request_answered_within_half_a_second_gets_no_interim_response() {
    let (mut c, _) = fuse_client(true);
    let f = file_holding(&mut c, "quick", b"bytes");
    c.hold_lookups = true;
    let m = standard_info(&mut c, f);
    let (_, early) = send_signed(&mut c, m);
    assert!(early.is_empty());
    assert!(c.tick(400).is_empty());
    let (answers, _) = c.run_held_jobs_to_the_end();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    assert_eq!(answers[0].hdr.async_id(), None, "answered as it was asked");
    assert!(answers[0].hdr.credits > 0);
    assert!(c.tick(2_000).is_empty(), "nothing later");
}

#[test]
fn a_compound_waiting_on_a_file_system_job_gets_no_interim_response() {
    let (mut c, _) = fuse_client(true);
    c.put_file("compounded", b"bytes");
    let related = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };
    let tree = c.tree_id;
    let create = c.create_msg(tree, "compounded", 0x0012_019f, SHARE_ALL, D::OPEN, 0);
    let read = c.read_msg(related, 0, 5);
    let close = c.close_msg(related, 0);
    c.hold_lookups = true;
    assert!(c.compound(vec![create, read, close], true).is_empty());
    assert!(c.tick(1_000).is_empty(), "a compound waits as before");
    let (answers, _) = c.run_held_jobs_to_the_end();
    let statuses: Vec<_> = answers.iter().map(|r| r.status()).collect();
    assert_eq!(statuses, [NtStatus::SUCCESS; 3]);
    assert!(answers.iter().all(|r| r.hdr.async_id().is_none()));
}

#[test]
fn a_read_waiting_half_a_second_for_its_file_io_is_answered_pending_then_async() {
    let mut c = Client::new();
    c.put_file("stalled", b"some bytes");
    let f = c.create("stalled", 0x0012_0089, D::OPEN, 0).expect("open");
    c.hold_io = true;
    let m = c.read_msg(f, 0, 4);
    let (mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "waits for its I/O");
    let interim = c.tick(600);
    assert_eq!(interim.len(), 1);
    assert_eq!(interim[0].status(), NtStatus::PENDING);
    let async_id = interim[0].hdr.async_id().expect("an AsyncId");
    let answers = c.run_held_io();
    c.hold_io = false;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        (answers[0].hdr.message_id, answers[0].hdr.async_id()),
        (mid, Some(async_id))
    );
    assert_eq!(read_data(&answers[0]), b"some");
}

/// A blocking LOCK whose POSIX lock's job waited half a second (its interim response sent) and
/// then met a local program's lock goes on waiting under the same AsyncId: no second interim
/// response, and its grant answers with that AsyncId.
#[test]
fn a_lock_that_waits_after_its_interim_response_keeps_its_async_id() {
    use std::sync::atomic::Ordering;
    const EXCLUSIVE: u32 = 0x2;
    let (mut c, calls) = fuse_client(true);
    let f = file_holding(&mut c, "waits", b"0123456789");
    calls.locked.store(true, Ordering::SeqCst);
    c.hold_lookups = true;
    let m = c.lock_msg(f, &[(0, 4, EXCLUSIVE)]);
    let (mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "waits for its job");
    let interim = c.tick(500);
    assert_eq!(interim.len(), 1);
    assert_eq!(interim[0].status(), NtStatus::PENDING);
    let async_id = interim[0].hdr.async_id().expect("an AsyncId");
    let held = std::mem::take(&mut c.held_lookups);
    c.run_jobs(held);
    assert!(c.pump().is_empty(), "no second interim response");
    assert!(c.tick(5_000).is_empty(), "tried again: asks its job");
    let again = std::mem::take(&mut c.held_lookups);
    assert_eq!(again.len(), 1, "the try's job");
    calls.locked.store(false, Ordering::SeqCst);
    c.run_jobs(again);
    let mut answers = c.pump();
    answers.extend(c.tick(0));
    c.hold_lookups = false;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS, "granted");
    assert_eq!(
        (answers[0].hdr.message_id, answers[0].hdr.async_id()),
        (mid, Some(async_id))
    );
}

/// A request waiting behind another request's file system job about the same open (it runs
/// after it, in order) waits on the same stalled mount: after half a second it gets its own
/// interim response too, and its answer carries that AsyncId.
#[test]
fn a_request_waiting_behind_another_requests_job_gets_its_own_interim_response() {
    let (mut c, _) = fuse_client(true);
    let f = file_holding(&mut c, "ordered", b"bytes");
    c.hold_lookups = true;
    let first = standard_info(&mut c, f);
    let (first_id, early) = send_signed(&mut c, first);
    assert!(early.is_empty(), "waits for its job");
    let second = standard_info(&mut c, f);
    let (second_id, early) = send_signed(&mut c, second);
    assert!(early.is_empty(), "waits behind the first's job");
    assert_eq!(c.held_lookups.len(), 1, "only the first asked a job");
    let interims = c.tick(500);
    let mut pending: Vec<(u64, u64)> = interims
        .iter()
        .map(|r| {
            assert_eq!(r.status(), NtStatus::PENDING);
            (r.hdr.message_id, r.hdr.async_id().expect("an AsyncId"))
        })
        .collect();
    pending.sort();
    assert_eq!(
        pending.iter().map(|p| p.0).collect::<Vec<_>>(),
        [first_id, second_id],
        "each its interim response"
    );
    assert!(c.tick(2_000).is_empty(), "one interim response each");
    let (answers, _) = c.run_held_jobs_to_the_end();
    let mut done: Vec<(u64, Option<u64>, NtStatus)> = answers
        .iter()
        .map(|r| (r.hdr.message_id, r.hdr.async_id(), r.status()))
        .collect();
    done.sort_by_key(|d| d.0);
    assert_eq!(
        done,
        [
            (first_id, Some(pending[0].1), NtStatus::SUCCESS),
            (second_id, Some(pending[1].1), NtStatus::SUCCESS)
        ]
    );
}

/// A CANCEL of a request that had its interim response and still waits behind another
/// request's job about its open ends it unrun: STATUS_CANCELLED under its AsyncId; the request
/// whose job was out is answered as before.
#[test]
fn a_cancel_of_a_request_waiting_behind_another_requests_job_answers_it_cancelled() {
    let (mut c, _) = fuse_client(true);
    let f = file_holding(&mut c, "ordered", b"bytes");
    c.hold_lookups = true;
    let first = standard_info(&mut c, f);
    let (first_id, _) = send_signed(&mut c, first);
    let second = standard_info(&mut c, f);
    let (second_id, _) = send_signed(&mut c, second);
    let interims = c.tick(500);
    let second_interim = interims
        .iter()
        .find(|r| r.hdr.message_id == second_id)
        .expect("the second's interim response");
    let cancelled = c.cancel_async(second_interim);
    assert_eq!(cancelled.len(), 1, "answered at once: {cancelled:?}");
    assert_eq!(cancelled[0].status(), NtStatus::CANCELLED);
    assert_eq!(cancelled[0].hdr.message_id, second_id);
    assert_eq!(cancelled[0].hdr.async_id(), second_interim.hdr.async_id());
    let (answers, jobs) = c.run_held_jobs_to_the_end();
    assert_eq!(jobs, 1, "the cancelled request asked no job");
    let statuses: Vec<_> = answers
        .iter()
        .map(|r| (r.hdr.message_id, r.status()))
        .collect();
    assert_eq!(statuses, [(first_id, NtStatus::SUCCESS)]);
}
