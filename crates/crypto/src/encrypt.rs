//! SMB 3.x message encryption ([MS-SMB2] 3.1.4.3, 3.3.4.1.4): AES-CCM and AES-GCM over the
//! SMB2 message, with the TRANSFORM_HEADER bytes 20..52 as associated data.
//!
//! Providers (measured in docs/crypto.md): AES-GCM is aws-lc-rs (its stitched AES-NI/PCLMULQDQ
//! code, and VAES/AVX-512 where the CPU has them, chosen at run time); AES-CCM is RustCrypto
//! `ccm`, as aws-lc-rs offers no CCM with SMB's 11-byte nonce and 16-byte tag. Both work in
//! place on the caller's buffer: no copy of the message is made.

use aes::{Aes128, Aes256};
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};
use ccm::aead::consts::{U11, U16};
use ccm::aead::{AeadInOut, KeyInit};
use ccm::Ccm;

use crate::CryptoError;

type Aes128Ccm = Ccm<Aes128, U16, U11>;
type Aes256Ccm = Ccm<Aes256, U16, U11>;

/// An SMB 3.x cipher ([MS-SMB2] 2.2.3.1.2 cipher ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cipher {
    /// 0x0001
    Aes128Ccm,
    /// 0x0002
    Aes128Gcm,
    /// 0x0003
    Aes256Ccm,
    /// 0x0004
    Aes256Gcm,
}

impl Cipher {
    /// The cipher for a wire id, if known.
    pub fn from_id(id: u16) -> Option<Cipher> {
        match id {
            1 => Some(Cipher::Aes128Ccm),
            2 => Some(Cipher::Aes128Gcm),
            3 => Some(Cipher::Aes256Ccm),
            4 => Some(Cipher::Aes256Gcm),
            _ => None,
        }
    }

    /// The wire id.
    pub fn id(self) -> u16 {
        match self {
            Cipher::Aes128Ccm => 1,
            Cipher::Aes128Gcm => 2,
            Cipher::Aes256Ccm => 3,
            Cipher::Aes256Gcm => 4,
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm | Cipher::Aes128Gcm => 16,
            Cipher::Aes256Ccm | Cipher::Aes256Gcm => 32,
        }
    }

    /// Nonce length in bytes: 11 for CCM, 12 for GCM (the rest of the 16-byte Nonce field is zero).
    pub fn nonce_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm | Cipher::Aes256Ccm => 11,
            Cipher::Aes128Gcm | Cipher::Aes256Gcm => 12,
        }
    }
}

enum Engine {
    Aes128Ccm(Box<Aes128Ccm>),
    Aes256Ccm(Box<Aes256Ccm>),
    /// AES-128-GCM or AES-256-GCM.
    Gcm(LessSafeKey),
}

fn bad_nonce<E>(_: E) -> CryptoError {
    CryptoError::BadNonceLength
}

fn refused<E>(_: E) -> CryptoError {
    CryptoError::AuthenticationFailed
}

/// A keyed cipher; the key schedule is computed once.
pub struct CipherKey {
    cipher: Cipher,
    engine: Engine,
}

impl std::fmt::Debug for CipherKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CipherKey")
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl CipherKey {
    /// A key for `cipher`; `key` must be `cipher.key_len()` bytes.
    pub fn new(cipher: Cipher, key: &[u8]) -> Result<Self, CryptoError> {
        if key.len() != cipher.key_len() {
            return Err(CryptoError::BadKeyLength);
        }
        let bad = |_| CryptoError::BadKeyLength;
        let engine = match cipher {
            Cipher::Aes128Ccm => {
                Engine::Aes128Ccm(Box::new(Aes128Ccm::new_from_slice(key).map_err(bad)?))
            }
            Cipher::Aes128Gcm => Engine::Gcm(LessSafeKey::new(
                UnboundKey::new(&AES_128_GCM, key).map_err(|_| CryptoError::BadKeyLength)?,
            )),
            Cipher::Aes256Ccm => {
                Engine::Aes256Ccm(Box::new(Aes256Ccm::new_from_slice(key).map_err(bad)?))
            }
            Cipher::Aes256Gcm => Engine::Gcm(LessSafeKey::new(
                UnboundKey::new(&AES_256_GCM, key).map_err(|_| CryptoError::BadKeyLength)?,
            )),
        };
        Ok(CipherKey { cipher, engine })
    }

    /// The cipher of this key.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Encrypt `buf` in place; returns the 16-byte tag. `aad` is the transform header bytes
    /// 20..52. `nonce` is `nonce_len()` bytes, or the whole 16-byte Nonce field (then the bytes
    /// past `nonce_len()` are ignored). `buf` is the message where it already lies (e.g. a READ
    /// response built around the data read into it): nothing is copied.
    pub fn encrypt_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], CryptoError> {
        let nonce = self.nonce(nonce)?;
        // Sealing fails only past GCM's 2^36-byte limit or for an out-of-range CCM length,
        // neither of which an SMB message reaches; report it as a refusal all the same.
        match &self.engine {
            Engine::Aes128Ccm(c) => Ok(c
                .encrypt_inout_detached(nonce.try_into().map_err(bad_nonce)?, aad, buf.into())
                .map_err(refused)?
                .into()),
            Engine::Aes256Ccm(c) => Ok(c
                .encrypt_inout_detached(nonce.try_into().map_err(bad_nonce)?, aad, buf.into())
                .map_err(refused)?
                .into()),
            Engine::Gcm(k) => {
                let n = Nonce::try_assume_unique_for_key(nonce).map_err(bad_nonce)?;
                let tag = k
                    .seal_in_place_separate_tag(n, Aad::from(aad), buf)
                    .map_err(refused)?;
                tag.as_ref().try_into().map_err(refused)
            }
        }
    }

    /// Decrypt `buf` in place after checking `tag`. On failure `buf` holds no plaintext (GCM
    /// zeroes it, CCM zeroes it); the caller must drop the message. `buf` is the message where
    /// it landed (e.g. a WRITE request's receive buffer): nothing is copied.
    pub fn decrypt_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; 16],
    ) -> Result<(), CryptoError> {
        let nonce = self.nonce(nonce)?;
        match &self.engine {
            Engine::Aes128Ccm(c) => c
                .decrypt_inout_detached(
                    nonce.try_into().map_err(bad_nonce)?,
                    aad,
                    buf.into(),
                    &(*tag).into(),
                )
                .map_err(refused),
            Engine::Aes256Ccm(c) => c
                .decrypt_inout_detached(
                    nonce.try_into().map_err(bad_nonce)?,
                    aad,
                    buf.into(),
                    &(*tag).into(),
                )
                .map_err(refused),
            Engine::Gcm(k) => {
                let n = Nonce::try_assume_unique_for_key(nonce).map_err(bad_nonce)?;
                match k.open_in_place_separate_tag(n, Aad::from(aad), tag, buf) {
                    Ok(_) => Ok(()),
                    Err(_) => {
                        // aws-lc already clears the output on failure; make it a promise here.
                        buf.fill(0);
                        Err(CryptoError::AuthenticationFailed)
                    }
                }
            }
        }
    }

    fn nonce<'a>(&self, nonce: &'a [u8]) -> Result<&'a [u8], CryptoError> {
        let n = self.cipher.nonce_len();
        if nonce.len() == n || nonce.len() == 16 {
            Ok(&nonce[..n])
        } else {
            Err(CryptoError::BadNonceLength)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::derive;
    use crate::unhex;

    #[test]
    fn cipher_ids_round_trip() {
        for c in [
            Cipher::Aes128Ccm,
            Cipher::Aes128Gcm,
            Cipher::Aes256Ccm,
            Cipher::Aes256Gcm,
        ] {
            assert_eq!(Cipher::from_id(c.id()), Some(c));
        }
        assert_eq!(Cipher::from_id(0), None);
        assert_eq!(Cipher::from_id(5), None);
    }

    #[test]
    fn gcm_matches_mcgrew_viega_test_case_2() {
        // "The Galois/Counter Mode of Operation (GCM)", McGrew & Viega, test case 2
        // (also NIST gcmEncryptExtIV128): K = 0^128, IV = 0^96, P = 0^128.
        let k = CipherKey::new(Cipher::Aes128Gcm, &[0; 16]).unwrap();
        let mut buf = [0u8; 16];
        let tag = k.encrypt_in_place(&[0; 12], &[], &mut buf).unwrap();
        assert_eq!(buf.to_vec(), unhex("0388dace60b6a392f328c2b971b2fe78"));
        assert_eq!(tag.to_vec(), unhex("ab6e47d42cec13bdf53a67b21257bddf"));
    }

    #[test]
    fn gcm_256_matches_mcgrew_viega_test_case_14() {
        // McGrew & Viega test case 14: K = 0^256, IV = 0^96, P = 0^128.
        let k = CipherKey::new(Cipher::Aes256Gcm, &[0; 32]).unwrap();
        let mut buf = [0u8; 16];
        let tag = k.encrypt_in_place(&[0; 12], &[], &mut buf).unwrap();
        assert_eq!(buf.to_vec(), unhex("cea7403d4d606b6e074ec5d3baf39d18"));
        assert_eq!(tag.to_vec(), unhex("d0d1c8a799996bf0265b98b5d48ab919"));
    }

    #[test]
    fn gcm_agrees_with_rustcrypto_on_large_unaligned_messages() {
        use aes_gcm::aead::{AeadInOut, KeyInit};
        for (cipher, len) in [
            (Cipher::Aes128Gcm, 65_537usize),
            (Cipher::Aes256Gcm, 1 << 20),
            (Cipher::Aes128Gcm, 17),
        ] {
            let key: Vec<u8> = (0..cipher.key_len() as u8).collect();
            let nonce = [0x21u8; 12];
            let aad = [0x5au8; 32];
            let plain: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut ours = plain.clone();
            let tag = CipherKey::new(cipher, &key)
                .unwrap()
                .encrypt_in_place(&nonce, &aad, &mut ours)
                .unwrap();
            let mut theirs = plain.clone();
            let their_tag: [u8; 16] = if cipher == Cipher::Aes128Gcm {
                aes_gcm::Aes128Gcm::new_from_slice(&key)
                    .unwrap()
                    .encrypt_inout_detached(&nonce.into(), &aad, theirs.as_mut_slice().into())
                    .unwrap()
                    .into()
            } else {
                aes_gcm::Aes256Gcm::new_from_slice(&key)
                    .unwrap()
                    .encrypt_inout_detached(&nonce.into(), &aad, theirs.as_mut_slice().into())
                    .unwrap()
                    .into()
            };
            assert_eq!(tag, their_tag, "{cipher:?} {len}");
            assert!(ours == theirs, "{cipher:?} {len}: ciphertexts differ");
        }
    }

    #[test]
    fn encrypts_and_decrypts_a_payload_where_it_lies_inside_a_larger_buffer() {
        // The server encrypts a READ response in the buffer the data was read into and
        // decrypts a WRITE where it landed: only the given range may change.
        for c in [Cipher::Aes128Gcm, Cipher::Aes128Ccm, Cipher::Aes256Gcm] {
            let key = CipherKey::new(c, &vec![0x11; c.key_len()]).unwrap();
            let mut frame = vec![0xEEu8; 52 + 4096 + 8];
            for (i, b) in frame[52..52 + 4096].iter_mut().enumerate() {
                *b = i as u8;
            }
            let original = frame.clone();
            let (nonce, aad) = ([3u8; 16], [4u8; 32]);
            let tag = key
                .encrypt_in_place(&nonce, &aad, &mut frame[52..52 + 4096])
                .unwrap();
            assert_eq!(frame[..52], original[..52], "{c:?}");
            assert_eq!(frame[52 + 4096..], original[52 + 4096..], "{c:?}");
            assert_ne!(frame[52..52 + 4096], original[52..52 + 4096], "{c:?}");
            key.decrypt_in_place(&nonce, &aad, &mut frame[52..52 + 4096], &tag)
                .unwrap();
            assert_eq!(frame, original, "{c:?}");
        }
    }

    #[test]
    fn failed_decryption_leaves_only_zeros() {
        for c in [
            Cipher::Aes128Ccm,
            Cipher::Aes128Gcm,
            Cipher::Aes256Ccm,
            Cipher::Aes256Gcm,
        ] {
            let key = CipherKey::new(c, &vec![0x77; c.key_len()]).unwrap();
            let mut buf = vec![0xA5u8; 1000];
            let mut tag = key.encrypt_in_place(&[1; 16], &[2; 32], &mut buf).unwrap();
            tag[15] ^= 1;
            assert_eq!(
                key.decrypt_in_place(&[1; 16], &[2; 32], &mut buf, &tag),
                Err(CryptoError::AuthenticationFailed)
            );
            assert!(buf.iter().all(|&b| b == 0), "{c:?}");
        }
    }

    /// Microsoft Open Specifications blog "Encryption in SMB 3.0: A protocol perspective":
    /// a WRITE request encrypted with AES-128-CCM. Session key B4546771B515F766A86735532DD6C4F0,
    /// so the client's encryption key (the server's decryption key) is 261B72350558F2E9DCF613070383EDBF.
    #[test]
    fn ccm_encrypts_the_published_smb30_write_request() {
        let keys = derive(0x0300, &unhex("B4546771B515F766A86735532DD6C4F0"), None, 16);
        assert_eq!(
            keys.decrypt_client_to_server,
            unhex("261B72350558F2E9DCF613070383EDBF")
        );
        let transform = unhex(
            "FD534D4281A286535415445DAE393921E44FA42E66E69A111892584FB5ED524A\
             744DA3EE87000000000001001100001400E40800",
        );
        let mut msg = unhex(
            "FE534D4240000100000000000900400008000000000000000400000000000000\
             FFFE0000010000001100001400E4080000000000000000000000000000000000\
             3100700017000000000000000000000015010000390000020100000039020000\
             00000000000000007000000000000000536D623320656E6372797074696F6E20\
             74657374696E67",
        );
        let plain = msg.clone();
        let key = CipherKey::new(Cipher::Aes128Ccm, &keys.decrypt_client_to_server).unwrap();
        let tag = key
            .encrypt_in_place(&transform[20..36], &transform[20..52], &mut msg)
            .unwrap();
        assert_eq!(tag[..], transform[4..20]);
        assert_eq!(
            msg,
            unhex(
                "25C8FEE16605A437832D1CD52DA9F4645333482A175FE5384563F45FCDAFAEF3\
                 8BC62BA4D5C62897996625A44C29BE5658DE2E6117585779E7B59FFD971278D0\
                 8580D7FA899E410E910EABF5AA1DB43050B33B49182637759AC15D84BFCDF5B6\
                 B238993C0F4CF4D6012023F6C627297075D84B7803912D0A9639634453595EF3\
                 E33FFE4E7AC2AB"
            )
        );
        key.decrypt_in_place(&transform[20..36], &transform[20..52], &mut msg, &tag)
            .unwrap();
        assert_eq!(msg, plain);
    }

    /// The same blog's response: the server encrypts a WRITE response with its encryption key
    /// (the client's decryption key 8FE2B57EC34D2DB5B1A9727F526BBDB5).
    #[test]
    fn ccm_decrypts_the_published_smb30_write_response() {
        let keys = derive(0x0300, &unhex("B4546771B515F766A86735532DD6C4F0"), None, 16);
        assert_eq!(
            keys.encrypt_server_to_client,
            unhex("8FE2B57EC34D2DB5B1A9727F526BBDB5")
        );
        let wire = unhex(
            "FD534D42A6015530A18F6D9AFFE22AFAE8E66484860000000000000011000014\
             00E4080050000000000001001100001400E40800DBF46435C5F14169293CE079\
             E344479BF670227E49873F458672C3098DAC467DD5809F369D67409166515787\
             1483E01F7BECD02064EAC3E235F913668BBC2F097980D4B378F1993EFF6E60D1\
             77309E5B",
        );
        let key = CipherKey::new(Cipher::Aes128Ccm, &keys.encrypt_server_to_client).unwrap();
        let tag: [u8; 16] = wire[4..20].try_into().unwrap();
        let mut body = wire[52..].to_vec();
        key.decrypt_in_place(&wire[20..31], &wire[20..52], &mut body, &tag)
            .unwrap();
        assert_eq!(
            body,
            unhex(
                "FE534D4240000100000000000900210009000000000000000400000000000000\
                 FFFE0000010000001100001400E4080000000000000000000000000000000000\
                 11000000170000000000000000000000"
            )
        );
    }

    /// Microsoft Open Specifications blog "SMB 3.1.1 Encryption in Windows 10": a WRITE request
    /// encrypted with AES-128-GCM. Session key 419FDDF34C1E001909D362AE7FB6AF79 and the preauth
    /// hash below give the client's encryption key A2F5E80E5D59103034F32E52F698E5EC.
    #[test]
    fn gcm_encrypts_the_published_smb311_write_request() {
        let preauth: [u8; 64] = unhex(
            "B23F3CBFD69487D9832B79B1594A367CDD950909B774C3A4C412B4FCEA9EDDDB\
             A7DB256BA2EA30E977F11F9B113247578E0E915C6D2A513B8F2FCA5707DC8770",
        )
        .try_into()
        .unwrap();
        let keys = derive(
            0x0311,
            &unhex("419FDDF34C1E001909D362AE7FB6AF79"),
            Some(&preauth),
            16,
        );
        assert_eq!(
            keys.decrypt_client_to_server,
            unhex("A2F5E80E5D59103034F32E52F698E5EC")
        );
        assert_eq!(
            keys.encrypt_server_to_client,
            unhex("748C50868C90F302962A5C35F5F9A8BF")
        );
        let transform = unhex(
            "FD534D42BD73D97D2BC9001BCAFAC0FDFF5FEEBCC7D6822D269CAF48904C664C0000000087000000\
             000001002500000000100000",
        );
        let mut msg = unhex(
            "FE534D4240000100000000000900010008000000000000000500000000000000FFFE000001000000\
             25000000001000000000000000000000000000000000000031007000170000000000000000000000\
             0600000004000000010000000400000000000000000000007000000000000000536D623320656E63\
             72797074696F6E2074657374696E67",
        );
        let key = CipherKey::new(Cipher::Aes128Gcm, &keys.decrypt_client_to_server).unwrap();
        let tag = key
            .encrypt_in_place(&transform[20..36], &transform[20..52], &mut msg)
            .unwrap();
        assert_eq!(tag[..], transform[4..20]);
        assert_eq!(
            msg,
            unhex(
                "6ECDD2A7AFC7B47763057A041B8FD4DAFFE990B70C9E09D36C084E02D14EF247F8BDE38ACF6256F8\
                 B1D3B56F77FBDEB312FEA5E92CBCC1ED8FB2EBBFAA75E49A4A394BB44576545567C24D4C014D47C9\
                 FBDFDAFD2C4F9B72F8D256452620A299F48E29E53D6B61D1C13A19E91AF013F00D17E3ABC2FC3D36\
                 C8C1B6B93973253852DBD442E46EE8"
            )
        );
    }

    #[test]
    fn gcm_decrypts_the_published_smb311_write_response() {
        let wire = unhex(
            "FD534D42ACBE1CB7ED343ADF1725EF144D90D4B0E06831DD2E8EB7B4000000000000000050000000\
             00000100250000000010000026BBBF949983A6C1C796559D0F2C510CB651D1F7B6AC8DED32A2A0B8\
             F2D793A815C6F6B848D69767A215841A42D400AE6DDB5F0B44173A014973321FDD7950DA6179159B\
             82E03C9E18A050FF0EA1C967",
        );
        let key = CipherKey::new(
            Cipher::Aes128Gcm,
            &unhex("748C50868C90F302962A5C35F5F9A8BF"),
        )
        .unwrap();
        let tag: [u8; 16] = wire[4..20].try_into().unwrap();
        let mut body = wire[52..].to_vec();
        key.decrypt_in_place(&wire[20..36], &wire[20..52], &mut body, &tag)
            .unwrap();
        assert_eq!(
            body,
            unhex(
                "FE534D4240000100000000000900010001000000000000000500000000000000FFFE000001000000\
                 25000000001000000000000000000000000000000000000011000000170000000000000000000000"
            )
        );
    }

    #[test]
    fn every_cipher_round_trips_and_rejects_tampering_without_leaking_plaintext() {
        for c in [
            Cipher::Aes128Ccm,
            Cipher::Aes128Gcm,
            Cipher::Aes256Ccm,
            Cipher::Aes256Gcm,
        ] {
            let key = CipherKey::new(c, &vec![0x33; c.key_len()]).unwrap();
            let nonce = [0x44u8; 16];
            let aad = [0x55u8; 32];
            let plain: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
            let mut buf = plain.clone();
            let tag = key
                .encrypt_in_place(&nonce[..c.nonce_len()], &aad, &mut buf)
                .unwrap();
            assert_ne!(buf, plain);
            let mut bad = buf.clone();
            bad[7] ^= 1;
            assert_eq!(
                key.decrypt_in_place(&nonce, &aad, &mut bad, &tag),
                Err(CryptoError::AuthenticationFailed)
            );
            assert_ne!(
                bad[20..],
                plain[20..],
                "{c:?} left plaintext behind on failure"
            );
            let mut bad_aad = aad;
            bad_aad[0] ^= 1;
            let mut copy = buf.clone();
            assert!(key
                .decrypt_in_place(&nonce, &bad_aad, &mut copy, &tag)
                .is_err());
            key.decrypt_in_place(&nonce, &aad, &mut buf, &tag).unwrap();
            assert_eq!(buf, plain, "{c:?}");
        }
    }

    #[test]
    fn rejects_wrong_key_and_nonce_lengths() {
        assert_eq!(
            CipherKey::new(Cipher::Aes128Gcm, &[0; 32]).unwrap_err(),
            CryptoError::BadKeyLength
        );
        assert_eq!(
            CipherKey::new(Cipher::Aes256Ccm, &[0; 16]).unwrap_err(),
            CryptoError::BadKeyLength
        );
        let k = CipherKey::new(Cipher::Aes128Ccm, &[0; 16]).unwrap();
        assert_eq!(
            k.encrypt_in_place(&[0; 12], &[], &mut []).unwrap_err(),
            CryptoError::BadNonceLength
        );
    }
}
