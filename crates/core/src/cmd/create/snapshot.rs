//! A CREATE of a file as it was in a snapshot (Previous Versions, [MS-SMB2]
//! 3.3.5.9: an `@GMT-…` component of the name, or the TWrp create context,
//! 2.2.13.2.7, which wins), on a `shadow_copy2` share ([`crate::shadow`]).
//!
//! The token is taken out of the name and the CREATE goes on, unchanged,
//! on a view of the share whose root is the snapshot's directory
//! ([`ringshare_vfs::Share::read_only_view`]): the view's root is found
//! beneath the share's root as the user, and every name of the CREATE (and
//! of later requests on the open: a listing, a rename, a delete) is
//! resolved beneath that root by the backend (openat2 RESOLVE_BENEATH on
//! POSIX), so neither a crafted token nor `..` reaches anything outside
//! that one snapshot. The view is read-only: whatever would change a file
//! fails with MEDIA_WRITE_PROTECTED, as on Samba. On a share whose calls may wait on a
//! network the view is made in the CREATE's file system job ([`super::offload`]): the token is
//! taken out on the I/O thread ([`token_of`]), the view's calls ([`view`]) in the job.

use std::sync::Arc;

use ringshare_vfs::FsError;
use ringshare_wire::create::{decode_u64_context, ContextTag, CreateRequest};
use ringshare_wire::snapshot::GmtToken;
use ringshare_wire::NtStatus;

use super::TreeView;
use crate::fsmap::status_of;
use crate::server::ShareDef;
use crate::shadow::{split_token, NearestSnapshot};

/// The snapshot a CREATE names, if its share has snapshots: `cr`'s name loses its token.
/// `Ok(None)`: no snapshot is named (or the share has none). No file system call: the view
/// of the snapshot is made by [`view`] (on an offloaded share in the CREATE's job,
/// [`super::offload`]).
pub(super) fn token_of(
    cr: &mut CreateRequest<'_>,
    tree: &TreeView,
) -> Result<Option<GmtToken>, NtStatus> {
    if tree.share.shadow.is_none() {
        return Ok(None);
    }
    let twrp = match cr.context(ContextTag::TimewarpToken) {
        Some(c) => {
            let ft = decode_u64_context(&c.data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
            Some(GmtToken::from_filetime(ft).ok_or(NtStatus::INVALID_PARAMETER)?)
        }
        None => None,
    };
    let named = split_token(&cr.name).map(|(t, rest)| {
        cr.name = rest;
        t
    });
    Ok(twrp.or(named))
}

/// The share a CREATE naming snapshot `token` ([`token_of`]) works on: the snapshot's view
/// of `tree`'s share. Its calls (the snapshot directory listed when the token's name must
/// be found among its entries, the view's root opened) are made where this runs.
pub(super) fn view(tree: &TreeView, token: GmtToken) -> Result<Arc<ShareDef>, NtStatus> {
    let Some(shadow) = tree.share.shadow.as_deref() else {
        return Err(NtStatus::OBJECT_PATH_NOT_FOUND);
    };
    if shadow.everywhere && shadow.base.is_none() {
        return Ok(nearest(tree, shadow, token));
    }
    // Made from the token, or found among the snapshot directory's entries (a prefix, a
    // local time: shadow:snapprefix, shadow:localtime).
    let names = || crate::cmd::ioctl::snapshots::names(&tree.share, &tree.who, shadow).ok();
    let dir = shadow
        .name_of(token, names)
        .and_then(|name| shadow.snapshot_dir(&name))
        .ok_or(NtStatus::OBJECT_PATH_NOT_FOUND)?;
    // Beneath the share's root, or beneath the snapshot directory outside it.
    let source = match &shadow.base {
        Some(base) => base
            .opened
            .as_deref()
            .ok_or(NtStatus::OBJECT_PATH_NOT_FOUND)?,
        None => &*tree.share.backend,
    };
    let backend = source
        .read_only_view(&tree.who, &dir)
        .map_err(|e| match e {
            FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory => {
                NtStatus::OBJECT_PATH_NOT_FOUND
            }
            e => status_of(e),
        })?;
    let mut share = tree.share.with_backend(&tree.share.name, backend);
    // Within a snapshot, names are not looked up in snapshots again.
    share.shadow = None;
    Ok(Arc::new(share))
}

/// `shadow:snapdirseverywhere`: the snapshot as each directory of the share may hold it
/// ([`NearestSnapshot`]), the CREATE's name unchanged (its token taken out). A name no
/// directory's snapshot has is not found, as on Samba (OBJECT_NAME_NOT_FOUND for a file).
fn nearest(tree: &TreeView, shadow: &crate::shadow::ShadowCopy, token: GmtToken) -> Arc<ShareDef> {
    let view = NearestSnapshot::new(
        Arc::clone(&tree.share.backend),
        tree.who.clone(),
        shadow.clone(),
        token,
    );
    let mut share = tree.share.with_backend(&tree.share.name, Arc::new(view));
    share.shadow = None;
    Arc::new(share)
}
