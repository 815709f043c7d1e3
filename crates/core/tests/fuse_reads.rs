//! READs of files on FUSE file systems ask for no more than the file holds
//! ([`ringshare_vfs::Node::reads_within_size`]): there an io_uring READ that
//! comes up short is continued from the wrong offset and returns the data
//! repeated (ceph-fuse with direct I/O, kernel 6.18: docs/cluster-internals.md,
//! "On CephFS: the runs"). The
//! backend here is the in-memory share with that flaw put back in.

mod support;

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{
    FileAttr, FsResult, FsStat, Node, OpenOptions, Opened, RelPath, SetTimes, Share, Who,
};
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::*;

/// A file of a FUSE-like file system: a read that asks past the end gets
/// the file's bytes repeated to fill it, as io_uring on ceph-fuse does.
#[derive(Debug)]
struct FuseNode(std::sync::Arc<dyn Node>);

impl Node for FuseNode {
    fn reads_within_size(&self) -> bool {
        true
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
        self.0.stat()
    }
    fn stat_without_dos(&self) -> FsResult<FileAttr> {
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
        self.0.set_len(len)
    }
    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.0.set_allocation(size)
    }
    fn set_times(&self, times: &SetTimes) -> FsResult<()> {
        self.0.set_times(times)
    }
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.0.set_dos_attributes(attrs)
    }
    fn set_mode(&self, mode: u32) -> FsResult<()> {
        self.0.set_mode(mode)
    }
    fn list_names(&self) -> FsResult<Vec<String>> {
        self.0.list_names()
    }
    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        self.0.stat_entry(name)
    }
}

#[derive(Debug)]
struct FuseShare(MemShare);

impl Share for FuseShare {
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let mut o = self.0.open(who, path, opts)?;
        o.node = std::sync::Arc::new(FuseNode(o.node));
        Ok(o)
    }
    fn stat(&self, who: &Who, path: &RelPath) -> FsResult<FileAttr> {
        self.0.stat(who, path)
    }
    fn unlink(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.0.unlink(who, path)
    }
    fn rmdir(&self, who: &Who, path: &RelPath) -> FsResult<()> {
        self.0.rmdir(who, path)
    }
    fn rename(&self, who: &Who, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()> {
        self.0.rename(who, from, to, replace)
    }
    fn statfs(&self) -> FsResult<FsStat> {
        self.0.statfs()
    }
    fn find_name_case_insensitive(&self, who: &Who, dir: &RelPath, name: &str) -> FsResult<String> {
        self.0.find_name_case_insensitive(who, dir, name)
    }
}

#[test]
fn a_read_past_the_end_of_a_file_on_fuse_returns_only_what_the_file_holds() {
    let mem = MemShare::new();
    let server = server_on(
        Arc::new(FuseShare(mem.clone())),
        ringshare_core::SigningPolicy::IfRequired,
    );
    let mut c = Client::on(server, mem, Options::default());
    let f = c
        .create("short.txt", 0x0012_019f, D::OPEN_IF, 0)
        .expect("create");
    let data = b"acknowledged before node 3 died: kca-0.txt";
    assert_eq!(c.write(f, 0, data).status(), NtStatus::SUCCESS);
    // The flaw is there: asked for 128 bytes, the node gives 128.
    let opened = FuseShare(MemShare::new());
    let who = ringshare_vfs::server_who();
    let path = RelPath::from_components(["x"]).unwrap();
    let mut opts = OpenOptions::read_existing();
    opts.mode = ringshare_vfs::OpenMode::OpenOrCreate;
    opts.write = true;
    let node = opened.open(&who, &path, &opts).unwrap().node;
    node.write_at(data, 0).unwrap();
    assert_eq!(node.read_at(&mut [0; 128], 0).unwrap(), 128, "the flaw");
    // A READ through the server asks for no more than the file holds.
    assert_eq!(read_data(&c.read(f, 0, 128)), data);
    assert_eq!(read_data(&c.read(f, 30, 128)), &data[30..]);
    assert_eq!(c.read(f, 42, 10).status(), NtStatus::END_OF_FILE);
}
