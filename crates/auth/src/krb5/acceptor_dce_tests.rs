//! DCE-style acceptance (a DCE/RPC bind's AP-REQ, [MS-KILE] 3.4.5.1) against tickets minted in
//! the test: the raw AP-REP, the client's AP-REP checked, and what is refused.

use std::sync::Arc;

use picky_asn1::wrapper::{
    ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag2, ExplicitContextTag3,
    OctetStringAsn1, Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{EncApRepPart, EncApRepPartInner, EncryptedData};
use picky_krb::messages::{ApRep, ApRepInner};

use super::acceptor::{accept_dce, check_dce_ap_rep, AcceptorConfig};
use super::keytab::{Keytab, KeytabEntry};
use super::replay::ReplayCache;
use super::testkdc::{refusal, Mint, FRESH, NOW};
use super::{cipher, gss_unwrap, int_asn1, kerberos_time};

const SERVICE_KEY: [u8; 32] = [0x42; 32];
const DCE_STYLE: u32 = 0x1000;

fn cfg(key: &[u8]) -> AcceptorConfig {
    AcceptorConfig {
        keytab: Arc::new(Keytab {
            entries: vec![KeytabEntry {
                components: vec!["host".into(), "fs.rs.test".into()],
                realm: "RS.TEST".into(),
                kvno: 2,
                enctype: 18,
                key: key.to_vec(),
            }],
        }),
        realm: "RS.TEST".into(),
        skew_secs: 300,
        allow_rc4: false,
    }
}

fn dce_mint() -> Mint {
    let mut m = Mint::new(&SERVICE_KEY, NOW);
    m.sname = vec!["host".into(), "fs.rs.test".into()];
    m.gss_flags |= DCE_STYLE;
    m
}

/// The client's AP-REP of the third leg, giving back `seq`, encrypted with `key` (AES-256).
fn client_ap_rep(key: &[u8], seq: u32) -> Vec<u8> {
    let part: EncApRepPart = ApplicationTag(EncApRepPartInner {
        ctime: ExplicitContextTag0::from(kerberos_time(NOW)),
        cusec: ExplicitContextTag1::from(int_asn1(0)),
        subkey: Optional::from(None),
        seq_number: Optional::from(Some(ExplicitContextTag3::from(int_asn1(i64::from(seq))))),
    });
    let enc = cipher(18)
        .unwrap()
        .encrypt(key, 12, &picky_asn1_der::to_vec(&part).unwrap(), &[0; 8])
        .unwrap();
    let rep: ApRep = ApplicationTag(ApRepInner {
        pvno: ExplicitContextTag0::from(int_asn1(5)),
        msg_type: ExplicitContextTag1::from(int_asn1(15)),
        enc_part: ExplicitContextTag2::from(EncryptedData {
            etype: ExplicitContextTag0::from(int_asn1(18)),
            kvno: Optional::from(None),
            cipher: ExplicitContextTag2::from(OctetStringAsn1::from(enc)),
        }),
    });
    picky_asn1_der::to_vec(&rep).unwrap()
}

#[test]
fn a_dce_style_ap_req_gets_a_raw_ap_rep_and_the_clients_ap_rep_must_give_our_sequence_back() {
    let m = dce_mint();
    let framed = m.ap_req();
    let (_, raw) = gss_unwrap(&framed).unwrap();
    let replay = ReplayCache::new();
    // Raw, as Windows and MIT send it in DCE style (framed is taken too).
    let a = accept_dce(&cfg(&SERVICE_KEY), raw, NOW, &FRESH, &replay).unwrap();
    assert_eq!(a.client_name(), "alice@RS.TEST");
    assert_eq!(a.token[0], 0x6f, "an AP-REP without GSS framing");
    assert_eq!(a.initiator_seq, Some(77));
    assert_eq!(
        m.read_ap_rep(&super::gss_wrap(super::TOK_AP_REP, &a.token)),
        a.session_key
    );
    let key = a.ticket_key.0.clone();
    check_dce_ap_rep(&cfg(&SERVICE_KEY), &a, &client_ap_rep(&key, a.seq)).unwrap();
    let why = check_dce_ap_rep(&cfg(&SERVICE_KEY), &a, &client_ap_rep(&key, a.seq + 1));
    assert!(format!("{why:?}").contains("sequence number"), "{why:?}");
    assert!(check_dce_ap_rep(&cfg(&SERVICE_KEY), &a, &client_ap_rep(&[1; 32], a.seq)).is_err());
    assert!(check_dce_ap_rep(&cfg(&SERVICE_KEY), &a, &[0x6f, 0x03, 0x30, 0x01, 0x00]).is_err());
    // The same AP-REQ again: a replay.
    let why = accept_dce(&cfg(&SERVICE_KEY), &framed, NOW, &FRESH, &replay).unwrap_err();
    assert!(format!("{why}").contains("replayed"), "{why}");
}

#[test]
fn dce_style_is_refused_for_smb_and_required_for_a_bind_as_is_the_right_key() {
    let m = dce_mint();
    assert!(refusal(&cfg(&SERVICE_KEY), &m).contains("DCE-style Kerberos is not used by SMB"));
    let mut plain = dce_mint();
    plain.gss_flags &= !DCE_STYLE;
    let why = accept_dce(
        &cfg(&SERVICE_KEY),
        &plain.ap_req(),
        NOW,
        &FRESH,
        &ReplayCache::new(),
    );
    assert!(
        format!("{why:?}").contains("DCE-style and mutual"),
        "{why:?}"
    );
    let why = accept_dce(
        &cfg(&[0x43; 32]),
        &m.ap_req(),
        NOW,
        &FRESH,
        &ReplayCache::new(),
    );
    assert!(
        format!("{why:?}").contains("do not decrypt the ticket"),
        "{why:?}"
    );
    for n in [0, 1, 10, 100] {
        let t = m.ap_req();
        assert!(accept_dce(
            &cfg(&SERVICE_KEY),
            &t[..n],
            NOW,
            &FRESH,
            &ReplayCache::new()
        )
        .is_err());
    }
}
