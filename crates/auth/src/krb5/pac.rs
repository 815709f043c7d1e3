//! The Privilege Attribute Certificate in a ticket ([MS-PAC] 2.3-2.8): its buffer directory,
//! the server signature checked with the service's own key, and the client-info buffer checked
//! against the ticket.
//!
//! The KDC signature needs the krbtgt key, which a member server does not have: the ticket
//! being encrypted with the service key is the trust anchor, as on a Samba member server.

use ringshare_wire::fscc::FileTime;

use super::{rc4hmac, refused};
use crate::AuthError;

/// PAC buffer types ([MS-PAC] 2.4).
pub mod buffer {
    /// KERB_VALIDATION_INFO: the user's groups.
    pub const LOGON_INFO: u32 = 1;
    /// PAC_SIGNATURE_DATA made with the service key.
    pub const SERVER_CHECKSUM: u32 = 6;
    /// PAC_SIGNATURE_DATA made with the KDC key.
    pub const KDC_CHECKSUM: u32 = 7;
    /// PAC_CLIENT_INFO.
    pub const CLIENT_INFO: u32 = 10;
    /// UPN_DNS_INFO.
    pub const UPN_DNS_INFO: u32 = 12;
}

/// The most buffers a PAC may list.
pub const BUFFERS_MAX: usize = 64;
/// Key usage of the PAC signatures ([MS-PAC] 2.8.1: KERB_NON_KERB_CKSUM_SALT).
pub const KEY_USAGE_PAC_CHECKSUM: i32 = 17;

/// A parsed PAC: its bytes and where each buffer lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pac {
    raw: Vec<u8>,
    /// (type, offset, size) of every buffer.
    buffers: Vec<(u32, usize, usize)>,
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Pac {
    /// Parse the PACTYPE directory ([MS-PAC] 2.3): every buffer inside the PAC and 8-byte
    /// aligned, and no type that matters listed twice.
    pub fn parse(raw: &[u8]) -> Result<Pac, AuthError> {
        let count = u32_at(raw, 0).ok_or(bad("PAC truncated"))? as usize;
        if u32_at(raw, 4) != Some(0) {
            return Err(bad("PAC version is not 0"));
        }
        if count == 0 || count > BUFFERS_MAX {
            return Err(bad("PAC with a bad buffer count"));
        }
        let dir_end = 8 + count * 16;
        if dir_end > raw.len() {
            return Err(bad("PAC directory truncated"));
        }
        let mut buffers = Vec::with_capacity(count);
        for i in 0..count {
            let at = 8 + i * 16;
            let ty = u32_at(raw, at).ok_or(bad("PAC truncated"))?;
            let size = u32_at(raw, at + 4).ok_or(bad("PAC truncated"))? as usize;
            let offset = u64::from_le_bytes(raw[at + 8..at + 16].try_into().expect("8 bytes"));
            let offset = usize::try_from(offset).map_err(|_| bad("PAC buffer offset"))?;
            if offset % 8 != 0 || offset < dir_end {
                return Err(bad("PAC buffer misplaced"));
            }
            if offset.checked_add(size).is_none_or(|end| end > raw.len()) {
                return Err(bad("PAC buffer past the end"));
            }
            let once = [
                buffer::LOGON_INFO,
                buffer::SERVER_CHECKSUM,
                buffer::KDC_CHECKSUM,
                buffer::CLIENT_INFO,
                buffer::UPN_DNS_INFO,
            ];
            if once.contains(&ty) && buffers.iter().any(|(t, _, _)| *t == ty) {
                return Err(refused(format!("PAC lists buffer type {ty} twice")));
            }
            buffers.push((ty, offset, size));
        }
        Ok(Pac {
            raw: raw.to_vec(),
            buffers,
        })
    }

    /// The bytes of the buffer of type `ty`.
    pub fn buffer(&self, ty: u32) -> Option<&[u8]> {
        let (_, off, size) = self.buffers.iter().find(|(t, _, _)| *t == ty)?;
        self.raw.get(*off..off + size)
    }

    /// The PAC's bytes.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// Where a signature buffer's signature lies, and its checksum type.
    fn signature(&self, ty: u32) -> Result<(i32, usize, usize), AuthError> {
        let (_, off, size) = *self
            .buffers
            .iter()
            .find(|(t, _, _)| *t == ty)
            .ok_or(refused(format!("PAC without signature buffer {ty}")))?;
        let sig_type = u32_at(&self.raw, off).ok_or(bad("PAC signature truncated"))? as i32;
        let len = match sig_type {
            15 | 16 => 12, // HMAC-SHA1-96-AES128/256
            rc4hmac::CHECKSUM_HMAC_MD5 => rc4hmac::CHECKSUM_LEN,
            _ => return Err(refused(format!("PAC signature type {sig_type}"))),
        };
        if size < 4 + len {
            return Err(bad("PAC signature truncated"));
        }
        Ok((sig_type, off + 4, len))
    }

    /// Verify the server signature with the key that decrypted the ticket ([MS-PAC] 2.8.1):
    /// a checksum over the whole PAC with the server and KDC signatures zeroed, of the key's
    /// type (HMAC-SHA1-96 for AES, HMAC-MD5 for RC4-HMAC).
    pub fn verify_server_signature(&self, key: &[u8], key_etype: i32) -> Result<(), AuthError> {
        let (sig_type, at, len) = self.signature(buffer::SERVER_CHECKSUM)?;
        let (_, kdc_at, kdc_len) = self.signature(buffer::KDC_CHECKSUM)?;
        let mut zeroed = self.raw.clone();
        zeroed[at..at + len].fill(0);
        zeroed[kdc_at..kdc_at + kdc_len].fill(0);
        let misfit = || {
            refused(format!(
                "PAC server signature type {sig_type} does not fit a key of enctype {key_etype}"
            ))
        };
        let sum = if key_etype == super::etype::RC4_HMAC {
            if sig_type != rc4hmac::CHECKSUM_HMAC_MD5 {
                return Err(misfit());
            }
            rc4hmac::checksum(key, KEY_USAGE_PAC_CHECKSUM, &zeroed).to_vec()
        } else {
            // The signature's checksum type must be the one of the key (16 for AES-256, 15
            // for AES-128).
            let suite = super::checksum_suite(key_etype)
                .ok()
                .filter(|suite| u32::from(suite) as i32 == sig_type)
                .ok_or_else(misfit)?;
            suite
                .hasher()
                .checksum(key, KEY_USAGE_PAC_CHECKSUM, &zeroed)
                .map_err(|e| refused(format!("PAC checksum: {e}")))?
        };
        let want = &self.raw[at..at + len];
        if sum.len() < len || !ringshare_crypto::ct_eq(&sum[..len], want) {
            return Err(refused(
                "PAC server signature does not verify (forged PAC?)",
            ));
        }
        Ok(())
    }

    /// [MS-PAC] 2.7: the client-info buffer must name the ticket's client and its auth time.
    pub fn check_client_info(&self, client: &str, auth_time_unix: i64) -> Result<(), AuthError> {
        let Some(b) = self.buffer(buffer::CLIENT_INFO) else {
            return Err(refused("PAC without client info"));
        };
        if b.len() < 10 {
            return Err(bad("PAC client info truncated"));
        }
        let filetime = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let want = FileTime::from_unix_nanos(i128::from(auth_time_unix) * 1_000_000_000).0;
        if filetime != want {
            return Err(refused(
                "PAC client info time is not the ticket's auth time",
            ));
        }
        let n = u16::from_le_bytes([b[8], b[9]]) as usize;
        let name = b.get(10..10 + n).ok_or(bad("PAC client name truncated"))?;
        let units: Vec<u16> = name
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let name = String::from_utf16(&units).map_err(|_| bad("PAC client name"))?;
        let bare = client.split('@').next().unwrap_or(client);
        if !name.eq_ignore_ascii_case(client) && !name.eq_ignore_ascii_case(bare) {
            return Err(refused(format!(
                "PAC names client {name:?}, the ticket {client:?}"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PAC with client info, server and KDC signatures, signed with `key` (aes256).
    pub(crate) fn minimal_pac(key: &[u8], client: &str, auth_time: i64) -> Vec<u8> {
        crate::krb5::testkdc::minimal_pac(key, client, auth_time)
    }

    #[test]
    fn a_pac_signed_with_the_service_key_verifies_and_a_changed_one_does_not() {
        let key = [5u8; 32];
        let raw = minimal_pac(&key, "alice", 1_795_000_000);
        let pac = Pac::parse(&raw).unwrap();
        pac.verify_server_signature(&key, 18).unwrap();
        pac.check_client_info("alice", 1_795_000_000).unwrap();
        assert!(pac.check_client_info("bob", 1_795_000_000).is_err());
        assert!(pac.check_client_info("alice", 1_795_000_001).is_err());
        assert!(pac.verify_server_signature(&[6u8; 32], 18).is_err());
        // A byte of the client name changed: the signature no longer verifies.
        let mut forged = raw.clone();
        let name: Vec<u8> = "alice"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        let off = forged.windows(name.len()).position(|w| w == name).unwrap();
        forged[off] = b'b';
        let pac = Pac::parse(&forged).unwrap();
        assert!(pac.verify_server_signature(&key, 18).is_err());
        assert!(pac.check_client_info("alice", 1_795_000_000).is_err());
    }

    #[test]
    fn duplicated_or_misplaced_buffers_are_refused() {
        let raw = minimal_pac(&[5u8; 32], "alice", 1);
        // Make the second directory entry the same type as the first.
        let mut dup = raw.clone();
        let first = dup[8..12].to_vec();
        dup[24..28].copy_from_slice(&first);
        assert!(Pac::parse(&dup).is_err());
        let mut past = raw.clone();
        past[12..16].copy_from_slice(&0xffffu32.to_le_bytes());
        assert!(Pac::parse(&past).is_err());
        let mut unaligned = raw.clone();
        unaligned[16] += 1;
        assert!(Pac::parse(&unaligned).is_err());
        for n in 0..raw.len() {
            let _ = Pac::parse(&raw[..n]);
        }
    }
}
