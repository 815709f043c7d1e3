//! CREATE's open (or creation) of the file on the backend, as the tree's
//! user, never truncating: share modes are checked first ([MS-SMB2] 3.3.5.9
//! "Open Execution"; [MS-FSA] 2.1.5.1).

use std::sync::Arc;

use ringshare_vfs::{FileAttr, FsError, FsResult, Node, OpenOptions, RelPath, Share};
use ringshare_wire::NtStatus;

use super::request::Asked;
use super::target::Target;
use super::At;
use crate::files::access;
use crate::fsmap::status_of;
use crate::identity;

/// The file as the backend opened (or made) it.
pub(super) struct Opened {
    pub node: Arc<dyn Node>,
    pub attr: FileAttr,
    /// This open made it.
    pub created: bool,
    /// The data rights the open was made with.
    pub read: bool,
    pub write: bool,
}

/// Open (or make) the file as the tree's user: the kernel decides whether
/// they may read or write it. A new file gets its mode from the share's
/// rules and its parent ([`identity::new_mode`]). The attributes are those
/// the lookup read when the open found the same file. `pre`: the file as the look-up opened
/// it already ([`Target::opened`]), which is then the open.
pub(super) fn open(
    at: &At<'_>,
    asked: &Asked,
    target: &Target,
    pre: Option<FsResult<ringshare_vfs::Opened>>,
) -> Result<Opened, NtStatus> {
    match pre {
        Some(Ok(ringshare_vfs::Opened {
            node,
            attr: Some(attr),
            read,
            write,
            ..
        })) => {
            return Ok(Opened {
                node,
                attr,
                created: false,
                read,
                write,
            })
        }
        Some(Err(e)) => return Err(open_error(e, target)),
        Some(Ok(_)) | None => {}
    }
    let (share, who, path) = (&at.tree.share, &at.tree.who, at.path);
    let backend: &dyn Share = share.backend.as_ref();
    let existing = &target.existing;
    // Only a new file asks about its parent (and only then is the parent's path made).
    let parent = || existing.is_none().then(|| path.parent()).flatten();
    let parent_mode = match share.rules.inherit_permissions.then(parent).flatten() {
        Some(parent) => backend.stat(who, &parent).ok().map(|a| a.mode),
        None => None,
    };
    let parent_default_acl = match share.rules.inherit_acls.then(parent).flatten() {
        Some(parent) => has_default_acl(backend, who, &parent),
        None => false,
    };
    let want_dir = asked.want_dir;
    let create_mode = match asked.posix {
        Some(wire) => crate::cmd::posix::create_mode(&share.rules, want_dir, wire),
        None => identity::new_mode(
            &share.rules,
            want_dir,
            !want_dir,
            parent_mode,
            parent_default_acl,
        ),
    };
    let opts = options(asked, target, create_mode);
    let opened = backend
        .open(who, path, &opts)
        .map_err(|e| open_error(e, target))?;
    let created = opened.created;
    let (read, write) = (opened.read, opened.write);
    let node: Arc<dyn Node> = opened.node;
    // The metadata the open read, if the backend has it; the DOS attributes
    // of an existing file are those the lookup just read when the open
    // found the same file, and a new file has none yet.
    let found = match opened.attr {
        Some(a) => a,
        None => node.stat_without_dos().map_err(status_of)?,
    };
    let attr = match existing {
        Some(pre) if !created && (found.dev, found.ino) == (pre.dev, pre.ino) => {
            found.with_dos_of(pre)
        }
        None if created => found,
        _ => node.stat().map_err(status_of)?,
    };
    Ok(Opened {
        node,
        attr,
        created,
        read,
        write,
    })
}

/// What the backend's refusal to open `target` answers.
fn open_error(e: FsError, target: &Target) -> NtStatus {
    match e {
        FsError::NotFound if target.create => NtStatus::OBJECT_PATH_NOT_FOUND,
        FsError::LeaseHeld => super::LEASE_HELD,
        e => status_of(e),
    }
}

/// How the backend opens the file. For a named stream the file is opened
/// for nothing more than reaching the stream (its data is in the file's
/// xattrs, which the kernel checks as the user at each access); otherwise
/// for the data rights granted, and for writing when it is overwritten;
/// MAXIMUM_ALLOWED opens with what the kernel allows.
fn options(asked: &Asked, target: &Target, create_mode: u32) -> OpenOptions {
    if asked.named.is_some() {
        OpenOptions {
            mode: target.mode,
            read: false,
            write: false,
            directory: false,
            non_directory: false,
            create_mode,
            best_effort: false,
            no_follow: false,
        }
    } else {
        let granted = target.granted;
        OpenOptions {
            mode: target.mode,
            read: access::can_read(granted),
            write: access::can_write(granted) || (asked.truncate && target.existing.is_some()),
            directory: asked.want_dir,
            non_directory: asked.want_file,
            create_mode,
            best_effort: asked.maximum,
            // A POSIX open opens a symlink or special file itself (Samba 4.22).
            no_follow: asked.posix.is_some(),
        }
    }
}

/// Delete-on-close of a directory that holds entries fails at once
/// ([MS-FSA] 2.1.5.1.2.1: STATUS_DIRECTORY_NOT_EMPTY).
pub(super) fn refuse_nonempty_dir(asked: &Asked, opened: &Opened) -> Result<(), NtStatus> {
    if asked.delete_on_close
        && opened.attr.is_dir()
        && asked.named.is_none()
        && !opened.created
        && !opened.node.list_names().map_err(status_of)?.is_empty()
    {
        return Err(NtStatus::DIRECTORY_NOT_EMPTY);
    }
    Ok(())
}

/// Whether directory `dir` has a default POSIX ACL (for `inherit acls`).
fn has_default_acl(backend: &dyn Share, who: &ringshare_vfs::Who, dir: &RelPath) -> bool {
    let mut opts = OpenOptions::read_existing();
    (opts.read, opts.directory) = (false, true);
    backend
        .open(who, dir, &opts)
        .and_then(|d| d.node.posix_acls())
        .is_ok_and(|a| a.default.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::access::{FILE_READ_DATA, FILE_WRITE_DATA};
    use ringshare_vfs::OpenMode;
    use ringshare_wire::consts::CreateDisposition;

    fn target(existing: bool, granted: u32) -> Target {
        Target {
            path: RelPath::root(),
            existing: existing.then(FileAttr::default),
            mode: OpenMode::Existing,
            create: false,
            granted,
            opened: None,
        }
    }

    #[test]
    fn a_streams_file_is_opened_for_nothing_but_reaching_the_stream() {
        let mut asked = Asked::plain(CreateDisposition::OPEN, FILE_WRITE_DATA);
        asked.named = Some("s".to_string());
        asked.want_file = true;
        let o = options(
            &asked,
            &target(true, FILE_READ_DATA | FILE_WRITE_DATA),
            0o644,
        );
        assert!(!o.read && !o.write && !o.directory && !o.non_directory && !o.best_effort);
    }

    #[test]
    fn an_existing_file_that_is_overwritten_is_opened_for_writing() {
        let mut asked = Asked::plain(CreateDisposition::OVERWRITE, FILE_READ_DATA);
        asked.truncate = true;
        let o = options(&asked, &target(true, FILE_READ_DATA), 0o644);
        assert!(o.read && o.write);
        let o = options(&asked, &target(false, FILE_READ_DATA), 0o644);
        assert!(o.read && !o.write);
    }
}
