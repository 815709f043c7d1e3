//! Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread", "Closes that
//! remove"): on a share whose calls may wait on a network, a CLOSE whose file's delete happens
//! now, a named stream open's CLOSE, and the same closes nobody waits for (a connection's end)
//! make no file system call on the I/O thread: their last close, the removal and its AppleDouble
//! file or the stream's removal are one job, which tells watchers and directory leases itself
//! once the removal worked. The answers, what watchers hear and which leases break are those of
//! a local share, where nothing changes: no job, the calls made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::fscc::decode_notify_chain;
use ringshare_wire::{FileId, NtStatus};
use support::caching::*;
use support::fuse::*;
use support::*;

const DIRECTORY: u32 = 0x1;
const DELETE_ON_CLOSE: u32 = 0x1000;
/// FILE_NOTIFY_CHANGE_FILE_NAME | DIR_NAME | STREAM_NAME.
const NAMES: u32 = 0x1 | 0x2 | 0x200;
/// Read, write and DELETE.
const WITH_DELETE: u32 = 0x0013_019f;
const REMOVED: u32 = 2;
const REMOVED_STREAM: u32 = 7;

/// The file system work done so far that the tests count: every call, and the nodes of files
/// and streams let go (a descriptor's last close).
fn work(calls: &Calls) -> usize {
    calls.all()
        + calls.dropped.load(Ordering::SeqCst)
        + calls.streams_dropped.load(Ordering::SeqCst)
}

/// What a request sent with the file system jobs held came to before they ran.
struct Sent {
    /// The file system work done on the I/O thread before any job ran ([`work`]).
    before_jobs: usize,
    /// The answers sent before any job ran.
    early: Vec<Resp>,
    /// The jobs held.
    jobs: usize,
}

/// `msg` signed and sent with the file system jobs held: they stay held ([`run_held`]).
fn send_held(c: &mut Client, calls: &Calls, msg: Vec<u8>) -> Sent {
    let was = work(calls);
    c.hold_lookups = true;
    let (_, early) = send_signed(c, msg);
    Sent {
        before_jobs: work(calls) - was,
        early,
        jobs: c.held_lookups.len(),
    }
}

/// The held jobs run, and those they led to; the answers sent meanwhile.
fn run_held(c: &mut Client) -> Vec<Resp> {
    let mut answers = Vec::new();
    while !c.held_lookups.is_empty() {
        let held = std::mem::take(&mut c.held_lookups);
        c.run_any(held);
        answers.extend(c.pump());
    }
    c.hold_lookups = false;
    answers
}

/// The answer to the request of MessageId `id` among `rs`.
fn answer_to(rs: &[Resp], id: u64) -> Option<&Resp> {
    rs.iter()
        .find(|r| r.hdr.message_id == id && r.status() != NtStatus::PENDING)
}

/// The changes a CHANGE_NOTIFY's answer reports: (action, name).
fn changes(r: &Resp) -> Vec<(u32, String)> {
    assert_eq!(r.status(), NtStatus::SUCCESS, "{r:?}");
    decode_notify_chain(&output_buffer(r))
        .expect("well-formed FILE_NOTIFY_INFORMATION")
        .into_iter()
        .map(|c| (c.action, c.file_name))
        .collect()
}

/// A client on a share whose calls may wait on a network (`remote`) or not: directory `d`
/// holding `d\f`, open with delete on close (the open returned), and a watch of `d`'s names
/// pending (its MessageId).
fn deleting_client(remote: bool) -> (Client, Arc<Calls>, FileId, u64) {
    let (mut c, calls) = fuse_client(remote);
    c.create("d", 0x0012_0089, D::CREATE, DIRECTORY).unwrap();
    let f = c
        .create("d\\f", WITH_DELETE, D::CREATE, DELETE_ON_CLOSE)
        .expect("d\\f, deleted at its close");
    let d = c.create("d", 0x0012_0089, D::OPEN, DIRECTORY).unwrap();
    let watch = c.change_notify_msg(d, NAMES, false, 4096);
    let (watch_id, interim) = send_signed(&mut c, watch);
    assert_eq!(interim[0].status(), NtStatus::PENDING, "the watch waits");
    (c, calls, f, watch_id)
}

/// What a local share answered to the CLOSE of [`deleting_client`]'s open, and what its watch
/// heard; no job asked and the file gone at once.
fn local_delete_on_close() -> (NtStatus, Option<Vec<(u32, String)>>) {
    let (mut l, _, f, watch_id) = deleting_client(false);
    l.hold_lookups = true;
    let m = l.close_msg(f, 0);
    let (close_id, answers) = send_signed(&mut l, m);
    assert!(l.held_lookups.is_empty(), "no job on a local share");
    assert!(!exists(&l, "d/f"), "removed at once on a local share");
    let status = answer_to(&answers, close_id).expect("answered").status();
    (status, answer_to(&answers, watch_id).map(changes))
}

#[test]
fn a_delete_on_close_files_close_on_a_share_that_may_wait_on_a_network_removes_it_in_a_job() {
    let (mut c, calls, f, watch_id) = deleting_client(true);
    let m = c.close_msg(f, 0);
    let sent = send_held(&mut c, &calls, m);
    assert_eq!(
        (sent.jobs, sent.before_jobs),
        (1, 0),
        "one job, no file system call on the I/O thread before it ran"
    );
    assert!(sent.early.is_empty(), "the CLOSE waits for its job");
    assert!(exists(&c, "d/f"), "not removed before its job ran");
    let answers = run_held(&mut c);
    assert!(!exists(&c, "d/f"), "the job removed it");
    let close = answers.iter().find(|r| r.hdr.message_id != watch_id);
    let told = answer_to(&answers, watch_id).map(changes);
    assert_eq!(told, Some(vec![(REMOVED, "f".to_string())]));
    let local = local_delete_on_close();
    assert_eq!(
        (close.map(|r| r.status()), told),
        (Some(local.0), local.1),
        "the CLOSE's answer and what the watch heard, as on a local share"
    );
}

/// The back end refuses the removal (EACCES): as on the I/O thread the failure is logged, the
/// CLOSE is answered SUCCESS and no watcher hears of a removal; the file stays.
#[test]
fn a_removal_the_back_end_refuses_in_its_job_is_not_told_and_its_close_answers_success() {
    let (mut c, calls, f, watch_id) = deleting_client(true);
    calls.refuse_removals.store(true, Ordering::SeqCst);
    let m = c.close_msg(f, 0);
    let sent = send_held(&mut c, &calls, m);
    assert_eq!((sent.jobs, sent.before_jobs), (1, 0));
    let answers = run_held(&mut c);
    assert_eq!(answers.len(), 1, "the CLOSE alone: {answers:?}");
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    assert!(exists(&c, "d/f"), "the file stays");
    assert!(answer_to(&answers, watch_id).is_none(), "no watcher told");
    let (mut l, lcalls, lf, lwatch) = deleting_client(false);
    lcalls.refuse_removals.store(true, Ordering::SeqCst);
    let m = l.close_msg(lf, 0);
    let (_, local) = send_signed(&mut l, m);
    assert_eq!(
        local.iter().map(|r| r.status()).collect::<Vec<_>>(),
        vec![NtStatus::SUCCESS],
        "as on a local share"
    );
    assert!(exists(&l, "d/f") && answer_to(&local, lwatch).is_none());
}

/// A directory lease on `d` (another client's, RH) breaks when the job removed `d\f`, not
/// before, as on a local share where it breaks at the removal.
#[test]
fn a_removal_made_in_a_job_breaks_the_directory_lease_once_made_as_on_a_local_share() {
    let mut broken = Vec::new();
    for remote in [true, false] {
        let (mut c, calls, f, _) = deleting_client(remote);
        let mut a = Client::leasing_dirs(Arc::clone(&c.server), c.mem.clone(), [1; 16]);
        let m = a.create_msg_caching("d", READ, 7, D::OPEN, LEASE, Some(lease_v2(1, R | H)));
        let r = a.send_frame(m);
        assert_eq!(granted_lease(&r[0]).state.0, R | H, "a leases d");
        let m = c.close_msg(f, 0);
        let sent = send_held(&mut c, &calls, m);
        if remote {
            assert_eq!((sent.jobs, sent.before_jobs), (1, 0));
            assert!(a.breaks().is_empty(), "no break before the job ran");
        }
        run_held(&mut c);
        let got: Vec<_> = a
            .breaks()
            .into_iter()
            .map(|b| match b {
                ringshare_wire::misc::OplockBreak::LeaseBreakNotification(n) => {
                    (n.lease_key, n.current_lease_state.0, n.new_lease_state.0)
                }
                other => panic!("a lease break: {other:?}"),
            })
            .collect();
        broken.push(got);
    }
    assert_eq!(broken[0], vec![([1; 16], R | H, 0)], "broken once, to none");
    assert_eq!(broken[0], broken[1], "as on a local share");
}

/// A client as [`deleting_client`]'s, with stream `d\f:s` made and open (the open returned)
/// instead, deleted at its close when `delete`.
fn stream_client(remote: bool, delete: bool) -> (Client, Arc<Calls>, FileId, u64) {
    let (mut c, calls) = fuse_client(remote);
    c.create("d", 0x0012_0089, D::CREATE, DIRECTORY).unwrap();
    let f = c.create("d\\f", WITH_DELETE, D::CREATE, 0).unwrap();
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    let options = if delete { DELETE_ON_CLOSE } else { 0 };
    let s = c
        .create("d\\f:s", WITH_DELETE, D::CREATE, options)
        .expect("the stream");
    let d = c.create("d", 0x0012_0089, D::OPEN, DIRECTORY).unwrap();
    let watch = c.change_notify_msg(d, NAMES, false, 4096);
    let (watch_id, interim) = send_signed(&mut c, watch);
    assert_eq!(interim[0].status(), NtStatus::PENDING, "the watch waits");
    (c, calls, s, watch_id)
}

#[test]
fn a_delete_on_close_streams_close_on_a_share_that_may_wait_on_a_network_removes_it_in_a_job() {
    let (mut c, calls, s, watch_id) = stream_client(true, true);
    let m = c.close_msg(s, 0);
    let sent = send_held(&mut c, &calls, m);
    assert_eq!(
        (sent.jobs, sent.before_jobs),
        (1, 0),
        "one job, no file system call on the I/O thread before it ran"
    );
    assert!(sent.early.is_empty(), "the CLOSE waits for its job");
    assert!(has_stream(&c, "d/f", "s"), "not removed before its job ran");
    let answers = run_held(&mut c);
    assert!(!has_stream(&c, "d/f", "s"), "the job removed it");
    assert!(exists(&c, "d/f"), "its file stays");
    let told = answer_to(&answers, watch_id).map(changes);
    assert_eq!(told, Some(vec![(REMOVED_STREAM, "f:s".to_string())]));
    let others = |rs: &[Resp], watch: u64| -> Vec<NtStatus> {
        let close = rs.iter().filter(|r| r.hdr.message_id != watch);
        close.map(|r| r.status()).collect()
    };
    let close = others(&answers, watch_id);
    let (mut l, _, ls, lwatch) = stream_client(false, true);
    l.hold_lookups = true;
    let m = l.close_msg(ls, 0);
    let (_, local) = send_signed(&mut l, m);
    assert!(l.held_lookups.is_empty(), "no job on a local share");
    assert!(!has_stream(&l, "d/f", "s"), "removed at once");
    assert_eq!(close, vec![NtStatus::SUCCESS]);
    assert_eq!(
        (close, told),
        (
            others(&local, lwatch),
            answer_to(&local, lwatch).map(changes)
        ),
        "as on a local share"
    );
}

/// A stream open's plain CLOSE: its node's last close is made in the job, not on the I/O thread.
#[test]
fn a_named_stream_opens_close_on_a_share_that_may_wait_on_a_network_lets_it_go_in_a_job() {
    let (mut c, calls, s, _) = stream_client(true, false);
    let dropped = calls.streams_dropped.load(Ordering::SeqCst);
    let m = c.close_msg(s, 0);
    let sent = send_held(&mut c, &calls, m);
    assert_eq!((sent.jobs, sent.before_jobs), (1, 0));
    assert!(sent.early.is_empty(), "the CLOSE waits for its job");
    let answers = run_held(&mut c);
    assert_eq!(answers.len(), 1, "the CLOSE: {answers:?}");
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    assert!(
        calls.streams_dropped.load(Ordering::SeqCst) > dropped,
        "the job let the stream go"
    );
    assert!(has_stream(&c, "d/f", "s"), "the stream stays");
}

/// A CREATE of the name while the removal's job is out: one whose job found the file before
/// the close is answered after it DELETE_PENDING (the file's entry stays, its delete pending,
/// until the job removed it), never an open of the file about to vanish; so is a CREATE made
/// after it (the entry is not forgotten when the first CREATE leaves it: without the mark,
/// this one opened the file). Once the job ran, the name is free, as on a local share after
/// the close.
#[test]
fn a_create_of_a_name_whose_removal_job_is_held_finds_its_delete_pending_then_the_name_free() {
    let (mut b, calls, f, _) = deleting_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    c.hold_lookups = true;
    let tree = c.tree_id;
    let m = c.create_msg(tree, "d\\f", WITH_DELETE, SHARE_ALL, D::OPEN_IF, 0);
    let (create_id, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "c's CREATE waits for its job");
    // c's job runs (it finds the file, b's open on it) before b's CLOSE, its answer after.
    let held = std::mem::take(&mut c.held_lookups);
    let done: Vec<_> = held.into_iter().map(|r| (r.id, r.run())).collect();
    let m = b.close_msg(f, 0);
    let sent = send_held(&mut b, &calls, m);
    assert_eq!((sent.jobs, sent.before_jobs), (1, 0));
    assert!(exists(&b, "d/f"), "not removed yet");
    for (id, done) in done {
        c.conn.complete_lookup(c.now, id, done);
    }
    let mut answers = c.pump();
    answers.extend(run_held(&mut c));
    assert_eq!(
        answer_to(&answers, create_id).map(|r| r.status()),
        Some(NtStatus::DELETE_PENDING),
        "the CREATE whose job found the file before the close"
    );
    assert_eq!(
        c.create("d\\f", WITH_DELETE, D::OPEN_IF, 0),
        Err(NtStatus::DELETE_PENDING),
        "a CREATE while the removal's job is out"
    );
    let closed = run_held(&mut b);
    let close = closed.iter().find(|r| r.hdr.command == Command::CLOSE);
    assert_eq!(
        close.map(|r| r.status()),
        Some(NtStatus::SUCCESS),
        "b's CLOSE"
    );
    assert!(!exists(&b, "d/f"), "the job removed it");
    assert_eq!(
        c.create("d\\f", WITH_DELETE, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let g = c
        .create("d\\f", WITH_DELETE, D::OPEN_IF, 0)
        .expect("a new d\\f");
    assert_eq!(c.close(g).status(), NtStatus::SUCCESS);
    assert!(exists(&c, "d/f"), "the new file is not removed");
}

/// A rename onto the name while the removal's job is out (another client's, replacing it: no
/// open of the file is left): the rename is made, and the job, finding another file at the name,
/// leaves it; the renamed file is not lost. On a local share the removal was made before.
#[test]
fn a_file_renamed_onto_a_name_whose_removal_job_is_held_is_not_removed_by_the_job() {
    let (mut b, calls, f, _) = deleting_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    let g = c.create("d\\g", WITH_DELETE, D::CREATE, 0).unwrap();
    let m = b.close_msg(f, 0);
    let sent = send_held(&mut b, &calls, m);
    assert_eq!((sent.jobs, sent.before_jobs), (1, 0));
    let r = c.set_info(g, 1, 10, &rename_info("d\\f", true));
    assert_eq!(r.status(), NtStatus::SUCCESS, "c's rename replaces d\\f");
    run_held(&mut b);
    assert!(
        exists(&b, "d/f") && !exists(&b, "d/g"),
        "the renamed file stays at d\\f"
    );
    assert_eq!(c.close(g).status(), NtStatus::SUCCESS);
    assert!(exists(&b, "d/f"), "and stays after c's close");
}

/// A connection that ends with a delete-on-close open (and a stream's open deleted at its
/// close): nobody waits, the removals are jobs, and another client's watch hears of them once
/// they ran.
#[test]
fn a_connection_ending_with_delete_on_close_opens_removes_their_files_in_jobs() {
    let (mut b, calls, _, _) = deleting_client(true);
    b.create("d\\g", WITH_DELETE, D::CREATE, 0).unwrap();
    b.create("d\\g:s", WITH_DELETE, D::CREATE, DELETE_ON_CLOSE)
        .unwrap();
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    let d = c.create("d", 0x0012_0089, D::OPEN, DIRECTORY).unwrap();
    let watch = c.change_notify_msg(d, NAMES, false, 4096);
    let (watch_id, interim) = send_signed(&mut c, watch);
    assert_eq!(interim[0].status(), NtStatus::PENDING);
    let was = work(&calls);
    b.hold_lookups = true;
    b.conn.shutdown(b.now);
    b.pump();
    assert_eq!(
        work(&calls) - was,
        0,
        "no file system call on the I/O thread"
    );
    assert!(!b.held_lookups.is_empty(), "jobs");
    assert!(exists(&b, "d/f") && has_stream(&b, "d/g", "s"), "not yet");
    assert!(answer_to(&c.pump(), watch_id).is_none(), "nothing told yet");
    run_held(&mut b);
    assert!(!exists(&b, "d/f"), "removed by its job");
    assert!(!has_stream(&b, "d/g", "s"), "removed by its job");
    let told = c.pump();
    let mut heard = answer_to(&told, watch_id).map(changes).unwrap_or_default();
    heard.sort();
    assert_eq!(
        heard,
        vec![
            (REMOVED, "f".to_string()),
            (REMOVED_STREAM, "g:s".to_string())
        ],
        "c's watch hears of both: {told:?}"
    );
}

/// A CLOSE whose connection ends while its removal's job is out: the job removes the file and
/// tells another client's watch all the same (it tells watchers itself, as a rename's job).
#[test]
fn a_close_whose_connection_ends_while_its_removal_job_is_out_is_made_and_told() {
    let (mut b, calls, f, _) = deleting_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    let d = c.create("d", 0x0012_0089, D::OPEN, DIRECTORY).unwrap();
    let watch = c.change_notify_msg(d, NAMES, false, 4096);
    let (watch_id, interim) = send_signed(&mut c, watch);
    assert_eq!(interim[0].status(), NtStatus::PENDING);
    let m = b.close_msg(f, 0);
    let sent = send_held(&mut b, &calls, m);
    assert_eq!((sent.jobs, sent.before_jobs), (1, 0));
    b.conn.shutdown(b.now);
    b.pump();
    assert!(exists(&b, "d/f"), "not removed before the job ran");
    run_held(&mut b);
    assert!(!exists(&b, "d/f"), "the job removed it");
    let told = c.pump();
    assert_eq!(
        answer_to(&told, watch_id).map(changes),
        Some(vec![(REMOVED, "f".to_string())]),
        "c's watch hears of it"
    );
}

/// On a share whose calls are made on the I/O thread nothing changes: a delete-on-close CLOSE,
/// a stream's and a connection's end ask no job, and the removals are made at once.
#[test]
fn closes_that_remove_on_a_local_share_ask_no_job() {
    let (mut c, _, f, _) = deleting_client(false);
    c.hold_lookups = true;
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    assert!(c.held_lookups.is_empty() && !exists(&c, "d/f"));
    let (mut c, _, s, _) = stream_client(false, true);
    c.hold_lookups = true;
    assert_eq!(c.close(s).status(), NtStatus::SUCCESS);
    assert!(c.held_lookups.is_empty() && !has_stream(&c, "d/f", "s"));
    let (mut b, _, _, _) = deleting_client(false);
    b.hold_lookups = true;
    b.conn.shutdown(b.now);
    b.pump();
    assert!(b.held_lookups.is_empty(), "no job");
    assert!(!exists(&b, "d/f"), "removed at once");
}
