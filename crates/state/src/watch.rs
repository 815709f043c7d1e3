//! Who watches what, as the server's tables hold it: the CHANGE_NOTIFY watchers by directory
//! ([`Registry`], [`Watcher`]) and the kernel watches of watched directories ([`Kernel`]).
//! Only the data; what reports changes to them is [`crate::notify`], what turns the kernel's
//! events into changes is [`crate::notify::kernel`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::files::FileKey;

/// The driver's side: watch a directory's entries.
pub trait KernelWatch: Send + Sync {
    /// Start watching the directory open as `dir` (through its descriptor: none, no watch);
    /// its watch descriptor. A file system call: on a network file system the kernel's
    /// permission check may ask the server.
    fn add(&self, dir: &dyn ringshare_vfs::Node) -> Option<i32>;
    /// Stop the watch.
    fn remove(&self, wd: i32);
}

/// One event as the kernel gave it (inotify's `struct inotify_event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelEvent {
    pub wd: i32,
    pub mask: u32,
    pub cookie: u32,
    pub name: Option<String>,
}

/// Records (action, relative name) on their way to one watcher.
pub type Records = Vec<(u32, String)>;

/// Watched directories by share root, then by path from that root.
pub type Dirs = HashMap<FileKey, HashMap<Vec<String>, Vec<Arc<Watcher>>>>;

/// Every watcher of the server.
#[derive(Default)]
pub struct Registry {
    /// Watchers registered, server-wide: 0 (and `remote` 0) means
    /// producers have nothing to do.
    pub armed: AtomicUsize,
    /// Other cluster nodes with watchers (`crate::cluster::notify` (crates/core)).
    pub remote: AtomicUsize,
    pub dirs: RwLock<Dirs>,
    /// Bytes held in every watcher's buffer.
    pub buffered: AtomicUsize,
    /// Kernel watches of watched directories ([`crate::notify::kernel`]); shared with the
    /// file system jobs that add them on an offloaded share.
    pub kernel: Arc<Mutex<Kernel>>,
    /// How many directories have one (0: own changes mark nothing).
    pub kernel_dirs: Arc<AtomicUsize>,
    /// Jobs waiting in [`Kernel::jobs`] (a quick look).
    pub kernel_jobs: AtomicUsize,
    /// Wakes the driver's workers when a job is queued off their threads (a peer's forwarded
    /// change, a job's report), so that worker 0 posts it on its next turn
    /// (`ServerState::set_kernel_jobs_waker`).
    pub kernel_waker: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    pub next_id: std::sync::atomic::AtomicU64,
}

/// The change-notify state of one directory open.
pub struct Watcher {
    /// Server-wide id (kernel watches are held by watcher id).
    pub id: u64,
    /// The watched directory.
    pub dir: FileKey,
    pub root: FileKey,
    pub filter: u32,
    pub tree: bool,
    /// The first request's OutputBufferLength, at most
    /// [`crate::limits::NOTIFY_BUFFER_BYTES_MAX`].
    pub capacity: usize,
    pub state: Mutex<WatchState>,
}

#[derive(Default)]
pub struct WatchState {
    /// Where the directory is now (its key in the registry).
    pub path: Vec<String>,
    /// Changes not yet sent, as a FILE_NOTIFY_INFORMATION chain.
    pub buf: Vec<u8>,
    /// Where the last record of `buf` starts, and what it says (an identical
    /// change right after it is not repeated).
    pub last: Option<(usize, u32, String)>,
    /// Changes were dropped: the next answer is NOTIFY_ENUM_DIR.
    pub overflow: bool,
    /// Requests waiting, oldest first: (connection, async id).
    pub pending: VecDeque<(u64, u64)>,
    /// The head of `pending` was told to look (one notice per answer).
    pub told: bool,
    /// The watch ended (the handle was closed: NOTIFY_CLEANUP; the
    /// directory is to be deleted: DELETE_PENDING): every request gets it.
    pub end: Option<NtStatus>,
}

impl WatchState {
    pub(crate) fn has_news(&self) -> bool {
        self.end.is_some() || self.overflow || !self.buf.is_empty()
    }
}

/// Where a directory is: its share root and path from it.
pub type DirAt = (FileKey, Vec<String>);

pub struct KDir {
    pub wd: Option<i32>,
    /// The watchers (by id) that asked for the kernel watch: of this
    /// directory, or WATCH_TREE ones above it; and the id a leased
    /// directory's watch is held by ([`crate::dirlease`]).
    pub refs: Vec<u64>,
    /// Names ringshare changed here lately, with when the mark ends (None:
    /// not yet stamped: it ends [`crate::notify::kernel::ECHO_MS`] after the first event it hides
    /// or the first sweep).
    pub echo: HashMap<String, Option<u64>>,
}

/// A watched share root: its share, how many watchers use it, its key for
/// file system jobs when it is offloaded ([`Kernel::roots`]).
pub type WatchedRoot = (Arc<dyn ringshare_vfs::Share>, usize, Option<u64>);

#[derive(Default)]
pub struct Kernel {
    pub watch: Option<Arc<dyn KernelWatch>>,
    pub dirs: HashMap<DirAt, KDir>,
    pub by_wd: HashMap<i32, Vec<DirAt>>,
    pub held: VecDeque<(u64, KernelEvent)>,
    /// Marks in all directories.
    pub marks: usize,
    pub next_sweep_ms: u64,
    /// The share of each root a watcher watches (subdirectories are opened
    /// through it to watch them), how many watchers use it, and, for an
    /// offloaded share (its watches are added in file system jobs), its key
    /// for those jobs (`crate::fsjob::share_key`).
    pub roots: HashMap<FileKey, WatchedRoot>,
    /// The root each live watcher uses (counted once in `roots`): a watcher
    /// not here has ended, and a watch added for it in a job is not kept.
    pub root_of: HashMap<u64, FileKey>,
    /// Watches being added off the lock (in file system jobs) now.
    pub adding: usize,
    /// Watch descriptors no directory uses, removed once no add is under
    /// way: an add of the same directory returns the same descriptor, which
    /// a removal meanwhile would take from under it.
    pub unwatch_later: Vec<i32>,
    /// File system jobs that add watches, waiting to be posted to the pool
    /// (`ServerState::take_kernel_jobs`).
    pub jobs: Vec<crate::fsjob::FsJob>,
    /// Directories below its own each WATCH_TREE watcher has kernel-watched.
    pub tree_counts: HashMap<u64, usize>,
    /// The WATCH_TREE bound was logged.
    pub tree_warned: bool,
    /// Whom each WATCH_TREE watcher's directories are opened as.
    pub tree_whos: HashMap<u64, ringshare_vfs::Who>,
}

/// One change, named by its path from the share root (and for a named
/// stream's change, the stream: the record's name is then `file:stream`).
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub action: u32,
    pub filter: u32,
    pub path: &'a RelPath,
    pub stream: Option<&'a str>,
}
