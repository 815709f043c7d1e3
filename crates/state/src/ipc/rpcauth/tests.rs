//! The NTLMSSP legs and per-PDU protection against crates/auth's NTLM client.

use std::sync::Arc;

use ringshare_auth::ntlm::{NtlmClient, ServerConfig, SessionSecurity};
use ringshare_auth::UserLookup;

use super::super::tests::{bind_body, pdu, pdus, request_body};
use super::super::{Pipe, ServerFacts, Service, NDR20};
use super::*;

struct Users;

impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case("alice")
            .then(|| ringshare_auth::nt_hash("secret"))
    }
}

fn facts() -> ServerFacts {
    ServerFacts {
        netbios_name: String::new(),
        workgroup: String::new(),
        comment: String::new(),
        shares: Vec::new(),
        users: Vec::new(),
        guest_account: "nobody".into(),
        member: None,
    }
}

fn witness(min_level: u8) -> Pipe {
    Pipe::tcp(Service::Witness, 5040).with_auth(Acceptor {
        users: Arc::new(Users),
        names: ServerConfig {
            netbios_domain: "WORKGROUP".into(),
            netbios_computer: "RS".into(),
            ..ServerConfig::default()
        },
        min_level,
        challenge: [7; 8],
        now_filetime: 133_000_000_000_000_000,
        kerberos: None,
    })
}

/// `body` with its auth verifier: (sec_trailer, token) appended and auth_length set.
fn with_verifier(ptype: u8, call_id: u32, body: &[u8], verifier: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    b.extend_from_slice(verifier);
    let mut p = pdu(ptype, 3, call_id, &b);
    p[10..12].copy_from_slice(&((verifier.len() - 8) as u16).to_le_bytes());
    p
}

/// Binds Witness with NTLMSSP at `level` as `user`/`password` (AUTH3 for the third leg);
/// the client's keys.
fn bind(p: &mut Pipe, level: u8, password: &str) -> SessionSecurity {
    let (uuid, major) = Service::Witness.interface();
    let mut client = NtlmClient::new("alice", "WORKGROUP", password, "WS");
    let negotiate = client.negotiate();
    let b = with_verifier(
        11,
        1,
        &bind_body(uuid, major, NDR20, 2),
        &verifier(AUTHN_WINNT, level, 0, 9, &negotiate),
    );
    let out = p.transceive(&b, 65536, &facts()).unwrap().0;
    assert_eq!(out[2], 12, "a BIND_ACK");
    let auth_len = usize::from(u16::from_le_bytes([out[10], out[11]]));
    let trailer = &out[out.len() - auth_len - 8..];
    assert_eq!(trailer[..2], [AUTHN_WINNT, level]);
    assert_eq!(trailer[4..8], 9u32.to_le_bytes());
    let authenticate = client
        .authenticate(&trailer[8..], [1; 8], [2; 16], 133_000_000_000_000_000)
        .unwrap();
    let a3 = with_verifier(
        16,
        2,
        &[0; 4],
        &verifier(AUTHN_WINNT, level, 0, 9, &authenticate),
    );
    assert!(p.transceive(&a3, 65536, &facts()).unwrap().0.is_empty());
    client.session_security().expect("keys").clone()
}

/// A REQUEST of `stub` signed (sealed at privacy) by the client.
fn request(sec: &mut SessionSecurity, level: u8, call_id: u32, stub: &[u8]) -> Vec<u8> {
    let mut body = request_body(0, stub);
    let pad = (16 - stub.len() % 16) % 16;
    body.resize(body.len() + pad, 0);
    let v = verifier(AUTHN_WINNT, level, pad as u8, 9, &[0; 16]);
    let mut p = with_verifier(0, call_id, &body, &v);
    let signed = p.len() - 16;
    let plain = p[..signed].to_vec();
    if level == LEVEL_PRIVACY {
        sec.seal_client_to_server(&mut p[24..signed - 8]);
    }
    let sig = sec.sign_client_to_server(&plain);
    p[signed..].copy_from_slice(&sig);
    p
}

/// The stub of a RESPONSE after its signature is checked (and its stub unsealed).
fn response_stub(sec: &mut SessionSecurity, level: u8, pdu: &[u8]) -> Vec<u8> {
    assert_eq!(pdu[2], 2, "a RESPONSE: {pdu:02x?}");
    let auth_len = usize::from(u16::from_le_bytes([pdu[10], pdu[11]]));
    assert_eq!(auth_len, 16);
    let signed = pdu.len() - 16;
    let trailer = &pdu[signed - 8..signed];
    assert_eq!(trailer[..2], [AUTHN_WINNT, level]);
    let mut plain = pdu[..signed].to_vec();
    if level == LEVEL_PRIVACY {
        sec.seal_server_to_client(&mut plain[24..signed - 8]);
    }
    assert!(
        sec.verify_server_to_client(&plain, &pdu[signed..]),
        "signed"
    );
    let alloc = u32::from_le_bytes(pdu[16..20].try_into().unwrap()) as usize;
    plain[24..24 + alloc].to_vec()
}

fn fault_status(out: &[u8]) -> u32 {
    let all = pdus(out);
    assert_eq!(all.len(), 1, "{all:02x?}");
    assert_eq!(all[0].0, 3, "a FAULT: {all:02x?}");
    u32::from_le_bytes(all[0].2[8..12].try_into().unwrap())
}

#[test]
fn calls_and_answers_are_signed_at_integrity_and_sealed_at_privacy() {
    for level in [5, LEVEL_PRIVACY] {
        let mut p = witness(LEVEL_PKT);
        let mut sec = bind(&mut p, level, "secret");
        for (call_id, stub) in [(3, b"first call stub".to_vec()), (4, vec![0xAB; 40])] {
            let req = request(&mut sec, level, call_id, &stub);
            if level == LEVEL_PRIVACY {
                assert!(!req.windows(stub.len()).any(|w| w == stub), "sealed");
            }
            assert!(p.transceive(&req, 65536, &facts()).unwrap().0.is_empty());
            let call = p.take_call().expect("the call, checked");
            assert_eq!((call.call_id, &call.stub), (call_id, &stub));
            let answer = format!("answer to {call_id}").into_bytes();
            p.reply(&call, Ok(answer.clone()));
            let out = p.read(65536).0;
            if level == LEVEL_PRIVACY {
                assert!(!out.windows(answer.len()).any(|w| w == answer), "sealed");
            }
            assert_eq!(response_stub(&mut sec, level, &out), answer);
        }
        assert!(p.closed().is_none());
    }
}

#[test]
fn a_tampered_or_replayed_signed_call_gets_access_denied_and_ends_the_association() {
    for level in [5, LEVEL_PRIVACY] {
        // One bit of the stub changed after signing.
        let mut p = witness(LEVEL_PKT);
        let mut sec = bind(&mut p, level, "secret");
        let mut req = request(&mut sec, level, 3, b"0123456789abcdef");
        req[30] ^= 1;
        let out = p.transceive(&req, 65536, &facts()).unwrap().0;
        assert_eq!(fault_status(&out), FAULT_ACCESS_DENIED);
        assert!(p.take_call().is_none() && p.closed().is_some());
        // A good call, then the same PDU again (its sequence number is spent).
        let mut p = witness(LEVEL_PKT);
        let mut sec = bind(&mut p, level, "secret");
        let req = request(&mut sec, level, 3, b"0123456789abcdef");
        p.transceive(&req, 65536, &facts()).unwrap();
        assert!(p.take_call().is_some());
        let out = p.transceive(&req, 65536, &facts()).unwrap().0;
        assert_eq!(fault_status(&out), FAULT_ACCESS_DENIED);
        assert!(p.take_call().is_none() && p.closed().is_some());
        // Nothing written after the end is taken.
        let next = request(&mut sec, level, 4, b"after");
        assert!(p.transceive(&next, 65536, &facts()).unwrap().0.is_empty());
        assert!(p.take_call().is_none());
    }
}

#[test]
fn a_wrong_password_or_a_call_without_a_signature_is_refused() {
    let mut p = witness(LEVEL_PKT);
    let mut sec = bind(&mut p, LEVEL_PRIVACY, "not the password");
    let req = request(&mut sec, LEVEL_PRIVACY, 3, b"stub");
    let out = p.transceive(&req, 65536, &facts()).unwrap().0;
    assert_eq!(fault_status(&out), FAULT_ACCESS_DENIED);
    assert!(p.take_call().is_none() && p.closed().is_some());
    // Authenticated, then a call with no auth trailer.
    let mut p = witness(LEVEL_PKT);
    bind(&mut p, 5, "secret");
    let out = p
        .transceive(&pdu(0, 3, 3, &request_body(0, b"stub")), 65536, &facts())
        .unwrap()
        .0;
    assert_eq!(fault_status(&out), FAULT_ACCESS_DENIED);
    assert!(p.take_call().is_none() && p.closed().is_some());
}

#[test]
fn witness_refuses_unauthenticated_and_connect_level_calls_unless_anonymous_is_allowed() {
    let (uuid, major) = Service::Witness.interface();
    let plain_bind = pdu(11, 3, 1, &bind_body(uuid, major, NDR20, 2));
    let call = pdu(0, 3, 2, &request_body(0, b"stub"));
    // As Samba: the BIND is acknowledged, the call refused.
    let mut p = witness(LEVEL_PKT);
    assert_eq!(p.transceive(&plain_bind, 65536, &facts()).unwrap().0[2], 12);
    let out = p.transceive(&call, 65536, &facts()).unwrap().0;
    assert_eq!(fault_status(&out), FAULT_ACCESS_DENIED);
    assert!(p.take_call().is_none() && p.closed().is_some());
    // Authenticated at connect level: refused too.
    let mut p = witness(LEVEL_PKT);
    bind(&mut p, LEVEL_CONNECT, "secret");
    let out = p.transceive(&call, 65536, &facts()).unwrap().0;
    assert_eq!(fault_status(&out), FAULT_ACCESS_DENIED);
    // Anonymous allowed (`cluster witness anonymous = yes`): the call is taken.
    let mut p = witness(0);
    p.transceive(&plain_bind, 65536, &facts()).unwrap();
    p.transceive(&call, 65536, &facts()).unwrap();
    assert_eq!(p.take_call().unwrap().stub, b"stub");
}

#[test]
fn a_bind_with_another_auth_type_or_a_bad_trailer_is_refused_without_a_panic() {
    let (uuid, major) = Service::Witness.interface();
    let body = bind_body(uuid, major, NDR20, 2);
    // Kerberos (16), and SPNEGO (9) whose token is not one: bind_nak.
    for ty in [16, AUTHN_GSS_NEGOTIATE] {
        let mut p = witness(LEVEL_PKT);
        let b = with_verifier(11, 1, &body, &verifier(ty, 6, 0, 1, b"token"));
        assert_eq!(p.transceive(&b, 65536, &facts()).unwrap().0[2], 13);
    }
    // auth_length past the PDU: a fault.
    let mut p = witness(LEVEL_PKT);
    let mut b = with_verifier(11, 1, &body, &verifier(10, 6, 0, 1, b"x"));
    b[10] = 0xff;
    assert_eq!(p.transceive(&b, 65536, &facts()).unwrap().0[2], 3);
    // A pipe made without an acceptor takes no trailer: a fault.
    let mut p = Pipe::tcp(Service::Witness, 5040);
    let b = with_verifier(11, 1, &body, &verifier(10, 6, 0, 1, b"x"));
    assert_eq!(p.transceive(&b, 65536, &facts()).unwrap().0[2], 3);
}

/// The fuzz seed of a Kerberos-sealed srvsvc call (written by crates/auth's ignored test
/// `write_rpc_pipe_kerberos_fuzz_seed` with the harness's keytab) through the harness's pipe:
/// a BIND_ACK with the AP-REP, nothing for the AUTH3, a sealed RESPONSE; the same call with a
/// changed byte in its Wrap token, or sent twice, gets nca_s_fault_access_denied.
#[test]
fn a_kerberos_sealed_call_recorded_for_the_fuzzer_is_answered_and_a_changed_or_replayed_one_refused(
) {
    let seed = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/rpc_pipe/srvsvc-kerberos-sealed"
    ))
    .unwrap();
    let mut pieces = Vec::new();
    let mut rest = &seed[3..];
    while rest.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        pieces.push(rest[2..2 + n].to_vec());
        rest = &rest[2 + n..];
    }
    assert_eq!(pieces.len(), 3);
    let bound = || {
        let mut p = crate::ipc::FuzzPipe::new(1);
        let ack = pdus(&p.write(&pieces[0], 65536));
        assert_eq!(ack[0].0, 12, "a BIND_ACK");
        assert!(
            p.write(&pieces[1], 65536).is_empty(),
            "no answer to an AUTH3"
        );
        p
    };
    let mut p = bound();
    let out = pdus(&p.write(&pieces[2], 65536));
    assert_eq!(out[0].0, 2, "a RESPONSE");
    // Sent again: its sequence number is behind.
    let out = pdus(&p.write(&pieces[2], 65536));
    assert_eq!(out[0].0, 3, "a FAULT");
    assert_eq!(out[0].2[8..12], FAULT_ACCESS_DENIED.to_le_bytes());
    let mut changed = pieces[2].clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    let out = pdus(&bound().write(&changed, 65536));
    assert_eq!(out[0].0, 3, "a FAULT");
    assert_eq!(out[0].2[8..12], FAULT_ACCESS_DENIED.to_le_bytes());
}
