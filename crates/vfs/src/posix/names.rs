//! The names of large directories, kept in memory and kept true by inotify, so that a name not
//! found as given is looked for case-insensitively ([MS-FSCC] 2.1.5.2) without reading its
//! directory whole. Without it every CREATE of a new file reads the directory it goes in from
//! start to end (a miss must have looked at every name), so filling a directory with n files
//! reads about n²/2 entries: 37,983 getdents64 calls for 4,720 files in one benchmark round
//! (docs/benchmarks.md, session 42), as on Samba, which reads the directory too.
//!
//! How it stays true: a directory is indexed only on a local file system (on a network one
//! other machines change it unseen) and only when it is large (its size at least
//! [`BIG_DIR_BYTES`]; small ones are cheap to read). Its inotify watch is added *before* it is
//! read, so every change made while it is read, and after, is an event; the events are read
//! (non-blocking, all of them) before every answer, and each applied in order to the names
//! read: a name created or moved in is there, one deleted is not. A name moved out is asked of
//! the kernel (`fstatat`), since a `RENAME_EXCHANGE` reports both names as moved out and in.
//! The answer is then what reading the directory now would give. An overflowing event queue
//! drops every index (each is read again when next needed), as does any event this code does
//! not understand for its directory.
//!
//! Who may ask: the caller has opened the directory for reading as the asking user, so the
//! kernel has said this user may list it, exactly as before.
//!
//! Bounds: at most [`DIRS_MAX`] directories and [`NAMES_MAX`] names in all (about 100 bytes a
//! name), least recently asked dropped first; a directory of more than half of that is not
//! indexed (read as before). docs/limits.md.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, OnceLock};

use rustix::fs::{inotify, AtFlags};
use rustix::io::Errno;

use crate::Who;

/// A directory at least this large (its `st_size`) is indexed: about 800 entries on tmpfs
/// (20 bytes each), 400-600 on ext4, XFS or Btrfs with names of about 16 bytes.
pub(super) const BIG_DIR_BYTES: u64 = 16 * 1024;
/// Directories indexed at once, at most.
pub(super) const DIRS_MAX: usize = 256;
/// Names indexed in all, at most.
pub(super) const NAMES_MAX: usize = 400_000;

const WATCHED: u32 = libc_masks::CREATE
    | libc_masks::DELETE
    | libc_masks::MOVED_FROM
    | libc_masks::MOVED_TO
    | libc_masks::DELETE_SELF
    | libc_masks::ONLYDIR;

/// inotify's mask bits (the kernel's ABI, linux/inotify.h).
mod libc_masks {
    pub const MOVED_FROM: u32 = 0x0000_0040;
    pub const MOVED_TO: u32 = 0x0000_0080;
    pub const CREATE: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0000_0200;
    pub const DELETE_SELF: u32 = 0x0000_0400;
    pub const UNMOUNT: u32 = 0x0000_2000;
    pub const Q_OVERFLOW: u32 = 0x0000_4000;
    pub const IGNORED: u32 = 0x0000_8000;
    pub const ONLYDIR: u32 = 0x0100_0000;
}

/// One inotify event as read: its watch, mask, cookie and name (none for events about the
/// watched directory itself).
pub struct InotifyEvent<'a> {
    pub wd: i32,
    pub mask: u32,
    pub cookie: u32,
    pub name: Option<&'a OsStr>,
}

/// Read the events queued on a non-blocking inotify descriptor, handing each to `each`, until
/// the queue is empty, or `each` said stop (false) and the events of that read are all handed
/// over. Returns the bytes of events read, or the error that ended the reading (not EAGAIN).
pub fn read_inotify(
    fd: BorrowedFd<'_>,
    mut each: impl FnMut(InotifyEvent<'_>) -> bool,
) -> Result<usize, Errno> {
    let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut reader = inotify::Reader::new(fd, &mut buf);
    let mut got = 0usize;
    let mut stop = false;
    loop {
        match reader.next() {
            Ok(e) => {
                let name = e
                    .file_name()
                    .map(|n| OsStr::from_bytes(n.to_bytes()))
                    .filter(|n| !n.is_empty());
                got += 16 + name.map_or(0, |n| n.len());
                let go_on = each(InotifyEvent {
                    wd: e.wd(),
                    mask: e.events().bits(),
                    cookie: e.cookie(),
                    name,
                });
                stop |= !go_on;
                if stop && reader.is_buffer_empty() {
                    return Ok(got);
                }
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(got),
            Err(e) => return Err(e),
        }
    }
}

/// `name` lowered as a case-insensitive comparison wants it.
fn fold(name: &str) -> Box<str> {
    if name.is_ascii() {
        name.to_ascii_lowercase().into_boxed_str()
    } else {
        name.to_lowercase().into_boxed_str()
    }
}

/// The names of one directory, by their lowered form (the stored names, sorted).
#[derive(Default)]
struct Names {
    by_fold: HashMap<Box<str>, Vec<Box<str>>>,
    count: usize,
}

impl Names {
    fn add(&mut self, name: &str) {
        let same = self.by_fold.entry(fold(name)).or_default();
        if let Err(at) = same.binary_search_by(|n| (**n).cmp(name)) {
            same.insert(at, name.into());
            self.count += 1;
        }
    }

    fn remove(&mut self, name: &str) {
        let key = fold(name);
        if let Some(same) = self.by_fold.get_mut(&key) {
            if let Ok(at) = same.binary_search_by(|n| (**n).cmp(name)) {
                same.remove(at);
                self.count -= 1;
                if same.is_empty() {
                    self.by_fold.remove(&key);
                }
            }
        }
    }

    /// The name as given when it is there, else the least of those equal to it but for case.
    fn find(&self, name: &str) -> Option<String> {
        let same = self.by_fold.get(&fold(name))?;
        match same.binary_search_by(|n| (**n).cmp(name)) {
            Ok(_) => Some(name.to_string()),
            Err(_) => same.first().map(|n| n.to_string()),
        }
    }
}

/// A change seen while a directory was being read, applied once it has been.
enum Change {
    In(Box<str>),
    Gone(Box<str>),
    /// Moved out: there or not is asked of the kernel when it is applied.
    MovedOut(Box<str>),
}

struct Dir {
    key: (u64, u64),
    /// The directory, to ask the kernel whether a name moved out is still there.
    fd: OwnedFd,
    names: Names,
    /// Being read: the changes seen meanwhile, in order.
    reading: Option<Vec<Change>>,
    used: u64,
}

impl Dir {
    /// Apply one change; false when it could not be told (the index must go).
    #[must_use]
    fn apply(&mut self, who: &Who, change: Change) -> bool {
        match change {
            Change::In(n) => self.names.add(&n),
            Change::Gone(n) => self.names.remove(&n),
            Change::MovedOut(n) => {
                // As the server: the asking user may not be allowed to look.
                let here = super::as_server(who, || {
                    Ok(rustix::fs::statat(&self.fd, &*n, AtFlags::SYMLINK_NOFOLLOW).is_ok())
                });
                match here {
                    Ok(true) => self.names.add(&n),
                    Ok(false) => self.names.remove(&n),
                    Err(_) => return false,
                }
            }
        }
        true
    }
}

#[derive(Default)]
struct Inner {
    /// The inotify descriptor; `None` until first needed.
    fd: Option<OwnedFd>,
    /// It could not be made: nothing is indexed.
    off: bool,
    dirs: HashMap<i32, Dir>,
    by_key: HashMap<(u64, u64), i32>,
    names: usize,
    clock: u64,
}

/// What [`look`] says to do.
pub(super) enum Look {
    /// The answer, from the index.
    Answer(Option<String>),
    /// Not indexed: read the directory as before.
    Read,
    /// Read the directory whole and hand every name to [`indexed`] (the watch is in place).
    ReadAndIndex(Watch),
}

/// A directory being indexed by the caller; dropped without [`indexed`], it is forgotten.
pub(super) struct Watch(Option<i32>);

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(wd) = self.0.take() {
            lock().forget(wd);
        }
    }
}

fn index() -> &'static Mutex<Inner> {
    static INDEX: OnceLock<Mutex<Inner>> = OnceLock::new();
    INDEX.get_or_init(Mutex::default)
}

fn lock() -> std::sync::MutexGuard<'static, Inner> {
    index().lock().unwrap_or_else(|p| p.into_inner())
}

/// Look for `name` in the directory open as `dir` (opened for reading by the asking user):
/// from the index when the directory is indexed, else what to do. Only a directory on the
/// device `local` (the share root's, a local file system) is indexed: a network file system
/// mounted below the share is changed by other machines unseen.
pub(super) fn look(who: &Who, dir: BorrowedFd<'_>, name: &str, local: (u32, u32)) -> Look {
    let Ok(st) = super::statx_fd(dir) else {
        return Look::Read;
    };
    if (st.stx_dev_major, st.stx_dev_minor) != local {
        return Look::Read;
    }
    let key = (
        u64::from(st.stx_dev_major) << 32 | u64::from(st.stx_dev_minor),
        st.stx_ino,
    );
    let mut inner = lock();
    if inner.off {
        return Look::Read;
    }
    let big = st.stx_size >= BIG_DIR_BYTES;
    if !big && inner.by_key.is_empty() {
        return Look::Read;
    }
    inner.drain(who);
    inner.clock += 1;
    let now = inner.clock;
    if let Some(wd) = inner.by_key.get(&key).copied() {
        if let Some(d) = inner.dirs.get_mut(&wd) {
            if d.reading.is_none() {
                d.used = now;
                return Look::Answer(d.names.find(name));
            }
            return Look::Read;
        }
    }
    if !big {
        return Look::Read;
    }
    match inner.watch(dir, key, now) {
        Some(wd) => Look::ReadAndIndex(Watch(Some(wd))),
        None => Look::Read,
    }
}

/// The directory `watch` was read whole: `names`, every name it held (as the scan skips them:
/// not `.`, `..` or a name that is not UTF-8). `None`: it could not be read; forget it.
pub(super) fn indexed(who: &Who, mut watch: Watch, names: Option<Vec<String>>) {
    let Some(wd) = watch.0.take() else {
        return;
    };
    let mut inner = lock();
    inner.drain(who);
    let Some(names) = names.filter(|n| n.len() <= NAMES_MAX / 2) else {
        inner.forget(wd);
        return;
    };
    let Some(d) = inner.dirs.get_mut(&wd) else {
        return; // Dropped meanwhile (an overflow, the directory removed).
    };
    for n in &names {
        d.names.add(n);
    }
    let mut told = true;
    for change in d.reading.take().unwrap_or_default() {
        told &= d.apply(who, change);
    }
    inner.names += inner.dirs.get(&wd).map_or(0, |d| d.names.count);
    if !told {
        inner.forget(wd);
        return;
    }
    inner.keep_within_bounds(wd);
}

impl Inner {
    /// Add a watch on `dir` (before it is read) and its entry, being read.
    fn watch(&mut self, dir: BorrowedFd<'_>, key: (u64, u64), now: u64) -> Option<i32> {
        if self.fd.is_none() {
            match inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK) {
                Ok(fd) => self.fd = Some(fd),
                Err(_) => {
                    self.off = true;
                    return None;
                }
            }
        }
        let ino = self.fd.as_ref()?;
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let wd =
            inotify::add_watch(ino, path, inotify::WatchFlags::from_bits_retain(WATCHED)).ok()?;
        let fd = rustix::io::fcntl_dupfd_cloexec(dir, 0).ok()?;
        if let Some(old) = self.dirs.remove(&wd) {
            // The same directory under another key (cannot be), or one whose entry was left.
            self.by_key.remove(&old.key);
            self.names -= if old.reading.is_none() {
                old.names.count
            } else {
                0
            };
        }
        self.by_key.insert(key, wd);
        self.dirs.insert(
            wd,
            Dir {
                key,
                fd,
                names: Names::default(),
                reading: Some(Vec::new()),
                used: now,
            },
        );
        Some(wd)
    }

    /// Read every queued event and apply it.
    fn drain(&mut self, who: &Who) {
        let Some(fd) = self.fd.take() else {
            return;
        };
        let mut overflow = false;
        let mut gone = Vec::new();
        let mut changes = Vec::new();
        // An error other than EAGAIN: what was read is used, the rest read next time.
        let _ = read_inotify(fd.as_fd(), |e| {
            if e.mask & libc_masks::Q_OVERFLOW != 0 {
                overflow = true;
                return true;
            }
            if e.mask & (libc_masks::IGNORED | libc_masks::DELETE_SELF | libc_masks::UNMOUNT) != 0 {
                gone.push(e.wd);
                return true;
            }
            let Some(name) = e.name.and_then(|n| n.to_str()) else {
                return true; // Not UTF-8: the scan skips it too.
            };
            let change = if e.mask & (libc_masks::CREATE | libc_masks::MOVED_TO) != 0 {
                Change::In(name.into())
            } else if e.mask & libc_masks::DELETE != 0 {
                Change::Gone(name.into())
            } else if e.mask & libc_masks::MOVED_FROM != 0 {
                Change::MovedOut(name.into())
            } else {
                gone.push(e.wd); // Not understood: read the directory again when needed.
                return true;
            };
            changes.push((e.wd, change));
            true
        });
        self.fd = Some(fd);
        if overflow {
            for wd in self.dirs.keys().copied().collect::<Vec<_>>() {
                self.forget(wd);
            }
            return;
        }
        for (wd, change) in changes {
            if let Some(d) = self.dirs.get_mut(&wd) {
                match &mut d.reading {
                    Some(seen) => seen.push(change),
                    None => {
                        let before = d.names.count;
                        if !d.apply(who, change) {
                            gone.push(wd);
                        }
                        self.names = self.names + d.names.count - before;
                    }
                }
            }
        }
        for wd in gone {
            self.forget(wd);
        }
    }

    /// Drop a directory's index and its watch.
    fn forget(&mut self, wd: i32) {
        if let Some(d) = self.dirs.remove(&wd) {
            self.by_key.remove(&d.key);
            if d.reading.is_none() {
                self.names -= d.names.count;
            }
            if let Some(fd) = &self.fd {
                let _ = inotify::remove_watch(fd, wd);
            }
        }
    }

    /// Drop the least recently asked directories (never `keep`) until within the bounds.
    fn keep_within_bounds(&mut self, keep: i32) {
        while self.dirs.len() > DIRS_MAX || self.names > NAMES_MAX {
            let oldest = self
                .dirs
                .iter()
                .filter(|(wd, _)| **wd != keep)
                .min_by_key(|(_, d)| d.used)
                .map(|(wd, _)| *wd);
            match oldest {
                Some(wd) => self.forget(wd),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_found_as_given_else_as_the_least_name_equal_but_for_case() {
        let mut n = Names::default();
        for name in ["Report.txt", "REPORT.TXT", "ärger", "other"] {
            n.add(name);
        }
        assert_eq!(n.find("report.txt").as_deref(), Some("REPORT.TXT"));
        assert_eq!(n.find("Report.txt").as_deref(), Some("Report.txt"));
        assert_eq!(n.find("ÄRGER").as_deref(), Some("ärger"));
        assert_eq!(n.find("missing"), None);
        n.remove("REPORT.TXT");
        assert_eq!(n.find("report.txt").as_deref(), Some("Report.txt"));
        n.remove("Report.txt");
        assert_eq!(n.find("report.txt"), None);
        assert_eq!(n.count, 2);
    }
}

#[cfg(test)]
mod on_disk {
    //! The index against real directories (the temporary directory's file system: tmpfs or
    //! ext4 here), changed by "local programs" (std::fs) between looks.

    use std::os::fd::AsFd;
    use std::path::{Path, PathBuf};

    use super::{look, Look};
    use crate::posix::PosixShare;
    use crate::{FsError, RelPath, Share};

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A share whose directory `big` holds `n` files `file-NNNNN.dat`.
    fn share_with_big_dir(tag: &str, n: usize) -> (Tmp, PosixShare) {
        let root = std::env::temp_dir().join(format!("rs-names-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("big")).unwrap();
        for i in 0..n {
            std::fs::write(root.join(format!("big/file-{i:05}.dat")), b"").unwrap();
        }
        let share = PosixShare::new(&root).unwrap();
        (Tmp(root), share)
    }

    fn find(share: &PosixShare, name: &str) -> Result<String, FsError> {
        share.find_name_case_insensitive(
            &crate::server_who(),
            &RelPath::from_strs(&["big"]).unwrap(),
            name,
        )
    }

    /// What the index says of `name` now, without the share's own reading.
    fn from_index(root: &Path, name: &str) -> Option<Option<String>> {
        let dir = std::fs::File::open(root.join("big")).unwrap();
        let st = crate::posix::statx_fd(dir.as_fd()).unwrap();
        let dev = (st.stx_dev_major, st.stx_dev_minor);
        match look(&crate::server_who(), dir.as_fd(), name, dev) {
            Look::Answer(a) => Some(a),
            _ => None,
        }
    }

    #[test]
    fn a_large_directory_is_read_once_and_then_answered_from_its_index() {
        let (tmp, share) = share_with_big_dir("once", 2000);
        assert_eq!(
            from_index(&tmp.0, "FILE-00007.DAT"),
            None,
            "not indexed yet"
        );
        assert_eq!(
            find(&share, "FILE-00007.DAT").as_deref(),
            Ok("file-00007.dat")
        );
        assert_eq!(
            from_index(&tmp.0, "FILE-01999.dat"),
            Some(Some("file-01999.dat".to_string()))
        );
        assert_eq!(from_index(&tmp.0, "missing.dat"), Some(None));
        assert_eq!(find(&share, "missing.dat"), Err(FsError::NotFound));
    }

    #[test]
    fn names_a_local_program_creates_deletes_and_renames_are_seen_at_the_next_look() {
        let (tmp, share) = share_with_big_dir("changes", 2000);
        let big = tmp.0.join("big");
        assert_eq!(find(&share, "nothing-yet"), Err(FsError::NotFound));
        std::fs::write(big.join("New Report.TXT"), b"").unwrap();
        std::fs::remove_file(big.join("file-00010.dat")).unwrap();
        std::fs::rename(big.join("file-00020.dat"), big.join("Moved.dat")).unwrap();
        std::fs::create_dir(big.join("SubDir")).unwrap();
        assert_eq!(
            from_index(&tmp.0, "new report.txt"),
            Some(Some("New Report.TXT".to_string()))
        );
        assert_eq!(from_index(&tmp.0, "FILE-00010.DAT"), Some(None));
        assert_eq!(from_index(&tmp.0, "file-00020.dat"), Some(None));
        assert_eq!(
            from_index(&tmp.0, "moved.DAT"),
            Some(Some("Moved.dat".to_string()))
        );
        assert_eq!(
            from_index(&tmp.0, "subdir"),
            Some(Some("SubDir".to_string()))
        );
        // A name created again after it was deleted is there again.
        std::fs::write(big.join("file-00010.dat"), b"").unwrap();
        assert_eq!(
            find(&share, "FILE-00010.DAT").as_deref(),
            Ok("file-00010.dat")
        );
    }

    #[test]
    fn two_names_exchanged_by_a_local_program_are_both_still_there() {
        let (tmp, share) = share_with_big_dir("exchange", 2000);
        let big = tmp.0.join("big");
        assert_eq!(find(&share, "nothing-yet"), Err(FsError::NotFound));
        let dir = std::fs::File::open(&big).unwrap();
        rustix::fs::renameat_with(
            &dir,
            "file-00001.dat",
            &dir,
            "file-00002.dat",
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .unwrap();
        for name in ["FILE-00001.DAT", "FILE-00002.DAT"] {
            assert_eq!(
                from_index(&tmp.0, name),
                Some(Some(name.to_lowercase())),
                "{name} after the exchange"
            );
        }
    }

    #[test]
    fn a_directory_on_another_device_than_the_shares_is_not_indexed() {
        let (tmp, share) = share_with_big_dir("otherdev", 2000);
        assert_eq!(find(&share, "nothing-yet"), Err(FsError::NotFound));
        let dir = std::fs::File::open(tmp.0.join("big")).unwrap();
        let st = crate::posix::statx_fd(dir.as_fd()).unwrap();
        let other = (st.stx_dev_major, st.stx_dev_minor + 1);
        assert!(matches!(
            look(&crate::server_who(), dir.as_fd(), "FILE-00001.DAT", other),
            Look::Read
        ));
    }

    #[test]
    fn a_small_directory_is_not_indexed() {
        let (tmp, share) = share_with_big_dir("small", 20);
        assert_eq!(
            find(&share, "FILE-00003.DAT").as_deref(),
            Ok("file-00003.dat")
        );
        assert_eq!(from_index(&tmp.0, "FILE-00003.DAT"), None);
    }
}
