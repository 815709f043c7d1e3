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
use crate::sync::lock;

/// The open files of the server ([`crate::server::ServerState::files`]).
pub struct FileTable {
    entries: Mutex<HashMap<FileKey, Arc<Mutex<FileEntry>>>>,
    /// Which file each lease is on (a lease key names one file).
    leases: Mutex<HashMap<LeaseId, FileKey>>,
    next_owner: AtomicU64,
    /// Durable opens whose connection went ([`crate::durable`]).
    pub durables: Mutex<crate::files::parked::Durables<Arc<crate::state::Open>>>,
    /// Open files whose write time is not the disk's now
    /// (`crate::writetime` (crates/core)); 0 lets listings skip looking.
    pub write_times_shown: AtomicUsize,
}

impl Default for FileTable {
    fn default() -> FileTable {
        FileTable {
            entries: Mutex::new(HashMap::new()),
            leases: Mutex::new(HashMap::new()),
            next_owner: AtomicU64::new(1),
            durables: Mutex::new(Default::default()),
            write_times_shown: AtomicUsize::new(0),
        }
    }
}

impl FileTable {
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
        files.entry(key).or_default().clone()
    }

    /// The entry of a file if some open has it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<Mutex<FileEntry>>> {
        lock(&self.entries).get(&key).cloned()
    }

    /// Every entry.
    pub fn all(&self) -> Vec<Arc<Mutex<FileEntry>>> {
        lock(&self.entries).values().cloned().collect()
    }

    /// The entries whose key `pick` takes, with their keys.
    pub fn keyed(&self, pick: impl Fn(FileKey) -> bool) -> Vec<(FileKey, Arc<Mutex<FileEntry>>)> {
        lock(&self.entries)
            .iter()
            .filter(|(k, _)| pick(**k))
            .map(|(k, e)| (*k, e.clone()))
            .collect()
    }

    /// Whether a file or directory strictly below directory `dir` of share
    /// `share` is open (a rename of `dir` would move it).
    pub fn opens_below(&self, share: &str, dir: &RelPath) -> bool {
        let n = dir.components().len();
        lock(&self.entries).values().any(|e| {
            let e = lock(e);
            !e.opens.is_empty()
                && e.share == share
                && e.path.components().len() > n
                && e.path.components()[..n] == *dir.components()
        })
    }

    /// Give the entry under `from` (a renamed stream's) the key `to`, with
    /// the leases on it: false, and nothing changed, when `to` has an entry.
    pub fn rekey(&self, from: FileKey, to: FileKey) -> bool {
        {
            let mut files = lock(&self.entries);
            if files.contains_key(&to) {
                return false;
            }
            let Some(e) = files.remove(&from) else {
                return false;
            };
            files.insert(to, e);
        }
        for k in lock(&self.leases).values_mut() {
            if *k == from {
                *k = to;
            }
        }
        true
    }

    /// Forget a file's entry when no open is left on it.
    pub fn drop_if_unused(&self, key: FileKey) {
        let mut files = lock(&self.entries);
        if let Some(e) = files.get(&key) {
            let e = lock(e);
            if e.opens.is_empty() {
                e.write_time.forget(&self.write_times_shown);
                drop(e);
                files.remove(&key);
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

    /// The lease is gone from file `key` with the last open there that named it.
    pub fn forget_lease(&self, id: LeaseId, key: FileKey) {
        let mut m = lock(&self.leases);
        if m.get(&id) == Some(&key) {
            m.remove(&id);
        }
    }

    /// The leases with this key (one per client), with the files they are on.
    pub fn leases_keyed(&self, lease_key: [u8; 16]) -> Vec<(LeaseId, FileKey)> {
        lock(&self.leases)
            .iter()
            .filter(|(id, _)| id.key == lease_key)
            .map(|(id, k)| (*id, *k))
            .collect()
    }

    /// How many leases are held.
    pub(crate) fn lease_count(&self) -> usize {
        lock(&self.leases).len()
    }
}
