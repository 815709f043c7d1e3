//! Named data streams ([`Node::open_stream`]) of a [`PosixShare`]'s files,
//! stored as Samba 4.17's `vfs_streams_xattr` stores them with its
//! defaults, so a share keeps its streams when it moves between Samba and
//! ringshare: one xattr per stream on the file (or directory) itself, named
//! `user.DosStream.<name>:$DATA` with the name spelled as the client spelled
//! it when it created the stream, holding the stream's bytes and one NUL
//! after them (a new or truncated stream is the one byte `"\0"`). A stream
//! holds at most [`STREAM_SIZE_MAX`] bytes (a Linux xattr value is at most
//! 64 KiB); some file systems hold less (ext4 without `ea_inode` keeps about
//! 4 KiB of xattrs per file in all and refuses more with `ENOSPC`:
//! [`FsError::NoSpace`]).
//!
//! Every xattr call runs as the node's user, so the kernel decides: reading
//! a stream needs read permission on the file, creating, changing or
//! removing one write permission (and on a sticky directory, owning it).
//! Only whether a stream is there and its size are asked as the server when
//! the kernel refuses the user: no data, and the file's own size shows to
//! anyone who may stat it too.
//!
//! A write reads the whole value, changes it and writes it back. The
//! read-modify-write cycles on one file (writes, truncations, renames,
//! removals) take one of [`STREAM_LOCKS`], chosen by device and inode, so
//! two of them in this process never lose each other's bytes; values are
//! written back with `XATTR_REPLACE`, so a stream removed meanwhile stays
//! removed ([`FsError::NotFound`]).

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::*;
use crate::{
    data_writable, share_writable, stream_name_is_valid, stream_names_match, StreamInfo,
    EOPNOTSUPP, STREAM_SIZE_MAX, STREAM_XATTR_PREFIX, STREAM_XATTR_SUFFIX,
};

/// The longest xattr value of a stream: its data and the NUL.
const VALUE_SIZE_MAX: usize = STREAM_SIZE_MAX as usize + 1;

/// The DOS attribute a directory's stored attributes carry and its streams
/// do not show (Samba drops it for streams too).
const ATTR_DIRECTORY: u32 = 0x10;

/// The xattr holding stream `name`.
pub(crate) fn xattr_name(name: &str) -> String {
    format!("{STREAM_XATTR_PREFIX}{name}{STREAM_XATTR_SUFFIX}")
}

/// The stream xattr `xattr` holds: what is between the exact prefix and the
/// exact suffix, when [`stream_name_is_valid`]; `None` for any other xattr.
pub(crate) fn stream_of_xattr(xattr: &str) -> Option<&str> {
    let name = xattr
        .strip_prefix(STREAM_XATTR_PREFIX)?
        .strip_suffix(STREAM_XATTR_SUFFIX)?;
    stream_name_is_valid(name).then_some(name)
}

/// How many locks [`STREAM_LOCKS`] has (a power of two).
const STREAM_LOCK_STRIPES: usize = 64;

/// The locks of streams' read-modify-write cycles: a file takes the one its
/// device and inode hash to ([`lock_of`]); files sharing one only wait for
/// each other now and then.
static STREAM_LOCKS: [Mutex<()>; STREAM_LOCK_STRIPES] =
    [const { Mutex::new(()) }; STREAM_LOCK_STRIPES];

/// The index in [`STREAM_LOCKS`] of the file `fd` refers to.
fn lock_of(fd: BorrowedFd<'_>) -> FsResult<usize> {
    let st =
        rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::INO).map_err(fd_errno_to_fs)?;
    let dev = (u64::from(st.stx_dev_major) << 32) | u64::from(st.stx_dev_minor);
    let key = dev.rotate_left(17) ^ st.stx_ino;
    // Fibonacci hashing: the top bits of the product.
    let top =
        key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - STREAM_LOCK_STRIPES.trailing_zeros());
    Ok(top as usize % STREAM_LOCK_STRIPES)
}

fn lock(index: usize) -> MutexGuard<'static, ()> {
    STREAM_LOCKS
        .get(index % STREAM_LOCK_STRIPES)
        .unwrap_or(&STREAM_LOCKS[0])
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Errors of a stream's xattr calls: a missing xattr is a missing stream, a
/// value or name too large for the file system is `TooBig`, no xattrs at all
/// `Other(EOPNOTSUPP)`.
fn stream_errno_to_fs(e: Errno) -> FsError {
    match e {
        Errno::NODATA => FsError::NotFound,
        Errno::TOOBIG | Errno::RANGE => FsError::TooBig,
        e if is_unsupported(e) => FsError::Other(EOPNOTSUPP),
        e => fd_errno_to_fs(e),
    }
}

/// The length of xattr `xattr`'s value (`fgetxattr` with size 0; rustix
/// 1.1.6 has it as `fgetxattr_query`).
fn value_len(fd: BorrowedFd<'_>, xattr: &str) -> Result<usize, Errno> {
    match rustix::fs::fgetxattr_query(fd, xattr) {
        // O_PATH fd: go through its /proc link.
        Err(Errno::BADF) => rustix::fs::getxattr_query(proc_path(fd, None), xattr),
        r => r,
    }
}

fn get(fd: BorrowedFd<'_>, xattr: &str, buf: &mut [u8]) -> Result<usize, Errno> {
    match rustix::fs::fgetxattr(fd, xattr, &mut *buf) {
        // O_PATH fd: go through its /proc link.
        Err(Errno::BADF) => rustix::fs::getxattr(proc_path(fd, None), xattr, buf),
        r => r,
    }
}

fn set(fd: BorrowedFd<'_>, xattr: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
    match rustix::fs::fsetxattr(fd, xattr, value, flags) {
        Err(Errno::BADF) => rustix::fs::setxattr(proc_path(fd, None), xattr, value, flags),
        r => r,
    }
    .map_err(stream_errno_to_fs)
}

fn remove_xattr(fd: BorrowedFd<'_>, xattr: &str) -> FsResult<()> {
    match rustix::fs::fremovexattr(fd, xattr) {
        Err(Errno::BADF) => rustix::fs::removexattr(proc_path(fd, None), xattr),
        r => r,
    }
    .map_err(stream_errno_to_fs)
}

/// The data bytes of the stream in xattr `xattr`, `None` when there is no
/// such stream: its value's length less the NUL (an empty value counts as
/// empty), asked without reading the value. As the thread's user, and as the
/// server when the kernel refuses the user (read permission): a size, not
/// data.
fn size_of(who: &Who, fd: BorrowedFd<'_>, xattr: &str) -> FsResult<Option<u64>> {
    let probe = || match value_len(fd, xattr) {
        Ok(n) => Ok(Some((n as u64).saturating_sub(1))),
        Err(Errno::NODATA) => Ok(None),
        Err(e) => Err(e),
    };
    match probe() {
        Err(e) if is_refusal(e) => as_server(who, || probe().map_err(stream_errno_to_fs)),
        r => r.map_err(stream_errno_to_fs),
    }
}

/// A buffer that holds any stream's whole value (never sized by asking the
/// kernel first: the value may change between the two calls).
fn value_buffer() -> Vec<u8> {
    vec![0u8; VALUE_SIZE_MAX]
}

/// Read the value of `xattr` into `buf` (from [`value_buffer`]); returns
/// the stream's data length (the value less its NUL). `NotFound` when the
/// stream is gone.
fn read_value(fd: BorrowedFd<'_>, xattr: &str, buf: &mut [u8]) -> FsResult<usize> {
    let n = get(fd, xattr, buf).map_err(stream_errno_to_fs)?;
    Ok(n.saturating_sub(1))
}

/// Write back `buf[..len]` as the data of stream `xattr`, with the NUL
/// after it, only if the stream still exists.
fn write_value(fd: BorrowedFd<'_>, xattr: &str, buf: &mut [u8], len: usize) -> FsResult<()> {
    let nul = buf.get_mut(len).ok_or(FsError::TooBig)?;
    *nul = 0;
    let value = buf.get(..=len).ok_or(FsError::TooBig)?;
    set(fd, xattr, value, XattrFlags::REPLACE)
}

/// A base's stream names and xattrs.
fn stream_xattrs(base: &PosixNode) -> FsResult<Vec<(String, String)>> {
    Ok(base
        .xattr_names()?
        .into_iter()
        .filter_map(|x| stream_of_xattr(&x).map(|n| (n.to_string(), x.clone())))
        .collect())
}

/// [`Node::list_streams`] of a file or directory: its stream xattrs in the
/// order the file system lists them, each with its size.
pub(super) fn list(base: &PosixNode) -> FsResult<Vec<StreamInfo>> {
    base.act()?;
    let fd = base.fd.as_fd();
    let mut out = Vec::new();
    for (name, xattr) in stream_xattrs(base)? {
        // One removed since the listing is left out.
        if let Some(size) = size_of(&base.who, fd, &xattr)? {
            out.push(StreamInfo { name, size });
        }
    }
    Ok(out)
}

/// [`Node::open_stream`] of a file or directory.
pub(super) fn open(base: &PosixNode, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
    if !stream_name_is_valid(name) {
        return Err(FsError::InvalidName);
    }
    if !matches!(base.kind, FileKind::File | FileKind::Directory) {
        return Err(FsError::AccessDenied);
    }
    let changes = matches!(
        mode,
        OpenMode::CreateNew | OpenMode::Truncate | OpenMode::TruncateOrCreate
    );
    if changes || (write && !base.snapshot) {
        share_writable(base.read_only)?;
    }
    // In a snapshot, granted as Samba 4.22 grants it and written by nothing.
    let write = write && !base.snapshot;
    base.act()?;
    let fd = base.fd.as_fd();
    // As a file opened for writing: the kernel must let the user write it.
    if write && !kernel_allows(fd, rustix::fs::Access::WRITE_OK)? {
        return Err(FsError::AccessDenied);
    }
    let lock_index = lock_of(fd)?;
    let xattr = xattr_name(name);
    let empty = [0u8];
    let (created, truncated) = match mode {
        OpenMode::Existing => {
            size_of(&base.who, fd, &xattr)?.ok_or(FsError::NotFound)?;
            (false, false)
        }
        OpenMode::CreateNew => {
            set(fd, &xattr, &empty, XattrFlags::CREATE)?;
            (true, false)
        }
        OpenMode::OpenOrCreate => {
            if size_of(&base.who, fd, &xattr)?.is_some() {
                (false, false)
            } else {
                share_writable(base.read_only)?;
                match set(fd, &xattr, &empty, XattrFlags::CREATE) {
                    Ok(()) => (true, false),
                    // Created meanwhile: opened as it is.
                    Err(FsError::Exists) => (false, false),
                    Err(e) => return Err(e),
                }
            }
        }
        OpenMode::Truncate => {
            let _guard = lock(lock_index);
            set(fd, &xattr, &empty, XattrFlags::REPLACE)?;
            (false, true)
        }
        OpenMode::TruncateOrCreate => {
            let _guard = lock(lock_index);
            let existed = size_of(&base.who, fd, &xattr)?.is_some();
            set(fd, &xattr, &empty, XattrFlags::empty())?;
            (!existed, existed)
        }
    };
    let node = PosixStreamNode {
        base: PosixNode {
            who: Arc::clone(&base.who),
            fd: Arc::clone(&base.fd),
            kind: base.kind,
            readable: base.readable,
            writable: base.writable,
            path_only: base.path_only,
            read_only: base.read_only,
            snapshot: base.snapshot,
            in_memory: base.in_memory,
            fuse: base.fuse,
            remote: base.remote,
            dos_kept: base.dos_kept,
            nonblocking: AtomicBool::new(base.nonblocking.load(Ordering::Relaxed)),
        },
        names: RwLock::new((name.to_string(), xattr)),
        write,
        lock_index,
    };
    Ok(Opened {
        node: Arc::new(node),
        created,
        truncated,
        attr: None,
        read: true,
        write,
    })
}

/// [`Node::remove_stream`] of a file or directory.
pub(super) fn remove(base: &PosixNode, name: &str) -> FsResult<()> {
    share_writable(base.read_only)?;
    if !stream_name_is_valid(name) {
        return Err(FsError::InvalidName);
    }
    base.act()?;
    let fd = base.fd.as_fd();
    let _guard = lock(lock_of(fd)?);
    remove_xattr(fd, &xattr_name(name))
}

/// [`Node::rename_stream`] of a file or directory: the value is copied to
/// the new name, then the old name and a replaced stream stored under
/// another spelling of the new name are removed.
pub(super) fn rename(base: &PosixNode, from: &str, to: &str, replace: bool) -> FsResult<()> {
    share_writable(base.read_only)?;
    if !stream_name_is_valid(from) || !stream_name_is_valid(to) {
        return Err(FsError::InvalidName);
    }
    base.act()?;
    let fd = base.fd.as_fd();
    let _guard = lock(lock_of(fd)?);
    let from_xattr = xattr_name(from);
    let mut buf = value_buffer();
    let n = get(fd, &from_xattr, &mut buf).map_err(stream_errno_to_fs)?;
    if from == to {
        return Ok(());
    }
    let to_xattr = xattr_name(to);
    // Other streams `to` names (another stream than `from`, any spelling).
    let targets: Vec<String> = stream_xattrs(base)?
        .into_iter()
        .filter(|(name, x)| *x != from_xattr && stream_names_match(name, to))
        .map(|(_, x)| x)
        .collect();
    if !targets.is_empty() && !replace {
        return Err(FsError::Exists);
    }
    let value = buf.get(..n).ok_or(FsError::Io)?;
    set(fd, &to_xattr, value, XattrFlags::empty())?;
    remove_xattr(fd, &from_xattr)?;
    for x in targets.iter().filter(|x| **x != to_xattr) {
        match remove_xattr(fd, x) {
            Ok(()) | Err(FsError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An open named stream of a [`PosixShare`]'s file or directory
/// ([`Node::open_stream`]). It holds the file's descriptor (so it works on
/// after the file is unlinked or its own node is closed) and reads and
/// writes the stream's xattr through it; everything else is the file's.
pub struct PosixStreamNode {
    /// The file, as its node was opened: metadata goes to it.
    base: PosixNode,
    /// The stream's name as stored and its xattr (a rename through the
    /// node changes them).
    names: RwLock<(String, String)>,
    /// The open may change the stream's data.
    write: bool,
    /// The file's lock in [`STREAM_LOCKS`].
    lock_index: usize,
}

impl fmt::Debug for PosixStreamNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PosixStreamNode")
            .field("fd", &self.base.fd.as_raw_fd())
            .field("name", &self.names())
            .field("write", &self.write)
            .finish()
    }
}

impl PosixStreamNode {
    /// The stream's name and xattr now.
    fn names(&self) -> (String, String) {
        self.names.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn xattr(&self) -> String {
        self.names().1
    }
    fn check_data_write(&self) -> FsResult<()> {
        data_writable(self.base.read_only, FileKind::File, self.write)
    }

    /// The stream's size; `NotFound` once it was removed.
    fn stream_size(&self) -> FsResult<u64> {
        size_of(&self.base.who, self.base.fd.as_fd(), &self.xattr())?.ok_or(FsError::NotFound)
    }

    /// The file's metadata `attr` as the stream's: a file of the stream's
    /// size, without the DIRECTORY attribute a directory stores.
    fn as_stream(&self, mut attr: FileAttr) -> FsResult<FileAttr> {
        let size = self.stream_size()?;
        attr.kind = FileKind::File;
        attr.size = size;
        attr.alloc_size = size;
        attr.dos_attributes = attr.dos_attributes.map(|a| a & !ATTR_DIRECTORY);
        Ok(attr)
    }

    /// Resize the stream's data to `len`, zeros after the old end, under
    /// the file's lock.
    fn resize(&self, len: usize) -> FsResult<()> {
        let fd = self.base.fd.as_fd();
        let _guard = lock(self.lock_index);
        let mut buf = value_buffer();
        let old = read_value(fd, &self.xattr(), &mut buf)?;
        if len > old {
            buf.get_mut(old..len).ok_or(FsError::TooBig)?.fill(0);
        }
        write_value(fd, &self.xattr(), &mut buf, len)
    }
}

impl Node for PosixStreamNode {
    crate::forward_file_metadata!(base);

    fn stat(&self) -> FsResult<FileAttr> {
        self.base.act()?;
        let attr = stat_fd(&self.base.who, self.base.fd.as_fd())?;
        self.as_stream(attr)
    }

    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        let attr = self.base.stat_without_dos()?;
        self.as_stream(attr)
    }

    fn size(&self) -> FsResult<u64> {
        self.base.act()?;
        self.stream_size()
    }

    fn who(&self) -> Option<&Who> {
        self.base.who()
    }

    fn access(&self) -> FsResult<crate::Access> {
        self.base.access()
    }

    /// No descriptor for the stream's data: the engine reads and writes
    /// through [`Node::read_at`] and [`Node::write_at`].
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn shared_fd(&self) -> Option<Arc<OwnedFd>> {
        None
    }

    fn in_memory(&self) -> bool {
        self.base.in_memory()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        self.base.act()?;
        let mut value = value_buffer();
        let len = read_value(self.base.fd.as_fd(), &self.xattr(), &mut value)?;
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let Some(avail) = value.get(start..len) else {
            return Ok(0);
        };
        let n = avail.len().min(buf.len());
        buf.get_mut(..n)
            .ok_or(FsError::Io)?
            .copy_from_slice(avail.get(..n).ok_or(FsError::Io)?);
        Ok(n)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        self.base.act()?;
        self.check_data_write()?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|end| *end <= STREAM_SIZE_MAX)
            .ok_or(FsError::TooBig)?;
        let (start, end) = (offset as usize, end as usize);
        let fd = self.base.fd.as_fd();
        let _guard = lock(self.lock_index);
        let mut buf = value_buffer();
        let old = read_value(fd, &self.xattr(), &mut buf)?;
        if start > old {
            // The gap between the old end and the write reads as zeros.
            buf.get_mut(old..start).ok_or(FsError::TooBig)?.fill(0);
        }
        buf.get_mut(start..end)
            .ok_or(FsError::TooBig)?
            .copy_from_slice(data);
        write_value(fd, &self.xattr(), &mut buf, old.max(end))?;
        Ok(data.len())
    }

    /// The file's data and metadata, its xattrs with them; nothing to do
    /// for a stat-only open, which cannot fsync.
    fn sync(&self) -> FsResult<()> {
        self.base.act()?;
        if self.base.path_only {
            return Ok(());
        }
        loop {
            match rustix::fs::fsync(&*self.base.fd) {
                Err(Errno::INTR) => continue,
                r => return r.map_err(fd_errno_to_fs),
            }
        }
    }

    fn set_len(&self, len: u64) -> FsResult<()> {
        self.base.act()?;
        self.check_data_write()?;
        if len > STREAM_SIZE_MAX {
            return Err(FsError::TooBig);
        }
        self.resize(len as usize)
    }

    /// Nothing to reserve: an xattr has no allocation of its own. A size
    /// past what a stream holds is `TooBig`.
    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.check_data_write()?;
        if size > STREAM_SIZE_MAX {
            return Err(FsError::TooBig);
        }
        Ok(())
    }

    /// The file's attributes; a directory's keep their DIRECTORY bit.
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        let attrs = if self.base.kind == FileKind::Directory {
            attrs | ATTR_DIRECTORY
        } else {
            attrs
        };
        self.base.set_dos_attributes(attrs)
    }

    crate::not_a_directory!();

    /// A stream has no streams.
    fn open_stream(&self, _name: &str, _mode: OpenMode, _write: bool) -> FsResult<Opened> {
        Err(FsError::InvalidName)
    }

    fn stream_name(&self) -> Option<String> {
        Some(self.names().0)
    }

    fn remove_stream(&self, name: &str) -> FsResult<()> {
        self.base.remove_stream(name)
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        // (The name's lock is taken after the file's stream lock is
        // released, never around it.)
        self.base.rename_stream(from, to, replace)?;
        let mut names = self.names.write().unwrap_or_else(|p| p.into_inner());
        if names.0 == from {
            *names = (to.to_string(), xattr_name(to));
        }
        Ok(())
    }

    fn remove_all_streams(&self) -> FsResult<()> {
        self.base.remove_all_streams()
    }
}
