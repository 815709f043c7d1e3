//! A KDC for the server's own users (RFC 4120 3.1 and 3.3), reached through IAKerb
//! ([`super::iakerb`]): a standalone server answers its users' AS-REQ and TGS-REQ itself, so a
//! client that no longer offers NTLM can log on with Kerberos without a domain.
//!
//! - **AS-REQ** ([`as_req`]): the first request without pre-authentication is answered
//!   KRB-ERROR PREAUTH_REQUIRED with PA-ETYPE-INFO2 (the salt of each of the user's keys); a
//!   request with PA-ENC-TIMESTAMP that decrypts with the user's key and is within the clock skew
//!   gets an AS-REP with a ticket-granting ticket (or directly a service ticket, when it asks for
//!   `cifs/` or `host/`).
//! - **TGS-REQ** ([`tgs_req`]): PA-TGS-REQ's AP-REQ carries a TGT this KDC issued (opened with its
//!   krbtgt key, times checked), an authenticator (same client, within the skew, its checksum
//!   over the request body verified); the answer is a ticket for `cifs/<any host>` or
//!   `host/<any host>` of the realm, encrypted with the service key the acceptor
//!   ([`super::acceptor`]) holds. The host part is not compared: only this server has the key
//!   that opens such a ticket.
//!
//! Every refusal that a wrong or unknown client causes is a [`KdcError`] (its Kerberos error
//! code and a reason for the log), which the server turns into a failed logon; only
//! PREAUTH_REQUIRED is answered to the client, as a KRB-ERROR. No PAC is issued: the acceptor
//! maps the ticket's client name to the Unix account, as for an MIT realm.
//!
//! Sans-I/O: the clock and the fresh session keys are parameters; the users' keys come from
//! [`Principals`]. picky-krb draws AES confounders itself.

pub mod as_req;
pub mod tgs_req;

use picky_asn1::wrapper::{
    Asn1SequenceOf, ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag10,
    ExplicitContextTag2, ExplicitContextTag3, ExplicitContextTag4, ExplicitContextTag5,
    ExplicitContextTag6, ExplicitContextTag7, ExplicitContextTag9, IntegerAsn1, OctetStringAsn1,
    Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{
    EncTicketPartInner, EncryptedData, EtypeInfo2Entry, LastReqInner, PaData, PrincipalName,
    Ticket, TicketInner, TransitedEncoding,
};
use picky_krb::messages::{EncKdcRepPart, KdcRep, KrbErrorInner};

use super::initiator::{flags, gs, principal_name};
use super::TOKEN_SIZE_MAX;
use super::{cipher, confounder, encryption_key, etype, int, int_asn1, kerberos_time, Cipher};

/// Kerberos error codes (RFC 4120 7.5.9) this KDC reports.
pub mod code {
    pub const C_PRINCIPAL_UNKNOWN: i32 = 6;
    pub const S_PRINCIPAL_UNKNOWN: i32 = 7;
    pub const BADOPTION: i32 = 13;
    pub const ETYPE_NOSUPP: i32 = 14;
    pub const PREAUTH_FAILED: i32 = 24;
    pub const PREAUTH_REQUIRED: i32 = 25;
    pub const BAD_INTEGRITY: i32 = 31;
    pub const TKT_EXPIRED: i32 = 32;
    pub const TKT_NYV: i32 = 33;
    pub const SKEW: i32 = 37;
    pub const MODIFIED: i32 = 41;
    pub const WRONG_REALM: i32 = 68;
    pub const GENERIC: i32 = 60;
    pub const MSG_TYPE: i32 = 39;
}

/// PA-DATA types (RFC 4120 7.5.2).
const PA_TGS_REQ: i64 = 1;
const PA_ENC_TIMESTAMP: i64 = 2;
const PA_ETYPE_INFO2: i64 = 19;

/// Ticket flags (RFC 4120 5.3): INVALID, INITIAL, PRE-AUTHENT.
const FLAG_INVALID: usize = 7;
const FLAG_INITIAL: usize = 9;
const FLAG_PRE_AUTHENT: usize = 10;

/// Key usages (RFC 4120 7.5.1).
const USAGE_TICKET: i32 = 2;

/// The longest ticket this KDC issues, and the default of [`LocalKdc::ticket_life_secs`]
/// (Windows' and MIT's default: 10 hours).
pub const TICKET_LIFE_SECS: i64 = 10 * 3600;

/// The KDC's own keys: the ticket-granting service's (`krbtgt/REALM`) and the file service's
/// (`cifs/…`, `host/…`), AES-256 both. They never leave the process.
#[derive(Clone, PartialEq, Eq)]
pub struct KdcKeys {
    pub krbtgt: Vec<u8>,
    pub service: Vec<u8>,
    /// Their key version (the same for both).
    pub kvno: u32,
}

impl std::fmt::Debug for KdcKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KdcKeys(kvno {}, keys not shown)", self.kvno)
    }
}

/// What the KDC serves.
#[derive(Debug, Clone)]
pub struct LocalKdc {
    /// The realm (the server's NetBIOS name in upper case unless configured).
    pub realm: String,
    pub keys: KdcKeys,
    /// Whether RC4-HMAC user keys (the NT hash) and session keys may be used.
    pub allow_rc4: bool,
    /// Largest difference between the client's clock and ours, in seconds.
    pub skew_secs: i64,
    /// The longest ticket issued.
    pub ticket_life_secs: i64,
}

/// One long-term key of a user.
#[derive(Clone, PartialEq, Eq)]
pub struct UserKey {
    pub etype: i32,
    pub key: Vec<u8>,
    /// The string-to-key salt it was made with (RFC 3962: the realm, then the name), told to the
    /// client in PA-ETYPE-INFO2; empty for RC4-HMAC.
    pub salt: String,
    pub kvno: u32,
}

impl std::fmt::Debug for UserKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserKey(etype {}, kvno {})", self.etype, self.kvno)
    }
}

/// The users a KDC knows.
pub trait Principals {
    /// The keys of user `name` (compared as the caller's user store compares names), None when
    /// there is no such (enabled) user. An empty list: the user exists without any key.
    fn keys(&self, name: &str) -> Option<Vec<UserKey>>;
}

/// A refusal: the Kerberos error code and why, for the server's log (a failed logon).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KdcError {
    pub code: i32,
    pub why: String,
}

impl std::fmt::Display for KdcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (Kerberos error {})", self.why, self.code)
    }
}

pub(crate) fn fail(code: i32, why: impl Into<String>) -> KdcError {
    KdcError {
        code,
        why: why.into(),
    }
}

/// Fresh random bytes for one answer (the caller's random source).
#[derive(Clone, Copy)]
pub struct Fresh {
    /// The new session key (its first 16 bytes for AES-128 and RC4-HMAC).
    pub session_key: [u8; 32],
}

/// Answer a KDC request (an AS-REQ or a TGS-REQ, as IAKerb relays it) at Unix time `now`: the
/// reply to send to the client (AS-REP, TGS-REP, or KRB-ERROR PREAUTH_REQUIRED), or why the
/// request is refused.
pub fn answer(
    kdc: &LocalKdc,
    users: &dyn Principals,
    request: &[u8],
    now: i64,
    fresh: &Fresh,
) -> Result<Vec<u8>, KdcError> {
    if request.len() > TOKEN_SIZE_MAX {
        return Err(fail(code::GENERIC, "KDC request too large"));
    }
    match request.first() {
        Some(0x6a) => as_req::answer(kdc, users, request, now, fresh),
        Some(0x6c) => tgs_req::answer(kdc, users, request, now, fresh),
        _ => Err(fail(code::MSG_TYPE, "not an AS-REQ or a TGS-REQ")),
    }
}

pub(crate) fn malformed(what: &str) -> KdcError {
    fail(code::GENERIC, format!("malformed {what}"))
}

pub(crate) fn der<'a, T: serde::Deserialize<'a>>(b: &'a [u8], what: &str) -> Result<T, KdcError> {
    super::from_der(b, "Kerberos message").map_err(|_| malformed(what))
}

pub(crate) fn to_der<T: serde::Serialize>(v: &T, what: &str) -> Result<Vec<u8>, KdcError> {
    picky_asn1_der::to_vec(v).map_err(|_| fail(code::GENERIC, format!("encoding {what}")))
}

pub(crate) fn num(v: &IntegerAsn1) -> Result<i64, KdcError> {
    int(v).map_err(|_| malformed("INTEGER"))
}

/// A PrincipalName's components.
pub(crate) fn components(p: &PrincipalName) -> Vec<String> {
    p.name_string
        .0
         .0
        .iter()
        .map(|s| String::from_utf8_lossy(s.0.as_bytes()).into_owned())
        .collect()
}

pub(crate) fn realm_text(r: &picky_krb::data_types::Realm) -> String {
    String::from_utf8_lossy(r.0.as_bytes()).into_owned()
}

/// Whether `sname` names the ticket-granting service of `realm`.
pub(crate) fn is_krbtgt(sname: &[String], realm: &str) -> bool {
    matches!(sname, [k, r] if k == "krbtgt" && r.eq_ignore_ascii_case(realm))
}

/// Whether `sname` names the file service (`cifs/host` or `host/host`).
pub(crate) fn is_file_service(sname: &[String]) -> bool {
    matches!(sname, [s, h] if !h.is_empty() && (s.eq_ignore_ascii_case("cifs") || s.eq_ignore_ascii_case("host")))
}

impl LocalKdc {
    /// The cipher of enctype `e` if this KDC uses it (AES; RC4-HMAC when allowed).
    pub(crate) fn cipher(&self, e: i64) -> Option<Cipher> {
        let ok = e == i64::from(etype::AES256)
            || e == i64::from(etype::AES128)
            || (self.allow_rc4 && e == i64::from(etype::RC4_HMAC));
        ok.then(|| cipher(e).ok()).flatten()
    }

    /// The session key's type: the first of the client's enctypes this KDC uses.
    pub(crate) fn session_etype(&self, asked: &[IntegerAsn1]) -> Result<i32, KdcError> {
        asked
            .iter()
            .filter_map(|e| int(e).ok())
            .find(|e| self.cipher(*e).is_some())
            .map(|e| e as i32)
            .ok_or_else(|| {
                fail(
                    code::ETYPE_NOSUPP,
                    "the client offers no encryption type this KDC uses (AES, or RC4-HMAC \
                     with 'kerberos encryption types = all')",
                )
            })
    }

    /// The long-term key and enctype of the service `sname` (the TGS or the file service).
    pub(crate) fn service_key(&self, sname: &[String]) -> &[u8] {
        if is_krbtgt(sname, &self.realm) {
            &self.keys.krbtgt
        } else {
            &self.keys.service
        }
    }
}

/// The RFC 3962 salt of `name`'s keys in `realm` (RFC 4120 4: the realm, then the name's
/// components).
pub fn salt(realm: &str, name: &str) -> String {
    format!("{realm}{name}")
}

/// The long-term key of enctype `e` (AES-256 or AES-128) made from `password` and `salt`
/// (string-to-key, RFC 3962: PBKDF2-HMAC-SHA1, 4096 iterations, then DK), or None for another
/// enctype.
pub fn string_to_key(e: i32, password: &str, salt: &str) -> Option<Vec<u8>> {
    match cipher(i64::from(e)).ok()? {
        Cipher::Aes(s) => s
            .cipher()
            .generate_key_from_password(password.as_bytes(), salt.as_bytes())
            .ok(),
        Cipher::Rc4 => None,
    }
}

/// `plain` encrypted with `key` of enctype `e` for `usage` (RC4-HMAC's confounder derived from
/// the fresh bytes).
pub(crate) fn seal(
    e: i32,
    key: &[u8],
    usage: i32,
    plain: &[u8],
    fresh: &Fresh,
) -> Result<Vec<u8>, KdcError> {
    let c = cipher(i64::from(e)).map_err(|_| fail(code::ETYPE_NOSUPP, "encryption type"))?;
    c.encrypt(
        key,
        usage,
        plain,
        &confounder(&fresh.session_key, &usage.to_le_bytes()),
    )
    .map_err(|e| fail(code::GENERIC, e.to_string()))
}

/// What a ticket says.
pub(crate) struct TicketFacts<'a> {
    pub realm: &'a str,
    pub sname: &'a [String],
    pub crealm: &'a str,
    pub cname: &'a [String],
    pub flags: &'a [usize],
    pub session: (i32, &'a [u8]),
    pub auth_time: i64,
    pub start: i64,
    pub end: i64,
}

impl TicketFacts<'_> {
    fn sname(&self) -> Result<PrincipalName, KdcError> {
        principal_name(self.sname, 2).map_err(|_| malformed("service name"))
    }

    fn cname(&self) -> Result<PrincipalName, KdcError> {
        principal_name(self.cname, 1).map_err(|_| malformed("client name"))
    }

    /// The ticket, encrypted with the service's key (AES-256).
    pub(crate) fn ticket(&self, kdc: &LocalKdc, fresh: &Fresh) -> Result<Ticket, KdcError> {
        let part = ApplicationTag::<_, 3>(EncTicketPartInner {
            flags: ExplicitContextTag0::from(flags(self.flags)),
            key: ExplicitContextTag1::from(encryption_key(
                i64::from(self.session.0),
                self.session.1,
            )),
            crealm: ExplicitContextTag2::from(realm(self.crealm)?),
            cname: ExplicitContextTag3::from(self.cname()?),
            transited: ExplicitContextTag4::from(TransitedEncoding {
                tr_type: ExplicitContextTag0::from(int_asn1(1)),
                contents: ExplicitContextTag1::from(OctetStringAsn1::from(Vec::new())),
            }),
            auth_time: ExplicitContextTag5::from(kerberos_time(self.auth_time)),
            starttime: Optional::from(Some(ExplicitContextTag6::from(kerberos_time(self.start)))),
            endtime: ExplicitContextTag7::from(kerberos_time(self.end)),
            renew_till: Optional::from(None),
            caddr: Optional::from(None),
            authorization_data: Optional::from(None),
        });
        let key = kdc.service_key(self.sname);
        let sealed = seal(
            etype::AES256,
            key,
            USAGE_TICKET,
            &to_der(&part, "ticket")?,
            fresh,
        )?;
        Ok(ApplicationTag(TicketInner {
            tkt_vno: ExplicitContextTag0::from(int_asn1(5)),
            realm: ExplicitContextTag1::from(realm(self.realm)?),
            sname: ExplicitContextTag2::from(self.sname()?),
            enc_part: ExplicitContextTag3::from(encrypted(
                etype::AES256,
                Some(kdc.keys.kvno),
                sealed,
            )),
        }))
    }

    /// The EncKDCRepPart of the reply that carries this ticket.
    pub(crate) fn rep_part(
        &self,
        nonce: &IntegerAsn1,
        now: i64,
    ) -> Result<EncKdcRepPart, KdcError> {
        Ok(EncKdcRepPart {
            key: ExplicitContextTag0::from(encryption_key(
                i64::from(self.session.0),
                self.session.1,
            )),
            last_req: ExplicitContextTag1::from(Asn1SequenceOf::from(vec![LastReqInner {
                lr_type: ExplicitContextTag0::from(int_asn1(0)),
                lr_value: ExplicitContextTag1::from(kerberos_time(now)),
            }])),
            nonce: ExplicitContextTag2::from(nonce.clone()),
            key_expiration: Optional::from(None),
            flags: ExplicitContextTag4::from(flags(self.flags)),
            auth_time: ExplicitContextTag5::from(kerberos_time(self.auth_time)),
            start_time: Optional::from(Some(ExplicitContextTag6::from(kerberos_time(self.start)))),
            end_time: ExplicitContextTag7::from(kerberos_time(self.end)),
            renew_till: Optional::from(None),
            srealm: ExplicitContextTag9::from(realm(self.realm)?),
            sname: ExplicitContextTag10::from(self.sname()?),
            caddr: Optional::from(None),
            encrypted_pa_data: Optional::from(None),
        })
    }

    /// The KDC-REP around `ticket` and its encrypted part.
    pub(crate) fn rep(
        &self,
        msg_type: i64,
        padata: Vec<PaData>,
        ticket: Ticket,
        enc_part: EncryptedData,
    ) -> Result<KdcRep, KdcError> {
        Ok(KdcRep {
            pvno: ExplicitContextTag0::from(int_asn1(5)),
            msg_type: ExplicitContextTag1::from(int_asn1(msg_type)),
            padata: Optional::from(
                (!padata.is_empty())
                    .then(|| ExplicitContextTag2::from(Asn1SequenceOf::from(padata))),
            ),
            crealm: ExplicitContextTag3::from(realm(self.crealm)?),
            cname: ExplicitContextTag4::from(self.cname()?),
            ticket: ExplicitContextTag5::from(ticket),
            enc_part: ExplicitContextTag6::from(enc_part),
        })
    }
}

pub(crate) fn realm(r: &str) -> Result<picky_krb::data_types::Realm, KdcError> {
    gs(r).map_err(|_| malformed("realm"))
}

pub(crate) fn encrypted(e: i32, kvno: Option<u32>, cipher: Vec<u8>) -> EncryptedData {
    EncryptedData {
        etype: ExplicitContextTag0::from(int_asn1(i64::from(e))),
        kvno: Optional::from(kvno.map(|k| ExplicitContextTag1::from(int_asn1(i64::from(k))))),
        cipher: ExplicitContextTag2::from(OctetStringAsn1::from(cipher)),
    }
}

pub(crate) fn pa_data(ty: i64, value: Vec<u8>) -> PaData {
    PaData {
        padata_type: ExplicitContextTag1::from(int_asn1(ty)),
        padata_data: ExplicitContextTag2::from(OctetStringAsn1::from(value)),
    }
}

/// PA-ETYPE-INFO2 for `keys` (RFC 4120 5.2.7.5): each key's enctype and salt.
pub(crate) fn etype_info2(keys: &[&UserKey]) -> Result<PaData, KdcError> {
    let entries: Vec<EtypeInfo2Entry> = keys
        .iter()
        .map(|k| {
            Ok(EtypeInfo2Entry {
                etype: ExplicitContextTag0::from(int_asn1(i64::from(k.etype))),
                salt: Optional::from(if k.etype == etype::RC4_HMAC {
                    None
                } else {
                    Some(ExplicitContextTag1::from(
                        gs(&k.salt).map_err(|_| malformed("salt"))?,
                    ))
                }),
                s2kparams: Optional::from(None),
            })
        })
        .collect::<Result<_, KdcError>>()?;
    Ok(pa_data(
        PA_ETYPE_INFO2,
        to_der(&Asn1SequenceOf::from(entries), "ETYPE-INFO2")?,
    ))
}

/// A KRB-ERROR (RFC 4120 5.9.1) from this KDC's realm's TGS.
pub(crate) fn krb_error(
    kdc: &LocalKdc,
    code: i32,
    now: i64,
    e_data: Option<Vec<u8>>,
) -> Result<Vec<u8>, KdcError> {
    let tgs = [String::from("krbtgt"), kdc.realm.clone()];
    let err = ApplicationTag::<_, 30>(KrbErrorInner {
        pvno: ExplicitContextTag0::from(int_asn1(5)),
        msg_type: ExplicitContextTag1::from(int_asn1(30)),
        ctime: Optional::from(None),
        cusec: Optional::from(None),
        stime: picky_asn1::wrapper::ExplicitContextTag4::from(kerberos_time(now)),
        susec: picky_asn1::wrapper::ExplicitContextTag5::from(int_asn1(0)),
        error_code: picky_asn1::wrapper::ExplicitContextTag6::from(code as u32),
        crealm: Optional::from(None),
        cname: Optional::from(None),
        realm: ExplicitContextTag9::from(realm(&kdc.realm)?),
        sname: ExplicitContextTag10::from(principal_name(&tgs, 2).map_err(|_| malformed("realm"))?),
        e_text: Optional::from(None),
        e_data: Optional::from(
            e_data
                .map(|d| picky_asn1::wrapper::ExplicitContextTag12::from(OctetStringAsn1::from(d))),
        ),
    });
    to_der(&err, "KRB-ERROR")
}

/// The end of a ticket asked to last `till` (0 or the epoch: as long as allowed), from `start`,
/// no later than `cap`.
pub(crate) fn end_time(kdc: &LocalKdc, start: i64, till: i64, cap: i64) -> i64 {
    let longest = (start + kdc.ticket_life_secs).min(cap);
    if till <= 0 {
        longest
    } else {
        till.min(longest)
    }
}

#[cfg(test)]
mod tests;
