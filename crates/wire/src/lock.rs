//! SMB2 LOCK request and response ([MS-SMB2] 2.2.26, 2.2.26.1, 2.2.27).

use crate::codec::{
    body_reader, decode_empty_body, encode_empty_body, expect_structure_size, to_u16, WriteExt,
};
use crate::consts::LockFlags;
use crate::{FileId, WireError};

/// One SMB2_LOCK_ELEMENT ([MS-SMB2] 2.2.26.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockElement {
    pub offset: u64,
    pub length: u64,
    pub flags: LockFlags,
}

impl LockElement {
    /// `offset + length` overflows u64 (the server answers INVALID_LOCK_RANGE).
    pub fn overflows(&self) -> bool {
        self.offset.checked_add(self.length).is_none()
    }
}

/// SMB2 LOCK request ([MS-SMB2] 2.2.26).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRequest {
    /// LockSequenceNumber (low 4 bits).
    pub lock_sequence_number: u8,
    /// LockSequenceIndex (high 28 bits).
    pub lock_sequence_index: u32,
    pub file_id: FileId,
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    pub const STRUCTURE_SIZE: u16 = 48;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let count = usize::from(r.u16()?);
        let seq = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        if count == 0 {
            return Err(WireError::Invalid("LockCount"));
        }
        // Check the count against the bytes present before allocating.
        if count.saturating_mul(24) > r.remaining() {
            return Err(WireError::Invalid("LockCount"));
        }
        let mut locks = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = r.u64()?;
            let length = r.u64()?;
            let flags = LockFlags(r.u32()?);
            r.skip(4)?;
            locks.push(LockElement {
                offset,
                length,
                flags,
            });
        }
        Ok(LockRequest {
            lock_sequence_number: (seq & 0xF) as u8,
            lock_sequence_index: seq >> 4,
            file_id,
            locks,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(to_u16(self.locks.len()));
        out.put_u32(u32::from(self.lock_sequence_number & 0xF) | (self.lock_sequence_index << 4));
        self.file_id.write(out);
        for l in &self.locks {
            out.put_u64(l.offset);
            out.put_u64(l.length);
            out.put_u32(l.flags.0);
            out.put_u32(0);
        }
    }
}

/// SMB2 LOCK response ([MS-SMB2] 2.2.27).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockResponse;

impl LockResponse {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| LockResponse)
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_empty_body(out, 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_prefixes_fail, test_msg};
    use crate::consts::Command;

    fn req() -> LockRequest {
        LockRequest {
            lock_sequence_number: 3,
            lock_sequence_index: 17,
            file_id: FileId {
                persistent: 1,
                volatile: 1,
            },
            locks: vec![
                LockElement {
                    offset: 0,
                    length: 100,
                    flags: LockFlags::EXCLUSIVE_LOCK | LockFlags::FAIL_IMMEDIATELY,
                },
                LockElement {
                    offset: 200,
                    length: 1,
                    flags: LockFlags::UNLOCK,
                },
            ],
        }
    }

    #[test]
    fn request_round_trips_with_sequence_split() {
        let msg = test_msg(Command::LOCK, |v| req().encode(v));
        assert_eq!(msg.len(), 64 + 24 + 48);
        assert_eq!(&msg[68..72], &((17u32 << 4) | 3).to_le_bytes());
        assert_eq!(LockRequest::decode(&msg).unwrap(), req());
        assert_prefixes_fail(&msg, msg.len(), |m| LockRequest::decode(m).is_ok());
    }

    #[test]
    fn rejects_zero_or_oversized_lock_count() {
        let base = test_msg(Command::LOCK, |v| req().encode(v));
        let mut m = base.clone();
        m[66..68].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(
            LockRequest::decode(&m),
            Err(WireError::Invalid("LockCount"))
        );
        let mut m = base;
        m[66..68].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            LockRequest::decode(&m),
            Err(WireError::Invalid("LockCount"))
        );
    }

    #[test]
    fn detects_overflowing_ranges_and_round_trips_response() {
        let l = LockElement {
            offset: u64::MAX,
            length: 1,
            flags: LockFlags::SHARED_LOCK,
        };
        assert!(l.overflows());
        let msg = test_msg(Command::LOCK, |v| LockResponse.encode(v));
        assert_eq!(LockResponse::decode(&msg), Ok(LockResponse));
    }
}
