//! Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread"; the review of
//! session 47, finding 4): on a share whose calls may wait on a network, a named stream's READ
//! and WRITE (the POSIX backend's xattr calls: no ring operation reads a stream) and FLUSH make
//! no file system call on the I/O thread: each is one job (its checks, then its I/O). So is a
//! stream's rename (session 49, cmd/set_info/stream_move.rs; crates/core/tests/
//! fuse_stream_renames.rs shows other clients' opens of either name waiting for its job, what
//! the review of session 48's finding 1 found missing in the first such jobs). The answers are
//! those of a local share, where nothing changes: no job, the calls made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_wire::consts::Command;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

const INFO_FILE: u8 = 1;
const RENAME: u8 = 10;
/// FileStreamInformation.
const STREAM_INFO: u8 = 22;
/// Read, write and DELETE.
const WITH_DELETE: u32 = 0x0013_019f;

/// What a request sent with the file system jobs held came to.
struct Held {
    /// The jobs it asked.
    jobs: usize,
    /// The file system calls made on the I/O thread: before the first job ran, and between
    /// and after the jobs (as the request ran again).
    on_io_thread: usize,
    /// The answers, once the jobs (and any they led to) ran.
    answers: Vec<Resp>,
}

impl Held {
    /// The one answer.
    fn answer(&self) -> &Resp {
        assert_eq!(self.answers.len(), 1, "one answer: {:?}", self.answers);
        &self.answers[0]
    }
}

/// `msg` signed and sent with the file system jobs held ([`Held`]).
fn with_jobs_held(c: &mut Client, calls: &Calls, msg: Vec<u8>) -> Held {
    let was = calls.all();
    c.hold_lookups = true;
    let (_, mut answers) = send_signed(c, msg);
    let mut on_io_thread = calls.all() - was;
    let mut jobs = 0;
    while !c.held_lookups.is_empty() {
        let held = std::mem::take(&mut c.held_lookups);
        jobs += held.len();
        let jobs_only = held
            .iter()
            .all(|r| matches!(r.ask, ringshare_core::Lookup::Fs(_)));
        assert!(jobs_only, "jobs");
        // Handed back, each answer runs the request again at once, on the I/O thread.
        on_io_thread += run_counting(c, held, &|| calls.all()).1;
        let ran = calls.all();
        answers.extend(c.pump());
        on_io_thread += calls.all() - ran;
    }
    c.hold_lookups = false;
    Held {
        jobs,
        on_io_thread,
        answers,
    }
}

/// A client on a share whose calls may wait on a network (`remote`) or not, with stream `f:s`
/// open (with DELETE) holding "hello".
fn stream_client(remote: bool) -> (Client, Arc<Calls>, FileId) {
    let (mut c, calls) = fuse_client(remote);
    let s = c
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("the stream");
    if !remote {
        assert_eq!(c.write(s, 0, b"hello").status(), NtStatus::SUCCESS);
    } else {
        let m = write_msg(&mut c, s, 0, b"hello");
        let h = with_jobs_held(&mut c, &calls, m);
        assert_eq!(h.answer().status(), NtStatus::SUCCESS);
    }
    (c, calls, s)
}

fn write_msg(c: &mut Client, f: FileId, offset: u64, data: &[u8]) -> Vec<u8> {
    let tree = c.tree_id;
    c.message(Command::WRITE, tree, |o| write_body(o, f, offset, data))
}

fn read_msg_min(c: &mut Client, f: FileId, offset: u64, len: u32, min: u32) -> Vec<u8> {
    let tree = c.tree_id;
    c.message(Command::READ, tree, |o| read_body(o, f, offset, len, min))
}

/// What a READ came to: its status and data.
fn read_result(r: &Resp) -> (NtStatus, Vec<u8>) {
    match r.status() {
        NtStatus::SUCCESS => (NtStatus::SUCCESS, read_data(r)),
        s => (s, Vec::new()),
    }
}

/// The READs the tests compare: within the stream, across its end, at its end, past it, and
/// with a minimum count it cannot give.
const READS: [(u64, u32, u32); 5] = [(0, 5, 0), (1, 100, 0), (5, 10, 0), (9, 3, 0), (2, 10, 4)];

#[test]
fn a_named_streams_write_and_read_on_a_share_that_may_wait_on_a_network_are_a_job_each() {
    let (mut c, calls, s) = stream_client(true);
    let m = write_msg(&mut c, s, 3, b"p me");
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        (h.jobs, h.on_io_thread),
        (1, 0),
        "one job, no file system call on the I/O thread"
    );
    assert_eq!(h.answer().status(), NtStatus::SUCCESS);
    let m = c.read_msg(s, 0, 100);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.on_io_thread), (1, 0));
    assert_eq!(
        read_result(h.answer()),
        (NtStatus::SUCCESS, b"help me".to_vec()),
        "the stream's data, as written"
    );
}

#[test]
fn a_named_streams_reads_on_a_share_that_may_wait_on_a_network_answer_as_on_a_local_share() {
    let (mut c, calls, s) = stream_client(true);
    let (mut local, local_calls, ls) = stream_client(false);
    for (offset, len, min) in READS {
        let m = read_msg_min(&mut c, s, offset, len, min);
        let h = with_jobs_held(&mut c, &calls, m);
        assert_eq!(
            (h.jobs, h.on_io_thread),
            (1, 0),
            "READ at {offset} of {len}"
        );
        let was = local_calls.all();
        local.hold_lookups = true;
        let m = read_msg_min(&mut local, ls, offset, len, min);
        let (_, answers) = send_signed(&mut local, m);
        assert!(local.held_lookups.is_empty(), "no job on a local share");
        assert!(
            local_calls.all() > was,
            "the read made at once on a local share"
        );
        local.hold_lookups = false;
        assert_eq!(
            read_result(h.answer()),
            read_result(&answers[0]),
            "READ at {offset} of {len} (minimum {min}) as on a local share"
        );
    }
}

#[test]
fn a_named_streams_write_the_back_end_refuses_is_answered_with_its_status() {
    let (mut c, calls, s) = stream_client(true);
    let (mut local, local_calls, ls) = stream_client(false);
    calls.refuse.store(true, Ordering::SeqCst);
    local_calls.refuse.store(true, Ordering::SeqCst);
    let m = write_msg(&mut c, s, 0, b"no");
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.on_io_thread), (1, 0));
    let local_status = local.write(ls, 0, b"no").status();
    assert_eq!(local_status, NtStatus::ACCESS_DENIED);
    assert_eq!(h.answer().status(), local_status, "as on a local share");
    calls.refuse.store(false, Ordering::SeqCst);
    calls.fail_reads.store(true, Ordering::SeqCst);
    let m = c.read_msg(s, 0, 10);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        h.answer().status(),
        NtStatus::IO_DEVICE_ERROR,
        "a read the back end fails: its status"
    );
    calls.fail_reads.store(false, Ordering::SeqCst);
    let m = c.read_msg(s, 0, 10);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        read_result(h.answer()),
        (NtStatus::SUCCESS, b"hello".to_vec()),
        "nothing written by the refused WRITE"
    );
}

#[test]
fn a_local_lock_found_by_a_named_streams_job_refuses_its_write_and_nothing_is_written() {
    let (mut c, calls, s) = stream_client(true);
    calls.locked.store(true, Ordering::SeqCst);
    let streams = calls.streams.load(Ordering::SeqCst);
    let m = write_msg(&mut c, s, 0, b"jello");
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.on_io_thread), (1, 0));
    assert_eq!(h.answer().status(), NtStatus::FILE_LOCK_CONFLICT);
    assert_eq!(
        calls.streams.load(Ordering::SeqCst),
        streams,
        "no write made past the lock"
    );
    calls.locked.store(false, Ordering::SeqCst);
    let m = c.read_msg(s, 0, 10);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        read_result(h.answer()),
        (NtStatus::SUCCESS, b"hello".to_vec())
    );
}

#[test]
fn on_a_local_share_a_named_streams_read_write_and_rename_ask_no_job() {
    let (mut c, calls, s) = stream_client(false);
    for msg in [
        write_msg(&mut c, s, 0, b"j"),
        c.read_msg(s, 0, 10),
        c.set_info_msg(s, INFO_FILE, RENAME, &rename_info(":t", false)),
    ] {
        let was = calls.streams.load(Ordering::SeqCst);
        c.hold_lookups = true;
        let (_, answers) = send_signed(&mut c, msg);
        assert!(c.held_lookups.is_empty(), "no job");
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].status(), NtStatus::SUCCESS);
        assert!(
            calls.streams.load(Ordering::SeqCst) > was,
            "the stream's calls made at once"
        );
        c.hold_lookups = false;
    }
}

/// The stream names of file `f` (FileStreamInformation through open `s`).
fn streams_of(c: &mut Client, s: FileId) -> Vec<String> {
    let r = c.query_info(s, INFO_FILE, STREAM_INFO, 0, 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = output_buffer(&r);
    let mut names = Vec::new();
    let mut at = 0;
    loop {
        let next = u32::from_le_bytes(out[at..at + 4].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap()) as usize;
        let name: Vec<u16> = out[at + 24..at + 24 + len]
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        names.push(String::from_utf16(&name).unwrap());
        if next == 0 {
            return names;
        }
        at += next;
    }
}

#[test]
fn a_named_streams_rename_on_a_share_that_may_wait_on_a_network_answers_as_on_a_local_share() {
    let (mut c, calls, s) = stream_client(true);
    let (mut local, _, ls) = stream_client(false);
    let buf = rename_info(":t", false);
    let m = c.set_info_msg(s, INFO_FILE, RENAME, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        (h.jobs, h.on_io_thread),
        (1, 0),
        "one job, no call on the I/O thread"
    );
    let local_status = local.set_info(ls, INFO_FILE, RENAME, &buf).status();
    assert_eq!(local_status, NtStatus::SUCCESS);
    assert_eq!(h.answer().status(), local_status, "as on a local share");
    assert_eq!(
        streams_of(&mut c, s),
        streams_of(&mut local, ls),
        "the file's streams as on a local share"
    );
    assert!(
        streams_of(&mut c, s).contains(&":t:$DATA".to_string()),
        "the stream at its new name"
    );
    // The open follows its stream: renamed back, then opened by its new name elsewhere.
    let m = c.set_info_msg(s, INFO_FILE, RENAME, &rename_info(":s", false));
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.answer().status(), NtStatus::SUCCESS, "renamed back");
    assert_eq!(
        c.create("f:t", 0x0012_0089, D::OPEN, 0).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND),
        "no stream left at the name it left"
    );
}

#[test]
fn a_named_streams_rename_onto_a_taken_name_on_a_share_that_may_wait_on_a_network_is_refused_as_on_a_local_share(
) {
    let (mut c, calls, s) = stream_client(true);
    let (mut local, _, ls) = stream_client(false);
    for cl in [&mut c, &mut local] {
        let t = cl
            .create("f:t", WITH_DELETE, D::CREATE, 0)
            .expect("stream t");
        assert_eq!(cl.close(t).status(), NtStatus::SUCCESS);
    }
    let buf = rename_info(":t", false);
    let m = c.set_info_msg(s, INFO_FILE, RENAME, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.on_io_thread), (1, 0));
    let local_status = local.set_info(ls, INFO_FILE, RENAME, &buf).status();
    assert_eq!(local_status, NtStatus::OBJECT_NAME_COLLISION);
    assert_eq!(h.answer().status(), local_status, "as on a local share");
    let m = c.read_msg(s, 0, 10);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        read_result(h.answer()),
        (NtStatus::SUCCESS, b"hello".to_vec()),
        "the open still reads its stream"
    );
}

#[test]
fn a_named_streams_rename_the_back_end_refuses_is_answered_with_its_status_and_the_open_keeps_its_name(
) {
    let (mut c, calls, s) = stream_client(true);
    let (mut local, local_calls, ls) = stream_client(false);
    calls.refuse.store(true, Ordering::SeqCst);
    local_calls.refuse.store(true, Ordering::SeqCst);
    let buf = rename_info(":t", false);
    let m = c.set_info_msg(s, INFO_FILE, RENAME, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.on_io_thread), (1, 0));
    let local_status = local.set_info(ls, INFO_FILE, RENAME, &buf).status();
    assert_eq!(local_status, NtStatus::ACCESS_DENIED);
    assert_eq!(h.answer().status(), local_status, "as on a local share");
    calls.refuse.store(false, Ordering::SeqCst);
    // The open's entry is back at its old key: a second open of `f:s` shares it (a rename
    // of a stream others have open is refused), and `f:t` is free.
    let other = c.create("f:s", 0x0012_0089, D::OPEN, 0).expect("f:s opens");
    let m = c.set_info_msg(s, INFO_FILE, RENAME, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        h.answer().status(),
        NtStatus::SHARING_VIOLATION,
        "another open of the stream is seen at its old key"
    );
    assert_eq!(c.close(other).status(), NtStatus::SUCCESS);
    let m = c.set_info_msg(s, INFO_FILE, RENAME, &buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.answer().status(), NtStatus::SUCCESS, "then renamed");
}

#[test]
fn a_named_streams_flush_on_a_share_that_may_wait_on_a_network_is_one_job() {
    let (mut c, calls, s) = stream_client(true);
    let (mut local, _, ls) = stream_client(false);
    let m = c.flush_msg(s);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        (h.jobs, h.on_io_thread),
        (1, 0),
        "one job (the write time and the fsync), no file system call on the I/O thread"
    );
    let m = local.flush_msg(ls);
    let (_, answers) = send_signed(&mut local, m);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        h.answer().status(),
        answers[0].status(),
        "as on a local share"
    );
}
