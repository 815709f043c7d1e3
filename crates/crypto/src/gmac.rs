//! Streaming AES-GMAC (NIST SP 800-38D with an empty plaintext): the message is fed as
//! associated data in any number of pieces, so a signed READ response need not be copied
//! into one buffer.

use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes128;
use ghash::universal_hash::UniversalHash;
use ghash::GHash;

/// A keyed AES-128-GMAC instance; `mac` may be called any number of times.
#[derive(Clone)]
pub(crate) struct Gmac {
    aes: Aes128,
    ghash: GHash,
}

impl Gmac {
    pub(crate) fn new(key: &[u8; 16]) -> Self {
        let aes = Aes128::new(&(*key).into());
        let mut h = ghash::Block::default();
        aes.encrypt_block(&mut h);
        let ghash = GHash::new(&h);
        Gmac { aes, ghash }
    }

    /// Tag over `parts` (concatenated) with a 96-bit nonce.
    pub(crate) fn mac(&self, nonce: &[u8; 12], parts: &[&[u8]]) -> [u8; 16] {
        let mut ghash = self.ghash.clone();
        let mut pending = [0u8; 16];
        let mut pending_len = 0usize;
        let mut total: u64 = 0;
        for part in parts {
            let mut data: &[u8] = part;
            total = total.wrapping_add(data.len() as u64);
            if pending_len > 0 {
                let take = (16 - pending_len).min(data.len());
                pending[pending_len..pending_len + take].copy_from_slice(&data[..take]);
                pending_len += take;
                data = &data[take..];
                if pending_len == 16 {
                    ghash.update(&[pending.into()]);
                    pending_len = 0;
                }
            }
            let (blocks, rest) = ghash::Block::slice_as_chunks(data);
            if !blocks.is_empty() {
                ghash.update(blocks);
            }
            if !rest.is_empty() {
                pending[..rest.len()].copy_from_slice(rest);
                pending_len = rest.len();
            }
        }
        if pending_len > 0 {
            pending[pending_len..].fill(0);
            ghash.update(&[pending.into()]);
        }
        let mut lengths = [0u8; 16];
        lengths[..8].copy_from_slice(&total.wrapping_mul(8).to_be_bytes());
        ghash.update(&[lengths.into()]);
        let s = ghash.finalize();

        let mut j0 = ghash::Block::default();
        j0[..12].copy_from_slice(nonce);
        j0[15] = 1;
        self.aes.encrypt_block(&mut j0);
        let mut tag = [0u8; 16];
        for (i, t) in tag.iter_mut().enumerate() {
            *t = s[i] ^ j0[i];
        }
        tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;
    use aes_gcm::aead::AeadInOut;
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
        let tag = Gmac::new(&key).mac(&nonce, &[&aad]);
        assert_eq!(tag.to_vec(), unhex("209fcc8d3675ed938e9c7166709dd946"));
    }

    #[test]
    fn gives_the_same_tag_however_the_message_is_split() {
        let key = [7u8; 16];
        let nonce = [9u8; 12];
        let msg: Vec<u8> = (0..200u32).map(|i| (i * 31 + 5) as u8).collect();
        let whole = reference(&key, &nonce, &msg);
        let g = Gmac::new(&key);
        assert_eq!(g.mac(&nonce, &[&msg]), whole);
        for split in [0, 1, 15, 16, 17, 63, 64, 100, 199, 200] {
            let (a, b) = msg.split_at(split);
            assert_eq!(g.mac(&nonce, &[a, b]), whole, "split at {split}");
            assert_eq!(
                g.mac(&nonce, &[a, &[], b]),
                whole,
                "split at {split} with empty"
            );
        }
        let parts: Vec<&[u8]> = msg.chunks(7).collect();
        assert_eq!(g.mac(&nonce, &parts), whole);
        assert_eq!(g.mac(&nonce, &[]), reference(&key, &nonce, &[]));
    }
}
