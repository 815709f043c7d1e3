use super::*;
use crate::unhex;
use std::collections::HashMap;

/// A user table for tests, keyed by lower-cased name.
pub(crate) struct Users(pub HashMap<String, [u8; 16]>);

impl Users {
    pub(crate) fn with(pairs: &[(&str, &str)]) -> Self {
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

// [MS-NLMP] 4.2.1 common values and 4.2.4 NTLMv2 authentication: user "User", domain "Domain",
// password "Password", server challenge 0123456789abcdef, client challenge aa * 8, time 0,
// RandomSessionKey 55 * 16.
const SPEC_SERVER_CHALLENGE: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];

/// [MS-NLMP] 4.2.4.3 CHALLENGE_MESSAGE.
const SPEC_CHALLENGE: &str = "\
    4e544c4d53535000020000000c000c003800000033828ae20123456789abcdef\
    00000000000000002400240044000000060070170000000f5300650072007600\
    6500720002000c0044006f006d00610069006e0001000c005300650072007600\
    6500720000000000";

/// [MS-NLMP] 4.2.4.3 AUTHENTICATE_MESSAGE.
const SPEC_AUTHENTICATE: &str = "\
    4e544c4d5353500003000000180018006c00000054005400840000000c000c00\
    480000000800080054000000100010005c00000010001000d8000000358288e2\
    0501280a0000000f44006f006d00610069006e00550073006500720043004f00\
    4d005000550054004500520086c35097ac9cec102554764a57cccc19aaaaaaaa\
    aaaaaaaa68cd0ab851e51c96aabc927bebef6a1c010100000000000000000000\
    00000000aaaaaaaaaaaaaaaa0000000002000c0044006f006d00610069006e00\
    01000c005300650072007600650072000000000000000000c5dad2544fc97990\
    94ce1ce90bc9d03e";

/// A NEGOTIATE as Windows sends it (from the SMB 3.1.1 capture in Microsoft's "anatomy of signing
/// and cryptographic keys" blog): flags 0xE2088297.
const WINDOWS_NEGOTIATE: &str =
    "4E544C4D5353500001000000978208E200000000000000000000000000000000060380250000000F";

fn spec_users() -> Users {
    Users::with(&[("User", "Password")])
}

#[test]
fn ntowfv2_matches_ms_nlmp_4_2_4_1_1() {
    let k = ntowf_v2(&crate::nt_hash("Password"), "User", "Domain");
    assert_eq!(k.to_vec(), unhex("0c868a403bfd7a93a3001ef22ef02e3f"));
}

#[test]
fn server_accepts_the_ms_nlmp_4_2_4_authenticate_message_and_unwraps_the_session_key() {
    let mut s = NtlmServer::new(&ServerConfig::default(), SPEC_SERVER_CHALLENGE, 0);
    s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    let r = s
        .authenticate(&unhex(SPEC_AUTHENTICATE), &spec_users())
        .unwrap();
    assert_eq!(r.kind, AuthKind::User);
    assert_eq!(
        (r.user.as_str(), r.domain.as_str(), r.workstation.as_str()),
        ("User", "Domain", "COMPUTER")
    );
    // ExportedSessionKey = RC4(SessionBaseKey 8de40cca..., c5dad254...) = RandomSessionKey.
    assert_eq!(r.session_key, [0x55; 16].to_vec());
}

#[test]
fn session_base_key_and_encrypted_key_match_ms_nlmp_4_2_4() {
    let rk = ntowf_v2(&crate::nt_hash("Password"), "User", "Domain");
    let proof = unhex("68cd0ab851e51c96aabc927bebef6a1c");
    let base = hmac_md5(&rk, &[&proof]);
    assert_eq!(base.to_vec(), unhex("8de40ccadbc14a82f15cb0ad0de95ca3"));
    assert_eq!(
        rc4_16(&base, &[0x55; 16]).to_vec(),
        unhex("c5dad2544fc9799094ce1ce90bc9d03e")
    );
}

#[test]
fn client_builds_the_ms_nlmp_4_2_4_responses() {
    let mut c = NtlmClient::new("User", "Domain", "Password", "COMPUTER");
    c.negotiate();
    let msg = c
        .authenticate(&unhex(SPEC_CHALLENGE), [0xaa; 8], [0x55; 16], 0)
        .unwrap();
    let spec = unhex(SPEC_AUTHENTICATE);
    for (at, what) in [
        (12, "LM"),
        (20, "NT"),
        (28, "domain"),
        (36, "user"),
        (44, "workstation"),
        (52, "key"),
    ] {
        let (mine, _) = field(&msg, at, what).unwrap();
        let (theirs, _) = field(&spec, at, what).unwrap();
        assert_eq!(mine, theirs, "{what}");
    }
    assert_eq!(c.session_key(), Some([0x55; 16]));
}

#[test]
fn server_rejects_the_spec_message_with_a_wrong_password() {
    let mut s = NtlmServer::new(&ServerConfig::default(), SPEC_SERVER_CHALLENGE, 0);
    s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    let users = Users::with(&[("user", "password")]);
    assert_eq!(
        s.authenticate(&unhex(SPEC_AUTHENTICATE), &users)
            .unwrap_err(),
        AuthError::WrongPassword("User".into())
    );
}

#[test]
fn server_rejects_the_spec_message_under_another_challenge() {
    let mut s = NtlmServer::new(&ServerConfig::default(), [9; 8], 0);
    s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    assert!(matches!(
        s.authenticate(&unhex(SPEC_AUTHENTICATE), &spec_users()),
        Err(AuthError::WrongPassword(_))
    ));
}

#[test]
fn challenge_answers_only_flags_the_client_offered() {
    let mut s = NtlmServer::new(&ServerConfig::default(), [1; 8], 0);
    let ch = s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    assert_eq!(le32(&ch, 20), Some(0xE28A8215));
    // A client offering only Unicode and NTLM gets no signing, key exchange or version.
    let mut neg = unhex(WINDOWS_NEGOTIATE);
    neg[12..16].copy_from_slice(&(UNICODE | NTLM).to_le_bytes());
    let mut s = NtlmServer::new(&ServerConfig::default(), [1; 8], 0);
    let ch = s.challenge(&neg).unwrap();
    assert_eq!(
        le32(&ch, 20),
        Some(UNICODE | NTLM | TARGET_INFO | TARGET_TYPE_SERVER)
    );
    assert_eq!(&ch[48..56], &[0; 8]);
}

#[test]
fn challenge_carries_the_configured_names_and_timestamp() {
    let cfg = ServerConfig {
        netbios_domain: "WORKGROUP".into(),
        netbios_computer: "RINGSHARE".into(),
        dns_domain: "example.test".into(),
        dns_computer: "ringshare.example.test".into(),
    };
    let mut s = NtlmServer::new(&cfg, [7; 8], 0x01D0_AECB_ADF5_A1A1);
    let ch = s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    assert_eq!(&ch[24..32], &[7; 8]);
    let (name, _) = field(&ch, 12, "name").unwrap();
    assert_eq!(name, utf16le("RINGSHARE").as_slice());
    let (info, _) = field(&ch, 40, "info").unwrap();
    let pairs = av_pairs(info).unwrap();
    let get = |id| {
        pairs
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v.to_vec())
            .unwrap()
    };
    assert_eq!(get(AV_NB_DOMAIN), utf16le("WORKGROUP"));
    assert_eq!(get(AV_NB_COMPUTER), utf16le("RINGSHARE"));
    assert_eq!(get(AV_DNS_DOMAIN), utf16le("example.test"));
    assert_eq!(get(AV_DNS_COMPUTER), utf16le("ringshare.example.test"));
    assert_eq!(
        get(AV_TIMESTAMP),
        0x01D0_AECB_ADF5_A1A1u64.to_le_bytes().to_vec()
    );
}

fn round_trip(
    user: &str,
    domain: &str,
    password: &str,
    users: &Users,
) -> (Result<AuthResult, AuthError>, NtlmClient) {
    let mut c = NtlmClient::new(user, domain, password, "BENCH");
    let mut s = NtlmServer::new(
        &ServerConfig {
            netbios_computer: "RS".into(),
            ..Default::default()
        },
        [3; 8],
        132_000_000_000_000_000,
    );
    let ch = s.challenge(&c.negotiate()).unwrap();
    let auth = c
        .authenticate(&ch, [4; 8], [5; 16], 132_000_000_000_000_001)
        .unwrap();
    (s.authenticate(&auth, users), c)
}

#[test]
fn client_and_server_agree_on_the_session_key_with_the_right_password() {
    let users = Users::with(&[("bench", "s3cret")]);
    let (r, c) = round_trip("Bench", "WORKGROUP", "s3cret", &users);
    let r = r.unwrap();
    assert_eq!(r.kind, AuthKind::User);
    assert_eq!(r.user, "Bench");
    assert_eq!(r.domain, "WORKGROUP");
    assert_eq!(
        c.session_key().map(|k| k.to_vec()),
        Some(r.session_key.clone())
    );
    assert_eq!(r.session_key, [5; 16].to_vec());
}

#[test]
fn round_trip_rejects_a_wrong_password() {
    let users = Users::with(&[("bench", "s3cret")]);
    let (r, _) = round_trip("bench", "", "guess", &users);
    assert_eq!(r.unwrap_err(), AuthError::WrongPassword("bench".into()));
}

#[test]
fn round_trip_rejects_an_unknown_user() {
    let users = Users::with(&[("bench", "s3cret")]);
    let (r, _) = round_trip("mallory", "", "s3cret", &users);
    assert_eq!(r.unwrap_err(), AuthError::NoSuchUser("mallory".into()));
}

#[test]
fn round_trip_gives_anonymous_for_an_empty_user_and_password() {
    let users = Users::with(&[]);
    let (r, c) = round_trip("", "", "", &users);
    let r = r.unwrap();
    assert_eq!(r.kind, AuthKind::Anonymous);
    assert_eq!(c.session_key(), None);
}

#[test]
fn server_accepts_a_response_computed_with_an_empty_domain() {
    // Some clients compute NTOWFv2 with an empty domain while sending a domain name.
    let users = Users::with(&[("bench", "pw")]);
    let mut s2 = NtlmServer::new(&ServerConfig::default(), [3; 8], 5);
    let mut ch2 = s2.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    // Without a timestamp in the target info the client sends no MIC, so the domain field can
    // be rewritten afterwards: keep only MsvAvEOL.
    let info_off = le32(&ch2, 44).unwrap() as usize;
    ch2.truncate(info_off);
    ch2.extend_from_slice(&[0, 0, 0, 0]);
    ch2[40..42].copy_from_slice(&4u16.to_le_bytes());
    ch2[42..44].copy_from_slice(&4u16.to_le_bytes());
    let mut c2 = NtlmClient::new("bench", "", "pw", "WS");
    c2.negotiate();
    let mut auth2 = c2.authenticate(&ch2, [4; 8], [5; 16], 5).unwrap();
    let dom = utf16le("DOM");
    let off = auth2.len() as u32;
    auth2.extend_from_slice(&dom);
    auth2[28..30].copy_from_slice(&(dom.len() as u16).to_le_bytes());
    auth2[30..32].copy_from_slice(&(dom.len() as u16).to_le_bytes());
    auth2[32..36].copy_from_slice(&off.to_le_bytes());
    let r = s2.authenticate(&auth2, &users).unwrap();
    assert_eq!(r.domain, "DOM");
}

#[test]
fn server_rejects_a_tampered_mic() {
    let users = Users::with(&[("bench", "s3cret")]);
    let mut c = NtlmClient::new("bench", "", "s3cret", "WS");
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let ch = s.challenge(&c.negotiate()).unwrap();
    let mut auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    auth[MIC_OFFSET] ^= 1;
    assert_eq!(
        s.authenticate(&auth, &users).unwrap_err(),
        AuthError::BadMic
    );
}

#[test]
fn server_rejects_a_mic_over_a_different_negotiate() {
    // The MIC binds all three messages: a downgraded NEGOTIATE breaks it.
    let users = Users::with(&[("bench", "s3cret")]);
    let mut c = NtlmClient::new("bench", "", "s3cret", "WS");
    let mut neg = c.negotiate();
    neg[12] &= !(SIGN as u8); // an attacker strips SIGN on the way to the server
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let ch = s.challenge(&neg).unwrap();
    let auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    assert_eq!(
        s.authenticate(&auth, &users).unwrap_err(),
        AuthError::BadMic
    );
}

#[test]
fn server_refuses_ntlmv1_responses() {
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 0);
    s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    let mut b = Builder::new(MSG_AUTHENTICATE, 64);
    b.field(&[1; 24]);
    b.field(&[2; 24]);
    b.field(&[]);
    b.field(&utf16le("user"));
    b.field(&[]);
    b.field(&[]);
    b.u32(UNICODE | NTLM);
    let msg = b.finish();
    assert_eq!(
        s.authenticate(&msg, &spec_users()).unwrap_err(),
        AuthError::Unsupported("NTLMv1")
    );
}

#[test]
fn server_rejects_authenticate_before_challenge_and_twice() {
    let mut s = NtlmServer::new(&ServerConfig::default(), SPEC_SERVER_CHALLENGE, 0);
    assert!(matches!(
        s.authenticate(&unhex(SPEC_AUTHENTICATE), &spec_users()),
        Err(AuthError::Malformed(_))
    ));
    s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
    s.authenticate(&unhex(SPEC_AUTHENTICATE), &spec_users())
        .unwrap();
    assert!(matches!(
        s.authenticate(&unhex(SPEC_AUTHENTICATE), &spec_users()),
        Err(AuthError::Malformed(_))
    ));
}

#[test]
fn server_rejects_fields_pointing_past_the_end() {
    let spec = unhex(SPEC_AUTHENTICATE);
    for at in [12usize, 20, 28, 36, 44, 52] {
        let mut m = spec.clone();
        m[at + 4..at + 8].copy_from_slice(&(spec.len() as u32 - 2).to_le_bytes());
        let mut s = NtlmServer::new(&ServerConfig::default(), SPEC_SERVER_CHALLENGE, 0);
        s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
        assert!(
            matches!(
                s.authenticate(&m, &spec_users()),
                Err(AuthError::Malformed(_))
            ),
            "field at {at}"
        );
        let mut m = spec.clone();
        m[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut s = NtlmServer::new(&ServerConfig::default(), SPEC_SERVER_CHALLENGE, 0);
        s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
        assert!(
            matches!(
                s.authenticate(&m, &spec_users()),
                Err(AuthError::Malformed(_))
            ),
            "field at {at}"
        );
    }
}

#[test]
fn no_truncation_of_the_spec_messages_panics() {
    let spec = unhex(SPEC_AUTHENTICATE);
    for n in 0..spec.len() {
        let mut s = NtlmServer::new(&ServerConfig::default(), SPEC_SERVER_CHALLENGE, 0);
        s.challenge(&unhex(WINDOWS_NEGOTIATE)).unwrap();
        assert!(s.authenticate(&spec[..n], &spec_users()).is_err());
    }
    let neg = unhex(WINDOWS_NEGOTIATE);
    for n in 0..16 {
        let mut s = NtlmServer::new(&ServerConfig::default(), [0; 8], 0);
        assert!(s.challenge(&neg[..n]).is_err());
    }
    let ch = unhex(SPEC_CHALLENGE);
    for n in 0..ch.len() {
        let mut c = NtlmClient::new("User", "Domain", "Password", "X");
        c.negotiate();
        let _ = c.authenticate(&ch[..n], [0; 8], [0; 16], 0);
    }
}

#[test]
fn signing_keys_match_the_published_ntlmv2_example() {
    // Microsoft's "anatomy of signing and cryptographic keys" blog, NTLMv2 SessionKey example:
    // ExportedSessionKey 270E1BA896585EEB7AF3472D3B4C75A7 gives server signing key
    // E1BD8B416B0B709D295E12F2CF18E6C5 and client signing key D43F36C44BCE0630250A09EA0C2E8C2C.
    let k: [u8; 16] = unhex("270E1BA896585EEB7AF3472D3B4C75A7")
        .try_into()
        .unwrap();
    let sec = SessionSecurity::new(&k, 0xE2888215);
    assert_eq!(
        sec.server_sign.to_vec(),
        unhex("E1BD8B416B0B709D295E12F2CF18E6C5")
    );
    assert_eq!(
        sec.client_sign.to_vec(),
        unhex("D43F36C44BCE0630250A09EA0C2E8C2C")
    );
}

#[test]
fn upcase_does_not_expand_characters() {
    assert_eq!(upcase("straße"), "STRAßE");
    assert_eq!(upcase("émile"), "ÉMILE");
}

/// A domain that knows one user's password, as a domain controller reached through winbind
/// does: it recomputes the NTLMv2 response and gives back the session base key.
struct Domain {
    name: &'static str,
    user: &'static str,
    password: &'static str,
}

impl UserLookup for Domain {
    fn nt_hash(&self, _user: &str) -> Option<[u8; 16]> {
        None
    }

    fn domain_ntlm(&self, r: &crate::DomainNtlm<'_>) -> Option<Result<[u8; 16], String>> {
        if !r.domain.eq_ignore_ascii_case(self.name) {
            return None;
        }
        if !r.user.eq_ignore_ascii_case(self.user) {
            return Some(Err("NT_STATUS_NO_SUCH_USER".into()));
        }
        Some(
            check_v2(&crate::nt_hash(self.password), r)
                .ok_or_else(|| "NT_STATUS_WRONG_PASSWORD".to_string()),
        )
    }
}

/// The domain of these tests: RSAD, which knows alice's password.
const RSAD_ALICE: Domain = Domain {
    name: "RSAD",
    user: "alice",
    password: "d0main-pw",
};

#[test]
fn a_domain_users_response_is_checked_by_the_domain_and_keeps_its_key_exchange_and_mic() {
    let domain = RSAD_ALICE;
    let mut c = NtlmClient::new("alice", "RSAD", "d0main-pw", "WS");
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let ch = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    let r = s.authenticate(&auth, &domain).unwrap();
    assert_eq!((r.user.as_str(), r.domain.as_str()), ("alice", "RSAD"));
    assert_eq!(r.session_key, c.session_key().unwrap().to_vec());

    let mut c = NtlmClient::new("alice", "RSAD", "not-it", "WS");
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let ch = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    let e = s.authenticate(&auth, &domain).unwrap_err();
    assert_eq!(
        e,
        AuthError::Domain("RSAD\\alice".into(), "NT_STATUS_WRONG_PASSWORD".into())
    );

    // Another domain's user is a local account: unknown here.
    let mut c = NtlmClient::new("bob", "RSMEMBER", "pw", "WS");
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let ch = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    assert_eq!(
        s.authenticate(&auth, &domain).unwrap_err(),
        AuthError::NoSuchUser("bob".into())
    );
}

/// An answer the domain gave earlier, for exactly one request.
struct Answered(crate::DomainNtlmRequest, Result<[u8; 16], String>);

impl UserLookup for Answered {
    fn nt_hash(&self, _user: &str) -> Option<[u8; 16]> {
        None
    }

    fn domain_ntlm(&self, r: &crate::DomainNtlm<'_>) -> Option<Result<[u8; 16], String>> {
        Some(if self.0.is(r) {
            self.1.clone()
        } else {
            Err("not the request asked".into())
        })
    }
}

#[test]
fn the_domain_can_be_asked_before_the_authenticate_is_stepped_and_its_answer_finishes_it() {
    let domain = RSAD_ALICE;
    let mut c = NtlmClient::new("alice", "RSAD", "d0main-pw", "WS");
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let negotiate = c.negotiate();
    assert_eq!(
        s.domain_request(&negotiate),
        None,
        "nothing to ask before the CHALLENGE"
    );
    let ch = s.challenge(&negotiate).unwrap();
    let auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    let asked = s
        .domain_request(&auth)
        .expect("an NTLMv2 response of a named user");
    assert_eq!(
        (asked.user.as_str(), asked.domain.as_str()),
        ("alice", "RSAD")
    );
    assert_eq!(
        (asked.workstation.as_str(), asked.challenge),
        ("WS", [3; 8])
    );
    let answer = domain.domain_ntlm(&asked.as_request()).unwrap();
    // Asking changed nothing: the exchange finishes with the answer given back.
    let r = s.authenticate(&auth, &Answered(asked, answer)).unwrap();
    assert_eq!(r.session_key, c.session_key().unwrap().to_vec());
    assert!(r.by_domain);
    assert_eq!(
        s.domain_request(&auth),
        None,
        "nothing to ask once finished"
    );

    // An answer to another request is not taken for this one.
    let mut c = NtlmClient::new("alice", "RSAD", "d0main-pw", "WS");
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let ch = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    let mut other = s.domain_request(&auth).unwrap();
    other.challenge = [9; 8];
    let e = s
        .authenticate(&auth, &Answered(other, Ok([0; 16])))
        .unwrap_err();
    assert!(matches!(e, AuthError::Domain(..)), "{e:?}");
}

#[test]
fn nothing_is_asked_of_the_domain_for_anonymous_or_ntlmv1_or_garbage() {
    let mut s = NtlmServer::new(&ServerConfig::default(), [3; 8], 99);
    let mut c = NtlmClient::new("", "", "", "WS");
    let ch = s.challenge(&c.negotiate()).unwrap();
    let anon = c.authenticate(&ch, [4; 8], [5; 16], 99).unwrap();
    assert_eq!(s.domain_request(&anon), None);
    for n in 0..anon.len() {
        assert_eq!(s.domain_request(&anon[..n]), None);
    }
}
