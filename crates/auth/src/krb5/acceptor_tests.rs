//! The acceptor against tickets minted in the test with known keys: what it accepts, and each
//! check made to fail on purpose.

use std::sync::Arc;

use super::acceptor::{accept, AcceptorConfig};
use super::keytab::{Keytab, KeytabEntry};
use super::replay::ReplayCache;
use super::testkdc::{minimal_pac, Mint};
use super::testkdc::{refusal, try_accept, FRESH, NOW};
use crate::AuthError;

const SERVICE_KEY: [u8; 32] = [0x42; 32];

fn entry(components: &[&str], kvno: u32, key: &[u8]) -> KeytabEntry {
    KeytabEntry {
        components: components.iter().map(|c| c.to_string()).collect(),
        realm: "RS.TEST".into(),
        kvno,
        enctype: 18,
        key: key.to_vec(),
    }
}

fn config(entries: Vec<KeytabEntry>) -> AcceptorConfig {
    AcceptorConfig {
        keytab: Arc::new(Keytab { entries }),
        realm: "RS.TEST".into(),
        skew_secs: 300,
        allow_rc4: false,
    }
}

fn cfg() -> AcceptorConfig {
    config(vec![entry(&["cifs", "fs.rs.test"], 2, &SERVICE_KEY)])
}

#[test]
fn a_valid_ticket_is_accepted_with_a_full_length_acceptor_subkey_in_the_ap_rep() {
    let m = Mint::new(&SERVICE_KEY, NOW);
    let a = try_accept(&cfg(), &m).unwrap();
    assert_eq!(a.client_name(), "alice@RS.TEST");
    assert_eq!(a.service, "cifs/fs.rs.test@RS.TEST");
    assert_eq!(a.session_key, vec![0xa5; 32]);
    assert_eq!(a.end_time, NOW + 36000);
    // The client finds the same key in the AP-REP.
    assert_eq!(m.read_ap_rep(&a.token), a.session_key);
}

#[test]
fn without_mutual_authentication_the_initiator_subkey_is_the_session_key() {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.mutual = false;
    m.gss_flags &= !0x2;
    let a = try_accept(&cfg(), &m).unwrap();
    assert!(a.token.is_empty());
    assert_eq!(a.session_key, vec![0x33; 32]);
}

#[test]
fn a_cifs_ticket_opens_with_the_host_key_of_the_same_account() {
    // Active Directory maps cifs/ to the computer account's host/ keys.
    let c = config(vec![entry(&["host", "fs.rs.test"], 2, &SERVICE_KEY)]);
    assert!(try_accept(&c, &Mint::new(&SERVICE_KEY, NOW)).is_ok());
}

#[test]
fn every_kvno_in_the_keytab_is_kept_so_tickets_of_the_old_password_still_work() {
    let c = config(vec![
        entry(&["cifs", "fs.rs.test"], 2, &SERVICE_KEY),
        entry(&["cifs", "fs.rs.test"], 3, &[0x43; 32]),
    ]);
    assert!(try_accept(&c, &Mint::new(&SERVICE_KEY, NOW)).is_ok());
    let mut new = Mint::new(&[0x43; 32], NOW);
    new.kvno = 3;
    assert!(try_accept(&c, &new).is_ok());
}

#[test]
fn a_ticket_under_a_wrong_key_or_kvno_is_refused() {
    let m = Mint::new(&[0x99; 32], NOW);
    assert!(refusal(&cfg(), &m).contains("do not decrypt"));
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.kvno = 7;
    assert!(refusal(&cfg(), &m).contains("no key in the keytab"));
}

#[test]
fn a_ticket_for_another_realm_or_service_is_refused() {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.realm = "OTHER.TEST".into();
    assert!(refusal(&cfg(), &m).contains("realm"));
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.sname = vec!["HTTP".into(), "fs.rs.test".into()];
    assert!(refusal(&cfg(), &m).contains("not cifs/ or host/"));
}

#[test]
fn an_expired_or_not_yet_valid_ticket_is_refused() {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.end_time = NOW - 301;
    assert!(refusal(&cfg(), &m).contains("expired"));
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.auth_time = NOW + 3600;
    assert!(refusal(&cfg(), &m).contains("not valid yet"));
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.ticket_flags = vec![7];
    assert!(refusal(&cfg(), &m).contains("INVALID"));
}

#[test]
fn an_authenticator_ten_minutes_off_is_refused_as_clock_skew() {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.ctime = NOW - 600;
    assert!(refusal(&cfg(), &m).contains("clocks out of step"));
    m.ctime = NOW + 600;
    assert!(refusal(&cfg(), &m).contains("clocks out of step"));
    m.ctime = NOW + 299;
    assert!(try_accept(&cfg(), &m).is_ok());
}

#[test]
fn a_replayed_ap_req_is_refused_by_the_shared_cache() {
    let m = Mint::new(&SERVICE_KEY, NOW);
    let token = m.ap_req();
    let cache = ReplayCache::new();
    let c = cfg();
    assert!(accept(&c, &token, NOW, &FRESH, &cache).is_ok());
    match accept(&c, &token, NOW + 5, &FRESH, &cache) {
        Err(AuthError::Kerberos(why)) => {
            assert!(why.contains("replayed"), "{why}");
            // The log line says whose ticket was replayed.
            assert!(why.ends_with("(ticket of alice@RS.TEST)"), "{why}");
        }
        other => panic!("replay accepted: {other:?}"),
    }
    // A new authenticator for the same ticket is fine.
    let mut again = m.clone();
    again.cusec += 1;
    assert!(accept(&c, &again.ap_req(), NOW + 5, &FRESH, &cache).is_ok());
}

#[test]
fn an_authenticator_for_another_client_or_with_channel_bindings_is_refused() {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.authenticator_client = Some("mallory".into());
    assert!(refusal(&cfg(), &m).contains("another client"));
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.bindings = [1; 16];
    assert!(refusal(&cfg(), &m).contains("channel bindings"));
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.gss_flags |= 0x1000;
    assert!(refusal(&cfg(), &m).contains("DCE"));
}

#[test]
fn a_pac_signed_with_the_service_key_is_accepted_and_a_forged_one_refused() {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.pac = Some(minimal_pac(&SERVICE_KEY, "alice", m.auth_time));
    let a = try_accept(&cfg(), &m).unwrap();
    assert!(a.pac.is_some());
    // Signed with another key (a PAC copied from another service's ticket, or forged).
    m.pac = Some(minimal_pac(&[0x17; 32], "alice", m.auth_time));
    assert!(refusal(&cfg(), &m).contains("forged"));
    // A PAC for another client.
    m.pac = Some(minimal_pac(&SERVICE_KEY, "bob", m.auth_time));
    assert!(refusal(&cfg(), &m).contains("names client"));
}

#[test]
fn truncated_and_corrupted_tokens_are_refused_without_panicking() {
    let t = Mint::new(&SERVICE_KEY, NOW).ap_req();
    let c = cfg();
    let cache = ReplayCache::new();
    for n in 0..t.len() {
        assert!(
            accept(&c, &t[..n], NOW, &FRESH, &cache).is_err(),
            "prefix {n}"
        );
    }
    for i in (0..t.len()).step_by(3) {
        for x in [0u8, 0x7f, 0x80, 0xff] {
            let mut m = t.clone();
            m[i] = x;
            let _ = accept(&c, &m, NOW, &FRESH, &cache);
        }
    }
}
