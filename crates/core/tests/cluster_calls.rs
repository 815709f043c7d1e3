//! Issue 33, item 2: the calls to a file's home (another node) that used to hold an I/O
//! thread for their round trip are questions the driver's lookup pool asks; the request waits
//! for the answer, its thread does not (cluster_sim.rs has those of CREATE, CLOSE, LOCK and
//! UNLOCK; it is full). Each test holds the connection's lookups (the driver's home-call
//! threads carry them later): no call reaches the home until a held lookup is carried.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use cluster_support::*;
use ringshare_wire::NtStatus;
use support::*;

const ALL: u32 = 0x001F_01FF;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;
const UNLOCK: u32 = 4;

fn statuses(rs: &[Resp]) -> Vec<NtStatus> {
    rs.iter().map(|r| r.status()).collect()
}

/// A blocking lock's retries after the home said wait (every 10 ms) are asked of the home away
/// from the I/O thread: the retry is a held lookup and no call the thread made; told "not yet"
/// it waits for its next retry; granted, it succeeds; a CANCEL while the home is asked ends with
/// the answer (cancelled, or granted when the home granted it meanwhile); a close while the home
/// is asked reaches the home after the retry and frees the lock there.
#[test]
fn a_blocking_locks_retries_ask_the_home_without_holding_the_io_thread() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "f.txt", ALL, 7).expect("a");
    let fb = open(&mut b, "f.txt", ALL, 7).expect("b");
    let hold = |a: &mut Client| {
        a.lock(fa, &[(0, 100, EXCLUSIVE | FAIL_IMMEDIATELY)])
            .status()
    };
    assert_eq!(hold(&mut a), NtStatus::SUCCESS);
    let interim = b.lock(fb, &[(10, 1, EXCLUSIVE)]);
    assert_eq!(interim.status(), NtStatus::PENDING, "the home says wait");

    b.hold_lookups = true;
    let calls = cl.calls_to(3);
    assert!(cl.tick(20, &mut [&mut b])[0].is_empty(), "no answer yet");
    assert_eq!(
        (b.held_lookups.len(), cl.calls_to(3)),
        (1, calls),
        "the retry waits for its call, which the thread did not make"
    );
    assert!(
        cl.tick(20, &mut [&mut b])[0].is_empty() && b.held_lookups.len() == 1,
        "no second retry while the first is asked"
    );
    assert!(answer_held(&mut b).is_empty(), "not yet: it waits again");
    assert_eq!(cl.calls_to(3), calls + 1);
    assert!(cl.tick(20, &mut [&mut b])[0].is_empty());
    assert_eq!(b.held_lookups.len(), 1, "retried at its next time");
    assert_eq!(a.lock(fa, &[(0, 100, UNLOCK)]).status(), NtStatus::SUCCESS);
    assert_eq!(
        statuses(&answer_held(&mut b)),
        [NtStatus::SUCCESS],
        "granted when the home said so"
    );
    assert_eq!(
        a.write(fa, 10, b"y").status(),
        NtStatus::FILE_LOCK_CONFLICT,
        "the home holds b's lock"
    );
    b.hold_lookups = false;
    assert_eq!(b.lock(fb, &[(10, 1, UNLOCK)]).status(), NtStatus::SUCCESS);

    // A CANCEL while the home is asked: cancelled when it did not grant, granted when it did.
    for grant in [false, true] {
        assert_eq!(hold(&mut a), NtStatus::SUCCESS);
        b.hold_lookups = false;
        let interim = b.lock(fb, &[(10, 1, EXCLUSIVE)]);
        assert_eq!(interim.status(), NtStatus::PENDING);
        b.hold_lookups = true;
        assert!(cl.tick(20, &mut [&mut b])[0].is_empty());
        assert_eq!(b.held_lookups.len(), 1);
        assert!(
            b.cancel_async(&interim).is_empty(),
            "the CANCEL waits for the home's answer"
        );
        if grant {
            assert_eq!(a.lock(fa, &[(0, 100, UNLOCK)]).status(), NtStatus::SUCCESS);
        }
        let fin = statuses(&answer_held(&mut b));
        b.hold_lookups = false;
        if grant {
            assert_eq!(fin, [NtStatus::SUCCESS], "the home granted it first");
            assert_eq!(b.lock(fb, &[(10, 1, UNLOCK)]).status(), NtStatus::SUCCESS);
        } else {
            assert_eq!(fin, [NtStatus::CANCELLED]);
            assert_eq!(a.lock(fa, &[(0, 100, UNLOCK)]).status(), NtStatus::SUCCESS);
        }
        assert!(cl.tick(1_000, &mut [&mut b])[0].is_empty(), "nothing left");
    }

    // A close while the home is asked: the retry granted, then the close frees it at the home.
    assert_eq!(hold(&mut a), NtStatus::SUCCESS);
    let interim = b.lock(fb, &[(10, 1, EXCLUSIVE)]);
    assert_eq!(interim.status(), NtStatus::PENDING);
    b.hold_lookups = true;
    assert!(cl.tick(20, &mut [&mut b])[0].is_empty());
    assert_eq!(a.lock(fa, &[(0, 100, UNLOCK)]).status(), NtStatus::SUCCESS);
    let m = b.close_msg(fb, 0);
    assert!(b.send_frame(m).is_empty(), "the CLOSE waits for the home");
    assert_eq!(b.held_lookups.len(), 2, "the retry, then the close");
    let fin = statuses(&answer_held(&mut b));
    assert_eq!(
        fin,
        [NtStatus::RANGE_NOT_LOCKED, NtStatus::SUCCESS],
        "the lock ends with its open"
    );
    assert_eq!(
        a.lock(fa, &[(10, 1, EXCLUSIVE | FAIL_IMMEDIATELY)])
            .status(),
        NtStatus::SUCCESS,
        "the home freed the closed open's lock"
    );
}
