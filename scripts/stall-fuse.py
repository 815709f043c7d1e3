#!/usr/bin/env python3
"""A passthrough FUSE file system that stalls on demand and says which thread asked.

Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread (plan)"): on a FUSE
or network file system a ringshare I/O thread makes the file system's round trips itself. This
mirrors directory SOURCE at MOUNT (as root, `allow_other`, `default_permissions`: the kernel
checks modes as on a local disk; files made through it belong to the caller, as on a local disk)
and

- logs every FUSE request to LOG, one line each: `time tid op path`; `tid` is the thread that
  made the system call (FUSE's request header carries the caller's thread id), so a server's
  I/O thread (its TID from /proc/PID/task/*/comm, `ringshare-ring-N`) can be told from the
  io_uring workers and the other threads;
- stalls on demand: while the file FLAG exists, every request about a path with a component
  that starts with `stall` waits (checked every 10 ms) until FLAG is removed (`--ops read,...`:
  only those requests): one client's file stalls, the rest of the file system answers at once.
  `--hold-each S`: a request that finds FLAG is held S seconds instead, however long FLAG stays
  (two requests one after the other each take S while FLAG lasts). `--delay-ms N` adds N ms to
  every request besides (a network file system's round trip).
- `--posix-locks`: POSIX locks are asked of the file system (FUSE's GETLK/SETLK, as ceph-fuse
  asks its MDS) and can be held like any request (op `lock`); each is taken as an
  open-file-description lock on the source file's descriptor of that FUSE open, so two opens'
  open-file-description locks (ringshare's) conflict as on a local disk. Without it the kernel
  answers them itself.
- `--direct-io`: every open is in direct I/O mode (libfuse's `direct_io`: reads and writes go
  to the file system, past the page cache, as ceph-fuse's can), so a READ waits for the file
  system's answer in whichever thread made it.

Needs `mfusepy` (PyPI, ctypes bindings for libfuse 3: Debian's libfuse3-3) and root (mounting
without fusermount3). Runs in the foreground, multithreaded (a stalled request holds one
libfuse thread, not the file system); unmount with `umount MOUNT` or by stopping it.

  stall-fuse.py SOURCE MOUNT --log LOG [--flag FLAG] [--ops OP,...] [--hold-each S] [--delay-ms N]
                [--posix-locks] [--direct-io]

Not a CI test: scripts/fuse-stall-demo.sh uses it to show a known limit (one stalled file stalls
every client of the I/O thread that touched it).
"""

import argparse
import errno
import fcntl
import os
import struct
import threading
import time

import mfusepy as fuse


class Stall(fuse.Operations):
    use_ns = True

    def __init__(self, source, log, flag, delay_ms, ops=None, hold_each=None):
        self.hold_each = hold_each
        self.source = source
        self.log = open(log, "a", buffering=1)
        self.mu = threading.Lock()
        self.flag = flag
        self.delay = delay_ms / 1000.0
        self.ops = set(ops.split(",")) if ops else None

    def _real(self, path):
        return os.path.join(self.source, path.lstrip("/"))

    def _enter(self, op, path):
        _, _, tid = fuse.fuse_get_context()
        with self.mu:
            self.log.write(f"{time.time():.6f} {tid} {op} {path}\n")
        if self.delay:
            time.sleep(self.delay)
        held = self.ops is None or op in self.ops
        if held and self.flag and any(p.startswith("stall") for p in path.split("/")):
            if self.hold_each is not None:
                if os.path.exists(self.flag):
                    time.sleep(self.hold_each)
                return
            while os.path.exists(self.flag):
                time.sleep(0.01)

    def _owned(self, real):
        uid, gid, _ = fuse.fuse_get_context()
        os.lchown(real, uid, gid)

    # -- metadata
    def getattr(self, path, fh=None):
        self._enter("getattr", path)
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_dev", "st_blocks")
        d = {k: getattr(st, k) for k in keys}
        d.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return d

    def access(self, path, amode):
        self._enter("access", path)
        if not os.access(self._real(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def readlink(self, path):
        self._enter("readlink", path)
        return os.readlink(self._real(path))

    def opendir(self, path):
        self._enter("opendir", path)
        return 0

    def readdir(self, path, fh):
        self._enter("readdir", path)
        # Each entry with its inode number (with `use_ino`, a zero one is skipped by readdir(3)).
        real = self._real(path)
        out = []
        for name in [".", ".."] + os.listdir(real):
            st = os.lstat(os.path.join(real, name))
            out.append((name, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
        return out

    def releasedir(self, path, fh):
        return 0

    def statfs(self, path):
        self._enter("statfs", path)
        v = os.statvfs(self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                "f_frsize", "f_namemax")
        return {k: getattr(v, k) for k in keys}

    def chmod(self, path, mode):
        self._enter("chmod", path)
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path, uid, gid):
        self._enter("chown", path)
        os.lchown(self._real(path), uid, gid)
        return 0

    def utimens(self, path, times=None):
        self._enter("utimens", path)
        os.utime(self._real(path), ns=times, follow_symlinks=False)
        return 0

    def truncate(self, path, length, fh=None):
        self._enter("truncate", path)
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._real(path), length)
        return 0

    # -- xattrs
    def getxattr(self, path, name, position=0):
        self._enter("getxattr", path)
        try:
            return os.getxattr(self._real(path), name, follow_symlinks=False)
        except OSError as e:
            raise fuse.FuseOSError(e.errno)

    def setxattr(self, path, name, value, options, position=0):
        self._enter("setxattr", path)
        os.setxattr(self._real(path), name, value, options, follow_symlinks=False)
        return 0

    def listxattr(self, path):
        self._enter("listxattr", path)
        return os.listxattr(self._real(path), follow_symlinks=False)

    def removexattr(self, path, name):
        self._enter("removexattr", path)
        os.removexattr(self._real(path), name, follow_symlinks=False)
        return 0

    # -- names
    def mkdir(self, path, mode):
        self._enter("mkdir", path)
        os.mkdir(self._real(path), mode)
        self._owned(self._real(path))
        return 0

    def rmdir(self, path):
        self._enter("rmdir", path)
        os.rmdir(self._real(path))
        return 0

    def unlink(self, path):
        self._enter("unlink", path)
        os.unlink(self._real(path))
        return 0

    def rename(self, old, new):
        self._enter("rename", old)
        os.rename(self._real(old), self._real(new))
        return 0

    def link(self, target, source):
        self._enter("link", target)
        os.link(self._real(source), self._real(target))
        return 0

    def symlink(self, target, source):
        self._enter("symlink", target)
        os.symlink(source, self._real(target))
        return 0

    # -- files
    def create(self, path, mode, fi=None):
        self._enter("create", path)
        fd = os.open(self._real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        self._owned(self._real(path))
        os.close(fd)
        return os.open(self._real(path), os.O_RDWR)

    def open(self, path, flags):
        self._enter("open", path)
        return os.open(self._real(path), flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOCTTY))

    def read(self, path, size, offset, fh):
        self._enter("read", path)
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        self._enter("write", path)
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        self._enter("flush", path)
        return 0

    def fsync(self, path, datasync, fh):
        self._enter("fsync", path)
        (os.fdatasync if datasync else os.fsync)(fh)
        return 0

    def release(self, path, fh):
        self._enter("release", path)
        os.close(fh)
        return 0

    def fallocate(self, path, mode, offset, size, fh):
        self._enter("fallocate", path)
        if mode:
            raise fuse.FuseOSError(errno.EOPNOTSUPP)
        os.posix_fallocate(fh, offset, size)
        return 0


class StallLocks(Stall):
    """Stall with POSIX locks asked of it (`--posix-locks`): each taken as an OFD lock on the
    FUSE open's own descriptor of the source file."""

    # F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW (linux/fcntl.h), by the command the kernel sent.
    OFD = {fcntl.F_GETLK: 36, fcntl.F_SETLK: 37, fcntl.F_SETLKW: 38}
    FLOCK = "hhqqi"

    def init_with_config(self, conn, config):
        # FUSE_CAP_POSIX_LOCKS (libfuse 3's fuse_common.h): the kernel asks us for locks.
        if conn is not None and conn.capable & 2:
            conn.want |= 2

    def lock(self, path, fh, cmd, lock):
        self._enter("lock", path)
        l = lock.contents
        arg = struct.pack(self.FLOCK, l.l_type, l.l_whence, l.l_start, l.l_len, 0)
        try:
            got = fcntl.fcntl(fh, self.OFD[cmd], arg)
        except OSError as e:
            raise fuse.FuseOSError(e.errno)
        if cmd == fcntl.F_GETLK:
            l.l_type, l.l_whence, l.l_start, l.l_len, _ = struct.unpack(self.FLOCK, got[:struct.calcsize(self.FLOCK)])
        return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source")
    p.add_argument("mount")
    p.add_argument("--log", required=True)
    p.add_argument("--flag", help="while this file exists, requests about stall* paths wait")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--ops", help="hold only these requests (comma-separated: read,getattr,...)")
    p.add_argument("--hold-each", type=float, help="hold each request that finds FLAG this many seconds")
    p.add_argument("--posix-locks", action="store_true", help="POSIX locks are asked of this file system")
    p.add_argument("--direct-io", action="store_true", help="every open in direct I/O mode")
    a = p.parse_args()
    extra = {"direct_io": True} if a.direct_io else {}
    kind = StallLocks if a.posix_locks else Stall
    fuse.FUSE(
        kind(os.path.abspath(a.source), a.log, a.flag, a.delay_ms, a.ops, a.hold_each),
        a.mount,
        foreground=True,
        allow_other=True,
        default_permissions=True,
        use_ino=True,
        fsname="stallfuse",
        **extra,
    )


if __name__ == "__main__":
    main()
