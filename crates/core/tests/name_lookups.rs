//! Which directories a CREATE reads to find a name case-insensitively ([MS-FSCC] 2.1.5.2):
//! each look reads a whole directory (getdents64 on the POSIX backend), so a CREATE of a new
//! file reads only the directory the file goes in, not every directory on its way, when the
//! directories on the way are there as named. The share here is the in-memory one with its
//! case-insensitive looks recorded.

use crate::support;

use std::sync::{Arc, Mutex};

use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{FileAttr, FsResult, FsStat, OpenOptions, Opened, RelPath, Share, Who};
use ringshare_wire::consts::CreateDisposition as D;
use support::*;

const DIR: u32 = 0x01;

/// The in-memory share, recording the directory of each case-insensitive look.
#[derive(Debug)]
struct Looks(MemShare, Arc<Mutex<Vec<String>>>);

impl Share for Looks {
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        self.0.open(who, path, opts)
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
        self.1.lock().unwrap().push(dir.components().join("/"));
        self.0.find_name_case_insensitive(who, dir, name)
    }
}

/// A client of a share whose looks are recorded, with `Docs/Sub` made.
fn client_with_looks() -> (Client, Arc<Mutex<Vec<String>>>) {
    let mem = MemShare::new();
    let looks = Arc::new(Mutex::new(Vec::new()));
    let share = Arc::new(Looks(mem.clone(), Arc::clone(&looks)));
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let mut c = Client::on(server, mem, Options::default());
    for d in ["Docs", "Docs\\Sub"] {
        let h = c.create(d, GENERIC_ALL, D::CREATE, DIR).unwrap();
        c.close(h);
    }
    looks.lock().unwrap().clear();
    (c, looks)
}

#[test]
fn a_new_files_create_reads_only_the_directory_it_goes_in() {
    let (mut c, looks) = client_with_looks();
    let f = c
        .create("Docs\\Sub\\new.txt", GENERIC_ALL, D::CREATE, 0)
        .unwrap();
    c.close(f);
    assert_eq!(*looks.lock().unwrap(), ["Docs/Sub"]);
}

#[test]
fn a_name_below_directories_named_in_another_case_is_still_found_through_each_of_them() {
    let (mut c, looks) = client_with_looks();
    c.put_file("Docs\\Sub\\Report.txt", b"hello");
    looks.lock().unwrap().clear();
    let f = c
        .create("docs\\SUB\\report.TXT", GENERIC_READ, D::OPEN, 0)
        .unwrap();
    assert_eq!(read_data(&c.read(f, 0, 5)), b"hello");
    assert_eq!(*looks.lock().unwrap(), ["", "Docs", "Docs/Sub"]);
    // A new name there is made in the directory as stored, not in a second `docs`.
    let n = c
        .create("docs\\SUB\\new.txt", GENERIC_ALL, D::CREATE, 0)
        .unwrap();
    c.close(n);
    assert!(c.server_sees(&["Docs", "Sub", "new.txt"]));
}
