//! Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread"; session 49):
//! on a share whose calls may wait on a network, the CREATEs step 5 left on the I/O thread make
//! their file system calls in file system jobs too: a named stream's (the file's walk and open,
//! the stream's open or creation in it, an overwrite of the stream after admission), one on a
//! `fruit` share (its AFP streams: an AfpInfo kept in Netatalk metadata, a resource fork in its
//! AppleDouble file), a POSIX open's (the reparse buffer its answer shows), and fruit's
//! AfpInfo WRITE. No file system call is made on the I/O thread, and the answers are those of a
//! local share, where nothing changes: no job, the calls made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_core::fruit::Fruit;
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::{tag, ContextTag, CreateContext, CreateResponse};
use ringshare_wire::posix::PosixCc;
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::posix::offering;
use support::*;

/// What a request sent with the file system jobs held came to.
struct Held {
    /// The jobs it asked (and those they led to).
    jobs: usize,
    /// The file system calls made on the I/O thread: before the first job ran, and as the
    /// request ran again after each (when its answer was handed back: [`run_counting`]).
    on_io_thread: usize,
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

/// What a CREATE's answer shows: its status, and when it succeeded its CreateAction,
/// EndOfFile, FileAttributes and FileId.
fn shown(r: &Resp) -> (NtStatus, u32, u64, u32, Option<FileId>) {
    match CreateResponse::decode(&r.msg) {
        Ok(cr) if r.status() == NtStatus::SUCCESS => (
            r.status(),
            cr.create_action.0,
            cr.end_of_file,
            cr.file_attributes.0,
            Some(cr.file_id),
        ),
        _ => (r.status(), 0, 0, 0, None),
    }
}

/// A CREATE of `name` (`disposition`, read and write, sharing everything, `ctx`) on `c`'s
/// tree: on a share whose calls may wait on a network (`calls`) with its jobs held, asserting
/// that it made no file system call on the I/O thread and asked at least one job; else at
/// once, asserting that it asked none. Its answer.
fn create(
    c: &mut Client,
    calls: Option<&Calls>,
    name: &str,
    disposition: D,
    ctx: Vec<CreateContext<'static>>,
) -> Resp {
    let tree = c.tree_id;
    let m = c.create_msg_ctx(tree, name, 0x0013_019f, SHARE_ALL, disposition, 0, 0, ctx);
    sent(c, calls, m, name)
}

/// `m` sent as [`create`] sends it: its one answer.
fn sent(c: &mut Client, calls: Option<&Calls>, m: Vec<u8>, what: &str) -> Resp {
    match calls {
        Some(calls) => {
            let h = with_jobs_held(c, calls, m);
            assert!(h.jobs >= 1, "{what}: a job ({} asked)", h.jobs);
            assert_eq!(
                h.on_io_thread, 0,
                "{what}: no file system call on the I/O thread"
            );
            h.answer().clone()
        }
        None => {
            c.hold_lookups = true;
            let (_, mut answers) = send_signed(c, m);
            assert!(c.held_lookups.is_empty(), "{what}: no job on a local share");
            c.hold_lookups = false;
            assert_eq!(answers.len(), 1, "{what}: answered at once");
            answers.remove(0)
        }
    }
}

/// A CREATE's answer's status, CreateAction and EndOfFile.
fn head(r: &Resp) -> (NtStatus, u32, u64) {
    let (status, action, eof, _, _) = shown(r);
    (status, action, eof)
}

/// The steps of [`named_streams_script`] as answered, FileIds left out.
type Shown = Vec<(&'static str, NtStatus, u32, u64, u32)>;

/// Named streams' CREATEs on a client (`calls`: of a share whose calls may wait on a network,
/// asserted to make none on the I/O thread): a new stream in an existing file, a new file made
/// with its stream, the stream opened again after a WRITE, overwritten and superseded, made
/// again (COLLISION), a missing one opened (NOT_FOUND), one opened in a missing file.
fn named_streams_script(c: &mut Client, calls: Option<&Calls>) -> Shown {
    let mut out = Vec::new();
    let mut step = |c: &mut Client, what: &'static str, name: &str, d: D| {
        let r = create(c, calls, name, d, vec![]);
        let (status, action, eof, attrs, id) = shown(&r);
        if let Some(f) = id {
            c.close(f);
        }
        out.push((what, status, action, eof, attrs));
        id
    };
    c.put_file("f", b"the file");
    step(c, "a new stream", "f:s", D::CREATE);
    step(c, "a new file with its stream", "g:s", D::OPEN_IF);
    let s = c
        .create("f:s", 0x0013_019f, D::OPEN, 0)
        .expect("the stream again");
    // The WRITE's own jobs (held or not) are not this test's.
    assert_eq!(c.write(s, 0, b"written").status(), NtStatus::SUCCESS);
    c.close(s);
    step(c, "the stream opened", "F:S", D::OPEN);
    step(c, "the stream overwritten", "f:s", D::OVERWRITE);
    step(c, "the stream superseded", "f:s", D::SUPERSEDE);
    step(c, "an existing stream made again", "f:s", D::CREATE);
    step(c, "a missing stream opened", "f:t", D::OPEN);
    step(c, "a stream of a missing file", "nofile:s", D::OPEN);
    out
}

/// A named stream's CREATE (the file's walk and open, the stream's open or creation, an
/// overwrite or supersede of the stream) makes no file system call on the I/O thread on a
/// share whose calls may wait on a network, and is answered as on a local share.
#[test]
fn a_named_streams_create_makes_no_file_system_call_on_the_io_thread_and_answers_as_locally() {
    let (mut c, calls) = fuse_client(true);
    let remote = named_streams_script(&mut c, Some(&calls));
    let (mut c, _) = fuse_client(false);
    let local = named_streams_script(&mut c, None);
    assert_eq!(remote, local);
    // What the script expects of both.
    let status: Vec<_> = local.iter().map(|s| (s.0, s.1, s.2, s.3)).collect();
    assert_eq!(status[0], ("a new stream", NtStatus::SUCCESS, 2, 0));
    assert_eq!(status[2], ("the stream opened", NtStatus::SUCCESS, 1, 7));
    assert_eq!(
        status[3],
        ("the stream overwritten", NtStatus::SUCCESS, 3, 0)
    );
    assert_eq!(status[5].1, NtStatus::OBJECT_NAME_COLLISION, "made again");
    assert_eq!(status[6].1, NtStatus::OBJECT_NAME_NOT_FOUND, "missing");
}

/// A stream's overwrite is a second job, after admission (a refused open never changes the
/// stream): a CREATE that another open's share modes refuse leaves the stream's data as it was,
/// and the stream's and its file's nodes the job opened are let go in a job, not on the I/O
/// thread.
#[test]
fn a_streams_overwrite_refused_by_share_modes_leaves_its_data_and_lets_its_nodes_go_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let s = c
        .create("f:s", 0x0013_019f, D::OPEN_IF, 0)
        .expect("the stream");
    assert_eq!(c.write(s, 0, b"kept").status(), NtStatus::SUCCESS);
    c.close(s);
    let tree = c.tree_id;
    let held = c
        .create_on(tree, "f:s", 0x0012_019f, 0, D::OPEN, 0)
        .expect("an open that shares nothing");
    let dropped = calls.dropped.load(Ordering::SeqCst);
    let m = c.create_msg_ctx(
        tree,
        "f:s",
        0x0013_019f,
        SHARE_ALL,
        D::OVERWRITE,
        0,
        0,
        vec![],
    );
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.answer().status(), NtStatus::SHARING_VIOLATION);
    assert_eq!(h.on_io_thread, 0, "no file system call on the I/O thread");
    assert_eq!(h.jobs, 2, "the open's job, and one letting its nodes go");
    assert_eq!(
        calls.dropped.load(Ordering::SeqCst),
        dropped + 1,
        "the file's node, let go in the second job"
    );
    c.close(held);
    let s = c.create("f:s", 0x0012_019f, D::OPEN, 0).expect("again");
    assert_eq!(read_data(&c.read(s, 0, 10)), b"kept", "not truncated");
}

/// A back end that refuses to make the stream (EACCES) fails the CREATE with its status, as on
/// a local share, and a file the CREATE made for it is not left behind.
#[test]
fn a_stream_the_back_end_refuses_to_make_is_answered_its_status_as_locally() {
    let mut statuses = Vec::new();
    for remote in [true, false] {
        let (mut c, calls) = fuse_client(remote);
        c.put_file("f", b"");
        calls.refuse.store(true, Ordering::SeqCst);
        let on = remote.then_some(&*calls);
        let r = create(&mut c, on, "f:s", D::CREATE, vec![]);
        let made = create(&mut c, on, "new:s", D::CREATE, vec![]);
        calls.refuse.store(false, Ordering::SeqCst);
        let left = c.create("new", 0x0012_019f, D::OPEN, 0).err();
        statuses.push((r.status(), made.status(), left));
    }
    assert_eq!(statuses[0], statuses[1], "as on a local share");
    assert_eq!(
        statuses[0],
        (
            NtStatus::ACCESS_DENIED,
            NtStatus::ACCESS_DENIED,
            Some(NtStatus::OBJECT_NAME_NOT_FOUND)
        )
    );
}

/// On a local share a named stream's CREATE asks no job: its calls are made at once.
#[test]
fn a_named_streams_create_on_a_local_share_asks_no_job() {
    let (mut c, calls) = fuse_client(false);
    c.put_file("f", b"");
    let was = calls.all();
    let r = create(&mut c, None, "f:s", D::CREATE, vec![]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(calls.all() > was, "its calls made at once");
}

/// A client of a `fruit` share (Samba's defaults: AfpInfo in Netatalk metadata, the resource
/// fork in an AppleDouble `._` file) whose calls may wait on a network (`remote`) or not.
fn fruit_client(remote: bool) -> (Client, Arc<Calls>) {
    fuse_client_with(remote, |share| {
        let mut cfg = config_on(share, ringshare_core::SigningPolicy::IfRequired);
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().fruit = Some(Arc::new(Fruit::default()));
        }
        server_from(cfg)
    })
}

/// kAAPL_SERVER_QUERY for the server's caps.
fn aapl_query() -> CreateContext<'static> {
    let mut q = Vec::new();
    q.extend_from_slice(&1u32.to_le_bytes());
    q.extend_from_slice(&0u32.to_le_bytes());
    q.extend_from_slice(&1u64.to_le_bytes());
    q.extend_from_slice(&0u64.to_le_bytes());
    CreateContext::new(tag::AAPL, q)
}

/// A WRITE of `data` at 0 to `f`, as [`create`] sends it: its status.
fn write(c: &mut Client, calls: Option<&Calls>, f: FileId, data: &[u8]) -> NtStatus {
    let tree = c.tree_id;
    let m = c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, f, 0, data)
    });
    sent(c, calls, m, "a WRITE").status()
}

/// An AfpInfo blob of type and creator `what`.
fn afp_info(what: &[u8; 8]) -> [u8; 60] {
    let mut info = [0u8; 60];
    info[0..8].copy_from_slice(b"AFP\0\0\0\x01\0");
    info[16..24].copy_from_slice(what);
    info
}

/// CREATEs and AfpInfo WRITEs on a `fruit` share (`calls`: one whose calls may wait on a
/// network, asserted to make none on the I/O thread): AAPL negotiated on the share's root, the
/// AfpInfo stream opened and written (valid, invalid, refused by the back end), the resource
/// fork made in its AppleDouble file, a plain file made and opened, an empty stream opened
/// after AAPL (NOT_FOUND, as macOS expects). Each step's status and what it showed.
fn fruit_script(c: &mut Client, calls: &Calls, remote: bool) -> Vec<(&'static str, String)> {
    let on = remote.then_some(calls);
    let mut out = Vec::new();
    let tree = c.tree_id;
    let m = c.create_msg_ctx(
        tree,
        "",
        GENERIC_READ,
        SHARE_ALL,
        D::OPEN,
        0,
        0,
        vec![aapl_query()],
    );
    let r = sent(c, on, m, "AAPL on the root");
    out.push(("AAPL on the root", format!("{:?}", shown(&r).0)));
    if let Some(f) = shown(&r).4 {
        c.close(f);
    }
    let r = create(c, on, "a", D::CREATE, vec![]);
    out.push(("a plain file", format!("{:?}", head(&r))));
    let r = create(c, on, "a:AFP_AfpInfo", D::OPEN_IF, vec![]);
    let (status, action, eof, _, id) = shown(&r);
    out.push(("AfpInfo", format!("{status:?} {action} {eof}")));
    let info = id.expect("the AfpInfo open");
    let w = write(c, on, info, &afp_info(b"TEXTttxt"));
    out.push(("AfpInfo written", format!("{w:?}")));
    let w = write(c, on, info, &[0u8; 60]);
    out.push(("AfpInfo invalid", format!("{w:?}")));
    calls.refuse.store(true, Ordering::SeqCst);
    let w = write(c, on, info, &afp_info(b"APPLttxt"));
    calls.refuse.store(false, Ordering::SeqCst);
    out.push(("AfpInfo refused", format!("{w:?}")));
    let data = read_data(&c.read(info, 0, 60));
    out.push(("AfpInfo read", format!("{:?}", &data[16..24])));
    c.close(info);
    let r = create(c, on, "a:AFP_Resource", D::OPEN_IF, vec![]);
    let (status, action, eof, _, id) = shown(&r);
    out.push(("resource fork", format!("{status:?} {action} {eof}")));
    if let Some(f) = id {
        c.close(f);
    }
    let r = create(c, on, "a:AFP_Resource", D::OPEN, vec![]);
    out.push(("resource fork again", format!("{:?}", head(&r))));
    let r = create(c, on, "a:empty", D::CREATE, vec![]);
    if let Some(f) = shown(&r).4 {
        c.close(f);
    }
    let r = create(c, on, "a:empty", D::OPEN, vec![]);
    out.push(("an empty stream after AAPL", format!("{:?}", shown(&r).0)));
    out
}

/// A CREATE on a `fruit` share (AAPL, an AfpInfo in Netatalk metadata, a resource fork in an
/// AppleDouble file, a plain file) and an AfpInfo WRITE (stored, refused as invalid, refused
/// by the back end) make no file system call on the I/O thread on a share whose calls may wait
/// on a network, and are answered as on a local share.
#[test]
fn fruit_creates_and_afpinfo_writes_make_no_file_system_call_on_the_io_thread() {
    let (mut c, calls) = fruit_client(true);
    let remote = fruit_script(&mut c, &calls, true);
    let (mut c, calls) = fruit_client(false);
    let local = fruit_script(&mut c, &calls, false);
    assert_eq!(remote, local);
    let find = |what: &str| local.iter().find(|s| s.0 == what).unwrap().1.clone();
    let status = |s: NtStatus| format!("{s:?}");
    assert_eq!(find("AAPL on the root"), status(NtStatus::SUCCESS));
    assert_eq!(find("AfpInfo written"), status(NtStatus::SUCCESS));
    assert_eq!(find("AfpInfo invalid"), status(NtStatus::INVALID_PARAMETER));
    assert_eq!(find("AfpInfo refused"), status(NtStatus::ACCESS_DENIED));
    assert_eq!(find("AfpInfo read"), format!("{:?}", b"TEXTttxt"));
    assert_eq!(
        find("an empty stream after AAPL"),
        status(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

/// An AfpInfo WRITE on a share whose calls may wait on a network is one job of the open's
/// order; on a local share none.
#[test]
fn an_afpinfo_write_is_one_job_and_none_on_a_local_share() {
    for remote in [true, false] {
        let (mut c, calls) = fruit_client(remote);
        c.put_file("a", b"");
        let f = c
            .create("a:AFP_AfpInfo", 0x0013_019f, D::OPEN_IF, 0)
            .expect("AfpInfo");
        let tree = c.tree_id;
        let m = c.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
            write_body(o, f, 0, &afp_info(b"TEXTttxt"))
        });
        let h = with_jobs_held(&mut c, &calls, m);
        assert_eq!(h.answer().status(), NtStatus::SUCCESS);
        if remote {
            assert_eq!(
                (h.jobs, h.on_io_thread),
                (1, 0),
                "one job, no call on the I/O thread"
            );
        } else {
            assert_eq!(h.jobs, 0, "no job on a local share");
            assert!(h.on_io_thread > 0, "the metadata read and written at once");
        }
    }
}

/// A client of the POSIX extensions on a FUSE-like share (`remote`: its calls may wait on a
/// network).
fn posix_client(remote: bool) -> (Client, Arc<Calls>) {
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), remote));
    let calls = Arc::clone(&share.1);
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let (c, answered) = offering(server, mem, 3);
    assert!(answered, "the POSIX extensions negotiated");
    (c, calls)
}

/// The POSIX create context of mode 0o640.
fn posix_ctx() -> Vec<CreateContext<'static>> {
    vec![CreateContext::new(
        tag::POSIX,
        0o640u32.to_le_bytes().to_vec(),
    )]
}

/// POSIX opens (`remote`: asserted to make no file system call on the I/O thread): a new file
/// with its mode, a file holding a reparse buffer a client stored (its tag in the answer), a
/// directory. What each answer's POSIX context showed.
fn posix_script(c: &mut Client, calls: &Calls, remote: bool) -> Vec<(NtStatus, u32, u32)> {
    let on = remote.then_some(calls);
    let f = c.create("r", 0x0013_019f, D::CREATE, 0).expect("r");
    let mut buffer = 0x8000_0023u32.to_le_bytes().to_vec();
    buffer.extend_from_slice(&6u16.to_le_bytes());
    buffer.extend_from_slice(&[0, 0]);
    buffer.extend_from_slice(b"stored");
    const FSCTL_SET_REPARSE_POINT: u32 = 0x0009_00A4;
    let r = c.ioctl(f, FSCTL_SET_REPARSE_POINT, &buffer, 0, 1);
    assert_eq!(r.status(), NtStatus::SUCCESS, "reparse point set");
    c.close(f);
    let mut out = Vec::new();
    for (name, d) in [("n", D::CREATE), ("r", D::OPEN), ("r", D::OVERWRITE_IF)] {
        let r = create(c, on, name, d, posix_ctx());
        let cc = CreateResponse::decode(&r.msg)
            .ok()
            .and_then(|cr| {
                let x = cr.contexts.iter().find(|x| x.tag() == ContextTag::Posix)?;
                PosixCc::decode(&x.data).ok()
            })
            .map_or((0, 0), |cc| (cc.reparse_tag, cc.mode));
        if let Some(f) = shown(&r).4 {
            c.close(f);
        }
        out.push((r.status(), cc.0, cc.1));
    }
    out
}

/// A POSIX open (its exact name, its mode, the reparse buffer a client stored that its answer
/// shows, read as an extended attribute) makes no file system call on the I/O thread on a share
/// whose calls may wait on a network, and is answered as on a local share.
#[test]
fn a_posix_open_makes_no_file_system_call_on_the_io_thread_and_shows_the_stored_reparse_tag() {
    let (mut c, calls) = posix_client(true);
    let remote = posix_script(&mut c, &calls, true);
    let (mut c, calls) = posix_client(false);
    let local = posix_script(&mut c, &calls, false);
    assert_eq!(remote, local);
    assert_eq!(local[0], (NtStatus::SUCCESS, 0, 0o640), "a new file");
    assert_eq!(local[1].1, 0x8000_0023, "the stored buffer's tag");
}
