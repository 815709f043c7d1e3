//! SMB2 SESSION_SETUP ([MS-SMB2] 2.2.5, 2.2.6) and LOGOFF (2.2.7, 2.2.8).

use crate::codec::{
    body_reader, decode_empty_body, encode_empty_body, expect_structure_size, slice_at, to_u16,
    WriteExt, HEADER_LEN,
};
use crate::consts::{Capabilities, SecurityMode, SessionFlags, SessionSetupFlags};
use crate::WireError;

const REQUEST_BUFFER_AT: usize = HEADER_LEN + 24;
const RESPONSE_BUFFER_AT: usize = HEADER_LEN + 8;

/// SMB2 SESSION_SETUP request ([MS-SMB2] 2.2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSetupRequest<'a> {
    pub flags: SessionSetupFlags,
    /// Same bits as [`SecurityMode`], carried in one byte here.
    pub security_mode: SecurityMode,
    pub capabilities: Capabilities,
    pub channel: u32,
    pub previous_session_id: u64,
    /// The GSS/SPNEGO token.
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 25;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let flags = SessionSetupFlags(r.u8()?);
        let security_mode = SecurityMode(u16::from(r.u8()?));
        let capabilities = Capabilities(r.u32()?);
        let channel = r.u32()?;
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let previous_session_id = r.u64()?;
        let security_buffer = slice_at(msg, off, len, REQUEST_BUFFER_AT, "SecurityBuffer")?;
        Ok(SessionSetupRequest {
            flags,
            security_mode,
            capabilities,
            channel,
            previous_session_id,
            security_buffer,
        })
    }

    /// Append the body; the header is at `out[out.len() - 64..]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.flags.0);
        out.put_u8((self.security_mode.0 & 0xFF) as u8);
        out.put_u32(self.capabilities.0);
        out.put_u32(self.channel);
        out.put_u16(to_u16(REQUEST_BUFFER_AT));
        out.put_u16(to_u16(self.security_buffer.len()));
        out.put_u64(self.previous_session_id);
        out.put_bytes(self.security_buffer);
    }
}

/// SMB2 SESSION_SETUP response ([MS-SMB2] 2.2.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSetupResponse<'a> {
    pub session_flags: SessionFlags,
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let session_flags = SessionFlags(r.u16()?);
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let security_buffer = slice_at(msg, off, len, RESPONSE_BUFFER_AT, "SecurityBuffer")?;
        Ok(SessionSetupResponse {
            session_flags,
            security_buffer,
        })
    }

    /// Append the body; the header is at `out[out.len() - 64..]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.session_flags.0);
        out.put_u16(to_u16(RESPONSE_BUFFER_AT));
        out.put_u16(to_u16(self.security_buffer.len()));
        out.put_bytes(self.security_buffer);
    }
}

/// SMB2 LOGOFF request ([MS-SMB2] 2.2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogoffRequest;

impl LogoffRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| LogoffRequest)
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_empty_body(out, 4);
    }
}

/// SMB2 LOGOFF response ([MS-SMB2] 2.2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogoffResponse;

impl LogoffResponse {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| LogoffResponse)
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

    const TOKEN: &[u8] = &[
        0x60, 0x48, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02, 0xa0,
    ];

    fn req() -> SessionSetupRequest<'static> {
        SessionSetupRequest {
            flags: SessionSetupFlags::empty(),
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: Capabilities::DFS,
            channel: 0,
            previous_session_id: 0,
            security_buffer: TOKEN,
        }
    }

    #[test]
    fn request_round_trips_with_buffer_at_88() {
        let msg = test_msg(Command::SESSION_SETUP, |v| req().encode(v));
        assert_eq!(&msg[76..78], &88u16.to_le_bytes());
        assert_eq!(SessionSetupRequest::decode(&msg).unwrap(), req());
        assert_prefixes_fail(&msg, msg.len(), |m| SessionSetupRequest::decode(m).is_ok());
    }

    #[test]
    fn response_round_trips() {
        let resp = SessionSetupResponse {
            session_flags: SessionFlags::IS_GUEST,
            security_buffer: TOKEN,
        };
        let msg = test_msg(Command::SESSION_SETUP, |v| resp.encode(v));
        assert_eq!(SessionSetupResponse::decode(&msg).unwrap(), resp);
        let empty = SessionSetupResponse {
            session_flags: SessionFlags::empty(),
            security_buffer: &[],
        };
        let msg = test_msg(Command::SESSION_SETUP, |v| empty.encode(v));
        assert_eq!(SessionSetupResponse::decode(&msg).unwrap(), empty);
    }

    #[test]
    fn rejects_security_buffer_into_fixed_part_or_past_end() {
        let base = test_msg(Command::SESSION_SETUP, |v| req().encode(v));
        let mut msg = base.clone();
        msg[76..78].copy_from_slice(&80u16.to_le_bytes());
        assert_eq!(
            SessionSetupRequest::decode(&msg),
            Err(WireError::BadOffset("SecurityBuffer"))
        );
        let mut msg = base.clone();
        msg[78..80].copy_from_slice(&0xFFFFu16.to_le_bytes());
        assert_eq!(
            SessionSetupRequest::decode(&msg),
            Err(WireError::BadOffset("SecurityBuffer"))
        );
        let mut msg = base;
        msg[64] = 24;
        assert_eq!(
            SessionSetupRequest::decode(&msg),
            Err(WireError::Invalid("StructureSize"))
        );
    }

    #[test]
    fn logoff_round_trips_and_checks_size() {
        let msg = test_msg(Command::LOGOFF, |v| LogoffRequest.encode(v));
        assert_eq!(msg.len(), 68);
        assert_eq!(LogoffRequest::decode(&msg), Ok(LogoffRequest));
        assert_eq!(LogoffResponse::decode(&msg), Ok(LogoffResponse));
        let mut bad = msg.clone();
        bad[64] = 5;
        assert!(LogoffRequest::decode(&bad).is_err());
        assert!(LogoffRequest::decode(&msg[..66]).is_err());
    }
}
