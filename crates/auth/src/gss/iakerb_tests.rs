//! IAKerb through [`ServerAuth`], bare and in SPNEGO, with the exchange captured from MIT krb5
//! 1.20.1 (crates/auth/src/krb5/testdata/iakerb-mit-1.20.txt).

use std::sync::Arc;

use super::*;
use crate::krb5::iakerb::tests::{capture, config, CAPTURED_AT};
use crate::krb5::iakerb::{parse_proxy, KdcRequest, OID_IAKERB};
use crate::spnego::{encode_init, mech_type_list};

fn server() -> ServerAuth {
    let cfg = ntlm::ServerConfig {
        netbios_domain: "RS".into(),
        netbios_computer: "FS".into(),
        dns_domain: String::new(),
        dns_computer: "fs.rs.test".into(),
    };
    ServerAuth::new(&cfg, [1; 8], 0).with_kerberos(Kerberos {
        config: Arc::new(config()),
        replay: Arc::new(ReplayCache::new()),
        now_unix: CAPTURED_AT,
        fresh: Fresh {
            subkey: [9; 32],
            seq: 77,
        },
    })
}

struct NoUsers;
impl UserLookup for NoUsers {
    fn nt_hash(&self, _: &str) -> Option<[u8; 16]> {
        None
    }
}

/// The KDC's reply MIT's acceptor relayed in answer `a`.
fn kdc_reply(a: &[u8]) -> Vec<u8> {
    parse_proxy(a).unwrap().message.to_vec()
}

#[test]
fn a_bare_iakerb_exchange_relays_each_kdc_request_and_ends_with_the_ap_rep() {
    let c = capture();
    let mut s = server();
    for leg in 0..3 {
        let (req, rep) = (&c[2 * leg].1, &c[2 * leg + 1].1);
        let asked = s.kdc_request(req).expect("a KDC request to relay");
        assert_eq!(asked.realm, "RS.TEST");
        s.kdc_answered(asked, Ok(kdc_reply(rep)));
        match s.step(req, &NoUsers).unwrap() {
            ServerStep::Continue(t) => assert_eq!(&t, rep, "leg {leg}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.kdc_request(&c[6].1), None, "the AP-REQ asks no KDC");
    let ServerStep::Done { token, result } = s.step(&c[6].1, &NoUsers).unwrap() else {
        panic!("not done");
    };
    assert_eq!(
        (result.user.as_str(), result.domain.as_str()),
        ("rsinterop", "RS.TEST")
    );
    assert_eq!(result.session_key.len(), 32);
    // An AP-REP framed with the IAKerb OID, as MIT's acceptor sent it.
    let oid_and_id = |t: &[u8]| t[3..13].to_vec();
    assert_eq!(oid_and_id(&token), oid_and_id(&c[7].1));
}

#[test]
fn iakerb_listed_first_in_spnego_is_chosen_and_its_tokens_ride_in_negotiation_tokens() {
    let c = capture();
    let mut s = server();
    let mechs = mech_type_list(&[OID_IAKERB, crate::krb5::OID_KRB5, OID_NTLMSSP]);
    for leg in 0..4 {
        let inner = &c[2 * leg].1;
        let token = if leg == 0 {
            encode_init(&mechs, Some(inner), None)
        } else {
            spnego::encode_resp(&NegTokenResp {
                neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                supported_mech: None,
                response_token: Some(inner.clone()),
                mech_list_mic: None,
            })
        };
        if leg < 3 {
            let asked = s.kdc_request(&token).expect("a KDC request to relay");
            s.kdc_answered(asked, Ok(kdc_reply(&c[2 * leg + 1].1)));
        }
        let answer = match s.step(&token, &NoUsers).unwrap() {
            ServerStep::Continue(t) => t,
            ServerStep::Done { token, result } => {
                assert_eq!(result.user, "rsinterop");
                token
            }
        };
        let NegToken::Resp(resp) = spnego::decode(&answer).unwrap() else {
            panic!("not a negTokenResp");
        };
        assert_eq!(resp.supported_mech.is_some(), leg == 0);
        if leg == 0 {
            assert_eq!(resp.supported_mech.as_deref(), Some(OID_IAKERB));
        }
        let want_state = if leg == 3 {
            neg_state::ACCEPT_COMPLETED
        } else {
            neg_state::ACCEPT_INCOMPLETE
        };
        assert_eq!(resp.neg_state, Some(want_state));
        if leg < 3 {
            assert_eq!(resp.response_token.unwrap(), c[2 * leg + 1].1);
        }
    }
}

#[test]
fn a_kdc_request_for_another_realm_is_refused_with_the_reason() {
    let c = capture();
    let p = parse_proxy(&c[0].1).unwrap();
    let other = crate::krb5::iakerb::proxy_token(
        crate::krb5::iakerb::Dialect::Draft,
        "ELSEWHERE.TEST",
        p.message,
    );
    let mut s = server();
    assert_eq!(s.kdc_request(&other), None);
    // Even with an answer at hand for it.
    s.kdc_answered(
        KdcRequest {
            realm: "ELSEWHERE.TEST".into(),
            request: p.message.to_vec(),
        },
        Ok(kdc_reply(&c[1].1)),
    );
    let e = s.step(&other, &NoUsers).unwrap_err();
    assert!(e.to_string().contains("only its own realm RS.TEST"), "{e}");
    // The exchange is over.
    assert!(s.step(&c[0].1, &NoUsers).is_err());
}

#[test]
fn a_server_without_kerberos_does_not_take_iakerb() {
    let c = capture();
    let cfg = ntlm::ServerConfig {
        netbios_domain: "RS".into(),
        netbios_computer: "FS".into(),
        dns_domain: String::new(),
        dns_computer: String::new(),
    };
    let mut s = ServerAuth::new(&cfg, [1; 8], 0);
    assert_eq!(s.kdc_request(&c[0].1), None);
    assert!(s.step(&c[0].1, &NoUsers).is_err());
}
