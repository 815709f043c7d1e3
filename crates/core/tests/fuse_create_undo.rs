//! Issue 33 (docs/cluster-internals.md, "A refused CREATE's undo off the I/O thread"; session
//! 50): on a share whose calls may wait on a network, a CREATE refused at admission after its
//! job made a new file or stream (a lease key that names another file, [MS-SMB2] 3.3.5.9.8; a
//! new stream of a file found delete-pending) has what it made removed in a file system job,
//! not on the I/O thread: in its own job when the refusal is sure there, else in a job of its
//! own that the refusal is answered after, so a retry never finds a half-made file. The
//! answers are those of a local share, where the undo is made at once; what another client
//! holds meanwhile is left to it.

use crate::support;

use std::sync::Arc;

use ringshare_vfs::memory::FaultOp;
use ringshare_vfs::RelPath;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

const INFO_FILE: u8 = 1;
const DISPOSITION: u8 = 13;
const RENAME: u8 = 10;
/// Read, write and DELETE.
const WITH_DELETE: u32 = 0x0013_019f;

/// A second client of `b`'s server.
fn other(b: &Client) -> Client {
    Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default())
}

/// The final status among `out` (a STATUS_PENDING interim skipped).
fn final_status(out: &[Resp]) -> Option<NtStatus> {
    out.iter()
        .map(Resp::status)
        .find(|s| *s != NtStatus::PENDING)
}

/// `c`'s CREATE of `name` (`disposition`, all access, sharing all) asking a lease with key
/// `key`, as a message.
fn leased(c: &mut Client, name: &str, disposition: D, key: u8) -> Vec<u8> {
    let lease = Some(lease_v2(key, caching::R));
    c.create_msg_caching(
        name,
        caching::ALL,
        SHARE_ALL,
        disposition,
        caching::LEASE,
        lease,
    )
}

/// `msg` sent on `c` and, on a share whose calls may wait on a network (`calls`), its jobs
/// held and run to the end: its final status and how many jobs it asked. It makes no file
/// system call on the I/O thread there.
fn sent(c: &mut Client, calls: Option<&Calls>, msg: Vec<u8>, what: &str) -> (NtStatus, usize) {
    let Some(calls) = calls else {
        let out = send_signed(c, msg).1;
        return (final_status(&out).expect("answered"), 0);
    };
    let _ = calls.on_io_thread();
    c.hold_lookups = true;
    let mut out = send_signed(c, msg).1;
    let (more, jobs) = c.run_held_jobs_to_the_end();
    out.extend(more);
    assert_eq!(
        calls.on_io_thread(),
        Vec::<&str>::new(),
        "{what}: no file system call on the I/O thread"
    );
    (final_status(&out).expect("answered"), jobs)
}

/// `msg` sent on `c` with its one job held; the job run, then `between` (with the job's
/// answer not yet handed back: the CREATE has yet to reach admission), then the answer handed
/// back, the jobs that leads to held: the answers sent meanwhile.
fn job_then(c: &mut Client, msg: Vec<u8>, between: impl FnOnce(&mut Client)) -> Vec<Resp> {
    c.hold_lookups = true;
    assert!(
        send_signed(c, msg).1.is_empty(),
        "the CREATE waits for its job"
    );
    let job = std::mem::take(&mut c.held_lookups);
    assert_eq!(job.len(), 1, "the CREATE's one job");
    let done = off_io_thread(|| job[0].run());
    c.hold_lookups = false;
    between(c);
    c.hold_lookups = true;
    c.conn.complete_lookup(c.now, job[0].id, done);
    c.pump()
}

/// Whether `held` holds the undo's job (a CREATE's refusal waits for it; the nodes a refused
/// CREATE let go may be let go in a job of their own beside it).
fn undo_held(held: &[ringshare_core::LookupRequest]) -> bool {
    held.iter().any(|r| {
        matches!(&r.ask, ringshare_core::Lookup::Fs(j) if j.what == "the undo of a refused CREATE")
    })
}

/// After [`job_then`] (its answers `early`): the CREATE is not answered before the undo's job
/// ran, what it made still there (`made`, checked before the job runs); the jobs run, no file
/// system call made on the I/O thread. The CREATE's final status.
fn answered_after_undo(
    c: &mut Client,
    calls: &Calls,
    early: Vec<Resp>,
    made: impl Fn(&Client) -> bool,
) -> Option<NtStatus> {
    assert_eq!(final_status(&early), None, "not answered before the undo");
    assert!(undo_held(&c.held_lookups), "the undo's job");
    assert!(made(c), "what it made is removed in that job");
    let (out, _) = c.run_held_jobs_to_the_end();
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());
    final_status(&out)
}

#[test]
fn a_new_file_or_stream_whose_lease_key_names_another_file_is_removed_in_its_own_job() {
    let mut seen = Vec::new();
    for remote in [false, true] {
        let (mut c, calls) = fuse_client(remote);
        let calls = remote.then_some(&*calls);
        let m = leased(&mut c, "a", D::OPEN_IF, 7);
        assert_eq!(sent(&mut c, calls, m, "a").0, NtStatus::SUCCESS);
        let mut shown = Vec::new();
        // A new file, a new file with its new stream, a new stream of the leased file.
        for (name, d) in [("b", D::CREATE), ("g:s", D::OPEN_IF), ("a:t", D::OPEN_IF)] {
            let m = leased(&mut c, name, d, 7);
            let (status, jobs) = sent(&mut c, calls, m, name);
            if remote {
                assert_eq!(jobs, 1, "{name}: refused in its one job");
            }
            shown.push((name, status));
        }
        let left = [
            exists(&c, "b"),
            exists(&c, "g"),
            has_stream(&c, "a", "t"),
            exists(&c, "a"),
        ];
        assert_eq!(left, [false, false, false, true], "remote {remote}");
        seen.push(shown);
    }
    assert_eq!(seen[0][0].1, NtStatus::INVALID_PARAMETER);
    assert_eq!(seen[0], seen[1], "as on a local share");
}

#[test]
fn a_lease_key_bound_while_the_create_job_is_out_refuses_the_new_file_once_it_is_removed() {
    let mut seen = Vec::new();
    for remote in [false, true] {
        let (mut c, calls) = fuse_client(remote);
        let status = if remote {
            // b's job makes b; a's open binds lease key 7 before b's admission.
            let m = leased(&mut c, "b", D::CREATE, 7);
            let early = job_then(&mut c, m, |c| {
                let m = leased(c, "a", D::OPEN_IF, 7);
                assert_eq!(final_status(&send_signed(c, m).1), Some(SUCCESS));
                let _ = calls.on_io_thread();
            });
            answered_after_undo(&mut c, &calls, early, |c| exists(c, "b"))
        } else {
            let m = leased(&mut c, "a", D::OPEN_IF, 7);
            assert_eq!(final_status(&send_signed(&mut c, m).1), Some(SUCCESS));
            let m = leased(&mut c, "b", D::CREATE, 7);
            final_status(&send_signed(&mut c, m).1)
        };
        seen.push((status, exists(&c, "b")));
        // Tried again without the lease, b is made afresh.
        let f = c.create("b", WITH_DELETE, D::CREATE, 0);
        assert!(f.is_ok(), "remote {remote}: no half-made b left: {f:?}");
    }
    assert_eq!(seen[0], (Some(NtStatus::INVALID_PARAMETER), false));
    assert_eq!(seen[0], seen[1], "as on a local share");
}

const SUCCESS: NtStatus = NtStatus::SUCCESS;

/// `b`'s open `f` set delete-pending.
fn delete_pending(b: &mut Client, f: FileId) {
    let r = b.set_info(f, INFO_FILE, DISPOSITION, &[1]);
    assert_eq!(r.status(), SUCCESS, "delete pending set");
}

#[test]
fn a_new_stream_of_a_file_found_delete_pending_is_removed_before_the_refusal() {
    let mut seen = Vec::new();
    for remote in [false, true] {
        let (mut b, calls) = fuse_client(remote);
        let mut c = other(&b);
        let f = b
            .create("f", WITH_DELETE, D::OPEN_IF, 0)
            .expect("b makes f");
        let status = if remote {
            // c's job makes f:s, f not delete-pending then; b sets it before c's admission.
            let tree = c.tree_id;
            let m = c.create_msg(tree, "f:s", WITH_DELETE, SHARE_ALL, D::OPEN_IF, 0);
            let early = job_then(&mut c, m, |_| {
                delete_pending(&mut b, f);
                let _ = calls.on_io_thread();
            });
            answered_after_undo(&mut c, &calls, early, |c| has_stream(c, "f", "s"))
        } else {
            delete_pending(&mut b, f);
            c.create("f:s", WITH_DELETE, D::OPEN_IF, 0).err()
        };
        seen.push((status, has_stream(&c, "f", "s"), exists(&c, "f")));
        assert_eq!(b.close(f).status(), SUCCESS);
        assert!(
            !exists(&c, "f"),
            "remote {remote}: f is deleted at its close"
        );
    }
    assert_eq!(seen[0], (Some(NtStatus::DELETE_PENDING), false, true));
    assert_eq!(seen[0], seen[1], "as on a local share");
}

#[test]
fn a_new_file_another_client_opened_before_the_refusal_is_left_to_it() {
    let (mut b, calls) = fuse_client(true);
    let mut c = other(&b);
    // c's job makes g and its stream s; before c's admission b opens the new g and sets it
    // delete-pending.
    let tree = c.tree_id;
    let m = c.create_msg(tree, "g:s", WITH_DELETE, SHARE_ALL, D::OPEN_IF, 0);
    let mut g = None;
    let early = job_then(&mut c, m, |c| {
        assert!(exists(c, "g") && has_stream(c, "g", "s"), "made in the job");
        let opened = b.create("g", WITH_DELETE, D::OPEN, 0).expect("b opens g");
        delete_pending(&mut b, opened);
        g = Some(opened);
        let _ = calls.on_io_thread();
    });
    let g = g.expect("b's open");
    let status = answered_after_undo(&mut c, &calls, early, |c| has_stream(c, "g", "s"));
    assert_eq!(status, Some(NtStatus::DELETE_PENDING));
    assert!(
        !has_stream(&c, "g", "s"),
        "the stream only c's open had is removed"
    );
    assert!(exists(&c, "g"), "g, open by b, is left to b");
    assert_eq!(b.close(g).status(), SUCCESS);
    assert!(!exists(&c, "g"), "g is deleted at b's close");
}

#[test]
fn a_new_file_renamed_away_before_the_refusal_leaves_the_file_now_at_its_name() {
    let (mut c, calls) = fuse_client(true);
    let mut d = other(&c);
    let m = leased(&mut c, "b", D::CREATE, 7);
    let early = job_then(&mut c, m, |c| {
        // Before c's admission d renames the new b to b2 and makes a b of its own; c binds
        // lease key 7 to a.
        let f = d.create("b", WITH_DELETE, D::OPEN, 0).expect("d opens b");
        let r = d.set_info(f, INFO_FILE, RENAME, &rename_info("b2", false));
        assert_eq!(r.status(), SUCCESS, "b renamed to b2");
        assert_eq!(d.close(f).status(), SUCCESS);
        d.put_file("b", b"d's");
        let m = leased(c, "a", D::OPEN_IF, 7);
        assert_eq!(final_status(&send_signed(c, m).1), Some(SUCCESS));
        let _ = calls.on_io_thread();
    });
    let status = answered_after_undo(&mut c, &calls, early, |c| exists(c, "b"));
    assert_eq!(status, Some(NtStatus::INVALID_PARAMETER));
    assert!(exists(&c, "b"), "d's b, not made by c's CREATE, is kept");
    assert!(
        exists(&c, "b2"),
        "what c's CREATE made, under a name it never asked, is left"
    );
}

/// A CREATE run again after a wait (here a local program's kernel lease met at its first try)
/// and refused so on that try is answered after the undo's job too, and a CANCEL while that
/// job is out does not answer it before: its refusal comes once b is gone.
#[test]
fn a_create_refused_when_run_again_after_a_wait_is_answered_after_its_undo_even_when_cancelled() {
    let mut seen = Vec::new();
    for remote in [false, true] {
        let (mut c, calls) = fuse_client(remote);
        let b = RelPath::from_components(["b"]).ok();
        let lease_held = ringshare_vfs::FsError::LeaseHeld;
        c.mem.inject_fault(FaultOp::Open, b, lease_held, 1);
        let m = leased(&mut c, "b", D::CREATE, 7);
        let first = send_signed(&mut c, m).1;
        let statuses: Vec<NtStatus> = first.iter().map(Resp::status).collect();
        assert_eq!(statuses, [NtStatus::PENDING], "it waits");
        let status = if remote {
            // Its second try's job makes b; a binds lease key 7 before its admission.
            c.hold_lookups = true;
            assert!(c.tick(1_000).is_empty());
            let job = std::mem::take(&mut c.held_lookups);
            assert_eq!(job.len(), 1, "the second try's job");
            let done = off_io_thread(|| job[0].run());
            c.hold_lookups = false;
            let m = leased(&mut c, "a", D::OPEN_IF, 7);
            assert_eq!(final_status(&send_signed(&mut c, m).1), Some(SUCCESS));
            let _ = calls.on_io_thread();
            c.hold_lookups = true;
            c.conn.complete_lookup(c.now, job[0].id, done);
            let mut early = c.pump();
            early.extend(c.cancel_async(&first[0]));
            answered_after_undo(&mut c, &calls, early, |c| exists(c, "b"))
        } else {
            let m = leased(&mut c, "a", D::OPEN_IF, 7);
            assert_eq!(final_status(&send_signed(&mut c, m).1), Some(SUCCESS));
            final_status(&c.tick(1_000))
        };
        seen.push((status, exists(&c, "b")));
    }
    assert_eq!(seen[0], (Some(NtStatus::INVALID_PARAMETER), false));
    assert_eq!(seen[0], seen[1], "as on a local share");
}

/// The review of session 50, U1: a DH2Q CREATE parked on its undo's job whose connection goes
/// had its replay's "pending" mark cleared at once, before the job ran: the client's replay on
/// its new connection then ran as a fresh CREATE and met the half-made file
/// (OBJECT_NAME_COLLISION for a file it never made). The replay is told to try again until the
/// job ran (FILE_NOT_AVAILABLE, as a replay of a CREATE that still waits is), and then makes
/// the file afresh.
#[test]
fn a_replay_after_its_creates_connection_went_waits_for_the_undo_and_finds_no_half_made_file() {
    use ringshare_wire::create::{tag, CreateContext};
    const GUID: [u8; 16] = [0x44; 16];
    const REPLAY_OPERATION: u32 = 0x2000_0000;
    let contexts = || {
        let lease = lease_v2(7, caching::R).encode();
        let mut c = vec![CreateContext::new(tag::REQUEST_LEASE, lease)];
        c.extend(dh2q_with(GUID, 0));
        c
    };
    let (mut c, calls) = fuse_client(true);
    let all = caching::ALL;
    let m = c.create_msg_caching_ctx("b", all, SHARE_ALL, D::CREATE, caching::LEASE, contexts());
    let early = job_then(&mut c, m, |c| {
        let m = leased(c, "a", D::OPEN_IF, 7);
        assert_eq!(final_status(&send_signed(c, m).1), Some(SUCCESS));
        let _ = calls.on_io_thread();
    });
    assert_eq!(final_status(&early), None, "waits for its undo");
    assert!(undo_held(&c.held_lookups));
    let undo = std::mem::take(&mut c.held_lookups);
    c.conn.shutdown(c.now);
    c.pump();
    // The client's new connection (the same ClientGuid) replays the CREATE.
    let mut d = other(&c);
    let replay = |d: &mut Client| {
        let mut r =
            d.create_msg_caching_ctx("b", all, SHARE_ALL, D::CREATE, caching::LEASE, contexts());
        let flags = u32::from_le_bytes(r[16..20].try_into().unwrap()) | REPLAY_OPERATION;
        r[16..20].copy_from_slice(&flags.to_le_bytes());
        final_status(&send_signed(d, r).1)
    };
    assert_eq!(
        replay(&mut d),
        Some(NtStatus::FILE_NOT_AVAILABLE),
        "told to try again while the half-made b is there"
    );
    for req in undo {
        let _ = off_io_thread(|| req.run());
    }
    assert!(!exists(&d, "b"), "removed by the undo");
    assert_eq!(replay(&mut d), Some(SUCCESS), "then made afresh");
}
