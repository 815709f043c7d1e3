//! What CREATE's open may do: the access the user has to the file, checked
//! against what the client asked ([MS-SMB2] 3.3.5.9 "Open Execution",
//! 3.3.5.9.5; [MS-FSA] 2.1.5.1.2.1; [MS-DTYP] 2.5.3.2 over a descriptor kept
//! with the file).

use ringshare_vfs::{OpenOptions, RelPath};
use ringshare_wire::NtStatus;

use super::open::Opened;
use super::request::Asked;
use super::At;
use crate::acl;
use crate::files::access::{self, DELETE, FILE_WRITE_DATA};
use crate::fsmap::status_of;
use crate::server::ShareDef;

/// The access the open is granted and the maximal access MxAc reports
/// (3.3.5.9.5), or ACCESS_DENIED. The open itself proved the data rights it
/// was made with; anything else the client asks (DELETE, WRITE_DAC,
/// EXECUTE, listing a directory the open could not read, MAXIMUM_ALLOWED,
/// the MxAc context) is asked of the kernel. A descriptor kept with the file
/// (acl_xattr) decides what is granted, as on Samba; the kernel still
/// decides every operation. Root (and `admin users`) are not held to it. A
/// legacy descriptor is rewritten in the current form when the user may.
pub(super) fn check(
    at: &At<'_>,
    now: crate::io::Now,
    asked: &Asked,
    opened: &Opened,
    granted: u32,
) -> Result<(u32, u32), NtStatus> {
    let (tree, path) = (at.tree, at.path);
    let share = &tree.share;
    let (node, attr, created) = (&opened.node, &opened.attr, opened.created);
    let (maximum, mxac) = (asked.maximum, asked.mxac);
    let wanted = asked.explicit | if asked.truncate { FILE_WRITE_DATA } else { 0 };
    let had = access::rights_of_open(opened.read, opened.write);
    let kept = if created || tree.admin {
        None
    } else {
        crate::ntsd::enforced(node.as_ref(), attr, share)?
    };
    let rights = if created {
        access::FILE_ALL_ACCESS
    } else if let Some((sd, _)) = &kept {
        let token = acl::Token::of(&tree.who, tree.authenticated, &tree.domain_sids);
        // FILE_READ_ATTRIBUTES comes with the right to reach the file
        // ([MS-FSA] 2.1.5.1.2.1), DELETE also from the parent directory.
        let mut r = acl::granted(sd, &token) | access::FILE_READ_ATTRIBUTES;
        if r & DELETE == 0 && (maximum || mxac || wanted & DELETE != 0) {
            r |= parent_delete_child(share, &tree.who, path, &token);
        }
        r
    } else if maximum || mxac || wanted & !had != 0 {
        let may_delete = (maximum || mxac || wanted & DELETE != 0)
            && !path.is_root()
            && share
                .backend
                .may_delete(&tree.who, path)
                .map_err(status_of)?;
        access::rights_of(node.access().map_err(status_of)?, attr.is_dir(), may_delete)
    } else {
        had
    };
    let wanted = wanted & !access::ACCESS_SYSTEM_SECURITY;
    if wanted & !rights != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let granted = granted & if maximum { rights | wanted } else { !0 };
    if let Some((_, crate::ntsd::Kept::Legacy)) = kept {
        if rights & access::WRITE_DAC != 0 {
            let ids = at.server.logons.ids(now.mono_ms);
            crate::ntsd::migrate(node.as_ref(), share, &ids, now.filetime);
        }
    }
    Ok((granted, tree.maximal & rights))
}

/// DELETE when the parent directory grants FILE_DELETE_CHILD ([MS-FSA]
/// 2.1.5.1.2.1) by a descriptor kept with it, or without one, when the
/// kernel would let the user remove the entry.
fn parent_delete_child(
    share: &ShareDef,
    who: &ringshare_vfs::Who,
    path: &RelPath,
    token: &acl::Token,
) -> u32 {
    let Some(parent) = path.parent() else {
        return 0;
    };
    let mut opts = OpenOptions::read_existing();
    opts.read = false;
    opts.directory = true;
    let Ok(dir) = share.backend.open(who, &parent, &opts) else {
        return 0;
    };
    let Ok(attr) = dir.node.stat_without_dos() else {
        return 0;
    };
    match crate::ntsd::enforced(dir.node.as_ref(), &attr, share) {
        // No descriptor kept with the parent: the kernel's rule for unlink.
        Ok(None) => match share.backend.may_delete(who, path) {
            Ok(true) => acl::DELETE,
            _ => 0,
        },
        Ok(Some((sd, _))) if acl::granted(&sd, token) & acl::FILE_DELETE_CHILD != 0 => acl::DELETE,
        _ => 0,
    }
}
