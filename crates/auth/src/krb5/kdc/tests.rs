//! The local KDC against a client written here from RFC 4120 (AS-REQ with and without
//! PA-ENC-TIMESTAMP, TGS-REQ with the TGT): the service ticket it issues is accepted by the
//! acceptor, and every check is made to fail on purpose.

use std::sync::Arc;

use picky_asn1::wrapper::{
    Asn1SequenceOf, ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag2,
    ExplicitContextTag3, ExplicitContextTag4, ExplicitContextTag5, ExplicitContextTag6,
    ExplicitContextTag7, ExplicitContextTag8, OctetStringAsn1, Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{
    Authenticator, AuthenticatorInner, Checksum, EtypeInfo2, PaData, PaEncTsEnc, Ticket,
};
use picky_krb::messages::{
    ApReqInner, AsRep, EncAsRepPart, EncTgsRepPart, KdcReq, KdcReqBody, KrbError, TgsRep,
};

use super::*;
use crate::krb5::acceptor::{accept, AcceptorConfig};
use crate::krb5::initiator::{self, AuthenticatorParams};
use crate::krb5::keytab::{Keytab, KeytabEntry};
use crate::krb5::replay::ReplayCache;
use crate::krb5::testkdc::{FRESH, NOW};
use crate::krb5::{checksum_suite, iakerb::krb_error_code, unix_time};

const REALM: &str = "FS";
const PASSWORD: &str = "correct horse";

fn kdc() -> LocalKdc {
    LocalKdc {
        realm: REALM.into(),
        keys: KdcKeys {
            krbtgt: vec![0x71; 32],
            service: vec![0x72; 32],
            kvno: 1,
        },
        allow_rc4: false,
        skew_secs: 300,
        ticket_life_secs: TICKET_LIFE_SECS,
    }
}

/// alice has AES keys; bob only his NT hash (RC4-HMAC); carol is disabled or unknown.
struct Users;

fn alice_key(e: i32) -> Vec<u8> {
    string_to_key(e, PASSWORD, &salt(REALM, "alice")).unwrap()
}

const BOB_NT: [u8; 16] = [0x0b; 16];

impl Principals for Users {
    fn keys(&self, name: &str) -> Option<Vec<UserKey>> {
        let k = |etype, key, salt: &str| UserKey {
            etype,
            key,
            salt: salt.into(),
            kvno: 1,
        };
        match name {
            "alice" => Some(vec![
                k(etype::AES256, alice_key(etype::AES256), "FSalice"),
                k(etype::AES128, alice_key(etype::AES128), "FSalice"),
            ]),
            "bob" => Some(vec![k(etype::RC4_HMAC, BOB_NT.to_vec(), "")]),
            _ => None,
        }
    }
}

const FRESH_KDC: Fresh = Fresh {
    session_key: [0x5e; 32],
};

/// What a client sends in an AS-REQ.
#[derive(Clone)]
struct AsAsk {
    user: String,
    realm: String,
    sname: Vec<String>,
    etypes: Vec<i32>,
    /// PA-ENC-TIMESTAMP: (enctype, key, time).
    timestamp: Option<(i32, Vec<u8>, i64)>,
    nonce: i64,
}

impl AsAsk {
    fn alice() -> AsAsk {
        AsAsk {
            user: "alice".into(),
            realm: REALM.into(),
            sname: vec!["krbtgt".into(), REALM.into()],
            etypes: vec![18, 17],
            timestamp: Some((18, alice_key(18), NOW)),
            nonce: 0x1234_5678,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let padata = self.timestamp.as_ref().map(|(e, key, t)| {
            let ts = PaEncTsEnc {
                patimestamp: ExplicitContextTag0::from(kerberos_time(*t)),
                pausec: Optional::from(Some(ExplicitContextTag1::from(int_asn1(7)))),
            };
            let sealed = seal(
                *e,
                key,
                1,
                &picky_asn1_der::to_vec(&ts).unwrap(),
                &FRESH_KDC,
            )
            .unwrap();
            let enc = encrypted(*e, None, sealed);
            ExplicitContextTag3::from(Asn1SequenceOf::from(vec![pa_data(
                2,
                picky_asn1_der::to_vec(&enc).unwrap(),
            )]))
        });
        let req = ApplicationTag::<_, 10>(KdcReq {
            pvno: ExplicitContextTag1::from(int_asn1(5)),
            msg_type: ExplicitContextTag2::from(int_asn1(10)),
            padata: Optional::from(padata),
            req_body: ExplicitContextTag4::from(body(
                Some(&[self.user.as_str()]),
                &self.realm,
                &self.sname,
                &self.etypes,
                self.nonce,
            )),
        });
        picky_asn1_der::to_vec(&req).unwrap()
    }
}

fn body(
    cname: Option<&[&str]>,
    realm: &str,
    sname: &[String],
    etypes: &[i32],
    nonce: i64,
) -> KdcReqBody {
    KdcReqBody {
        kdc_options: ExplicitContextTag0::from(initiator::flags(&[1])),
        cname: Optional::from(
            cname.map(|c| ExplicitContextTag1::from(initiator::principal_name(c, 1).unwrap())),
        ),
        realm: ExplicitContextTag2::from(initiator::gs(realm).unwrap()),
        sname: Optional::from(Some(ExplicitContextTag3::from(
            initiator::principal_name(sname, 2).unwrap(),
        ))),
        from: Optional::from(None),
        till: ExplicitContextTag5::from(kerberos_time(NOW + 24 * 3600)),
        rtime: Optional::from(None),
        nonce: ExplicitContextTag7::from(int_asn1(nonce)),
        etype: ExplicitContextTag8::from(Asn1SequenceOf::from(
            etypes
                .iter()
                .map(|e| int_asn1(i64::from(*e)))
                .collect::<Vec<_>>(),
        )),
        addresses: Optional::from(None),
        enc_authorization_data: Optional::from(None),
        additional_tickets: Optional::from(None),
    }
}

/// A ticket and its session key, as a client reads them from a KDC-REP.
struct Got {
    ticket: Vec<u8>,
    session: (i32, Vec<u8>),
    end: i64,
}

fn read_as_rep(rep: &[u8], key: (i32, &[u8]), nonce: i64) -> Got {
    let rep: AsRep = picky_asn1_der::from_bytes(rep).expect("an AS-REP");
    let plain = cipher(i64::from(key.0))
        .unwrap()
        .decrypt(key.1, 3, &rep.0.enc_part.0.cipher.0 .0)
        .expect("the AS-REP opens with the user's key");
    let part: EncAsRepPart = picky_asn1_der::from_bytes(&plain).unwrap();
    assert_eq!(int(&part.0.nonce.0).unwrap(), nonce);
    Got {
        ticket: picky_asn1_der::to_vec(&rep.0.ticket.0).unwrap(),
        session: (
            int(&part.0.key.0.key_type.0).unwrap() as i32,
            part.0.key.0.key_value.0 .0.clone(),
        ),
        end: unix_time(&part.0.end_time.0),
    }
}

fn tgt() -> Got {
    let rep = answer(&kdc(), &Users, &AsAsk::alice().encode(), NOW, &FRESH_KDC).unwrap();
    read_as_rep(&rep, (18, &alice_key(18)), 0x1234_5678)
}

/// What a client sends in a TGS-REQ.
#[derive(Clone)]
struct TgsAsk {
    tgt: Vec<u8>,
    session: (i32, Vec<u8>),
    client: String,
    realm: String,
    sname: Vec<String>,
    ctime: i64,
    subkey: Option<Vec<u8>>,
    /// Change the body after the checksum was made.
    tamper: bool,
    options: Vec<usize>,
}

impl TgsAsk {
    fn for_cifs(tgt: &Got) -> TgsAsk {
        TgsAsk {
            tgt: tgt.ticket.clone(),
            session: tgt.session.clone(),
            client: "alice".into(),
            realm: REALM.into(),
            sname: vec!["cifs".into(), "fs.example".into()],
            ctime: NOW,
            subkey: Some(vec![0x3c; 32]),
            tamper: false,
            options: vec![1],
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = body(None, &self.realm, &self.sname, &[18, 17], 99);
        b.kdc_options = ExplicitContextTag0::from(initiator::flags(&self.options));
        let raw = picky_asn1_der::to_vec(&b).unwrap();
        let mut sum = checksum_suite(self.session.0)
            .unwrap()
            .hasher()
            .checksum(&self.session.1, 6, &raw)
            .unwrap();
        sum.truncate(12);
        if self.tamper {
            b.nonce = ExplicitContextTag7::from(int_asn1(100));
        }
        let auth = ApplicationTag::<_, 2>(AuthenticatorInner {
            authenticator_vno: ExplicitContextTag0::from(int_asn1(5)),
            crealm: ExplicitContextTag1::from(initiator::gs(REALM).unwrap()),
            cname: ExplicitContextTag2::from(
                initiator::principal_name(&[self.client.as_str()], 1).unwrap(),
            ),
            cksum: Optional::from(Some(ExplicitContextTag3::from(Checksum {
                cksumtype: ExplicitContextTag0::from(int_asn1(if self.session.0 == 18 {
                    16
                } else {
                    15
                })),
                checksum: ExplicitContextTag1::from(OctetStringAsn1::from(sum)),
            }))),
            cusec: ExplicitContextTag4::from(int_asn1(1)),
            ctime: ExplicitContextTag5::from(kerberos_time(self.ctime)),
            subkey: Optional::from(
                self.subkey
                    .as_ref()
                    .map(|k| ExplicitContextTag6::from(encryption_key(18, k))),
            ),
            seq_number: Optional::from(None),
            authorization_data: Optional::from(None),
        });
        let _: &Authenticator = &auth;
        let sealed = seal(
            self.session.0,
            &self.session.1,
            7,
            &picky_asn1_der::to_vec(&auth).unwrap(),
            &FRESH_KDC,
        )
        .unwrap();
        let ticket: Ticket = picky_asn1_der::from_bytes(&self.tgt).unwrap();
        let ap = ApplicationTag::<_, 14>(ApReqInner {
            pvno: ExplicitContextTag0::from(int_asn1(5)),
            msg_type: ExplicitContextTag1::from(int_asn1(14)),
            ap_options: ExplicitContextTag2::from(initiator::flags(&[])),
            ticket: ExplicitContextTag3::from(ticket),
            authenticator: ExplicitContextTag4::from(encrypted(self.session.0, None, sealed)),
        });
        let req = ApplicationTag::<_, 12>(KdcReq {
            pvno: ExplicitContextTag1::from(int_asn1(5)),
            msg_type: ExplicitContextTag2::from(int_asn1(12)),
            padata: Optional::from(Some(ExplicitContextTag3::from(Asn1SequenceOf::from(vec![
                pa_data(1, picky_asn1_der::to_vec(&ap).unwrap()),
            ])))),
            req_body: ExplicitContextTag4::from(b),
        });
        picky_asn1_der::to_vec(&req).unwrap()
    }
}

fn read_tgs_rep(rep: &[u8], key: (i32, &[u8]), usage: i32) -> Got {
    let rep: TgsRep = picky_asn1_der::from_bytes(rep).expect("a TGS-REP");
    let plain = cipher(i64::from(key.0))
        .unwrap()
        .decrypt(key.1, usage, &rep.0.enc_part.0.cipher.0 .0)
        .expect("the TGS-REP opens with the subkey");
    let part: EncTgsRepPart = picky_asn1_der::from_bytes(&plain).unwrap();
    Got {
        ticket: picky_asn1_der::to_vec(&rep.0.ticket.0).unwrap(),
        session: (
            int(&part.0.key.0.key_type.0).unwrap() as i32,
            part.0.key.0.key_value.0 .0.clone(),
        ),
        end: unix_time(&part.0.end_time.0),
    }
}

fn refused(req: &[u8]) -> KdcError {
    answer(&kdc(), &Users, req, NOW, &FRESH_KDC).expect_err("the KDC must refuse")
}

/// The acceptor's configuration on a server whose service key is the KDC's.
fn acceptor() -> AcceptorConfig {
    let k = kdc();
    AcceptorConfig {
        keytab: Arc::new(Keytab {
            entries: vec![KeytabEntry {
                components: vec!["cifs".into(), "fs".into()],
                realm: REALM.into(),
                kvno: k.keys.kvno,
                enctype: 18,
                key: k.keys.service.clone(),
            }],
        }),
        realm: REALM.into(),
        skew_secs: 300,
        allow_rc4: false,
    }
}

#[test]
fn a_user_with_aes_keys_gets_a_tgt_then_a_cifs_ticket_that_the_acceptor_takes() {
    let k = kdc();
    // Without pre-authentication: PREAUTH_REQUIRED with the salt of each AES key.
    let mut first = AsAsk::alice();
    first.timestamp = None;
    let err = answer(&k, &Users, &first.encode(), NOW, &FRESH_KDC).unwrap();
    assert_eq!(krb_error_code(&err), Some(25));
    let e: KrbError = picky_asn1_der::from_bytes(&err).unwrap();
    let method: Asn1SequenceOf<PaData> =
        picky_asn1_der::from_bytes(&e.0.e_data.0.as_ref().unwrap().0 .0).unwrap();
    let info = method
        .0
        .iter()
        .find(|p| int(&p.padata_type.0).unwrap() == 19)
        .unwrap();
    let info: EtypeInfo2 = picky_asn1_der::from_bytes(&info.padata_data.0 .0).unwrap();
    let salts: Vec<(i64, String)> = info
        .0
        .iter()
        .map(|i| {
            let s = i.salt.0.as_ref().unwrap();
            (
                int(&i.etype.0).unwrap(),
                String::from_utf8(s.0.as_bytes().to_vec()).unwrap(),
            )
        })
        .collect();
    assert_eq!(salts, vec![(18, "FSalice".into()), (17, "FSalice".into())]);
    // With it: a TGT whose session key is AES-256, ten hours at most.
    let tgt = tgt();
    assert_eq!(tgt.session.0, 18);
    assert_eq!(tgt.end, NOW + TICKET_LIFE_SECS);
    // The TGS-REQ: a ticket for cifs/, the reply under the subkey.
    let ask = TgsAsk::for_cifs(&tgt);
    let rep = answer(&k, &Users, &ask.encode(), NOW + 1, &FRESH_KDC).unwrap();
    let svc = read_tgs_rep(&rep, (18, &[0x3c; 32]), 9);
    // Without a subkey, under the TGT's session key.
    let mut no_sub = ask.clone();
    no_sub.subkey = None;
    let rep = answer(&k, &Users, &no_sub.encode(), NOW + 1, &FRESH_KDC).unwrap();
    read_tgs_rep(&rep, (tgt.session.0, &tgt.session.1), 8);
    // The acceptor takes the ticket.
    let params = AuthenticatorParams {
        client: vec!["alice".into()],
        realm: REALM.into(),
        ctime: NOW,
        cusec: 5,
        subkey: Some((18, vec![0x44; 32])),
        seq: 1,
        bindings: [0; 16],
        gss_flags: 0x22,
        mutual: true,
    };
    let ap = initiator::ap_req(&svc.ticket, (svc.session.0, &svc.session.1), &params).unwrap();
    let acc = accept(&acceptor(), &ap, NOW, &FRESH, &ReplayCache::new()).unwrap();
    assert_eq!(acc.client_name(), "alice@FS");
    assert_eq!(acc.service, "cifs/fs.example@FS");
    // host/ too, and an AS-REQ straight for cifs/.
    let mut host = TgsAsk::for_cifs(&tgt);
    host.sname = vec!["host".into(), "fs".into()];
    assert!(answer(&k, &Users, &host.encode(), NOW, &FRESH_KDC).is_ok());
    let mut direct = AsAsk::alice();
    direct.sname = vec!["cifs".into(), "fs".into()];
    direct.etypes = vec![17];
    direct.timestamp = Some((17, alice_key(17), NOW));
    let rep = answer(&k, &Users, &direct.encode(), NOW, &FRESH_KDC).unwrap();
    let got = read_as_rep(&rep, (17, &alice_key(17)), 0x1234_5678);
    assert_eq!(got.session.0, 17);
}

#[test]
fn a_wrong_password_is_preauth_failed_and_names_the_user() {
    let mut a = AsAsk::alice();
    let wrong = string_to_key(18, "wrong", "FSalice").unwrap();
    a.timestamp = Some((18, wrong, NOW));
    let e = refused(&a.encode());
    assert_eq!(e.code, code::PREAUTH_FAILED);
    assert!(e.why.contains("wrong password for alice@FS"), "{e}");
}

#[test]
fn an_unknown_user_is_refused_before_any_salt_is_told() {
    let mut a = AsAsk::alice();
    a.user = "mallory".into();
    a.timestamp = None;
    let e = refused(&a.encode());
    assert_eq!(e.code, code::C_PRINCIPAL_UNKNOWN);
    assert!(e.why.contains("unknown user mallory@FS"), "{e}");
    a.user = "alice@elsewhere".into();
    assert_eq!(refused(&a.encode()).code, code::C_PRINCIPAL_UNKNOWN);
}

#[test]
fn a_user_with_only_the_nt_hash_is_told_to_set_the_password_again_unless_rc4_is_allowed() {
    let mut a = AsAsk::alice();
    a.user = "bob".into();
    a.etypes = vec![18, 17, 23];
    a.timestamp = None;
    let e = refused(&a.encode());
    assert_eq!(e.code, code::ETYPE_NOSUPP);
    assert!(e.why.contains("ringshare user add bob"), "{e}");
    // With RC4 allowed, the NT hash is bob's RC4-HMAC key.
    let mut k = kdc();
    k.allow_rc4 = true;
    let err = answer(&k, &Users, &a.encode(), NOW, &FRESH_KDC).unwrap();
    assert_eq!(krb_error_code(&err), Some(25));
    a.timestamp = Some((23, BOB_NT.to_vec(), NOW));
    let rep = answer(&k, &Users, &a.encode(), NOW, &FRESH_KDC).unwrap();
    let got = read_as_rep(&rep, (23, &BOB_NT), 0x1234_5678);
    assert_eq!(
        got.session.0, 18,
        "the session key is still the best the client offers"
    );
}

#[test]
fn a_timestamp_or_an_authenticator_out_of_the_skew_is_refused() {
    let mut a = AsAsk::alice();
    a.timestamp = Some((18, alice_key(18), NOW + 301));
    assert_eq!(refused(&a.encode()).code, code::SKEW);
    a.timestamp = Some((18, alice_key(18), NOW - 600));
    assert_eq!(refused(&a.encode()).code, code::SKEW);
    let mut t = TgsAsk::for_cifs(&tgt());
    t.ctime = NOW - 301;
    let e = refused(&t.encode());
    assert_eq!(e.code, code::SKEW);
    assert!(e.why.contains("clocks out of step"), "{e}");
}

#[test]
fn an_expired_tgt_is_refused() {
    let t = TgsAsk::for_cifs(&tgt());
    let e = answer(
        &kdc(),
        &Users,
        &t.encode(),
        NOW + TICKET_LIFE_SECS + 301,
        &FRESH_KDC,
    );
    // The authenticator is out of the skew too; a fresh one shows the ticket's end.
    assert!(e.is_err());
    let mut late = t.clone();
    late.ctime = NOW + TICKET_LIFE_SECS + 400;
    let e = answer(
        &kdc(),
        &Users,
        &late.encode(),
        NOW + TICKET_LIFE_SECS + 400,
        &FRESH_KDC,
    )
    .unwrap_err();
    assert_eq!(e.code, code::TKT_EXPIRED, "{e}");
}

#[test]
fn a_forged_or_modified_tgt_is_refused() {
    let good = tgt();
    // Each byte of the ticket's ciphertext changed in turn (a sample).
    let ticket: Ticket = picky_asn1_der::from_bytes(&good.ticket).unwrap();
    let n = ticket.0.enc_part.0.cipher.0 .0.len();
    for i in (0..n).step_by(17) {
        let mut t = ticket.clone();
        t.0.enc_part.0.cipher.0 .0[i] ^= 1;
        let mut ask = TgsAsk::for_cifs(&good);
        ask.tgt = picky_asn1_der::to_vec(&t).unwrap();
        assert_eq!(refused(&ask.encode()).code, code::MODIFIED, "byte {i}");
    }
    // A TGT made with another krbtgt key (another server's, or before its key changed).
    let mut other = kdc();
    other.keys.krbtgt = vec![0x99; 32];
    let rep = answer(&other, &Users, &AsAsk::alice().encode(), NOW, &FRESH_KDC).unwrap();
    let forged = read_as_rep(&rep, (18, &alice_key(18)), 0x1234_5678);
    assert_eq!(
        refused(&TgsAsk::for_cifs(&forged).encode()).code,
        code::MODIFIED
    );
    // A service ticket is not a TGT.
    let svc_rep = answer(
        &kdc(),
        &Users,
        &TgsAsk::for_cifs(&good).encode(),
        NOW,
        &FRESH_KDC,
    )
    .unwrap();
    let svc = read_tgs_rep(&svc_rep, (18, &[0x3c; 32]), 9);
    assert_eq!(
        refused(&TgsAsk::for_cifs(&svc).encode()).code,
        code::WRONG_REALM
    );
    // The body changed after the authenticator's checksum was made.
    let mut t = TgsAsk::for_cifs(&good);
    t.tamper = true;
    assert_eq!(refused(&t.encode()).code, code::MODIFIED);
    // An authenticator for someone else.
    let mut t = TgsAsk::for_cifs(&good);
    t.client = "bob".into();
    assert_eq!(refused(&t.encode()).code, code::BAD_INTEGRITY);
}

#[test]
fn a_tgs_req_for_another_service_or_realm_or_with_odd_options_is_refused() {
    let good = tgt();
    for sname in [
        vec!["http", "fs"],
        vec!["krbtgt", REALM],
        vec!["cifs"],
        vec!["cifs", "fs", "x"],
        vec!["ldap", "dc"],
    ] {
        let mut t = TgsAsk::for_cifs(&good);
        t.sname = sname.iter().map(|s| s.to_string()).collect();
        let e = refused(&t.encode());
        assert_eq!(e.code, code::S_PRINCIPAL_UNKNOWN, "{sname:?}");
    }
    let mut t = TgsAsk::for_cifs(&good);
    t.realm = "OTHER.TEST".into();
    assert_eq!(refused(&t.encode()).code, code::S_PRINCIPAL_UNKNOWN);
    let mut t = TgsAsk::for_cifs(&good);
    t.options = vec![1, 28];
    assert_eq!(refused(&t.encode()).code, code::BADOPTION);
    // An AS-REQ for another realm or service.
    let mut a = AsAsk::alice();
    a.realm = "OTHER.TEST".into();
    assert_eq!(refused(&a.encode()).code, code::WRONG_REALM);
    let mut a = AsAsk::alice();
    a.sname = vec!["http".into(), "fs".into()];
    assert_eq!(refused(&a.encode()).code, code::S_PRINCIPAL_UNKNOWN);
}

#[test]
fn a_user_deleted_after_getting_a_tgt_gets_no_service_ticket() {
    struct Nobody;
    impl Principals for Nobody {
        fn keys(&self, _: &str) -> Option<Vec<UserKey>> {
            None
        }
    }
    let e = answer(
        &kdc(),
        &Nobody,
        &TgsAsk::for_cifs(&tgt()).encode(),
        NOW,
        &FRESH_KDC,
    )
    .unwrap_err();
    assert_eq!(e.code, code::C_PRINCIPAL_UNKNOWN);
}

#[test]
fn truncated_garbage_and_oversized_requests_are_refused_without_panicking() {
    let as_req = AsAsk::alice().encode();
    let tgs_req = TgsAsk::for_cifs(&tgt()).encode();
    for req in [&as_req, &tgs_req] {
        for n in 0..req.len() {
            assert!(
                answer(&kdc(), &Users, &req[..n], NOW, &FRESH_KDC).is_err(),
                "{n}"
            );
        }
        for i in 0..req.len() {
            for x in [0u8, 0x80, 0xff] {
                let mut m = req.clone();
                m[i] = x;
                let _ = answer(&kdc(), &Users, &m, NOW, &FRESH_KDC);
            }
        }
    }
    let mut big = vec![0x6a, 0x84, 0x00, 0x01, 0x00, 0x10];
    big.resize(64 * 1024 + 16, 0);
    assert!(answer(&kdc(), &Users, &big, NOW, &FRESH_KDC).is_err());
    // What the fuzzer found: an APPLICATION tag whose 8-byte length overflows picky's sums.
    let mut huge = vec![0x6a, 0x88];
    huge.extend([0xff; 37]);
    huge.extend([0x3d, 0x30, 0x81, 0xbf, 0xa1, 0x03, 0x02, 0x01, 0x05]);
    assert!(answer(&kdc(), &Users, &huge, NOW, &FRESH_KDC).is_err());
    for garbage in [
        &b""[..],
        b"\x00",
        b"\x6a",
        b"\x6c\x00",
        b"\x7e\x03\x02\x01\x05",
        b"hello",
    ] {
        assert!(answer(&kdc(), &Users, garbage, NOW, &FRESH_KDC).is_err());
    }
}

#[test]
fn string_to_key_gives_the_keys_mit_ktutil_derives_from_the_same_password_and_salt() {
    // `ktutil: addent -password -p alice@FS -k 1 -e aes256-cts-hmac-sha1-96` (and aes128),
    // MIT krb5 1.20, password "correct horse": the salt is the realm, then the name.
    assert_eq!(salt("FS", "alice"), "FSalice");
    assert_eq!(
        hex::encode(string_to_key(18, PASSWORD, "FSalice").unwrap()),
        "d286c1c996719fc960af1ad9f357d34e2f7f3e83fb9ae69a5a27b18e4cad17a0"
    );
    assert_eq!(
        hex::encode(string_to_key(17, PASSWORD, "FSalice").unwrap()),
        "c4216fe477661724a3bdb162dd6ade6e"
    );
    assert!(string_to_key(23, PASSWORD, "").is_none());
}

/// Seeds of the `local_kdc` fuzz target, whose KDC has this test's keys, users and clock: an
/// AS-REQ without and with PA-ENC-TIMESTAMP, and a TGS-REQ with the TGT (each after the
/// target's flag byte). `cargo test -p ringshare-auth -- --ignored write_local_kdc_fuzz_corpus`.
#[test]
#[ignore]
fn write_local_kdc_fuzz_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/local_kdc");
    std::fs::create_dir_all(&dir).unwrap();
    let mut first = AsAsk::alice();
    first.timestamp = None;
    let seeds = [
        ("as-req-no-preauth", first.encode()),
        ("as-req-enc-timestamp", AsAsk::alice().encode()),
        ("tgs-req-cifs", TgsAsk::for_cifs(&tgt()).encode()),
    ];
    for (name, req) in seeds {
        std::fs::write(dir.join(name), [&[0u8][..], &req].concat()).unwrap();
    }
}
