//! SMB2 TREE_CONNECT ([MS-SMB2] 2.2.9, 2.2.9.1, 2.2.10) and TREE_DISCONNECT
//! (2.2.11, 2.2.12).

use crate::codec::{
    body_reader, decode_empty_body, encode_empty_body, expect_structure_size, slice_at, to_u16,
    Reader, WriteExt, HEADER_LEN,
};
use crate::consts::{AccessMask, ShareCapabilities, ShareFlags, ShareType, TreeConnectFlags};
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::WireError;

const BUFFER_AT: usize = HEADER_LEN + 8;
/// Size of the fixed part of the TREE_CONNECT request extension (2.2.9.1).
const EXTENSION_LEN: usize = 16;

/// SMB2 TREE_CONNECT request ([MS-SMB2] 2.2.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeConnectRequest {
    /// Flags (3.1.1) / Reserved.
    pub flags: TreeConnectFlags,
    /// The share path, `\\server\share`.
    pub path: String,
    /// With `EXTENSION_PRESENT`: TreeConnectContextOffset and Count as sent
    /// (the contexts are not interpreted).
    pub extension: Option<TreeConnectExtension>,
}

/// The fixed part of the TREE_CONNECT request extension ([MS-SMB2] 2.2.9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeConnectExtension {
    pub context_offset: u32,
    pub context_count: u16,
}

impl TreeConnectRequest {
    pub const STRUCTURE_SIZE: u16 = 9;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let flags = TreeConnectFlags(r.u16()?);
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let (extension, min) = if flags.contains(TreeConnectFlags::EXTENSION_PRESENT) {
            let mut e = r.sub(EXTENSION_LEN)?;
            let ext = TreeConnectExtension {
                context_offset: e.u32()?,
                context_count: e.u16()?,
            };
            (Some(ext), BUFFER_AT + EXTENSION_LEN)
        } else {
            (None, BUFFER_AT)
        };
        if len == 0 {
            return Err(WireError::Invalid("PathLength"));
        }
        let path = decode_utf16le(slice_at(msg, off, len, min, "Path")?)?;
        Ok(TreeConnectRequest {
            flags,
            path,
            extension,
        })
    }

    /// Append the body; the header is at `out[out.len() - 64..]`. With an
    /// `extension`, its fixed part precedes the path and no contexts are written.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut flags = self.flags;
        let path_at = match self.extension {
            Some(_) => {
                flags.insert(TreeConnectFlags::EXTENSION_PRESENT);
                BUFFER_AT + EXTENSION_LEN
            }
            None => {
                flags.remove(TreeConnectFlags::EXTENSION_PRESENT);
                BUFFER_AT
            }
        };
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(flags.0);
        out.put_u16(to_u16(path_at));
        out.put_u16(to_u16(utf16_len(&self.path)));
        if let Some(ext) = self.extension {
            out.put_u32(ext.context_offset);
            out.put_u16(ext.context_count);
            out.put_zeros(10);
        }
        encode_utf16le(&self.path, out);
    }

    /// The share name: the last component of `\\server\share` (or the whole
    /// path when it has no backslash).
    pub fn share_name(&self) -> &str {
        self.path.rsplit('\\').next().unwrap_or(&self.path)
    }
}

/// SMB2 TREE_CONNECT response ([MS-SMB2] 2.2.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeConnectResponse {
    pub share_type: ShareType,
    pub share_flags: ShareFlags,
    pub capabilities: ShareCapabilities,
    pub maximal_access: AccessMask,
}

impl TreeConnectResponse {
    pub const STRUCTURE_SIZE: u16 = 16;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        Self::read_fixed(&mut r)
    }

    fn read_fixed(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let share_type = ShareType(r.u8()?);
        r.skip(1)?;
        Ok(TreeConnectResponse {
            share_type,
            share_flags: ShareFlags(r.u32()?),
            capabilities: ShareCapabilities(r.u32()?),
            maximal_access: AccessMask(r.u32()?),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.share_type.0);
        out.put_u8(0);
        out.put_u32(self.share_flags.0);
        out.put_u32(self.capabilities.0);
        out.put_u32(self.maximal_access.0);
    }
}

/// SMB2 TREE_DISCONNECT request ([MS-SMB2] 2.2.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeDisconnectRequest;

impl TreeDisconnectRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| TreeDisconnectRequest)
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_empty_body(out, 4);
    }
}

/// SMB2 TREE_DISCONNECT response ([MS-SMB2] 2.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeDisconnectResponse;

impl TreeDisconnectResponse {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| TreeDisconnectResponse)
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

    fn req() -> TreeConnectRequest {
        TreeConnectRequest {
            flags: TreeConnectFlags::empty(),
            path: "\\\\server\\Data".into(),
            extension: None,
        }
    }

    #[test]
    fn request_round_trips_and_names_share() {
        let msg = test_msg(Command::TREE_CONNECT, |v| req().encode(v));
        assert_eq!(&msg[68..70], &72u16.to_le_bytes());
        let d = TreeConnectRequest::decode(&msg).unwrap();
        assert_eq!(d, req());
        assert_eq!(d.share_name(), "Data");
        assert_prefixes_fail(&msg, msg.len(), |m| TreeConnectRequest::decode(m).is_ok());
    }

    #[test]
    fn request_with_extension_finds_path_after_extension() {
        let r = TreeConnectRequest {
            flags: TreeConnectFlags::EXTENSION_PRESENT,
            extension: Some(TreeConnectExtension {
                context_offset: 0,
                context_count: 0,
            }),
            ..req()
        };
        let msg = test_msg(Command::TREE_CONNECT, |v| r.encode(v));
        assert_eq!(&msg[68..70], &88u16.to_le_bytes());
        assert_eq!(TreeConnectRequest::decode(&msg).unwrap(), r);
        // A path that points into the extension is refused.
        let mut bad = msg.clone();
        bad[68..70].copy_from_slice(&72u16.to_le_bytes());
        assert_eq!(
            TreeConnectRequest::decode(&bad),
            Err(WireError::BadOffset("Path"))
        );
    }

    #[test]
    fn rejects_odd_length_path_empty_path_and_path_past_end() {
        let base = test_msg(Command::TREE_CONNECT, |v| req().encode(v));
        let mut m = base.clone();
        m[70] -= 1;
        assert_eq!(TreeConnectRequest::decode(&m), Err(WireError::BadName));
        let mut m = base.clone();
        m[70] = 0;
        m[71] = 0;
        assert!(TreeConnectRequest::decode(&m).is_err());
        let mut m = base;
        m[70] = 0xFE;
        assert_eq!(
            TreeConnectRequest::decode(&m),
            Err(WireError::BadOffset("Path"))
        );
    }

    #[test]
    fn response_and_disconnect_round_trip() {
        let resp = TreeConnectResponse {
            share_type: ShareType::DISK,
            share_flags: ShareFlags::ENCRYPT_DATA,
            capabilities: ShareCapabilities::empty(),
            maximal_access: AccessMask::FILE_ALL_ACCESS,
        };
        let msg = test_msg(Command::TREE_CONNECT, |v| resp.encode(v));
        assert_eq!(msg.len(), 64 + 16);
        assert_eq!(TreeConnectResponse::decode(&msg).unwrap(), resp);
        let msg = test_msg(Command::TREE_DISCONNECT, |v| {
            TreeDisconnectRequest.encode(v)
        });
        assert_eq!(
            TreeDisconnectRequest::decode(&msg),
            Ok(TreeDisconnectRequest)
        );
        assert_eq!(
            TreeDisconnectResponse::decode(&msg),
            Ok(TreeDisconnectResponse)
        );
    }
}
