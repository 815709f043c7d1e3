//! What a backend keeps of a file's Windows and POSIX ACLs: the value of
//! Samba's `security.NTACL` xattr (`Node::nt_acl_blob`), the POSIX ACLs
//! (`Node::posix_acls`), on both backends.

use crate::common;

use common::*;
use ringshare_acl::posix::{AclEntry, AclTag, PosixAcl};
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{DefaultAcl, OpenMode, OpenOptions, Share};

fn nt_acl_blobs_read_back(share: &dyn Share) {
    let f = open(share, "f", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    assert_eq!(f.nt_acl_blob().unwrap(), None);
    let blob = [4u8, 0, 4, 0, 0, 0, 2, 0, 1, 0, 9, 9];
    f.set_nt_acl_blob(Some(&blob)).unwrap();
    assert_eq!(f.nt_acl_blob().unwrap().as_deref(), Some(&blob[..]));
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
    f.set_nt_acl_blob(Some(&blob[..4])).unwrap();
    assert_eq!(again.nt_acl_blob().unwrap().as_deref(), Some(&blob[..4]));
    // A large one (many ACEs) reads back whole.
    let big: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
    again.set_nt_acl_blob(Some(&big)).unwrap();
    assert_eq!(f.nt_acl_blob().unwrap(), Some(big));
    f.set_nt_acl_blob(None).unwrap();
    assert_eq!(again.nt_acl_blob().unwrap(), None);
}

fn posix_acls_read_back_and_set_the_mode(share: &dyn Share) {
    let f = open(share, "a", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    assert_eq!(f.posix_acls().unwrap().access, None);
    let acl = PosixAcl::new(vec![
        AclEntry::new(AclTag::UserObj, 6),
        AclEntry::new(AclTag::User(4242), 4),
        AclEntry::new(AclTag::GroupObj, 4),
        AclEntry::new(AclTag::Mask, 6),
        AclEntry::new(AclTag::Other, 0),
    ]);
    f.set_posix_acls(&acl, DefaultAcl::Keep, false).unwrap();
    assert_eq!(f.posix_acls().unwrap().access.as_ref(), Some(&acl));
    assert_eq!(
        f.stat().unwrap().mode & 0o777,
        0o660,
        "group bits are the mask"
    );
    // A minimal ACL is only mode bits.
    f.set_posix_acls(&PosixAcl::from_mode(0o640), DefaultAcl::Keep, false)
        .unwrap();
    assert_eq!(f.posix_acls().unwrap().access, None);
    assert_eq!(f.stat().unwrap().mode & 0o777, 0o640);
    let d = open(share, "d", dir_opts(OpenMode::CreateNew))
        .unwrap()
        .node;
    let dflt = PosixAcl::from_mode(0o750);
    d.set_posix_acls(&PosixAcl::from_mode(0o755), DefaultAcl::Set(&dflt), false)
        .unwrap();
    assert_eq!(d.posix_acls().unwrap().default.as_ref(), Some(&dflt));
    d.set_posix_acls(&PosixAcl::from_mode(0o755), DefaultAcl::Remove, false)
        .unwrap();
    assert_eq!(d.posix_acls().unwrap().default, None);
}

#[test]
fn the_memory_backend_keeps_nt_acl_blobs_and_posix_acls() {
    let m = MemShare::new();
    nt_acl_blobs_read_back(&m);
    posix_acls_read_back_and_set_the_mode(&m);
}

#[test]
fn the_posix_backend_keeps_them_in_samba_s_xattrs() {
    let dir = TempDir::new("ntacl");
    let share = PosixShare::new(dir.path()).expect("posix share");
    let probe = dir.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    // security.* needs root (CI runs as root); POSIX ACLs a file system with them.
    if rustix::fs::setxattr(
        &probe,
        "security.probe",
        b"1",
        rustix::fs::XattrFlags::empty(),
    )
    .is_err()
    {
        assert!(std::env::var_os("CI").is_none(), "needs root");
        eprintln!(
            "skipped: cannot set security.* xattrs in {}",
            dir.path().display()
        );
        return;
    }
    nt_acl_blobs_read_back(&share);
    posix_acls_read_back_and_set_the_mode(&share);
    let raw = rustix::fs::getxattr(dir.path().join("f"), "security.NTACL", &mut [0u8; 8]);
    assert!(
        matches!(raw, Err(rustix::io::Errno::NODATA)),
        "removed: {raw:?}"
    );
}
