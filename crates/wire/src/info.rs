//! SMB2 QUERY_INFO ([MS-SMB2] 2.2.37, 2.2.38) and SET_INFO (2.2.39, 2.2.40)
//! envelopes. The info structures ([MS-FSCC] 2.4, 2.5, security descriptors,
//! quota) are encoded by their own modules.

use crate::codec::{
    body_reader, decode_empty_body, decode_output_buffer_response, encode_empty_body,
    encode_output_buffer_response_head, expect_structure_size, slice_at, to_u16, to_u32, WriteExt,
    HEADER_LEN, OUTPUT_BUFFER_RESPONSE_AT,
};
use crate::consts::{InfoType, QueryInfoFlags};
use crate::{FileId, WireError};

const QUERY_REQ_BUFFER_AT: usize = HEADER_LEN + 40;
const SET_REQ_BUFFER_AT: usize = HEADER_LEN + 32;
/// Where the QUERY_INFO response's output buffer starts, counted from the header.
pub const QUERY_RESPONSE_BUFFER_OFFSET: usize = OUTPUT_BUFFER_RESPONSE_AT;

/// SMB2 QUERY_INFO request ([MS-SMB2] 2.2.37).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryInfoRequest<'a> {
    pub info_type: InfoType,
    /// FileInfoClass: a file or file-system information class ([MS-FSCC]), 0 for security/quota.
    pub info_class: u8,
    pub output_buffer_length: u32,
    /// SecurityInformation for `InfoType::SECURITY`, EA index for FileFullEaInformation.
    pub additional_information: u32,
    pub flags: QueryInfoFlags,
    pub file_id: FileId,
    /// Quota query / EA name list input (may be empty).
    pub input: &'a [u8],
}

impl<'a> QueryInfoRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 41;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let info_type = InfoType(r.u8()?);
        let info_class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let in_off = usize::from(r.u16()?);
        r.skip(2)?;
        let in_len = r.u32()? as usize;
        let additional_information = r.u32()?;
        let flags = QueryInfoFlags(r.u32()?);
        let file_id = FileId::read(&mut r)?;
        let input = slice_at(msg, in_off, in_len, QUERY_REQ_BUFFER_AT, "InputBuffer")?;
        Ok(QueryInfoRequest {
            info_type,
            info_class,
            output_buffer_length,
            additional_information,
            flags,
            file_id,
            input,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.info_type.0);
        out.put_u8(self.info_class);
        out.put_u32(self.output_buffer_length);
        out.put_u16(if self.input.is_empty() {
            0
        } else {
            to_u16(QUERY_REQ_BUFFER_AT)
        });
        out.put_u16(0);
        out.put_u32(to_u32(self.input.len()));
        out.put_u32(self.additional_information);
        out.put_u32(self.flags.0);
        self.file_id.write(out);
        out.put_bytes(self.input);
        if self.input.is_empty() {
            out.put_u8(0);
        }
    }
}

/// SMB2 QUERY_INFO response ([MS-SMB2] 2.2.38).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryInfoResponse<'a> {
    pub buffer: &'a [u8],
}

impl<'a> QueryInfoResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        Ok(QueryInfoResponse {
            buffer: decode_output_buffer_response(msg)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        Self::encode_head(out, self.buffer.len());
        out.put_bytes(self.buffer);
    }

    /// Append only the fixed part for `buffer_len` bytes that follow it.
    pub fn encode_head(out: &mut Vec<u8>, buffer_len: usize) {
        encode_output_buffer_response_head(out, buffer_len);
    }

    /// Length of the fixed part.
    pub const HEAD_LEN: usize = 8;

    /// Write the fixed part over the first [`Self::HEAD_LEN`] bytes of `body`, whose buffer is
    /// the rest (a body built with room in front, so that the buffer is not copied).
    pub fn fill_head(body: &mut [u8]) {
        let mut head = [0u8; Self::HEAD_LEN];
        let buffer_len = body.len() - Self::HEAD_LEN;
        head[..2].copy_from_slice(&Self::STRUCTURE_SIZE.to_le_bytes());
        head[2..4].copy_from_slice(&to_u16(OUTPUT_BUFFER_RESPONSE_AT).to_le_bytes());
        head[4..].copy_from_slice(&to_u32(buffer_len).to_le_bytes());
        body[..Self::HEAD_LEN].copy_from_slice(&head);
    }
}

/// SMB2 SET_INFO request ([MS-SMB2] 2.2.39).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfoRequest<'a> {
    pub info_type: InfoType,
    pub info_class: u8,
    pub additional_information: u32,
    pub file_id: FileId,
    pub buffer: &'a [u8],
}

impl<'a> SetInfoRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 33;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let info_type = InfoType(r.u8()?);
        let info_class = r.u8()?;
        let len = r.u32()? as usize;
        let off = usize::from(r.u16()?);
        r.skip(2)?;
        let additional_information = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let buffer = slice_at(msg, off, len, SET_REQ_BUFFER_AT, "Buffer")?;
        Ok(SetInfoRequest {
            info_type,
            info_class,
            additional_information,
            file_id,
            buffer,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.info_type.0);
        out.put_u8(self.info_class);
        out.put_u32(to_u32(self.buffer.len()));
        out.put_u16(to_u16(SET_REQ_BUFFER_AT));
        out.put_u16(0);
        out.put_u32(self.additional_information);
        self.file_id.write(out);
        out.put_bytes(self.buffer);
        if self.buffer.is_empty() {
            out.put_u8(0);
        }
    }
}

/// SMB2 SET_INFO response ([MS-SMB2] 2.2.40): StructureSize 2, nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetInfoResponse;

impl SetInfoResponse {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 2).map(|()| SetInfoResponse)
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_empty_body(out, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_prefixes_fail, test_msg};
    use crate::consts::{Command, SecurityInformation};

    #[test]
    fn a_head_filled_in_place_is_the_head_encode_appends() {
        let buffer = [7u8; 40];
        let mut appended = Vec::new();
        QueryInfoResponse { buffer: &buffer }.encode(&mut appended);
        let mut in_place = vec![0u8; QueryInfoResponse::HEAD_LEN];
        in_place.extend_from_slice(&buffer);
        QueryInfoResponse::fill_head(&mut in_place);
        assert_eq!(in_place, appended);
    }

    const FID: FileId = FileId {
        persistent: 9,
        volatile: 10,
    };

    #[test]
    fn query_info_request_round_trips_with_and_without_input() {
        let q = QueryInfoRequest {
            info_type: InfoType::SECURITY,
            info_class: 0,
            output_buffer_length: 4096,
            additional_information: (SecurityInformation::OWNER | SecurityInformation::DACL).0,
            flags: QueryInfoFlags::empty(),
            file_id: FID,
            input: &[],
        };
        let msg = test_msg(Command::QUERY_INFO, |v| q.encode(v));
        assert_eq!(msg.len(), 64 + 41);
        assert_eq!(QueryInfoRequest::decode(&msg).unwrap(), q);
        let q2 = QueryInfoRequest {
            info_type: InfoType::QUOTA,
            input: &[1, 2, 3, 4],
            ..q
        };
        let msg = test_msg(Command::QUERY_INFO, |v| q2.encode(v));
        assert_eq!(QueryInfoRequest::decode(&msg).unwrap(), q2);
        assert_prefixes_fail(&msg, msg.len(), |m| QueryInfoRequest::decode(m).is_ok());
        let mut bad = msg.clone();
        bad[64 + 8] = 0x50; // InputBufferOffset into the fixed part
        assert_eq!(
            QueryInfoRequest::decode(&bad),
            Err(WireError::BadOffset("InputBuffer"))
        );
    }

    #[test]
    fn query_info_response_round_trips_and_head_matches() {
        let buf = [7u8; 24];
        let msg = test_msg(Command::QUERY_INFO, |v| {
            QueryInfoResponse { buffer: &buf }.encode(v)
        });
        assert_eq!(QueryInfoResponse::decode(&msg).unwrap().buffer, &buf);
        let mut head = test_msg(Command::QUERY_INFO, |v| {
            QueryInfoResponse::encode_head(v, buf.len())
        });
        head.extend_from_slice(&buf);
        assert_eq!(head, msg);
        let mut bad = msg;
        bad[64 + 4..64 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(QueryInfoResponse::decode(&bad).is_err());
    }

    #[test]
    fn set_info_round_trips_and_rejects_buffer_past_end() {
        let s = SetInfoRequest {
            info_type: InfoType::FILE,
            info_class: 0x14,
            additional_information: 0,
            file_id: FID,
            buffer: &100u64.to_le_bytes(),
        };
        let msg = test_msg(Command::SET_INFO, |v| s.encode(v));
        assert_eq!(SetInfoRequest::decode(&msg).unwrap(), s);
        assert_prefixes_fail(&msg, msg.len(), |m| SetInfoRequest::decode(m).is_ok());
        let mut bad = msg.clone();
        bad[64 + 4] = 9;
        assert_eq!(
            SetInfoRequest::decode(&bad),
            Err(WireError::BadOffset("Buffer"))
        );
        let msg = test_msg(Command::SET_INFO, |v| SetInfoResponse.encode(v));
        assert_eq!(msg.len(), 66);
        assert_eq!(SetInfoResponse::decode(&msg), Ok(SetInfoResponse));
    }
}
