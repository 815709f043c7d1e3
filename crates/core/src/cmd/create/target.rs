//! What CREATE's name is on the share, and what its disposition does with it
//! ([MS-SMB2] 3.3.5.9 "Open Execution"; [MS-FSA] 2.1.5.1, 2.1.5.1.2.1).

use ringshare_vfs::{FileAttr, FsError, FsResult, OpenMode, OpenOptions, Opened, RelPath};
use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::NtStatus;

use super::request::Asked;
use super::TreeView;
use crate::cmd::resolve::resolve_path;
use crate::fileinfo::{self, ATTR_READONLY};
use crate::files::access::{FILE_APPEND_DATA, FILE_WRITE_DATA};
use crate::server::{lock, ServerState};

/// The name resolved, and what the disposition does with it.
pub(super) struct Target {
    /// The path as stored (the last component as given when it is new).
    pub path: RelPath,
    /// The file's attributes when it exists.
    pub existing: Option<FileAttr>,
    pub mode: OpenMode,
    /// The file is to be made.
    pub create: bool,
    /// The access granted so far, less write access to a read-only file.
    pub granted: u32,
    /// The file, already opened for the access granted when its name was found exactly
    /// ([`opened_exactly`]), or the kernel lease that open met: CREATE's open is then this.
    pub opened: Option<FsResult<Opened>>,
}

/// What [`opened_exactly`] did. (Returned once and taken apart at once: a box would cost an
/// allocation per CREATE to save a move.)
#[allow(clippy::large_enum_variant)]
enum Exact {
    /// Opened, and checked.
    Opened(Target),
    /// Met a local program's kernel lease, opened to read and/or write.
    LeaseHeld(bool, bool),
    /// Not such a CREATE, or not opened so.
    Not,
}

/// Resolve the name on the share and decide, from the disposition and what
/// is there, whether to open or create; refuse what the name cannot be
/// opened as ([MS-FSA] 2.1.5.1): a vetoed AppleDouble name, a collision, a
/// missing file, a kind mismatch, delete-pending, a read-only file or tree.
pub(super) fn resolve(
    server: &ServerState,
    tree: &TreeView,
    asked: &Asked,
) -> Result<Target, NtStatus> {
    let share = &tree.share;
    if asked
        .path
        .file_name()
        .is_some_and(|n| crate::fruit::vetoed(share, n))
    {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let lease_met = match opened_exactly(server, tree, asked)? {
        Exact::Opened(target) => return Ok(target),
        Exact::LeaseHeld(read, write) => Some((read, write)),
        Exact::Not => None,
    };
    let (path, existing) = resolve_path(
        share.backend.as_ref(),
        &tree.who,
        &asked.path,
        asked.posix.is_some(),
    )?;
    let stream = asked.named.is_some();
    let (mode, create) = disposition(existing.is_some(), asked.disposition, stream)?;
    if tree.read_only && (create || (asked.truncate && !stream)) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let granted = match &existing {
        Some(a) => check_existing(a, asked, || {
            if let Some(e) = server.files.existing(server.node.file_key(a)) {
                if lock(&e).delete_pending {
                    return true;
                }
            }
            false
        })?,
        None if asked.delete_on_close && asked.attrs_asked & ATTR_READONLY != 0 => {
            return Err(NtStatus::CANNOT_DELETE)
        }
        None => asked.granted,
    };
    // The same file opened the same way meets the same lease: that is the open's answer (a
    // second try in a row is not made).
    let opened =
        (lease_met == Some(rights_of(granted)) && existing.is_some() && path == asked.path)
            .then_some(Err(FsError::LeaseHeld));
    Ok(Target {
        path,
        existing,
        mode,
        create,
        granted,
        opened,
    })
}

/// Whether an open with access `granted` reads and whether it writes the file's data.
fn rights_of(granted: u32) -> (bool, bool) {
    (
        crate::files::access::can_read(granted),
        crate::files::access::can_write(granted),
    )
}

/// The common CREATE of an existing file, opened first: a plain open (OPEN or OPEN_IF, no
/// stream, no POSIX context) of a file or directory named exactly, on a
/// node alone (a cluster's node asks first whether the file's home lets it be opened:
/// `admission::refused_before_open`). The backend opens it in one walk of its path
/// ([`Share::open_exact`](ringshare_vfs::Share::open_exact)), and its attributes go through
/// the same checks as a looked-up file's ([`check_existing`]), so the answer is the one
/// [`resolve`] then [`super::open::open`] would give; the open is let go when a check
/// refuses. [`Exact::Not`]: not such a CREATE, or not opened so; it is looked up as before
/// (and a reason not to open it met there, in its place among the checks). A name not there
/// yet (OPEN_IF of a new file) costs the failed open on top.
fn opened_exactly(server: &ServerState, tree: &TreeView, asked: &Asked) -> Result<Exact, NtStatus> {
    let plain = matches!(
        asked.disposition,
        CreateDisposition::OPEN | CreateDisposition::OPEN_IF
    ) && !asked.truncate
        && !asked.want_dir
        && asked.named.is_none()
        && asked.posix.is_none()
        && server.node.link().is_none();
    if !plain {
        return Ok(Exact::Not);
    }
    // MAXIMUM_ALLOWED: the first of [`super::open::open`]'s tries (the rights granted); one the
    // kernel refuses is made the old way, which then tries with less.
    let (read, write) = rights_of(asked.granted);
    let opts = OpenOptions {
        read,
        write,
        non_directory: asked.want_file,
        ..OpenOptions::read_existing()
    };
    let backend = tree.share.backend.as_ref();
    let opened = match backend.open_exact(&tree.who, &asked.path, &opts) {
        Ok(o) => o,
        Err(FsError::LeaseHeld) => return Ok(Exact::LeaseHeld(read, write)),
        Err(_) => return Ok(Exact::Not),
    };
    let Some(attr) = opened.attr.clone() else {
        return Ok(Exact::Not);
    };
    let granted = check_existing(&attr, asked, || {
        server
            .files
            .existing(server.node.file_key(&attr))
            .is_some_and(|e| lock(&e).delete_pending)
    })?;
    // A read-only file's open loses its write access: opened again without it.
    let same_rights = rights_of(granted) == (read, write);
    Ok(Exact::Opened(Target {
        path: asked.path.clone(),
        existing: Some(attr),
        mode: OpenMode::Existing,
        create: false,
        granted,
        opened: same_rights.then_some(Ok(opened)),
    }))
}

/// What `disposition` does with a name that `exists` or not: open it or
/// make it (the backend's mode, and whether the file is made). For a
/// `stream` the disposition decides for the stream once the file is open,
/// so an existing file is opened whatever it says.
fn disposition(
    exists: bool,
    disposition: CreateDisposition,
    stream: bool,
) -> Result<(OpenMode, bool), NtStatus> {
    match (exists, disposition) {
        (true, CreateDisposition::CREATE) if !stream => Err(NtStatus::OBJECT_NAME_COLLISION),
        (true, _) => Ok((OpenMode::Existing, false)),
        (false, CreateDisposition::OPEN | CreateDisposition::OVERWRITE) => {
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        }
        (false, _) => Ok((OpenMode::CreateNew, true)),
    }
}

/// The checks of [MS-FSA] 2.1.5.1.2.1 on an existing file `a`, in their
/// order: the kind asked for, overwriting a directory, delete-pending (asked
/// of the file's entry only when it comes to that), and a read-only file,
/// which is never deleted, written or overwritten. Returns the access
/// granted, less write access to a read-only file.
fn check_existing(
    a: &FileAttr,
    asked: &Asked,
    delete_pending: impl FnOnce() -> bool,
) -> Result<u32, NtStatus> {
    let is_dir = a.is_dir();
    let stream = asked.named.is_some();
    if asked.want_dir && !is_dir {
        return Err(NtStatus::NOT_A_DIRECTORY);
    }
    if asked.want_file && is_dir {
        return Err(NtStatus::FILE_IS_A_DIRECTORY);
    }
    if is_dir && asked.truncate && !stream {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if delete_pending() {
        return Err(NtStatus::DELETE_PENDING);
    }
    if !stream && overwrite_hides_less(a, asked) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut granted = asked.granted;
    if fileinfo::attributes(a) & ATTR_READONLY != 0 && !is_dir {
        if asked.delete_on_close {
            return Err(NtStatus::CANNOT_DELETE);
        }
        if asked.explicit & (FILE_WRITE_DATA | FILE_APPEND_DATA) != 0 || asked.truncate {
            return Err(NtStatus::ACCESS_DENIED);
        }
        granted &= !(FILE_WRITE_DATA | FILE_APPEND_DATA);
    }
    Ok(granted)
}

/// Would an OVERWRITE(_IF) drop the existing file's HIDDEN or SYSTEM attribute
/// (the new attributes not naming it)? [MS-FSA] 2.1.5.1.2.1 refuses it with
/// ACCESS_DENIED; SUPERSEDE is not checked (Samba 4.22 the same; smbtorture
/// smb2.openattr).
fn overwrite_hides_less(a: &FileAttr, asked: &Asked) -> bool {
    const KEPT: u32 = fileinfo::ATTR_HIDDEN | fileinfo::ATTR_SYSTEM;
    matches!(
        asked.disposition,
        CreateDisposition::OVERWRITE | CreateDisposition::OVERWRITE_IF
    ) && fileinfo::attributes(a) & KEPT & !asked.attrs_asked != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fileinfo::{ATTR_HIDDEN, ATTR_SYSTEM};
    use crate::files::access::{DELETE, FILE_READ_DATA};
    use ringshare_vfs::FileKind;

    fn asked(disposition: CreateDisposition, explicit: u32) -> Asked {
        Asked::plain(disposition, explicit)
    }

    fn read_only_file() -> FileAttr {
        FileAttr {
            dos_attributes: Some(ATTR_READONLY),
            ..FileAttr::default()
        }
    }

    #[test]
    fn creating_an_existing_name_collides_unless_a_stream_is_made_in_it() {
        let d = CreateDisposition::CREATE;
        assert_eq!(
            disposition(true, d, false),
            Err(NtStatus::OBJECT_NAME_COLLISION)
        );
        assert_eq!(disposition(true, d, true), Ok((OpenMode::Existing, false)));
    }

    #[test]
    fn a_missing_name_is_made_unless_the_disposition_only_opens() {
        for d in [CreateDisposition::OPEN, CreateDisposition::OVERWRITE] {
            let r = disposition(false, d, false);
            assert_eq!(r, Err(NtStatus::OBJECT_NAME_NOT_FOUND));
        }
        for d in [
            CreateDisposition::SUPERSEDE,
            CreateDisposition::CREATE,
            CreateDisposition::OPEN_IF,
            CreateDisposition::OVERWRITE_IF,
        ] {
            assert_eq!(
                disposition(false, d, false),
                Ok((OpenMode::CreateNew, true))
            );
        }
    }

    #[test]
    fn a_kind_mismatch_wins_over_delete_pending() {
        let mut a = asked(CreateDisposition::OPEN, FILE_READ_DATA);
        a.want_dir = true;
        let r = check_existing(&FileAttr::default(), &a, || true);
        assert_eq!(r, Err(NtStatus::NOT_A_DIRECTORY));
        a.want_dir = false;
        let r = check_existing(&FileAttr::default(), &a, || true);
        assert_eq!(r, Err(NtStatus::DELETE_PENDING));
    }

    #[test]
    fn an_overwrite_must_keep_the_hidden_and_system_attributes_but_a_supersede_need_not() {
        for (had, asks, refused) in [
            (ATTR_HIDDEN, 0, true),
            (ATTR_HIDDEN, ATTR_HIDDEN, false),
            (ATTR_SYSTEM, ATTR_HIDDEN, true),
            (
                ATTR_HIDDEN | ATTR_SYSTEM,
                ATTR_HIDDEN | ATTR_SYSTEM | ATTR_READONLY,
                false,
            ),
            (0, ATTR_HIDDEN, false),
        ] {
            let file = FileAttr {
                dos_attributes: Some(had),
                ..FileAttr::default()
            };
            for d in [
                CreateDisposition::OVERWRITE,
                CreateDisposition::OVERWRITE_IF,
            ] {
                let mut a = asked(d, FILE_WRITE_DATA);
                a.truncate = true;
                a.attrs_asked = asks;
                let r = check_existing(&file, &a, || false);
                assert_eq!(r.is_err(), refused, "{had:#x} -> {asks:#x}: {r:?}");
            }
            let mut a = asked(CreateDisposition::SUPERSEDE, FILE_WRITE_DATA);
            a.truncate = true;
            a.attrs_asked = asks;
            assert!(check_existing(&file, &a, || false).is_ok());
        }
    }

    #[test]
    fn a_directory_is_never_overwritten() {
        let mut a = asked(CreateDisposition::OVERWRITE_IF, FILE_READ_DATA);
        a.truncate = true;
        let dir = FileAttr {
            kind: FileKind::Directory,
            ..FileAttr::default()
        };
        let r = check_existing(&dir, &a, || false);
        assert_eq!(r, Err(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn a_read_only_file_is_not_opened_for_writing_and_loses_write_rights_otherwise() {
        let a = asked(CreateDisposition::OPEN, FILE_WRITE_DATA);
        let r = check_existing(&read_only_file(), &a, || false);
        assert_eq!(r, Err(NtStatus::ACCESS_DENIED));
        let mut a = asked(CreateDisposition::OPEN, FILE_READ_DATA);
        a.granted = FILE_READ_DATA | FILE_WRITE_DATA | FILE_APPEND_DATA;
        assert_eq!(
            check_existing(&read_only_file(), &a, || false),
            Ok(FILE_READ_DATA)
        );
    }

    #[test]
    fn a_read_only_file_cannot_be_deleted_on_close() {
        let mut a = asked(CreateDisposition::OPEN, DELETE);
        a.delete_on_close = true;
        let r = check_existing(&read_only_file(), &a, || false);
        assert_eq!(r, Err(NtStatus::CANNOT_DELETE));
    }
}
