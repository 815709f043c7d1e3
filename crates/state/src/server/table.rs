//! The table of open files: every file some open has, by key, with the
//! leases on it, the durable opens whose connection went, and the ids opens
//! are numbered with. It knows nothing of connections, sessions or the
//! cluster: what a file's entry says is decided in crate::files, and who is
//! told in crate::deliver.
//!
//! Lock order: the map before any `FileEntry` mutex; never hold a
//! `FileEntry` mutex while taking the map lock. The lease map is taken after
//! a `FileEntry` mutex, never before one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ringshare_vfs::RelPath;

use crate::files::oplock::LeaseId;
use crate::files::{FileEntry, FileKey};
use crate::idmap::IdMap;
use crate::sync::lock;

/// The leased directories, each with the id its kernel watch is held by
/// ([`FileTable`]'s `dir_leases`).
pub(crate) type LeasedDirs = Arc<Mutex<Vec<(FileKey, Option<u64>)>>>;

/// The open files of the server ([`crate::server::ServerState::files`]).
pub struct FileTable {
    entries: Mutex<Entries>,
    /// Which file each lease is on (a lease key names one file).
    leases: Mutex<HashMap<LeaseId, FileKey>>,
    /// Directories some lease was granted on (`crate::dirlease`), each
    /// with the id its kernel watch is held by (if it has one), and how
    /// many: 0 lets a change skip looking.
    dir_leases: LeasedDirs,
    dir_leased: AtomicUsize,
    next_owner: AtomicU64,
    /// Durable opens whose connection went ([`crate::durable`]).
    pub durables: Mutex<crate::files::parked::Durables<Arc<crate::state::Open>>>,
    /// Open files whose write time is not the disk's now
    /// (`crate::writetime` (crates/core)); 0 lets listings skip looking.
    pub write_times_shown: AtomicUsize,
    /// Name changes made through this node (renames, removals), counted in buckets by a hash
    /// of the path that changed: a CREATE whose name was looked up in a file system job and
    /// that finds the count of its path and the directories above it moved before it joins its
    /// file's entry looks the name up again (`create::offload` (crates/core)), so no open keeps
    /// a name its file left ([`FileTable::name_changed`], [`FileTable::names_seen`]).
    names: [AtomicU64; NAME_BUCKETS],
}

/// How many buckets [`FileTable`] counts name changes in (a change elsewhere shares one with a
/// path in 1 of this many cases, and only costs that path's CREATE one more lookup).
const NAME_BUCKETS: usize = 256;

/// The bucket of `path` under share `share`, by its components without case (a CREATE's name
/// may differ in case from the name as stored).
fn name_bucket(share: &str, path: &[String]) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    share.hash(&mut h);
    for c in path {
        c.to_lowercase().hash(&mut h);
    }
    (h.finish() as usize) % NAME_BUCKETS
}

/// The map of open files, and emptied entries kept to serve the next files
/// opened (under the same lock: taking one costs nothing more than the map).
#[derive(Default)]
struct Entries {
    /// Keyed by device and inode numbers the file system gave (and a keyed
    /// hash of a stream's name): not numbers a client picks, so the id
    /// maps' one-multiplication hash serves ([`crate::idmap`]).
    map: IdMap<FileKey, Arc<Mutex<FileEntry>>>,
    spare: Vec<Arc<Mutex<FileEntry>>>,
}

/// How many emptied entries the table keeps for reuse.
const SPARE_ENTRIES_MAX: usize = 256;

impl Default for FileTable {
    fn default() -> FileTable {
        FileTable {
            entries: Mutex::new(Entries::default()),
            leases: Mutex::new(HashMap::new()),
            dir_leases: Arc::default(),
            dir_leased: AtomicUsize::new(0),
            next_owner: AtomicU64::new(1),
            durables: Mutex::new(Default::default()),
            write_times_shown: AtomicUsize::new(0),
            names: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl FileTable {
    /// `path` of share `share` changed: renamed (its old and its new name each), or removed.
    pub fn name_changed(&self, share: &str, path: &ringshare_vfs::RelPath) {
        let b = name_bucket(share, path.components());
        self.names[b].fetch_add(1, Ordering::AcqRel);
    }

    /// The count of the changes to `path` and to each directory above it (it only grows): read
    /// before a lookup of `path` and again after, it moved if one of them changed meanwhile
    /// (or, seldom, a path that shares a bucket with one).
    pub fn names_seen(&self, share: &str, path: &ringshare_vfs::RelPath) -> u64 {
        let c = path.components();
        (1..=c.len())
            .map(|n| self.names[name_bucket(share, &c[..n])].load(Ordering::Acquire))
            .fold(0u64, u64::wrapping_add)
    }

    /// A server-wide unique id for an open (lock and share-mode owner).
    pub fn new_owner_id(&self) -> u64 {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// Number opens from `base` up (a cluster node's number in their top bits).
    pub(crate) fn set_owner_base(&self, base: u64) {
        self.next_owner.fetch_max(base, Ordering::Relaxed);
    }

    /// The entry of a file, created empty when absent.
    pub fn entry(&self, key: FileKey) -> Arc<Mutex<FileEntry>> {
        let mut files = lock(&self.entries);
        let Entries { map, spare } = &mut *files;
        map.entry(key)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .clone()
    }

    /// The entry of a file if some open has it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<Mutex<FileEntry>>> {
        lock(&self.entries).map.get(&key).cloned()
    }

    /// Every entry.
    pub fn all(&self) -> Vec<Arc<Mutex<FileEntry>>> {
        lock(&self.entries).map.values().cloned().collect()
    }

    /// The entries whose key `pick` takes, with their keys.
    pub fn keyed(&self, pick: impl Fn(FileKey) -> bool) -> Vec<(FileKey, Arc<Mutex<FileEntry>>)> {
        lock(&self.entries)
            .map
            .iter()
            .filter(|(k, _)| pick(**k))
            .map(|(k, e)| (*k, e.clone()))
            .collect()
    }

    /// Whether a file or directory strictly below directory `dir` of share
    /// `share` is open (a rename of `dir` would move it); with `but_posix`,
    /// by other than POSIX opens.
    pub fn opens_below(&self, share: &str, dir: &RelPath, but_posix: bool) -> bool {
        let n = dir.components().len();
        lock(&self.entries).map.values().any(|e| {
            let e = lock(e);
            e.opens.iter().any(|o| !(but_posix && o.posix))
                && e.share == share
                && e.path.components().len() > n
                && e.path.components()[..n] == *dir.components()
        })
    }

    /// Directory `from` of share `share` is now `to`: the entries of files
    /// below it (a POSIX or macOS rename moved them while open) name where
    /// they are now.
    pub fn moved_below(&self, share: &str, from: &RelPath, to: &RelPath) {
        let n = from.components().len();
        for e in lock(&self.entries).map.values() {
            let mut e = lock(e);
            let p = e.path.components();
            if e.share == share && p.len() > n && p[..n] == *from.components() {
                let rest = p[n..].to_vec();
                if let Ok(now) = RelPath::from_components(to.components().iter().chain(&rest)) {
                    e.path = now;
                }
            }
        }
    }

    /// Give the entry under `from` (a renamed stream's) the key `to`, with
    /// the leases on it: false, and nothing changed, when `to` has an entry.
    pub fn rekey(&self, from: FileKey, to: FileKey) -> bool {
        {
            let mut files = lock(&self.entries);
            if files.map.contains_key(&to) {
                return false;
            }
            let Some(e) = files.map.remove(&from) else {
                return false;
            };
            files.map.insert(to, e);
        }
        for k in lock(&self.leases).values_mut() {
            if *k == from {
                *k = to;
            }
        }
        true
    }

    /// Forget a file's entry when no open is left on it (and no file system job is removing
    /// the file, [`crate::server::FileEntry::removing`], nor renaming one of its streams: the
    /// rename's mark, [`crate::server::FileEntry::stream_moving`], holds CREATEs of the
    /// stream's names).
    pub fn drop_if_unused(&self, key: FileKey) {
        let mut files = lock(&self.entries);
        if let Some(e) = files.map.get(&key) {
            let e = lock(e);
            if e.opens.is_empty() && !e.removing && e.stream_moving.is_none() {
                e.write_time.forget(&self.write_times_shown);
                drop(e);
                let Entries { map, spare } = &mut *files;
                if let Some(mut e) = map.remove(&key) {
                    // Kept for the next file only when nothing else holds it.
                    if let Some(entry) = Arc::get_mut(&mut e).and_then(|m| m.get_mut().ok()) {
                        if spare.len() < SPARE_ENTRIES_MAX && entry.worth_keeping() {
                            entry.reset();
                            spare.push(e);
                        }
                    }
                }
            }
        }
    }

    /// The file a lease is on.
    pub fn lease_file(&self, id: LeaseId) -> Option<FileKey> {
        lock(&self.leases).get(&id).copied()
    }

    /// Record the file a lease is on (taken with the file's entry locked).
    pub fn set_lease_file(&self, id: LeaseId, key: FileKey) {
        lock(&self.leases).insert(id, key);
    }

    /// The lease is gone from file `key` with the last open there that
    /// named it. Every path by which an open ends comes here (through
    /// `ServerState::lease_left`): when it was the last lease of a leased
    /// directory, the directory leaves the list, and the id its kernel watch
    /// is held by (to be let go), if it had one, is returned.
    pub(crate) fn forget_lease(&self, id: LeaseId, key: FileKey) -> Option<Option<u64>> {
        let mut m = lock(&self.leases);
        if m.get(&id) == Some(&key) {
            m.remove(&id);
        }
        if self.dir_leased.load(Ordering::Acquire) == 0 {
            return None;
        }
        if m.values().any(|k| *k == key) {
            return None;
        }
        // The lease map stays locked: a lease granted meanwhile lists the
        // directory again after this.
        self.unlist_dir(key)
    }

    /// Directory `key` leaves the list of leased directories (its last
    /// lease went, or its home is another node now); the id its kernel
    /// watch was held by, if it had one. `None`: it was not listed.
    pub(crate) fn unlist_dir(&self, key: FileKey) -> Option<Option<u64>> {
        if self.dir_leased.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut dirs = lock(&self.dir_leases);
        let at = dirs.iter().position(|(k, _)| *k == key)?;
        let (_, watch) = dirs.swap_remove(at);
        self.dir_leased.store(dirs.len(), Ordering::Release);
        Some(watch)
    }

    /// The leases with this key (one per client), with the files they are on.
    pub fn leases_keyed(&self, lease_key: [u8; 16]) -> Vec<(LeaseId, FileKey)> {
        lock(&self.leases)
            .iter()
            .filter(|(id, _)| id.key == lease_key)
            .map(|(id, k)| (*id, *k))
            .collect()
    }

    /// A lease was granted on directory `key` (taken with its entry
    /// locked): true when it was not listed yet.
    pub(crate) fn note_dir_lease(&self, key: FileKey) -> bool {
        let mut dirs = lock(&self.dir_leases);
        if dirs.iter().any(|(k, _)| *k == key) {
            return false;
        }
        dirs.push((key, None));
        self.dir_leased.store(dirs.len(), Ordering::Release);
        true
    }

    /// Give leased directory `key` a kernel watch, made by `watch` (which
    /// returns the id it is held by) unless it has one or is no longer
    /// leased: the list's lock is held meanwhile, so a watch is never made
    /// for a directory whose last lease just went.
    pub(crate) fn watch_dir_lease(&self, key: FileKey, watch: impl FnOnce() -> Option<u64>) {
        let mut dirs = lock(&self.dir_leases);
        if let Some((_, w @ None)) = dirs.iter_mut().find(|(k, _)| *k == key) {
            *w = watch();
        }
    }

    /// The list of leased directories and the ids their kernel watches are
    /// held by, for a file system job that adds one ([`crate::dirlease::watch`]).
    pub(crate) fn dir_lease_list(&self) -> LeasedDirs {
        Arc::clone(&self.dir_leases)
    }

    /// Whether some directory may hold a lease (a quick look).
    pub fn any_dir_leased(&self) -> bool {
        self.dir_leased.load(Ordering::Acquire) != 0
    }

    /// The entries of the directories that hold leases now, with their
    /// keys. Takes no entry lock while the list is locked (an entry's lock
    /// comes first).
    pub(crate) fn leased_dirs(&self) -> Vec<(FileKey, Arc<Mutex<FileEntry>>)> {
        if self.dir_leased.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let keys: Vec<FileKey> = lock(&self.dir_leases).iter().map(|(k, _)| *k).collect();
        keys.into_iter()
            .filter_map(|k| self.existing(k).map(|e| (k, e)))
            .collect()
    }

    /// The entries of the leased directories whose kernel watches are held
    /// by one of `watches` (all that have a watch when `all`).
    pub(crate) fn dirs_watched_by(&self, watches: &[u64], all: bool) -> Vec<Arc<Mutex<FileEntry>>> {
        if self.dir_leased.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let keys: Vec<FileKey> = lock(&self.dir_leases)
            .iter()
            .filter(|(_, w)| w.is_some_and(|w| all || watches.contains(&w)))
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter().filter_map(|k| self.existing(k)).collect()
    }

    /// How many leased directories have a kernel watch (docs/limits.md).
    pub fn dir_lease_watches(&self) -> usize {
        lock(&self.dir_leases)
            .iter()
            .filter(|(_, w)| w.is_some())
            .count()
    }

    /// How many leases are held.
    pub(crate) fn lease_count(&self) -> usize {
        lock(&self.leases).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::ShareEntry;

    fn key(n: u64) -> FileKey {
        FileKey {
            dev: 1,
            ino: n,
            stream: 0,
        }
    }

    fn open_on(t: &FileTable, k: FileKey, share: &str) -> Arc<Mutex<FileEntry>> {
        let e = t.entry(k);
        {
            let mut g = lock(&e);
            g.share.push_str(share);
            g.delete_pending = true;
            g.waiters.push(7);
            g.opens.push(ShareEntry {
                owner: 1,
                access: 1,
                share_access: 7,
                caching: Default::default(),
                who: None,
                posix: false,
            });
        }
        e
    }

    #[test]
    fn a_file_entry_given_up_serves_the_next_file_empty() {
        let t = FileTable::default();
        let e = open_on(&t, key(1), "docs");
        let first = Arc::as_ptr(&e);
        lock(&e).opens.clear();
        drop(e);
        t.drop_if_unused(key(1));
        assert!(t.existing(key(1)).is_none());
        let next = t.entry(key(2));
        assert_eq!(Arc::as_ptr(&next), first, "the emptied entry serves again");
        let g = lock(&next);
        assert!(g.opens.is_empty() && g.opens.capacity() > 0, "room kept");
        assert!(g.share.is_empty() && g.share.capacity() > 0);
        assert!(!g.delete_pending && g.waiters.is_empty());
        assert!(g.path.components().is_empty());
    }

    #[test]
    fn a_file_entry_someone_still_holds_is_not_served_again() {
        let t = FileTable::default();
        let e = open_on(&t, key(1), "docs");
        lock(&e).opens.clear();
        t.drop_if_unused(key(1));
        let next = t.entry(key(2));
        assert!(!Arc::ptr_eq(&next, &e), "a held entry stays its holder's");
        assert_eq!(lock(&e).share, "docs", "and unchanged");
    }
}
