//! System calls the other crates need and `rustix` does not wrap yet. They
//! live here because this is the one crate allowed `unsafe`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
#[cfg(test)]
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// `getxattrat(2)`'s number (Linux 6.13): new system calls share one number
/// on every architecture.
const SYS_GETXATTRAT: libc::c_long = 464;

/// `struct xattr_args` of `getxattrat(2)`.
#[repr(C)]
struct XattrArgs {
    value: u64,
    size: u32,
    flags: u32,
}

/// Set once the kernel said it has no `getxattrat`, so that later calls fail
/// at once instead of entering the kernel again.
static NO_GETXATTRAT: AtomicBool = AtomicBool::new(false);

/// Makes every later [`getxattrat`] fail with `ENOSYS`, as on kernels before
/// 6.13, so that tests can run the callers' other way on a newer kernel.
/// Process-wide and permanent.
pub fn pretend_getxattrat_is_missing() {
    NO_GETXATTRAT.store(true, Ordering::Relaxed);
}

/// Reads extended attribute `attr` of `name` in directory `dir` into `buf`
/// and returns its length: `getxattrat(dir, name, AT_SYMLINK_NOFOLLOW, ...)`,
/// so a symlink's own attributes, never its target's. `name` may be empty
/// to mean `dir` itself (`AT_EMPTY_PATH`), but not for an `O_PATH` `dir`:
/// the kernel answers `EBADF` there.
///
/// Errors are the kernel's (`ENODATA` when absent, `ERANGE` when `buf` is too
/// short, ...); `ENOSYS` on kernels before 6.13, where a caller must find
/// another way (such as `/proc/self/fd/N/name`).
pub fn getxattrat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    attr: &CStr,
    buf: &mut [u8],
) -> io::Result<usize> {
    if NO_GETXATTRAT.load(Ordering::Relaxed) {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    let mut flags = libc::AT_SYMLINK_NOFOLLOW;
    if name.is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    let args = XattrArgs {
        value: buf.as_mut_ptr() as u64,
        size: u32::try_from(buf.len()).unwrap_or(u32::MAX),
        flags: 0,
    };
    // SAFETY: both strings are NUL-terminated and outlive the call; `args`
    // lives on this stack frame and its size is passed as `usize`, so the
    // kernel reads exactly that struct; `args.value`/`args.size` describe
    // `buf`, which is exclusively borrowed for the call, so the kernel may
    // write up to `args.size` bytes there. The fd is borrowed, hence open.
    let r = unsafe {
        libc::syscall(
            SYS_GETXATTRAT,
            dir.as_raw_fd(),
            name.as_ptr(),
            flags,
            attr.as_ptr(),
            &args as *const XattrArgs,
            std::mem::size_of::<XattrArgs>(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            NO_GETXATTRAT.store(true, Ordering::Relaxed);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// Whether the kernel grants the calling thread's effective ids `mode`
/// (`R_OK`, `W_OK`, `X_OK`, or'ed) on the file `fd` itself:
/// `faccessat2(fd, "", mode, AT_EACCESS | AT_EMPTY_PATH)` (Linux 5.8).
/// `fd` may be an `O_PATH` descriptor. Errors are the kernel's: `EACCES`
/// (or `EROFS` for writing on a read-only file system) when refused.
pub fn access_fd(fd: BorrowedFd<'_>, mode: i32) -> io::Result<()> {
    // SAFETY: the path is a static NUL-terminated empty string and the fd is
    // borrowed, hence open for the call; nothing is written by the kernel.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EACCESS | libc::AT_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `len` bytes of `src` at `src_offset` share their storage with
/// `dst` at `dst_offset` (`ioctl(dst, FICLONERANGE)`, Linux 4.5): a block
/// clone, no data moved. `len` 0 means "to the end of `src`", as the kernel
/// defines it; callers wanting nothing must not call. Errors are the
/// kernel's: `EINVAL` for ranges not aligned to the file system's block
/// size (or overlapping in one file), `EOPNOTSUPP` where the file system
/// does not share extents, `EXDEV` across file systems, `EROFS`, `ENOSPC`.
pub fn clone_range(
    dst: BorrowedFd<'_>,
    src: BorrowedFd<'_>,
    src_offset: u64,
    len: u64,
    dst_offset: u64,
) -> io::Result<()> {
    let arg = libc::file_clone_range {
        src_fd: i64::from(src.as_raw_fd()),
        src_offset,
        src_length: len,
        dest_offset: dst_offset,
    };
    // SAFETY: both descriptors are borrowed, hence open for the call; the
    // kernel only reads `arg`, which lives until the call returns.
    let r = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONERANGE, &arg) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `quotactl_fd(2)`'s number (Linux 5.14): new system calls share one number
/// on every architecture.
const SYS_QUOTACTL_FD: libc::c_long = 443;
/// `Q_GETQUOTA` and `Q_SETQUOTA` of the generic (VFS) quota interface.
const Q_GETQUOTA: u32 = 0x80_0007;
const Q_SETQUOTA: u32 = 0x80_0008;
/// `dqb_valid` bits: the block and inode limits are set.
const QIF_LIMITS: u32 = 1 | 4;

/// Whose quota: a user's or a group's (`USRQUOTA`, `GRPQUOTA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaOf {
    User = 0,
    Group = 1,
}

/// One quota as the kernel keeps it (`struct if_dqblk`): limits in
/// 1024-byte blocks and in inodes, the space used in bytes; 0 is no limit.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dqblk {
    pub bhardlimit: u64,
    pub bsoftlimit: u64,
    pub curspace: u64,
    pub ihardlimit: u64,
    pub isoftlimit: u64,
    pub curinodes: u64,
    pub btime: u64,
    pub itime: u64,
    pub valid: u32,
}

/// `quotactl_fd(fd, QCMD(cmd, of), id, d)`.
fn quotactl_fd(
    fd: BorrowedFd<'_>,
    cmd: u32,
    of: QuotaOf,
    id: u32,
    d: &mut Dqblk,
) -> io::Result<()> {
    let qcmd = (cmd << 8) | of as u32;
    // SAFETY: the fd is borrowed, hence open for the call; `d` is an
    // exclusively borrowed `struct if_dqblk` (same layout, `repr(C)`), which
    // the kernel reads (Q_SETQUOTA) or fills (Q_GETQUOTA) and nothing more.
    let r = unsafe { libc::syscall(SYS_QUOTACTL_FD, fd.as_raw_fd(), qcmd, id, d as *mut Dqblk) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The quota of user or group `id` on the file system of `fd` (any file
/// there, `O_PATH` included), as the calling thread's effective ids may see
/// it: their own, or anyone's with CAP_SYS_ADMIN. Errors are the kernel's:
/// `ESRCH` when that kind of quota is off on the file system (or it keeps
/// none), `EPERM` for another's, `ENOSYS` before Linux 5.14.
pub fn quota_get(fd: BorrowedFd<'_>, of: QuotaOf, id: u32) -> io::Result<Dqblk> {
    let mut d = Dqblk::default();
    quotactl_fd(fd, Q_GETQUOTA, of, id, &mut d)?;
    Ok(d)
}

/// Sets the block and inode limits of `limits` (the rest is not read) for
/// user or group `id` on the file system of `fd`; needs CAP_SYS_ADMIN and a
/// writable mount. Errors as [`quota_get`]'s.
pub fn quota_set_limits(
    fd: BorrowedFd<'_>,
    of: QuotaOf,
    id: u32,
    limits: &Dqblk,
) -> io::Result<()> {
    let mut d = Dqblk {
        bhardlimit: limits.bhardlimit,
        bsoftlimit: limits.bsoftlimit,
        ihardlimit: limits.ihardlimit,
        isoftlimit: limits.isoftlimit,
        valid: QIF_LIMITS,
        ..Dqblk::default()
    };
    quotactl_fd(fd, Q_SETQUOTA, of, id, &mut d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn all_cached_says_whether_the_page_cache_holds_a_whole_range() {
        let dir =
            Path::new("/var/tmp").join(format!("ringshare-sys-cached-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let just_written = all_cached(f.as_fd(), 4096, 64 << 10);
        assert!(!all_cached(f.as_fd(), 0, 0), "an empty range");
        f.sync_all().unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let evicted = all_cached(f.as_fd(), 4096, 64 << 10);
        let mut part = vec![0u8; 8192];
        rustix::io::pread(&f, &mut part, 100_000).unwrap();
        let one_read = all_cached(f.as_fd(), 100_000, 8192);
        let past_end = all_cached(f.as_fd(), (1 << 20) - 4096, 8192);
        let _ = std::fs::remove_dir_all(&dir);
        if NO_CACHESTAT.load(Ordering::Relaxed) {
            eprintln!("SKIPPED: no cachestat(2) in this kernel");
            return;
        }
        assert!(just_written, "a file just written is in the page cache");
        let kind = rustix::fs::statfs("/var/tmp").unwrap().f_type as u64;
        if kind != 0x0102_1994 {
            assert!(!evicted, "dropped pages are not in the page cache");
        }
        assert!(one_read, "the pages a read brought in");
        assert!(!past_end, "a range reaching past the end of the file");
    }

    #[test]
    fn access_fd_answers_for_the_file_of_an_opath_descriptor() {
        let dir = std::env::temp_dir().join(format!("ringshare-sys-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ro");
        std::fs::write(&f, b"").unwrap();
        let fd = rustix::fs::open(&f, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap();
        assert!(access_fd(fd.as_fd(), libc::R_OK).is_ok());
        // Nobody may execute a file without x bits, root included.
        let x = access_fd(fd.as_fd(), libc::X_OK).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(x.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn getxattrat_reads_an_entrys_attribute_and_reports_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("ringshare-sys-xattr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        std::fs::write(&f, b"").unwrap();
        let set = rustix::fs::setxattr(&f, "user.t", b"abc", rustix::fs::XattrFlags::empty());
        let d = std::fs::File::open(&dir).unwrap();
        let mut buf = [0u8; 8];
        let r = getxattrat(d.as_fd(), c"f", c"user.t", &mut buf);
        let _ = std::fs::remove_dir_all(&dir);
        if set.is_err() || matches!(&r, Err(e) if e.raw_os_error() == Some(libc::ENOSYS)) {
            eprintln!(
                "SKIPPED: no user xattrs in {} or no getxattrat",
                dir.display()
            );
            return;
        }
        assert_eq!(r.unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
        let d2 = std::fs::File::open(std::env::temp_dir()).unwrap();
        let missing = getxattrat(d2.as_fd(), c"", c"user.ringshare-none", &mut buf);
        assert_eq!(missing.unwrap_err().raw_os_error(), Some(libc::ENODATA));
    }

    #[test]
    fn quotactl_fd_reaches_the_kernel_which_says_quotas_are_off_here() {
        // No file system on this machine keeps quotas (docs/limits.md): the
        // kernel answers ESRCH ("quota not on") for a user's and a group's.
        let d = std::fs::File::open(std::env::temp_dir()).unwrap();
        for of in [QuotaOf::User, QuotaOf::Group] {
            match quota_get(d.as_fd(), of, 0) {
                Ok(q) => eprintln!("quotas are on here: {q:?}"),
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}"),
            }
        }
        assert_eq!(std::mem::size_of::<Dqblk>(), 72, "struct if_dqblk");
    }
}

/// The kind of an open-file-description lock ([`ofd_setlk`], [`ofd_getlk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfdLock {
    /// `F_RDLCK`: others may read-lock the range too.
    Read,
    /// `F_WRLCK`: nobody else may lock the range.
    Write,
    /// `F_UNLCK`: the range is released.
    Unlock,
}

fn flock_of(kind: OfdLock, start: i64, len: i64) -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers; all zeros is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = match kind {
        OfdLock::Read => libc::F_RDLCK,
        OfdLock::Write => libc::F_WRLCK,
        OfdLock::Unlock => libc::F_UNLCK,
    } as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    // (l_pid must be 0 for the OFD commands)
    fl
}

/// Takes, changes or releases the open-file-description lock of `fd` on
/// `start .. start + len` (`len` > 0): `fcntl(F_OFD_SETLK)`, which never waits.
/// `Ok(false)` when another open file description (a local program's, or
/// another open's) holds a conflicting lock (`EAGAIN`/`EACCES`). The locks of one
/// open file description merge and split by range as POSIX locks do, and go when
/// its last fd is closed.
pub fn ofd_setlk(fd: BorrowedFd<'_>, kind: OfdLock, start: i64, len: i64) -> io::Result<bool> {
    let fl = flock_of(kind, start, len);
    // SAFETY: `fl` is a valid `struct flock` on this stack frame, outliving the call; the
    // kernel reads it only (F_OFD_SETLK). The fd is borrowed, hence open.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &fl as *const libc::flock) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Whether another open file description than `fd`'s holds a lock on `start ..
/// start + len` that conflicts with `kind` (`Read` or `Write`): `fcntl(F_OFD_GETLK)`.
pub fn ofd_getlk(fd: BorrowedFd<'_>, kind: OfdLock, start: i64, len: i64) -> io::Result<bool> {
    let mut fl = flock_of(kind, start, len);
    // SAFETY: `fl` is a valid `struct flock` exclusively borrowed for the call; the kernel
    // writes the conflicting lock (or F_UNLCK) into it. The fd is borrowed, hence open.
    let r = unsafe {
        libc::fcntl(
            fd.as_raw_fd(),
            libc::F_OFD_GETLK,
            &mut fl as *mut libc::flock,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// `cachestat(2)`'s number (Linux 6.5): new system calls share one number on every
/// architecture.
const SYS_CACHESTAT: libc::c_long = 451;

/// `struct cachestat_range` of `cachestat(2)`.
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `struct cachestat` of `cachestat(2)`: page counts of the range.
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Set once the kernel said it has no `cachestat`.
static NO_CACHESTAT: AtomicBool = AtomicBool::new(false);

/// Whether every page of `offset .. offset + len` of the file behind `fd` is in the page cache
/// now (`cachestat(2)`): a read of it then finds its bytes in memory. Only a hint: a page may
/// be evicted right after. `false` when the kernel cannot tell (before 6.5, or a file system
/// without a page cache), and for an empty range.
pub fn all_cached(fd: BorrowedFd<'_>, offset: u64, len: u64) -> bool {
    if len == 0 || NO_CACHESTAT.load(Ordering::Relaxed) {
        return false;
    }
    let page = rustix::param::page_size() as u64;
    let first = offset / page;
    let Some(last) = offset.checked_add(len - 1).map(|end| end / page) else {
        return false;
    };
    let range = CachestatRange { off: offset, len };
    let mut stat = Cachestat::default();
    // SAFETY: `range` and `stat` are valid `repr(C)` structs on this stack frame, outliving the
    // call; the kernel reads the first and writes the second (flags 0). The fd is borrowed,
    // hence open.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if r != 0 {
        if io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        return false;
    }
    stat.nr_cache > last - first
}
