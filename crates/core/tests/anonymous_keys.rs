//! An anonymous session has the keys of its session key (16 zero bytes when the
//! client exchanged none), as Windows Server 2022 and Samba 4.19+ give them
//! (smbtorture smb2.session.anon-signing1/2): a signed request is checked with
//! them and its answer signed, a wrongly signed one is ACCESS_DENIED without
//! closing the connection, an unsigned one is still taken; and the session is
//! never asked to encrypt.

use crate::support;

use ringshare_crypto::sign::{NonceInfo, SigningAlgorithm, SigningKey};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::tree::TreeConnectRequest;
use ringshare_wire::NtStatus;
use support::*;

/// A client logged on anonymously over SMB 2.1, without a key of its own.
fn anonymous() -> Client {
    let mem = MemShare::new();
    let server = server(&mem, ringshare_core::SigningPolicy::IfRequired);
    let mut c = Client::negotiated(server, mem, Dialect::SMB2_1, [3; 16]);
    assert_eq!(c.log_on("", "", 0), NtStatus::SUCCESS, "anonymous logon");
    assert!(
        c.signing.is_none(),
        "the NTLM client exports no key for anonymous"
    );
    c
}

fn tree_connect(c: &mut Client, share: &str) -> Resp {
    let req = TreeConnectRequest {
        flags: Default::default(),
        path: format!("\\\\server\\{share}"),
        extension: None,
    };
    c.call(Command::TREE_CONNECT, 0, |o| req.encode(o))
}

#[test]
fn an_anonymous_sessions_request_signed_with_the_zero_key_is_taken_and_its_answer_signed() {
    let mut c = anonymous();
    c.signing = Some(SigningKey::new(SigningAlgorithm::HmacSha256, [0; 16]));
    let r = tree_connect(&mut c, "IPC$");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(
        r.hdr.is_signed(),
        "the answer to a signed request is signed"
    );
    let key = SigningKey::new(SigningAlgorithm::HmacSha256, [0; 16]);
    let mut msg = r.msg.clone();
    let nonce = NonceInfo {
        message_id: r.hdr.message_id,
        server_to_client: true,
        cancel: false,
    };
    assert!(
        key.verify_in_place(&mut msg, nonce),
        "with the same zero-based key"
    );
}

#[test]
fn an_anonymous_sessions_request_signed_with_another_key_is_access_denied_and_the_connection_stays()
{
    let mut c = anonymous();
    c.signing = Some(SigningKey::new(
        SigningAlgorithm::HmacSha256,
        [0x1f, 0x2f, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ));
    let r = tree_connect(&mut c, "IPC$");
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    assert!(!c.closed, "the connection stays");
    c.signing = None;
    let r = tree_connect(&mut c, "IPC$");
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "an unsigned request is still taken"
    );
    assert!(!r.hdr.is_signed(), "and answered unsigned");
}

#[test]
fn an_anonymous_session_with_keys_still_cannot_connect_to_a_share_that_requires_encryption() {
    let mut c = anonymous();
    let r = tree_connect(&mut c, "sealed");
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
}
