//! FSCTLs on a share whose calls may wait on a network (issue 33, plan steps 4 and 6; FUSE,
//! CephFS): SET_SPARSE, SET_ZERO_DATA, QUERY_ALLOCATED_RANGES, GET/SET_COMPRESSION, the
//! reparse point FSCTLs, SRV_COPYCHUNK(_WRITE) and DUPLICATE_EXTENTS_TO_FILE(_EX) make their file
//! system calls in a file system job of the open's order, never on the I/O thread, and answer
//! as on a local share after it; the object id FSCTLs make none. The share is the
//! FUSE-like in-memory share of support/fuse.rs.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_wire::NtStatus;
use support::fuse::*;
use support::*;

const IS_FSCTL: u32 = 1;
const FSCTL_SET_SPARSE: u32 = 0x0009_00C4;
const FSCTL_SET_ZERO_DATA: u32 = 0x0009_80C8;
const FSCTL_QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
const FSCTL_SET_REPARSE_POINT: u32 = 0x0009_00A4;
const FSCTL_GET_REPARSE_POINT: u32 = 0x0009_00A8;
const FSCTL_DELETE_REPARSE_POINT: u32 = 0x0009_00AC;
const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
const FSCTL_DUPLICATE_EXTENTS_TO_FILE: u32 = 0x0009_8344;
const FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX: u32 = 0x0009_83E8;
const FSCTL_GET_OBJECT_ID: u32 = 0x0009_009C;
const FSCTL_CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;

/// A 16-byte range (FILE_ZERO_DATA_INFORMATION and FILE_ALLOCATED_RANGE_BUFFER alike).
fn range(a: i64, b: i64) -> Vec<u8> {
    let mut v = a.to_le_bytes().to_vec();
    v.extend_from_slice(&b.to_le_bytes());
    v
}

/// A reparse data buffer of tag `tag` carrying `data`.
fn reparse_buffer(tag: u32, data: &[u8]) -> Vec<u8> {
    let mut v = tag.to_le_bytes().to_vec();
    v.extend_from_slice(&(data.len() as u16).to_le_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(data);
    v
}

/// An IOCTL of `c`'s with its jobs held (no file system call on the I/O thread, asserted),
/// then its answer once they ran.
fn fsctl_in_a_job(
    c: &mut Client,
    calls: &Calls,
    f: ringshare_wire::FileId,
    (ctl, input): (u32, &[u8]),
) -> Resp {
    let (mut answers, others) = fsctl_and_others(c, calls, f, (ctl, input));
    assert!(others.is_empty(), "{ctl:#x}: nothing else answered");
    answers.remove(0)
}

/// [`fsctl_in_a_job`]'s IOCTL answer, and the other answers that came with it (a watcher's).
/// Its jobs (a range's lock check is one of its own, cmd/io_check.rs) are run one round at a
/// time; every file system call is made in one.
fn fsctl_and_others(
    c: &mut Client,
    calls: &Calls,
    f: ringshare_wire::FileId,
    (ctl, input): (u32, &[u8]),
) -> (Vec<Resp>, Vec<Resp>) {
    c.hold_lookups = true;
    let m = c.ioctl_msg(f, ctl, input, 4096, IS_FSCTL);
    let before = calls.all();
    let (_, mut out) = send_signed(c, m);
    let (mut on_io_thread, mut in_jobs, mut rounds) = (calls.all() - before, 0, 0);
    while out.is_empty() {
        let held = std::mem::take(&mut c.held_lookups);
        assert!(
            !held.is_empty() && rounds < 3,
            "{ctl:#x}: answered after its jobs"
        );
        rounds += 1;
        let before = calls.all();
        c.run_jobs(held);
        in_jobs += calls.all() - before;
        let before = calls.all();
        out = c.pump();
        on_io_thread += calls.all() - before;
    }
    c.hold_lookups = false;
    assert_eq!(
        on_io_thread, 0,
        "{ctl:#x}: no file system call on the I/O thread"
    );
    assert!(in_jobs > 0, "{ctl:#x}: the file system asked in its jobs");
    let (answers, others): (Vec<Resp>, Vec<Resp>) = out
        .into_iter()
        .partition(|r| r.hdr.command == ringshare_wire::consts::Command::IOCTL);
    assert_eq!(answers.len(), 1, "{ctl:#x}: answered once");
    (answers, others)
}

#[test]
fn fsctls_on_a_share_that_may_wait_on_a_network_make_their_calls_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let f = file_holding(&mut c, "sparse", &[7u8; 8192]);
    let r = fsctl_in_a_job(&mut c, &calls, f, (FSCTL_SET_SPARSE, &[]));
    assert_eq!(r.status(), NtStatus::SUCCESS, "set sparse");
    let r = fsctl_in_a_job(&mut c, &calls, f, (FSCTL_SET_ZERO_DATA, &range(0, 4096)));
    assert_eq!(r.status(), NtStatus::SUCCESS, "zero data");
    assert_eq!(read_data(&c.read(f, 0, 4)), [0, 0, 0, 0], "zeroed");
    assert_eq!(
        read_data(&c.read(f, 4096, 4)),
        [7, 7, 7, 7],
        "the rest kept"
    );
    let r = fsctl_in_a_job(
        &mut c,
        &calls,
        f,
        (FSCTL_QUERY_ALLOCATED_RANGES, &range(0, 8192)),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS, "allocated ranges");
    let local = {
        let (mut l, _) = fuse_client(false);
        let g = file_holding(&mut l, "sparse", &[7u8; 8192]);
        assert_eq!(
            l.ioctl(g, FSCTL_SET_SPARSE, &[], 0, IS_FSCTL).status(),
            NtStatus::SUCCESS
        );
        let z = l.ioctl(g, FSCTL_SET_ZERO_DATA, &range(0, 4096), 0, IS_FSCTL);
        assert_eq!(z.status(), NtStatus::SUCCESS);
        l.ioctl(
            g,
            FSCTL_QUERY_ALLOCATED_RANGES,
            &range(0, 8192),
            4096,
            IS_FSCTL,
        )
    };
    let output = |r: &Resp| {
        ringshare_wire::ioctl::IoctlResponse::decode(&r.msg)
            .expect("response")
            .output
            .to_vec()
    };
    assert_eq!(
        output(&r),
        output(&local),
        "the same ranges as a local share's"
    );
    assert_eq!(output(&r).len(), 16, "one range: the data left");

    let buffer = reparse_buffer(0x8000_0023, b"stored");
    let r = fsctl_in_a_job(&mut c, &calls, f, (FSCTL_SET_REPARSE_POINT, &buffer));
    assert_eq!(r.status(), NtStatus::SUCCESS, "set reparse point");
    let r = fsctl_in_a_job(&mut c, &calls, f, (FSCTL_GET_REPARSE_POINT, &[]));
    assert_eq!(r.status(), NtStatus::SUCCESS, "get reparse point");
    let got = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg).expect("response");
    assert_eq!(got.output, &buffer[..], "read back");
    let r = fsctl_in_a_job(
        &mut c,
        &calls,
        f,
        (
            FSCTL_DELETE_REPARSE_POINT,
            &reparse_buffer(0x8000_0023, b""),
        ),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS, "delete reparse point");
    let r = fsctl_in_a_job(&mut c, &calls, f, (FSCTL_GET_REPARSE_POINT, &[]));
    assert_eq!(
        r.status(),
        NtStatus::NOT_A_REPARSE_POINT,
        "what the job found is answered"
    );
}

/// A directory watcher hears of the attributes a SET_SPARSE's job changed, once it changed
/// them, and of nothing when the file was sparse already.
#[test]
fn a_set_sparse_made_in_a_job_is_told_to_watchers_only_when_it_changed_the_file() {
    let (mut c, calls) = fuse_client(true);
    let directory = 0x0000_0001;
    let d = c
        .create(
            "d",
            0x1000_0000,
            ringshare_wire::consts::CreateDisposition::CREATE,
            directory,
        )
        .expect("directory");
    let f = file_holding(&mut c, "d\\f", b"x");
    let attributes = 0x04;
    let mut watch = c.change_notify_msg(d, attributes, false, 4096);
    c.sign(&mut watch);
    let interim = c.send_frame(watch);
    assert_eq!(interim[0].status(), NtStatus::PENDING, "the watch waits");
    let (r, told) = fsctl_and_others(&mut c, &calls, f, (FSCTL_SET_SPARSE, &[]));
    assert_eq!(r[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        told.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS],
        "the watcher is told once the job changed the file"
    );
    let mut watch = c.change_notify_msg(d, attributes, false, 4096);
    c.sign(&mut watch);
    let interim = c.send_frame(watch);
    assert_eq!(interim[0].status(), NtStatus::PENDING);
    let r = fsctl_in_a_job(&mut c, &calls, f, (FSCTL_SET_SPARSE, &[]));
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "sparse already: nothing changed, no watcher told"
    );
}

/// FSCTL_SET_ZERO_DATA checks the range asked against byte-range locks before it is cut to
/// the file's size, as Samba 4.22 does (a lock past the end is in the way), on any share.
#[test]
fn a_zero_data_past_the_end_of_file_meets_a_lock_there_as_on_samba() {
    for remote in [false, true] {
        let (mut c, _) = fuse_client(remote);
        let f = file_holding(&mut c, "short", b"0123456789");
        let g = c
            .create(
                "short",
                0x0012_019f,
                ringshare_wire::consts::CreateDisposition::OPEN,
                0,
            )
            .expect("second open");
        let exclusive_now = 0x02 | 0x10;
        assert_eq!(
            c.lock(g, &[(100, 10, exclusive_now)]).status(),
            NtStatus::SUCCESS
        );
        let r = c.ioctl(f, FSCTL_SET_ZERO_DATA, &range(0, 200), 0, IS_FSCTL);
        assert_eq!(r.status(), NtStatus::FILE_LOCK_CONFLICT, "remote {remote}");
        let r = c.ioctl(f, FSCTL_SET_ZERO_DATA, &range(0, 50), 0, IS_FSCTL);
        assert_eq!(
            r.status(),
            NtStatus::SUCCESS,
            "remote {remote}: clear of the lock"
        );
        assert_eq!(read_data(&c.read(f, 0, 10)), [0u8; 10], "remote {remote}");
    }
}

#[test]
fn an_fsctl_on_a_local_share_asks_no_job() {
    let (mut c, _) = fuse_client(false);
    let f = file_holding(&mut c, "local", b"x");
    c.hold_lookups = true;
    let r = c.ioctl(f, FSCTL_SET_SPARSE, &[], 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS, "answered at once");
    assert!(c.held_lookups.is_empty());
}

/// The resume key of `c`'s open `f` (FSCTL_SRV_REQUEST_RESUME_KEY, no file system call).
fn resume_key(c: &mut Client, f: ringshare_wire::FileId) -> [u8; 24] {
    let r = c.ioctl(f, FSCTL_SRV_REQUEST_RESUME_KEY, &[], 32, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let got = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg).expect("response");
    ringshare_wire::ioctl::SrvRequestResumeKeyResponse::decode(got.output)
        .expect("resume key")
        .resume_key
}

/// The SRV_COPYCHUNK_RESPONSE of a copychunk's answer: chunks and bytes written.
fn copied(r: &Resp) -> (u32, u32) {
    let got = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg).expect("response");
    let done = ringshare_wire::ioctl::SrvCopychunkResponse::decode(got.output).expect("counts");
    (done.chunks_written, done.total_bytes_written)
}

/// A source file of 8 KiB (its first 4 KiB 1s, the rest 2s) and an empty target, opened by a
/// client of a share whose calls may wait on a network (`remote`) or not: the client, the
/// share's counts, the source's resume key and the target.
fn copy_between(remote: bool) -> (Client, Arc<Calls>, [u8; 24], ringshare_wire::FileId) {
    let (mut c, calls) = fuse_client(remote);
    let mut data = vec![1u8; 4096];
    data.extend_from_slice(&[2u8; 4096]);
    let src = file_holding(&mut c, "source", &data);
    let key = resume_key(&mut c, src);
    let dst = c
        .create(
            "target",
            0x0012_019f,
            ringshare_wire::consts::CreateDisposition::OPEN_IF,
            0,
        )
        .expect("target");
    (c, calls, key, dst)
}

/// The two chunks of the source, swapped in the target.
const SWAPPED: [(u64, u64, u32); 2] = [(0, 4096, 4096), (4096, 0, 4096)];

#[test]
fn a_server_side_copy_on_a_share_that_may_wait_on_a_network_copies_in_one_job() {
    let (mut c, calls, key, dst) = copy_between(true);
    let input = copychunk_input(key, &SWAPPED);
    let r = fsctl_in_a_job(&mut c, &calls, dst, (FSCTL_SRV_COPYCHUNK_WRITE, &input));
    assert_eq!(r.status(), NtStatus::SUCCESS, "copied");
    assert_eq!(copied(&r), (2, 8192), "both chunks");
    assert_eq!(
        read_data(&c.read(dst, 0, 2)),
        [2, 2],
        "the second chunk first"
    );
    assert_eq!(read_data(&c.read(dst, 4096, 2)), [1, 1], "then the first");
    assert_eq!(
        calls.copies.load(Ordering::SeqCst),
        2,
        "each chunk one copy"
    );
    let (mut l, _, local_key, local_dst) = copy_between(false);
    let local = l.ioctl(
        local_dst,
        FSCTL_SRV_COPYCHUNK_WRITE,
        &copychunk_input(local_key, &SWAPPED),
        4096,
        IS_FSCTL,
    );
    assert_eq!(
        (r.status(), r.body()),
        (local.status(), local.body()),
        "the same answer as a local share's"
    );
    // FSCTL_SRV_COPYCHUNK (the target opened for reading too) likewise.
    let input = copychunk_input(key, &[(0, 8192, 4096)]);
    let r = fsctl_in_a_job(&mut c, &calls, dst, (FSCTL_SRV_COPYCHUNK, &input));
    assert_eq!((r.status(), copied(&r)), (NtStatus::SUCCESS, (1, 4096)));
    assert_eq!(read_data(&c.read(dst, 8192, 2)), [1, 1]);
}

/// A copy the back end refuses: the job's failure is answered with its status and the counts
/// so far, as on a local share; a local program's POSIX lock on a range is found in the job.
#[test]
fn a_server_side_copy_whose_job_fails_answers_its_status_as_on_a_local_share() {
    let mut answers = Vec::new();
    for remote in [true, false] {
        let (mut c, calls, key, dst) = copy_between(remote);
        let input = copychunk_input(key, &SWAPPED);
        calls.refuse.store(true, Ordering::SeqCst);
        let r = match remote {
            true => fsctl_in_a_job(&mut c, &calls, dst, (FSCTL_SRV_COPYCHUNK_WRITE, &input)),
            false => c.ioctl(dst, FSCTL_SRV_COPYCHUNK_WRITE, &input, 4096, IS_FSCTL),
        };
        calls.refuse.store(false, Ordering::SeqCst);
        assert_eq!(r.status(), NtStatus::ACCESS_DENIED, "remote {remote}");
        assert_eq!(copied(&r), (0, 0), "remote {remote}: nothing copied");
        calls.locked.store(true, Ordering::SeqCst);
        let locked = match remote {
            true => fsctl_in_a_job(&mut c, &calls, dst, (FSCTL_SRV_COPYCHUNK_WRITE, &input)),
            false => c.ioctl(dst, FSCTL_SRV_COPYCHUNK_WRITE, &input, 4096, IS_FSCTL),
        };
        calls.locked.store(false, Ordering::SeqCst);
        assert_eq!(
            (locked.status(), copied(&locked)),
            (NtStatus::FILE_LOCK_CONFLICT, (0, 0)),
            "remote {remote}: a local program's lock"
        );
        assert_eq!(calls.copies.load(Ordering::SeqCst), 1, "remote {remote}");
        answers.push((r.body().to_vec(), locked.body().to_vec()));
    }
    assert_eq!(answers[0], answers[1], "the same answers");
}

/// The target's watchers hear of a copy made in a job when its open closes (its data changed),
/// and of none that copied nothing.
#[test]
fn a_server_side_copy_made_in_a_job_is_told_at_the_targets_close_only_when_it_copied() {
    for copies in [true, false] {
        let (mut c, calls, key, _) = copy_between(true);
        let d = c
            .create(
                "d",
                0x1000_0000,
                ringshare_wire::consts::CreateDisposition::CREATE,
                1,
            )
            .expect("directory");
        let dst = c
            .create(
                "d\\target",
                0x0012_019f,
                ringshare_wire::consts::CreateDisposition::CREATE,
                0,
            )
            .expect("target");
        let last_write_and_size = 0x10 | 0x08;
        let mut watch = c.change_notify_msg(d, last_write_and_size, false, 4096);
        c.sign(&mut watch);
        let interim = c.send_frame(watch);
        assert_eq!(interim[0].status(), NtStatus::PENDING, "the watch waits");
        calls.refuse.store(!copies, Ordering::SeqCst);
        let input = copychunk_input(key, &SWAPPED);
        let r = fsctl_in_a_job(&mut c, &calls, dst, (FSCTL_SRV_COPYCHUNK_WRITE, &input));
        calls.refuse.store(false, Ordering::SeqCst);
        assert_eq!(r.status() == NtStatus::SUCCESS, copies);
        c.hold_lookups = true;
        let mut close = c.close_msg(dst, 0);
        c.sign(&mut close);
        let mut answers = c.send_frame(close);
        while !c.held_lookups.is_empty() {
            let held = std::mem::take(&mut c.held_lookups);
            c.run_jobs(held);
            answers.extend(c.pump());
        }
        c.hold_lookups = false;
        let told = answers
            .iter()
            .filter(|r| r.hdr.command == ringshare_wire::consts::Command::CHANGE_NOTIFY)
            .count();
        assert_eq!(told, usize::from(copies), "copies {copies}");
    }
}

#[test]
fn a_server_side_copy_on_a_local_share_asks_no_job() {
    let (mut c, calls, key, dst) = copy_between(false);
    c.hold_lookups = true;
    let input = copychunk_input(key, &SWAPPED);
    let r = c.ioctl(dst, FSCTL_SRV_COPYCHUNK_WRITE, &input, 4096, IS_FSCTL);
    c.hold_lookups = false;
    assert_eq!(r.status(), NtStatus::SUCCESS, "answered at once");
    assert!(c.held_lookups.is_empty(), "no job");
    assert_eq!(calls.copies.load(Ordering::SeqCst), 2, "copied at once");
}

/// A client of a share that clones blocks and whose calls may wait on a network (`remote`) or
/// not, with a source of two blocks (1s then 2s) and a target of two blocks of 0s open.
fn clone_between(
    remote: bool,
) -> (
    Client,
    Arc<Calls>,
    ringshare_wire::FileId,
    ringshare_wire::FileId,
) {
    let mem = ringshare_vfs::memory::MemShare::new().with_block_cloning(true);
    let (mut c, calls) = fuse_client_on(mem, remote, |share| {
        server_on(share, ringshare_core::SigningPolicy::IfRequired)
    });
    let mut data = vec![1u8; 4096];
    data.extend_from_slice(&[2u8; 4096]);
    let src = file_holding(&mut c, "source", &data);
    let dst = file_holding(&mut c, "target", &[0u8; 8192]);
    (c, calls, src, dst)
}

/// FSCTL_DUPLICATE_EXTENTS_TO_FILE's input (DUPLICATE_EXTENTS_DATA), or the _EX one's.
fn duplicate(src: ringshare_wire::FileId, (s, t, n): (u64, u64, u64), ex: bool) -> Vec<u8> {
    let mut b = Vec::new();
    let d = ringshare_wire::dup_extents::DuplicateExtents {
        source: src,
        source_offset: s,
        target_offset: t,
        byte_count: n,
        flags: 0,
    };
    match ex {
        true => d.encode_ex(&mut b),
        false => d.encode(&mut b),
    }
    b
}

#[test]
fn a_block_clone_on_a_share_that_may_wait_on_a_network_is_made_in_one_job() {
    let (mut c, calls, src, dst) = clone_between(true);
    let input = duplicate(src, (4096, 0, 4096), false);
    let r = fsctl_in_a_job(
        &mut c,
        &calls,
        dst,
        (FSCTL_DUPLICATE_EXTENTS_TO_FILE, &input),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS, "cloned");
    assert_eq!(
        read_data(&c.read(dst, 0, 2)),
        [2, 2],
        "the second block first"
    );
    assert_eq!(read_data(&c.read(dst, 4096, 2)), [0, 0], "the rest kept");
    let input = duplicate(src, (0, 4096, 4096), true);
    let r = fsctl_in_a_job(
        &mut c,
        &calls,
        dst,
        (FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX, &input),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS, "cloned (_EX)");
    assert_eq!(read_data(&c.read(dst, 4096, 2)), [1, 1]);
    assert_eq!(calls.copies.load(Ordering::SeqCst), 2);
    // A source range past the source's end: the job's stat finds it, as on a local share.
    let input = duplicate(src, (4096, 0, 8192), false);
    let r = fsctl_in_a_job(
        &mut c,
        &calls,
        dst,
        (FSCTL_DUPLICATE_EXTENTS_TO_FILE, &input),
    );
    let (mut l, _, lsrc, ldst) = clone_between(false);
    let local_input = duplicate(lsrc, (4096, 0, 8192), false);
    let local = l.ioctl(
        ldst,
        FSCTL_DUPLICATE_EXTENTS_TO_FILE,
        &local_input,
        0,
        IS_FSCTL,
    );
    assert_eq!(
        (r.status(), local.status()),
        (NtStatus::NOT_SUPPORTED, NtStatus::NOT_SUPPORTED),
        "past the source's end"
    );
}

/// A clone the back end refuses is answered with its status, as on a local share, and tells
/// nobody; a refusal decided without the file system (no write access) comes after the job's
/// checks, in its place among them.
#[test]
fn a_block_clone_whose_job_fails_answers_its_status_as_on_a_local_share() {
    for remote in [true, false] {
        let (mut c, calls, src, dst) = clone_between(remote);
        calls.refuse.store(true, Ordering::SeqCst);
        let input = duplicate(src, (0, 0, 4096), false);
        let r = match remote {
            true => fsctl_in_a_job(
                &mut c,
                &calls,
                dst,
                (FSCTL_DUPLICATE_EXTENTS_TO_FILE, &input),
            ),
            false => c.ioctl(dst, FSCTL_DUPLICATE_EXTENTS_TO_FILE, &input, 0, IS_FSCTL),
        };
        calls.refuse.store(false, Ordering::SeqCst);
        assert_eq!(r.status(), NtStatus::ACCESS_DENIED, "remote {remote}");
        assert_eq!(read_data(&c.read(dst, 0, 2)), [0, 0], "remote {remote}");
        let read_only = c
            .create(
                "target",
                0x0012_0089,
                ringshare_wire::consts::CreateDisposition::OPEN,
                0,
            )
            .expect("read-only open");
        // Past the target's end (checked in the job) before the access (checked before it).
        let past = duplicate(src, (0, 16384, 4096), false);
        let r = match remote {
            true => fsctl_in_a_job(
                &mut c,
                &calls,
                read_only,
                (FSCTL_DUPLICATE_EXTENTS_TO_FILE, &past),
            ),
            false => c.ioctl(
                read_only,
                FSCTL_DUPLICATE_EXTENTS_TO_FILE,
                &past,
                0,
                IS_FSCTL,
            ),
        };
        assert_eq!(r.status(), NtStatus::INVALID_PARAMETER, "remote {remote}");
        let r = match remote {
            true => fsctl_in_a_job(
                &mut c,
                &calls,
                read_only,
                (FSCTL_DUPLICATE_EXTENTS_TO_FILE, &input),
            ),
            false => c.ioctl(
                read_only,
                FSCTL_DUPLICATE_EXTENTS_TO_FILE,
                &input,
                0,
                IS_FSCTL,
            ),
        };
        assert_eq!(
            r.status(),
            NtStatus::ACCESS_DENIED,
            "remote {remote}: no write access"
        );
    }
}

#[test]
fn a_block_clone_on_a_local_share_asks_no_job() {
    let (mut c, calls, src, dst) = clone_between(false);
    c.hold_lookups = true;
    let input = duplicate(src, (0, 0, 4096), false);
    let r = c.ioctl(dst, FSCTL_DUPLICATE_EXTENTS_TO_FILE, &input, 0, IS_FSCTL);
    c.hold_lookups = false;
    assert_eq!(r.status(), NtStatus::SUCCESS, "answered at once");
    assert!(c.held_lookups.is_empty(), "no job");
    assert_eq!(calls.copies.load(Ordering::SeqCst), 1, "cloned at once");
}

/// The object id FSCTLs answer from the open's device and inode, which the server keeps: no
/// file system call and no job, on any share (nothing to move off the I/O thread).
#[test]
fn the_object_id_fsctls_ask_the_file_system_nothing_on_any_share() {
    for remote in [true, false] {
        let (mut c, calls) = fuse_client(remote);
        let f = file_holding(&mut c, "identified", b"x");
        let mut ids = Vec::new();
        for ctl in [FSCTL_GET_OBJECT_ID, FSCTL_CREATE_OR_GET_OBJECT_ID] {
            c.hold_lookups = true;
            let was = calls.all();
            let r = c.ioctl(f, ctl, &[], 64, IS_FSCTL);
            c.hold_lookups = false;
            assert_eq!(r.status(), NtStatus::SUCCESS, "remote {remote}: {ctl:#x}");
            assert!(c.held_lookups.is_empty(), "remote {remote}: no job");
            assert_eq!(calls.all(), was, "remote {remote}: no file system call");
            let got = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg).expect("response");
            ids.push(got.output.to_vec());
        }
        assert_eq!(ids[0], ids[1], "remote {remote}: one object id");
    }
}

/// A server-side copy between a share whose calls may wait on a network and one whose calls
/// do not, either way round, makes every file system call in its job: the job is asked when
/// either end's share is offloaded (a source on FUSE read on the I/O thread would hold it as
/// long as a target there), and the bytes arrive.
#[test]
fn a_server_side_copy_between_a_local_and_an_offloaded_share_copies_in_one_job_either_way() {
    use ringshare_wire::consts::CreateDisposition as D;
    let (mut c, calls) = fuse_client_with(true, |share| {
        let mut config = config_on(share, ringshare_core::SigningPolicy::IfRequired);
        let mut local = config.shares[0].with_backend("local", config.shares[0].backend.clone());
        local.fs_offload = Some(false);
        config.shares.push(Arc::new(local));
        server_from(config)
    });
    let offloaded = c.tree_id;
    let local = c.tree_connect("local");
    for (from, to, name) in [(local, offloaded, "up"), (offloaded, local, "down")] {
        let src = c
            .create_on(
                from,
                &format!("{name}-src"),
                0x0012_019f,
                SHARE_ALL,
                D::CREATE,
                0,
            )
            .expect("source");
        c.tree_id = from;
        assert_eq!(c.write(src, 0, &[7u8; 4096]).status(), NtStatus::SUCCESS);
        let key = resume_key(&mut c, src);
        let dst = c
            .create_on(
                to,
                &format!("{name}-dst"),
                0x0012_019f,
                SHARE_ALL,
                D::CREATE,
                0,
            )
            .expect("target");
        c.tree_id = to;
        let input = copychunk_input(key, &[(0, 0, 4096)]);
        // Its job is counted against the offloaded end's share in the pool's bound (the review
        // of session 47, finding 7).
        c.hold_lookups = true;
        let m = c.ioctl_msg(dst, FSCTL_SRV_COPYCHUNK_WRITE, &input, 4096, IS_FSCTL);
        let (_, early) = send_signed(&mut c, m);
        assert!(early.is_empty(), "{name}: waits for its job");
        let held = std::mem::take(&mut c.held_lookups);
        let shares: Vec<u64> = held
            .iter()
            .filter_map(|r| match &r.ask {
                ringshare_core::Lookup::Fs(j) => Some(j.share),
                _ => None,
            })
            .collect();
        assert_eq!(
            shares,
            [ringshare_core::fsjob::share_key("share")],
            "{name}"
        );
        c.run_jobs(held);
        c.pump();
        c.hold_lookups = false;
        let r = fsctl_in_a_job(&mut c, &calls, dst, (FSCTL_SRV_COPYCHUNK_WRITE, &input));
        assert_eq!(
            (r.status(), copied(&r)),
            (NtStatus::SUCCESS, (1, 4096)),
            "{name}"
        );
        assert_eq!(
            read_data(&c.read(dst, 0, 2)),
            [7, 7],
            "{name}: the bytes copied"
        );
        c.tree_id = offloaded;
    }
}
