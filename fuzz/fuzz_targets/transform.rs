//! The TRANSFORM_HEADER ([MS-SMB2] 2.2.41) and decryption with a fixed key:
//! the split must be consistent, and a fuzzer's message must be rejected by
//! every cipher, never decrypted and never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_crypto::encrypt::{Cipher, CipherKey};
use ringshare_wire::transform::{split_encrypted, TransformHeader, TRANSFORM_HEADER_LEN};

const KEY: [u8; 32] = [0x42; 32];

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = TransformHeader::decode(data) {
        let mut out = Vec::new();
        h.encode(&mut out);
        assert_eq!(out.len(), TRANSFORM_HEADER_LEN);
        assert_eq!(
            TransformHeader::decode(&out).as_ref(),
            Ok(&h),
            "transform header round trip"
        );
    }
    let Ok((hdr, aad, ciphertext)) = split_encrypted(data) else {
        return;
    };
    assert_eq!(aad.len() + ciphertext.len() + 20, data.len());
    for cipher in [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ] {
        let key =
            CipherKey::new(cipher, &KEY[..cipher.key_len()]).expect("a key of the right size");
        let mut buf = ciphertext.to_vec();
        let r = key.decrypt_in_place(&hdr.nonce, aad, &mut buf, &hdr.signature);
        assert!(r.is_err(), "{cipher:?} accepted a forged message");
    }
});
