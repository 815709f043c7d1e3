//! Block cloning ([MS-SMB2] 3.3.5.15, [MS-FSA] 2.1.5.10.4 and 2.1.5.10.5):
//! FSCTL_DUPLICATE_EXTENTS_TO_FILE and FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX
//! make a range of the target (the IOCTL's open) share the storage of a
//! range of the source (an open named by FileId in the buffer), through
//! [`ringshare_vfs::Node::clone_range`] (Linux's `FICLONERANGE` as the
//! open's user, on btrfs and on xfs with reflink).
//!
//! The checks and their answers are Samba 4.22's (`vfs objects = btrfs`),
//! in its order:
//! - a share whose file system does not clone (or a read-only share):
//!   STATUS_INVALID_DEVICE_REQUEST ([MS-FSA]: "does not support duplicating
//!   extents"), the flag FILE_SUPPORTS_BLOCK_REFCOUNTING is not advertised;
//! - a buffer too short (or an _EX StructureSize or Flags not known):
//!   STATUS_INVALID_PARAMETER;
//! - a source FileId that is no open of this session and tree, or of
//!   another file system: STATUS_INVALID_HANDLE (Windows' answer, which
//!   Samba follows over the spec's INVALID_PARAMETER);
//! - offsets that wrap: INVALID_PARAMETER; a source range past the
//!   source's end: STATUS_NOT_SUPPORTED; a target offset past the target's
//!   end: INVALID_PARAMETER; a target range past its end is cut to it (the
//!   target never grows, as on Windows); nothing left: success;
//! - ranges of one file that overlap, a sparse source into a non-sparse
//!   target, a named stream: STATUS_NOT_SUPPORTED;
//! - a directory on either side, no FILE_WRITE_DATA/FILE_APPEND_DATA on the
//!   target, no FILE_READ_DATA on the source: STATUS_ACCESS_DENIED;
//! - what the file system refuses: EINVAL (ranges not aligned to its block
//!   size, [`ringshare_vfs::Share::clone_block_size`]) INVALID_PARAMETER,
//!   EOPNOTSUPP NOT_SUPPORTED, EXDEV NOT_SAME_DEVICE, EROFS
//!   MEDIA_WRITE_PROTECTED, ENOSPC DISK_FULL.
//!
//! Byte-range locks do not stop a clone (ReFS and Samba ignore them: only
//! the file's extent map changes). DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC
//! is granted by the one `FICLONERANGE` call, which the kernel does under
//! the locks of both inodes. The call runs on the connection's thread like
//! copychunk's `copy_file_range`: it changes extent maps only, a 1 GiB clone
//! takes milliseconds (docs/benchmarks.md).

use ringshare_vfs::FsError;
use ringshare_wire::consts::Fsctl;
use ringshare_wire::dup_extents::{DuplicateExtents, DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC};
use ringshare_wire::ioctl::IoctlRequest;
use ringshare_wire::{FileId, NtStatus};

use super::{is_sparse, note_written, open_ref, response, OpenRef};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access::{FILE_APPEND_DATA, FILE_READ_DATA, FILE_WRITE_DATA};
use crate::fsmap::status_of;
use crate::server::lock;

pub(super) fn duplicate_extents(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let dst = open_ref(core, req, ir.file_id)?;
    if dst.open.share.backend.clone_block_size().is_none() {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let d = if ir.ctl_code == Fsctl::DUPLICATE_EXTENTS_TO_FILE_EX {
        DuplicateExtents::decode_ex(ir.input)
    } else {
        DuplicateExtents::decode(ir.input)
    }
    .map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if d.flags & !DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let src = source(core, req, d.source).ok_or(NtStatus::INVALID_HANDLE)?;
    if src.open.key.dev != dst.open.key.dev {
        return Err(NtStatus::INVALID_HANDLE);
    }
    let (Some(src_end), Some(_)) = (
        d.source_offset.checked_add(d.byte_count),
        d.target_offset.checked_add(d.byte_count),
    ) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if i64::try_from(src_end).is_err() || i64::try_from(d.target_offset + d.byte_count).is_err() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if src.node.stat().map_err(status_of)?.size < src_end {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let dst_size = dst.node.stat().map_err(status_of)?.size;
    if d.target_offset > dst_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let len = d.byte_count.min(dst_size - d.target_offset);
    if len == 0 {
        return Ok(Reply::ok(response(ir, &[])));
    }
    let same_file = src.open.key == dst.open.key;
    if same_file
        && d.source_offset < d.target_offset + len
        && d.target_offset < d.source_offset + len
    {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if is_sparse(src.node.as_ref())? && !is_sparse(dst.node.as_ref())? {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if src.open.stream.is_some() || dst.open.stream.is_some() {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if src.is_dir
        || dst.is_dir
        || dst.access & (FILE_WRITE_DATA | FILE_APPEND_DATA) == 0
        || src.access & FILE_READ_DATA == 0
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if handles::tree_read_only(core, req) {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    dst.node
        .clone_range(src.node.as_ref(), d.source_offset, d.target_offset, len)
        .map_err(clone_status)?;
    note_written(&core.server, &dst, core.now);
    Ok(Reply::ok(response(ir, &[])))
}

/// The source open: FileId as given (no "related" meaning), an open of
/// this session on this tree.
fn source(core: &ConnCore, req: &Req<'_>, fid: FileId) -> Option<OpenRef> {
    let sref = core.session(req.session_id)?;
    let s = lock(&sref);
    let open = s.opens.get(&fid.volatile)?;
    (open.persistent_id == fid.persistent && open.tree_id == req.tree_id)
        .then(|| OpenRef::of(open.clone()))
}

/// What a refused `FICLONERANGE` tells the client.
fn clone_status(e: FsError) -> NtStatus {
    match e {
        FsError::InvalidName => NtStatus::INVALID_PARAMETER,
        FsError::Other(ringshare_vfs::EOPNOTSUPP) => NtStatus::NOT_SUPPORTED,
        e => status_of(e),
    }
}
