//! Hostile clients against durable handles, on the real binary: reconnect storms with made-up
//! ids, huge timeouts, the replay flag on every command, another user naming someone's
//! disconnected handle, and more disconnected opens than the server keeps. Each ends with a
//! proper status, nothing leaked, and a fresh client served.

use crate::rig;

use std::time::{Duration, Instant};

use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{
    AccessMask, Command, CreateDisposition, CreateOptions, FileAttributes, HeaderFlags,
    ImpersonationLevel, LeaseFlags, LeaseState, OplockLevel, ShareAccess,
};
use ringshare_wire::create::{
    encode_durable_reconnect, tag, CreateContext, CreateRequest, CreateResponse,
    DurableHandleReconnectV2, DurableHandleRequestV2, Lease, LeaseV2,
};
use ringshare_wire::{FileId, NtStatus};

use rig::*;

const BATCH: u8 = 9;
const LEASE: u8 = 0xFF;

fn create_body(name: &str, level: u8, contexts: Vec<CreateContext<'static>>) -> Vec<u8> {
    let req = CreateRequest {
        security_flags: 0,
        requested_oplock_level: OplockLevel(level),
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(GENERIC_READ | GENERIC_WRITE),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(7),
        create_disposition: CreateDisposition::OPEN_IF,
        create_options: CreateOptions(FILE_NON_DIRECTORY_FILE),
        name: name.into(),
        contexts,
    };
    let mut out = vec![0u8; HEADER_LEN];
    req.encode(&mut out);
    out.split_off(HEADER_LEN)
}

fn dh2q(timeout: u32, guid: [u8; 16]) -> CreateContext<'static> {
    CreateContext::new(
        tag::DURABLE_HANDLE_REQUEST_V2,
        DurableHandleRequestV2 {
            timeout,
            flags: 0,
            create_guid: guid,
        }
        .encode(),
    )
}

fn dh2c(file_id: FileId, guid: [u8; 16]) -> CreateContext<'static> {
    CreateContext::new(
        tag::DURABLE_HANDLE_RECONNECT_V2,
        DurableHandleReconnectV2 {
            file_id,
            create_guid: guid,
            flags: 0,
        }
        .encode(),
    )
}

fn dhnc(file_id: FileId) -> CreateContext<'static> {
    CreateContext::new(
        tag::DURABLE_HANDLE_RECONNECT,
        encode_durable_reconnect(file_id),
    )
}

/// A successful CREATE: its FileId and, when the open was made durable, the DH2Q response's
/// Timeout.
#[derive(Debug)]
struct Made {
    file_id: FileId,
    timeout: Option<u32>,
}

/// A CREATE with `flags` added to its header: what it made, or the outcome.
fn create(c: &mut Raw, body: &[u8], flags: HeaderFlags) -> Result<Made, Outcome> {
    let mut h = c.header(Command::CREATE);
    h.flags |= flags;
    match c.call_with(&h, body) {
        Outcome::Reply(h, m) if h.status.is_success() => {
            let r = CreateResponse::decode(&m).expect("create response");
            let timeout = r
                .contexts
                .iter()
                .find(|c| c.name == tag::DURABLE_HANDLE_REQUEST_V2)
                .map(|c| u32::from_le_bytes(c.data[0..4].try_into().unwrap()));
            Ok(Made {
                file_id: r.file_id,
                timeout,
            })
        }
        other => Err(other),
    }
}

/// DH2C until the server has seen the old connection go (or `limit`).
fn reconnect(
    c: &mut Raw,
    name: &str,
    f: FileId,
    guid: [u8; 16],
    limit: Duration,
) -> Result<(), Outcome> {
    let t0 = Instant::now();
    loop {
        match create(
            c,
            &create_body(name, BATCH, vec![dh2c(f, guid)]),
            HeaderFlags::empty(),
        ) {
            Ok(m) => {
                assert_eq!(m.file_id, f, "reconnected under another FileId");
                return Ok(());
            }
            Err(o)
                if o.status() == Some(NtStatus::OBJECT_NAME_NOT_FOUND) && t0.elapsed() < limit =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(o) => return Err(o),
        }
    }
}

#[test]
fn dh2c_naming_another_users_disconnected_handle_is_access_denied_and_gives_nothing() {
    let rig = Rig::start("hd-takeover", "");
    let secret = b"alice's durable secret 91c2";
    let guid = [0x42; 16];
    let mut a = rig.login(USER_A);
    let r = create(
        &mut a,
        &create_body("alice.db", BATCH, vec![dh2q(60_000, guid)]),
        HeaderFlags::empty(),
    )
    .expect("durable create");
    assert_eq!(r.timeout, Some(60_000));
    let f = r.file_id;
    a.write(f, 0, secret).expect("write");
    drop(a);

    // bob has the same ClientGuid (the same client machine), alice's FileId and CreateGuid. He
    // is refused whether the handle is still attached or already parked.
    let mut b = rig.login(USER_B);
    let t0 = Instant::now();
    loop {
        let o = create(
            &mut b,
            &create_body("alice.db", BATCH, vec![dh2c(f, guid)]),
            HeaderFlags::empty(),
        )
        .expect_err("bob must not get alice's handle");
        match o.status() {
            Some(NtStatus::ACCESS_DENIED) => break,
            Some(NtStatus::OBJECT_NAME_NOT_FOUND) if t0.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => panic!("bob's DH2C: {o:?}"),
        }
    }
    let o = create(
        &mut b,
        &create_body("alice.db", BATCH, vec![dhnc(f)]),
        HeaderFlags::empty(),
    )
    .expect_err("bob's DHnC");
    assert_eq!(o.status(), Some(NtStatus::ACCESS_DENIED), "{o:?}");
    // Nothing of alice's opened on bob's session.
    let o = b.call(Command::READ, &read_body(f, 0, 4096));
    assert_eq!(o.status(), Some(NtStatus::FILE_CLOSED), "{o:?}");
    if let Outcome::Reply(_, m) = &o {
        assert!(!m.windows(secret.len()).any(|w| w == secret));
    }
    // alice takes it back and her data is there.
    let mut a2 = rig.login(USER_A);
    reconnect(&mut a2, "alice.db", f, guid, Duration::from_secs(5))
        .unwrap_or_else(|o| panic!("alice's reconnect: {o:?}"));
    assert_eq!(a2.read(f, 0, 4096).expect("read"), secret);
    rig.still_serves("after a takeover attempt");
}

#[test]
fn reconnect_storms_with_made_up_ids_find_nothing_and_memory_stays_flat() {
    let rig = Rig::start("hd-storm", "");
    let mut c = rig.login(USER_A);
    c.gather_credits(64);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut storm = |c: &mut Raw, n: usize| {
        for i in 0..n {
            let f = FileId {
                persistent: next(),
                volatile: next(),
            };
            let mut guid = [0u8; 16];
            guid[..8].copy_from_slice(&next().to_le_bytes());
            let ctx = if i % 2 == 0 { dh2c(f, guid) } else { dhnc(f) };
            let o = create(c, &create_body("x", BATCH, vec![ctx]), HeaderFlags::empty())
                .expect_err("a made-up handle");
            assert_eq!(o.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{o:?}");
        }
    };
    storm(&mut c, 2_000);
    let before = rig.rss_kib();
    storm(&mut c, 20_000);
    let after = rig.rss_kib();
    assert!(
        after < before + 4 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 20,000 failed reconnects"
    );
    rig.still_serves("after a reconnect storm");
}

#[test]
fn huge_durable_and_resiliency_timeouts_are_cut_or_refused() {
    let rig = Rig::start("hd-timeouts", "");
    let mut c = rig.login(USER_A);
    let r = create(
        &mut c,
        &create_body("long", BATCH, vec![dh2q(u32::MAX, [7; 16])]),
        HeaderFlags::empty(),
    )
    .expect("create");
    assert_eq!(r.timeout, Some(300_000), "cut to 300 s");
    // FSCTL_LMR_REQUEST_RESILIENCY with 49 days: INVALID_PARAMETER.
    let mut body = Vec::new();
    body.extend_from_slice(&57u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&0x0014_01D4u32.to_le_bytes());
    body.extend_from_slice(&r.file_id.persistent.to_le_bytes());
    body.extend_from_slice(&r.file_id.volatile.to_le_bytes());
    body.extend_from_slice(&((HEADER_LEN + 56) as u32).to_le_bytes()); // InputOffset
    body.extend_from_slice(&8u32.to_le_bytes()); // InputCount
    body.extend_from_slice(&0u32.to_le_bytes()); // MaxInputResponse
    body.extend_from_slice(&0u32.to_le_bytes()); // OutputOffset
    body.extend_from_slice(&0u32.to_le_bytes()); // OutputCount
    body.extend_from_slice(&0u32.to_le_bytes()); // MaxOutputResponse
    body.extend_from_slice(&1u32.to_le_bytes()); // SMB2_0_IOCTL_IS_FSCTL
    body.extend_from_slice(&0u32.to_le_bytes()); // Reserved2
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    let o = c.call(Command::IOCTL, &body);
    assert_eq!(o.status(), Some(NtStatus::INVALID_PARAMETER), "{o:?}");
    rig.still_serves("after huge timeouts");
}

#[test]
fn the_replay_flag_on_every_command_changes_nothing_it_should_not() {
    let rig = Rig::start("hd-replay", "");
    let mut c = rig.login(USER_A);
    let replay = HeaderFlags::REPLAY_OPERATION;
    // A replayed CREATE no open was made with: an ordinary open.
    let r = create(
        &mut c,
        &create_body("r.bin", 0, vec![dh2q(0, [9; 16])]),
        replay,
    )
    .expect("replay-flagged create");
    let f = r.file_id;
    // The same CreateGuid again with the flag: the same open; without: DUPLICATE_OBJECTID.
    let again = create(
        &mut c,
        &create_body("r.bin", 0, vec![dh2q(0, [9; 16])]),
        replay,
    )
    .expect("replay");
    assert_eq!(again.file_id, f);
    let o = create(
        &mut c,
        &create_body("r.bin", 0, vec![dh2q(0, [9; 16])]),
        HeaderFlags::empty(),
    )
    .expect_err("a second open with one CreateGuid");
    assert_eq!(o.status(), Some(NtStatus::DUPLICATE_OBJECTID), "{o:?}");
    let flagged = |c: &mut Raw, cmd: Command, body: &[u8]| {
        let mut h = c.header(cmd);
        h.flags |= replay;
        c.call_with(&h, body)
    };
    let o = flagged(&mut c, Command::WRITE, &write_body(f, 0, b"replayed"));
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "WRITE: {o:?}");
    let o = flagged(&mut c, Command::READ, &read_body(f, 0, 8));
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "READ: {o:?}");
    let o = flagged(&mut c, Command::ECHO, &[4, 0, 0, 0]);
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "ECHO: {o:?}");
    let mut flush = vec![24, 0, 0, 0, 0, 0, 0, 0];
    flush.extend_from_slice(&f.persistent.to_le_bytes());
    flush.extend_from_slice(&f.volatile.to_le_bytes());
    let o = flagged(&mut c, Command::FLUSH, &flush);
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "FLUSH: {o:?}");
    let mut lock = vec![48, 0, 1, 0, 0, 0, 0, 0];
    lock.extend_from_slice(&f.persistent.to_le_bytes());
    lock.extend_from_slice(&f.volatile.to_le_bytes());
    lock.extend_from_slice(&0u64.to_le_bytes());
    lock.extend_from_slice(&1u64.to_le_bytes());
    lock.extend_from_slice(&0x12u32.to_le_bytes());
    lock.extend_from_slice(&0u32.to_le_bytes());
    let o = flagged(&mut c, Command::LOCK, &lock);
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "LOCK: {o:?}");
    let mut close = vec![24, 0, 0, 0, 0, 0, 0, 0];
    close.extend_from_slice(&f.persistent.to_le_bytes());
    close.extend_from_slice(&f.volatile.to_le_bytes());
    let o = flagged(&mut c, Command::CLOSE, &close);
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "CLOSE: {o:?}");
    // A replayed CLOSE of a closed handle is FILE_CLOSED, not a second close of something.
    let o = flagged(&mut c, Command::CLOSE, &close);
    assert_eq!(
        o.status(),
        Some(NtStatus::FILE_CLOSED),
        "CLOSE again: {o:?}"
    );
    let o = flagged(&mut c, Command::LOGOFF, &[4, 0, 0, 0]);
    assert_eq!(o.status(), Some(NtStatus::SUCCESS), "LOGOFF: {o:?}");
    rig.still_serves("after replay flags");
}

#[test]
fn past_the_most_disconnected_opens_kept_the_oldest_goes_with_a_log_line() {
    let rig = Rig::start("hd-many", "");
    // 16384 is both the opens of one session and the disconnected opens kept: two sessions
    // of 8200 durable opens each go away; the server keeps 16384 and closes the rest. All are
    // opens of one file under one RWH lease (one client, one lease key), so none breaks another.
    let lease = Lease {
        key: [0x33; 16],
        state: LeaseState(7),
        flags: LeaseFlags::empty(),
        duration: 0,
        v2: Some(LeaseV2 {
            parent_key: [0; 16],
            epoch: 0,
        }),
    };
    for round in 0..2u64 {
        let mut c = rig.login(USER_A);
        c.gather_credits(512);
        for i in 0..8_200u64 {
            let mut guid = [0u8; 16];
            guid[..8].copy_from_slice(&(round << 32 | i).to_le_bytes());
            let ctx = vec![
                CreateContext::new(tag::REQUEST_LEASE, lease.encode()),
                dh2q(300_000, guid),
            ];
            let m = create(
                &mut c,
                &create_body("many.bin", LEASE, ctx),
                HeaderFlags::empty(),
            )
            .unwrap_or_else(|o| panic!("open {i} of round {round}: {o:?}"));
            assert_eq!(m.timeout, Some(300_000), "durable");
        }
        drop(c);
    }
    let t0 = Instant::now();
    while !rig.log().contains("disconnected durable opens kept") {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no log line about the limit:\n{}",
            rig.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rig.still_serves("with 16384 disconnected opens");
}
