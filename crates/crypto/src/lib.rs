//! SMB 2/3 message signing, key derivation, preauthentication integrity and encryption.
//!
//! **Invariant:** this crate knows nothing about connections or sessions and names no other
//! ringshare crate: callers hand it keys and bytes.
//!
//! Everything here is a pure function of its inputs: no clocks, no randomness, no I/O.
//! Specification references are to [MS-SMB2] unless noted.
#![forbid(unsafe_code)]

pub mod encrypt;
mod gmac;
pub mod kdf;
pub mod keys;
pub mod preauth;
pub mod sign;

/// Why a cryptographic operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CryptoError {
    /// The key is not the length the algorithm needs.
    BadKeyLength,
    /// The nonce is not the length the cipher needs.
    BadNonceLength,
    /// The tag did not match: the message was altered or the key is wrong.
    AuthenticationFailed,
}

impl std::fmt::Display for CryptoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CryptoError::BadKeyLength => "bad key length",
            CryptoError::BadNonceLength => "bad nonce length",
            CryptoError::AuthenticationFailed => "authentication failed",
        })
    }
}

impl std::error::Error for CryptoError {}

/// Constant-time equality of two byte strings of the same length (false if lengths differ).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // Fold without a data-dependent branch before this point.
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(clean).expect("test hex")
}

/// HMAC-SHA256 of the concatenation of `parts` under `key` (RFC 2104):
/// what cluster nodes authenticate their handshakes and messages with.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    HmacSha256Key::new(key).mac(parts)
}

/// An HMAC-SHA256 key made ready once (its inner and outer pads hashed), for the many MACs
/// of one session: each [`HmacSha256Key::mac`] starts from a copy of that state instead of
/// keying again ([`hmac_sha256`] keys for each MAC).
#[derive(Clone)]
pub struct HmacSha256Key(aws_lc_rs::hmac::Key);

impl HmacSha256Key {
    pub fn new(key: &[u8]) -> HmacSha256Key {
        HmacSha256Key(aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key))
    }

    /// HMAC-SHA256 of the concatenation of `parts` under this key: the same as
    /// [`hmac_sha256`] with the key's bytes.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.0);
        for p in parts {
            ctx.update(p);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }
}

#[cfg(test)]
mod hmac_tests {
    #[test]
    fn hmac_sha256_matches_rfc_4231_test_case_2() {
        let mac = super::hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        let want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let got: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_key_made_ready_once_gives_the_same_macs_as_keying_each_time() {
        let key = super::HmacSha256Key::new(b"Jefe");
        for parts in [
            &[&b"what do ya want "[..], &b"for nothing?"[..]][..],
            &[&b""[..]][..],
            &[&[7u8; 200][..], &b"x"[..]][..],
        ] {
            assert_eq!(key.mac(parts), super::hmac_sha256(b"Jefe", parts));
            // Again: the key's state is copied, not used up.
            assert_eq!(key.mac(parts), super::hmac_sha256(b"Jefe", parts));
        }
    }
}
