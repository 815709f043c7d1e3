//! SMB2 IOCTL request/response envelopes ([MS-SMB2] 2.2.31, 2.2.32), plus
//! FSCTL_VALIDATE_NEGOTIATE_INFO (2.2.31.4, 2.2.32.6) and the
//! FSCTL_QUERY_NETWORK_INTERFACE_INFO response (2.2.32.5).

use crate::codec::{
    body_reader, expect_structure_size, header_start, slice_at, to_u16, to_u32, Reader, WriteExt,
    HEADER_LEN,
};
use crate::consts::{Capabilities, Dialect, Fsctl, IoctlFlags, SecurityMode};
use crate::{FileId, WireError};

const REQ_BUFFER_AT: usize = HEADER_LEN + 56;
/// Where the response buffer starts, counted from the SMB2 header.
pub const RESPONSE_BUFFER_OFFSET: usize = HEADER_LEN + 48;

/// SMB2 IOCTL request ([MS-SMB2] 2.2.31).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlRequest<'a> {
    pub ctl_code: Fsctl,
    pub file_id: FileId,
    pub input: &'a [u8],
    pub max_input_response: u32,
    /// Output buffer sent by the client (rare; kept raw).
    pub output: &'a [u8],
    pub max_output_response: u32,
    pub flags: IoctlFlags,
}

impl<'a> IoctlRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 57;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        r.skip(2)?;
        let ctl_code = Fsctl(r.u32()?);
        let file_id = FileId::read(&mut r)?;
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let max_input_response = r.u32()?;
        let out_off = r.u32()? as usize;
        let out_len = r.u32()? as usize;
        let max_output_response = r.u32()?;
        let flags = IoctlFlags(r.u32()?);
        let input = slice_at(msg, in_off, in_len, REQ_BUFFER_AT, "InputBuffer")?;
        let output = slice_at(msg, out_off, out_len, REQ_BUFFER_AT, "OutputBuffer")?;
        Ok(IoctlRequest {
            ctl_code,
            file_id,
            input,
            max_input_response,
            output,
            max_output_response,
            flags,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let hdr = header_start(out);
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.ctl_code.0);
        self.file_id.write(out);
        let offs_at = out.len();
        out.put_u32(0);
        out.put_u32(to_u32(self.input.len()));
        out.put_u32(self.max_input_response);
        out.put_u32(0);
        out.put_u32(to_u32(self.output.len()));
        out.put_u32(self.max_output_response);
        out.put_u32(self.flags.0);
        out.put_u32(0);
        if !self.input.is_empty() {
            out.patch_u32(offs_at, to_u32(out.len() - hdr));
            out.put_bytes(self.input);
        }
        if !self.output.is_empty() {
            out.pad_to(8, hdr);
            out.patch_u32(offs_at + 12, to_u32(out.len() - hdr));
            out.put_bytes(self.output);
        }
        if self.input.is_empty() && self.output.is_empty() {
            out.put_u8(0);
        }
    }
}

/// SMB2 IOCTL response ([MS-SMB2] 2.2.32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlResponse<'a> {
    pub ctl_code: Fsctl,
    pub file_id: FileId,
    pub input: &'a [u8],
    pub output: &'a [u8],
    pub flags: u32,
}

impl<'a> IoctlResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 49;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        r.skip(2)?;
        let ctl_code = Fsctl(r.u32()?);
        let file_id = FileId::read(&mut r)?;
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let out_off = r.u32()? as usize;
        let out_len = r.u32()? as usize;
        let flags = r.u32()?;
        let input = slice_at(msg, in_off, in_len, RESPONSE_BUFFER_OFFSET, "InputBuffer")?;
        let output = slice_at(
            msg,
            out_off,
            out_len,
            RESPONSE_BUFFER_OFFSET,
            "OutputBuffer",
        )?;
        Ok(IoctlResponse {
            ctl_code,
            file_id,
            input,
            output,
            flags,
        })
    }

    /// Append the body. A server echoes no input (InputCount 0) and puts the
    /// output at offset 112; offsets of empty buffers are still set to 112.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let hdr = header_start(out);
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.ctl_code.0);
        self.file_id.write(out);
        let offs_at = out.len();
        out.put_u32(to_u32(RESPONSE_BUFFER_OFFSET));
        out.put_u32(to_u32(self.input.len()));
        out.put_u32(to_u32(RESPONSE_BUFFER_OFFSET));
        out.put_u32(to_u32(self.output.len()));
        out.put_u32(self.flags);
        out.put_u32(0);
        out.put_bytes(self.input);
        if !self.input.is_empty() {
            out.pad_to(8, hdr);
            out.patch_u32(offs_at + 8, to_u32(out.len() - hdr));
        }
        out.put_bytes(self.output);
    }
}

/// FSCTL_VALIDATE_NEGOTIATE_INFO input ([MS-SMB2] 2.2.31.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateNegotiateInfoRequest {
    pub capabilities: Capabilities,
    pub guid: [u8; 16],
    pub security_mode: SecurityMode,
    pub dialects: Vec<Dialect>,
}

impl ValidateNegotiateInfoRequest {
    pub fn decode(input: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(input);
        let capabilities = Capabilities(r.u32()?);
        let guid = r.array::<16>()?;
        let security_mode = SecurityMode(r.u16()?);
        let count = usize::from(r.u16()?);
        if count == 0 || count * 2 > r.remaining() {
            return Err(WireError::Invalid("DialectCount"));
        }
        let dialects = (0..count)
            .map(|_| r.u16().map(Dialect))
            .collect::<Result<_, _>>()?;
        Ok(ValidateNegotiateInfoRequest {
            capabilities,
            guid,
            security_mode,
            dialects,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.capabilities.0);
        out.put_bytes(&self.guid);
        out.put_u16(self.security_mode.0);
        out.put_u16(to_u16(self.dialects.len()));
        self.dialects.iter().for_each(|d| out.put_u16(d.0));
    }
}

/// FSCTL_VALIDATE_NEGOTIATE_INFO output ([MS-SMB2] 2.2.32.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateNegotiateInfoResponse {
    pub capabilities: Capabilities,
    pub guid: [u8; 16],
    pub security_mode: SecurityMode,
    pub dialect: Dialect,
}

impl ValidateNegotiateInfoResponse {
    pub const LEN: usize = 24;

    pub fn decode(output: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(output);
        Ok(ValidateNegotiateInfoResponse {
            capabilities: Capabilities(r.u32()?),
            guid: r.array()?,
            security_mode: SecurityMode(r.u16()?),
            dialect: Dialect(r.u16()?),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.capabilities.0);
        out.put_bytes(&self.guid);
        out.put_u16(self.security_mode.0);
        out.put_u16(self.dialect.0);
    }
}

/// NETWORK_INTERFACE_INFO `Capability` bits ([MS-SMB2] 2.2.32.5).
pub const RSS_CAPABLE: u32 = 0x1;
/// See [`RSS_CAPABLE`].
pub const RDMA_CAPABLE: u32 = 0x2;

/// One NETWORK_INTERFACE_INFO entry ([MS-SMB2] 2.2.32.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkInterfaceInfo {
    pub if_index: u32,
    pub capability: u32,
    /// Bits per second.
    pub link_speed: u64,
    pub addr: std::net::SocketAddr,
}

const NII_LEN: usize = 152;
const AF_INET: u16 = 0x0002;
const AF_INET6: u16 = 0x0017;

impl NetworkInterfaceInfo {
    /// Append a chain of entries (Next = 152 for all but the last).
    pub fn encode_list(list: &[NetworkInterfaceInfo], out: &mut Vec<u8>) {
        for (i, n) in list.iter().enumerate() {
            let start = out.len();
            out.put_u32(if i + 1 < list.len() {
                NII_LEN as u32
            } else {
                0
            });
            out.put_u32(n.if_index);
            out.put_u32(n.capability);
            out.put_u32(0);
            out.put_u64(n.link_speed);
            match n.addr {
                std::net::SocketAddr::V4(a) => {
                    out.put_u16(AF_INET);
                    out.put_u16_be(a.port());
                    out.put_bytes(&a.ip().octets());
                }
                std::net::SocketAddr::V6(a) => {
                    out.put_u16(AF_INET6);
                    out.put_u16_be(a.port());
                    out.put_u32_be(a.flowinfo());
                    out.put_bytes(&a.ip().octets());
                    out.put_u32(a.scope_id());
                }
            }
            out.put_zeros(NII_LEN - (out.len() - start));
        }
    }

    /// Parse a chain of entries (client side).
    pub fn decode_list(buf: &[u8]) -> Result<Vec<NetworkInterfaceInfo>, WireError> {
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < buf.len() {
            let mut r = Reader::new(&buf[pos..]);
            let next = r.u32()? as usize;
            let if_index = r.u32()?;
            let capability = r.u32()?;
            r.skip(4)?;
            let link_speed = r.u64()?;
            let mut sa = r.sub(128)?;
            let family = sa.u16()?;
            let port = sa.u16_be()?;
            let addr = match family {
                AF_INET => {
                    let ip = std::net::Ipv4Addr::from(sa.array::<4>()?);
                    std::net::SocketAddr::from((ip, port))
                }
                AF_INET6 => {
                    let flow = sa.u32_be()?;
                    let ip = std::net::Ipv6Addr::from(sa.array::<16>()?);
                    let scope = sa.u32()?;
                    std::net::SocketAddr::V6(std::net::SocketAddrV6::new(ip, port, flow, scope))
                }
                _ => return Err(WireError::Invalid("SockAddr_Storage.Family")),
            };
            out.push(NetworkInterfaceInfo {
                if_index,
                capability,
                link_speed,
                addr,
            });
            if next == 0 {
                break;
            }
            if next < NII_LEN || !next.is_multiple_of(8) {
                return Err(WireError::BadOffset("NETWORK_INTERFACE_INFO.Next"));
            }
            pos += next;
        }
        Ok(out)
    }
}

/// FSCTL_SRV_REQUEST_RESUME_KEY output ([MS-SMB2] 2.2.32.3): the 24-byte key,
/// ContextLength 0 and the 4 zero bytes of context Windows sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrvRequestResumeKeyResponse {
    pub resume_key: [u8; 24],
}

impl SrvRequestResumeKeyResponse {
    pub const LEN: usize = 32;

    pub fn decode(output: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(output);
        let resume_key = r.array()?;
        let _context_len = r.u32()?;
        Ok(SrvRequestResumeKeyResponse { resume_key })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.resume_key);
        out.put_u32(0);
        out.put_zeros(4);
    }
}

/// One SRV_COPYCHUNK entry ([MS-SMB2] 2.2.31.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrvCopychunk {
    pub source_offset: u64,
    pub target_offset: u64,
    pub length: u32,
}

/// FSCTL_SRV_COPYCHUNK / FSCTL_SRV_COPYCHUNK_WRITE input ([MS-SMB2] 2.2.31.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvCopychunkCopy {
    pub source_key: [u8; 24],
    pub chunks: Vec<SrvCopychunk>,
}

impl SrvCopychunkCopy {
    /// SourceKey, ChunkCount and Reserved.
    pub const FIXED_LEN: usize = 32;
    pub const CHUNK_LEN: usize = 24;

    /// Decode at most `chunk_count_max` chunks: a larger ChunkCount is
    /// reported as `Err(Invalid("ChunkCount"))` before anything is allocated,
    /// and so is a count the buffer does not hold. Trailing bytes are ignored.
    pub fn decode(input: &[u8], chunk_count_max: usize) -> Result<Self, WireError> {
        let mut r = Reader::new(input);
        let source_key = r.array()?;
        let count = r.u32()? as usize;
        r.skip(4)?;
        if count > chunk_count_max || count.saturating_mul(Self::CHUNK_LEN) > r.remaining() {
            return Err(WireError::Invalid("ChunkCount"));
        }
        let mut chunks = Vec::with_capacity(count);
        for _ in 0..count {
            let source_offset = r.u64()?;
            let target_offset = r.u64()?;
            let length = r.u32()?;
            r.skip(4)?;
            chunks.push(SrvCopychunk {
                source_offset,
                target_offset,
                length,
            });
        }
        Ok(SrvCopychunkCopy { source_key, chunks })
    }

    /// The ChunkCount field alone (to tell "too many chunks" from a short buffer).
    pub fn chunk_count(input: &[u8]) -> Result<u32, WireError> {
        let mut r = Reader::new(input);
        r.skip(24)?;
        r.u32()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.source_key);
        out.put_u32(to_u32(self.chunks.len()));
        out.put_u32(0);
        for c in &self.chunks {
            out.put_u64(c.source_offset);
            out.put_u64(c.target_offset);
            out.put_u32(c.length);
            out.put_u32(0);
        }
    }
}

/// SRV_COPYCHUNK_RESPONSE ([MS-SMB2] 2.2.32.1). With STATUS_INVALID_PARAMETER
/// the three fields carry the server's limits instead of progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrvCopychunkResponse {
    pub chunks_written: u32,
    pub chunk_bytes_written: u32,
    pub total_bytes_written: u32,
}

impl SrvCopychunkResponse {
    pub const LEN: usize = 12;

    pub fn decode(output: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(output);
        Ok(SrvCopychunkResponse {
            chunks_written: r.u32()?,
            chunk_bytes_written: r.u32()?,
            total_bytes_written: r.u32()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.chunks_written);
        out.put_u32(self.chunk_bytes_written);
        out.put_u32(self.total_bytes_written);
    }
}

/// FILE_ALLOCATED_RANGE_BUFFER ([MS-FSCC] 2.3.32): the input of
/// FSCTL_QUERY_ALLOCATED_RANGES and each entry of its output. Both fields are
/// signed on the wire; a negative value is the caller's to reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileAllocatedRangeBuffer {
    pub file_offset: i64,
    pub length: i64,
}

impl FileAllocatedRangeBuffer {
    pub const LEN: usize = 16;

    /// Decode the first entry; trailing bytes are ignored (Windows does).
    pub fn decode(input: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(input);
        Ok(FileAllocatedRangeBuffer {
            file_offset: r.i64()?,
            length: r.i64()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_i64(self.file_offset);
        out.put_i64(self.length);
    }

    /// Decode a whole output buffer (client side); its length must be a multiple of 16.
    pub fn decode_list(output: &[u8]) -> Result<Vec<Self>, WireError> {
        if !output.len().is_multiple_of(Self::LEN) {
            return Err(WireError::Invalid("FILE_ALLOCATED_RANGE_BUFFER list"));
        }
        output.chunks_exact(Self::LEN).map(Self::decode).collect()
    }
}

/// FILE_ZERO_DATA_INFORMATION ([MS-FSCC] 2.3.71), the input of FSCTL_SET_ZERO_DATA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileZeroDataInformation {
    pub file_offset: i64,
    pub beyond_final_zero: i64,
}

impl FileZeroDataInformation {
    pub const LEN: usize = 16;

    pub fn decode(input: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(input);
        Ok(FileZeroDataInformation {
            file_offset: r.i64()?,
            beyond_final_zero: r.i64()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_i64(self.file_offset);
        out.put_i64(self.beyond_final_zero);
    }
}

/// COMPRESSION_STATE `CompressionState` values ([MS-FSCC] 2.3.67).
pub const COMPRESSION_FORMAT_NONE: u16 = 0x0000;
/// See [`COMPRESSION_FORMAT_NONE`].
pub const COMPRESSION_FORMAT_DEFAULT: u16 = 0x0001;
/// See [`COMPRESSION_FORMAT_NONE`].
pub const COMPRESSION_FORMAT_LZNT1: u16 = 0x0002;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_prefixes_fail, test_msg};
    use crate::consts::Command;

    #[test]
    fn request_round_trips_with_input_and_output() {
        let q = IoctlRequest {
            ctl_code: Fsctl::PIPE_TRANSCEIVE,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            input: b"\x05\x00\x0b\x03",
            max_input_response: 0,
            output: b"xyz",
            max_output_response: 4280,
            flags: IoctlFlags::IS_FSCTL,
        };
        let msg = test_msg(Command::IOCTL, |v| q.encode(v));
        assert_eq!(&msg[64 + 24..64 + 28], &120u32.to_le_bytes());
        assert_eq!(IoctlRequest::decode(&msg).unwrap(), q);
        assert_prefixes_fail(&msg, msg.len(), |m| IoctlRequest::decode(m).is_ok());
    }

    #[test]
    fn request_rejects_input_into_fixed_part_and_overflowing_length() {
        let q = IoctlRequest {
            ctl_code: Fsctl::VALIDATE_NEGOTIATE_INFO,
            file_id: FileId::ANY,
            input: &[0; 8],
            max_input_response: 0,
            output: &[],
            max_output_response: 24,
            flags: IoctlFlags::IS_FSCTL,
        };
        let msg = test_msg(Command::IOCTL, |v| q.encode(v));
        let mut bad = msg.clone();
        bad[64 + 24..64 + 28].copy_from_slice(&64u32.to_le_bytes());
        assert_eq!(
            IoctlRequest::decode(&bad),
            Err(WireError::BadOffset("InputBuffer"))
        );
        let mut bad = msg;
        bad[64 + 24..64 + 28].copy_from_slice(&u32::MAX.to_le_bytes());
        bad[64 + 28..64 + 32].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            IoctlRequest::decode(&bad),
            Err(WireError::BadOffset("InputBuffer"))
        );
    }

    #[test]
    fn response_round_trips() {
        let mut vni = Vec::new();
        ValidateNegotiateInfoResponse {
            capabilities: Capabilities::LARGE_MTU,
            guid: [1; 16],
            security_mode: SecurityMode::SIGNING_ENABLED,
            dialect: Dialect::SMB3_0_2,
        }
        .encode(&mut vni);
        let resp = IoctlResponse {
            ctl_code: Fsctl::VALIDATE_NEGOTIATE_INFO,
            file_id: FileId::ANY,
            input: &[],
            output: &vni,
            flags: 0,
        };
        let msg = test_msg(Command::IOCTL, |v| resp.encode(v));
        let d = IoctlResponse::decode(&msg).unwrap();
        assert_eq!(d, resp);
        assert_eq!(
            ValidateNegotiateInfoResponse::decode(d.output)
                .unwrap()
                .dialect,
            Dialect::SMB3_0_2
        );
    }

    #[test]
    fn validate_negotiate_request_round_trips_and_rejects_bad_counts() {
        let v = ValidateNegotiateInfoRequest {
            capabilities: Capabilities::DFS,
            guid: [2; 16],
            security_mode: SecurityMode::SIGNING_REQUIRED,
            dialects: vec![Dialect::SMB2_0_2, Dialect::SMB3_0],
        };
        let mut b = Vec::new();
        v.encode(&mut b);
        assert_eq!(ValidateNegotiateInfoRequest::decode(&b).unwrap(), v);
        let mut bad = b.clone();
        bad[22] = 9;
        assert!(ValidateNegotiateInfoRequest::decode(&bad).is_err());
        bad[22] = 0;
        assert!(ValidateNegotiateInfoRequest::decode(&bad).is_err());
    }

    #[test]
    fn network_interface_list_round_trips_ipv4_and_ipv6() {
        let list = vec![
            NetworkInterfaceInfo {
                if_index: 2,
                capability: RSS_CAPABLE,
                link_speed: 10_000_000_000,
                addr: "192.168.1.10:445".parse().unwrap(),
            },
            NetworkInterfaceInfo {
                if_index: 3,
                capability: 0,
                link_speed: 1_000_000_000,
                addr: "[fe80::1%4]:445".parse().unwrap(),
            },
        ];
        let mut b = Vec::new();
        NetworkInterfaceInfo::encode_list(&list, &mut b);
        assert_eq!(b.len(), 2 * 152);
        assert_eq!(&b[24..28], &[0x02, 0x00, 0x01, 0xBD]); // AF_INET, port 445 big-endian
        assert_eq!(&b[28..32], &[192, 168, 1, 10]);
        assert_eq!(NetworkInterfaceInfo::decode_list(&b).unwrap(), list);
        let mut bad = b.clone();
        bad[0] = 8; // Next pointing into the entry itself
        assert!(NetworkInterfaceInfo::decode_list(&bad).is_err());
        assert!(NetworkInterfaceInfo::decode_list(&b[..151]).is_err());
    }

    #[test]
    fn copychunk_copy_round_trips_and_ignores_trailing_bytes() {
        let c = SrvCopychunkCopy {
            source_key: [7; 24],
            chunks: vec![
                SrvCopychunk {
                    source_offset: 0,
                    target_offset: 4096,
                    length: 4096,
                },
                SrvCopychunk {
                    source_offset: u64::MAX,
                    target_offset: 1,
                    length: u32::MAX,
                },
            ],
        };
        let mut b = Vec::new();
        c.encode(&mut b);
        assert_eq!(b.len(), 32 + 2 * 24);
        assert_eq!(&b[24..28], &2u32.to_le_bytes());
        assert_eq!(SrvCopychunkCopy::decode(&b, 256).unwrap(), c);
        b.extend_from_slice(&[0xEE; 5]);
        assert_eq!(SrvCopychunkCopy::decode(&b, 256).unwrap(), c);
        assert_eq!(SrvCopychunkCopy::chunk_count(&b).unwrap(), 2);
    }

    #[test]
    fn copychunk_copy_rejects_counts_past_the_limit_or_the_buffer() {
        let c = SrvCopychunkCopy {
            source_key: [1; 24],
            chunks: vec![
                SrvCopychunk {
                    source_offset: 0,
                    target_offset: 0,
                    length: 1,
                };
                3
            ],
        };
        let mut b = Vec::new();
        c.encode(&mut b);
        assert_eq!(
            SrvCopychunkCopy::decode(&b, 2),
            Err(WireError::Invalid("ChunkCount"))
        );
        let mut huge = b.clone();
        huge[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            SrvCopychunkCopy::decode(&huge, usize::MAX),
            Err(WireError::Invalid("ChunkCount"))
        );
        for cut in 0..b.len() {
            assert!(
                SrvCopychunkCopy::decode(&b[..cut], 256).is_err(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn resume_key_and_copychunk_responses_round_trip_with_spec_sizes() {
        let k = SrvRequestResumeKeyResponse {
            resume_key: *b"0123456789abcdefghijklmn",
        };
        let mut b = Vec::new();
        k.encode(&mut b);
        assert_eq!(b.len(), SrvRequestResumeKeyResponse::LEN);
        assert_eq!(&b[24..32], &[0; 8]);
        assert_eq!(SrvRequestResumeKeyResponse::decode(&b).unwrap(), k);
        let r = SrvCopychunkResponse {
            chunks_written: 256,
            chunk_bytes_written: 1 << 20,
            total_bytes_written: 16 << 20,
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(b, [0, 1, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 1]);
        assert_eq!(SrvCopychunkResponse::decode(&b).unwrap(), r);
        assert!(SrvCopychunkResponse::decode(&b[..11]).is_err());
    }

    #[test]
    fn allocated_range_and_zero_data_buffers_round_trip() {
        let a = FileAllocatedRangeBuffer {
            file_offset: 512,
            length: -1,
        };
        let mut b = Vec::new();
        a.encode(&mut b);
        assert_eq!(&b[8..16], &[0xFF; 8]);
        assert_eq!(FileAllocatedRangeBuffer::decode(&b).unwrap(), a);
        let mut two = b.clone();
        a.encode(&mut two);
        assert_eq!(
            FileAllocatedRangeBuffer::decode_list(&two).unwrap(),
            vec![a, a]
        );
        assert!(FileAllocatedRangeBuffer::decode_list(&two[..17]).is_err());
        assert!(FileAllocatedRangeBuffer::decode(&b[..15]).is_err());
        let z = FileZeroDataInformation {
            file_offset: 4096,
            beyond_final_zero: 8192,
        };
        let mut b = Vec::new();
        z.encode(&mut b);
        assert_eq!(&b[..8], &4096i64.to_le_bytes());
        assert_eq!(FileZeroDataInformation::decode(&b).unwrap(), z);
        assert!(FileZeroDataInformation::decode(&b[..15]).is_err());
    }
}
