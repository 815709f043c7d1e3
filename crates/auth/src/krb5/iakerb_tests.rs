//! IAKerb against an exchange captured from MIT krb5 1.20.1 (testdata/iakerb-mit-1.20.txt: its
//! initiator with a password, its acceptor relaying to its KDC; the service's keytab beside it).

use std::sync::Arc;

use super::*;
use crate::krb5::acceptor::{accept, AcceptorConfig, Fresh};
use crate::krb5::keytab::Keytab;
use crate::krb5::replay::ReplayCache;

const CAPTURE: &str = include_str!("testdata/iakerb-mit-1.20.txt");
const KEYTAB: &str = include_str!("testdata/iakerb-mit-keytab.hex");
/// When the exchange was captured (Unix seconds): the tickets are valid then.
pub(crate) const CAPTURED_AT: i64 = 1_795_872_747;

/// The captured tokens, in order: (from the initiator?, token).
pub(crate) fn capture() -> Vec<(bool, Vec<u8>)> {
    CAPTURE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (who, hex) = l.split_once(' ').unwrap();
            (who == "I", crate::unhex(hex))
        })
        .collect()
}

pub(crate) fn config() -> AcceptorConfig {
    AcceptorConfig {
        keytab: Arc::new(Keytab::parse(&crate::unhex(KEYTAB)).unwrap()),
        realm: "RS.TEST".into(),
        skew_secs: 300,
        allow_rc4: false,
    }
}

fn fresh() -> Fresh {
    Fresh {
        subkey: [7; 32],
        seq: 1234,
    }
}

/// Relay the captured proxy tokens through `iak`, the KDC answering what it answered MIT; the
/// final AP-REQ.
fn relay(iak: &mut Iakerb) -> Vec<u8> {
    let c = capture();
    let mut i = 0;
    while is_proxy(&c[i].1) {
        let (req, rep) = (&c[i].1, &c[i + 1].1);
        let asked = iak.request(req).expect("a request for the own realm");
        let kdc_reply = parse_proxy(rep).unwrap().message.to_vec();
        iak.answered(asked, Ok(kdc_reply));
        assert_eq!(&iak.proxy(req).unwrap(), rep, "leg {}", i / 2);
        i += 2;
    }
    c[i].1.clone()
}

#[test]
fn mits_initiator_frames_only_its_first_token_and_spells_the_realm_as_octets() {
    let c = capture();
    assert_eq!(
        c.len(),
        8,
        "3 KDC round trips, then the AP-REQ and the AP-REP"
    );
    let first = parse_proxy(&c[0].1).unwrap();
    assert_eq!(first.realm, "RS.TEST");
    assert_eq!(first.dialect, Dialect::Mit);
    assert_eq!(first.cookie, None);
    assert_eq!(first.message[0], 0x6a, "an AS-REQ");
    assert_eq!(c[0].1[0], 0x60, "the first token is framed");
    for (n, (_, t)) in c[1..6].iter().enumerate() {
        assert!(t.starts_with(&TOK_PROXY), "token {} is not framed", n + 1);
        assert_eq!(parse_proxy(t).unwrap().dialect, Dialect::Mit);
    }
    assert_eq!(
        parse_proxy(&c[1].1).unwrap().message[0],
        0x7e,
        "PREAUTH_REQUIRED"
    );
    assert_eq!(parse_proxy(&c[4].1).unwrap().message[0], 0x6c, "a TGS-REQ");
    // The AP-REQ and AP-REP are framed with the IAKerb OID, not Kerberos 5's.
    assert_eq!(unframe(&c[6].1).unwrap().0, TOK_AP_REQ);
    assert_eq!(unframe(&c[7].1).unwrap().0, TOK_AP_REP);
    assert!(is_iakerb(&c[6].1) && !is_proxy(&c[6].1));
}

#[test]
fn the_acceptor_answers_each_kdc_reply_byte_for_byte_as_mits_acceptor_did() {
    let mut iak = Iakerb::new("RS.TEST");
    relay(&mut iak);
    assert_eq!(iak.legs, 3);
}

#[test]
fn the_final_ap_req_is_accepted_and_its_finished_checksum_covers_the_exchange() {
    let mut iak = Iakerb::new("RS.TEST");
    let ap_req = relay(&mut iak);
    let acc = accept(
        &config(),
        &ap_req_as_krb5(&ap_req).unwrap(),
        CAPTURED_AT,
        &fresh(),
        &ReplayCache::new(),
    )
    .unwrap();
    assert_eq!(acc.client_name(), "rsinterop@RS.TEST");
    iak.check_finished(&acc).unwrap();
    let rep = ap_rep_as_iakerb(&acc.token).unwrap();
    assert_eq!(unframe(&rep).unwrap().0, TOK_AP_REP);
    // MIT 1.20 puts it in extension 1 of the GSS checksum (the draft: 2).
    assert!(gss_extension(&acc.gss_checksum, 1).unwrap().is_some());
    assert!(gss_extension(&acc.gss_checksum, 2).unwrap().is_none());

    // One byte of the exchange changed on the way: the checksum no longer matches.
    let mut changed = Iakerb::new("RS.TEST");
    relay(&mut changed);
    changed.conversation[40] ^= 1;
    let e = changed.check_finished(&acc).unwrap_err();
    assert!(e.to_string().contains("does not match the exchange"), "{e}");
    // Without the exchange (the AP-REQ alone), there is nothing to check.
    Iakerb::new("RS.TEST").check_finished(&acc).unwrap();
}

#[test]
fn an_ap_req_without_a_finished_checksum_after_kdc_legs_is_refused() {
    let mut iak = Iakerb::new("RS.TEST");
    relay(&mut iak);
    let acc = accept(
        &config(),
        &ap_req_as_krb5(&capture()[6].1).unwrap(),
        CAPTURED_AT,
        &fresh(),
        &ReplayCache::new(),
    )
    .unwrap();
    let mut stripped = acc.clone();
    stripped.gss_checksum.truncate(24);
    let e = iak.check_finished(&stripped).unwrap_err();
    assert!(e.to_string().contains("no finished checksum"), "{e}");
    // Draft spelling expected (extension 2): MIT 1.20's extension 1 does not count.
    iak.dialect = Some(Dialect::Draft);
    assert!(iak.check_finished(&acc).is_err());
}

#[test]
fn a_kdc_request_for_another_realm_is_not_relayed() {
    let first = &capture()[0].1;
    let p = parse_proxy(first).unwrap();
    let other = [
        &first[..0],
        &proxy_token(Dialect::Mit, "EVIL.TEST", p.message)[..],
    ]
    .concat();
    let mut iak = Iakerb::new("RS.TEST");
    assert_eq!(iak.request(&other), None);
    let e = iak.proxy(&other).unwrap_err();
    assert!(
        e.to_string()
            .contains("realm \"EVIL.TEST\"; only its own realm RS.TEST is relayed"),
        "{e}"
    );
    // Nor is anything relayed by a server without a realm.
    assert_eq!(Iakerb::new("").request(first), None);
    assert!(Iakerb::new("").proxy(first).is_err());
}

#[test]
fn a_step_without_the_kdcs_answer_or_with_another_requests_answer_is_refused() {
    let c = capture();
    let mut iak = Iakerb::new("RS.TEST");
    let e = iak.proxy(&c[0].1).unwrap_err();
    assert!(e.to_string().contains("the KDC was not asked"), "{e}");
    let mut iak = Iakerb::new("RS.TEST");
    let other = iak.request(&c[2].1).unwrap();
    iak.answered(other, Ok(parse_proxy(&c[1].1).unwrap().message.to_vec()));
    assert!(iak.proxy(&c[0].1).is_err());
    let mut iak = Iakerb::new("RS.TEST");
    let asked = iak.request(&c[0].1).unwrap();
    iak.answered(asked, Err("timed out after 3 s".into()));
    let e = iak.proxy(&c[0].1).unwrap_err();
    assert!(e.to_string().contains("timed out after 3 s"), "{e}");
}

#[test]
fn truncated_tokens_are_refused() {
    for (_, t) in capture() {
        for n in 0..t.len() {
            let cut = &t[..n];
            // An unframed token cut right after its header reads as one without a KDC
            // message, which nothing relays.
            let parsed = parse_proxy(cut);
            assert!(
                parsed.is_err() || parsed.unwrap().message.is_empty(),
                "{n} of {} bytes parsed",
                t.len()
            );
            assert_eq!(Iakerb::new("RS.TEST").request(cut), None);
            assert!(Iakerb::new("RS.TEST").proxy(cut).is_err());
            assert!(ap_req_as_krb5(cut).is_err());
        }
    }
}

#[test]
fn oversized_kdc_replies_and_tokens_are_refused() {
    let c = capture();
    let mut iak = Iakerb::new("RS.TEST");
    let asked = iak.request(&c[0].1).unwrap();
    let mut huge = vec![0x7e, 0x83, 0x01, 0x00, 0x00];
    huge.resize(KDC_REPLY_MAX + 5, 0);
    iak.answered(asked, Ok(huge));
    let e = iak.proxy(&c[0].1).unwrap_err();
    assert!(e.to_string().contains("not a KDC reply of at most"), "{e}");
    // A token past 64 KiB is not parsed at all.
    let p = parse_proxy(&c[0].1).unwrap();
    let mut big_req = vec![0x6a, 0x83, 0x01, 0x00, 0x00];
    big_req.resize(65541, 0);
    let token = proxy_token(Dialect::Mit, &p.realm, &big_req);
    assert!(parse_proxy(&token).is_err());
    assert_eq!(iak.request(&token), None);
}

#[test]
fn a_logon_may_make_at_most_eight_kdc_round_trips() {
    let c = capture();
    let mut iak = Iakerb::new("RS.TEST");
    let reply = parse_proxy(&c[1].1).unwrap().message.to_vec();
    for _ in 0..LEGS_MAX {
        let asked = iak.request(&c[0].1).unwrap();
        iak.answered(asked, Ok(reply.clone()));
        iak.proxy(&c[0].1).unwrap();
    }
    assert_eq!(iak.request(&c[0].1), None);
    let e = iak.proxy(&c[0].1).unwrap_err();
    assert!(e.to_string().contains("more than 8 KDC round trips"), "{e}");
}

#[test]
fn the_drafts_spelling_is_answered_in_the_drafts_spelling_and_realm_discovery_names_the_realm() {
    let c = capture();
    let as_req = parse_proxy(&c[0].1).unwrap().message.to_vec();
    let token = proxy_token(Dialect::Draft, "RS.TEST", &as_req);
    assert_eq!(token[0], 0x60);
    let p = parse_proxy(&token).unwrap();
    assert_eq!((p.dialect, p.message), (Dialect::Draft, &as_req[..]));
    let mut iak = Iakerb::new("RS.TEST");
    let asked = iak.request(&token).unwrap();
    let reply = parse_proxy(&c[1].1).unwrap().message.to_vec();
    iak.answered(asked, Ok(reply.clone()));
    let out = iak.proxy(&token).unwrap();
    assert_eq!(out, proxy_token(Dialect::Draft, "RS.TEST", &reply));
    assert_eq!(out[0], 0x60, "the draft frames every token");
    // A token of MIT's spelling in the same exchange is refused.
    assert!(iak.proxy(&c[2].1).is_err());

    let discovery = proxy_token(Dialect::Draft, "", &[]);
    let mut iak = Iakerb::new("RS.TEST");
    assert_eq!(iak.request(&discovery), None, "nothing to ask a KDC");
    let out = iak.proxy(&discovery).unwrap();
    let named = parse_proxy(&out).unwrap();
    assert_eq!((named.realm.as_str(), named.message), ("RS.TEST", &[][..]));
}

#[test]
fn only_kdc_requests_are_relayed() {
    let ap_req_body = &capture()[6].1;
    let token = proxy_token(Dialect::Mit, "RS.TEST", &[0x30, 0x00]);
    let mut iak = Iakerb::new("RS.TEST");
    assert_eq!(iak.request(&token), None);
    assert!(iak.proxy(&token).is_err());
    assert!(parse_proxy(ap_req_body).is_err());
}

#[test]
fn the_error_code_of_a_kdcs_krb_error_is_read() {
    let c = capture();
    let preauth_required = parse_proxy(&c[1].1).unwrap().message.to_vec();
    assert_eq!(krb_error_code(&preauth_required), Some(25));
    assert_eq!(krb_error_code(parse_proxy(&c[3].1).unwrap().message), None);
    for n in 0..preauth_required.len() {
        assert_eq!(krb_error_code(&preauth_required[..n]), None);
    }
}
