//! Issue 33, item 2, the home's side: what a node decides or tells about a file without its
//! I/O thread waiting for another node. A SET_INFO that sets the size of a file homed elsewhere
//! posts its word to the home; a CREATE or LOCK of a file homed on this node whose decision must
//! first call other nodes (to take back their I/O grants, or to close the disconnected opens
//! they keep in a new open's way) is decided on a home-call thread, as a peer's call is, not on
//! the client's I/O thread. Each test holds the connection's lookups (the driver's home-call
//! threads carry them later): no call reaches another node until a held lookup is carried, and
//! the connection answers another request meanwhile (cluster_calls.rs has the calls a node
//! makes to a file's home for its own clients).

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use cluster_support::*;
use ringshare_core::Lookup;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::NtStatus;
use support::*;

const READ: u32 = 0x0012_0089;
const ALL: u32 = 0x001F_01FF;
const R: u32 = 1;
/// FileEndOfFileInformation.
const END_OF_FILE: u8 = 20;

fn statuses(rs: &[Resp]) -> Vec<NtStatus> {
    rs.iter().map(|r| r.status()).collect()
}

/// The order of each held lookup that is a call to a file's home (0: none).
fn orders(c: &Client) -> Vec<u64> {
    c.held_lookups
        .iter()
        .map(|r| match &r.ask {
            Lookup::Home(h) => h.order,
            _ => 0,
        })
        .collect()
}

/// A SET_INFO that sets the size of a file homed on another node is answered at once: the word
/// to the home (which breaks other opens' read caching) is posted, carried by a home-call thread
/// later; nobody waits for it. A client of a third node caching reads of the file sees its
/// break once the call is carried. A CLOSE after it is carried after it (one order: the file's).
#[test]
fn a_set_info_end_of_file_of_a_file_homed_elsewhere_is_answered_before_the_home_hears_of_it() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "size.txt", ALL, 7).expect("a");
    assert_eq!(a.write(fa, 0, b"0123456789").status(), NtStatus::SUCCESS);
    let m = b.create_msg_caching("size.txt", READ, 7, D::OPEN, 0xFF, Some(lease_v2(2, R)));
    assert_eq!(granted_lease(&b.send_frame(m).remove(0)).state.0, R);

    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    let r = a.set_info(fa, 1, END_OF_FILE, &4u64.to_le_bytes());
    assert_eq!(r.status(), NtStatus::SUCCESS, "answered at once");
    assert_eq!(
        (a.held_lookups.len(), cl.calls_to(3)),
        (1, calls),
        "the home's word is a held lookup, not a call the thread made"
    );
    assert!(b.breaks().is_empty(), "the home has not heard yet");
    assert_eq!(
        a.read(fa, 0, 10).status(),
        NtStatus::SUCCESS,
        "the connection answers a READ meanwhile"
    );
    assert!(answer_held(&mut a).is_empty(), "nobody waits for it");
    assert_eq!(cl.calls_to(3), calls + 1, "carried now");
    let got = b.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("b's read lease breaks once the home hears of the new size: {got:?}");
    };
    assert_eq!(n.new_lease_state.0, 0);

    // A CLOSE after the SET_INFO: both held, the CLOSE after, in the file's one order.
    let r = a.set_info(fa, 1, END_OF_FILE, &2u64.to_le_bytes());
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let m = a.close_msg(fa, 0);
    assert!(a.send_frame(m).is_empty(), "the CLOSE waits for the home");
    let o = orders(&a);
    assert!(
        o.len() == 2 && o[0] != 0 && o[0] == o[1],
        "the size's word, then the CLOSE, carried one after the other: {o:?}"
    );
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);
    assert_eq!(cl.calls_to(3), calls + 3);
}
