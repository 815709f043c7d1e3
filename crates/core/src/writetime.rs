//! The LastWriteTime clients see while a file is open: updated two seconds
//! after a handle's first write, at once on FLUSH / SET_INFO of a written
//! handle, and at close, not at every write (Windows' "delayed write time",
//! which Samba models with its share-mode write time; smbtorture
//! smb2.timestamps.delayed-*). ChangeTime follows it (`fileinfo::times`).
//!
//! Per file, in its [`crate::server::FileEntry`]: the time to report while a
//! write has not shown yet (`base`, the disk mtime before the first write),
//! a time a client set explicitly (`sticky`), and the pending two-second
//! update with the value it will report, so every reader sees the same
//! value whenever it looks. Per open: modified / update at close /
//! triggered / forced. The update "fires" lazily, at the first look after
//! its due time; every value reported is also written to the disk by the
//! handle operation that made or saw it, so the disk agrees once files are
//! closed. Without a write through ringshare nothing here is set and the
//! disk mtime is reported as it is.

use ringshare_vfs::{FileAttr, UnixNanos};

use std::sync::atomic::Ordering;

use crate::fsjob::keep_write_time;
use crate::io::Now;
use crate::server::{lock, FileTable, ServerState};
use crate::state::Open;

pub(crate) fn nanos(now: Now) -> UnixNanos {
    ringshare_wire::fscc::FileTime(now.filetime).to_unix_nanos()
}

/// `attr` (just read from the disk) with the write time clients should
/// see (see the module's text).
pub(crate) fn apply(files: &FileTable, open: &Open, attr: &mut FileAttr, now_ms: u64) {
    if files.write_times_shown.load(Ordering::Acquire) == 0 {
        // No open file shows a write time of its own: nothing to look up.
        return;
    }
    let (shown, fired) = lock(&open.entry).write_time.reported(now_ms);
    keep_write_time(open.node.as_ref(), fired);
    if let Some(t) = shown {
        attr.mtime = t;
    }
}

/// A WRITE (or a server-side copy or zeroing into the file) on `open`; `asked`: the file's
/// modification time before it, when a file system job read it (an offloaded share's first
/// WRITE), else it is read here when the file has no base yet.
pub(crate) fn wrote(
    files: &FileTable,
    open: &Open,
    now: Now,
    asked: Option<ringshare_vfs::FsResult<UnixNanos>>,
) {
    let needs = lock(&open.entry).write_time.needs_base();
    let disk = match asked {
        Some(mtime) => mtime.ok(),
        None if needs => open.node.stat_without_dos().ok().map(|a| a.mtime),
        None => None,
    };
    let mut e = lock(&open.entry);
    e.write_time.wrote(open.id, now.mono_ms, nanos(now), disk);
    e.write_time.count(&files.write_times_shown);
}

/// FLUSH or a SET_INFO that shows a written handle's update at once.
pub(crate) fn immediate(open: &Open, now: Now) {
    keep_write_time(open.node.as_ref(), immediate_booked(open, now));
}

/// The time [`immediate`] would show and write now, changing nothing: a file system job
/// writes it (a SET_INFO on a share whose calls may wait on a network), and
/// [`immediate_booked`] books it once the job's change is made.
pub(crate) fn immediate_time(open: &Open, now: Now) -> Option<UnixNanos> {
    let shows = lock(&open.entry).write_time.shows_now(open.id);
    shows.then(|| nanos(now))
}

/// [`immediate`] without the write to the disk: the time to write, if any (a file system job
/// writes it on a share whose calls may wait on a network).
pub(crate) fn immediate_booked(open: &Open, now: Now) -> Option<UnixNanos> {
    lock(&open.entry).write_time.immediate(open.id, nanos(now))
}

/// SET_INFO FileBasicInformation set the write time.
pub(crate) fn set_sticky(files: &FileTable, open: &Open, t: UnixNanos) {
    let mut e = lock(&open.entry);
    e.write_time.set_sticky(open.id, t);
    e.write_time.count(&files.write_times_shown);
}

/// The write time to list for the file `attr` describes, if an open of it
/// shows its own (a listing only looks: nothing is written).
pub(crate) fn listed(server: &ServerState, attr: &mut FileAttr, now_ms: u64) {
    if server.files.write_times_shown.load(Ordering::Acquire) == 0 {
        return;
    }
    let key = server.node.file_key(attr);
    if let Some(e) = server.files.existing(key) {
        if let Some(t) = lock(&e).write_time.peek(now_ms) {
            attr.mtime = t;
        }
    }
}

/// `open` closes (before its attributes are read for the reply).
pub(crate) fn closing(open: &Open, now: Now) {
    keep_write_time(open.node.as_ref(), closing_time(open, now));
}

/// [`closing`] without the write to the disk: the time to write, if any (a CLOSE on a share
/// whose calls are made away from the I/O thread writes it in a file system job).
pub(crate) fn closing_time(open: &Open, now: Now) -> Option<UnixNanos> {
    lock(&open.entry)
        .write_time
        .closing(open.id, now.mono_ms, nanos(now))
}
