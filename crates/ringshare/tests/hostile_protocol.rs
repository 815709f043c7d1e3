//! Hostile clients that speak SMB2 badly on purpose, against the real binary: offsets and lengths
//! pointing anywhere in every variable-length field, credits that were never granted, compound
//! chains that are huge or loop, ids of another user's session. Each refusal is an error status or
//! a dropped connection ([MS-SMB2] 3.3.5.2), and a fresh client is served normally afterwards.

use crate::rig;

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::header::{Header, HeaderId};
use ringshare_wire::{FileId, NtStatus};

use rig::*;

/// A NEGOTIATE body offering 3.1.1 with one PREAUTH_INTEGRITY context at offset 104; the
/// context offset, count and data length are the caller's.
fn negotiate_311(ctx_offset: u32, ctx_count: u16, ctx_data_len: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&36u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // DialectCount
    b.extend_from_slice(&1u16.to_le_bytes()); // SecurityMode: signing enabled
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // Capabilities
    b.extend_from_slice(&[0x42; 16]); // ClientGuid
    b.extend_from_slice(&ctx_offset.to_le_bytes());
    b.extend_from_slice(&ctx_count.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0x0311u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]); // pad to 104 - 64 = 40
    b.extend_from_slice(&1u16.to_le_bytes()); // PREAUTH_INTEGRITY_CAPABILITIES
    b.extend_from_slice(&ctx_data_len.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // HashAlgorithmCount
    b.extend_from_slice(&32u16.to_le_bytes()); // SaltLength
    b.extend_from_slice(&1u16.to_le_bytes()); // SHA-512
    b.extend_from_slice(&[7u8; 32]);
    b
}

/// A NEGOTIATE body offering only 3.0.2 (no contexts).
fn negotiate_302() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&36u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[0x43; 16]);
    b.extend_from_slice(&[0u8; 8]);
    b.extend_from_slice(&0x0302u16.to_le_bytes());
    b
}

fn bare(cmd: Command, mid: u64, body: &[u8]) -> Vec<u8> {
    let mut h = Header::request(cmd, mid);
    h.credits = 1;
    Raw::message(&h, body)
}

/// Send one message on a fresh, not yet negotiated connection; the outcome for `mid`.
fn on_fresh(port: u16, before: &[Vec<u8>], msg: Vec<u8>, mid: u64) -> Outcome {
    let sock = Raw::connect(port);
    let mut raw = Raw {
        sock,
        session_id: 0,
        tree_id: 0,
        next_mid: 0,
        credits: 1,
        dialect: Dialect::SMB3_0_2,
    };
    for (i, m) in before.iter().enumerate() {
        raw.send_frame(m).expect("send");
        match raw.wait_for(i as u64) {
            Outcome::Reply(h, _) if h.status.is_success() => {}
            other => panic!("setup message {i}: {other:?}"),
        }
    }
    if raw.send_frame(&msg).is_err() {
        return Outcome::Closed;
    }
    raw.wait_for(mid)
}

#[test]
fn negotiate_and_session_setup_with_offsets_past_the_end_or_into_the_header_are_refused() {
    let rig = Rig::start("hp-neg", "");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "context offset past the end",
            negotiate_311(0x0001_0000, 1, 38),
        ),
        ("context offset inside the header", negotiate_311(8, 1, 38)),
        (
            "context data length past the frame",
            negotiate_311(104, 1, 0xFFFF),
        ),
        ("context count past the frame", negotiate_311(104, 500, 38)),
        ("dialect count past the frame", {
            let mut b = negotiate_302();
            b[2..4].copy_from_slice(&4000u16.to_le_bytes());
            b
        }),
        ("dialect count zero", {
            let mut b = negotiate_302();
            b[2..4].copy_from_slice(&0u16.to_le_bytes());
            b
        }),
    ];
    for (what, body) in cases {
        on_fresh(rig.port, &[], bare(Command::NEGOTIATE, 0, &body), 0)
            .expect_refused(&format!("NEGOTIATE {what}"));
    }
    // SESSION_SETUP after a good NEGOTIATE: SecurityBufferOffset at 12, Length at 14.
    let setup = |off: u16, len: u16| {
        let mut b = vec![25, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&[0u8; 8]);
        b.extend_from_slice(&[0x60, 0x28, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05]);
        b
    };
    for (what, off, len) in [
        ("security buffer past the end", 0xFFF0u16, 8u16),
        ("security buffer inside the header", 0, 64),
        ("security buffer length past the frame", 88, 0xFFFF),
    ] {
        let before = vec![bare(Command::NEGOTIATE, 0, &negotiate_302())];
        on_fresh(
            rig.port,
            &before,
            bare(Command::SESSION_SETUP, 1, &setup(off, len)),
            1,
        )
        .expect_refused(&format!("SESSION_SETUP {what}"));
    }
    rig.still_serves("after malformed NEGOTIATE and SESSION_SETUP");
}

/// A logged-on connection and, on it, a file and the share root opened as a directory.
struct Victim {
    raw: Raw,
    file: FileId,
    dir: FileId,
}

fn victim(rig: &Rig) -> Victim {
    let mut raw = rig.login(USER_A);
    let file = raw
        .create("target.bin", GENERIC_READ | GENERIC_WRITE, FILE_OPEN_IF, 0)
        .expect("create target");
    raw.write(file, 0, b"0123456789").expect("write");
    let dir = raw
        .create(
            "",
            FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES,
            FILE_OPEN,
            FILE_DIRECTORY_FILE,
        )
        .expect("open root");
    Victim { raw, file, dir }
}

fn patch16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn patch32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn every_variable_length_field_with_a_bad_offset_or_length_is_refused_and_others_are_served() {
    let rig = Rig::start("hp-fields", "");
    type Make = Box<dyn Fn(&Victim) -> (Command, Vec<u8>)>;
    let mut cases: Vec<(&str, Make)> = Vec::new();
    // TREE_CONNECT: PathOffset at 4, PathLength at 6, buffer at 72.
    let tcon = |off: u16, len: u16| {
        let path = utf16("\\\\127.0.0.1\\share");
        let mut b = vec![9, 0, 0, 0];
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&path);
        b
    };
    cases.push((
        "TREE_CONNECT path past the end",
        Box::new(move |_| (Command::TREE_CONNECT, tcon(0xFFF0, 34))),
    ));
    cases.push((
        "TREE_CONNECT path inside the header",
        Box::new(move |_| (Command::TREE_CONNECT, tcon(0, 34))),
    ));
    cases.push((
        "TREE_CONNECT path length past the frame",
        Box::new(move |_| (Command::TREE_CONNECT, tcon(72, 0xFFFE))),
    ));
    // CREATE: NameOffset 44, NameLength 46, CreateContextsOffset 48, CreateContextsLength 52.
    let create = |patch: fn(&mut Vec<u8>)| {
        move |_: &Victim| {
            let mut b = create_body(&utf16("x.txt"), GENERIC_READ, FILE_OPEN_IF, 0);
            patch(&mut b);
            (Command::CREATE, b)
        }
    };
    cases.push((
        "CREATE name past the end",
        Box::new(create(|b| patch16(b, 44, 0xFFF0))),
    ));
    cases.push((
        "CREATE name inside the header",
        Box::new(create(|b| patch16(b, 44, 0))),
    ));
    cases.push((
        "CREATE name length past the frame",
        Box::new(create(|b| patch16(b, 46, 0xFFFE))),
    ));
    cases.push((
        "CREATE odd name length",
        Box::new(create(|b| patch16(b, 46, 9))),
    ));
    cases.push((
        "CREATE contexts past the end",
        Box::new(create(|b| {
            patch32(b, 48, 0x0010_0000);
            patch32(b, 52, 24);
        })),
    ));
    cases.push((
        "CREATE contexts inside the header",
        Box::new(create(|b| {
            patch32(b, 48, 0);
            patch32(b, 52, 64);
        })),
    ));
    cases.push((
        "CREATE contexts length past the frame",
        Box::new(create(|b| {
            b.resize(56 + 16, 0);
            patch32(b, 48, 136);
            patch32(b, 52, 0xFFFF_FFF0);
        })),
    ));
    cases.push((
        "CREATE context whose NameOffset/DataLength point past its buffer",
        Box::new(create(|b| {
            b.resize(56 + 16, 0);
            // One context at 136: Next 0, NameOffset 16, NameLength 4, DataOffset 24, DataLength 1 GiB.
            let mut c = vec![0u8; 32];
            patch16(&mut c, 4, 16);
            patch16(&mut c, 6, 4);
            patch16(&mut c, 10, 24);
            patch32(&mut c, 12, 0x4000_0000);
            c[16..20].copy_from_slice(b"MxAc");
            b.extend_from_slice(&c);
            patch32(b, 48, 136);
            patch32(b, 52, 32);
        })),
    ));
    // WRITE: DataOffset 2, Length 4, WriteChannelInfoOffset 40, Length 42.
    let write = |patch: fn(&mut Vec<u8>)| {
        move |v: &Victim| {
            let mut b = write_body(v.file, 0, b"hostile!");
            patch(&mut b);
            (Command::WRITE, b)
        }
    };
    cases.push((
        "WRITE data past the end",
        Box::new(write(|b| patch16(b, 2, 0xFFF0))),
    ));
    cases.push((
        "WRITE data inside the header",
        Box::new(write(|b| patch16(b, 2, 0))),
    ));
    cases.push((
        "WRITE length past the frame",
        Box::new(write(|b| patch32(b, 4, 0xFFFF_FFF0))),
    ));
    cases.push((
        "WRITE channel info past the end",
        Box::new(write(|b| {
            patch16(b, 40, 0xFFF0);
            patch16(b, 42, 16);
        })),
    ));
    // QUERY_INFO FileFullEaInformation with an EA name list: InputBufferOffset 8, Length 12.
    let query = |off: u16, len: u32| {
        move |v: &Victim| {
            let mut b = vec![41, 0, 1, 15];
            b.extend_from_slice(&4096u32.to_le_bytes());
            b.extend_from_slice(&off.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&[0u8; 8]);
            put_file_id(&mut b, v.file);
            // FILE_GET_EA_INFORMATION: Next 0, NameLength 3, "ABC\0"
            b.extend_from_slice(&[0, 0, 0, 0, 3, b'A', b'B', b'C', 0, 0, 0, 0]);
            (Command::QUERY_INFO, b)
        }
    };
    cases.push(("QUERY_INFO input past the end", Box::new(query(0xFFF0, 12))));
    cases.push(("QUERY_INFO input inside the header", Box::new(query(0, 64))));
    cases.push((
        "QUERY_INFO input length past the frame",
        Box::new(query(104, 0xFFFF_FFF0)),
    ));
    // SET_INFO FileBasicInformation: BufferLength 4, BufferOffset 8.
    let set = |off: u16, len: u32| {
        move |v: &Victim| {
            let mut b = vec![33, 0, 1, 4];
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&off.to_le_bytes());
            b.extend_from_slice(&[0u8; 6]);
            put_file_id(&mut b, v.file);
            b.extend_from_slice(&[0u8; 40]);
            (Command::SET_INFO, b)
        }
    };
    cases.push(("SET_INFO buffer past the end", Box::new(set(0xFFF0, 40))));
    cases.push(("SET_INFO buffer inside the header", Box::new(set(0, 40))));
    cases.push((
        "SET_INFO length past the frame",
        Box::new(set(96, 0xFFFF_FFF0)),
    ));
    // IOCTL FSCTL_VALIDATE_NEGOTIATE_INFO: InputOffset 24, InputCount 28, OutputOffset 36,
    // OutputCount 40.
    let ioctl = |in_off: u32, in_len: u32, out_off: u32, out_len: u32| {
        move |_: &Victim| {
            let mut b = vec![57, 0, 0, 0];
            b.extend_from_slice(&0x0014_0204u32.to_le_bytes());
            put_file_id(&mut b, FileId::ANY);
            b.extend_from_slice(&in_off.to_le_bytes());
            b.extend_from_slice(&in_len.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&out_off.to_le_bytes());
            b.extend_from_slice(&out_len.to_le_bytes());
            b.extend_from_slice(&65536u32.to_le_bytes());
            b.extend_from_slice(&1u32.to_le_bytes()); // SMB2_0_IOCTL_IS_FSCTL
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&[0u8; 26]);
            (Command::IOCTL, b)
        }
    };
    cases.push((
        "IOCTL input past the end",
        Box::new(ioctl(0x0010_0000, 26, 0, 0)),
    ));
    cases.push((
        "IOCTL input inside the header",
        Box::new(ioctl(0, 64, 0, 0)),
    ));
    cases.push((
        "IOCTL input count past the frame",
        Box::new(ioctl(120, 0xFFFF_FFF0, 0, 0)),
    ));
    cases.push((
        "IOCTL output past the end",
        Box::new(ioctl(120, 26, 0x0010_0000, 16)),
    ));
    cases.push((
        "IOCTL output count past the frame",
        Box::new(ioctl(120, 26, 120, 0xFFFF_FFF0)),
    ));
    // QUERY_DIRECTORY: FileNameOffset 24, FileNameLength 26.
    let qd = |off: u16, len: u16| {
        move |v: &Victim| {
            let mut b = query_directory_body(v.dir, 0x0C, true, &utf16("*"), 4096);
            patch16(&mut b, 24, off);
            patch16(&mut b, 26, len);
            (Command::QUERY_DIRECTORY, b)
        }
    };
    cases.push((
        "QUERY_DIRECTORY pattern past the end",
        Box::new(qd(0xFFF0, 2)),
    ));
    cases.push((
        "QUERY_DIRECTORY pattern inside the header",
        Box::new(qd(0, 64)),
    ));
    cases.push((
        "QUERY_DIRECTORY pattern length past the frame",
        Box::new(qd(96, 0xFFFE)),
    ));
    // LOCK: LockCount at 2, one element present.
    let lock = |count: u16| {
        move |v: &Victim| {
            let mut b = vec![48, 0];
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            put_file_id(&mut b, v.file);
            b.extend_from_slice(&0u64.to_le_bytes());
            b.extend_from_slice(&1u64.to_le_bytes());
            b.extend_from_slice(&0x12u32.to_le_bytes()); // exclusive, fail immediately
            b.extend_from_slice(&0u32.to_le_bytes());
            (Command::LOCK, b)
        }
    };
    cases.push(("LOCK count past the frame", Box::new(lock(1000))));
    cases.push(("LOCK count far past the frame", Box::new(lock(0xFFFF))));
    cases.push(("LOCK count zero", Box::new(lock(0))));

    let mut v = victim(&rig);
    for (what, make) in &cases {
        let (cmd, body) = make(&v);
        let outcome = v.raw.call(cmd, &body);
        eprintln!("{what}: {:?}", outcome.status());
        outcome.expect_refused(what);
        if matches!(outcome, Outcome::Closed) {
            v = victim(&rig);
        }
    }
    // Nothing hostile reached the file: it still holds what was written.
    assert_eq!(v.raw.read(v.file, 0, 64).expect("read back"), b"0123456789");
    rig.still_serves("after every malformed field");
}

#[test]
fn message_ids_outside_the_granted_window_are_refused_and_others_are_served() {
    let rig = Rig::start("hp-credit", "");
    // A message id far beyond the credits granted.
    let mut c = rig.login(USER_A);
    let mut h = c.header(Command::ECHO);
    h.message_id += c.credits + 1000;
    c.call_with(&h, &[4, 0, 0, 0])
        .expect_refused("ECHO beyond the window");
    // A message id that was already used.
    let mut c = rig.login(USER_A);
    let mut h = c.header(Command::ECHO);
    h.message_id -= 1;
    c.call_with(&h, &[4, 0, 0, 0])
        .expect_refused("ECHO with a reused message id");
    // The same message id twice in a row.
    let mut c = rig.login(USER_A);
    let h = c.header(Command::ECHO);
    assert!(c.call_with(&h, &[4, 0, 0, 0]).status() == Some(NtStatus::SUCCESS));
    c.call_with(&h, &[4, 0, 0, 0])
        .expect_refused("ECHO repeating a message id");
    // A credit charge larger than anything granted.
    let mut c = rig.login(USER_A);
    let f = c
        .create(
            "charge.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            0,
        )
        .expect("create");
    let mut h = c.header(Command::READ);
    h.credit_charge = 4000;
    c.call_with(&h, &read_body(f, 0, 65536))
        .expect_refused("READ charging 4000 credits");
    // A 1 MiB READ that charges one credit (3.3.5.2.5: the charge must cover the payload).
    let mut c = rig.login(USER_A);
    let f = c
        .create(
            "charge.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            0,
        )
        .expect("create");
    let h = c.header(Command::READ);
    c.call_with(&h, &read_body(f, 0, 1 << 20))
        .expect_refused("1 MiB READ charging 1 credit");
    rig.still_serves("after credit abuse");
}

#[test]
fn huge_credit_requests_never_grow_the_window_past_the_maximum() {
    const CREDITS_MAX: u64 = 8192;
    let rig = Rig::start("hp-grant", "");
    let mut c = rig.login(USER_A);
    let mut peak = c.credits;
    for _ in 0..200 {
        let mut h = c.header(Command::ECHO);
        h.credits = u16::MAX;
        match c.call_with(&h, &[4, 0, 0, 0]) {
            Outcome::Reply(r, _) => assert!(r.status.is_success(), "ECHO: {:?}", r.status),
            other => panic!("ECHO with CreditRequest 65535: {other:?}"),
        }
        peak = peak.max(c.credits);
        assert!(
            c.credits <= CREDITS_MAX,
            "the server granted a window of {} credits (max {CREDITS_MAX})",
            c.credits
        );
    }
    eprintln!("credit window peaked at {peak}");
    assert!(peak > 1, "the server never granted more than one credit");
    // The granted window really is usable: spend all of it in one pipelined burst.
    let burst = c.credits.min(2000);
    let mut frames = Vec::new();
    let mut last = 0;
    for _ in 0..burst {
        let mut h = c.header(Command::ECHO);
        h.credits = 0;
        last = h.message_id;
        let m = Raw::message(&h, &[4, 0, 0, 0]);
        ringshare_wire::framing::put_frame_header(&mut frames, m.len());
        frames.extend_from_slice(&m);
    }
    c.sock.write_all(&frames).expect("send burst");
    match c.wait_for(last) {
        Outcome::Reply(h, _) => assert!(h.status.is_success()),
        other => panic!("last of {burst} pipelined ECHOs: {other:?}"),
    }
    rig.still_serves("after credit overflow attempts");
}

/// A compound of `n` ECHO-sized messages with NextCommand chaining them.
fn echo_chain(c: &mut Raw, n: usize, related_after_first: bool) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let mut last = 0;
    for i in 0..n {
        let mut h = c.header(Command::ECHO);
        if related_after_first && i > 0 {
            h = related(h);
        }
        h.next_command = if i + 1 < n { 72 } else { 0 };
        last = h.message_id;
        out.extend_from_slice(&Raw::message(&h, &[4, 0, 0, 0, 0, 0, 0, 0]));
    }
    (out, last)
}

#[test]
fn compound_chains_that_are_huge_loop_or_point_past_the_end_are_refused() {
    let rig = Rig::start("hp-compound", "");
    // Thousands of related requests in one frame.
    let mut c = rig.login(USER_A);
    let (frame, last) = echo_chain(&mut c, 5000, true);
    c.send_frame(&frame).expect("send");
    let started = Instant::now();
    let outcome = c.wait_for(last);
    eprintln!(
        "5000-request chain: {:?} after {:?}",
        outcome.status(),
        started.elapsed()
    );
    outcome.expect_refused("5000-request compound");
    // NextCommand variants on a two-message chain.
    for (what, next) in [
        ("NextCommand pointing into its own header", 8u32),
        ("NextCommand pointing backwards (wrapping)", 0xFFFF_FFC0),
        ("NextCommand past the end", 4096),
        ("NextCommand not 8-byte aligned", 68),
    ] {
        let mut c = rig.login(USER_A);
        let (mut frame, last) = echo_chain(&mut c, 2, false);
        frame[20..24].copy_from_slice(&next.to_le_bytes());
        c.send_frame(&frame).expect("send");
        let first = last - 1;
        let out = c.wait_for(first);
        eprintln!("{what}: {:?}", out.status());
        out.expect_refused(what);
    }
    rig.still_serves("after hostile compounds");
}

#[test]
fn a_compound_exactly_at_the_frame_limit_is_served_and_one_byte_over_is_dropped() {
    const PDU_SIZE_MAX: usize = 8 * 1024 * 1024 + 64 * 1024;
    let rig = Rig::start("hp-pdu", "");
    let mut c = rig.login(USER_A);
    let f = c
        .create(
            "big.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            0,
        )
        .expect("create");
    // Two WRITEs in one compound whose total is exactly PDU_SIZE_MAX.
    let build = |c: &mut Raw, total: usize| {
        let first_data = 4 * 1024 * 1024;
        let mut h1 = c.header(Command::WRITE);
        h1.credit_charge = 64;
        h1.message_id = c.next_mid - 1;
        c.next_mid += 63;
        let m1_len = HEADER_LEN + 48 + first_data;
        h1.next_command = m1_len as u32;
        let second_data = total - m1_len - HEADER_LEN - 48;
        let mut h2 = c.header(Command::WRITE);
        h2.credit_charge = second_data.div_ceil(65536) as u16;
        c.next_mid += u64::from(h2.credit_charge) - 1;
        let mut frame = Raw::message(&h1, &write_body(f, 0, &vec![0xA1; first_data]));
        frame.extend_from_slice(&Raw::message(
            &h2,
            &write_body(f, first_data as u64, &vec![0xB2; second_data]),
        ));
        assert_eq!(frame.len(), total);
        (frame, h2.message_id)
    };
    // Enough credits for both: ask for them with a few echoes.
    for _ in 0..4 {
        let mut h = c.header(Command::ECHO);
        h.credits = 256;
        c.call_with(&h, &[4, 0, 0, 0]);
    }
    assert!(c.credits >= 130, "only {} credits granted", c.credits);
    let (frame, last) = build(&mut c, PDU_SIZE_MAX);
    c.send_frame(&frame).expect("send");
    match c.wait_for(last) {
        Outcome::Reply(h, _) => assert!(h.status.is_success(), "second WRITE: {:?}", h.status),
        other => panic!("compound at the limit: {other:?}"),
    }
    let (frame, _) = build(&mut c, PDU_SIZE_MAX + 8);
    let _ = c.send_frame(&frame);
    assert!(
        closes(&mut c.sock),
        "a frame over the limit did not close the connection"
    );
    rig.still_serves("after an oversized compound");
}

#[test]
fn another_users_session_tree_and_file_ids_give_nothing() {
    let rig = Rig::start("hp-guess", "");
    let secret = b"alice's secret 7f3a9c";
    let mut a = rig.login(USER_A);
    let fa = a
        .create(
            "alice.txt",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            0,
        )
        .expect("create");
    a.write(fa, 0, secret).expect("write");
    let mut b = rig.login(USER_B);
    let read_with = |c: &mut Raw, session: u64, tree: u32, file: FileId| {
        let mut h = c.header(Command::READ);
        h.session_id = session;
        h.id = HeaderId::Sync {
            process_id: 0xFEFF,
            tree_id: tree,
        };
        c.call_with(&h, &read_body(file, 0, 4096))
    };
    let no_secret = |o: &Outcome, what: &str| {
        if let Outcome::Reply(_, m) = o {
            assert!(
                !m.windows(secret.len()).any(|w| w == secret),
                "{what}: the reply carries alice's data"
            );
        }
    };
    // A's session id on B's connection: [MS-SMB2] 3.3.5.2.9, USER_SESSION_DELETED.
    let o = read_with(&mut b, a.session_id, a.tree_id, fa);
    no_secret(&o, "A's session on B's connection");
    assert_eq!(o.status(), Some(NtStatus::USER_SESSION_DELETED), "{o:?}");
    // B's session with A's tree id: 3.3.5.2.11, NETWORK_NAME_DELETED (when the ids differ).
    if a.tree_id != b.tree_id {
        let sb = b.session_id;
        let o = read_with(&mut b, sb, a.tree_id, fa);
        no_secret(&o, "A's tree on B's session");
        assert_eq!(o.status(), Some(NtStatus::NETWORK_NAME_DELETED), "{o:?}");
    }
    // B's session and tree with A's file id: 3.3.5.20 etc., FILE_CLOSED.
    let (sb, tb) = (b.session_id, b.tree_id);
    let o = read_with(&mut b, sb, tb, fa);
    no_secret(&o, "A's file id on B's tree");
    assert_eq!(o.status(), Some(NtStatus::FILE_CLOSED), "{o:?}");
    // Neighbouring ids do not work either.
    for delta in [1u64, 2, u64::MAX] {
        let guess = FileId {
            persistent: fa.persistent.wrapping_add(delta),
            volatile: fa.volatile.wrapping_add(delta),
        };
        let o = read_with(&mut b, sb, tb, guess);
        no_secret(&o, "a guessed file id");
        assert!(o.status().is_some_and(|s| !s.is_success()), "{o:?}");
    }
    // An anonymous, merely negotiated connection using A's ids.
    let mut anon = Raw {
        sock: Raw::connect(rig.port),
        session_id: 0,
        tree_id: 0,
        next_mid: 0,
        credits: 1,
        dialect: Dialect::SMB3_0_2,
    };
    anon.send_frame(&bare(Command::NEGOTIATE, 0, &negotiate_302()))
        .expect("send");
    assert!(anon.wait_for(0).status().is_some_and(|s| s.is_success()));
    anon.next_mid = 1;
    let o = read_with(&mut anon, a.session_id, a.tree_id, fa);
    no_secret(&o, "A's ids on an anonymous connection");
    assert!(
        matches!(o, Outcome::Closed) || o.status() == Some(NtStatus::USER_SESSION_DELETED),
        "{o:?}"
    );
    // A is unaffected.
    assert_eq!(a.read(fa, 0, 4096).expect("A reads"), secret);
}

#[test]
fn thousands_of_silent_connections_and_slow_senders_keep_memory_bounded() {
    // 2000 descriptors here and 2000 in the server (which inherits this limit): raise the soft
    // limit as far as allowed, and use fewer connections where it stays low.
    let silent_count = {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut lim = getrlimit(Resource::Nofile);
        if let (Some(cur), Some(max)) = (lim.current, lim.maximum) {
            if cur < 4096 {
                lim.current = Some(max.min(4096));
                let _ = setrlimit(Resource::Nofile, lim);
            }
        }
        let cur = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        (cur.saturating_sub(300) as usize).min(2000)
    };
    assert!(
        silent_count >= 500,
        "the open-file limit is too low for this test"
    );
    let rig = Rig::start("hp-mem", "\thandshake timeout = 60\n");
    let base = rig.rss_kib();
    let silent: Vec<TcpStream> = (0..silent_count).map(|_| Raw::connect(rig.port)).collect();
    // Slow senders: a valid NEGOTIATE dribbled one byte per 100 ms.
    let slow: Vec<thread::JoinHandle<()>> = (0..20)
        .map(|_| {
            let port = rig.port;
            thread::spawn(move || {
                let mut s = Raw::connect(port);
                let msg = bare(Command::NEGOTIATE, 0, &negotiate_302());
                let mut f = Vec::new();
                ringshare_wire::framing::put_frame_header(&mut f, msg.len());
                f.extend_from_slice(&msg);
                let stop = Instant::now() + Duration::from_secs(4);
                for b in f {
                    if Instant::now() > stop || s.write_all(&[b]).is_err() {
                        return;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    // A real client works meanwhile.
    let started = Instant::now();
    for i in 0..20 {
        rig.still_serves(&format!("round {i} with {silent_count} silent connections"));
    }
    let took = started.elapsed();
    for t in slow {
        t.join().expect("slow sender");
    }
    let peak = rig.peak_rss_kib();
    eprintln!(
        "server RSS: {base} KiB at start, peak (VmHWM) {peak} KiB with {silent_count} silent \
         connections and 20 slow senders; 20 client rounds took {took:?}"
    );
    assert!(
        took < Duration::from_secs(30),
        "the real client was starved: {took:?}"
    );
    assert!(peak < 512 * 1024, "peak RSS {peak} KiB is over 512 MiB");
    drop(silent);
    rig.still_serves("after the silent connections went away");
}

/// An SMB1 NEGOTIATE ([MS-SMB] 2.2.4.52.1) with `byte_count` and `dialects` as given.
fn smb1_negotiate(byte_count: u16, dialects: &[u8]) -> Vec<u8> {
    let mut m = vec![0xFF, b'S', b'M', b'B', 0x72];
    m.extend_from_slice(&[0u8; 4]); // Status
    m.push(0x18); // Flags
    m.extend_from_slice(&0xC853u16.to_le_bytes()); // Flags2 (unicode, NT status, ext. security)
    m.extend_from_slice(&[0u8; 20]); // PIDHigh .. MID
    m.push(0); // WordCount
    m.extend_from_slice(&byte_count.to_le_bytes());
    m.extend_from_slice(dialects);
    m
}

/// A TRANSFORM_HEADER ([MS-SMB2] 2.2.41) with the given fields, then `body`.
fn transform(original_size: u32, flags: u16, session_id: u64, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xFD, b'S', b'M', b'B'];
    m.extend_from_slice(&[0x11; 16]); // Signature (the AEAD tag): wrong
    m.extend_from_slice(&[0x22; 16]); // Nonce
    m.extend_from_slice(&original_size.to_le_bytes());
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(&flags.to_le_bytes());
    m.extend_from_slice(&session_id.to_le_bytes());
    m.extend_from_slice(body);
    m
}

#[test]
fn smb1_transform_and_compression_frames_with_bad_lengths_or_keys_are_refused() {
    let rig = Rig::start("hp-transform", "");
    let closed_or_error = |sock: &mut TcpStream, what: &str| match read_frame(sock) {
        Err(()) => {}
        Ok(Some(f)) => {
            let h = Header::decode(&f).unwrap_or_else(|e| panic!("{what}: reply {e:?}"));
            assert!(!h.status.is_success(), "{what}: {:?}", h.status);
        }
        Ok(None) => panic!("{what}: neither an error nor a closed connection"),
    };
    let send = |sock: &mut TcpStream, payload: &[u8]| {
        let mut f = Vec::new();
        ringshare_wire::framing::put_frame_header(&mut f, payload.len());
        f.extend_from_slice(payload);
        let _ = sock.write_all(&f);
    };
    // SMB1 NEGOTIATE whose ByteCount runs past the frame, or whose dialect has no terminator.
    for (what, msg) in [
        (
            "SMB1 ByteCount past the frame",
            smb1_negotiate(0xFFFF, b"\x02SMB 2.002\0"),
        ),
        (
            "SMB1 dialect without its NUL",
            smb1_negotiate(10, b"\x02SMB 2.002"),
        ),
        ("SMB1 with no dialect", smb1_negotiate(0, b"")),
    ] {
        let mut s = Raw::connect(rig.port);
        send(&mut s, &msg);
        closed_or_error(&mut s, what);
    }
    // Transform and compression frames before NEGOTIATE.
    for (what, msg) in [
        (
            "transform before NEGOTIATE",
            transform(64, 1, 1, &[0u8; 64]),
        ),
        ("compression before NEGOTIATE", {
            let mut m = vec![0xFC, b'S', b'M', b'B'];
            m.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
            m.extend_from_slice(&[0u8; 8]);
            m
        }),
    ] {
        let mut s = Raw::connect(rig.port);
        send(&mut s, &msg);
        closed_or_error(&mut s, what);
    }
    // Transform frames on a logged-on 3.1.1 connection.
    type MakeFrame = Box<dyn Fn(u64) -> Vec<u8>>;
    let cases: Vec<(&str, MakeFrame)> = vec![
        (
            "transform header cut short",
            Box::new(|sid| transform(64, 1, sid, &[])[..30].to_vec()),
        ),
        (
            "OriginalMessageSize past the frame",
            Box::new(|sid| transform(0xFFFF_FFFF, 1, sid, &[0u8; 64])),
        ),
        (
            "OriginalMessageSize smaller than a header",
            Box::new(|sid| transform(8, 1, sid, &[0u8; 8])),
        ),
        (
            "an unknown session id",
            Box::new(|sid| transform(64, 1, sid ^ 0x5A5A, &[0u8; 64])),
        ),
        (
            "a wrong flags value",
            Box::new(|sid| transform(64, 7, sid, &[0u8; 64])),
        ),
        (
            "a wrong AEAD tag",
            Box::new(|sid| transform(68, 1, sid, &[0u8; 68])),
        ),
    ];
    for (what, make) in cases {
        let mut c = rig.login(USER_A);
        let msg = make(c.session_id);
        send(&mut c.sock, &msg);
        closed_or_error(&mut c.sock, what);
    }
    rig.still_serves("after SMB1, transform and compression abuse");
}

#[test]
fn huge_output_lengths_and_read_lengths_do_not_make_the_server_allocate_them() {
    let rig = Rig::start("hp-alloc", "");
    let mut v = victim(&rig);
    let before = rig.peak_rss_kib();
    // READ far beyond the negotiated maximum, with a charge that would cover 8 MiB.
    let mut h = v.raw.header(Command::READ);
    h.credit_charge = 128;
    h.credits = 1;
    v.raw.next_mid += 127;
    v.raw
        .call_with(&h, &read_body(v.file, 0, u32::MAX))
        .expect_refused("READ of 4 GiB");
    // The same requests asking for 4 GiB (refused: past MaxTransactSize) and for exactly 8 MiB
    // (legal: the reply is as long as what there is, not as long as what was asked).
    for huge in [0xFFFF_FFFFu32, 8 << 20] {
        let mut cases: Vec<(&str, Command, Vec<u8>)> = Vec::new();
        // QUERY_INFO FileAllInformation.
        let mut qi = vec![41, 0, 1, 18];
        qi.extend_from_slice(&huge.to_le_bytes());
        qi.extend_from_slice(&[0u8; 16]);
        put_file_id(&mut qi, v.file);
        qi.push(0);
        cases.push(("QUERY_INFO", Command::QUERY_INFO, qi));
        // QUERY_DIRECTORY FileIdBothDirectoryInformation.
        let qd = query_directory_body(v.dir, 0x25, true, &utf16("*"), huge);
        cases.push(("QUERY_DIRECTORY", Command::QUERY_DIRECTORY, qd));
        // IOCTL FSCTL_SRV_ENUMERATE_SNAPSHOTS on the file.
        let mut io = vec![57, 0, 0, 0];
        io.extend_from_slice(&0x0014_4064u32.to_le_bytes());
        put_file_id(&mut io, v.file);
        io.extend_from_slice(&[0u8; 20]);
        io.extend_from_slice(&huge.to_le_bytes());
        io.extend_from_slice(&1u32.to_le_bytes());
        io.extend_from_slice(&[0u8; 4]);
        cases.push(("IOCTL", Command::IOCTL, io));
        for (what, cmd, body) in cases {
            // A charge for the largest legal payload: the length itself must be refused or capped.
            let mut h = v.raw.header(cmd);
            h.credit_charge = 128;
            h.credits = 128;
            v.raw.next_mid += 127;
            match v.raw.call_with(&h, &body) {
                Outcome::Reply(r, m) => {
                    eprintln!("{what} ({huge}): {:?}, {} bytes", r.status, m.len());
                    assert!(m.len() <= 64 * 1024, "{what}: a {} byte reply", m.len());
                    if huge == u32::MAX {
                        assert!(!r.status.is_success(), "{what} asking for 4 GiB succeeded");
                    }
                }
                Outcome::Closed => {
                    eprintln!("{what}: closed");
                    v = victim(&rig);
                }
                Outcome::Silent => panic!("{what}: no reply"),
            }
        }
    }
    let after = rig.peak_rss_kib();
    eprintln!("peak RSS {before} KiB before, {after} KiB after");
    assert!(
        after < before + 64 * 1024,
        "peak RSS grew from {before} to {after} KiB"
    );
    rig.still_serves("after huge output lengths");
}

#[test]
fn a_peer_that_dribbles_bytes_without_logging_on_is_closed_at_the_handshake_timeout() {
    let rig = Rig::start("hp-dribble", "\thandshake timeout = 2\n");
    // Before NEGOTIATE: a frame header announcing 60 KiB, then one byte per 100 ms.
    // After NEGOTIATE: the same, so a negotiated but anonymous peer cannot linger either.
    for negotiate_first in [false, true] {
        let mut s = Raw::connect(rig.port);
        if negotiate_first {
            let msg = bare(Command::NEGOTIATE, 0, &negotiate_302());
            let mut f = Vec::new();
            ringshare_wire::framing::put_frame_header(&mut f, msg.len());
            f.extend_from_slice(&msg);
            s.write_all(&f).expect("negotiate");
            assert!(
                read_frame(&mut s).is_ok_and(|f| f.is_some()),
                "no NEGOTIATE reply"
            );
        }
        s.write_all(&[0, 0, 0xF0, 0]).expect("frame header");
        let started = Instant::now();
        let closed_after = loop {
            thread::sleep(Duration::from_millis(100));
            if s.write_all(&[0x42]).is_err() {
                break started.elapsed();
            }
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            let gone = matches!(std::io::Read::read(&mut s, &mut b), Ok(0));
            s.set_nonblocking(false).unwrap();
            if gone {
                break started.elapsed();
            }
            assert!(
                started.elapsed() < Duration::from_secs(8),
                "a dribbling peer (negotiated: {negotiate_first}) was still connected after 8 s \
                 with a 2 s handshake timeout"
            );
        };
        eprintln!("dribbling peer (negotiated: {negotiate_first}) closed after {closed_after:?}");
    }
    rig.still_serves("after dribbling peers");
}

#[test]
fn a_cancel_naming_another_connections_async_id_or_message_id_cancels_nothing() {
    let rig = Rig::start("hp-cancel", "");
    let mut a = rig.login(USER_A);
    let dir = a
        .create("", FILE_LIST_DIRECTORY, FILE_OPEN, FILE_DIRECTORY_FILE)
        .expect("open root");
    // CHANGE_NOTIFY (2.2.35) on the root for file-name changes: goes async.
    let mut body = vec![32, 0, 0, 0];
    body.extend_from_slice(&4096u32.to_le_bytes());
    put_file_id(&mut body, dir);
    body.extend_from_slice(&1u32.to_le_bytes()); // FILE_NOTIFY_CHANGE_FILE_NAME
    body.extend_from_slice(&0u32.to_le_bytes());
    let h = a.header(Command::CHANGE_NOTIFY);
    let notify_mid = h.message_id;
    a.send_frame(&Raw::message(&h, &body)).expect("send notify");
    let frame = read_frame(&mut a.sock)
        .expect("connection")
        .expect("an interim reply");
    let interim = Header::decode(&frame).expect("header");
    assert_eq!(interim.status, NtStatus::PENDING, "{interim:?}");
    let async_id = interim.async_id().expect("an async id");
    // B cancels by A's async id, and by A's message id with A's session id.
    let mut b = rig.login(USER_B);
    let mut cancel = Header::request(Command::CANCEL, 0);
    cancel.session_id = a.session_id;
    cancel.id = HeaderId::Async { async_id };
    b.send_frame(&Raw::message(&cancel, &[4, 0, 0, 0]))
        .expect("cancel");
    let mut cancel = Header::request(Command::CANCEL, notify_mid);
    cancel.session_id = a.session_id;
    b.send_frame(&Raw::message(&cancel, &[4, 0, 0, 0]))
        .expect("cancel");
    let mut cancel = Header::request(Command::CANCEL, notify_mid);
    cancel.session_id = b.session_id;
    cancel.id = HeaderId::Async { async_id };
    b.send_frame(&Raw::message(&cancel, &[4, 0, 0, 0]))
        .expect("cancel");
    // B's connection still works.
    assert!(b.call(Command::ECHO, &[4, 0, 0, 0]).status() == Some(NtStatus::SUCCESS));
    // Nothing was cancelled: A sees no reply (ringshare does not watch directories, so a
    // notify stays pending until cancelled or its handle is closed)...
    a.sock
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let early = read_frame(&mut a.sock);
    assert!(
        matches!(early, Ok(None)),
        "A's CHANGE_NOTIFY was answered after B's cancels: {:?}",
        early.map(|f| f.map(|f| Header::decode(&f)))
    );
    a.sock.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    // ...and A's own cancel still finds it.
    let mut cancel = Header::request(Command::CANCEL, notify_mid);
    cancel.session_id = a.session_id;
    cancel.id = HeaderId::Async { async_id };
    a.send_frame(&Raw::message(&cancel, &[4, 0, 0, 0]))
        .expect("cancel");
    match a.wait_for(notify_mid) {
        Outcome::Reply(h, _) => assert_eq!(h.status, NtStatus::CANCELLED, "{h:?}"),
        other => panic!("A's own CANCEL: {other:?}"),
    }
}

#[test]
fn opens_past_the_per_session_limit_are_insufficient_resources_and_memory_stays_bounded() {
    const OPENS_PER_SESSION_MAX: usize = 16384;
    let rig = Rig::start("hp-opens", "");
    // Every open holds a descriptor: give the server room for all of them (it inherited this
    // process's limit); where the hard limit is too low the session limit cannot be reached.
    {
        use rustix::process::{getrlimit, prlimit, Pid, Resource, Rlimit};
        let want = (OPENS_PER_SESSION_MAX + 1024) as u64;
        let hard = getrlimit(Resource::Nofile).maximum;
        let soft = want.min(hard.unwrap_or(u64::MAX));
        let pid = Pid::from_raw(rig.pid() as i32).expect("server pid");
        let new = Rlimit {
            current: Some(soft),
            maximum: hard,
        };
        if prlimit(Some(pid), Resource::Nofile, new).is_err() || soft < want {
            eprintln!(
                "\n!!!!!!!! SKIPPED the opens limit: the open-file hard limit is below {want} \
                 !!!!!!!!\n"
            );
            return;
        }
    }
    std::fs::write(rig.share_dir.join("many.txt"), b"x").unwrap();
    let mut c = rig.login(USER_A);
    let before = rig.peak_rss_kib();
    let body = create_body(&utf16("many.txt"), GENERIC_READ, FILE_OPEN, 0);
    let (mut ok, mut refused) = (0usize, 0usize);
    // Pipelined in batches of 128, each request asking for one credit back.
    while ok + refused < OPENS_PER_SESSION_MAX + 200 {
        let mut frames = Vec::new();
        let mut mids = Vec::new();
        for _ in 0..128 {
            let h = c.header(Command::CREATE);
            mids.push(h.message_id);
            let m = Raw::message(&h, &body);
            ringshare_wire::framing::put_frame_header(&mut frames, m.len());
            frames.extend_from_slice(&m);
        }
        c.sock.write_all(&frames).expect("send batch");
        for mid in mids {
            match c.wait_for(mid) {
                Outcome::Reply(h, _) if h.status.is_success() => ok += 1,
                Outcome::Reply(h, _) => {
                    assert_eq!(
                        h.status,
                        NtStatus::INSUFFICIENT_RESOURCES,
                        "open {}",
                        ok + refused
                    );
                    refused += 1;
                }
                other => panic!("open {}: {other:?}", ok + refused),
            }
        }
    }
    let after = rig.peak_rss_kib();
    eprintln!(
        "{ok} opens granted, {refused} refused; peak RSS {before} KiB before, {after} KiB after"
    );
    assert_eq!(ok, OPENS_PER_SESSION_MAX, "opens granted in one session");
    assert!(refused >= 200);
    assert!(
        after < before + 256 * 1024,
        "{OPENS_PER_SESSION_MAX} opens took {} KiB",
        after - before
    );
    // Dropping the connection releases them all; the server goes on.
    drop(c);
    rig.still_serves("after a session with the maximum of opens went away");
}
