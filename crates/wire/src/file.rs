//! SMB2 READ ([MS-SMB2] 2.2.19, 2.2.20), WRITE (2.2.21, 2.2.22) and FLUSH
//! (2.2.17, 2.2.18).
//!
//! For zero-copy data paths the READ response and WRITE request have
//! `encode_head` functions that write only the fixed part (with the data
//! offset and length filled in); the data itself is sent as a separate buffer
//! right after.

use crate::codec::{
    body_reader, decode_empty_body, encode_empty_body, expect_structure_size, slice_at, to_u16,
    to_u32, WriteExt, HEADER_LEN,
};
use crate::consts::{Channel, ReadFlags, WriteFlags};
use crate::{FileId, WireError};

const READ_REQ_BUFFER_AT: usize = HEADER_LEN + 48;
/// Where READ response data starts, counted from the SMB2 header.
pub const READ_RESPONSE_DATA_OFFSET: usize = HEADER_LEN + 16;
/// Where WRITE request data starts when this crate encodes it.
pub const WRITE_REQUEST_DATA_OFFSET: usize = HEADER_LEN + 48;

/// SMB2 READ request ([MS-SMB2] 2.2.19).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest<'a> {
    pub padding: u8,
    pub flags: ReadFlags,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
    pub channel: Channel,
    pub remaining_bytes: u32,
    /// RDMA channel descriptors (raw), empty for Channel NONE.
    pub channel_info: &'a [u8],
}

impl<'a> ReadRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 49;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let padding = r.u8()?;
        let flags = ReadFlags(r.u8()?);
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        let minimum_count = r.u32()?;
        let channel = Channel(r.u32()?);
        let remaining_bytes = r.u32()?;
        let ci_off = usize::from(r.u16()?);
        let ci_len = usize::from(r.u16()?);
        let channel_info = slice_at(msg, ci_off, ci_len, READ_REQ_BUFFER_AT, "ReadChannelInfo")?;
        Ok(ReadRequest {
            padding,
            flags,
            length,
            offset,
            file_id,
            minimum_count,
            channel,
            remaining_bytes,
            channel_info,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.padding);
        out.put_u8(self.flags.0);
        out.put_u32(self.length);
        out.put_u64(self.offset);
        self.file_id.write(out);
        out.put_u32(self.minimum_count);
        out.put_u32(self.channel.0);
        out.put_u32(self.remaining_bytes);
        if self.channel_info.is_empty() {
            out.put_u16(0);
            out.put_u16(0);
            out.put_u8(0); // the Buffer is at least one byte
        } else {
            out.put_u16(to_u16(READ_REQ_BUFFER_AT));
            out.put_u16(to_u16(self.channel_info.len()));
            out.put_bytes(self.channel_info);
        }
    }
}

/// SMB2 READ response ([MS-SMB2] 2.2.20).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResponse<'a> {
    pub data_remaining: u32,
    /// 0x1 = SMB2_READFLAG_RESPONSE_RDMA_TRANSFORM (3.1.1).
    pub flags: u32,
    pub data: &'a [u8],
}

impl<'a> ReadResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 17;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let off = usize::from(r.u8()?);
        r.skip(1)?;
        let len = r.u32()? as usize;
        let data_remaining = r.u32()?;
        let flags = r.u32()?;
        let data = slice_at(msg, off, len, READ_RESPONSE_DATA_OFFSET, "Data")?;
        Ok(ReadResponse {
            data_remaining,
            flags,
            data,
        })
    }

    /// Append the whole body, data included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        Self::encode_head(out, self.data.len(), self.data_remaining, self.flags);
        out.put_bytes(self.data);
    }

    /// Append only the 16-byte fixed part for `data_len` bytes of data that the
    /// caller sends right after it (zero copy). `data_len` must fit in u32.
    pub fn encode_head(out: &mut Vec<u8>, data_len: usize, data_remaining: u32, flags: u32) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(READ_RESPONSE_DATA_OFFSET as u8);
        out.put_u8(0);
        out.put_u32(to_u32(data_len));
        out.put_u32(data_remaining);
        out.put_u32(flags);
    }
}

/// SMB2 WRITE request ([MS-SMB2] 2.2.21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest<'a> {
    pub offset: u64,
    pub file_id: FileId,
    pub channel: Channel,
    pub remaining_bytes: u32,
    pub flags: WriteFlags,
    pub channel_info: &'a [u8],
    pub data: &'a [u8],
}

/// Where a WRITE request says its data and channel info are.
struct WriteFields {
    data_off: usize,
    len: usize,
    ci_off: usize,
    ci_len: usize,
}

impl<'a> WriteRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 49;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let (mut req, f) = Self::fields(msg)?;
        req.data = slice_at(msg, f.data_off, f.len, WRITE_REQUEST_DATA_OFFSET, "Data")?;
        req.channel_info = slice_at(
            msg,
            f.ci_off,
            f.ci_len,
            WRITE_REQUEST_DATA_OFFSET,
            "WriteChannelInfo",
        )?;
        Ok(req)
    }

    /// The fixed part of a WRITE whose data is not in `msg` (it is still on
    /// its way, received apart from the header): the request with empty
    /// `data`, and the data's length. Only the plain layout is accepted: data
    /// right after the fixed part (DataOffset 112), no channel info.
    pub fn decode_head(msg: &'a [u8]) -> Result<(Self, usize), WireError> {
        let (req, f) = Self::fields(msg)?;
        if f.data_off != WRITE_REQUEST_DATA_OFFSET || f.ci_len != 0 {
            return Err(WireError::Invalid("detached WRITE layout"));
        }
        Ok((req, f.len))
    }

    fn fields(msg: &'a [u8]) -> Result<(Self, WriteFields), WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let data_off = usize::from(r.u16()?);
        let len = r.u32()? as usize;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        let channel = Channel(r.u32()?);
        let remaining_bytes = r.u32()?;
        let ci_off = usize::from(r.u16()?);
        let ci_len = usize::from(r.u16()?);
        let flags = WriteFlags(r.u32()?);
        let req = WriteRequest {
            offset,
            file_id,
            channel,
            remaining_bytes,
            flags,
            channel_info: &[],
            data: &[],
        };
        Ok((
            req,
            WriteFields {
                data_off,
                len,
                ci_off,
                ci_len,
            },
        ))
    }

    /// Append the whole body, data included (channel info is not encoded).
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_head(out, self.data.len());
        out.put_bytes(self.data);
    }

    /// Append only the fixed part for `data_len` bytes that follow at offset 112.
    pub fn encode_head(&self, out: &mut Vec<u8>, data_len: usize) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(to_u16(WRITE_REQUEST_DATA_OFFSET));
        out.put_u32(to_u32(data_len));
        out.put_u64(self.offset);
        self.file_id.write(out);
        out.put_u32(self.channel.0);
        out.put_u32(self.remaining_bytes);
        out.put_u16(0);
        out.put_u16(0);
        out.put_u32(self.flags.0);
    }

    /// Offset one past the last byte written, or `None` if it overflows u64.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.data.len() as u64)
    }
}

/// SMB2 WRITE response ([MS-SMB2] 2.2.22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResponse {
    pub count: u32,
    pub remaining: u32,
}

impl WriteResponse {
    pub const STRUCTURE_SIZE: u16 = 17;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        r.skip(2)?;
        Ok(WriteResponse {
            count: r.u32()?,
            remaining: r.u32()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.count);
        out.put_u32(self.remaining);
        out.put_u16(0);
        out.put_u16(0);
    }
}

/// SMB2 FLUSH request ([MS-SMB2] 2.2.17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushRequest {
    pub file_id: FileId,
}

impl FlushRequest {
    pub const STRUCTURE_SIZE: u16 = 24;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        r.skip(6)?;
        Ok(FlushRequest {
            file_id: FileId::read(&mut r)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(0);
        self.file_id.write(out);
    }
}

/// SMB2 FLUSH response ([MS-SMB2] 2.2.18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushResponse;

impl FlushResponse {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| FlushResponse)
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

    const FID: FileId = FileId {
        persistent: 1,
        volatile: 2,
    };

    #[test]
    fn read_request_round_trips_and_has_one_byte_buffer() {
        let r = ReadRequest {
            padding: 0x50,
            flags: ReadFlags::empty(),
            length: 65536,
            offset: 1 << 33,
            file_id: FID,
            minimum_count: 0,
            channel: Channel::NONE,
            remaining_bytes: 0,
            channel_info: &[],
        };
        let msg = test_msg(Command::READ, |v| r.encode(v));
        assert_eq!(msg.len(), 64 + 49);
        assert_eq!(ReadRequest::decode(&msg).unwrap(), r);
        // The final buffer byte is optional on receipt.
        assert_eq!(ReadRequest::decode(&msg[..112]).unwrap(), r);
        assert_prefixes_fail(&msg, 112, |m| ReadRequest::decode(m).is_ok());
    }

    #[test]
    fn read_response_head_matches_full_encoding() {
        let data = b"hello world";
        let full = test_msg(Command::READ, |v| {
            ReadResponse {
                data_remaining: 0,
                flags: 0,
                data,
            }
            .encode(v)
        });
        let mut split = test_msg(Command::READ, |v| {
            ReadResponse::encode_head(v, data.len(), 0, 0)
        });
        assert_eq!(split.len(), READ_RESPONSE_DATA_OFFSET);
        split.extend_from_slice(data);
        assert_eq!(split, full);
        assert_eq!(ReadResponse::decode(&full).unwrap().data, data);
    }

    #[test]
    fn read_response_rejects_data_offset_into_fixed_part_or_past_end() {
        let mut m = test_msg(Command::READ, |v| ReadResponse::encode_head(v, 4, 0, 0));
        m.extend_from_slice(b"abcd");
        let mut bad = m.clone();
        bad[66] = 0x40;
        assert_eq!(
            ReadResponse::decode(&bad),
            Err(WireError::BadOffset("Data"))
        );
        let mut bad = m;
        bad[68..72].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            ReadResponse::decode(&bad),
            Err(WireError::BadOffset("Data"))
        );
    }

    #[test]
    fn write_request_round_trips_and_exposes_data() {
        let w = WriteRequest {
            offset: 10,
            file_id: FID,
            channel: Channel::NONE,
            remaining_bytes: 0,
            flags: WriteFlags::WRITE_THROUGH,
            channel_info: &[],
            data: b"payload",
        };
        let msg = test_msg(Command::WRITE, |v| w.encode(v));
        let d = WriteRequest::decode(&msg).unwrap();
        assert_eq!(d, w);
        assert_eq!(d.end(), Some(17));
        assert_prefixes_fail(&msg, msg.len(), |m| WriteRequest::decode(m).is_ok());
    }

    #[test]
    fn write_request_head_decodes_without_its_data_and_only_in_the_plain_layout() {
        let w = WriteRequest {
            offset: 1 << 20,
            file_id: FID,
            channel: Channel::NONE,
            remaining_bytes: 0,
            flags: WriteFlags::empty(),
            channel_info: &[],
            data: &[],
        };
        let head = test_msg(Command::WRITE, |v| w.encode_head(v, 1 << 20));
        assert_eq!(head.len(), WRITE_REQUEST_DATA_OFFSET);
        assert_eq!(WriteRequest::decode_head(&head), Ok((w.clone(), 1 << 20)));
        // The whole-message decoder wants the data there.
        assert_eq!(
            WriteRequest::decode(&head),
            Err(WireError::BadOffset("Data"))
        );
        let mut moved = head.clone();
        moved[66..68].copy_from_slice(&120u16.to_le_bytes());
        assert!(WriteRequest::decode_head(&moved).is_err());
        let mut with_channel_info = head.clone();
        with_channel_info[106..108].copy_from_slice(&16u16.to_le_bytes());
        assert!(WriteRequest::decode_head(&with_channel_info).is_err());
        assert_prefixes_fail(&head, head.len(), |m| WriteRequest::decode_head(m).is_ok());
    }

    #[test]
    fn write_request_rejects_length_past_end_and_offset_into_header() {
        let w = WriteRequest {
            offset: u64::MAX,
            file_id: FID,
            channel: Channel::NONE,
            remaining_bytes: 0,
            flags: WriteFlags::empty(),
            channel_info: &[],
            data: b"x",
        };
        let msg = test_msg(Command::WRITE, |v| w.encode(v));
        assert_eq!(WriteRequest::decode(&msg).unwrap().end(), None);
        let mut bad = msg.clone();
        bad[68..72].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            WriteRequest::decode(&bad),
            Err(WireError::BadOffset("Data"))
        );
        let mut bad = msg;
        bad[66..68].copy_from_slice(&16u16.to_le_bytes());
        assert_eq!(
            WriteRequest::decode(&bad),
            Err(WireError::BadOffset("Data"))
        );
    }

    #[test]
    fn write_response_and_flush_round_trip() {
        let w = WriteResponse {
            count: 7,
            remaining: 0,
        };
        let msg = test_msg(Command::WRITE, |v| w.encode(v));
        assert_eq!(msg.len(), 64 + 16);
        assert_eq!(WriteResponse::decode(&msg).unwrap(), w);
        let f = FlushRequest { file_id: FID };
        let msg = test_msg(Command::FLUSH, |v| f.encode(v));
        assert_eq!(FlushRequest::decode(&msg).unwrap(), f);
        let mut bad = msg.clone();
        bad[64] = 25;
        assert!(FlushRequest::decode(&bad).is_err());
        let msg = test_msg(Command::FLUSH, |v| FlushResponse.encode(v));
        assert_eq!(FlushResponse::decode(&msg), Ok(FlushResponse));
    }
}
