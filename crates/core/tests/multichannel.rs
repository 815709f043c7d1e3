//! Multichannel: SESSION_SETUP with SMB2_SESSION_FLAG_BINDING ([MS-SMB2]
//! 3.3.5.5, 3.3.5.5.2), channel signing keys (3.3.4.1.1, 3.3.5.2.4), opens
//! shared by every channel, logoff seen everywhere, channel loss, and
//! channel sequence numbers (3.3.5.2.10).

use crate::support;

use ringshare_auth::gss::ClientAuth;
use ringshare_core::SigningPolicy;
use ringshare_crypto::keys;
use ringshare_crypto::preauth::PreauthHash;
use ringshare_crypto::sign::{NonceInfo, SigningAlgorithm, SigningKey};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{
    Capabilities, Command, CreateDisposition as D, Dialect, SecurityMode, SessionFlags,
    SessionSetupFlags,
};
use ringshare_wire::session::{SessionSetupRequest, SessionSetupResponse};
use ringshare_wire::{header, NtStatus};
use support::*;

const GUID: [u8; 16] = [0x33; 16];

/// The key SMB 3.x signs with for `dialect` (AES-CMAC; 3.1.1 over `preauth`).
fn smb3_signing_key(
    dialect: Dialect,
    session_key: &[u8; 16],
    preauth: Option<&PreauthHash>,
) -> SigningKey {
    let k = keys::derive(dialect.0, session_key, preauth.map(|p| &p.0), 16);
    SigningKey::new(SigningAlgorithm::AesCmac, k.signing)
}

fn verify_response(key: &SigningKey, r: &Resp) -> bool {
    key.verify(
        &[&r.msg[..48], &[0u8; 16], &r.msg[64..]],
        NonceInfo {
            message_id: r.hdr.message_id,
            server_to_client: true,
            cancel: false,
        },
        &r.hdr.signature,
    )
}

/// Run a SESSION_SETUP exchange as `user`/`password`: a new session when
/// `binding` is `None`, else a binding of `c.session_id` whose every leg is
/// signed with the given session key. Returns the final status and, on
/// success, the connection's signing key (checked against the final
/// response's signature; `None` for a guest session, which has none).
fn setup(
    c: &mut Client,
    user: &str,
    password: &str,
    binding: Option<&SigningKey>,
) -> Result<Option<SigningKey>, NtStatus> {
    let mut auth = ClientAuth::new(user, "", password);
    let mut preauth = c.preauth.clone();
    let mut server_token: Option<Vec<u8>> = None;
    loop {
        let token = auth
            .step(server_token.as_deref(), [5; 24], c.now.filetime)
            .expect("client auth step")
            .expect("a token for the server");
        let req = SessionSetupRequest {
            flags: if binding.is_some() {
                SessionSetupFlags::BINDING
            } else {
                SessionSetupFlags::empty()
            },
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: Capabilities::empty(),
            channel: 0,
            previous_session_id: 0,
            security_buffer: &token,
        };
        let mut m = c.message(Command::SESSION_SETUP, 0, |o| req.encode(o));
        if let Some(key) = binding {
            sign_with(key, &mut m);
        }
        if let Some(p) = preauth.as_mut() {
            p.update(&m);
        }
        let r = c.send_frame(m).remove(0);
        match r.status() {
            NtStatus::MORE_PROCESSING_REQUIRED => {
                if let Some(key) = binding {
                    // Interim responses to a binding are signed with the
                    // session's key (clients refuse them unsigned).
                    assert!(r.hdr.is_signed(), "interim binding response signed");
                    assert!(verify_response(key, &r), "...with the session's key");
                }
                c.session_id = r.hdr.session_id;
                if let Some(p) = preauth.as_mut() {
                    p.update(&r.msg);
                }
                let resp = SessionSetupResponse::decode(&r.msg).expect("response");
                server_token = Some(resp.security_buffer.to_vec());
            }
            NtStatus::SUCCESS => {
                c.session_id = r.hdr.session_id;
                let resp = SessionSetupResponse::decode(&r.msg).expect("response");
                if resp.session_flags.contains(SessionFlags::IS_GUEST) {
                    return Ok(None);
                }
                let _ = auth.step(Some(resp.security_buffer), [5; 24], c.now.filetime);
                let sk = auth.session_key().expect("session key");
                let key = smb3_signing_key(c.dialect, &sk, preauth.as_ref());
                // 3.1.1 signs every final response, a binding's with the new
                // channel key; 3.0.x a first session's only when signing is required.
                if binding.is_some() || c.dialect == Dialect::SMB3_1_1 {
                    assert!(
                        r.hdr.is_signed(),
                        "the final SESSION_SETUP response is signed"
                    );
                }
                assert!(
                    !r.hdr.is_signed() || verify_response(&key, &r),
                    "the final response is signed with this connection's key"
                );
                return Ok(Some(key));
            }
            s => return Err(s),
        }
    }
}

fn sign_with(key: &SigningKey, m: &mut [u8]) {
    let mut flags = u32::from_le_bytes([m[16], m[17], m[18], m[19]]);
    flags |= 0x8;
    m[16..20].copy_from_slice(&flags.to_le_bytes());
    m[48..64].fill(0);
    let mid = u64::from_le_bytes(m[24..32].try_into().unwrap());
    let sig = key.sign(
        &[m],
        NonceInfo {
            message_id: mid,
            server_to_client: false,
            cancel: false,
        },
    );
    header::patch_signature(m, 0, &sig);
}

/// A logged-on, signing first channel on `share`, and its session key.
fn first_channel(dialect: Dialect) -> (Client, SigningKey) {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let mut a = Client::negotiated(server, mem, dialect, GUID);
    let key = setup(&mut a, "alice", "secret", None)
        .expect("first session")
        .expect("a signing key");
    a.signing = Some(key.clone());
    a.tree_id = a.tree_connect("share");
    (a, key)
}

/// A second connection of `a`'s server that negotiated `dialect` with `guid`.
fn second(a: &Client, dialect: Dialect, guid: [u8; 16]) -> Client {
    let server = a.conn_server();
    let mut b = Client::negotiated(server, a.mem.clone(), dialect, guid);
    b.session_id = a.session_id;
    b
}

/// Bind `b` to `a`'s session; on success `b` signs with its channel key.
fn bind(a: &Client, b: &mut Client, session_key: &SigningKey) -> Result<SigningKey, NtStatus> {
    b.session_id = a.session_id;
    let key = setup(b, "alice", "secret", Some(session_key))?.expect("a channel key");
    b.signing = Some(key.clone());
    b.tree_id = a.tree_id;
    Ok(key)
}

#[test]
fn a_bound_channel_signs_with_its_own_key_and_carries_the_sessions_opens() {
    for dialect in [Dialect::SMB3_0, Dialect::SMB3_0_2, Dialect::SMB3_1_1] {
        let (mut a, skey) = first_channel(dialect);
        let mut b = second(&a, dialect, GUID);
        let ckey = bind(&a, &mut b, &skey).expect("binding succeeds");
        if dialect == Dialect::SMB3_1_1 {
            // 3.1.1 channel keys come from the binding's own preauth hash.
            assert!(
                ckey.sign(
                    &[b"x"],
                    NonceInfo {
                        message_id: 1,
                        server_to_client: true,
                        cancel: false
                    }
                ) != skey.sign(
                    &[b"x"],
                    NonceInfo {
                        message_id: 1,
                        server_to_client: true,
                        cancel: false
                    }
                ),
                "{dialect:?}: the channel key differs from the session key"
            );
        }
        // An open made on the first channel is used on the second, and back.
        let f = a
            .create("shared", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
            .unwrap();
        let w = b.write(f, 0, b"over channel two");
        assert_eq!(
            w.status(),
            NtStatus::SUCCESS,
            "{dialect:?}: write on channel two"
        );
        assert!(w.hdr.is_signed(), "the response on channel two is signed");
        let ckey_ok = verify_response(b.signing.as_ref().unwrap(), &w);
        assert!(ckey_ok, "{dialect:?}: ...with channel two's key");
        assert_eq!(read_data(&a.read(f, 0, 64)), b"over channel two");
        assert_eq!(b.close(f).status(), NtStatus::SUCCESS);
        assert_eq!(a.read(f, 0, 1).status(), NtStatus::FILE_CLOSED);
    }
}

#[test]
fn a_request_on_a_bound_channel_signed_with_the_session_key_is_refused() {
    let (a, skey) = first_channel(Dialect::SMB3_1_1);
    let mut b = second(&a, Dialect::SMB3_1_1, GUID);
    bind(&a, &mut b, &skey).expect("binding succeeds");
    b.signing = Some(skey);
    let r = b.call(Command::ECHO, 0, empty_body);
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
}

#[test]
fn binding_from_another_client_guid_is_accepted_as_windows_does() {
    let (a, skey) = first_channel(Dialect::SMB3_1_1);
    let mut b = second(&a, Dialect::SMB3_1_1, [0x44; 16]);
    assert!(bind(&a, &mut b, &skey).is_ok());
}

/// The first leg of a SESSION_SETUP for `b`'s session id, unsigned; with
/// SMB2_SESSION_FLAG_BINDING when `binding`.
fn setup_leg(b: &mut Client, binding: bool) -> Vec<u8> {
    let mut auth = ClientAuth::new("alice", "", "secret");
    let token = auth.step(None, [5; 24], b.now.filetime).unwrap().unwrap();
    let req = SessionSetupRequest {
        flags: if binding {
            SessionSetupFlags::BINDING
        } else {
            SessionSetupFlags::empty()
        },
        security_mode: SecurityMode::SIGNING_ENABLED,
        capabilities: Capabilities::empty(),
        channel: 0,
        previous_session_id: 0,
        security_buffer: &token,
    };
    b.message(Command::SESSION_SETUP, 0, |o| req.encode(o))
}

/// Send `b` one binding leg signed with `skey` and return the response.
fn bind_leg(b: &mut Client, skey: &SigningKey) -> Resp {
    let mut m = setup_leg(b, true);
    sign_with(skey, &mut m);
    b.send_frame(m).remove(0)
}

#[test]
fn binding_from_a_2_1_connection_is_refused_with_an_answer_signed_by_the_session_key() {
    // The session signs with AES-CMAC (3.0.2); the answer on the 2.1
    // connection must still be signed with that key, or the client reads
    // it as ACCESS_DENIED.
    let (a, skey) = first_channel(Dialect::SMB3_0_2);
    let mut b = second(&a, Dialect::SMB2_1, GUID);
    let r = bind_leg(&mut b, &skey);
    assert_eq!(r.status(), NtStatus::REQUEST_NOT_ACCEPTED);
    assert!(r.hdr.is_signed() && verify_response(&skey, &r));
}

#[test]
fn a_signed_session_setup_without_binding_from_another_connection_is_session_deleted_and_signed() {
    let (a, skey) = first_channel(Dialect::SMB3_0_2);
    let mut b = second(&a, Dialect::SMB3_0_2, GUID);
    let mut m = setup_leg(&mut b, false);
    sign_with(&skey, &mut m);
    let r = b.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::USER_SESSION_DELETED);
    assert!(r.hdr.is_signed() && verify_response(&skey, &r));
    // The session lives on.
    let mut a = a;
    a.put_file("still.txt", b"ok");
}

#[test]
fn binding_with_another_dialect_is_an_invalid_parameter() {
    let (a, skey) = first_channel(Dialect::SMB3_1_1);
    let mut b = second(&a, Dialect::SMB3_0_2, GUID);
    assert_eq!(
        bind(&a, &mut b, &skey).err(),
        Some(NtStatus::INVALID_PARAMETER)
    );
}

#[test]
fn an_unsigned_binding_request_is_an_invalid_parameter() {
    let (a, _) = first_channel(Dialect::SMB3_0_2);
    let mut b = second(&a, Dialect::SMB3_0_2, GUID);
    let m = setup_leg(&mut b, true);
    let r = b.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn a_refused_binding_that_proved_the_session_key_gets_a_signed_error() {
    // Binding on a connection that is already a channel of the session.
    let (mut a, skey) = first_channel(Dialect::SMB3_0_2);
    let r = bind_leg(&mut a, &skey);
    assert_eq!(r.status(), NtStatus::REQUEST_NOT_ACCEPTED);
    assert!(
        r.hdr.is_signed() && verify_response(&skey, &r),
        "signed with the session key"
    );
}

#[test]
fn a_binding_signed_with_a_wrong_key_is_refused() {
    let (a, _) = first_channel(Dialect::SMB3_0_2);
    let mut b = second(&a, Dialect::SMB3_0_2, GUID);
    let wrong = SigningKey::new(SigningAlgorithm::AesCmac, [0x55; 16]);
    assert_eq!(
        bind(&a, &mut b, &wrong).err(),
        Some(NtStatus::ACCESS_DENIED)
    );
}

#[test]
fn binding_to_an_unknown_session_is_refused_as_session_deleted() {
    let (mut a, skey) = first_channel(Dialect::SMB3_0);
    let mut b = second(&a, Dialect::SMB3_0, GUID);
    a.session_id ^= 0x1234_5678;
    assert_eq!(
        bind(&a, &mut b, &skey).err(),
        Some(NtStatus::USER_SESSION_DELETED)
    );
}

#[test]
fn a_guest_session_cannot_be_bound() {
    let mem = MemShare::new();
    let server = guest_server(&mem);
    let mut a = Client::negotiated(server, mem, Dialect::SMB3_0_2, GUID);
    // An unknown user becomes guest: the session has no signing key.
    let r = setup(&mut a, "mallory", "x", None);
    assert!(matches!(r, Ok(None)), "mallory is a guest");
    let mut b = second(&a, Dialect::SMB3_0_2, GUID);
    let any = SigningKey::new(SigningAlgorithm::AesCmac, [0x55; 16]);
    assert_eq!(bind(&a, &mut b, &any).err(), Some(NtStatus::NOT_SUPPORTED));
}

#[test]
fn binding_is_refused_when_multichannel_is_off() {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| c.multi_channel = false);
    let mut a = Client::negotiated(server, mem, Dialect::SMB3_1_1, GUID);
    let skey = setup(&mut a, "alice", "secret", None).unwrap().unwrap();
    let mut b = second(&a, Dialect::SMB3_1_1, GUID);
    assert_eq!(
        bind(&a, &mut b, &skey).err(),
        Some(NtStatus::REQUEST_NOT_ACCEPTED)
    );
}

#[test]
fn logoff_on_one_channel_ends_the_session_on_the_other() {
    let (mut a, skey) = first_channel(Dialect::SMB3_1_1);
    let mut b = second(&a, Dialect::SMB3_1_1, GUID);
    bind(&a, &mut b, &skey).unwrap();
    let f = a.create("gone", GENERIC_WRITE, D::CREATE, 0).unwrap();
    let r = b.call(Command::LOGOFF, 0, empty_body);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let w = a.write(f, 0, b"late");
    assert_eq!(w.status(), NtStatus::USER_SESSION_DELETED);
    // Signed with a's channel key: the request was signed with it, and a
    // client takes an unsigned answer to a signed request for a forgery.
    assert!(w.hdr.is_signed() && verify_response(&skey, &w));
    assert_eq!(a.conn_server().sessions.count(), 0);
}

#[test]
fn losing_one_channel_keeps_the_session_and_its_opens_on_the_other() {
    let (mut a, skey) = first_channel(Dialect::SMB3_0_2);
    let mut b = second(&a, Dialect::SMB3_0_2, GUID);
    bind(&a, &mut b, &skey).unwrap();
    let f = a
        .create("kept", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    a.conn.shutdown(a.now);
    assert_eq!(b.write(f, 0, b"still open").status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&b.read(f, 0, 64)), b"still open");
    b.conn.shutdown(b.now);
    assert_eq!(
        b.conn_server().sessions.count(),
        0,
        "the last channel ends the session"
    );
}

#[test]
fn a_write_with_a_stale_channel_sequence_is_refused_as_file_not_available() {
    let (mut a, _) = first_channel(Dialect::SMB3_0_2);
    let f = a.create("seq", GENERIC_WRITE, D::CREATE, 0).unwrap();
    let write = |a: &mut Client, seq: u16| {
        let mut m = a.message(Command::WRITE, a.tree_id, |o| write_body(o, f, 0, b"x"));
        m[8..10].copy_from_slice(&seq.to_le_bytes());
        a.sign(&mut m);
        a.send_frame(m).remove(0).status()
    };
    assert_eq!(
        write(&mut a, 2),
        NtStatus::SUCCESS,
        "a newer sequence is taken"
    );
    assert_eq!(
        write(&mut a, 2),
        NtStatus::SUCCESS,
        "the same sequence goes on"
    );
    assert_eq!(
        write(&mut a, 1),
        NtStatus::FILE_NOT_AVAILABLE,
        "an older one is stale"
    );
    assert_eq!(write(&mut a, 3), NtStatus::SUCCESS);
}
