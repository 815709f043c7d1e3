//! RC4-HMAC, encryption type 23 (RFC 4757): the Kerberos encryption of Windows 2000 domains,
//! which old domains and computer accounts without AES keys still issue tickets with. Accepted
//! only when `kerberos encryption types` allows it (docs/kerberos.md).
//!
//! - The key is the NT hash of the password (MD4 of its UTF-16LE form): [`crate::nt_hash`].
//! - Encryption with key K for key usage U (RFC 4757 3): K1 = HMAC-MD5(K, T) with T the
//!   "message type" of U as 4 little-endian bytes; the checksum is HMAC-MD5(K1, confounder |
//!   plaintext) and travels first, in clear; the confounder and plaintext follow, RC4-encrypted
//!   with K3 = HMAC-MD5(K1, checksum). Decryption recomputes the checksum over what it
//!   decrypted and compares (constant time).
//! - The keyed checksum, HMAC-MD5 (type -138, RFC 4757 4): HMAC-MD5(Ksign, MD5(T | data))
//!   with Ksign = HMAC-MD5(K, "signaturekey\0"). The PAC's signatures of an RC4 service key
//!   ([MS-PAC] 2.8) and the RFC 4757 GSS MIC tokens ([`super::mic`]) use it.
//!
//! The export variant (enctype 24, "fortybits") is not implemented: nothing issues it.

use crate::ntlm::{hmac_md5, md5};
use crate::rc4::Rc4;

/// The length of an RC4-HMAC key.
pub const KEY_LEN: usize = 16;
/// The checksum type HMAC-MD5 of an RC4 key (KERB_CHECKSUM_HMAC_MD5, RFC 4757 4).
pub const CHECKSUM_HMAC_MD5: i32 = -138;
/// The length of that checksum.
pub const CHECKSUM_LEN: usize = 16;
/// The confounder's length.
pub const CONFOUNDER_LEN: usize = 8;

/// The message type T that RFC 4757 3 uses for an RFC 4120 key usage. They are the same
/// numbers but for usage 3 (the AS-REP's encrypted part), which is T = 8. RFC 4757 also lists
/// usage 9 (a TGS-REP encrypted with the authenticator subkey) as T = 8, but Windows uses 9
/// (MIT krb5 tries 9, then 8); this acceptor uses neither, only 2 (ticket), 11
/// (authenticator), 12 (AP-REP), 17 (PAC signatures) and 15 (GSS MIC).
pub fn message_type(usage: i32) -> u32 {
    match usage {
        3 => 8,
        u => u as u32,
    }
}

fn usage_key(key: &[u8], usage: i32) -> [u8; 16] {
    hmac_md5(key, &[&message_type(usage).to_le_bytes()])
}

/// Encrypt `plain` with `key` for `usage`: checksum (16 bytes) | RC4(confounder | plain).
pub fn encrypt(key: &[u8], usage: i32, confounder: &[u8; CONFOUNDER_LEN], plain: &[u8]) -> Vec<u8> {
    let k1 = usage_key(key, usage);
    let mut data = Vec::with_capacity(CONFOUNDER_LEN + plain.len());
    data.extend_from_slice(confounder);
    data.extend_from_slice(plain);
    let checksum = hmac_md5(&k1, &[&data]);
    let k3 = hmac_md5(&k1, &[&checksum]);
    Rc4::new(&k3).apply(&mut data);
    let mut out = checksum.to_vec();
    out.extend(data);
    out
}

/// The confounder and plaintext of `edata`, None when it does not decrypt with `key` for
/// `usage` (wrong key, changed bytes, too short, a key that is not 16 bytes).
fn open(key: &[u8], usage: i32, edata: &[u8]) -> Option<Vec<u8>> {
    if key.len() != KEY_LEN || edata.len() < CHECKSUM_LEN + CONFOUNDER_LEN {
        return None;
    }
    let (checksum, sealed) = edata.split_at(CHECKSUM_LEN);
    let k1 = usage_key(key, usage);
    let k3 = hmac_md5(&k1, &[checksum]);
    let mut data = sealed.to_vec();
    Rc4::new(&k3).apply(&mut data);
    ringshare_crypto::ct_eq(&hmac_md5(&k1, &[&data]), checksum).then_some(data)
}

/// The plaintext of `edata`, None when it does not decrypt (see [`open`]).
pub fn decrypt(key: &[u8], usage: i32, edata: &[u8]) -> Option<Vec<u8>> {
    open(key, usage, edata).map(|mut data| data.split_off(CONFOUNDER_LEN))
}

/// The HMAC-MD5 checksum (type -138) of `data` with `key` for `usage`.
pub fn checksum(key: &[u8], usage: i32, data: &[u8]) -> [u8; CHECKSUM_LEN] {
    let ksign = hmac_md5(key, &[b"signaturekey\0"]);
    let inner = md5(&[&message_type(usage).to_le_bytes(), data]);
    hmac_md5(&ksign, &[&inner])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    /// MIT krb5's known ciphertexts for arcfour-hmac (src/lib/crypto/crypto_tests/t_decrypt.c):
    /// plaintext, key usage, key, ciphertext.
    const MIT_DECRYPT: [(&str, i32, &str, &str); 5] = [
        (
            "",
            0,
            "F81FEC39255F5784E850C4377C88BD85",
            "02C1EB15586144122EC717763DD348BF00434DDC6585954C",
        ),
        (
            "1",
            1,
            "67D1300D281223867F9647FF48721273",
            "6156E0CC04E0A0874F9FDA008F498A7ADBBC80B70B14DDDBC0",
        ),
        (
            "9 bytesss",
            2,
            "3E40AB6093695281B3AC1A9304224D98",
            "0F9AD121D99D4A09448E4F1F718C4F5CBE6096262C66F29DF232A87C9F98755D55",
        ),
        (
            // Usage 3 is message type 8: the test fails if the mapping is left out.
            "13 bytes byte",
            3,
            "4BA2FBF0379FAED87A254D3B353D5A7E",
            "612C57568B17A70352BAE8CF26FB9459A6F3353CD35FD439DB3107CBEC765D326DFC04C1DD",
        ),
        (
            "30 bytes bytes bytes bytes byt",
            4,
            "68F263DB3FCE15D031C9EAB02D67107A",
            "95F9047C3AD75891C2E9B04B16566DC8B6EB9CE4231AFB2542EF87A7B5A0F260\
             A99F0460508DE0CECC632D07C354124E46C5D2234EB8",
        ),
    ];

    #[test]
    fn mit_krb5_ciphertexts_decrypt_and_are_made_again_byte_for_byte() {
        for (plain, usage, key, ct) in MIT_DECRYPT {
            let (key, ct) = (unhex(key), unhex(ct));
            let opened = open(&key, usage, &ct).unwrap_or_else(|| panic!("{plain:?}"));
            assert_eq!(&opened[CONFOUNDER_LEN..], plain.as_bytes());
            assert_eq!(decrypt(&key, usage, &ct).unwrap(), plain.as_bytes());
            let confounder: [u8; 8] = opened[..8].try_into().unwrap();
            assert_eq!(encrypt(&key, usage, &confounder, plain.as_bytes()), ct);
        }
    }

    #[test]
    fn a_wrong_key_usage_or_byte_does_not_decrypt() {
        let (_, usage, key, ct) = MIT_DECRYPT[4];
        let (key, ct) = (unhex(key), unhex(ct));
        assert!(decrypt(&key, usage + 1, &ct).is_none());
        let mut other = key.clone();
        other[0] ^= 1;
        assert!(decrypt(&other, usage, &ct).is_none());
        for i in 0..ct.len() {
            let mut m = ct.clone();
            m[i] ^= 0x80;
            assert!(decrypt(&key, usage, &m).is_none(), "byte {i}");
        }
        for n in 0..ct.len() {
            assert!(decrypt(&key, usage, &ct[..n]).is_none(), "prefix {n}");
        }
        assert!(decrypt(&key[..15], usage, &ct).is_none());
    }

    /// MIT krb5's known checksum for hmac-md5-rc4 (src/lib/crypto/crypto_tests/t_cksums.c).
    #[test]
    fn the_hmac_md5_checksum_matches_mit_krb5() {
        let key = unhex("F7D3A155AF5E238A0B7A871A96BA2AB2");
        assert_eq!(
            checksum(&key, 6, b"seventeen eighteen nineteen twenty").to_vec(),
            unhex("EB38CC97E2230F59DA4117DC5859D7EC")
        );
    }

    /// RFC 4757's string-to-key is the NT hash; MIT krb5's SPAKE test vectors list this key as
    /// the RC4 key of "password".
    #[test]
    fn the_key_of_a_password_is_its_nt_hash() {
        assert_eq!(
            crate::nt_hash("password").to_vec(),
            unhex("8846F7EAEE8FB117AD06BDD830B7586C")
        );
    }
}
