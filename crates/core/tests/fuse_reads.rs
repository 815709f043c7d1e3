//! READs of files on FUSE file systems ask for no more than the file holds
//! ([`ringshare_vfs::Node::reads_within_size`]): there an io_uring READ that
//! comes up short is continued from the wrong offset and returns the data
//! repeated (ceph-fuse with direct I/O, kernel 6.18: docs/cluster-internals.md,
//! "On CephFS: the runs"). The
//! backend here is the in-memory share with that flaw put back in.
//!
//! On a share whose calls may wait on a network (FUSE, CephFS: `fs calls off io thread = auto`),
//! that size and the check against local POSIX locks are asked as a file system job, away from
//! the I/O thread ([`ringshare_core::fsjob`]): the READ parks meanwhile (issue 33).

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{OpenOptions, RelPath, Share};
use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::header::Header;
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

#[test]
fn a_read_past_the_end_of_a_file_on_fuse_returns_only_what_the_file_holds() {
    let mem = MemShare::new();
    let server = server_on(
        Arc::new(FuseShare::new(mem.clone(), false)),
        ringshare_core::SigningPolicy::IfRequired,
    );
    let mut c = Client::on(server, mem, Options::default());
    let data = b"acknowledged before node 3 died: kca-0.txt";
    let f = file_holding(&mut c, "short.txt", data);
    // The flaw is there: asked for 128 bytes, the node gives 128.
    let opened = FuseShare::new(MemShare::new(), false);
    let who = ringshare_vfs::server_who();
    let path = RelPath::from_components(["x"]).unwrap();
    let mut opts = OpenOptions::read_existing();
    opts.mode = ringshare_vfs::OpenMode::OpenOrCreate;
    opts.write = true;
    let node = opened.open(&who, &path, &opts).unwrap().node;
    node.write_at(data, 0).unwrap();
    assert_eq!(node.read_at(&mut [0; 128], 0).unwrap(), 128, "the flaw");
    // A READ through the server asks for no more than the file holds.
    assert_eq!(read_data(&c.read(f, 0, 128)), data);
    assert_eq!(read_data(&c.read(f, 30, 128)), &data[30..]);
    assert_eq!(c.read(f, 42, 10).status(), NtStatus::END_OF_FILE);
}

/// A READ on a share whose calls may wait on a network, with the file system jobs it asks
/// held: its answer, how many jobs it asked, and the size and lock calls made before they ran.
fn read_with_jobs_held(
    c: &mut Client,
    calls: &Calls,
    f: FileId,
    len: u32,
) -> (Vec<Resp>, usize, (usize, usize)) {
    let before = || {
        (
            calls.sizes.load(Ordering::SeqCst),
            calls.lock_probes.load(Ordering::SeqCst),
        )
    };
    let was = before();
    c.hold_lookups = true;
    let mut m = c.read_msg(f, 0, len);
    c.sign(&mut m);
    assert!(c.send_frame(m).is_empty(), "the READ waits for its job");
    let (a, b) = before();
    let held: Vec<_> = std::mem::take(&mut c.held_lookups);
    assert!(held
        .iter()
        .all(|r| matches!(r.ask, ringshare_core::Lookup::Fs(_))));
    let jobs = held.len();
    c.run_any(held);
    c.hold_lookups = false;
    (c.pump(), jobs, (a - was.0, b - was.1))
}

/// Issue 33: on FUSE, a READ's size check and its check against local POSIX locks wait on the
/// file system; on a share whose calls may wait on a network they are one job, made away from
/// the I/O thread, the READ parked meanwhile, and answered as before once it is done.
#[test]
fn a_reads_checks_on_a_share_that_may_wait_on_a_network_are_asked_as_one_job() {
    let (mut c, calls) = fuse_client(true);
    let data = b"held by the file system for 3 s";
    let f = file_holding(&mut c, "cold", data);
    let (answer, jobs, made_inline) = read_with_jobs_held(&mut c, &calls, f, 128);
    assert_eq!(jobs, 1, "one job for both checks");
    assert_eq!(
        made_inline,
        (0, 0),
        "no size or lock call before the job ran"
    );
    assert_eq!(
        read_data(&answer[0]),
        data,
        "read within the size the job found"
    );
    assert_eq!(
        (
            calls.sizes.load(Ordering::SeqCst) > 0,
            calls.lock_probes.load(Ordering::SeqCst) > 0
        ),
        (true, true),
        "the job asked both"
    );
    // A local program's lock, found by the job, refuses the READ as it did inline.
    calls.locked.store(true, Ordering::SeqCst);
    let (answer, jobs, _) = read_with_jobs_held(&mut c, &calls, f, 128);
    assert_eq!(
        (jobs, answer[0].status()),
        (1, NtStatus::FILE_LOCK_CONFLICT)
    );
}

/// The review of steps 3-4, finding G: a READ's job is asked as one the pool need not order
/// after the open's other READs' jobs (the connection holds what is not a READ behind it);
/// a WRITE's is ordered.
#[test]
fn a_reads_job_is_asked_unordered_among_reads_and_a_writes_in_order() {
    let (mut c, _calls) = fuse_client(true);
    let f = c
        .create("cold", 0x0012_019f, D::OPEN_IF, 0)
        .expect("create");
    let tree = c.tree_id;
    let mut asked = Vec::new();
    for read in [true, false] {
        c.hold_lookups = true;
        let mut m = if read {
            c.read_msg(f, 0, 16)
        } else {
            c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
                write_body(o, f, 0, b"x")
            })
        };
        c.sign(&mut m);
        assert!(c.send_frame(m).is_empty(), "it waits for its job");
        let held = std::mem::take(&mut c.held_lookups);
        for r in &held {
            if let ringshare_core::Lookup::Fs(j) = &r.ask {
                asked.push((read, j.among_reads, j.order != 0));
            }
        }
        c.run_any(held);
        c.hold_lookups = false;
        c.pump();
    }
    assert_eq!(
        asked,
        vec![(true, true, true), (false, false, true)],
        "(is a READ, among reads, of an open's order)"
    );
}

/// On a share whose file system only this kernel changes nothing is asked away: the READ's
/// checks are made as before, with no job.
#[test]
fn a_reads_checks_on_a_local_share_are_made_at_once() {
    let (mut c, calls) = fuse_client(false);
    let f = file_holding(&mut c, "warm", b"here");
    c.hold_lookups = true;
    assert_eq!(read_data(&c.read(f, 0, 128)), b"here");
    assert!(c.held_lookups.is_empty(), "no job");
    assert!(
        calls.sizes.load(Ordering::SeqCst) > 0,
        "the size asked inline"
    );
}

/// What the connection tells the driver of a WRITE of `data` to `f` (credits charged for its
/// size) once the WRITE's head came in: `Some(len)` to splice its payload, `None` to receive it
/// whole.
fn large_write_detachable(c: &mut Client, f: FileId, data: &[u8]) -> Option<usize> {
    let tree = c.tree_id;
    let mut msg = c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, f, 0, data)
    });
    let charge = data.len().div_ceil(65536) as u16;
    msg[6..8].copy_from_slice(&charge.to_le_bytes());
    let head = &msg[..ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET];
    c.conn.detachable_write(head, msg.len())
}

/// A WRITE large enough to be spliced whose lock check is a file system job (a share whose
/// calls may wait on a network, no lease that caches writes) is received whole: spliced, its
/// pipes would be held for as long as the job takes. On a local share the same WRITE is
/// spliced.
#[test]
fn a_large_write_whose_lock_check_is_a_file_system_job_is_received_whole() {
    let detachable = |remote: bool| {
        let (mut c, _) = fuse_client(remote);
        c.conn.set_send_file(true);
        let f = c.create("big", 0x0012_019f, D::OPEN_IF, 0).expect("create");
        let data = vec![7u8; ringshare_core::WRITE_SPLICE_LEN_MIN];
        large_write_detachable(&mut c, f, &data)
    };
    assert_eq!(detachable(true), None, "received whole");
    assert_eq!(
        detachable(false),
        Some(ringshare_core::WRITE_SPLICE_LEN_MIN),
        "spliced on a local share"
    );
}

/// The answer of a READ's file system job belongs to that READ: in a compound [READ of a file on
/// one tree, READ of another file on another tree], a READ whose tree was disconnected while its
/// job ran fails when it runs again, and the next READ asks its own job rather than take the
/// leftover answer (the first file's size: it would be told END_OF_FILE for bytes its own file
/// holds).
#[test]
fn a_jobs_answer_left_by_a_member_that_failed_is_not_taken_by_the_next_member_of_its_compound() {
    let (mut c, _) = fuse_client(true);
    let (t1, t2) = (c.tree_id, c.tree_connect("share"));
    let short = file_holding(&mut c, "short", b"four");
    c.tree_id = t2;
    let long = c.create("long", 0x0012_019f, D::OPEN_IF, 0).expect("long");
    let data: Vec<u8> = (0..100u8).collect();
    assert_eq!(c.write(long, 0, &data).status(), NtStatus::SUCCESS);
    let second = c.read_msg(long, 50, 10);
    c.tree_id = t1;
    let first = c.read_msg(short, 0, 4);
    c.hold_lookups = true;
    assert!(
        c.compound(vec![first, second], false).is_empty(),
        "the first READ waits for its job"
    );
    let held: Vec<_> = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "the first READ's job");
    let gone = c.call(Command::TREE_DISCONNECT, t1, empty_body);
    assert_eq!(gone.status(), NtStatus::SUCCESS);
    let mut answers = Vec::new();
    let mut jobs = held;
    while !jobs.is_empty() {
        c.run_any(jobs);
        answers.extend(c.pump());
        jobs = std::mem::take(&mut c.held_lookups);
    }
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::NETWORK_NAME_DELETED, NtStatus::SUCCESS],
        "the first READ's tree is gone; the second reads its own file"
    );
    assert_eq!(read_data(&answers[1]), &data[50..60]);
}

/// The order rule (issue 33, docs/cluster-internals.md, "Ordering"): a WRITE parked on its file
/// system job, then a CLOSE of the same open sent before its answer. The CLOSE waits behind the
/// WRITE's job and runs after it: the WRITE is done and answered first, then the CLOSE. (Run
/// at once, the CLOSE closed the open under the parked WRITE, which then got FILE_CLOSED.)
#[test]
fn a_close_sent_after_a_write_waiting_for_its_file_system_job_runs_after_it() {
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), true));
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let mut c = Client::on(server, mem.clone(), Options::default());
    let f = c
        .create("order", 0x0012_019f, D::OPEN_IF, 0)
        .expect("create");
    c.hold_lookups = true;
    let tree = c.tree_id;
    let data = b"written before the close";
    let mut w = c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, f, 0, data)
    });
    c.sign(&mut w);
    let write_mid = Header::decode(&w).expect("header").message_id;
    assert!(c.send_frame(w).is_empty(), "the WRITE waits for its job");
    let mut close = c.close_msg(f, 0);
    c.sign(&mut close);
    let close_mid = Header::decode(&close).expect("header").message_id;
    let early = c.send_frame(close);
    assert!(
        early.is_empty(),
        "the CLOSE waits behind the WRITE's job, not answered at once: {:?}",
        early.iter().map(|r| r.status()).collect::<Vec<_>>()
    );
    let held = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "only the WRITE's job is out");
    c.hold_lookups = false;
    c.run_any(held);
    let answers: Vec<_> = c
        .pump()
        .iter()
        .map(|r| (r.hdr.message_id, r.status()))
        .collect();
    assert_eq!(
        answers,
        vec![
            (write_mid, NtStatus::SUCCESS),
            (close_mid, NtStatus::SUCCESS)
        ],
        "the WRITE, then the CLOSE"
    );
    let f = c
        .create("order", 0x0012_019f, D::OPEN, 0)
        .expect("open again");
    assert_eq!(
        read_data(&c.read(f, 0, 64)),
        data,
        "the WRITE's bytes are there"
    );
}

/// On a share whose calls are made on the I/O thread no job is asked, so nothing waits: a
/// WRITE and the CLOSE after it are answered as they come.
#[test]
fn a_close_after_a_write_on_a_local_share_waits_for_nothing() {
    let (mut c, _) = fuse_client(false);
    let f = c
        .create("here", 0x0012_019f, D::OPEN_IF, 0)
        .expect("create");
    c.hold_lookups = true;
    assert_eq!(c.write(f, 0, b"x").status(), NtStatus::SUCCESS);
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    assert!(c.held_lookups.is_empty(), "no job");
}

/// What a CLOSE with POSTQUERY_ATTRIB of a file `data` was written to came to on a share whose
/// calls may wait on a network (`remote`) or not: the jobs it asked, the nodes let go before
/// they ran and after, its answer's status, and the file's size it reported.
fn close_with_jobs_held(remote: bool, data: &[u8]) -> (usize, usize, usize, NtStatus, u64) {
    let (mut c, calls) = fuse_client(remote);
    let f = file_holding(&mut c, "closing", data);
    let before = calls.dropped.load(Ordering::SeqCst);
    c.hold_lookups = true;
    let mut close = c.close_msg(f, 1);
    c.sign(&mut close);
    let mut answers = c.send_frame(close);
    let held = std::mem::take(&mut c.held_lookups);
    let jobs = held.len();
    let dropped_first = calls.dropped.load(Ordering::SeqCst) - before;
    c.hold_lookups = false;
    c.run_jobs(held);
    answers.extend(c.pump());
    assert_eq!(answers.len(), 1, "one answer");
    let resp = ringshare_wire::create::CloseResponse::decode(&answers[0].msg).expect("close");
    let dropped = calls.dropped.load(Ordering::SeqCst) - before;
    (
        jobs,
        dropped_first,
        dropped,
        answers[0].status(),
        resp.end_of_file,
    )
}

/// Step 3 of issue 33: on a share whose calls may wait on a network, a CLOSE hands its open's
/// node to a file system job, so that the descriptor's last close (on FUSE a FLUSH request the
/// closing thread waits for) is made on the pool, not the I/O thread; the CLOSE is answered
/// once it is done, with the attributes the job read before it (POSTQUERY_ATTRIB).
#[test]
fn a_close_on_a_share_that_may_wait_on_a_network_lets_its_file_go_in_a_job() {
    let data = b"its size is in the CLOSE's answer";
    let (jobs, dropped_first, dropped, status, eof) = close_with_jobs_held(true, data);
    assert_eq!(jobs, 1, "one job");
    assert_eq!(
        dropped_first, 0,
        "the node is not let go before the job ran"
    );
    assert_eq!(dropped, 1, "the job let it go");
    assert_eq!(status, NtStatus::SUCCESS);
    assert_eq!(eof, data.len() as u64, "the attributes the job read");
}

/// Step 6 of issue 33: the write time a CLOSE of a written handle settles is written to the file
/// (on FUSE a SETATTR, which waits for a WRITE under way on the file, as the demo's
/// `--action write-close` showed) in a file system job, not on the I/O thread, and before the
/// close is made (the file's entry, which shows the time to others, goes with the close, and
/// watchers are told then); with POSTQUERY_ATTRIB and without.
#[test]
fn a_written_files_close_on_a_share_that_may_wait_on_a_network_keeps_its_write_time_in_a_job() {
    for postquery in [0u16, 1] {
        let (mut c, calls) = fuse_client(true);
        let f = file_holding(&mut c, "written", b"some bytes");
        let (times, dropped) = (
            calls.times_set.load(Ordering::SeqCst),
            calls.dropped.load(Ordering::SeqCst),
        );
        c.hold_lookups = true;
        let mut close = c.close_msg(f, postquery);
        c.sign(&mut close);
        let mut answers = c.send_frame(close);
        assert_eq!(
            calls.times_set.load(Ordering::SeqCst),
            times,
            "no time set on the I/O thread (POSTQUERY_ATTRIB {postquery})"
        );
        let first = std::mem::take(&mut c.held_lookups);
        assert_eq!(first.len(), 1, "the write time's job");
        c.run_jobs(first);
        answers.extend(c.pump());
        assert_eq!(
            (
                calls.times_set.load(Ordering::SeqCst) - times,
                calls.dropped.load(Ordering::SeqCst) - dropped
            ),
            (1, 0),
            "the time written by the first job, before the close let the file go"
        );
        while !c.held_lookups.is_empty() {
            let held = std::mem::take(&mut c.held_lookups);
            c.run_jobs(held);
            answers.extend(c.pump());
        }
        c.hold_lookups = false;
        assert_eq!(answers.len(), 1, "answered");
        assert_eq!(answers[0].status(), NtStatus::SUCCESS);
        assert_eq!(
            calls.times_set.load(Ordering::SeqCst) - times,
            1,
            "written once"
        );
    }
}

/// Step 6 of issue 33: the closes nobody waits for (a TREE_DISCONNECT's, a LOGOFF's, a
/// connection's end) let their files go in file system jobs on a share whose calls may wait on
/// a network, as a CLOSE does: the node is not let go on the I/O thread (its last close on FUSE
/// is a FLUSH the closing thread waits for), but by the job. On a local share at once.
#[test]
fn a_tree_disconnects_closes_let_their_files_go_in_jobs_on_a_share_that_may_wait_on_a_network() {
    for remote in [true, false] {
        let (mut c, calls) = fuse_client(remote);
        let tree = c.tree_id;
        file_holding(&mut c, "left-open", b"still open at the disconnect");
        let before = calls.dropped.load(Ordering::SeqCst);
        c.hold_lookups = true;
        let r = c.call(Command::TREE_DISCONNECT, tree, empty_body);
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let held = std::mem::take(&mut c.held_lookups);
        let jobs = held
            .iter()
            .filter(|r| matches!(r.ask, ringshare_core::Lookup::Fs(_)))
            .count();
        let dropped_first = calls.dropped.load(Ordering::SeqCst) - before;
        c.hold_lookups = false;
        c.run_any(held);
        c.pump();
        let dropped = calls.dropped.load(Ordering::SeqCst) - before;
        if remote {
            assert_eq!(
                (jobs, dropped_first, dropped),
                (1, 0, 1),
                "one job, which let the file go"
            );
        } else {
            assert_eq!((jobs, dropped_first), (0, 1), "no job, let go at once");
        }
    }
}

/// Step 6 of issue 33: a connection's end closes its files as a TREE_DISCONNECT does: on a
/// share whose calls may wait on a network each last close is a file system job.
#[test]
fn a_connections_end_lets_its_files_go_in_jobs_on_a_share_that_may_wait_on_a_network() {
    let (mut c, calls) = fuse_client(true);
    file_holding(&mut c, "one", b"open at the end");
    file_holding(&mut c, "two", b"open at the end too");
    let before = calls.dropped.load(Ordering::SeqCst);
    c.hold_lookups = true;
    c.conn.shutdown(c.now);
    assert!(c.pump().is_empty(), "nothing answered");
    let held = std::mem::take(&mut c.held_lookups);
    let jobs = held
        .iter()
        .filter(|r| matches!(r.ask, ringshare_core::Lookup::Fs(_)))
        .count();
    assert_eq!(
        (jobs, calls.dropped.load(Ordering::SeqCst) - before),
        (2, 0),
        "a job per file, none let go on the I/O thread"
    );
    c.hold_lookups = false;
    for req in held {
        req.run();
    }
    assert_eq!(
        calls.dropped.load(Ordering::SeqCst) - before,
        2,
        "the jobs let them go"
    );
}

/// On a share whose calls are made on the I/O thread a CLOSE asks no job: the node goes at
/// once and the attributes are read there, as before.
#[test]
fn a_close_on_a_local_share_lets_its_file_go_at_once() {
    let data = b"local";
    let (jobs, dropped_first, _, status, eof) = close_with_jobs_held(false, data);
    assert_eq!((jobs, dropped_first), (0, 1), "no job, let go at once");
    assert_eq!((status, eof), (NtStatus::SUCCESS, data.len() as u64));
}

/// A QUERY_INFO of `info_type`/`class` of a file `data` was written to, on a share whose calls
/// may wait on a network (`remote`) or not, with the jobs it asks held: the jobs, the stat and
/// statfs calls made before they ran, and the answer.
fn query_with_jobs_held(
    remote: bool,
    data: &[u8],
    info_type: u8,
    class: u8,
) -> (usize, (usize, usize), Resp) {
    let (mut c, calls) = fuse_client(remote);
    let f = file_holding(&mut c, "queried", data);
    let count = || {
        (
            calls.stats.load(Ordering::SeqCst),
            calls.statfs.load(Ordering::SeqCst),
        )
    };
    let was = count();
    c.hold_lookups = true;
    let mut m = c.query_info_msg(f, info_type, class, 4096);
    c.sign(&mut m);
    let mut answers = c.send_frame(m);
    let (a, b) = count();
    let held = std::mem::take(&mut c.held_lookups);
    let jobs = held.len();
    c.hold_lookups = false;
    c.run_jobs(held);
    answers.extend(c.pump());
    assert_eq!(answers.len(), 1, "one answer");
    (jobs, (a - was.0, b - was.1), answers.remove(0))
}

/// The FileStandardInformation's EndOfFile in a QUERY_INFO's answer.
fn end_of_file(r: &Resp) -> u64 {
    let b = &r.body()[8..];
    u64::from_le_bytes(b[8..16].try_into().unwrap())
}

/// Step 4 of issue 33: on a share whose calls may wait on a network, a QUERY_INFO of a class
/// the backend answers with a file system call (the file's attributes; the file system's size,
/// a statfs) is answered in one file system job, away from the I/O thread: no stat or statfs
/// is made before it ran, and the answer is the one made there.
#[test]
fn a_query_info_on_a_share_that_may_wait_on_a_network_is_answered_in_a_job() {
    let data = b"seen by the job";
    let (jobs, inline, r) = query_with_jobs_held(true, data, 1, 5);
    assert_eq!(
        (jobs, inline),
        (1, (0, 0)),
        "FileStandardInformation: one job"
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(end_of_file(&r), data.len() as u64, "the size the job read");
    let (jobs, inline, r) = query_with_jobs_held(true, data, 1, 18);
    assert_eq!(
        (jobs, inline, r.status()),
        (1, (0, 0), NtStatus::SUCCESS),
        "FileAllInformation"
    );
    let (jobs, inline, r) = query_with_jobs_held(true, data, 2, 3);
    assert_eq!(
        (jobs, inline, r.status()),
        (1, (0, 0), NtStatus::SUCCESS),
        "FileFsSizeInformation"
    );
    // Every file class reads the file's attributes first, FileAccessInformation too.
    let (jobs, _, r) = query_with_jobs_held(true, data, 1, 8);
    assert_eq!(
        (jobs, r.status()),
        (1, NtStatus::SUCCESS),
        "FileAccessInformation"
    );
}

/// On a share whose calls are made on the I/O thread a QUERY_INFO asks no job.
#[test]
fn a_query_info_on_a_local_share_is_answered_at_once() {
    let data = b"local";
    let (jobs, inline, r) = query_with_jobs_held(false, data, 1, 5);
    assert_eq!(jobs, 0, "no job");
    assert!(inline.0 > 0, "the stat made at once");
    assert_eq!(end_of_file(&r), data.len() as u64);
}

/// A QUERY_DIRECTORY (FileIdBothDirectoryInformation, `*`) of a directory holding `a.txt`, on a
/// share whose calls may wait on a network (`remote`) or not, sent twice with the jobs held:
/// for each, the jobs it asked, the stat calls made before they ran, and the answer.
fn list_with_jobs_held(remote: bool) -> Vec<(usize, usize, Resp)> {
    let (mut c, calls) = fuse_client(remote);
    let d = c.create("d", 0x001f_01ff, D::CREATE, 1).expect("mkdir");
    let f = c
        .create("d\\a.txt", 0x0012_019f, D::CREATE, 0)
        .expect("create");
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    let mut out = Vec::new();
    for _ in 0..2 {
        let was = calls.stats.load(Ordering::SeqCst);
        c.hold_lookups = true;
        let tree = c.tree_id;
        let mut m = c.message(
            ringshare_wire::consts::Command::QUERY_DIRECTORY,
            tree,
            |o| {
                use ringshare_wire::WriteExt;
                let mut name = Vec::new();
                ringshare_wire::utf16::encode_utf16le("*", &mut name);
                o.put_u16(33);
                o.put_u8(37); // FileIdBothDirectoryInformation
                o.put_u8(0);
                o.put_u32(0);
                d.write(o);
                o.put_u16(96);
                o.put_u16(name.len() as u16);
                o.put_u32(65536);
                o.put_bytes(&name);
            },
        );
        c.sign(&mut m);
        let mut answers = c.send_frame(m);
        let inline = calls.stats.load(Ordering::SeqCst) - was;
        let held = std::mem::take(&mut c.held_lookups);
        let jobs = held.len();
        c.hold_lookups = false;
        c.run_any(held);
        answers.extend(c.pump());
        assert_eq!(answers.len(), 1, "one answer");
        out.push((jobs, inline, answers.remove(0)));
    }
    out
}

/// Whether `r`'s entries name `name`.
fn lists(r: &Resp, name: &str) -> bool {
    let mut n = Vec::new();
    ringshare_wire::utf16::encode_utf16le(name, &mut n);
    r.body().windows(n.len()).any(|w| w == n)
}

/// Step 4 of issue 33: on a share whose calls may wait on a network, a QUERY_DIRECTORY's
/// listing and its entries' stat and DOS attribute reads are one file system job: no stat
/// before it ran, the entries it found in the answer, and the next query (NO_MORE_FILES) is a
/// job too.
#[test]
fn a_query_directory_on_a_share_that_may_wait_on_a_network_is_one_job() {
    let got = list_with_jobs_held(true);
    let (jobs, inline, r) = &got[0];
    assert_eq!((*jobs, *inline), (1, 0), "one job, no stat before it");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(lists(r, "a.txt"), "the entry the job found");
    let (jobs, _, r) = &got[1];
    assert_eq!((*jobs, r.status()), (1, NtStatus::NO_MORE_FILES));
}

/// On a share whose calls are made on the I/O thread a QUERY_DIRECTORY asks no job.
#[test]
fn a_query_directory_on_a_local_share_is_answered_at_once() {
    let got = list_with_jobs_held(false);
    let (jobs, inline, r) = &got[0];
    assert_eq!(*jobs, 0, "no job");
    assert!(*inline > 0, "the entries stat'ed at once");
    assert!(lists(r, "a.txt"));
    assert_eq!(got[1].2.status(), NtStatus::NO_MORE_FILES);
}

/// A server on `share` with `posix locking = no`: a WRITE there asks no file system job (no
/// local lock to look for) but a file's first (its time before it), a READ on FUSE still asks
/// one (the file's size).
fn server_without_posix_locking(share: Arc<FuseShare>) -> Arc<ringshare_core::ServerState> {
    let mut config = config_on(share, ringshare_core::SigningPolicy::IfRequired);
    for s in &mut config.shares {
        Arc::get_mut(s).expect("one owner").posix_locking = false;
    }
    server_from(config)
}

/// Step 6 of issue 33: a file's first WRITE reads the file's modification time before it (the
/// write time clients see until the update shows); on a share whose calls may wait on a
/// network that stat (a FUSE GETATTR) is made in a file system job, not on the I/O thread, even
/// where the WRITE would ask none (`posix locking = no`); the next WRITE asks nothing.
#[test]
fn a_files_first_write_reads_its_time_in_a_job_on_a_share_that_may_wait_on_a_network() {
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), true));
    let calls = Arc::clone(&share.1);
    let server = server_without_posix_locking(share);
    let mut c = Client::on(server, mem, Options::default());
    let f = c
        .create("fresh", 0x0012_019f, D::OPEN_IF, 0)
        .expect("create");
    let tree = c.tree_id;
    let mut jobs = Vec::new();
    for round in 0..2 {
        let stats = calls.stats.load(Ordering::SeqCst);
        c.hold_lookups = true;
        let mut w = c.message(Command::WRITE, tree, |o| write_body(o, f, 0, b"data"));
        c.sign(&mut w);
        let mut answers = c.send_frame(w);
        let held = std::mem::take(&mut c.held_lookups);
        let inline = calls.stats.load(Ordering::SeqCst) - stats;
        jobs.push((round, held.len(), inline));
        c.hold_lookups = false;
        c.run_jobs(held);
        answers.extend(c.pump());
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    }
    assert_eq!(
        jobs,
        [(0, 1, 0), (1, 0, 0)],
        "(WRITE, jobs asked, stats on the I/O thread): the first asks one, the second none"
    );
}

/// The review of the order rule, finding 1: a request let go from behind an open's file system
/// job is ordered itself. A READ parked on its job (the size on FUSE), then a WRITE that asks
/// no job (`posix locking = no`) and a CLOSE of the same open, sent before the READ's answer:
/// the WRITE waits behind the READ, and once let go, its I/O holds the CLOSE in turn. The
/// CLOSE runs only once the WRITE's I/O is done, so it is answered after it (with the size the
/// WRITE made) and its last close is made in its job, not where the WRITE's I/O let the node go.
/// (Without the fix the CLOSE ran as soon as the WRITE was let go: its job was asked while the
/// WRITE's I/O was still out.)
#[test]
fn a_close_behind_a_write_let_go_from_behind_a_reads_job_waits_for_the_writes_io() {
    let (mut c, calls) = fuse_client_with(true, server_without_posix_locking);
    let f = file_holding(&mut c, "ordered", b"before");
    c.hold_lookups = true;
    c.hold_io = true;
    let m = c.read_msg(f, 0, 64);
    let (read_mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "the READ waits for its job");
    assert_eq!(c.held_lookups.len(), 1, "the READ's job");
    let tree = c.tree_id;
    let data = b"written by the WRITE let go from behind the READ";
    let m = c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, f, 0, data)
    });
    let (write_mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "the WRITE waits behind the READ's job");
    let m = c.close_msg(f, 1);
    let (close_mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "the CLOSE waits too");
    assert_eq!(c.held_lookups.len(), 1, "only the READ's job is out");
    let dropped = calls.dropped.load(Ordering::SeqCst);
    // The READ's job, then its I/O: the READ is answered, the WRITE let go parks on its I/O.
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
    }
    let mut answers = c.pump();
    assert!(answers.is_empty(), "the READ's I/O is out");
    answers.extend(c.run_held_io());
    assert_eq!(c.held_io.len(), 1, "the WRITE's I/O is out");
    assert!(
        c.held_lookups.is_empty(),
        "the CLOSE did not run while the WRITE's I/O is out (no last-close job asked)"
    );
    // The WRITE's I/O is done: the WRITE is answered, then the CLOSE asks its job.
    answers.extend(c.run_held_io());
    assert_eq!(c.held_lookups.len(), 1, "the CLOSE's job");
    assert_eq!(
        calls.dropped.load(Ordering::SeqCst),
        dropped,
        "the node is not let go before the CLOSE's job ran"
    );
    c.hold_lookups = false;
    c.hold_io = false;
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
    }
    // (With POSTQUERY_ATTRIB the CLOSE's first job reads the attributes; the one that lets
    // the node go runs with the pump.)
    answers.extend(c.pump());
    assert_eq!(
        calls.dropped.load(Ordering::SeqCst),
        dropped + 1,
        "the CLOSE's job let it go"
    );
    let order: Vec<_> = answers
        .iter()
        .map(|r| (r.hdr.message_id, r.status()))
        .collect();
    assert_eq!(
        order,
        [
            (read_mid, NtStatus::SUCCESS),
            (write_mid, NtStatus::SUCCESS),
            (close_mid, NtStatus::SUCCESS)
        ],
        "the READ, the WRITE, then the CLOSE"
    );
    let resp = ringshare_wire::create::CloseResponse::decode(&answers[2].msg).expect("close");
    assert_eq!(
        resp.end_of_file,
        data.len() as u64,
        "the size the WRITE made"
    );
}

/// A QUERY_DIRECTORY (FileIdBothDirectoryInformation, `*`) of directory `d`.
fn query_directory_msg(c: &mut Client, d: FileId) -> Vec<u8> {
    let tree = c.tree_id;
    c.message(
        ringshare_wire::consts::Command::QUERY_DIRECTORY,
        tree,
        |o| {
            use ringshare_wire::WriteExt;
            let mut name = Vec::new();
            ringshare_wire::utf16::encode_utf16le("*", &mut name);
            o.put_u16(33);
            o.put_u8(37);
            o.put_u8(0);
            o.put_u32(0);
            d.write(o);
            o.put_u16(96);
            o.put_u16(name.len() as u16);
            o.put_u32(65536);
            o.put_bytes(&name);
        },
    )
}

/// The review of step 4, finding 3: a QUERY_DIRECTORY's job on a share whose calls may wait on
/// a network does not hold the open's state lock across its entries' file system calls. While
/// the job waits in an entry's stat (a stalled FUSE file system, 1.5 s here), a
/// TREE_DISCONNECT of the same tree (which closes the directory's open, under that lock, on
/// the I/O thread) is answered at once, not after the stall. (Without the fix it waited the
/// stall out.)
#[test]
fn a_tree_disconnect_while_a_listing_job_stalls_on_an_entry_does_not_wait_for_it() {
    let (mut c, calls) = fuse_client(true);
    let d = c.create("d", 0x001f_01ff, D::CREATE, 1).expect("mkdir");
    let f = c
        .create("d\\a.txt", 0x0012_019f, D::CREATE, 0)
        .expect("create");
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    c.hold_lookups = true;
    let m = query_directory_msg(&mut c, d);
    let (_, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "the QUERY_DIRECTORY waits for its job");
    let mut held = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "its job");
    let job = held.remove(0);
    calls.stall_entry_ms.store(1500, Ordering::SeqCst);
    let pool = std::thread::spawn(move || {
        let done = job.run();
        (job.id, done)
    });
    let t0 = std::time::Instant::now();
    while !calls.stalled.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed().as_secs() < 5,
            "the job reached an entry's stat"
        );
        std::thread::yield_now();
    }
    let tree = c.tree_id;
    let started = std::time::Instant::now();
    let r = c.call(
        ringshare_wire::consts::Command::TREE_DISCONNECT,
        tree,
        empty_body,
    );
    let took = started.elapsed();
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(
        calls.stalled.load(Ordering::SeqCst),
        "answered while the job still waits on the file system"
    );
    assert!(
        took < std::time::Duration::from_millis(750),
        "the TREE_DISCONNECT did not wait the stall out: {took:?}"
    );
    let (id, done) = pool.join().expect("the job");
    c.conn.complete_lookup(c.now, id, done);
    c.pump();
}

/// Run the held lookups (file system jobs) and what follows; the responses sent.
fn run_held_jobs(c: &mut Client) -> Vec<Resp> {
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
    }
    c.pump()
}

/// The review of the order rule, finding 2: READs of one open need no order among themselves.
/// On a share whose calls may wait on a network two READs of one open sent back to back each
/// ask their job at once and have their I/O out together (as before the rule), where the
/// second used to wait for the first's job and I/O. A WRITE sent while they are out waits for
/// both, and a READ sent after the WRITE waits for it: the answers come READ, READ, WRITE,
/// READ, the last READ seeing the WRITE's bytes.
#[test]
fn two_reads_of_one_open_do_not_wait_for_each_other_but_a_write_waits_for_both() {
    let (mut c, _) = fuse_client(true);
    let f = file_holding(&mut c, "shared", b"old!");
    c.hold_lookups = true;
    c.hold_io = true;
    let m = c.read_msg(f, 0, 4);
    let (r1, _) = send_signed(&mut c, m);
    let m = c.read_msg(f, 0, 4);
    let (r2, _) = send_signed(&mut c, m);
    assert_eq!(c.held_lookups.len(), 2, "each READ asked its job at once");
    let mut answers = run_held_jobs(&mut c);
    assert_eq!(c.held_io.len(), 2, "both READs' I/O out together");
    let tree = c.tree_id;
    let m = c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, f, 0, b"new!")
    });
    let (w, _) = send_signed(&mut c, m);
    let m = c.read_msg(f, 0, 4);
    let (r3, _) = send_signed(&mut c, m);
    assert!(
        c.held_lookups.is_empty(),
        "the WRITE waits for the READs, the READ after it for the WRITE"
    );
    // The READs' I/O: both answered, then the WRITE asks its job (the READ still waits).
    answers.extend(c.run_held_io());
    assert_eq!(c.held_lookups.len(), 1, "the WRITE's job alone");
    answers.extend(run_held_jobs(&mut c));
    answers.extend(c.run_held_io());
    c.hold_lookups = false;
    c.hold_io = false;
    answers.extend(run_held_jobs(&mut c));
    answers.extend(c.pump());
    let order: Vec<_> = answers.iter().map(|r| r.hdr.message_id).collect();
    assert_eq!(order, [r1, r2, w, r3]);
    assert_eq!(read_data(&answers[0]), b"old!");
    assert_eq!(
        read_data(&answers[3]),
        b"new!",
        "the last READ after the WRITE"
    );
}

/// The review of the order rule, finding 5: a WRITE large enough to be spliced that asks no
/// file system job itself (`posix locking = no`) but would wait behind another request's job
/// about its open is received whole: spliced and parked behind, it would hold its pipes as
/// long as that job (a stalled file system: for good). Nothing out about the open, it is
/// spliced.
#[test]
fn a_large_write_that_would_wait_behind_its_opens_job_is_received_whole() {
    let (mut c, _) = fuse_client_with(true, server_without_posix_locking);
    c.conn.set_send_file(true);
    let f = c.create("big", 0x0012_019f, D::OPEN_IF, 0).expect("create");
    let data = vec![7u8; ringshare_core::WRITE_SPLICE_LEN_MIN];
    let detachable = |c: &mut Client| large_write_detachable(c, f, &data);
    assert_eq!(detachable(&mut c), Some(data.len()), "nothing out: spliced");
    c.hold_lookups = true;
    let m = c.read_msg(f, 0, 4);
    let (_, early) = send_signed(&mut c, m);
    assert!(
        early.is_empty() && c.held_lookups.len() == 1,
        "a READ's job out"
    );
    assert_eq!(detachable(&mut c), None, "received whole");
    run_held_jobs(&mut c);
    assert_eq!(detachable(&mut c), Some(data.len()), "spliced again");
}

/// The review of step 3, a smaller finding: on a share whose calls may wait on a network, a
/// CLOSE with POSTQUERY_ATTRIB reads the file's attributes in a job before its open lets the
/// file go, as the I/O thread reads them elsewhere (not after, when another open may already
/// have changed the file). While that job is out the open still holds the file: a CREATE
/// that shares nothing is refused; once the CLOSE is answered, with the attributes, it goes
/// through. (Without the fix the close was made before the attributes were read: the CREATE
/// went through while the CLOSE waited.)
#[test]
fn a_close_reads_the_attributes_it_was_asked_for_before_its_open_lets_the_file_go() {
    let (mut c, _) = fuse_client(true);
    let data = b"its size, read before the close";
    let f = file_holding(&mut c, "postquery", data);
    c.hold_lookups = true;
    let m = c.close_msg(f, 1);
    let (close_mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "the CLOSE waits for its job");
    assert_eq!(c.held_lookups.len(), 1, "the attributes' job");
    c.hold_lookups = false;
    let tree = c.tree_id;
    let other = c.create_on(tree, "postquery", 0x0012_019f, 0, D::OPEN, 0);
    assert_eq!(
        other.err(),
        Some(NtStatus::SHARING_VIOLATION),
        "the file is still held by the closing open"
    );
    let answers = run_held_jobs(&mut c);
    assert_eq!(answers.len(), 1);
    assert_eq!(
        (answers[0].hdr.message_id, answers[0].status()),
        (close_mid, NtStatus::SUCCESS)
    );
    let resp = ringshare_wire::create::CloseResponse::decode(&answers[0].msg).expect("close");
    assert_eq!(resp.end_of_file, data.len() as u64, "the attributes read");
    let after = c.create_on(tree, "postquery", 0x0012_019f, 0, D::OPEN, 0);
    assert!(after.is_ok(), "then it goes through");
}

/// A compound's later member about the open its first member held goes before the requests
/// that came after the compound: [READ, SET_INFO of the same open], then a CLOSE of it, the
/// READ's job and I/O held. The CLOSE waits behind the READ; once the READ's I/O is done the
/// SET_INFO runs, then the CLOSE, and both succeed. (Without it the SET_INFO was queued behind
/// the CLOSE and told FILE_CLOSED.)
#[test]
fn a_compounds_later_member_about_its_open_goes_before_a_close_that_came_after_it() {
    let (mut c, _) = fuse_client(true);
    let f = file_holding(&mut c, "compound", b"0123456789");
    c.hold_lookups = true;
    c.hold_io = true;
    let read = c.read_msg(f, 0, 10);
    // FileEndOfFileInformation (20): 4 bytes.
    let size = c.set_info_msg(f, 1, 20, &4u64.to_le_bytes());
    let mids = [&read, &size].map(|m| Header::decode(m).expect("header").message_id);
    assert!(
        c.compound(vec![read, size], false).is_empty(),
        "the READ waits for its job"
    );
    let m = c.close_msg(f, 0);
    let (close_mid, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "the CLOSE waits behind the READ's job");
    let mut answers = Vec::new();
    while !(c.held_lookups.is_empty() && c.held_io.is_empty()) {
        let held = std::mem::take(&mut c.held_lookups);
        c.run_any(held);
        answers.extend(c.pump());
        answers.extend(c.run_held_io());
    }
    let order: Vec<_> = answers
        .iter()
        .map(|r| (r.hdr.message_id, r.status()))
        .collect();
    assert_eq!(
        order,
        [
            (mids[0], NtStatus::SUCCESS),
            (mids[1], NtStatus::SUCCESS),
            (close_mid, NtStatus::SUCCESS)
        ],
        "the READ, the SET_INFO, then the CLOSE"
    );
}
