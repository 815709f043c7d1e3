//! What CREATE changes in the file once its open holds its place (so a
//! refused open never changes it): overwrite or supersede, attributes,
//! allocation, owner, security and EAs ([MS-SMB2] 3.3.5.9 "Open Execution",
//! 3.3.5.9.1, 3.3.5.9.2, 3.3.5.9.3; [MS-FSA] 2.1.5.1.2.1).

use std::sync::Arc;

use ringshare_vfs::{FileAttr, FsError, Node, EOPNOTSUPP};
use ringshare_wire::consts::{CreateAction, CreateDisposition, SecurityInformation};
use ringshare_wire::security::{SecurityDescriptor, SE_DACL_PRESENT};
use ringshare_wire::NtStatus;

use super::admission::Admitted;
use super::request::Asked;
use super::stream::Made;
use super::At;
use crate::fileinfo::{self, ATTR_ARCHIVE};
use crate::fsmap::status_of;
use crate::identity;
use crate::io::Now;
use crate::server::{ServerState, ShareDef};

/// The file as the answer shows it.
pub(super) struct Changed {
    pub action: CreateAction,
    pub attr: FileAttr,
    /// A POSIX open's stored reparse buffer ([`crate::cmd::reparse::stored`]) when it was read
    /// in a file system job ([`super::offload`]); `None`: read when the answer is made.
    pub reparse: Option<Option<Vec<u8>>>,
}

/// CreateOptions FILE_NO_COMPRESSION ([MS-SMB2] 2.2.13).
const FILE_NO_COMPRESSION: u32 = 0x0000_8000;

/// Change the file as the disposition and the contexts ask; on failure the
/// open leaves the file's entry (and an EA failure removes what it made).
pub(super) fn apply(
    at: &At<'_>,
    now: Now,
    asked: &Asked,
    adm: &Admitted,
) -> Result<Changed, NtStatus> {
    apply_to(at, now, asked, (&adm.node, &adm.made), &|s| {
        adm.leave(at, s)
    })
}

/// [`apply`] to the open's `node` and what the CREATE `made`, before it holds its place in its
/// file's entry too (a new file's changes in a file system job: [`super::offload`]); `leave`
/// undoes the open's place, if it has one, and returns the status it is given.
pub(super) fn apply_to(
    at: &At<'_>,
    now: Now,
    asked: &Asked,
    opened: (&Arc<dyn Node>, &Made),
    leave: &dyn Fn(NtStatus) -> NtStatus,
) -> Result<Changed, NtStatus> {
    let action = overwrite(at, asked, opened, leave)?;
    let attr = set_up(at, now, asked, opened, leave)?;
    Ok(Changed {
        action,
        attr,
        reparse: None,
    })
}

/// Truncate an overwritten or superseded file (which keeps no named
/// streams), give a new or overwritten file the attributes (a stream open
/// gives them only when it made the file) and the allocation (AlSi,
/// 3.3.5.9.3) asked for. Returns the CreateAction.
fn overwrite(
    at: &At<'_>,
    asked: &Asked,
    (node, made): (&Arc<dyn Node>, &Made),
    leave: &dyn Fn(NtStatus) -> NtStatus,
) -> Result<CreateAction, NtStatus> {
    let (created, is_dir, truncate) = (made.created, made.is_dir, asked.truncate);
    let attrs_asked = if made.stream_name.is_some() && !made.file_created {
        0
    } else {
        asked.attrs_asked
    };
    let mut action = if created {
        CreateAction::CREATED
    } else {
        CreateAction::OPENED
    };
    if truncate && !created {
        node.set_len(0).map_err(|e| leave(status_of(e)))?;
        if made.stream_name.is_none() && !is_dir {
            // An overwritten file keeps no named streams ([MS-FSA] 2.1.5.1.2.1).
            match node.remove_all_streams() {
                Ok(()) | Err(FsError::Other(EOPNOTSUPP)) => {}
                Err(e) => return Err(leave(status_of(e))),
            }
        }
        action = if asked.disposition == CreateDisposition::SUPERSEDE {
            CreateAction::SUPERSEDED
        } else {
            CreateAction::OVERWRITTEN
        };
    }
    if (created || truncate) && !is_dir && attrs_asked != 0 {
        node.set_dos_attributes(attrs_asked | ATTR_ARCHIVE)
            .map_err(|e| leave(status_of(e)))?;
    } else if created && is_dir && attrs_asked != 0 {
        node.set_dos_attributes(attrs_asked | fileinfo::ATTR_DIRECTORY)
            .map_err(|e| leave(status_of(e)))?;
    }
    // FILE_NO_COMPRESSION: a file or directory made in a compressed directory does not take
    // its compression (btrfs passes it on), as on Samba with vfs_btrfs.
    if created
        && made.stream_name.is_none()
        && asked.options & FILE_NO_COMPRESSION != 0
        && at.tree.share.backend.compresses()
    {
        if let Err(e) = node.set_compressed(false) {
            tracing::debug!(?e, "a new file's compression could not be turned off");
        }
    }
    if let (true, false, Some(size)) = (created || truncate, is_dir, asked.alloc_given) {
        match node.set_allocation(size) {
            // An open without write access gets no allocation, as on Samba.
            Ok(()) | Err(FsError::AccessDenied) => {}
            Err(e) => return Err(leave(status_of(e))),
        }
    }
    Ok(action)
}

/// Give a new file its owner (`inherit owner`), its NT ACL (inherited from
/// the parent's, or the SecD context's, 3.3.5.9.2) and a new or overwritten
/// file its EAs (ExtA, 3.3.5.9.1). Returns the attributes the answer shows:
/// an open of a file another handle is writing shows that file's write time
/// as the other handles see it ([`crate::writetime`]).
fn set_up(
    at: &At<'_>,
    now: Now,
    asked: &Asked,
    (node, made): (&Arc<dyn Node>, &Made),
    leave: &dyn Fn(NtStatus) -> NtStatus,
) -> Result<FileAttr, NtStatus> {
    let (server, share, who, path) = (at.server, &at.tree.share, &at.tree.who, at.path);
    let (created, truncate) = (made.created, asked.truncate);
    let (file_node, file_created) = (&made.file_node, made.file_created);
    // The creator owns what it creates (the kernel made it theirs, with the
    // group a setgid directory gives); `inherit owner` gives it to the
    // parent directory's owner instead.
    if file_created && share.rules.inherit_owner != identity::InheritOwner::No {
        if let Some(parent) = path.parent() {
            if let Ok(p) = share.backend.stat(who, &parent) {
                if let Err(e) = file_node.set_owner(p.uid) {
                    tracing::debug!(
                        "inherit owner: cannot give a new file to uid {}: {e}",
                        p.uid
                    );
                }
            }
        }
    }
    if file_created && share.nt_acl_xattr && !asked.dacl_given() {
        // The parent's inheritable ACEs make the new file's NT ACL.
        let ids = server.logons.ids(now.mono_ms);
        let is_dir = made.file_is_dir;
        crate::ntsd::inherit(
            share,
            who,
            path,
            file_node.as_ref(),
            is_dir,
            &ids,
            now.filetime,
        )
        .map_err(leave)?;
    }
    if let (true, Some(given)) = (file_created, &asked.sd_given) {
        store_initial_sd(server, now, file_node.as_ref(), share, given).map_err(leave)?;
    }
    let new_content = file_created || (truncate && made.stream_name.is_none());
    if let (true, Some(eas)) = (new_content, &asked.eas_given) {
        store_initial_eas(file_node.as_ref(), eas, !file_created).map_err(|s| {
            // Not left half-made: the client retries without EAs when they
            // are not supported.
            made.undo(at);
            leave(s)
        })?;
    }
    // Read once, after everything above changed it: a new file that
    // cannot be looked at is not kept.
    let mut attr = if created || truncate {
        node.stat().map_err(|e| leave(status_of(e)))?
    } else {
        made.attr.clone()
    };
    if !created {
        crate::writetime::listed(server, &mut attr, now.mono_ms);
    }
    Ok(attr)
}

/// Give a file just created the descriptor of a SecD context: its owner,
/// group and DACL over what the file got (its POSIX ACL, as the parent's
/// default ACL made it). Without SE_DACL_PRESENT the file keeps its DACL
/// (the one it inherited; smbtorture smb2.create.nulldacl). A backend that
/// cannot store ACLs leaves the file as it is.
fn store_initial_sd(
    server: &ServerState,
    now: Now,
    node: &dyn Node,
    share: &ShareDef,
    given: &SecurityDescriptor,
) -> Result<(), NtStatus> {
    let mut info = SecurityInformation::empty();
    if given.owner.is_some() {
        info |= SecurityInformation::OWNER;
    }
    if given.group.is_some() {
        info |= SecurityInformation::GROUP;
    }
    if given.control & SE_DACL_PRESENT != 0 {
        info |= SecurityInformation::DACL;
    }
    if info.is_empty() {
        return Ok(());
    }
    let ids = server.logons.ids(now.mono_ms);
    let from = crate::ntsd::From::Client;
    match crate::ntsd::set(node, share, given, info, from, &ids, now.filetime) {
        Err(NtStatus::NOT_SUPPORTED) => Ok(()),
        r => r,
    }
}

/// Give a new or overwritten file the EAs of an ExtA context; an
/// overwritten file loses the ones it had ([MS-FSA] 2.1.5.1.2.1).
fn store_initial_eas(
    node: &dyn Node,
    eas: &[(String, Vec<u8>)],
    replace: bool,
) -> Result<(), NtStatus> {
    if replace {
        let old = match node.list_eas() {
            Ok(old) => old,
            Err(FsError::Other(EOPNOTSUPP)) => Vec::new(),
            Err(e) => return Err(status_of(e)),
        };
        for (name, _) in old {
            node.set_ea(&name, None).map_err(status_of)?;
        }
    }
    crate::cmd::query_info::apply_eas(node, eas)
}
