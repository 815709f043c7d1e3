//! [MS-SMB2] 3.3.5.15 Receiving an SMB2 IOCTL Request.
//!
//! Served:
//! - FSCTL_VALIDATE_NEGOTIATE_INFO (3.3.5.15.12);
//! - FSCTL_SRV_REQUEST_RESUME_KEY (3.3.5.15.5) and FSCTL_SRV_COPYCHUNK /
//!   FSCTL_SRV_COPYCHUNK_WRITE (3.3.5.15.6): server-side copy, the source
//!   found by its resume key among the opens of the same user on this
//!   connection, the data moved by the backend ([`Node::copy_range`]); on a share whose
//!   calls may wait on a network, in a file system job ([`copychunk`]);
//! - FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX) ([MS-FSA] 2.1.5.10.4/5): block
//!   cloning where the share's file system shares extents ([`dup_extents`]);
//! - FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA, FSCTL_QUERY_ALLOCATED_RANGES
//!   ([MS-FSA] 2.1.5.10.34, 2.1.5.10.37, 2.1.5.10.22): the sparse flag is the
//!   FILE_ATTRIBUTE_SPARSE_FILE bit of the stored DOS attributes; a file
//!   without it reports its whole range (up to end of file) as allocated;
//! - FSCTL_GET_COMPRESSION / FSCTL_SET_COMPRESSION ([MS-FSA] 2.1.5.10.7,
//!   2.1.5.10.32): btrfs's compression flag where the share's file system compresses
//!   ([`ringshare_vfs::Share::compresses`]); elsewhere nothing is, and setting COMPRESSION_FORMAT_NONE
//!   succeeds, other formats are STATUS_NOT_SUPPORTED (as Windows Server 2016
//!   ReFS and Samba answer);
//! - FSCTL_SET_REPARSE_POINT, FSCTL_GET_REPARSE_POINT, FSCTL_DELETE_REPARSE_POINT: a
//!   client's reparse data buffer stored with a regular file, as Samba 4.22 stores it
//!   ([`reparse`]);
//! - FSCTL_SRV_ENUMERATE_SNAPSHOTS (3.3.5.15.1) on a `shadow_copy2` share
//!   ([`snapshots`]).
//!
//! - FSCTL_QUERY_NETWORK_INTERFACE_INFO (3.3.5.15.11) from the list the
//!   driver gives [`crate::ServerState::set_interfaces`];
//! - FSCTL_CREATE_OR_GET_OBJECT_ID / FSCTL_GET_OBJECT_ID: an object id
//!   derived from the file's device and inode; its BirthVolumeId is the share's volume
//!   object id (FileFsObjectIdInformation, `query_info::volume_object_id`).
//!
//! Pipe FSCTLs are answered in `cmd::pipe` on IPC$. Not served: the other server FSCTLs
//! (STATUS_NOT_SUPPORTED); other file system FSCTLs are
//! STATUS_INVALID_DEVICE_REQUEST.
//!
//! The copy and hole calls are synchronous backend calls bounded by the
//! copychunk limits (16 MiB per request); on a share whose calls may wait on a network they
//! are made in file system jobs instead ([`offload`]).

mod copychunk;
mod dup_extents;
mod offload;
mod reparse;
pub(crate) mod snapshots;

use std::sync::Arc;

use ringshare_vfs::Node;
use ringshare_wire::consts::{Dialect, Fsctl, IoctlFlags};
use ringshare_wire::ioctl::{
    FileAllocatedRangeBuffer, FileZeroDataInformation, IoctlRequest, IoctlResponse,
    NetworkInterfaceInfo, SrvRequestResumeKeyResponse, ValidateNegotiateInfoRequest,
    ValidateNegotiateInfoResponse, COMPRESSION_FORMAT_DEFAULT, COMPRESSION_FORMAT_LZNT1,
    COMPRESSION_FORMAT_NONE,
};
use ringshare_wire::{FileId, NtStatus};

use crate::arbiter;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access::{
    FILE_APPEND_DATA, FILE_READ_DATA, FILE_WRITE_ATTRIBUTES, FILE_WRITE_DATA,
};
use crate::fsmap::status_of;
use crate::server::lock;

/// Device type of file system FSCTLs (FILE_DEVICE_FILE_SYSTEM).
const DEVICE_FILE_SYSTEM: u32 = 0x0009;
/// Dialects the server implements, highest first.
const DIALECTS: [u16; 5] = [0x0311, 0x0302, 0x0300, 0x0210, 0x0202];

/// Server-side copy limits ([MS-SMB2] 3.3.3: ServerSideCopyMaxNumberofChunks,
/// ServerSideCopyMaxChunkSize, ServerSideCopyMaxDataSize, at the spec's defaults).
pub(crate) const COPYCHUNK_CHUNK_COUNT_MAX: u32 = 256;
pub(crate) const COPYCHUNK_CHUNK_SIZE_MAX: u32 = 1 << 20;
pub(crate) const COPYCHUNK_TOTAL_SIZE_MAX: u32 = 16 << 20;

/// FILE_ATTRIBUTE_SPARSE_FILE ([MS-FSCC] 2.6).
const ATTR_SPARSE_FILE: u32 = 0x0000_0200;
const ATTR_ARCHIVE: u32 = 0x0000_0020;
const ATTR_NORMAL: u32 = 0x0000_0080;
const ATTR_DIRECTORY: u32 = 0x0000_0010;

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let ir = IoctlRequest::decode(req.msg).map_err(|e| e.status())?;
    let max = handles::io_sizes(core).trans;
    if ir.input.len() as u64 > u64::from(max) || ir.max_output_response > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if ir.flags != IoctlFlags::IS_FSCTL {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if changes_the_file(ir.ctl_code) {
        // Into a file of a snapshot (an open granted write access there, as Samba 4.22 grants
        // it): refused as Samba refuses it.
        if handles::in_snapshot(handles::find(core, req, ir.file_id)?.as_ref()) {
            return Err(NtStatus::MEDIA_WRITE_PROTECTED);
        }
    }
    match ir.ctl_code {
        Fsctl::VALIDATE_NEGOTIATE_INFO => validate_negotiate(core, &ir),
        Fsctl::SRV_REQUEST_RESUME_KEY => request_resume_key(core, req, &ir),
        Fsctl::SRV_COPYCHUNK => copychunk::copychunk(core, req, &ir, true),
        Fsctl::SRV_COPYCHUNK_WRITE => copychunk::copychunk(core, req, &ir, false),
        Fsctl::DUPLICATE_EXTENTS_TO_FILE | Fsctl::DUPLICATE_EXTENTS_TO_FILE_EX => {
            dup_extents::duplicate_extents(core, req, &ir)
        }
        Fsctl::SET_SPARSE => set_sparse(core, req, &ir),
        Fsctl::SET_ZERO_DATA => set_zero_data(core, req, &ir),
        Fsctl::QUERY_ALLOCATED_RANGES => query_allocated_ranges(core, req, &ir),
        Fsctl::GET_COMPRESSION => get_compression(core, req, &ir),
        Fsctl::SET_COMPRESSION => set_compression(core, req, &ir),
        Fsctl::GET_REPARSE_POINT => reparse::get(core, req, &ir),
        Fsctl::SET_REPARSE_POINT => reparse::set(core, req, &ir),
        Fsctl::DELETE_REPARSE_POINT => reparse::delete(core, req, &ir),
        Fsctl::QUERY_NETWORK_INTERFACE_INFO => network_interfaces(core, &ir),
        Fsctl::CREATE_OR_GET_OBJECT_ID | Fsctl::GET_OBJECT_ID => object_id(core, req, &ir),
        Fsctl::LMR_REQUEST_RESILIENCY => request_resiliency(core, req, &ir),
        Fsctl::PIPE_TRANSCEIVE | Fsctl::PIPE_PEEK | Fsctl::PIPE_WAIT => {
            Err(NtStatus::NOT_SUPPORTED)
        }
        Fsctl::SRV_ENUMERATE_SNAPSHOTS => snapshots::enumerate(core, req, &ir),
        c if (c.0 >> 16) == DEVICE_FILE_SYSTEM => {
            handles::find(core, req, ir.file_id)?;
            Err(NtStatus::INVALID_DEVICE_REQUEST)
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// The FSCTLs that change the file they are sent on (a copy's or clone's target).
fn changes_the_file(code: Fsctl) -> bool {
    matches!(
        code,
        Fsctl::SRV_COPYCHUNK
            | Fsctl::SRV_COPYCHUNK_WRITE
            | Fsctl::DUPLICATE_EXTENTS_TO_FILE
            | Fsctl::DUPLICATE_EXTENTS_TO_FILE_EX
            | Fsctl::SET_SPARSE
            | Fsctl::SET_ZERO_DATA
            | Fsctl::SET_COMPRESSION
            | Fsctl::SET_REPARSE_POINT
            | Fsctl::DELETE_REPARSE_POINT
    )
}

/// [MS-SMB2] 3.3.5.15.9 FSCTL_LMR_REQUEST_RESILIENCY: the open becomes
/// resilient: it outlives its connection for the Timeout asked (the
/// default when 0), whatever its oplock or lease, and comes back with DHnC.
/// A Timeout past [`crate::durable::MAX_TIMEOUT_MS`] is INVALID_PARAMETER.
fn request_resiliency(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    if core.dialect() == Some(Dialect::SMB2_0_2) {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let open = handles::find(core, req, ir.file_id)?;
    let Some(timeout) = ir.input.get(..4) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if ir.input.len() < 8 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let timeout = u64::from(u32::from_le_bytes([
        timeout[0], timeout[1], timeout[2], timeout[3],
    ]));
    if timeout / 1000 > crate::durable::MAX_TIMEOUT_MS / 1000 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let sref = core.session_or_deleted(req.session_id)?;
    let owner = crate::durable::owner_of(&lock(&sref));
    let client_guid = core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid);
    let mut st = lock(&open.state);
    st.durable = Some(crate::durable::Durability {
        kind: crate::durable::Kind::Resilient,
        timeout_ms: if timeout == 0 {
            crate::durable::DEFAULT_TIMEOUT_MS
        } else {
            timeout
        },
        create_guid: st.create_guid.map_or([0; 16], |(_, g)| g),
        client_guid,
        owner,
        persistent: false,
    });
    Ok(Reply::ok(response(ir, &[])))
}

/// [MS-SMB2] 3.3.5.15.11: the server's network interfaces (FileId must be
/// all ones; the list is what the driver found at start-up).
fn network_interfaces(core: &mut ConnCore, ir: &IoctlRequest<'_>) -> Result<Reply, NtStatus> {
    if !ir.file_id.is_any() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let list = core.server.interfaces();
    if list.is_empty() {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let mut out = Vec::with_capacity(152 * list.len());
    NetworkInterfaceInfo::encode_list(&list, &mut out);
    if out.len() > ir.max_output_response as usize {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    Ok(Reply::ok(response(ir, &out)))
}

/// [MS-FSCC] 2.3.7/2.3.19: FILE_OBJECTID_BUFFER. ringshare stores no object
/// ids; it derives a stable one from the file's device and inode, so it is
/// the same for every open of the file and for its whole life.
fn object_id(core: &mut ConnCore, req: &Req<'_>, ir: &IoctlRequest<'_>) -> Result<Reply, NtStatus> {
    let open = handles::find(core, req, ir.file_id)?;
    if ir.max_output_response < 64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut oid = [0u8; 16];
    oid[..8].copy_from_slice(&open.key.ino.to_le_bytes());
    oid[8..].copy_from_slice(&open.key.dev.to_le_bytes());
    // The share's volume object id, as FileFsObjectIdInformation shows it (Samba 4.22 too).
    let volume = crate::cmd::query_info::volume_object_id(&open.share.name);
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&oid); // ObjectId
    out.extend_from_slice(&volume); // BirthVolumeId
    out.extend_from_slice(&oid); // BirthObjectId
    out.extend_from_slice(&[0u8; 16]); // DomainId
    Ok(Reply::ok(response(ir, &out)))
}

/// An IOCTL response body carrying `output`.
fn response(ir: &IoctlRequest<'_>, output: &[u8]) -> Vec<u8> {
    response_to((ir.ctl_code, ir.file_id), output)
}

/// [`response`] to the FSCTL `code` on `file_id` (made in a file system job: [`offload`]).
fn response_to((ctl_code, file_id): (Fsctl, FileId), output: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(48 + output.len());
    IoctlResponse {
        ctl_code,
        file_id,
        input: &[],
        output,
        flags: 0,
    }
    .encode(&mut b);
    b
}

/// [MS-SMB2] 3.3.5.15.12: any mismatch ends the connection.
fn validate_negotiate(core: &mut ConnCore, ir: &IoctlRequest<'_>) -> Result<Reply, NtStatus> {
    let drop_connection = || {
        let mut r = Reply::with_status(NtStatus::ACCESS_DENIED, Vec::new());
        r.rare().disconnect = true;
        Ok(r)
    };
    let Some(n) = core.negotiated.clone() else {
        return drop_connection();
    };
    if n.dialect == Dialect::SMB3_1_1 || ir.max_output_response < 24 {
        return drop_connection();
    }
    let Ok(v) = ValidateNegotiateInfoRequest::decode(ir.input) else {
        return drop_connection();
    };
    let asked: Vec<u16> = v.dialects.iter().map(|d| d.0).collect();
    let cfg = &core.server.config;
    let common = DIALECTS
        .iter()
        .copied()
        .filter(|d| *d >= cfg.dialect_min && *d <= cfg.dialect_max)
        .find(|d| asked.contains(d));
    let ok = asked == n.client_dialects
        && common == Some(n.dialect.0)
        && v.guid == n.client_guid
        && v.security_mode.0 == n.client_security_mode
        && v.capabilities.0 == n.client_capabilities;
    if !ok {
        if core.log_ok(crate::loglimit::LogKind::ClosedConnection) {
            tracing::info!(peer = %core.peer, "closing a connection: VALIDATE_NEGOTIATE_INFO mismatch");
        }
        return drop_connection();
    }
    let mut out = Vec::with_capacity(ValidateNegotiateInfoResponse::LEN);
    ValidateNegotiateInfoResponse {
        capabilities: ringshare_wire::consts::Capabilities(n.server_capabilities),
        guid: cfg.server_guid,
        security_mode: ringshare_wire::consts::SecurityMode(n.server_security_mode),
        dialect: n.dialect,
    }
    .encode(&mut out);
    Ok(Reply::ok(response(ir, &out)))
}

/// What a handler needs of an open, copied out so the session map is free again.
struct OpenRef {
    id: u64,
    node: Arc<dyn Node>,
    access: u32,
    is_dir: bool,
    open: Arc<crate::state::Open>,
}

/// Data of the open's file changed: its close reports it MODIFIED.
/// `open`'s file was written (a copy, a zeroing, a clone into it); `before`: its modification
/// time before, read first when the write time needs it ([`offload::Base`]: in the job on a
/// share whose calls may wait on a network, here before the write elsewhere).
fn note_written(
    server: &crate::server::ServerState,
    open: &OpenRef,
    now: crate::io::Now,
    before: Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>>,
) {
    {
        let mut st = lock(&open.open.state);
        st.notify_on_close |= crate::notify::filter::LAST_WRITE | crate::notify::filter::SIZE;
        crate::notify::wrote(&server.notify, &open.open, &mut st, now.mono_ms);
    }
    crate::writetime::wrote(&server.files, &open.open, now, before);
}

fn open_ref(core: &mut ConnCore, req: &Req<'_>, fid: FileId) -> Result<OpenRef, NtStatus> {
    handles::find(core, req, fid).map(OpenRef::of)
}

impl OpenRef {
    /// A lock check of this open's I/O of a range (copy chunk and zero
    /// data break no caching here, as before the arbiter).
    fn io(&self, offset: u64, length: u64, write: bool, now_ms: u64) -> arbiter::IoAsk {
        arbiter::IoAsk {
            owner: self.id,
            offset,
            length,
            write,
            change: false,
            now_ms,
        }
    }

    fn of(o: Arc<crate::state::Open>) -> OpenRef {
        OpenRef {
            id: o.id,
            node: Arc::clone(&o.node),
            access: o.access,
            is_dir: o.is_dir,
            open: o,
        }
    }
}

/// [MS-SMB2] 3.3.5.15.5.
fn request_resume_key(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = handles::find(core, req, ir.file_id)?;
    if (ir.max_output_response as usize) < SrvRequestResumeKeyResponse::LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut out = Vec::with_capacity(SrvRequestResumeKeyResponse::LEN);
    SrvRequestResumeKeyResponse {
        resume_key: open.resume_key(),
    }
    .encode(&mut out);
    Ok(Reply::ok(response(ir, &out)))
}

/// The DOS attributes as stored, without the bits the server computes.
fn stored_attributes(node: &dyn Node) -> Result<u32, NtStatus> {
    let a = node.stat().map_err(status_of)?;
    Ok(a.dos_attributes.unwrap_or(ATTR_ARCHIVE) & !(ATTR_NORMAL | ATTR_DIRECTORY))
}

fn is_sparse(node: &dyn Node) -> Result<bool, NtStatus> {
    Ok(stored_attributes(node)? & ATTR_SPARSE_FILE != 0)
}

/// [MS-FSA] 2.1.5.10.34 FSCTL_SET_SPARSE: no buffer means "set"; a
/// buffer's first byte (FILE_SET_SPARSE_BUFFER.SetSparse) says set or clear.
fn set_sparse(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    if open.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.access & (FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_ATTRIBUTES) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if handles::tree_read_only(core, req) {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    let set = ir.input.first().is_none_or(|b| *b != 0);
    if offload::applies(&open) {
        if let Some(r) = offload::answered(core, &open) {
            return r;
        }
        let (node, to) = (Arc::clone(&open.node), (ir.ctl_code, ir.file_id));
        return offload::ask(
            core,
            &open,
            "an FSCTL_SET_SPARSE",
            move || match sparse_set(node.as_ref(), set) {
                Ok(changed) => offload::Made {
                    answer: Ok((NtStatus::SUCCESS, response_to(to, &[]))),
                    after: match changed {
                        true => offload::After::Attributes,
                        false => offload::After::Nothing,
                    },
                },
                Err(s) => offload::Made::answer(Err(s)),
            },
        );
    }
    if sparse_set(open.node.as_ref(), set)? {
        crate::notify::modified(&core.server, &open.open, crate::notify::filter::ATTRIBUTES);
    }
    Ok(Reply::ok(response(ir, &[])))
}

/// The file's sparse flag set (`set`) or cleared in its stored attributes: whether they
/// changed.
fn sparse_set(node: &dyn Node, set: bool) -> Result<bool, NtStatus> {
    let old = stored_attributes(node)?;
    let new = if set {
        old | ATTR_SPARSE_FILE
    } else {
        old & !ATTR_SPARSE_FILE
    };
    if new != old {
        node.set_dos_attributes(new).map_err(status_of)?;
    }
    Ok(new != old)
}

/// [MS-FSA] 2.1.5.10.37 FSCTL_SET_ZERO_DATA: zero `FileOffset ..
/// BeyondFinalZero`, never past the end of file; a sparse file gets a hole.
fn set_zero_data(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    let z = FileZeroDataInformation::decode(ir.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if open.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.access & FILE_WRITE_DATA == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if z.file_offset < 0 || z.beyond_final_zero < 0 || z.file_offset > z.beyond_final_zero {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if handles::tree_read_only(core, req) {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    let (offset, end) = (z.file_offset as u64, z.beyond_final_zero as u64);
    if end <= offset {
        return Ok(Reply::ok(response(ir, &[])));
    }
    let in_job = offload::applies(&open);
    if in_job {
        if let Some(r) = offload::answered(core, &open) {
            return r;
        }
    }
    // The range asked is checked against byte-range locks as Samba 4.22 checks it, before it
    // is cut to the file's size. Asked of the file's home away from the I/O thread when no
    // grant decides it (the request changed nothing yet: it parks and runs again,
    // cmd/io_check.rs).
    let io = open.io(offset, end - offset, true, core.now.mono_ms);
    crate::cmd::io_check::io_check(core, &open.open, io)?;
    if in_job {
        let (node, to) = (Arc::clone(&open.node), (ir.ctl_code, ir.file_id));
        let base = offload::Base::of(&open);
        return offload::ask(core, &open, "an FSCTL_SET_ZERO_DATA", move || {
            let before = base.read(node.as_ref());
            match zero(node.as_ref(), offset, end) {
                Ok(punched) => offload::Made {
                    answer: Ok((NtStatus::SUCCESS, response_to(to, &[]))),
                    after: offload::Base::after(punched, before),
                },
                Err(s) => offload::Made::answer(Err(s)),
            }
        });
    }
    // The write time's base, read before the file changes (as a WRITE's and the job's).
    let before = offload::Base::of(&open).read(open.node.as_ref());
    if zero(open.node.as_ref(), offset, end)? {
        note_written(&core.server, &open, core.now, before);
    }
    Ok(Reply::ok(response(ir, &[])))
}

/// `offset .. end` of the file, cut at its end, zeroed: whether anything was. A non-sparse
/// file keeps reporting the range as allocated (see `query_allocated_ranges`), whatever the
/// backend did with the storage.
fn zero(node: &dyn Node, offset: u64, end: u64) -> Result<bool, NtStatus> {
    let end = end.min(node.stat().map_err(status_of)?.size);
    if end <= offset {
        return Ok(false);
    }
    node.punch_hole(offset, end - offset).map_err(status_of)?;
    Ok(true)
}

/// [MS-FSA] 2.1.5.10.22 FSCTL_QUERY_ALLOCATED_RANGES.
fn query_allocated_ranges(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    let q = FileAllocatedRangeBuffer::decode(ir.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if q.file_offset < 0 || q.length < 0 || q.file_offset.checked_add(q.length).is_none() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.access & FILE_READ_DATA == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (offset, len) = (q.file_offset as u64, q.length as u64);
    let room = ir.max_output_response as usize / FileAllocatedRangeBuffer::LEN;
    if offload::applies(&open) {
        if let Some(r) = offload::answered(core, &open) {
            return r;
        }
        let (node, to) = (Arc::clone(&open.node), (ir.ctl_code, ir.file_id));
        return offload::ask(core, &open, "an FSCTL_QUERY_ALLOCATED_RANGES", move || {
            let r = allocated_ranges(node.as_ref(), offset, len)
                .and_then(|ranges| ranges_answer(to, &ranges, room));
            offload::Made::answer(r)
        });
    }
    let ranges = allocated_ranges(open.node.as_ref(), offset, len)?;
    ranges_answer((ir.ctl_code, ir.file_id), &ranges, room)
        .map(|(status, body)| Reply::with_status(status, body))
}

/// The allocated ranges of `offset .. offset + len` of the file: its backend's for a sparse
/// file, else the whole range up to its end.
fn allocated_ranges(node: &dyn Node, offset: u64, len: u64) -> Result<Vec<(u64, u64)>, NtStatus> {
    if is_sparse(node)? {
        return node.allocated_ranges(offset, len).map_err(status_of);
    }
    let size = node.stat().map_err(status_of)?.size;
    let end = (offset + len).min(size);
    Ok(if end > offset {
        vec![(offset, end - offset)]
    } else {
        Vec::new()
    })
}

/// The answer listing `ranges` in at most `room` entries (BUFFER_OVERFLOW past it).
fn ranges_answer(
    to: (Fsctl, FileId),
    ranges: &[(u64, u64)],
    room: usize,
) -> Result<(NtStatus, Vec<u8>), NtStatus> {
    if !ranges.is_empty() && room == 0 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let mut out = Vec::with_capacity(ranges.len().min(room) * FileAllocatedRangeBuffer::LEN);
    for (off, len) in ranges.iter().take(room) {
        FileAllocatedRangeBuffer {
            file_offset: i64::try_from(*off).unwrap_or(i64::MAX),
            length: i64::try_from(*len).unwrap_or(i64::MAX),
        }
        .encode(&mut out);
    }
    let status = if ranges.len() > room {
        NtStatus::BUFFER_OVERFLOW
    } else {
        NtStatus::SUCCESS
    };
    Ok((status, response_to(to, &out)))
}

/// [MS-FSA] 2.1.5.10.7: LZNT1 for a file the file system compresses (btrfs's flag, as
/// Samba's vfs_btrfs answers), else none.
fn get_compression(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    if ir.max_output_response < 2 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !open.open.share.backend.compresses() {
        return Ok(Reply::ok(response(
            ir,
            &COMPRESSION_FORMAT_NONE.to_le_bytes(),
        )));
    }
    if offload::applies(&open) {
        if let Some(r) = offload::answered(core, &open) {
            return r;
        }
        let (node, to) = (Arc::clone(&open.node), (ir.ctl_code, ir.file_id));
        return offload::ask(core, &open, "an FSCTL_GET_COMPRESSION", move || {
            let r = compression_format(node.as_ref())
                .map(|f| (NtStatus::SUCCESS, response_to(to, &f.to_le_bytes())));
            offload::Made::answer(r)
        });
    }
    let format = compression_format(open.node.as_ref())?;
    Ok(Reply::ok(response(ir, &format.to_le_bytes())))
}

/// LZNT1 for a file its file system compresses, else none.
fn compression_format(node: &dyn Node) -> Result<u16, NtStatus> {
    Ok(match node.compressed().map_err(status_of)? {
        true => COMPRESSION_FORMAT_LZNT1,
        false => COMPRESSION_FORMAT_NONE,
    })
}

/// [MS-FSA] 2.1.5.10.32: compressed (DEFAULT or LZNT1) where the file system compresses
/// (btrfs), or not (NONE); elsewhere only NONE.
fn set_compression(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    let format = match ir.input {
        [a, b, ..] => u16::from_le_bytes([*a, *b]),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    // FILE_WRITE_DATA, not FILE_WRITE_ATTRIBUTES as [MS-FSA] 2.1.5.10.32 would also take:
    // Samba 4.22 (smbtorture smb2.ioctl.compress_perms, as Windows answers).
    if open.access & FILE_WRITE_DATA == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let on = match format {
        COMPRESSION_FORMAT_NONE => false,
        COMPRESSION_FORMAT_DEFAULT | COMPRESSION_FORMAT_LZNT1 => true,
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    if !open.open.share.backend.compresses() {
        return match on {
            false => Ok(Reply::ok(response(ir, &[]))),
            true => Err(NtStatus::NOT_SUPPORTED),
        };
    }
    if offload::applies(&open) {
        if let Some(r) = offload::answered(core, &open) {
            return r;
        }
        let (node, to) = (Arc::clone(&open.node), (ir.ctl_code, ir.file_id));
        return offload::ask(core, &open, "an FSCTL_SET_COMPRESSION", move || {
            let r = node.set_compressed(on).map_err(status_of);
            offload::Made::answer(r.map(|()| (NtStatus::SUCCESS, response_to(to, &[]))))
        });
    }
    open.node.set_compressed(on).map_err(status_of)?;
    Ok(Reply::ok(response(ir, &[])))
}
