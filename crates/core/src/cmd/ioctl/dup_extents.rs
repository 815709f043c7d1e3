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
//! takes milliseconds (docs/benchmarks.md). On a share whose calls may wait on a
//! network (issue 33) the checks that read the files (sizes, sparse flags) and the clone are
//! one file system job of the target open's order ([`clone_checked`], the same code), the
//! checks that read nothing decided before it on the I/O thread and answered in their place
//! among the job's; the target's watchers and write time told after it when it cloned.

use std::sync::Arc;

use ringshare_vfs::{FsError, Node};
use ringshare_wire::consts::Fsctl;
use ringshare_wire::dup_extents::{DuplicateExtents, DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC};
use ringshare_wire::ioctl::IoctlRequest;
use ringshare_wire::{FileId, NtStatus};

use super::{is_sparse, note_written, offload, open_ref, response, response_to, OpenRef};
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
    // Run again with what its job made (the target's order keeps its other requests behind).
    let in_job = offload::applies(&dst);
    if in_job {
        if let Some(r) = offload::answered(core, &dst) {
            return r;
        }
    }
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
    let same_file = src.open.key == dst.open.key;
    // The checks that ask nothing of the file system, answered in their place among those that
    // do ([`clone_checked`]).
    let late = if src.open.stream.is_some() || dst.open.stream.is_some() {
        Some(NtStatus::NOT_SUPPORTED)
    } else if src.is_dir
        || dst.is_dir
        || dst.access & (FILE_WRITE_DATA | FILE_APPEND_DATA) == 0
        || src.access & FILE_READ_DATA == 0
    {
        Some(NtStatus::ACCESS_DENIED)
    } else if handles::tree_read_only(core, req) {
        Some(NtStatus::MEDIA_WRITE_PROTECTED)
    } else {
        None
    };
    let range = (d.source_offset, d.target_offset, d.byte_count);
    if in_job {
        let (s, t, to) = (
            Arc::clone(&src.node),
            Arc::clone(&dst.node),
            (ir.ctl_code, ir.file_id),
        );
        let base = offload::Base::of(&dst);
        return offload::ask(
            core,
            &dst,
            "an FSCTL_DUPLICATE_EXTENTS_TO_FILE",
            move || {
                let before = base.read(t.as_ref());
                match clone_checked((s.as_ref(), t.as_ref()), range, same_file, late) {
                    Ok(cloned) => offload::Made {
                        answer: Ok((NtStatus::SUCCESS, response_to(to, &[]))),
                        after: offload::Base::after(cloned, before),
                    },
                    Err(st) => offload::Made::answer(Err(st)),
                }
            },
        );
    }
    let (s, t) = (src.node.as_ref(), dst.node.as_ref());
    let before = offload::Base::of(&dst).read(t);
    if clone_checked((s, t), range, same_file, late)? {
        note_written(&core.server, &dst, core.now, before);
    }
    Ok(Reply::ok(response(ir, &[])))
}

/// The checks that read the two files (their sizes, their sparse flags), with `late` (a
/// refusal decided without the file system: a stream, access, a read-only share) answered in
/// its place among them, then `len` bytes (`byte_count` cut at the target's end) of `src` at
/// `source_offset` cloned into `dst` at `target_offset`: whether anything was.
fn clone_checked(
    (src, dst): (&dyn Node, &dyn Node),
    (source_offset, target_offset, byte_count): (u64, u64, u64),
    same_file: bool,
    late: Option<NtStatus>,
) -> Result<bool, NtStatus> {
    // Checked by the caller: neither end wraps.
    if src.stat().map_err(status_of)?.size < source_offset + byte_count {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let dst_size = dst.stat().map_err(status_of)?.size;
    if target_offset > dst_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let len = byte_count.min(dst_size - target_offset);
    if len == 0 {
        return Ok(false);
    }
    if same_file && source_offset < target_offset + len && target_offset < source_offset + len {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if is_sparse(src)? && !is_sparse(dst)? {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if let Some(refused) = late {
        return Err(refused);
    }
    dst.clone_range(src, source_offset, target_offset, len)
        .map_err(clone_status)?;
    Ok(true)
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
