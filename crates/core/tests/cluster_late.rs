//! Issue 33 (docs/cluster-internals.md, "A call answered too late"): a file's home that reads
//! a call in time but answers after its caller's 2 s (overloaded, not stopped) has carried it
//! out, while
//! the caller told its client FILE_NOT_AVAILABLE ("try again"). The caller reads the late
//! answer all the same and undoes at the home what it says was done: a LOCK granted is
//! unlocked, an open admitted is closed (its lease with it), a delete-pending set is cleared.
//! Before, each stayed at the home, held for nobody: the range stayed locked until the open
//! closed, the share mode refused every other open, the file went at its last close. Nodes are
//! server cores on the in-memory bus of `support/cluster.rs`, whose node 3 answers too late
//! while the test says so and hands the answers over when it chooses
//! (`Cluster::deliver_late`), as the peer connection's thread does once they come.

use crate::cluster_support;
use crate::support;

use cluster_support::*;
use ringshare_core::cluster::ClusterNode;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use std::sync::atomic::Ordering;
use support::*;

const ALL: u32 = 0x001F_01FF;
const RWH: u32 = 1 | 4 | 2;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;
const UNLOCK: u32 = 4;

/// Alice's LOCK through node 1 of a file homed on node 3 is granted there after node 1 stopped
/// waiting: she hears FILE_NOT_AVAILABLE, and the range is held for nobody (bob's LOCK of it
/// through node 2 is refused) until the late answer reaches node 1, which unlocks it. Then
/// alice's retry of the LOCK is granted, and once she unlocks, bob's is too. The same when node
/// 3 sees, once it decided, that node 1 went, and unlocks it itself (no answer reaches node 1).
#[test]
fn a_lock_granted_after_its_caller_stopped_waiting_is_unlocked_again() {
    for at_home in [false, true] {
        let cl = Cluster::new(3, 3);
        cl.bus.undo_at_home.store(at_home, Ordering::Relaxed);
        let (mut a, mut b) = (cl.client(1), cl.client(2));
        let fa = open(&mut a, "f.txt", ALL, 7).expect("a");
        let fb = open(&mut b, "f.txt", ALL, 7).expect("b");
        let range = [(0, 100, EXCLUSIVE | FAIL_IMMEDIATELY)];
        cl.answer_late(3, true);
        assert_eq!(
            a.lock(fa, &range).status(),
            NtStatus::FILE_NOT_AVAILABLE,
            "the home's answer came too late: try again"
        );
        cl.answer_late(3, false);
        if !at_home {
            assert_eq!(
                b.lock(fb, &range).status(),
                NtStatus::LOCK_NOT_GRANTED,
                "the home granted alice's lock all the same"
            );
        }
        assert_eq!(cl.deliver_late(), usize::from(!at_home));
        assert_eq!(a.lock(fa, &range).status(), NtStatus::SUCCESS, "retried");
        assert_eq!(
            b.lock(fb, &range).status(),
            NtStatus::LOCK_NOT_GRANTED,
            "alice holds it now, once"
        );
        assert_eq!(a.lock(fa, &[(0, 100, UNLOCK)]).status(), NtStatus::SUCCESS);
        assert_eq!(b.lock(fb, &range).status(), NtStatus::SUCCESS, "free again");
    }
}

/// Alice's CREATE through node 1 sharing nothing is admitted at node 3 after node 1 stopped
/// waiting: she hears FILE_NOT_AVAILABLE, and bob's CREATE sharing nothing is refused
/// (SHARING_VIOLATION) until the late answer reaches node 1, which closes the admission. Then
/// bob's is admitted. The same when node 3 closes it itself, seeing node 1 went.
#[test]
fn an_open_admitted_after_its_caller_stopped_waiting_is_closed_again() {
    for at_home in [false, true] {
        let cl = Cluster::new(3, 3);
        cl.bus.undo_at_home.store(at_home, Ordering::Relaxed);
        let (mut a, mut b) = (cl.client(1), cl.client(2));
        cl.answer_late(3, true);
        assert_eq!(
            open(&mut a, "f.txt", ALL, 0),
            Err(NtStatus::FILE_NOT_AVAILABLE),
            "the home's answer came too late: try again"
        );
        cl.answer_late(3, false);
        if !at_home {
            assert_eq!(
                open(&mut b, "f.txt", ALL, 0),
                Err(NtStatus::SHARING_VIOLATION),
                "the home admitted alice's open all the same"
            );
        }
        assert_eq!(cl.deliver_late(), usize::from(!at_home));
        let fb = open(&mut b, "f.txt", ALL, 0).expect("admitted now");
        assert_eq!(
            open(&mut a, "f.txt", ALL, 0),
            Err(NtStatus::SHARING_VIOLATION),
            "bob's open is the one there"
        );
        assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    }
}

/// The same with a lease: alice's open admitted too late held an RWH lease at the home; once
/// its late answer closed it, bob's open gets RWH at once and alice hears of no break of a lease
/// she never got.
#[test]
fn an_open_admitted_after_its_caller_stopped_waiting_leaves_no_lease_behind() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    cl.answer_late(3, true);
    let m = a.create_msg_caching("f.txt", ALL, 7, D::OPEN_IF, 0xFF, Some(lease_v2(1, RWH)));
    assert_eq!(a.send_frame(m)[0].status(), NtStatus::FILE_NOT_AVAILABLE);
    cl.answer_late(3, false);
    assert_eq!(cl.deliver_late(), 1);
    let m = b.create_msg_caching("f.txt", ALL, 7, D::OPEN_IF, 0xFF, Some(lease_v2(2, RWH)));
    let r = b.send_frame(m).remove(0);
    assert_eq!(granted_lease(&r).state.0, RWH, "no lease in its way");
    assert!(a.breaks().is_empty(), "no break for alice");
}

/// Alice's SET_INFO setting the delete pending through node 1 is carried out at node 3 after
/// node 1 stopped waiting: she hears FILE_NOT_AVAILABLE, and bob's open of the file is refused
/// DELETE_PENDING until the late answer reaches node 1, which clears it. Then bob opens it,
/// and the file outlives both closes. A delete-pending that an answer in time told alice since
/// (her retry of the SET_INFO) is kept: the file goes at the last close.
#[test]
fn a_delete_pending_set_after_its_caller_stopped_waiting_is_cleared_again() {
    for retried in [false, true] {
        let cl = Cluster::new(3, 3);
        let (mut a, mut b) = (cl.client(1), cl.client(2));
        let fa = open(&mut a, "f.txt", ALL, 7).expect("a");
        cl.answer_late(3, true);
        assert_eq!(
            a.set_info(fa, 1, 13, &[1]).status(),
            NtStatus::FILE_NOT_AVAILABLE,
            "the home's answer came too late: try again"
        );
        cl.answer_late(3, false);
        assert_eq!(
            open(&mut b, "f.txt", ALL, 7),
            Err(NtStatus::DELETE_PENDING),
            "the home set it all the same"
        );
        if retried {
            assert_eq!(a.set_info(fa, 1, 13, &[1]).status(), NtStatus::SUCCESS);
        }
        assert_eq!(cl.deliver_late(), 1);
        if retried {
            assert_eq!(open(&mut b, "f.txt", ALL, 7), Err(NtStatus::DELETE_PENDING));
            assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
            assert!(!cl.exists("f.txt"), "alice's retry deleted it");
            continue;
        }
        let fb = open(&mut b, "f.txt", ALL, 7).expect("not pending now");
        assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
        assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
        assert!(cl.exists("f.txt"), "nobody deleted it");
    }
}

/// Alice's CLOSE through node 1 of a file she set delete-pending is carried out at node 3 after
/// node 1 stopped waiting: she was told the close succeeded (a close always is), and the file
/// stayed, the close's resend finding no such open (FILE_CLOSED) and doing nothing more. Once
/// the late answer reaches node 1, the close is finished there as in time: the file goes.
#[test]
fn a_close_answered_after_its_caller_stopped_waiting_removes_a_delete_pending_file() {
    let cl = Cluster::new(3, 3);
    let mut a = cl.client(1);
    let fa = open(&mut a, "f.txt", ALL, 7).expect("a");
    assert_eq!(a.set_info(fa, 1, 13, &[1]).status(), NtStatus::SUCCESS);
    cl.answer_late(3, true);
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    cl.answer_late(3, false);
    assert_eq!(cl.deliver_late(), 1);
    assert_eq!(cl.nodes[0].resend_closes(), 0, "nothing left to send");
    assert!(!cl.exists("f.txt"), "the last close removed it");
}
