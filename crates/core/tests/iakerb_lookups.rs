//! An IAKerb logon's KDC round trips are lookups ([`Lookup::Kdc`]): the SESSION_SETUP leg that
//! carries a KDC request waits while the driver asks the realm's KDC away from the I/O thread,
//! and runs again with the reply. The tokens are an exchange captured from MIT krb5 1.20.1's
//! initiator (crates/auth/src/krb5/testdata); the test plays the KDC with the replies MIT's KDC
//! gave.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ringshare_auth::krb5::acceptor::AcceptorConfig;
use ringshare_auth::krb5::iakerb::{parse_proxy, proxy_token, Dialect};
use ringshare_auth::krb5::keytab::Keytab;
use ringshare_core::identity::Account;
use ringshare_core::{Kdcs, Lookup, LookupDone};
use ringshare_wire::consts::{Command, Dialect as SmbDialect};
use ringshare_wire::session::SessionSetupResponse;
use ringshare_wire::NtStatus;
use support::*;

const CAPTURE: &str = include_str!("../../auth/src/krb5/testdata/iakerb-mit-1.20.txt");
const KEYTAB: &str = include_str!("../../auth/src/krb5/testdata/iakerb-mit-keytab.hex");
const CAPTURED_AT: i64 = 1_795_872_747;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.trim().len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s.trim()[i..i + 2], 16).unwrap())
        .collect()
}

/// The captured tokens in order (initiator's, acceptor's, ...).
fn capture() -> Vec<Vec<u8>> {
    CAPTURE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| unhex(l.split_once(' ').unwrap().1))
        .collect()
}

/// The KDC of RS.TEST as it answered MIT: each captured request's reply.
struct CapturedKdc {
    asked: AtomicUsize,
}

impl Kdcs for CapturedKdc {
    fn exchange(&self, realm: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        assert_eq!(realm, "RS.TEST");
        self.asked.fetch_add(1, Ordering::Relaxed);
        let c = capture();
        let i = c
            .iter()
            .position(|t| parse_proxy(t).is_ok_and(|p| p.message == request))
            .ok_or("an unknown request")?;
        Ok(parse_proxy(&c[i + 1]).unwrap().message.to_vec())
    }
}

fn iakerb_client(kdc: Arc<CapturedKdc>) -> Client {
    let mem = ringshare_vfs::memory::MemShare::new();
    let server = server(&mem, ringshare_core::SigningPolicy::IfRequired);
    server.logons.set_kerberos(Some(AcceptorConfig {
        keytab: Arc::new(Keytab::parse(&unhex(KEYTAB)).unwrap()),
        realm: "RS.TEST".into(),
        skew_secs: 300,
        allow_rc4: false,
    }));
    server.logons.set_kdcs(Some(kdc));
    let mut c = Client::negotiated(server, mem, SmbDialect::SMB3_1_1, [7; 16]);
    c.hold_lookups = true;
    c.now.filetime = (CAPTURED_AT as u64 + 11_644_473_600) * 10_000_000;
    c
}

fn send_leg(c: &mut Client, token: &[u8]) -> Vec<Resp> {
    c.session_setup_leg(token, 0)
}

/// Answer the held lookups as the driver's lookup threads do; the responses that follow.
fn answer(c: &mut Client) -> Vec<Resp> {
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
    }
    c.pump()
}

fn echo(c: &mut Client) -> NtStatus {
    let session = std::mem::take(&mut c.session_id);
    let r = c.call(Command::ECHO, 0, empty_body);
    c.session_id = session;
    r.status()
}

#[test]
fn each_kdc_request_of_an_iakerb_logon_is_a_lookup_and_the_leg_goes_on_with_the_kdcs_reply() {
    let kdc = Arc::new(CapturedKdc {
        asked: AtomicUsize::new(0),
    });
    let mut c = iakerb_client(Arc::clone(&kdc));
    let t = capture();
    for leg in 0..3 {
        assert!(
            send_leg(&mut c, &t[2 * leg]).is_empty(),
            "leg {leg} answered at once"
        );
        let [held] = c.held_lookups.as_slice() else {
            panic!("one lookup")
        };
        let Lookup::Kdc { request, .. } = &held.ask else {
            panic!("the KDC is asked")
        };
        assert_eq!(request.realm, "RS.TEST");
        assert_eq!(request.request, parse_proxy(&t[2 * leg]).unwrap().message);
        // The connection is not stuck behind it.
        assert_eq!(echo(&mut c), NtStatus::SUCCESS);
        let rs = answer(&mut c);
        assert_eq!(rs.len(), 1, "{rs:?}");
        assert_eq!(rs[0].status(), NtStatus::MORE_PROCESSING_REQUIRED);
        c.session_id = rs[0].hdr.session_id;
        let resp = SessionSetupResponse::decode(&rs[0].msg).unwrap();
        assert_eq!(resp.security_buffer, &t[2 * leg + 1][..], "leg {leg}");
    }
    assert_eq!(kdc.asked.load(Ordering::Relaxed), 3);
    // The AP-REQ: no KDC, the account of the ticket's user.
    assert!(send_leg(&mut c, &t[6]).is_empty());
    let held = c.held_lookups.pop().unwrap();
    let Lookup::Account { names, .. } = &held.ask else {
        panic!("the account is asked")
    };
    assert_eq!(names, &["rsinterop".to_string()]);
    let account = Account {
        name: "rsinterop".into(),
        who: ringshare_vfs::creds::intern(ringshare_vfs::Creds::new(ALICE_UID, ALICE_UID, vec![])),
        home: String::new(),
        sids: Default::default(),
    };
    c.conn
        .complete_lookup(c.now, held.id, LookupDone::Account(Ok(account)));
    let rs = c.pump();
    assert_eq!(rs[0].status(), NtStatus::SUCCESS, "{rs:?}");
    assert_eq!(kdc.asked.load(Ordering::Relaxed), 3);
}

#[test]
fn a_kdc_request_for_another_realm_asks_no_kdc_and_fails_the_logon() {
    let kdc = Arc::new(CapturedKdc {
        asked: AtomicUsize::new(0),
    });
    let mut c = iakerb_client(Arc::clone(&kdc));
    let t = capture();
    let as_req = parse_proxy(&t[0]).unwrap().message.to_vec();
    let rs = send_leg(
        &mut c,
        &proxy_token(Dialect::Draft, "ELSEWHERE.TEST", &as_req),
    );
    assert_eq!(rs[0].status(), NtStatus::LOGON_FAILURE);
    assert!(c.held_lookups.is_empty());
    assert_eq!(kdc.asked.load(Ordering::Relaxed), 0);
}

#[test]
fn a_kdc_that_does_not_answer_fails_the_logon() {
    let kdc = Arc::new(CapturedKdc {
        asked: AtomicUsize::new(0),
    });
    let mut c = iakerb_client(kdc);
    let t = capture();
    assert!(send_leg(&mut c, &t[0]).is_empty());
    let held = c.held_lookups.pop().unwrap();
    c.conn.complete_lookup(
        c.now,
        held.id,
        LookupDone::Kdc(Err("no KDC of RS.TEST answered within 3 s".into())),
    );
    let rs = c.pump();
    assert_eq!(rs[0].status(), NtStatus::LOGON_FAILURE);
}
