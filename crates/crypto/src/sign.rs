//! Message signing ([MS-SMB2] 3.1.4.1): HMAC-SHA256 (2.0.2, 2.1), AES-128-CMAC (3.x) and
//! AES-128-GMAC (3.1.1 with SMB2_SIGNING_CAPABILITIES).
//!
//! The message is given as consecutive parts, header first, with the 16-byte Signature field
//! (header offset 48) already zeroed by the caller. HMAC and CMAC run incrementally over the
//! parts; GMAC authenticates a one-part message where it lies and gathers a message of several
//! parts into a per-thread scratch buffer first (see `gmac`).
//!
//! Provider: aws-lc-rs for all three (measured in docs/crypto.md).

use std::sync::Arc;

use aws_lc_rs::{cmac, hmac};

use crate::gmac::Gmac;

/// Where the Signature field lies in an SMB2 header.
const SIGNATURE_START: usize = 48;
const SIGNATURE_END: usize = 64;

/// The signing algorithm of a session or channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigningAlgorithm {
    /// HMAC-SHA256 truncated to 16 bytes (dialects 2.0.2 and 2.1).
    HmacSha256,
    /// AES-128-CMAC (dialects 3.0, 3.0.2, and 3.1.1 by default).
    AesCmac,
    /// AES-128-GMAC (3.1.1, negotiated with SMB2_SIGNING_CAPABILITIES).
    AesGmac,
}

/// What the AES-GMAC nonce needs ([MS-SMB2] 3.1.4.1): the message id and two role bits.
#[derive(Clone, Copy, Debug, Default)]
pub struct NonceInfo {
    /// MessageId of the header being signed.
    pub message_id: u64,
    /// Set when the message is a response (server to client).
    pub server_to_client: bool,
    /// Set when the message is an SMB2 CANCEL request.
    pub cancel: bool,
}

impl NonceInfo {
    /// The 12-byte GMAC nonce: MessageId little-endian, then a 32-bit little-endian word whose
    /// bit 0 is the server-to-client role and bit 1 the cancel flag.
    pub fn gmac_nonce(&self) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&self.message_id.to_le_bytes());
        let mut flags = 0u32;
        if self.server_to_client {
            flags |= 1;
        }
        if self.cancel {
            flags |= 2;
        }
        n[8..].copy_from_slice(&flags.to_le_bytes());
        n
    }
}

/// Shared, so that a clone (one per signed reply) allocates nothing.
#[derive(Clone)]
enum Engine {
    Hmac(Arc<hmac::Key>),
    Cmac(Arc<cmac::Key>),
    Gmac(Arc<Gmac>),
}

/// A signing key bound to its algorithm. Cheap to clone (no allocation); key
/// schedules are computed once.
#[derive(Clone)]
pub struct SigningKey {
    alg: SigningAlgorithm,
    engine: Engine,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("SigningKey")
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A key for `alg`. The 2.x HMAC key is the 16-byte session key.
    pub fn new(alg: SigningAlgorithm, key: [u8; 16]) -> Self {
        let engine = match alg {
            SigningAlgorithm::HmacSha256 => {
                Engine::Hmac(Arc::new(hmac::Key::new(hmac::HMAC_SHA256, &key)))
            }
            SigningAlgorithm::AesCmac => Engine::Cmac(Arc::new(
                cmac::Key::new(cmac::AES_128, &key)
                    .expect("aws-lc accepts every 16-byte key for AES-128-CMAC"),
            )),
            SigningAlgorithm::AesGmac => Engine::Gmac(Arc::new(Gmac::new(&key))),
        };
        SigningKey { alg, engine }
    }

    /// The algorithm this key signs with.
    pub fn algorithm(&self) -> SigningAlgorithm {
        self.alg
    }

    /// Signature over the message given as consecutive parts (header first; the caller has
    /// zeroed the 16-byte Signature field at header offset 48). In the impossible case that
    /// the provider refuses, the result is all zeros, which the peer will reject.
    pub fn sign(&self, parts: &[&[u8]], nonce: NonceInfo) -> [u8; 16] {
        self.try_sign(parts, nonce).unwrap_or([0; 16])
    }

    /// Whether `signature` is the right one for the message; the comparison is constant-time.
    pub fn verify(&self, parts: &[&[u8]], nonce: NonceInfo, signature: &[u8; 16]) -> bool {
        match self.try_sign(parts, nonce) {
            Some(expected) => crate::ct_eq(&expected, signature),
            None => false,
        }
    }

    /// Sign a whole message (or compound chain element) held in one buffer: zeroes the
    /// Signature field (header bytes 48..64), signs the message as one part and writes the
    /// signature there. One part means no gather copy for GMAC. Returns false, leaving `msg`
    /// untouched, when `msg` is shorter than an SMB2 header (64 bytes).
    pub fn sign_in_place(&self, msg: &mut [u8], nonce: NonceInfo) -> bool {
        if msg.len() < SIGNATURE_END {
            return false;
        }
        msg[SIGNATURE_START..SIGNATURE_END].fill(0);
        let sig = self.sign(&[msg], nonce);
        msg[SIGNATURE_START..SIGNATURE_END].copy_from_slice(&sig);
        true
    }

    /// Verify a whole message held in one buffer against the signature in its header: the
    /// Signature field is zeroed for the computation and put back afterwards, so `msg` is
    /// unchanged on return. False for a message shorter than 64 bytes.
    pub fn verify_in_place(&self, msg: &mut [u8], nonce: NonceInfo) -> bool {
        let Some(field) = msg.get_mut(SIGNATURE_START..SIGNATURE_END) else {
            return false;
        };
        let mut received = [0u8; 16];
        received.copy_from_slice(field);
        field.fill(0);
        let expected = self.try_sign(&[msg], nonce);
        msg[SIGNATURE_START..SIGNATURE_END].copy_from_slice(&received);
        match expected {
            Some(expected) => crate::ct_eq(&expected, &received),
            None => false,
        }
    }

    fn try_sign(&self, parts: &[&[u8]], nonce: NonceInfo) -> Option<[u8; 16]> {
        match &self.engine {
            Engine::Hmac(key) => {
                let mut ctx = hmac::Context::with_key(key);
                for p in parts {
                    ctx.update(p);
                }
                ctx.sign().as_ref().get(..16)?.try_into().ok()
            }
            Engine::Cmac(key) => {
                let mut ctx = cmac::Context::with_key(key);
                for p in parts {
                    ctx.update(p).ok()?;
                }
                ctx.sign().ok()?.as_ref().try_into().ok()
            }
            Engine::Gmac(gmac) => gmac.mac(&nonce.gmac_nonce(), parts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;
    use ::hmac::{Hmac, KeyInit, Mac};
    use sha2::Sha256;

    fn key16(s: &str) -> [u8; 16] {
        unhex(s).try_into().unwrap()
    }

    /// The final SESSION_SETUP response of the SMB 3.1.1 example in Microsoft's Open
    /// Specifications blog "SMB 2 and SMB 3 security in Windows 10: the anatomy of signing and
    /// cryptographic keys" (2017-05-26), appendix "Key derivation example for SMB 3.1.1
    /// multichannel": signed with AES-128-CMAC under SigningKey 73FE7A9A77BEF0BDE49C650D8CCB5F76,
    /// header signature EBE146DA120BA25FC3376A49DFE31BC1.
    const SMB311_SESSION_SETUP_RESPONSE: &str = "\
        FE534D4240000100000000000100800009000000000000000300000000000000FFFE000000000000\
        1900000000100000EBE146DA120BA25FC3376A49DFE31BC10900000048001D00A11B3019A0030A01\
        00A3120410010000003B453CDC3524164200000000";

    #[test]
    fn cmac_signs_the_published_smb311_session_setup_response() {
        let mut msg = unhex(SMB311_SESSION_SETUP_RESPONSE);
        let expected: [u8; 16] = msg[48..64].try_into().unwrap();
        msg[48..64].fill(0);
        let key = SigningKey::new(
            SigningAlgorithm::AesCmac,
            key16("73FE7A9A77BEF0BDE49C650D8CCB5F76"),
        );
        let nonce = NonceInfo::default();
        assert_eq!(key.sign(&[&msg], nonce), expected);
        let (head, body) = msg.split_at(64);
        assert_eq!(key.sign(&[head, body], nonce), expected);
        assert!(key.verify(&[head, body], nonce, &expected));
    }

    #[test]
    fn cmac_matches_rfc4493_examples() {
        // RFC 4493 section 4, AES-128 key 2b7e1516 28aed2a6 abf71588 09cf4f3c.
        let key = SigningKey::new(
            SigningAlgorithm::AesCmac,
            key16("2b7e151628aed2a6abf7158809cf4f3c"),
        );
        let m = unhex(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51\
             30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
        );
        let n = NonceInfo::default();
        assert_eq!(
            key.sign(&[], n).to_vec(),
            unhex("bb1d6929e95937287fa37d129b756746")
        );
        assert_eq!(
            key.sign(&[&m[..16]], n).to_vec(),
            unhex("070a16b46b4d4144f79bdd9dd04a287c")
        );
        assert_eq!(
            key.sign(&[&m[..40]], n).to_vec(),
            unhex("dfa66747de9ae63030ca32611497c827")
        );
        assert_eq!(
            key.sign(&[&m[..64]], n).to_vec(),
            unhex("51f0bebf7e3b9d92fc49741779363cfe")
        );
        assert_eq!(
            key.sign(&[&m[..10], &m[10..33], &m[33..64]], n).to_vec(),
            unhex("51f0bebf7e3b9d92fc49741779363cfe")
        );
    }

    #[test]
    fn hmac_sha256_matches_rfc4231_case_2_truncated_to_16_bytes() {
        // RFC 4231 test case 2 uses the 4-byte key "Jefe"; SMB 2.x keys are 16 bytes, so test
        // the truncation with test case 1's 20-byte key through the HMAC primitive instead and
        // check SigningKey against a 16-byte key computed the same way.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want ");
        mac.update(b"for nothing?");
        assert_eq!(
            mac.finalize().into_bytes().to_vec(),
            unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        // RFC 4231 test case 3: key = 20 x 0xaa, data = 50 x 0xdd. With a 16-byte key the
        // HMAC zero-pads the key, so the engine's result must equal HMAC with that key.
        let key = [0xaau8; 16];
        let data = [0xddu8; 50];
        let mut reference = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
        reference.update(&data);
        let want = reference.finalize().into_bytes();
        let sk = SigningKey::new(SigningAlgorithm::HmacSha256, key);
        assert_eq!(
            sk.sign(&[&data[..7], &data[7..]], NonceInfo::default())[..],
            want[..16]
        );
    }

    #[test]
    fn every_algorithm_agrees_with_rustcrypto_over_a_large_message_in_parts() {
        use ::cmac::Cmac;
        use aes_gcm::aead::AeadInOut;
        let key = [0x3cu8; 16];
        let msg: Vec<u8> = (0..(1usize << 20) + 77)
            .map(|i| (i * 13 + 1) as u8)
            .collect();
        let parts: [&[u8]; 4] = [&msg[..48], &msg[48..64], &msg[64..65_601], &msg[65_601..]];
        let nonce = NonceInfo {
            message_id: 0x1234,
            server_to_client: true,
            cancel: false,
        };

        let mut h = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
        h.update(&msg);
        let want = h.finalize().into_bytes();
        let got = SigningKey::new(SigningAlgorithm::HmacSha256, key).sign(&parts, nonce);
        assert_eq!(got[..], want[..16]);

        let mut c = <Cmac<aes::Aes128> as KeyInit>::new(&key.into());
        c.update(&msg);
        let want: [u8; 16] = c.finalize().into_bytes().into();
        let got = SigningKey::new(SigningAlgorithm::AesCmac, key).sign(&parts, nonce);
        assert_eq!(got, want);

        let gcm = <aes_gcm::Aes128Gcm as KeyInit>::new(&key.into());
        let want: [u8; 16] = gcm
            .encrypt_inout_detached(&nonce.gmac_nonce().into(), &msg, (&mut [][..]).into())
            .unwrap()
            .into();
        let k = SigningKey::new(SigningAlgorithm::AesGmac, key);
        assert_eq!(k.sign(&parts, nonce), want);
        assert_eq!(k.sign(&[&msg], nonce), want);
    }

    #[test]
    fn in_place_signing_matches_signing_in_parts_and_verifies_without_changing_the_message() {
        let nonce = NonceInfo {
            message_id: 9,
            server_to_client: true,
            cancel: false,
        };
        for alg in [
            SigningAlgorithm::HmacSha256,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::AesGmac,
        ] {
            let key = SigningKey::new(alg, [0x61; 16]);
            let mut msg: Vec<u8> = (0..300u32).map(|i| (i * 3) as u8).collect();
            let want = key.sign(&[&msg[..48], &[0u8; 16], &msg[64..]], nonce);
            assert!(key.sign_in_place(&mut msg, nonce), "{alg:?}");
            assert_eq!(msg[48..64], want, "{alg:?}");
            let signed = msg.clone();
            assert!(key.verify_in_place(&mut msg, nonce), "{alg:?}");
            assert_eq!(msg, signed, "{alg:?} verify changed the message");
            msg[200] ^= 1;
            assert!(!key.verify_in_place(&mut msg, nonce), "{alg:?} tampered");
            msg[200] ^= 1;
            msg[50] ^= 1;
            assert!(
                !key.verify_in_place(&mut msg, nonce),
                "{alg:?} bad signature"
            );
            let mut short = [0u8; 63];
            assert!(!key.sign_in_place(&mut short, nonce));
            assert!(!key.verify_in_place(&mut short, nonce));
            assert_eq!(short, [0u8; 63]);
        }
    }

    #[test]
    fn gmac_nonce_carries_message_id_and_role_bits() {
        let n = NonceInfo {
            message_id: 0x0102030405060708,
            server_to_client: true,
            cancel: true,
        };
        assert_eq!(n.gmac_nonce(), [8, 7, 6, 5, 4, 3, 2, 1, 3, 0, 0, 0]);
        let n = NonceInfo {
            message_id: 5,
            server_to_client: false,
            cancel: false,
        };
        assert_eq!(n.gmac_nonce(), [5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn gmac_signature_depends_on_message_id_and_direction() {
        let key = SigningKey::new(SigningAlgorithm::AesGmac, [0x42; 16]);
        let msg = [0x11u8; 80];
        let a = key.sign(
            &[&msg],
            NonceInfo {
                message_id: 1,
                ..Default::default()
            },
        );
        let b = key.sign(
            &[&msg],
            NonceInfo {
                message_id: 2,
                ..Default::default()
            },
        );
        let c = key.sign(
            &[&msg],
            NonceInfo {
                message_id: 1,
                server_to_client: true,
                cancel: false,
            },
        );
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn every_algorithm_verifies_its_own_signature_and_rejects_tampering() {
        let msg: Vec<u8> = (0..150u8).collect();
        let nonce = NonceInfo {
            message_id: 77,
            server_to_client: true,
            cancel: false,
        };
        for alg in [
            SigningAlgorithm::HmacSha256,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::AesGmac,
        ] {
            let key = SigningKey::new(alg, [0x5a; 16]);
            assert_eq!(key.algorithm(), alg);
            let sig = key.sign(&[&msg[..64], &msg[64..]], nonce);
            assert!(key.verify(&[&msg], nonce, &sig), "{alg:?}");
            let mut tampered = msg.clone();
            tampered[100] ^= 1;
            assert!(
                !key.verify(&[&tampered], nonce, &sig),
                "{alg:?} accepted tampered body"
            );
            let mut bad_sig = sig;
            bad_sig[0] ^= 0x80;
            assert!(
                !key.verify(&[&msg], nonce, &bad_sig),
                "{alg:?} accepted a bad signature"
            );
            let other = SigningKey::new(alg, [0x5b; 16]);
            assert!(
                !other.verify(&[&msg], nonce, &sig),
                "{alg:?} accepted another key"
            );
        }
    }
}
