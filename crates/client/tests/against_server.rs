//! The client against the real server core, in process.

use crate::support;

use ringshare_client::{ClientError, Event, Reply};
use ringshare_core::SigningPolicy;
use ringshare_wire::consts::{Command, CreateDisposition, Dialect, InfoType};
use ringshare_wire::header::{self, Protocol};
use ringshare_wire::NtStatus;
use support::{options, Pair, ALL_DIALECTS, GENERIC_READ_WRITE, NON_DIRECTORY};

const DIRECTORY: u32 = 0x1;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Write, flush, read back and close one file.
fn round_trip(p: &mut Pair, len: usize) {
    let f = p.open("data.bin");
    let data = pattern(len, 7);
    p.client.write(2, f, 0, &data).unwrap();
    p.pump().unwrap();
    assert_eq!(p.result(2), Ok(Reply::Write { count: len as u32 }));
    p.client.flush(3, f).unwrap();
    p.pump().unwrap();
    assert_eq!(p.result(3), Ok(Reply::Flush));
    p.client.read(4, f, 0, len as u32).unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(4), Ok(Reply::Read { .. })));
    assert_eq!(p.payloads.remove(&4).unwrap(), data);
    p.client.close(5, f).unwrap();
    p.pump().unwrap();
    assert_eq!(p.result(5), Ok(Reply::Close));
    assert!(!p.server_closed);
}

#[test]
fn negotiates_every_dialect_and_moves_data() {
    for d in ALL_DIALECTS {
        let mut p = Pair::ready(options(d), SigningPolicy::IfRequired);
        assert_eq!(p.client.dialect(), Some(d));
        assert!(!p.client.is_signing());
        let len = if d == Dialect::SMB2_0_2 {
            65536
        } else {
            300_000
        };
        round_trip(&mut p, len);
    }
}

#[test]
fn a_3_1_1_tree_connect_is_signed_even_without_signing() {
    let p = Pair::ready(options(Dialect::SMB3_1_1), SigningPolicy::IfRequired);
    let tcon = p
        .sent
        .iter()
        .find(|f| u16::from_le_bytes([f[12], f[13]]) == Command::TREE_CONNECT.0)
        .expect("a TREE_CONNECT was sent");
    assert_ne!(tcon[16] & 0x08, 0, "SIGNED flag");
    assert!(!p.client.is_signing());
}

#[test]
fn offering_all_dialects_picks_3_1_1() {
    let mut opts = options(Dialect::SMB3_1_1);
    opts.dialects = ALL_DIALECTS.to_vec();
    let p = Pair::ready(opts, SigningPolicy::IfRequired);
    assert_eq!(p.client.dialect(), Some(Dialect::SMB3_1_1));
}

#[test]
fn signed_sessions_sign_requests_and_verify_replies_in_every_dialect() {
    for d in ALL_DIALECTS {
        let mut opts = options(d);
        opts.sign = true;
        let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
        assert!(p.client.is_signing(), "{d:?}");
        round_trip(&mut p, 65536);
        let last = p.sent.last().unwrap();
        let flags = u32::from_le_bytes([last[16], last[17], last[18], last[19]]);
        assert_ne!(flags & 0x8, 0, "request signed under {d:?}");
    }
}

#[test]
fn server_that_requires_signing_gets_signed_requests() {
    let mut p = Pair::ready(options(Dialect::SMB3_0), SigningPolicy::Required);
    assert!(p.client.is_signing());
    round_trip(&mut p, 1000);
}

#[test]
fn encrypted_sessions_seal_every_request_after_session_setup() {
    for d in [Dialect::SMB3_0, Dialect::SMB3_0_2, Dialect::SMB3_1_1] {
        let mut opts = options(d);
        opts.encrypt = true;
        let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
        assert!(p.client.is_encrypting(), "{d:?}");
        round_trip(&mut p, 200_000);
        let tree_connect_on = p
            .sent
            .iter()
            .position(|f| header::protocol_of(f) == Protocol::Transform)
            .expect("an encrypted request");
        assert!(p.sent[tree_connect_on..]
            .iter()
            .all(|f| header::protocol_of(f) == Protocol::Transform));
    }
}

#[test]
fn encryption_on_a_2x_dialect_is_refused() {
    let mut opts = options(Dialect::SMB2_1);
    opts.encrypt = true;
    let mut p = Pair::new(opts, SigningPolicy::IfRequired);
    assert!(matches!(p.pump(), Err(ClientError::Unsupported(_))));
}

#[test]
fn pipelined_requests_never_exceed_the_credits_granted() {
    let mut opts = options(Dialect::SMB3_1_1);
    opts.credits_target = 40;
    let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
    let f = p.open("big.bin");
    let data = pattern(1 << 20, 3);
    p.client.write(2, f, 0, &data).unwrap();
    p.pump().unwrap();
    assert!(p.result(2).is_ok());
    let mut completed = 0;
    let mut tag = 100;
    for _round in 0..4 {
        // Fill the window with 256 KiB reads (4 credits each).
        let mut sent = 0;
        while p.client.can_send(256 * 1024) {
            p.client.read(tag, f, (tag % 4) * 262_144, 262_144).unwrap();
            tag += 1;
            sent += 1;
        }
        assert!(sent >= 2, "pipelines more than one request");
        assert!(p.client.credits_available() < 4);
        let err = p.client.read(tag, f, 0, 262_144).unwrap_err();
        assert!(matches!(err, ClientError::NoCredits { needed: 4, .. }));
        p.pump().unwrap();
        let events = p.take_events();
        completed += events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Done {
                        result: Ok(Reply::Read { .. }),
                        ..
                    }
                )
            })
            .count();
        assert_eq!(p.client.requests_in_flight(), 0);
        assert!(!p.server_closed, "server saw a credit violation");
    }
    assert!(completed >= 8);
    // The window reached (and stays near) the target.
    assert!(p.client.credits_available() >= 36);
    assert!(p.client.credits_available() <= 40);
}

#[test]
fn an_error_status_is_reported_with_its_name_and_request() {
    let mut p = Pair::ready(options(Dialect::SMB3_1_1), SigningPolicy::IfRequired);
    p.client
        .create(
            9,
            "missing.txt",
            GENERIC_READ_WRITE,
            CreateDisposition::OPEN,
            NON_DIRECTORY,
        )
        .unwrap();
    p.pump().unwrap();
    let err = p.result(9).unwrap_err();
    assert_eq!(err.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    assert_eq!(err.command, Command::CREATE);
    let text = err.to_string();
    assert!(text.contains("STATUS_OBJECT_NAME_NOT_FOUND"), "{text}");
    assert!(text.contains("CREATE"), "{text}");
}

#[test]
fn a_wrong_password_fails_the_handshake_with_logon_failure() {
    let mut opts = options(Dialect::SMB3_1_1);
    opts.password = "wrong".into();
    let mut p = Pair::new(opts, SigningPolicy::IfRequired);
    match p.pump() {
        Err(ClientError::Handshake(e)) => {
            assert_eq!(e.status, NtStatus::LOGON_FAILURE);
            assert_eq!(e.command, Command::SESSION_SETUP);
        }
        other => panic!("expected a handshake error, got {other:?}"),
    }
}

#[test]
fn a_tampered_signed_reply_is_detected() {
    for d in [Dialect::SMB2_1, Dialect::SMB3_0, Dialect::SMB3_1_1] {
        let mut opts = options(d);
        opts.sign = true;
        let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
        let f = p.open("t.bin");
        p.client.write(2, f, 0, b"hello").unwrap();
        p.pump().unwrap();
        p.take_events();
        p.tamper = Some(Box::new(|frame: &mut Vec<u8>| {
            if let Some(b) = frame.last_mut() {
                *b ^= 1;
            }
        }));
        p.client.read(3, f, 0, 5).unwrap();
        let r = p.pump();
        assert!(
            matches!(
                r,
                Err(ClientError::BadSignature {
                    command: Command::READ,
                    ..
                })
            ),
            "{d:?}: {r:?}"
        );
    }
}

#[test]
fn an_unsigned_reply_to_a_signed_request_is_refused() {
    let mut opts = options(Dialect::SMB3_1_1);
    opts.sign = true;
    let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
    p.tamper = Some(Box::new(|frame: &mut Vec<u8>| {
        frame[16] &= !0x08; // clear SIGNED
    }));
    p.client.echo(1).unwrap();
    assert!(matches!(
        p.pump(),
        Err(ClientError::BadSignature {
            command: Command::ECHO,
            ..
        })
    ));
}

#[test]
fn a_tampered_encrypted_reply_fails_to_decrypt() {
    let mut opts = options(Dialect::SMB3_1_1);
    opts.encrypt = true;
    let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
    p.tamper = Some(Box::new(|frame: &mut Vec<u8>| {
        if let Some(b) = frame.last_mut() {
            *b ^= 0x80;
        }
    }));
    p.client.echo(1).unwrap();
    assert_eq!(p.pump(), Err(ClientError::Decrypt));
}

#[test]
fn metadata_requests_list_and_stat() {
    let mut p = Pair::ready(options(Dialect::SMB3_1_1), SigningPolicy::IfRequired);
    for i in 0..20 {
        let f = p.open(&format!("f{i:02}.txt"));
        p.client.close(50, f).unwrap();
        p.pump().unwrap();
        assert_eq!(p.result(50), Ok(Reply::Close));
    }
    let f = p.open("f03.txt");
    p.client
        .query_info(6, f, InfoType::FILE, 0x12, 4096)
        .unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(6), Ok(Reply::QueryInfo { .. })));
    assert!(p.payloads[&6].len() >= 0x60);
    p.client
        .create(7, "", 0x0012_0089, CreateDisposition::OPEN, DIRECTORY)
        .unwrap();
    p.pump().unwrap();
    let Ok(Reply::Create { file_id: dir, .. }) = p.result(7) else {
        panic!("open root");
    };
    p.client
        .query_directory(8, dir, 0x25, "*", true, 65536)
        .unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(8), Ok(Reply::QueryDirectory { .. })));
    let listing = &p.payloads[&8];
    let names = String::from_utf16_lossy(
        &listing
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect::<Vec<_>>(),
    );
    assert!(names.contains("f19.txt"));
    p.client
        .query_directory(9, dir, 0x25, "*", false, 65536)
        .unwrap();
    p.pump().unwrap();
    assert_eq!(p.result(9).unwrap_err().status, NtStatus::NO_MORE_FILES);
    p.client.echo(10).unwrap();
    p.pump().unwrap();
    assert_eq!(p.result(10), Ok(Reply::Echo));
    p.client.logoff(11).unwrap();
    p.pump().unwrap();
    assert_eq!(p.result(11), Ok(Reply::Logoff));
    assert!(matches!(p.client.echo(12), Err(ClientError::NotReady)));
}

#[test]
fn a_read_past_the_end_reports_end_of_file() {
    let mut p = Pair::ready(options(Dialect::SMB3_0_2), SigningPolicy::IfRequired);
    let f = p.open("empty.bin");
    p.client.read(3, f, 0, 4096).unwrap();
    p.pump().unwrap();
    let e = p.result(3).unwrap_err();
    assert_eq!(
        (e.status, e.command),
        (NtStatus::END_OF_FILE, Command::READ)
    );
}
