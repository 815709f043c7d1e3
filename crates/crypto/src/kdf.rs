//! SP800-108 counter-mode KDF with HMAC-SHA256 ([MS-SMB2] 3.1.4.2).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// SP800-108 counter-mode KDF with HMAC-SHA256 and r = 32, as [MS-SMB2] 3.1.4.2 uses: fills
/// `out` (L = `out.len() * 8`). Each block is
/// `HMAC-SHA256(key, [i]32 || label || 0x00 || context || [L]32)`, big-endian counters.
///
/// `label` and `context` are used exactly as given: SMB labels carry their terminating NUL
/// (`b"SMB2AESCMAC\0"`), as the label lengths in [MS-SMB2] 3.3.5.5.3 count it.
pub fn smb3_kdf(key: &[u8], label: &[u8], context: &[u8], out: &mut [u8]) {
    let bits = (out.len() as u64)
        .saturating_mul(8)
        .min(u64::from(u32::MAX)) as u32;
    let prf = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length");
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let mut mac = prf.clone();
        mac.update(&(i as u32 + 1).to_be_bytes());
        mac.update(label);
        mac.update(&[0]);
        mac.update(context);
        mac.update(&bits.to_be_bytes());
        let block = mac.finalize().into_bytes();
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    #[test]
    fn derives_the_published_smb30_signing_key() {
        // Microsoft Open Specifications blog, "SMB 2 and SMB 3 security in Windows 10: the anatomy
        // of signing and cryptographic keys", appendix "Key derivation example for SMB 3.0".
        let mut out = [0u8; 16];
        smb3_kdf(
            &unhex("7CD451825D0450D235424E44BA6E78CC"),
            b"SMB2AESCMAC\0",
            b"SmbSign\0",
            &mut out,
        );
        assert_eq!(out.to_vec(), unhex("0B7E9C5CAC36C0F6EA9AB275298CEDCE"));
    }

    #[test]
    fn longer_output_is_not_a_prefix_extension_of_shorter_output() {
        // L is part of every PRF input, so a 32-byte derivation differs from the 16-byte one.
        let mut a = [0u8; 16];
        let mut b = [0u8; 32];
        smb3_kdf(b"k", b"L\0", b"C\0", &mut a);
        smb3_kdf(b"k", b"L\0", b"C\0", &mut b);
        assert_ne!(a[..], b[..16]);
    }
}
