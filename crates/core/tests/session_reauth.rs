//! Re-authentication: SESSION_SETUP on an existing session keeps its id and opens.

use crate::support;

use ringshare_vfs::Share;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::*;

#[test]
fn re_authentication_keeps_the_session_id_and_its_open_files() {
    let mut c = Client::new();
    let sid = c.session_id;
    c.put_file("kept", b"still here");
    let f = c.create("kept", GENERIC_READ, D::OPEN, 0).unwrap();
    c.session_setup();
    assert_eq!(c.session_id, sid, "same session");
    assert_eq!(read_data(&c.read(f, 0, 64)), b"still here");
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}

#[test]
fn a_reconnect_naming_the_previous_session_ends_it_and_closes_its_files() {
    let mut old = Client::new();
    old.put_file("held", b"x");
    let f = old
        .create_on(old.tree_id, "held", GENERIC_READ, 0, D::OPEN, 0)
        .unwrap();
    let mut new = Client::negotiated(old.conn_server(), old.mem.clone(), old.dialect, [9; 16]);
    new.session_setup_after(old.session_id);
    new.tree_id = new.tree_connect("share");
    // The old session is gone on its connection, and so is its open: the
    // file opens without sharing again.
    assert_eq!(old.read(f, 0, 1).status(), NtStatus::USER_SESSION_DELETED);
    let tree = new.tree_id;
    assert!(new
        .create_on(tree, "held", GENERIC_READ, 0, D::OPEN, 0)
        .is_ok());
}

#[test]
fn a_previous_session_id_that_names_no_session_changes_nothing() {
    let mut old = Client::new();
    let sid = old.session_id;
    let mut new = Client::negotiated(old.conn_server(), old.mem.clone(), old.dialect, [9; 16]);
    new.session_setup_after(sid ^ 0x5555);
    old.put_file("still", b"ok");
    assert_eq!(old.session_id, sid);
}

#[test]
fn re_authentication_keeps_the_sessions_signing_key() {
    let mut c = Client::with(Options {
        dialect: ringshare_wire::consts::Dialect::SMB2_1,
        signing: ringshare_core::SigningPolicy::Required,
    });
    let old = c.signing.clone().expect("a 2.1 signing key");
    c.put_file("signed", b"before");
    c.session_setup();
    // The client keeps signing with the key it had: the server must too.
    c.signing = Some(old);
    let f = c.create("signed", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(read_data(&c.read(f, 0, 16)), b"before");
}

#[test]
fn a_failed_re_authentication_ends_the_session_and_closes_its_files() {
    let mut c = Client::new();
    c.put_file("held", b"x");
    let tree = c.tree_id;
    let f = c
        .create_on(tree, "held", GENERIC_READ, 0, D::OPEN, 0)
        .unwrap();
    let mut auth = ringshare_auth::gss::ClientAuth::new("alice", "", "wrong password");
    let mut server_token: Option<Vec<u8>> = None;
    let status = loop {
        let token = auth
            .step(server_token.as_deref(), [5; 24], c.now.filetime)
            .unwrap()
            .unwrap();
        let req = ringshare_wire::session::SessionSetupRequest {
            flags: ringshare_wire::consts::SessionSetupFlags::empty(),
            security_mode: ringshare_wire::consts::SecurityMode::SIGNING_ENABLED,
            capabilities: ringshare_wire::consts::Capabilities::empty(),
            channel: 0,
            previous_session_id: 0,
            security_buffer: &token,
        };
        let r = c.call(ringshare_wire::consts::Command::SESSION_SETUP, 0, |o| {
            req.encode(o)
        });
        if r.status() != NtStatus::MORE_PROCESSING_REQUIRED {
            break r.status();
        }
        let resp = ringshare_wire::session::SessionSetupResponse::decode(&r.msg).unwrap();
        server_token = Some(resp.security_buffer.to_vec());
    };
    assert_eq!(status, NtStatus::LOGON_FAILURE);
    assert_eq!(c.read(f, 0, 1).status(), NtStatus::USER_SESSION_DELETED);
    let mut other = Client::on(c.conn_server(), c.mem.clone(), Options::default());
    let tree = other.tree_id;
    assert!(
        other
            .create_on(tree, "held", GENERIC_READ, 0, D::OPEN, 0)
            .is_ok(),
        "the failed session's open is gone"
    );
}

fn owner_of(c: &Client, name: &str) -> u32 {
    c.mem
        .stat(
            &ringshare_vfs::server_who(),
            &ringshare_vfs::RelPath::from_components([name]).unwrap(),
        )
        .unwrap()
        .uid
}

/// Samba acts as the session's current user at every request: after a
/// re-authentication as someone else (here a user mapped to guest), what the
/// session creates on a tree it already had belongs to the new user, while a
/// file opened before keeps working.
#[test]
fn after_re_authenticating_as_someone_else_the_open_trees_act_as_the_new_user() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let server = guest_server(&mem);
    let mut c = Client::on(server, mem, Options::default());
    let tree = c.tree_id;
    let before = c
        .create_on(
            tree,
            "before",
            GENERIC_READ | GENERIC_WRITE,
            0,
            D::CREATE,
            0,
        )
        .unwrap();
    assert_eq!(owner_of(&c, "before"), ALICE_UID);
    let sid = c.session_id;
    assert_eq!(c.log_on("bob", "anything", 0), NtStatus::SUCCESS);
    assert_eq!(c.session_id, sid, "the same session, now a guest");
    let after = c
        .create_on(tree, "after", GENERIC_READ | GENERIC_WRITE, 0, D::CREATE, 0)
        .unwrap();
    assert_eq!(owner_of(&c, "after"), 65534, "made by the guest account");
    assert_eq!(
        c.write(before, 0, b"still mine").status(),
        NtStatus::SUCCESS
    );
    assert_eq!(c.close(after).status(), NtStatus::SUCCESS);
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::SUCCESS);
    c.create_on(tree, "again", GENERIC_READ, 0, D::CREATE, 0)
        .unwrap();
    assert_eq!(owner_of(&c, "again"), ALICE_UID, "alice's again");
}

/// A share whose `valid users` admit alice only: once the session
/// re-authenticates as someone else, its tree of that share refuses every
/// request (ACCESS_DENIED) but TREE_DISCONNECT, and admits again when alice
/// comes back.
#[test]
fn a_tree_whose_share_does_not_admit_the_re_authenticated_user_refuses_its_requests() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut config = config_on(
        std::sync::Arc::new(mem.clone()),
        ringshare_core::SigningPolicy::IfRequired,
    );
    config.map_bad_user_to_guest = true;
    config.guest_enabled = true;
    for s in &mut config.shares {
        let share = std::sync::Arc::get_mut(s).unwrap();
        share.rules.valid_users = vec!["alice".into()];
    }
    let mut c = Client::on(server_for(config), mem, Options::default());
    let tree = c.tree_id;
    c.put_file("held", b"x");
    let f = c
        .create_on(tree, "held", GENERIC_READ, 0, D::OPEN, 0)
        .unwrap();
    assert_eq!(c.log_on("bob", "anything", 0), NtStatus::SUCCESS);
    assert_eq!(
        c.create_on(tree, "held", GENERIC_READ, 0, D::OPEN, 0)
            .unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(c.read(f, 0, 1).status(), NtStatus::ACCESS_DENIED);
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::SUCCESS);
    assert_eq!(read_data(&c.read(f, 0, 1)), b"x");
    let ro = c.ro_tree_id;
    assert_eq!(c.log_on("bob", "anything", 0), NtStatus::SUCCESS);
    let r = c.call(
        ringshare_wire::consts::Command::TREE_DISCONNECT,
        ro,
        empty_body,
    );
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "a refused tree can still be left"
    );
}

#[test]
fn a_request_naming_an_unknown_session_leaves_the_real_session_working() {
    // smbtorture smb2.session-id: a signed QUERY_INFO with another session id, then the
    // session's own CLOSE.
    let mut c = Client::with(Options {
        dialect: ringshare_wire::consts::Dialect::SMB2_0_2,
        signing: ringshare_core::SigningPolicy::Required,
    });
    assert!(c.signing.is_some(), "a signed session");
    c.put_file("sessid.tst", b"x");
    let f = c.create("sessid.tst", GENERIC_READ, D::OPEN, 0).unwrap();
    let real = c.session_id;
    c.session_id = real + 1234;
    let r = c.query_info(f, 1, 18, 0, 4096);
    assert_eq!(r.status(), NtStatus::USER_SESSION_DELETED);
    c.session_id = real;
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}
