//! Who watches what, as the server's tables hold it: the CHANGE_NOTIFY watchers by directory
//! ([`Registry`], [`Watcher`]) and the kernel watches of watched directories ([`Kernel`]).
//! Only the data; what reports changes to them is [`crate::notify`], what turns the kernel's
//! events into changes is [`crate::notify::kernel`].

use std::collections::{HashMap, VecDeque};
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::files::FileKey;

/// The driver's side: watch a directory's entries.
pub trait KernelWatch: Send + Sync {
    /// Start watching the directory open as `dir`; its watch descriptor.
    fn add(&self, dir: BorrowedFd<'_>) -> Option<i32>;
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
pub(crate) type Records = Vec<(u32, String)>;

/// Watched directories by share root, then by path from that root.
pub(crate) type Dirs = HashMap<FileKey, HashMap<Vec<String>, Vec<Arc<Watcher>>>>;

/// Every watcher of the server.
#[derive(Default)]
pub(crate) struct Registry {
    /// Watchers registered, server-wide: 0 (and `remote` 0) means
    /// producers have nothing to do.
    pub(crate) armed: AtomicUsize,
    /// Other cluster nodes with watchers ([`crate::cluster::notify`]).
    pub(crate) remote: AtomicUsize,
    pub(crate) dirs: RwLock<Dirs>,
    /// Bytes held in every watcher's buffer.
    pub(crate) buffered: AtomicUsize,
    /// Kernel watches of watched directories ([`crate::notify::kernel`]).
    pub(crate) kernel: Mutex<Kernel>,
    /// How many directories have one (0: own changes mark nothing).
    pub(crate) kernel_dirs: AtomicUsize,
    pub(crate) next_id: std::sync::atomic::AtomicU64,
}

/// The change-notify state of one directory open.
pub(crate) struct Watcher {
    /// Server-wide id (kernel watches are held by watcher id).
    pub(crate) id: u64,
    /// The watched directory.
    pub(crate) dir: FileKey,
    pub(crate) root: FileKey,
    pub(crate) filter: u32,
    pub(crate) tree: bool,
    /// The first request's OutputBufferLength, at most
    /// [`crate::limits::NOTIFY_BUFFER_BYTES_MAX`].
    pub(crate) capacity: usize,
    pub(crate) state: Mutex<WatchState>,
}

#[derive(Default)]
pub(crate) struct WatchState {
    /// Where the directory is now (its key in the registry).
    pub(crate) path: Vec<String>,
    /// Changes not yet sent, as a FILE_NOTIFY_INFORMATION chain.
    pub(crate) buf: Vec<u8>,
    /// Where the last record of `buf` starts, and what it says (an identical
    /// change right after it is not repeated).
    pub(crate) last: Option<(usize, u32, String)>,
    /// Changes were dropped: the next answer is NOTIFY_ENUM_DIR.
    pub(crate) overflow: bool,
    /// Requests waiting, oldest first: (connection, async id).
    pub(crate) pending: VecDeque<(u64, u64)>,
    /// The head of `pending` was told to look (one notice per answer).
    pub(crate) told: bool,
    /// The watch ended (the handle was closed: NOTIFY_CLEANUP; the
    /// directory is to be deleted: DELETE_PENDING): every request gets it.
    pub(crate) end: Option<NtStatus>,
}

impl WatchState {
    pub(crate) fn has_news(&self) -> bool {
        self.end.is_some() || self.overflow || !self.buf.is_empty()
    }
}

/// Where a directory is: its share root and path from it.
pub(crate) type DirAt = (FileKey, Vec<String>);

pub(crate) struct KDir {
    pub(crate) wd: Option<i32>,
    /// The watchers (by id) that asked for the kernel watch: of this
    /// directory, or WATCH_TREE ones above it.
    pub(crate) refs: Vec<u64>,
    /// Names ringshare changed here lately, with when the mark ends (None:
    /// not yet stamped: it ends [`crate::notify::kernel::ECHO_MS`] after the first event it hides
    /// or the first sweep).
    pub(crate) echo: HashMap<String, Option<u64>>,
}

#[derive(Default)]
pub(crate) struct Kernel {
    pub(crate) watch: Option<Arc<dyn KernelWatch>>,
    pub(crate) dirs: HashMap<DirAt, KDir>,
    pub(crate) by_wd: HashMap<i32, Vec<DirAt>>,
    pub(crate) held: VecDeque<(u64, KernelEvent)>,
    /// Marks in all directories.
    pub(crate) marks: usize,
    pub(crate) next_sweep_ms: u64,
    /// The share of each root a watcher watches (subdirectories are opened
    /// through it to watch them).
    pub(crate) roots: HashMap<FileKey, (Arc<dyn ringshare_vfs::Share>, usize)>,
    /// Directories below its own each WATCH_TREE watcher has kernel-watched.
    pub(crate) tree_counts: HashMap<u64, usize>,
    /// The WATCH_TREE bound was logged.
    pub(crate) tree_warned: bool,
    /// Whom each WATCH_TREE watcher's directories are opened as.
    pub(crate) tree_whos: HashMap<u64, ringshare_vfs::Who>,
}

/// One change, named by its path from the share root (and for a named
/// stream's change, the stream: the record's name is then `file:stream`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Change<'a> {
    pub action: u32,
    pub filter: u32,
    pub path: &'a RelPath,
    pub stream: Option<&'a str>,
}
