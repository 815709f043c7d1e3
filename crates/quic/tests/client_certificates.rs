//! Client certificates as Windows Server 2025's client access control has
//! them (`quic client certificate`, allow and deny lists by SHA-256 or
//! issuer), against a quinn-proto client in the same process presenting an
//! allowed, a denied, a foreign or no certificate.

use crate::common;
use common::*;

use ringshare_quic::access::{parse_rules, Rule};

/// Connects with `cert` (if any), opens the SMB stream; returns whether an
/// SMB connection opened, and the server's events.
fn try_connect(
    s: &mut Server,
    root: &CertificateDer<'static>,
    cert: Option<&ClientCert>,
    port: u16,
) -> (bool, Vec<Event>) {
    let mut c = Client::new(port);
    let mut now = Instant::now();
    let i = c.connect(now, client_config_as(root, ALPN, cert));
    let mut events = pump(s, &mut c, &mut now);
    if let Some(sid) = c.conn(i).streams().open(Dir::Bi) {
        let _ = c.conn(i).send_stream(sid).write(b"\0\0\0\0");
        events.extend(pump(s, &mut c, &mut now));
    }
    (opened(&events).is_some(), events)
}

fn refusal(events: &[Event]) -> Option<&str> {
    events.iter().find_map(|e| match e {
        Event::Refused { reason, .. } => Some(reason.as_str()),
        _ => None,
    })
}

fn access(mode: ClientCertificate, roots: &[&Ca], allow: &str, deny: &str) -> Access {
    Access {
        mode,
        roots: roots.iter().map(|ca| ca.der()).collect(),
        allow: parse_rules(allow).unwrap(),
        deny: parse_rules(deny).unwrap(),
    }
}

fn sha256_rule(cert: &ClientCert) -> String {
    format!("sha256:{}", cert::fingerprint(&cert.chain[0]))
}

#[test]
fn with_certificates_required_a_client_the_ca_issued_gets_in_and_one_without_is_refused() {
    let ca = Ca::new("Example Client CA");
    let (mut s, root) = server_with_access(
        Limits::default(),
        access(ClientCertificate::Required, &[&ca], "", ""),
    );
    let alice = ca.issue("alice");
    let (ok, events) = try_connect(&mut s, &root, Some(&alice), 50001);
    assert!(ok, "{events:?}");
    let (ok, events) = try_connect(&mut s, &root, None, 50002);
    assert!(!ok, "no certificate, no connection");
    let why = refusal(&events).expect("the refusal is reported for the log");
    assert!(why.to_lowercase().contains("certificate"), "{why}");
    assert_eq!(s.counts().1, 0, "no handshake left counted");
}

#[test]
fn with_certificates_optional_a_client_without_one_gets_in_and_a_denied_one_does_not() {
    let ca = Ca::new("Example Client CA");
    let mallory = ca.issue("mallory");
    let (mut s, root) = server_with_access(
        Limits::default(),
        access(
            ClientCertificate::Optional,
            &[&ca],
            "",
            &sha256_rule(&mallory),
        ),
    );
    assert!(try_connect(&mut s, &root, None, 50001).0);
    assert!(try_connect(&mut s, &root, Some(&ca.issue("alice")), 50002).0);
    let (ok, events) = try_connect(&mut s, &root, Some(&mallory), 50003);
    assert!(!ok);
    let why = refusal(&events).expect("refused");
    assert!(
        why.contains("denied") && why.contains(&cert::fingerprint(&mallory.chain[0])),
        "the reason names the rule and the certificate: {why}"
    );
}

#[test]
fn a_deny_entry_by_sha256_refuses_that_certificate_only() {
    let ca = Ca::new("Example Client CA");
    let (alice, mallory) = (ca.issue("alice"), ca.issue("mallory"));
    let (mut s, root) = server_with_access(
        Limits::default(),
        access(
            ClientCertificate::Required,
            &[&ca],
            "",
            &sha256_rule(&mallory),
        ),
    );
    assert!(!try_connect(&mut s, &root, Some(&mallory), 50001).0);
    assert!(try_connect(&mut s, &root, Some(&alice), 50002).0);
}

#[test]
fn an_allow_list_by_issuer_admits_that_cas_certificates_and_refuses_another_cas() {
    let (staff, guests) = (Ca::new("Staff CA"), Ca::new("Guest CA"));
    let (mut s, root) = server_with_access(
        Limits::default(),
        access(
            ClientCertificate::Required,
            &[&staff, &guests],
            "issuer: O=Example, CN=Staff CA",
            "",
        ),
    );
    assert!(try_connect(&mut s, &root, Some(&staff.issue("alice")), 50001).0);
    let (ok, events) = try_connect(&mut s, &root, Some(&guests.issue("bob")), 50002);
    assert!(!ok, "chains to a trusted CA, but not allowed");
    let why = refusal(&events).expect("refused");
    assert!(
        why.contains("not in 'quic client certificate allow'"),
        "{why}"
    );
    assert!(
        why.contains("CN=guest ca"),
        "the reason names the issuer: {why}"
    );
}

#[test]
fn an_allow_list_by_sha256_admits_that_certificate_and_a_deny_entry_wins_over_an_allow() {
    let ca = Ca::new("Example Client CA");
    let (alice, bob) = (ca.issue("alice"), ca.issue("bob"));
    let allow = format!(
        "{}; issuer:CN=Example Client CA, O=Example",
        sha256_rule(&alice)
    );
    let (mut s, root) = server_with_access(
        Limits::default(),
        access(
            ClientCertificate::Required,
            &[&ca],
            &allow,
            &sha256_rule(&bob),
        ),
    );
    assert!(try_connect(&mut s, &root, Some(&alice), 50001).0);
    assert!(
        !try_connect(&mut s, &root, Some(&bob), 50002).0,
        "bob's issuer is allowed, but bob is denied"
    );
}

#[test]
fn a_certificate_from_a_ca_not_in_tls_cafile_is_refused() {
    let (ca, other) = (Ca::new("Example Client CA"), Ca::new("Elsewhere CA"));
    let (mut s, root) = server_with_access(
        Limits::default(),
        access(ClientCertificate::Optional, &[&ca], "", ""),
    );
    let (ok, events) = try_connect(&mut s, &root, Some(&other.issue("eve")), 50001);
    assert!(!ok);
    let why = refusal(&events).expect("refused");
    assert!(why.contains("tls cafile"), "{why}");
}

#[test]
fn asking_for_certificates_without_a_ca_is_a_configuration_error() {
    let (c, k) = cert::self_signed(&["localhost".into()]).unwrap();
    let id = Identity::from_pem(c.as_bytes(), k.as_bytes()).unwrap();
    let e = server_config(
        id,
        &Limits::default(),
        Access {
            mode: ClientCertificate::Required,
            ..Access::default()
        },
    )
    .unwrap_err();
    assert!(e.contains("tls cafile"), "{e}");
    assert!(Rule::parse("sha256:00").is_err());
}
