//! SMB2 QUERY_DIRECTORY request and response envelopes ([MS-SMB2] 2.2.33,
//! 2.2.34). The entries themselves ([MS-FSCC] 2.4) are built by the caller.

use crate::codec::{
    body_reader, decode_output_buffer_response, encode_output_buffer_response_head,
    expect_structure_size, slice_at, to_u16, WriteExt, HEADER_LEN, OUTPUT_BUFFER_RESPONSE_AT,
};
use crate::consts::QueryDirectoryFlags;
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::{FileId, WireError};

const REQ_BUFFER_AT: usize = HEADER_LEN + 32;
/// Where the response's output buffer starts, counted from the SMB2 header.
pub const RESPONSE_BUFFER_OFFSET: usize = OUTPUT_BUFFER_RESPONSE_AT;

/// SMB2 QUERY_DIRECTORY request ([MS-SMB2] 2.2.33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryDirectoryRequest {
    /// FileInformationClass ([MS-FSCC] 2.4), e.g. 0x25 FileIdBothDirectoryInformation.
    pub info_class: u8,
    pub flags: QueryDirectoryFlags,
    pub file_index: u32,
    pub file_id: FileId,
    /// The search pattern (e.g. `*`), as sent.
    pub pattern: String,
    pub output_buffer_length: u32,
}

impl QueryDirectoryRequest {
    pub const STRUCTURE_SIZE: u16 = 33;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let info_class = r.u8()?;
        let flags = QueryDirectoryFlags(r.u8()?);
        let file_index = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let name_off = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        let output_buffer_length = r.u32()?;
        let pattern = decode_utf16le(slice_at(
            msg,
            name_off,
            name_len,
            REQ_BUFFER_AT,
            "FileName",
        )?)?;
        Ok(QueryDirectoryRequest {
            info_class,
            flags,
            file_index,
            file_id,
            pattern,
            output_buffer_length,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.info_class);
        out.put_u8(self.flags.0);
        out.put_u32(self.file_index);
        self.file_id.write(out);
        let len = utf16_len(&self.pattern);
        out.put_u16(if len == 0 { 0 } else { to_u16(REQ_BUFFER_AT) });
        out.put_u16(to_u16(len));
        out.put_u32(self.output_buffer_length);
        encode_utf16le(&self.pattern, out);
        if len == 0 {
            out.put_u8(0);
        }
    }
}

/// SMB2 QUERY_DIRECTORY response ([MS-SMB2] 2.2.34).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryDirectoryResponse<'a> {
    pub buffer: &'a [u8],
}

impl<'a> QueryDirectoryResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        Ok(QueryDirectoryResponse {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_prefixes_fail, test_msg};
    use crate::consts::Command;

    fn req() -> QueryDirectoryRequest {
        QueryDirectoryRequest {
            info_class: 0x25,
            flags: QueryDirectoryFlags::RESTART_SCANS,
            file_index: 0,
            file_id: FileId {
                persistent: 5,
                volatile: 6,
            },
            pattern: "*".into(),
            output_buffer_length: 65536,
        }
    }

    #[test]
    fn request_round_trips() {
        let msg = test_msg(Command::QUERY_DIRECTORY, |v| req().encode(v));
        assert_eq!(&msg[64 + 24..64 + 26], &96u16.to_le_bytes());
        assert_eq!(QueryDirectoryRequest::decode(&msg).unwrap(), req());
        assert_prefixes_fail(&msg, msg.len(), |m| {
            QueryDirectoryRequest::decode(m).is_ok()
        });
        let empty = QueryDirectoryRequest {
            pattern: String::new(),
            ..req()
        };
        let msg = test_msg(Command::QUERY_DIRECTORY, |v| empty.encode(v));
        assert_eq!(QueryDirectoryRequest::decode(&msg).unwrap(), empty);
    }

    #[test]
    fn rejects_pattern_in_fixed_part_odd_or_past_end() {
        let base = test_msg(Command::QUERY_DIRECTORY, |v| req().encode(v));
        let mut m = base.clone();
        m[64 + 24] = 90;
        assert_eq!(
            QueryDirectoryRequest::decode(&m),
            Err(WireError::BadOffset("FileName"))
        );
        let mut m = base.clone();
        m[64 + 26] = 1;
        assert!(QueryDirectoryRequest::decode(&m).is_err());
        let mut m = base;
        m[64 + 26] = 4;
        assert_eq!(
            QueryDirectoryRequest::decode(&m),
            Err(WireError::BadOffset("FileName"))
        );
    }

    #[test]
    fn response_round_trips_and_head_matches() {
        let buf = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let msg = test_msg(Command::QUERY_DIRECTORY, |v| {
            QueryDirectoryResponse { buffer: &buf }.encode(v)
        });
        assert_eq!(QueryDirectoryResponse::decode(&msg).unwrap().buffer, &buf);
        let mut head = test_msg(Command::QUERY_DIRECTORY, |v| {
            QueryDirectoryResponse::encode_head(v, buf.len())
        });
        head.extend_from_slice(&buf);
        assert_eq!(head, msg);
    }
}
