//! SMB2 CREATE ([MS-SMB2] 2.2.13, 2.2.14), the create-context chain
//! (2.2.13.2, 2.2.14.2) and CLOSE (2.2.15, 2.2.16).
//!
//! Create contexts: each starts 8-byte aligned; `Next` is the offset from this
//! context to the next (0 for the last); `NameOffset`/`DataOffset` count from
//! the start of the context. Decoding checks every one of these against the
//! context's own extent, so a chain can neither loop (Next only moves forward)
//! nor reach outside the CreateContexts buffer.

use crate::codec::{
    body_reader, expect_structure_size, header_start, slice_at, to_u16, to_u32, Reader, WriteExt,
    HEADER_LEN,
};
use crate::consts::{
    AccessMask, CloseFlags, CreateAction, CreateDisposition, CreateOptions, FileAttributes,
    ImpersonationLevel, LeaseFlags, LeaseState, OplockLevel, ShareAccess,
};
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::{NtStatus, WireError};

/// SMB2_FILEID ([MS-SMB2] 2.2.14.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl FileId {
    /// All ones: "no file" (IOCTLs on the session, related compound requests).
    pub const ANY: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(FileId {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u64(self.persistent);
        out.put_u64(self.volatile);
    }

    pub fn is_any(&self) -> bool {
        *self == FileId::ANY
    }
}

/// Create context names ([MS-SMB2] 2.2.13.2), as the bytes on the wire.
pub mod tag {
    pub const EA_BUFFER: &[u8] = b"ExtA";
    pub const SD_BUFFER: &[u8] = b"SecD";
    pub const DURABLE_HANDLE_REQUEST: &[u8] = b"DHnQ";
    pub const DURABLE_HANDLE_RECONNECT: &[u8] = b"DHnC";
    pub const ALLOCATION_SIZE: &[u8] = b"AlSi";
    pub const QUERY_MAXIMAL_ACCESS: &[u8] = b"MxAc";
    pub const TIMEWARP_TOKEN: &[u8] = b"TWrp";
    pub const QUERY_ON_DISK_ID: &[u8] = b"QFid";
    /// Lease request, v1 (32 bytes of data) or v2 (52 bytes).
    pub const REQUEST_LEASE: &[u8] = b"RqLs";
    pub const DURABLE_HANDLE_REQUEST_V2: &[u8] = b"DH2Q";
    pub const DURABLE_HANDLE_RECONNECT_V2: &[u8] = b"DH2C";
    pub const APP_INSTANCE_ID: &[u8] = &[
        0x45, 0xBC, 0xA6, 0x6A, 0xEF, 0xA7, 0xF7, 0x4A, 0x90, 0x08, 0xFA, 0x46, 0x2E, 0x14, 0x4D,
        0x74,
    ];
    pub const APP_INSTANCE_VERSION: &[u8] = &[
        0xB9, 0x82, 0xD0, 0xB7, 0x3B, 0x56, 0x07, 0x4F, 0xA0, 0x7B, 0x52, 0x4A, 0x81, 0x16, 0xA0,
        0x10,
    ];
    pub const SVHDX_OPEN_DEVICE_CONTEXT: &[u8] = &[
        0x9C, 0xCB, 0xCF, 0x9E, 0x04, 0xC1, 0xE6, 0x43, 0x98, 0x0E, 0x15, 0x8D, 0xA1, 0xF6, 0xEC,
        0x83,
    ];
    /// SMB3 POSIX extensions context.
    pub const POSIX: &[u8] = &[
        0x93, 0xAD, 0x25, 0x50, 0x9C, 0xB4, 0x11, 0xE7, 0xB4, 0x23, 0x83, 0xDE, 0x96, 0x8B, 0xCD,
        0x7C,
    ];
    /// Apple's macOS extensions context.
    pub const AAPL: &[u8] = b"AAPL";
}

/// A create context whose name this crate recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextTag {
    EaBuffer,
    SdBuffer,
    DurableHandleRequest,
    DurableHandleReconnect,
    AllocationSize,
    QueryMaximalAccess,
    TimewarpToken,
    QueryOnDiskId,
    RequestLease,
    DurableHandleRequestV2,
    DurableHandleReconnectV2,
    AppInstanceId,
    AppInstanceVersion,
    SvhdxOpenDevice,
    Posix,
    Aapl,
    Unknown,
}

impl ContextTag {
    pub fn of(name: &[u8]) -> ContextTag {
        match name {
            n if n == tag::EA_BUFFER => ContextTag::EaBuffer,
            n if n == tag::SD_BUFFER => ContextTag::SdBuffer,
            n if n == tag::DURABLE_HANDLE_REQUEST => ContextTag::DurableHandleRequest,
            n if n == tag::DURABLE_HANDLE_RECONNECT => ContextTag::DurableHandleReconnect,
            n if n == tag::ALLOCATION_SIZE => ContextTag::AllocationSize,
            n if n == tag::QUERY_MAXIMAL_ACCESS => ContextTag::QueryMaximalAccess,
            n if n == tag::TIMEWARP_TOKEN => ContextTag::TimewarpToken,
            n if n == tag::QUERY_ON_DISK_ID => ContextTag::QueryOnDiskId,
            n if n == tag::REQUEST_LEASE => ContextTag::RequestLease,
            n if n == tag::DURABLE_HANDLE_REQUEST_V2 => ContextTag::DurableHandleRequestV2,
            n if n == tag::DURABLE_HANDLE_RECONNECT_V2 => ContextTag::DurableHandleReconnectV2,
            n if n == tag::APP_INSTANCE_ID => ContextTag::AppInstanceId,
            n if n == tag::APP_INSTANCE_VERSION => ContextTag::AppInstanceVersion,
            n if n == tag::SVHDX_OPEN_DEVICE_CONTEXT => ContextTag::SvhdxOpenDevice,
            n if n == tag::POSIX => ContextTag::Posix,
            n if n == tag::AAPL => ContextTag::Aapl,
            _ => ContextTag::Unknown,
        }
    }
}

/// One create context: its name and data, borrowed from the message (or owned when built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateContext<'a> {
    pub name: &'a [u8],
    pub data: std::borrow::Cow<'a, [u8]>,
}

impl<'a> CreateContext<'a> {
    /// A context with owned data (for encoding).
    pub fn new(name: &'a [u8], data: Vec<u8>) -> Self {
        CreateContext {
            name,
            data: std::borrow::Cow::Owned(data),
        }
    }

    pub fn tag(&self) -> ContextTag {
        ContextTag::of(self.name)
    }
}

/// Parse a CreateContexts buffer (already sliced out of the message).
pub fn decode_contexts(buf: &[u8]) -> Result<Vec<CreateContext<'_>>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let mut r = Reader::new(rest);
        let next = r.u32()? as usize;
        let name_off = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        r.skip(2)?;
        let data_off = usize::from(r.u16()?);
        let data_len = r.u32()? as usize;
        let extent = if next == 0 {
            rest.len()
        } else {
            if next < 16 || !next.is_multiple_of(8) || next >= rest.len() {
                return Err(WireError::BadOffset("CreateContext.Next"));
            }
            next
        };
        let ctx = &rest[..extent];
        if name_len == 0 {
            return Err(WireError::Invalid("CreateContext.NameLength"));
        }
        let name = slice_at(ctx, name_off, name_len, 16, "CreateContext.Name")?;
        let data = slice_at(ctx, data_off, data_len, 16, "CreateContext.Data")?;
        out.push(CreateContext {
            name,
            data: std::borrow::Cow::Borrowed(data),
        });
        if next == 0 {
            break;
        }
        pos += next;
    }
    Ok(out)
}

/// Append a create-context chain, first context aligned to 8 relative to
/// `hdr_start`. Returns (offset from the header, length), or (0, 0) when empty.
pub fn encode_contexts(
    out: &mut Vec<u8>,
    hdr_start: usize,
    contexts: &[CreateContext<'_>],
) -> (usize, usize) {
    if contexts.is_empty() {
        return (0, 0);
    }
    out.pad_to(8, hdr_start);
    let first = out.len();
    let mut prev_next_at: Option<(usize, usize)> = None;
    for c in contexts {
        out.pad_to(8, hdr_start);
        let start = out.len();
        if let Some((at, prev_start)) = prev_next_at {
            out.patch_u32(at, to_u32(start - prev_start));
        }
        let name_off = 16usize;
        let data_off = (name_off + c.name.len()).next_multiple_of(8);
        out.put_u32(0);
        out.put_u16(to_u16(name_off));
        out.put_u16(to_u16(c.name.len()));
        out.put_u16(0);
        out.put_u16(if c.data.is_empty() {
            0
        } else {
            to_u16(data_off)
        });
        out.put_u32(to_u32(c.data.len()));
        out.put_bytes(c.name);
        if !c.data.is_empty() {
            out.pad_to(8, start);
            out.put_bytes(&c.data);
        }
        prev_next_at = Some((start, start));
    }
    (first - hdr_start, out.len() - first)
}

/// SMB2 CREATE request ([MS-SMB2] 2.2.13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest<'a> {
    pub security_flags: u8,
    pub requested_oplock_level: OplockLevel,
    pub impersonation_level: ImpersonationLevel,
    pub smb_create_flags: u64,
    pub desired_access: AccessMask,
    pub file_attributes: FileAttributes,
    pub share_access: ShareAccess,
    pub create_disposition: CreateDisposition,
    pub create_options: CreateOptions,
    /// The path relative to the share root (empty = the root), as sent.
    pub name: String,
    pub contexts: Vec<CreateContext<'a>>,
}

const CREATE_REQ_BUFFER_AT: usize = HEADER_LEN + 56;
const CREATE_RESP_BUFFER_AT: usize = HEADER_LEN + 88;

impl<'a> CreateRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 57;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let security_flags = r.u8()?;
        let requested_oplock_level = OplockLevel(r.u8()?);
        let impersonation_level = ImpersonationLevel(r.u32()?);
        let smb_create_flags = r.u64()?;
        r.skip(8)?;
        let desired_access = AccessMask(r.u32()?);
        let file_attributes = FileAttributes(r.u32()?);
        let share_access = ShareAccess(r.u32()?);
        let create_disposition = CreateDisposition(r.u32()?);
        let create_options = CreateOptions(r.u32()?);
        let name_off = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let name = decode_utf16le(slice_at(
            msg,
            name_off,
            name_len,
            CREATE_REQ_BUFFER_AT,
            "Name",
        )?)?;
        if ctx_len != 0 && !ctx_off.is_multiple_of(8) {
            return Err(WireError::BadOffset("CreateContextsOffset"));
        }
        let ctx = slice_at(
            msg,
            ctx_off,
            ctx_len,
            CREATE_REQ_BUFFER_AT,
            "CreateContexts",
        )?;
        Ok(CreateRequest {
            security_flags,
            requested_oplock_level,
            impersonation_level,
            smb_create_flags,
            desired_access,
            file_attributes,
            share_access,
            create_disposition,
            create_options,
            name,
            contexts: decode_contexts(ctx)?,
        })
    }

    /// Append the body; the header is at `out[out.len() - 64..]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let hdr = header_start(out);
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.security_flags);
        out.put_u8(self.requested_oplock_level.0);
        out.put_u32(self.impersonation_level.0);
        out.put_u64(self.smb_create_flags);
        out.put_u64(0);
        out.put_u32(self.desired_access.0);
        out.put_u32(self.file_attributes.0);
        out.put_u32(self.share_access.0);
        out.put_u32(self.create_disposition.0);
        out.put_u32(self.create_options.0);
        out.put_u16(to_u16(CREATE_REQ_BUFFER_AT));
        out.put_u16(to_u16(utf16_len(&self.name)));
        let ctx_at = out.len();
        out.put_u32(0);
        out.put_u32(0);
        encode_utf16le(&self.name, out);
        if self.name.is_empty() && self.contexts.is_empty() {
            out.put_u8(0); // the Buffer is at least one byte
        }
        let (off, len) = encode_contexts(out, hdr, &self.contexts);
        out.patch_u32(ctx_at, to_u32(off));
        out.patch_u32(ctx_at + 4, to_u32(len));
    }

    /// The first context with this tag.
    pub fn context(&self, t: ContextTag) -> Option<&CreateContext<'a>> {
        self.contexts.iter().find(|c| c.tag() == t)
    }
}

/// CREATE response `Flags` ([MS-SMB2] 2.2.14).
pub const CREATE_FLAG_REPARSEPOINT: u8 = 0x01;

/// SMB2 CREATE response ([MS-SMB2] 2.2.14). Times are FILETIME values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateResponse<'a> {
    pub oplock_level: OplockLevel,
    pub flags: u8,
    pub create_action: CreateAction,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: FileAttributes,
    pub file_id: FileId,
    pub contexts: Vec<CreateContext<'a>>,
}

impl<'a> CreateResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 89;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let oplock_level = OplockLevel(r.u8()?);
        let flags = r.u8()?;
        let create_action = CreateAction(r.u32()?);
        let creation_time = r.u64()?;
        let last_access_time = r.u64()?;
        let last_write_time = r.u64()?;
        let change_time = r.u64()?;
        let allocation_size = r.u64()?;
        let end_of_file = r.u64()?;
        let file_attributes = FileAttributes(r.u32()?);
        r.skip(4)?;
        let file_id = FileId::read(&mut r)?;
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let ctx = slice_at(
            msg,
            ctx_off,
            ctx_len,
            CREATE_RESP_BUFFER_AT,
            "CreateContexts",
        )?;
        Ok(CreateResponse {
            oplock_level,
            flags,
            create_action,
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            allocation_size,
            end_of_file,
            file_attributes,
            file_id,
            contexts: decode_contexts(ctx)?,
        })
    }

    /// At least the length [`Self::encode`] appends: the fixed part, and each context's own
    /// fixed part, name and data with the padding before each.
    pub fn body_len_max(&self) -> usize {
        let contexts: usize = self
            .contexts
            .iter()
            .map(|c| 8 + 16 + 8 + c.name.len() + 8 + c.data.len())
            .sum();
        CREATE_RESP_BUFFER_AT - HEADER_LEN + contexts
    }

    /// Append the body; the header is at `out[out.len() - 64..]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let hdr = header_start(out);
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.oplock_level.0);
        out.put_u8(self.flags);
        out.put_u32(self.create_action.0);
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes.0);
        out.put_u32(0);
        self.file_id.write(out);
        let ctx_at = out.len();
        out.put_u32(0);
        out.put_u32(0);
        let (off, len) = encode_contexts(out, hdr, &self.contexts);
        out.patch_u32(ctx_at, to_u32(off));
        out.patch_u32(ctx_at + 4, to_u32(len));
    }
}

/// Data of an MxAc response context ([MS-SMB2] 2.2.14.2.5).
pub fn maximal_access_response(status: NtStatus, access: AccessMask) -> Vec<u8> {
    let mut v = Vec::with_capacity(8);
    v.put_u32(status.0);
    v.put_u32(access.0);
    v
}

/// Parse an MxAc response context's data (client side).
pub fn decode_maximal_access_response(data: &[u8]) -> Result<(NtStatus, AccessMask), WireError> {
    let mut r = Reader::new(data);
    Ok((NtStatus(r.u32()?), AccessMask(r.u32()?)))
}

/// The optional timestamp of an MxAc request context ([MS-SMB2] 2.2.13.2.5).
pub fn decode_maximal_access_request(data: &[u8]) -> Result<Option<u64>, WireError> {
    if data.is_empty() {
        return Ok(None);
    }
    Reader::new(data).u64().map(Some)
}

/// Data of a QFid response context ([MS-SMB2] 2.2.14.2.9): DiskFileId,
/// VolumeId, 16 reserved bytes.
pub fn query_on_disk_id_response(disk_file_id: u64, volume_id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(32);
    v.put_u64(disk_file_id);
    v.put_u64(volume_id);
    v.put_zeros(16);
    v
}

/// A lease request or response context body ([MS-SMB2] 2.2.13.2.8, 2.2.13.2.10,
/// 2.2.14.2.10, 2.2.14.2.11). Version 2 has a parent key and an epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub key: [u8; 16],
    pub state: LeaseState,
    pub flags: LeaseFlags,
    pub duration: u64,
    /// `Some` for a version-2 lease.
    pub v2: Option<LeaseV2>,
}

/// The version-2 fields of a lease context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseV2 {
    pub parent_key: [u8; 16],
    pub epoch: u16,
}

impl Lease {
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(data);
        let key = r.array::<16>()?;
        let state = LeaseState(r.u32()?);
        let flags = LeaseFlags(r.u32()?);
        let duration = r.u64()?;
        let v2 = if data.len() >= 52 {
            let parent_key = r.array::<16>()?;
            let epoch = r.u16()?;
            Some(LeaseV2 { parent_key, epoch })
        } else if data.len() == 32 {
            None
        } else {
            return Err(WireError::Invalid("RqLs DataLength"));
        };
        Ok(Lease {
            key,
            state,
            flags,
            duration,
            v2,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(52);
        v.put_bytes(&self.key);
        v.put_u32(self.state.0);
        v.put_u32(self.flags.0);
        v.put_u64(self.duration);
        if let Some(x) = self.v2 {
            v.put_bytes(&x.parent_key);
            v.put_u16(x.epoch);
            v.put_u16(0);
        }
        v
    }
}

/// DH2Q request context data ([MS-SMB2] 2.2.13.2.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableHandleRequestV2 {
    pub timeout: u32,
    /// 0x2 = SMB2_DHANDLE_FLAG_PERSISTENT.
    pub flags: u32,
    pub create_guid: [u8; 16],
}

impl DurableHandleRequestV2 {
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(data);
        let timeout = r.u32()?;
        let flags = r.u32()?;
        r.skip(8)?;
        Ok(DurableHandleRequestV2 {
            timeout,
            flags,
            create_guid: r.array()?,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32);
        v.put_u32(self.timeout);
        v.put_u32(self.flags);
        v.put_u64(0);
        v.put_bytes(&self.create_guid);
        v
    }

    /// The DH2Q response data ([MS-SMB2] 2.2.14.2.12): Timeout, Flags.
    pub fn response(timeout: u32, flags: u32) -> Vec<u8> {
        let mut v = Vec::with_capacity(8);
        v.put_u32(timeout);
        v.put_u32(flags);
        v
    }
}

/// DH2C request context data ([MS-SMB2] 2.2.13.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableHandleReconnectV2 {
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    pub flags: u32,
}

impl DurableHandleReconnectV2 {
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(data);
        Ok(DurableHandleReconnectV2 {
            file_id: FileId::read(&mut r)?,
            create_guid: r.array()?,
            flags: r.u32()?,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(36);
        self.file_id.write(&mut v);
        v.put_bytes(&self.create_guid);
        v.put_u32(self.flags);
        v
    }
}

/// DHnQ request context data: 16 reserved bytes ([MS-SMB2] 2.2.13.2.3).
pub fn encode_durable_request() -> Vec<u8> {
    vec![0; 16]
}

/// DHnC request context data for `file_id` ([MS-SMB2] 2.2.13.2.4).
pub fn encode_durable_reconnect(file_id: FileId) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    file_id.write(&mut v);
    v
}

/// DHnC request context data: the FileId to reconnect ([MS-SMB2] 2.2.13.2.4).
pub fn decode_durable_reconnect(data: &[u8]) -> Result<FileId, WireError> {
    FileId::read(&mut Reader::new(data))
}

/// AlSi / TWrp request context data: one u64 ([MS-SMB2] 2.2.13.2.6, 2.2.13.2.7).
pub fn decode_u64_context(data: &[u8]) -> Result<u64, WireError> {
    Reader::new(data).u64()
}

/// SMB2 CLOSE request ([MS-SMB2] 2.2.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseRequest {
    pub flags: CloseFlags,
    pub file_id: FileId,
}

impl CloseRequest {
    pub const STRUCTURE_SIZE: u16 = 24;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let flags = CloseFlags(r.u16()?);
        r.skip(4)?;
        Ok(CloseRequest {
            flags,
            file_id: FileId::read(&mut r)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags.0);
        out.put_u32(0);
        self.file_id.write(out);
    }
}

/// SMB2 CLOSE response ([MS-SMB2] 2.2.16). The attributes are zero unless the
/// request asked for POSTQUERY_ATTRIB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CloseResponse {
    pub flags: CloseFlags,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: FileAttributes,
}

impl CloseResponse {
    pub const STRUCTURE_SIZE: u16 = 60;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let flags = CloseFlags(r.u16()?);
        r.skip(4)?;
        Ok(CloseResponse {
            flags,
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: FileAttributes(r.u32()?),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags.0);
        out.put_u32(0);
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_prefixes_fail, test_msg};
    use crate::consts::Command;

    fn lease() -> Lease {
        Lease {
            key: [3; 16],
            state: LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING,
            flags: LeaseFlags::empty(),
            duration: 0,
            v2: Some(LeaseV2 {
                parent_key: [4; 16],
                epoch: 1,
            }),
        }
    }

    fn req() -> CreateRequest<'static> {
        CreateRequest {
            security_flags: 0,
            requested_oplock_level: OplockLevel::LEASE,
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            smb_create_flags: 0,
            desired_access: AccessMask::GENERIC_READ | AccessMask::SYNCHRONIZE,
            file_attributes: FileAttributes::NORMAL,
            share_access: ShareAccess::READ | ShareAccess::WRITE,
            create_disposition: CreateDisposition::OPEN_IF,
            create_options: CreateOptions::NON_DIRECTORY_FILE,
            name: "dir\\file.txt".into(),
            contexts: vec![
                CreateContext::new(tag::QUERY_MAXIMAL_ACCESS, vec![]),
                CreateContext::new(tag::REQUEST_LEASE, lease().encode()),
                CreateContext::new(tag::QUERY_ON_DISK_ID, vec![]),
                CreateContext::new(tag::APP_INSTANCE_ID, vec![0x14, 0, 0, 0]),
            ],
        }
    }

    #[test]
    fn request_round_trips_with_context_chain() {
        let r = req();
        let msg = test_msg(Command::CREATE, |v| r.encode(v));
        let d = CreateRequest::decode(&msg).unwrap();
        assert_eq!(d, r);
        assert_eq!(d.contexts[0].tag(), ContextTag::QueryMaximalAccess);
        assert_eq!(d.contexts[3].tag(), ContextTag::AppInstanceId);
        let l = d.context(ContextTag::RequestLease).unwrap();
        assert_eq!(Lease::decode(&l.data).unwrap(), lease());
        // Offsets are 8-aligned from the header.
        let off = u32::from_le_bytes(msg[64 + 48..64 + 52].try_into().unwrap());
        assert_eq!(off % 8, 0);
        assert_prefixes_fail(&msg, msg.len(), |m| CreateRequest::decode(m).is_ok());
    }

    #[test]
    fn request_for_share_root_has_empty_name() {
        let r = CreateRequest {
            name: String::new(),
            contexts: vec![],
            ..req()
        };
        let msg = test_msg(Command::CREATE, |v| r.encode(v));
        assert_eq!(msg.len(), 64 + 57);
        assert_eq!(CreateRequest::decode(&msg).unwrap(), r);
    }

    fn ctx_bytes(next: u32, name_off: u16, name_len: u16, data_off: u16, data_len: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.put_u32(next);
        v.put_u16(name_off);
        v.put_u16(name_len);
        v.put_u16(0);
        v.put_u16(data_off);
        v.put_u32(data_len);
        v.put_bytes(b"MxAc");
        v.put_zeros(4);
        v.put_u64(0x1122);
        v
    }

    #[test]
    fn decodes_hand_built_context() {
        let b = ctx_bytes(0, 16, 4, 24, 8);
        let c = decode_contexts(&b).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, b"MxAc");
        assert_eq!(
            decode_maximal_access_request(&c[0].data).unwrap(),
            Some(0x1122)
        );
    }

    #[test]
    fn rejects_context_chains_with_bad_next() {
        // Next pointing back into the context itself (a loop), misaligned, or past the end.
        for next in [0u32.wrapping_sub(8), 8, 20, 32, 64] {
            let mut b = ctx_bytes(next, 16, 4, 24, 8);
            b.extend(ctx_bytes(0, 16, 4, 24, 8));
            let r = decode_contexts(&b);
            if next == 32 {
                assert_eq!(r.unwrap().len(), 2);
            } else {
                assert_eq!(r, Err(WireError::BadOffset("CreateContext.Next")), "{next}");
            }
        }
    }

    #[test]
    fn rejects_context_name_or_data_outside_the_context() {
        assert!(decode_contexts(&ctx_bytes(0, 8, 4, 24, 8)).is_err()); // name in fixed part
        assert!(decode_contexts(&ctx_bytes(0, 16, 0, 24, 8)).is_err()); // no name
        assert!(decode_contexts(&ctx_bytes(0, 16, 4, 24, 9)).is_err()); // data past end
        assert!(decode_contexts(&ctx_bytes(0, 16, 4, 0xFFFF, 1)).is_err());
        assert!(decode_contexts(&ctx_bytes(0, 16, 4, 24, u32::MAX)).is_err());
        // Data of the first context may not reach into the second.
        let mut b = ctx_bytes(32, 16, 4, 24, 16);
        b.extend(ctx_bytes(0, 16, 4, 24, 8));
        assert!(decode_contexts(&b).is_err());
        assert!(decode_contexts(&[1, 2, 3]).is_err());
    }

    #[test]
    fn rejects_name_odd_length_into_fixed_part_and_contexts_misaligned() {
        let base = test_msg(Command::CREATE, |v| req().encode(v));
        let mut m = base.clone();
        m[64 + 46] = 23; // NameLength odd
        assert_eq!(CreateRequest::decode(&m), Err(WireError::BadName));
        let mut m = base.clone();
        m[64 + 44] = 100; // NameOffset into the fixed part
        assert_eq!(CreateRequest::decode(&m), Err(WireError::BadOffset("Name")));
        let mut m = base.clone();
        let off = u32::from_le_bytes(m[64 + 48..64 + 52].try_into().unwrap()) + 4;
        m[64 + 48..64 + 52].copy_from_slice(&off.to_le_bytes());
        assert!(CreateRequest::decode(&m).is_err());
        let mut m = base;
        m[64 + 52..64 + 56].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            CreateRequest::decode(&m),
            Err(WireError::BadOffset("CreateContexts"))
        );
    }

    #[test]
    fn response_round_trips_with_mxac_and_qfid() {
        let resp = CreateResponse {
            oplock_level: OplockLevel::NONE,
            flags: 0,
            create_action: CreateAction::CREATED,
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            allocation_size: 4096,
            end_of_file: 10,
            file_attributes: FileAttributes::ARCHIVE,
            file_id: FileId {
                persistent: 7,
                volatile: 8,
            },
            contexts: vec![
                CreateContext::new(
                    tag::QUERY_MAXIMAL_ACCESS,
                    maximal_access_response(NtStatus::SUCCESS, AccessMask::FILE_ALL_ACCESS),
                ),
                CreateContext::new(tag::QUERY_ON_DISK_ID, query_on_disk_id_response(99, 1)),
            ],
        };
        let msg = test_msg(Command::CREATE, |v| resp.encode(v));
        let d = CreateResponse::decode(&msg).unwrap();
        assert_eq!(d, resp);
        assert_eq!(
            decode_maximal_access_response(&d.contexts[0].data).unwrap(),
            (NtStatus::SUCCESS, AccessMask::FILE_ALL_ACCESS)
        );
        assert_eq!(&msg[64 + 80..64 + 84], &152u32.to_le_bytes());
        assert!(msg.len() - 64 <= resp.body_len_max(), "{}", msg.len());
        let odd = CreateResponse {
            contexts: vec![CreateContext::new(b"ABC", vec![1; 13]); 3],
            ..resp
        };
        let msg = test_msg(Command::CREATE, |v| odd.encode(v));
        assert!(msg.len() - 64 <= odd.body_len_max(), "{}", msg.len());
    }

    #[test]
    fn lease_v1_and_durable_contexts_round_trip() {
        let v1 = Lease {
            v2: None,
            ..lease()
        };
        assert_eq!(v1.encode().len(), 32);
        assert_eq!(Lease::decode(&v1.encode()).unwrap(), v1);
        assert!(Lease::decode(&[0; 40]).is_err());
        let d = DurableHandleRequestV2 {
            timeout: 60_000,
            flags: 0,
            create_guid: [5; 16],
        };
        assert_eq!(DurableHandleRequestV2::decode(&d.encode()).unwrap(), d);
        assert!(DurableHandleReconnectV2::decode(&[0; 35]).is_err());
        assert_eq!(decode_u64_context(&7u64.to_le_bytes()).unwrap(), 7);
    }

    #[test]
    fn close_round_trips() {
        let c = CloseRequest {
            flags: CloseFlags::POSTQUERY_ATTRIB,
            file_id: FileId::ANY,
        };
        let msg = test_msg(Command::CLOSE, |v| c.encode(v));
        assert_eq!(msg.len(), 64 + 24);
        assert_eq!(CloseRequest::decode(&msg).unwrap(), c);
        assert_prefixes_fail(&msg, msg.len(), |m| CloseRequest::decode(m).is_ok());
        let r = CloseResponse {
            flags: CloseFlags::POSTQUERY_ATTRIB,
            end_of_file: 5,
            file_attributes: FileAttributes::ARCHIVE,
            ..CloseResponse::default()
        };
        let msg = test_msg(Command::CLOSE, |v| r.encode(v));
        assert_eq!(msg.len(), 64 + 60);
        assert_eq!(CloseResponse::decode(&msg).unwrap(), r);
    }
}
