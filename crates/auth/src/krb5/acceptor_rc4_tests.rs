//! RC4-HMAC tickets (enctype 23, RFC 4757) against the acceptor: refused by default, accepted
//! when `kerberos encryption types` allows them, and each check made to fail on purpose; and a
//! ticket MIT krb5 1.20 issued for an RC4-only service.

use std::sync::Arc;

use super::acceptor::{accept, AcceptorConfig};
use super::keytab::{Keytab, KeytabEntry};
use super::replay::ReplayCache;
use super::testkdc::{minimal_pac_of, Mint};
use super::testkdc::{refusal, try_accept, FRESH, NOW};
use super::RC4_REFUSED;
use crate::AuthError;

/// The NT hash of the service account's password.
const RC4_KEY: [u8; 16] = [0x27; 16];

fn rc4_entry(key: &[u8]) -> KeytabEntry {
    KeytabEntry {
        components: vec!["cifs".into(), "fs.rs.test".into()],
        realm: "RS.TEST".into(),
        kvno: 2,
        enctype: 23,
        key: key.to_vec(),
    }
}

fn config(allow_rc4: bool, entries: Vec<KeytabEntry>) -> AcceptorConfig {
    AcceptorConfig {
        keytab: Arc::new(Keytab { entries }),
        realm: "RS.TEST".into(),
        skew_secs: 300,
        allow_rc4,
    }
}

/// An acceptor that takes RC4 (`kerberos encryption types = all`).
fn all() -> AcceptorConfig {
    config(true, vec![rc4_entry(&RC4_KEY)])
}

#[test]
fn an_rc4_ticket_is_accepted_when_allowed_and_the_ap_rep_gives_the_initiators_subkey_back() {
    let m = Mint::rc4(&RC4_KEY, NOW);
    let a = try_accept(&all(), &m).unwrap();
    assert_eq!(a.client_name(), "alice@RS.TEST");
    // The session key is the client's 16-byte subkey; the AP-REP (RC4-encrypted with the
    // ticket's session key) carries it back as the acceptor subkey, of type 23.
    assert_eq!(a.session_key, vec![0x34; 16]);
    assert_eq!(a.key_etype, 23);
    assert_eq!(m.read_ap_rep_key(&a.token), Some((23, vec![0x34; 16])));
}

#[test]
fn an_rc4_ticket_is_refused_by_default_with_the_line_that_says_to_give_aes_keys() {
    let why = refusal(
        &config(false, vec![rc4_entry(&RC4_KEY)]),
        &Mint::rc4(&RC4_KEY, NOW),
    );
    assert_eq!(why, RC4_REFUSED);
    assert!(why.contains("give the service account AES keys"), "{why}");
    // An AES ticket whose session key is RC4 is refused as well.
    let mut m = Mint::new(&[0x42; 32], NOW);
    m.session_etype = 23;
    m.session_key = vec![0x52; 16];
    m.subkey = None;
    let aes = KeytabEntry {
        enctype: 18,
        key: vec![0x42; 32],
        ..rc4_entry(&[])
    };
    assert!(refusal(&config(false, vec![aes.clone()]), &m).starts_with(RC4_REFUSED));
    assert!(try_accept(&config(true, vec![aes]), &m).is_ok());
}

#[test]
fn an_rc4_ticket_under_a_wrong_key_is_refused() {
    let why = refusal(&all(), &Mint::rc4(&[0x28; 16], NOW));
    assert!(why.contains("do not decrypt"), "{why}");
    assert!(why.contains("enctype 23"), "{why}");
}

#[test]
fn an_rc4_ticket_or_authenticator_with_a_corrupted_checksum_is_refused() {
    let token = Mint::rc4(&RC4_KEY, NOW).ap_req();
    // The ticket's enc-part starts with its 16-byte HMAC-MD5 checksum; the authenticator's
    // cipher text is the token's tail, its checksum 16 bytes before the encrypted part ends.
    let ticket_cipher = find_cipher(&token, 0);
    let auth_cipher = find_cipher(&token, ticket_cipher + 1);
    for (at, want) in [
        (ticket_cipher, "do not decrypt"),
        (auth_cipher, "authenticator does not decrypt"),
    ] {
        let mut t = token.clone();
        t[at + 3] ^= 0x01;
        match accept(&all(), &t, NOW, &FRESH, &ReplayCache::new()) {
            Err(AuthError::Kerberos(why)) => assert!(why.contains(want), "{why}"),
            other => panic!("corrupted checksum accepted: {other:?}"),
        }
    }
}

/// Where the next RC4-HMAC cipher text (an OCTET STRING inside [2] of an EncryptedData whose
/// etype is 23) starts in `token`, from `from`.
fn find_cipher(token: &[u8], from: usize) -> usize {
    // etype [0] INTEGER 23 ... cipher [2] OCTET STRING: a0 03 02 01 17, then (kvno) a2 len 04.
    let etype = [0xa0, 0x03, 0x02, 0x01, 0x17];
    let at = from
        + token[from..]
            .windows(etype.len())
            .position(|w| w == etype)
            .expect("an RC4 EncryptedData");
    let octets = at + token[at..].iter().position(|b| *b == 0x04).unwrap();
    // 04, then a long or short length.
    let len_bytes = if token[octets + 1] & 0x80 != 0 {
        1 + (token[octets + 1] & 0x7f) as usize
    } else {
        1
    };
    octets + 1 + len_bytes
}

#[test]
fn a_forged_pac_checksum_on_an_rc4_ticket_is_refused() {
    let mut m = Mint::rc4(&RC4_KEY, NOW);
    m.pac = Some(minimal_pac_of(23, &RC4_KEY, "alice", m.auth_time));
    assert!(try_accept(&all(), &m).unwrap().pac.is_some());
    // HMAC-MD5 with another key: forged, or copied from another service's ticket.
    m.pac = Some(minimal_pac_of(23, &[0x29; 16], "alice", m.auth_time));
    assert!(refusal(&all(), &m).contains("forged"));
    // A signature of the AES type on a ticket of an RC4 key.
    m.pac = Some(minimal_pac_of(18, &[0x42; 32], "alice", m.auth_time));
    assert!(refusal(&all(), &m).contains("does not fit a key of enctype 23"));
}

#[test]
fn an_rc4_ticket_without_an_initiator_subkey_makes_the_tickets_key_the_session_key() {
    let mut m = Mint::rc4(&RC4_KEY, NOW);
    m.subkey = None;
    let a = try_accept(&all(), &m).unwrap();
    assert_eq!(a.session_key, vec![0x52; 16]);
    assert_eq!(m.read_ap_rep_key(&a.token), None);
}

#[test]
fn an_rc4_ticket_with_an_aes_subkey_gets_a_fresh_aes_acceptor_subkey() {
    // What MIT's initiator sends (its subkey takes the first permitted enctype).
    let mut m = Mint::rc4(&RC4_KEY, NOW);
    m.subkey_etype = 18;
    m.subkey = Some(vec![0x33; 32]);
    let a = try_accept(&all(), &m).unwrap();
    assert_eq!(a.session_key, vec![0xa5; 32]);
    assert_eq!(m.read_ap_rep_key(&a.token), Some((18, vec![0xa5; 32])));
}

#[test]
fn an_rc4_subkey_of_the_wrong_length_is_refused() {
    let mut m = Mint::rc4(&RC4_KEY, NOW);
    m.subkey = Some(vec![0x34; 15]);
    assert!(refusal(&all(), &m).contains("15 bytes long"));
}

/// The lines of testdata/mit-1.20-rc4-ap-req.txt by name.
pub(crate) fn mit_capture(name: &str) -> String {
    include_str!("testdata/mit-1.20-rc4-ap-req.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::to_string))
        .unwrap_or_else(|| panic!("no {name} in the capture"))
}

#[test]
fn a_ticket_mit_krb5_issued_for_an_rc4_only_service_is_accepted_with_its_pac() {
    let keytab = Keytab::parse(&crate::unhex(&mit_capture("keytab"))).unwrap();
    assert_eq!(keytab.entries[0].enctype, 23);
    let now: i64 = mit_capture("now").parse().unwrap();
    let token = crate::unhex(&mit_capture("apreq"));
    let cfg = AcceptorConfig {
        keytab: Arc::new(keytab),
        ..all()
    };
    let a = accept(&cfg, &token, now, &FRESH, &ReplayCache::new()).unwrap();
    assert_eq!(a.client_name(), "alice@RS.TEST");
    // MIT 1.20 signs its PAC with the service key: HMAC-MD5 for an RC4 key.
    assert!(a.pac.is_some());
    // The session key is the one MIT's GSS reports (GSS_C_INQ_SSPI_SESSION_KEY).
    assert_eq!(a.session_key, crate::unhex(&mit_capture("ikey")));
    // Refused by default.
    let strong = AcceptorConfig {
        allow_rc4: false,
        ..cfg
    };
    match accept(&strong, &token, now, &FRESH, &ReplayCache::new()) {
        Err(AuthError::Kerberos(why)) => assert_eq!(why, RC4_REFUSED),
        other => panic!("{other:?}"),
    }
}
