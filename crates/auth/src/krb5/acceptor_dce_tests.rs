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
use super::keytab::Keytab;
use super::replay::ReplayCache;
use super::testkdc::{refusal, Mint, FRESH, NOW};
use super::{cipher, gss_unwrap, int_asn1, kerberos_time};

const SERVICE_KEY: [u8; 32] = [0x42; 32];
const DCE_STYLE: u32 = 0x1000;

fn cfg(key: &[u8]) -> AcceptorConfig {
    AcceptorConfig {
        keytab: Arc::new(Keytab::one_aes256(&["host", "fs.rs.test"], "RS.TEST", key)),
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

/// A DCE/RPC PDU: header (rpc_vers 5.0, first and last fragment, little-endian), `body`, and
/// the auth verifier (type 16, privacy, pad `pad`, context 0, `token`).
fn pdu(ptype: u8, call_id: u32, body: &[u8], pad: u8, token: &[u8]) -> Vec<u8> {
    let len = 16 + body.len() + 8 + token.len();
    let mut p = vec![5, 0, ptype, 3, 0x10, 0, 0, 0];
    p.extend_from_slice(&(len as u16).to_le_bytes());
    p.extend_from_slice(&(token.len() as u16).to_le_bytes());
    p.extend_from_slice(&call_id.to_le_bytes());
    p.extend_from_slice(body);
    p.extend_from_slice(&[16, 6, pad, 0, 0, 0, 0, 0]);
    p.extend_from_slice(token);
    p
}

/// Writes fuzz/corpus/rpc_pipe/srvsvc-kerberos-sealed: srvsvc (service 1) bound with DCE-style
/// Kerberos at privacy with a ticket for host/fs.rs.test (the fuzz harness's keytab, now and
/// fresh keys: crates/state/src/ipc/fuzz.rs), the AUTH3 with the client's AP-REP, and a sealed
/// NetrServerGetInfo (opnum 21, level 101). crates/state's rpcauth tests replay it.
#[test]
#[ignore]
fn write_rpc_pipe_kerberos_fuzz_seed() {
    let m = dce_mint();
    let framed = m.ap_req();
    let (_, raw) = gss_unwrap(&framed).unwrap();
    let srvsvc = crate::unhex("c84f324b7016d30112785a47bf6ee188");
    let ndr = crate::unhex("045d888aeb1cc9119fe808002b104860");
    let mut bind = Vec::new();
    bind.extend_from_slice(&4280u16.to_le_bytes());
    bind.extend_from_slice(&4280u16.to_le_bytes());
    bind.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0]);
    bind.extend_from_slice(&srvsvc);
    bind.extend_from_slice(&3u32.to_le_bytes());
    bind.extend_from_slice(&ndr);
    bind.extend_from_slice(&2u32.to_le_bytes());
    let auth3 = pdu(16, 2, &[0; 4], 0, &client_ap_rep(&m.session_key, FRESH.seq));
    // The request: alloc_hint, context 0, opnum 21; the stub (no server name, level 101) and 8
    // bytes of padding, sealed with the acceptor subkey; the client's sequence numbers start
    // at its authenticator's (77).
    let mut client =
        super::dce::DceSecurity::initiator(&FRESH.subkey, 18, 77, u64::from(FRESH.seq));
    let mut payload = [0u8; 16];
    payload[4..8].copy_from_slice(&101u32.to_le_bytes());
    let token = client.wrap(&[], &mut payload, &[]).unwrap();
    let mut req = vec![8, 0, 0, 0, 0, 0, 21, 0];
    req.extend_from_slice(&payload);
    let request = pdu(0, 3, &req, 8, &token);
    let mut seed = vec![1u8, 0, 0];
    for p in [pdu(11, 1, &bind, 0, raw), auth3, request] {
        seed.extend_from_slice(&(p.len() as u16).to_le_bytes());
        seed.extend_from_slice(&p);
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/rpc_pipe/srvsvc-kerberos-sealed"
    );
    std::fs::write(path, seed).unwrap();
}
