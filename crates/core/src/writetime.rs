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

use ringshare_vfs::{FileAttr, Node, SetTimes, UnixNanos};

use std::sync::atomic::Ordering;

use crate::io::Now;
use crate::server::{lock, ServerState};
use crate::state::Open;

/// How long after a handle's first write the new write time shows
/// (Samba's `smbd:writetimeupdatedelay` default).
pub(crate) const DELAY_MS: u64 = 2000;

const MODIFIED: u8 = 1;
const ON_CLOSE: u8 = 2;
const TRIGGERED: u8 = 4;
const FORCED: u8 = 8;

#[derive(Debug, Clone, Copy)]
struct Pending {
    due_ms: u64,
    time: UnixNanos,
    owner: u64,
}

/// A file's write-time state (in its `FileEntry`).
#[derive(Debug, Default)]
pub struct WriteTime {
    base: Option<UnixNanos>,
    sticky: Option<UnixNanos>,
    pending: Option<Pending>,
    opens: Vec<(u64, u8)>,
    /// Counted in `ServerState::write_times_shown`.
    counted: bool,
}

fn nanos(now: Now) -> UnixNanos {
    ringshare_wire::fscc::FileTime(now.filetime).to_unix_nanos()
}

impl WriteTime {
    fn flags(&mut self, owner: u64) -> &mut u8 {
        let i = match self.opens.iter().position(|(o, _)| *o == owner) {
            Some(i) => i,
            None => {
                self.opens.push((owner, 0));
                self.opens.len() - 1
            }
        };
        &mut self.opens[i].1
    }

    /// Nothing to hide or show: the disk's time is the file's.
    fn idle(&self) -> bool {
        self.base.is_none() && self.sticky.is_none()
    }

    /// The first write of a file since it was opened: the time to report
    /// until the update shows.
    pub(crate) fn needs_base(&self) -> bool {
        self.base.is_none()
    }

    /// Handle `owner` wrote; `disk` is the disk mtime before the write (used
    /// for the first one).
    pub(crate) fn wrote(&mut self, owner: u64, now: Now, disk: Option<UnixNanos>) {
        if self.base.is_none() {
            self.base = disk;
        }
        let has_pending = self.pending.is_some();
        let f = self.flags(owner);
        *f |= MODIFIED;
        if *f & FORCED == 0 {
            *f |= ON_CLOSE;
        }
        if *f & TRIGGERED == 0 {
            *f |= TRIGGERED;
            if !has_pending {
                self.pending = Some(Pending {
                    due_ms: now.mono_ms + DELAY_MS,
                    time: nanos(now) + UnixNanos::from(DELAY_MS) * 1_000_000,
                    owner,
                });
            }
        }
    }

    /// What [`WriteTime::reported`] would say, without changing anything
    /// (a directory listing reports; the next handle operation persists).
    pub(crate) fn peek(&self, now_ms: u64) -> Option<UnixNanos> {
        if self.idle() {
            return None;
        }
        let fired = self.pending.filter(|p| p.due_ms <= now_ms).map(|p| p.time);
        self.sticky.or(fired).or(self.base)
    }

    /// Whether the entry is counted as showing its own write time; counts
    /// it the first time it does.
    fn count(&mut self, server: &ServerState) {
        if !self.counted && !self.idle() {
            self.counted = true;
            server.write_times_shown.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The entry is dropped.
    pub(crate) fn forget(&self, server: &ServerState) {
        if self.counted {
            server.write_times_shown.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The pending update, if due: it becomes the base. Returns the time
    /// to write to the disk.
    fn fire(&mut self, now_ms: u64) -> Option<UnixNanos> {
        let p = self.pending.filter(|p| p.due_ms <= now_ms)?;
        self.pending = None;
        self.base = Some(p.time);
        *self.flags(p.owner) &= !ON_CLOSE;
        Some(p.time)
    }

    /// The write time to report now, if it is not the disk's, and a time to
    /// persist (an update that just fired).
    pub(crate) fn reported(&mut self, now_ms: u64) -> (Option<UnixNanos>, Option<UnixNanos>) {
        if self.idle() {
            return (None, None);
        }
        let persist = self.fire(now_ms);
        (self.sticky.or(self.base), persist)
    }

    /// FLUSH, or SET_INFO of sizes or basic information, on a written
    /// handle: its update shows now. Returns the time to persist.
    pub(crate) fn immediate(&mut self, owner: u64, now: Now) -> Option<UnixNanos> {
        let f = *self.flags(owner);
        if f & FORCED != 0 || f & MODIFIED == 0 {
            return None;
        }
        if self.pending.is_some_and(|p| p.owner == owner) {
            self.pending = None;
        }
        *self.flags(owner) = (f | TRIGGERED) & !ON_CLOSE;
        let t = nanos(now);
        self.base = Some(t);
        Some(t)
    }

    /// A client set the write time to `t` on handle `owner`: it sticks,
    /// and that handle's writes no longer move it.
    pub(crate) fn set_sticky(&mut self, owner: u64, t: UnixNanos) {
        *self.flags(owner) |= FORCED;
        if self.pending.is_some_and(|p| p.owner == owner) {
            self.pending = None;
        }
        self.sticky = Some(t);
    }

    /// Handle `owner` closes: the time to persist, if any (its pending
    /// update, its explicit time, or now when it wrote since the last
    /// update).
    pub(crate) fn closing(&mut self, owner: u64, now: Now) -> Option<UnixNanos> {
        let Some(i) = self.opens.iter().position(|(o, _)| *o == owner) else {
            return self.fire(now.mono_ms);
        };
        let mut persist = None;
        if self.pending.is_some_and(|p| p.owner == owner) {
            self.pending = None;
            self.opens[i].1 |= ON_CLOSE;
        }
        let (_, f) = self.opens.remove(i);
        let t = if f & FORCED != 0 {
            self.sticky
        } else if f & ON_CLOSE != 0 {
            Some(nanos(now))
        } else {
            None
        };
        if let Some(t) = t {
            self.base = Some(t);
            if self.sticky.is_some() {
                self.sticky = Some(t);
            }
            persist = Some(t);
        }
        persist
    }
}

/// Write a time the clients were shown to the disk.
fn persist(node: &dyn Node, t: Option<UnixNanos>) {
    if let Some(t) = t {
        let times = SetTimes {
            atime: None,
            mtime: Some(t),
            btime: None,
        };
        if let Err(e) = node.set_times(&times) {
            tracing::debug!("keeping the write time: {e}");
        }
    }
}

/// `attr` (just read from the disk) with the write time clients should
/// see (see the module's text).
pub(crate) fn apply(server: &ServerState, open: &Open, attr: &mut FileAttr, now_ms: u64) {
    if server.write_times_shown.load(Ordering::Acquire) == 0 {
        // No open file shows a write time of its own: nothing to look up.
        return;
    }
    let (shown, fired) = lock(&open.entry).write_time.reported(now_ms);
    persist(open.node.as_ref(), fired);
    if let Some(t) = shown {
        attr.mtime = t;
    }
}

/// A WRITE (or a server-side copy or zeroing into the file) on `open`.
pub(crate) fn wrote(server: &ServerState, open: &Open, now: Now) {
    let needs = lock(&open.entry).write_time.needs_base();
    let disk = if needs {
        open.node.stat_without_dos().ok().map(|a| a.mtime)
    } else {
        None
    };
    let mut e = lock(&open.entry);
    e.write_time.wrote(open.id, now, disk);
    e.write_time.count(server);
}

/// FLUSH or a SET_INFO that shows a written handle's update at once.
pub(crate) fn immediate(open: &Open, now: Now) {
    let t = lock(&open.entry).write_time.immediate(open.id, now);
    persist(open.node.as_ref(), t);
}

/// SET_INFO FileBasicInformation set the write time.
pub(crate) fn set_sticky(server: &ServerState, open: &Open, t: UnixNanos) {
    let mut e = lock(&open.entry);
    e.write_time.set_sticky(open.id, t);
    e.write_time.count(server);
}

/// The write time to list for the file `attr` describes, if an open of it
/// shows its own (a listing only looks: nothing is written).
pub(crate) fn listed(server: &ServerState, attr: &mut FileAttr, now_ms: u64) {
    if server.write_times_shown.load(Ordering::Acquire) == 0 {
        return;
    }
    let key = server.file_key(attr);
    if let Some(e) = server.existing_file_entry(key) {
        if let Some(t) = lock(&e).write_time.peek(now_ms) {
            attr.mtime = t;
        }
    }
}

/// `open` closes (before its attributes are read for the reply).
pub(crate) fn closing(open: &Open, now: Now) {
    let t = lock(&open.entry).write_time.closing(open.id, now);
    persist(open.node.as_ref(), t);
}
