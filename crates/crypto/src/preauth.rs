//! Preauthentication integrity hash ([MS-SMB2] 3.3.5.4, 3.3.5.5): H(i) = SHA-512(H(i-1) || message).

use sha2::{Digest, Sha512};

/// A running SMB 3.1.1 preauthentication integrity hash value.
#[derive(Clone, PartialEq, Eq)]
pub struct PreauthHash(pub [u8; 64]);

impl std::fmt::Debug for PreauthHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PreauthHash(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

impl PreauthHash {
    /// The initial value: 64 zero bytes.
    pub fn zero() -> Self {
        PreauthHash([0; 64])
    }

    /// Fold in one whole message.
    pub fn update(&mut self, message: &[u8]) {
        self.update_parts(&[message]);
    }

    /// Fold in one message given as consecutive parts.
    pub fn update_parts(&mut self, parts: &[&[u8]]) {
        let mut h = Sha512::new();
        h.update(self.0);
        for p in parts {
            h.update(p);
        }
        self.0.copy_from_slice(&h.finalize());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    // Messages and hash values from the SMB 3.1.1 example in Microsoft's Open Specifications blog
    // "SMB 2 and SMB 3 security in Windows 10: the anatomy of signing and cryptographic keys"
    // (appendix "Key derivation example for SMB 3.1.1 multichannel", master session).
    pub(crate) const NEGOTIATE_REQUEST: &str = "\
        FE534D4240000100000000000000800000000000000000000100000000000000FFFE000000000000\
        00000000000000000000000000000000000000000000000024000500000000003F000000ECD86F32\
        6276024F9F7752B89BB33F3A70000000020000000202100200030203110300000100260000000000\
        010020000100FA49E6578F1F3A9F4CD3E9CC14A67AA884B3D05844E0E5A118225C15887F32FF0000\
        0200060000000000020002000100";
    const AFTER_NEGOTIATE_REQUEST: &str = "\
        DD94EFC5321BB618A2E208BA8920D2F422992526947A409B5037DE1E0FE8C7362B8C47122594CDE0\
        CE26AA9DFC8BCDBDE0621957672623351A7540F1E54A0426";
    const SESSION_SETUP_REQUEST_1: &str = "\
        FE534D4240000100000000000100800000000000000000000200000000000000FFFE000000000000\
        00000000000000000000000000000000000000000000000019000001010000000000000058004A00\
        0000000000000000604806062B0601050502A03E303CA00E300C060A2B06010401823702020AA22A\
        04284E544C4D5353500001000000978208E200000000000000000000000000000000060380250000\
        000F";
    const AFTER_NEGOTIATE_RESPONSE: &str = "\
        324BFA92A4F3A190E466EBEA08D9C110DC88BFED758D9846ECC6F541CC1D02AE3C94A79F36011E99\
        7E13F841B91B50957AD07B19C8E2539C0B23FDAE09D2C513";
    const AFTER_SESSION_SETUP_REQUEST_1: &str = "\
        AC0B0F2B9986257700365E416D142A6EDC96DF03594A19E52A15F6BD0D041CD5D432F8ED42C55E33\
        197A50C9EC00F1462B50C592211B1471A04B56088FDFD5F9";

    #[test]
    fn hashes_the_published_negotiate_request() {
        let mut h = PreauthHash::zero();
        h.update(&unhex(NEGOTIATE_REQUEST));
        assert_eq!(h.0.to_vec(), unhex(AFTER_NEGOTIATE_REQUEST));
    }

    #[test]
    fn hashes_the_published_session_setup_request_in_parts() {
        let mut h = PreauthHash(unhex(AFTER_NEGOTIATE_RESPONSE).try_into().unwrap());
        let msg = unhex(SESSION_SETUP_REQUEST_1);
        let (a, b) = msg.split_at(64);
        h.update_parts(&[a, b]);
        assert_eq!(h.0.to_vec(), unhex(AFTER_SESSION_SETUP_REQUEST_1));
    }
}
