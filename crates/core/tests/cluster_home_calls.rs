//! Issue 33, item 2, the home's side: what a node decides or tells about a file without its
//! I/O thread waiting for another node. A SET_INFO that sets the size of a file homed elsewhere
//! posts its word to the home; a CREATE or LOCK of a file homed on this node whose decision must
//! first call other nodes (to take back their I/O grants, or to close the disconnected opens
//! they keep in a new open's way) is decided on a home-call thread, as a peer's call is, not on
//! the client's I/O thread. Each test holds the connection's lookups (the driver's home-call
//! threads carry them later): no call reaches another node until a held lookup is carried, and
//! the connection answers another request meanwhile (cluster_calls.rs has the calls a node
//! makes to a file's home for its own clients).

use crate::cluster_support;
use crate::support;

use cluster_support::*;
use ringshare_core::cluster::{msg, ClusterNode};
use ringshare_core::lookup::Carry;
use ringshare_core::Lookup;
use ringshare_wire::consts::{CreateDisposition as D, Dialect};
use ringshare_wire::create::{tag, CreateContext, CreateResponse, DurableHandleRequestV2};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::{FileId, NtStatus};
use support::*;

const READ: u32 = 0x0012_0089;
const ALL: u32 = 0x001F_01FF;
const R: u32 = 1;
const H: u32 = 2;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;
const UNLOCK: u32 = 4;
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

/// The FileId of a successful CREATE's answer.
fn file_id(r: &Resp) -> FileId {
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    CreateResponse::decode(&r.msg).expect("create").file_id
}

/// `h`, a client of node 3 (every file's home), sends `m` (`what`), whose decision must first
/// call node 1: no answer and no call to node 1 until the held lookup is carried, a READ of
/// `f` answered meanwhile; then the answers (one call to node 1 made).
fn decided_away(cl: &Cluster, h: &mut Client, m: Vec<u8>, f: FileId, what: &str) -> Vec<Resp> {
    h.hold_lookups = true;
    let calls = cl.calls_to(1);
    assert!(h.send_frame(m).is_empty(), "no {what} answer yet");
    assert_eq!(
        (h.held_lookups.len(), cl.calls_to(1)),
        (1, calls),
        "the {what} waits for a home-call thread; its I/O thread called nobody"
    );
    assert_eq!(
        h.read(f, 0, 4).status(),
        NtStatus::SUCCESS,
        "the connection answers a READ meanwhile"
    );
    let r = answer_held(h);
    assert_eq!(cl.calls_to(1), calls + 1, "the {what}'s call made there");
    h.hold_lookups = false;
    r
}

/// A client of the home's own node, and a file of its own to READ meanwhile.
fn home_client(cl: &Cluster) -> (Client, FileId) {
    let mut h = cl.client(3);
    let f = open(&mut h, "mine.txt", ALL, 7).expect("h");
    assert_eq!(h.write(f, 0, b"mine").status(), NtStatus::SUCCESS);
    (h, f)
}

/// A CREATE of a client of node 3, the file's home, that ends the I/O grant node 1 holds (an
/// open that may write: node 1 may no longer decide its WRITEs alone) is decided on a home-call
/// thread, which takes the grant back, not on the client's I/O thread. Once the grant is gone,
/// the next such CREATE calls nobody and is decided on the I/O thread at once.
#[test]
fn a_create_at_the_home_that_takes_back_another_nodes_grant_waits_away_from_its_io_thread() {
    let cl = Cluster::new(3, 3);
    let mut a = cl.client(1);
    let (mut h, mine) = home_client(&cl);
    let fh = open(&mut h, "g.txt", ALL, 7).expect("h");
    assert_eq!(h.write(fh, 0, b"data").status(), NtStatus::SUCCESS);
    assert_eq!(h.close(fh).status(), NtStatus::SUCCESS);
    let fa = open(&mut a, "g.txt", READ, 7).expect("a reads");
    let calls = cl.calls_to(3);
    assert_eq!(a.read(fa, 0, 4).status(), NtStatus::SUCCESS);
    assert_eq!(cl.calls_to(3), calls, "node 1's grant decides its READ");

    let m = h.create_msg_caching("g.txt", ALL, 7, D::OPEN, 0, None);
    let r = decided_away(&cl, &mut h, m, mine, "CREATE");
    let fh = file_id(&r[0]);
    assert_eq!(h.write(fh, 0, b"home").status(), NtStatus::SUCCESS);
    // Node 1's grant no longer says "no writers elsewhere": it asks the home about a WRITE.
    let m = h.create_msg_caching("g.txt", ALL, 7, D::OPEN, 0, None);
    h.hold_lookups = true;
    let calls = cl.calls_to(1);
    let r = h.send_frame(m);
    assert_eq!(statuses(&r), [NtStatus::SUCCESS], "decided on the thread");
    assert_eq!((h.held_lookups.len(), cl.calls_to(1)), (0, calls));
    h.hold_lookups = false;
    assert_eq!(h.close(file_id(&r[0])).status(), NtStatus::SUCCESS);
    assert_eq!(h.close(fh).status(), NtStatus::SUCCESS);
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
}

/// A LOCK of a client of node 3, the file's home, while node 1 holds an I/O grant saying the
/// file has no byte-range locks is decided on a home-call thread, which takes that part back:
/// granted, and node 1's WRITE in the range then asks the home and meets the lock. A LOCK whose
/// open closes while it is decided there is refused FILE_CLOSED and leaves no lock behind.
#[test]
fn a_lock_at_the_home_that_takes_back_another_nodes_grant_waits_away_from_its_io_thread() {
    let cl = Cluster::new(3, 3);
    let mut a = cl.client(1);
    let (mut h, mine) = home_client(&cl);
    let fh = open(&mut h, "l.txt", ALL, 7).expect("h");
    assert_eq!(h.write(fh, 0, b"data").status(), NtStatus::SUCCESS);
    let fa = open(&mut a, "l.txt", ALL, 7).expect("a");
    let calls = cl.calls_to(3);
    assert_eq!(a.read(fa, 0, 4).status(), NtStatus::SUCCESS);
    assert_eq!(
        cl.calls_to(3),
        calls,
        "node 1's grant: no locks on the file"
    );

    let m = h.lock_msg(fh, &[(0, 10, EXCLUSIVE | FAIL_IMMEDIATELY)]);
    let r = decided_away(&cl, &mut h, m, mine, "LOCK");
    assert_eq!(statuses(&r), [NtStatus::SUCCESS]);
    let calls = cl.calls_to(3);
    assert_eq!(
        a.write(fa, 5, b"x").status(),
        NtStatus::FILE_LOCK_CONFLICT,
        "node 1 asks the home and meets the lock"
    );
    assert_eq!(cl.calls_to(3), calls + 1);
    assert_eq!(h.lock(fh, &[(0, 10, UNLOCK)]).status(), NtStatus::SUCCESS);

    // The home gives node 1 its grant again with the next answer; then a LOCK whose open closes
    // before the home-call thread decides it.
    assert_eq!(a.write(fa, 5, b"x").status(), NtStatus::SUCCESS);
    let calls = cl.calls_to(3);
    assert_eq!(a.read(fa, 0, 4).status(), NtStatus::SUCCESS);
    assert_eq!(cl.calls_to(3), calls, "the grant is back");
    h.hold_lookups = true;
    let m = h.lock_msg(fh, &[(20, 10, EXCLUSIVE | FAIL_IMMEDIATELY)]);
    assert!(h.send_frame(m).is_empty(), "the LOCK waits");
    assert_eq!(h.held_lookups.len(), 1);
    let m = h.close_msg(fh, 0);
    assert_eq!(
        statuses(&h.send_frame(m)),
        [NtStatus::SUCCESS],
        "its CLOSE is decided at once"
    );
    assert_eq!(statuses(&answer_held(&mut h)), [NtStatus::FILE_CLOSED]);
    h.hold_lookups = false;
    assert_eq!(
        a.lock(fa, &[(20, 10, EXCLUSIVE | FAIL_IMMEDIATELY)])
            .status(),
        NtStatus::SUCCESS,
        "no lock outlived its open"
    );
}

/// A durable open of a client of node 1 that shares nothing and holds a handle lease; then its
/// connection drops and node 1 keeps it, parked.
fn parked_on_node_1(cl: &Cluster, name: &str) {
    let s = cl.nodes[0].clone();
    let mut a = Client::negotiated(s, cl.mem.clone(), Dialect::SMB3_1_1, [1; 16]);
    assert_eq!(a.log_on("alice", "secret", 0), NtStatus::SUCCESS);
    a.tree_id = a.tree_connect("share");
    let dh2q = DurableHandleRequestV2 {
        timeout: 0,
        flags: 0,
        create_guid: [2; 16],
    };
    let contexts = vec![
        CreateContext::new(tag::REQUEST_LEASE, lease_v2(2, R | H).encode()),
        CreateContext::new(tag::DURABLE_HANDLE_REQUEST_V2, dh2q.encode()),
    ];
    let m = a.create_msg_caching_ctx(name, ALL, 0, D::OPEN_IF, 0xFF, contexts);
    file_id(&a.send_frame(m).remove(0));
    a.conn.shutdown(a.now);
    a.pump();
    assert_eq!(cl.nodes[0].parked_durables(), 1, "node 1 keeps it");
    // Node 1 tells the file's home at its next round (the watch thread's, every 100 ms).
    cl.nodes[0].resend_closes();
}

/// A CREATE of a client of node 3, the file's home, that a disconnected durable open kept by
/// node 1 is in the way of (it shares nothing; its handle lease cannot be broken) is decided on
/// a home-call thread, which has node 1 close it, not on the client's I/O thread.
#[test]
fn a_create_at_the_home_blocked_by_an_open_parked_on_another_node_waits_away_from_its_io_thread() {
    let cl = Cluster::new(3, 3);
    let (mut h, mine) = home_client(&cl);
    parked_on_node_1(&cl, "p.txt");
    let m = h.create_msg_caching("p.txt", READ, 7, D::OPEN, 0, None);
    let r = decided_away(&cl, &mut h, m, mine, "CREATE");
    let fh = file_id(&r[0]);
    assert_eq!(cl.nodes[0].parked_durables(), 0, "node 1 closed it");
    assert_eq!(h.close(fh).status(), NtStatus::SUCCESS);
}

/// A CREATE at the file's home (node 3) that takes back the I/O grants of two nodes (1 and 2,
/// each reading the file), each slow to answer (400 ms, as a stopped peer's 2 s bound): the
/// home asks both at once and waits for both, so the decision waits one node's time, not the
/// sum (before: 800 ms and more, one call after the other).
#[test]
fn a_home_takes_grants_back_from_several_nodes_at_once() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let (mut h, _) = home_client(&cl);
    let fh = open(&mut h, "both.txt", ALL, 7).expect("h");
    assert_eq!(h.write(fh, 0, b"data").status(), NtStatus::SUCCESS);
    assert_eq!(h.close(fh).status(), NtStatus::SUCCESS);
    let fa = open(&mut a, "both.txt", READ, 7).expect("a reads");
    let fb = open(&mut b, "both.txt", READ, 7).expect("b reads");
    let (to_1, to_2) = (cl.calls_to(1), cl.calls_to(2));
    cl.bus.slow.lock().unwrap().extend([(1, 400), (2, 400)]);
    let t = std::time::Instant::now();
    let fh = open(&mut h, "both.txt", ALL, 7).expect("the home's writer");
    let took = t.elapsed();
    cl.bus.slow.lock().unwrap().clear();
    assert_eq!(
        (cl.calls_to(1) - to_1, cl.calls_to(2) - to_2),
        (1, 1),
        "one revocation each"
    );
    assert!(
        took < std::time::Duration::from_millis(700),
        "the two revocations took {took:?}: one after the other"
    );
    for (c, f) in [(&mut a, fa), (&mut b, fb), (&mut h, fh)] {
        assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    }
}

/// The call a held lookup carries, when it is one call (the driver may send it on its ring):
/// its node and decoded message; `None` for a job (for a thread).
fn wire_of(c: &Client, i: usize) -> Option<(u16, msg::Call)> {
    let Lookup::Home(h) = &c.held_lookups[i].ask else {
        panic!("not a call to a file's home");
    };
    match &h.carry {
        Carry::Wire(w) => match msg::Message::decode(&w.message) {
            Ok(msg::Message::Call(call)) => Some((h.node, call)),
            _ => panic!("a call's bytes that decode to no call"),
        },
        Carry::Job(_) => None,
    }
}

/// Issue 33 item 2: the CREATE, LOCK and CLOSE of a file homed on another node each ask one
/// call, as bytes to that node (an I/O thread may send them on its ring), which decode to the
/// call the request makes; what runs on the answer (the CREATE's grant kept) runs where it is
/// carried, before the request runs again. A decision at this node's home that must call
/// others first stays a job for a thread.
#[test]
fn a_call_to_a_file_homed_elsewhere_is_one_call_of_its_bytes_and_a_decision_here_a_job() {
    let cl = Cluster::new(3, 3);
    let mut a = cl.client(1);
    a.hold_lookups = true;
    let m = a.create_msg_caching("wire.txt", ALL, 7, D::OPEN_IF, 0, None);
    assert!(a.send_frame(m).is_empty(), "the CREATE waits for its home");
    let Some((3, msg::Call::Admit(key, _))) = wire_of(&a, 0) else {
        panic!("the CREATE's call is an Admit to node 3");
    };
    let f = file_id(&answer_held(&mut a).remove(0));
    let m = a.lock_msg(f, &[(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)]);
    assert!(a.send_frame(m).is_empty(), "the LOCK waits for its home");
    assert!(
        matches!(wire_of(&a, 0), Some((3, msg::Call::Lock { key: k, .. })) if k == key),
        "the LOCK's call is a Lock of the file to node 3"
    );
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);
    let m = a.close_msg(f, 0);
    assert!(a.send_frame(m).is_empty(), "the CLOSE waits for its home");
    assert!(
        matches!(wire_of(&a, 0), Some((3, msg::Call::Close { key: k, .. })) if k == key),
        "the CLOSE's call is a Close of the file to node 3"
    );
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);

    // Node 3 is the home: a LOCK there while node 1 holds an I/O grant of the file (no
    // byte-range locks) must first call node 1 to take it back: a job.
    let (mut h, _) = home_client(&cl);
    let fh = open(&mut h, "job.txt", ALL, 7).expect("h");
    assert_eq!(h.write(fh, 0, b"data").status(), NtStatus::SUCCESS);
    a.hold_lookups = false;
    let fa = open(&mut a, "job.txt", ALL, 7).expect("a");
    assert_eq!(a.read(fa, 0, 4).status(), NtStatus::SUCCESS);
    h.hold_lookups = true;
    let m = h.lock_msg(fh, &[(0, 4, EXCLUSIVE | FAIL_IMMEDIATELY)]);
    assert!(
        h.send_frame(m).is_empty(),
        "the LOCK waits for its decision"
    );
    assert_eq!(wire_of(&h, 0), None, "decided at the home by a job");
    assert_eq!(statuses(&answer_held(&mut h)), [NtStatus::SUCCESS]);
}
