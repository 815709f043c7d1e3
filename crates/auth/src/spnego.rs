//! SPNEGO ([MS-SPNG], RFC 4178) tokens, DER encoded and decoded by hand.
//!
//! Decoding goes through [`Der`], a bounds-checked reader: definite lengths only (indefinite
//! lengths are refused, as DER requires), lengths of at most 4 bytes, no length past the end of
//! its enclosing value, a nesting limit, and a cap on the whole token. Decoding never panics.

use crate::AuthError;

/// DER contents of the SPNEGO OID 1.3.6.1.5.5.2.
pub const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// DER contents of the NTLMSSP OID 1.3.6.1.4.1.311.2.2.10.
pub const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];

/// The largest SPNEGO token accepted.
pub const TOKEN_SIZE_MAX: usize = 64 * 1024;
/// The deepest DER nesting followed.
pub const DEPTH_MAX: usize = 8;
/// The most mechanisms accepted in a mechTypes list.
pub const MECH_TYPES_MAX: usize = 16;

/// negState values (RFC 4178 4.2.2).
pub mod neg_state {
    /// The exchange is complete and succeeded.
    pub const ACCEPT_COMPLETED: u8 = 0;
    /// More tokens follow.
    pub const ACCEPT_INCOMPLETE: u8 = 1;
    /// Authentication was refused.
    pub const REJECT: u8 = 2;
    /// The acceptor asks for a mechListMIC.
    pub const REQUEST_MIC: u8 = 3;
}

const TAG_SEQUENCE: u8 = 0x30;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_OID: u8 = 0x06;
const TAG_ENUMERATED: u8 = 0x0a;
const TAG_GENERAL_STRING: u8 = 0x1b;
const TAG_APPLICATION_0: u8 = 0x60;
const fn ctx(n: u8) -> u8 {
    0xa0 | n
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

/// One decoded TLV.
#[derive(Debug, Clone, Copy)]
pub struct Tlv<'a> {
    /// The identifier octet.
    pub tag: u8,
    /// The contents octets.
    pub content: &'a [u8],
    /// The whole encoding, identifier and length included.
    pub raw: &'a [u8],
}

/// A bounds-checked DER reader over one level of TLVs.
#[derive(Debug, Clone)]
pub struct Der<'a> {
    buf: &'a [u8],
    depth: usize,
}

impl<'a> Der<'a> {
    /// A reader over a whole token (checked against [`TOKEN_SIZE_MAX`]).
    pub fn new(buf: &'a [u8]) -> Result<Self, AuthError> {
        if buf.len() > TOKEN_SIZE_MAX {
            return Err(bad("SPNEGO token too large"));
        }
        Ok(Der { buf, depth: 0 })
    }

    /// Whether all bytes have been read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Read the next TLV.
    pub fn read(&mut self) -> Result<Tlv<'a>, AuthError> {
        let buf = self.buf;
        let tag = *buf.first().ok_or(bad("DER value truncated"))?;
        if tag & 0x1f == 0x1f {
            return Err(bad("DER high tag numbers are not used by SPNEGO"));
        }
        let first = *buf.get(1).ok_or(bad("DER length truncated"))?;
        let (len, header) = if first < 0x80 {
            (first as usize, 2)
        } else if first == 0x80 {
            return Err(bad("DER indefinite length"));
        } else {
            let n = (first & 0x7f) as usize;
            if n > 4 {
                return Err(bad("DER length too long"));
            }
            let bytes = buf.get(2..2 + n).ok_or(bad("DER length truncated"))?;
            let len = bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (len, 2 + n)
        };
        let end = header.checked_add(len).ok_or(bad("DER length overflow"))?;
        if end > buf.len() {
            return Err(bad("DER length past end"));
        }
        self.buf = &buf[end..];
        Ok(Tlv {
            tag,
            content: &buf[header..end],
            raw: &buf[..end],
        })
    }

    /// Read the next TLV and require its tag.
    pub fn expect(&mut self, tag: u8, what: &'static str) -> Result<Tlv<'a>, AuthError> {
        let t = self.read()?;
        if t.tag != tag {
            return Err(bad(what));
        }
        Ok(t)
    }

    /// A reader over the contents of a constructed value, one level deeper.
    pub fn enter(&self, tlv: &Tlv<'a>) -> Result<Der<'a>, AuthError> {
        if self.depth + 1 > DEPTH_MAX {
            return Err(bad("DER nesting too deep"));
        }
        Ok(Der {
            buf: tlv.content,
            depth: self.depth + 1,
        })
    }
}

/// DER-encode one TLV with a minimal length.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = (n as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// A NegTokenInit (or NegTokenInit2) from the initiator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegTokenInit {
    /// OID contents of each offered mechanism, most preferred first.
    pub mech_types: Vec<Vec<u8>>,
    /// The DER of the MechTypeList exactly as received: what a mechListMIC covers.
    pub mech_types_der: Vec<u8>,
    /// The optimistic token for the first mechanism.
    pub mech_token: Option<Vec<u8>>,
    /// mechListMIC, if sent.
    pub mech_list_mic: Option<Vec<u8>>,
}

/// A NegTokenResp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegTokenResp {
    /// negState, see [`neg_state`].
    pub neg_state: Option<u8>,
    /// OID contents of the selected mechanism.
    pub supported_mech: Option<Vec<u8>>,
    /// The mechanism token.
    pub response_token: Option<Vec<u8>>,
    /// mechListMIC.
    pub mech_list_mic: Option<Vec<u8>>,
}

/// A decoded SPNEGO token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegToken {
    /// negTokenInit, with or without the GSS-API InitialContextToken framing.
    Init(NegTokenInit),
    /// negTokenResp.
    Resp(NegTokenResp),
}

/// Decode a SPNEGO token: `[APPLICATION 0] { SPNEGO OID, negTokenInit }`, a bare
/// `[0] negTokenInit`, or `[1] negTokenResp`.
pub fn decode(token: &[u8]) -> Result<NegToken, AuthError> {
    let mut top = Der::new(token)?;
    let outer = top.read()?;
    if !top.is_empty() {
        return Err(bad("trailing bytes after SPNEGO token"));
    }
    match outer.tag {
        TAG_APPLICATION_0 => {
            let mut inner = top.enter(&outer)?;
            let oid = inner.expect(TAG_OID, "GSS token without mechanism OID")?;
            if oid.content != OID_SPNEGO {
                return Err(AuthError::Unsupported("GSS mechanism other than SPNEGO"));
            }
            let init = inner.expect(ctx(0), "GSS token without negTokenInit")?;
            if !inner.is_empty() {
                return Err(bad("trailing bytes in GSS token"));
            }
            Ok(NegToken::Init(decode_init(&inner, &init)?))
        }
        t if t == ctx(0) => Ok(NegToken::Init(decode_init(&top, &outer)?)),
        t if t == ctx(1) => Ok(NegToken::Resp(decode_resp(&top, &outer)?)),
        _ => Err(bad("not a SPNEGO token")),
    }
}

fn octets(parent: &Der<'_>, t: &Tlv<'_>, what: &'static str) -> Result<Vec<u8>, AuthError> {
    let mut d = parent.enter(t)?;
    let s = d.expect(TAG_OCTET_STRING, what)?;
    if !d.is_empty() {
        return Err(bad(what));
    }
    Ok(s.content.to_vec())
}

fn decode_init(parent: &Der<'_>, wrapper: &Tlv<'_>) -> Result<NegTokenInit, AuthError> {
    let mut w = parent.enter(wrapper)?;
    let seq = w.expect(TAG_SEQUENCE, "negTokenInit is not a SEQUENCE")?;
    if !w.is_empty() {
        return Err(bad("trailing bytes in negTokenInit"));
    }
    let mut fields = w.enter(&seq)?;
    let mut out = NegTokenInit::default();
    let mut last = None;
    while !fields.is_empty() {
        let f = fields.read()?;
        if last.is_some_and(|l| f.tag <= l) {
            return Err(bad("negTokenInit fields out of order"));
        }
        last = Some(f.tag);
        match f.tag {
            t if t == ctx(0) => {
                let mut d = fields.enter(&f)?;
                let list = d.expect(TAG_SEQUENCE, "mechTypes is not a SEQUENCE")?;
                if !d.is_empty() {
                    return Err(bad("trailing bytes in mechTypes"));
                }
                out.mech_types_der = list.raw.to_vec();
                let mut oids = d.enter(&list)?;
                while !oids.is_empty() {
                    let oid = oids.expect(TAG_OID, "mechTypes entry is not an OID")?;
                    if out.mech_types.len() >= MECH_TYPES_MAX {
                        return Err(bad("too many mechTypes"));
                    }
                    out.mech_types.push(oid.content.to_vec());
                }
            }
            t if t == ctx(1) => {} // reqFlags: ignored ([MS-SPNG] 3.2.5.1)
            t if t == ctx(2) => {
                out.mech_token = Some(octets(&fields, &f, "mechToken is not an OCTET STRING")?)
            }
            t if t == ctx(3) => {
                // RFC 4178 mechListMIC (OCTET STRING) or [MS-SPNG] NegTokenInit2 negHints (SEQUENCE).
                let mut d = fields.enter(&f)?;
                let v = d.read()?;
                if v.tag == TAG_OCTET_STRING {
                    out.mech_list_mic = Some(v.content.to_vec());
                }
            }
            t if t == ctx(4) => {
                out.mech_list_mic = Some(octets(&fields, &f, "mechListMIC is not an OCTET STRING")?)
            }
            _ => return Err(bad("unknown negTokenInit field")),
        }
    }
    if out.mech_types_der.is_empty() {
        return Err(bad("negTokenInit without mechTypes"));
    }
    Ok(out)
}

fn decode_resp(parent: &Der<'_>, wrapper: &Tlv<'_>) -> Result<NegTokenResp, AuthError> {
    let mut w = parent.enter(wrapper)?;
    let seq = w.expect(TAG_SEQUENCE, "negTokenResp is not a SEQUENCE")?;
    if !w.is_empty() {
        return Err(bad("trailing bytes in negTokenResp"));
    }
    let mut fields = w.enter(&seq)?;
    let mut out = NegTokenResp::default();
    let mut last = None;
    while !fields.is_empty() {
        let f = fields.read()?;
        if last.is_some_and(|l| f.tag <= l) {
            return Err(bad("negTokenResp fields out of order"));
        }
        last = Some(f.tag);
        let mut d = fields.enter(&f)?;
        let v = d.read()?;
        if !d.is_empty() {
            return Err(bad("trailing bytes in negTokenResp field"));
        }
        match (f.tag, v.tag) {
            (t, TAG_ENUMERATED) if t == ctx(0) => match v.content {
                [s] if *s <= neg_state::REQUEST_MIC => out.neg_state = Some(*s),
                _ => return Err(bad("bad negState")),
            },
            (t, TAG_OID) if t == ctx(1) => out.supported_mech = Some(v.content.to_vec()),
            (t, TAG_OCTET_STRING) if t == ctx(2) => out.response_token = Some(v.content.to_vec()),
            (t, TAG_OCTET_STRING) if t == ctx(3) => out.mech_list_mic = Some(v.content.to_vec()),
            _ => return Err(bad("bad negTokenResp field")),
        }
    }
    Ok(out)
}

/// DER of a MechTypeList with the given OIDs.
pub fn mech_type_list(oids: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = oids.iter().flat_map(|o| tlv(TAG_OID, o)).collect();
    tlv(TAG_SEQUENCE, &body)
}

/// Encode a negTokenInit inside the GSS-API InitialContextToken framing.
pub fn encode_init(
    mech_types_der: &[u8],
    mech_token: Option<&[u8]>,
    hint: Option<&str>,
) -> Vec<u8> {
    let mut body = tlv(ctx(0), mech_types_der);
    if let Some(t) = mech_token {
        body.extend(tlv(ctx(2), &tlv(TAG_OCTET_STRING, t)));
    }
    if let Some(h) = hint {
        // NegTokenInit2 negHints { hintName [0] GeneralString } ([MS-SPNG] 2.2.1).
        let hints = tlv(
            TAG_SEQUENCE,
            &tlv(ctx(0), &tlv(TAG_GENERAL_STRING, h.as_bytes())),
        );
        body.extend(tlv(ctx(3), &hints));
    }
    let init = tlv(ctx(0), &tlv(TAG_SEQUENCE, &body));
    let mut inner = tlv(TAG_OID, OID_SPNEGO);
    inner.extend(init);
    tlv(TAG_APPLICATION_0, &inner)
}

/// Encode a negTokenResp.
pub fn encode_resp(r: &NegTokenResp) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(s) = r.neg_state {
        body.extend(tlv(ctx(0), &tlv(TAG_ENUMERATED, &[s])));
    }
    if let Some(m) = &r.supported_mech {
        body.extend(tlv(ctx(1), &tlv(TAG_OID, m)));
    }
    if let Some(t) = &r.response_token {
        body.extend(tlv(ctx(2), &tlv(TAG_OCTET_STRING, t)));
    }
    if let Some(m) = &r.mech_list_mic {
        body.extend(tlv(ctx(3), &tlv(TAG_OCTET_STRING, m)));
    }
    tlv(ctx(1), &tlv(TAG_SEQUENCE, &body))
}

/// The NegTokenInit2 the server puts in the NEGOTIATE response: mechTypes {NTLMSSP} and the
/// conventional hint name ([MS-SPNG] 3.2.5.2).
pub fn negotiate_hint() -> Vec<u8> {
    negotiate_hint_for(false)
}

/// The NEGOTIATE hint of a server that accepts Kerberos when `kerberos`: mechTypes {MS-KRB5,
/// KRB5, NTLMSSP}, as Windows and Samba servers list them.
pub fn negotiate_hint_for(kerberos: bool) -> Vec<u8> {
    let oids: &[&[u8]] = if kerberos {
        &[crate::krb5::OID_MS_KRB5, crate::krb5::OID_KRB5, OID_NTLMSSP]
    } else {
        &[OID_NTLMSSP]
    };
    encode_init(
        &mech_type_list(oids),
        None,
        Some("not_defined_in_RFC4178@please_ignore"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    /// The SESSION_SETUP request token of Microsoft's SMB 3.1.1 key-derivation example (blog
    /// "SMB 2 and SMB 3 security in Windows 10: the anatomy of signing and cryptographic keys").
    const WINDOWS_INIT: &str = "604806062B0601050502A03E303CA00E300C060A2B06010401823702020AA22A\
        04284E544C4D5353500001000000978208E200000000000000000000000000000000060380250000000F";

    #[test]
    fn decodes_a_windows_neg_token_init() {
        let NegToken::Init(init) = decode(&unhex(WINDOWS_INIT)).unwrap() else {
            panic!("not init")
        };
        assert_eq!(init.mech_types, vec![OID_NTLMSSP.to_vec()]);
        assert_eq!(init.mech_types_der, unhex("300C060A2B06010401823702020A"));
        assert!(init.mech_token.unwrap().starts_with(b"NTLMSSP\0\x01"));
        assert_eq!(init.mech_list_mic, None);
    }

    #[test]
    fn encodes_the_windows_neg_token_init_byte_for_byte() {
        let t = unhex(WINDOWS_INIT);
        let NegToken::Init(init) = decode(&t).unwrap() else {
            panic!()
        };
        assert_eq!(
            encode_init(&init.mech_types_der, init.mech_token.as_deref(), None),
            t
        );
    }

    #[test]
    fn negotiate_hint_offers_ntlmssp_and_decodes() {
        let h = negotiate_hint();
        let NegToken::Init(init) = decode(&h).unwrap() else {
            panic!()
        };
        assert_eq!(init.mech_types, vec![OID_NTLMSSP.to_vec()]);
        assert_eq!(init.mech_token, None);
        assert_eq!(init.mech_list_mic, None);
    }

    #[test]
    fn resp_round_trips() {
        let r = NegTokenResp {
            neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
            supported_mech: Some(OID_NTLMSSP.to_vec()),
            response_token: Some(vec![7; 300]),
            mech_list_mic: Some(vec![1; 16]),
        };
        assert_eq!(decode(&encode_resp(&r)).unwrap(), NegToken::Resp(r));
    }

    #[test]
    fn long_lengths_use_minimal_encoding() {
        assert_eq!(tlv(4, &[0; 0x7f])[..2], [4, 0x7f]);
        assert_eq!(tlv(4, &[0; 0x80])[..3], [4, 0x81, 0x80]);
        assert_eq!(tlv(4, &[0; 0x100])[..4], [4, 0x82, 1, 0]);
    }

    #[test]
    fn rejects_lengths_past_the_end() {
        let mut t = unhex(WINDOWS_INIT);
        t[1] = 0x49; // one more than there is
        assert!(matches!(decode(&t), Err(AuthError::Malformed(_))));
        // An inner length past its parent's end.
        let mut t = unhex(WINDOWS_INIT);
        t[11] = 0x7f;
        assert!(matches!(decode(&t), Err(AuthError::Malformed(_))));
    }

    #[test]
    fn rejects_indefinite_lengths() {
        let t = [
            0x60, 0x80, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02, 0x00, 0x00,
        ];
        assert_eq!(
            decode(&t),
            Err(AuthError::Malformed("DER indefinite length"))
        );
        assert!(decode(&[0xa1, 0x80, 0x30, 0x80, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn rejects_huge_lengths_without_allocating() {
        assert!(decode(&[0xa1, 0x84, 0xff, 0xff, 0xff, 0xff, 0x30]).is_err());
        assert!(decode(&[0xa1, 0x88, 1, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let big = vec![0u8; TOKEN_SIZE_MAX + 1];
        assert_eq!(
            decode(&big),
            Err(AuthError::Malformed("SPNEGO token too large"))
        );
    }

    #[test]
    fn rejects_deep_nesting() {
        // 1000 nested [1] constructed values: decoding stops at the structure or depth limit.
        let mut t = vec![0x04, 0x00];
        for _ in 0..1000 {
            t = tlv(0xa1, &t);
            if t.len() > TOKEN_SIZE_MAX - 8 {
                break;
            }
        }
        assert!(matches!(decode(&t), Err(AuthError::Malformed(_))));
        // The reader itself refuses to go deeper than DEPTH_MAX.
        let mut t = vec![0x04, 0x00];
        for _ in 0..20 {
            t = tlv(0x30, &t);
        }
        let mut d = Der::new(&t).unwrap();
        let mut levels = 0;
        loop {
            let v = d.read().unwrap();
            match d.enter(&v) {
                Ok(inner) => d = inner,
                Err(_) => break,
            }
            levels += 1;
            if v.tag != 0x30 {
                break;
            }
        }
        assert_eq!(levels, DEPTH_MAX);
    }

    #[test]
    fn no_truncation_or_byte_flip_of_a_real_token_panics() {
        let t = unhex(WINDOWS_INIT);
        for n in 0..t.len() {
            assert!(decode(&t[..n]).is_err(), "prefix {n} accepted");
        }
        for i in 0..t.len() {
            for x in [0x00u8, 0x7f, 0x80, 0x81, 0x84, 0xff] {
                let mut m = t.clone();
                m[i] = x;
                let _ = decode(&m);
            }
        }
    }

    #[test]
    fn rejects_other_gss_mechanisms_and_trailing_bytes() {
        // Kerberos OID 1.2.840.113554.1.2.2 as the GSS mechanism.
        let krb = tlv(
            0x60,
            &[
                tlv(
                    0x06,
                    &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02],
                ),
                vec![0x01, 0x00],
            ]
            .concat(),
        );
        assert!(matches!(decode(&krb), Err(AuthError::Unsupported(_))));
        let mut t = unhex(WINDOWS_INIT);
        t.push(0);
        assert!(decode(&t).is_err());
    }
}
