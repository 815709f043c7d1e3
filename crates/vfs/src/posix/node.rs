//! [`PosixNode`]: an open file or directory of a [`PosixShare`](super::PosixShare).

use super::*;

/// An open file or directory of a [`PosixShare`].
pub struct PosixNode {
    /// Who the node was opened by: every operation on it runs as them.
    pub(super) who: Who,
    /// Shared so that I/O in flight in the engine keeps the descriptor open
    /// even when the handle is closed meanwhile.
    pub(super) fd: Arc<OwnedFd>,
    pub(super) kind: FileKind,
    pub(super) readable: bool,
    pub(super) writable: bool,
    /// Opened `O_PATH` (stat only): no I/O, xattrs and times through `/proc`.
    pub(super) path_only: bool,
    pub(super) read_only: bool,
    /// In a snapshot's view ([`crate::Share::is_snapshot`]).
    pub(super) snapshot: bool,
    /// On a file system that keeps files in memory ([`FsKind::in_memory`](super::FsKind)).
    pub(super) in_memory: bool,
    /// On a FUSE file system ([`Node::reads_within_size`]).
    pub(super) fuse: bool,
    /// On a file system whose calls may wait on a network or another process
    /// ([`Node::ring_io_may_block`]; `FsKind::remote`).
    pub(super) remote: bool,
    /// The device whose entries' DOS attributes may be kept
    /// ([`super::doscache`]), when the node's file system allows it.
    pub(super) dos_kept: Option<u64>,
    /// The regular file was opened `O_NONBLOCK` (so that a FIFO put in its
    /// place cannot hang the open) and is still in that mode: the flag is
    /// cleared the first time the descriptor is handed out for I/O
    /// ([`PosixNode::io_fd`]), not at every open, since most opens (a
    /// CREATE, a QUERY_INFO and a CLOSE) never do any.
    pub(super) nonblocking: AtomicBool,
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
    /// Puts a regular file opened `O_NONBLOCK` back into blocking mode before
    /// its descriptor is used for I/O: with `O_NONBLOCK` io_uring would answer
    /// a READ or WRITE that must wait with `EAGAIN` instead of handing it to
    /// its workers, and a splice would not wait for its pipe. (Plain `pread`,
    /// `fgetxattr` and `fstat` on a regular file do not look at the flag.)
    pub(super) fn io_fd(&self) {
        if self.nonblocking.load(Ordering::Relaxed) {
            // F_SETFL only touches the status flags; none but O_NONBLOCK was set.
            // It fails only on a bad descriptor, which the node's own is not;
            // should it fail, it is tried again at the next I/O.
            if rustix::fs::fcntl_setfl(&*self.fd, OFlags::empty()).is_ok() {
                self.nonblocking.store(false, Ordering::Relaxed);
            }
        }
    }

    /// `f` on a descriptor the inode-flag ioctls take: the node's own, or, when it is `O_PATH`
    /// (a stat-only open, a directory), one opened afresh through its `/proc` link, read-only
    /// and non-blocking (the user needs no more than to open it so).
    fn with_flags_fd<T>(&self, f: impl Fn(BorrowedFd<'_>) -> Result<T, Errno>) -> FsResult<T> {
        if !self.path_only && self.kind != FileKind::Directory {
            return f(self.fd.as_fd()).map_err(fd_errno_to_fs);
        }
        let fd = rustix::fs::open(
            proc_path(self.fd.as_fd(), None),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(fd_errno_to_fs)?;
        f(fd.as_fd()).map_err(fd_errno_to_fs)
    }

    /// The calling thread acts as the node's user for what follows.
    pub(super) fn act(&self) -> FsResult<()> {
        act(&self.who)
    }

    /// `f` as the node's user, and when the kernel refuses the user, as the
    /// server: for attributes and times, which DOS semantics let anyone with
    /// FILE_WRITE_ATTRIBUTES change (the core calls these only for opens
    /// granted it), not only the owner, as Samba does.
    fn as_user_then_server(&self, f: impl Fn() -> Result<(), Errno>) -> FsResult<()> {
        self.act()?;
        match f() {
            Err(e) if is_refusal(e) => as_server(&self.who, || f().map_err(fd_errno_to_fs)),
            r => r.map_err(fd_errno_to_fs),
        }
    }

    fn check_writable_share(&self) -> FsResult<()> {
        crate::share_writable(self.read_only)
    }

    /// Store DOS attributes and a creation time in `user.DOSATTRIB` (version
    /// 5, as Samba 4.17 writes it); what is not given keeps its stored value,
    /// else the attributes the file shows (ARCHIVE, or DIRECTORY) and the
    /// creation time it shows (birth time, else the older of mtime and
    /// ctime), so nothing a client sees changes.
    /// Store the DOS attributes `attrs` (or keep those stored) and the creation time
    /// `create_time` (or keep it). The stored [`crate::ATTR_REPARSE_POINT`] stays as it is unless
    /// `reparse` sets or clears it: a client's attributes never carry it.
    fn write_dos(
        &self,
        attrs: Option<u32>,
        create_time: Option<UnixNanos>,
        reparse: Option<bool>,
    ) -> FsResult<()> {
        self.act()?;
        let now = read_dos_fd(&self.who, self.fd.as_fd());
        let stored = now.map(|d| d.attributes);
        let attributes = attrs
            .map(|a| a & !crate::ATTR_REPARSE_POINT)
            .or(stored)
            .unwrap_or(if self.kind == FileKind::Directory {
                0x10
            } else {
                0x20
            });
        let attributes = match reparse.or(stored.map(|a| a & crate::ATTR_REPARSE_POINT != 0)) {
            Some(true) => (attributes | crate::ATTR_REPARSE_POINT) & !0x80,
            _ => attributes & !crate::ATTR_REPARSE_POINT,
        };
        let create_time = match create_time.or(now.and_then(|d| d.create_time)) {
            Some(t) => t,
            None => {
                let st = statx_fd(self.fd.as_fd()).map_err(fd_errno_to_fs)?;
                let a = attr_from_statx(&st, None);
                a.btime.unwrap_or(a.mtime.min(a.ctime))
            }
        };
        let value = crate::dosattrib::encode(attributes, create_time);
        let name = crate::dosattrib::XATTR;
        self.as_user_then_server(|| {
            match rustix::fs::fsetxattr(&self.fd, name, &value, XattrFlags::empty()) {
                Err(Errno::BADF) => rustix::fs::setxattr(
                    proc_path(self.fd.as_fd(), None),
                    name,
                    &value,
                    XattrFlags::empty(),
                ),
                // Where xattrs are unsupported, attributes are not kept.
                Err(e) if is_unsupported(e) => Ok(()),
                r => r,
            }
        })?;
        Ok(())
    }

    fn check_data_write(&self) -> FsResult<()> {
        crate::data_writable(self.read_only, self.kind, self.writable)
    }

    /// True when this node was opened stat-only (`O_PATH`).
    pub fn is_path_only(&self) -> bool {
        self.path_only
    }

    /// Names of all xattrs of the file (empty where xattrs are unsupported).
    pub(super) fn xattr_names(&self) -> FsResult<Vec<String>> {
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

    /// The whole value of xattr `name`, `None` when absent or unsupported.
    /// Most are small: a buffer on the stack first, a large one only when
    /// that is too short.
    fn xattr_bytes(&self, name: &str) -> FsResult<Option<Vec<u8>>> {
        let fd = self.fd.as_fd();
        let get = |buf: &mut [u8]| match rustix::fs::fgetxattr(fd, name, &mut *buf) {
            Err(Errno::BADF) => rustix::fs::getxattr(proc_path(fd, None), name, buf),
            r => r,
        };
        let mut small = [0u8; 1024];
        let r = match get(&mut small) {
            Ok(n) => return Ok(small.get(..n).map(<[u8]>::to_vec)),
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
        self.act()?;
        stat_fd(&self.who, self.fd.as_fd())
    }

    fn who(&self) -> Option<&Who> {
        Some(&self.who)
    }

    fn access(&self) -> FsResult<crate::Access> {
        use rustix::fs::Access;
        self.act()?;
        let fd = self.fd.as_fd();
        let st = statx_fd(fd).map_err(errno_to_fs)?;
        let uid = st.stx_uid;
        let write = if self.snapshot {
            // What the file's permissions give, as Samba computes a snapshot's file's access
            // (nothing is written through it all the same): the kernel's answer, or on a
            // read-only file system (a btrfs snapshot: EROFS whatever the mode) the mode's.
            kernel_allows(fd, Access::WRITE_OK)? || mode_allows(&self.who, &st, 2)
        } else {
            !self.read_only && kernel_allows(fd, Access::WRITE_OK)?
        };
        Ok(crate::Access {
            read: kernel_allows(fd, Access::READ_OK)?,
            write,
            execute: kernel_allows(fd, Access::EXEC_OK)?,
            owner: self.who.uid() == 0 || self.who.uid() == uid,
        })
    }

    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        self.act()?;
        let st = statx_fd(self.fd.as_fd()).map_err(errno_to_fs)?;
        Ok(attr_from_statx(&st, None))
    }

    fn size(&self) -> FsResult<u64> {
        self.act()?;
        let st = rustix::fs::fstat(self.fd.as_fd()).map_err(errno_to_fs)?;
        Ok(st.st_size as u64)
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.io_fd();
        Some(self.fd.as_fd())
    }

    fn shared_fd(&self) -> Option<Arc<OwnedFd>> {
        if self.path_only {
            None
        } else {
            self.io_fd();
            Some(Arc::clone(&self.fd))
        }
    }

    fn fd_to_hold(&self) -> Option<Arc<OwnedFd>> {
        (!self.path_only).then(|| Arc::clone(&self.fd))
    }

    fn in_memory(&self) -> bool {
        self.in_memory
    }

    fn posix_lock(&self, kind: OfdLock, start: i64, len: i64) -> FsResult<bool> {
        if self.path_only || self.kind != FileKind::File {
            // (an O_PATH descriptor takes no locks; Samba mirrors none for such opens)
            return Ok(true);
        }
        let kind = match kind {
            OfdLock::Write if !self.writable => OfdLock::Read,
            k => k,
        };
        // (F_RDLCK needs read access: a descriptor opened for writing only cannot hold a
        // shared lock, and one for neither none; its range is left unlocked instead of made
        // exclusive, which would refuse other opens' shared locks the lock table allows)
        let kind = match kind {
            OfdLock::Read if !self.readable => OfdLock::Unlock,
            k => k,
        };
        ringshare_engine::sys::ofd_setlk(self.fd.as_fd(), kind, start, len)
            .map_err(|e| FsError::from_errno(e.raw_os_error().unwrap_or(5)))
    }

    fn posix_locked(&self, kind: OfdLock, start: i64, len: i64) -> FsResult<bool> {
        if self.path_only || self.kind != FileKind::File {
            return Ok(false);
        }
        ringshare_engine::sys::ofd_getlk(self.fd.as_fd(), kind, start, len)
            .map_err(|e| FsError::from_errno(e.raw_os_error().unwrap_or(5)))
    }

    fn reads_within_size(&self) -> bool {
        self.fuse
    }

    fn ring_io_may_block(&self) -> bool {
        self.remote
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        self.act()?;
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
        self.act()?;
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
        self.act()?;
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
        self.act()?;
        self.check_data_write()?;
        loop {
            match rustix::fs::ftruncate(&self.fd, len) {
                Err(Errno::INTR) => continue,
                r => return r.map_err(fd_errno_to_fs),
            }
        }
    }

    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.act()?;
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
        if let Some(t) = times.btime {
            // POSIX has no way to set a birth time: kept in user.DOSATTRIB.
            self.write_dos(None, Some(t), None)?;
        }
        if times.atime.is_none() && times.mtime.is_none() {
            return Ok(());
        }
        let ts = Timestamps {
            last_access: to_timespec(times.atime),
            last_modification: to_timespec(times.mtime),
        };
        self.as_user_then_server(|| match rustix::fs::futimens(&self.fd, &ts) {
            Err(Errno::BADF) => {
                rustix::fs::utimensat(CWD, proc_path(self.fd.as_fd(), None), &ts, AtFlags::empty())
            }
            r => r,
        })
    }

    fn posix_acls(&self) -> FsResult<crate::PosixAcls> {
        self.act()?;
        let read = |name: &str| -> FsResult<Option<crate::PosixAcl>> {
            match self.xattr_bytes(name)? {
                None => Ok(None),
                Some(b) => crate::PosixAcl::decode(&b)
                    .map(Some)
                    .map_err(|_| FsError::Io),
            }
        };
        Ok(crate::PosixAcls {
            access: read(ACL_ACCESS_XATTR)?,
            default: if self.kind == FileKind::Directory {
                read(ACL_DEFAULT_XATTR)?
            } else {
                None
            },
        })
    }

    fn set_posix_acls(
        &self,
        access: &crate::PosixAcl,
        default: crate::DefaultAcl<'_>,
        server_may: bool,
    ) -> FsResult<()> {
        self.check_writable_share()?;
        self.act()?;
        // A minimal ACL is the mode bits: the kernel then sets the mode
        // and keeps no xattr.
        let access = access.encode();
        let default = match default {
            crate::DefaultAcl::Set(d) => Some(Some(d.encode())),
            crate::DefaultAcl::Remove => Some(None),
            crate::DefaultAcl::Keep => None,
        };
        let write = || -> FsResult<()> {
            self.xattr_set(ACL_ACCESS_XATTR, &access)?;
            match &default {
                None => Ok(()),
                Some(None) => self.xattr_remove(ACL_DEFAULT_XATTR),
                Some(Some(d)) => self.xattr_set(ACL_DEFAULT_XATTR, d),
            }
        };
        match write() {
            Err(FsError::AccessDenied) if server_may => as_server(&self.who, write),
            r => r,
        }
    }

    fn chown(&self, uid: Option<u32>, gid: Option<u32>, server_may: bool) -> FsResult<()> {
        self.check_writable_share()?;
        let owner = uid.map(rustix::fs::Uid::from_raw);
        let group = gid.map(rustix::fs::Gid::from_raw);
        let change = || {
            match rustix::fs::fchown(&self.fd, owner, group) {
                Err(Errno::BADF) => rustix::fs::chownat(
                    CWD,
                    proc_path(self.fd.as_fd(), None),
                    owner,
                    group,
                    AtFlags::empty(),
                ),
                r => r,
            }
            .map_err(fd_errno_to_fs)
        };
        self.act()?;
        match change() {
            Err(FsError::AccessDenied) if server_may => as_server(&self.who, change),
            r => r,
        }
    }

    fn nt_acl_blob(&self) -> FsResult<Option<Vec<u8>>> {
        self.act()?;
        match self.xattr_bytes(NTACL_XATTR) {
            // The NT ACL is the server's: readable whatever the file grants.
            Err(FsError::AccessDenied) => as_server(&self.who, || self.xattr_bytes(NTACL_XATTR)),
            r => r,
        }
    }

    fn set_nt_acl_blob(&self, blob: Option<&[u8]>) -> FsResult<()> {
        self.check_writable_share()?;
        if blob.is_some_and(|b| b.len() > NTACL_SIZE_MAX) {
            return Err(FsError::NoSpace);
        }
        // `security.*` is the server's to write; the core checked WRITE_DAC.
        as_server(&self.who, || match blob {
            Some(b) => self.xattr_set(NTACL_XATTR, b),
            None => self.xattr_remove(NTACL_XATTR),
        })
    }

    fn legacy_security_descriptor(&self, seen: Option<&FileAttr>) -> FsResult<Option<Vec<u8>>> {
        self.act()?;
        // Most files never had one, and every open asks: a read that found
        // none is kept while the file's change time stays ([`doscache`]).
        let stamp = seen.and_then(|a| stamp_of(a, self.dos_kept?));
        if stamp.is_some_and(|s| doscache::known_without_legacy_sd(&s)) {
            return Ok(None);
        }
        let r = match self.xattr_bytes(LEGACY_NTACL_XATTR) {
            Err(FsError::AccessDenied) => {
                as_server(&self.who, || self.xattr_bytes(LEGACY_NTACL_XATTR))
            }
            r => r,
        };
        if let (Some(s), Ok(found)) = (stamp, &r) {
            doscache::put_legacy_sd_read(&s, found.is_some(), doscache::now());
        }
        r
    }

    fn remove_legacy_security_descriptor(&self) -> FsResult<()> {
        as_server(&self.who, || self.xattr_remove(LEGACY_NTACL_XATTR))
    }

    fn netatalk_metadata(&self) -> FsResult<Option<Vec<u8>>> {
        self.act()?;
        self.xattr_bytes(NETATALK_METADATA_XATTR)
    }

    fn set_netatalk_metadata(&self, value: Option<&[u8]>) -> FsResult<()> {
        self.check_writable_share()?;
        self.act()?;
        match value {
            Some(v) => self.xattr_set(NETATALK_METADATA_XATTR, v),
            None => self.xattr_remove(NETATALK_METADATA_XATTR),
        }
    }

    fn reparse_point(&self) -> FsResult<Option<Vec<u8>>> {
        self.act()?;
        self.xattr_bytes(crate::REPARSE_XATTR)
    }

    fn link_target(&self) -> FsResult<Vec<u8>> {
        self.act()?;
        if self.kind != FileKind::Symlink {
            return Err(FsError::InvalidName);
        }
        // An O_PATH | O_NOFOLLOW descriptor of the link: its target by the empty path.
        let target = rustix::fs::readlinkat(&self.fd, "", Vec::new()).map_err(fd_errno_to_fs)?;
        Ok(target.into_bytes())
    }

    fn device_numbers(&self) -> FsResult<(u32, u32)> {
        self.act()?;
        let st = statx_fd(self.fd.as_fd()).map_err(fd_errno_to_fs)?;
        Ok((st.stx_rdev_major, st.stx_rdev_minor))
    }

    fn entry_reparse_point(&self, name: &str) -> FsResult<Option<Vec<u8>>> {
        self.act()?;
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(FsError::InvalidName);
        }
        // A reparse data buffer holds at most 8 + 65,535 bytes (its length is a u16).
        let mut buf = vec![0u8; 8 + usize::from(u16::MAX)];
        let path = proc_path(self.fd.as_fd(), Some(name));
        match rustix::fs::lgetxattr(path, crate::REPARSE_XATTR, &mut buf) {
            Ok(n) => {
                buf.truncate(n);
                Ok(Some(buf))
            }
            Err(e) if e == Errno::NODATA || is_unsupported(e) || is_refusal(e) => Ok(None),
            Err(e) => Err(fd_errno_to_fs(e)),
        }
    }

    fn set_reparse_point(&self, value: Option<&[u8]>) -> FsResult<()> {
        self.check_writable_share()?;
        self.act()?;
        match value {
            Some(v) => self.xattr_set(crate::REPARSE_XATTR, v)?,
            None => self.xattr_remove(crate::REPARSE_XATTR)?,
        }
        self.write_dos(None, None, Some(value.is_some()))
    }

    fn list_eas(&self) -> FsResult<Vec<(String, Vec<u8>)>> {
        self.act()?;
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
        self.act()?;
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
        self.write_dos(Some(attrs), None, None)
    }

    fn set_mode(&self, mode: u32) -> FsResult<()> {
        self.act()?;
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

    fn compressed(&self) -> FsResult<bool> {
        self.act()?;
        let flags = self.with_flags_fd(|fd| rustix::fs::ioctl_getflags(fd))?;
        Ok(flags.contains(rustix::fs::IFlags::COMPRESSED))
    }

    /// `FS_IOC_SETFLAGS` with `FS_COMPR_FL` set or cleared, as the node's user (the kernel lets
    /// the owner), as Samba's vfs_btrfs does.
    fn set_compressed(&self, on: bool) -> FsResult<()> {
        self.act()?;
        self.check_writable_share()?;
        self.with_flags_fd(|fd| {
            let mut flags = rustix::fs::ioctl_getflags(fd)?;
            flags.set(rustix::fs::IFlags::COMPRESSED, on);
            rustix::fs::ioctl_setflags(fd, flags)
        })
    }

    /// As the server: the core decides who may give a file away (`inherit
    /// owner`, taking ownership).
    fn set_owner(&self, uid: u32) -> FsResult<()> {
        self.check_writable_share()?;
        let owner = Some(rustix::fs::Uid::from_raw(uid));
        as_server(&self.who, || {
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
        })
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
        self.act()?;
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

    /// `ioctl(FICLONERANGE)` as the node's user, on this thread (a clone
    /// changes extent maps only: no data is read or written).
    fn clone_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<()> {
        self.act()?;
        self.check_data_write()?;
        if len == 0 {
            // FICLONERANGE would read 0 as "to the end of the source".
            return Ok(());
        }
        let Some(src_fd) = src.fd() else {
            return Err(FsError::Other(crate::EOPNOTSUPP));
        };
        loop {
            match ringshare_engine::sys::clone_range(
                self.fd.as_fd(),
                src_fd,
                src_offset,
                len,
                dst_offset,
            ) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(Errno::INTR.raw_os_error()) => continue,
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(Errno::IO.raw_os_error());
                    return Err(if errno == Errno::XDEV.raw_os_error() {
                        FsError::CrossDevice
                    } else {
                        FsError::from_errno(errno)
                    });
                }
            }
        }
    }

    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`; zeros are written where the
    /// filesystem cannot punch.
    fn punch_hole(&self, offset: u64, len: u64) -> FsResult<()> {
        self.act()?;
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
        self.act()?;
        if self.kind == FileKind::Directory {
            return Err(FsError::IsADirectory);
        }
        let size = self.stat()?.size;
        data_ranges(
            self.fd.as_fd(),
            offset,
            offset.saturating_add(len).min(size),
        )
    }

    /// One `fstat`; a file whose allocated blocks cover its size
    /// (`st_blocks * 512 >= st_size`: no holes, or preallocated space that
    /// hides them) is all data without an `lseek`. Otherwise SEEK_DATA /
    /// SEEK_HOLE over the range. Data written but not yet allocated
    /// (delayed allocation on ext4, xfs, btrfs; tmpfs pages) is data to
    /// SEEK_DATA and counts in `st_blocks`.
    fn read_map(&self, offset: u64, len: u64) -> FsResult<crate::ReadMap> {
        self.act()?;
        let st = rustix::fs::fstat(self.fd.as_fd()).map_err(errno_to_fs)?;
        let size = st.st_size as u64;
        let blocks = (st.st_blocks as u64).saturating_mul(512);
        let end = offset.saturating_add(len).min(size);
        let data = if blocks >= size || end <= offset {
            None
        } else {
            Some(data_ranges(self.fd.as_fd(), offset, end)?)
        };
        Ok(crate::ReadMap { size, data })
    }

    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        self.act()?;
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        // One component only: with no `/` and no `..`, the lookup cannot leave
        // this directory, and NOFOLLOW keeps a symlink from being followed.
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(FsError::InvalidName);
        }
        stat_at(&self.who, self.fd.as_fd(), name, self.dos_kept)
    }

    fn may_read_entry(&self, name: &str) -> FsResult<bool> {
        self.act()?;
        if self.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(FsError::InvalidName);
        }
        match rustix::fs::accessat(
            &*self.fd,
            name,
            rustix::fs::Access::READ_OK,
            AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(()) => Ok(true),
            Err(e) if is_refusal(e) => Ok(false),
            Err(e) => Err(errno_to_fs(e)),
        }
    }

    fn list_streams(&self) -> FsResult<Vec<crate::StreamInfo>> {
        super::stream::list(self)
    }

    fn open_stream(&self, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
        super::stream::open(self, name, mode, write)
    }

    fn remove_stream(&self, name: &str) -> FsResult<()> {
        super::stream::remove(self, name)
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        super::stream::rename(self, from, to, replace)
    }

    fn list_names(&self) -> FsResult<Vec<String>> {
        self.act()?;
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

/// The ranges `(offset, length)` of `offset .. end` holding data, by
/// `lseek(SEEK_DATA)` / `lseek(SEEK_HOLE)` on `fd`; a filesystem without them
/// reports the whole range as data.
fn data_ranges(fd: BorrowedFd<'_>, offset: u64, end: u64) -> FsResult<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut pos = offset;
    while pos < end {
        let data = match rustix::fs::seek(fd, rustix::fs::SeekFrom::Data(pos)) {
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
        let hole = match rustix::fs::seek(fd, rustix::fs::SeekFrom::Hole(data)) {
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

/// Whether the mode bits of `st` give `who` all of `want` (4 read, 2 write, 1 execute) in the
/// owner, group or other class, as the kernel picks it (POSIX ACL entries are not read): for a
/// file on a read-only file system, which the kernel answers EROFS for whatever its mode.
pub(super) fn mode_allows(who: &crate::Who, st: &rustix::fs::Statx, want: u32) -> bool {
    let mode = u32::from(st.stx_mode);
    let class = if who.uid() == 0 {
        return true;
    } else if who.uid() == st.stx_uid {
        mode >> 6
    } else if who.gid() == st.stx_gid || who.in_group(st.stx_gid) {
        mode >> 3
    } else {
        mode
    };
    class & want == want
}
