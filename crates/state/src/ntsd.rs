//! A file's Windows security descriptor, over its Unix permissions.
//!
//! By default (as Samba's `vfs_posixacl`) the descriptor *is* the file's
//! owner, group, mode and POSIX ACLs, mapped both ways by
//! [`ringshare_acl::posix`]: what a client reads is derived from them, and
//! what a client sets is written as a POSIX ACL (and owner/group), so the
//! kernel enforces it. With `vfs objects = acl_xattr` the full descriptor is
//! also kept in Samba's `security.NTACL` xattr ([`ringshare_acl::ntacl`]),
//! shown while it still matches the POSIX ACL it was stored over (Samba's
//! rule) and checked on top of the kernel's check. A descriptor older
//! ringshare kept in `user.ringshare.ntacl` is still shown and enforced, and
//! moved to the new place when its file is opened by someone who may.

use ringshare_acl::ntacl;
use ringshare_acl::posix::{self as pacl, AclChange, PosixView};
use ringshare_vfs::{DefaultAcl, FileAttr, FsError, Node, EOPNOTSUPP};
use ringshare_wire::consts::SecurityInformation;
use ringshare_wire::security::{
    AceBody, SecurityDescriptor, Sid, INHERIT_ONLY_ACE, SE_DACL_AUTO_INHERITED,
    SE_DACL_AUTO_INHERIT_REQ,
};
use ringshare_wire::NtStatus;

use crate::config::ShareDef;
use crate::domain::SidMap;
use crate::fileinfo;
use crate::fsmap::status_of;

/// What maps accounts to SIDs and back for [`set`]: Unix group memberships, and a domain
/// member's domain SIDs ([`SidMap`]).
pub struct Ids<'a> {
    pub groups: crate::identity::Membership<'a>,
    pub sids: &'a SidMap,
    /// Monotonic now, for the id source's answers ([`crate::sidcache`]).
    pub now_ms: u64,
}

/// The POSIX facts of a node as the mapping wants them.
pub(crate) fn posix_view(node: &dyn Node, attr: &FileAttr) -> Result<PosixView, NtStatus> {
    let acls = node.posix_acls().map_err(status_of)?;
    let kind = if attr.is_dir() { 0o040000 } else { 0o100000 };
    Ok(PosixView {
        uid: attr.uid,
        gid: attr.gid,
        mode: kind | (attr.mode & 0o7777),
        is_dir: attr.is_dir(),
        access_acl: acls.access,
        default_acl: acls.default,
    })
}

/// A descriptor ringshare stored in its own xattr before it mapped to POSIX
/// ACLs, if the file still has one (`seen`: the file as just stat'ed, if it was).
fn legacy(node: &dyn Node, seen: Option<&FileAttr>) -> Option<SecurityDescriptor> {
    let bytes = node.legacy_security_descriptor(seen).ok().flatten()?;
    SecurityDescriptor::decode(&bytes).ok()
}

/// The descriptor kept in `security.NTACL`, when the share keeps them and
/// the blob still matches the file's POSIX ACL (else Samba, and ringshare,
/// go by the POSIX ACL: someone changed it outside).
fn kept(node: &dyn Node, view: &PosixView) -> Option<SecurityDescriptor> {
    let blob = node.nt_acl_blob().ok().flatten()?;
    let stored = ntacl::decode(&blob).ok()?;
    ntacl::check(&stored, Some(view), None, false)
        .uses_stored()
        .then_some(stored.sd)
}

/// The descriptor a client reads.
pub fn descriptor(
    node: &dyn Node,
    attr: &FileAttr,
    share: &ShareDef,
    (sids, now_ms): (&SidMap, u64),
) -> Result<SecurityDescriptor, NtStatus> {
    if let Some(sd) = legacy(node, Some(attr)) {
        return Ok(sd);
    }
    let view = posix_view(node, attr)?;
    if share.nt_acl_xattr {
        if let Some(sd) = kept(node, &view) {
            return Ok(sd);
        }
    }
    let mut sd = pacl::sd_from_posix(&view);
    sids.to_domain(&mut sd, now_ms);
    Ok(sd)
}

/// Who a descriptor [`set`] stores comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// A client (SET_INFO, a CREATE SecD context): its control bits are
    /// taken as Windows takes them.
    Client,
    /// The server (inheritance, migration): stored as it is.
    Server,
}

/// Where a descriptor checked on top of the kernel's check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// `security.NTACL` of an `acl_xattr` share.
    Xattr,
    /// Older ringshare's `user.ringshare.ntacl`, still to be moved.
    Legacy,
}

/// The descriptor checked on top of the kernel's check at CREATE, if the
/// file has one: the one `acl_xattr` keeps, or an old one of ringshare's.
pub fn enforced(
    node: &dyn Node,
    attr: &FileAttr,
    share: &ShareDef,
) -> Result<Option<(SecurityDescriptor, Kept)>, NtStatus> {
    if let Some(sd) = legacy(node, Some(attr)) {
        return Ok(Some((sd, Kept::Legacy)));
    }
    if !share.nt_acl_xattr {
        return Ok(None);
    }
    let view = posix_view(node, attr)?;
    Ok(kept(node, &view).map(|sd| (sd, Kept::Xattr)))
}

/// Set the parts `info` selects of the file's descriptor to those of `given`
/// (SET_INFO, or a new file's SecD context), as Samba does: owner and group
/// by chown (as the user: the kernel lets only root give a file away), the
/// DACL as a POSIX ACL (as the user: only the owner may); DACLs the mapping
/// cannot express are left as they are with success, as Samba answers. With
/// `acl_xattr` the whole descriptor is kept too, and the POSIX ACL is written
/// as the server when the kernel refuses the user, since the client was
/// granted WRITE_DAC by the kept descriptor (Samba's rule).
pub fn set(
    node: &dyn Node,
    share: &ShareDef,
    given: &SecurityDescriptor,
    info: SecurityInformation,
    from: From,
    ids: &Ids<'_>,
    now_filetime: u64,
) -> Result<(), NtStatus> {
    let attr = node.stat_without_dos().map_err(status_of)?;
    let current = descriptor(node, &attr, share, (ids.sids, ids.now_ms))?;
    let mut merged = fileinfo::merge_security_descriptor(current, given, info);
    map_generic_rights(&mut merged);
    if info.contains(SecurityInformation::DACL) && from == From::Client {
        // A DACL set keeps AUTO_INHERITED only when the client asked with
        // AUTO_INHERIT_REQ too; the request bit itself is not kept
        // (Windows, Samba; smbtorture smb2.acls.INHERITFLAGS).
        let both = SE_DACL_AUTO_INHERIT_REQ | SE_DACL_AUTO_INHERITED;
        let auto = given.control & both == both;
        merged.control &= !both;
        if auto {
            merged.control |= SE_DACL_AUTO_INHERITED;
        }
    }
    let view = posix_view(node, &attr)?;
    // Domain SIDs with Unix ids become those ids' users and groups for the POSIX ACL; the
    // descriptor kept in security.NTACL keeps the domain SIDs.
    let mut for_posix = ids.sids.to_unix(&merged, ids.now_ms);
    if share.nt_acl_xattr {
        // An owner or group that is no Unix account (Everyone, BUILTIN...)
        // is kept in security.NTACL while the file keeps its Unix owner
        // (Samba's `force unknown acl user`, which acl_xattr turns on).
        if for_posix
            .owner
            .as_ref()
            .is_some_and(|s| s.unix_uid().is_none())
        {
            for_posix.owner = Some(Sid::unix_user(attr.uid));
        }
        if for_posix
            .group
            .as_ref()
            .is_some_and(|s| s.unix_gid().is_none())
        {
            for_posix.group = Some(Sid::unix_group(attr.gid));
        }
    }
    let change =
        pacl::posix_from_sd_with(&for_posix, info, &view, &ids.groups).map_err(|e| e.status())?;
    if change.uid.is_some() || change.gid.is_some() {
        // With acl_xattr the kept descriptor granted WRITE_OWNER: the
        // server makes the change the kernel refuses the user (Samba's rule).
        node.chown(change.uid, change.gid, share.nt_acl_xattr)
            .map_err(|e| match e {
                // Giving a file away (or to a group not one's own).
                FsError::AccessDenied => NtStatus::INVALID_OWNER,
                e => status_of(e),
            })?;
    }
    if let AclChange::Set(new) = &change.acl {
        let default = match (&new.default, view.is_dir) {
            (Some(d), true) => DefaultAcl::Set(d),
            (None, true) => DefaultAcl::Remove,
            (_, false) => DefaultAcl::Keep,
        };
        node.set_posix_acls(&new.access, default, share.nt_acl_xattr)
            .map_err(|e| match e {
                FsError::Other(EOPNOTSUPP) => NtStatus::NOT_SUPPORTED,
                e => status_of(e),
            })?;
    }
    if share.nt_acl_xattr {
        let attr = node.stat_without_dos().map_err(status_of)?;
        let after = posix_view(node, &attr)?;
        let mut fs_sd = pacl::sd_from_posix(&after);
        ids.sids.to_domain(&mut fs_sd, ids.now_ms);
        let blob = ntacl::encode_v4(&merged, &after, Some(&fs_sd), now_filetime)
            .map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
        node.set_nt_acl_blob(Some(&blob)).map_err(status_of)?;
    }
    if node
        .legacy_security_descriptor(None)
        .ok()
        .flatten()
        .is_some()
    {
        // The descriptor lives in its new place now.
        let _ = node.remove_legacy_security_descriptor();
    }
    Ok(())
}

/// The descriptor of `path`'s parent directory (stored, or made from its POSIX ACL), which
/// a file made at `path` inherits from; `None` at the share's root.
pub fn parent_descriptor(
    share: &ShareDef,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
    ids: &Ids<'_>,
) -> Result<Option<SecurityDescriptor>, NtStatus> {
    let Some(parent) = path.parent() else {
        return Ok(None);
    };
    let mut opts = ringshare_vfs::OpenOptions::read_existing();
    (opts.read, opts.directory) = (false, true);
    let dir = share.backend.open(who, &parent, &opts).map_err(status_of)?;
    let attr = dir.node.stat_without_dos().map_err(status_of)?;
    descriptor(dir.node.as_ref(), &attr, share, (ids.sids, ids.now_ms)).map(Some)
}

/// With `acl_xattr`: give a file just created the descriptor its parent's
/// inheritable ACEs make ([MS-DTYP] 2.5.3.4, [`ringshare_acl::inherit`]),
/// owned by its creator, kept and mapped to its POSIX ACL as any descriptor
/// set; nothing when the parent has nothing a child of this kind inherits
/// (the file then shows its POSIX ACL, as on Samba).
#[allow(clippy::too_many_arguments)]
pub fn inherit(
    share: &ShareDef,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
    node: &dyn Node,
    is_dir: bool,
    ids: &Ids<'_>,
    now_filetime: u64,
) -> Result<(), NtStatus> {
    let Some(parent_sd) = parent_descriptor(share, who, path, ids)? else {
        return Ok(());
    };
    let owner = Sid::unix_user(who.uid());
    let group = Sid::unix_group(who.gid());
    let Some(child) =
        ringshare_acl::inherit::child_descriptor(&parent_sd, None, is_dir, &owner, &group)
    else {
        return Ok(());
    };
    set(
        node,
        share,
        &child,
        SecurityInformation::DACL,
        From::Server,
        ids,
        now_filetime,
    )
}

/// Generic rights in the effective ACEs become the file rights they stand
/// for ([MS-DTYP] 2.4.3): a descriptor set with GENERIC_READ reads back with
/// FILE_GENERIC_READ, on Windows and Samba. Inherit-only ACEs keep theirs.
fn map_generic_rights(sd: &mut SecurityDescriptor) {
    let Some(dacl) = sd.dacl.as_mut() else {
        return;
    };
    for ace in &mut dacl.aces {
        if ace.flags & INHERIT_ONLY_ACE != 0 {
            continue;
        }
        if let AceBody::MaskSid { mask, .. } = &mut ace.body {
            *mask = ringshare_acl::inherit::map_generic_file_rights(*mask);
        }
    }
}

/// Move an old `user.ringshare.ntacl` descriptor to where it lives now (a
/// POSIX ACL, and with `acl_xattr` `security.NTACL`), when the user who
/// opened the file may set its ACL; otherwise it stays, still shown and
/// enforced, for someone who may.
pub fn migrate(node: &dyn Node, share: &ShareDef, ids: &Ids<'_>, now_filetime: u64) {
    let Some(old) = legacy(node, None) else {
        return;
    };
    let info = SecurityInformation::DACL;
    match set(node, share, &old, info, From::Server, ids, now_filetime) {
        Ok(()) => tracing::info!("moved a stored security descriptor to the file's POSIX ACL"),
        Err(s) => tracing::debug!("a stored security descriptor stays where it is for now: {s:?}"),
    }
}
