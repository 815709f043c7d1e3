//! POSIX backend: a directory on a local Linux filesystem.
//!
//! Confinement: the share root is held open as an `O_PATH | O_DIRECTORY` fd and every
//! lookup goes through `openat2(root, path, .., RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
//! Operations that act on a name (stat, unlink, rmdir, rename, mkdir) first open the
//! parent directory that way and then use the `*at` call with a single component, so a
//! `..`, an absolute symlink or a symlink chain that leaves the share fails with
//! [`FsError::Escapes`] (the kernel reports `EXDEV`) whatever races happen meanwhile.
//!
//! DOS attributes live in the xattr `user.ringshare.dosattrib` (4 bytes, little endian).
//! A Windows security descriptor set by a client lives in `user.ringshare.ntacl` (self-relative).
//! A client's extended attribute `NAME` lives in the xattr `user.NAME`, as Samba stores
//! them; the `user.ringshare.*` xattrs are never listed as EAs nor writable as EAs.
//! Xattr calls on `O_PATH` fds (stat-only opens) and on directory entries go through
//! `/proc/self/fd/<fd>[/<name>]`: the fd was already resolved beneath the root and the
//! name is a single component, so this reaches nothing new.

use std::ffi::CStr;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{
    AtFlags, Dir, FallocateFlags, Mode, OFlags, RenameFlags, ResolveFlags, Statx, StatxFlags,
    Timestamps, XattrFlags, CWD, UTIME_OMIT,
};
use rustix::io::Errno;

use crate::{
    check_ea, ea_name_is_reserved, ea_name_is_valid, FileAttr, FileKind, FsError, FsResult, FsStat,
    Node, OpenMode, OpenOptions, Opened, RelPath, SetTimes, Share, UnixNanos,
};

/// Name of the xattr holding DOS attributes.
pub const DOS_ATTRIB_XATTR: &str = "user.ringshare.dosattrib";
/// Name of the xattr holding a Windows security descriptor (self-relative bytes).
pub const NTACL_XATTR: &str = "user.ringshare.ntacl";
/// The largest security descriptor stored or read back (64 KiB, far above
/// what an ACL with 16-bit sizes can need).
const NTACL_SIZE_MAX: usize = 1 << 16;
/// Prefix of the xattrs holding client extended attributes.
const EA_XATTR_PREFIX: &str = "user.";
/// The largest xattr name list read (the kernel's XATTR_LIST_MAX).
const XATTR_LIST_SIZE_MAX: usize = 1 << 16;
/// The largest xattr value read as an EA: one more than an EA can hold, so a
/// longer value shows as too long instead of cut.
const EA_XATTR_VALUE_SIZE_MAX: usize = crate::EA_VALUE_LEN_MAX + 1;

/// How many times an open-or-create retries when the name appears or vanishes between
/// the open and the exclusive create.
const CREATE_RACE_RETRIES_MAX: usize = 4;

/// How many times a lookup is retried when `openat2` reports `EAGAIN` (a concurrent
/// rename) or `EINTR`, before giving up with `Busy`.
const OPENAT2_RETRIES_MAX: usize = 16;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

fn errno_to_fs(e: Errno) -> FsError {
    FsError::from_errno(e.raw_os_error())
}

/// Errors of calls on an already-open fd: EXDEV there is a real cross-device error and
/// EBADF means the fd lacks the access mode (stat-only or read-only open).
fn fd_errno_to_fs(e: Errno) -> FsError {
    match e {
        Errno::XDEV => FsError::CrossDevice,
        Errno::BADF => FsError::AccessDenied,
        e => errno_to_fs(e),
    }
}

fn is_unsupported(e: Errno) -> bool {
    e == Errno::OPNOTSUPP || e == Errno::NOSYS
}

fn nanos(ts: &rustix::fs::StatxTimestamp) -> UnixNanos {
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

fn to_timespec(t: Option<UnixNanos>) -> rustix::fs::Timespec {
    match t {
        None => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        Some(n) => {
            let sec = n.div_euclid(1_000_000_000);
            let nsec = n.rem_euclid(1_000_000_000);
            let sec = i64::try_from(sec).unwrap_or(if sec < 0 { i64::MIN } else { i64::MAX });
            rustix::fs::Timespec {
                tv_sec: sec,
                tv_nsec: nsec as _,
            }
        }
    }
}

fn kind_of(mode: u16) -> FileKind {
    match rustix::fs::FileType::from_raw_mode(u32::from(mode)) {
        rustix::fs::FileType::RegularFile => FileKind::File,
        rustix::fs::FileType::Directory => FileKind::Directory,
        rustix::fs::FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

fn attr_from_statx(st: &Statx, dos_attributes: Option<u32>) -> FileAttr {
    let btime = if st.stx_mask & StatxFlags::BTIME.bits() != 0 {
        Some(nanos(&st.stx_btime))
    } else {
        None
    };
    FileAttr {
        kind: kind_of(st.stx_mode),
        size: st.stx_size,
        alloc_size: st.stx_blocks.saturating_mul(512),
        mode: u32::from(st.stx_mode) & 0o7777,
        uid: st.stx_uid,
        gid: st.stx_gid,
        nlink: u64::from(st.stx_nlink),
        ino: st.stx_ino,
        dev: (u64::from(st.stx_dev_major) << 32) | u64::from(st.stx_dev_minor),
        atime: nanos(&st.stx_atime),
        mtime: nanos(&st.stx_mtime),
        ctime: nanos(&st.stx_ctime),
        btime,
        dos_attributes,
    }
}

fn statx_fd(fd: BorrowedFd<'_>) -> Result<Statx, Errno> {
    rustix::fs::statx(
        fd,
        c"",
        AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )
}

/// Whether the file system of `fd` keeps its files in memory (tmpfs, ramfs),
/// so that reading one never waits for a device. Such file systems cannot
/// read without blocking in the io_uring sense (no `FMODE_NOWAIT`), so every
/// io_uring READ of them goes to a kernel worker thread; a small read is
/// cheaper done in place ([`Node::in_memory`]).
fn memory_backed(fd: BorrowedFd<'_>) -> bool {
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    rustix::fs::fstatfs(fd).is_ok_and(|s| {
        let t = s.f_type as u64;
        t == TMPFS_MAGIC || t == RAMFS_MAGIC
    })
}

fn proc_path(fd: BorrowedFd<'_>, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("/proc/self/fd/{}/{}", fd.as_raw_fd(), n),
        None => format!("/proc/self/fd/{}", fd.as_raw_fd()),
    }
}

fn decode_dos(buf: &[u8; 8], res: Result<usize, Errno>) -> Option<u32> {
    match res {
        Ok(4) => Some(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]])),
        _ => None,
    }
}

/// [`DOS_ATTRIB_XATTR`] with its NUL, for `getxattrat`.
const DOS_ATTRIB_XATTR_C: &CStr = c"user.ringshare.dosattrib";

/// DOS attributes of an open fd; `None` when absent, malformed or unsupported.
fn read_dos_fd(fd: BorrowedFd<'_>) -> Option<u32> {
    let mut buf = [0u8; 8];
    match rustix::fs::fgetxattr(fd, DOS_ATTRIB_XATTR, &mut buf) {
        Err(Errno::BADF) => {
            // O_PATH fd: go through its /proc link (`getxattrat` on the fd
            // itself is EBADF too).
            let r = rustix::fs::getxattr(proc_path(fd, None), DOS_ATTRIB_XATTR, &mut buf);
            decode_dos(&buf, r)
        }
        r => decode_dos(&buf, r),
    }
}

/// DOS attributes of entry `name` of directory `dir` (a symlink's own, never
/// its target's): one `getxattrat(2)` where the kernel has it (6.13), else a
/// lookup through `/proc/self/fd/N/name`, which costs about three times as
/// much.
fn read_dos_at(dir: BorrowedFd<'_>, name: &str) -> Option<u32> {
    let mut buf = [0u8; 8];
    // A name from getdents has at most 255 bytes; build its C string on the stack.
    let mut cname = [0u8; 256];
    if !name.is_empty() && name.len() < cname.len() && !name.contains('\0') {
        cname[..name.len()].copy_from_slice(name.as_bytes());
        if let Ok(c) = CStr::from_bytes_until_nul(&cname) {
            match ringshare_engine::sys::getxattrat(dir, c, DOS_ATTRIB_XATTR_C, &mut buf) {
                Ok(n) => return decode_dos(&buf, Ok(n)),
                Err(e) if e.raw_os_error() != Some(Errno::NOSYS.raw_os_error()) => return None,
                Err(_) => {}
            }
        }
    }
    let r = rustix::fs::lgetxattr(proc_path(dir, Some(name)), DOS_ATTRIB_XATTR, &mut buf);
    decode_dos(&buf, r)
}

/// The file `fd` refers to, with its DOS attributes.
fn stat_fd(fd: BorrowedFd<'_>) -> FsResult<FileAttr> {
    let st = statx_fd(fd).map_err(errno_to_fs)?;
    Ok(attr_from_statx(&st, read_dos_fd(fd)))
}

/// Entry `name` of directory `dir` with its DOS attributes, a symlink's own
/// and never its target's.
fn stat_at(dir: BorrowedFd<'_>, name: &str) -> FsResult<FileAttr> {
    let st = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )
    .map_err(errno_to_fs)?;
    Ok(attr_from_statx(&st, read_dos_at(dir, name)))
}

/// A path's parent directory: the share root's fd, borrowed, or one opened
/// for the call.
enum ParentFd<'a> {
    Root(BorrowedFd<'a>),
    Opened(OwnedFd),
}

impl AsFd for ParentFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            ParentFd::Root(fd) => *fd,
            ParentFd::Opened(fd) => fd.as_fd(),
        }
    }
}

/// A node just opened, with the metadata its opening read (no DOS attributes).
struct Fresh {
    node: PosixNode,
    attr: FileAttr,
}

impl Fresh {
    fn opened(self, created: bool, truncated: bool) -> Opened {
        Opened {
            node: Box::new(self.node),
            created,
            truncated,
            attr: Some(self.attr),
        }
    }
}

/// A share rooted at a local directory.
pub struct PosixShare {
    root: OwnedFd,
    root_path: PathBuf,
    read_only: bool,
    /// The root's device, and whether that file system keeps its files in
    /// memory (see [`memory_backed`]); files on another device are asked afresh.
    root_dev: (u32, u32),
    root_in_memory: bool,
}

impl fmt::Debug for PosixShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PosixShare")
            .field("root", &self.root_path)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl PosixShare {
    /// Open `root` (`O_PATH | O_DIRECTORY | O_CLOEXEC`) as a writable share.
    pub fn new(root: &Path) -> std::io::Result<PosixShare> {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = statx_fd(fd.as_fd())?;
        let root_in_memory = memory_backed(fd.as_fd());
        Ok(PosixShare {
            root: fd,
            root_path: root.to_path_buf(),
            read_only: false,
            root_dev: (st.stx_dev_major, st.stx_dev_minor),
            root_in_memory,
        })
    }

    /// Make the share read-only (or writable again): every write, create, unlink,
    /// rename and set then fails with [`FsError::ReadOnly`].
    pub fn with_read_only(mut self, read_only: bool) -> PosixShare {
        self.read_only = read_only;
        self
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn check_writable(&self) -> FsResult<()> {
        if self.read_only {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    fn openat2(&self, path: &RelPath, flags: OFlags, mode: u32) -> Result<OwnedFd, Errno> {
        let p = if path.is_root() {
            ".".to_string()
        } else {
            path.to_slash_path()
        };
        let mut last = Errno::AGAIN;
        for _ in 0..OPENAT2_RETRIES_MAX {
            match rustix::fs::openat2(
                &self.root,
                p.as_str(),
                flags | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode & 0o7777),
                RESOLVE,
            ) {
                // EAGAIN: a rename raced with a RESOLVE_BENEATH lookup.
                Err(e @ (Errno::INTR | Errno::AGAIN)) => last = e,
                r => return r,
            }
        }
        Err(if last == Errno::AGAIN {
            Errno::BUSY
        } else {
            last
        })
    }

    /// Open directory `path` as `O_PATH` for `*at` calls. Missing or non-directory →
    /// `PathNotFound` (it is the parent of something).
    fn open_dir_path(&self, path: &RelPath) -> FsResult<OwnedFd> {
        self.openat2(path, OFlags::PATH | OFlags::DIRECTORY, 0)
            .map_err(|e| match e {
                Errno::NOENT | Errno::NOTDIR => FsError::PathNotFound,
                e => errno_to_fs(e),
            })
    }

    /// The parent of a non-root path, opened `O_PATH` (or the share root's
    /// own fd when that is the parent), and the last component.
    fn open_parent<'p>(&self, path: &'p RelPath) -> FsResult<(ParentFd<'_>, &'p str)> {
        let Some(name) = path.file_name() else {
            return Err(FsError::AccessDenied);
        };
        if path.components().len() == 1 {
            return Ok((ParentFd::Root(self.root.as_fd()), name));
        }
        let Some(parent) = path.parent() else {
            return Err(FsError::AccessDenied);
        };
        Ok((ParentFd::Opened(self.open_dir_path(&parent)?), name))
    }

    /// Turn an openat2 error on `path` into an `FsError`, telling a missing parent
    /// (`PathNotFound`) from a missing last component (`NotFound`).
    fn lookup_error(&self, path: &RelPath, e: Errno) -> FsError {
        match e {
            Errno::NOENT | Errno::NOTDIR => {
                if let Some(parent) = path.parent() {
                    if let Err(pe) = self.open_dir_path(&parent) {
                        return pe;
                    }
                }
                errno_to_fs(e)
            }
            e => errno_to_fs(e),
        }
    }

    fn node(
        &self,
        fd: OwnedFd,
        readable: bool,
        writable: bool,
        path_only: bool,
    ) -> FsResult<Fresh> {
        let st = statx_fd(fd.as_fd()).map_err(errno_to_fs)?;
        let kind = kind_of(st.stx_mode);
        if kind == FileKind::File {
            // Opened O_NONBLOCK so that a FIFO cannot hang the open; regular files go back
            // to blocking mode so io_uring punts to its workers instead of returning EAGAIN.
            if !path_only {
                // F_SETFL only touches the status flags; none but O_NONBLOCK was set.
                rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(errno_to_fs)?;
            }
        } else if kind == FileKind::Other && (readable || writable) {
            return Err(FsError::AccessDenied);
        }
        let in_memory = if (st.stx_dev_major, st.stx_dev_minor) == self.root_dev {
            self.root_in_memory
        } else {
            memory_backed(fd.as_fd())
        };
        Ok(Fresh {
            node: PosixNode {
                fd: Arc::new(fd),
                kind,
                readable,
                writable,
                path_only,
                read_only: self.read_only,
                in_memory,
            },
            attr: attr_from_statx(&st, None),
        })
    }

    fn open_root(&self, opts: &OpenOptions) -> FsResult<Opened> {
        match opts.mode {
            OpenMode::CreateNew => return Err(FsError::Exists),
            OpenMode::Truncate | OpenMode::TruncateOrCreate => return Err(FsError::IsADirectory),
            OpenMode::Existing | OpenMode::OpenOrCreate => {}
        }
        if opts.non_directory {
            return Err(FsError::IsADirectory);
        }
        let fresh = self.open_existing_dir(&RelPath::root())?;
        Ok(fresh.opened(false, false))
    }

    /// Open an existing directory for listing; `O_PATH` when reading is refused.
    fn open_existing_dir(&self, path: &RelPath) -> FsResult<Fresh> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK;
        match self.openat2(path, flags, 0) {
            Ok(fd) => self.node(fd, false, false, false),
            Err(Errno::ACCESS) => {
                let fd = self
                    .openat2(path, OFlags::PATH | OFlags::DIRECTORY, 0)
                    .map_err(|e| self.lookup_error(path, e))?;
                self.node(fd, false, false, true)
            }
            Err(e) => Err(self.lookup_error(path, e)),
        }
    }

    fn mkdir(&self, path: &RelPath, mode: u32) -> FsResult<()> {
        let (parent, name) = self.open_parent(path)?;
        rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(mode & 0o7777)).map_err(errno_to_fs)
    }

    fn open_directory(&self, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let truncates = matches!(opts.mode, OpenMode::Truncate | OpenMode::TruncateOrCreate);
        if opts.mode == OpenMode::CreateNew {
            self.mkdir(path, opts.create_mode)?;
            let fresh = self.open_existing_dir(path)?;
            return Ok(fresh.opened(true, false));
        }
        let creates = matches!(
            opts.mode,
            OpenMode::OpenOrCreate | OpenMode::TruncateOrCreate
        );
        for _ in 0..CREATE_RACE_RETRIES_MAX {
            match self.open_existing_dir(path) {
                Ok(_) if truncates => return Err(FsError::IsADirectory),
                Ok(fresh) => return Ok(fresh.opened(false, false)),
                Err(FsError::NotFound) if creates => {
                    self.check_writable()?;
                    match self.mkdir(path, opts.create_mode) {
                        Ok(()) => {
                            let fresh = self.open_existing_dir(path)?;
                            return Ok(fresh.opened(true, false));
                        }
                        Err(FsError::Exists) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(FsError::Exists)
    }

    fn open_file(&self, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let access = match (opts.read, opts.write) {
            (true, true) => OFlags::RDWR,
            (false, true) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        };
        let base = access | OFlags::NOCTTY | OFlags::NONBLOCK;
        let truncates = matches!(opts.mode, OpenMode::Truncate | OpenMode::TruncateOrCreate);
        let creates = matches!(
            opts.mode,
            OpenMode::CreateNew | OpenMode::OpenOrCreate | OpenMode::TruncateOrCreate
        );
        let create_excl = || -> FsResult<Option<Opened>> {
            self.check_writable()?;
            match self.openat2(path, base | OFlags::CREATE | OFlags::EXCL, opts.create_mode) {
                Ok(fd) => {
                    let fresh = self.node(fd, opts.read, opts.write, false)?;
                    Ok(Some(fresh.opened(true, false)))
                }
                Err(Errno::EXIST) if opts.mode != OpenMode::CreateNew => Ok(None),
                Err(e) => Err(self.lookup_error(path, e)),
            }
        };
        if opts.mode == OpenMode::CreateNew {
            return create_excl()?.ok_or(FsError::Exists);
        }
        let flags = if truncates {
            base | OFlags::TRUNC
        } else {
            base
        };
        for _ in 0..CREATE_RACE_RETRIES_MAX {
            match self.openat2(path, flags, 0) {
                Ok(fd) => {
                    let fresh = self.node(fd, opts.read, opts.write, false)?;
                    if fresh.node.kind == FileKind::Directory && opts.non_directory {
                        return Err(FsError::IsADirectory);
                    }
                    let truncated = truncates && fresh.node.kind == FileKind::File;
                    return Ok(fresh.opened(false, truncated));
                }
                Err(Errno::ISDIR) => {
                    // Write access or O_TRUNC asked on a directory.
                    if truncates || opts.non_directory {
                        return Err(FsError::IsADirectory);
                    }
                    let fresh = self.open_existing_dir(path)?;
                    return Ok(fresh.opened(false, false));
                }
                Err(Errno::ACCESS) if !opts.read && !opts.write && !truncates => {
                    let fd = self
                        .openat2(path, OFlags::PATH, 0)
                        .map_err(|e| self.lookup_error(path, e))?;
                    let fresh = self.node(fd, false, false, true)?;
                    if fresh.node.kind == FileKind::Directory && opts.non_directory {
                        return Err(FsError::IsADirectory);
                    }
                    return Ok(fresh.opened(false, false));
                }
                Err(Errno::NOENT) if creates => {
                    if let Some(opened) = create_excl()? {
                        return Ok(opened);
                    }
                }
                Err(e) => return Err(self.lookup_error(path, e)),
            }
        }
        Err(FsError::Exists)
    }
}

impl Share for PosixShare {
    fn open(&self, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        if self.read_only
            && (opts.write
                || matches!(
                    opts.mode,
                    OpenMode::CreateNew | OpenMode::Truncate | OpenMode::TruncateOrCreate
                ))
        {
            return Err(FsError::ReadOnly);
        }
        if opts.directory && opts.non_directory {
            return Err(FsError::InvalidName);
        }
        if path.is_root() {
            return self.open_root(opts);
        }
        if opts.directory {
            self.open_directory(path, opts)
        } else {
            self.open_file(path, opts)
        }
    }

    fn stat(&self, path: &RelPath) -> FsResult<FileAttr> {
        if path.is_root() {
            return stat_fd(self.root.as_fd());
        }
        let (parent, name) = self.open_parent(path)?;
        stat_at(parent.as_fd(), name)
    }

    fn unlink(&self, path: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        let (parent, name) = self.open_parent(path)?;
        rustix::fs::unlinkat(&parent, name, AtFlags::empty()).map_err(errno_to_fs)
    }

    fn rmdir(&self, path: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        let (parent, name) = self.open_parent(path)?;
        rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).map_err(|e| match e {
            Errno::EXIST => FsError::NotEmpty,
            e => errno_to_fs(e),
        })
    }

    fn rename(&self, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()> {
        self.check_writable()?;
        if from.is_root() || to.is_root() {
            return Err(FsError::AccessDenied);
        }
        if to.components().starts_with(from.components()) && to != from {
            return Err(FsError::InvalidName);
        }
        let (from_parent, from_name) = self.open_parent(from)?;
        let (to_parent, to_name) = self.open_parent(to)?;
        if from == to {
            // Renaming onto itself succeeds without change when the file exists.
            return rustix::fs::statx(
                &from_parent,
                from_name,
                AtFlags::SYMLINK_NOFOLLOW,
                StatxFlags::TYPE,
            )
            .map(|_| ())
            .map_err(errno_to_fs);
        }
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        let map = |e: Errno| match e {
            Errno::XDEV => FsError::CrossDevice,
            Errno::INVAL => FsError::InvalidName,
            e => errno_to_fs(e),
        };
        match rustix::fs::renameat_with(&from_parent, from_name, &to_parent, to_name, flags) {
            Ok(()) => Ok(()),
            Err(Errno::INVAL) if !replace => {
                // The filesystem lacks RENAME_NOREPLACE: check, then rename (racy).
                match rustix::fs::statx(
                    &to_parent,
                    to_name,
                    AtFlags::SYMLINK_NOFOLLOW,
                    StatxFlags::TYPE,
                ) {
                    Ok(_) => Err(FsError::Exists),
                    Err(Errno::NOENT) => {
                        rustix::fs::renameat(&from_parent, from_name, &to_parent, to_name)
                            .map_err(map)
                    }
                    Err(e) => Err(errno_to_fs(e)),
                }
            }
            Err(e) => Err(map(e)),
        }
    }

    fn statfs(&self) -> FsResult<FsStat> {
        let s = rustix::fs::fstatvfs(&self.root).map_err(errno_to_fs)?;
        Ok(FsStat {
            block_size: if s.f_frsize != 0 {
                s.f_frsize
            } else {
                s.f_bsize
            },
            total_blocks: s.f_blocks,
            free_blocks: s.f_bfree,
            avail_blocks: s.f_bavail,
            total_files: s.f_files,
            free_files: s.f_ffree,
            name_max: s.f_namemax,
            fs_id: s.f_fsid,
        })
    }

    fn find_name_case_insensitive(&self, dir: &RelPath, name: &str) -> FsResult<String> {
        let fd = self
            .openat2(dir, OFlags::RDONLY | OFlags::DIRECTORY, 0)
            .map_err(|e| match e {
                Errno::NOENT | Errno::NOTDIR => FsError::PathNotFound,
                e => errno_to_fs(e),
            })?;
        let wanted = name.to_lowercase();
        let mut best: Option<String> = None;
        for entry in Dir::new(fd).map_err(errno_to_fs)? {
            let entry = entry.map_err(errno_to_fs)?;
            let Ok(n) = entry.file_name().to_str() else {
                continue;
            };
            if n == "." || n == ".." {
                continue;
            }
            if n == name {
                return Ok(n.to_string());
            }
            if n.to_lowercase() == wanted && best.as_deref().is_none_or(|b| n < b) {
                best = Some(n.to_string());
            }
        }
        best.ok_or(FsError::NotFound)
    }
}

/// An open file or directory of a [`PosixShare`].
pub struct PosixNode {
    /// Shared so that I/O in flight in the engine keeps the descriptor open
    /// even when the handle is closed meanwhile.
    fd: Arc<OwnedFd>,
    kind: FileKind,
    readable: bool,
    writable: bool,
    /// Opened `O_PATH` (stat only): no I/O, xattrs and times through `/proc`.
    path_only: bool,
    read_only: bool,
    /// On a file system that keeps files in memory ([`memory_backed`]).
    in_memory: bool,
}

impl fmt::Debug for PosixNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PosixNode")
            .field("fd", &self.fd.as_raw_fd())
            .field("kind", &self.kind)
            .field("readable", &self.readable)
            .field("writable", &self.writable)
            .field("path_only", &self.path_only)
            .finish()
    }
}

impl PosixNode {
    fn check_writable_share(&self) -> FsResult<()> {
        if self.read_only {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    fn check_data_write(&self) -> FsResult<()> {
        self.check_writable_share()?;
        if self.kind == FileKind::Directory {
            return Err(FsError::IsADirectory);
        }
        if !self.writable {
            return Err(FsError::AccessDenied);
        }
        Ok(())
    }

    /// True when this node was opened stat-only (`O_PATH`).
    pub fn is_path_only(&self) -> bool {
        self.path_only
    }

    /// Names of all xattrs of the file (empty where xattrs are unsupported).
    fn xattr_names(&self) -> FsResult<Vec<String>> {
        let fd = self.fd.as_fd();
        let mut buf = vec![0u8; XATTR_LIST_SIZE_MAX];
        let r = match rustix::fs::flistxattr(fd, &mut buf[..]) {
            // O_PATH fd: go through its /proc link.
            Err(Errno::BADF) => rustix::fs::listxattr(proc_path(fd, None), &mut buf[..]),
            r => r,
        };
        let n = match r {
            Ok(n) => n,
            Err(e) if is_unsupported(e) => return Ok(Vec::new()),
            Err(e) => return Err(fd_errno_to_fs(e)),
        };
        Ok(buf
            .get(..n)
            .unwrap_or_default()
            .split(|b| *b == 0)
            .filter_map(|s| std::str::from_utf8(s).ok())
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect())
    }

    /// The value of xattr `name` into `buf`; `None` when it is gone or too long.
    fn xattr_value(&self, name: &str, buf: &mut [u8]) -> FsResult<Option<usize>> {
        let fd = self.fd.as_fd();
        let r = match rustix::fs::fgetxattr(fd, name, &mut *buf) {
            Err(Errno::BADF) => rustix::fs::getxattr(proc_path(fd, None), name, &mut *buf),
            r => r,
        };
        match r {
            Ok(n) => Ok(Some(n)),
            Err(Errno::NODATA | Errno::RANGE) => Ok(None),
            Err(e) if is_unsupported(e) => Ok(None),
            Err(e) => Err(fd_errno_to_fs(e)),
        }
    }

    fn xattr_set(&self, name: &str, value: &[u8]) -> FsResult<()> {
        let fd = self.fd.as_fd();
        let r = match rustix::fs::fsetxattr(fd, name, value, XattrFlags::empty()) {
            Err(Errno::BADF) => {
                rustix::fs::setxattr(proc_path(fd, None), name, value, XattrFlags::empty())
            }
            r => r,
        };
        r.map_err(ea_errno_to_fs)
    }

    /// Remove xattr `name`; one that is not there is not an error.
    fn xattr_remove(&self, name: &str) -> FsResult<()> {
        let fd = self.fd.as_fd();
        let r = match rustix::fs::fremovexattr(fd, name) {
            Err(Errno::BADF) => rustix::fs::removexattr(proc_path(fd, None), name),
            r => r,
        };
        match r {
            Ok(()) | Err(Errno::NODATA) => Ok(()),
            Err(e) => Err(ea_errno_to_fs(e)),
        }
    }
}

/// Errors of storing an EA: "xattrs unsupported here" is `Other(EOPNOTSUPP)`
/// whichever errno the filesystem chose; a name too long for an xattr is
/// `NameTooLong`; a value the filesystem cannot hold is `NoSpace` or
/// `Other(E2BIG)`.
fn ea_errno_to_fs(e: Errno) -> FsError {
    if is_unsupported(e) {
        FsError::Other(crate::EOPNOTSUPP)
    } else if e == Errno::RANGE {
        // `user.` + the name is past XATTR_NAME_MAX.
        FsError::NameTooLong
    } else {
        fd_errno_to_fs(e)
    }
}

impl Node for PosixNode {
    fn stat(&self) -> FsResult<FileAttr> {
        stat_fd(self.fd.as_fd())
    }

    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        let st = statx_fd(self.fd.as_fd()).map_err(errno_to_fs)?;
        Ok(attr_from_statx(&st, None))
    }

    fn size(&self) -> FsResult<u64> {
        let st = rustix::fs::fstat(self.fd.as_fd()).map_err(errno_to_fs)?;
        Ok(st.st_size as u64)
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn shared_fd(&self) -> Option<Arc<OwnedFd>> {
        if self.path_only {
            None
        } else {
            Some(Arc::clone(&self.fd))
        }
    }

    fn in_memory(&self) -> bool {
        self.in_memory
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        if self.kind == FileKind::Directory {
            return Err(FsError::IsADirectory);
        }
        if !self.readable {
            return Err(FsError::AccessDenied);
        }
        let mut done = 0usize;
        while done < buf.len() {
            let Some(rest) = buf.get_mut(done..) else {
                break;
            };
            match rustix::io::pread(&self.fd, rest, offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(fd_errno_to_fs(e)),
            }
        }
        Ok(done)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        self.check_data_write()?;
        let mut done = 0usize;
        while done < data.len() {
            let Some(rest) = data.get(done..) else { break };
            match rustix::io::pwrite(&self.fd, rest, offset + done as u64) {
                Ok(0) => return Err(FsError::NoSpace),
                Ok(n) => done += n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(fd_errno_to_fs(e)),
            }
        }
        Ok(done)
    }

    fn sync(&self) -> FsResult<()> {
        if self.path_only {
            return Err(FsError::AccessDenied);
        }
        loop {
            match rustix::fs::fsync(&self.fd) {
                Err(Errno::INTR) => continue,
                r => return r.map_err(fd_errno_to_fs),
            }
        }
    }

    fn set_len(&self, len: u64) -> FsResult<()> {
        self.check_data_write()?;
        loop {
            match rustix::fs::ftruncate(&self.fd, len) {
                Err(Errno::INTR) => continue,
                r => return r.map_err(fd_errno_to_fs),
            }
        }
    }

    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.check_data_write()?;
        if size == 0 {
            return Ok(());
        }
        match rustix::fs::fallocate(&self.fd, FallocateFlags::KEEP_SIZE, 0, size) {
            Ok(()) => Ok(()),
            Err(e) if is_unsupported(e) || e == Errno::INVAL || e == Errno::INTR => Ok(()),
            Err(e) => Err(fd_errno_to_fs(e)),
        }
    }

    fn set_times(&self, times: &SetTimes) -> FsResult<()> {
        self.check_writable_share()?;
        if times.atime.is_none() && times.mtime.is_none() {
            return Ok(());
        }
        let ts = Timestamps {
            last_access: to_timespec(times.atime),
            last_modification: to_timespec(times.mtime),
        };
        match rustix::fs::futimens(&self.fd, &ts) {
            Err(Errno::BADF) => {
                rustix::fs::utimensat(CWD, proc_path(self.fd.as_fd(), None), &ts, AtFlags::empty())
                    .map_err(fd_errno_to_fs)
            }
            r => r.map_err(fd_errno_to_fs),
        }
    }

    fn get_security_descriptor(&self) -> FsResult<Option<Vec<u8>>> {
        let fd = self.fd.as_fd();
        let get = |buf: &mut [u8]| match rustix::fs::fgetxattr(fd, NTACL_XATTR, &mut *buf) {
            // O_PATH fd: go through its /proc link.
            Err(Errno::BADF) => rustix::fs::getxattr(proc_path(fd, None), NTACL_XATTR, buf),
            r => r,
        };
        // Most files have none and most descriptors are small: try a buffer
        // on the stack first, the largest one only when that is too short.
        let mut small = [0u8; 1024];
        let r = match get(&mut small) {
            Ok(n) => return Ok(Some(small[..n].to_vec())),
            Err(Errno::RANGE) => {
                let mut buf = vec![0u8; NTACL_SIZE_MAX];
                get(&mut buf).map(|n| {
                    buf.truncate(n);
                    buf
                })
            }
            Err(e) => Err(e),
        };
        match r {
            Ok(buf) => Ok(Some(buf)),
            Err(Errno::NODATA) => Ok(None),
            Err(e) if is_unsupported(e) => Ok(None),
            Err(e) => Err(fd_errno_to_fs(e)),
        }
    }

    fn set_security_descriptor(&self, sd: &[u8]) -> FsResult<()> {
        self.check_writable_share()?;
        if sd.len() > NTACL_SIZE_MAX {
            return Err(FsError::NoSpace);
        }
        match rustix::fs::fsetxattr(&self.fd, NTACL_XATTR, sd, XattrFlags::empty()) {
            Err(Errno::BADF) => rustix::fs::setxattr(
                proc_path(self.fd.as_fd(), None),
                NTACL_XATTR,
                sd,
                XattrFlags::empty(),
            ),
            r => r,
        }
        .map_err(fd_errno_to_fs)
    }

    fn list_eas(&self) -> FsResult<Vec<(String, Vec<u8>)>> {
        let mut out: Vec<(String, Vec<u8>)> = Vec::new();
        let mut buf = vec![0u8; EA_XATTR_VALUE_SIZE_MAX];
        for xattr in self.xattr_names()? {
            let Some(ea) = xattr.strip_prefix(EA_XATTR_PREFIX) else {
                continue;
            };
            if !ea_name_is_valid(ea) || ea_name_is_reserved(ea) {
                continue;
            }
            let name = ea.to_ascii_uppercase();
            if out.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let Some(n) = self.xattr_value(&xattr, &mut buf)? else {
                continue;
            };
            match buf.get(..n) {
                Some(v) if !v.is_empty() && v.len() <= crate::EA_VALUE_LEN_MAX => {
                    out.push((name, v.to_vec()))
                }
                _ => {}
            }
        }
        Ok(out)
    }

    fn set_ea(&self, name: &str, value: Option<&[u8]>) -> FsResult<()> {
        let (name, value) = check_ea(name, value)?;
        self.check_writable_share()?;
        let stored = format!("{EA_XATTR_PREFIX}{name}");
        // The same EA under another case (set by a tool other than us) goes.
        for xattr in self.xattr_names()? {
            let other_case = xattr
                .strip_prefix(EA_XATTR_PREFIX)
                .is_some_and(|ea| ea.eq_ignore_ascii_case(&name) && xattr != stored);
            if other_case {
                self.xattr_remove(&xattr)?;
            }
        }
        match value {
            Some(v) => self.xattr_set(&stored, v),
            None => self.xattr_remove(&stored),
        }
    }

    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let value = attrs.to_le_bytes();
        let r = match rustix::fs::fsetxattr(&self.fd, DOS_ATTRIB_XATTR, &value, XattrFlags::empty())
        {
            Err(Errno::BADF) => rustix::fs::setxattr(
                proc_path(self.fd.as_fd(), None),
                DOS_ATTRIB_XATTR,
                &value,
                XattrFlags::empty(),
            ),
            r => r,
        };
        match r {
            Ok(()) => Ok(()),
            Err(e) if is_unsupported(e) => Ok(()),
            Err(e) => Err(fd_errno_to_fs(e)),
        }
    }

    fn set_mode(&self, mode: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let m = Mode::from_raw_mode(mode & 0o7777);
        match rustix::fs::fchmod(&self.fd, m) {
            Err(Errno::BADF) => {
                rustix::fs::chmodat(CWD, proc_path(self.fd.as_fd(), None), m, AtFlags::empty())
                    .map_err(fd_errno_to_fs)
            }
            r => r.map_err(fd_errno_to_fs),
        }
    }

    fn set_owner(&self, uid: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let owner = Some(rustix::fs::Uid::from_raw(uid));
        match rustix::fs::fchown(&self.fd, owner, None) {
            Err(Errno::BADF) => rustix::fs::chownat(
                CWD,
                proc_path(self.fd.as_fd(), None),
                owner,
                None,
                AtFlags::empty(),
            )
            .map_err(fd_errno_to_fs),
            r => r.map_err(fd_errno_to_fs),
        }
    }

    /// `copy_file_range(2)` (the kernel may share extents or copy in place);
    /// when it cannot (other filesystem, overlapping ranges of one file, a
    /// descriptor it refuses) the rest goes through the bounded buffer.
    fn copy_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        self.check_data_write()?;
        if src_offset.checked_add(len).is_none() || dst_offset.checked_add(len).is_none() {
            return Err(FsError::InvalidName);
        }
        let Some(src_fd) = src.fd() else {
            return crate::copy_through_buffer(self, src, src_offset, dst_offset, len);
        };
        let (mut off_in, mut off_out) = (src_offset, dst_offset);
        let mut done = 0u64;
        while done < len {
            let want = (len - done).min(1 << 30) as usize;
            match rustix::fs::copy_file_range(
                src_fd,
                Some(&mut off_in),
                &self.fd,
                Some(&mut off_out),
                want,
            ) {
                Ok(0) => break,
                Ok(n) => done += n as u64,
                Err(Errno::INTR) => continue,
                Err(
                    Errno::XDEV
                    | Errno::INVAL
                    | Errno::BADF
                    | Errno::NOSYS
                    | Errno::OPNOTSUPP
                    | Errno::ISDIR,
                ) => {
                    let rest = crate::copy_through_buffer(
                        self,
                        src,
                        src_offset + done,
                        dst_offset + done,
                        len - done,
                    )?;
                    return Ok(done + rest);
                }
                Err(e) => return Err(fd_errno_to_fs(e)),
            }
        }
        Ok(done)
    }

    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`; zeros are written where the
    /// filesystem cannot punch.
    fn punch_hole(&self, offset: u64, len: u64) -> FsResult<()> {
        self.check_data_write()?;
        if len == 0 {
            return Ok(());
        }
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        loop {
            match rustix::fs::fallocate(&self.fd, flags, offset, len) {
                Ok(()) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(e) if is_unsupported(e) || e == Errno::INVAL => {
                    return crate::write_zeros(self, offset, len)
                }
                Err(e) => return Err(fd_errno_to_fs(e)),
            }
        }
    }

    /// `lseek(SEEK_DATA)` / `lseek(SEEK_HOLE)` over the range; a filesystem
    /// without them reports the whole range as data.
    fn allocated_ranges(&self, offset: u64, len: u64) -> FsResult<Vec<(u64, u64)>> {
        if self.kind == FileKind::Directory {
            return Err(FsError::IsADirectory);
        }
        let size = self.stat()?.size;
        let end = offset.saturating_add(len).min(size);
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end {
            let data = match rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Data(pos)) {
                Ok(d) => d,
                Err(Errno::NXIO) => break,
                Err(e) if is_unsupported(e) || e == Errno::INVAL => {
                    out.push((pos, end - pos));
                    break;
                }
                Err(e) => return Err(fd_errno_to_fs(e)),
            };
            if data >= end {
                break;
            }
            let hole = match rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Hole(data)) {
                Ok(h) => h.min(end),
                Err(Errno::NXIO) => end,
                Err(e) => return Err(fd_errno_to_fs(e)),
            };
            if hole <= data {
                break;
            }
            out.push((data, hole - data));
            pos = hole;
        }
        Ok(out)
    }

    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        // One component only: with no `/` and no `..`, the lookup cannot leave
        // this directory, and NOFOLLOW keeps a symlink from being followed.
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(FsError::InvalidName);
        }
        stat_at(self.fd.as_fd(), name)
    }

    fn list_names(&self) -> FsResult<Vec<String>> {
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        // A fresh fd: getdents needs a readable fd (ours may be O_PATH) and its own offset.
        let dir_fd = rustix::fs::openat2(
            &self.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        )
        .map_err(errno_to_fs)?;
        let mut out = Vec::new();
        for entry in Dir::new(dir_fd).map_err(errno_to_fs)? {
            let entry = entry.map_err(errno_to_fs)?;
            // Names that are not UTF-8 cannot be named by a client: skip them.
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name != "." && name != ".." {
                out.push(name.to_string());
            }
        }
        out.sort_unstable();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn files_on_tmpfs_are_in_memory_and_procfs_is_not() {
        if !Path::new("/dev/shm").is_dir() {
            return;
        }
        let dir = PathBuf::from(format!("/dev/shm/ringshare-vfs-mem-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let _guard = Tmp(dir.clone());
        std::fs::write(dir.join("f"), b"abc").unwrap();
        let share = PosixShare::new(&dir).unwrap();
        let path = RelPath::from_components(["f"]).unwrap();
        let opened = share.open(&path, &OpenOptions::read_existing()).unwrap();
        assert!(opened.node.in_memory());
        let proc_fd = rustix::fs::open("/proc", OFlags::PATH, Mode::empty()).unwrap();
        assert!(!memory_backed(proc_fd.as_fd()));
    }

    /// The `O_PATH` fallback (taken when `O_RDONLY` gives EACCES) cannot be reached by
    /// permissions when tests run as root, so build such a node directly.
    #[test]
    fn stat_only_node_sets_and_reads_metadata_through_proc() {
        let dir = std::env::temp_dir().join(format!("ringshare-vfs-opath-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let _guard = Tmp(dir.clone());
        std::fs::write(dir.join("f"), b"abc").unwrap();
        let share = PosixShare::new(&dir).unwrap();
        let path = RelPath::from_components(["f"]).unwrap();
        let fd = share.openat2(&path, OFlags::PATH, 0).unwrap();
        let node = share.node(fd, false, false, true).unwrap().node;
        assert!(node.is_path_only());
        assert_eq!(node.stat().unwrap().size, 3);
        let mut buf = [0u8; 3];
        assert_eq!(
            node.read_at(&mut buf, 0).unwrap_err(),
            FsError::AccessDenied
        );
        assert_eq!(node.write_at(b"x", 0).unwrap_err(), FsError::AccessDenied);
        assert_eq!(node.sync().unwrap_err(), FsError::AccessDenied);
        node.set_mode(0o600).unwrap();
        assert_eq!(node.stat().unwrap().mode, 0o600);
        let t = 1_234_567_890_000_000_000;
        node.set_times(&SetTimes {
            atime: None,
            mtime: Some(t),
            btime: None,
        })
        .unwrap();
        assert_eq!(node.stat().unwrap().mtime, t);
        node.set_dos_attributes(0x21).unwrap();
        let mut probe = [0u8; 8];
        let xattrs = rustix::fs::getxattr(dir.join("f"), DOS_ATTRIB_XATTR, &mut probe).is_ok();
        if xattrs {
            assert_eq!(node.stat().unwrap().dos_attributes, Some(0x21));
        }
    }

    #[test]
    fn stat_entry_describes_one_entry_of_the_directory_and_never_leaves_it() {
        let dir = std::env::temp_dir().join(format!("ringshare-vfs-entry-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let _guard = Tmp(dir.clone());
        std::fs::write(dir.join("sub/f"), b"abcde").unwrap();
        std::fs::write(dir.join("outside"), b"x").unwrap();
        std::os::unix::fs::symlink("f", dir.join("sub/link")).unwrap();
        let share = PosixShare::new(&dir).unwrap();
        let sub = RelPath::from_components(["sub"]).unwrap();
        let node = share
            .open(&sub, &OpenOptions::read_existing())
            .unwrap()
            .node;
        let f = node.stat_entry("f").unwrap();
        assert_eq!(
            (f.kind, f.size, f.dos_attributes),
            (FileKind::File, 5, None)
        );
        assert_eq!(f.ino, share.stat(&sub.join("f").unwrap()).unwrap().ino);
        // A symlink is described itself, not its target.
        let link = node.stat_entry("link").unwrap();
        assert_eq!((link.kind, link.size), (FileKind::Symlink, 1));
        assert_eq!(node.stat_entry("gone").unwrap_err(), FsError::NotFound);
        for name in ["", ".", "..", "../outside", "f/..", "a\0b"] {
            assert_eq!(
                node.stat_entry(name).unwrap_err(),
                FsError::InvalidName,
                "{name:?}"
            );
        }
        let file = share
            .open(&sub.join("f").unwrap(), &OpenOptions::read_existing())
            .unwrap()
            .node;
        assert_eq!(file.stat_entry("x").unwrap_err(), FsError::NotADirectory);
    }

    /// A directory entry's DOS attributes read back the same through
    /// `getxattrat` and, as on kernels before 6.13, through `/proc`. This
    /// turns `getxattrat` off for the rest of this test process.
    #[test]
    fn entry_dos_attributes_read_back_with_and_without_getxattrat() {
        let dir = std::env::temp_dir().join(format!("ringshare-vfs-dosat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _guard = Tmp(dir.clone());
        std::fs::write(dir.join("f"), b"x").unwrap();
        let share = PosixShare::new(&dir).unwrap();
        let f = RelPath::from_components(["f"]).unwrap();
        let node = share.open(&f, &OpenOptions::read_existing()).unwrap().node;
        if node.set_dos_attributes(0x22).is_err() || node.stat().unwrap().dos_attributes.is_none() {
            eprintln!("SKIPPED: no user xattrs in {}", dir.display());
            return;
        }
        let root = share
            .open(&RelPath::root(), &OpenOptions::read_existing())
            .unwrap()
            .node;
        for _ in 0..2 {
            assert_eq!(root.stat_entry("f").unwrap().dos_attributes, Some(0x22));
            assert_eq!(share.stat(&f).unwrap().dos_attributes, Some(0x22));
            ringshare_engine::sys::pretend_getxattrat_is_missing();
        }
    }

    #[test]
    fn malformed_dos_xattr_reads_as_none() {
        assert_eq!(decode_dos(&[1, 0, 0, 0, 0, 0, 0, 0], Ok(4)), Some(1));
        assert_eq!(decode_dos(&[1, 0, 0, 0, 9, 0, 0, 0], Ok(5)), None);
        assert_eq!(decode_dos(&[0; 8], Ok(2)), None);
        assert_eq!(decode_dos(&[0; 8], Err(Errno::NODATA)), None);
    }

    #[test]
    fn times_convert_both_ways_including_before_the_epoch() {
        let ts = to_timespec(Some(-1));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-1, 999_999_999));
        let ts = to_timespec(Some(1_500_000_000_123_456_789));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (1_500_000_000, 123_456_789));
        assert_eq!(to_timespec(None).tv_nsec, UTIME_OMIT);
    }
}
