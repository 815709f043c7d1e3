//! Request decoders and response encoders for IOCTL ([MS-SMB2] 2.2.31, 2.2.32);
//! the other file commands use `ringshare_wire::{file, dir, info, lock}`.
//!
//! TODO(wire): `ringshare_wire::ioctl` replaces these. Every decoder
//! here takes the whole message (64-byte header first) and goes through the
//! bounds-checked [`Reader`] and [`slice_at`], like the wire crate's own.

use ringshare_wire::codec::{body_reader, expect_structure_size, slice_at, Reader, HEADER_LEN};
use ringshare_wire::{FileId, WireError, WriteExt};

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
