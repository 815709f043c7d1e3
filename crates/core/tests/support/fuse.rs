//! A FUSE-like share for the core's tests of file system jobs (issue 33; crates/core/tests/
//! fuse_reads.rs, fuse_creates.rs): the in-memory share whose calls may wait on a network (or
//! not), its nodes counting what they are asked, and READs past the end getting the file's
//! bytes repeated, as io_uring on ceph-fuse does.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{
    FileAttr, FsResult, FsStat, Node, OfdLock, OpenMode, OpenOptions, Opened, RelPath, SetTimes,
    Share, Who,
};
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::header::Header;
use ringshare_wire::{FileId, NtStatus};

use super::*;

/// A file of a FUSE-like file system: a read that asks past the end gets
/// the file's bytes repeated to fill it, as io_uring on ceph-fuse does.
#[derive(Debug)]
pub struct FuseNode(pub std::sync::Arc<dyn Node>, pub Arc<Calls>, pub Descriptor);

/// A file's descriptor, as the POSIX backend shares it between the file's node and the nodes of
/// the named streams opened through it (a stream's node keeps its file's descriptor): the last
/// node holding it closes it (on FUSE a FLUSH, which the closing thread waits for).
#[derive(Debug, Default, Clone)]
pub struct Descriptor(Arc<()>);

impl Descriptor {
    /// Whether the node dropping this holds the descriptor's last share.
    fn last(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

/// What the share's nodes were asked, and whether a local program holds a POSIX lock on its
/// files.
#[derive(Debug, Default)]
pub struct Calls {
    pub sizes: AtomicUsize,
    pub lock_probes: AtomicUsize,
    pub locked: AtomicBool,
    /// Nodes let go (a file's descriptor closed).
    pub dropped: AtomicUsize,
    /// Files' attributes and the file system's sizes asked.
    pub stats: AtomicUsize,
    pub statfs: AtomicUsize,
    /// A directory entry's stat waits this long (a FUSE file system slow to answer), saying
    /// so in `stalled` while it does.
    pub stall_entry_ms: std::sync::atomic::AtomicU64,
    pub stalled: AtomicBool,
    /// Files' times set (a written handle's write time kept at its close).
    pub times_set: AtomicUsize,
    /// The share's own calls (opens, stats and searches of names, removals).
    pub share_calls: AtomicUsize,
    /// Files' sizes set (an overwrite's truncation).
    pub sizes_set: AtomicUsize,
    /// POSIX locks set on files' descriptors (a LOCK's mirror): refused while `locked` (a
    /// local program's lock in the way).
    pub lock_sets: AtomicUsize,
    /// Files changed: sizes, allocations, times, attributes, modes, owners, ACLs, EAs.
    pub changes: AtomicUsize,
    /// Files' ACLs, stored descriptors, EAs and reparse buffers read, and directories' names
    /// listed.
    pub reads: AtomicUsize,
    /// Every change of a file, and every rename or link, is refused (a back end that says no:
    /// EACCES).
    pub refuse: AtomicBool,
    /// The share's stats and renames match a path's last name without case, as a back end on a
    /// case-insensitive file system does (ext4's casefold directories): a rename that must not
    /// replace is refused EEXIST by any spelling of a taken name, the file itself included.
    pub case_blind: AtomicBool,
    /// Setting files' DOS attributes alone is refused (EACCES).
    pub refuse_attributes: AtomicBool,
    /// Every read of files' ACLs, stored descriptors and EAs fails (EIO).
    pub fail_reads: AtomicBool,
    /// Ranges copied or cloned between files (a server-side copy's chunks, a block clone),
    /// counted with the changes.
    pub copies: AtomicUsize,
    /// Named streams' calls: their reads, writes, syncs and sizes, the look for a stream by
    /// name, a stream's opening, creation (refused with `refuse`), removal and rename, a file's
    /// streams listed, and its Netatalk metadata read or written (the POSIX backend's xattr
    /// calls).
    pub streams: AtomicUsize,
    /// Named streams' nodes let go (a stream open's last close).
    pub streams_dropped: AtomicUsize,
    /// Every unlink and rmdir is refused (EACCES), after it is counted.
    pub refuse_removals: AtomicBool,
    /// Every stat of an open file fails (EIO), after it is counted.
    pub fail_stats: AtomicBool,
    /// Kernel watches added ([`Watches`]: on a network file system the kernel's permission
    /// check may ask the server).
    pub watch_adds: AtomicUsize,
    /// The kinds of the calls above made on the I/O thread ([`Calls::on_io_thread`]).
    pub io_thread: std::sync::Mutex<Vec<&'static str>>,
    /// (review of session 49) A stream's next rename, once made, says so on the first and
    /// waits for the second before it returns (a rename's job caught between its calls).
    #[allow(clippy::type_complexity)]
    pub stream_rename_gate: std::sync::Mutex<
        Option<(
            std::sync::mpsc::SyncSender<()>,
            std::sync::mpsc::Receiver<()>,
        )>,
    >,
}

impl Calls {
    /// Counter `counter` of calls of kind `what` counted: also among the I/O thread's calls
    /// ([`Calls::on_io_thread`]) when made there.
    fn bump(&self, counter: &AtomicUsize, what: &'static str) {
        counter.fetch_add(1, Ordering::SeqCst);
        if on_the_io_thread() {
            self.io_thread
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(what);
        }
    }

    /// The kinds of the counted calls made on the I/O thread so far, in order (every call but
    /// those of lookups, file system jobs and the ring's I/O run by the test's client:
    /// [`off_io_thread`]); emptied.
    pub fn on_io_thread(&self) -> Vec<&'static str> {
        std::mem::take(
            &mut *self
                .io_thread
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The file system calls made so far that this test counts: the share's and its files'
    /// stats.
    pub fn made(&self) -> usize {
        self.share_calls.load(Ordering::SeqCst) + self.stats.load(Ordering::SeqCst)
    }

    pub fn share_call(&self) {
        self.bump(&self.share_calls, "share_calls");
    }

    /// Every file system call counted: the share's, its files' stats, sizes, lock probes and
    /// sets, reads of ACLs and EAs, and changes.
    pub fn all(&self) -> usize {
        self.made()
            + self.sizes.load(Ordering::SeqCst)
            + self.lock_probes.load(Ordering::SeqCst)
            + self.lock_sets.load(Ordering::SeqCst)
            + self.statfs.load(Ordering::SeqCst)
            + self.reads.load(Ordering::SeqCst)
            + self.changes.load(Ordering::SeqCst)
            + self.streams.load(Ordering::SeqCst)
            + self.watch_adds.load(Ordering::SeqCst)
    }

    /// A named stream's call asked: counted.
    fn stream(&self) {
        self.bump(&self.streams, "streams");
    }

    /// A change of a file asked: counted, and refused when the back end says no.
    fn change(&self) -> FsResult<()> {
        self.bump(&self.changes, "changes");
        if self.refuse.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::AccessDenied);
        }
        Ok(())
    }

    /// A change of the share's names (a rename, a link), refused when the back end says no.
    fn refused(&self) -> FsResult<()> {
        if self.refuse.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::AccessDenied);
        }
        Ok(())
    }

    /// An unlink or rmdir, refused when the back end refuses removals.
    fn removal(&self) -> FsResult<()> {
        if self.refuse_removals.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::AccessDenied);
        }
        Ok(())
    }

    /// A read of a file's ACLs, stored descriptor or EAs asked: counted, and failed when the
    /// back end fails them.
    fn read(&self) -> FsResult<()> {
        self.bump(&self.reads, "reads");
        if self.fail_reads.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::Io);
        }
        Ok(())
    }
}

impl Drop for FuseNode {
    /// The descriptor's last close, when no stream opened through the node keeps it.
    fn drop(&mut self) {
        if self.2.last() {
            self.1.bump(&self.1.dropped, "dropped");
        }
    }
}

impl Node for FuseNode {
    fn reads_within_size(&self) -> bool {
        true
    }
    fn size(&self) -> FsResult<u64> {
        self.1.bump(&self.1.sizes, "sizes");
        self.0.size()
    }
    fn posix_locked(&self, _: OfdLock, _: i64, _: i64) -> FsResult<bool> {
        self.1.bump(&self.1.lock_probes, "lock_probes");
        Ok(self.1.locked.load(Ordering::SeqCst))
    }
    fn posix_lock(&self, kind: OfdLock, _: i64, _: i64) -> FsResult<bool> {
        self.1.bump(&self.1.lock_sets, "lock_sets");
        // An unlock is never in anyone's way.
        Ok(kind == OfdLock::Unlock || !self.1.locked.load(Ordering::SeqCst))
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        let n = self.0.read_at(buf, offset)?;
        if n == 0 || n == buf.len() {
            return Ok(n);
        }
        for i in n..buf.len() {
            buf[i] = buf[i % n];
        }
        Ok(buf.len())
    }
    fn stat(&self) -> FsResult<FileAttr> {
        self.1.bump(&self.1.stats, "stats");
        if self.1.fail_stats.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::Io);
        }
        self.0.stat()
    }
    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        self.1.bump(&self.1.stats, "stats");
        self.0.stat_without_dos()
    }
    fn who(&self) -> Option<&Who> {
        self.0.who()
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.0.fd()
    }
    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        self.0.write_at(data, offset)
    }
    fn sync(&self) -> FsResult<()> {
        self.0.sync()
    }
    fn set_len(&self, len: u64) -> FsResult<()> {
        self.1.bump(&self.1.sizes_set, "sizes_set");
        self.1.change()?;
        self.0.set_len(len)
    }
    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.1.change()?;
        self.0.set_allocation(size)
    }
    fn set_times(&self, times: &SetTimes) -> FsResult<()> {
        self.1.bump(&self.1.times_set, "times_set");
        self.1.change()?;
        self.0.set_times(times)
    }
    fn copy_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        self.1.bump(&self.1.copies, "copies");
        self.1.change()?;
        self.0.copy_range(src, src_offset, dst_offset, len)
    }
    fn clone_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<()> {
        self.1.bump(&self.1.copies, "copies");
        self.1.change()?;
        self.0.clone_range(src, src_offset, dst_offset, len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> FsResult<()> {
        self.0.punch_hole(offset, len)
    }
    fn allocated_ranges(&self, offset: u64, len: u64) -> FsResult<Vec<(u64, u64)>> {
        self.0.allocated_ranges(offset, len)
    }
    fn reparse_point(&self) -> FsResult<Option<Vec<u8>>> {
        // Counted, never failed (FSCTL_GET_REPARSE_POINT's tests fail other reads).
        self.1.bump(&self.1.reads, "reads");
        self.0.reparse_point()
    }
    fn set_reparse_point(&self, value: Option<&[u8]>) -> FsResult<()> {
        self.0.set_reparse_point(value)
    }
    fn netatalk_metadata(&self) -> FsResult<Option<Vec<u8>>> {
        self.1.stream();
        self.0.netatalk_metadata()
    }
    fn set_netatalk_metadata(&self, value: Option<&[u8]>) -> FsResult<()> {
        self.1.stream();
        self.1.refused()?;
        self.0.set_netatalk_metadata(value)
    }
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.1.change()?;
        if self.1.refuse_attributes.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::AccessDenied);
        }
        self.0.set_dos_attributes(attrs)
    }
    fn set_mode(&self, mode: u32) -> FsResult<()> {
        self.1.change()?;
        self.0.set_mode(mode)
    }
    fn posix_acls(&self) -> FsResult<ringshare_vfs::PosixAcls> {
        self.1.read()?;
        self.0.posix_acls()
    }
    fn set_posix_acls(
        &self,
        access: &ringshare_vfs::PosixAcl,
        default: ringshare_vfs::DefaultAcl<'_>,
        server_may: bool,
    ) -> FsResult<()> {
        self.1.change()?;
        self.0.set_posix_acls(access, default, server_may)
    }
    fn chown(&self, uid: Option<u32>, gid: Option<u32>, server_may: bool) -> FsResult<()> {
        self.1.change()?;
        self.0.chown(uid, gid, server_may)
    }
    fn nt_acl_blob(&self) -> FsResult<Option<Vec<u8>>> {
        self.1.read()?;
        self.0.nt_acl_blob()
    }
    fn set_nt_acl_blob(&self, blob: Option<&[u8]>) -> FsResult<()> {
        self.1.change()?;
        self.0.set_nt_acl_blob(blob)
    }
    fn list_eas(&self) -> FsResult<Vec<(String, Vec<u8>)>> {
        self.1.read()?;
        self.0.list_eas()
    }
    fn set_ea(&self, name: &str, value: Option<&[u8]>) -> FsResult<()> {
        self.1.change()?;
        self.0.set_ea(name, value)
    }
    fn list_names(&self) -> FsResult<Vec<String>> {
        self.1.read()?;
        self.0.list_names()
    }
    fn open_stream(&self, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
        self.1.stream();
        if mode == OpenMode::CreateNew {
            // Making a stream is a change of the file.
            self.1.refused()?;
        }
        let mut o = self.0.open_stream(name, mode, write)?;
        o.node = Arc::new(FuseStream(o.node, Arc::clone(&self.1), self.2.clone()));
        Ok(o)
    }
    fn list_streams(&self) -> FsResult<Vec<ringshare_vfs::StreamInfo>> {
        self.1.stream();
        self.0.list_streams()
    }
    fn remove_stream(&self, name: &str) -> FsResult<()> {
        self.1.stream();
        self.0.remove_stream(name)
    }
    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        self.0.rename_stream(from, to, replace)
    }
    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        self.1.bump(&self.1.stats, "stats");
        let stall = self.1.stall_entry_ms.load(Ordering::SeqCst);
        if stall > 0 {
            self.1.stalled.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(stall));
            self.1.stalled.store(false, Ordering::SeqCst);
        }
        self.0.stat_entry(name)
    }
}

/// A named stream of a [`FuseNode`]'s file: its calls counted ([`Calls::streams`]), its writes
/// and renames refused with [`Calls::refuse`], its reads failed with [`Calls::fail_reads`].
/// No descriptor: its data is read and written through the node, as the POSIX backend's
/// (kept in an extended attribute).
#[derive(Debug)]
pub struct FuseStream(pub Arc<dyn Node>, pub Arc<Calls>, pub Descriptor);

impl Drop for FuseStream {
    /// A stream open's node let go (`streams_dropped`); the file's descriptor's last close
    /// (`dropped`, a call where it is made) when the file's node went before the stream's.
    fn drop(&mut self) {
        self.1.streams_dropped.fetch_add(1, Ordering::SeqCst);
        if self.2.last() {
            self.1.bump(&self.1.dropped, "dropped");
        }
    }
}

impl Node for FuseStream {
    fn stat(&self) -> FsResult<FileAttr> {
        self.1.bump(&self.1.stats, "stats");
        self.0.stat()
    }
    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        self.1.bump(&self.1.stats, "stats");
        self.0.stat_without_dos()
    }
    fn size(&self) -> FsResult<u64> {
        self.1.stream();
        self.0.size()
    }
    fn who(&self) -> Option<&Who> {
        self.0.who()
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn posix_locked(&self, _: OfdLock, _: i64, _: i64) -> FsResult<bool> {
        self.1.bump(&self.1.lock_probes, "lock_probes");
        Ok(self.1.locked.load(Ordering::SeqCst))
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        self.1.stream();
        if self.1.fail_reads.load(Ordering::SeqCst) {
            return Err(ringshare_vfs::FsError::Io);
        }
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        self.1.stream();
        self.1.refused()?;
        self.0.write_at(data, offset)
    }
    fn sync(&self) -> FsResult<()> {
        self.1.stream();
        self.0.sync()
    }
    fn set_len(&self, len: u64) -> FsResult<()> {
        self.1.change()?;
        self.0.set_len(len)
    }
    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.1.change()?;
        self.0.set_allocation(size)
    }
    fn set_times(&self, times: &SetTimes) -> FsResult<()> {
        self.1.bump(&self.1.times_set, "times_set");
        self.1.change()?;
        self.0.set_times(times)
    }
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.1.change()?;
        self.0.set_dos_attributes(attrs)
    }
    fn set_mode(&self, mode: u32) -> FsResult<()> {
        self.1.change()?;
        self.0.set_mode(mode)
    }
    fn list_names(&self) -> FsResult<Vec<String>> {
        self.0.list_names()
    }
    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        self.0.stat_entry(name)
    }
    fn list_streams(&self) -> FsResult<Vec<ringshare_vfs::StreamInfo>> {
        self.0.list_streams()
    }
    fn find_stream(&self, name: &str) -> FsResult<Option<ringshare_vfs::StreamInfo>> {
        self.1.stream();
        self.0.find_stream(name)
    }
    fn open_stream(&self, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
        self.0.open_stream(name, mode, write)
    }
    fn stream_name(&self) -> Option<String> {
        self.0.stream_name()
    }
    fn remove_stream(&self, name: &str) -> FsResult<()> {
        self.0.remove_stream(name)
    }
    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        self.1.stream();
        self.1.refused()?;
        let r = self.0.rename_stream(from, to, replace);
        let gate = self.1.stream_rename_gate.lock().unwrap().take();
        if let Some((renamed, go)) = gate {
            let _ = renamed.send(());
            let _ = go.recv();
        }
        r
    }
    fn remove_all_streams(&self) -> FsResult<()> {
        self.0.remove_all_streams()
    }
    fn posix_acls(&self) -> FsResult<ringshare_vfs::PosixAcls> {
        self.0.posix_acls()
    }
    fn set_posix_acls(
        &self,
        access: &ringshare_vfs::PosixAcl,
        default: ringshare_vfs::DefaultAcl<'_>,
        server_may: bool,
    ) -> FsResult<()> {
        self.0.set_posix_acls(access, default, server_may)
    }
    fn chown(&self, uid: Option<u32>, gid: Option<u32>, server_may: bool) -> FsResult<()> {
        self.0.chown(uid, gid, server_may)
    }
    fn nt_acl_blob(&self) -> FsResult<Option<Vec<u8>>> {
        self.0.nt_acl_blob()
    }
    fn set_nt_acl_blob(&self, blob: Option<&[u8]>) -> FsResult<()> {
        self.0.set_nt_acl_blob(blob)
    }
    fn list_eas(&self) -> FsResult<Vec<(String, Vec<u8>)>> {
        self.0.list_eas()
    }
    fn set_ea(&self, name: &str, value: Option<&[u8]>) -> FsResult<()> {
        self.0.set_ea(name, value)
    }
    fn reparse_point(&self) -> FsResult<Option<Vec<u8>>> {
        self.0.reparse_point()
    }
    fn in_memory(&self) -> bool {
        self.0.in_memory()
    }
    fn access(&self) -> FsResult<ringshare_vfs::Access> {
        self.0.access()
    }
}

#[derive(Debug)]
pub struct FuseShare(pub MemShare, pub Arc<Calls>, pub bool);

impl FuseShare {
    /// A FUSE-like share; `remote`: its calls may wait on a network.
    pub fn new(mem: MemShare, remote: bool) -> FuseShare {
        FuseShare(mem, Arc::default(), remote)
    }

    /// `path` as stored: with [`Calls::case_blind`], its last name replaced by the name in its
    /// directory that equals it but for case, when there is one.
    fn stored(&self, who: &Who, path: &RelPath) -> RelPath {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return path.clone();
        };
        if !self.1.case_blind.load(Ordering::SeqCst) {
            return path.clone();
        }
        self.0
            .find_name_case_insensitive(who, &dir, name)
            .and_then(|n| dir.join(&n))
            .unwrap_or_else(|_| path.clone())
    }
}

impl Share for FuseShare {
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        self.1.share_call();
        let mut o = self.0.open(who, path, opts)?;
        o.node = std::sync::Arc::new(FuseNode(o.node, Arc::clone(&self.1), Descriptor::default()));
        Ok(o)
    }
    fn may_wait_on_network(&self) -> bool {
        self.2
    }
    fn streams_supported(&self) -> bool {
        self.0.streams_supported()
    }
    fn stat(&self, who: &Who, path: &RelPath) -> FsResult<FileAttr> {
        self.1.share_call();
        self.0.stat(who, &self.stored(who, path))
    }
    fn unlink(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.1.share_call();
        self.1.removal()?;
        self.0.unlink(who, path)
    }
    fn rmdir(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.1.share_call();
        self.1.removal()?;
        self.0.rmdir(who, path)
    }
    fn rename(&self, who: &Who, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()> {
        self.1.share_call();
        self.1.refused()?;
        let stored = self.stored(who, to);
        if stored != *to && self.0.stat(who, &stored).is_ok() {
            if !replace {
                return Err(ringshare_vfs::FsError::Exists);
            }
            if stored != *from {
                self.0.unlink(who, &stored)?;
            }
        }
        self.0.rename(who, from, to, replace)
    }
    fn link(&self, who: &Who, from: &RelPath, to: &RelPath) -> FsResult<()> {
        self.1.share_call();
        self.1.refused()?;
        self.0.link(who, from, to)
    }
    fn clone_block_size(&self) -> Option<u64> {
        self.0.clone_block_size()
    }
    fn statfs(&self) -> FsResult<FsStat> {
        self.1.bump(&self.1.statfs, "statfs");
        self.0.statfs()
    }
    fn find_name_case_insensitive(&self, who: &Who, dir: &RelPath, name: &str) -> FsResult<String> {
        self.1.share_call();
        self.0.find_name_case_insensitive(who, dir, name)
    }
    fn read_only_view(&self, who: &Who, dir: &RelPath) -> FsResult<Arc<dyn Share>> {
        self.1.share_call();
        let view = self.0.read_only_view(who, dir)?;
        Ok(Arc::new(FuseView(view, Arc::clone(&self.1), self.2)))
    }
}

/// A snapshot's view of a [`FuseShare`] (Previous Versions: its `read_only_view`): the
/// in-memory share's view, its calls counted in the share's [`Calls`], its files
/// [`FuseNode`]s, waiting on a network when the share does.
#[derive(Debug)]
pub struct FuseView(pub Arc<dyn Share>, pub Arc<Calls>, pub bool);

impl Share for FuseView {
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        self.1.share_call();
        let mut o = self.0.open(who, path, opts)?;
        o.node = std::sync::Arc::new(FuseNode(o.node, Arc::clone(&self.1), Descriptor::default()));
        Ok(o)
    }
    fn stat(&self, who: &Who, path: &RelPath) -> FsResult<FileAttr> {
        self.1.share_call();
        self.0.stat(who, path)
    }
    fn unlink(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.1.share_call();
        self.0.unlink(who, path)
    }
    fn rmdir(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.1.share_call();
        self.0.rmdir(who, path)
    }
    fn rename(&self, who: &Who, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()> {
        self.1.share_call();
        self.0.rename(who, from, to, replace)
    }
    fn statfs(&self) -> FsResult<FsStat> {
        self.1.bump(&self.1.statfs, "statfs");
        self.0.statfs()
    }
    fn find_name_case_insensitive(&self, who: &Who, dir: &RelPath, name: &str) -> FsResult<String> {
        self.1.share_call();
        self.0.find_name_case_insensitive(who, dir, name)
    }
    fn may_wait_on_network(&self) -> bool {
        self.2
    }
    fn streams_supported(&self) -> bool {
        self.0.streams_supported()
    }
    fn is_snapshot(&self) -> bool {
        self.0.is_snapshot()
    }
}

/// The driver's kernel watch for the FUSE-like share's directories: each add counted in the
/// share's [`Calls`] (`watch_adds`, among the I/O thread's calls when made there), the watch
/// descriptors handed out and not removed kept (`live`).
#[derive(Debug, Default)]
pub struct Watches {
    pub calls: Arc<Calls>,
    pub live: std::sync::Mutex<Vec<i32>>,
    next: std::sync::atomic::AtomicI32,
    /// While set, every add is refused, as inotify does past its limit of watches.
    pub refuse: std::sync::atomic::AtomicBool,
    /// While set, a directory already watched gets its descriptor again, as inotify does (one
    /// descriptor per inode, whatever the path): unset, each add gets a new one.
    pub per_inode: std::sync::atomic::AtomicBool,
    /// The inode each live descriptor watches.
    inodes: std::sync::Mutex<Vec<(u64, i32)>>,
}

impl ringshare_core::notify_kernel::KernelWatch for Watches {
    fn add(&self, dir: &dyn Node) -> Option<i32> {
        self.calls.bump(&self.calls.watch_adds, "watch_adds");
        if self.refuse.load(Ordering::SeqCst) {
            return None;
        }
        // (Asked only in this mode: the stat is a call of the share, counted like any other.)
        let per_inode = self.per_inode.load(Ordering::SeqCst);
        let ino = per_inode.then(|| dir.stat().map(|a| a.ino).ok()).flatten();
        let mut inodes = self.inodes.lock().unwrap();
        if let Some(&(_, wd)) = inodes.iter().find(|(i, _)| Some(*i) == ino) {
            return Some(wd);
        }
        let wd = 1 + self.next.fetch_add(1, Ordering::SeqCst);
        self.live.lock().unwrap().push(wd);
        if let Some(ino) = ino {
            inodes.push((ino, wd));
        }
        Some(wd)
    }
    fn remove(&self, wd: i32) {
        self.live.lock().unwrap().retain(|w| *w != wd);
        self.inodes.lock().unwrap().retain(|(_, w)| *w != wd);
    }
}

impl Watches {
    /// The watch descriptors live now.
    pub fn live(&self) -> Vec<i32> {
        self.live.lock().unwrap().clone()
    }
}

/// The kernel reports `mask` for `name` in the directory watched as `wd`; the core takes it
/// once it was held `HOLD_MS`.
pub fn kernel_reports(c: &mut Client, wd: i32, mask: u32, name: &str) {
    let event = ringshare_core::notify_kernel::KernelEvent {
        wd,
        mask,
        cookie: 0,
        name: Some(name.into()),
    };
    c.server.kernel_events(c.now.mono_ms, vec![event]);
    c.now.mono_ms += ringshare_core::notify_kernel::HOLD_MS;
    c.server.kernel_tick(c.now.mono_ms);
}

/// [`fuse_client`] whose server watches directories through the kernel ([`Watches`]); the
/// client offers directory leasing.
pub fn fuse_client_watching(remote: bool) -> (Client, Arc<Calls>, Arc<Watches>) {
    fuse_client_watching_with(remote, |_| {})
}

/// [`fuse_client_watching`] with the server's configuration changed by `config` first.
pub fn fuse_client_watching_with(
    remote: bool,
    config: impl FnOnce(&mut ringshare_core::ServerConfig),
) -> (Client, Arc<Calls>, Arc<Watches>) {
    let share = Arc::new(FuseShare::new(MemShare::new(), remote));
    let calls = Arc::clone(&share.1);
    let watches = Arc::new(Watches {
        calls: Arc::clone(&calls),
        ..Watches::default()
    });
    let mut cfg = config_on(share.clone(), ringshare_core::SigningPolicy::IfRequired);
    config(&mut cfg);
    let server = server_from(cfg);
    server.set_kernel_watch(watches.clone());
    let c = Client::leasing_dirs(server, share.0.clone(), [1; 16]);
    (c, calls, watches)
}

/// Running the file system jobs a client's connection asked (held by the test), as the
/// driver's pool does, and handing their answers back.
pub trait RunJobs {
    /// Each of `held` (every one a file system job) run and answered.
    fn run_jobs(&mut self, held: Vec<ringshare_core::LookupRequest>);
    /// Each of `held` (of any kind) run and answered.
    fn run_any(&mut self, held: Vec<ringshare_core::LookupRequest>);
    /// The held jobs run, then those they asked, until none is held; holding stops. The
    /// answers sent meanwhile, and how many jobs ran.
    fn run_held_jobs_to_the_end(&mut self) -> (Vec<Resp>, usize);
}

impl RunJobs for Client {
    fn run_jobs(&mut self, held: Vec<ringshare_core::LookupRequest>) {
        for req in &held {
            assert!(matches!(req.ask, ringshare_core::Lookup::Fs(_)));
        }
        self.run_any(held);
    }

    fn run_any(&mut self, held: Vec<ringshare_core::LookupRequest>) {
        for req in held {
            let done = off_io_thread(|| req.run());
            self.conn.complete_lookup(self.now, req.id, done);
        }
    }

    fn run_held_jobs_to_the_end(&mut self) -> (Vec<Resp>, usize) {
        let (mut answers, mut jobs) = (Vec::new(), 0);
        while !self.held_lookups.is_empty() {
            let held = std::mem::take(&mut self.held_lookups);
            jobs += held.len();
            self.run_jobs(held);
            answers.extend(self.pump());
        }
        self.hold_lookups = false;
        (answers, jobs)
    }
}

/// Whether `path` is on `c`'s share (asked of the share itself: no call counted).
pub fn exists(c: &Client, path: &str) -> bool {
    let p = RelPath::from_components(path.split('/')).unwrap();
    c.mem.stat(&ringshare_vfs::server_who(), &p).is_ok()
}

/// Whether file `path` of `c`'s share is there and has stream `name` (no call counted).
pub fn has_stream(c: &Client, path: &str, name: &str) -> bool {
    let p = RelPath::from_components(path.split('/')).unwrap();
    let who = ringshare_vfs::server_who();
    match c.mem.open(&who, &p, &OpenOptions::read_existing()) {
        Ok(f) => f.node.find_stream(name).unwrap().is_some(),
        Err(_) => false,
    }
}

/// A file `name` made (or opened) by `c` on its tree, holding `data` from its start.
pub fn file_holding(c: &mut Client, name: &str, data: &[u8]) -> FileId {
    let f = c.create(name, 0x0012_019f, D::OPEN_IF, 0).expect("create");
    assert_eq!(c.write(f, 0, data).status(), NtStatus::SUCCESS);
    f
}

/// A client of a server whose every share is a [`FuseShare`] (`remote`: its calls may wait on a
/// network), and what the share's nodes are asked.
pub fn fuse_client(remote: bool) -> (Client, Arc<Calls>) {
    fuse_client_with(remote, |share| {
        server_on(share, ringshare_core::SigningPolicy::IfRequired)
    })
}

/// [`fuse_client`] with the server `server` makes of the share.
pub fn fuse_client_with(
    remote: bool,
    server: impl FnOnce(Arc<FuseShare>) -> Arc<ringshare_core::ServerState>,
) -> (Client, Arc<Calls>) {
    fuse_client_on(MemShare::new(), remote, server)
}

/// [`fuse_client_with`] over the in-memory share `mem` (one made to clone blocks, say).
pub fn fuse_client_on(
    mem: MemShare,
    remote: bool,
    server: impl FnOnce(Arc<FuseShare>) -> Arc<ringshare_core::ServerState>,
) -> (Client, Arc<Calls>) {
    let share = Arc::new(FuseShare::new(mem.clone(), remote));
    let calls = Arc::clone(&share.1);
    (Client::on(server(share), mem, Options::default()), calls)
}

/// `msg` signed and sent; its MessageId, and what was answered at once.
pub fn send_signed(c: &mut Client, mut msg: Vec<u8>) -> (u64, Vec<Resp>) {
    c.sign(&mut msg);
    let mid = Header::decode(&msg).expect("header").message_id;
    (mid, c.send_frame(msg))
}

/// Each of `held` (of any kind) run and answered, as [`RunJobs::run_any`] does, with the file
/// system calls `count` counts read around each step: those the runs made (the pool's) and
/// those the answers made (the I/O thread's: the request runs again in `complete_lookup`).
pub fn run_counting(
    c: &mut Client,
    held: Vec<ringshare_core::LookupRequest>,
    count: &dyn Fn() -> usize,
) -> (usize, usize) {
    let (mut in_jobs, mut on_io_thread) = (0, 0);
    for req in held {
        let before = count();
        let done = off_io_thread(|| req.run());
        in_jobs += count() - before;
        let before = count();
        c.conn.complete_lookup(c.now, req.id, done);
        on_io_thread += count() - before;
    }
    (in_jobs, on_io_thread)
}

/// A DH2Q with CreateGuid `guid` and `flags` (PERSISTENT is 2), no timeout asked.
pub fn dh2q_with(
    guid: [u8; 16],
    flags: u32,
) -> Vec<ringshare_wire::create::CreateContext<'static>> {
    use ringshare_wire::create::{tag, CreateContext, DurableHandleRequestV2};
    let d = DurableHandleRequestV2 {
        timeout: 0,
        flags,
        create_guid: guid,
    };
    vec![CreateContext::new(
        tag::DURABLE_HANDLE_REQUEST_V2,
        d.encode(),
    )]
}

/// A DH2C of open `f` made with CreateGuid `guid`.
pub fn dh2c_with(f: FileId, guid: [u8; 16]) -> Vec<ringshare_wire::create::CreateContext<'static>> {
    use ringshare_wire::create::{tag, CreateContext, DurableHandleReconnectV2};
    let d = DurableHandleReconnectV2 {
        file_id: f,
        create_guid: guid,
        flags: 0,
    };
    vec![CreateContext::new(
        tag::DURABLE_HANDLE_RECONNECT_V2,
        d.encode(),
    )]
}
