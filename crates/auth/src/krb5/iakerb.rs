//! IAKerb, the acceptor's side (draft-ietf-kitten-iakerb): a client that cannot reach a KDC
//! sends its KDC requests (AS-REQ, TGS-REQ) to the server inside the GSS exchange, the server
//! relays each to a KDC of the realm the token names and answers with the KDC's reply, and the
//! exchange ends with the usual AP-REQ/AP-REP of Kerberos, whose authenticator carries a
//! checksum over every IAKerb token exchanged (the "finished" extension of the GSS checksum).
//!
//! A token is `[APPLICATION 0] { OID 1.3.6.1.5.2.5, 05 01, IAKERB-HEADER, KDC message }`, the
//! header being `SEQUENCE { target-realm [1], cookie [2] OCTET STRING OPTIONAL, ... }`. Two
//! spellings are met:
//!
//! - **the draft's** ([`Dialect::Draft`]; MIT krb5 1.22 and later, and what Windows is expected
//!   to send): every token framed, the realm a UTF8String, the finished extension of type 2 with
//!   key usage 41;
//! - **MIT krb5 before 1.22** ([`Dialect::Mit`]; it followed draft-zhu-ws-kerb by mistake, MIT
//!   ticket 9123): only the first token framed (the others start at `05 01`), the realm an
//!   OCTET STRING, the finished extension of type 1 with key usage 42.
//!
//! The first token says which (the realm's tag), and the server answers in the same spelling.
//!
//! Sans-I/O: this module never talks to a KDC. [`Iakerb::request`] names the KDC exchange a
//! token asks for; the caller asks the KDC apart from the exchange and hands the reply back with
//! [`Iakerb::answered`] before stepping. Only the server's own realm is relayed (a server must
//! not be an open relay to arbitrary KDCs), KDC messages are bounded, and so are the round
//! trips of one logon.

use super::acceptor::Accepted;
use super::{checksum_suite, etype, gss_wrap, refused, TOK_AP_REP, TOK_AP_REQ};
use crate::spnego::{tlv, Der};
use crate::AuthError;

/// DER contents of the IAKERB mechanism OID 1.3.6.1.5.2.5.
pub const OID_IAKERB: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x02, 0x05];
/// The token identifier of an IAKERB proxy message.
pub const TOK_PROXY: [u8; 2] = [0x05, 0x01];
/// The largest KDC reply relayed to the client (the largest request is bounded by the token's
/// own limit, 64 KiB).
pub const KDC_REPLY_MAX: usize = 64 * 1024;
/// The most KDC round trips one logon may make (MIT's initiator needs 2 or 3: AS-REQ, again
/// with pre-authentication, TGS-REQ; a referral adds one).
pub const LEGS_MAX: usize = 8;
/// The longest realm name accepted.
const REALM_MAX: usize = 255;

/// ASN.1 tags of the realm in IAKERB-HEADER.
const TAG_UTF8: u8 = 0x0c;
const TAG_OCTETS: u8 = 0x04;

/// Which spelling of IAKerb the client speaks (module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// draft-ietf-kitten-iakerb (MIT 1.22+).
    Draft,
    /// MIT krb5 before 1.22.
    Mit,
}

impl Dialect {
    /// The GSS checksum extension that carries IAKERB-FINISHED, and the key usage of its
    /// checksum.
    fn finished(self) -> (u32, i32) {
        match self {
            Dialect::Draft => (2, 41),
            Dialect::Mit => (1, 42),
        }
    }
}

/// One IAKERB proxy token, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyToken<'a> {
    /// IAKERB-HEADER's target-realm.
    pub realm: String,
    /// IAKERB-HEADER's cookie.
    pub cookie: Option<&'a [u8]>,
    /// The KDC message (empty in a realm discovery request).
    pub message: &'a [u8],
    /// How the realm was spelt.
    pub dialect: Dialect,
}

/// A KDC exchange the client asks the server to relay: send `request` to a KDC of `realm` and
/// hand its reply back ([`Iakerb::answered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KdcRequest {
    pub realm: String,
    pub request: Vec<u8>,
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

/// Whether `token` is an IAKerb token: framed with the IAKERB OID (a proxy token or the final
/// AP-REQ), or an unframed proxy token of MIT's spelling.
pub fn is_iakerb(token: &[u8]) -> bool {
    token.starts_with(&TOK_PROXY) || unframe(token).is_ok()
}

/// `(token id, body)` of a token framed with the IAKERB OID.
fn unframe(token: &[u8]) -> Result<([u8; 2], &[u8]), AuthError> {
    let mut top = Der::new(token)?;
    let outer = top.expect(0x60, "IAKerb token without GSS framing")?;
    if !top.is_empty() {
        return Err(bad("trailing bytes after the IAKerb token"));
    }
    let mut inner = top.enter(&outer)?;
    let oid = inner.expect(0x06, "GSS token without mechanism OID")?;
    if oid.content != OID_IAKERB {
        return Err(AuthError::Unsupported("GSS mechanism other than IAKerb"));
    }
    let rest = &outer.content[oid.raw.len()..];
    if rest.len() < 2 {
        return Err(bad("IAKerb token without a token id"));
    }
    Ok(([rest[0], rest[1]], &rest[2..]))
}

/// Frame `body` as a GSS token of the IAKERB mechanism.
fn frame(tok_id: [u8; 2], body: &[u8]) -> Vec<u8> {
    let mut inner = tlv(0x06, OID_IAKERB);
    inner.extend(tok_id);
    inner.extend(body);
    tlv(0x60, &inner)
}

/// Whether `token` is a proxy token (framed or not), as opposed to the final AP-REQ.
pub fn is_proxy(token: &[u8]) -> bool {
    token.starts_with(&TOK_PROXY) || unframe(token).is_ok_and(|(id, _)| id == TOK_PROXY)
}

/// Parse a proxy token: framed, or (MIT's spelling after the first token) from `05 01` on.
pub fn parse_proxy(token: &[u8]) -> Result<ProxyToken<'_>, AuthError> {
    let body = match token.strip_prefix(&TOK_PROXY) {
        Some(body) => {
            if token.len() > crate::spnego::TOKEN_SIZE_MAX {
                return Err(bad("IAKerb token too large"));
            }
            body
        }
        None => match unframe(token)? {
            (TOK_PROXY, body) => body,
            _ => return Err(bad("IAKerb token is not a proxy message")),
        },
    };
    let mut d = Der::new(body)?;
    let header = d.expect(0x30, "IAKERB-HEADER is not a SEQUENCE")?;
    let message = &body[header.raw.len()..];
    let mut fields = d.enter(&header)?;
    let realm_field = fields.expect(0xa1, "IAKERB-HEADER without target-realm")?;
    let mut r = fields.enter(&realm_field)?;
    let realm = r.read()?;
    if !r.is_empty() {
        return Err(bad("trailing bytes in target-realm"));
    }
    let dialect = match realm.tag {
        TAG_UTF8 => Dialect::Draft,
        TAG_OCTETS => Dialect::Mit,
        _ => return Err(bad("target-realm is not a string")),
    };
    if realm.content.len() > REALM_MAX {
        return Err(bad("target-realm too long"));
    }
    let realm = std::str::from_utf8(realm.content)
        .ok()
        .filter(|r| r.chars().all(|c| c.is_ascii_graphic()))
        .ok_or(bad("target-realm is not a realm name"))?
        .to_string();
    let mut cookie = None;
    // Fields after the cookie are extensions (the header is extensible): skipped.
    while !fields.is_empty() {
        let f = fields.read()?;
        if f.tag == 0xa2 && cookie.is_none() {
            let mut c = fields.enter(&f)?;
            cookie = Some(
                c.expect(TAG_OCTETS, "cookie is not an OCTET STRING")?
                    .content,
            );
        }
    }
    if !message.is_empty() {
        // One KDC message, nothing after it.
        let mut m = Der::new(message)?;
        m.read()?;
        if !m.is_empty() {
            return Err(bad("trailing bytes after the KDC message"));
        }
    }
    Ok(ProxyToken {
        realm,
        cookie,
        message,
        dialect,
    })
}

/// A proxy token from the acceptor, spelt as `dialect` wants it.
pub fn proxy_token(dialect: Dialect, realm: &str, message: &[u8]) -> Vec<u8> {
    let tag = match dialect {
        Dialect::Draft => TAG_UTF8,
        Dialect::Mit => TAG_OCTETS,
    };
    let mut body = tlv(0x30, &tlv(0xa1, &tlv(tag, realm.as_bytes())));
    body.extend_from_slice(message);
    match dialect {
        Dialect::Draft => frame(TOK_PROXY, &body),
        Dialect::Mit => [&TOK_PROXY[..], &body].concat(),
    }
}

/// Whether `m` is a KDC request a client may have relayed: an AS-REQ or a TGS-REQ.
fn is_kdc_request(m: &[u8]) -> bool {
    matches!(m.first(), Some(0x6a | 0x6c))
}

/// Whether `m` is what a KDC answers: AS-REP, TGS-REP or KRB-ERROR.
fn is_kdc_reply(m: &[u8]) -> bool {
    matches!(m.first(), Some(0x6b | 0x6d | 0x7e))
}

/// The IAKerb part of one exchange: the tokens so far (the finished checksum covers them), the
/// round trips made, and the KDC's answer to the request of the token being stepped.
pub struct Iakerb {
    /// The server's realm: the only one relayed.
    own_realm: String,
    dialect: Option<Dialect>,
    legs: usize,
    /// Every proxy token received and sent, in order, as they were on the wire.
    conversation: Vec<u8>,
    answer: Option<(KdcRequest, Result<Vec<u8>, String>)>,
}

impl Iakerb {
    /// The IAKerb state of an exchange on a server of realm `own_realm`.
    pub fn new(own_realm: &str) -> Iakerb {
        Iakerb {
            own_realm: own_realm.to_string(),
            dialect: None,
            legs: 0,
            conversation: Vec::new(),
            answer: None,
        }
    }

    /// The KDC exchange `token` asks this server to relay, if it is a proxy token with a KDC
    /// request for the server's own realm within the bounds: what the caller asks a KDC before
    /// stepping. Anything else (another realm, a bad token, too many round trips) is None,
    /// and the step refuses it with the reason.
    pub fn request(&self, token: &[u8]) -> Option<KdcRequest> {
        let p = parse_proxy(token).ok()?;
        let ok = self.legs < LEGS_MAX
            && !self.own_realm.is_empty()
            && p.realm.eq_ignore_ascii_case(&self.own_realm)
            && is_kdc_request(p.message);
        ok.then(|| KdcRequest {
            realm: self.own_realm.clone(),
            request: p.message.to_vec(),
        })
    }

    /// The KDC's reply to `request` (or why there is none), for the next step.
    pub fn answered(&mut self, request: KdcRequest, reply: Result<Vec<u8>, String>) {
        self.answer = Some((request, reply));
    }

    /// Whether the exchange went through IAKerb legs (then the AP-REQ must carry the finished
    /// checksum).
    pub fn proxied(&self) -> bool {
        self.legs > 0
    }

    /// Step a proxy token: the token that answers it (the KDC's reply, or for a realm discovery
    /// request the server's realm).
    pub fn proxy(&mut self, token: &[u8]) -> Result<Vec<u8>, AuthError> {
        let answer = self.answer.take();
        let p = parse_proxy(token)?;
        if *self.dialect.get_or_insert(p.dialect) != p.dialect {
            return Err(bad("IAKerb tokens of two spellings in one exchange"));
        }
        if self.legs >= LEGS_MAX {
            return Err(refused(format!(
                "IAKerb: more than {LEGS_MAX} KDC round trips in one logon"
            )));
        }
        if self.own_realm.is_empty() {
            return Err(refused(
                "IAKerb: the client asked this server to reach its KDC, but no realm is \
                 configured (set 'realm')",
            ));
        }
        let reply = if p.realm.is_empty() && p.message.is_empty() && p.dialect == Dialect::Draft {
            // Realm discovery (draft-ietf-kitten-iakerb-03 3.1): the answer names the realm.
            (self.own_realm.clone(), Vec::new())
        } else {
            if !p.realm.eq_ignore_ascii_case(&self.own_realm) {
                return Err(refused(format!(
                    "IAKerb: the client asked this server to reach a KDC of realm {:?}; only \
                     its own realm {} is relayed",
                    p.realm, self.own_realm
                )));
            }
            if !is_kdc_request(p.message) {
                return Err(bad("IAKerb token without an AS-REQ or TGS-REQ"));
            }
            let asked = KdcRequest {
                realm: self.own_realm.clone(),
                request: p.message.to_vec(),
            };
            let reply = match answer {
                Some((request, reply)) if request == asked => reply,
                _ => Err("the KDC was not asked".to_string()),
            }
            .map_err(|why| {
                refused(format!(
                    "IAKerb: the KDC of realm {}: {why}",
                    self.own_realm
                ))
            })?;
            if reply.len() > KDC_REPLY_MAX || !is_kdc_reply(&reply) {
                return Err(refused(format!(
                    "IAKerb: the KDC of realm {} answered {} bytes that are not a KDC reply \
                     of at most {KDC_REPLY_MAX}",
                    self.own_realm,
                    reply.len()
                )));
            }
            (p.realm.clone(), reply)
        };
        let out = proxy_token(p.dialect, &reply.0, &reply.1);
        self.conversation.extend_from_slice(token);
        self.conversation.extend_from_slice(&out);
        self.legs += 1;
        Ok(out)
    }

    /// Check the finished checksum of an accepted AP-REQ: after IAKerb legs its authenticator's
    /// GSS checksum must carry IAKERB-FINISHED, a checksum with the initiator's subkey over
    /// every proxy token of the exchange, so that nobody between the client and the server
    /// changed them.
    pub fn check_finished(&self, acc: &Accepted) -> Result<(), AuthError> {
        let Some(dialect) = self.dialect.filter(|_| self.proxied()) else {
            return Ok(());
        };
        let (ext_type, usage) = dialect.finished();
        let finished = gss_extension(&acc.gss_checksum, ext_type)?.ok_or(refused(
            "IAKerb: the AP-REQ carries no finished checksum over the exchange",
        ))?;
        let (cksumtype, sum) = parse_finished(finished)?;
        let (key, key_etype) = (&acc.initiator_key.0, acc.initiator_key.1);
        let want_type = match key_etype {
            etype::AES128 => 15,
            etype::AES256 => 16,
            e => {
                return Err(refused(format!(
                    "IAKerb: no finished checksum for enctype {e}"
                )))
            }
        };
        if cksumtype != want_type {
            return Err(refused(format!(
                "IAKerb: finished checksum of type {cksumtype}, the key's is {want_type}"
            )));
        }
        let mut want = checksum_suite(key_etype)?
            .hasher()
            .checksum(key, usage, &self.conversation)
            .map_err(|e| refused(format!("IAKerb finished checksum: {e}")))?;
        want.truncate(12);
        if !ringshare_crypto::ct_eq(&want, sum) {
            return Err(refused(
                "IAKerb: the finished checksum does not match the exchange (tokens changed \
                 on the way)",
            ));
        }
        Ok(())
    }
}

/// An AP-REQ framed with the IAKERB OID, framed as Kerberos 5's for the acceptor (MIT's
/// initiator names IAKerb in its AP-REQ's framing).
pub fn ap_req_as_krb5(token: &[u8]) -> Result<Vec<u8>, AuthError> {
    match unframe(token)? {
        (TOK_AP_REQ, msg) => Ok(gss_wrap(TOK_AP_REQ, msg)),
        _ => Err(bad("IAKerb token is not an AP-REQ")),
    }
}

/// The acceptor's AP-REP (framed as Kerberos 5's) framed with the IAKERB OID, as the initiator
/// expects it back.
pub fn ap_rep_as_iakerb(token: &[u8]) -> Result<Vec<u8>, AuthError> {
    match super::gss_unwrap(token)? {
        (TOK_AP_REP, msg) => Ok(frame(TOK_AP_REP, msg)),
        _ => Err(bad("not an AP-REP")),
    }
}

/// The error-code of a KRB-ERROR (RFC 4120 5.9.1), None for anything else: a KDC that answers
/// KRB_ERR_RESPONSE_TOO_BIG (52) over UDP is asked again over TCP.
pub fn krb_error_code(m: &[u8]) -> Option<i64> {
    let mut d = Der::new(m).ok()?;
    let app = d.expect(0x7e, "").ok()?;
    let mut a = d.enter(&app).ok()?;
    let seq = a.expect(0x30, "").ok()?;
    let mut fields = a.enter(&seq).ok()?;
    while !fields.is_empty() {
        let f = fields.read().ok()?;
        if f.tag == 0xa6 {
            let mut i = fields.enter(&f).ok()?;
            let n = i.expect(0x02, "").ok()?;
            if n.content.is_empty() || n.content.len() > 4 {
                return None;
            }
            return Some(n.content.iter().fold(0i64, |a, x| (a << 8) | i64::from(*x)));
        }
    }
    None
}

/// The extension `ext_type` of a GSS checksum (RFC 4121 4.1.1: 24 bytes, the delegation option
/// when the DELEG flag is set, then extensions of a 4-byte big-endian type and length each).
fn gss_extension(c: &[u8], ext_type: u32) -> Result<Option<&[u8]>, AuthError> {
    let short = || refused("IAKerb: GSS checksum truncated");
    let flags = u32::from_le_bytes(
        c.get(20..24)
            .ok_or_else(short)?
            .try_into()
            .unwrap_or([0; 4]),
    );
    let mut rest = &c[24..];
    if flags & 0x1 != 0 && rest.len() >= 4 {
        let len = usize::from(u16::from_le_bytes([rest[2], rest[3]]));
        rest = rest.get(4 + len..).ok_or_else(short)?;
    }
    while !rest.is_empty() {
        let head = rest.get(..8).ok_or_else(short)?;
        let t = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]) as usize;
        let data = rest.get(8..8usize.saturating_add(len)).ok_or_else(short)?;
        if t == ext_type {
            return Ok(Some(data));
        }
        rest = &rest[8 + len..];
    }
    Ok(None)
}

/// IAKERB-FINISHED ::= SEQUENCE { iakerb-finished [1] Checksum }: the checksum's type and bytes.
fn parse_finished(b: &[u8]) -> Result<(i64, &[u8]), AuthError> {
    let mut d = Der::new(b)?;
    let seq = d.expect(0x30, "IAKERB-FINISHED is not a SEQUENCE")?;
    let mut f = d.enter(&seq)?;
    let ck = f.expect(0xa1, "IAKERB-FINISHED without a checksum")?;
    let mut c = f.enter(&ck)?;
    let ck = c.expect(0x30, "Checksum is not a SEQUENCE")?;
    let mut fields = c.enter(&ck)?;
    let t = fields.expect(0xa0, "Checksum without cksumtype")?;
    let mut ti = fields.enter(&t)?;
    let n = ti.expect(0x02, "cksumtype is not an INTEGER")?;
    if n.content.is_empty() || n.content.len() > 4 {
        return Err(bad("cksumtype out of range"));
    }
    let neg = n.content[0] & 0x80 != 0;
    let cksumtype = n
        .content
        .iter()
        .fold(if neg { -1i64 } else { 0 }, |a, x| (a << 8) | i64::from(*x));
    let s = fields.expect(0xa1, "Checksum without checksum")?;
    let mut si = fields.enter(&s)?;
    let sum = si.expect(TAG_OCTETS, "checksum is not an OCTET STRING")?;
    Ok((cksumtype, sum.content))
}

#[cfg(test)]
#[path = "iakerb_tests.rs"]
pub(crate) mod tests;
