//! CREATE of a named stream (`file:stream`): the file is opened (or made)
//! first, then the stream in it, as the disposition says for the stream
//! ([MS-FSA] 2.1.5.1, 2.1.5.1.2.1; `streams_xattr`, and `fruit`'s AFP
//! streams: [`crate::fruit`]).

use std::sync::Arc;

use ringshare_vfs::{FileAttr, FsError, Node, OpenMode, RelPath, Share, EOPNOTSUPP};
use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::NtStatus;

use super::open::Opened;
use super::request::Asked;
use super::At;
use crate::files::access;
use crate::fsmap::status_of;
use crate::server::lock;

/// What a CREATE opened (the file, or its named stream) and what it made.
#[derive(Clone)]
pub(super) struct Made {
    /// The open's attributes (a stream's: its file's metadata, its size).
    pub attr: FileAttr,
    /// This CREATE made what it opens (the stream, for a stream).
    pub created: bool,
    pub is_dir: bool,
    /// The stream's name as stored, for a stream.
    pub stream_name: Option<String>,
    /// The file itself (the open's node too, without a stream).
    pub file_node: Arc<dyn Node>,
    pub file_created: bool,
    pub file_is_dir: bool,
    /// The access the open is granted, and the maximal access MxAc reports.
    pub granted: u32,
    pub maximal: u32,
}

impl Made {
    /// The nodes an open of `node` (what this CREATE opened) holds: its own, and for a named
    /// stream its file's too ([`Made::file_node`], opened to reach the stream).
    pub(super) fn nodes(&self, node: &Arc<dyn Node>) -> Vec<Arc<dyn Node>> {
        let mut nodes = vec![Arc::clone(node)];
        if self.stream_name.is_some() {
            nodes.push(Arc::clone(&self.file_node));
        }
        nodes
    }

    /// Undo what this CREATE made (the stream, then the file), when it
    /// fails after making them.
    pub(super) fn undo(&self, at: &At<'_>) {
        if let (Some(n), true) = (&self.stream_name, self.created) {
            let _ = self.file_node.remove_stream(n);
        }
        if self.file_created {
            self.remove_file(at);
        }
    }

    /// The file this CREATE made removed from its path (a directory with rmdir).
    fn remove_file(&self, at: &At<'_>) {
        let (backend, who) = (&at.tree.share.backend, &at.tree.who);
        let _ = if self.file_is_dir {
            backend.rmdir(who, at.path)
        } else {
            backend.unlink(who, at.path)
        };
    }

    /// [`Made::undo`] in a file system job, the CREATE refused on the I/O thread after its
    /// first job (issue 33: [`super::offload::undo_job`]). Other clients may have reached what
    /// it made meanwhile: what another open holds now (its entry has opens) is left to it,
    /// and the file is removed only while its name still names the file this CREATE made.
    pub(super) fn undo_unshared(&self, at: &At<'_>) {
        let files = &at.server.files;
        let file = at.server.node.file_key(&self.attr);
        let held = |k| {
            files
                .existing(k)
                .is_some_and(|e| !lock(&e).opens.is_empty())
        };
        if let (Some(n), true) = (&self.stream_name, self.created) {
            if !held(file.stream(n)) {
                let _ = self.file_node.remove_stream(n);
            }
        }
        if !self.file_created || held(file) {
            return;
        }
        let (backend, who) = (&at.tree.share.backend, &at.tree.who);
        let same = |a: FileAttr| (a.dev, a.ino) == (self.attr.dev, self.attr.ino);
        if backend.stat(who, at.path).is_ok_and(same) {
            self.remove_file(at);
        }
    }
}

/// The open's node and what it is: the file's, or for a named stream the
/// stream's, opened (or made) now in the file: the disposition decides for
/// the stream, and the open from here on is the stream's (its own share
/// modes, oplocks, leases, locks and delete-on-close; the file's metadata).
/// A file this CREATE made is removed again when its stream cannot be had.
pub(super) fn open_named(
    at: &At<'_>,
    aapl_negotiated: bool,
    asked: &Asked,
    opened: Opened,
    (granted, maximal): (u32, u32),
) -> Result<(Arc<dyn Node>, Made), NtStatus> {
    let Opened {
        node,
        attr,
        created,
        ..
    } = opened;
    let is_dir = attr.is_dir();
    let file = Made {
        attr,
        created,
        is_dir,
        stream_name: None,
        file_node: Arc::clone(&node),
        file_created: created,
        file_is_dir: is_dir,
        granted,
        maximal,
    };
    let Some(sname) = &asked.named else {
        return Ok((node, file));
    };
    let (share, who, path) = (&at.tree.share, &at.tree.who, at.path);
    let backend: &dyn Share = share.backend.as_ref();
    let file_node = &file.file_node;
    let undo = |s: NtStatus| {
        if file.file_created {
            let _ = backend.unlink(who, path);
        }
        s
    };
    let disposition = asked.disposition;
    let read_only = at.tree.read_only;
    let in_appledouble = crate::fruit::keeps_appledouble(share)
        && sname.eq_ignore_ascii_case(crate::fruit::AFPRESOURCE_STREAM);
    // A `._` file macOS wrote is taken in first (Samba does it here).
    if let Some(f) = share.fruit.as_deref().filter(|_| !file.file_is_dir) {
        let afp = sname.eq_ignore_ascii_case(crate::fruit::AFPINFO_STREAM)
            || sname.eq_ignore_ascii_case(crate::fruit::AFPRESOURCE_STREAM);
        if afp && crate::fruit::keeps_appledouble(share) {
            if let Err(e) = crate::fruit::adouble::convert(backend, who, path, file_node, f) {
                tracing::debug!(path = %path.to_slash_path(), "AppleDouble file not converted: {e}");
            }
        }
    }
    let s = if in_appledouble {
        let at = (backend, who, path);
        open_fork(at, file_node, disposition, granted, read_only)
    } else {
        let fruit = share.fruit.as_deref();
        let truncate = asked.truncate;
        open_stream(
            file_node,
            fruit,
            sname,
            disposition,
            truncate,
            granted,
            read_only,
        )
    }
    .map_err(undo)?;
    let attr = s.node.stat().map_err(|e| {
        if s.created {
            let _ = file_node.remove_stream(&s.name);
        }
        undo(status_of(e))
    })?;
    // macOS (after AAPL on a fruit share) takes an empty stream
    // for a missing one: a plain open of it is NOT_FOUND (Samba).
    if disposition == CreateDisposition::OPEN
        && attr.size == 0
        && aapl_negotiated
        && share.fruit.is_some()
    {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let made = Made {
        attr,
        created: s.created,
        is_dir: false,
        stream_name: Some(s.name),
        ..file
    };
    Ok((s.node, made))
}

/// A named stream opened for CREATE: its node, its name as stored, and
/// whether this open made it.
struct StreamOpened {
    node: Arc<dyn Node>,
    name: String,
    created: bool,
}

/// Open (or make) named stream `name` of the file `file` is open on, as
/// `disposition` says ([MS-FSA] 2.1.5.1.2.1 for streams): found ignoring
/// case; never truncated here (after the share-mode check, as files).
fn open_stream(
    file: &Arc<dyn Node>,
    fruit: Option<&crate::fruit::Fruit>,
    name: &str,
    disposition: CreateDisposition,
    truncate: bool,
    granted: u32,
    read_only: bool,
) -> Result<StreamOpened, NtStatus> {
    use crate::fruit::afp::{self, Afp};
    let afp = afp::kind(fruit, name);
    if afp == Afp::Info && fruit.is_some_and(|f| f.metadata == crate::fruit::Metadata::Netatalk) {
        // Kept in the file's Netatalk metadata: no stream to open.
        let exists = afp::netatalk_exists(file.as_ref()).map_err(status_of)?;
        may_take(exists, disposition, read_only)?;
        return Ok(StreamOpened {
            node: Arc::new(afp::InfoNode::netatalk(Arc::clone(file))),
            name: crate::fruit::AFPINFO_STREAM.to_string(),
            created: !exists,
        });
    }
    let found = file.find_stream(name).map_err(status_of)?;
    // An AfpInfo exists only as 60 stored bytes; anything else there is a
    // placeholder a create may take over.
    let valid = match (&found, afp) {
        (Some(f), Afp::Info) => afp::is_stored_info(f.size),
        (f, _) => f.is_some(),
    };
    may_take(valid, disposition, false)?;
    let mode = if found.is_some() {
        OpenMode::Existing
    } else {
        OpenMode::CreateNew
    };
    if read_only && (mode == OpenMode::CreateNew || truncate) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let name = found.map_or_else(|| name.to_string(), |f| f.name);
    let write = access::can_write(granted) || truncate;
    let opened = file.open_stream(&name, mode, write).map_err(|e| match e {
        FsError::Other(EOPNOTSUPP) => NtStatus::OBJECT_NAME_INVALID,
        e => status_of(e),
    })?;
    Ok(StreamOpened {
        node: match afp {
            Afp::Info => Arc::new(afp::InfoNode::new(opened.node)),
            _ => opened.node,
        },
        name,
        created: opened.created,
    })
}

/// What `disposition` allows for a stream that `exists` or not: an
/// existing one is not made again (COLLISION), a missing one is not opened
/// (NOT_FOUND); on a `read_only` tree none is made.
fn may_take(exists: bool, disposition: CreateDisposition, read_only: bool) -> Result<(), NtStatus> {
    match (exists, disposition) {
        (true, CreateDisposition::CREATE) => Err(NtStatus::OBJECT_NAME_COLLISION),
        (false, CreateDisposition::OPEN | CreateDisposition::OVERWRITE) => {
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        }
        (false, _) if read_only => Err(NtStatus::ACCESS_DENIED),
        _ => Ok(()),
    }
}

/// Open (or make) the resource fork of the file at `path` (open as `file`)
/// in its AppleDouble `._` file ([`crate::fruit::adouble`]), as
/// `disposition` says.
fn open_fork(
    (share, who, path): (&dyn Share, &ringshare_vfs::Who, &RelPath),
    file: &Arc<dyn Node>,
    disposition: CreateDisposition,
    granted: u32,
    read_only: bool,
) -> Result<StreamOpened, NtStatus> {
    use crate::fruit::adouble;
    let exists = match adouble::open(share, who, path, file, false, false) {
        Ok(_) => true,
        Err(FsError::NotFound) => false,
        Err(e) => return Err(status_of(e)),
    };
    may_take(exists, disposition, read_only)?;
    let (node, _) = adouble::open(share, who, path, file, !exists, access::can_write(granted))
        .map_err(status_of)?;
    Ok(StreamOpened {
        node,
        name: crate::fruit::AFPRESOURCE_STREAM.to_string(),
        created: !exists,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_stream_is_not_made_again_and_a_missing_one_is_not_opened() {
        let (create, open) = (CreateDisposition::CREATE, CreateDisposition::OPEN);
        assert_eq!(
            may_take(true, create, false),
            Err(NtStatus::OBJECT_NAME_COLLISION)
        );
        assert_eq!(
            may_take(false, open, false),
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        );
        assert_eq!(may_take(true, open, false), Ok(()));
    }

    #[test]
    fn no_stream_is_made_on_a_read_only_tree() {
        let open_if = CreateDisposition::OPEN_IF;
        assert_eq!(may_take(false, open_if, true), Err(NtStatus::ACCESS_DENIED));
        assert_eq!(may_take(true, open_if, true), Ok(()));
    }
}
