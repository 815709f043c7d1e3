//! AES-128-GMAC (NIST SP 800-38D with an empty plaintext): AES-GCM with the message as the
//! associated data, computed by aws-lc-rs (the fastest GHASH measured in docs/crypto.md).
//!
//! aws-lc-rs takes the associated data as one slice. A message given as one part is
//! authenticated where it lies; a message in several parts is first gathered into a
//! per-thread scratch buffer (a memory copy costs less than the difference between aws-lc's
//! GHASH and the streaming RustCrypto one, see docs/crypto.md). Callers that can pass the
//! message as one part avoid the copy.

use std::cell::RefCell;
use std::sync::Arc;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};

/// Scratch buffers larger than this are released after use rather than kept per thread.
const SCRATCH_KEEP: usize = 16 << 20;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A keyed AES-128-GMAC instance; `mac` may be called any number of times.
#[derive(Clone)]
pub(crate) struct Gmac {
    key: Arc<LessSafeKey>,
}

impl Gmac {
    pub(crate) fn new(key: &[u8; 16]) -> Self {
        let unbound = UnboundKey::new(&AES_128_GCM, key)
            .expect("aws-lc accepts every 16-byte key for AES-128-GCM");
        Gmac {
            key: Arc::new(LessSafeKey::new(unbound)),
        }
    }

    /// Tag over `parts` (concatenated) with a 96-bit nonce; `None` only if aws-lc refuses the
    /// operation (past GCM's 2^61-byte AAD limit), which an SMB message cannot reach.
    pub(crate) fn mac(&self, nonce: &[u8; 12], parts: &[&[u8]]) -> Option<[u8; 16]> {
        let mut nonempty = parts.iter().filter(|p| !p.is_empty());
        match (nonempty.next(), nonempty.next()) {
            (None, _) => self.mac_one(nonce, &[]),
            (Some(only), None) => self.mac_one(nonce, only),
            _ => {
                let total: usize = parts.iter().map(|p| p.len()).sum();
                let gather = |buf: &mut Vec<u8>| {
                    buf.clear();
                    buf.reserve(total);
                    for p in parts {
                        buf.extend_from_slice(p);
                    }
                    let tag = self.mac_one(nonce, buf);
                    if buf.capacity() > SCRATCH_KEEP {
                        *buf = Vec::new();
                    }
                    tag
                };
                SCRATCH.with(|cell| match cell.try_borrow_mut() {
                    Ok(mut buf) => gather(&mut buf),
                    Err(_) => gather(&mut Vec::new()),
                })
            }
        }
    }

    fn mac_one(&self, nonce: &[u8; 12], msg: &[u8]) -> Option<[u8; 16]> {
        let tag = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(msg),
                &mut [],
            )
            .ok()?;
        tag.as_ref().try_into().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;
    use aes_gcm::aead::{AeadInOut, KeyInit};
    use aes_gcm::Aes128Gcm;

    fn reference(key: &[u8; 16], nonce: &[u8; 12], aad: &[u8]) -> [u8; 16] {
        let gcm = Aes128Gcm::new(&(*key).into());
        let tag = gcm
            .encrypt_inout_detached(&(*nonce).into(), aad, (&mut [][..]).into())
            .expect("gcm");
        tag.into()
    }

    #[test]
    fn matches_nist_gcm_test_case_with_aad_only() {
        // NIST GCM test vectors (gcmEncryptExtIV128.rsp), Count = 0 with Keylen 128, IVlen 96,
        // PTlen 0, AADlen 128: Key 77be63708971c4e240d1cb79e8d77feb, IV e0e00f19fed7ba0136a797f3,
        // AAD 7a43ec1d9c0a5a78a0b16533a6213cab, Tag 209fcc8d3675ed938e9c7166709dd946.
        let key: [u8; 16] = unhex("77be63708971c4e240d1cb79e8d77feb")
            .try_into()
            .unwrap();
        let nonce: [u8; 12] = unhex("e0e00f19fed7ba0136a797f3").try_into().unwrap();
        let aad = unhex("7a43ec1d9c0a5a78a0b16533a6213cab");
        let tag = Gmac::new(&key).mac(&nonce, &[&aad]).unwrap();
        assert_eq!(tag.to_vec(), unhex("209fcc8d3675ed938e9c7166709dd946"));
    }

    #[test]
    fn gives_the_same_tag_however_the_message_is_split() {
        let key = [7u8; 16];
        let nonce = [9u8; 12];
        let msg: Vec<u8> = (0..200u32).map(|i| (i * 31 + 5) as u8).collect();
        let whole = reference(&key, &nonce, &msg);
        let g = Gmac::new(&key);
        assert_eq!(g.mac(&nonce, &[&msg]), Some(whole));
        for split in [0, 1, 15, 16, 17, 63, 64, 100, 199, 200] {
            let (a, b) = msg.split_at(split);
            assert_eq!(g.mac(&nonce, &[a, b]), Some(whole), "split at {split}");
            assert_eq!(
                g.mac(&nonce, &[a, &[], b]),
                Some(whole),
                "split at {split} with empty"
            );
        }
        let parts: Vec<&[u8]> = msg.chunks(7).collect();
        assert_eq!(g.mac(&nonce, &parts), Some(whole));
        assert_eq!(g.mac(&nonce, &[]), Some(reference(&key, &nonce, &[])));
    }

    #[test]
    fn gathers_a_message_larger_than_the_kept_scratch_and_still_agrees() {
        let key = [3u8; 16];
        let nonce = [4u8; 12];
        let msg: Vec<u8> = (0..SCRATCH_KEEP + 4097).map(|i| (i % 251) as u8).collect();
        let g = Gmac::new(&key);
        let whole = g.mac(&nonce, &[&msg]).unwrap();
        assert_eq!(g.mac(&nonce, &[&msg[..100], &msg[100..]]), Some(whole));
        // The oversized scratch was released; a small gathered message still works.
        SCRATCH.with(|c| assert!(c.borrow().capacity() <= SCRATCH_KEEP));
        assert_eq!(
            g.mac(&nonce, &[&msg[..10], &msg[10..40]]),
            Some(reference(&key, &nonce, &msg[..40]))
        );
        assert_ne!(whole, reference(&key, &nonce, &msg[..40]));
    }
}
