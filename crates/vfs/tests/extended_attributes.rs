//! Windows extended attributes (`Node::list_eas` / `Node::set_ea`) on both
//! backends: names stored upper case and matched case-insensitively, empty
//! values delete, the backend's own `ringshare.*` names are neither settable
//! nor listed.

use crate::common;

use common::*;
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{FsError, OpenMode, OpenOptions, Share, EA_VALUE_LEN_MAX};

fn ea(name: &str, value: &[u8]) -> (String, Vec<u8>) {
    (name.to_string(), value.to_vec())
}

fn eas_are_set_listed_replaced_and_deleted(share: &dyn Share) {
    let f = open(share, "f", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    assert_eq!(f.list_eas().unwrap(), vec![]);
    f.set_ea("eaOne", Some(b"VALUE1")).unwrap();
    f.set_ea("SecondEA", Some(b"ValueTwo")).unwrap();
    let mut got = f.list_eas().unwrap();
    got.sort();
    assert_eq!(
        got,
        vec![ea("EAONE", b"VALUE1"), ea("SECONDEA", b"ValueTwo")]
    );
    // Another case of the same name replaces it.
    f.set_ea("EAone", Some(b"x")).unwrap();
    let mut got = f.list_eas().unwrap();
    got.sort();
    assert_eq!(got, vec![ea("EAONE", b"x"), ea("SECONDEA", b"ValueTwo")]);
    // None and an empty value both delete; deleting a missing one is fine.
    f.set_ea("eaone", None).unwrap();
    f.set_ea("SECONDEA", Some(b"")).unwrap();
    f.set_ea("NEVERSET", None).unwrap();
    assert_eq!(f.list_eas().unwrap(), vec![]);

    // A later stat-only open sees them, and directories carry EAs too.
    f.set_ea("kept", Some(b"1")).unwrap();
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
    assert_eq!(again.list_eas().unwrap(), vec![ea("KEPT", b"1")]);
    let d = open(share, "d", dir_opts(OpenMode::CreateNew))
        .unwrap()
        .node;
    d.set_ea("OnDir", Some(b"v")).unwrap();
    assert_eq!(d.list_eas().unwrap(), vec![ea("ONDIR", b"v")]);
}

fn bad_names_and_values_are_refused(share: &dyn Share) {
    let f = open(share, "g", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    for bad in [
        "", "a*b", "a?", "x\\y", "x/y", "a:b", "<", ">", "|", "\"", "tab\t", "é",
    ] {
        assert_eq!(
            f.set_ea(bad, Some(b"v")),
            Err(FsError::InvalidName),
            "{bad:?}"
        );
    }
    assert_eq!(
        f.set_ea(&"N".repeat(256), Some(b"v")),
        Err(FsError::InvalidName)
    );
    // 250 bytes fit everywhere (a POSIX xattr name, `user.` included, is at most 255).
    f.set_ea(&"N".repeat(250), Some(b"v")).unwrap();
    let big = vec![7u8; EA_VALUE_LEN_MAX + 1];
    assert_eq!(f.set_ea("BIG", Some(&big)), Err(FsError::NameTooLong));
    for reserved in ["ringshare.dosattrib", "RINGSHARE.NTACL", "Ringshare.new"] {
        assert_eq!(
            f.set_ea(reserved, Some(b"\x01\x00\x00\x00")),
            Err(FsError::AccessDenied),
            "{reserved}"
        );
        assert_eq!(f.set_ea(reserved, None), Err(FsError::AccessDenied));
    }
    assert_eq!(f.list_eas().unwrap(), vec![ea(&"N".repeat(250), b"v")]);
}

fn the_backends_own_metadata_is_not_listed(share: &dyn Share) {
    let f = open(share, "h", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    f.set_dos_attributes(0x20).unwrap();
    f.set_nt_acl_blob(Some(&[1, 0, 4, 0x80])).unwrap();
    assert_eq!(f.list_eas().unwrap(), vec![]);
    f.set_ea("MINE", Some(b"1")).unwrap();
    assert_eq!(f.list_eas().unwrap(), vec![ea("MINE", b"1")]);
    assert_eq!(f.stat().unwrap().dos_attributes, Some(0x20));
}

fn a_read_only_share_refuses_to_set_eas(share: &dyn Share, ro: &dyn Share) {
    let f = open(share, "r", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    f.set_ea("A", Some(b"1")).unwrap();
    let r = ro
        .open(
            &ringshare_vfs::server_who(),
            &p("r"),
            &OpenOptions::read_existing(),
        )
        .unwrap()
        .node;
    assert_eq!(r.list_eas().unwrap(), vec![ea("A", b"1")]);
    assert_eq!(r.set_ea("A", None), Err(FsError::ReadOnly));
}

#[test]
fn memory_backend_sets_lists_replaces_and_deletes_eas() {
    eas_are_set_listed_replaced_and_deleted(&MemShare::new());
}

#[test]
fn memory_backend_refuses_bad_and_reserved_ea_names() {
    bad_names_and_values_are_refused(&MemShare::new());
}

#[test]
fn memory_backend_lists_no_metadata_of_its_own_as_eas() {
    the_backends_own_metadata_is_not_listed(&MemShare::new());
}

#[test]
fn memory_backend_read_only_share_refuses_to_set_eas() {
    let m = MemShare::new();
    a_read_only_share_refuses_to_set_eas(&m, &m.clone().with_read_only(true));
}

/// A share in a fresh directory, or `None` when its filesystem has no user xattrs.
fn posix_share(tag: &str) -> Option<(TempDir, PosixShare)> {
    let dir = TempDir::new(tag);
    let probe = dir.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    if rustix::fs::setxattr(&probe, "user.probe", b"1", rustix::fs::XattrFlags::empty()).is_err() {
        eprintln!("skipped: no user xattrs on {}", dir.path().display());
        return None;
    }
    std::fs::remove_file(&probe).unwrap();
    let share = PosixShare::new(dir.path()).expect("posix share");
    Some((dir, share))
}

#[test]
fn posix_backend_sets_lists_replaces_and_deletes_eas() {
    if let Some((_d, s)) = posix_share("ea-set") {
        eas_are_set_listed_replaced_and_deleted(&s);
    }
}

#[test]
fn posix_backend_refuses_bad_and_reserved_ea_names() {
    if let Some((_d, s)) = posix_share("ea-bad") {
        bad_names_and_values_are_refused(&s);
    }
}

#[test]
fn posix_backend_lists_no_ringshare_xattrs_as_eas() {
    if let Some((_d, s)) = posix_share("ea-own") {
        the_backends_own_metadata_is_not_listed(&s);
    }
}

#[test]
fn posix_backend_read_only_share_refuses_to_set_eas() {
    if let Some((d, s)) = posix_share("ea-ro") {
        let ro = PosixShare::new(d.path()).unwrap().with_read_only(true);
        a_read_only_share_refuses_to_set_eas(&s, &ro);
    }
}

#[test]
fn posix_backend_stores_ea_name_as_user_xattr_and_finds_other_cases() {
    let Some((d, s)) = posix_share("ea-xattr") else {
        return;
    };
    let f = open(&s, "f", file_opts(OpenMode::OpenOrCreate))
        .unwrap()
        .node;
    f.set_ea("MixedCase", Some(b"v")).unwrap();
    let path = d.path().join("f");
    let mut buf = [0u8; 8];
    let n = rustix::fs::getxattr(&path, "user.MIXEDCASE", &mut buf[..]).unwrap();
    assert_eq!(&buf[..n], b"v");
    // An xattr another tool wrote in lower case shows upper case, and
    // setting it under any case replaces it rather than adding a second one.
    rustix::fs::setxattr(&path, "user.lower", b"1", rustix::fs::XattrFlags::empty()).unwrap();
    // Xattrs that are not EAs (other namespaces, bad names, ours) stay hidden.
    rustix::fs::setxattr(&path, "user.a*b", b"1", rustix::fs::XattrFlags::empty()).unwrap();
    rustix::fs::setxattr(
        &path,
        "user.ringshare.x",
        b"1",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let mut got = f.list_eas().unwrap();
    got.sort();
    assert_eq!(got, vec![ea("LOWER", b"1"), ea("MIXEDCASE", b"v")]);
    f.set_ea("Lower", Some(b"2")).unwrap();
    let mut got = f.list_eas().unwrap();
    got.sort();
    assert_eq!(got, vec![ea("LOWER", b"2"), ea("MIXEDCASE", b"v")]);
    assert!(rustix::fs::getxattr(&path, "user.lower", &mut buf[..]).is_err());
    // The client cannot reach our own xattr through an EA name.
    assert_eq!(f.set_ea("ringshare.x", None), Err(FsError::AccessDenied));
    assert!(rustix::fs::getxattr(&path, "user.ringshare.x", &mut buf[..]).is_ok());
}
