//! The client side of the Kerberos GSS exchange (RFC 4121 4.1): an AP-REQ for a ticket the
//! client holds (from a credential cache, [`super::ccache`]), and the acceptor subkey read from
//! the AP-REP. Sans-I/O: the time and the fresh key are parameters.

use picky_asn1::bit_string::BitString;
use picky_asn1::restricted_string::IA5String;
use picky_asn1::wrapper::{
    Asn1SequenceOf, BitStringAsn1, ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag2,
    ExplicitContextTag3, ExplicitContextTag4, ExplicitContextTag5, ExplicitContextTag6,
    ExplicitContextTag7, GeneralStringAsn1, OctetStringAsn1, Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{
    AuthenticatorInner, Checksum, EncApRepPart, EncryptedData, PrincipalName, Ticket,
};
use picky_krb::messages::{ApRep, ApReqInner};

use super::kerberos_time;
use super::refused;
use super::{cipher, confounder, encryption_key, gss_unwrap, gss_wrap, int, int_asn1};
use super::{TOK_AP_REP, TOK_AP_REQ};
use crate::AuthError;

/// What the authenticator says (RFC 4120 5.5.1, RFC 4121 4.1.1).
#[derive(Clone, Debug)]
pub struct AuthenticatorParams {
    /// The client's principal name components and realm.
    pub client: Vec<String>,
    /// The client's realm.
    pub realm: String,
    /// The client's time (Unix seconds) and microseconds.
    pub ctime: i64,
    /// Microseconds of `ctime`.
    pub cusec: i64,
    /// The initiator's subkey (enctype, key), if one is sent.
    pub subkey: Option<(i32, Vec<u8>)>,
    /// The initiator's sequence number.
    pub seq: u32,
    /// Channel bindings' MD5 (zero: none).
    pub bindings: [u8; 16],
    /// GSS flags (mutual 0x2, confidentiality 0x10, integrity 0x20, ...).
    pub gss_flags: u32,
    /// ap-options MUTUAL-REQUIRED.
    pub mutual: bool,
}

/// A KerberosString.
pub(crate) fn gs(s: &str) -> Result<GeneralStringAsn1, AuthError> {
    IA5String::new(s.as_bytes().to_vec())
        .map(GeneralStringAsn1::from)
        .map_err(|_| AuthError::Malformed("Kerberos name is not IA5"))
}

/// A PrincipalName of type `name_type` (1 a principal, 2 a service instance).
pub(crate) fn principal_name<S: AsRef<str>>(
    parts: &[S],
    name_type: i64,
) -> Result<PrincipalName, AuthError> {
    let names = parts
        .iter()
        .map(|c| gs(c.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PrincipalName {
        name_type: ExplicitContextTag0::from(int_asn1(name_type)),
        name_string: ExplicitContextTag1::from(Asn1SequenceOf::from(names)),
    })
}

/// A BIT STRING of 32 bits with `bits` set (ASN.1 numbering).
pub(crate) fn flags(bits: &[usize]) -> BitStringAsn1 {
    let mut b = BitString::with_len(32);
    for i in bits {
        b.set(*i, true);
    }
    BitStringAsn1::from(b)
}

/// A GSS-framed AP-REQ for `ticket` (its DER) with the ticket's session key.
pub fn ap_req(
    ticket: &[u8],
    session_key: (i32, &[u8]),
    a: &AuthenticatorParams,
) -> Result<Vec<u8>, AuthError> {
    let ticket: Ticket = super::from_der(ticket, "Ticket")?;
    let mut ck = Vec::with_capacity(24);
    ck.extend(16u32.to_le_bytes());
    ck.extend(a.bindings);
    ck.extend(a.gss_flags.to_le_bytes());
    let auth = ApplicationTag::<_, 2>(AuthenticatorInner {
        authenticator_vno: ExplicitContextTag0::from(int_asn1(5)),
        crealm: ExplicitContextTag1::from(gs(&a.realm)?),
        cname: ExplicitContextTag2::from(principal_name(&a.client, 1)?),
        cksum: Optional::from(Some(ExplicitContextTag3::from(Checksum {
            cksumtype: ExplicitContextTag0::from(int_asn1(0x8003)),
            checksum: ExplicitContextTag1::from(OctetStringAsn1::from(ck)),
        }))),
        cusec: ExplicitContextTag4::from(int_asn1(a.cusec)),
        ctime: ExplicitContextTag5::from(kerberos_time(a.ctime)),
        subkey: Optional::from(
            a.subkey
                .as_ref()
                .map(|(e, k)| ExplicitContextTag6::from(encryption_key(i64::from(*e), k))),
        ),
        seq_number: Optional::from(Some(ExplicitContextTag7::from(int_asn1(i64::from(a.seq))))),
        authorization_data: Optional::from(None),
    });
    let plain = picky_asn1_der::to_vec(&auth).map_err(|_| refused("encoding Authenticator"))?;
    // RC4-HMAC's confounder comes from the client's fresh subkey (else the session key) and
    // the authenticator's time: secret, and new for each authenticator.
    let secret = a
        .subkey
        .as_ref()
        .map_or(session_key.1, |(_, k)| k.as_slice());
    let when = [a.ctime.to_le_bytes(), a.cusec.to_le_bytes()].concat();
    let enc = cipher(i64::from(session_key.0))?.encrypt(
        session_key.1,
        11,
        &plain,
        &confounder(secret, &when),
    )?;
    let req = ApplicationTag::<_, 14>(ApReqInner {
        pvno: ExplicitContextTag0::from(int_asn1(5)),
        msg_type: ExplicitContextTag1::from(int_asn1(14)),
        ap_options: ExplicitContextTag2::from(flags(if a.mutual { &[2] } else { &[] })),
        ticket: ExplicitContextTag3::from(ticket),
        authenticator: ExplicitContextTag4::from(EncryptedData {
            etype: ExplicitContextTag0::from(int_asn1(i64::from(session_key.0))),
            kvno: Optional::from(None),
            cipher: ExplicitContextTag2::from(OctetStringAsn1::from(enc)),
        }),
    });
    let der = picky_asn1_der::to_vec(&req).map_err(|_| refused("encoding AP-REQ"))?;
    Ok(gss_wrap(TOK_AP_REQ, &der))
}

/// A key and its enctype.
pub type Key = (i32, Vec<u8>);

/// What the AP-REP says: the acceptor subkey, if any, and the ctime it echoes.
pub fn read_ap_rep(
    session_key: (i32, &[u8]),
    token: &[u8],
) -> Result<(Option<Key>, i64), AuthError> {
    let (id, msg) = gss_unwrap(token)?;
    if id != TOK_AP_REP {
        return Err(refused("the server's token is not an AP-REP"));
    }
    let rep: ApRep = super::from_der(msg, "AP-REP")?;
    let plain = cipher(i64::from(session_key.0))?
        .decrypt(session_key.1, 12, &rep.0.enc_part.0.cipher.0 .0)
        .ok_or_else(|| refused("the AP-REP does not decrypt with the ticket's session key"))?;
    let part: EncApRepPart = super::from_der(&plain, "EncAPRepPart")?;
    let subkey = match part.0.subkey.0.as_ref() {
        Some(k) => Some((int(&k.0.key_type.0)? as i32, k.0.key_value.0 .0.clone())),
        None => None,
    };
    Ok((subkey, super::unix_time(&part.0.ctime.0)))
}
