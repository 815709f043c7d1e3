//! A parsed name as the backend stores it ([MS-FSCC] 2.1.5.2): found exactly, else component
//! by component case-insensitively or by the 8.3 short name a listing gave. CREATE and a
//! SET_INFO rename's target both resolve names so.

use ringshare_vfs::{FileAttr, FsError, RelPath, Share};
use ringshare_wire::NtStatus;

use crate::fsmap::status_of;

/// Resolve a parsed name: exactly when it exists, else component by component
/// case-insensitively, or with `exact` (a POSIX open: names are case-sensitive,
/// as on Samba) not at all. Returns the path as stored (the last component as
/// given when it does not exist) and the file's attributes when it exists.
pub(crate) fn resolve_path(
    backend: &dyn Share,
    who: &ringshare_vfs::Who,
    path: &RelPath,
    exact: bool,
) -> Result<(RelPath, Option<FileAttr>), NtStatus> {
    match backend.stat(who, path) {
        Ok(a) => Ok((path.clone(), Some(a))),
        Err(FsError::NotFound) if exact => {
            // Missing: the name, or a directory on its way.
            let parent_is_dir = match path.parent() {
                Some(p) => backend.stat(who, &p).is_ok_and(|a| a.is_dir()),
                None => true,
            };
            if !parent_is_dir {
                return Err(NtStatus::OBJECT_PATH_NOT_FOUND);
            }
            Ok((path.clone(), None))
        }
        Err(FsError::PathNotFound | FsError::NotADirectory) if exact => {
            Err(NtStatus::OBJECT_PATH_NOT_FOUND)
        }
        Err(e @ (FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory)) => {
            resolve_folded(backend, who, path, e == FsError::NotFound)
        }
        Err(e) => Err(status_of(e)),
    }
}

/// The walk of a name the exact lookup missed. When only its last component was missing
/// (`parent_exists`: a backend says `NotFound` only when every directory on the way is there
/// as named), the directories on the way are taken as they are and only the last component
/// is looked for in its directory; else every component is, from the share's root. The
/// answer is the same either way (a name that exists as given is the one a case-insensitive
/// look takes), but each component looked for reads its directory: a new file's CREATE in
/// `a/b/c` would read the root, `a` and `a/b` whole, not `a/b` alone.
fn resolve_folded(
    backend: &dyn Share,
    who: &ringshare_vfs::Who,
    path: &RelPath,
    parent_exists: bool,
) -> Result<(RelPath, Option<FileAttr>), NtStatus> {
    let all = path.components();
    let (mut cur, comps) = match path.parent() {
        Some(parent) if parent_exists => (parent, &all[all.len() - 1..]),
        _ => (RelPath::root(), all),
    };
    for (i, comp) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        match find_stored_name(backend, who, &cur, comp) {
            Ok(stored) => cur = cur.join(&stored).map_err(status_of)?,
            Err(FsError::NotFound) if last => {
                let p = cur.join(comp).map_err(status_of)?;
                return Ok((p, None));
            }
            Err(FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory) => {
                return Err(NtStatus::OBJECT_PATH_NOT_FOUND)
            }
            Err(e) => return Err(status_of(e)),
        }
    }
    match backend.stat(who, &cur) {
        Ok(a) => Ok((cur, Some(a))),
        Err(FsError::NotFound) => Ok((cur, None)),
        Err(FsError::PathNotFound | FsError::NotADirectory) => Err(NtStatus::OBJECT_PATH_NOT_FOUND),
        Err(e) => Err(status_of(e)),
    }
}

/// The name `comp` has in directory `dir` as stored: the same name in another
/// case, or the file whose 8.3 short name it is ([MS-FSCC] 2.1.5.2.1: clients
/// open, delete and rename files by the short names directory listings gave
/// them; smbtorture smb2.name-mangling.mangle).
fn find_stored_name(
    backend: &dyn Share,
    who: &ringshare_vfs::Who,
    dir: &RelPath,
    comp: &str,
) -> Result<String, FsError> {
    match backend.find_name_case_insensitive(who, dir, comp) {
        Err(FsError::NotFound) if crate::shortname::may_be_derived(comp) => backend
            .find_name_matching(who, dir, &|n| {
                n != comp && crate::shortname::short_name(n).eq_ignore_ascii_case(comp)
            }),
        other => other,
    }
}
