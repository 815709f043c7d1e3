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
//! Named data streams live in `user.DosStream.<name>:$DATA` xattrs of the file, as
//! Samba's `vfs_streams_xattr` keeps them (see `posix/stream.rs`).
//! Xattr calls on `O_PATH` fds (stat-only opens) and on directory entries go through
//! `/proc/self/fd/<fd>[/<name>]`: the fd was already resolved beneath the root and the
//! name is a single component, so this reaches nothing new.

use std::ffi::CStr;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::fs::{
    AtFlags, Dir, FallocateFlags, Mode, OFlags, RenameFlags, ResolveFlags, Statx, StatxFlags,
    Timestamps, XattrFlags, CWD, UTIME_OMIT,
};
use rustix::io::Errno;

use ringshare_engine::creds;

use crate::{
    check_ea, ea_name_is_reserved, ea_name_is_valid, FileAttr, FileKind, FsError, FsResult, FsStat,
    Node, OfdLock, OpenMode, OpenOptions, Opened, RelPath, SetTimes, Share, Special, UnixNanos,
    Who,
};

/// Name of the xattr holding DOS attributes.
pub const DOS_ATTRIB_XATTR: &str = "user.ringshare.dosattrib";
/// Samba's xattr holding a file's NT ACL (`vfs objects = acl_xattr`).
pub const NTACL_XATTR: &str = "security.NTACL";
/// Where older ringshare kept a security descriptor a client set
/// (self-relative bytes); read once to migrate.
pub const LEGACY_NTACL_XATTR: &str = "user.ringshare.ntacl";
/// The kernel's POSIX ACL xattrs.
const ACL_ACCESS_XATTR: &str = "system.posix_acl_access";
const ACL_DEFAULT_XATTR: &str = "system.posix_acl_default";
/// The largest NT ACL or POSIX ACL value stored or read back (64 KiB, the
/// kernel's limit for one xattr value).
const NTACL_SIZE_MAX: usize = 1 << 16;
/// Prefix of the xattrs holding client extended attributes.
const EA_XATTR_PREFIX: &str = "user.";
/// The largest xattr name list read (the kernel's XATTR_LIST_MAX).
const XATTR_LIST_SIZE_MAX: usize = 1 << 16;
/// Netatalk's (and Samba vfs_fruit's) Finder metadata xattr.
const NETATALK_METADATA_XATTR: &str = "user.org.netatalk.Metadata";
/// The largest xattr value read as an EA: one more than an EA can hold, so a
/// longer value shows as too long instead of cut.
const EA_XATTR_VALUE_SIZE_MAX: usize = crate::EA_VALUE_LEN_MAX + 1;

/// How many times an open-or-create retries when the name appears or vanishes between
/// the open and the exclusive create.
const CREATE_RACE_RETRIES_MAX: usize = 4;

/// How many times a lookup is retried when `openat2` reports `EAGAIN` (a concurrent
/// rename) or `EINTR`, before giving up (`EAGAIN` then: a local kernel lease,
/// [`FsError::LeaseHeld`]).
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

/// Makes the calling thread act as `who` for the system calls that follow.
/// A switch that fails refuses the operation: it never runs as anyone else.
fn act(who: &Who) -> FsResult<()> {
    creds::act_as(who).map_err(|_| FsError::AccessDenied)
}

/// Runs `f` as the server, for its own metadata, then acts as `who` again.
fn as_server<T>(who: &Who, f: impl FnOnce() -> FsResult<T>) -> FsResult<T> {
    creds::act_as_server().map_err(|_| FsError::AccessDenied)?;
    let r = f();
    act(who)?;
    r
}

/// Whether an errno is the kernel refusing the caller (the server's own
/// metadata is then read or written as the server).
fn is_refusal(e: Errno) -> bool {
    e == Errno::ACCESS || e == Errno::PERM
}

/// Whether the kernel grants the calling thread `access` to `fd` itself
/// (`faccessat2(fd, "", access, AT_EACCESS | AT_EMPTY_PATH)`: the effective
/// ids, which are the user's while the thread acts as one). A read-only file
/// system refuses writing.
fn kernel_allows(fd: BorrowedFd<'_>, access: rustix::fs::Access) -> FsResult<bool> {
    match ringshare_engine::sys::access_fd(fd, access.bits() as i32) {
        Ok(()) => Ok(true),
        Err(e) => match Errno::from_io_error(&e) {
            Some(e) if is_refusal(e) || e == Errno::ROFS || e == Errno::TXTBSY => Ok(false),
            Some(e) => Err(errno_to_fs(e)),
            None => Err(FsError::Io),
        },
    }
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
        rustix::fs::FileType::Fifo => FileKind::Other(Special::Fifo),
        rustix::fs::FileType::CharacterDevice => FileKind::Other(Special::CharDevice),
        rustix::fs::FileType::BlockDevice => FileKind::Other(Special::BlockDevice),
        rustix::fs::FileType::Socket => FileKind::Other(Special::Socket),
        _ => FileKind::Other(Special::Unknown),
    }
}

fn attr_from_statx(st: &Statx, dos: Option<crate::dosattrib::DosInfo>) -> FileAttr {
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
        dev: dev_of(st.stx_dev_major, st.stx_dev_minor),
        atime: nanos(&st.stx_atime),
        mtime: nanos(&st.stx_mtime),
        ctime: nanos(&st.stx_ctime),
        btime,
        dos_attributes: dos.map(|d| d.attributes),
        create_time: dos.and_then(|d| d.create_time),
        compressed: (st.stx_attributes & st.stx_attributes_mask)
            .contains(rustix::fs::StatxAttributes::COMPRESSED),
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

/// What matters of the file system a file is on, from one `fstatfs`.
#[derive(Debug, Clone, Copy)]
struct FsKind {
    /// It keeps its files in memory (tmpfs, ramfs), so that reading one never waits for a
    /// device. Such file systems cannot read without blocking in the io_uring sense (no
    /// `FMODE_NOWAIT`), so every io_uring READ of them goes to a kernel worker thread; a small
    /// read is cheaper done in place ([`Node::in_memory`]).
    in_memory: bool,
    /// It is FUSE ([`Node::reads_within_size`]).
    fuse: bool,
    /// Its device, when the DOS attributes of its files may be kept ([`doscache`]).
    dos_kept: Option<u64>,
    /// It is btrfs, which compresses a file whose `FS_COMPR_FL` is set ([`Share::compresses`]).
    btrfs: bool,
    /// Its calls may wait on a network or another process ([`Share::may_wait_on_network`]):
    /// its type is not one whose files only this kernel changes ([`doscache::keeps_ctime`]),
    /// or `fstatfs` failed.
    remote: bool,
}

const TMPFS_MAGIC: u64 = 0x0102_1994;
const RAMFS_MAGIC: u64 = 0x8584_58f6;
const FUSE_SUPER_MAGIC: u64 = 0x6573_5546;

/// The file system of `fd`, which `st` describes.
fn fs_kind(fd: BorrowedFd<'_>, st: &Statx) -> FsKind {
    let t = rustix::fs::fstatfs(fd).ok().map(|s| s.f_type as u64);
    // Only this kernel changes its files: DOS attributes may be kept, and its calls wait on
    // no network.
    let local = t.is_some_and(doscache::keeps_ctime);
    FsKind {
        in_memory: t.is_some_and(|t| t == TMPFS_MAGIC || t == RAMFS_MAGIC),
        fuse: t == Some(FUSE_SUPER_MAGIC),
        dos_kept: local.then(|| dev_of(st.stx_dev_major, st.stx_dev_minor)),
        btrfs: t == Some(BTRFS_SUPER_MAGIC),
        remote: !local,
    }
}

/// Whether the file system of `fd` takes `user.` xattrs, asked without
/// changing anything: reading one it does not have is `ENODATA` there
/// (any answer but "unsupported" says the same: the file system looked),
/// `EOPNOTSUPP` where it has none.
fn user_xattrs_supported(fd: BorrowedFd<'_>) -> bool {
    let name = crate::dosattrib::XATTR;
    let r = match rustix::fs::fgetxattr_query(fd, name) {
        // O_PATH fd: go through its /proc link.
        Err(Errno::BADF) => rustix::fs::getxattr_query(proc_path(fd, None), name),
        r => r,
    };
    match r {
        Ok(_) => true,
        Err(e) => matches!(e, Errno::NODATA | Errno::RANGE) || is_refusal(e),
    }
}

/// btrfs's `f_type`: it always shares extents.
const BTRFS_SUPER_MAGIC: u64 = 0x9123_683E;

/// Whether the file system of directory `fd` clones blocks, and its block
/// size: two unnamed temporary files (`O_TMPFILE`) in it, the second made a
/// clone of the first (`FICLONE`; both empty, so nothing is shared): xfs
/// answers per its reflink feature, file systems without clones
/// `EOPNOTSUPP`. Where no temporary file can be made there (read-only, no
/// `O_TMPFILE`), btrfs is taken to clone and anything else not to.
fn clone_block_size(fd: BorrowedFd<'_>) -> Option<u64> {
    let fs = rustix::fs::fstatfs(fd).ok()?;
    let block = u64::try_from(fs.f_bsize).ok().filter(|b| *b > 0)?;
    let tmp = || {
        rustix::fs::openat(
            fd,
            ".",
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
    };
    match (tmp(), tmp()) {
        (Ok(a), Ok(b)) => rustix::fs::ioctl_ficlone(&b, &a).ok().map(|()| block),
        _ => (fs.f_type as u64 == BTRFS_SUPER_MAGIC).then_some(block),
    }
}

fn proc_path(fd: BorrowedFd<'_>, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("/proc/self/fd/{}/{}", fd.as_raw_fd(), n),
        None => format!("/proc/self/fd/{}", fd.as_raw_fd()),
    }
}

/// A `user.DOSATTRIB` value read into `buf` (`None` when there is none or
/// it is malformed). ringshare's former `user.ringshare.dosattrib` is not
/// read here (it would cost every file without a DOSATTRIB a second
/// lookup): scripts/migrate-dos-attributes.sh converts a tree once.
fn decode_read(buf: &[u8], res: Result<usize, Errno>) -> Option<crate::dosattrib::DosInfo> {
    res.ok().and_then(|n| crate::dosattrib::decode(&buf[..n]))
}

/// `user.DOSATTRIB` with its NUL, for `getxattrat`.
const DOSATTRIB_C: &CStr = c"user.DOSATTRIB";

/// DOS attributes and creation time of an open fd; `None` when absent,
/// malformed or unsupported. Read as `who` (the thread acts as it), and as
/// the server when the kernel refuses `who` (a file the user may not read
/// still shows its attributes, as on Samba).
pub(crate) fn read_dos_fd(who: &Who, fd: BorrowedFd<'_>) -> Option<crate::dosattrib::DosInfo> {
    read_dos_fd_definite(who, fd).0
}

/// [`read_dos_fd`], and whether the answer is the file's for sure ([`read_dos_definite`]).
fn read_dos_fd_definite(
    who: &Who,
    fd: BorrowedFd<'_>,
) -> (Option<crate::dosattrib::DosInfo>, bool) {
    read_dos_definite(who, |buf| {
        match rustix::fs::fgetxattr(fd, crate::dosattrib::XATTR, &mut *buf) {
            // O_PATH fd: go through its /proc link (`getxattrat` on the fd
            // itself is EBADF too).
            Err(Errno::BADF) => {
                rustix::fs::getxattr(proc_path(fd, None), crate::dosattrib::XATTR, buf)
            }
            r => r,
        }
    })
}

/// The stored DOS information `get` reads into its buffer: as `who` (the
/// thread acts as it), and as the server when the kernel refuses `who`; and
/// whether the answer is the file's for sure (a value, or none there) rather
/// than a read that failed.
fn read_dos_definite(
    who: &Who,
    get: impl Fn(&mut [u8]) -> Result<usize, Errno>,
) -> (Option<crate::dosattrib::DosInfo>, bool) {
    let read = || {
        let mut buf = [0u8; crate::dosattrib::READ_MAX];
        let r = get(&mut buf);
        if matches!(r, Err(e) if is_refusal(e)) {
            return Err(());
        }
        let definite = match r {
            Ok(_) => true,
            Err(e) => e == Errno::NODATA || e == Errno::RANGE || is_unsupported(e),
        };
        Ok((decode_read(&buf, r), definite))
    };
    match read() {
        Ok(d) => d,
        Err(()) => match as_server(who, || Ok(read())) {
            Ok(Ok(d)) => d,
            _ => (None, false),
        },
    }
}

/// DOS attributes and creation time of entry `name` of directory `dir` (a
/// symlink's own, never its target's): one `getxattrat(2)` where the kernel
/// has it (6.13), else a lookup through `/proc/self/fd/N/name`, which costs
/// about three times as much.
fn read_dos_at(
    who: &Who,
    dir: BorrowedFd<'_>,
    name: &str,
) -> (Option<crate::dosattrib::DosInfo>, bool) {
    read_dos_definite(who, |buf: &mut [u8]| -> Result<usize, Errno> {
        let xattr = DOSATTRIB_C;
        // A name from getdents has at most 255 bytes; build its C string on the stack.
        let mut cname = [0u8; 256];
        if !name.is_empty() && name.len() < cname.len() && !name.contains('\0') {
            cname[..name.len()].copy_from_slice(name.as_bytes());
            if let Ok(c) = CStr::from_bytes_until_nul(&cname) {
                match ringshare_engine::sys::getxattrat(dir, c, xattr, buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.raw_os_error() != Some(Errno::NOSYS.raw_os_error()) => {
                        return Err(Errno::from_io_error(&e).unwrap_or(Errno::IO))
                    }
                    Err(_) => {}
                }
            }
        }
        rustix::fs::lgetxattr(proc_path(dir, Some(name)), crate::dosattrib::XATTR, buf)
    })
}

/// The file `fd` refers to, with its DOS attributes, looked at as `who`.
fn stat_fd(who: &Who, fd: BorrowedFd<'_>) -> FsResult<FileAttr> {
    let st = statx_fd(fd).map_err(errno_to_fs)?;
    Ok(attr_from_statx(&st, read_dos_fd(who, fd)))
}

/// Entry `name` of directory `dir` with its DOS attributes, a symlink's own
/// and never its target's, looked at as `who`. `kept_on`: the device whose
/// files' DOS attributes may come from [`doscache`] (the file system of
/// `dir` when [`doscache::keeps_ctime`]).
fn stat_at(who: &Who, dir: BorrowedFd<'_>, name: &str, kept_on: Option<u64>) -> FsResult<FileAttr> {
    let st = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )
    .map_err(errno_to_fs)?;
    let stamp = kept_on.and_then(|dev| stamp_on(&st, dev));
    let dos = kept_or_read(stamp.as_ref(), || read_dos_at(who, dir, name));
    Ok(attr_from_statx(&st, dos))
}

/// A file's DOS attributes: the value [`doscache`] keeps for `stamp` (a file whose attributes
/// may be kept), else `read` (the value, and whether it is the file's for sure), kept when
/// sure.
fn kept_or_read(
    stamp: Option<&doscache::Stamp>,
    read: impl FnOnce() -> (Option<crate::dosattrib::DosInfo>, bool),
) -> Option<crate::dosattrib::DosInfo> {
    if let Some(dos) = stamp.and_then(doscache::get) {
        return dos;
    }
    let (dos, definite) = read();
    if let (Some(stamp), true) = (stamp, definite) {
        doscache::put(stamp, dos, doscache::now());
    }
    dos
}

/// `a`, which describes the file open at `fd`, with the file's DOS attributes: from
/// [`doscache`] while its change time stays (a file on device `kept_on`), else read (and
/// kept), as [`stat_at`] has them.
fn with_dos_fd(who: &Who, fd: BorrowedFd<'_>, a: FileAttr, kept_on: Option<u64>) -> FileAttr {
    let stamp = kept_on.and_then(|dev| stamp_of(&a, dev));
    let dos = kept_or_read(stamp.as_ref(), || read_dos_fd_definite(who, fd));
    FileAttr {
        dos_attributes: dos.map(|d| d.attributes),
        create_time: dos.and_then(|d| d.create_time),
        ..a
    }
}

/// The open flags for reading and/or writing (neither: read only, for metadata).
fn access_flags(read: bool, write: bool) -> OFlags {
    match (read, write) {
        (true, true) => OFlags::RDWR,
        (false, true) => OFlags::WRONLY,
        _ => OFlags::RDONLY,
    }
}

/// A device number as one integer.
fn dev_of(major: u32, minor: u32) -> u64 {
    (u64::from(major) << 32) | u64::from(minor)
}

/// What [`doscache`] checks a file by, when `st` describes one on device
/// `dev` and has its change time.
fn stamp_on(st: &Statx, dev: u64) -> Option<doscache::Stamp> {
    if dev_of(st.stx_dev_major, st.stx_dev_minor) != dev
        || st.stx_mask & StatxFlags::CTIME.bits() == 0
    {
        return None;
    }
    let btime = (st.stx_mask & StatxFlags::BTIME.bits() != 0).then(|| nanos(&st.stx_btime));
    Some(doscache::Stamp {
        dev,
        ino: st.stx_ino,
        ctime: nanos(&st.stx_ctime),
        btime,
    })
}

/// What [`doscache`] checks a file by, when `a` (stat'ed with its change
/// time, as every [`FileAttr`] of this backend is) is on device `dev`.
fn stamp_of(a: &FileAttr, dev: u64) -> Option<doscache::Stamp> {
    (a.dev == dev).then_some(doscache::Stamp {
        dev,
        ino: a.ino,
        ctime: a.ctime,
        btime: a.btime,
    })
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
        let n = &self.node;
        let read = n.readable || (n.kind == FileKind::Directory && !n.path_only);
        let write = n.writable;
        Opened {
            node: Arc::new(self.node),
            created,
            truncated,
            attr: Some(self.attr),
            read,
            write,
        }
    }
}

/// A share rooted at a local directory.
pub struct PosixShare {
    root: OwnedFd,
    root_path: PathBuf,
    read_only: bool,
    /// A snapshot's view ([`Share::is_snapshot`]; read-only too).
    snapshot: bool,
    /// The root's device, and what its file system is; files on another device are asked
    /// afresh.
    root_dev: (u32, u32),
    root_fs: FsKind,
    /// The root's file system takes `user.` xattrs (probed once, by
    /// [`user_xattrs_supported`]): files can have named streams.
    streams: bool,
    /// The root's file system clones blocks, of this size (probed once, by
    /// [`clone_block_size`]).
    clone_block: Option<u64>,
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
        Ok(PosixShare::rooted_at(fd, root.to_path_buf())?)
    }

    /// A writable share whose root is the directory `fd` (`O_PATH`), found at `root_path`.
    fn rooted_at(fd: OwnedFd, root_path: PathBuf) -> Result<PosixShare, Errno> {
        let st = statx_fd(fd.as_fd())?;
        let root_fs = fs_kind(fd.as_fd(), &st);
        let streams = user_xattrs_supported(fd.as_fd());
        let clone_block = clone_block_size(fd.as_fd());
        Ok(PosixShare {
            root: fd,
            root_path,
            read_only: false,
            snapshot: false,
            root_dev: (st.stx_dev_major, st.stx_dev_minor),
            root_fs,
            streams,
            clone_block,
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
        self.openat2_resolving(path, flags, mode, RESOLVE)
    }

    /// [`PosixShare::openat2`] with the `openat2` resolve flags `resolve`.
    fn openat2_resolving(
        &self,
        path: &RelPath,
        flags: OFlags,
        mode: u32,
        resolve: ResolveFlags,
    ) -> Result<OwnedFd, Errno> {
        path.with_slash_path(|p| {
            let mut last = Errno::AGAIN;
            for _ in 0..OPENAT2_RETRIES_MAX {
                match rustix::fs::openat2(
                    &self.root,
                    p,
                    flags | OFlags::CLOEXEC,
                    Mode::from_raw_mode(mode & 0o7777),
                    resolve,
                ) {
                    // EAGAIN: a rename raced with a RESOLVE_BENEATH lookup.
                    Err(e @ (Errno::INTR | Errno::AGAIN)) => last = e,
                    r => return r,
                }
            }
            // Still EAGAIN: a local program's kernel lease on the file (a non-blocking open
            // that breaks one fails so: `FsError::LeaseHeld`, opened again later).
            Err(last)
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
        who: &Who,
        fd: OwnedFd,
        readable: bool,
        writable: bool,
        path_only: bool,
    ) -> FsResult<Fresh> {
        let st = statx_fd(fd.as_fd()).map_err(errno_to_fs)?;
        let kind = kind_of(st.stx_mode);
        if matches!(kind, FileKind::Other(_)) && (readable || writable) {
            return Err(FsError::AccessDenied);
        }
        // Opened O_NONBLOCK so that a FIFO cannot hang the open; a regular file goes
        // back to blocking mode before its first I/O (`PosixNode::io_fd`).
        let nonblocking = kind == FileKind::File && !path_only;
        let FsKind {
            in_memory,
            fuse,
            dos_kept,
            remote,
            ..
        } = if (st.stx_dev_major, st.stx_dev_minor) == self.root_dev {
            self.root_fs
        } else {
            fs_kind(fd.as_fd(), &st)
        };
        Ok(Fresh {
            node: PosixNode {
                who: Arc::clone(who),
                fd: Arc::new(fd),
                kind,
                readable,
                writable,
                path_only,
                read_only: self.read_only,
                snapshot: self.snapshot,
                in_memory,
                fuse,
                remote,
                dos_kept,
                nonblocking: AtomicBool::new(nonblocking),
            },
            attr: attr_from_statx(&st, None),
        })
    }

    fn open_root(&self, who: &Who, opts: &OpenOptions) -> FsResult<Opened> {
        match opts.mode {
            OpenMode::CreateNew => return Err(FsError::Exists),
            OpenMode::Truncate | OpenMode::TruncateOrCreate => return Err(FsError::IsADirectory),
            OpenMode::Existing | OpenMode::OpenOrCreate => {}
        }
        if opts.non_directory {
            return Err(FsError::IsADirectory);
        }
        let fresh = self.open_existing_dir(who, &RelPath::root())?;
        Ok(fresh.opened(false, false))
    }

    /// Open an existing directory for listing; `O_PATH` when reading is refused.
    fn open_existing_dir(&self, who: &Who, path: &RelPath) -> FsResult<Fresh> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK;
        match self.openat2(path, flags, 0) {
            Ok(fd) => self.node(who, fd, false, false, false),
            Err(Errno::ACCESS) => {
                let fd = self
                    .openat2(path, OFlags::PATH | OFlags::DIRECTORY, 0)
                    .map_err(|e| self.lookup_error(path, e))?;
                self.node(who, fd, false, false, true)
            }
            Err(e) => Err(self.lookup_error(path, e)),
        }
    }

    /// `mkdirat`, then the set-id bits of `mode` it leaves out (the kernel
    /// keeps only rwx and sticky: a set-group-id bit asked for, as `force
    /// directory mode` may, is set after, as Samba does).
    fn mkdir(&self, path: &RelPath, mode: u32) -> FsResult<()> {
        let (parent, name) = self.open_parent(path)?;
        rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(mode & 0o7777))
            .map_err(errno_to_fs)?;
        if mode & 0o6000 != 0 {
            let st = rustix::fs::statx(&parent, name, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::MODE)
                .map_err(errno_to_fs)?;
            let have = u32::from(st.stx_mode) & 0o7777;
            if mode & 0o6000 & !have != 0 {
                rustix::fs::chmodat(
                    &parent,
                    name,
                    Mode::from_raw_mode(have | (mode & 0o6000)),
                    AtFlags::empty(),
                )
                .map_err(errno_to_fs)?;
            }
        }
        Ok(())
    }

    fn open_directory(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let truncates = matches!(opts.mode, OpenMode::Truncate | OpenMode::TruncateOrCreate);
        if opts.mode == OpenMode::CreateNew {
            self.mkdir(path, opts.create_mode)?;
            let fresh = self.open_existing_dir(who, path)?;
            return Ok(fresh.opened(true, false));
        }
        let creates = matches!(
            opts.mode,
            OpenMode::OpenOrCreate | OpenMode::TruncateOrCreate
        );
        for _ in 0..CREATE_RACE_RETRIES_MAX {
            match self.open_existing_dir(who, path) {
                Ok(_) if truncates => return Err(FsError::IsADirectory),
                Ok(fresh) => return Ok(fresh.opened(false, false)),
                Err(FsError::NotFound) if creates => {
                    self.check_writable()?;
                    match self.mkdir(path, opts.create_mode) {
                        Ok(()) => {
                            let fresh = self.open_existing_dir(who, path)?;
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

    /// An existing file the kernel would not open with `opts`: opened with
    /// less (read only, write only, then for its metadata).
    fn open_file_with_less(
        &self,
        who: &Who,
        path: &RelPath,
        opts: &OpenOptions,
    ) -> FsResult<Opened> {
        let mut tries = Vec::with_capacity(3);
        if opts.read && opts.write {
            tries.push((true, false));
            tries.push((false, true));
        }
        tries.push((false, false));
        for (read, write) in tries {
            let fewer = OpenOptions {
                mode: OpenMode::Existing,
                read,
                write,
                best_effort: false,
                ..*opts
            };
            match self.open_file(who, path, &fewer) {
                Err(FsError::AccessDenied) => continue,
                r => return r,
            }
        }
        Err(FsError::AccessDenied)
    }

    fn open_file(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let base = access_flags(opts.read, opts.write) | OFlags::NOCTTY | OFlags::NONBLOCK;
        let truncates = matches!(opts.mode, OpenMode::Truncate | OpenMode::TruncateOrCreate);
        let creates = matches!(
            opts.mode,
            OpenMode::CreateNew | OpenMode::OpenOrCreate | OpenMode::TruncateOrCreate
        );
        let create_excl = || -> FsResult<Option<Opened>> {
            self.check_writable()?;
            match self.openat2(path, base | OFlags::CREATE | OFlags::EXCL, opts.create_mode) {
                Ok(fd) => {
                    let fresh = self.node(who, fd, opts.read, opts.write, false)?;
                    Ok(Some(fresh.opened(true, false)))
                }
                Err(Errno::EXIST) if opts.mode != OpenMode::CreateNew => Ok(None),
                Err(e) => Err(self.lookup_error(path, e)),
            }
        };
        if opts.mode == OpenMode::CreateNew {
            return create_excl()?.ok_or(FsError::Exists);
        }
        if opts.no_follow {
            // Looked at first without opening it for I/O: a symlink, FIFO, socket or device
            // is opened itself, for its metadata; a file or directory is opened below, never
            // through a symlink put there meanwhile (O_NOFOLLOW).
            match self.openat2(path, OFlags::PATH | OFlags::NOFOLLOW, 0) {
                Ok(fd) => {
                    let fresh = self.node(who, fd, false, false, true)?;
                    match fresh.node.kind {
                        FileKind::Symlink => {
                            return Ok(Opened {
                                node: Arc::new(link::LinkNode(fresh.node)),
                                created: false,
                                truncated: false,
                                attr: Some(fresh.attr),
                                read: false,
                                write: false,
                            })
                        }
                        FileKind::Other(_) => return Ok(fresh.opened(false, false)),
                        _ => {}
                    }
                }
                Err(Errno::NOENT) if creates => {}
                Err(e) => return Err(self.lookup_error(path, e)),
            }
        }
        let flags = if truncates {
            base | OFlags::TRUNC
        } else {
            base
        };
        let flags = if opts.no_follow {
            flags | OFlags::NOFOLLOW
        } else {
            flags
        };
        for _ in 0..CREATE_RACE_RETRIES_MAX {
            match self.openat2(path, flags, 0) {
                Ok(fd) => {
                    let fresh = self.node(who, fd, opts.read, opts.write, false)?;
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
                    let fresh = self.open_existing_dir(who, path)?;
                    return Ok(fresh.opened(false, false));
                }
                Err(Errno::ACCESS)
                    if opts.best_effort && (opts.read || opts.write) && !truncates =>
                {
                    return self.open_file_with_less(who, path, opts);
                }
                Err(Errno::ACCESS) if !opts.read && !opts.write && !truncates => {
                    let fd = self
                        .openat2(path, OFlags::PATH, 0)
                        .map_err(|e| self.lookup_error(path, e))?;
                    let fresh = self.node(who, fd, false, false, true)?;
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
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        act(who)?;
        let changes = matches!(
            opts.mode,
            OpenMode::CreateNew | OpenMode::Truncate | OpenMode::TruncateOrCreate
        );
        if self.read_only && (changes || (opts.write && !self.snapshot)) {
            return Err(FsError::ReadOnly);
        }
        if self.snapshot && opts.write {
            // Granted as Samba 4.22 grants it, the descriptor for reading only; nothing is
            // made (OpenOrCreate of a name not there is a change).
            let reading = OpenOptions {
                write: false,
                mode: OpenMode::Existing,
                ..*opts
            };
            return match self.open(who, path, &reading) {
                Err(FsError::NotFound) if opts.mode != OpenMode::Existing => Err(FsError::ReadOnly),
                r => r,
            };
        }
        if opts.directory && opts.non_directory {
            return Err(FsError::InvalidName);
        }
        if path.is_root() {
            return self.open_root(who, opts);
        }
        if opts.directory {
            self.open_directory(who, path, opts)
        } else {
            self.open_file(who, path, opts)
        }
    }

    fn stat(&self, who: &Who, path: &RelPath) -> FsResult<FileAttr> {
        act(who)?;
        if path.is_root() {
            return stat_fd(who, self.root.as_fd());
        }
        let (parent, name) = self.open_parent(path)?;
        stat_at(who, parent.as_fd(), name, self.root_fs.dos_kept)
    }

    /// One `openat2` with `RESOLVE_NO_SYMLINKS` and the `statx` of what it opened (the DOS
    /// attributes mostly from [`doscache`]), against a `statx` by name (through the parent's
    /// descriptor, opened for it below the root), the `openat2` and its `statx`.
    fn open_exact(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let plain = opts.mode == OpenMode::Existing
            && !(opts.directory || opts.no_follow || opts.best_effort || self.snapshot)
            && !(self.read_only && opts.write)
            && !path.is_root();
        if !plain {
            return Err(FsError::InvalidName);
        }
        act(who)?;
        let flags = access_flags(opts.read, opts.write) | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = self
            .openat2_resolving(path, flags, 0, RESOLVE | ResolveFlags::NO_SYMLINKS)
            .map_err(errno_to_fs)?;
        let Fresh { node, attr } = self.node(who, fd, opts.read, opts.write, false)?;
        // As [`PosixShare::open_file`] opens what it finds (a FIFO or device is refused
        // by `node` when opened for data, and looked up again).
        match node.kind {
            FileKind::File => {}
            FileKind::Directory if !opts.non_directory => {}
            _ => return Err(FsError::IsADirectory),
        }
        let attr = with_dos_fd(who, node.fd.as_fd(), attr, node.dos_kept);
        Ok(Fresh { node, attr }.opened(false, false))
    }

    fn unlink(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        act(who)?;
        let (parent, name) = self.open_parent(path)?;
        rustix::fs::unlinkat(&parent, name, AtFlags::empty()).map_err(errno_to_fs)
    }

    fn rmdir(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        act(who)?;
        let (parent, name) = self.open_parent(path)?;
        rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).map_err(|e| match e {
            Errno::EXIST => FsError::NotEmpty,
            e => errno_to_fs(e),
        })
    }

    fn link(&self, who: &Who, from: &RelPath, to: &RelPath) -> FsResult<()> {
        self.check_writable()?;
        act(who)?;
        if from.is_root() || to.is_root() {
            return Err(FsError::AccessDenied);
        }
        let (from_parent, from_name) = self.open_parent(from)?;
        let (to_parent, to_name) = self.open_parent(to)?;
        // No AT_SYMLINK_FOLLOW: a symlink is linked as itself, never followed
        // out of the share; both parents were resolved beneath the root.
        rustix::fs::linkat(
            &from_parent,
            from_name,
            &to_parent,
            to_name,
            AtFlags::empty(),
        )
        .map_err(|e| match e {
            Errno::XDEV => FsError::CrossDevice,
            e => errno_to_fs(e),
        })
    }

    fn rename(&self, who: &Who, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()> {
        self.check_writable()?;
        act(who)?;
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

    fn may_delete(&self, who: &Who, path: &RelPath) -> FsResult<bool> {
        act(who)?;
        let (parent, name) = self.open_parent(path)?;
        let parent = parent.as_fd();
        let dir = statx_fd(parent).map_err(errno_to_fs)?;
        // In a snapshot, what the directory's permissions give (its file system may be
        // read-only: a btrfs snapshot), as Samba computes a snapshot's file's access; nothing
        // is deleted through it all the same.
        let allowed = kernel_allows(
            parent,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )? || (self.snapshot && node::mode_allows(who, &dir, 3));
        if !allowed {
            return Ok(false);
        }
        let entry = rustix::fs::statx(
            parent,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::BASIC_STATS,
        )
        .map_err(errno_to_fs)?;
        let pinned = rustix::fs::StatxAttributes::IMMUTABLE | rustix::fs::StatxAttributes::APPEND;
        if (entry.stx_attributes & entry.stx_attributes_mask).intersects(pinned) {
            return Ok(false);
        }
        // The sticky bit: only the entry's or the directory's owner (or root).
        let sticky = u32::from(dir.stx_mode) & 0o1000 != 0;
        let uid = who.uid();
        Ok(!sticky || uid == 0 || uid == entry.stx_uid || uid == dir.stx_uid)
    }

    fn statfs(&self) -> FsResult<FsStat> {
        let s = rustix::fs::fstatvfs(&self.root).map_err(errno_to_fs)?;
        Ok(FsStat {
            block_size: if s.f_frsize != 0 {
                s.f_frsize
            } else {
                s.f_bsize
            },
            io_size: s.f_bsize,
            total_blocks: s.f_blocks,
            free_blocks: s.f_bfree,
            avail_blocks: s.f_bavail,
            total_files: s.f_files,
            free_files: s.f_ffree,
            name_max: s.f_namemax,
            fs_id: s.f_fsid,
        })
    }

    /// Whether the root's file system takes `user.` xattrs, where the
    /// streams live (Samba's `streams_xattr` format).
    fn streams_supported(&self) -> bool {
        self.streams
    }

    /// The view's root is opened `O_PATH` beneath this root as `who`; its
    /// paths are then resolved with `RESOLVE_BENEATH` of that directory.
    fn read_only_view(&self, who: &Who, dir: &RelPath) -> FsResult<Arc<dyn Share>> {
        act(who)?;
        let fd = self
            .openat2(dir, OFlags::PATH | OFlags::DIRECTORY, 0)
            .map_err(|e| self.lookup_error(dir, e))?;
        let view = PosixShare::rooted_at(fd, self.root_path.join(dir.to_slash_path()))
            .map_err(errno_to_fs)?;
        let mut view = view.with_read_only(true);
        view.snapshot = true;
        Ok(Arc::new(view))
    }

    fn is_snapshot(&self) -> bool {
        self.snapshot
    }

    /// From the root's `fstatfs`, taken once when the share was opened.
    fn may_wait_on_network(&self) -> bool {
        self.root_fs.remote
    }

    /// btrfs (probed once at set-up); a read-only share changes nothing.
    fn compresses(&self) -> bool {
        self.root_fs.btrfs && !self.read_only
    }

    /// Probed once at set-up; a read-only share clones nothing.
    fn clone_block_size(&self) -> Option<u64> {
        self.clone_block.filter(|_| !self.read_only)
    }

    fn find_name_case_insensitive(&self, who: &Who, dir: &RelPath, name: &str) -> FsResult<String> {
        act(who)?;
        let fd = self.open_dir_to_read(dir)?;
        // A large directory's names are kept (posix/names.rs) on a local, live file system.
        let watch = if self.root_fs.remote || self.snapshot {
            None
        } else {
            match names::global().look(who, fd.as_fd(), name, self.root_dev) {
                names::Look::Answer(found) => return found.ok_or(FsError::NotFound),
                names::Look::ReadAndIndex(watch) => Some(watch),
                names::Look::Read => None,
            }
        };
        let wanted = name.to_lowercase();
        let mut best: Option<String> = None;
        let mut exact = false;
        let mut all = watch.as_ref().map(|_| Vec::new());
        let read = scan_fd(fd, |n| {
            if let Some(all) = all.as_mut() {
                all.push(n.to_string());
            }
            if n == name {
                exact = true;
                // Read on to the end when every name is wanted for the index.
                return all.is_none();
            }
            if lowercases_to(n, &wanted) && best.as_deref().is_none_or(|b| n < b) {
                best = Some(n.to_string());
            }
            false
        });
        if let Some(watch) = watch {
            names::global().indexed(watch, all.filter(|_| read.is_ok()));
        }
        read?;
        match exact {
            true => Ok(name.to_string()),
            false => best.ok_or(FsError::NotFound),
        }
    }

    fn find_name_matching(
        &self,
        who: &Who,
        dir: &RelPath,
        matches: &dyn Fn(&str) -> bool,
    ) -> FsResult<String> {
        self.scan_dir(who, dir, matches)?.ok_or(FsError::NotFound)
    }
}

/// Whether `name.to_lowercase() == lower`, without making a lowercase copy
/// of an ASCII name: a new name's case-insensitive look checks every entry of
/// its directory, and an allocation per entry was most of that look's own time.
fn lowercases_to(name: &str, lower: &str) -> bool {
    if name.is_ascii() && lower.is_ascii() {
        return name.len() == lower.len()
            && name
                .bytes()
                .zip(lower.bytes())
                .all(|(a, b)| a.to_ascii_lowercase() == b);
    }
    name.to_lowercase() == lower
}

impl PosixShare {
    /// Read directory `dir` as `who` until `stop` accepts a name (returned).
    fn scan_dir(
        &self,
        who: &Who,
        dir: &RelPath,
        stop: impl FnMut(&str) -> bool,
    ) -> FsResult<Option<String>> {
        act(who)?;
        scan_fd(self.open_dir_to_read(dir)?, stop)
    }

    /// Open directory `dir` to read its names (as the user acted as).
    fn open_dir_to_read(&self, dir: &RelPath) -> FsResult<OwnedFd> {
        self.openat2(dir, OFlags::RDONLY | OFlags::DIRECTORY, 0)
            .map_err(|e| match e {
                Errno::NOENT | Errno::NOTDIR => FsError::PathNotFound,
                e => errno_to_fs(e),
            })
    }
}

/// Read the directory open as `fd` until `stop` accepts a name (returned); `.`, `..` and names
/// that are not UTF-8 are skipped.
fn scan_fd(fd: OwnedFd, mut stop: impl FnMut(&str) -> bool) -> FsResult<Option<String>> {
    for entry in Dir::new(fd).map_err(errno_to_fs)? {
        let entry = entry.map_err(errno_to_fs)?;
        let Ok(n) = entry.file_name().to_str() else {
            continue;
        };
        if n != "." && n != ".." && stop(n) {
            return Ok(Some(n.to_string()));
        }
    }
    Ok(None)
}

mod doscache;
mod link;
mod names;
mod node;
mod stream;
#[cfg(test)]
mod tests;

pub use names::{read_inotify, InotifyEvent};
pub use node::PosixNode;
pub use stream::PosixStreamNode;
