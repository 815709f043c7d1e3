//! Request decoders and response encoders for the file commands whose wire
//! modules have not landed yet ([MS-SMB2] 2.2.17–2.2.40).
//!
//! TODO(wire): `ringshare_wire::{file, dir, info, lock, ioctl}` are still stubs;
//! once they land these move there (or are replaced by them). Every decoder
//! here takes the whole message (64-byte header first) and goes through the
//! bounds-checked [`Reader`] and [`slice_at`], like the wire crate's own.

use ringshare_wire::codec::{body_reader, expect_structure_size, slice_at, Reader, HEADER_LEN};
use ringshare_wire::utf16::decode_utf16le;
use ringshare_wire::{FileId, NtStatus, WireError, WriteExt};

/// STATUS_INVALID_LOCK_RANGE ([MS-ERREF] 2.3.1).
// TODO(wire): missing from ringshare_wire::status.
pub(crate) const STATUS_INVALID_LOCK_RANGE: NtStatus = NtStatus(0xC000_01A1);

/// SMB2 FLUSH request ([MS-SMB2] 2.2.17).
pub(crate) struct FlushRequest {
    pub file_id: FileId,
}

impl FlushRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 24)?;
        r.skip(6)?;
        Ok(FlushRequest {
            file_id: FileId::read(&mut r)?,
        })
    }
}

/// SMB2 READ request ([MS-SMB2] 2.2.19).
pub(crate) struct ReadRequest {
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
}

impl ReadRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 49)?;
        r.skip(2)?; // Padding, Flags
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        let minimum_count = r.u32()?;
        let _channel = r.u32()?;
        let _remaining = r.u32()?;
        let _ci_off = r.u16()?;
        let _ci_len = r.u16()?;
        Ok(ReadRequest {
            length,
            offset,
            file_id,
            minimum_count,
        })
    }
}

/// The READ response body ([MS-SMB2] 2.2.20) for `data_len` bytes that follow
/// it directly: DataOffset 0x50 (header + this 16-byte body).
pub(crate) fn read_response_body(data_len: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.put_u16(17);
    b.put_u8((HEADER_LEN + 16) as u8);
    b.put_u8(0);
    b.put_u32(u32::try_from(data_len).unwrap_or(u32::MAX));
    b.put_u32(0); // DataRemaining
    b.put_u32(0); // Reserved2 / Flags
    b
}

/// SMB2 WRITE request ([MS-SMB2] 2.2.21). `data` is where the payload sits in `msg`.
pub(crate) struct WriteRequest {
    pub offset: u64,
    pub file_id: FileId,
    pub data_start: usize,
    pub data_len: usize,
}

impl WriteRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 49)?;
        let data_offset = usize::from(r.u16()?);
        let length = r.u32()? as usize;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        let _channel = r.u32()?;
        let _remaining = r.u32()?;
        let _ci_off = r.u16()?;
        let _ci_len = r.u16()?;
        let _flags = r.u32()?;
        // Checked like any buffer: inside the message, after the fixed part.
        slice_at(msg, data_offset, length, HEADER_LEN + 48, "WRITE.Data")?;
        Ok(WriteRequest {
            offset,
            file_id,
            data_start: data_offset,
            data_len: length,
        })
    }
}

pub(crate) fn write_response_body(count: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.put_u16(17);
    b.put_u16(0);
    b.put_u32(count);
    b.put_u32(0); // Remaining
    b.put_u16(0); // WriteChannelInfoOffset
    b.put_u16(0); // WriteChannelInfoLength
    b
}

/// One SMB2_LOCK_ELEMENT ([MS-SMB2] 2.2.26.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockElement {
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
}

/// SMB2 LOCK request ([MS-SMB2] 2.2.26).
pub(crate) struct LockRequest {
    pub file_id: FileId,
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    /// Decode at most `max_elements` elements (more → `Invalid`).
    pub fn decode(msg: &[u8], max_elements: usize) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 48)?;
        let count = usize::from(r.u16()?);
        let _sequence = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        if count == 0 || count > max_elements {
            return Err(WireError::Invalid("LockCount"));
        }
        let mut elems = r.sub(
            count
                .checked_mul(24)
                .ok_or(WireError::Invalid("LockCount"))?,
        )?;
        let mut locks = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = elems.u64()?;
            let length = elems.u64()?;
            let flags = elems.u32()?;
            elems.skip(4)?;
            locks.push(LockElement {
                offset,
                length,
                flags,
            });
        }
        Ok(LockRequest { file_id, locks })
    }
}

/// SMB2 IOCTL request ([MS-SMB2] 2.2.31).
pub(crate) struct IoctlRequest<'a> {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input: &'a [u8],
    pub max_output_response: u32,
    pub flags: u32,
}

impl<'a> IoctlRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 57)?;
        r.skip(2)?;
        let ctl_code = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let _max_input = r.u32()?;
        let _out_off = r.u32()?;
        let _out_len = r.u32()?;
        let max_output_response = r.u32()?;
        let flags = r.u32()?;
        let input = slice_at(msg, in_off, in_len, HEADER_LEN + 56, "IOCTL.Input")?;
        Ok(IoctlRequest {
            ctl_code,
            file_id,
            input,
            max_output_response,
            flags,
        })
    }
}

/// IOCTL response body ([MS-SMB2] 2.2.32) with `output` after the fixed part.
pub(crate) fn ioctl_response_body(ctl_code: u32, file_id: FileId, output: &[u8]) -> Vec<u8> {
    let buffer_at = (HEADER_LEN + 48) as u32;
    let mut b = Vec::with_capacity(48 + output.len());
    b.put_u16(49);
    b.put_u16(0);
    b.put_u32(ctl_code);
    file_id.write(&mut b);
    b.put_u32(buffer_at); // InputOffset
    b.put_u32(0); // InputCount
    b.put_u32(if output.is_empty() { 0 } else { buffer_at }); // OutputOffset
    b.put_u32(u32::try_from(output.len()).unwrap_or(u32::MAX));
    b.put_u32(0); // Flags
    b.put_u32(0); // Reserved2
    b.put_bytes(output);
    b
}

/// SMB2 QUERY_DIRECTORY request ([MS-SMB2] 2.2.33).
pub(crate) struct QueryDirectoryRequest {
    pub class: u8,
    pub flags: u8,
    pub file_id: FileId,
    pub pattern: String,
    pub output_buffer_length: u32,
}

impl QueryDirectoryRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 33)?;
        let class = r.u8()?;
        let flags = r.u8()?;
        let _index = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let name_off = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        let output_buffer_length = r.u32()?;
        let pattern = decode_utf16le(slice_at(
            msg,
            name_off,
            name_len,
            HEADER_LEN + 32,
            "FileName",
        )?)?;
        Ok(QueryDirectoryRequest {
            class,
            flags,
            file_id,
            pattern,
            output_buffer_length,
        })
    }
}

/// The QUERY_DIRECTORY / QUERY_INFO response body ([MS-SMB2] 2.2.34, 2.2.38):
/// StructureSize 9, OutputBufferOffset, OutputBufferLength, then the buffer.
pub(crate) fn output_buffer_body(output: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + output.len().max(1));
    b.put_u16(9);
    b.put_u16(if output.is_empty() {
        0
    } else {
        (HEADER_LEN + 8) as u16
    });
    b.put_u32(u32::try_from(output.len()).unwrap_or(u32::MAX));
    if output.is_empty() {
        b.put_u8(0);
    } else {
        b.put_bytes(output);
    }
    b
}

/// SMB2 QUERY_INFO request ([MS-SMB2] 2.2.37).
pub(crate) struct QueryInfoRequest {
    pub info_type: u8,
    pub class: u8,
    pub output_buffer_length: u32,
    pub additional_information: u32,
    pub file_id: FileId,
}

impl QueryInfoRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 41)?;
        let info_type = r.u8()?;
        let class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let in_off = usize::from(r.u16()?);
        r.skip(2)?;
        let in_len = r.u32()? as usize;
        let additional_information = r.u32()?;
        let _flags = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        // The input buffer (quota and EA queries) is only checked for bounds.
        slice_at(msg, in_off, in_len, HEADER_LEN + 40, "InputBuffer")?;
        Ok(QueryInfoRequest {
            info_type,
            class,
            output_buffer_length,
            additional_information,
            file_id,
        })
    }
}

/// SMB2 SET_INFO request ([MS-SMB2] 2.2.39).
pub(crate) struct SetInfoRequest<'a> {
    pub info_type: u8,
    pub class: u8,
    pub buffer: &'a [u8],
    pub additional_information: u32,
    pub file_id: FileId,
}

impl<'a> SetInfoRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, 33)?;
        let info_type = r.u8()?;
        let class = r.u8()?;
        let len = r.u32()? as usize;
        let off = usize::from(r.u16()?);
        r.skip(2)?;
        let additional_information = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let buffer = slice_at(msg, off, len, HEADER_LEN + 32, "SET_INFO.Buffer")?;
        Ok(SetInfoRequest {
            info_type,
            class,
            buffer,
            additional_information,
            file_id,
        })
    }
}

/// VALIDATE_NEGOTIATE_INFO request ([MS-SMB2] 2.2.31.4).
pub(crate) struct ValidateNegotiateInfo {
    pub capabilities: u32,
    pub guid: [u8; 16],
    pub security_mode: u16,
    pub dialects: Vec<u16>,
}

impl ValidateNegotiateInfo {
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let capabilities = r.u32()?;
        let guid = r.array()?;
        let security_mode = r.u16()?;
        let count = usize::from(r.u16()?);
        let mut d = r.sub(count * 2)?;
        let mut dialects = Vec::with_capacity(count);
        for _ in 0..count {
            dialects.push(d.u16()?);
        }
        Ok(ValidateNegotiateInfo {
            capabilities,
            guid,
            security_mode,
            dialects,
        })
    }
}

/// VALIDATE_NEGOTIATE_INFO response ([MS-SMB2] 2.2.32.6).
pub(crate) fn validate_negotiate_response(
    capabilities: u32,
    guid: &[u8; 16],
    security_mode: u16,
    dialect: u16,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    b.put_u32(capabilities);
    b.put_bytes(guid);
    b.put_u16(security_mode);
    b.put_u16(dialect);
    b
}
