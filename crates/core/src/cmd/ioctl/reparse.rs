//! FSCTL_SET_REPARSE_POINT, FSCTL_GET_REPARSE_POINT and FSCTL_DELETE_REPARSE_POINT ([MS-FSA]
//! 2.1.5.10.36, 2.1.5.10.17, 2.1.5.10.11) on regular files, answered as Samba 4.22 answers
//! them: a buffer ([`crate::cmd::reparse::check`]) is stored whole with the file, its tag may
//! not change while one is stored, and the file shows FILE_ATTRIBUTE_REPARSE_POINT and the
//! tag until the buffer is deleted. Nothing is ever followed: a stored buffer is data the
//! client reads back.

use std::sync::Arc;

use ringshare_vfs::{FileAttr, FileKind, Node, Special};
use ringshare_wire::ioctl::IoctlRequest;
use ringshare_wire::NtStatus;

use super::offload::{self, After, Made};
use super::{open_ref, response_to, OpenRef};
use crate::cmd::reparse;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access::{FILE_WRITE_ATTRIBUTES, FILE_WRITE_DATA};
use crate::fsmap::status_of;

fn stored(node: &dyn Node) -> Result<(FileAttr, Option<Vec<u8>>), NtStatus> {
    let attr = node.stat().map_err(status_of)?;
    let b = reparse::read(node, &attr).map_err(status_of)?;
    Ok((attr, b))
}

fn may_change(core: &ConnCore, req: &Req<'_>, open: &OpenRef) -> Result<(), NtStatus> {
    if open.access & (FILE_WRITE_DATA | FILE_WRITE_ATTRIBUTES) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if handles::tree_read_only(core, req) {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    Ok(())
}

/// What one of these FSCTLs does to the file once the request and the open are checked: its
/// answer, and whether the file's attributes changed.
type Calls = fn(&dyn Node, &[u8], u32) -> Result<(Vec<u8>, bool), NtStatus>;

/// `calls` (with the request's input and its MaxOutputResponse) made here, or in a file system
/// job on a share whose calls may wait on a network ([`offload`]); a change told to watchers.
fn run(
    core: &mut ConnCore,
    open: &OpenRef,
    ir: &IoctlRequest<'_>,
    (what, calls): (&'static str, Calls),
) -> Result<Reply, NtStatus> {
    let to = (ir.ctl_code, ir.file_id);
    if offload::applies(open) {
        if let Some(r) = offload::answered(core, open) {
            return r;
        }
        let (node, input, max) = (
            Arc::clone(&open.node),
            ir.input.to_vec(),
            ir.max_output_response,
        );
        return offload::ask(core, open, what, move || {
            match calls(node.as_ref(), &input, max) {
                Ok((out, changed)) => Made {
                    answer: Ok((NtStatus::SUCCESS, response_to(to, &out))),
                    after: if changed {
                        After::Attributes
                    } else {
                        After::Nothing
                    },
                },
                Err(s) => Made::answer(Err(s)),
            }
        });
    }
    let (out, changed) = calls(open.node.as_ref(), ir.input, ir.max_output_response)?;
    if changed {
        crate::notify::modified(&core.server, &open.open, crate::notify::filter::ATTRIBUTES);
    }
    Ok(Reply::ok(response_to(to, &out)))
}

pub(super) fn get(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    run(core, &open, ir, ("an FSCTL_GET_REPARSE_POINT", read_buffer))
}

/// The buffer a file shows: a symlink or special file (reached by a POSIX open, which opens
/// them themselves) the one that stands for it; a regular file the one a client stored.
fn read_buffer(node: &dyn Node, _: &[u8], max: u32) -> Result<(Vec<u8>, bool), NtStatus> {
    let (attr, stored) = stored(node)?;
    let b = match attr.kind {
        FileKind::Symlink => Some(reparse::symlink_buffer(
            &node.link_target().map_err(status_of)?,
        )),
        FileKind::Other(kind) => {
            let numbers = match kind {
                Special::CharDevice | Special::BlockDevice => {
                    node.device_numbers().map_err(status_of)?
                }
                _ => (0, 0),
            };
            reparse::special_buffer(kind, numbers)
        }
        _ => stored,
    };
    let b = b.ok_or(NtStatus::NOT_A_REPARSE_POINT)?;
    if (max as usize) < b.len() {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    Ok((b, false))
}

pub(super) fn set(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    may_change(core, req, &open)?;
    run(
        core,
        &open,
        ir,
        ("an FSCTL_SET_REPARSE_POINT", store_buffer),
    )
}

/// The client's buffer (`input`) stored with a regular file (directories, symlinks and special
/// files do not take one here, as on Samba 4.22); its tag may not change while one is stored.
fn store_buffer(node: &dyn Node, input: &[u8], _: u32) -> Result<(Vec<u8>, bool), NtStatus> {
    let (attr, old) = stored(node)?;
    if attr.kind != FileKind::File {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (tag, _) = reparse::check(input)?;
    if old.is_some_and(|old| reparse::tag(&old) != tag) {
        return Err(NtStatus::IO_REPARSE_TAG_MISMATCH);
    }
    node.set_reparse_point(Some(input)).map_err(status_of)?;
    Ok((Vec::new(), true))
}

pub(super) fn delete(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = open_ref(core, req, ir.file_id)?;
    may_change(core, req, &open)?;
    run(
        core,
        &open,
        ir,
        ("an FSCTL_DELETE_REPARSE_POINT", delete_buffer),
    )
}

/// The stored buffer removed: `input` names its tag and carries no data.
fn delete_buffer(node: &dyn Node, input: &[u8], _: u32) -> Result<(Vec<u8>, bool), NtStatus> {
    let old = stored(node)?.1.ok_or(NtStatus::NOT_A_REPARSE_POINT)?;
    let (tag, data) = reparse::check(input)?;
    if !data.is_empty() {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    }
    if tag != reparse::tag(&old) {
        return Err(NtStatus::IO_REPARSE_TAG_MISMATCH);
    }
    node.set_reparse_point(None).map_err(status_of)?;
    Ok((Vec::new(), true))
}
