//! Issue 33, item 2: the calls to a file's home (another node) that used to hold an I/O
//! thread for their round trip are questions the driver's lookup pool asks; the request waits
//! for the answer, its thread does not (cluster_sim.rs has those of CREATE, CLOSE, LOCK and
//! UNLOCK; it is full). Each test holds the connection's lookups (the driver's home-call
//! threads carry them later): no call reaches the home until a held lookup is carried.

use crate::cluster_support;
use crate::support;

use cluster_support::*;
use ringshare_core::cluster::ClusterNode;
use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::create::CreateResponse;
use ringshare_wire::{FileId, NtStatus};
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

const READ: u32 = 0x0012_0089;

/// Request `m` (`what`), sent by `a` of node 1 about a file homed on node 3, waits for the home
/// and not its connection: no answer, its call held (the thread made none), and a READ of `f`
/// answered meanwhile. The lookups stay held until the caller answers them.
fn waits_for_the_home(cl: &Cluster, a: &mut Client, m: Vec<u8>, f: FileId, what: &str) {
    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    assert!(
        a.send_frame(m).is_empty(),
        "no {what} answer before the home's"
    );
    assert_eq!(
        (a.held_lookups.len(), cl.calls_to(3)),
        (1, calls),
        "the {what} waits for its call, which the thread did not make"
    );
    assert_eq!(
        a.read(f, 0, 4).status(),
        NtStatus::SUCCESS,
        "the connection answers a READ meanwhile"
    );
}

/// A SET_INFO that sets or clears the delete pending of a file homed on another node
/// (FileDispositionInformation, and the Ex form) waits for the home, not its connection: no
/// answer and no call before the held call is carried, a READ answered meanwhile; once carried
/// the home has it (an open through another node is refused DELETE_PENDING, or admitted again
/// once cleared) and the file goes with its last close. A delete-on-close, set by the Ex form
/// or asked by a CREATE, is the open's own and asks nothing until its close.
#[test]
fn a_delete_pending_set_on_a_file_homed_on_another_node_waits_for_the_home_not_its_connection() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "gone.txt", ALL, 7).expect("a");
    assert_eq!(a.write(fa, 0, b"data").status(), NtStatus::SUCCESS);
    // FileDispositionInformation (13) set, then cleared; FileDispositionInformationEx (64)
    // with FILE_DISPOSITION_DELETE.
    for (class, buf, pending) in [
        (13, vec![1], true),
        (13, vec![0], false),
        (64, vec![1, 0, 0, 0], true),
    ] {
        let m = a.set_info_msg(fa, 1, class, &buf);
        waits_for_the_home(&cl, &mut a, m, fa, "SET_INFO");
        assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);
        a.hold_lookups = false;
        let seen = open(&mut b, "gone.txt", READ, 7);
        match (pending, seen) {
            (true, seen) => assert_eq!(seen, Err(NtStatus::DELETE_PENDING), "class {class}"),
            (false, Ok(fb)) => assert_eq!(b.close(fb).status(), NtStatus::SUCCESS),
            (false, Err(s)) => panic!("cleared, yet {s:?}"),
        }
    }
    // FILE_DISPOSITION_DELETE | FILE_DISPOSITION_ON_CLOSE: the open's own, no call.
    let fc = open(&mut a, "kept.txt", ALL, 7).expect("kept");
    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    assert_eq!(
        a.set_info(fc, 1, 64, &[9, 0, 0, 0]).status(),
        NtStatus::SUCCESS
    );
    assert_eq!((a.held_lookups.len(), cl.calls_to(3)), (0, calls));
    // A CREATE's delete-on-close (FILE_DELETE_ON_CLOSE) is the open's own too: its one call is
    // the admission's, carried away from the thread; the close carries the delete.
    let tree = a.tree_id;
    let m = a.create_msg(tree, "doc.txt", ALL, 7, D::OPEN_IF, 0x1000);
    assert!(
        a.send_frame(m).is_empty(),
        "the CREATE waits for its admission"
    );
    assert_eq!((a.held_lookups.len(), cl.calls_to(3)), (1, calls));
    let made = answer_held(&mut a);
    assert_eq!(statuses(&made), [NtStatus::SUCCESS]);
    assert_eq!(cl.calls_to(3), calls + 1, "the admission, nothing more");
    let fd = CreateResponse::decode(&made[0].msg)
        .expect("create")
        .file_id;
    a.hold_lookups = false;
    assert_eq!(a.close(fd).status(), NtStatus::SUCCESS);
    assert!(!cl.exists("doc.txt"), "deleted at its close");
    assert!(cl.exists("gone.txt"), "a holds it");
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    assert!(!cl.exists("gone.txt"), "its last close deleted it");
}

/// The delete pending shown by FileStandardInformation (5) or FileAllInformation (18): its
/// byte in the answer.
fn pending_byte(class: u8, r: &Resp) -> u8 {
    output_buffer(r)[if class == 5 { 20 } else { 60 }]
}

/// A QUERY_INFO of FileStandardInformation or FileAllInformation, and a CHANGE_NOTIFY on a
/// directory, read the delete pending of a file homed on another node from its home, away from
/// the I/O thread: no answer and no call before the held call is carried, a READ answered
/// meanwhile, then the answer a query at once would have given (pending when a client of another
/// node set it: asked, not taken from what this node knows; clear once it cleared it).
#[test]
fn a_delete_pending_read_of_a_file_homed_on_another_node_waits_for_the_home_not_its_connection() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "q.txt", ALL, 7).expect("a");
    assert_eq!(a.write(fa, 0, b"data").status(), NtStatus::SUCCESS);
    let fb = open(&mut b, "q.txt", ALL, 7).expect("b");
    for (set, class) in [(1u8, 5u8), (1, 18), (0, 5), (0, 18)] {
        assert_eq!(b.set_info(fb, 1, 13, &[set]).status(), NtStatus::SUCCESS);
        let calls = cl.calls_to(3);
        let m = a.query_info_msg(fa, 1, class, 4096);
        waits_for_the_home(&cl, &mut a, m, fa, &format!("QUERY_INFO of class {class}"));
        let r = answer_held(&mut a);
        assert_eq!(statuses(&r), [NtStatus::SUCCESS], "class {class}");
        assert_eq!(cl.calls_to(3), calls + 1, "one call");
        assert_eq!(pending_byte(class, &r[0]), set, "class {class}, set {set}");
        a.hold_lookups = false;
    }
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);

    // CHANGE_NOTIFY on a directory whose delete is pending: DELETE_PENDING once the home said
    // so; cleared, the watch waits for changes (STATUS_PENDING).
    let da = a.create("w", ALL, D::OPEN_IF, 1).expect("a's directory");
    let db = b.create("w", ALL, D::OPEN_IF, 1).expect("b's directory");
    for (set, status) in [(1u8, NtStatus::DELETE_PENDING), (0, NtStatus::PENDING)] {
        assert_eq!(b.set_info(db, 1, 13, &[set]).status(), NtStatus::SUCCESS);
        a.hold_lookups = true;
        let calls = cl.calls_to(3);
        let mut m = a.change_notify_msg(da, 0x17, false, 4096);
        a.sign(&mut m);
        assert!(a.send_frame(m).is_empty(), "no answer before the home's");
        assert_eq!((a.held_lookups.len(), cl.calls_to(3)), (1, calls));
        assert_eq!(statuses(&answer_held(&mut a)), [status], "set {set}");
        a.hold_lookups = false;
    }
    b.put_file("w\\made.txt", b"");
    assert!(
        statuses(&a.pump()).contains(&NtStatus::SUCCESS),
        "the watch that waited hears the change"
    );
}

/// A WRITE message of `data` at `offset`, charged one credit per 64 KiB (unsigned: sent
/// without waiting for its answer, or offered to be received apart).
fn write_msg(c: &mut Client, f: FileId, offset: u64, data: &[u8]) -> Vec<u8> {
    let tree = c.tree_id;
    let mut m = c.message(Command::WRITE, tree, |o| write_body(o, f, offset, data));
    c.charge(&mut m, data.len());
    m
}

/// A READ or a WRITE of a file homed on another node that no I/O grant of this node decides
/// (a client of another node holds a byte-range lock on it) asks the home away from the I/O
/// thread: no answer and no call before the held call is carried, another request answered
/// meanwhile, then the home's answer (SUCCESS with the data, or FILE_LOCK_CONFLICT on the
/// locked range); alone, in a compound, and related to the CREATE before it. A large WRITE that
/// would have to ask is not received apart (its pipe would not outlive its parking). Once the
/// lock is gone the answer brings a grant, kept: the next READ and WRITE ask nothing, and a
/// large WRITE may be received apart again.
#[test]
fn a_read_and_a_write_no_grant_decides_wait_for_the_home_not_their_connection() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "rw.txt", ALL, 7).expect("a");
    assert_eq!(a.write(fa, 0, b"0123456789").status(), NtStatus::SUCCESS);
    let fb = open(&mut b, "rw.txt", ALL, 7).expect("b");
    let locked = [(100, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(b.lock(fb, &locked).status(), NtStatus::SUCCESS);

    a.hold_lookups = true;
    for (write, offset, status) in [
        (false, 0, NtStatus::SUCCESS),
        (false, 100, NtStatus::FILE_LOCK_CONFLICT),
        (true, 0, NtStatus::SUCCESS),
        (true, 100, NtStatus::FILE_LOCK_CONFLICT),
    ] {
        let calls = cl.calls_to(3);
        let m = if write {
            write_msg(&mut a, fa, offset, b"abcd")
        } else {
            a.read_msg(fa, offset, 4)
        };
        assert!(
            a.send_frame(m).is_empty(),
            "no answer before the home's (write {write}, offset {offset})"
        );
        assert_eq!(
            (a.held_lookups.len(), cl.calls_to(3)),
            (1, calls),
            "it waits for its call, which the thread did not make"
        );
        assert_eq!(
            a.query_info(fa, 1, 4, 0, 4096).status(),
            NtStatus::SUCCESS,
            "the connection answers a QUERY_INFO meanwhile"
        );
        let r = answer_held(&mut a);
        assert_eq!(statuses(&r), [status], "write {write}, offset {offset}");
        assert_eq!(cl.calls_to(3), calls + 1, "one call");
        if !write && status == NtStatus::SUCCESS {
            assert_eq!(read_data(&r[0]), b"0123");
        }
    }
    // A compound READ + WRITE: each asks in turn, the frame answered once both are in.
    let (m1, m2) = (a.read_msg(fa, 0, 10), write_msg(&mut a, fa, 4, b"EF"));
    assert!(a.compound(vec![m1, m2], false).is_empty());
    assert_eq!(a.held_lookups.len(), 1, "the READ asks first");
    let calls = cl.calls_to(3);
    assert!(answer_held(&mut a).is_empty(), "then the WRITE asks");
    assert_eq!((a.held_lookups.len(), cl.calls_to(3)), (1, calls + 1));
    let r = answer_held(&mut a);
    assert_eq!(statuses(&r), [NtStatus::SUCCESS; 2]);
    assert_eq!(read_data(&r[0]), b"abcd456789", "the earlier WRITE landed");
    // A related CREATE + WRITE + CLOSE: the WRITE writes the file the CREATE opened.
    let tree = a.tree_id;
    let mut msgs = vec![a.create_msg(tree, "rw.txt", ALL, 7, D::OPEN, 0)];
    msgs.push(write_msg(&mut a, FileId::ANY, 6, b"GH"));
    msgs.push(a.close_msg(FileId::ANY, 0));
    let mut out = a.compound(msgs, true);
    while out.is_empty() && !a.held_lookups.is_empty() {
        out = answer_held(&mut a);
    }
    assert_eq!(statuses(&out), [NtStatus::SUCCESS; 3]);

    // A large WRITE that must ask is received whole, and waits for the home as a small one.
    a.conn.set_send_file(true);
    let big = vec![7u8; ringshare_core::WRITE_SPLICE_LEN_MIN];
    let m = write_msg(&mut a, fa, 4096, &big);
    let head = &m[..ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET];
    assert_eq!(
        a.conn.detachable_write(head, m.len()),
        None,
        "the home is asked"
    );
    assert!(a.send_frame(m).is_empty());
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);

    // The lock gone, the next answer brings a grant: the READ and WRITE after it ask nothing.
    a.hold_lookups = false;
    assert_eq!(b.lock(fb, &[(100, 10, UNLOCK)]).status(), NtStatus::SUCCESS);
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    a.hold_lookups = true;
    let m = a.read_msg(fa, 0, 4);
    assert!(a.send_frame(m).is_empty(), "asked: no grant yet");
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);
    let calls = cl.calls_to(3);
    assert_eq!(
        read_data(&a.read(fa, 0, 10)),
        b"abcdEFGH89",
        "the related WRITE landed"
    );
    assert_eq!(
        read_data(&a.read(fa, 4096, 4)),
        [7; 4],
        "the large WRITE landed"
    );
    assert_eq!(a.write(fa, 0, b"x").status(), NtStatus::SUCCESS);
    assert_eq!(
        (a.held_lookups.len(), cl.calls_to(3)),
        (0, calls),
        "decided here"
    );
    let m = write_msg(&mut a, fa, 0, &big);
    let head = &m[..ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET];
    assert_eq!(
        a.conn.detachable_write(head, m.len()),
        Some(big.len()),
        "with the grant, a large WRITE may be received apart again"
    );
    a.hold_lookups = false;
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
}

/// A WRITE whose payload was received apart (spliced into pipes the driver keeps) because this
/// node's I/O grant decided it, and whose grant was taken back while the payload came in (a
/// client of another node locked a range of the file), asks the file's home away from the I/O
/// thread as a whole WRITE does: no answer and no call before the held call is carried, a
/// QUERY_INFO answered meanwhile, the payload held by the driver (`holds_payload`) and no
/// second WRITE received apart while it is. Then the home's answer: SUCCESS, the payload
/// written; FILE_LOCK_CONFLICT on the locked range, the payload dropped. A CANCEL meanwhile does
/// not end the wait (the WRITE is not async; SUCCESS with the answer); the connection's end
/// lets the payload go.
#[test]
fn a_write_received_apart_whose_grant_went_meanwhile_waits_for_the_home_not_its_connection() {
    use ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET;
    let big: Vec<u8> = (0..ringshare_core::WRITE_SPLICE_LEN_MIN)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    for case in ["answered", "conflict", "cancel", "end"] {
        let cl = Cluster::new(3, 3);
        let (mut a, mut b) = (cl.client(1), cl.client(2));
        let fa = open(&mut a, "apart.bin", ALL, 7).expect("a");
        assert_eq!(
            a.write(fa, 0, b"x").status(),
            NtStatus::SUCCESS,
            "{case}: a grant"
        );
        // Another file whose grant stays: its large WRITEs may be received apart but while a
        // payload is held.
        let fo = open(&mut a, "other.bin", ALL, 7).expect("a's other");
        assert_eq!(
            a.write(fo, 0, b"x").status(),
            NtStatus::SUCCESS,
            "{case}: its grant"
        );
        let m2 = write_msg(&mut a, fo, 0, &big);
        let head2 = m2[..WRITE_REQUEST_DATA_OFFSET].to_vec();
        a.conn.set_send_file(true);
        assert_eq!(a.conn.detachable_write(&head2, m2.len()), Some(big.len()));
        let offset = 1 << 20;
        let m = write_msg(&mut a, fa, offset, &big);
        let head = m[..WRITE_REQUEST_DATA_OFFSET].to_vec();
        let mid = u64::from_le_bytes(m[24..32].try_into().unwrap());
        assert_eq!(
            a.conn.detachable_write(&head, m.len()),
            Some(big.len()),
            "{case}: the grant decides it: received apart"
        );
        // While the payload comes in, a client of node 2 locks a range: the grant goes.
        let fb = open(&mut b, "apart.bin", ALL, 7).expect("b");
        let at = if case == "conflict" { offset + 10 } else { 0 };
        assert_eq!(
            b.lock(fb, &[(at, 1, EXCLUSIVE | FAIL_IMMEDIATELY)])
                .status(),
            NtStatus::SUCCESS
        );
        a.hold_lookups = true;
        a.received_apart = Some(big.clone());
        let calls = cl.calls_to(3);
        a.conn.receive_detached(a.now, head.clone(), big.len());
        assert!(a.pump().is_empty(), "{case}: no answer before the home's");
        assert_eq!(
            (a.held_lookups.len(), cl.calls_to(3)),
            (1, calls),
            "{case}: it waits for its call, which the thread did not make"
        );
        assert!(
            a.conn.holds_payload(),
            "{case}: the driver keeps the payload"
        );
        assert!(a.received_apart.is_some(), "{case}: not written yet");
        assert_eq!(
            a.conn.detachable_write(&head2, m2.len()),
            None,
            "{case}: one payload held at a time"
        );
        assert_eq!(
            a.query_info(fa, 1, 4, 0, 4096).status(),
            NtStatus::SUCCESS,
            "{case}: the connection answers a QUERY_INFO meanwhile"
        );
        match case {
            "end" => {
                a.conn.shutdown(a.now);
                assert!(!a.conn.holds_payload(), "the connection's end lets it go");
                assert!(answer_held(&mut a).is_empty(), "the answer finds nothing");
                assert!(a.received_apart.is_some(), "never written");
                continue;
            }
            "cancel" => {
                let mut h = ringshare_wire::header::Header::request(Command::CANCEL, mid);
                h.session_id = a.session_id;
                let mut c = Vec::new();
                h.encode(&mut c);
                ringshare_wire::misc::CancelRequest.encode(&mut c);
                assert!(a.send_frame(c).is_empty(), "a CANCEL does not end the wait");
                assert!(a.conn.holds_payload(), "still kept");
            }
            _ => {}
        }
        let r = answer_held(&mut a);
        let (status, written) = if case == "conflict" {
            (NtStatus::FILE_LOCK_CONFLICT, false)
        } else {
            (NtStatus::SUCCESS, true)
        };
        assert_eq!(statuses(&r), [status], "{case}");
        assert_eq!(cl.calls_to(3), calls + 1, "{case}: one call");
        assert!(
            !a.conn.holds_payload(),
            "{case}: the payload taken or let go"
        );
        assert_eq!(a.received_apart.is_none(), written, "{case}: written");
        a.hold_lookups = false;
        let back = a.read(fa, offset, 8);
        if written {
            assert_eq!(read_data(&back), &big[..8], "{case}: the payload landed");
        } else {
            assert_eq!(
                back.status(),
                NtStatus::END_OF_FILE,
                "{case}: nothing written"
            );
        }
        assert_eq!(
            a.conn.detachable_write(&head2, m2.len()),
            Some(big.len()),
            "{case}: the payload gone, another may be received apart"
        );
    }
}

/// An acknowledgment (unsigned) of an oplock break of `f` to `level`.
fn ack_oplock_msg(c: &mut Client, f: FileId, level: u8) -> Vec<u8> {
    let body = ringshare_wire::misc::OplockBreak::Oplock {
        oplock_level: ringshare_wire::consts::OplockLevel(level),
        file_id: f,
    };
    let tree = c.tree_id;
    c.message(Command::OPLOCK_BREAK, tree, |o| body.encode(o))
}

/// An oplock break's and a lease break's acknowledgment of a file homed on another node ask
/// the home away from the I/O thread: no answer and no call before the held call is carried,
/// a QUERY_INFO answered meanwhile, then the level the home gives; the CREATE of a client of
/// another node that waited for the break goes on once the home has the acknowledgment.
#[test]
fn a_break_acknowledgment_of_a_file_homed_on_another_node_waits_for_the_home_not_its_connection() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    for lease in [false, true] {
        let name = format!("acked-{lease}.txt");
        let (level, ctx) = if lease {
            (0xFF, Some(lease_v2(5, 7)))
        } else {
            (9, None)
        };
        let m = a.create_msg_caching(&name, ALL, 7, D::OPEN_IF, level, ctx);
        let r = a.send_frame(m).remove(0);
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let fa = CreateResponse::decode(&r.msg).expect("create").file_id;
        let m = b.create_msg_caching(&name, READ, 7, D::OPEN, 0, None);
        let interim = b.send_frame(m);
        assert_eq!(
            statuses(&interim),
            [NtStatus::PENDING],
            "b waits for the break"
        );
        assert_eq!(a.breaks().len(), 1, "a is told (lease {lease})");

        a.hold_lookups = true;
        let calls = cl.calls_to(3);
        let m = if lease {
            a.ack_lease_msg(5, 1 | 2)
        } else {
            ack_oplock_msg(&mut a, fa, 1)
        };
        assert!(a.send_frame(m).is_empty(), "no answer before the home's");
        assert_eq!(
            (a.held_lookups.len(), cl.calls_to(3)),
            (1, calls),
            "the acknowledgment waits for its call, which the thread did not make"
        );
        assert_eq!(
            a.query_info(fa, 1, 4, 0, 4096).status(),
            NtStatus::SUCCESS,
            "the connection answers a QUERY_INFO meanwhile"
        );
        let r = answer_held(&mut a);
        assert_eq!(statuses(&r), [NtStatus::SUCCESS], "lease {lease}");
        assert_eq!(cl.calls_to(3), calls + 1, "one call");
        a.hold_lookups = false;
        let mut fin = Vec::new();
        for _ in 0..5 {
            fin.extend(b.tick(10));
        }
        assert_eq!(statuses(&fin), [NtStatus::SUCCESS], "b's CREATE goes on");
        let fb = CreateResponse::decode(&fin[0].msg).expect("create").file_id;
        assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
        assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    }
}

/// The I/O grant an open's admission brings is kept when the home's answer comes in, on the
/// thread that carried the call, not when the I/O thread takes the answer later: a revocation
/// the home sent in between (a client of another node took a byte-range lock) is not undone,
/// so a READ of the locked range asks the home and meets the lock.
#[test]
fn a_revocation_between_an_admissions_answer_and_its_create_running_again_is_not_undone() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fb = open(&mut b, "late.txt", ALL, 7).expect("b");
    assert_eq!(b.write(fb, 0, b"0123456789").status(), NtStatus::SUCCESS);

    a.hold_lookups = true;
    let m = a.create_msg_caching("late.txt", ALL, 7, D::OPEN, 0, None);
    assert!(a.send_frame(m).is_empty(), "the CREATE asks the home");
    assert_eq!(a.held_lookups.len(), 1);
    let req = a.held_lookups.remove(0);
    let done = req.run();
    // The home answered (admitted, with an I/O grant: no locks on the file); before the
    // CREATE runs again, a client of node 2 locks a range, and the home takes the grant back.
    let locked = [(0, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(b.lock(fb, &locked).status(), NtStatus::SUCCESS);
    a.conn.complete_lookup(a.now, req.id, done);
    let r = a.pump();
    assert_eq!(statuses(&r), [NtStatus::SUCCESS], "the CREATE admitted");
    let fa = CreateResponse::decode(&r[0].msg).expect("create").file_id;
    a.hold_lookups = false;

    let calls = cl.calls_to(3);
    assert_eq!(
        a.read(fa, 0, 4).status(),
        NtStatus::FILE_LOCK_CONFLICT,
        "the revoked grant stays revoked: the home is asked and the lock is met"
    );
    assert_eq!(cl.calls_to(3), calls + 1, "asked of the home");
    assert_eq!(b.lock(fb, &[(0, 10, UNLOCK)]).status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&a.read(fa, 0, 4)), b"0123");
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
}

const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
const FSCTL_SET_ZERO_DATA: u32 = 0x0009_80C8;

/// An FSCTL IOCTL message of `input` on `f` (sent without waiting for its answer).
fn fsctl_msg(c: &mut Client, f: FileId, ctl: u32, input: &[u8], max_out: u32) -> Vec<u8> {
    let tree = c.tree_id;
    c.message(Command::IOCTL, tree, |o| {
        o.extend_from_slice(&57u16.to_le_bytes());
        o.extend_from_slice(&0u16.to_le_bytes());
        o.extend_from_slice(&ctl.to_le_bytes());
        f.write(o);
        for v in [120, input.len() as u32, 0, 0, 0, max_out, 1, 0] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        o.extend_from_slice(input);
    })
}

/// A copychunk of `chunks` (source offset, target offset, length) from the open whose resume
/// key is `key`.
fn copychunk_msg(
    c: &mut Client,
    dst: FileId,
    key: [u8; 24],
    chunks: &[(u64, u64, u32)],
) -> Vec<u8> {
    let input = copychunk_input(key, chunks);
    fsctl_msg(c, dst, FSCTL_SRV_COPYCHUNK, &input, 12)
}

/// The chunks a copychunk's answer says it wrote.
fn chunks_written(r: &Resp) -> u32 {
    use ringshare_wire::ioctl::{IoctlResponse, SrvCopychunkResponse};
    let out = IoctlResponse::decode(&r.msg).expect("an IOCTL response");
    SrvCopychunkResponse::decode(out.output)
        .expect("a copychunk response")
        .chunks_written
}

/// Carry the held lookups, one at a time, until an answer comes out: how many calls that took.
fn answer_all_held(cl: &Cluster, c: &mut Client) -> (Vec<Resp>, u64) {
    let calls = cl.calls_to(3);
    let mut out = Vec::new();
    while out.is_empty() && !c.held_lookups.is_empty() {
        assert_eq!(c.held_lookups.len(), 1, "one question at a time");
        out = answer_held(c);
    }
    (out, cl.calls_to(3) - calls)
}

/// A copychunk's and an FSCTL_SET_ZERO_DATA's byte-range lock checks of files homed on another
/// node that no I/O grant decides (a client of node 2 holds locks on both files) ask the home
/// away from the I/O thread: unanswered and no call until the held call is carried, a
/// QUERY_INFO answered meanwhile. A copychunk of two chunks asks its four checks (source and
/// destination of each) one after another, each once (the answers kept while it runs again),
/// and copies only once all are in; a chunk whose destination is locked ends the copy there
/// (FILE_LOCK_CONFLICT, the chunks before it written, nothing of it). A set-zero-data asks
/// once: SUCCESS and zeros, or FILE_LOCK_CONFLICT on the locked range.
#[test]
fn a_copychunk_and_a_set_zero_data_no_grant_decides_wait_for_the_home_not_their_connection() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let src = open(&mut a, "cc-src.bin", ALL, 7).expect("src");
    let dst = open(&mut a, "cc-dst.bin", ALL, 7).expect("dst");
    let data: Vec<u8> = (0..64u8).collect();
    assert_eq!(a.write(src, 0, &data).status(), NtStatus::SUCCESS);
    assert_eq!(a.write(dst, 0, &[b'x'; 2048]).status(), NtStatus::SUCCESS);
    let r = a.ioctl(src, FSCTL_SRV_REQUEST_RESUME_KEY, &[], 32, 1);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg).expect("ioctl");
    let key: [u8; 24] = out.output[..24].try_into().unwrap();
    let (bs, bd) = (
        open(&mut b, "cc-src.bin", ALL, 7).expect("b src"),
        open(&mut b, "cc-dst.bin", ALL, 7).expect("b dst"),
    );
    let locked = [(1000, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(b.lock(bs, &locked).status(), NtStatus::SUCCESS);
    assert_eq!(b.lock(bd, &locked).status(), NtStatus::SUCCESS);

    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    let m = copychunk_msg(&mut a, dst, key, &[(0, 0, 8), (8, 8, 8)]);
    assert!(a.send_frame(m).is_empty(), "no answer before the home's");
    assert_eq!(
        (a.held_lookups.len(), cl.calls_to(3)),
        (1, calls),
        "it waits for its call, which the thread did not make"
    );
    assert_eq!(
        a.query_info(src, 1, 4, 0, 4096).status(),
        NtStatus::SUCCESS,
        "the connection answers a QUERY_INFO meanwhile"
    );
    let (r, asked) = answer_all_held(&cl, &mut a);
    assert_eq!(statuses(&r), [NtStatus::SUCCESS]);
    assert_eq!(chunks_written(&r[0]), 2);
    assert_eq!(asked, 4, "each chunk's source and destination asked once");
    a.hold_lookups = false;
    assert_eq!(
        read_data(&a.read(dst, 0, 20)),
        [&data[..16], b"xxxx"].concat()
    );

    // The second chunk's destination is locked: the first is written, the second not.
    a.hold_lookups = true;
    let m = copychunk_msg(&mut a, dst, key, &[(16, 16, 8), (24, 1000, 8)]);
    assert!(a.send_frame(m).is_empty());
    let (r, asked) = answer_all_held(&cl, &mut a);
    assert_eq!(statuses(&r), [NtStatus::FILE_LOCK_CONFLICT]);
    assert_eq!(chunks_written(&r[0]), 1);
    assert_eq!(asked, 4);
    a.hold_lookups = false;
    assert_eq!(read_data(&a.read(dst, 16, 8)), &data[16..24]);
    assert_eq!(b.read(bd, 1000, 8).status(), NtStatus::SUCCESS);
    assert_eq!(
        read_data(&b.read(bd, 1000, 8)),
        b"xxxxxxxx",
        "nothing of it"
    );

    // FSCTL_SET_ZERO_DATA: SUCCESS and zeros outside the lock, FILE_LOCK_CONFLICT in it.
    for (from, status) in [
        (100i64, NtStatus::SUCCESS),
        (1000, NtStatus::FILE_LOCK_CONFLICT),
    ] {
        let mut input = Vec::new();
        ringshare_wire::ioctl::FileZeroDataInformation {
            file_offset: from,
            beyond_final_zero: from + 8,
        }
        .encode(&mut input);
        a.hold_lookups = true;
        let calls = cl.calls_to(3);
        let m = fsctl_msg(&mut a, dst, FSCTL_SET_ZERO_DATA, &input, 0);
        assert!(a.send_frame(m).is_empty(), "no answer before the home's");
        assert_eq!((a.held_lookups.len(), cl.calls_to(3)), (1, calls));
        let (r, asked) = answer_all_held(&cl, &mut a);
        assert_eq!(
            (statuses(&r), asked),
            (vec![status], 1),
            "zero data at {from}"
        );
    }
    a.hold_lookups = false;
    assert_eq!(read_data(&a.read(dst, 100, 8)), [0; 8]);
    assert_eq!(read_data(&b.read(bd, 1000, 8)), b"xxxxxxxx");
    for (c, f) in [(&mut a, [src, dst]), (&mut b, [bs, bd])] {
        for f in f {
            assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
        }
    }
}

/// A rename of a file homed on another node asks the home whether it waits for breaks away
/// from the I/O thread: unanswered and no call until the held call is carried, a QUERY_INFO
/// answered meanwhile, then SUCCESS, the home told of the new name by a call nobody waits for
/// (a delete set pending later removes the file by its new name). A rename that would replace
/// a file this client holds open asks twice, the file's home and then the replaced file's,
/// each once (the answers kept while it runs again), and is ACCESS_DENIED.
#[test]
fn a_rename_of_a_file_homed_on_another_node_asks_each_question_once_away_from_the_io_thread() {
    let cl = Cluster::new(3, 3);
    let mut a = cl.client(1);
    let f = open(&mut a, "mv-from.txt", ALL, 7).expect("from");
    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    let m = a.set_info_msg(f, 1, 10, &rename_info("mv-to.txt", false));
    assert!(a.send_frame(m).is_empty(), "no answer before the home's");
    assert_eq!(
        (a.held_lookups.len(), cl.calls_to(3)),
        (1, calls),
        "it waits for its call, which the thread did not make"
    );
    assert_eq!(
        a.query_info(f, 1, 4, 0, 4096).status(),
        NtStatus::SUCCESS,
        "the connection answers a QUERY_INFO meanwhile"
    );
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);
    assert_eq!(cl.calls_to(3), calls + 1, "one call");
    assert_eq!(
        a.held_lookups.len(),
        1,
        "the home is told the new name by a post"
    );
    assert!(answer_held(&mut a).is_empty());
    a.hold_lookups = false;
    assert!(cl.exists("mv-to.txt") && !cl.exists("mv-from.txt"));

    let g = open(&mut a, "mv-other.txt", ALL, 7).expect("other");
    a.hold_lookups = true;
    let m = a.set_info_msg(f, 1, 10, &rename_info("mv-other.txt", true));
    assert!(a.send_frame(m).is_empty());
    let (r, asked) = answer_all_held(&cl, &mut a);
    assert_eq!(
        statuses(&r),
        [NtStatus::ACCESS_DENIED],
        "the file replaced is open"
    );
    assert_eq!(
        asked, 2,
        "the file's home and the replaced file's, each once"
    );
    a.hold_lookups = false;

    assert_eq!(a.set_info(f, 1, 13, &[1]).status(), NtStatus::SUCCESS);
    for h in [f, g] {
        assert_eq!(a.close(h).status(), NtStatus::SUCCESS);
    }
    assert!(
        !cl.exists("mv-to.txt"),
        "removed by its new name at its home"
    );
    assert!(cl.exists("mv-other.txt"));
}

/// SMB2_DHANDLE_FLAG_PERSISTENT.
const PERSISTENT: u32 = 2;
const LEASE: u8 = 0xFF;
const RELATED: FileId = FileId {
    persistent: u64::MAX,
    volatile: u64::MAX,
};

/// A client of node `node` on a dialect with persistent handles (ClientGuid `guid`).
fn ca_client(cl: &Cluster, node: u16, guid: u8) -> Client {
    let s = cl.nodes[usize::from(node) - 1].clone();
    let dialect = ringshare_wire::consts::Dialect::SMB3_1_1;
    let mut c = Client::negotiated(s, cl.mem.clone(), dialect, [guid; 16]);
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::SUCCESS);
    c.tree_id = c.tree_connect("share");
    c
}

/// A CREATE of `name` asking for a persistent handle with CreateGuid `guid`; a replay of it
/// (SMB2_FLAGS_REPLAY_OPERATION) with `replay`.
fn persistent_create_msg(c: &mut Client, name: &str, guid: u8, replay: bool) -> Vec<u8> {
    use ringshare_wire::create::{tag, CreateContext, DurableHandleRequestV2};
    let dh2q = DurableHandleRequestV2 {
        timeout: 0,
        flags: PERSISTENT,
        create_guid: [guid; 16],
    };
    let ctx = CreateContext::new(tag::DURABLE_HANDLE_REQUEST_V2, dh2q.encode());
    let mut m = c.create_msg_caching_ctx(name, ALL, 7, D::OPEN_IF, 0, vec![ctx]);
    if replay {
        let flags = u32::from_le_bytes(m[16..20].try_into().unwrap()) | 0x2000_0000;
        m[16..20].copy_from_slice(&flags.to_le_bytes());
        c.sign(&mut m);
    }
    m
}

/// `b` opens `name` with a read, write and handle lease `key`; what `a` sends (`send`) waits
/// for its break (STATUS_PENDING when it goes async, nothing when it waits inside a compound);
/// `b` acknowledges it while `a`'s lookups are held. `a` runs `m` again (woken, or at its
/// time) and must not call the home on its thread: no answer, one held call, none made. The
/// interim responses, and `b`'s open.
fn runs_again_after_a_break(
    cl: &Cluster,
    (a, b): (&mut Client, &mut Client),
    name: &str,
    key: u8,
    send: impl FnOnce(&mut Client) -> Vec<Resp>,
) -> (Vec<Resp>, FileId) {
    let mb = b.create_msg_caching(name, ALL, 7, D::OPEN_IF, LEASE, Some(lease_v2(key, 7)));
    let r = b.send_frame(mb).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let fb = CreateResponse::decode(&r.msg).expect("create").file_id;
    let interim = send(a);
    assert_eq!(b.breaks().len(), 1, "b is told to give up its lease");
    a.hold_lookups = true;
    assert_eq!(b.ack_lease(key, 1).status(), NtStatus::SUCCESS);
    let calls = cl.calls_to(3);
    let mut r = a.pump();
    r.extend(a.tick(1_000));
    assert!(r.is_empty(), "{name}: no answer before the home's");
    assert_eq!(
        (a.held_lookups.len(), cl.calls_to(3)),
        (1, calls),
        "{name}: run again, it waits for its call, which the thread did not make"
    );
    assert!(
        a.tick(1_000).is_empty() && a.held_lookups.len() == 1,
        "{name}: not run again while its question is out"
    );
    (interim, fb)
}

/// A CREATE run again after it waited for a break (here a client of node 2 acknowledged it)
/// asks its file's home whether the open may join, and stores its persistent open's record,
/// away from the I/O thread, as a fresh CREATE does: no answer and no call until the held
/// call is carried, the connection answering a QUERY_INFO meanwhile and a replay of it told to
/// try again (FILE_NOT_AVAILABLE) while it waits; then the record is stored, and only then is
/// the client told SUCCESS. A CANCEL while the home is asked answers CANCELLED at once, and the
/// open the home admitted meanwhile is closed there; a CANCEL while the record is stored comes
/// too late (the open is made: SUCCESS once stored). A LOGOFF while the home is asked ends it
/// unanswered, its open closed at the home too; a LOGOFF while its record is stored closes
/// its open, and the record, stored all the same, is removed by a question asked after it.
#[test]
fn a_create_run_again_after_breaks_asks_its_home_and_stores_its_record_away_from_the_io_thread() {
    let cl = ca_cluster(3);
    let (mut a, mut b) = (ca_client(&cl, 1, 1), ca_client(&cl, 2, 2));
    let other = open(&mut a, "again-other.txt", ALL, 7).expect("other");
    let m = persistent_create_msg(&mut a, "again.txt", 1, false);
    let (interim, fb) =
        runs_again_after_a_break(&cl, (&mut a, &mut b), "again.txt", 5, |a| a.send_frame(m));
    assert_eq!(statuses(&interim), [NtStatus::PENDING]);
    assert_eq!(
        a.query_info(other, 1, 4, 0, 4096).status(),
        NtStatus::SUCCESS,
        "the connection answers a QUERY_INFO meanwhile"
    );
    let replay = |a: &mut Client| {
        let m = persistent_create_msg(a, "again.txt", 1, true);
        statuses(&a.send_frame(m))
    };
    assert_eq!(replay(&mut a), [NtStatus::FILE_NOT_AVAILABLE], "pending");
    let calls = cl.calls_to(3);
    assert!(answer_held(&mut a).is_empty(), "admitted: its record next");
    assert_eq!(cl.calls_to(3), calls + 1, "the home asked once");
    assert_eq!(a.held_lookups.len(), 1, "the record's store, held");
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "not stored yet");
    assert_eq!(replay(&mut a), [NtStatus::FILE_NOT_AVAILABLE], "pending");
    let r = answer_held(&mut a);
    assert_eq!(statuses(&r), [NtStatus::SUCCESS]);
    assert_eq!(durable_flags(&r[0]), Some(PERSISTENT));
    assert_eq!(
        cl.bus.ca.lock().unwrap().len(),
        1,
        "stored before the client heard of it"
    );
    a.hold_lookups = false;
    let fa = CreateResponse::decode(&r[0].msg).expect("create").file_id;
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "gone with the open");
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);

    // A CANCEL while the home is asked: CANCELLED at once; the home's answer finds nothing.
    let m = persistent_create_msg(&mut a, "again.txt", 2, false);
    let (interim, fb) =
        runs_again_after_a_break(&cl, (&mut a, &mut b), "again.txt", 6, |a| a.send_frame(m));
    assert_eq!(
        statuses(&a.cancel_async(&interim[0])),
        [NtStatus::CANCELLED]
    );
    assert!(answer_held(&mut a).is_empty() && a.held_lookups.is_empty());
    a.hold_lookups = false;
    assert_eq!(cl.nodes[0].resend_closes(), 0, "the home took the close");
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "no record");
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    let only = open(&mut b, "again.txt", ALL, 0).expect("nothing of a's open is left");
    assert_eq!(b.close(only).status(), NtStatus::SUCCESS);

    // A CANCEL while the record is stored comes too late: SUCCESS once stored.
    let m = persistent_create_msg(&mut a, "again.txt", 3, false);
    let (interim, fb) =
        runs_again_after_a_break(&cl, (&mut a, &mut b), "again.txt", 7, |a| a.send_frame(m));
    assert!(answer_held(&mut a).is_empty() && a.held_lookups.len() == 1);
    assert!(
        a.cancel_async(&interim[0]).is_empty(),
        "it waits for the store"
    );
    let r = answer_held(&mut a);
    assert_eq!(statuses(&r), [NtStatus::SUCCESS]);
    assert_eq!(cl.bus.ca.lock().unwrap().len(), 1);
    a.hold_lookups = false;
    let fa = CreateResponse::decode(&r[0].msg).expect("create").file_id;
    for (c, f) in [(&mut a, fa), (&mut b, fb)] {
        assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    }

    // A LOGOFF while the home is asked: unanswered, and its open closed at the home.
    let mut c = ca_client(&cl, 1, 3);
    let m = persistent_create_msg(&mut c, "again.txt", 4, false);
    let (_, fb) =
        runs_again_after_a_break(&cl, (&mut c, &mut b), "again.txt", 8, |c| c.send_frame(m));
    assert_eq!(
        c.call(Command::LOGOFF, 0, empty_body).status(),
        NtStatus::SUCCESS
    );
    assert!(answer_held(&mut c).is_empty() && c.held_lookups.is_empty());
    assert_eq!(cl.nodes[0].resend_closes(), 0, "the home took the close");
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    let only = open(&mut b, "again.txt", ALL, 0).expect("nothing of c's open is left");
    assert_eq!(b.close(only).status(), NtStatus::SUCCESS);
    assert!(cl.bus.ca.lock().unwrap().is_empty());

    // A LOGOFF while the record is stored: its open closes, and the record, stored all the
    // same, is removed by a question asked after the store's.
    let mut c = ca_client(&cl, 1, 4);
    let m = persistent_create_msg(&mut c, "again.txt", 5, false);
    let (_, fb) =
        runs_again_after_a_break(&cl, (&mut c, &mut b), "again.txt", 9, |c| c.send_frame(m));
    assert!(answer_held(&mut c).is_empty() && c.held_lookups.len() == 1);
    assert_eq!(
        c.call(Command::LOGOFF, 0, empty_body).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        c.held_lookups.len(),
        3,
        "the store, then the record's removal and the close at the home, posted"
    );
    assert!(answer_held(&mut c).is_empty() && c.held_lookups.is_empty());
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "stored, then removed");
    assert_eq!(cl.nodes[0].resend_closes(), 0, "the home took the close");
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    let only = open(&mut b, "again.txt", ALL, 0).expect("nothing of c's open is left");
    assert_eq!(b.close(only).status(), NtStatus::SUCCESS);
}

/// A CREATE inside a compound (a related QUERY_INFO after it) that waited for a break is run
/// again the same way: its job parks on the home's question and then on its record's store,
/// the thread makes neither call, and the compound is answered once the record is stored.
#[test]
fn a_compounds_create_run_again_after_breaks_parks_its_job_on_the_home_and_the_store() {
    let cl = ca_cluster(3);
    let (mut a, mut b) = (ca_client(&cl, 1, 1), ca_client(&cl, 2, 2));
    let create = persistent_create_msg(&mut a, "again-compound.txt", 1, false);
    let query = a.query_info_msg(RELATED, 1, 4, 4096);
    let m = |a: &mut Client| a.compound(vec![create, query], true);
    let (interim, fb) = runs_again_after_a_break(&cl, (&mut a, &mut b), "again-compound.txt", 5, m);
    assert!(
        interim.is_empty(),
        "inside a compound it waits without going async"
    );
    assert!(answer_held(&mut a).is_empty(), "admitted: its record next");
    assert_eq!(a.held_lookups.len(), 1);
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "not stored yet");
    let r = answer_held(&mut a);
    assert_eq!(statuses(&r), [NtStatus::SUCCESS, NtStatus::SUCCESS]);
    assert_eq!(cl.bus.ca.lock().unwrap().len(), 1);
    a.hold_lookups = false;
    let fa = CreateResponse::decode(&r[0].msg).expect("create").file_id;
    for (c, f) in [(&mut a, fa), (&mut b, fb)] {
        assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    }
    assert!(cl.bus.ca.lock().unwrap().is_empty());
}

/// A rename run again after it waited for a break of another client's handle caching asks
/// the file's home away from the I/O thread, as a fresh rename does: no answer and no call
/// until the held call is carried, a QUERY_INFO answered meanwhile, then SUCCESS and the home
/// told the new name by a post. A CANCEL while the home is asked answers CANCELLED at once,
/// and the file keeps its name.
#[test]
fn a_rename_run_again_after_breaks_asks_its_home_away_from_the_io_thread() {
    let cl = Cluster::new(3, 3);
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let f = open(&mut a, "mv-again.txt", ALL, 7).expect("a");
    let m = a.set_info_msg(f, 1, 10, &rename_info("mv-again-to.txt", false));
    let (interim, fb) = runs_again_after_a_break(&cl, (&mut a, &mut b), "mv-again.txt", 5, |a| {
        a.send_frame(m)
    });
    assert_eq!(statuses(&interim), [NtStatus::PENDING]);
    assert_eq!(
        a.query_info(f, 1, 4, 0, 4096).status(),
        NtStatus::SUCCESS,
        "the connection answers a QUERY_INFO meanwhile"
    );
    let calls = cl.calls_to(3);
    assert_eq!(statuses(&answer_held(&mut a)), [NtStatus::SUCCESS]);
    assert_eq!(cl.calls_to(3), calls + 1, "one call");
    assert_eq!(
        a.held_lookups.len(),
        1,
        "the home told the new name by a post"
    );
    assert!(answer_held(&mut a).is_empty());
    a.hold_lookups = false;
    assert!(cl.exists("mv-again-to.txt") && !cl.exists("mv-again.txt"));
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);

    // A CANCEL while the home is asked: CANCELLED at once, the file keeps its name.
    let m = a.set_info_msg(f, 1, 10, &rename_info("mv-again.txt", false));
    let (interim, fb) =
        runs_again_after_a_break(&cl, (&mut a, &mut b), "mv-again-to.txt", 6, |a| {
            a.send_frame(m)
        });
    assert_eq!(
        statuses(&a.cancel_async(&interim[0])),
        [NtStatus::CANCELLED]
    );
    assert!(answer_held(&mut a).is_empty() && a.held_lookups.is_empty());
    a.hold_lookups = false;
    assert!(cl.exists("mv-again-to.txt") && !cl.exists("mv-again.txt"));
    for (c, h) in [(&mut a, f), (&mut b, fb)] {
        assert_eq!(c.close(h).status(), NtStatus::SUCCESS);
    }
}

/// While this node's calls to a file's home fail at once (as many wait for it as may: a flood of
/// opens of a stopped node's files), a new open of an existing file homed there is told "try
/// again" before the file is opened: no call is asked, and the file system is not touched (an
/// open fault set on the file is still there afterwards). A new file (its home unknown until it
/// is made) is made and its home asked as before; once the calls go again, so does the open.
#[test]
fn an_open_of_a_file_whose_home_this_node_cannot_call_now_is_refused_before_it_is_opened() {
    let cl = Cluster::new(3, 3);
    let mut a = cl.client(1);
    let fa = open(&mut a, "far.txt", ALL, 7).expect("made");
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    let path = ringshare_vfs::RelPath::from_components(["far.txt"]).expect("path");
    let (op, err) = (
        ringshare_vfs::memory::FaultOp::Open,
        ringshare_vfs::FsError::Io,
    );
    cl.mem.inject_fault(op, Some(path), err, 1);
    cl.bus.refusing.lock().unwrap().insert(3);
    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    assert_eq!(
        open(&mut a, "far.txt", ALL, 7),
        Err(NtStatus::FILE_NOT_AVAILABLE),
        "try again"
    );
    assert_eq!(
        (
            a.held_lookups.len(),
            cl.calls_to(3),
            cl.bus.refused.load(std::sync::atomic::Ordering::Relaxed)
        ),
        (0, calls, 1),
        "nothing asked of the home; one refusal counted"
    );
    a.hold_lookups = false;
    let made = open(&mut a, "new.txt", ALL, 7).expect("a new file is made and its home asked");
    assert_eq!(a.close(made).status(), NtStatus::SUCCESS);
    cl.bus.refusing.lock().unwrap().clear();
    assert_ne!(
        open(&mut a, "far.txt", ALL, 7).map(|_| ()),
        Ok(()),
        "the open fault was not used by the refused open: the next open meets it"
    );
    let f = open(&mut a, "far.txt", ALL, 7).expect("the calls go again");
    assert_eq!(a.close(f).status(), NtStatus::SUCCESS);
}
