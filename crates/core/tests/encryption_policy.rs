//! `smb encrypt = required` on a share: sessions that cannot encrypt are refused.

use crate::support;

use ringshare_wire::consts::Command;
use ringshare_wire::tree::TreeConnectRequest;
use ringshare_wire::NtStatus;
use support::*;

#[test]
fn a_session_without_encryption_cannot_connect_to_a_share_that_requires_it() {
    let mut c = Client::new();
    let r = c.call(Command::TREE_CONNECT, 0, |o| {
        TreeConnectRequest {
            flags: Default::default(),
            path: "\\\\server\\sealed".into(),
            extension: None,
        }
        .encode(o)
    });
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    let r = c.call(Command::TREE_CONNECT, 0, |o| {
        TreeConnectRequest {
            flags: Default::default(),
            path: "\\\\server\\share".into(),
            extension: None,
        }
        .encode(o)
    });
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "shares without the policy stay open to it"
    );
}
