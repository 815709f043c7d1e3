//! Block cloning requests: FSCTL_DUPLICATE_EXTENTS_TO_FILE's
//! SMB2_DUPLICATE_EXTENTS_DATA ([MS-FSCC] 2.3.8 and 2.3.7.2) and
//! FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX's DUPLICATE_EXTENTS_DATA_EX
//! ([MS-FSCC] 2.3.9 and 2.3.9.1). Both replies carry no data.

use crate::codec::{Reader, WriteExt};
use crate::{FileId, WireError};

/// DUPLICATE_EXTENTS_DATA_EX Flags: the clone must be seen whole or not at
/// all by other readers of the source.
pub const DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC: u32 = 0x0000_0001;

/// The request of either FSCTL: which open's data (the source, by FileId on
/// the same tree), from where, to where in the IOCTL's own file, how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateExtents {
    pub source: FileId,
    pub source_offset: u64,
    pub target_offset: u64,
    pub byte_count: u64,
    /// 0 for FSCTL_DUPLICATE_EXTENTS_TO_FILE.
    pub flags: u32,
}

impl DuplicateExtents {
    /// SMB2_DUPLICATE_EXTENTS_DATA: FileId, three offsets.
    pub const LEN: usize = 40;
    /// SMB2_DUPLICATE_EXTENTS_DATA_EX: StructureSize, FileId, three
    /// offsets, Flags, Reserved: 56 bytes.
    pub const EX_LEN: usize = 56;
    /// The StructureSize [MS-FSCC] 2.3.9.2 says a client sets (0x30, though
    /// the fields it lists take 0x38; either is taken).
    pub const EX_STRUCTURE_SIZE: u64 = 0x30;

    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE's input; trailing bytes are ignored,
    /// a short buffer is an error.
    pub fn decode(input: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(input);
        Ok(DuplicateExtents {
            source: FileId::read(&mut r)?,
            source_offset: r.u64()?,
            target_offset: r.u64()?,
            byte_count: r.u64()?,
            flags: 0,
        })
    }

    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX's input: StructureSize 0x30 or
    /// 0x38, and the buffer holding at least the Flags (Reserved may be
    /// cut); Flags are returned as sent (the caller judges them).
    pub fn decode_ex(input: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(input);
        let size = r.u64()?;
        if size != Self::EX_STRUCTURE_SIZE && size != Self::EX_LEN as u64 {
            return Err(WireError::Invalid("StructureSize"));
        }
        let source = FileId::read(&mut r)?;
        let (source_offset, target_offset, byte_count) = (r.u64()?, r.u64()?, r.u64()?);
        let flags = r.u32()?;
        Ok(DuplicateExtents {
            source,
            source_offset,
            target_offset,
            byte_count,
            flags,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        self.source.write(out);
        out.put_u64(self.source_offset);
        out.put_u64(self.target_offset);
        out.put_u64(self.byte_count);
    }

    pub fn encode_ex(&self, out: &mut Vec<u8>) {
        out.put_u64(Self::EX_STRUCTURE_SIZE);
        self.encode(out);
        out.put_u32(self.flags);
        out.put_u32(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DuplicateExtents {
        DuplicateExtents {
            source: FileId {
                persistent: 7,
                volatile: 9,
            },
            source_offset: 4096,
            target_offset: 8192,
            byte_count: 65536,
            flags: 0,
        }
    }

    #[test]
    fn duplicate_extents_data_round_trips_in_forty_bytes() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        assert_eq!(b.len(), DuplicateExtents::LEN);
        assert_eq!(&b[16..24], &4096u64.to_le_bytes());
        assert_eq!(DuplicateExtents::decode(&b).unwrap(), sample());
        b.push(0xAA);
        assert_eq!(DuplicateExtents::decode(&b).unwrap(), sample());
    }

    #[test]
    fn duplicate_extents_data_ex_round_trips_with_its_flags() {
        let d = DuplicateExtents {
            flags: DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC,
            ..sample()
        };
        let mut b = Vec::new();
        d.encode_ex(&mut b);
        assert_eq!(b.len(), DuplicateExtents::EX_LEN);
        assert_eq!(&b[..8], &0x30u64.to_le_bytes());
        assert_eq!(&b[48..52], &1u32.to_le_bytes());
        assert_eq!(DuplicateExtents::decode_ex(&b).unwrap(), d);
    }

    #[test]
    fn every_short_buffer_and_a_wrong_structure_size_are_errors_not_panics() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        for cut in 0..b.len() {
            assert!(DuplicateExtents::decode(&b[..cut]).is_err());
        }
        let mut ex = Vec::new();
        sample().encode_ex(&mut ex);
        for cut in 0..52 {
            assert!(DuplicateExtents::decode_ex(&ex[..cut]).is_err());
        }
        assert!(DuplicateExtents::decode_ex(&ex[..52]).is_ok());
        ex[0] = 0x38;
        assert!(DuplicateExtents::decode_ex(&ex).is_ok());
        ex[0] = 40;
        assert!(DuplicateExtents::decode_ex(&ex).is_err());
        assert!(DuplicateExtents::decode_ex(&[0xFF; 56]).is_err());
    }
}
