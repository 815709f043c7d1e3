//! Kerberos 5 as a GSS-API acceptor (RFC 4120, RFC 4121, [MS-KILE] 3.1.1.2, 3.4.5): the server
//! side of a SESSION_SETUP that carries a ticket.
//!
//! The ASN.1 types and the RFC 3961/3962 crypto come from `picky-krb`, RC4-HMAC (RFC 4757, off
//! unless configured) from [`rc4hmac`]; what a trusted acceptor checks is here ([`acceptor`]):
//! the key by enctype and kvno from the keytab ([`keytab`]), the ticket's service name, realm,
//! flags and times, the authenticator and its GSS checksum, a process-wide replay cache
//! ([`replay`]), and the PAC's server signature ([`pac`]). The answer is an AP-REP with a fresh
//! acceptor subkey (for an RC4 client subkey, that subkey given back), which is the SMB session
//! key at its full length.
//!
//! Sans-I/O: the time and the fresh key material are parameters (RC4-HMAC's confounders are
//! derived from them); nothing here reads a file or a clock. picky-krb draws AES confounders
//! itself.

pub mod acceptor;
pub mod ccache;
pub mod dce;
pub mod domain;
pub mod iakerb;
pub mod initiator;
pub mod kdc;
pub mod keytab;
pub mod logon_info;
pub mod mic;
pub mod pac;
pub mod rc4hmac;
pub mod replay;

use picky_asn1::wrapper::{
    ExplicitContextTag0, ExplicitContextTag1, GeneralizedTimeAsn1, IntegerAsn1, OctetStringAsn1,
};
use picky_krb::crypto::{ChecksumSuite, CipherSuite};
use picky_krb::data_types::EncryptionKey;

use crate::spnego::{tlv, Der};
use crate::AuthError;

/// DER contents of the Kerberos 5 GSS mechanism OID 1.2.840.113554.1.2.2.
pub const OID_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// DER contents of Microsoft's Kerberos OID 1.2.840.48018.1.2.2 ([MS-SPNG] 3.3.5.1.1): Windows
/// lists it first and means Kerberos 5.
pub const OID_MS_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];

/// GSS token identifiers (RFC 4121 4.1).
pub const TOK_AP_REQ: [u8; 2] = [0x01, 0x00];
/// AP-REP.
pub const TOK_AP_REP: [u8; 2] = [0x02, 0x00];
/// KRB-ERROR.
pub const TOK_KRB_ERROR: [u8; 2] = [0x03, 0x00];

/// Encryption types this acceptor knows (RFC 3962, RFC 4757).
pub mod etype {
    /// aes128-cts-hmac-sha1-96.
    pub const AES128: i32 = 17;
    /// aes256-cts-hmac-sha1-96.
    pub const AES256: i32 = 18;
    /// rc4-hmac.
    pub const RC4_HMAC: i32 = 23;
}

/// The largest Kerberos GSS token accepted (an AD ticket with a large PAC is a few KiB; the
/// SESSION_SETUP buffer is capped before this).
pub const TOKEN_SIZE_MAX: usize = 64 * 1024;

/// A bounds-checked big-endian reader, for the keytab and ccache files: a length past the end
/// is `truncated`, never a panic.
pub(crate) struct BeReader<'a> {
    pub(crate) buf: &'a [u8],
    truncated: &'static str,
}

impl<'a> BeReader<'a> {
    pub(crate) fn new(buf: &'a [u8], truncated: &'static str) -> Self {
        BeReader { buf, truncated }
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], AuthError> {
        if n > self.buf.len() {
            return Err(AuthError::Malformed(self.truncated));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, AuthError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, AuthError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, AuthError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// `n` bytes as UTF-8.
    pub(crate) fn utf8(&mut self, n: usize, what: &'static str) -> Result<String, AuthError> {
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| AuthError::Malformed(what))
    }
}

/// What the acceptor logs when it refuses an RC4-HMAC ticket or key (the default).
pub const RC4_REFUSED: &str = "ticket encrypted with RC4-HMAC (enctype 23), which this server \
     does not accept; give the service account AES keys (msDS-SupportedEncryptionTypes), or \
     set 'kerberos encryption types = all' to accept RC4";

/// How an encryption type encrypts: aes*-cts-hmac-sha1-96 (RFC 3962, from picky-krb) or
/// RC4-HMAC (RFC 4757, [`rc4hmac`]).
pub(crate) enum Cipher {
    Aes(CipherSuite),
    Rc4,
}

/// The cipher of an encryption type. Whether RC4 is allowed is the acceptor's question.
pub(crate) fn cipher(e: i64) -> Result<Cipher, AuthError> {
    match e {
        x if x == etype::AES256 as i64 => Ok(Cipher::Aes(CipherSuite::Aes256CtsHmacSha196)),
        x if x == etype::AES128 as i64 => Ok(Cipher::Aes(CipherSuite::Aes128CtsHmacSha196)),
        x if x == etype::RC4_HMAC as i64 => Ok(Cipher::Rc4),
        x => Err(refused(format!("encryption type {x} not supported"))),
    }
}

impl Cipher {
    /// The length of its keys.
    pub(crate) fn key_size(&self) -> usize {
        match self {
            Cipher::Aes(s) => s.cipher().key_size(),
            Cipher::Rc4 => rc4hmac::KEY_LEN,
        }
    }

    /// The plaintext of `data`, None when it does not decrypt with `key` for `usage`.
    pub(crate) fn decrypt(&self, key: &[u8], usage: i32, data: &[u8]) -> Option<Vec<u8>> {
        match self {
            Cipher::Aes(s) => s.cipher().decrypt(key, usage, data).ok(),
            Cipher::Rc4 => rc4hmac::decrypt(key, usage, data),
        }
    }

    /// `plain` encrypted with `key` for `usage`. RC4-HMAC takes `confounder`; AES makes its
    /// own (picky-krb draws it).
    pub(crate) fn encrypt(
        &self,
        key: &[u8],
        usage: i32,
        plain: &[u8],
        confounder: &[u8; 8],
    ) -> Result<Vec<u8>, AuthError> {
        match self {
            Cipher::Aes(s) => s
                .cipher()
                .encrypt(key, usage, plain)
                .map_err(|e| refused(format!("encrypting with usage {usage}: {e}"))),
            Cipher::Rc4 if key.len() != rc4hmac::KEY_LEN => {
                Err(refused("an RC4-HMAC key is not 16 bytes"))
            }
            Cipher::Rc4 => Ok(rc4hmac::encrypt(key, usage, confounder, plain)),
        }
    }
}

/// A confounder for RC4-HMAC made from `secret` fresh bytes (the acceptor's random material, a
/// client's fresh subkey) and a `label`: HMAC-MD5's first 8 bytes, so that the sans-I/O code
/// needs no randomness of its own and tests are repeatable.
pub(crate) fn confounder(secret: &[u8], label: &[u8]) -> [u8; 8] {
    let mac = crate::ntlm::hmac_md5(secret, &[b"ringshare RC4-HMAC confounder", label]);
    mac[..8].try_into().expect("8 of 16 bytes")
}

/// The checksum (get_mic) of an encryption type's keys: HMAC-SHA1-96 with the AES key.
pub(crate) fn checksum_suite(e: i32) -> Result<ChecksumSuite, AuthError> {
    match e {
        etype::AES256 => Ok(ChecksumSuite::HmacSha196Aes256),
        etype::AES128 => Ok(ChecksumSuite::HmacSha196Aes128),
        e => Err(refused(format!("no checksum for encryption type {e}"))),
    }
}

/// An EncryptionKey of type `e`.
pub(crate) fn encryption_key(e: i64, key: &[u8]) -> EncryptionKey {
    EncryptionKey {
        key_type: ExplicitContextTag0::from(int_asn1(e)),
        key_value: ExplicitContextTag1::from(OctetStringAsn1::from(key.to_vec())),
    }
}

pub(crate) fn refused(why: impl Into<String>) -> AuthError {
    AuthError::Kerberos(why.into())
}

/// Whether a mechanism OID is Kerberos 5 (either spelling).
pub fn is_krb5_oid(oid: &[u8]) -> bool {
    oid == OID_KRB5 || oid == OID_MS_KRB5
}

/// Split a GSS InitialContextToken `[APPLICATION 0] { OID, TOK_ID, message }` of the Kerberos
/// mechanism into its token identifier and message.
pub fn gss_unwrap(token: &[u8]) -> Result<([u8; 2], &[u8]), AuthError> {
    if token.len() > TOKEN_SIZE_MAX {
        return Err(AuthError::Malformed("Kerberos token too large"));
    }
    let mut top = Der::new(token)?;
    let outer = top.expect(0x60, "Kerberos token without GSS framing")?;
    if !top.is_empty() {
        return Err(AuthError::Malformed(
            "trailing bytes after the Kerberos token",
        ));
    }
    let mut inner = top.enter(&outer)?;
    let oid = inner.expect(0x06, "GSS token without mechanism OID")?;
    if !is_krb5_oid(oid.content) {
        return Err(AuthError::Unsupported(
            "GSS mechanism other than Kerberos 5",
        ));
    }
    let rest = &outer.content[oid.raw.len()..];
    if rest.len() < 2 {
        return Err(AuthError::Malformed("Kerberos token without a token id"));
    }
    Ok(([rest[0], rest[1]], &rest[2..]))
}

/// Frame a Kerberos message as a GSS token of the Kerberos 5 mechanism.
pub fn gss_wrap(tok_id: [u8; 2], msg: &[u8]) -> Vec<u8> {
    let mut inner = tlv(0x06, OID_KRB5);
    inner.extend(tok_id);
    inner.extend(msg);
    tlv(0x60, &inner)
}

/// Decode a Kerberos message with picky-asn1-der, after walking every TLV of it with [`Der`]
/// (definite lengths of at most 4 bytes, each within its parent, nesting bounded): picky adds
/// lengths without checking them (an APPLICATION tag with a length of eight ff bytes overflows
/// its arithmetic, a panic in debug builds), so nothing from the network reaches it unwalked.
pub(crate) fn from_der<'a, T: serde::Deserialize<'a>>(
    b: &'a [u8],
    what: &'static str,
) -> Result<T, AuthError> {
    /// Kerberos nests deeper than SPNEGO (a KDC-REP's ticket's name is 10 levels down).
    const KRB_DEPTH_MAX: usize = 16;
    fn walk(b: &[u8], depth: usize) -> Result<(), AuthError> {
        if depth > KRB_DEPTH_MAX {
            return Err(AuthError::Malformed("DER nesting too deep"));
        }
        let mut d = Der::new(b)?;
        while !d.is_empty() {
            let t = d.read()?;
            if t.tag & 0x20 != 0 {
                walk(t.content, depth + 1)?;
            }
        }
        Ok(())
    }
    walk(b, 0).map_err(|_| AuthError::Malformed(what))?;
    picky_asn1_der::from_bytes(b).map_err(|_| AuthError::Malformed(what))
}

/// An INTEGER as an i64 (Kerberos integers are 32-bit; anything longer is refused).
pub(crate) fn int(v: &IntegerAsn1) -> Result<i64, AuthError> {
    let b = v.as_signed_bytes_be();
    if b.is_empty() || b.len() > 8 {
        return Err(AuthError::Malformed("Kerberos INTEGER out of range"));
    }
    let neg = b[0] & 0x80 != 0;
    Ok(b.iter()
        .fold(if neg { -1i64 } else { 0 }, |acc, x| (acc << 8) | *x as i64))
}

/// An i64 as a minimal signed INTEGER.
pub(crate) fn int_asn1(v: i64) -> IntegerAsn1 {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 7 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    IntegerAsn1::from_bytes_be_signed(bytes[start..].to_vec())
}

/// A KerberosTime as seconds since the Unix epoch.
pub fn unix_time(t: &GeneralizedTimeAsn1) -> i64 {
    let d = &t.0;
    ringshare_wire::fscc::unix_from_civil(
        i64::from(d.year()),
        u32::from(d.month()),
        u32::from(d.day()),
        u32::from(d.hour()),
        u32::from(d.minute()),
        u32::from(d.second()),
    )
}

/// Seconds since the Unix epoch as a KerberosTime (years 1970-9999).
pub fn kerberos_time(unix: i64) -> GeneralizedTimeAsn1 {
    let unix = unix.clamp(0, 253_402_300_799);
    let (y, m, d, hh, mm, ss) = ringshare_wire::fscc::civil_from_unix(unix);
    let date = picky_asn1::date::GeneralizedTime::new(
        y as u16, m as u8, d as u8, hh as u8, mm as u8, ss as u8,
    )
    .unwrap_or_else(|| {
        picky_asn1::date::GeneralizedTime::new(1970, 1, 1, 0, 0, 0).expect("the epoch is a date")
    });
    GeneralizedTimeAsn1(date)
}

/// Whether bit `i` (ASN.1 numbering: bit 0 is the first byte's high bit) of a BIT STRING is
/// set; bits past its end are clear.
pub(crate) fn bit(b: &picky_asn1::bit_string::BitString, i: usize) -> bool {
    // as_bytes() starts with the unused-bits octet.
    b.as_bytes()
        .get(1 + i / 8)
        .is_some_and(|byte| byte & (0x80 >> (i % 8)) != 0)
}

#[cfg(test)]
mod acceptor_dce_tests;
#[cfg(test)]
mod acceptor_rc4_tests;
#[cfg(test)]
mod acceptor_tests;
#[cfg(test)]
pub(crate) mod testkdc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kerberos_times_convert_both_ways() {
        for t in [
            0i64,
            951_782_400,
            1_700_000_000,
            1_795_000_123,
            4_102_444_800,
        ] {
            assert_eq!(unix_time(&kerberos_time(t)), t);
        }
    }

    #[test]
    fn integers_convert_both_ways() {
        for v in [
            0i64,
            1,
            127,
            128,
            255,
            256,
            -1,
            -128,
            -129,
            0x7fff_ffff,
            -0x8000_0000,
        ] {
            assert_eq!(int(&int_asn1(v)).unwrap(), v, "{v}");
        }
    }

    #[test]
    fn lengths_picky_would_overflow_on_are_refused_before_it_reads_them() {
        // [APPLICATION 14] with a length of eight ff bytes, alone and inside a GSS token.
        let mut m = vec![0x6e, 0x88];
        m.extend([0xff; 8]);
        m.extend([0x30, 0x03, 0x02, 0x01, 0x05]);
        let r: Result<picky_krb::messages::ApReq, _> = from_der(&m, "AP-REQ");
        assert!(matches!(r, Err(AuthError::Malformed("AP-REQ"))));
        let token = gss_wrap(TOK_AP_REQ, &m);
        let cfg = acceptor::AcceptorConfig {
            keytab: std::sync::Arc::new(keytab::Keytab::default()),
            realm: "RS.TEST".into(),
            skew_secs: 300,
            allow_rc4: false,
        };
        let fresh = acceptor::Fresh {
            subkey: [0; 32],
            seq: 0,
        };
        let replay = replay::ReplayCache::new();
        assert!(acceptor::accept(&cfg, &token, 0, &fresh, &replay).is_err());
        // Nested deeper too.
        let mut nested = vec![0x30, 0x0c, 0xa0, 0x0a, 0x04, 0x88];
        nested.extend([0xff; 8]);
        assert!(from_der::<picky_krb::data_types::EncryptedData>(&nested, "x").is_err());
    }

    #[test]
    fn gss_framing_round_trips_and_refuses_other_mechanisms() {
        let t = gss_wrap(TOK_AP_REP, b"abc");
        assert_eq!(gss_unwrap(&t).unwrap(), (TOK_AP_REP, &b"abc"[..]));
        let mut ntlm = tlv(0x06, crate::spnego::OID_NTLMSSP);
        ntlm.extend([1, 0, 9]);
        assert!(gss_unwrap(&tlv(0x60, &ntlm)).is_err());
        for n in 0..t.len() {
            assert!(gss_unwrap(&t[..n]).is_err() || n == t.len());
        }
    }
}
