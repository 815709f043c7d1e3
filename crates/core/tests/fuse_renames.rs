//! Issue 33, step 6, second part (docs/cluster-internals.md, "File system calls off the I/O
//! thread"): on a share whose calls may wait on a network, a SET_INFO rename, hard link and
//! delete disposition make no file system call on the I/O thread: a rename's or link's look at
//! its target is one job, the decision on the server's state is made on the I/O thread, the
//! rename or link a second job; a delete disposition's stat and a directory's listing are one
//! job. The answers and what watchers hear are those of a local share. On a local share
//! nothing changes: no job, the calls made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_vfs::RelPath;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::fscc::FileAllInformation;
use ringshare_wire::NtStatus;
use support::fuse::*;
use support::*;

const INFO_FILE: u8 = 1;
const RENAME: u8 = 10;
const LINK: u8 = 11;
const DISPOSITION: u8 = 13;
const ALL_INFO: u8 = 18;
const DIRECTORY: u32 = 0x1;
/// FILE_NOTIFY_CHANGE_FILE_NAME | DIR_NAME.
const NAMES: u32 = 0x1 | 0x2;
/// Read, write and DELETE.
const WITH_DELETE: u32 = 0x0013_019f;

/// What a request sent with the file system jobs held came to.
struct Held {
    /// The jobs it asked.
    jobs: usize,
    /// The file system calls made before the first ran (on the I/O thread).
    before_jobs: usize,
    /// The answers, once the jobs (and any they led to) ran.
    answers: Vec<Resp>,
}

/// `msg` signed and sent with the file system jobs held ([`Held`]).
fn with_jobs_held(c: &mut Client, calls: &Calls, msg: Vec<u8>) -> Held {
    let was = calls.all();
    c.hold_lookups = true;
    let (_, mut answers) = send_signed(c, msg);
    let before_jobs = calls.all() - was;
    let mut jobs = 0;
    while !c.held_lookups.is_empty() {
        let held = std::mem::take(&mut c.held_lookups);
        jobs += held.len();
        c.run_jobs(held);
        answers.extend(c.pump());
    }
    c.hold_lookups = false;
    Held {
        jobs,
        before_jobs,
        answers,
    }
}

/// The count of name changes the server saw at `path` of the share and above it
/// (`FileTable::names_seen`).
fn names_seen(c: &Client, path: &str) -> u64 {
    let p = RelPath::from_components(path.split('/')).unwrap();
    c.server.files.names_seen("share", &p)
}

/// The name the open `f` shows (FileAllInformation).
fn name_of(c: &mut Client, f: ringshare_wire::FileId) -> String {
    let r = c.query_info(f, INFO_FILE, ALL_INFO, 0, 1024);
    let all = FileAllInformation::decode(&output_buffer(&r)).unwrap();
    all.name.file_name
}

/// A client on a share whose calls may wait on a network (`remote`) or not: directory `d`
/// holding `d\f` (opened with DELETE: the open returned) and `d\taken`, and a watch of `d`'s
/// names, pending (its MessageId).
fn renaming_client(remote: bool) -> (Client, Arc<Calls>, ringshare_wire::FileId, u64) {
    let (mut c, calls) = fuse_client(remote);
    let d = c.create("d", 0x0012_0089, D::CREATE, DIRECTORY).unwrap();
    let f = c.create("d\\f", WITH_DELETE, D::CREATE, 0).unwrap();
    let t = c.create("d\\taken", WITH_DELETE, D::CREATE, 0).unwrap();
    assert_eq!(c.close(t).status(), NtStatus::SUCCESS);
    let watch = c.change_notify_msg(d, NAMES, false, 4096);
    let (watch_id, interim) = send_signed(&mut c, watch);
    assert_eq!(interim.len(), 1);
    assert_eq!(interim[0].status(), NtStatus::PENDING, "the watch waits");
    (c, calls, f, watch_id)
}

/// The SET_INFO rename of `d\f` to `to` on both kinds of share: what the offloaded one's jobs
/// came to, and the status the local share answered.
fn rename_both(to: &str, replace: bool) -> (Client, Held, NtStatus, u64) {
    let buf = rename_info(to, replace);
    let (mut c, calls, f, watch_id) = renaming_client(true);
    let m = c.set_info_msg(f, INFO_FILE, RENAME, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    let (mut local, _, lf, _) = renaming_client(false);
    let status = local.set_info(lf, INFO_FILE, RENAME, &buf).status();
    (c, h, status, watch_id)
}

#[test]
fn a_rename_on_a_share_that_may_wait_on_a_network_is_made_in_jobs() {
    let seen_before = {
        let (c, _, _, _) = renaming_client(true);
        (names_seen(&c, "d/f"), names_seen(&c, "d/g"))
    };
    let (mut c, h, local, watch_id) = rename_both("d\\g", false);
    assert_eq!(
        (h.jobs, h.before_jobs),
        (2, 0),
        "two jobs (the look, the rename), no file system call before they ran"
    );
    let set = h
        .answers
        .iter()
        .find(|r| r.hdr.message_id != watch_id)
        .expect("the SET_INFO's answer");
    assert_eq!(set.status(), NtStatus::SUCCESS);
    assert_eq!(local, NtStatus::SUCCESS, "as on a local share");
    assert!(
        h.answers
            .iter()
            .any(|r| r.hdr.message_id == watch_id && r.status() == NtStatus::SUCCESS),
        "the watcher told of the rename: {:?}",
        h.answers
    );
    assert!(
        exists(&c, "d/g") && !exists(&c, "d/f"),
        "the file at its new name"
    );
    assert!(
        names_seen(&c, "d/f") > seen_before.0 && names_seen(&c, "d/g") > seen_before.1,
        "the rename counted at both names (a CREATE that looked either up looks again)"
    );
    let f = c.create("d\\g", 0x0012_0089, D::OPEN, 0).unwrap();
    assert_eq!(
        name_of(&mut c, f),
        "\\d\\g",
        "an open of it shows its new name"
    );
}

#[test]
fn the_renamed_opens_path_follows_its_rename_made_in_a_job() {
    let (mut c, calls, f, _) = renaming_client(true);
    let m = c.set_info_msg(f, INFO_FILE, RENAME, &rename_info("d\\g", false));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.jobs, 2);
    assert_eq!(name_of(&mut c, f), "\\d\\g", "the open's own path");
}

#[test]
fn a_rename_onto_a_taken_name_is_refused_after_its_look_and_changes_nothing() {
    let (c, h, local, watch_id) = rename_both("d\\TAKEN", false);
    assert_eq!(
        (h.jobs, h.before_jobs),
        (1, 0),
        "the look alone, no file system call on the I/O thread"
    );
    assert_eq!(h.answers.len(), 1, "no watcher told: {:?}", h.answers);
    assert_ne!(h.answers[0].hdr.message_id, watch_id);
    assert_eq!(h.answers[0].status(), NtStatus::OBJECT_NAME_COLLISION);
    assert_eq!(
        local,
        NtStatus::OBJECT_NAME_COLLISION,
        "as on a local share"
    );
    assert!(
        exists(&c, "d/f") && exists(&c, "d/taken"),
        "nothing changed"
    );
}

#[test]
fn a_rename_the_back_end_refuses_answers_its_status_and_tells_no_watcher() {
    let (mut c, calls, f, watch_id) = renaming_client(true);
    calls.refuse.store(true, Ordering::SeqCst);
    let m = c.set_info_msg(f, INFO_FILE, RENAME, &rename_info("d\\g", false));
    let h = with_jobs_held(&mut c, &calls, m);
    calls.refuse.store(false, Ordering::SeqCst);
    assert_eq!((h.jobs, h.before_jobs), (2, 0));
    assert_eq!(h.answers.len(), 1, "no watcher told: {:?}", h.answers);
    assert_eq!(h.answers[0].status(), NtStatus::ACCESS_DENIED);
    assert!(exists(&c, "d/f") && !exists(&c, "d/g"));
    assert_eq!(name_of(&mut c, f), "\\d\\f", "the open keeps its name");
    // The file is not left marked as being renamed: the same rename, allowed, is made.
    let m = c.set_info_msg(f, INFO_FILE, RENAME, &rename_info("d\\g", false));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.jobs, 2);
    assert!(
        h.answers
            .iter()
            .any(|r| r.hdr.message_id == watch_id && r.status() == NtStatus::SUCCESS),
        "made, the rename tells the watcher: {:?}",
        h.answers
    );
    assert!(exists(&c, "d/g") && !exists(&c, "d/f"));
}

/// Two opens (of two clients) rename one file at once: the second waits while the first's
/// rename job is out, then renames the file from the name the first gave it.
#[test]
fn a_second_rename_of_a_file_waits_for_the_first_renames_job() {
    let (mut b, calls) = fuse_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    b.put_file("f", b"data");
    let fb = b.create("f", WITH_DELETE, D::OPEN, 0).expect("b opens f");
    let fc = c.create("f", WITH_DELETE, D::OPEN, 0).expect("c opens f");
    // b's rename: its look runs, its rename job is held.
    b.hold_lookups = true;
    let m = b.set_info_msg(fb, INFO_FILE, RENAME, &rename_info("g", false));
    let (b_id, early) = send_signed(&mut b, m);
    assert!(early.is_empty());
    let look = std::mem::take(&mut b.held_lookups);
    b.run_jobs(look);
    assert!(b.pump().is_empty(), "b waits for its rename's job");
    let rename_job = std::mem::take(&mut b.held_lookups);
    assert_eq!(rename_job.len(), 1, "b's rename job");
    // c's rename meanwhile: it waits.
    let m = c.set_info_msg(fc, INFO_FILE, RENAME, &rename_info("h", false));
    let (c_id, mut c_answers) = send_signed(&mut c, m);
    c_answers.extend(c.pump());
    assert!(
        c_answers
            .iter()
            .all(|r| r.hdr.message_id == c_id && r.status() == NtStatus::PENDING),
        "c's rename waits: {c_answers:?}"
    );
    let made_before = calls.all();
    b.run_jobs(rename_job);
    let b_answers = b.pump();
    b.hold_lookups = false;
    assert_eq!(b_answers.len(), 1);
    assert_eq!(
        (b_answers[0].hdr.message_id, b_answers[0].status()),
        (b_id, NtStatus::SUCCESS)
    );
    assert!(calls.all() > made_before, "b's rename made");
    assert!(exists(&b, "g") && !exists(&b, "f"));
    // c's rename, tried again, renames the file from g.
    let fin = c.tick(1_100);
    assert_eq!(fin.len(), 1, "c's rename answered: {fin:?}");
    assert_eq!(
        (fin[0].hdr.message_id, fin[0].status()),
        (c_id, NtStatus::SUCCESS)
    );
    assert!(exists(&c, "h") && !exists(&c, "g") && !exists(&c, "f"));
    assert_eq!(name_of(&mut b, fb), "\\h", "b's open follows both");
}

fn disposition_of(c: &mut Client, calls: &Calls, path: &str, dir: bool) -> Held {
    let kind = if dir { DIRECTORY } else { 0 };
    let f = c.create(path, WITH_DELETE, D::OPEN_IF, kind).unwrap();
    let m = c.set_info_msg(f, INFO_FILE, DISPOSITION, &[1]);
    with_jobs_held(c, calls, m)
}

#[test]
fn a_delete_disposition_of_a_non_empty_directory_is_refused_by_its_job() {
    let (mut c, calls) = fuse_client(true);
    c.create("d", WITH_DELETE, D::CREATE, DIRECTORY).unwrap();
    c.put_file("d\\inside", b"x");
    let h = disposition_of(&mut c, &calls, "d", true);
    assert_eq!(
        (h.jobs, h.before_jobs),
        (1, 0),
        "one job (its stat and listing), no file system call on the I/O thread"
    );
    assert_eq!(h.answers.len(), 1);
    assert_eq!(h.answers[0].status(), NtStatus::DIRECTORY_NOT_EMPTY);
    let (mut local, lcalls) = fuse_client(false);
    local
        .create("d", WITH_DELETE, D::CREATE, DIRECTORY)
        .unwrap();
    local.put_file("d\\inside", b"x");
    let l = disposition_of(&mut local, &lcalls, "d", true);
    assert_eq!(l.jobs, 0, "a local share asks no job");
    assert_eq!(l.answers[0].status(), NtStatus::DIRECTORY_NOT_EMPTY);
    // An empty one's delete becomes pending.
    let h = disposition_of(&mut c, &calls, "e", true);
    assert_eq!((h.jobs, h.before_jobs), (1, 0));
    assert_eq!(h.answers[0].status(), NtStatus::SUCCESS);
}

#[test]
fn a_files_delete_disposition_on_a_share_that_may_wait_on_a_network_is_decided_after_a_job() {
    let (mut c, calls) = fuse_client(true);
    c.put_file("f", b"x");
    let h = disposition_of(&mut c, &calls, "f", false);
    assert_eq!((h.jobs, h.before_jobs), (1, 0));
    assert_eq!(h.answers[0].status(), NtStatus::SUCCESS);
    let f = c.create("f", 0x0012_0089, D::OPEN, 0);
    assert_eq!(
        f.err(),
        Some(NtStatus::DELETE_PENDING),
        "its delete is pending"
    );
}

/// The in-memory share makes no hard links (ACCESS_DENIED, as a back end that offers none):
/// the link's look and link are jobs all the same, and it is answered as on a local share.
#[test]
fn a_link_on_a_share_that_may_wait_on_a_network_is_made_in_jobs() {
    let buf = rename_info("d\\l", false);
    let (mut c, calls, f, watch_id) = renaming_client(true);
    let m = c.set_info_msg(f, INFO_FILE, LINK, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.before_jobs), (2, 0), "the look and the link");
    assert_eq!(h.answers.len(), 1, "no watcher told: {:?}", h.answers);
    assert_ne!(h.answers[0].hdr.message_id, watch_id);
    let (mut local, _, lf, _) = renaming_client(false);
    let status = local.set_info(lf, INFO_FILE, LINK, &buf).status();
    assert_eq!(h.answers[0].status(), status, "as on a local share");
    // Onto a taken name without replace: refused after the look alone.
    let m = c.set_info_msg(f, INFO_FILE, LINK, &rename_info("d\\taken", false));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.before_jobs), (1, 0));
    assert_eq!(h.answers[0].status(), NtStatus::OBJECT_NAME_COLLISION);
}

#[test]
fn a_rename_link_and_delete_disposition_on_a_local_share_ask_no_job() {
    let (mut c, calls, f, watch_id) = renaming_client(false);
    let m = c.set_info_msg(f, INFO_FILE, LINK, &rename_info("d\\l", false));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.jobs, 0, "the link: no job");
    assert!(h.before_jobs > 0, "its calls made at once");
    let m = c.set_info_msg(f, INFO_FILE, RENAME, &rename_info("d\\g", false));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.jobs, 0, "the rename: no job");
    assert!(h.before_jobs > 0, "its calls made at once");
    assert!(h.answers.iter().any(|r| r.hdr.message_id == watch_id));
    assert!(exists(&c, "d/g"));
    let h = disposition_of(&mut c, &calls, "d", true);
    assert_eq!(h.jobs, 0, "the disposition: no job");
    assert!(h.before_jobs > 0);
    assert_eq!(h.answers[0].status(), NtStatus::DIRECTORY_NOT_EMPTY);
}

/// `b` renames its open `fb` to `to` on a share whose calls may wait on a network: its look
/// runs, then its connection ends while its rename job is out, then the job runs.
fn rename_after_its_connection_ends(b: &mut Client, fb: ringshare_wire::FileId, to: &str) {
    b.hold_lookups = true;
    let m = b.set_info_msg(fb, INFO_FILE, RENAME, &rename_info(to, false));
    let (_, early) = send_signed(b, m);
    assert!(early.is_empty());
    let look = std::mem::take(&mut b.held_lookups);
    b.run_jobs(look);
    assert!(b.pump().is_empty());
    let rename_job = std::mem::take(&mut b.held_lookups);
    assert_eq!(rename_job.len(), 1, "b's rename job");
    b.conn.shutdown(b.now);
    b.run_any(rename_job);
    b.pump();
    while !b.held_lookups.is_empty() {
        let held = std::mem::take(&mut b.held_lookups);
        b.run_any(held);
        b.pump();
    }
}

/// A rename whose connection ends while its rename job is out: the job renames the file and
/// the server's table follows (another client's open of it shows the new name), and the file
/// is not left marked as being renamed (that client's own rename of it is made).
#[test]
fn a_rename_whose_connection_ends_while_its_job_is_out_leaves_the_table_following_the_disk() {
    let (mut b, _) = fuse_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    b.put_file("f", b"data");
    let fb = b.create("f", WITH_DELETE, D::OPEN, 0).expect("b opens f");
    let fc = c.create("f", WITH_DELETE, D::OPEN, 0).expect("c opens f");
    rename_after_its_connection_ends(&mut b, fb, "g");
    assert!(exists(&c, "g") && !exists(&c, "f"), "the job renamed it");
    assert_eq!(name_of(&mut c, fc), "\\g", "c's open shows the new name");
    let r = c.set_info(fc, INFO_FILE, RENAME, &rename_info("h", false));
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "not left marked: c renames it"
    );
    assert!(exists(&c, "h") && !exists(&c, "g"));
}

/// A rename whose connection ends while its rename job is out is told all the same: another
/// client's CHANGE_NOTIFY of its directory hears of it (its job tells watchers as its calls
/// succeed, as a local share's rename is told as it is made; the review of session 47,
/// finding 3).
#[test]
fn a_rename_made_after_its_connection_ended_is_told_to_watchers_of_its_directory() {
    let (mut b, _) = fuse_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    let d = c.create("d", 0x0012_0089, D::CREATE, DIRECTORY).unwrap();
    let fb = b
        .create("d\\f", WITH_DELETE, D::CREATE, 0)
        .expect("b makes d\\f");
    let watch = c.change_notify_msg(d, NAMES, false, 4096);
    let (watch_id, interim) = send_signed(&mut c, watch);
    assert_eq!(interim.len(), 1);
    assert_eq!(interim[0].status(), NtStatus::PENDING, "c's watch waits");
    rename_after_its_connection_ends(&mut b, fb, "d\\g");
    assert!(
        exists(&c, "d/g") && !exists(&c, "d/f"),
        "the job renamed it"
    );
    let told = c.pump();
    let answer = told.iter().find(|r| r.hdr.message_id == watch_id);
    assert_eq!(
        answer.map(|r| r.status()),
        Some(NtStatus::SUCCESS),
        "c's watch of d hears of the rename: {told:?}"
    );
}

/// Two renames of one file whose looks are both out at once: the one decided first marks the
/// file; the other, run again with its look after that, waits, then renames from the first's
/// new name. (The mark's test-and-set at the decision's end guards two I/O threads deciding at
/// the same moment, which this one-thread test cannot show: it passes without it.)
#[test]
fn of_two_renames_looking_at_once_the_second_decided_waits_for_the_first() {
    let (mut b, _) = fuse_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    b.put_file("f", b"data");
    let fb = b.create("f", WITH_DELETE, D::OPEN, 0).expect("b opens f");
    let fc = c.create("f", WITH_DELETE, D::OPEN, 0).expect("c opens f");
    b.hold_lookups = true;
    c.hold_lookups = true;
    let m = b.set_info_msg(fb, INFO_FILE, RENAME, &rename_info("g", false));
    let (b_id, _) = send_signed(&mut b, m);
    let m = c.set_info_msg(fc, INFO_FILE, RENAME, &rename_info("h", false));
    let (c_id, _) = send_signed(&mut c, m);
    let (b_look, c_look) = (
        std::mem::take(&mut b.held_lookups),
        std::mem::take(&mut c.held_lookups),
    );
    assert_eq!((b_look.len(), c_look.len()), (1, 1), "both looks out");
    b.run_jobs(b_look);
    assert!(b.pump().is_empty());
    let b_rename = std::mem::take(&mut b.held_lookups);
    assert_eq!(b_rename.len(), 1, "b decided: its rename job");
    c.run_jobs(c_look);
    let waiting = c.pump();
    assert!(
        c.held_lookups.is_empty(),
        "c asks no rename job while b's is out"
    );
    assert!(
        waiting.iter().all(|r| r.status() == NtStatus::PENDING),
        "c's rename waits: {waiting:?}"
    );
    b.run_jobs(b_rename);
    let done = b.pump();
    assert_eq!(
        (done[0].hdr.message_id, done[0].status()),
        (b_id, NtStatus::SUCCESS)
    );
    b.hold_lookups = false;
    c.hold_lookups = false;
    let fin = c.tick(1_100);
    assert_eq!(fin.len(), 1, "c's rename answered: {fin:?}");
    assert_eq!(
        (fin[0].hdr.message_id, fin[0].status()),
        (c_id, NtStatus::SUCCESS)
    );
    assert!(exists(&c, "h") && !exists(&c, "g") && !exists(&c, "f"));
}

/// The rename of a file whose other holder caches its handle (an RH lease), on a share that
/// may wait on a network: it waits for the break's acknowledgment, then is made (as on a local
/// share: oplocks.rs `rename_waits_until_other_clients_give_up_handle_caching`).
#[test]
fn an_offloaded_rename_waits_for_a_handle_caching_break_then_is_made() {
    let (mut a, _) = fuse_client(true);
    let mut b = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    a.put_file("src.txt", b"moving");
    let (r, h) = (1, 2);
    let lease = 0xFF;
    let m = a.create_msg_caching(
        "src.txt",
        0x0012_0089,
        7,
        D::OPEN_IF,
        lease,
        Some(lease_v2(1, r | h)),
    );
    let ra = a.send_frame(m).remove(0);
    assert_eq!(ra.status(), NtStatus::SUCCESS);
    let m = b.create_msg_caching(
        "src.txt",
        0x001F_01FF,
        7,
        D::OPEN_IF,
        lease,
        Some(lease_v2(2, r | h)),
    );
    let rb = b.send_frame(m).remove(0);
    let fb = ringshare_wire::create::CreateResponse::decode(&rb.msg)
        .unwrap()
        .file_id;
    a.breaks();
    let m = b.set_info_msg(fb, INFO_FILE, RENAME, &rename_info("dst.txt", true));
    let rs = b.send_frame(m);
    assert_eq!(
        rs[0].status(),
        NtStatus::PENDING,
        "the rename waits: {rs:?}"
    );
    let got = a.breaks();
    assert_eq!(got.len(), 1, "one lease break: {got:?}");
    assert!(
        b.tick(10).is_empty(),
        "still waiting for the acknowledgment"
    );
    assert_eq!(a.ack_lease(1, r).status(), NtStatus::SUCCESS);
    let fin = b.tick(10);
    assert_eq!(fin.len(), 1, "{fin:?}");
    assert_eq!(fin[0].status(), NtStatus::SUCCESS);
    assert!(exists(&a, "dst.txt") && !exists(&a, "src.txt"));
}

/// smbtorture smb2.lease.rename_wait on one connection, on a share that may wait on a network:
/// the rename by one open waits for the break of the other open's RH lease, is made once it
/// is acknowledged, and the target is then found.
#[test]
fn an_offloaded_rename_that_waited_for_its_own_connections_break_leaves_the_target_found() {
    let (mut a, _) = fuse_client(true);
    let (r, h) = (1, 2);
    let lease = 0xFF;
    let m = a.create_msg_caching(
        "src.dat",
        0x001F_01FF,
        7,
        D::OPEN_IF,
        lease,
        Some(lease_v2(1, r | h)),
    );
    let r1 = a.send_frame(m).remove(0);
    let f1 = ringshare_wire::create::CreateResponse::decode(&r1.msg)
        .unwrap()
        .file_id;
    let m = a.create_msg_caching(
        "src.dat",
        0x0012_0089,
        7,
        D::OPEN,
        lease,
        Some(lease_v2(2, r | h)),
    );
    assert_eq!(a.send_frame(m).remove(0).status(), NtStatus::SUCCESS);
    let m = a.set_info_msg(f1, INFO_FILE, RENAME, &rename_info("dst.dat", true));
    let rs = a.send_frame(m);
    assert!(
        rs.iter().any(|x| x.status() == NtStatus::PENDING),
        "the rename waits: {rs:?}"
    );
    assert_eq!(
        a.create("dst.dat", 0x0012_0089, D::OPEN, 0).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let m = a.ack_lease_msg(2, r);
    let (_, mut fin) = send_signed(&mut a, m);
    fin.extend(a.pump());
    if !fin
        .iter()
        .any(|x| x.hdr.command == ringshare_wire::consts::Command::SET_INFO)
    {
        fin.extend(a.tick(1_100));
    }
    assert!(
        fin.iter().any(
            |x| x.hdr.command == ringshare_wire::consts::Command::SET_INFO
                && x.status() == NtStatus::SUCCESS
        ),
        "the rename answered: {fin:?}"
    );
    assert!(exists(&a, "dst.dat"), "on the share");
    assert!(
        a.create("dst.dat", 0x0012_0089, D::OPEN, 0).is_ok(),
        "the target is found"
    );
}

/// smbtorture smb2.lease.rename_wait's order on a share that may wait on a network: the break
/// of the other open's RH lease that an offloaded rename waits for is sent while the SET_INFO
/// is handled, before the answer to a CREATE sent after it on the same connection, even when
/// that CREATE's job is done first (smbtorture copies the break to acknowledge it right after
/// that CREATE's answer; without the break the acknowledgment names no lease and fails with
/// OBJECT_NAME_NOT_FOUND).
#[test]
fn an_offloaded_renames_break_is_sent_before_a_later_creates_answer() {
    let (mut a, _) = fuse_client(true);
    let (r, h) = (1, 2);
    let lease = 0xFF;
    let m = a.create_msg_caching(
        "src.dat",
        0x001F_01FF,
        7,
        D::OPEN_IF,
        lease,
        Some(lease_v2(1, r | h)),
    );
    let r1 = a.send_frame(m).remove(0);
    let f1 = ringshare_wire::create::CreateResponse::decode(&r1.msg)
        .unwrap()
        .file_id;
    let m = a.create_msg_caching(
        "src.dat",
        0x0012_0089,
        7,
        D::OPEN,
        lease,
        Some(lease_v2(2, r | h)),
    );
    assert_eq!(a.send_frame(m).remove(0).status(), NtStatus::SUCCESS);
    a.hold_lookups = true;
    let m = a.set_info_msg(f1, INFO_FILE, RENAME, &rename_info("dst.dat", true));
    let (set_id, mut seen) = send_signed(&mut a, m);
    let m = a.create_msg_caching(
        "dst.dat",
        0x0012_0089,
        7,
        D::OPEN,
        lease,
        Some(lease_v2(3, r | h)),
    );
    let (create_id, more) = send_signed(&mut a, m);
    seen.extend(more);
    // The CREATE's job (asked last) done before anything the rename asked.
    let create_job = a.held_lookups.pop().expect("the CREATE's job");
    a.run_jobs(vec![create_job]);
    seen.extend(a.pump());
    let create_at = seen
        .iter()
        .position(|x| x.hdr.message_id == create_id)
        .expect("the CREATE answered");
    assert_eq!(seen[create_at].status(), NtStatus::OBJECT_NAME_NOT_FOUND);
    let break_at = seen
        .iter()
        .position(|x| x.hdr.command == ringshare_wire::consts::Command::OPLOCK_BREAK);
    assert!(
        break_at.is_some_and(|b| b < create_at),
        "the lease break sent before the CREATE's answer: {seen:?}"
    );
    // The rest as smbtorture goes on: the break acknowledged, the rename made, the target found.
    a.hold_lookups = false;
    let held = std::mem::take(&mut a.held_lookups);
    a.run_jobs(held);
    let mut fin = a.pump();
    let m = a.ack_lease_msg(2, r);
    let (_, ack) = send_signed(&mut a, m);
    assert_eq!(ack[0].status(), NtStatus::SUCCESS, "the ack names a lease");
    fin.extend(ack);
    fin.extend(a.pump());
    if !fin.iter().any(|x| x.hdr.message_id == set_id) {
        fin.extend(a.tick(1_100));
    }
    assert!(
        fin.iter()
            .any(|x| x.hdr.message_id == set_id && x.status() == NtStatus::SUCCESS),
        "the rename answered: {fin:?}"
    );
    assert!(a.create("dst.dat", 0x0012_0089, D::OPEN, 0).is_ok());
}

/// The rename of `d\f` to `to` with replace on a share that may wait on a network, its look
/// run and its rename job held (asked, not run); a second client of the same server; the
/// SET_INFO's MessageId.
fn rename_decided(to: &str) -> (Client, Client, u64) {
    let (mut a, _, f, _) = renaming_client(true);
    let b = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    a.hold_lookups = true;
    let m = a.set_info_msg(f, INFO_FILE, RENAME, &rename_info(to, true));
    let (set_id, _) = send_signed(&mut a, m);
    let look = std::mem::take(&mut a.held_lookups);
    assert_eq!(look.len(), 1, "the look asked");
    a.run_jobs(look);
    a.pump();
    assert_eq!(a.held_lookups.len(), 1, "the rename job asked, held");
    (a, b, set_id)
}

/// The held rename job of [`rename_decided`] run: the SET_INFO's status.
fn rename_job_run(a: &mut Client, set_id: u64) -> NtStatus {
    a.hold_lookups = false;
    let held = std::mem::take(&mut a.held_lookups);
    a.run_jobs(held);
    let answers = a.pump();
    answers
        .iter()
        .find(|r| r.hdr.message_id == set_id)
        .expect("the SET_INFO's answer")
        .status()
}

/// With replace, a file made and opened at the free target name after the rename's look (and
/// before its job) is not replaced under its open: ACCESS_DENIED, as Samba 4.22 answers a
/// rename onto an open file; the renamed file keeps its name.
#[test]
fn an_offloaded_rename_does_not_replace_a_file_made_and_opened_at_its_target_after_its_look() {
    let (mut a, mut b, set_id) = rename_decided("d\\new");
    let fb = b
        .create("d\\new", WITH_DELETE, D::CREATE, 0)
        .expect("b makes it");
    assert_eq!(rename_job_run(&mut a, set_id), NtStatus::ACCESS_DENIED);
    assert!(exists(&a, "d/f"), "the file keeps its name");
    assert_eq!(
        name_of(&mut b, fb),
        "\\d\\new",
        "b's file still at its name"
    );
    let again = b.create("d\\new", 0x0012_0089, D::OPEN, 0).expect("found");
    assert!(b.close(again).status() == NtStatus::SUCCESS);
}

/// With replace, a file made at the free target name after the rename's look and closed again
/// before its job is replaced, as a look made then would have decided.
#[test]
fn an_offloaded_rename_replaces_a_file_made_and_closed_at_its_target_after_its_look() {
    let (mut a, mut b, set_id) = rename_decided("d\\new");
    let fb = b
        .create("d\\new", WITH_DELETE, D::CREATE, 0)
        .expect("b makes it");
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    assert_eq!(rename_job_run(&mut a, set_id), NtStatus::SUCCESS);
    assert!(exists(&a, "d/new") && !exists(&a, "d/f"), "renamed over it");
}

/// With replace, a file at the target name that nobody had open when the rename was decided,
/// opened before the rename's job: not replaced under its open (ACCESS_DENIED).
#[test]
fn an_offloaded_rename_does_not_replace_a_target_opened_after_it_was_decided() {
    let (mut a, mut b, set_id) = rename_decided("d\\taken");
    let fb = b
        .create("d\\taken", 0x0012_0089, D::OPEN, 0)
        .expect("b opens it");
    assert_eq!(rename_job_run(&mut a, set_id), NtStatus::ACCESS_DENIED);
    assert!(
        exists(&a, "d/f") && exists(&a, "d/taken"),
        "nothing renamed"
    );
    assert_eq!(name_of(&mut b, fb), "\\d\\taken");
}

/// The review of session 47, finding 1: a rename onto another spelling of a file (`d\TAKEN`
/// for `d/taken`) that another client opened after the decision is refused (ACCESS_DENIED)
/// before anything is removed: the file b has open keeps its name, the source its own.
#[test]
fn a_refused_rename_onto_another_spelling_of_a_target_opened_since_removes_nothing() {
    let (mut a, mut b, set_id) = rename_decided("d\\TAKEN");
    let fb = b
        .create("d\\taken", 0x0012_0089, D::OPEN, 0)
        .expect("b opens it");
    assert_eq!(rename_job_run(&mut a, set_id), NtStatus::ACCESS_DENIED);
    assert!(exists(&a, "d/f"), "the source keeps its name");
    assert!(
        exists(&a, "d/taken"),
        "the target b has open is still there"
    );
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
}

/// The review of session 47, finding 6: with replace, a file made at the free target name after
/// the rename's look and held by a POSIX open only is replaced, and marked unlinked as a
/// replaced file is: its POSIX open's delete-on-close then removes nothing by the name it had
/// (before, it removed the renamed file, now at that name).
#[test]
fn a_file_made_at_a_renames_target_after_its_look_and_replaced_keeps_its_posix_open_from_the_name()
{
    let (mut a, _) = fuse_client_with(true, |share| {
        let mut config = config_on(share, ringshare_core::SigningPolicy::IfRequired);
        config.posix_extensions = true;
        server_for(config)
    });
    a.create("d", 0x0012_0089, D::CREATE, DIRECTORY).unwrap();
    let f = a.create("d\\f", WITH_DELETE, D::CREATE, 0).unwrap();
    assert_eq!(a.write(f, 0, b"renamed").status(), NtStatus::SUCCESS);
    a.hold_lookups = true;
    let m = a.set_info_msg(f, INFO_FILE, RENAME, &rename_info("d\\new", true));
    let (set_id, _) = send_signed(&mut a, m);
    let look = std::mem::take(&mut a.held_lookups);
    assert_eq!(look.len(), 1, "the look asked");
    a.run_jobs(look);
    a.pump();
    assert_eq!(a.held_lookups.len(), 1, "the rename job asked, held");
    let (mut p, posix) = support::posix::offering(Arc::clone(&a.server), a.mem.clone(), 9);
    assert!(posix, "POSIX extensions negotiated");
    let pf = support::posix::posix_open(&mut p, "d/new", D::CREATE);
    assert_eq!(rename_job_run(&mut a, set_id), NtStatus::SUCCESS);
    assert!(exists(&a, "d/new") && !exists(&a, "d/f"), "renamed over it");
    support::posix::set_delete_on_close(&mut p, pf);
    assert_eq!(p.close(pf).status(), NtStatus::SUCCESS);
    assert!(exists(&a, "d/new"), "the renamed file keeps its new name");
    let g = a.create("d\\new", 0x0012_0089, D::OPEN, 0).expect("found");
    assert_eq!(read_data(&a.read(g, 0, 7)), b"renamed");
}

/// The review of session 47, finding 6: a case-only rename with replace on a back end that
/// matches names without case (its rename refuses the file's own other spelling as taken) is
/// made, not refused ACCESS_DENIED for the renaming open.
#[test]
fn a_case_only_rename_with_replace_on_a_case_blind_back_end_is_made() {
    let (mut c, calls, f, _) = renaming_client(true);
    calls.case_blind.store(true, Ordering::SeqCst);
    let m = c.set_info_msg(f, INFO_FILE, RENAME, &rename_info("d\\F", true));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.jobs, 2);
    let set = h
        .answers
        .iter()
        .find(|r| r.hdr.command == ringshare_wire::consts::Command::SET_INFO);
    assert_eq!(
        set.map(|r| r.status()),
        Some(NtStatus::SUCCESS),
        "{:?}",
        h.answers
    );
    assert_eq!(name_of(&mut c, f), "\\d\\F");
}
