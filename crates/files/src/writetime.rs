//! A file's write-time state: what LastWriteTime its opens report while a
//! write has not shown yet (`crate::writetime` has the rules and applies
//! them to handles).

use std::sync::atomic::{AtomicUsize, Ordering};

use ringshare_vfs::UnixNanos;

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
    /// Counted in `FileTable::write_times_shown` (crates/core).
    counted: bool,
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
    pub fn needs_base(&self) -> bool {
        self.base.is_none()
    }

    /// Handle `owner` wrote at `now_ms` (monotonic) / `now` (wall clock);
    /// `disk` is the disk mtime before the write (used for the first one).
    pub fn wrote(&mut self, owner: u64, now_ms: u64, now: UnixNanos, disk: Option<UnixNanos>) {
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
                    due_ms: now_ms + DELAY_MS,
                    time: now + UnixNanos::from(DELAY_MS) * 1_000_000,
                    owner,
                });
            }
        }
    }

    /// What [`WriteTime::reported`] would say, without changing anything
    /// (a directory listing reports; the next handle operation persists).
    pub fn peek(&self, now_ms: u64) -> Option<UnixNanos> {
        if self.idle() {
            return None;
        }
        let fired = self.pending.filter(|p| p.due_ms <= now_ms).map(|p| p.time);
        self.sticky.or(fired).or(self.base)
    }

    /// Whether the entry is counted (in `shown`, the server's count of files
    /// showing a write time of their own); counts it the first time it does.
    pub fn count(&mut self, shown: &AtomicUsize) {
        if !self.counted && !self.idle() {
            self.counted = true;
            shown.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The entry is dropped: it leaves `shown` if it was counted there.
    pub fn forget(&self, shown: &AtomicUsize) {
        if self.counted {
            shown.fetch_sub(1, Ordering::AcqRel);
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
    pub fn reported(&mut self, now_ms: u64) -> (Option<UnixNanos>, Option<UnixNanos>) {
        if self.idle() {
            return (None, None);
        }
        let persist = self.fire(now_ms);
        (self.sticky.or(self.base), persist)
    }

    /// FLUSH, or SET_INFO of sizes or basic information, on a written
    /// handle: its update shows now. Returns the time to persist.
    pub fn immediate(&mut self, owner: u64, now: UnixNanos) -> Option<UnixNanos> {
        let f = *self.flags(owner);
        if f & FORCED != 0 || f & MODIFIED == 0 {
            return None;
        }
        if self.pending.is_some_and(|p| p.owner == owner) {
            self.pending = None;
        }
        *self.flags(owner) = (f | TRIGGERED) & !ON_CLOSE;
        self.base = Some(now);
        Some(now)
    }

    /// Whether [`WriteTime::immediate`] would show handle `owner`'s update now (a written
    /// handle whose time no client set), changing nothing: a file system job writes that time
    /// before the change is booked (crates/core's SET_INFO on a share whose calls may wait on
    /// a network).
    pub fn shows_now(&self, owner: u64) -> bool {
        self.opens
            .iter()
            .find(|(o, _)| *o == owner)
            .is_some_and(|(_, f)| f & FORCED == 0 && f & MODIFIED != 0)
    }

    /// A client set the write time to `t` on handle `owner`: it sticks,
    /// and that handle's writes no longer move it.
    pub fn set_sticky(&mut self, owner: u64, t: UnixNanos) {
        *self.flags(owner) |= FORCED;
        if self.pending.is_some_and(|p| p.owner == owner) {
            self.pending = None;
        }
        self.sticky = Some(t);
    }

    /// Handle `owner` closes: the time to persist, if any (its pending
    /// update, its explicit time, or now when it wrote since the last
    /// update).
    pub fn closing(&mut self, owner: u64, now_ms: u64, now: UnixNanos) -> Option<UnixNanos> {
        let Some(i) = self.opens.iter().position(|(o, _)| *o == owner) else {
            return self.fire(now_ms);
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
            Some(now)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `shows_now` says what `immediate` would do and changes nothing: a handle that wrote shows
    /// its update now; one that did not, or whose time a client set, does not.
    #[test]
    fn shows_now_says_what_immediate_would_and_changes_nothing() {
        let mut w = WriteTime::default();
        assert!(!w.shows_now(1), "a handle that never wrote");
        w.wrote(1, 0, 10, Some(5));
        assert!(w.shows_now(1), "a written handle");
        assert!(w.shows_now(1), "asking again changed nothing");
        assert_eq!(w.peek(0), Some(5), "the base still shown");
        assert_eq!(w.immediate(1, 20), Some(20));
        w.set_sticky(1, 30);
        assert!(!w.shows_now(1), "its time set by a client");
        assert_eq!(w.immediate(1, 40), None);
        assert!(!w.shows_now(2), "another handle");
    }
}
