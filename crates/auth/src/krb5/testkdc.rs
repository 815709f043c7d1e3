//! A KDC's half, for tests: mint tickets, authenticators and PACs with known keys, so that
//! every check of the acceptor can be made to fail on purpose.

use picky_asn1::wrapper::{
    Asn1SequenceOf, ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag10,
    ExplicitContextTag2, ExplicitContextTag3, ExplicitContextTag4, ExplicitContextTag5,
    ExplicitContextTag6, ExplicitContextTag7, GeneralStringAsn1, OctetStringAsn1, Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::crypto::ChecksumSuite;
use picky_krb::data_types::{
    AuthorizationDataInner, EncTicketPartInner, EncryptedData, PrincipalName, TicketInner,
    TransitedEncoding,
};

use super::initiator::{self, flags, AuthenticatorParams};
use super::{cipher, encryption_key, int_asn1, kerberos_time, rc4hmac};
use ringshare_wire::fscc::FileTime;

fn gs(s: &str) -> GeneralStringAsn1 {
    initiator::gs(s).expect("ascii")
}

fn name(parts: &[&str], ty: i64) -> PrincipalName {
    initiator::principal_name(parts, ty).expect("ascii")
}

/// Everything a ticket and its authenticator say; each field can be spoiled by a test.
#[derive(Clone)]
pub struct Mint {
    pub service_key: Vec<u8>,
    /// The encryption types of the service key (the ticket), the session key and the
    /// initiator's subkey.
    pub ticket_etype: i32,
    pub session_etype: i32,
    pub subkey_etype: i32,
    pub kvno: u32,
    pub realm: String,
    pub sname: Vec<String>,
    pub client: String,
    pub session_key: Vec<u8>,
    pub auth_time: i64,
    pub end_time: i64,
    pub ticket_flags: Vec<usize>,
    pub pac: Option<Vec<u8>>,
    pub ctime: i64,
    pub cusec: i64,
    pub subkey: Option<Vec<u8>>,
    pub mutual: bool,
    pub bindings: [u8; 16],
    pub gss_flags: u32,
    pub authenticator_client: Option<String>,
}

impl Mint {
    /// An AES-256 ticket for `cifs/fs.rs.test@RS.TEST` to alice, valid around `now`.
    pub fn new(service_key: &[u8], now: i64) -> Mint {
        Mint {
            service_key: service_key.to_vec(),
            ticket_etype: 18,
            session_etype: 18,
            subkey_etype: 18,
            kvno: 2,
            realm: "RS.TEST".into(),
            sname: vec!["cifs".into(), "fs.rs.test".into()],
            client: "alice".into(),
            session_key: vec![0x51; 32],
            auth_time: now - 60,
            end_time: now + 36000,
            ticket_flags: vec![1, 8], // forwardable, renewable-ish: anything but INVALID
            pac: None,
            ctime: now,
            cusec: 123_456,
            subkey: Some(vec![0x33; 32]),
            mutual: true,
            bindings: [0; 16],
            gss_flags: 0x2 | 0x20 | 0x10, // mutual, confidentiality, sequence
            authenticator_client: None,
        }
    }

    /// An RC4-HMAC ticket (service key, session key and subkey of enctype 23, 16 bytes each)
    /// for the same service and client, as an old domain issues it.
    pub fn rc4(service_key: &[u8], now: i64) -> Mint {
        Mint {
            ticket_etype: 23,
            session_etype: 23,
            subkey_etype: 23,
            session_key: vec![0x52; 16],
            subkey: Some(vec![0x34; 16]),
            ..Mint::new(service_key, now)
        }
    }

    fn ad(&self) -> Option<ExplicitContextTag10<Asn1SequenceOf<AuthorizationDataInner>>> {
        let pac = self.pac.as_ref()?;
        let inner = Asn1SequenceOf::from(vec![AuthorizationDataInner {
            ad_type: ExplicitContextTag0::from(int_asn1(128)),
            ad_data: ExplicitContextTag1::from(OctetStringAsn1::from(pac.clone())),
        }]);
        let if_relevant = picky_asn1_der::to_vec(&inner).expect("der");
        Some(ExplicitContextTag10::from(Asn1SequenceOf::from(vec![
            AuthorizationDataInner {
                ad_type: ExplicitContextTag0::from(int_asn1(1)),
                ad_data: ExplicitContextTag1::from(OctetStringAsn1::from(if_relevant)),
            },
        ])))
    }

    /// The GSS-framed AP-REQ.
    pub fn ap_req(&self) -> Vec<u8> {
        let part = ApplicationTag::<_, 3>(EncTicketPartInner {
            flags: ExplicitContextTag0::from(flags(&self.ticket_flags)),
            key: ExplicitContextTag1::from(encryption_key(
                self.session_etype.into(),
                &self.session_key,
            )),
            crealm: ExplicitContextTag2::from(gs(&self.realm)),
            cname: ExplicitContextTag3::from(name(&[&self.client], 1)),
            transited: ExplicitContextTag4::from(TransitedEncoding {
                tr_type: ExplicitContextTag0::from(int_asn1(1)),
                contents: ExplicitContextTag1::from(OctetStringAsn1::from(Vec::new())),
            }),
            auth_time: ExplicitContextTag5::from(kerberos_time(self.auth_time)),
            starttime: Optional::from(Some(ExplicitContextTag6::from(kerberos_time(
                self.auth_time,
            )))),
            endtime: ExplicitContextTag7::from(kerberos_time(self.end_time)),
            renew_till: Optional::from(None),
            caddr: Optional::from(None),
            authorization_data: Optional::from(self.ad()),
        });
        let enc_part = cipher(self.ticket_etype.into())
            .unwrap()
            .encrypt(
                &self.service_key,
                2,
                &picky_asn1_der::to_vec(&part).unwrap(),
                &[0xc0; 8],
            )
            .unwrap();
        let sname: Vec<&str> = self.sname.iter().map(String::as_str).collect();
        let ticket = ApplicationTag::<_, 1>(TicketInner {
            tkt_vno: ExplicitContextTag0::from(int_asn1(5)),
            realm: ExplicitContextTag1::from(gs(&self.realm)),
            sname: ExplicitContextTag2::from(name(&sname, 2)),
            enc_part: ExplicitContextTag3::from(EncryptedData {
                etype: ExplicitContextTag0::from(int_asn1(self.ticket_etype.into())),
                kvno: Optional::from(Some(ExplicitContextTag1::from(int_asn1(self.kvno as i64)))),
                cipher: ExplicitContextTag2::from(OctetStringAsn1::from(enc_part)),
            }),
        });
        let who = self.authenticator_client.as_deref().unwrap_or(&self.client);
        let params = AuthenticatorParams {
            client: vec![who.to_string()],
            realm: self.realm.clone(),
            ctime: self.ctime,
            cusec: self.cusec,
            subkey: self.subkey.as_ref().map(|k| (self.subkey_etype, k.clone())),
            seq: 77,
            bindings: self.bindings,
            gss_flags: self.gss_flags,
            mutual: self.mutual,
        };
        initiator::ap_req(
            &picky_asn1_der::to_vec(&ticket).unwrap(),
            (self.session_etype, &self.session_key),
            &params,
        )
        .unwrap()
    }

    /// What the client reads from the AP-REP: the acceptor subkey.
    pub fn read_ap_rep(&self, token: &[u8]) -> Vec<u8> {
        self.read_ap_rep_key(token).unwrap().1
    }

    /// The acceptor subkey and its type, if the AP-REP has one.
    pub fn read_ap_rep_key(&self, token: &[u8]) -> Option<(i32, Vec<u8>)> {
        let session_key = (self.session_etype, &self.session_key[..]);
        let (subkey, ctime) = initiator::read_ap_rep(session_key, token).unwrap();
        assert_eq!(ctime, self.ctime);
        subkey
    }
}

/// A PAC as MIT's KDC makes one (client info, server and KDC signatures), signed with `key`
/// (aes256).
pub fn minimal_pac(key: &[u8], client: &str, auth_time: i64) -> Vec<u8> {
    minimal_pac_of(18, key, client, auth_time)
}

/// [`minimal_pac`] signed with a key of enctype `etype`: HMAC-SHA1-96-AES256 (16) for 18,
/// HMAC-MD5 (-138, 16 bytes) for 23.
pub fn minimal_pac_of(etype: i32, key: &[u8], client: &str, auth_time: i64) -> Vec<u8> {
    let (sig_type, sig_len) = if etype == 23 { (-138i32, 16) } else { (16, 12) };
    let mut info = FileTime::from_unix_nanos(i128::from(auth_time) * 1_000_000_000)
        .0
        .to_le_bytes()
        .to_vec();
    let name: Vec<u8> = client
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    info.extend((name.len() as u16).to_le_bytes());
    info.extend(name);
    let sig = || {
        let mut v = sig_type.to_le_bytes().to_vec();
        v.extend(vec![0u8; sig_len]);
        v
    };
    let bufs = [(6u32, sig()), (7, sig()), (10, info)];
    let mut out = Vec::new();
    out.extend((bufs.len() as u32).to_le_bytes());
    out.extend(0u32.to_le_bytes());
    let mut offset = 8 + 16 * bufs.len();
    let mut body = Vec::new();
    let mut places = Vec::new();
    for (ty, b) in &bufs {
        out.extend(ty.to_le_bytes());
        out.extend((b.len() as u32).to_le_bytes());
        out.extend((offset as u64).to_le_bytes());
        places.push(offset);
        body.extend(b);
        let pad = (8 - b.len() % 8) % 8;
        body.extend(vec![0; pad]);
        offset += b.len() + pad;
    }
    out.extend(body);
    // The server signature over the PAC with both signatures zero.
    let sum = if etype == 23 {
        rc4hmac::checksum(key, 17, &out).to_vec()
    } else {
        ChecksumSuite::HmacSha196Aes256
            .hasher()
            .checksum(key, 17, &out)
            .unwrap()
    };
    out[places[0] + 4..places[0] + 4 + sig_len].copy_from_slice(&sum[..sig_len]);
    // A KDC signature (not checked by a member server): anything.
    out[places[1] + 4..places[1] + 4 + sig_len].fill(0x4b);
    out
}

/// The acceptor tests' clock (Unix seconds).
pub const NOW: i64 = 1_795_000_000;

/// The fresh bytes the acceptor tests give it (its subkey and sequence number).
pub const FRESH: super::acceptor::Fresh = super::acceptor::Fresh {
    subkey: [0xa5; 32],
    seq: 9,
};

/// `m`'s AP-REQ through the acceptor at [`NOW`], with a new replay cache.
pub fn try_accept(
    cfg: &super::acceptor::AcceptorConfig,
    m: &Mint,
) -> Result<super::acceptor::Accepted, crate::AuthError> {
    super::acceptor::accept(
        cfg,
        &m.ap_req(),
        NOW,
        &FRESH,
        &super::replay::ReplayCache::new(),
    )
}

/// Why the acceptor refused `m`'s AP-REQ (a test fails when it took it).
pub fn refusal(cfg: &super::acceptor::AcceptorConfig, m: &Mint) -> String {
    match try_accept(cfg, m) {
        Err(crate::AuthError::Kerberos(why)) => why,
        other => panic!("expected a Kerberos refusal, got {other:?}"),
    }
}
