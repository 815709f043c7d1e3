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
//! the kernel (`fstatat` through the asker's descriptor, as the server) at the directory's next
//! look, since a `RENAME_EXCHANGE` reports both names as moved out and in. The answer is then
//! what reading the directory now would give. An overflowing event queue drops every index
//! (each is read again when next needed), as does any event this code does not understand for
//! its directory. No descriptor of an indexed directory is held, so its removal ends its watch
//! (IN_DELETE_SELF) and nothing keeps its file system busy.
//!
//! Who may ask: the caller has opened the directory for reading as the asking user, so the
//! kernel has said this user may list it, exactly as before. The inotify instance is made as
//! the server, so its watches are charged to the server, not to whoever asked first.
//!
//! Bounds: at most [`DIRS_MAX`] directories and [`NAMES_MAX`] names in all (about 100 bytes a
//! name), least recently asked dropped first; a directory of more than half of that is not
//! indexed (read as before), nor kept once it grows past it. docs/limits.md.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, OnceLock};

use rustix::fs::{inotify, AtFlags};
use rustix::io::Errno;

use crate::Who;

/// A directory at least this large (its `st_size`) is indexed: about 400 entries on tmpfs
/// (20 bytes each), 200-300 on ext4, XFS or Btrfs with names of about 16 bytes. (Not 4 KiB: an
/// ext4 directory is never smaller, so every one would be.) At 16 KiB (sessions 42-54) a
/// 300 ms run that makes 1,000 files in a new directory and opens them again cost 1.5x the
/// server CPU a request (session 55, `DUR=300ms bench/newnames --connections 1`: 14.9 against
/// 9.9 µs).
pub(super) const BIG_DIR_BYTES: u64 = 8 * 1024;
/// Directories indexed at once, at most.
pub(super) const DIRS_MAX: usize = 256;
/// Names indexed in all, at most.
pub(super) const NAMES_MAX: usize = 400_000;

/// What a directory's watch asks for: its entries made, removed and moved, and its own end.
const WATCHED: inotify::WatchFlags = inotify::WatchFlags::CREATE
    .union(inotify::WatchFlags::DELETE)
    .union(inotify::WatchFlags::MOVED_FROM)
    .union(inotify::WatchFlags::MOVED_TO)
    .union(inotify::WatchFlags::DELETE_SELF)
    .union(inotify::WatchFlags::ONLYDIR);

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
/// over. Fails with the error that ended the reading (not EAGAIN).
pub fn read_inotify(
    fd: BorrowedFd<'_>,
    mut each: impl FnMut(InotifyEvent<'_>) -> bool,
) -> Result<(), Errno> {
    let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut reader = inotify::Reader::new(fd, &mut buf);
    let mut stop = false;
    loop {
        match reader.next() {
            Ok(e) => {
                let name = e
                    .file_name()
                    .map(|n| OsStr::from_bytes(n.to_bytes()))
                    .filter(|n| !n.is_empty());
                stop |= !each(InotifyEvent {
                    wd: e.wd(),
                    mask: e.events().bits(),
                    cookie: e.cookie(),
                    name,
                });
                if stop && reader.is_buffer_empty() {
                    return Ok(());
                }
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(()),
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
    /// Moved out: whether it is still there is asked of the kernel at the next look.
    MovedOut(Box<str>),
}

struct Dir {
    key: (u64, u64),
    names: Names,
    /// Names moved out of the directory, to be asked of the kernel at its next look (with the
    /// asker's descriptor: none is kept, so a removed directory's watch ends as it should).
    moved: Vec<Box<str>>,
    /// Being read: the changes seen meanwhile, in order.
    reading: Option<Vec<Change>>,
    used: u64,
}

impl Dir {
    fn apply(&mut self, change: Change) {
        match change {
            Change::In(n) => self.names.add(&n),
            Change::Gone(n) => self.names.remove(&n),
            Change::MovedOut(n) => self.moved.push(n),
        }
    }

    /// Ask the kernel, through `dir` (this directory) and as the server (the asking user may
    /// not be allowed to look), whether each name moved out is there now: a
    /// `RENAME_EXCHANGE` reports both of its names moved out and in, and a name a rename
    /// left a whiteout in is there with no event. False when the kernel could not say (the
    /// index must go).
    fn settle_moved(&mut self, who: &Who, dir: BorrowedFd<'_>) -> bool {
        if self.moved.is_empty() {
            return true;
        }
        let moved = std::mem::take(&mut self.moved);
        let names = &mut self.names;
        super::as_server(who, || {
            for n in &moved {
                match rustix::fs::statat(dir, &**n, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(_) => names.add(n),
                    Err(Errno::NOENT) => names.remove(n),
                    Err(_) => return Ok(false),
                }
            }
            Ok(true)
        })
        .unwrap_or(false)
    }
}

struct Inner {
    /// The inotify descriptor; `None` until first needed.
    fd: Option<OwnedFd>,
    /// It could not be made: not tried again before this look (`clock`).
    retry_at: u64,
    dirs: HashMap<i32, Dir>,
    by_key: HashMap<(u64, u64), i32>,
    names: usize,
    clock: u64,
    /// Directories kept at most, names in all at most (a directory of more than half is not).
    dirs_max: usize,
    names_max: usize,
}

/// Looks to wait before trying again to make the inotify descriptor after it could not be.
const RETRY_AFTER_LOOKS: u64 = 256;

/// What [`look`] says to do.
pub(super) enum Look {
    /// The answer, from the index.
    Answer(Option<String>),
    /// Not indexed: read the directory as before.
    Read,
    /// Read the directory whole and hand every name to [`indexed`] (the watch is in place).
    ReadAndIndex(Watch),
}

/// A directory being indexed by the caller; dropped without [`Index::indexed`], it is
/// forgotten.
pub(super) struct Watch(Option<i32>, &'static Index);

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(wd) = self.0.take() {
            self.1.lock().forget(wd);
        }
    }
}

/// The index: one for the process ([`global`]), keyed by device and inode.
pub(super) struct Index(Mutex<Inner>);

/// The process's index, with the bounds [`DIRS_MAX`] and [`NAMES_MAX`].
pub(super) fn global() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| Index::with_bounds(DIRS_MAX, NAMES_MAX))
}

impl Index {
    fn with_bounds(dirs_max: usize, names_max: usize) -> Index {
        Index(Mutex::new(Inner {
            fd: None,
            retry_at: 0,
            dirs: HashMap::new(),
            by_key: HashMap::new(),
            names: 0,
            clock: 0,
            dirs_max,
            names_max,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Look for `name` in the directory open as `dir` (opened for reading by the asking user):
    /// from the index when the directory is indexed, else what to do. Only a directory on the
    /// device `local` (the share root's, a local file system) is indexed: a network file system
    /// mounted below the share is changed by other machines unseen.
    pub(super) fn look(
        &'static self,
        who: &Who,
        dir: BorrowedFd<'_>,
        name: &str,
        local: (u32, u32),
    ) -> Look {
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
        let big = st.stx_size >= BIG_DIR_BYTES;
        let mut inner = self.lock();
        if !big && inner.by_key.is_empty() {
            return Look::Read;
        }
        inner.drain();
        inner.clock += 1;
        let now = inner.clock;
        if let Some(wd) = inner.by_key.get(&key).copied() {
            let Some(d) = inner.dirs.get_mut(&wd) else {
                return Look::Read;
            };
            if d.reading.is_some() {
                return Look::Read; // Another thread is reading it: read it too.
            }
            let before = d.names.count;
            let settled = d.settle_moved(who, dir);
            let (after, found) = (d.names.count, d.names.find(name));
            d.used = now;
            inner.names = inner.names + after - before;
            if !settled {
                inner.forget(wd);
                return Look::Read;
            }
            return Look::Answer(found);
        }
        if !big || now < inner.retry_at {
            return Look::Read;
        }
        match inner.watch(who, dir, key, now) {
            Some(wd) => Look::ReadAndIndex(Watch(Some(wd), self)),
            None => Look::Read,
        }
    }

    /// The directory `watch` was read whole: `names`, every name it held (as the scan skips them:
    /// not `.`, `..` or a name that is not UTF-8). `None`: it could not be read; forget it.
    pub(super) fn indexed(&self, mut watch: Watch, names: Option<Vec<String>>) {
        let Some(wd) = watch.0.take() else {
            return;
        };
        let mut inner = self.lock();
        inner.drain();
        let Some(names) = names.filter(|n| n.len() <= inner.names_max / 2) else {
            inner.forget(wd);
            return;
        };
        let Some(d) = inner.dirs.get_mut(&wd) else {
            return; // Dropped meanwhile (an overflow, the directory removed).
        };
        for n in &names {
            d.names.add(n);
        }
        for change in d.reading.take().unwrap_or_default() {
            d.apply(change);
        }
        inner.names += d.names.count;
        inner.keep_within_bounds(wd);
    }
}

impl Inner {
    /// Add a watch on `dir` (before it is read) and its entry, being read.
    fn watch(&mut self, who: &Who, dir: BorrowedFd<'_>, key: (u64, u64), now: u64) -> Option<i32> {
        if self.fd.is_none() {
            // Made as the server: the kernel charges an instance and its watches to whoever
            // made it (fs.inotify.max_user_instances, max_user_watches), not to the user who
            // happened to ask first.
            let made = super::as_server(who, || {
                let flags = inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK;
                Ok(inotify::init(flags).ok())
            });
            match made {
                Ok(Some(fd)) => self.fd = Some(fd),
                _ => {
                    self.retry_at = now + RETRY_AFTER_LOOKS;
                    return None;
                }
            }
        }
        let ino = self.fd.as_ref()?;
        // As the asking user, who has just opened the directory to read it (add_watch asks
        // for read access).
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let wd = inotify::add_watch(ino, path, WATCHED).ok()?;
        if self.dirs.contains_key(&wd) {
            // Its entry was left (cannot be: one inode, one key): start again.
            self.forget(wd);
            return None;
        }
        self.by_key.insert(key, wd);
        self.dirs.insert(
            wd,
            Dir {
                key,
                names: Names::default(),
                moved: Vec::new(),
                reading: Some(Vec::new()),
                used: now,
            },
        );
        Some(wd)
    }

    /// Read every queued event and apply it; then keep within the bounds.
    fn drain(&mut self) {
        let Some(fd) = self.fd.take() else {
            return;
        };
        let mut overflow = false;
        let mut gone = Vec::new();
        let mut changes = Vec::new();
        // An error other than EAGAIN: what was read is used, the rest read next time.
        let _ = read_inotify(fd.as_fd(), |e| {
            use inotify::ReadFlags as F;
            let mask = F::from_bits_retain(e.mask);
            if mask.contains(F::QUEUE_OVERFLOW) {
                overflow = true;
                return true;
            }
            if mask.intersects(F::IGNORED | F::DELETE_SELF | F::UNMOUNT) {
                gone.push(e.wd);
                return true;
            }
            let Some(name) = e.name.and_then(|n| n.to_str()) else {
                return true; // Not UTF-8: the scan skips it too.
            };
            let change = if mask.intersects(F::CREATE | F::MOVED_TO) {
                Change::In(name.into())
            } else if mask.contains(F::DELETE) {
                Change::Gone(name.into())
            } else if mask.contains(F::MOVED_FROM) {
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
            let Some(d) = self.dirs.get_mut(&wd) else {
                continue;
            };
            match &mut d.reading {
                Some(seen) => seen.push(change),
                None => {
                    let before = d.names.count;
                    d.apply(change);
                    self.names = self.names + d.names.count - before;
                }
            }
        }
        for wd in gone {
            self.forget(wd);
        }
        self.keep_within_bounds(-1);
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

    /// Drop the least recently asked directories (never `keep`) until within the bounds, and
    /// any directory past what one may keep.
    fn keep_within_bounds(&mut self, keep: i32) {
        let too_big: Vec<i32> = (self.dirs.iter())
            .filter(|(_, d)| d.names.count > self.names_max / 2)
            .map(|(wd, _)| *wd)
            .collect();
        for wd in too_big {
            self.forget(wd);
        }
        while self.dirs.len() > self.dirs_max || self.names > self.names_max {
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

    use super::{global, Index, Look};
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
        match global().look(&crate::server_who(), dir.as_fd(), name, dev) {
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
            global().look(&crate::server_who(), dir.as_fd(), "FILE-00001.DAT", other),
            Look::Read
        ));
    }

    /// Where the process's descriptors point (`/proc/self/fd`).
    fn fd_targets() -> Vec<PathBuf> {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .collect()
    }

    #[test]
    fn a_removed_directory_is_forgotten_and_its_descriptor_closed() {
        let (tmp, share) = share_with_big_dir("removed", 2000);
        assert_eq!(find(&share, "nothing-yet"), Err(FsError::NotFound));
        assert!(from_index(&tmp.0, "x").is_some(), "indexed");
        std::fs::remove_dir_all(tmp.0.join("big")).unwrap();
        // Any later look reads the queued events (here one in the share's root, not indexed).
        std::fs::create_dir(tmp.0.join("big")).unwrap();
        let _ = from_index(&tmp.0, "x");
        let deleted = PathBuf::from(format!("{} (deleted)", tmp.0.join("big").display()));
        assert!(
            !fd_targets().contains(&deleted),
            "a descriptor of the removed directory is still held"
        );
    }

    /// What `idx` says of `name` in `dir` now; a directory not indexed yet is read and
    /// indexed (as the share does).
    fn look_in(idx: &'static Index, dir: &Path, name: &str) -> Option<Option<String>> {
        let f = std::fs::File::open(dir).unwrap();
        let st = crate::posix::statx_fd(f.as_fd()).unwrap();
        let dev = (st.stx_dev_major, st.stx_dev_minor);
        match idx.look(&crate::server_who(), f.as_fd(), name, dev) {
            Look::Answer(a) => Some(a),
            Look::ReadAndIndex(watch) => {
                let names = std::fs::read_dir(dir)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect();
                idx.indexed(watch, Some(names));
                None
            }
            Look::Read => None,
        }
    }

    #[test]
    fn a_directory_grown_past_the_bound_after_it_was_indexed_is_no_longer_kept() {
        // An index of its own, keeping directories of at most 3,000 names.
        let idx: &'static Index = Box::leak(Box::new(Index::with_bounds(8, 6000)));
        let (tmp, _share) = share_with_big_dir("grown", 2000);
        let big = tmp.0.join("big");
        assert_eq!(look_in(idx, &big, "x"), None, "read and indexed");
        assert_eq!(look_in(idx, &big, "x"), Some(None), "indexed");
        for i in 0..900 {
            std::fs::write(big.join(format!("more-{i:05}.dat")), b"").unwrap();
        }
        assert_eq!(
            look_in(idx, &big, "MORE-00007.DAT"),
            Some(Some("more-00007.dat".to_string())),
            "2,900 names are kept"
        );
        for i in 900..1100 {
            std::fs::write(big.join(format!("more-{i:05}.dat")), b"").unwrap();
        }
        assert_eq!(
            look_in(idx, &big, "MORE-00007.DAT"),
            None,
            "a directory of 3,100 names (more than the bound) is still kept"
        );
    }

    #[test]
    fn the_least_recently_asked_directory_goes_when_too_many_are_kept() {
        let idx: &'static Index = Box::leak(Box::new(Index::with_bounds(2, 400_000)));
        let dirs: Vec<_> = (0..3)
            .map(|i| share_with_big_dir(&format!("lru{i}"), 1000).0)
            .collect();
        for d in &dirs {
            assert_eq!(
                look_in(idx, &d.0.join("big"), "x"),
                None,
                "read and indexed"
            );
        }
        // The first was asked least recently when the third came: it went.
        assert_eq!(look_in(idx, &dirs[0].0.join("big"), "x"), None);
        assert_eq!(look_in(idx, &dirs[2].0.join("big"), "x"), Some(None));
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
