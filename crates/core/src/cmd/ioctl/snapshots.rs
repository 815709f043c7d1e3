//! FSCTL_SRV_ENUMERATE_SNAPSHOTS ([MS-SMB2] 3.3.5.15.1): the `@GMT-…` tokens
//! of a `shadow_copy2` share's snapshots ([`crate::shadow`]), read from its
//! snapshot directory as the open's user through the backend, in
//! `shadow:sort`'s order, and sized as Samba 4.22 sizes the answer
//! ([`ringshare_wire::snapshot::encode_snapshot_array`]). A share without
//! `shadow_copy2` answers INVALID_DEVICE_REQUEST, as Samba without it does
//! (smbclient 4.22's `allinfo` asks for every file).

use ringshare_vfs::{FsError, RelPath, Who};
use ringshare_wire::ioctl::IoctlRequest;
use ringshare_wire::snapshot::{encode_snapshot_array, GmtToken};
use ringshare_wire::NtStatus;

use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fsmap::status_of;
use crate::server::{lock, ShareDef};
use crate::shadow::{list_dir, ShadowCopy};
use crate::state::TreeKind;

pub(super) fn enumerate(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
) -> Result<Reply, NtStatus> {
    let open = handles::find(core, req, ir.file_id)?;
    // The tree's share: an open of a snapshot's file lives on a view of
    // the snapshot, whose own snapshot directory is not the share's.
    let share = {
        let sref = core.session_or_deleted(req.session_id)?;
        let session = lock(&sref);
        match session.trees.get(&req.tree_id).map(|t| &t.kind) {
            Some(TreeKind::Disk(s)) => std::sync::Arc::clone(s),
            _ => return Err(NtStatus::INVALID_DEVICE_REQUEST),
        }
    };
    if share.shadow.is_none() {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let path = lock(&open.entry).path.clone();
    let (max_out, who) = (ir.max_output_response, open.who.clone());
    let answer = move || -> Result<Vec<u8>, NtStatus> {
        let shadow = share
            .shadow
            .as_deref()
            .ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
        let snapshots = if shadow.everywhere && shadow.base.is_none() {
            shadow.snapshots(nearest_names(&share, &who, shadow, &path)?)
        } else {
            list(&share, &who, shadow)?
        };
        encode_snapshot_array(&snapshots, max_out)
    };
    // On a share whose calls may wait on a network the snapshot directories are listed in a
    // file system job of the open's order, the request parked meanwhile; it runs again and
    // sends what the job made.
    if !open.share.offloaded() {
        return Ok(Reply::ok(super::response(ir, &answer()?)));
    }
    let out = match crate::cmd::query_info::job_answer(core) {
        Some(r) => r?.body,
        None => {
            return crate::cmd::query_info::in_job(core, &open, "a snapshots' listing", move || {
                answer().map(Reply::ok)
            })
        }
    };
    Ok(Reply::ok(super::response(ir, &out)))
}

/// The share's snapshots, as `who` sees its snapshot directory: none when
/// there is no such directory.
pub(crate) fn list(
    share: &ShareDef,
    who: &Who,
    shadow: &ShadowCopy,
) -> Result<Vec<GmtToken>, NtStatus> {
    Ok(shadow.snapshots(names(share, who, shadow)?))
}

/// The entries of the share's snapshot directory as `who` sees it (in the share, or outside
/// it: [`crate::shadow::SnapBase`]): none when there is no such directory.
pub(crate) fn names(
    share: &ShareDef,
    who: &Who,
    shadow: &ShadowCopy,
) -> Result<Vec<String>, NtStatus> {
    let listed = match &shadow.base {
        Some(base) => match &base.opened {
            Some(dir) => list_dir(&**dir, who, &RelPath::root()),
            None => return Ok(Vec::new()),
        },
        None => list_dir(&*share.backend, who, &shadow.snapdir),
    };
    match listed {
        Err(FsError::NotFound | FsError::PathNotFound) => Ok(Vec::new()),
        r => r.map_err(status_of),
    }
}

/// `shadow:snapdirseverywhere`: the entries of the snapshot directory nearest to `path`, from
/// the path itself (a directory's own) up to the share's root and then above it
/// ([`ShadowCopy::outer`]), as Samba's shadow_copy2 finds it; INVALID_PARAMETER when no
/// directory on the way has one, as Samba answers (an empty array would be 14 bytes, which
/// smbclient refuses as a malformed answer).
fn nearest_names(
    share: &ShareDef,
    who: &Who,
    shadow: &ShadowCopy,
    path: &RelPath,
) -> Result<Vec<String>, NtStatus> {
    let comps = path.components();
    for i in (0..=comps.len()).rev() {
        let dir = RelPath::from_components(comps[..i].iter().chain(shadow.snapdir.components()))
            .map_err(status_of)?;
        match list_dir(&*share.backend, who, &dir) {
            Err(FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory) => {}
            r => return r.map_err(status_of),
        }
    }
    match shadow.outer.iter().find_map(|b| b.opened.as_deref()) {
        Some(dir) => list_dir(dir, who, &RelPath::root()).map_err(status_of),
        None => Err(NtStatus::INVALID_PARAMETER),
    }
}
