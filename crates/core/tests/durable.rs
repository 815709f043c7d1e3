//! Durable opens, reconnects and replays ([MS-SMB2] 3.3.5.9.6-3.3.5.9.12,
//! 3.3.7.1, 3.3.5.14 lock sequences): what is granted, what a disconnected
//! open keeps, who may take it back, and when it goes. Clients are
//! connections of one server; a connection "drops" with `conn.shutdown`.

use crate::support;

use ringshare_core::SigningPolicy;
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{
    AccessMask, Command, CreateDisposition as D, CreateOptions, Dialect, FileAttributes,
    HeaderFlags, ImpersonationLevel, OplockLevel, ShareAccess,
};
use ringshare_wire::create::{
    encode_durable_reconnect, encode_durable_request, tag, ContextTag, CreateContext,
    CreateRequest, CreateResponse, DurableHandleReconnectV2, DurableHandleRequestV2, Lease,
};
use ringshare_wire::{FileId, NtStatus, WriteExt};
use support::*;

const BATCH: u8 = 9;
const LEVEL_II: u8 = 1;
const LEASE: u8 = 0xFF;
const R: u32 = 1;
const H: u32 = 2;
const RWH: u32 = 7;
const RW: u32 = 5;
const ALL: u32 = 0x001F_01FF;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;

fn server_and_mem() -> (std::sync::Arc<ringshare_core::ServerState>, MemShare) {
    let mem = MemShare::new();
    (server(&mem, SigningPolicy::IfRequired), mem)
}

/// A server whose share is continuously available.
fn ca_server_and_mem() -> (std::sync::Arc<ringshare_core::ServerState>, MemShare) {
    let mem = MemShare::new();
    let s = server_with(&mem, |c| {
        std::sync::Arc::get_mut(&mut c.shares[0])
            .unwrap()
            .continuous_availability = true;
    });
    (s, mem)
}

/// The DH2Q response's Flags (PERSISTENT is 2).
fn dh2q_flags(r: &Resp) -> u32 {
    let cr = CreateResponse::decode(&r.msg).unwrap();
    let c = cr
        .contexts
        .iter()
        .find(|c| c.tag() == ContextTag::DurableHandleRequestV2)
        .expect("a DH2Q response");
    u32::from_le_bytes(c.data[4..8].try_into().unwrap())
}

fn client(
    server: &std::sync::Arc<ringshare_core::ServerState>,
    mem: &MemShare,
    guid: u8,
) -> Client {
    client_as(server, mem, guid, "alice", "secret")
}

fn client_as(
    server: &std::sync::Arc<ringshare_core::ServerState>,
    mem: &MemShare,
    guid: u8,
    user: &str,
    password: &str,
) -> Client {
    let mut c = Client::negotiated(server.clone(), mem.clone(), Dialect::SMB3_1_1, [guid; 16]);
    assert_eq!(c.log_on(user, password, 0), NtStatus::SUCCESS);
    c.tree_id = c.tree_connect("share");
    c
}

fn dh2q(timeout: u32, flags: u32, guid: u8) -> CreateContext<'static> {
    CreateContext::new(
        tag::DURABLE_HANDLE_REQUEST_V2,
        DurableHandleRequestV2 {
            timeout,
            flags,
            create_guid: [guid; 16],
        }
        .encode(),
    )
}

fn dh2c(f: FileId, guid: u8) -> CreateContext<'static> {
    CreateContext::new(
        tag::DURABLE_HANDLE_RECONNECT_V2,
        DurableHandleReconnectV2 {
            file_id: f,
            create_guid: [guid; 16],
            flags: 0,
        }
        .encode(),
    )
}

fn dhnq() -> CreateContext<'static> {
    CreateContext::new(tag::DURABLE_HANDLE_REQUEST, encode_durable_request())
}

fn dhnc(f: FileId) -> CreateContext<'static> {
    CreateContext::new(tag::DURABLE_HANDLE_RECONNECT, encode_durable_reconnect(f))
}

fn rqls(l: &Lease) -> CreateContext<'static> {
    CreateContext::new(tag::REQUEST_LEASE, l.encode())
}

/// A CREATE of `name` asking for `level` with `contexts`; `flags` are
/// added to the header (REPLAY_OPERATION).
fn create_msg(
    c: &mut Client,
    name: &str,
    level: u8,
    share: u32,
    contexts: Vec<CreateContext<'static>>,
    flags: u32,
) -> Vec<u8> {
    let req = CreateRequest {
        security_flags: 0,
        requested_oplock_level: OplockLevel(level),
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(ALL),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(share),
        create_disposition: D::OPEN_IF,
        create_options: CreateOptions(0),
        name: name.to_string(),
        contexts,
    };
    let tree = c.tree_id;
    let mut m = c.message(Command::CREATE, tree, |o| req.encode(o));
    let old = u32::from_le_bytes(m[16..20].try_into().unwrap());
    m[16..20].copy_from_slice(&(old | flags).to_le_bytes());
    m
}

fn create(
    c: &mut Client,
    name: &str,
    level: u8,
    share: u32,
    contexts: Vec<CreateContext<'static>>,
) -> Resp {
    create_flagged(c, name, level, share, contexts, 0)
}

fn create_flagged(
    c: &mut Client,
    name: &str,
    level: u8,
    share: u32,
    contexts: Vec<CreateContext<'static>>,
    flags: u32,
) -> Resp {
    let m = create_msg(c, name, level, share, contexts, flags);
    let mut rs = c.send_frame(m);
    assert_eq!(rs.len(), 1, "one response: {rs:?}");
    rs.remove(0)
}

struct Opened {
    file_id: FileId,
    level: u8,
    action: u32,
    /// The DH2Q response's Timeout, or 0 for a DHnQ response.
    durable: Option<u32>,
}

fn opened(r: &Resp) -> Opened {
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    let cr = CreateResponse::decode(&r.msg).expect("create response");
    let durable = cr.contexts.iter().find_map(|c| match c.tag() {
        ContextTag::DurableHandleRequestV2 => {
            Some(u32::from_le_bytes(c.data[0..4].try_into().unwrap()))
        }
        ContextTag::DurableHandleRequest => Some(0),
        _ => None,
    });
    Opened {
        file_id: cr.file_id,
        level: cr.oplock_level.0,
        action: cr.create_action.0,
        durable,
    }
}

/// A LOCK of one exclusive range with a LockSequence field.
fn lock_seq(c: &mut Client, f: FileId, off: u64, flags: u32, seq: u32) -> Resp {
    let tree = c.tree_id;
    c.call(Command::LOCK, tree, |o| {
        o.put_u16(48);
        o.put_u16(1);
        o.put_u32(seq);
        f.write(o);
        o.put_u64(off);
        o.put_u64(1);
        o.put_u32(flags);
        o.put_u32(0);
    })
}

fn drop_connection(c: &mut Client) {
    c.conn.shutdown(c.now);
}

#[test]
fn a_dhnq_open_with_a_batch_oplock_is_durable() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "f", BATCH, 0, vec![dhnq()]));
    assert_eq!(o.level, BATCH);
    assert_eq!(o.durable, Some(0), "DHnQ response");
}

#[test]
fn an_open_without_a_batch_oplock_or_handle_lease_is_not_durable() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "f", LEVEL_II, 0, vec![dhnq()]));
    assert_eq!(o.durable, None);
    let o = opened(&create(
        &mut a,
        "g",
        LEASE,
        0,
        vec![rqls(&lease_v2(1, RW)), dh2q(0, 0, 2)],
    ));
    assert_eq!(o.durable, None, "a lease without H is not durable");
    // And it does not outlive its connection.
    drop_connection(&mut a);
    assert_eq!(s.parked_durables(), 0);
}

#[test]
fn a_dh2q_timeout_is_capped_at_300_s_and_zero_means_60_s() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "f", BATCH, 0, vec![dh2q(u32::MAX, 0, 1)]));
    assert_eq!(o.durable, Some(300_000));
    let o = opened(&create(&mut a, "g", BATCH, 0, vec![dh2q(0, 0, 2)]));
    assert_eq!(o.durable, Some(60_000));
    let o = opened(&create(&mut a, "h", BATCH, 0, vec![dh2q(12_345, 0, 3)]));
    assert_eq!(o.durable, Some(12_345));
}

#[test]
fn a_persistent_handle_is_not_granted_on_a_share_that_is_not_continuously_available() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let r = create(&mut a, "f", BATCH, 0, vec![dh2q(0, 2, 1)]);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    let c = cr
        .contexts
        .iter()
        .find(|c| c.tag() == ContextTag::DurableHandleRequestV2)
        .expect("durable, not persistent");
    let flags = u32::from_le_bytes(c.data[4..8].try_into().unwrap());
    assert_eq!(flags, 0, "PERSISTENT flag not set");
}

#[test]
fn a_continuously_available_share_grants_persistent_handles_which_reconnect_and_keep_data() {
    let (s, mem) = ca_server_and_mem();
    let mut a = client(&s, &mem, 1);
    // No caching asked for: persistent all the same.
    let r = create(&mut a, "vm.vhdx", 0, 0, vec![dh2q(0, 2, 1)]);
    let o = opened(&r);
    assert_eq!(o.durable, Some(60_000));
    assert_eq!(dh2q_flags(&r), 2, "PERSISTENT");
    // With a batch oplock too ([MS-SMB2] 3.3.5.9.10 does not ask for any
    // caching).
    let r = create(&mut a, "other", BATCH, 0, vec![dh2q(0, 2, 2)]);
    assert_eq!(dh2q_flags(&r), 2, "persistent");
    // Written (synced before the answer), disconnected, reconnected.
    assert_eq!(a.write(o.file_id, 0, b"kept").status(), NtStatus::SUCCESS);
    drop_connection(&mut a);
    let mut b = client(&s, &mem, 1);
    let back = opened(&create(&mut b, "vm.vhdx", 0, 0, vec![dh2c(o.file_id, 1)]));
    assert_eq!(back.file_id, o.file_id);
    assert_eq!(read_data(&b.read(back.file_id, 0, 16)), b"kept");
}

#[test]
fn a_share_with_durable_handles_off_grants_none() {
    let mem = MemShare::new();
    let s = server_with(&mem, |c| {
        for sh in c.shares.iter_mut() {
            std::sync::Arc::get_mut(sh).unwrap().durable_handles = false;
        }
    });
    let mut a = client(&s, &mem, 1);
    let o = opened(&create(&mut a, "f", BATCH, 0, vec![dh2q(0, 0, 1)]));
    assert_eq!(o.level, BATCH);
    assert_eq!(o.durable, None);
}

#[test]
fn v1_and_v2_contexts_together_are_invalid() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let r = create(&mut a, "f", BATCH, 0, vec![dhnq(), dh2q(0, 0, 1)]);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    let short = CreateContext::new(tag::DURABLE_HANDLE_REQUEST_V2, vec![0; 31]);
    let r = create(&mut a, "f", BATCH, 0, vec![short]);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn a_durable_open_survives_its_connection_and_reconnects_with_the_same_file_id_and_data() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let l = lease_v2(7, RWH);
    let o = opened(&create(
        &mut a,
        "doc.txt",
        LEASE,
        0,
        vec![rqls(&l), dh2q(0, 0, 9)],
    ));
    assert_eq!(o.durable, Some(60_000));
    assert_eq!(
        a.write(o.file_id, 0, b"before ").status(),
        NtStatus::SUCCESS
    );
    drop_connection(&mut a);
    assert_eq!(s.parked_durables(), 1);

    let mut b = client(&s, &m, 1);
    let r = create(
        &mut b,
        "doc.txt",
        LEASE,
        0,
        vec![rqls(&l), dh2c(o.file_id, 9)],
    );
    let back = opened(&r);
    assert_eq!(back.file_id, o.file_id, "the same FileId");
    assert_eq!(back.level, LEASE);
    assert_eq!(back.action, 1, "FILE_OPENED");
    assert_eq!(s.parked_durables(), 0);
    assert_eq!(b.write(o.file_id, 7, b"after").status(), NtStatus::SUCCESS);
    let r = b.read(o.file_id, 0, 64);
    assert_eq!(read_data(&r), b"before after");
    // Closed now: the handle is gone for good.
    assert_eq!(b.close(o.file_id).status(), NtStatus::SUCCESS);
    let r = create(
        &mut b,
        "doc.txt",
        LEASE,
        0,
        vec![rqls(&l), dh2c(o.file_id, 9)],
    );
    assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND);
}

#[test]
fn a_dhnc_reconnects_a_version_1_durable_open() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "v1", BATCH, 0, vec![dhnq()]));
    drop_connection(&mut a);
    let mut b = client(&s, &m, 1);
    let back = opened(&create(&mut b, "v1", BATCH, 0, vec![dhnc(o.file_id)]));
    assert_eq!(back.file_id, o.file_id);
    assert_eq!(back.level, BATCH);
}

#[test]
fn another_user_cannot_reconnect_a_durable_open_and_its_owner_still_can() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "secret.db", BATCH, 0, vec![dh2q(0, 0, 5)]));
    assert_eq!(
        a.write(o.file_id, 0, b"alice's").status(),
        NtStatus::SUCCESS
    );
    drop_connection(&mut a);

    // carol knows the FileId and CreateGuid (she sniffed them) and comes
    // with the same ClientGuid.
    let mut c = client_as(&s, &m, 1, "carol", "carols");
    for ctx in [dh2c(o.file_id, 5), dhnc(o.file_id)] {
        let r = create(&mut c, "secret.db", BATCH, 0, vec![ctx]);
        assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    }
    // She got no handle: the FileId means nothing on her session.
    let r = c.read(o.file_id, 0, 7);
    assert_eq!(r.status(), NtStatus::FILE_CLOSED);
    assert_eq!(s.parked_durables(), 1);

    let mut b = client(&s, &m, 1);
    let back = opened(&create(
        &mut b,
        "secret.db",
        BATCH,
        0,
        vec![dh2c(o.file_id, 5)],
    ));
    assert_eq!(back.file_id, o.file_id);
    assert_eq!(read_data(&b.read(o.file_id, 0, 7)), b"alice's");
}

#[test]
fn the_same_user_with_another_client_guid_cannot_reconnect_a_leased_open() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let l = lease_v2(3, RWH);
    let o = opened(&create(
        &mut a,
        "f",
        LEASE,
        0,
        vec![rqls(&l), dh2q(0, 0, 4)],
    ));
    drop_connection(&mut a);
    let mut other = client(&s, &m, 2);
    let r = create(
        &mut other,
        "f",
        LEASE,
        0,
        vec![rqls(&l), dh2c(o.file_id, 4)],
    );
    assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND);
    let mut b = client(&s, &m, 1);
    assert_eq!(
        opened(&create(
            &mut b,
            "f",
            LEASE,
            0,
            vec![rqls(&l), dh2c(o.file_id, 4)]
        ))
        .file_id,
        o.file_id
    );
}

#[test]
fn a_reconnect_naming_anything_else_gets_object_name_not_found() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let l = lease_v2(3, RWH);
    let o = opened(&create(
        &mut a,
        "f",
        LEASE,
        0,
        vec![rqls(&l), dh2q(0, 0, 4)],
    ));
    drop_connection(&mut a);
    let mut b = client(&s, &m, 1);
    let made_up = FileId {
        persistent: o.file_id.persistent ^ 0x5555,
        volatile: o.file_id.volatile,
    };
    let wrong_volatile = FileId {
        persistent: o.file_id.persistent,
        volatile: o.file_id.volatile ^ 1,
    };
    let cases: Vec<(&str, Vec<CreateContext<'static>>)> = vec![
        ("made-up id", vec![rqls(&l), dh2c(made_up, 4)]),
        ("wrong volatile id", vec![rqls(&l), dh2c(wrong_volatile, 4)]),
        ("wrong CreateGuid", vec![rqls(&l), dh2c(o.file_id, 5)]),
        ("no lease", vec![dh2c(o.file_id, 4)]),
        (
            "other lease key",
            vec![rqls(&lease_v2(9, RWH)), dh2c(o.file_id, 4)],
        ),
    ];
    for (what, ctx) in cases {
        let r = create(&mut b, "f", LEASE, 0, ctx);
        assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND, "{what}");
    }
    let r = create(
        &mut b,
        "other-name",
        LEASE,
        0,
        vec![rqls(&l), dh2c(o.file_id, 4)],
    );
    assert_eq!(
        r.status(),
        NtStatus::INVALID_PARAMETER,
        "the lease's key on another name"
    );
    // None of that took it away.
    assert_eq!(s.parked_durables(), 1);
}

#[test]
fn a_disconnected_open_keeps_its_byte_range_lock_until_it_expires() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    // A lease with write caching: only such a durable open keeps its locks
    // (the next test).
    let l = lease_v2(2, RWH);
    let o = opened(&create(
        &mut a,
        "locked",
        LEASE,
        7,
        vec![rqls(&l), dh2q(30_000, 0, 1)],
    ));
    assert_eq!(o.durable, Some(30_000));
    let lk = EXCLUSIVE | FAIL_IMMEDIATELY;
    assert_eq!(
        lock_seq(&mut a, o.file_id, 10, lk, 0).status(),
        NtStatus::SUCCESS
    );
    drop_connection(&mut a);
    assert_eq!(s.parked_durables(), 1);

    // Reconnected, the open still holds its lock: taking it again conflicts.
    let mut a2 = client(&s, &m, 1);
    let r = create(
        &mut a2,
        "locked",
        LEASE,
        7,
        vec![rqls(&l), dh2c(o.file_id, 1)],
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        lock_seq(&mut a2, o.file_id, 10, lk, 0).status(),
        NtStatus::LOCK_NOT_GRANTED,
        "the lock came back with the open"
    );
    drop_connection(&mut a2);
    assert_eq!(s.parked_durables(), 1);

    let now = a2.now.mono_ms;
    assert_eq!(s.durables_deadline(), Some(now + 30_000));
    assert!(s.expire_durables(now + 29_999).is_empty());
    assert_eq!(s.parked_durables(), 1, "not yet");
    assert!(s.expire_durables(now + 30_000).is_empty());
    assert_eq!(s.parked_durables(), 0);
    assert_eq!(s.durables_deadline(), None);
    let mut b = client(&s, &m, 2);
    let f = opened(&create(&mut b, "locked", 0, 7, vec![])).file_id;
    assert_eq!(
        lock_seq(&mut b, f, 10, lk, 0).status(),
        NtStatus::SUCCESS,
        "the expired open's lock is free"
    );
    let mut a3 = client(&s, &m, 1);
    let r = create(
        &mut a3,
        "locked",
        LEASE,
        7,
        vec![rqls(&l), dh2c(o.file_id, 1)],
    );
    assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND, "gone");
}

#[test]
fn a_durable_open_with_a_byte_range_lock_and_no_write_caching_is_not_kept() {
    // smbtorture 4.22 smb2.durable-open.lock-noW-lease (and durable-v2-open's).
    let (s, m) = server_and_mem();
    for (name, durable) in [("v1", dhnq()), ("v2", dh2q(30_000, 0, 1))] {
        let mut a = client(&s, &m, 1);
        let l = lease_v2(2, R | H);
        let o = opened(&create(&mut a, name, LEASE, 7, vec![rqls(&l), durable]));
        assert!(o.durable.is_some(), "{name}: durable");
        let lk = EXCLUSIVE | FAIL_IMMEDIATELY;
        assert_eq!(
            lock_seq(&mut a, o.file_id, 0, lk, 0).status(),
            NtStatus::SUCCESS
        );
        drop_connection(&mut a);
        assert_eq!(s.parked_durables(), 0, "{name}: closed, not parked");
        let mut a2 = client(&s, &m, 1);
        let reconnect = if name == "v1" {
            dhnc(o.file_id)
        } else {
            dh2c(o.file_id, 1)
        };
        let r = create(&mut a2, name, LEASE, 7, vec![rqls(&l), reconnect]);
        assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND, "{name}");
        // Its lock went with it.
        let f = opened(&create(&mut a2, name, 0, 7, vec![])).file_id;
        assert_eq!(
            lock_seq(&mut a2, f, 0, lk, 0).status(),
            NtStatus::SUCCESS,
            "{name}"
        );
    }
}

#[test]
fn a_disconnected_open_keeps_its_share_mode() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    // Shares nothing: every other open conflicts, and a conflict breaks
    // H, which a disconnected open cannot acknowledge: it is closed and
    // the new open goes ahead (as on Windows and Samba). Only an open
    // that asks for attributes alone passes without breaking it.
    let l = lease_v2(2, R | H);
    let o = opened(&create(
        &mut a,
        "x",
        LEASE,
        0,
        vec![rqls(&l), dh2q(0, 0, 1)],
    ));
    drop_connection(&mut a);
    let mut b = client(&s, &m, 2);
    let tree = b.tree_id;
    let stat = b.create_on(tree, "x", FILE_READ_ATTRIBUTES, 7, D::OPEN, 0);
    assert!(stat.is_ok(), "{stat:?}");
    assert_eq!(s.parked_durables(), 1);
    let r = create(&mut b, "x", 0, 7, vec![]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(s.parked_durables(), 0, "closed by the conflicting open");
    let mut a2 = client(&s, &m, 1);
    let r = create(&mut a2, "x", LEASE, 0, vec![rqls(&l), dh2c(o.file_id, 1)]);
    assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND);
}

#[test]
fn an_open_that_would_break_a_disconnected_batch_oplock_closes_it_instead() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "f", BATCH, 7, vec![dh2q(0, 0, 1)]));
    drop_connection(&mut a);
    let mut b = client(&s, &m, 2);
    let r = create(&mut b, "f", BATCH, 7, vec![]);
    let got = opened(&r);
    assert_eq!(got.level, BATCH, "granted at once: no break to wait for");
    assert_eq!(s.parked_durables(), 0);
    let mut a2 = client(&s, &m, 1);
    let r = create(&mut a2, "f", BATCH, 7, vec![dh2c(o.file_id, 1)]);
    assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND);
}

/// A disconnected durable open whose RH lease another open's WRITE (R) or rename (H) breaks
/// cannot hear the break: it is closed, and its reconnect finds nothing (Windows'
/// behaviour, smbtorture's durable-v2-open.purge-disconnected-rh-with-write/-rename).
#[test]
fn a_disconnected_open_whose_lease_a_write_or_rename_breaks_is_closed() {
    for rename in [false, true] {
        let (s, m) = server_and_mem();
        let name = if rename { "mv.txt" } else { "wr.txt" };
        let mut a = client(&s, &m, 1);
        let mine = opened(&create(
            &mut a,
            name,
            LEASE,
            7,
            vec![rqls(&lease_v2(1, R | H))],
        ));
        let mut b = client(&s, &m, 2);
        let theirs = lease_v2(2, R | H);
        let o = opened(&create(
            &mut b,
            name,
            LEASE,
            7,
            vec![rqls(&theirs), dh2q(0, 0, 5)],
        ));
        assert_eq!(o.durable, Some(60_000));
        drop_connection(&mut b);
        assert_eq!(s.parked_durables(), 1);
        let status = if rename {
            // It waits (interim response) for the disconnected lease's H until the open is
            // closed, which ends the wait at once.
            let m = a.set_info_msg(mine.file_id, 1, 10, &rename_info("moved.txt", false));
            let mut rs = a.send_frame(m);
            rs.extend(a.pump());
            rs.retain(|r| r.status() != NtStatus::PENDING);
            assert_eq!(rs.len(), 1, "one final answer: {rs:?}");
            rs[0].status()
        } else {
            a.write(mine.file_id, 0, b"data").status()
        };
        assert_eq!(status, NtStatus::SUCCESS, "rename {rename}");
        assert_eq!(s.parked_durables(), 0, "rename {rename}: purged");
        let mut b2 = client(&s, &m, 2);
        let r = create(
            &mut b2,
            name,
            LEASE,
            7,
            vec![rqls(&theirs), dh2c(o.file_id, 5)],
        );
        assert_eq!(
            r.status(),
            NtStatus::OBJECT_NAME_NOT_FOUND,
            "rename {rename}"
        );
    }
}

#[test]
fn a_delete_on_close_open_is_not_kept_and_its_file_goes() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "tmp", BATCH, 7, vec![dh2q(0, 0, 1)]));
    // FileDispositionInformation: delete pending.
    assert_eq!(
        a.set_info(o.file_id, 1, 13, &[1]).status(),
        NtStatus::SUCCESS
    );
    drop_connection(&mut a);
    assert_eq!(s.parked_durables(), 0);
    let mut b = client(&s, &m, 2);
    let r = b.create("tmp", GENERIC_READ, D::OPEN, 0);
    assert_eq!(r.err(), Some(NtStatus::OBJECT_NAME_NOT_FOUND));
}

#[test]
fn a_replayed_dh2q_create_returns_the_open_it_made_and_a_plain_repeat_is_a_duplicate() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    // No oplock: not durable, but a replay still finds it (as on Samba).
    let o = opened(&create(&mut a, "r", 0, 7, vec![dh2q(0, 0, 8)]));
    assert_eq!(o.action, 2, "FILE_CREATED");
    let again = create_flagged(
        &mut a,
        "r",
        0,
        7,
        vec![dh2q(0, 0, 8)],
        HeaderFlags::REPLAY_OPERATION.0,
    );
    let again = opened(&again);
    assert_eq!(again.file_id, o.file_id);
    assert_eq!(again.action, 2, "the original CreateAction");
    let r = create(&mut a, "r", 0, 7, vec![dh2q(0, 0, 8)]);
    assert_eq!(r.status(), NtStatus::DUPLICATE_OBJECTID);
    // Another client's identical CreateGuid is its own: a new open.
    let mut b = client(&s, &m, 2);
    let other = opened(&create(&mut b, "r", 0, 7, vec![dh2q(0, 0, 8)]));
    assert_ne!(other.file_id, o.file_id);
}

#[test]
fn a_parked_persistent_open_is_a_duplicate_to_a_fresh_create_and_comes_back_to_a_replayed_one() {
    // smbtorture smb2.replay.replay5: the client lost its connection before
    // the CREATE's answer and replays the CREATE on a new one.
    let (s, mem) = ca_server_and_mem();
    let mut a = client(&s, &mem, 1);
    let o = opened(&create(&mut a, "p", BATCH, 7, vec![dh2q(0, 2, 5)]));
    assert_eq!(o.action, 2, "FILE_CREATED");
    // A request on a persistent open leaves it eligible for replay.
    assert_eq!(a.write(o.file_id, 0, b"acked").status(), NtStatus::SUCCESS);
    drop_connection(&mut a);
    let mut b = client(&s, &mem, 1);
    let r = create(&mut b, "p", BATCH, 7, vec![dh2q(0, 2, 5)]);
    assert_eq!(
        r.status(),
        NtStatus::DUPLICATE_OBJECTID,
        "not a second open"
    );
    let r = create_flagged(
        &mut b,
        "p",
        BATCH,
        7,
        vec![dh2q(0, 2, 5)],
        HeaderFlags::REPLAY_OPERATION.0,
    );
    let back = opened(&r);
    assert_eq!(back.file_id, o.file_id, "the parked open");
    assert_eq!(back.action, 2, "the original CreateAction");
    assert_eq!(back.level, BATCH);
    assert_eq!(dh2q_flags(&r), 2, "persistent");
    assert_eq!(read_data(&b.read(back.file_id, 0, 16)), b"acked");
    // Another client's CreateGuid of the same value is its own.
    let mut other = client(&s, &mem, 2);
    let r = create(&mut other, "q", 0, 7, vec![dh2q(0, 2, 5)]);
    assert_ne!(opened(&r).file_id, o.file_id);
}

#[test]
fn a_request_on_the_open_ends_its_replay_eligibility() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "r", 0, 7, vec![dh2q(0, 0, 8)]));
    assert_eq!(a.read(o.file_id, 0, 1).status(), NtStatus::END_OF_FILE);
    let r = create_flagged(
        &mut a,
        "r",
        0,
        7,
        vec![dh2q(0, 0, 8)],
        HeaderFlags::REPLAY_OPERATION.0,
    );
    assert_ne!(opened(&r).file_id, o.file_id, "a new open");
}

#[test]
fn a_replayed_lock_with_the_same_sequence_is_not_taken_twice() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "l", BATCH, 7, vec![dh2q(0, 0, 1)]));
    // Bucket 1, number 3: (index << 4) | number.
    let seq = (1 << 4) | 3;
    let lk = EXCLUSIVE | FAIL_IMMEDIATELY;
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, lk, seq).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, lk, seq).status(),
        NtStatus::SUCCESS,
        "the replay is answered as done"
    );
    let unlock = 4;
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, unlock, (1 << 4) | 4).status(),
        NtStatus::SUCCESS
    );
    // Only one lock was taken: a second unlock finds none.
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, unlock, (1 << 4) | 5).status(),
        NtStatus::RANGE_NOT_LOCKED
    );
    // A new number in the bucket is a new lock.
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, lk, (1 << 4) | 6).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, lk, (1 << 4) | 7).status(),
        NtStatus::LOCK_NOT_GRANTED
    );
}

#[test]
fn a_resiliency_request_makes_an_open_outlive_its_connection() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let f = opened(&create(&mut a, "res", 0, 7, vec![])).file_id;
    const FSCTL_LMR_REQUEST_RESILIENCY: u32 = 0x001401D4;
    let mut input = Vec::new();
    input.put_u32(10_000);
    input.put_u32(0);
    let r = a.ioctl(f, FSCTL_LMR_REQUEST_RESILIENCY, &input, 0, 1);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let mut big = Vec::new();
    big.put_u32(301_000);
    big.put_u32(0);
    let r = a.ioctl(f, FSCTL_LMR_REQUEST_RESILIENCY, &big, 0, 1);
    assert_eq!(
        r.status(),
        NtStatus::INVALID_PARAMETER,
        "longer than 300 s (counted in whole seconds)"
    );
    drop_connection(&mut a);
    assert_eq!(s.parked_durables(), 1);
    assert_eq!(s.durables_deadline(), Some(a.now.mono_ms + 10_000));
}

#[test]
fn a_storm_of_made_up_reconnects_finds_nothing_and_leaves_nothing() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let o = opened(&create(&mut a, "f", BATCH, 7, vec![dh2q(0, 0, 1)]));
    drop_connection(&mut a);
    let mut b = client(&s, &m, 1);
    for i in 0..2_000u64 {
        let id = FileId {
            persistent: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            volatile: i,
        };
        let ctx = if i % 2 == 0 {
            dh2c(id, i as u8)
        } else {
            dhnc(id)
        };
        let r = create(&mut b, "f", BATCH, 7, vec![ctx]);
        assert_eq!(r.status(), NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    assert_eq!(s.parked_durables(), 1);
    assert_eq!(
        opened(&create(&mut b, "f", BATCH, 7, vec![dh2c(o.file_id, 1)])).file_id,
        o.file_id
    );
}

#[test]
fn a_directory_is_never_made_durable() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    for ctx in [dhnq(), dh2q(0, 0, 3)] {
        let req = CreateRequest {
            security_flags: 0,
            requested_oplock_level: OplockLevel(BATCH),
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            smb_create_flags: 0,
            desired_access: AccessMask(0x0012_0089),
            file_attributes: FileAttributes(0),
            share_access: ShareAccess(7),
            create_disposition: D::OPEN_IF,
            create_options: CreateOptions(1), // FILE_DIRECTORY_FILE
            name: "dir".into(),
            contexts: vec![ctx],
        };
        let tree = a.tree_id;
        let msg = a.message(Command::CREATE, tree, |o| req.encode(o));
        let r = a.send_frame(msg).remove(0);
        let o = opened(&r);
        assert_eq!(o.durable, None);
    }
    drop_connection(&mut a);
    assert_eq!(s.parked_durables(), 0);
}

#[test]
fn a_replay_of_a_dh2q_create_still_waiting_for_a_break_is_file_not_available() {
    let (s, m) = server_and_mem();
    let mut a = client(&s, &m, 1);
    let held = opened(&create(&mut a, "p", BATCH, 7, vec![])).file_id;
    let mut b = client(&s, &m, 2);
    let first = create_msg(&mut b, "p", 0, 7, vec![dh2q(0, 0, 5)], 0);
    let rs = b.send_frame(first);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status(), NtStatus::PENDING, "waits for A's break");
    let r = create_flagged(
        &mut b,
        "p",
        0,
        7,
        vec![dh2q(0, 0, 5)],
        HeaderFlags::REPLAY_OPERATION.0,
    );
    assert_eq!(r.status(), NtStatus::FILE_NOT_AVAILABLE);
    // A lets go; B's CREATE is answered, and a replay now finds its open.
    a.pump();
    assert_eq!(a.close(held).status(), NtStatus::SUCCESS);
    let done = b.pump();
    let made = done
        .iter()
        .find(|r| r.hdr.command == Command::CREATE && r.status() == NtStatus::SUCCESS)
        .map(opened)
        .expect("the waiting CREATE answered");
    let again = create_flagged(
        &mut b,
        "p",
        0,
        7,
        vec![dh2q(0, 0, 5)],
        HeaderFlags::REPLAY_OPERATION.0,
    );
    assert_eq!(opened(&again).file_id, made.file_id);
}

#[test]
fn with_lock_sequence_checking_off_a_repeated_lock_is_a_new_lock() {
    let mem = MemShare::new();
    let s = server_with(&mem, |c| c.lock_sequence_checking = false);
    let mut a = client(&s, &mem, 1);
    let o = opened(&create(&mut a, "l", BATCH, 7, vec![dh2q(0, 0, 1)]));
    let seq = (1 << 4) | 3;
    let lk = EXCLUSIVE | FAIL_IMMEDIATELY;
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, lk, seq).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        lock_seq(&mut a, o.file_id, 0, lk, seq).status(),
        NtStatus::LOCK_NOT_GRANTED,
        "not taken for a replay: the range is locked"
    );
}
