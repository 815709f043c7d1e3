//! Stored Windows security descriptors (`Node::get/set_security_descriptor`)
//! on both backends.

mod common;

use common::*;
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{OpenMode, OpenOptions, Share};

fn check(share: &dyn Share) {
    let f = open(share, "f", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    assert_eq!(f.get_security_descriptor().unwrap(), None);
    let sd = [
        1u8, 0, 4, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    f.set_security_descriptor(&sd).unwrap();
    assert_eq!(
        f.get_security_descriptor().unwrap().as_deref(),
        Some(&sd[..])
    );
    f.set_security_descriptor(&sd[..4]).unwrap();
    // A later open (stat-only too) sees what was stored last.
    let again = share
        .open(
            &ringshare_vfs::server_who(),
            &p("f"),
            &OpenOptions {
                read: false,
                write: false,
                ..file_opts(OpenMode::Existing)
            },
        )
        .unwrap()
        .node;
    assert_eq!(
        again.get_security_descriptor().unwrap().as_deref(),
        Some(&sd[..4])
    );
    let d = open(share, "d", dir_opts(OpenMode::CreateNew))
        .unwrap()
        .node;
    d.set_security_descriptor(&sd).unwrap();
    assert_eq!(
        d.get_security_descriptor().unwrap().as_deref(),
        Some(&sd[..])
    );
    // A large one (many ACEs) reads back whole, on a plain open and a
    // stat-only one.
    let big: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
    again.set_security_descriptor(&big).unwrap();
    assert_eq!(f.get_security_descriptor().unwrap(), Some(big.clone()));
    assert_eq!(again.get_security_descriptor().unwrap(), Some(big));
}

#[test]
fn a_stored_security_descriptor_reads_back_on_the_memory_backend() {
    check(&MemShare::new());
}

#[test]
fn a_stored_security_descriptor_reads_back_from_the_ntacl_xattr() {
    let dir = TempDir::new("ntacl");
    let probe = dir.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    if rustix::fs::setxattr(&probe, "user.probe", b"1", rustix::fs::XattrFlags::empty()).is_err() {
        eprintln!("skipped: no user xattrs on {}", dir.path().display());
        return;
    }
    check(&PosixShare::new(dir.path()).expect("posix share"));
}
