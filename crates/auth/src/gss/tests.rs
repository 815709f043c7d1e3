use super::*;
use crate::ntlm::ServerConfig;
use crate::unhex;
use std::collections::HashMap;

struct Users(HashMap<String, [u8; 16]>);
impl Users {
    fn with(pairs: &[(&str, &str)]) -> Self {
        Users(
            pairs
                .iter()
                .map(|(u, p)| (u.to_lowercase(), crate::nt_hash(p)))
                .collect(),
        )
    }
}
impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.0.get(&user.to_lowercase()).copied()
    }
}

// The SMB 3.1.1 master-session exchange published in Microsoft's Open Specifications blog
// "SMB 2 and SMB 3 security in Windows 10: the anatomy of signing and cryptographic keys" (2017),
// appendix "Key derivation example for SMB 3.1.1 multichannel" and "NTLMv2 SessionKey calculation
// example": a Windows client logs on to Windows Server as SUT311\administrator, password
// "Password01!". These are the SESSION_SETUP packets; the security buffers are sliced out below.
const SS_REQ_1: &str = "\
    FE534D4240000100000000000100800000000000000000000200000000000000FFFE000000000000\
    00000000000000000000000000000000000000000000000019000001010000000000000058004A00\
    0000000000000000604806062B0601050502A03E303CA00E300C060A2B06010401823702020AA22A\
    04284E544C4D5353500001000000978208E200000000000000000000000000000000060380250000\
    000F";
const SS_RESP_1: &str = "\
    FE534D4240000100160000C00100010001000000000000000200000000000000FFFE000000000000\
    190000000010000000000000000000000000000000000000090000004800B300A181B03081ADA003\
    0A0101A10C060A2B06010401823702020AA281970481944E544C4D53535000020000000C000C0038\
    00000015828AE20D1D8BA31179D008000000000000000050005000440000000A0092270000000F53\
    005500540033003100310002000C0053005500540033003100310001000C00530055005400330031\
    00310004000C0053005500540033003100310003000C0053005500540033003100310007000800A1\
    A1F5ADCBAED00100000000";
const SS_REQ_2: &str = "\
    FE534D4240000100000000000100800000000000000000000300000000000000FFFE000000000000\
    1900000000100000000000000000000000000000000000001900000101000000000000005800CF01\
    0000000000000000A18201CB308201C7A0030A0101A28201AA048201A64E544C4D53535000030000\
    001800180090000000EE00EE00A80000000C000C00580000001A001A0064000000120012007E0000\
    001000100096010000158288E2060380250000000FECAC77A5F385A8BF9C38C706EEEDDCD3530055\
    005400330031003100610064006D0069006E006900730074007200610074006F0072004400520049\
    0056004500520033003100310000000000000000000000000000000000000000000000000063078E\
    B639FE03E20A231C3AE3BF23080101000000000000A1A1F5ADCBAED001BC4AD05F223CC90F000000\
    0002000C0053005500540033003100310001000C0053005500540033003100310004000C00530055\
    00540033003100310003000C0053005500540033003100310007000800A1A1F5ADCBAED001060004\
    00020000000800300030000000000000000000000000300000B61FEFCAA857EA57BF1EDCEBF8974B\
    8E0EBA5A6DFD9D07A31D11B548F8C9D0CC0A00100000000000000000000000000000000000090016\
    0063006900660073002F005300550054003300310031000000000000000000000000003B9BDFF38F\
    5EE8F9663F11A0F4C03A78A31204100100000063775A9A5FD97F0600000000";
const SS_RESP_2: &str = "\
    FE534D4240000100000000000100800009000000000000000300000000000000FFFE000000000000\
    1900000000100000EBE146DA120BA25FC3376A49DFE31BC10900000048001D00A11B3019A0030A01\
    00A3120410010000003B453CDC3524164200000000";

/// The security buffer of a SESSION_SETUP request (offset/length at body +12/+14).
fn req_blob(hex: &str) -> Vec<u8> {
    let p = unhex(hex);
    let off = u16::from_le_bytes([p[64 + 12], p[64 + 13]]) as usize;
    let len = u16::from_le_bytes([p[64 + 14], p[64 + 15]]) as usize;
    p[off..off + len].to_vec()
}

/// The security buffer of a SESSION_SETUP response (offset/length at body +4/+6).
fn resp_blob(hex: &str) -> Vec<u8> {
    let p = unhex(hex);
    let off = u16::from_le_bytes([p[64 + 4], p[64 + 5]]) as usize;
    let len = u16::from_le_bytes([p[64 + 6], p[64 + 7]]) as usize;
    p[off..off + len].to_vec()
}

fn windows_server() -> ServerAuth {
    let name = "SUT311".to_string();
    let cfg = ServerConfig {
        netbios_domain: name.clone(),
        netbios_computer: name.clone(),
        dns_domain: name.clone(),
        dns_computer: name,
    };
    let mut s = ServerAuth::new(
        &cfg,
        unhex("0D1D8BA31179D008").try_into().unwrap(),
        0x01D0_AECB_ADF5_A1A1,
    );
    // Windows 10.0 build 10130, as the captured server announced.
    s.set_ntlm_version([0x0A, 0x00, 0x92, 0x27, 0, 0, 0, 0x0F]);
    s
}

#[test]
fn replays_the_published_windows_logon_byte_for_byte() {
    let users = Users::with(&[("Administrator", "Password01!")]);
    let mut s = windows_server();
    let ServerStep::Continue(challenge) = s.step(&req_blob(SS_REQ_1), &users).unwrap() else {
        panic!("expected Continue")
    };
    assert_eq!(
        challenge,
        resp_blob(SS_RESP_1),
        "CHALLENGE token differs from Windows'"
    );
    let ServerStep::Done { token, result } = s.step(&req_blob(SS_REQ_2), &users).unwrap() else {
        panic!("expected Done")
    };
    assert_eq!(result.kind, AuthKind::User);
    assert_eq!(result.user, "administrator");
    assert_eq!(result.domain, "SUT311");
    assert_eq!(result.workstation, "DRIVER311");
    assert_eq!(
        result.session_key.to_vec(),
        unhex("270E1BA896585EEB7AF3472D3B4C75A7")
    );
    // The final token carries the server's mechListMIC 01000000 3B453CDC35241642 00000000.
    assert_eq!(
        token,
        resp_blob(SS_RESP_2),
        "final token differs from Windows'"
    );
}

#[test]
fn rejects_the_published_logon_with_a_tampered_mech_list_mic() {
    let users = Users::with(&[("administrator", "Password01!")]);
    let mut s = windows_server();
    s.step(&req_blob(SS_REQ_1), &users).unwrap();
    let mut t = req_blob(SS_REQ_2);
    let n = t.len();
    t[n - 6] ^= 0x01; // inside the mechListMIC checksum
    assert_eq!(s.step(&t, &users).unwrap_err(), AuthError::BadMic);
}

#[test]
fn rejects_the_published_logon_with_a_tampered_ntlm_mic() {
    let users = Users::with(&[("administrator", "Password01!")]);
    let mut s = windows_server();
    s.step(&req_blob(SS_REQ_1), &users).unwrap();
    let mut t = req_blob(SS_REQ_2);
    let mic_at = t.windows(4).position(|w| w == b"\x06\x03\x80\x25").unwrap() + 8; // Version, then MIC
    t[mic_at] ^= 0x80;
    assert_eq!(s.step(&t, &users).unwrap_err(), AuthError::BadMic);
}

#[test]
fn rejects_the_published_logon_with_the_wrong_password() {
    let users = Users::with(&[("administrator", "Password02!")]);
    let mut s = windows_server();
    s.step(&req_blob(SS_REQ_1), &users).unwrap();
    assert_eq!(
        s.step(&req_blob(SS_REQ_2), &users).unwrap_err(),
        AuthError::WrongPassword("administrator".into())
    );
}

fn exchange(
    user: &str,
    password: &str,
    users: &Users,
) -> (Result<ServerStep, AuthError>, ClientAuth, Option<Vec<u8>>) {
    let mut c = ClientAuth::new(user, "WORKGROUP", password);
    let mut s = ServerAuth::new(
        &ServerConfig {
            netbios_computer: "RS".into(),
            ..Default::default()
        },
        [1; 8],
        1 << 56,
    );
    let t1 = c
        .step(Some(&spnego::negotiate_hint()), [2; 24], 1 << 56)
        .unwrap()
        .unwrap();
    let ServerStep::Continue(ch) = s.step(&t1, users).unwrap() else {
        panic!()
    };
    let t2 = c.step(Some(&ch), [3; 24], 1 << 56).unwrap().unwrap();
    let r = s.step(&t2, users);
    let fin = match &r {
        Ok(ServerStep::Done { token, .. }) => Some(token.clone()),
        _ => None,
    };
    (r, c, fin)
}

#[test]
fn client_and_server_complete_with_the_right_password() {
    let users = Users::with(&[("bench", "pw")]);
    let (r, mut c, fin) = exchange("bench", "pw", &users);
    let Ok(ServerStep::Done { result, .. }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(result.kind, AuthKind::User);
    assert_eq!(
        c.session_key().map(|k| k.to_vec()),
        Some(result.session_key)
    );
    assert_eq!(c.step(fin.as_deref(), [0; 24], 0).unwrap(), None);
}

#[test]
fn client_rejects_a_server_with_a_bad_mech_list_mic() {
    let users = Users::with(&[("bench", "pw")]);
    let (_, mut c, fin) = exchange("bench", "pw", &users);
    let mut fin = fin.unwrap();
    let n = fin.len();
    fin[n - 5] ^= 1;
    assert_eq!(
        c.step(Some(&fin), [0; 24], 0).unwrap_err(),
        AuthError::BadMic
    );
}

#[test]
fn client_accepts_a_server_that_leaves_out_its_mech_list_mic() {
    let users = Users::with(&[("bench", "pw")]);
    let (_, mut c, fin) = exchange("bench", "pw", &users);
    let NegToken::Resp(mut resp) = spnego::decode(&fin.unwrap()).unwrap() else {
        panic!("a negTokenResp")
    };
    assert!(resp.mech_list_mic.is_some(), "the server sent one");
    resp.mech_list_mic = None;
    let stripped = spnego::encode_resp(&resp);
    assert_eq!(c.step(Some(&stripped), [0; 24], 0).unwrap(), None);
}

#[test]
fn exchange_fails_with_a_wrong_password_or_unknown_user() {
    let users = Users::with(&[("bench", "pw")]);
    assert_eq!(
        exchange("bench", "nope", &users).0.unwrap_err(),
        AuthError::WrongPassword("bench".into())
    );
    assert_eq!(
        exchange("eve", "pw", &users).0.unwrap_err(),
        AuthError::NoSuchUser("eve".into())
    );
}

#[test]
fn anonymous_exchange_completes_without_mic() {
    let users = Users::with(&[]);
    let (r, mut c, fin) = exchange("", "", &users);
    let Ok(ServerStep::Done { result, token }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(result.kind, AuthKind::Anonymous);
    let NegToken::Resp(resp) = spnego::decode(&token).unwrap() else {
        panic!()
    };
    assert_eq!(resp.mech_list_mic, None);
    assert_eq!(c.session_key(), None);
    assert_eq!(c.step(fin.as_deref(), [0; 24], 0).unwrap(), None);
}

#[test]
fn raw_ntlmssp_tokens_are_accepted() {
    let users = Users::with(&[("bench", "pw")]);
    let mut c = NtlmClient::new("bench", "", "pw", "WS");
    let mut s = ServerAuth::new(&ServerConfig::default(), [1; 8], 7);
    let ServerStep::Continue(ch) = s.step(&c.negotiate(), &users).unwrap() else {
        panic!()
    };
    assert!(ch.starts_with(b"NTLMSSP\0\x02"));
    let auth = c.authenticate(&ch, [2; 8], [3; 16], 7).unwrap();
    let ServerStep::Done { token, result } = s.step(&auth, &users).unwrap() else {
        panic!()
    };
    assert!(token.is_empty());
    assert_eq!(result.session_key, [3; 16].to_vec());
}

#[test]
fn ntlm_offered_second_gets_selected_and_requires_a_mech_list_mic() {
    let users = Users::with(&[("bench", "pw")]);
    let krb5 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
    let list = spnego::mech_type_list(&[&krb5, OID_NTLMSSP]);
    let init = spnego::encode_init(&list, Some(b"kerberos-ap-req"), None);
    let mut s = ServerAuth::new(&ServerConfig::default(), [1; 8], 7);
    let ServerStep::Continue(sel) = s.step(&init, &users).unwrap() else {
        panic!()
    };
    let NegToken::Resp(sel) = spnego::decode(&sel).unwrap() else {
        panic!()
    };
    assert_eq!(sel.supported_mech.as_deref(), Some(OID_NTLMSSP));
    assert_eq!(sel.neg_state, Some(neg_state::REQUEST_MIC));
    assert_eq!(sel.response_token, None);

    let mut c = NtlmClient::new("bench", "", "pw", "WS");
    let neg = spnego::encode_resp(&NegTokenResp {
        response_token: Some(c.negotiate()),
        ..Default::default()
    });
    let ServerStep::Continue(ch) = s.step(&neg, &users).unwrap() else {
        panic!()
    };
    let NegToken::Resp(ch) = spnego::decode(&ch).unwrap() else {
        panic!()
    };
    let auth = c
        .authenticate(&ch.response_token.unwrap(), [2; 8], [3; 16], 7)
        .unwrap();
    // Without a mechListMIC the downgrade from Kerberos is not protected: refused.
    let mut s2 = ServerAuth::new(&ServerConfig::default(), [1; 8], 7);
    s2.step(&init, &users).unwrap();
    let mut c2 = NtlmClient::new("bench", "", "pw", "WS");
    let neg2 = spnego::encode_resp(&NegTokenResp {
        response_token: Some(c2.negotiate()),
        ..Default::default()
    });
    let ServerStep::Continue(ch2) = s2.step(&neg2, &users).unwrap() else {
        panic!()
    };
    let NegToken::Resp(ch2) = spnego::decode(&ch2).unwrap() else {
        panic!()
    };
    let auth2 = c2
        .authenticate(&ch2.response_token.unwrap(), [2; 8], [3; 16], 7)
        .unwrap();
    let no_mic2 = spnego::encode_resp(&NegTokenResp {
        response_token: Some(auth2),
        ..Default::default()
    });
    assert_eq!(s2.step(&no_mic2, &users).unwrap_err(), AuthError::BadMic);
    // With the MIC over the list as sent, it succeeds and the server signs the list back.
    let mic = c
        .session_security()
        .unwrap()
        .sign_client_to_server(&list)
        .to_vec();
    let with_mic = spnego::encode_resp(&NegTokenResp {
        response_token: Some(auth),
        mech_list_mic: Some(mic),
        ..Default::default()
    });
    let ServerStep::Done { token, .. } = s.step(&with_mic, &users).unwrap() else {
        panic!()
    };
    let NegToken::Resp(fin) = spnego::decode(&token).unwrap() else {
        panic!()
    };
    assert!(c
        .session_security()
        .unwrap()
        .verify_server_to_client(&list, &fin.mech_list_mic.unwrap()));
}

#[test]
fn rejects_spnego_without_ntlmssp_and_tokens_out_of_order() {
    let users = Users::with(&[]);
    let krb5 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
    let init = spnego::encode_init(&spnego::mech_type_list(&[&krb5]), None, None);
    let mut s = ServerAuth::new(&ServerConfig::default(), [1; 8], 7);
    assert!(matches!(
        s.step(&init, &users),
        Err(AuthError::Unsupported(_))
    ));
    let mut s = ServerAuth::new(&ServerConfig::default(), [1; 8], 7);
    let resp = spnego::encode_resp(&NegTokenResp {
        response_token: Some(vec![1]),
        ..Default::default()
    });
    assert!(matches!(
        s.step(&resp, &users),
        Err(AuthError::Malformed(_))
    ));
    let mut s = ServerAuth::new(&ServerConfig::default(), [1; 8], 7);
    assert!(s.step(&[0xff; 40], &users).is_err());
    assert!(s.step(&[], &users).is_err());
}

#[test]
fn no_byte_flip_or_truncation_of_the_published_tokens_panics() {
    let users = Users::with(&[("administrator", "Password01!")]);
    let req1 = req_blob(SS_REQ_1);
    let req2 = req_blob(SS_REQ_2);
    for i in 0..req1.len() {
        for x in [0x00u8, 0x01, 0x7f, 0x80, 0xff] {
            let mut t = req1.clone();
            t[i] = x;
            let _ = windows_server().step(&t, &users);
        }
    }
    for n in 0..req1.len() {
        assert!(windows_server().step(&req1[..n], &users).is_err());
    }
    let mut accepted = Vec::new();
    for i in 0..req2.len() {
        for x in [0x00u8, 0x01, 0x7f, 0x80, 0xff] {
            if req2[i] == x {
                continue;
            }
            let mut s = windows_server();
            s.step(&req1, &users).unwrap();
            let mut t = req2.clone();
            t[i] = x;
            if s.step(&t, &users).is_ok() {
                accepted.push((i, x));
            }
        }
    }
    // The NTLM MIC covers the whole AUTHENTICATE message and the mechListMIC the mechanism list:
    // the only byte that can change is the client's own negState (accept-incomplete, byte 12,
    // to accept-completed).
    assert_eq!(accepted, vec![(12, 0x00)]);
    for n in 0..req2.len() {
        let mut s = windows_server();
        s.step(&req1, &users).unwrap();
        assert!(s.step(&req2[..n], &users).is_err(), "prefix {n} accepted");
    }
}

fn kerberos_server() -> (ServerAuth, crate::krb5::testkdc::Mint) {
    kerberos_server_of(18)
}

/// A server whose keytab holds the service key of enctype `etype` (18 AES-256, 23 RC4-HMAC,
/// then accepted: `kerberos encryption types = all`), and a ticket to it.
fn kerberos_server_of(etype: i32) -> (ServerAuth, crate::krb5::testkdc::Mint) {
    use crate::krb5::keytab::{Keytab, KeytabEntry};
    use crate::krb5::testkdc::Mint;
    let now = 1_795_000_000;
    let key = if etype == 23 {
        vec![0x27; 16]
    } else {
        vec![0x42; 32]
    };
    let keytab = Keytab {
        entries: vec![KeytabEntry {
            components: vec!["cifs".into(), "fs.rs.test".into()],
            realm: "RS.TEST".into(),
            kvno: 2,
            enctype: etype,
            key: key.clone(),
        }],
    };
    let k = Kerberos {
        config: Arc::new(AcceptorConfig {
            keytab: Arc::new(keytab),
            realm: "RS.TEST".into(),
            skew_secs: 300,
            allow_rc4: etype == 23,
        }),
        replay: Arc::new(ReplayCache::new()),
        now_unix: now,
        fresh: Fresh {
            subkey: [0xa5; 32],
            seq: 1,
        },
    };
    let s = ServerAuth::new(&ServerConfig::default(), [1; 8], 0).with_kerberos(k);
    let m = if etype == 23 {
        Mint::rc4(&key, now)
    } else {
        Mint::new(&key, now)
    };
    (s, m)
}

#[test]
fn a_kerberos_ticket_listed_first_logs_on_in_one_round_trip_with_the_ap_rep() {
    use crate::krb5::{OID_KRB5, OID_MS_KRB5};
    let (mut s, m) = kerberos_server();
    let init = spnego::encode_init(
        &spnego::mech_type_list(&[OID_MS_KRB5, OID_KRB5, OID_NTLMSSP]),
        Some(&m.ap_req()),
        None,
    );
    let ServerStep::Done { token, result } = s.step(&init, &Users::with(&[])).unwrap() else {
        panic!("not done in one round trip")
    };
    assert_eq!(result.user, "alice");
    assert_eq!(result.domain, "RS.TEST");
    assert_eq!(result.session_key, vec![0xa5; 32]);
    let NegToken::Resp(resp) = spnego::decode(&token).unwrap() else {
        panic!()
    };
    assert_eq!(resp.neg_state, Some(neg_state::ACCEPT_COMPLETED));
    assert_eq!(resp.supported_mech.as_deref(), Some(OID_MS_KRB5));
    assert_eq!(m.read_ap_rep(&resp.response_token.unwrap()), vec![0xa5; 32]);
}

#[test]
fn a_bad_kerberos_ticket_fails_the_logon_and_ntlm_first_still_picks_ntlm() {
    use crate::krb5::OID_KRB5;
    let (mut s, mut m) = kerberos_server();
    m.end_time = m.ctime - 3600;
    let init = spnego::encode_init(
        &spnego::mech_type_list(&[OID_KRB5, OID_NTLMSSP]),
        Some(&m.ap_req()),
        None,
    );
    assert!(matches!(
        s.step(&init, &Users::with(&[])),
        Err(AuthError::Kerberos(_))
    ));
    let (mut s, _) = kerberos_server();
    let mut c = ClientAuth::new("bob", "", "pw");
    let first = c.step(None, [0; 24], 0).unwrap().unwrap();
    assert!(matches!(
        s.step(&first, &Users::with(&[("bob", "pw")])),
        Ok(ServerStep::Continue(_))
    ));
}

#[test]
fn the_negotiate_hint_lists_kerberos_first_when_a_keytab_is_configured() {
    let NegToken::Init(init) = spnego::decode(&spnego::negotiate_hint_for(true)).unwrap() else {
        panic!()
    };
    assert_eq!(
        init.mech_types,
        vec![
            crate::krb5::OID_MS_KRB5.to_vec(),
            crate::krb5::OID_KRB5.to_vec(),
            OID_NTLMSSP.to_vec()
        ]
    );
}

#[test]
fn kerberos_listed_after_another_mechanism_exchanges_mech_list_mics_after_the_ap_req() {
    use crate::krb5::{mic, OID_KRB5};
    // NEGOEX (1.3.6.1.4.1.311.2.2.30), which Windows can list first.
    const OID_NEGOEX: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x1e];
    let (mut s, m) = kerberos_server();
    let mechs = spnego::mech_type_list(&[OID_NEGOEX, OID_KRB5, OID_NTLMSSP]);
    // The optimistic token is NEGOEX's: dropped, and a MIC is asked for.
    let init = spnego::encode_init(&mechs, Some(b"negoex token"), None);
    let ServerStep::Continue(t) = s.step(&init, &Users::with(&[])).unwrap() else {
        panic!()
    };
    let NegToken::Resp(r) = spnego::decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(r.neg_state, Some(neg_state::REQUEST_MIC));
    assert_eq!(r.supported_mech.as_deref(), Some(OID_KRB5));
    // The AP-REQ: the AP-REP comes back with the server's MIC, not yet complete.
    let ap_req = spnego::encode_resp(&NegTokenResp {
        response_token: Some(m.ap_req()),
        ..Default::default()
    });
    let ServerStep::Continue(t) = s.step(&ap_req, &Users::with(&[])).unwrap() else {
        panic!("done without the client's MIC")
    };
    let NegToken::Resp(r) = spnego::decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(r.neg_state, Some(neg_state::ACCEPT_INCOMPLETE));
    let subkey = m.read_ap_rep(&r.response_token.unwrap());
    let server_mic = r.mech_list_mic.unwrap();
    mic::verify(&subkey, 18, mic::USAGE_ACCEPTOR_SIGN, &mechs, &server_mic).unwrap();
    // The client's MIC: a wrong one fails the logon, a right one completes it.
    let client_mic = |key: &[u8]| {
        spnego::encode_resp(&NegTokenResp {
            neg_state: Some(neg_state::ACCEPT_COMPLETED),
            mech_list_mic: Some(
                mic::make(
                    key,
                    18,
                    mic::USAGE_INITIATOR_SIGN,
                    mic::FLAG_ACCEPTOR_SUBKEY,
                    77,
                    &mechs,
                )
                .unwrap(),
            ),
            ..Default::default()
        })
    };
    let mut bad = kerberos_server().0;
    let _ = bad.step(&init, &Users::with(&[])).unwrap();
    let _ = bad.step(&ap_req_again(&m), &Users::with(&[])).unwrap();
    assert!(matches!(
        bad.step(&client_mic(&[0u8; 32]), &Users::with(&[])),
        Err(AuthError::BadMic)
    ));
    let ServerStep::Done { token, result } =
        s.step(&client_mic(&subkey), &Users::with(&[])).unwrap()
    else {
        panic!("not done after the client's MIC")
    };
    assert_eq!(result.session_key, subkey);
    let NegToken::Resp(r) = spnego::decode(&token).unwrap() else {
        panic!()
    };
    assert_eq!(r.neg_state, Some(neg_state::ACCEPT_COMPLETED));
}

/// A fresh AP-REQ of the same ticket (a new authenticator, so the replay cache lets it in).
fn ap_req_again(m: &crate::krb5::testkdc::Mint) -> Vec<u8> {
    let mut m = m.clone();
    m.cusec += 1;
    spnego::encode_resp(&NegTokenResp {
        response_token: Some(m.ap_req()),
        ..Default::default()
    })
}

#[test]
fn a_bare_kerberos_token_without_spnego_is_answered_with_a_bare_ap_rep() {
    let (mut s, m) = kerberos_server();
    let ServerStep::Done { token, result } = s.step(&m.ap_req(), &Users::with(&[])).unwrap() else {
        panic!()
    };
    assert_eq!(result.user, "alice");
    assert_eq!(m.read_ap_rep(&token), result.session_key);
    // Without a keytab the same token is refused.
    let mut ntlm_only = ServerAuth::new(&ServerConfig::default(), [1; 8], 0);
    assert!(ntlm_only.step(&m.ap_req(), &Users::with(&[])).is_err());
}

#[test]
fn ringshares_client_logs_on_with_a_ticket_and_takes_the_acceptor_subkey() {
    let (mut s, m) = kerberos_server();
    // The ticket the test KDC made, as a credential cache would hold it.
    let cred = c_cred(&m);
    let mut c = ClientAuth::kerberos(cred);
    let now = (1_795_000_000u64 + 11_644_473_600) * 10_000_000;
    let init = c.step(None, [7; 24], now).unwrap().unwrap();
    let ServerStep::Done { token, result } = s.step(&init, &Users::with(&[])).unwrap() else {
        panic!("not done in one round trip")
    };
    assert_eq!(result.user, "alice");
    assert_eq!(c.step(Some(&token), [0; 24], now).unwrap(), None);
    assert_eq!(c.session_key().unwrap().to_vec(), result.session_key[..16]);
    // A server answer that is no AP-REP for this ticket fails the logon.
    let mut c = ClientAuth::kerberos(crate::krb5::ccache::Credential {
        key: (18, vec![0x99; 32]),
        ..c_cred(&m)
    });
    c.step(None, [7; 24], now).unwrap();
    assert!(c.step(Some(&token), [0; 24], now).is_err());
}

fn c_cred(m: &crate::krb5::testkdc::Mint) -> crate::krb5::ccache::Credential {
    let ap_req = m.ap_req();
    let (_, der) = crate::krb5::gss_unwrap(&ap_req).unwrap();
    let req: picky_krb::messages::ApReq = picky_asn1_der::from_bytes(der).unwrap();
    crate::krb5::ccache::Credential {
        client: (vec!["alice".into()], "RS.TEST".into()),
        server: (vec!["cifs".into(), "fs.rs.test".into()], "RS.TEST".into()),
        key: (18, m.session_key.clone()),
        times: (m.auth_time, m.auth_time, m.end_time),
        ticket: picky_asn1_der::to_vec(&req.0.ticket.0).unwrap(),
    }
}

#[test]
fn an_rc4_session_after_another_mechanism_exchanges_rfc_4757_mech_list_mics() {
    use crate::krb5::{mic, OID_KRB5};
    const OID_NEGOEX: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x1e];
    let (mut s, m) = kerberos_server_of(23);
    let mechs = spnego::mech_type_list(&[OID_NEGOEX, OID_KRB5, OID_NTLMSSP]);
    let init = spnego::encode_init(&mechs, None, None);
    let ServerStep::Continue(_) = s.step(&init, &Users::with(&[])).unwrap() else {
        panic!()
    };
    let ServerStep::Continue(t) = s.step(&ap_req_again(&m), &Users::with(&[])).unwrap() else {
        panic!("done without the client's MIC")
    };
    let NegToken::Resp(r) = spnego::decode(&t).unwrap() else {
        panic!()
    };
    // The session key is the client's RC4 subkey, given back in the AP-REP.
    let key = m.read_ap_rep(&r.response_token.unwrap());
    assert_eq!(key, vec![0x34; 16]);
    let server_mic = r.mech_list_mic.unwrap();
    assert_eq!(
        mic::verify_rc4(&key, mic::Sender::Acceptor, &mechs, &server_mic),
        Ok(1)
    );
    let client_mic = |key: &[u8], sender| {
        spnego::encode_resp(&NegTokenResp {
            neg_state: Some(neg_state::ACCEPT_COMPLETED),
            mech_list_mic: Some(mic::make_rc4(key, sender, 77, &mechs)),
            ..Default::default()
        })
    };
    // An RFC 4121 token, the server's own token sent back, or another key: refused.
    for bad_mic in [
        spnego::encode_resp(&NegTokenResp {
            mech_list_mic: Some(
                mic::make(&key, 23, mic::USAGE_INITIATOR_SIGN, 0, 77, &mechs)
                    .unwrap_or_else(|_| vec![4, 4]),
            ),
            ..Default::default()
        }),
        client_mic(&key, mic::Sender::Acceptor),
        client_mic(&[0x35; 16], mic::Sender::Initiator),
    ] {
        let mut bad = kerberos_server_of(23).0;
        let _ = bad.step(&init, &Users::with(&[])).unwrap();
        let _ = bad.step(&ap_req_again(&m), &Users::with(&[])).unwrap();
        assert!(matches!(
            bad.step(&bad_mic, &Users::with(&[])),
            Err(AuthError::BadMic)
        ));
    }
    let ServerStep::Done { result, .. } = s
        .step(&client_mic(&key, mic::Sender::Initiator), &Users::with(&[]))
        .unwrap()
    else {
        panic!("not done after the client's MIC")
    };
    assert_eq!(result.session_key, key);
}
