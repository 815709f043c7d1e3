//! In-memory backend, for tests and fuzzing of the server core.
//!
//! A tree of inodes behind one `Mutex`, with the same error semantics as the POSIX
//! backend (the shared conformance suite in `tests/conformance.rs` holds both to it).
//! It is deterministic: times come from a clock that starts at a fixed value and moves
//! one tick per time stamp (or is set by the caller); nothing reads the system clock.
//!
//! Extras for tests: [`MemShare::inject_fault`] makes chosen operations fail a given
//! number of times, and a capacity (default [`MEM_CAPACITY_BYTES_DEFAULT`]) makes
//! writes past it fail with [`FsError::NoSpace`]. Clones share the same tree, so
//! `share.clone().with_read_only(true)` is a read-only view of it.
//!
//! Lock order: one lock (`MemShare::state`); no call made with it held takes another.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{
    check_ea, DefaultAcl, FileAttr, FileKind, FsError, FsResult, FsStat, Node, OpenMode,
    OpenOptions, Opened, PosixAcl, RelPath, SetTimes, Share, UnixNanos, Who,
};

/// Capacity of a share made with [`MemShare::new`]: 1 GiB of file data.
pub const MEM_CAPACITY_BYTES_DEFAULT: u64 = 1 << 30;
/// Start of the clock of [`MemShare::new`]: 2024-01-01T00:00:00Z.
pub const MEM_CLOCK_START_NS: UnixNanos = 1_704_067_200 * 1_000_000_000;
/// How far the clock moves for each time stamp it hands out.
pub const MEM_CLOCK_TICK_NS: UnixNanos = 1_000;

const BLOCK_SIZE: u64 = 4096;
const ROOT_INO: u64 = 1;
const MEM_DEV: u64 = 0x6d656d;

/// Operations that [`MemShare::inject_fault`] can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// `Share::open`.
    Open,
    /// `Node::read_at`.
    Read,
    /// `Node::write_at`.
    Write,
    /// `Node::sync`.
    Sync,
    /// `Node::set_len`.
    SetLen,
    /// `Share::rename` (matched against both paths).
    Rename,
    /// `Share::unlink` and `Share::rmdir`.
    Unlink,
    /// `Node::read_dir`.
    ReadDir,
    /// `Share::stat` and `Node::stat`.
    Stat,
    /// `Node::open_stream` (matched against the file's path).
    OpenStream,
}

#[derive(Debug)]
struct Fault {
    op: FaultOp,
    prefix: Option<RelPath>,
    err: FsError,
    remaining: usize,
}

#[derive(Debug)]
struct Inode {
    kind: FileKind,
    data: Vec<u8>,
    children: BTreeMap<String, u64>,
    mode: u32,
    uid: u32,
    gid: u32,
    atime: UnixNanos,
    mtime: UnixNanos,
    ctime: UnixNanos,
    btime: UnixNanos,
    dos: Option<u32>,
    /// A stored Windows security descriptor (self-relative bytes).
    ntacl: Option<Vec<u8>>,
    /// Netatalk's `org.netatalk.Metadata` value.
    netatalk: Option<Vec<u8>>,
    /// The reparse data buffer a client stored.
    reparse: Option<Vec<u8>>,
    acl_access: Option<PosixAcl>,
    acl_default: Option<PosixAcl>,
    /// Extended attributes (upper-case name, value) in the order first set.
    eas: Vec<(String, Vec<u8>)>,
    /// Named data streams (name as created, data) in the order created.
    streams: Vec<(String, Vec<u8>)>,
    allocation: u64,
    /// False once unlinked; the inode lives on while nodes have it open.
    linked: bool,
    opens: usize,
}

#[derive(Debug)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    clock: UnixNanos,
    used_bytes: u64,
    capacity_bytes: u64,
    faults: Vec<Fault>,
    /// Set by [`MemShare::with_block_cloning`]: [`Node::clone_range`]
    /// works, aligned to [`BLOCK_SIZE`].
    clones: bool,
}

impl State {
    fn now(&mut self) -> UnixNanos {
        let t = self.clock;
        self.clock += MEM_CLOCK_TICK_NS;
        t
    }

    fn inode(&self, ino: u64) -> FsResult<&Inode> {
        self.inodes.get(&ino).ok_or(FsError::NotFound)
    }

    fn inode_mut(&mut self, ino: u64) -> FsResult<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(FsError::NotFound)
    }

    fn take_fault(&mut self, op: FaultOp, paths: &[&RelPath]) -> FsResult<()> {
        for f in self.faults.iter_mut() {
            if f.op != op || f.remaining == 0 {
                continue;
            }
            let hit = match &f.prefix {
                None => true,
                Some(p) => paths
                    .iter()
                    .any(|path| path.components().starts_with(p.components())),
            };
            if hit {
                f.remaining -= 1;
                return Err(f.err);
            }
        }
        self.faults.retain(|f| f.remaining > 0);
        Ok(())
    }

    fn child(&self, dir: u64, name: &str) -> Option<u64> {
        self.inodes
            .get(&dir)
            .and_then(|d| d.children.get(name).copied())
    }

    /// The directory at `path`; missing or not a directory → `PathNotFound`.
    fn lookup_dir(&self, path: &RelPath) -> FsResult<u64> {
        let mut ino = ROOT_INO;
        for c in path.components() {
            ino = self.child(ino, c).ok_or(FsError::PathNotFound)?;
            if self.inode(ino)?.kind != FileKind::Directory {
                return Err(FsError::PathNotFound);
            }
        }
        Ok(ino)
    }

    /// The object at `path`: missing parent → `PathNotFound`, missing last → `NotFound`.
    fn lookup(&self, path: &RelPath) -> FsResult<u64> {
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => {
                let dir = self.lookup_dir(&parent)?;
                self.child(dir, name).ok_or(FsError::NotFound)
            }
            _ => Ok(ROOT_INO),
        }
    }

    fn new_inode(&mut self, kind: FileKind, mode: u32) -> u64 {
        let now = self.now();
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(
            ino,
            Inode {
                kind,
                data: Vec::new(),
                children: BTreeMap::new(),
                mode: mode & 0o7777,
                uid: 0,
                gid: 0,
                atime: now,
                mtime: now,
                ctime: now,
                btime: now,
                dos: None,
                ntacl: None,
                netatalk: None,
                reparse: None,
                acl_access: None,
                acl_default: None,
                eas: Vec::new(),
                streams: Vec::new(),
                allocation: 0,
                linked: true,
                opens: 0,
            },
        );
        ino
    }

    fn touch_dir(&mut self, dir: u64) {
        let now = self.now();
        if let Some(d) = self.inodes.get_mut(&dir) {
            d.mtime = now;
            d.ctime = now;
        }
    }

    /// Forget an inode that is unlinked and no longer open.
    fn reap(&mut self, ino: u64) {
        let dead = self
            .inodes
            .get(&ino)
            .is_some_and(|i| !i.linked && i.opens == 0);
        if dead {
            if let Some(i) = self.inodes.remove(&ino) {
                let bytes = i.data.len() + i.streams.iter().map(|(_, d)| d.len()).sum::<usize>();
                self.used_bytes = self.used_bytes.saturating_sub(bytes as u64);
            }
        }
    }

    fn unlink_inode(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.linked = false;
        }
        self.reap(ino);
    }

    /// Resize a file's data, keeping within the capacity.
    fn resize(&mut self, ino: u64, len: u64) -> FsResult<()> {
        let old = self.inode(ino)?.data.len() as u64;
        if len > old {
            let growth = len - old;
            if self.used_bytes.saturating_add(growth) > self.capacity_bytes {
                return Err(FsError::NoSpace);
            }
        }
        let new_len = usize::try_from(len).map_err(|_| FsError::NoSpace)?;
        self.inode_mut(ino)?.data.resize(new_len, 0);
        self.used_bytes = self.used_bytes - old + len;
        Ok(())
    }

    fn attr(&self, ino: u64) -> FsResult<FileAttr> {
        let i = self.inode(ino)?;
        let size = match i.kind {
            FileKind::Directory => BLOCK_SIZE,
            _ => i.data.len() as u64,
        };
        let nlink = match (i.linked, i.kind) {
            (false, _) => 0,
            (true, FileKind::Directory) => {
                let subdirs = i
                    .children
                    .values()
                    .filter(|c| {
                        self.inodes
                            .get(c)
                            .is_some_and(|c| c.kind == FileKind::Directory)
                    })
                    .count();
                2 + subdirs as u64
            }
            (true, _) => 1,
        };
        Ok(FileAttr {
            kind: i.kind,
            size,
            alloc_size: size.max(i.allocation).div_ceil(BLOCK_SIZE) * BLOCK_SIZE,
            mode: i.mode,
            uid: i.uid,
            gid: i.gid,
            nlink,
            ino,
            dev: MEM_DEV,
            atime: i.atime,
            mtime: i.mtime,
            ctime: i.ctime,
            btime: Some(i.btime),
            dos_attributes: i.dos,
            create_time: None,
            compressed: false,
        })
    }
}

/// An in-memory share. Clones share the same tree.
#[derive(Clone)]
pub struct MemShare {
    state: Arc<Mutex<State>>,
    read_only: bool,
    /// A snapshot's view ([`Share::is_snapshot`]; read-only too).
    snapshot: bool,
    /// Where this handle's root is in the tree: empty, or the directory a
    /// [`Share::read_only_view`] was made of.
    root: RelPath,
}

impl fmt::Debug for MemShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemShare")
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Default for MemShare {
    fn default() -> Self {
        MemShare::new()
    }
}

/// Copy what `data` holds from `offset` into `buf`; the bytes copied (0 at
/// or past its end).
fn read_from(data: &[u8], offset: u64, buf: &mut [u8]) -> usize {
    let avail = usize::try_from(offset)
        .ok()
        .and_then(|start| data.get(start..))
        .unwrap_or_default();
    let n = avail.len().min(buf.len());
    buf[..n].copy_from_slice(&avail[..n]);
    n
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MemShare {
    /// An empty writable share whose clock starts at [`MEM_CLOCK_START_NS`].
    pub fn new() -> MemShare {
        MemShare::with_clock(MEM_CLOCK_START_NS)
    }

    /// An empty writable share whose clock starts at `start`.
    pub fn with_clock(start: UnixNanos) -> MemShare {
        let mut st = State {
            inodes: HashMap::new(),
            next_ino: ROOT_INO,
            clock: start,
            used_bytes: 0,
            capacity_bytes: MEM_CAPACITY_BYTES_DEFAULT,
            faults: Vec::new(),
            clones: false,
        };
        let root = st.new_inode(FileKind::Directory, 0o755);
        debug_assert_eq!(root, ROOT_INO);
        MemShare {
            state: Arc::new(Mutex::new(st)),
            read_only: false,
            snapshot: false,
            root: RelPath::root(),
        }
    }

    /// Make this handle read-only (or writable). Other clones keep their mode.
    pub fn with_read_only(mut self, read_only: bool) -> MemShare {
        self.read_only = read_only;
        self
    }

    /// Make the tree clone blocks (as btrfs does), or not (the default): a
    /// clone here copies the bytes, with the kernel's checks of a clone
    /// (alignment to [`BLOCK_SIZE`], the source's end, overlap in a file).
    pub fn with_block_cloning(self, clones: bool) -> MemShare {
        lock(&self.state).clones = clones;
        self
    }

    /// Limit the file data the tree may hold; growing past it gives `NoSpace`.
    pub fn with_capacity_bytes(self, capacity_bytes: u64) -> MemShare {
        lock(&self.state).capacity_bytes = capacity_bytes;
        self
    }

    /// Set the clock: the next time stamp will be `now`.
    pub fn set_clock(&self, now: UnixNanos) {
        lock(&self.state).clock = now;
    }

    /// The time the next time stamp will carry.
    pub fn clock(&self) -> UnixNanos {
        lock(&self.state).clock
    }

    /// Bytes of file data held, named streams' included (files unlinked but
    /// still open included).
    pub fn used_bytes(&self) -> u64 {
        lock(&self.state).used_bytes
    }

    /// Make the next `times` calls of `op` whose path starts with `path_prefix`
    /// (any path when `None`) fail with `err`. For node operations the path is the one
    /// the node was opened with.
    pub fn inject_fault(
        &self,
        op: FaultOp,
        path_prefix: Option<RelPath>,
        err: FsError,
        times: usize,
    ) {
        if times == 0 {
            return;
        }
        lock(&self.state).faults.push(Fault {
            op,
            prefix: path_prefix,
            err,
            remaining: times,
        });
    }

    /// Remove every injected fault not yet used up.
    pub fn clear_faults(&self) {
        lock(&self.state).faults.clear();
    }

    /// `path` of this handle as a path of the whole tree.
    fn under(&self, path: &RelPath) -> RelPath {
        if self.root.is_root() {
            return path.clone();
        }
        let mut full = self.root.clone();
        for c in path.components() {
            // Each was validated already, and a longer path is still one.
            full = full.join(c).unwrap_or_else(|_| full.clone());
        }
        full
    }

    fn check_writable(&self) -> FsResult<()> {
        if self.read_only {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    fn make_node(
        &self,
        st: &mut State,
        ino: u64,
        path: &RelPath,
        readable: bool,
        writable: bool,
    ) -> FsResult<MemNode> {
        let inode = st.inode_mut(ino)?;
        inode.opens += 1;
        let kind = inode.kind;
        let (readable, writable) = if kind == FileKind::Directory {
            (false, false)
        } else {
            (readable, writable)
        };
        Ok(MemNode {
            state: Arc::clone(&self.state),
            ino,
            path: path.clone(),
            kind,
            readable,
            writable,
            read_only: self.read_only,
        })
    }
}

impl Share for MemShare {
    fn read_only_view(&self, _who: &Who, dir: &RelPath) -> FsResult<Arc<dyn Share>> {
        let root = self.under(dir);
        let st = lock(&self.state);
        st.lookup(&root).and_then(|ino| match st.inode(ino)?.kind {
            FileKind::Directory => Ok(()),
            _ => Err(FsError::NotADirectory),
        })?;
        Ok(Arc::new(MemShare {
            state: Arc::clone(&self.state),
            read_only: true,
            snapshot: true,
            root,
        }))
    }

    fn clone_block_size(&self) -> Option<u64> {
        (lock(&self.state).clones && !self.read_only).then_some(BLOCK_SIZE)
    }

    fn is_snapshot(&self) -> bool {
        self.snapshot
    }

    /// Files and directories made here belong to `who` (no permission is
    /// checked: the in-memory share serves tests of the protocol).
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let path = &self.under(path);
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Open, &[path])?;
        let truncates = matches!(opts.mode, OpenMode::Truncate | OpenMode::TruncateOrCreate);
        let creates = matches!(
            opts.mode,
            OpenMode::CreateNew | OpenMode::OpenOrCreate | OpenMode::TruncateOrCreate
        );
        if self.read_only
            && ((opts.write && !self.snapshot) || opts.mode == OpenMode::CreateNew || truncates)
        {
            return Err(FsError::ReadOnly);
        }
        // In a snapshot an existing file asked for writing is opened for reading only, as the
        // POSIX backend opens it; a name not there is not made.
        let write = opts.write && !self.snapshot;
        if opts.directory && opts.non_directory {
            return Err(FsError::InvalidName);
        }
        match st.lookup(path) {
            Ok(ino) => {
                if opts.mode == OpenMode::CreateNew {
                    return Err(FsError::Exists);
                }
                let kind = st.inode(ino)?.kind;
                if kind == FileKind::Directory {
                    if truncates || opts.non_directory {
                        return Err(FsError::IsADirectory);
                    }
                } else if opts.directory {
                    return Err(FsError::NotADirectory);
                }
                let mut truncated = false;
                if truncates && kind == FileKind::File {
                    st.resize(ino, 0)?;
                    let now = st.now();
                    let i = st.inode_mut(ino)?;
                    i.mtime = now;
                    i.ctime = now;
                    i.allocation = 0;
                    truncated = true;
                }
                let node = self.make_node(&mut st, ino, path, opts.read, write)?;
                let dir = kind == FileKind::Directory;
                Ok(Opened {
                    node: Arc::new(node),
                    created: false,
                    truncated,
                    attr: None,
                    read: dir || opts.read,
                    write: !dir && write,
                })
            }
            Err(FsError::NotFound) if creates => {
                self.check_writable()?;
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    return Err(FsError::NotFound);
                };
                let name = name.to_string();
                let dir = st.lookup_dir(&parent)?;
                let kind = if opts.directory {
                    FileKind::Directory
                } else {
                    FileKind::File
                };
                let ino = st.new_inode(kind, opts.create_mode);
                let i = st.inode_mut(ino)?;
                (i.uid, i.gid) = (who.uid(), who.gid());
                st.inode_mut(dir)?.children.insert(name, ino);
                st.touch_dir(dir);
                let node = self.make_node(&mut st, ino, path, opts.read, opts.write)?;
                let dir = kind == FileKind::Directory;
                Ok(Opened {
                    node: Arc::new(node),
                    created: true,
                    truncated: false,
                    attr: None,
                    read: dir || opts.read,
                    write: !dir && opts.write,
                })
            }
            Err(e) => Err(e),
        }
    }

    fn stat(&self, _who: &Who, path: &RelPath) -> FsResult<FileAttr> {
        let path = &self.under(path);
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Stat, &[path])?;
        let ino = st.lookup(path)?;
        st.attr(ino)
    }

    fn unlink(&self, _who: &Who, path: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        let path = &self.under(path);
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Unlink, &[path])?;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(FsError::AccessDenied);
        };
        let dir = st.lookup_dir(&parent)?;
        let ino = st.child(dir, name).ok_or(FsError::NotFound)?;
        if st.inode(ino)?.kind == FileKind::Directory {
            return Err(FsError::IsADirectory);
        }
        st.inode_mut(dir)?.children.remove(name);
        st.touch_dir(dir);
        st.unlink_inode(ino);
        Ok(())
    }

    fn rmdir(&self, _who: &Who, path: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        let path = &self.under(path);
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Unlink, &[path])?;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(FsError::AccessDenied);
        };
        let dir = st.lookup_dir(&parent)?;
        let ino = st.child(dir, name).ok_or(FsError::NotFound)?;
        let inode = st.inode(ino)?;
        if inode.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        if !inode.children.is_empty() {
            return Err(FsError::NotEmpty);
        }
        st.inode_mut(dir)?.children.remove(name);
        st.touch_dir(dir);
        st.unlink_inode(ino);
        Ok(())
    }

    fn rename(&self, _who: &Who, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()> {
        self.check_writable()?;
        let (from, to) = (&self.under(from), &self.under(to));
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Rename, &[from, to])?;
        let (Some(from_parent), Some(from_name), Some(to_parent), Some(to_name)) =
            (from.parent(), from.file_name(), to.parent(), to.file_name())
        else {
            return Err(FsError::AccessDenied);
        };
        if to.components().starts_with(from.components()) && to != from {
            return Err(FsError::InvalidName);
        }
        let from_dir = st.lookup_dir(&from_parent)?;
        let to_dir = st.lookup_dir(&to_parent)?;
        let ino = st.child(from_dir, from_name).ok_or(FsError::NotFound)?;
        if from == to {
            return Ok(());
        }
        let kind = st.inode(ino)?.kind;
        if let Some(target) = st.child(to_dir, to_name) {
            if !replace {
                return Err(FsError::Exists);
            }
            let t = st.inode(target)?;
            match (kind == FileKind::Directory, t.kind == FileKind::Directory) {
                (true, false) => return Err(FsError::NotADirectory),
                (false, true) => return Err(FsError::IsADirectory),
                (true, true) if !t.children.is_empty() => return Err(FsError::NotEmpty),
                _ => {}
            }
            st.inode_mut(to_dir)?.children.remove(to_name);
            st.unlink_inode(target);
        }
        st.inode_mut(from_dir)?.children.remove(from_name);
        st.inode_mut(to_dir)?
            .children
            .insert(to_name.to_string(), ino);
        st.touch_dir(from_dir);
        st.touch_dir(to_dir);
        let now = st.now();
        st.inode_mut(ino)?.ctime = now;
        Ok(())
    }

    fn statfs(&self) -> FsResult<FsStat> {
        let st = lock(&self.state);
        let free = st.capacity_bytes.saturating_sub(st.used_bytes) / BLOCK_SIZE;
        Ok(FsStat {
            block_size: BLOCK_SIZE,
            io_size: BLOCK_SIZE,
            total_blocks: st.capacity_bytes / BLOCK_SIZE,
            free_blocks: free,
            avail_blocks: free,
            total_files: 1 << 20,
            free_files: (1u64 << 20).saturating_sub(st.inodes.len() as u64),
            name_max: 255,
            fs_id: MEM_DEV,
        })
    }

    fn streams_supported(&self) -> bool {
        true
    }

    fn find_name_case_insensitive(
        &self,
        _who: &Who,
        dir: &RelPath,
        name: &str,
    ) -> FsResult<String> {
        let st = lock(&self.state);
        let d = st.lookup_dir(&self.under(dir))?;
        let children = &st.inode(d)?.children;
        if children.contains_key(name) {
            return Ok(name.to_string());
        }
        let wanted = name.to_lowercase();
        children
            .keys()
            .find(|k| k.to_lowercase() == wanted)
            .cloned()
            .ok_or(FsError::NotFound)
    }

    fn find_name_matching(
        &self,
        _who: &Who,
        dir: &RelPath,
        matches: &dyn Fn(&str) -> bool,
    ) -> FsResult<String> {
        let st = lock(&self.state);
        let d = st.lookup_dir(&self.under(dir))?;
        let children = &st.inode(d)?.children;
        children
            .keys()
            .find(|k| matches(k))
            .cloned()
            .ok_or(FsError::NotFound)
    }
}

/// An open file or directory of a [`MemShare`].
pub struct MemNode {
    state: Arc<Mutex<State>>,
    ino: u64,
    /// The path at open time, for fault matching.
    path: RelPath,
    kind: FileKind,
    readable: bool,
    writable: bool,
    read_only: bool,
}

impl fmt::Debug for MemNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemNode")
            .field("ino", &self.ino)
            .field("path", &self.path)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Drop for MemNode {
    fn drop(&mut self) {
        let mut st = lock(&self.state);
        if let Some(i) = st.inodes.get_mut(&self.ino) {
            i.opens = i.opens.saturating_sub(1);
        }
        st.reap(self.ino);
    }
}

impl MemNode {
    fn check_writable_share(&self) -> FsResult<()> {
        crate::share_writable(self.read_only)
    }

    fn check_data_write(&self) -> FsResult<()> {
        crate::data_writable(self.read_only, self.kind, self.writable)
    }
}

impl Node for MemNode {
    fn stat(&self) -> FsResult<FileAttr> {
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Stat, &[&self.path])?;
        st.attr(self.ino)
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// A copy, checked as Linux checks `FICLONERANGE`.
    fn clone_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<()> {
        if !lock(&self.state).clones {
            return Err(FsError::Other(crate::EOPNOTSUPP));
        }
        self.check_data_write()?;
        if len == 0 {
            return Ok(());
        }
        let from = src.stat()?;
        let (Some(src_end), Some(dst_end)) =
            (src_offset.checked_add(len), dst_offset.checked_add(len))
        else {
            return Err(FsError::InvalidName);
        };
        let aligned = |n: u64| n.is_multiple_of(BLOCK_SIZE);
        let same = from.ino == self.ino && from.dev == MEM_DEV;
        if !aligned(src_offset)
            || !aligned(dst_offset)
            || (!aligned(len) && src_end != from.size)
            || src_end > from.size
            || (same && src_offset < dst_end && dst_offset < src_end)
        {
            return Err(FsError::InvalidName);
        }
        match crate::copy_through_buffer(self, src, src_offset, dst_offset, len)? {
            n if n == len => Ok(()),
            _ => Err(FsError::Io),
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Read, &[&self.path])?;
        if self.kind == FileKind::Directory {
            return Err(FsError::IsADirectory);
        }
        if !self.readable {
            return Err(FsError::AccessDenied);
        }
        Ok(read_from(&st.inode(self.ino)?.data, offset, buf))
    }

    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Write, &[&self.path])?;
        self.check_data_write()?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(FsError::NoSpace)?;
        let len = st.inode(self.ino)?.data.len() as u64;
        if end > len {
            st.resize(self.ino, end)?;
        }
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        let start = usize::try_from(offset).map_err(|_| FsError::NoSpace)?;
        let dst = i
            .data
            .get_mut(start..start + data.len())
            .ok_or(FsError::Io)?;
        dst.copy_from_slice(data);
        i.mtime = now;
        i.ctime = now;
        Ok(data.len())
    }

    fn sync(&self) -> FsResult<()> {
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Sync, &[&self.path])?;
        st.inode(self.ino).map(|_| ())
    }

    fn set_len(&self, len: u64) -> FsResult<()> {
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::SetLen, &[&self.path])?;
        self.check_data_write()?;
        st.resize(self.ino, len)?;
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        i.mtime = now;
        i.ctime = now;
        Ok(())
    }

    fn set_allocation(&self, size: u64) -> FsResult<()> {
        let mut st = lock(&self.state);
        self.check_data_write()?;
        if size > st.capacity_bytes {
            return Err(FsError::NoSpace);
        }
        st.inode_mut(self.ino)?.allocation = size;
        Ok(())
    }

    fn set_times(&self, times: &SetTimes) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        if let Some(t) = times.atime {
            i.atime = t;
        }
        if let Some(t) = times.mtime {
            i.mtime = t;
        }
        if let Some(t) = times.btime {
            i.btime = t;
        }
        i.ctime = now;
        Ok(())
    }

    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        let reparse = i.dos.unwrap_or(0) & crate::ATTR_REPARSE_POINT;
        i.dos = Some((attrs & !crate::ATTR_REPARSE_POINT) | reparse);
        i.ctime = now;
        Ok(())
    }

    fn set_mode(&self, mode: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        i.mode = mode & 0o7777;
        i.ctime = now;
        Ok(())
    }

    fn set_owner(&self, uid: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        i.uid = uid;
        i.ctime = now;
        Ok(())
    }

    fn nt_acl_blob(&self) -> FsResult<Option<Vec<u8>>> {
        let st = lock(&self.state);
        Ok(st.inode(self.ino)?.ntacl.clone())
    }

    fn set_nt_acl_blob(&self, blob: Option<&[u8]>) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        i.ntacl = blob.map(<[u8]>::to_vec);
        i.ctime = now;
        Ok(())
    }

    fn reparse_point(&self) -> FsResult<Option<Vec<u8>>> {
        let st = lock(&self.state);
        Ok(st.inode(self.ino)?.reparse.clone())
    }

    fn entry_reparse_point(&self, name: &str) -> FsResult<Option<Vec<u8>>> {
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        let st = lock(&self.state);
        let ino = st
            .inode(self.ino)?
            .children
            .get(name)
            .copied()
            .ok_or(FsError::NotFound)?;
        Ok(st.inode(ino)?.reparse.clone())
    }

    fn set_reparse_point(&self, value: Option<&[u8]>) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        let dos = i.dos.unwrap_or(0x20);
        i.dos = Some(match value {
            Some(_) => (dos | crate::ATTR_REPARSE_POINT) & !0x80,
            None => dos & !crate::ATTR_REPARSE_POINT,
        });
        i.reparse = value.map(<[u8]>::to_vec);
        i.ctime = now;
        Ok(())
    }

    fn netatalk_metadata(&self) -> FsResult<Option<Vec<u8>>> {
        let st = lock(&self.state);
        Ok(st.inode(self.ino)?.netatalk.clone())
    }

    fn set_netatalk_metadata(&self, value: Option<&[u8]>) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        i.netatalk = value.map(<[u8]>::to_vec);
        i.ctime = now;
        Ok(())
    }

    fn posix_acls(&self) -> FsResult<crate::PosixAcls> {
        let st = lock(&self.state);
        let i = st.inode(self.ino)?;
        Ok(crate::PosixAcls {
            access: i.acl_access.clone(),
            default: i.acl_default.clone(),
        })
    }

    /// As the kernel does: a minimal access ACL is only the mode bits.
    fn set_posix_acls(
        &self,
        access: &PosixAcl,
        default: DefaultAcl<'_>,
        _server_may: bool,
    ) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        access.validate().map_err(|_| FsError::InvalidName)?;
        i.mode = (i.mode & !0o777) | access.mode_bits();
        i.acl_access = (!access.is_minimal()).then(|| access.clone());
        match default {
            DefaultAcl::Keep => {}
            DefaultAcl::Remove => i.acl_default = None,
            DefaultAcl::Set(d) if i.kind == FileKind::Directory => i.acl_default = Some(d.clone()),
            DefaultAcl::Set(_) => return Err(FsError::NotADirectory),
        }
        i.ctime = now;
        Ok(())
    }

    /// No permission is checked (as nowhere in the in-memory share).
    fn chown(&self, uid: Option<u32>, gid: Option<u32>, _server_may: bool) -> FsResult<()> {
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        i.uid = uid.unwrap_or(i.uid);
        i.gid = gid.unwrap_or(i.gid);
        i.ctime = now;
        Ok(())
    }

    fn list_eas(&self) -> FsResult<Vec<(String, Vec<u8>)>> {
        let st = lock(&self.state);
        Ok(st.inode(self.ino)?.eas.clone())
    }

    fn set_ea(&self, name: &str, value: Option<&[u8]>) -> FsResult<()> {
        let (name, value) = check_ea(name, value)?;
        self.check_writable_share()?;
        let mut st = lock(&self.state);
        let now = st.now();
        let i = st.inode_mut(self.ino)?;
        let at = i.eas.iter().position(|(n, _)| *n == name);
        match (at, value) {
            (Some(k), Some(v)) => {
                if let Some(e) = i.eas.get_mut(k) {
                    e.1 = v.to_vec();
                }
            }
            (Some(k), None) => {
                i.eas.remove(k);
            }
            (None, Some(v)) => i.eas.push((name, v.to_vec())),
            (None, None) => return Ok(()),
        }
        i.ctime = now;
        Ok(())
    }

    fn list_streams(&self) -> FsResult<Vec<crate::StreamInfo>> {
        stream::list(self)
    }

    fn open_stream(&self, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
        stream::open(self, name, mode, write)
    }

    fn remove_stream(&self, name: &str) -> FsResult<()> {
        stream::remove(self, name)
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        stream::rename(self, from, to, replace)
    }

    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        let child = self.path.join(name)?;
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::Stat, &[&child])?;
        let ino = st
            .inode(self.ino)?
            .children
            .get(name)
            .copied()
            .ok_or(FsError::NotFound)?;
        st.attr(ino)
    }

    fn list_names(&self) -> FsResult<Vec<String>> {
        let mut st = lock(&self.state);
        st.take_fault(FaultOp::ReadDir, &[&self.path])?;
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        Ok(st.inode(self.ino)?.children.keys().cloned().collect())
    }
}

mod stream;

pub use stream::MemStreamNode;
