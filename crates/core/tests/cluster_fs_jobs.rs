//! Issue 33, plan step 2 on a cluster: on a share whose file system calls may wait on a network
//! (`fs calls off io thread`), a READ or WRITE of a file homed on another node that no I/O
//! grant decides asks the home, then its file system job (the check against local POSIX
//! locks), each once: the home's answer taken before the job was asked is kept for the run
//! after it (cmd/io_check.rs), not asked again.

use crate::cluster_support;
use crate::support;

use std::sync::Arc;

use cluster_support::*;
use ringshare_core::Lookup;
use ringshare_wire::NtStatus;
use support::*;

const ALL: u32 = 0x001F_01FF;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;
const OPEN_IF: ringshare_wire::consts::CreateDisposition =
    ringshare_wire::consts::CreateDisposition::OPEN_IF;
const OVERWRITE_IF: ringshare_wire::consts::CreateDisposition =
    ringshare_wire::consts::CreateDisposition::OVERWRITE_IF;

/// What a held lookup asks, in a word: its file's home, a file system job, the cluster's record
/// store, or something else.
fn kind(r: &ringshare_core::LookupRequest) -> &'static str {
    match r.ask {
        Lookup::Home(_) => "home",
        Lookup::Fs(_) => "fs",
        Lookup::Cluster(_) => "record",
        _ => "other",
    }
}

/// Each held lookup carried in turn until the request is answered: the kinds asked, in order,
/// and the answers.
fn carry_until_answered(c: &mut Client) -> (Vec<&'static str>, Vec<Resp>) {
    let mut kinds = Vec::new();
    loop {
        let held = std::mem::take(&mut c.held_lookups);
        assert!(!held.is_empty(), "nothing held and no answer");
        kinds.extend(held.iter().map(kind));
        for req in held {
            let done = req.run();
            c.conn.complete_lookup(c.now, req.id, done);
        }
        let out = c.pump();
        if !out.is_empty() {
            return (kinds, out);
        }
        assert!(kinds.len() < 8, "asked again and again: {kinds:?}");
    }
}

/// Three nodes, every file homed on node 3, each share offloaded.
fn offloaded_cluster() -> Cluster {
    Cluster::with(3, 3, |c| {
        c.shares = c
            .shares
            .iter()
            .map(|s| {
                let mut d = s.with_backend(&s.name, s.backend.clone());
                d.fs_offload = Some(true);
                Arc::new(d)
            })
            .collect();
    })
}

#[test]
fn a_read_and_a_write_on_an_offloaded_share_ask_their_home_and_their_job_once_each() {
    let cl = offloaded_cluster();
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "rw.txt", ALL, 7).expect("a");
    assert_eq!(a.write(fa, 0, b"0123456789").status(), NtStatus::SUCCESS);
    let fb = open(&mut b, "rw.txt", ALL, 7).expect("b");
    let locked = [(100, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(b.lock(fb, &locked).status(), NtStatus::SUCCESS);

    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    let m = a.read_msg(fa, 0, 4);
    assert!(a.send_frame(m).is_empty(), "the READ waits");
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(kinds, ["home", "fs"], "the home, then the job");
    assert_eq!(cl.calls_to(3), calls + 1, "one call to the home");
    assert_eq!(read_data(&r[0]), b"0123");

    let m = a.read_msg(fa, 100, 4);
    assert!(a.send_frame(m).is_empty());
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(
        (kinds, r[0].status()),
        (vec!["home"], NtStatus::FILE_LOCK_CONFLICT),
        "the home refuses: no job"
    );

    let tree = a.tree_id;
    let m = a.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, fa, 4, b"EF")
    });
    let calls = cl.calls_to(3);
    assert!(a.send_frame(m).is_empty(), "the WRITE waits");
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(
        (kinds, r[0].status()),
        (vec!["home", "fs"], NtStatus::SUCCESS)
    );
    assert_eq!(cl.calls_to(3), calls + 1, "one call to the home");
    a.hold_lookups = false;
    assert_eq!(read_data(&a.read(fa, 0, 10)), b"0123EF6789");
}

/// The review of step 5, 1h: on an offloaded share, a CREATE of an existing file homed on a node
/// whose calls this I/O thread fails at once now (a flood of opens of a stopped node's files) is
/// told "try again" by its file system job before the file is opened: an open fault set on the
/// file is still there afterwards, nothing is asked of the home, the refusal is counted once.
/// (Before, the job opened the file and the I/O thread refused it after.)
#[test]
fn an_offloaded_open_of_a_file_whose_home_cannot_be_called_now_is_refused_before_its_job_opens_it()
{
    let cl = offloaded_cluster();
    let mut a = cl.client(1);
    let fa = open(&mut a, "far.txt", ALL, 7).expect("made");
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    let path = ringshare_vfs::RelPath::from_components(["far.txt"]).expect("path");
    let fault = (
        ringshare_vfs::memory::FaultOp::Open,
        ringshare_vfs::FsError::Io,
    );
    cl.mem.inject_fault(fault.0, Some(path), fault.1, 1);
    cl.bus.refusing.lock().unwrap().insert(3);
    let refused = || cl.bus.refused.load(std::sync::atomic::Ordering::Relaxed);
    let (calls, before) = (cl.calls_to(3), refused());
    a.hold_lookups = true;
    let m = a.create_msg_caching("far.txt", ALL, 7, OPEN_IF, 0, None);
    assert!(a.send_frame(m).is_empty(), "the CREATE waits for its job");
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(
        (kinds, r[0].status()),
        (vec!["fs"], NtStatus::FILE_NOT_AVAILABLE),
        "try again, from the job"
    );
    assert_eq!(
        (cl.calls_to(3), refused() - before),
        (calls, 1),
        "nothing asked of the home; one refusal counted"
    );
    a.hold_lookups = false;
    cl.bus.refusing.lock().unwrap().clear();
    assert_ne!(
        open(&mut a, "far.txt", ALL, 7).map(|_| ()),
        Ok(()),
        "the open fault was not used by the refused open: the next open meets it"
    );
    let f = open(&mut a, "far.txt", ALL, 7).expect("the calls go again");
    assert_eq!(a.close(f).status(), NtStatus::SUCCESS);
}

/// The review of session 46, finding 9: a CREATE whose open was admitted at its file's home
/// (another node) and whose overwrite then fails takes the open out there by a close sent later
/// (`resend_closes`), not by a call its I/O thread waits for; once it is sent, another client
/// opens the file without sharing. (Before, the I/O thread called the home and waited.)
#[test]
fn an_open_whose_overwrite_fails_leaves_its_home_by_a_close_the_io_thread_does_not_wait_for() {
    use ringshare_core::cluster::ClusterNode;
    let cl = offloaded_cluster();
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "cut.txt", ALL, 7).expect("made");
    assert_eq!(a.write(fa, 0, b"0123456789").status(), NtStatus::SUCCESS);
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    let path = ringshare_vfs::RelPath::from_components(["cut.txt"]).expect("path");
    let fault = (
        ringshare_vfs::memory::FaultOp::SetLen,
        ringshare_vfs::FsError::Io,
    );
    cl.mem.inject_fault(fault.0, Some(path), fault.1, 1);
    a.hold_lookups = true;
    let m = a.create_msg_caching("cut.txt", ALL, 0, OVERWRITE_IF, 0, None);
    assert!(a.send_frame(m).is_empty(), "the CREATE waits");
    let mut answers = Vec::new();
    let mut waited_on_io_thread = 0;
    for _ in 0..8 {
        let held = std::mem::take(&mut a.held_lookups);
        if held.is_empty() {
            break;
        }
        for req in held {
            let done = req.run();
            let calls = cl.calls_to(3);
            a.conn.complete_lookup(a.now, req.id, done);
            answers.extend(a.pump());
            waited_on_io_thread += cl.calls_to(3) - calls;
        }
    }
    a.hold_lookups = false;
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::IO_DEVICE_ERROR],
        "the overwrite's failure answered"
    );
    assert_eq!(
        waited_on_io_thread, 0,
        "no call to the home from the I/O thread"
    );
    assert_eq!(
        cl.nodes[0].resend_closes(),
        0,
        "the home took the close sent after"
    );
    let fb = open(&mut b, "cut.txt", ALL, 0).expect("nothing of a's open is left");
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
}

/// SMB2_DHANDLE_FLAG_PERSISTENT.
const PERSISTENT: u32 = 2;

/// The review of steps 3-4, finding 4: on an offloaded, continuously available share, a CLOSE of
/// a persistent open whose file is homed on another node parks for the home; its connection
/// ends (a frame that is not SMB) before the home's answer comes. The close then finishes
/// unanswered, and what it asks next is still asked, nobody waiting: its last-close job (the
/// descriptor let go on the pool, not dropped with the answer on the I/O thread) and the
/// removal of the open's record. (Without the fix both were dropped: the record stayed.)
#[test]
fn a_close_whose_connection_ends_while_it_waits_for_the_home_still_removes_the_record() {
    let cl = offloaded_ca_cluster();
    let records = || cl.bus.ca.lock().unwrap().len();
    let mut a = cl.client(1);
    let f = persistent_open(&mut a, "kept.txt");
    assert_eq!(records(), 1, "its record");

    a.hold_lookups = true;
    let m = a.close_msg(f, 0);
    assert!(a.send_frame(m).is_empty(), "the CLOSE waits");
    let held = std::mem::take(&mut a.held_lookups);
    assert!(
        matches!(
            held[..],
            [ringshare_core::LookupRequest {
                ask: Lookup::Home(_),
                ..
            }]
        ),
        "for the file's home"
    );
    // Not SMB: the connection ends (it closes once what it sent is out).
    let mut bad = vec![0xfe, b'X', b'Y', b'Z'];
    bad.resize(64, 0);
    assert!(a.send_frame(bad).is_empty());
    assert!(a.closed, "closing");
    for req in held {
        let done = req.run();
        a.conn.complete_lookup(a.now, req.id, done);
    }
    assert!(a.pump().is_empty(), "unanswered");
    let kinds: Vec<_> = a.held_lookups.iter().map(kind).collect();
    assert_eq!(
        kinds,
        ["fs", "record"],
        "the last close and the record's removal, asked"
    );
    assert_eq!(records(), 1, "not removed on the I/O thread");
    answer_held(&mut a);
    assert_eq!(records(), 0, "the record is gone with the open");
}

/// Three nodes, every file homed on node 3, each share offloaded and the first continuously
/// available.
fn offloaded_ca_cluster() -> Cluster {
    Cluster::with(3, 3, |c| {
        c.shares = c
            .shares
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut d = s.with_backend(&s.name, s.backend.clone());
                d.fs_offload = Some(true);
                d.continuous_availability = i == 0;
                Arc::new(d)
            })
            .collect();
    })
}

/// A persistent open of `name` by `a`.
fn persistent_open(a: &mut Client, name: &str) -> ringshare_wire::FileId {
    let m = lease_create_msg(a, name, 7, vec![dh2q_flags(5, PERSISTENT)]);
    let r = a.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    assert_eq!(durable_flags(&r), Some(PERSISTENT));
    ringshare_wire::create::CreateResponse::decode(&r.msg)
        .expect("create response")
        .file_id
}

/// The review of fsjobs2, finding C: the same CLOSE, its connection shut down (as the driver
/// does once a closing connection's sends are out) before the home answers. The close is
/// abandoned: sent to the home again until one takes it, the record's removal asked, and the
/// descriptor's last close made in a file system job, nobody waiting, not where the abandoned
/// close is dropped on the I/O thread. (Without it only the record's removal was asked.)
#[test]
fn a_close_whose_connection_is_shut_down_while_it_waits_for_the_home_lets_its_file_go_on_the_pool()
{
    let cl = offloaded_ca_cluster();
    let mut a = cl.client(1);
    let f = persistent_open(&mut a, "dropped.txt");
    a.hold_lookups = true;
    let m = a.close_msg(f, 0);
    assert!(a.send_frame(m).is_empty(), "the CLOSE waits for the home");
    let held = std::mem::take(&mut a.held_lookups);
    assert!(matches!(
        held[..],
        [ringshare_core::LookupRequest {
            ask: Lookup::Home(_),
            ..
        }]
    ));
    a.conn.shutdown(a.now);
    assert!(a.pump().is_empty(), "unanswered");
    let kinds: Vec<_> = a.held_lookups.iter().map(kind).collect();
    assert_eq!(
        kinds,
        ["fs", "record"],
        "the last close in a job and the record's removal, asked"
    );
}

/// Step 6, second part: on an offloaded share a rename of a file homed on another node asks the
/// home whether it waits for breaks (before anything else, so the breaks go out while the
/// SET_INFO is handled), looks at its target in a job with that answer kept (the home is asked
/// once), and renames in a second job; the file is then found at its new name from another
/// node.
#[test]
fn a_rename_on_an_offloaded_share_of_a_file_homed_elsewhere_asks_its_home_once_between_jobs() {
    let cl = offloaded_cluster();
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "from.txt", ALL, 7).expect("a");
    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    let m = a.set_info_msg(fa, 1, 10, &rename_info("to.txt", false));
    assert!(a.send_frame(m).is_empty(), "the rename waits");
    let (kinds, r) = carry_until_answered(&mut a);
    a.hold_lookups = false;
    assert_eq!(r[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        kinds,
        ["home", "fs", "fs"],
        "the home, the look with its answer kept, the rename"
    );
    assert_eq!(
        cl.calls_to(3),
        calls + 1,
        "one call to the home before the answer"
    );
    let only_open = ringshare_wire::consts::CreateDisposition::OPEN;
    assert!(
        b.create("to.txt", ALL, only_open, 0).is_ok(),
        "at its new name"
    );
    assert_eq!(
        b.create("from.txt", ALL, only_open, 0).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

/// Issue 33 (docs/cluster.md, "Still on the I/O thread" until session 50): on an offloaded
/// share, a close nobody waits for (a connection's end) of a file homed on another node is one
/// job of a home-call thread: the call to the home and what the close leaves here after its
/// answer (the descriptor's last close, the removal the home decided for a delete-on-close
/// file). As one wire call its answer ran those where the ring carries it: the I/O thread.
/// The file is removed once the job ran, and not before.
#[test]
fn a_connections_end_on_an_offloaded_share_closes_a_file_homed_elsewhere_in_a_home_call_job() {
    use ringshare_state::lookup::Carry;
    const DELETE_ON_CLOSE: u32 = 0x1000;
    let cl = offloaded_cluster();
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let f = a
        .create("doomed.txt", ALL, OPEN_IF, DELETE_ON_CLOSE)
        .expect("made");
    assert_eq!(a.write(f, 0, b"bye").status(), NtStatus::SUCCESS);
    a.hold_lookups = true;
    a.conn.shutdown(a.now);
    a.pump();
    let held = std::mem::take(&mut a.held_lookups);
    let carried: Vec<&str> = held
        .iter()
        .map(|r| match &r.ask {
            Lookup::Home(h) if matches!(h.carry, Carry::Job(_)) => "home job",
            Lookup::Home(_) => "home wire call",
            _ => kind(r),
        })
        .collect();
    assert_eq!(carried, ["home job"], "the close and its end, on a thread");
    let path = ringshare_vfs::RelPath::from_components(["doomed.txt"]).expect("path");
    let exists = || {
        use ringshare_vfs::Share;
        cl.mem.stat(&ringshare_vfs::server_who(), &path).is_ok()
    };
    assert!(exists(), "not removed before the job ran");
    for req in held {
        let done = req.run();
        a.conn.complete_lookup(a.now, req.id, done);
    }
    a.pump();
    assert!(!exists(), "removed by the job");
    let open_existing = ringshare_wire::consts::CreateDisposition::OPEN;
    assert_eq!(
        b.create("doomed.txt", ALL, open_existing, 0).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND),
        "gone for another node's client too"
    );
}

/// A rename of `name` to `to` by `a` (jobs held) carried until its rename job is the one held:
/// that job, not run.
fn rename_job_held(a: &mut Client, name: &str, to: &str) -> ringshare_core::LookupRequest {
    let f = open(a, name, ALL, 7).expect("opened");
    a.hold_lookups = true;
    let m = a.set_info_msg(f, 1, 10, &rename_info(to, false));
    assert!(a.send_frame(m).is_empty(), "the rename waits");
    for _ in 0..8 {
        for req in std::mem::take(&mut a.held_lookups) {
            if matches!(&req.ask, Lookup::Fs(j) if j.what == "the rename of a SET_INFO") {
                return req;
            }
            let done = req.run();
            a.conn.complete_lookup(a.now, req.id, done);
            assert!(a.pump().is_empty(), "not answered before its rename");
        }
    }
    panic!("no rename job");
}

/// Whether `req` tells a file's home of a rename (a wire call `Moved`).
fn tells_a_rename(req: &ringshare_core::LookupRequest) -> bool {
    use ringshare_core::cluster::msg::{Call, Message};
    use ringshare_state::lookup::Carry;
    match &req.ask {
        Lookup::Home(h) => match &h.carry {
            Carry::Wire(w) => matches!(
                Message::decode(&w.message),
                Ok(Message::Call(Call::Moved(..)))
            ),
            Carry::Job(_) => false,
        },
        _ => false,
    }
}

/// Issue 33 (session 49's "left": a rename finished after its connection ended was not told
/// to the file's home): on an offloaded share, a rename whose connection ends (a frame that is
/// not SMB) after its job was asked and before its answer is taken still tells the file's
/// home the new path, by a call nobody waits for; before, only this node's table followed.
#[test]
fn a_rename_whose_connection_ends_before_its_jobs_answer_is_taken_still_tells_the_home() {
    let cl = offloaded_cluster();
    let mut a = cl.client(1);
    let job = rename_job_held(&mut a, "r1.txt", "r1-new.txt");
    let done = job.run();
    let mut bad = vec![0xfe, b'X', b'Y', b'Z'];
    bad.resize(64, 0);
    assert!(a.send_frame(bad).is_empty());
    assert!(a.closed, "closing");
    a.conn.complete_lookup(a.now, job.id, done);
    assert!(a.pump().is_empty(), "unanswered");
    let told = a.held_lookups.iter().filter(|r| tells_a_rename(r)).count();
    assert_eq!(told, 1, "the home is told the new path, nobody waiting");
}

/// The same when the connection is gone at once (`shutdown`: its parked requests let go before
/// the job ran): the job tells the home itself, on its thread, as it ends.
#[test]
fn a_rename_whose_connection_goes_while_its_job_is_out_is_told_to_the_home_by_the_job() {
    let cl = offloaded_cluster();
    let mut a = cl.client(1);
    let job = rename_job_held(&mut a, "r2.txt", "r2-new.txt");
    a.conn.shutdown(a.now);
    a.pump();
    assert!(
        !a.held_lookups.iter().any(tells_a_rename),
        "nothing to tell before the rename is made"
    );
    let calls = cl.calls_to(3);
    let done = job.run();
    assert!(
        matches!(&done, ringshare_core::LookupDone::Fs(_)),
        "the job ran"
    );
    assert_eq!(cl.calls_to(3), calls + 1, "the job told the home");
    let b = &mut cl.client(2);
    let only_open = ringshare_wire::consts::CreateDisposition::OPEN;
    assert!(b.create("r2-new.txt", ALL, only_open, 0).is_ok());
}
