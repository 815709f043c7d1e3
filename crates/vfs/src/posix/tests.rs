use super::*;

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
    assert!(!memory_backed(proc_fd.as_fd()));
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
    let path = RelPath::from_components(["f"]).unwrap();
    let fd = share.openat2(&path, OFlags::PATH, 0).unwrap();
    let node = share
        .node(&crate::server_who(), fd, false, false, true)
        .unwrap()
        .node;
    assert!(node.is_path_only());
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
    let mut probe = [0u8; 8];
    let xattrs = rustix::fs::getxattr(dir.join("f"), DOS_ATTRIB_XATTR, &mut probe).is_ok();
    if xattrs {
        assert_eq!(node.stat().unwrap().dos_attributes, Some(0x21));
    }
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
fn malformed_dos_xattr_reads_as_none() {
    assert_eq!(decode_dos(&[1, 0, 0, 0, 0, 0, 0, 0], Ok(4)), Some(1));
    assert_eq!(decode_dos(&[1, 0, 0, 0, 9, 0, 0, 0], Ok(5)), None);
    assert_eq!(decode_dos(&[0; 8], Ok(2)), None);
    assert_eq!(decode_dos(&[0; 8], Err(Errno::NODATA)), None);
}

#[test]
fn times_convert_both_ways_including_before_the_epoch() {
    let ts = to_timespec(Some(-1));
    assert_eq!((ts.tv_sec, ts.tv_nsec), (-1, 999_999_999));
    let ts = to_timespec(Some(1_500_000_000_123_456_789));
    assert_eq!((ts.tv_sec, ts.tv_nsec), (1_500_000_000, 123_456_789));
    assert_eq!(to_timespec(None).tv_nsec, UTIME_OMIT);
}
