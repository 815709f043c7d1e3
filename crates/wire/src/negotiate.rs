//! SMB2 NEGOTIATE request and response ([MS-SMB2] 2.2.3, 2.2.4) with the
//! 3.1.1 negotiate contexts ([MS-SMB2] 2.2.3.1, 2.2.4.1).
//!
//! Each negotiate context starts on an 8-byte boundary counted from the start
//! of the SMB2 header; the context list offset itself must be 8-byte aligned.
//! Context types this crate does not know are kept raw.

use crate::codec::{header_start, slice_at, to_u16, to_u32, Reader, WriteExt, HEADER_LEN};
use crate::consts::{
    Capabilities, CipherId, CompressionAlgorithm, CompressionFlags, Dialect, HashAlgorithm,
    NegotiateContextType, RdmaTransformId, SecurityMode, SigningAlgorithm,
    TransportCapabilityFlags,
};
use crate::WireError;

/// Request StructureSize.
pub const REQUEST_STRUCTURE_SIZE: u16 = 36;
/// Response StructureSize.
pub const RESPONSE_STRUCTURE_SIZE: u16 = 65;
/// Offset (from the header) of the request's Dialects array.
const REQUEST_DIALECTS_AT: usize = HEADER_LEN + 36;
/// Offset (from the header) of the response's Buffer.
const RESPONSE_BUFFER_AT: usize = HEADER_LEN + 64;

/// One negotiate context ([MS-SMB2] 2.2.3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiateContext {
    /// SMB2_PREAUTH_INTEGRITY_CAPABILITIES (2.2.3.1.1).
    PreauthIntegrity {
        hash_algorithms: Vec<HashAlgorithm>,
        salt: Vec<u8>,
    },
    /// SMB2_ENCRYPTION_CAPABILITIES (2.2.3.1.2).
    Encryption { ciphers: Vec<CipherId> },
    /// SMB2_COMPRESSION_CAPABILITIES (2.2.3.1.3).
    Compression {
        flags: CompressionFlags,
        algorithms: Vec<CompressionAlgorithm>,
    },
    /// SMB2_NETNAME_NEGOTIATE_CONTEXT_ID (2.2.3.1.4): the raw UTF-16LE server name.
    NetName(Vec<u8>),
    /// SMB2_TRANSPORT_CAPABILITIES (2.2.3.1.5).
    Transport { flags: TransportCapabilityFlags },
    /// SMB2_RDMA_TRANSFORM_CAPABILITIES (2.2.3.1.6).
    RdmaTransform { transform_ids: Vec<RdmaTransformId> },
    /// SMB2_SIGNING_CAPABILITIES (2.2.3.1.7).
    Signing { algorithms: Vec<SigningAlgorithm> },
    /// Any other type, kept raw.
    Unknown {
        context_type: NegotiateContextType,
        data: Vec<u8>,
    },
}

fn read_u16_list<T: From<u16>>(r: &mut Reader<'_>, count: u16) -> Result<Vec<T>, WireError> {
    // The count is checked against the data before anything is allocated.
    if usize::from(count) * 2 > r.remaining() {
        return Err(WireError::Invalid("NegotiateContext count"));
    }
    (0..count).map(|_| r.u16().map(T::from)).collect()
}

impl NegotiateContext {
    /// The ContextType on the wire.
    pub fn context_type(&self) -> NegotiateContextType {
        match self {
            NegotiateContext::PreauthIntegrity { .. } => {
                NegotiateContextType::PREAUTH_INTEGRITY_CAPABILITIES
            }
            NegotiateContext::Encryption { .. } => NegotiateContextType::ENCRYPTION_CAPABILITIES,
            NegotiateContext::Compression { .. } => NegotiateContextType::COMPRESSION_CAPABILITIES,
            NegotiateContext::NetName(_) => NegotiateContextType::NETNAME_NEGOTIATE_CONTEXT_ID,
            NegotiateContext::Transport { .. } => NegotiateContextType::TRANSPORT_CAPABILITIES,
            NegotiateContext::RdmaTransform { .. } => {
                NegotiateContextType::RDMA_TRANSFORM_CAPABILITIES
            }
            NegotiateContext::Signing { .. } => NegotiateContextType::SIGNING_CAPABILITIES,
            NegotiateContext::Unknown { context_type, .. } => *context_type,
        }
    }

    /// Parse the Data of a context of type `ty`.
    pub fn decode_data(ty: NegotiateContextType, data: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(data);
        Ok(match ty {
            NegotiateContextType::PREAUTH_INTEGRITY_CAPABILITIES => {
                let count = r.u16()?;
                let salt_len = usize::from(r.u16()?);
                let hash_algorithms = read_u16_list(&mut r, count)?;
                let salt = r.bytes(salt_len)?.to_vec();
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms,
                    salt,
                }
            }
            NegotiateContextType::ENCRYPTION_CAPABILITIES => {
                let count = r.u16()?;
                NegotiateContext::Encryption {
                    ciphers: read_u16_list(&mut r, count)?,
                }
            }
            NegotiateContextType::COMPRESSION_CAPABILITIES => {
                let count = r.u16()?;
                r.skip(2)?;
                let flags = CompressionFlags(r.u32()?);
                NegotiateContext::Compression {
                    flags,
                    algorithms: read_u16_list(&mut r, count)?,
                }
            }
            NegotiateContextType::NETNAME_NEGOTIATE_CONTEXT_ID => {
                NegotiateContext::NetName(data.to_vec())
            }
            NegotiateContextType::TRANSPORT_CAPABILITIES => NegotiateContext::Transport {
                flags: TransportCapabilityFlags(r.u32()?),
            },
            NegotiateContextType::RDMA_TRANSFORM_CAPABILITIES => {
                let count = r.u16()?;
                r.skip(6)?;
                NegotiateContext::RdmaTransform {
                    transform_ids: read_u16_list(&mut r, count)?,
                }
            }
            NegotiateContextType::SIGNING_CAPABILITIES => {
                let count = r.u16()?;
                NegotiateContext::Signing {
                    algorithms: read_u16_list(&mut r, count)?,
                }
            }
            other => NegotiateContext::Unknown {
                context_type: other,
                data: data.to_vec(),
            },
        })
    }

    /// Append the context Data (not the 8-byte context header).
    pub fn encode_data(&self, out: &mut Vec<u8>) {
        match self {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms,
                salt,
            } => {
                out.put_u16(to_u16(hash_algorithms.len()));
                out.put_u16(to_u16(salt.len()));
                hash_algorithms.iter().for_each(|h| out.put_u16(h.0));
                out.put_bytes(salt);
            }
            NegotiateContext::Encryption { ciphers } => {
                out.put_u16(to_u16(ciphers.len()));
                ciphers.iter().for_each(|c| out.put_u16(c.0));
            }
            NegotiateContext::Compression { flags, algorithms } => {
                out.put_u16(to_u16(algorithms.len()));
                out.put_u16(0);
                out.put_u32(flags.0);
                algorithms.iter().for_each(|a| out.put_u16(a.0));
            }
            NegotiateContext::NetName(name) => out.put_bytes(name),
            NegotiateContext::Transport { flags } => out.put_u32(flags.0),
            NegotiateContext::RdmaTransform { transform_ids } => {
                out.put_u16(to_u16(transform_ids.len()));
                out.put_u16(0);
                out.put_u32(0);
                transform_ids.iter().for_each(|t| out.put_u16(t.0));
            }
            NegotiateContext::Signing { algorithms } => {
                out.put_u16(to_u16(algorithms.len()));
                algorithms.iter().for_each(|a| out.put_u16(a.0));
            }
            NegotiateContext::Unknown { data, .. } => out.put_bytes(data),
        }
    }
}

/// Decode `count` negotiate contexts starting at `offset` (from the header start).
pub fn decode_contexts(
    msg: &[u8],
    offset: usize,
    count: u16,
    min_offset: usize,
) -> Result<Vec<NegotiateContext>, WireError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if offset < min_offset || !offset.is_multiple_of(8) {
        return Err(WireError::BadOffset("NegotiateContextOffset"));
    }
    let list = msg
        .get(offset..)
        .ok_or(WireError::BadOffset("NegotiateContextOffset"))?;
    let mut r = Reader::new(list);
    let mut out = Vec::new();
    for i in 0..count {
        if i > 0 {
            r.align(8)?;
        }
        let ty = NegotiateContextType(r.u16()?);
        let len = usize::from(r.u16()?);
        r.skip(4)?;
        let data = r.bytes(len)?;
        out.push(NegotiateContext::decode_data(ty, data)?);
    }
    Ok(out)
}

/// Append contexts, each 8-byte aligned relative to `hdr_start`. Returns the
/// offset (from the header) of the first one.
pub fn encode_contexts(
    out: &mut Vec<u8>,
    hdr_start: usize,
    contexts: &[NegotiateContext],
) -> usize {
    out.pad_to(8, hdr_start);
    let first = out.len() - hdr_start;
    for (i, c) in contexts.iter().enumerate() {
        if i > 0 {
            out.pad_to(8, hdr_start);
        }
        out.put_u16(c.context_type().0);
        let len_at = out.len();
        out.put_u16(0);
        out.put_u32(0);
        let data_start = out.len();
        c.encode_data(out);
        let len = out.len() - data_start;
        out.patch_u16(len_at, to_u16(len));
    }
    first
}

/// SMB2 NEGOTIATE request ([MS-SMB2] 2.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateRequest {
    pub security_mode: SecurityMode,
    pub capabilities: Capabilities,
    pub client_guid: [u8; 16],
    /// ClientStartTime; only meaningful when 3.1.1 is not offered (then the
    /// same 8 bytes carry the context offset/count), and zero in practice.
    pub client_start_time: u64,
    pub dialects: Vec<Dialect>,
    /// Present only when `dialects` includes 3.1.1.
    pub contexts: Vec<NegotiateContext>,
}

impl NegotiateRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = crate::codec::body_reader(msg)?;
        crate::codec::expect_structure_size(&mut r, REQUEST_STRUCTURE_SIZE)?;
        let dialect_count = r.u16()?;
        if dialect_count == 0 {
            return Err(WireError::Invalid("DialectCount"));
        }
        let security_mode = SecurityMode(r.u16()?);
        r.skip(2)?;
        let capabilities = Capabilities(r.u32()?);
        let client_guid = r.array::<16>()?;
        let ctx_or_time = r.array::<8>()?;
        let dialects: Vec<Dialect> =
            read_u16_list(&mut r, dialect_count).map_err(|_| WireError::Invalid("DialectCount"))?;
        let dialects_end = REQUEST_DIALECTS_AT + usize::from(dialect_count) * 2;
        let (client_start_time, contexts) = if dialects.contains(&Dialect::SMB3_1_1) {
            let mut c = Reader::new(&ctx_or_time);
            let offset = c.u32()? as usize;
            let count = c.u16()?;
            (0, decode_contexts(msg, offset, count, dialects_end)?)
        } else {
            (u64::from_le_bytes(ctx_or_time), Vec::new())
        };
        Ok(NegotiateRequest {
            security_mode,
            capabilities,
            client_guid,
            client_start_time,
            dialects,
            contexts,
        })
    }

    /// Append the body; the header is at `out[out.len() - 64..]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let hdr = header_start(out);
        out.put_u16(REQUEST_STRUCTURE_SIZE);
        out.put_u16(to_u16(self.dialects.len()));
        out.put_u16(self.security_mode.0);
        out.put_u16(0);
        out.put_u32(self.capabilities.0);
        out.put_bytes(&self.client_guid);
        let ctx_at = out.len();
        out.put_u64(self.client_start_time);
        self.dialects.iter().for_each(|d| out.put_u16(d.0));
        if self.dialects.contains(&Dialect::SMB3_1_1) && !self.contexts.is_empty() {
            let off = encode_contexts(out, hdr, &self.contexts);
            out.patch_u32(ctx_at, to_u32(off));
            out.patch_u32(ctx_at + 4, u32::from(to_u16(self.contexts.len())));
        }
    }
}

/// SMB2 NEGOTIATE response ([MS-SMB2] 2.2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateResponse<'a> {
    pub security_mode: SecurityMode,
    pub dialect: Dialect,
    pub server_guid: [u8; 16],
    pub capabilities: Capabilities,
    pub max_transact_size: u32,
    pub max_read_size: u32,
    pub max_write_size: u32,
    /// FILETIME (100 ns since 1601).
    pub system_time: u64,
    pub server_start_time: u64,
    /// The GSS/SPNEGO initial token (may be empty).
    pub security_buffer: &'a [u8],
    /// Sent and parsed only when `dialect` is 3.1.1.
    pub contexts: Vec<NegotiateContext>,
}

impl<'a> NegotiateResponse<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = crate::codec::body_reader(msg)?;
        crate::codec::expect_structure_size(&mut r, RESPONSE_STRUCTURE_SIZE)?;
        let security_mode = SecurityMode(r.u16()?);
        let dialect = Dialect(r.u16()?);
        let ctx_count = r.u16()?;
        let server_guid = r.array::<16>()?;
        let capabilities = Capabilities(r.u32()?);
        let max_transact_size = r.u32()?;
        let max_read_size = r.u32()?;
        let max_write_size = r.u32()?;
        let system_time = r.u64()?;
        let server_start_time = r.u64()?;
        let sb_off = usize::from(r.u16()?);
        let sb_len = usize::from(r.u16()?);
        let ctx_off = r.u32()? as usize;
        let security_buffer = slice_at(msg, sb_off, sb_len, RESPONSE_BUFFER_AT, "SecurityBuffer")?;
        let contexts = if dialect == Dialect::SMB3_1_1 {
            decode_contexts(msg, ctx_off, ctx_count, RESPONSE_BUFFER_AT)?
        } else {
            Vec::new()
        };
        Ok(NegotiateResponse {
            security_mode,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            system_time,
            server_start_time,
            security_buffer,
            contexts,
        })
    }

    /// Append the body; the header is at `out[out.len() - 64..]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let hdr = header_start(out);
        let with_ctx = self.dialect == Dialect::SMB3_1_1 && !self.contexts.is_empty();
        out.put_u16(RESPONSE_STRUCTURE_SIZE);
        out.put_u16(self.security_mode.0);
        out.put_u16(self.dialect.0);
        out.put_u16(if with_ctx {
            to_u16(self.contexts.len())
        } else {
            0
        });
        out.put_bytes(&self.server_guid);
        out.put_u32(self.capabilities.0);
        out.put_u32(self.max_transact_size);
        out.put_u32(self.max_read_size);
        out.put_u32(self.max_write_size);
        out.put_u64(self.system_time);
        out.put_u64(self.server_start_time);
        out.put_u16(to_u16(RESPONSE_BUFFER_AT));
        out.put_u16(to_u16(self.security_buffer.len()));
        let ctx_at = out.len();
        out.put_u32(0);
        out.put_bytes(self.security_buffer);
        if with_ctx {
            let off = encode_contexts(out, hdr, &self.contexts);
            out.patch_u32(ctx_at, to_u32(off));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::Command;
    use crate::header::Header;

    fn with_header(cmd: Command, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut v = Vec::new();
        Header::request(cmd, 0).encode(&mut v);
        f(&mut v);
        v
    }

    fn all_contexts() -> Vec<NegotiateContext> {
        vec![
            NegotiateContext::PreauthIntegrity {
                hash_algorithms: vec![HashAlgorithm::SHA_512],
                salt: vec![0x5A; 32],
            },
            NegotiateContext::Encryption {
                ciphers: vec![CipherId::AES_128_GCM, CipherId::AES_128_CCM],
            },
            NegotiateContext::Compression {
                flags: CompressionFlags::empty(),
                algorithms: vec![CompressionAlgorithm::LZ77],
            },
            NegotiateContext::NetName(b"s\0r\0v\0".to_vec()),
            NegotiateContext::Transport {
                flags: TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
            },
            NegotiateContext::RdmaTransform {
                transform_ids: vec![RdmaTransformId::ENCRYPTION],
            },
            NegotiateContext::Signing {
                algorithms: vec![SigningAlgorithm::AES_GMAC, SigningAlgorithm::AES_CMAC],
            },
            NegotiateContext::Unknown {
                context_type: NegotiateContextType(0x0042),
                data: vec![1, 2, 3],
            },
        ]
    }

    fn request_311() -> NegotiateRequest {
        NegotiateRequest {
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: Capabilities::DFS | Capabilities::LEASING | Capabilities::ENCRYPTION,
            client_guid: [7; 16],
            client_start_time: 0,
            dialects: Dialect::ALL.to_vec(),
            contexts: all_contexts(),
        }
    }

    #[test]
    fn request_with_every_context_round_trips() {
        let req = request_311();
        let msg = with_header(Command::NEGOTIATE, |v| req.encode(v));
        // 5 dialects end at 110; contexts start at the next multiple of 8.
        assert_eq!(
            u32::from_le_bytes(msg[64 + 28..64 + 32].try_into().unwrap()),
            112
        );
        assert_eq!(NegotiateRequest::decode(&msg).unwrap(), req);
    }

    #[test]
    fn request_without_311_keeps_client_start_time_and_no_contexts() {
        let req = NegotiateRequest {
            dialects: vec![Dialect::SMB2_0_2, Dialect::SMB3_0],
            contexts: vec![],
            client_start_time: 0x1234,
            ..request_311()
        };
        let msg = with_header(Command::NEGOTIATE, |v| req.encode(v));
        assert_eq!(msg.len(), 64 + 36 + 4);
        assert_eq!(NegotiateRequest::decode(&msg).unwrap(), req);
    }

    #[test]
    fn response_round_trips_with_security_blob_and_contexts() {
        let blob = [0x60u8, 0x28, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
        let resp = NegotiateResponse {
            security_mode: SecurityMode::SIGNING_ENABLED,
            dialect: Dialect::SMB3_1_1,
            server_guid: [9; 16],
            capabilities: Capabilities::LARGE_MTU,
            max_transact_size: 8 << 20,
            max_read_size: 8 << 20,
            max_write_size: 8 << 20,
            system_time: 133_000_000_000_000_000,
            server_start_time: 0,
            security_buffer: &blob,
            contexts: all_contexts()[..2].to_vec(),
        };
        let msg = with_header(Command::NEGOTIATE, |v| resp.encode(v));
        let ctx_off = u32::from_le_bytes(msg[124..128].try_into().unwrap()) as usize;
        assert_eq!(ctx_off, 144); // 128 + 10 -> padded to 144
        assert_eq!(NegotiateResponse::decode(&msg).unwrap(), resp);

        let old = NegotiateResponse {
            dialect: Dialect::WILDCARD,
            contexts: vec![],
            ..resp
        };
        let msg = with_header(Command::NEGOTIATE, |v| old.encode(v));
        assert_eq!(NegotiateResponse::decode(&msg).unwrap(), old);
    }

    #[test]
    fn rejects_wrong_structure_size_and_zero_dialects() {
        let mut msg = with_header(Command::NEGOTIATE, |v| request_311().encode(v));
        msg[64] = 37;
        assert_eq!(
            NegotiateRequest::decode(&msg),
            Err(WireError::Invalid("StructureSize"))
        );
        msg[64] = 36;
        msg[66] = 0;
        assert_eq!(
            NegotiateRequest::decode(&msg),
            Err(WireError::Invalid("DialectCount"))
        );
    }

    #[test]
    fn rejects_dialect_count_past_end() {
        let mut msg = with_header(Command::NEGOTIATE, |v| request_311().encode(v));
        msg[66] = 0xFF;
        msg[67] = 0xFF;
        assert!(NegotiateRequest::decode(&msg).is_err());
    }

    #[test]
    fn rejects_context_offset_misaligned_into_dialects_or_past_end() {
        let base = with_header(Command::NEGOTIATE, |v| request_311().encode(v));
        for off in [113u32, 104, 64, 100_000, u32::MAX] {
            let mut msg = base.clone();
            msg[92..96].copy_from_slice(&off.to_le_bytes());
            assert!(NegotiateRequest::decode(&msg).is_err(), "offset {off}");
        }
    }

    #[test]
    fn rejects_context_data_length_past_end_and_counts_larger_than_data() {
        let base = with_header(Command::NEGOTIATE, |v| request_311().encode(v));
        let mut msg = base.clone();
        msg[112 + 2] = 0xFF; // DataLength of the first context
        msg[112 + 3] = 0xFF;
        assert!(NegotiateRequest::decode(&msg).is_err());
        let mut msg = base.clone();
        msg[112 + 8] = 0xFF; // HashAlgorithmCount
        assert!(NegotiateRequest::decode(&msg).is_err());
        let mut msg = base;
        msg[96] = 200; // NegotiateContextCount beyond what is present
        assert!(NegotiateRequest::decode(&msg).is_err());
    }

    #[test]
    fn truncated_requests_fail_cleanly_at_every_length() {
        let msg = with_header(Command::NEGOTIATE, |v| request_311().encode(v));
        for n in 0..msg.len() {
            assert!(NegotiateRequest::decode(&msg[..n]).is_err(), "len {n}");
        }
    }

    /// A 3.1.1 NEGOTIATE request laid out as real clients send it: eight
    /// dialects (including the pre-release 0x0222, 0x0224 and 0x0310), the
    /// context list at offset 0x78, a preauth context with a 32-byte salt, two
    /// bytes of padding, then an encryption context offering CCM and GCM.
    #[test]
    fn decodes_a_client_style_311_negotiate_request() {
        let hex = concat!(
            "fe534d4240000000000000000000000000000000000000000100000000000000",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "24000800010000007f000000",
            "00112233445566778899aabbccddeeff",
            "7800000002000000",
            "02021002220224020003020310031103",
            "00000000",
            "0100260000000000010020000100",
            "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf",
            "0000",
            "02000600000000000200010002000000",
        );
        let msg: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let req = NegotiateRequest::decode(&msg).unwrap();
        assert_eq!(req.dialects.len(), 8);
        assert_eq!(req.dialects[2], Dialect(0x0222));
        assert_eq!(req.dialects[7], Dialect::SMB3_1_1);
        assert_eq!(req.capabilities, Capabilities(0x7f));
        assert_eq!(req.client_guid[15], 0xff);
        assert_eq!(req.contexts.len(), 2);
        match &req.contexts[0] {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms,
                salt,
            } => {
                assert_eq!(hash_algorithms, &[HashAlgorithm::SHA_512]);
                assert_eq!(salt.len(), 32);
                assert_eq!(salt[0], 0xa0);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            req.contexts[1],
            NegotiateContext::Encryption {
                ciphers: vec![CipherId::AES_128_CCM, CipherId::AES_128_GCM]
            }
        );
        // Re-encoding reproduces the same bytes (up to the optional trailing padding).
        let mut again = Vec::new();
        crate::header::Header::decode(&msg)
            .unwrap()
            .encode(&mut again);
        req.encode(&mut again);
        assert_eq!(again, msg[..again.len()]);
    }
}
