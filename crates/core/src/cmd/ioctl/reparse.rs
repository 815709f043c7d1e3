//! FSCTL_SET_REPARSE_POINT, FSCTL_GET_REPARSE_POINT and FSCTL_DELETE_REPARSE_POINT ([MS-FSA]
//! 2.1.5.10.36, 2.1.5.10.17, 2.1.5.10.11) on regular files, answered as Samba 4.22 answers
//! them: a buffer ([`crate::cmd::reparse::check`]) is stored whole with the file, its tag may
//! not change while one is stored, and the file shows FILE_ATTRIBUTE_REPARSE_POINT and the
//! tag until the buffer is deleted. Nothing is ever followed: a stored buffer is data the
//! client reads back.

use ringshare_vfs::{FileAttr, FileKind, Special};
use ringshare_wire::ioctl::IoctlRequest;
use ringshare_wire::NtStatus;

use super::{open_ref, response, OpenRef};
use crate::cmd::reparse;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access::{FILE_WRITE_ATTRIBUTES, FILE_WRITE_DATA};
use crate::fsmap::status_of;

/// The open's file's metadata (DOS attributes included), and the buffer stored with it if it
/// is a regular file that holds one.
fn stored(open: &OpenRef) -> Result<(FileAttr, Option<Vec<u8>>), NtStatus> {
    let attr = open.node.stat().map_err(status_of)?;
    let b = reparse::read(open.node.as_ref(), &attr).map_err(status_of)?;
    Ok((attr, b))
}

/// The open may change the file's reparse point: it holds FILE_WRITE_DATA or
/// FILE_WRITE_ATTRIBUTES, on a share that may be written.
fn may_change(core: &ConnCore, req: &Req<'_>, open: &OpenRef) -> Result<(), NtStatus> {
    if open.access & (FILE_WRITE_DATA | FILE_WRITE_ATTRIBUTES) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if handles::tree_read_only(core, req) {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    Ok(())
}

pub(super) fn get(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    // A symlink or special file (reached by a POSIX open, which opens them themselves) shows
    // the buffer that stands for it; a regular file the one a client stored.
    let (attr, stored) = stored(&open)?;
    let b = match attr.kind {
        FileKind::Symlink => Some(reparse::symlink_buffer(
            &open.node.link_target().map_err(status_of)?,
        )),
        FileKind::Other(kind) => {
            let numbers = match kind {
                Special::CharDevice | Special::BlockDevice => {
                    open.node.device_numbers().map_err(status_of)?
                }
                _ => (0, 0),
            };
            reparse::special_buffer(kind, numbers)
        }
        _ => stored,
    };
    let b = b.ok_or(NtStatus::NOT_A_REPARSE_POINT)?;
    if (ir.max_output_response as usize) < b.len() {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    Ok(Reply::ok(response(ir, &b)))
}

pub(super) fn set(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    may_change(core, req, &open)?;
    // Directories, symlinks and special files do not take one here (Samba 4.22).
    let (attr, old) = stored(&open)?;
    if attr.kind != FileKind::File {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (tag, _) = reparse::check(ir.input)?;
    if old.is_some_and(|old| reparse::tag(&old) != tag) {
        return Err(NtStatus::IO_REPARSE_TAG_MISMATCH);
    }
    open.node
        .set_reparse_point(Some(ir.input))
        .map_err(status_of)?;
    crate::notify::modified(&core.server, &open.open, crate::notify::filter::ATTRIBUTES);
    Ok(Reply::ok(response(ir, &[])))
}

pub(super) fn delete(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    may_change(core, req, &open)?;
    let old = stored(&open)?.1.ok_or(NtStatus::NOT_A_REPARSE_POINT)?;
    let (tag, data) = reparse::check(ir.input)?;
    if !data.is_empty() {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    }
    if tag != reparse::tag(&old) {
        return Err(NtStatus::IO_REPARSE_TAG_MISMATCH);
    }
    open.node.set_reparse_point(None).map_err(status_of)?;
    crate::notify::modified(&core.server, &open.open, crate::notify::filter::ATTRIBUTES);
    Ok(Reply::ok(response(ir, &[])))
}
