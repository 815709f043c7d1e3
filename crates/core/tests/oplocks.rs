//! Oplocks and leases: grants, breaks delivered to the holder's connection,
//! CREATEs that wait for acknowledgments, timeouts ([MS-SMB2] 3.3.4.6,
//! 3.3.4.7, 3.3.5.9.8, 3.3.5.22; the grant and break rules smbtorture's
//! smb2.oplock and smb2.lease suites check). Two clients are two
//! connections of one server.

use crate::support;

use ringshare_core::SigningPolicy;
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{Command, CreateDisposition as D, Dialect, OplockLevel};
use ringshare_wire::create::{ContextTag, CreateResponse, Lease};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::{FileId, NtStatus};
use support::*;

const NONE: u8 = 0;
const II: u8 = 1;
const BATCH: u8 = 9;
const LEASE: u8 = 0xFF;
const R: u32 = 1;
const H: u32 = 2;
const W: u32 = 4;
const READ: u32 = 0x0012_0089;
const ALL: u32 = 0x001F_01FF;
const ATTRS_ONLY: u32 = 0x0000_0080;

fn pair() -> (Client, Client) {
    pair_with(Dialect::SMB3_1_1)
}

fn pair_with(dialect: Dialect) -> (Client, Client) {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let opts = || Options {
        dialect,
        signing: SigningPolicy::IfRequired,
    };
    let a = Client::on(server.clone(), mem.clone(), opts());
    let b = Client::on(server, mem, opts());
    (a, b)
}

fn open(
    c: &mut Client,
    name: &str,
    access: u32,
    share: u32,
    level: u8,
    lease: Option<Lease>,
) -> Resp {
    let m = c.create_msg_caching(name, access, share, D::OPEN_IF, level, lease);
    let mut rs = c.send_frame(m);
    assert_eq!(rs.len(), 1, "one response: {rs:?}");
    rs.remove(0)
}

/// A SET_INFO renaming `f` to `to`, replacing what is there.
fn rename_msg(c: &mut Client, f: FileId, to: &str) -> Vec<u8> {
    let tree = c.tree_id;
    let info = rename_info(to, true);
    c.message(Command::SET_INFO, tree, |o| {
        ringshare_wire::info::SetInfoRequest {
            info_type: ringshare_wire::consts::InfoType::FILE,
            info_class: 10,
            additional_information: 0,
            file_id: f,
            buffer: &info,
        }
        .encode(o)
    })
}

/// The oplock level and FileId of a successful CREATE.
struct Created {
    oplock_level: OplockLevel,
    file_id: FileId,
}

fn created(r: &Resp) -> Created {
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    let cr = CreateResponse::decode(&r.msg).expect("create response");
    Created {
        oplock_level: cr.oplock_level,
        file_id: cr.file_id,
    }
}

fn ack_oplock(c: &mut Client, f: FileId, level: u8) -> Resp {
    let body = OplockBreak::Oplock {
        oplock_level: OplockLevel(level),
        file_id: f,
    };
    c.call(Command::OPLOCK_BREAK, c.tree_id, |o| body.encode(o))
}

#[test]
fn batch_oplock_is_granted_to_the_only_opener_in_every_dialect() {
    for d in [
        Dialect::SMB2_0_2,
        Dialect::SMB2_1,
        Dialect::SMB3_0,
        Dialect::SMB3_1_1,
    ] {
        let (mut a, _b) = pair_with(d);
        let r = open(&mut a, "f.txt", ALL, 0, BATCH, None);
        assert_eq!(created(&r).oplock_level.0, BATCH, "{d:?}");
    }
}

#[test]
fn second_open_breaks_batch_to_level_ii_waits_for_the_ack_and_gets_level_ii() {
    let (mut a, mut b) = pair();
    let fa = created(&open(&mut a, "f.txt", ALL, 7, BATCH, None)).file_id;
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, BATCH, None);
    let rs = b.send_frame(m);
    assert_eq!(rs.len(), 1);
    assert_eq!(
        rs[0].status(),
        NtStatus::PENDING,
        "the CREATE waits (interim)"
    );
    let got = a.breaks();
    assert_eq!(
        got,
        vec![OplockBreak::Oplock {
            oplock_level: OplockLevel(II),
            file_id: fa
        }]
    );
    // Nothing happens for b until a acknowledges.
    assert!(b.tick(10).is_empty());
    let r = ack_oplock(&mut a, fa, II);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(r.body()[2], II);
    let fin = b.tick(10);
    assert_eq!(fin.len(), 1);
    assert_eq!(
        created(&fin[0]).oplock_level.0,
        II,
        "both share level II now"
    );
}

#[test]
fn unacknowledged_break_lets_the_waiting_open_go_after_35_seconds() {
    let (mut a, mut b) = pair();
    let fa = created(&open(&mut a, "f.txt", ALL, 7, BATCH, None)).file_id;
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    assert_eq!(b.send_frame(m)[0].status(), NtStatus::PENDING);
    assert_eq!(a.breaks().len(), 1);
    assert!(b.tick(34_000).is_empty(), "still waiting after 34 s");
    let fin = b.tick(1_500);
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0].status(), NtStatus::SUCCESS);
    // The holder was left with nothing: a late ack finds no break.
    assert_eq!(
        ack_oplock(&mut a, fa, II).status(),
        NtStatus::INVALID_OPLOCK_PROTOCOL
    );
}

#[test]
fn closing_the_holder_releases_the_waiting_open_at_once() {
    let (mut a, mut b) = pair();
    let fa = created(&open(&mut a, "f.txt", ALL, 0, BATCH, None)).file_id;
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    assert_eq!(b.send_frame(m)[0].status(), NtStatus::PENDING);
    a.breaks();
    assert_eq!(a.close(fa).status(), NtStatus::SUCCESS);
    let fin = b.tick(5);
    assert_eq!(fin.len(), 1);
    assert_eq!(
        fin[0].status(),
        NtStatus::SUCCESS,
        "no sharing conflict left"
    );
}

#[test]
fn batch_holder_that_keeps_its_handle_leaves_a_sharing_violation() {
    let (mut a, mut b) = pair();
    let fa = created(&open(&mut a, "f.txt", ALL, 0, BATCH, None)).file_id;
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    assert_eq!(b.send_frame(m)[0].status(), NtStatus::PENDING);
    a.breaks();
    assert_eq!(ack_oplock(&mut a, fa, II).status(), NtStatus::SUCCESS);
    let fin = b.tick(5);
    assert_eq!(fin[0].status(), NtStatus::SHARING_VIOLATION);
}

#[test]
fn waiting_create_can_be_cancelled() {
    let (mut a, mut b) = pair();
    created(&open(&mut a, "f.txt", ALL, 7, BATCH, None));
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    let mid = b.next_mid - 1;
    let interim = b.send_frame(m);
    assert_eq!(interim[0].status(), NtStatus::PENDING);
    let async_id = interim[0].hdr.async_id().expect("async id");
    let mut h = ringshare_wire::header::Header::request(Command::CANCEL, mid);
    h.session_id = b.session_id;
    h.flags
        .insert(ringshare_wire::consts::HeaderFlags::ASYNC_COMMAND);
    h.id = ringshare_wire::header::HeaderId::Async { async_id };
    let mut msg = Vec::new();
    h.encode(&mut msg);
    msg.extend_from_slice(&[4, 0, 0, 0]);
    let rs = b.send_frame(msg);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status(), NtStatus::CANCELLED);
}

#[test]
fn stat_open_breaks_nothing_and_gets_no_oplock() {
    let (mut a, mut b) = pair();
    created(&open(&mut a, "f.txt", ALL, 7, BATCH, None));
    let r = open(&mut b, "f.txt", ATTRS_ONLY, 7, BATCH, None);
    assert_eq!(created(&r).oplock_level.0, NONE);
    assert!(a.breaks().is_empty());
}

#[test]
fn write_breaks_level_ii_oplocks_to_none_without_waiting() {
    let (mut a, mut b) = pair();
    a.put_file("f.txt", b"hello");
    let fa = created(&open(&mut a, "f.txt", READ, 7, II, None)).file_id;
    let fb = open(&mut b, "f.txt", ALL, 7, II, None);
    assert_eq!(created(&fb).oplock_level.0, II);
    let fb = created(&fb).file_id;
    assert_eq!(b.write(fb, 0, b"HELLO").status(), NtStatus::SUCCESS);
    let got = a.breaks();
    assert_eq!(
        got,
        vec![OplockBreak::Oplock {
            oplock_level: OplockLevel(NONE),
            file_id: fa
        }]
    );
    // No acknowledgment is expected for a break from level II.
    assert_eq!(
        ack_oplock(&mut a, fa, NONE).status(),
        NtStatus::INVALID_OPLOCK_PROTOCOL
    );
}

#[test]
fn ack_of_an_oplock_that_is_not_breaking_is_invalid_oplock_protocol() {
    let (mut a, _b) = pair();
    let fa = created(&open(&mut a, "f.txt", ALL, 7, BATCH, None)).file_id;
    assert_eq!(
        ack_oplock(&mut a, fa, II).status(),
        NtStatus::INVALID_OPLOCK_PROTOCOL
    );
}

#[test]
fn a_lease_granted_no_state_beside_a_byte_range_lock_keeps_the_clients_epoch() {
    // smbtorture 4.22 smb2.lease.lease-epoch: no state was granted, so nothing changed.
    const EXCLUSIVE_NOW: u32 = 0x2 | 0x10;
    let (mut a, _b) = pair();
    let f = created(&open(&mut a, "locked.dat", ALL, 7, NONE, None)).file_id;
    assert_eq!(a.write(f, 0, b"x").status(), NtStatus::SUCCESS);
    assert_eq!(
        a.lock(f, &[(0, 1, EXCLUSIVE_NOW)]).status(),
        NtStatus::SUCCESS
    );
    let mut ask = lease_v2(1, R);
    ask.v2.as_mut().expect("v2").epoch = 100;
    let l = granted_lease(&open(&mut a, "locked.dat", ALL, 7, LEASE, Some(ask)));
    assert_eq!(l.state.0, 0, "no caching beside a byte-range lock");
    assert_eq!(l.v2.expect("v2 answer").epoch, 100);
}

#[test]
fn lease_rwh_is_granted_alone_and_another_client_breaks_it_to_rh() {
    let (mut a, mut b) = pair();
    let l = granted_lease(&open(
        &mut a,
        "f.txt",
        ALL,
        7,
        LEASE,
        Some(lease_v2(1, R | W | H)),
    ));
    assert_eq!(l.state.0, R | W | H);
    assert_eq!(l.v2.expect("v2 answer").epoch, 1, "request epoch + 1");
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, LEASE, Some(lease_v2(2, R | H)));
    assert_eq!(b.send_frame(m)[0].status(), NtStatus::PENDING);
    let got = a.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    assert_eq!(n.lease_key, [1; 16]);
    assert_eq!(n.current_lease_state.0, R | W | H);
    assert_eq!(n.new_lease_state.0, R | H);
    assert_eq!(n.flags.0 & 1, 1, "ack required");
    assert_eq!(n.new_epoch, 2);
    // Acking more than the break allows is refused; the break stays.
    assert_eq!(
        a.ack_lease(1, R | W).status(),
        NtStatus::REQUEST_NOT_ACCEPTED
    );
    let r = a.ack_lease(1, R | H);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        a.ack_lease(1, R | H).status(),
        NtStatus::UNSUCCESSFUL,
        "no break now"
    );
    let fin = b.tick(10);
    assert_eq!(fin.len(), 1);
    assert_eq!(granted_lease(&fin[0]).state.0, R | H);
}

#[test]
fn lease_requests_without_read_get_nothing() {
    let (mut a, _b) = pair();
    for (i, s) in [H, W, H | W, 0].into_iter().enumerate() {
        let name = format!("f{i}.txt");
        let r = open(
            &mut a,
            &name,
            ALL,
            7,
            LEASE,
            Some(lease_v2(10 + i as u8, s)),
        );
        assert_eq!(created(&r).oplock_level.0, LEASE);
        assert_eq!(granted_lease(&r).state.0, 0, "state {s}");
    }
}

#[test]
fn same_lease_key_on_another_file_is_invalid_parameter() {
    let (mut a, _b) = pair();
    granted_lease(&open(&mut a, "f.txt", ALL, 7, LEASE, Some(lease_v2(1, R))));
    let r = open(&mut a, "g.txt", ALL, 7, LEASE, Some(lease_v2(1, R)));
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn same_lease_key_opens_share_the_lease_and_break_nothing() {
    let (mut a, _b) = pair();
    granted_lease(&open(
        &mut a,
        "f.txt",
        ALL,
        7,
        LEASE,
        Some(lease_v2(1, R | W | H)),
    ));
    let l = granted_lease(&open(
        &mut a,
        "f.txt",
        READ,
        7,
        LEASE,
        Some(lease_v2(1, R | W | H)),
    ));
    assert_eq!(l.state.0, R | W | H);
    assert!(a.breaks().is_empty());
}

#[test]
fn write_breaks_read_leases_of_other_keys_without_waiting() {
    let (mut a, mut b) = pair();
    a.put_file("f.txt", b"data");
    granted_lease(&open(&mut a, "f.txt", READ, 7, LEASE, Some(lease_v2(1, R))));
    let fb = created(&open(&mut b, "f.txt", ALL, 7, NONE, None)).file_id;
    assert_eq!(b.write(fb, 0, b"DATA").status(), NtStatus::SUCCESS);
    let got = a.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    assert_eq!((n.current_lease_state.0, n.new_lease_state.0), (R, 0));
    assert_eq!(n.flags.0, 0, "no ack for a break from R");
}

#[test]
fn create_inside_a_compound_waits_and_the_members_after_it_run_later() {
    let (mut a, mut b) = pair();
    a.put_file("f.txt", b"xyz");
    let fa = created(&open(&mut a, "f.txt", ALL, 7, BATCH, None)).file_id;
    let create = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    let read = b.read_msg(FileId::ANY, 0, 3);
    let rs = b.compound(vec![create, read], true);
    assert!(rs.is_empty(), "the chain waits: {rs:?}");
    a.breaks();
    assert_eq!(ack_oplock(&mut a, fa, II).status(), NtStatus::SUCCESS);
    let rs = b.tick(5);
    assert_eq!(rs.len(), 2, "{rs:?}");
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&rs[1]), b"xyz");
}

#[test]
fn break_for_a_connection_that_went_goes_to_another_channel_or_nowhere() {
    let (mut a, mut b) = pair();
    created(&open(&mut a, "f.txt", ALL, 7, BATCH, None));
    a.conn.shutdown(a.now);
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    let rs = b.send_frame(m);
    // a's session went with its only channel, and its opens with it.
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
}

#[test]
fn rename_waits_until_other_clients_give_up_handle_caching() {
    let (mut a, mut b) = pair();
    a.put_file("src.txt", b"moving");
    granted_lease(&open(
        &mut a,
        "src.txt",
        READ,
        7,
        LEASE,
        Some(lease_v2(1, R | H)),
    ));
    let fb = created(&open(
        &mut b,
        "src.txt",
        ALL,
        7,
        LEASE,
        Some(lease_v2(2, R | H)),
    ))
    .file_id;
    a.breaks();
    let m = rename_msg(&mut b, fb, "dst.txt");
    let rs = b.send_frame(m);
    assert_eq!(rs[0].status(), NtStatus::PENDING, "the rename waits");
    let got = a.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    assert_eq!((n.current_lease_state.0, n.new_lease_state.0), (R | H, R));
    assert!(
        b.tick(10).is_empty(),
        "still waiting for the acknowledgment"
    );
    assert_eq!(a.ack_lease(1, R).status(), NtStatus::SUCCESS);
    let fin = b.tick(10);
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0].status(), NtStatus::SUCCESS);
    assert!(a.create("dst.txt", READ, D::OPEN, 0).is_ok());
    assert_eq!(
        a.create("src.txt", READ, D::OPEN, 0).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

/// `dst.dat` opened with an RWH lease of key 2.
fn open_dst(c: &mut Client) -> FileId {
    created(&open(
        c,
        "dst.dat",
        ALL,
        7,
        LEASE,
        Some(lease_v2(2, R | W | H)),
    ))
    .file_id
}

#[test]
fn a_rename_onto_an_open_file_breaks_its_handle_caching_and_waits_for_its_holder() {
    // smbtorture 4.22 smb2.lease.v2_rename_target_overwrite.
    let (mut a, mut b) = pair();
    let src = created(&open(
        &mut a,
        "src.dat",
        ALL,
        7,
        LEASE,
        Some(lease_v2(1, R | W | H)),
    ))
    .file_id;
    let dst = open_dst(&mut b);

    // The holder keeps its handle: H is broken, and then the rename is refused.
    let m = rename_msg(&mut a, src, "dst.dat");
    assert_eq!(
        a.send_frame(m)[0].status(),
        NtStatus::PENDING,
        "the rename waits"
    );
    let got = b.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    assert_eq!(
        (n.current_lease_state.0, n.new_lease_state.0),
        (R | W | H, R | W)
    );
    assert!(
        a.tick(10).is_empty(),
        "still waiting for the acknowledgment"
    );
    assert_eq!(b.ack_lease(2, R | W).status(), NtStatus::SUCCESS);
    let fin = a.tick(10);
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0].status(), NtStatus::ACCESS_DENIED);

    // No H left to break: refused at once.
    let m = rename_msg(&mut a, src, "dst.dat");
    assert_eq!(a.send_frame(m)[0].status(), NtStatus::ACCESS_DENIED);
    assert!(b.breaks().is_empty());

    // The holder opens it again with H and closes it when told: the rename goes through.
    assert_eq!(b.close(dst).status(), NtStatus::SUCCESS);
    let dst = open_dst(&mut b);
    let m = rename_msg(&mut a, src, "dst.dat");
    assert_eq!(a.send_frame(m)[0].status(), NtStatus::PENDING);
    assert_eq!(b.breaks().len(), 1);
    assert_eq!(b.close(dst).status(), NtStatus::SUCCESS);
    let fin = a.tick(10);
    assert_eq!(fin.len(), 1);
    assert_eq!(
        fin[0].status(),
        NtStatus::SUCCESS,
        "renamed over the closed file"
    );
    assert_eq!(
        a.create("src.dat", READ, D::OPEN, 0).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

#[test]
fn a_break_a_request_causes_on_its_own_connection_goes_out_before_the_next_reply() {
    // One client holds two leases on a file and renames through one: the
    // break of the other must reach it before the answer to its next request.
    let (mut a, _b) = pair();
    a.put_file("src.txt", b"x");
    let f1 = created(&open(
        &mut a,
        "src.txt",
        ALL,
        7,
        LEASE,
        Some(lease_v2(1, R | H)),
    ))
    .file_id;
    granted_lease(&open(
        &mut a,
        "src.txt",
        READ,
        7,
        LEASE,
        Some(lease_v2(2, R | H)),
    ));
    let rename = rename_msg(&mut a, f1, "dst.txt");
    let create = a.create_msg_caching("dst.txt", READ, 7, D::OPEN, NONE, None);
    a.conn.receive(a.now, rename);
    a.conn.receive(a.now, create);
    let mut order = Vec::new();
    while let Some(o) = a.conn.poll_output() {
        if let ringshare_core::Output::Send(parts) = o {
            let bytes = parts.concat();
            let h = ringshare_wire::header::Header::decode(&bytes[4..]).unwrap();
            order.push((h.command, h.status));
        }
    }
    assert_eq!(
        order,
        vec![
            (Command::SET_INFO, NtStatus::PENDING),
            (Command::OPLOCK_BREAK, NtStatus::SUCCESS),
            (Command::CREATE, NtStatus::OBJECT_NAME_NOT_FOUND),
        ]
    );
}

#[test]
fn a_waiting_create_is_answered_when_the_holder_acknowledges_without_waiting_for_a_timer() {
    let (mut a, mut b) = pair();
    let fa = created(&open(&mut a, "f.txt", ALL, 7, BATCH, None)).file_id;
    let m = b.create_msg_caching("f.txt", READ, 7, D::OPEN, NONE, None);
    assert_eq!(b.send_frame(m)[0].status(), NtStatus::PENDING);
    a.breaks();
    assert_eq!(ack_oplock(&mut a, fa, II).status(), NtStatus::SUCCESS);
    // No clock moves: the acknowledgment itself tells b's connection to try again.
    let fin = b.pump();
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0].status(), NtStatus::SUCCESS);
}

#[test]
fn a_directory_gets_no_lease_and_no_oplock() {
    let (mut a, _) = pair();
    let d = a.create("leasedir", GENERIC_READ, D::CREATE, 1).unwrap();
    a.close(d);
    let r = open(
        &mut a,
        "leasedir",
        GENERIC_READ,
        7,
        LEASE,
        Some(lease_v2(9, 7)),
    );
    let cr = CreateResponse::decode(&r.msg).expect("create response");
    assert_eq!(cr.oplock_level, OplockLevel(0));
    assert!(cr
        .contexts
        .iter()
        .all(|c| c.tag() != ContextTag::RequestLease));
    let r = open(&mut a, "leasedir", GENERIC_READ, 7, BATCH, None);
    assert_eq!(created(&r).oplock_level, OplockLevel(0));
}

#[test]
fn a_directory_opened_with_a_lease_key_another_file_holds_is_invalid_parameter() {
    let (mut a, _) = pair();
    let r = open(&mut a, "keyed.dat", ALL, 7, LEASE, Some(lease_v2(5, 7)));
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let m = a.create_msg_caching(
        "keyed.dir",
        GENERIC_READ,
        7,
        D::CREATE,
        LEASE,
        Some(lease_v2(5, 7)),
    );
    let mut m = m;
    // FILE_DIRECTORY_FILE in CreateOptions (offset 40 of the body).
    m[64 + 40] = 1;
    let r = a.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    assert_eq!(
        a.create("keyed.dir", GENERIC_READ, D::OPEN, 1),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        "not left made"
    );
}

/// Issue 33, 1g: a lease granted to the CREATE of a compound whose answer waits for a later
/// member's I/O is broken in a notification after the compound's answer, not before it (the
/// client ignores a break for a lease key it has not heard of yet, [MS-SMB2] 3.2.5.19.2).
#[test]
fn a_break_of_a_lease_granted_in_a_compound_waiting_for_its_read_goes_out_after_its_answer() {
    let (mut a, mut b) = pair();
    a.put_file("compound", b"some bytes");
    a.hold_io = true;
    let m1 = a.create_msg_caching(
        "compound",
        READ,
        SHARE_ALL,
        D::OPEN,
        LEASE,
        Some(lease_v2(1, R | W | H)),
    );
    let m2 = a.read_msg(FileId::ANY, 0, 4);
    assert!(
        a.compound(vec![m1, m2], true).is_empty(),
        "the READ's I/O is held"
    );
    let m = b.create_msg_caching(
        "compound",
        READ,
        SHARE_ALL,
        D::OPEN,
        LEASE,
        Some(lease_v2(2, R)),
    );
    let first = b.send_frame(m);
    assert_eq!(
        first[0].status(),
        NtStatus::PENDING,
        "b waits for a's break"
    );
    assert!(a.pump().is_empty(), "no break before the compound's answer");
    let sent = a.run_held_io();
    a.hold_io = false;
    let commands: Vec<Command> = sent.iter().map(|r| r.hdr.command).collect();
    assert_eq!(
        commands,
        [Command::CREATE, Command::READ, Command::OPLOCK_BREAK],
        "the compound's answer, then the break"
    );
    assert_eq!(a.ack_lease(1, R | H).status(), NtStatus::SUCCESS);
    let opened: Vec<NtStatus> = b.pump().iter().map(|r| r.status()).collect();
    assert_eq!(opened, [NtStatus::SUCCESS]);
}
