use super::*;
use std::os::unix::fs::PermissionsExt;

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A share of a new directory on /dev/shm (tmpfs: it keeps change times)
/// holding a file `f`, removed with the guard; `None` without /dev/shm.
fn shm_share_with_f(tag: &str) -> Option<(PathBuf, Tmp, PosixShare)> {
    if !Path::new("/dev/shm").is_dir() {
        return None;
    }
    let dir = PathBuf::from(format!(
        "/dev/shm/ringshare-vfs-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir(&dir).unwrap();
    let guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"abc").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    Some((dir, guard, share))
}

#[test]
fn files_on_tmpfs_are_in_memory_and_procfs_is_not() {
    if !Path::new("/dev/shm").is_dir() {
        return;
    }
    let dir = PathBuf::from(format!("/dev/shm/ringshare-vfs-mem-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"abc").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let path = RelPath::from_components(["f"]).unwrap();
    let opened = share
        .open(&crate::server_who(), &path, &OpenOptions::read_existing())
        .unwrap();
    assert!(opened.node.in_memory());
    let proc_fd = rustix::fs::open("/proc", OFlags::PATH, Mode::empty()).unwrap();
    let proc_st = statx_fd(proc_fd.as_fd()).unwrap();
    assert!(!fs_kind(proc_fd.as_fd(), &proc_st).in_memory);
}

/// A node of `name` opened `O_PATH` (stat only), as the server.
fn stat_only_node(share: &PosixShare, name: &str) -> PosixNode {
    let path = RelPath::from_components([name]).unwrap();
    let fd = share.openat2(&path, OFlags::PATH, 0).unwrap();
    let node = share
        .node(&crate::server_who(), fd, false, false, true)
        .unwrap()
        .node;
    assert!(node.is_path_only());
    node
}

/// The `O_PATH` fallback (taken when `O_RDONLY` gives EACCES) cannot be reached by
/// permissions when tests run as root, so build such a node directly.
#[test]
fn stat_only_node_sets_and_reads_metadata_through_proc() {
    let dir = std::env::temp_dir().join(format!("ringshare-vfs-opath-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"abc").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let node = stat_only_node(&share, "f");
    assert_eq!(node.stat().unwrap().size, 3);
    let mut buf = [0u8; 3];
    assert_eq!(
        node.read_at(&mut buf, 0).unwrap_err(),
        FsError::AccessDenied
    );
    assert_eq!(node.write_at(b"x", 0).unwrap_err(), FsError::AccessDenied);
    assert_eq!(node.sync().unwrap_err(), FsError::AccessDenied);
    node.set_mode(0o600).unwrap();
    assert_eq!(node.stat().unwrap().mode, 0o600);
    let t = 1_234_567_890_000_000_000;
    node.set_times(&SetTimes {
        atime: None,
        mtime: Some(t),
        btime: None,
    })
    .unwrap();
    assert_eq!(node.stat().unwrap().mtime, t);
    node.set_dos_attributes(0x21).unwrap();
    let mut probe = [0u8; 256];
    let xattrs = rustix::fs::getxattr(dir.join("f"), "user.DOSATTRIB", &mut probe).is_ok();
    if xattrs {
        assert_eq!(node.stat().unwrap().dos_attributes, Some(0x21));
    }
}

/// A stat-only node (`O_PATH`) reaches its streams through `/proc`, as
/// its other xattrs; `sync` has nothing to flush there.
#[test]
fn a_stream_of_a_stat_only_open_is_read_and_written_through_proc() {
    let Some(dir) = xattr_dir("opath-stream") else {
        return;
    };
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"abc").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    assert!(share.streams_supported());
    let node = stat_only_node(&share, "f");
    let s = node
        .open_stream("s", OpenMode::CreateNew, true)
        .unwrap()
        .node;
    assert_eq!(s.write_at(b"stream", 0).unwrap(), 6);
    s.set_len(4).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(s.read_at(&mut buf, 0).unwrap(), 4);
    assert_eq!(&buf[..4], b"stre");
    s.sync().unwrap();
    assert_eq!(s.stat().unwrap().size, 4);
    node.rename_stream("s", "t", false).unwrap();
    assert_eq!(
        node.list_streams().unwrap(),
        vec![crate::StreamInfo {
            name: "t".into(),
            size: 4
        }]
    );
    node.remove_stream("t").unwrap();
    assert_eq!(node.list_streams().unwrap(), vec![]);
    let mut raw = [0u8; 8];
    assert!(rustix::fs::getxattr(dir.join("f"), "user.DosStream.t:$DATA", &mut raw[..]).is_err());
}

/// A directory of the system temp dir with xattr support, or `None`.
fn xattr_dir(tag: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("ringshare-dos-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let probe = dir.join("probe");
    std::fs::write(&probe, b"").unwrap();
    let ok = rustix::fs::setxattr(&probe, "user.x", b"1", rustix::fs::XattrFlags::empty()).is_ok();
    ok.then_some(dir)
}

#[test]
fn a_creation_time_set_is_kept_in_samba_dosattrib_with_the_attributes() {
    let Some(dir) = xattr_dir("btime") else {
        return;
    };
    std::fs::write(dir.join("f"), b"data").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let who = crate::server_who();
    let opened = share
        .open(
            &who,
            &RelPath::from_components(["f"]).unwrap(),
            &OpenOptions {
                write: true,
                ..OpenOptions::read_existing()
            },
        )
        .unwrap();
    let node = opened.node;
    node.set_dos_attributes(0x22).unwrap();
    let created = -58_000_000_000_000_000; // 1968
    node.set_times(&SetTimes {
        atime: None,
        mtime: None,
        btime: Some(created),
    })
    .unwrap();
    let a = node.stat().unwrap();
    assert_eq!(
        (a.dos_attributes, a.create_time),
        (Some(0x22), Some(created))
    );
    // What Samba 4.17 reads: a version 5 value.
    let mut buf = [0u8; 256];
    let n = rustix::fs::getxattr(dir.join("f"), "user.DOSATTRIB", &mut buf).unwrap();
    assert_eq!(&buf[..n], &crate::dosattrib::encode(0x22, created));
    // Attributes changed later keep the creation time.
    node.set_dos_attributes(0x21).unwrap();
    let a = share
        .stat(&who, &RelPath::from_components(["f"]).unwrap())
        .unwrap();
    assert_eq!(
        (a.dos_attributes, a.create_time),
        (Some(0x21), Some(created))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_migration_script_turns_former_ringshare_attributes_into_dosattrib() {
    let Some(dir) = xattr_dir("legacy") else {
        return;
    };
    let f = dir.join("old");
    std::fs::write(&f, b"").unwrap();
    let xf = rustix::fs::XattrFlags::empty();
    rustix::fs::setxattr(&f, DOS_ATTRIB_XATTR, &0x23u32.to_le_bytes(), xf).unwrap();
    let kept = dir.join("has-both");
    std::fs::write(&kept, b"").unwrap();
    rustix::fs::setxattr(&kept, DOS_ATTRIB_XATTR, &0x21u32.to_le_bytes(), xf).unwrap();
    let v5 = crate::dosattrib::encode(0x22, 1_000_000_000_000);
    rustix::fs::setxattr(&kept, "user.DOSATTRIB", &v5, xf).unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let who = crate::server_who();
    let path = RelPath::from_components(["old"]).unwrap();
    assert_eq!(
        share.stat(&who, &path).unwrap().dos_attributes,
        None,
        "not read"
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/migrate-dos-attributes.sh"
    );
    let out = std::process::Command::new(script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(share.stat(&who, &path).unwrap().dos_attributes, Some(0x23));
    let mut buf = [0u8; 8];
    assert!(
        rustix::fs::getxattr(&f, DOS_ATTRIB_XATTR, &mut buf).is_err(),
        "removed"
    );
    // A DOSATTRIB already there wins.
    let both = RelPath::from_components(["has-both"]).unwrap();
    let a = share.stat(&who, &both).unwrap();
    assert_eq!(
        (a.dos_attributes, a.create_time),
        (Some(0x22), Some(1_000_000_000_000))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dosattrib_written_by_samba_is_read() {
    let Some(dir) = xattr_dir("samba") else {
        return;
    };
    let f = dir.join("from-samba");
    std::fs::write(&f, b"").unwrap();
    // Samba 4.17's value: HIDDEN | ARCHIVE, created 1970-01-01T00:16:40Z.
    let v5 = [
        0, 0, 5, 0, 5, 0, 0, 0, 0x11, 0, 0, 0, 0x22, 0, 0, 0, 0, 0x64, 0x4a, 0x29, 0xe1, 0xb1,
        0x9d, 0x01,
    ];
    rustix::fs::setxattr(&f, "user.DOSATTRIB", &v5, rustix::fs::XattrFlags::empty()).unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let who = crate::server_who();
    let a = share
        .stat(&who, &RelPath::from_components(["from-samba"]).unwrap())
        .unwrap();
    assert_eq!(a.dos_attributes, Some(0x22));
    assert_eq!(a.create_time, Some(1_000_000_000_000));
    let root = share
        .open(
            &who,
            &RelPath::root(),
            &OpenOptions {
                directory: true,
                ..OpenOptions::read_existing()
            },
        )
        .unwrap()
        .node;
    assert_eq!(
        root.stat_entry("from-samba").unwrap().create_time,
        Some(1_000_000_000_000)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stat_entry_describes_one_entry_of_the_directory_and_never_leaves_it() {
    let dir = std::env::temp_dir().join(format!("ringshare-vfs-entry-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("sub/f"), b"abcde").unwrap();
    std::fs::write(dir.join("outside"), b"x").unwrap();
    std::os::unix::fs::symlink("f", dir.join("sub/link")).unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let sub = RelPath::from_components(["sub"]).unwrap();
    let node = share
        .open(&crate::server_who(), &sub, &OpenOptions::read_existing())
        .unwrap()
        .node;
    let f = node.stat_entry("f").unwrap();
    assert_eq!(
        (f.kind, f.size, f.dos_attributes),
        (FileKind::File, 5, None)
    );
    assert_eq!(
        f.ino,
        share
            .stat(&crate::server_who(), &sub.join("f").unwrap())
            .unwrap()
            .ino
    );
    // A symlink is described itself, not its target.
    let link = node.stat_entry("link").unwrap();
    assert_eq!((link.kind, link.size), (FileKind::Symlink, 1));
    assert_eq!(node.stat_entry("gone").unwrap_err(), FsError::NotFound);
    for name in ["", ".", "..", "../outside", "f/..", "a\0b"] {
        assert_eq!(
            node.stat_entry(name).unwrap_err(),
            FsError::InvalidName,
            "{name:?}"
        );
    }
    let file = share
        .open(
            &crate::server_who(),
            &sub.join("f").unwrap(),
            &OpenOptions::read_existing(),
        )
        .unwrap()
        .node;
    assert_eq!(file.stat_entry("x").unwrap_err(), FsError::NotADirectory);
}

/// A directory entry's DOS attributes read back the same through
/// `getxattrat` and, as on kernels before 6.13, through `/proc`. This
/// turns `getxattrat` off for the rest of this test process.
#[test]
fn entry_dos_attributes_read_back_with_and_without_getxattrat() {
    let dir = std::env::temp_dir().join(format!("ringshare-vfs-dosat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"x").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let f = RelPath::from_components(["f"]).unwrap();
    let node = share
        .open(&crate::server_who(), &f, &OpenOptions::read_existing())
        .unwrap()
        .node;
    if node.set_dos_attributes(0x22).is_err() || node.stat().unwrap().dos_attributes.is_none() {
        eprintln!("SKIPPED: no user xattrs in {}", dir.display());
        return;
    }
    let root = share
        .open(
            &crate::server_who(),
            &RelPath::root(),
            &OpenOptions::read_existing(),
        )
        .unwrap()
        .node;
    for _ in 0..2 {
        assert_eq!(root.stat_entry("f").unwrap().dos_attributes, Some(0x22));
        assert_eq!(
            share.stat(&crate::server_who(), &f).unwrap().dos_attributes,
            Some(0x22)
        );
        ringshare_engine::sys::pretend_getxattrat_is_missing();
    }
}

#[test]
fn times_convert_both_ways_including_before_the_epoch() {
    let ts = to_timespec(Some(-1));
    assert_eq!((ts.tv_sec, ts.tv_nsec), (-1, 999_999_999));
    let ts = to_timespec(Some(1_500_000_000_123_456_789));
    assert_eq!((ts.tv_sec, ts.tv_nsec), (1_500_000_000, 123_456_789));
    assert_eq!(to_timespec(None).tv_nsec, UTIME_OMIT);
}

#[test]
fn a_kept_dos_value_is_used_until_another_program_sets_the_attribute_again() {
    let Some((dir, _guard, share)) = shm_share_with_f("doskept") else {
        return;
    };
    let root = share
        .open(
            &crate::server_who(),
            &RelPath::root(),
            &OpenOptions::read_existing(),
        )
        .unwrap()
        .node;
    // Just written: read afresh, not kept.
    assert_eq!(root.stat_entry("f").unwrap().dos_attributes, None);
    // As if the file had been listed two seconds after its last change, with
    // HIDDEN set then: the kept value is what a listing shows now.
    let st = rustix::fs::statx(
        &share.root,
        "f",
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )
    .unwrap();
    let stamp = stamp_on(
        &st,
        share.root_fs.dos_kept.expect("tmpfs keeps change times"),
    )
    .unwrap();
    let hidden = crate::dosattrib::DosInfo {
        attributes: 0x02,
        create_time: None,
    };
    doscache::put(&stamp, Some(hidden), stamp.ctime + 3_000_000_000);
    assert_eq!(root.stat_entry("f").unwrap().dos_attributes, Some(0x02));
    // Another program sets the attribute: the change time moves, so the
    // value is read again.
    let system = crate::dosattrib::encode(0x04, 0);
    rustix::fs::setxattr(
        dir.join("f"),
        crate::dosattrib::XATTR,
        &system,
        XattrFlags::empty(),
    )
    .unwrap();
    assert_eq!(root.stat_entry("f").unwrap().dos_attributes, Some(0x04));
    let path = RelPath::from_components(["f"]).unwrap();
    let via_path = share.stat(&crate::server_who(), &path).unwrap();
    assert_eq!(via_path.dos_attributes, Some(0x04));
}

#[test]
fn a_file_found_without_a_legacy_descriptor_is_not_asked_again_until_its_change_time_moves() {
    let Some((dir, _guard, share)) = shm_share_with_f("nolegacy") else {
        return;
    };
    let path = RelPath::from_components(["f"]).unwrap();
    let node = share
        .open(&crate::server_who(), &path, &OpenOptions::read_existing())
        .unwrap()
        .node;
    let before = node.stat().unwrap();
    // Just written: read, and nothing kept.
    assert_eq!(
        node.legacy_security_descriptor(Some(&before)).unwrap(),
        None
    );
    // As if that read had come two seconds after the file's last change.
    let stamp = stamp_of(&before, share.root_fs.dos_kept.expect("tmpfs")).unwrap();
    doscache::put_legacy_sd_read(&stamp, false, before.ctime + 3_000_000_000);
    // Older ringshare's descriptor appears (the change time moves with it).
    let sd = [
        1u8, 0, 4, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    rustix::fs::setxattr(dir.join("f"), LEGACY_NTACL_XATTR, &sd, XattrFlags::empty()).unwrap();
    // Asked with the file as it was: kept, no read (what it held then).
    assert_eq!(
        node.legacy_security_descriptor(Some(&before)).unwrap(),
        None
    );
    // Asked with the file as it is now: read, and found.
    let after = node.stat().unwrap();
    assert_ne!(after.ctime, before.ctime);
    assert_eq!(
        node.legacy_security_descriptor(Some(&after))
            .unwrap()
            .as_deref(),
        Some(&sd[..])
    );
    assert_eq!(
        node.legacy_security_descriptor(None).unwrap().as_deref(),
        Some(&sd[..]),
        "asked without a stat: always read"
    );
}

/// Whether `fd`'s file description is in non-blocking mode.
fn is_nonblocking(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fcntl_getfl(fd)
        .unwrap()
        .contains(OFlags::NONBLOCK)
}

#[test]
fn a_regular_file_is_opened_non_blocking_until_it_does_io() {
    let dir = std::env::temp_dir().join(format!("ringshare-vfs-nonblock-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"abc").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let path = RelPath::from_components(["f"]).unwrap();
    let fd = share
        .openat2(&path, OFlags::RDONLY | OFlags::NONBLOCK, 0)
        .unwrap();
    let fresh = share
        .node(&crate::server_who(), fd, true, false, false)
        .unwrap();
    // A CREATE, QUERY_INFO and CLOSE that do no I/O never pay for the fcntl.
    assert!(fresh.node.stat().is_ok());
    assert!(is_nonblocking(fresh.node.fd.as_fd()));
    // Handed out (for io_uring, a splice or a copy): blocking from then on.
    let shared = fresh.node.shared_fd().unwrap();
    assert!(!is_nonblocking(shared.as_fd()));
    let mut buf = [0u8; 3];
    assert_eq!(fresh.node.read_at(&mut buf, 0).unwrap(), 3);
}

/// A snapshot's view (Previous Versions) reaches nothing outside its directory: a symlink in it
/// that climbs to the live share is not followed, `..` does not parse, and nothing in it
/// changes, though the directory is writable on disk.
#[test]
fn a_read_only_view_is_confined_to_its_directory_and_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("ringshare-vfs-view-{}", std::process::id()));
    let snap = dir.join(".snapshots/@GMT-2026.11.01-10.00.00");
    std::fs::create_dir_all(&snap).unwrap();
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("live.txt"), b"live").unwrap();
    std::fs::write(snap.join("f"), b"old").unwrap();
    std::os::unix::fs::symlink("../../live.txt", snap.join("out")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", snap.join("abs")).unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let who = crate::server_who();
    let at = RelPath::from_components([".snapshots", "@GMT-2026.11.01-10.00.00"]).unwrap();
    let view = share.read_only_view(&who, &at).unwrap();
    let path = |n: &str| RelPath::from_components([n]).unwrap();
    let node = view
        .open(&who, &path("f"), &OpenOptions::read_existing())
        .unwrap()
        .node;
    let mut buf = [0u8; 8];
    assert_eq!(node.read_at(&mut buf, 0).unwrap(), 3);
    for link in ["out", "abs"] {
        let err = view
            .open(&who, &path(link), &OpenOptions::read_existing())
            .unwrap_err();
        assert_eq!(err, FsError::Escapes, "{link}");
    }
    assert!(RelPath::from_components([".."]).is_err());
    let write = OpenOptions {
        write: true,
        ..OpenOptions::read_existing()
    };
    // A snapshot's file is opened for writing as Samba 4.22 opens it: granted, its descriptor
    // for reading only, and nothing written through it.
    assert!(view.is_snapshot());
    let opened = view.open(&who, &path("f"), &write).unwrap();
    assert!(!opened.write);
    assert_eq!(
        opened.node.write_at(b"new", 0).unwrap_err(),
        FsError::ReadOnly
    );
    assert!(
        opened.node.access().unwrap().write,
        "the file's mode lets its owner write"
    );
    let write_or_create = OpenOptions {
        mode: OpenMode::OpenOrCreate,
        ..write
    };
    assert_eq!(
        view.open(&who, &path("new"), &write_or_create).unwrap_err(),
        FsError::ReadOnly
    );
    let overwrite = OpenOptions {
        mode: OpenMode::Truncate,
        ..write
    };
    assert_eq!(
        view.open(&who, &path("f"), &overwrite).unwrap_err(),
        FsError::ReadOnly
    );
    assert!(!share.is_snapshot());
    let create = OpenOptions {
        mode: OpenMode::OpenOrCreate,
        ..OpenOptions::read_existing()
    };
    assert_eq!(
        view.open(&who, &path("new"), &create).unwrap_err(),
        FsError::ReadOnly
    );
    assert_eq!(
        view.unlink(&who, &path("f")).unwrap_err(),
        FsError::ReadOnly
    );
    assert_eq!(
        view.rename(&who, &path("f"), &path("g"), false)
            .unwrap_err(),
        FsError::ReadOnly
    );
    assert_eq!(node.set_len(0).unwrap_err(), FsError::ReadOnly);
    assert_eq!(std::fs::read(snap.join("f")).unwrap(), b"old");
    assert!(!snap.join("new").exists());
    // A directory that is not there is no view.
    let missing = RelPath::from_components([".snapshots", "@GMT-2020.01.01-00.00.00"]).unwrap();
    assert_eq!(
        share.read_only_view(&who, &missing).unwrap_err(),
        FsError::NotFound
    );
}

#[test]
fn a_reparse_point_is_kept_in_samba_smbreparse_with_its_attribute_and_survives_attribute_sets() {
    let Some(dir) = xattr_dir("reparse") else {
        return;
    };
    let _guard = Tmp(dir.clone());
    std::fs::write(dir.join("f"), b"data").unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let who = crate::server_who();
    let f = RelPath::from_components(["f"]).unwrap();
    let write = OpenOptions {
        write: true,
        ..OpenOptions::read_existing()
    };
    let node = share.open(&who, &f, &write).unwrap().node;
    let buffer = [0x25, 0, 0, 0x80, 2, 0, 0, 0, b'h', b'i'];
    node.set_reparse_point(Some(&buffer)).unwrap();
    assert_eq!(node.reparse_point().unwrap().as_deref(), Some(&buffer[..]));
    let mut raw = [0u8; 64];
    let n = rustix::fs::getxattr(dir.join("f"), "user.SmbReparse", &mut raw).unwrap();
    assert_eq!(&raw[..n], &buffer);
    let root = share
        .open(&who, &RelPath::root(), &OpenOptions::read_existing())
        .unwrap()
        .node;
    assert_eq!(
        root.entry_reparse_point("f").unwrap().as_deref(),
        Some(&buffer[..])
    );
    let attrs = |n: &dyn Node| n.stat().unwrap().dos_attributes;
    assert_eq!(attrs(node.as_ref()), Some(0x20 | crate::ATTR_REPARSE_POINT));
    // A client's attributes neither clear nor set it.
    node.set_dos_attributes(0x21).unwrap();
    assert_eq!(attrs(node.as_ref()), Some(0x21 | crate::ATTR_REPARSE_POINT));
    node.set_reparse_point(None).unwrap();
    assert_eq!(attrs(node.as_ref()), Some(0x21));
    assert_eq!(node.reparse_point().unwrap(), None);
    node.set_dos_attributes(0x20 | crate::ATTR_REPARSE_POINT)
        .unwrap();
    assert_eq!(attrs(node.as_ref()), Some(0x20));
    // Not an EA a client sees.
    node.set_reparse_point(Some(&buffer)).unwrap();
    assert!(node.list_eas().unwrap().is_empty());
}

#[test]
fn a_symlink_opened_itself_shows_its_target_and_changes_nothing_it_points_to() {
    let Some(dir) = xattr_dir("nofollow") else {
        return;
    };
    let _guard = Tmp(dir.clone());
    let outside = dir.with_extension("outside");
    std::fs::write(&outside, b"secret").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
    let share_dir = dir.join("share");
    std::fs::create_dir(&share_dir).unwrap();
    std::os::unix::fs::symlink(&outside, share_dir.join("out")).unwrap();
    let share = PosixShare::new(&share_dir).unwrap();
    let who = crate::server_who();
    let out = RelPath::from_components(["out"]).unwrap();
    let opts = OpenOptions {
        read: false,
        no_follow: true,
        ..OpenOptions::read_existing()
    };
    let opened = share.open(&who, &out, &opts).unwrap();
    let node = opened.node;
    assert_eq!(node.stat().unwrap().kind, FileKind::Symlink);
    assert_eq!(
        node.link_target().unwrap(),
        outside.as_os_str().as_encoded_bytes()
    );
    assert!(node.set_mode(0o600).is_err());
    assert!(node.set_reparse_point(Some(&[0; 8])).is_err());
    assert!(node.set_ea("X", Some(b"1")).is_err());
    node.set_dos_attributes(0x21).unwrap();
    assert!(node.set_times(&SetTimes::default()).is_err());
    assert!(node.read_at(&mut [0; 4], 0).is_err());
    let meta = std::fs::metadata(&outside).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    let mut raw = [0u8; 64];
    assert!(rustix::fs::getxattr(&outside, "user.DOSATTRIB", &mut raw).is_err());
    // Without `no_follow` the open follows (here: out of the share, refused).
    assert!(share
        .open(&who, &out, &OpenOptions::read_existing())
        .is_err());
    let _ = std::fs::remove_file(&outside);
}

#[test]
fn a_name_matches_its_lowercase_form_whatever_its_case_and_script() {
    assert!(lowercases_to("Report.DOCX", "report.docx"));
    assert!(!lowercases_to("Report.DOCX", "report.doc"));
    assert!(
        !lowercases_to("Report.DOCX", "reporT.docx"),
        "the second side is lowercase already"
    );
    assert!(lowercases_to("ÄRGER.txt", "ärger.txt"));
    assert!(!lowercases_to("ÄRGER.txt", "arger.txt"));
    assert!(!lowercases_to("Arger.txt", "ärger.txt"));
    for (name, other) in [("İx", "i̇x"), ("ΟΔΟΣ", "οδος"), ("Straße", "strasse")] {
        assert_eq!(lowercases_to(name, other), name.to_lowercase() == other);
    }
}

/// What a local program sees of a node's POSIX locks: whether a `kind` lock on the range
/// would conflict, asked through a descriptor of its own.
fn locked_for_others(dir: &Path, kind: OfdLock, start: i64, len: i64) -> bool {
    let other = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("f"))
        .unwrap();
    ringshare_engine::sys::ofd_getlk(other.as_fd(), kind, start, len).unwrap()
}

#[test]
fn a_write_lock_on_a_read_only_node_is_a_read_lock_and_a_read_lock_on_a_write_only_node_none() {
    let Some((dir, _guard, share)) = shm_share_with_f("posixlock") else {
        return;
    };
    let path = RelPath::from_components(["f"]).unwrap();
    let who = crate::server_who();
    let reader = share
        .open(&who, &path, &OpenOptions::read_existing())
        .unwrap();
    assert!(reader.node.posix_lock(OfdLock::Write, 0, 10).unwrap());
    assert!(
        !locked_for_others(&dir, OfdLock::Read, 0, 10),
        "readers pass"
    );
    assert!(
        locked_for_others(&dir, OfdLock::Write, 0, 10),
        "writers do not"
    );
    assert!(reader.node.posix_lock(OfdLock::Unlock, 0, 10).unwrap());
    assert!(!locked_for_others(&dir, OfdLock::Write, 0, 10));

    let write_only = OpenOptions {
        read: false,
        write: true,
        ..OpenOptions::read_existing()
    };
    let writer = share.open(&who, &path, &write_only).unwrap();
    assert!(writer.node.posix_lock(OfdLock::Write, 20, 10).unwrap());
    assert!(locked_for_others(&dir, OfdLock::Read, 20, 10));
    assert!(
        writer.node.posix_lock(OfdLock::Read, 40, 10).unwrap(),
        "not an error"
    );
    assert!(
        !locked_for_others(&dir, OfdLock::Write, 40, 10),
        "nothing is locked: F_RDLCK needs read access"
    );
    // Another node's lock is in the way of a conflicting one.
    assert!(!reader.node.posix_lock(OfdLock::Read, 25, 1).unwrap());
    assert!(reader.node.posix_locked(OfdLock::Read, 20, 1).unwrap());
    assert!(
        !writer.node.posix_locked(OfdLock::Write, 20, 1).unwrap(),
        "its own"
    );
}

/// A share knows when it is set up whether its calls may wait on a network: not on file
/// systems whose files only this kernel changes (tmpfs here), yes on any other (procfs stands
/// in for FUSE or NFS: its type is none of those); its files' io_uring READs and WRITEs are
/// then handed to a worker at once ([`Node::ring_io_may_block`]).
#[test]
fn a_share_on_a_file_system_only_this_kernel_changes_does_not_wait_on_a_network() {
    if let Some((_, _tmp, share)) = shm_share_with_f("network") {
        assert!(!share.may_wait_on_network(), "tmpfs");
        let node = stat_only_node(&share, "f");
        assert!(
            !node.ring_io_may_block(),
            "its files' ring I/O is tried inline"
        );
    }
    let other = PosixShare::new(std::path::Path::new("/proc/self")).unwrap();
    assert!(other.may_wait_on_network());
    let node = stat_only_node(&other, "status");
    assert!(
        node.ring_io_may_block(),
        "its files' ring I/O goes to a worker at once"
    );
}

#[test]
fn a_file_named_exactly_is_opened_in_one_go_with_the_attributes_a_stat_gives() {
    let Some((dir, _guard, share)) = shm_share_with_f("exact") else {
        return;
    };
    std::fs::create_dir(dir.join("d")).unwrap();
    std::fs::write(dir.join("d/g"), b"hello").unwrap();
    let system = crate::dosattrib::encode(0x04, 0);
    rustix::fs::setxattr(
        dir.join("d/g"),
        crate::dosattrib::XATTR,
        &system,
        XattrFlags::empty(),
    )
    .unwrap();
    let who = crate::server_who();
    let path = RelPath::from_components(["d", "g"]).unwrap();
    let opts = OpenOptions {
        write: true,
        ..OpenOptions::read_existing()
    };
    let opened = share.open_exact(&who, &path, &opts).unwrap();
    let stat = share.stat(&who, &path).unwrap();
    assert_eq!(stat.dos_attributes, Some(0x04));
    assert_eq!(opened.attr, Some(stat));
    assert!(opened.read && opened.write && !opened.created && !opened.truncated);
    opened.node.write_at(b"J", 0).unwrap();
    assert_eq!(std::fs::read(dir.join("d/g")).unwrap(), b"Jello");
}

#[test]
fn what_is_not_a_file_or_directory_named_exactly_is_left_to_the_look_up() {
    let Some((dir, _guard, share)) = shm_share_with_f("notexact") else {
        return;
    };
    std::fs::create_dir(dir.join("d")).unwrap();
    std::os::unix::fs::symlink("f", dir.join("to-f")).unwrap();
    std::os::unix::fs::symlink("d", dir.join("to-d")).unwrap();
    std::fs::write(dir.join("d/g"), b"x").unwrap();
    let who = crate::server_who();
    let opts = OpenOptions::read_existing();
    let exact = |names: &[&str]| {
        let path = RelPath::from_components(names.iter().copied()).unwrap();
        share.open_exact(&who, &path, &opts).is_ok()
    };
    assert!(exact(&["f"]) && exact(&["d", "g"]));
    assert!(!exact(&["to-f"]), "a symlink at the end");
    assert!(!exact(&["to-d", "g"]), "a symlink on the way");
    assert!(
        exact(&["d"]),
        "a directory, as an open that may find one opens it"
    );
    let d = RelPath::from_components(["d"]).unwrap();
    let file_only = OpenOptions {
        non_directory: true,
        ..opts
    };
    assert!(
        share.open_exact(&who, &d, &file_only).is_err(),
        "a directory"
    );
    assert!(!exact(&["F"]), "another case");
    assert!(!exact(&["missing"]));
    // Every one of them is still there for the look-up and the open.
    let to_f = RelPath::from_components(["to-f"]).unwrap();
    assert!(share.open(&who, &to_f, &opts).is_ok());
    // An open that would make, truncate or take what it can is not this one's.
    let path = RelPath::from_components(["f"]).unwrap();
    for opts in [
        OpenOptions {
            mode: OpenMode::OpenOrCreate,
            ..opts
        },
        OpenOptions {
            mode: OpenMode::Truncate,
            ..opts
        },
        OpenOptions {
            best_effort: true,
            ..opts
        },
    ] {
        assert!(share.open_exact(&who, &path, &opts).is_err());
    }
    assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"abc");
}
