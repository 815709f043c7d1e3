//! What a logon asks other processes (the account through NSS, the domain's NTLM check through
//! winbind) is asked away from the I/O thread: the SESSION_SETUP waits for its answer, and the
//! connection's other requests are answered meanwhile.

use crate::support;

use std::sync::Arc;

use ringshare_auth::gss::ClientAuth;
use ringshare_auth::DomainNtlm;
use ringshare_core::domain::{DomainLogons, DomainMember};
use ringshare_core::{Lookup, LookupDone};
use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::session::SessionSetupResponse;
use ringshare_wire::NtStatus;
use support::*;

/// A domain that knows one password for every user, checking responses as a domain
/// controller does.
struct Domain(&'static str);

impl DomainLogons for Domain {
    fn ntlm(&self, r: &DomainNtlm<'_>) -> Result<[u8; 16], String> {
        ringshare_auth::ntlm::check_v2(&ringshare_auth::nt_hash(self.0), r)
            .ok_or_else(|| "NT_STATUS_WRONG_PASSWORD".into())
    }
}

/// A negotiated client whose lookups wait until the test answers them.
fn holding_client(server: Arc<ringshare_core::ServerState>) -> Client {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = Client::negotiated(server, mem, Dialect::SMB3_1_1, [7; 16]);
    c.hold_lookups = true;
    c
}

/// Send SESSION_SETUP legs of `auth` until one is not answered MORE_PROCESSING_REQUIRED: its
/// responses (none while the last leg waits for a lookup).
fn setup_legs(c: &mut Client, auth: &mut ClientAuth) -> Vec<Resp> {
    let mut server_token: Option<Vec<u8>> = None;
    loop {
        let token = auth
            .step(server_token.as_deref(), [5; 24], c.now.filetime)
            .expect("client step")
            .expect("a token to send");
        let rs = send_leg(c, &token);
        match rs.first() {
            Some(r) if r.status() == NtStatus::MORE_PROCESSING_REQUIRED => {
                c.session_id = r.hdr.session_id;
                let resp = SessionSetupResponse::decode(&r.msg).expect("response");
                server_token = Some(resp.security_buffer.to_vec());
            }
            _ => return rs,
        }
    }
}

fn send_leg(c: &mut Client, token: &[u8]) -> Vec<Resp> {
    c.session_setup_leg(token, 0)
}

/// An ECHO outside any session.
fn echo(c: &mut Client) -> Resp {
    let session = std::mem::take(&mut c.session_id);
    let r = c.call(Command::ECHO, 0, empty_body);
    c.session_id = session;
    r
}

/// Answer the held lookups (as the driver's lookup threads do); the responses that follows.
fn answer(c: &mut Client) -> Vec<Resp> {
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
    }
    c.pump()
}

#[test]
fn a_logon_is_answered_once_its_account_is_looked_up_and_other_requests_go_on_meanwhile() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(server(&mem, ringshare_core::SigningPolicy::IfRequired));
    let mut auth = ClientAuth::new("alice", "", "secret");
    let rs = setup_legs(&mut c, &mut auth);
    assert!(
        rs.is_empty(),
        "answered before its account was looked up: {rs:?}"
    );
    let [held] = c.held_lookups.as_slice() else {
        panic!("one lookup: {:?}", c.held_lookups)
    };
    match &held.ask {
        Lookup::Account { names, .. } => assert_eq!(names, &["alice".to_string()]),
        other => panic!("{:?}", std::mem::discriminant(other)),
    }
    // The connection is not stuck behind it.
    assert_eq!(echo(&mut c).status(), NtStatus::SUCCESS);
    let rs = answer(&mut c);
    assert_eq!(rs.len(), 1, "{rs:?}");
    assert_eq!(rs[0].hdr.command, Command::SESSION_SETUP);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    c.tree_id = c.tree_connect("share");
    c.put_file("after", b"logged on");
}

#[test]
fn another_session_setup_on_a_session_whose_logon_waits_is_not_accepted() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(server(&mem, ringshare_core::SigningPolicy::IfRequired));
    let mut auth = ClientAuth::new("alice", "", "secret");
    assert!(setup_legs(&mut c, &mut auth).is_empty());
    let mut again = ClientAuth::new("alice", "", "secret");
    let token = again.step(None, [5; 24], c.now.filetime).unwrap().unwrap();
    let rs = send_leg(&mut c, &token);
    assert_eq!(rs[0].status(), NtStatus::REQUEST_NOT_ACCEPTED);
    // The waiting one still finishes.
    assert_eq!(answer(&mut c)[0].status(), NtStatus::SUCCESS);
}

#[test]
fn a_logon_whose_account_lookup_fails_is_refused_with_logon_failure() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(server(&mem, ringshare_core::SigningPolicy::IfRequired));
    let mut auth = ClientAuth::new("alice", "", "secret");
    assert!(setup_legs(&mut c, &mut auth).is_empty());
    let req = c.held_lookups.pop().unwrap();
    c.conn.complete_lookup(
        c.now,
        req.id,
        LookupDone::Account(Err(ringshare_core::AccountError::Lookup(
            "winbindd is not running".into(),
        ))),
    );
    let rs = c.pump();
    assert_eq!(rs[0].status(), NtStatus::LOGON_FAILURE);
}

#[test]
fn an_answer_for_a_connection_that_went_is_dropped() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(server(&mem, ringshare_core::SigningPolicy::IfRequired));
    let mut auth = ClientAuth::new("alice", "", "secret");
    assert!(setup_legs(&mut c, &mut auth).is_empty());
    c.conn.shutdown(c.now);
    assert!(answer(&mut c).is_empty());
}

fn member_server(mem: &ringshare_vfs::memory::MemShare) -> Arc<ringshare_core::ServerState> {
    let s = server(mem, ringshare_core::SigningPolicy::IfRequired);
    s.logons.set_domain(Some(DomainMember {
        workgroup: "RSAD".into(),
        separator: '\\',
        default_domain: false,
        rid_ranges: Vec::new(),
        id_ranges: Vec::new(),
    }));
    s.logons
        .set_domain_logons(Some(Arc::new(Domain("d0main-pw"))));
    s
}

#[test]
fn a_domain_users_ntlm_response_is_checked_by_the_domain_before_the_exchange_goes_on() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(member_server(&mem));
    let mut auth = ClientAuth::new("alice", "RSAD", "d0main-pw");
    assert!(setup_legs(&mut c, &mut auth).is_empty());
    let [held] = c.held_lookups.as_slice() else {
        panic!("one lookup")
    };
    let Lookup::DomainNtlm { request, .. } = &held.ask else {
        panic!("the domain is asked first")
    };
    assert_eq!(
        (request.domain.as_str(), request.user.as_str()),
        ("RSAD", "alice")
    );
    assert_eq!(echo(&mut c).status(), NtStatus::SUCCESS);
    // The domain accepted: the account is asked next, by the names winbind gives it.
    assert!(answer(&mut c).is_empty());
    let [held] = c.held_lookups.as_slice() else {
        panic!("one lookup")
    };
    let Lookup::Account { names, .. } = &held.ask else {
        panic!("then the account")
    };
    assert_eq!(names, &["RSAD\\alice".to_string(), "alice".to_string()]);
    let rs = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS, "{rs:?}");
}

#[test]
fn a_domain_user_with_a_wrong_password_is_refused_once_the_domain_answered() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(member_server(&mem));
    let mut auth = ClientAuth::new("alice", "RSAD", "not-it");
    assert!(setup_legs(&mut c, &mut auth).is_empty());
    let rs = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::LOGON_FAILURE);
    assert!(c.held_lookups.is_empty(), "no account is looked up");
}

#[test]
fn local_users_of_a_domain_member_log_on_without_asking_the_domain() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let mut c = holding_client(member_server(&mem));
    let mut auth = ClientAuth::new("alice", "", "secret");
    assert!(setup_legs(&mut c, &mut auth).is_empty());
    let [held] = c.held_lookups.as_slice() else {
        panic!("one lookup")
    };
    assert!(matches!(held.ask, Lookup::Account { .. }));
    assert_eq!(answer(&mut c)[0].status(), NtStatus::SUCCESS);
}
