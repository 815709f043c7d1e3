//! A named stream's rename on a share whose calls may wait on a network (issue 33, session 49;
//! crates/core's cmd/set_info/stream_move.rs): one file system job, and while it is out the
//! stream's old and new names are held: another client's CREATE of either waits for the job and
//! then opens what a local share would show after the rename, never a stream that is no longer
//! there (the review of session 48, finding 1, whose tests these follow). The share is the
//! FUSE-like in-memory share of support/fuse.rs.

use crate::support;

use std::sync::Arc;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::fuse::*;
use support::*;

const INFO_FILE: u8 = 1;
const RENAME: u8 = 10;
/// Read, write and DELETE.
const WITH_DELETE: u32 = 0x0013_019f;
/// Read data and attributes, SYNCHRONIZE.
const READ_ONLY: u32 = 0x0012_0089;

/// `b`'s rename of stream open `s` to `to` sent with its job held: the job, unrun.
fn rename_held(
    b: &mut Client,
    s: ringshare_wire::FileId,
    to: &str,
    replace: bool,
) -> Vec<ringshare_core::LookupRequest> {
    b.hold_lookups = true;
    let m = b.set_info_msg(s, INFO_FILE, RENAME, &rename_info(to, replace));
    let (_, early) = send_signed(b, m);
    assert!(early.is_empty(), "the rename waits for its job");
    let job = std::mem::take(&mut b.held_lookups);
    assert_eq!(job.len(), 1, "the rename's one job");
    b.hold_lookups = false;
    job
}

/// `held` run, then whatever it leads to; the answers.
fn run_all(b: &mut Client, held: Vec<ringshare_core::LookupRequest>) -> Vec<Resp> {
    b.run_any(held);
    b.pump()
}

/// A second client of `b`'s server.
fn other(b: &Client) -> Client {
    Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default())
}

/// `c`'s CREATE of `name` (`access`, sharing all, `disposition`) sent: what was answered at once.
fn send_create(c: &mut Client, name: &str, access: u32, disposition: D) -> Vec<Resp> {
    let tree = c.tree_id;
    let m = c.create_msg(tree, name, access, SHARE_ALL, disposition, 0);
    send_signed(c, m).1
}

/// The answer to `c`'s waiting CREATE once its wait is over (it is tried again on its timer).
fn waited_answer(c: &mut Client) -> Resp {
    for _ in 0..50 {
        let mut out = c.tick(100);
        if let Some(i) = out
            .iter()
            .position(|r| r.hdr.command == ringshare_wire::consts::Command::CREATE)
        {
            let r = out.remove(i);
            if r.status() != NtStatus::PENDING {
                return r;
            }
        }
    }
    panic!("the CREATE was never answered");
}

/// The final status of a CREATE whose answers are `out` (a STATUS_PENDING interim skipped).
fn final_status(out: &[Resp]) -> Option<NtStatus> {
    out.iter()
        .map(Resp::status)
        .find(|s| *s != NtStatus::PENDING)
}

#[test]
fn an_open_of_a_renaming_streams_old_name_waits_for_the_job_and_then_finds_no_stream() {
    let (mut b, _) = fuse_client(true);
    let mut c = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    let job = rename_held(&mut b, s, ":t", false);
    let early = send_create(&mut c, "f:s", READ_ONLY, D::OPEN);
    assert_eq!(
        final_status(&early),
        None,
        "c's open of f:s waits: {early:?}"
    );
    let answers = run_all(&mut b, job);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].status(), NtStatus::SUCCESS, "renamed");
    assert_eq!(
        waited_answer(&mut c).status(),
        NtStatus::OBJECT_NAME_NOT_FOUND,
        "no f:s after the rename, as on a local share"
    );
    let t = c.create("f:t", READ_ONLY, D::OPEN, 0);
    assert!(t.is_ok(), "f:t opens: {t:?}");
}

#[test]
fn an_open_of_a_renaming_streams_new_name_waits_for_the_job_and_then_opens_the_renamed_stream() {
    let (mut b, _) = fuse_client(true);
    let mut c = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    assert_eq!(b.write(s, 0, b"renamed data").status(), NtStatus::SUCCESS);
    let job = rename_held(&mut b, s, ":t", false);
    // OPEN_IF: on the I/O thread's rename, made before or after it; here not answered while
    // the rename is out.
    let early = send_create(&mut c, "f:t", READ_ONLY, D::OPEN_IF);
    assert_eq!(
        final_status(&early),
        None,
        "c's open of f:t waits: {early:?}"
    );
    let renamed = run_all(&mut b, job)[0].status();
    let r = waited_answer(&mut c);
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "f:t opened after the rename's job"
    );
    let t = ringshare_wire::create::CreateResponse::decode(&r.msg)
        .unwrap()
        .file_id;
    // One of a local share's two orders: c's open first (it made `f:t`, so b's rename without
    // ReplaceIfExists meets it: OBJECT_NAME_COLLISION, and c's `f:t` is empty), or b's rename
    // first (c opens the renamed stream, sharing its entry: a rename of it is then refused).
    // Here c's CREATE job made `f:t` before the rename's job ran, and that stream is kept (the
    // review of session 49, finding 1): the first order.
    match renamed {
        NtStatus::OBJECT_NAME_COLLISION => {
            assert_eq!(
                c.read(t, 0, 64).status(),
                NtStatus::END_OF_FILE,
                "c's own empty f:t"
            );
            assert_eq!(
                read_data(&b.read(s, 0, 64)),
                b"renamed data",
                "b's f:s kept"
            );
        }
        NtStatus::SUCCESS => {
            assert_eq!(read_data(&c.read(t, 0, 64)), b"renamed data", "b's stream");
            let r = b.set_info(s, INFO_FILE, RENAME, &rename_info(":u", false));
            assert_eq!(r.status(), NtStatus::SHARING_VIOLATION, "c has it open");
        }
        other => panic!("b's rename answered {other:?}"),
    }
}

#[test]
fn a_stream_rename_the_back_end_refuses_while_an_open_of_its_target_waits_leaves_both_names_as_they_were(
) {
    let (mut b, calls) = fuse_client(true);
    let mut c = other(&b);
    let mut d = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    // With ReplaceIfExists: the empty `f:t` c's CREATE makes (and keeps: the review of session
    // 49, finding 1) may be replaced; the back end's refusal is what answers.
    let job = rename_held(&mut b, s, ":t", true);
    let early = send_create(&mut c, "f:t", WITH_DELETE, D::OPEN_IF);
    assert_eq!(final_status(&early), None, "c's open of f:t waits");
    // The back end refuses changes from now on (the stream c's CREATE would make too).
    calls
        .refuse
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let answers = run_all(&mut b, job);
    assert_eq!(answers[0].status(), NtStatus::ACCESS_DENIED, "refused");
    calls
        .refuse
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let r = waited_answer(&mut c);
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "c makes f:t after the refusal"
    );
    // c's open of f:t (sharing all) is at f:t's key; b's f:s at its own: d's open of each
    // sharing nothing conflicts with the one open there.
    for name in ["f:t", "f:s"] {
        let r = d.create_on(d.tree_id, name, READ_ONLY, 0, D::OPEN, 0);
        assert_eq!(r.err(), Some(NtStatus::SHARING_VIOLATION), "{name} is open");
    }
}

#[test]
fn a_stream_rename_whose_connection_ends_while_its_job_is_out_is_made_and_leaves_no_entry_behind() {
    for remote in [false, true] {
        let (mut b, _) = fuse_client(remote);
        let mut c = other(&b);
        let s = b
            .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
            .expect("b makes f:s");
        if remote {
            let job = rename_held(&mut b, s, ":t", false);
            b.conn.shutdown(b.now);
            b.pump();
            run_all(&mut b, job);
        } else {
            let r = b.set_info(s, INFO_FILE, RENAME, &rename_info(":t", false));
            assert_eq!(r.status(), NtStatus::SUCCESS);
            b.conn.shutdown(b.now);
        }
        let t = c
            .create("f:t", READ_ONLY, D::OPEN, 0)
            .expect("f:t was made");
        assert_eq!(c.close(t).status(), NtStatus::SUCCESS);
        assert_eq!(
            c.create("f:s", READ_ONLY, D::OPEN, 0).err(),
            Some(NtStatus::OBJECT_NAME_NOT_FOUND),
            "remote {remote}: f:s is gone"
        );
        let u = c
            .create("f:u", WITH_DELETE, D::CREATE, 0)
            .expect("c makes f:u");
        let r = c.set_info(u, INFO_FILE, RENAME, &rename_info(":t", true));
        assert_eq!(
            r.status(),
            NtStatus::SUCCESS,
            "remote {remote}: no open of f:t is left, its empty stream is replaced"
        );
    }
}

#[test]
fn two_renames_of_a_files_streams_are_made_one_after_the_other() {
    let (mut b, _) = fuse_client(true);
    let mut c = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    let x = c
        .create("f:x", WITH_DELETE, D::OPEN_IF, 0)
        .expect("c makes f:x");
    let job = rename_held(&mut b, s, ":t", false);
    // c's rename of another stream of the file onto the name b's rename leaves: it waits.
    c.hold_lookups = true;
    let m = c.set_info_msg(x, INFO_FILE, RENAME, &rename_info(":s", false));
    let (_, early) = send_signed(&mut c, m);
    assert!(c.held_lookups.is_empty(), "no job of c's while b's is out");
    assert_eq!(final_status(&early), None, "c's rename waits");
    c.hold_lookups = false;
    assert_eq!(run_all(&mut b, job)[0].status(), NtStatus::SUCCESS);
    let mut answered = Vec::new();
    for _ in 0..50 {
        answered.extend(c.tick(100));
        if answered
            .iter()
            .any(|r| r.hdr.command == ringshare_wire::consts::Command::SET_INFO)
        {
            break;
        }
    }
    let r = answered
        .iter()
        .find(|r| r.hdr.command == ringshare_wire::consts::Command::SET_INFO)
        .expect("c's rename answered");
    assert_eq!(r.status(), NtStatus::SUCCESS, "then made: f:s is free");
    for name in ["f:s", "f:t"] {
        assert!(c.create(name, READ_ONLY, D::OPEN, 0).is_ok(), "{name}");
    }
}

// ---- review of session 49 (helper's findings) ----

/// `c`'s CREATE of `name` sent with its job held: the job, unrun.
fn create_held(
    c: &mut Client,
    name: &str,
    access: u32,
    disposition: D,
) -> Vec<ringshare_core::LookupRequest> {
    c.hold_lookups = true;
    let early = send_create(c, name, access, disposition);
    assert_eq!(
        final_status(&early),
        None,
        "the CREATE waits for its job: {early:?}"
    );
    let job = std::mem::take(&mut c.held_lookups);
    assert_eq!(job.len(), 1, "the CREATE's one job");
    c.hold_lookups = false;
    job
}

#[test]
fn review49_an_open_of_the_old_name_whose_job_ran_before_the_rename_ended_finds_no_stream() {
    let (mut b, _) = fuse_client(true);
    let mut c = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    assert_eq!(b.write(s, 0, b"hello").status(), NtStatus::SUCCESS);
    let job = rename_held(&mut b, s, ":t", false);
    // c's open of f:s: its job runs on the pool while b's rename is out (jobs of two
    // connections run at once) and finds f:s still there ...
    let c_job = create_held(&mut c, "f:s", READ_ONLY, D::OPEN);
    let c_done: Vec<_> = c_job
        .into_iter()
        .map(|r| (r.id, off_io_thread(|| r.run())))
        .collect();
    // ... b's job ends first and is answered: renamed.
    assert_eq!(
        run_all(&mut b, job)[0].status(),
        NtStatus::SUCCESS,
        "renamed"
    );
    // Then the I/O thread takes c's job's answer.
    for (id, done) in c_done {
        c.conn.complete_lookup(c.now, id, done);
    }
    let mut out = c.pump();
    let status = match final_status(&out) {
        Some(s) => s,
        None => waited_answer(&mut c).status(),
    };
    // On a local share either c's open came first (and b's rename was refused: others have
    // the stream open) or it came after the rename: OBJECT_NAME_NOT_FOUND.
    if status == NtStatus::SUCCESS {
        let r = out.remove(
            out.iter()
                .position(|r| r.status() == NtStatus::SUCCESS)
                .unwrap(),
        );
        let f = ringshare_wire::create::CreateResponse::decode(&r.msg).unwrap();
        let read = c.read(f.file_id, 0, 64);
        panic!(
            "c opened f:s after b renamed it to f:t (EndOfFile {}, its READ: {:?})",
            f.end_of_file,
            read.status(),
        );
    }
    assert_eq!(status, NtStatus::OBJECT_NAME_NOT_FOUND);
}

#[test]
fn review49_a_create_that_made_a_stream_and_meets_a_renames_mark_makes_no_call_on_the_io_thread() {
    let (mut b, calls) = fuse_client(true);
    let mut c = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    let job = rename_held(&mut b, s, ":t", false);
    let _ = calls.on_io_thread();
    // c's OPEN_IF of f:t: its job makes the stream, then admission meets the mark.
    let early = send_create(&mut c, "f:t", READ_ONLY, D::OPEN_IF);
    assert_eq!(final_status(&early), None, "c's open of f:t waits");
    assert_eq!(
        calls.on_io_thread(),
        Vec::<&str>::new(),
        "no file system call on the I/O thread of an offloaded share"
    );
    run_all(&mut b, job);
}

#[test]
fn review49_a_create_that_meets_a_renames_mark_never_removes_the_renamed_streams_data() {
    let (mut b, calls) = fuse_client(true);
    let mut c = other(&b);
    let s = b
        .create("f:s", WITH_DELETE, D::OPEN_IF, 0)
        .expect("b makes f:s");
    assert_eq!(b.write(s, 0, b"precious").status(), NtStatus::SUCCESS);
    // b renames f:s onto f:t, replacing it; c opens f:t (OPEN_IF) at the same time.
    let b_job = rename_held(&mut b, s, ":t", true);
    let c_job = create_held(&mut c, "f:t", READ_ONLY, D::OPEN_IF);
    // c's job runs first on the pool: it makes f:t (empty).
    let c_done: Vec<_> = c_job
        .into_iter()
        .map(|r| (r.id, off_io_thread(|| r.run())))
        .collect();
    // b's job runs on another pool thread and is caught just after its rename (on FUSE: its
    // last removexattr, or its watchers' notes), its mark still set ...
    let (renamed_tx, renamed_rx) = std::sync::mpsc::sync_channel(1);
    let (go_tx, go_rx) = std::sync::mpsc::sync_channel(1);
    *calls.stream_rename_gate.lock().unwrap() = Some((renamed_tx, go_rx));
    assert_eq!(b_job.len(), 1);
    let b_req = b_job.into_iter().next().unwrap();
    let b_done = std::thread::scope(|sc| {
        let h = sc.spawn(|| off_io_thread(|| b_req.run()));
        renamed_rx.recv().expect("b's job renamed f:s to f:t");
        // ... while the I/O thread takes c's job's answer: admission meets the mark.
        for (id, done) in c_done {
            c.conn.complete_lookup(c.now, id, done);
        }
        let _ = c.pump();
        go_tx.send(()).unwrap();
        h.join().unwrap()
    });
    b.conn.complete_lookup(b.now, b_req.id, b_done);
    let answers = b.pump();
    assert_eq!(answers[0].status(), NtStatus::SUCCESS, "b's rename made");
    let r = waited_answer(&mut c);
    assert_eq!(r.status(), NtStatus::SUCCESS, "c's OPEN_IF of f:t");
    let t = ringshare_wire::create::CreateResponse::decode(&r.msg)
        .unwrap()
        .file_id;
    // On a local share: either c's open came first (b's rename refused, f:s keeps the data) or
    // b's rename did (c opens f:t holding it). Never is the data gone.
    let data = |c: &mut Client, f| {
        let r = c.read(f, 0, 64);
        match r.status() {
            NtStatus::SUCCESS => Ok(read_data(&r)),
            e => Err(e),
        }
    };
    let in_s = c
        .create("f:s", READ_ONLY, D::OPEN, 0)
        .map(|f| data(&mut c, f));
    let in_t = data(&mut c, t);
    assert!(
        in_t.as_deref() == Ok(&b"precious"[..]) || in_s == Ok(Ok(b"precious".to_vec())),
        "b's data is in neither stream: f:t holds {in_t:?}, f:s {in_s:?}"
    );
}

#[test]
fn review49_a_new_file_refused_for_its_lease_key_is_removed_off_the_io_thread() {
    let (mut c, calls) = fuse_client(true);
    let m = c.create_msg_caching(
        "a",
        caching::ALL,
        SHARE_ALL,
        D::OPEN_IF,
        caching::LEASE,
        Some(lease_v2(7, caching::R)),
    );
    let r = send_signed(&mut c, m).1;
    assert_eq!(
        final_status(&r),
        Some(NtStatus::SUCCESS),
        "a opened with lease key 7"
    );
    let _ = calls.on_io_thread();
    // The same lease key for another file: refused (a lease key names one file).
    let m = c.create_msg_caching(
        "b",
        caching::ALL,
        SHARE_ALL,
        D::CREATE,
        caching::LEASE,
        Some(lease_v2(7, caching::R)),
    );
    let r = send_signed(&mut c, m).1;
    assert_eq!(final_status(&r), Some(NtStatus::INVALID_PARAMETER));
    assert_eq!(
        calls.on_io_thread(),
        Vec::<&str>::new(),
        "the new file b the job made is removed again off the I/O thread"
    );
}

#[test]
fn review49_a_delete_on_close_stream_renamed_as_its_connection_ends_is_removed_under_its_new_name()
{
    for remote in [false, true] {
        let (mut b, _) = fuse_client(remote);
        let mut c = other(&b);
        // b's stream open, to be deleted at its close.
        let s = b
            .create("f:s", WITH_DELETE, D::OPEN_IF, 0x1000)
            .expect("b makes f:s, delete on close");
        assert_eq!(b.write(s, 0, b"scratch").status(), NtStatus::SUCCESS);
        if remote {
            let job = rename_held(&mut b, s, ":t", false);
            // The connection ends while the rename's job is out; the close's job is of the same
            // open's order, so the pool runs it after the rename's.
            b.hold_lookups = true;
            b.conn.shutdown(b.now);
            b.pump();
            let close_jobs = std::mem::take(&mut b.held_lookups);
            b.hold_lookups = false;
            run_all(&mut b, job);
            run_all(&mut b, close_jobs);
        } else {
            let r = b.set_info(s, INFO_FILE, RENAME, &rename_info(":t", false));
            assert_eq!(r.status(), NtStatus::SUCCESS);
            b.conn.shutdown(b.now);
            b.pump();
        }
        for name in ["f:s", "f:t"] {
            assert_eq!(
                c.create(name, READ_ONLY, D::OPEN, 0).err(),
                Some(NtStatus::OBJECT_NAME_NOT_FOUND),
                "remote {remote}: {name} was deleted at its close"
            );
        }
    }
}
