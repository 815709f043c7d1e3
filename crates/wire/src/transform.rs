//! SMB2 TRANSFORM_HEADER ([MS-SMB2] 2.2.41): the 52-byte header in front of an
//! encrypted message. The AEAD's associated data is bytes 20..52 (everything
//! after ProtocolId and Signature); the Signature field carries the tag.

use crate::codec::{Reader, WriteExt};
use crate::consts::TransformFlags;
use crate::header::TRANSFORM_MAGIC;
use crate::WireError;

/// Size of the transform header.
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// Byte range of the AEAD associated data within the header.
pub const AAD_RANGE: core::ops::Range<usize> = 20..52;
/// Byte range of the Signature (the AEAD tag) within the header.
pub const SIGNATURE_RANGE: core::ops::Range<usize> = 4..20;

/// SMB2 TRANSFORM_HEADER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformHeader {
    /// The AEAD tag (16 bytes).
    pub signature: [u8; 16],
    /// 16 bytes: the first 11 (CCM) or 12 (GCM) are the nonce, the rest zero.
    pub nonce: [u8; 16],
    pub original_message_size: u32,
    /// Flags (3.1.1) / EncryptionAlgorithm (3.0, 3.0.2): 0x0001 in both cases.
    pub flags: TransformFlags,
    pub session_id: u64,
}

impl TransformHeader {
    /// Decode the header at the start of `msg`.
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != TRANSFORM_MAGIC {
            return Err(WireError::Invalid("ProtocolId"));
        }
        let signature = r.array()?;
        let nonce = r.array()?;
        let original_message_size = r.u32()?;
        r.skip(2)?;
        let flags = TransformFlags(r.u16()?);
        let session_id = r.u64()?;
        Ok(TransformHeader {
            signature,
            nonce,
            original_message_size,
            flags,
            session_id,
        })
    }

    /// Append the 52-byte header.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.to_bytes());
    }

    /// The 52-byte header as an array (no allocation).
    pub fn to_bytes(&self) -> [u8; TRANSFORM_HEADER_LEN] {
        let mut b = [0u8; TRANSFORM_HEADER_LEN];
        b[..4].copy_from_slice(&TRANSFORM_MAGIC);
        b[4..20].copy_from_slice(&self.signature);
        b[20..36].copy_from_slice(&self.nonce);
        b[36..40].copy_from_slice(&self.original_message_size.to_le_bytes());
        b[42..44].copy_from_slice(&self.flags.0.to_le_bytes());
        b[44..52].copy_from_slice(&self.session_id.to_le_bytes());
        b
    }

    /// The 32 bytes of associated data this header contributes (bytes 20..52).
    pub fn aad(&self) -> [u8; 32] {
        let mut a = [0u8; 32];
        a.copy_from_slice(&self.to_bytes()[AAD_RANGE]);
        a
    }
}

/// Split an encrypted message into (associated data, ciphertext), checking
/// the header is present and OriginalMessageSize matches the ciphertext length.
pub fn split_encrypted(msg: &[u8]) -> Result<(TransformHeader, &[u8], &[u8]), WireError> {
    let hdr = TransformHeader::decode(msg)?;
    let aad = &msg[AAD_RANGE];
    let ciphertext = &msg[TRANSFORM_HEADER_LEN..];
    if hdr.original_message_size as usize != ciphertext.len() {
        return Err(WireError::Invalid("OriginalMessageSize"));
    }
    Ok((hdr, aad, ciphertext))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr() -> TransformHeader {
        TransformHeader {
            signature: [0xAA; 16],
            nonce: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0],
            original_message_size: 5,
            flags: TransformFlags::ENCRYPTED,
            session_id: 0x1122_3344_5566_7788,
        }
    }

    #[test]
    fn round_trips_and_is_52_bytes() {
        let mut v = Vec::new();
        hdr().encode(&mut v);
        assert_eq!(v.len(), TRANSFORM_HEADER_LEN);
        assert_eq!(&v[..4], b"\xfdSMB");
        assert_eq!(TransformHeader::decode(&v).unwrap(), hdr());
        assert_eq!(&v[AAD_RANGE], &hdr().aad());
        assert_eq!(&v[SIGNATURE_RANGE], &[0xAA; 16]);
        // AAD starts with the nonce and ends with the session id.
        assert_eq!(hdr().aad()[0], 1);
        assert_eq!(&hdr().aad()[24..], &0x1122_3344_5566_7788u64.to_le_bytes());
    }

    #[test]
    fn split_checks_original_size() {
        let mut v = Vec::new();
        hdr().encode(&mut v);
        v.extend_from_slice(b"ciphe");
        let (h, aad, ct) = split_encrypted(&v).unwrap();
        assert_eq!(h.session_id, hdr().session_id);
        assert_eq!(aad.len(), 32);
        assert_eq!(ct, b"ciphe");
        v.push(0);
        assert_eq!(
            split_encrypted(&v).map(|_| ()),
            Err(WireError::Invalid("OriginalMessageSize"))
        );
    }

    #[test]
    fn rejects_wrong_magic_and_truncation() {
        let mut v = Vec::new();
        hdr().encode(&mut v);
        assert!(TransformHeader::decode(&v[..51]).is_err());
        v[0] = 0xFE;
        assert_eq!(
            TransformHeader::decode(&v),
            Err(WireError::Invalid("ProtocolId"))
        );
    }
}
