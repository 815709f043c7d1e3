//! Named data streams ([MS-FSCC] 2.1.4, [MS-FSA] 2.1.5.1.2.1): what a
//! stream open does differently from a file open, past CREATE (which opens
//! streams in `cmd::create`).
//!
//! A stream open has its own share-mode entry ([`crate::server::FileKey`]
//! with the stream's hash) and holds an invisible open of its file
//! ([`crate::state::StreamOf`]); its node reports the file's metadata with
//! the stream's size.

use ringshare_vfs::{FileAttr, FsError, EOPNOTSUPP};
use ringshare_wire::fscc::{FileRenameInformation, FileStreamEntry};
use ringshare_wire::NtStatus;

use crate::fileinfo;
use crate::fruit::afp::{self, Afp};
use crate::fsmap::status_of;
use crate::path::{parse_create_name, StreamPart};
use crate::server::{lock, ServerState};
use crate::state::{Open, StreamOf};

/// FileStreamInformation ([MS-FSCC] 2.4.43) of the file `open` is on (a
/// stream open lists its file's streams, as Windows): `::$DATA` first for a
/// file (a directory has none), then each named stream as `:name:$DATA`.
/// `attr`: the open's attributes. `apple`: the connection negotiated AAPL
/// on a `fruit` share, which lists no empty named stream (as Samba).
pub(crate) fn entries(
    open: &Open,
    attr: &FileAttr,
    apple: bool,
) -> Result<Vec<FileStreamEntry>, NtStatus> {
    let file = match &open.stream {
        None => attr.clone(),
        Some(s) => {
            let path = lock(&s.file_entry).path.clone();
            open.share
                .backend
                .stat(&open.who, &path)
                .map_err(status_of)?
        }
    };
    let mut out = Vec::new();
    if !file.is_dir() {
        let (eof, alloc) = fileinfo::sizes(&file);
        out.push(FileStreamEntry {
            stream_name: "::$DATA".to_string(),
            stream_size: eof,
            stream_allocation_size: alloc,
        });
    }
    let named = match open.node.list_streams() {
        Ok(list) => list,
        Err(FsError::Other(EOPNOTSUPP)) => Vec::new(),
        Err(e) => return Err(status_of(e)),
    };
    let fruit = open.share.fruit.as_deref();
    let netatalk = fruit.is_some_and(|f| f.metadata == crate::fruit::Metadata::Netatalk);
    // Kept in the `._` file: a stream of that name is not it.
    let appledouble = crate::fruit::keeps_appledouble(&open.share);
    let listed = |s: &ringshare_vfs::StreamInfo| match crate::fruit::afp::kind(fruit, &s.name) {
        // Kept in the Netatalk metadata: a stream of that name is not it.
        Afp::Info if netatalk => false,
        // An AfpInfo is listed when 60 bytes are stored and its FinderInfo
        // is not all zero (that one goes at close).
        Afp::Info => afp::is_stored_info(s.size) && !finder_info_cleared(open, &s.name),
        // A resource fork with data, on a file.
        Afp::Resource => s.size > 0 && !file.is_dir() && !appledouble,
        Afp::None => !apple || s.size > 0,
    };
    out.extend(named.into_iter().filter(listed).map(|s| FileStreamEntry {
        stream_name: format!(":{}:$DATA", s.name),
        stream_size: s.size,
        stream_allocation_size: s.size,
    }));
    if appledouble && !file.is_dir() {
        let path = match &open.stream {
            Some(s) => lock(&s.file_entry).path.clone(),
            None => lock(&open.entry).path.clone(),
        };
        let len = crate::fruit::adouble::fork_len(open.share.backend.as_ref(), &open.who, &path);
        if len > 0 {
            out.push(FileStreamEntry {
                stream_name: format!(":{}:$DATA", crate::fruit::AFPRESOURCE_STREAM),
                stream_size: len,
                stream_allocation_size: len,
            });
        }
    }
    if netatalk {
        let finder = open
            .node
            .netatalk_metadata()
            .ok()
            .flatten()
            .and_then(|m| crate::fruit::netatalk::finder_info(&m));
        if finder.is_some_and(|f| f.iter().any(|b| *b != 0)) {
            out.push(FileStreamEntry {
                stream_name: format!(":{}:$DATA", crate::fruit::AFPINFO_STREAM),
                stream_size: afp::AFP_INFO_SIZE as u64,
                stream_allocation_size: afp::AFP_INFO_SIZE as u64,
            });
        }
    }
    Ok(out)
}

/// Whether the stored AfpInfo `name` of the file `open` is on has all-zero
/// FinderInfo (read through the file's node; a stream open cannot, and
/// counts it as set).
fn finder_info_cleared(open: &Open, name: &str) -> bool {
    if open.stream.is_some() {
        return false;
    }
    let Ok(s) = open
        .node
        .open_stream(name, ringshare_vfs::OpenMode::Existing, false)
    else {
        return false;
    };
    let mut b = [0u8; afp::AFP_INFO_SIZE];
    matches!(s.node.read_at(&mut b, 0), Ok(afp::AFP_INFO_SIZE)) && afp::empty_finder_info(&b)
}

/// [MS-FSA] 2.1.5.14.11 FileRenameInformation on a stream open: the target
/// is another stream of the same file, `:name` or `:name:$DATA`. Refused:
/// a target with a file part (SHARING_VIOLATION, as Windows answers
/// smbtorture smb2.streams.rename2), a file name (INVALID_PARAMETER), the
/// default stream (NOT_SUPPORTED: its data would have to move into the
/// file), an existing target without ReplaceIfExists (COLLISION), one open
/// or holding data (SHARING_VIOLATION, INVALID_PARAMETER), and a stream
/// others have open too (SHARING_VIOLATION). On a share whose calls may wait on a network
/// [`rename_made`] runs in a job (crates/core's cmd/set_info/stream_move.rs).
pub(crate) fn rename(
    server: &ServerState,
    open: &Open,
    s: &StreamOf,
    r: &FileRenameInformation,
) -> Result<(), NtStatus> {
    let to = target_of(r)?;
    let (from, key) = lock(&s.now).clone();
    if to == from {
        return Ok(());
    }
    let new_key = key.base().stream(&to);
    let (open_now, shared) = table_facts(server, open, (&from, &to), new_key);
    let replace = r.replace_if_exists;
    rename_made(
        server,
        (open, s),
        (from, to),
        (key, new_key),
        (open_now, shared, replace),
    )
}

/// What a stream's rename from `from` to `to` (key `new_key`) reads of the server's table:
/// whether someone has the target open, and whether others have this stream open.
pub(crate) fn table_facts(
    server: &ServerState,
    open: &Open,
    (from, to): (&str, &str),
    new_key: crate::server::FileKey,
) -> (bool, bool) {
    let same = ringshare_vfs::stream_names_match(to, from);
    let open_now = !same && server.files.existing(new_key).is_some();
    (open_now, lock(&open.entry).opens.len() > 1)
}

/// A stream's rename from `from` (key `key`) to `to` (`new_key`), the table's facts read
/// ([`table_facts`]: here, or on the I/O thread before a job): the target's checks, the shared
/// stream refused, then (unless the rename only changes the name's case) the entry moved to the
/// new key, the rename, and the entry moved back when it failed; once made, the open follows
/// its stream and watchers hear of it. The stream's node renames its stream and follows it.
pub(crate) fn rename_made(
    server: &ServerState,
    (open, s): (&Open, &StreamOf),
    (from, to): (String, String),
    (key, new_key): (crate::server::FileKey, crate::server::FileKey),
    (open_now, shared, replace): (bool, bool, bool),
) -> Result<(), NtStatus> {
    let file = open.node.as_ref();
    let same = ringshare_vfs::stream_names_match(&to, &from);
    if !same {
        let found = file.find_stream(&to).map_err(status_of)?;
        target_free(found, open_now, replace)?;
    }
    if shared {
        return Err(NtStatus::SHARING_VIOLATION);
    }
    // A stream whose delete on close was decided meanwhile (its connection ended while this
    // ran in a job) is removed under its old name by the close's job, which runs after this
    // one: not renamed first, so that it is removed, as on a local share it is removed under
    // its new name (the review of session 49, finding 3). On the I/O thread it cannot be.
    if server
        .files
        .existing(key)
        .is_some_and(|e| lock(&e).removing)
    {
        return Err(NtStatus::DELETE_PENDING);
    }
    // The entry is gone when the open was closed meanwhile (its connection ended while this ran
    // in a job): the rename is made all the same, as the request asked, with no entry to move.
    let moved = !same && server.files.rekey(key, new_key);
    if !same && !moved && server.files.existing(key).is_some() {
        return Err(NtStatus::SHARING_VIOLATION);
    }
    if let Err(e) = file.rename_stream(&from, &to, replace) {
        if moved {
            server.files.rekey(new_key, key);
        }
        return Err(status_of(e));
    }
    // A CREATE of either name whose job looked before a job's rename and is answered after its
    // mark went is looked up again (`create::offload::stale`; the review of session 49,
    // finding 2). (A count of name changes: nothing else reads it on a local share.)
    let path = lock(&s.file_entry).path.clone();
    server.files.name_changed(&open.share.name, &path);
    Renamed { from, to, new_key }.told(server, open, s);
    Ok(())
}

/// The stream a stream's rename names ([`rename`]): `:name` or `:name:$DATA`, or the status
/// the rename is refused with.
pub(crate) fn target_of(r: &FileRenameInformation) -> Result<String, NtStatus> {
    let target = r.file_name.as_str();
    let (file_part, part) = parse_create_name(target, true)?;
    match part {
        StreamPart::Named(n) if target.starts_with(':') && file_part.is_root() => Ok(n),
        StreamPart::Named(_) => Err(NtStatus::SHARING_VIOLATION),
        StreamPart::Default => Err(NtStatus::NOT_SUPPORTED),
        StreamPart::None => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// Whether a stream's rename may replace what the file holds as its target (`found`, looked up
/// by name; `open`: someone has it open): OBJECT_NAME_COLLISION without ReplaceIfExists, an open
/// target SHARING_VIOLATION, one holding data INVALID_PARAMETER; no target is fine.
fn target_free(
    found: Option<ringshare_vfs::StreamInfo>,
    open: bool,
    replace: bool,
) -> Result<(), NtStatus> {
    match found {
        None => Ok(()),
        Some(_) if !replace => Err(NtStatus::OBJECT_NAME_COLLISION),
        Some(_) if open => Err(NtStatus::SHARING_VIOLATION),
        Some(t) if t.size > 0 => Err(NtStatus::INVALID_PARAMETER),
        Some(_) => Ok(()),
    }
}

/// A stream's rename made on disk ([`rename_made`]): the stream's old and new names and key.
struct Renamed {
    pub from: String,
    pub to: String,
    pub new_key: crate::server::FileKey,
}

impl Renamed {
    /// The open follows its stream (its name and key, and the file's entry's note of it), and
    /// watchers of the file's directory hear of the stream's new name.
    fn told(self, server: &ServerState, open: &Open, s: &StreamOf) {
        let Renamed { from, to, new_key } = self;
        let same = ringshare_vfs::stream_names_match(&to, &from);
        *lock(&s.now) = (to.clone(), new_key);
        let path = {
            let mut e = lock(&s.file_entry);
            for (o, k) in e.streams.iter_mut() {
                if *o == open.id {
                    *k = new_key;
                }
            }
            e.path.clone()
        };
        if !same {
            use crate::notify::{
                filter::STREAM_NAME, stream_changed, ADDED_STREAM, REMOVED_STREAM,
            };
            stream_changed(
                server,
                &open.share,
                &path,
                &from,
                REMOVED_STREAM,
                STREAM_NAME,
            );
            stream_changed(server, &open.share, &path, &to, ADDED_STREAM, STREAM_NAME);
        }
    }
}
