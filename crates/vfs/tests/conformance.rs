//! One conformance suite, run against both backends: each check is a function taking
//! `&dyn Share` (a fresh, empty, writable share), and the macro at the bottom makes one
//! `#[test]` per check and backend.

use crate::common;

use common::*;
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{FileKind, FsError, OpenMode, OpenOptions, SetTimes, Share};

/// What the backend under test supports.
struct Caps {
    /// DOS attributes are stored (POSIX: the filesystem takes `user.*` xattrs).
    dos_attributes: bool,
}

// ---- OpenMode ----

fn existing_open_of_missing_file_is_not_found(share: &dyn Share, _: &Caps) {
    assert_eq!(
        open_err(share, "nope", file_opts(OpenMode::Existing)),
        FsError::NotFound
    );
    assert_eq!(
        open_err(share, "nope", OpenOptions::read_existing()),
        FsError::NotFound
    );
    assert_eq!(
        open_err(share, "nope", dir_opts(OpenMode::Existing)),
        FsError::NotFound
    );
}

fn missing_parent_is_path_not_found_not_not_found(share: &dyn Share, _: &Caps) {
    for mode in [
        OpenMode::Existing,
        OpenMode::CreateNew,
        OpenMode::OpenOrCreate,
        OpenMode::Truncate,
        OpenMode::TruncateOrCreate,
    ] {
        assert_eq!(
            open_err(share, "no/file", file_opts(mode)),
            FsError::PathNotFound,
            "{mode:?}"
        );
        assert_eq!(
            open_err(share, "no/dir", dir_opts(mode)),
            FsError::PathNotFound,
            "{mode:?}"
        );
    }
    write_file(share, "plain", b"x");
    assert_eq!(
        open_err(share, "plain/child", file_opts(OpenMode::Existing)),
        FsError::PathNotFound
    );
    assert_eq!(
        open_err(share, "plain/child", file_opts(OpenMode::OpenOrCreate)),
        FsError::PathNotFound
    );
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("no/file"))
            .unwrap_err(),
        FsError::PathNotFound
    );
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("plain/child"))
            .unwrap_err(),
        FsError::PathNotFound
    );
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("nope"))
            .unwrap_err(),
        FsError::NotFound
    );
}

fn create_new_creates_once_then_fails_with_exists(share: &dyn Share, _: &Caps) {
    let o = open(share, "f", file_opts(OpenMode::CreateNew)).unwrap();
    assert!(o.created);
    assert!(!o.truncated);
    assert_eq!(o.node.stat().unwrap().kind, FileKind::File);
    assert_eq!(o.node.stat().unwrap().size, 0);
    drop(o);
    assert_eq!(
        open_err(share, "f", file_opts(OpenMode::CreateNew)),
        FsError::Exists
    );
    mkdir(share, "d");
    assert_eq!(
        open_err(share, "d", file_opts(OpenMode::CreateNew)),
        FsError::Exists
    );
    assert_eq!(
        open_err(share, "d", dir_opts(OpenMode::CreateNew)),
        FsError::Exists
    );
    assert_eq!(
        open_err(share, "f", dir_opts(OpenMode::CreateNew)),
        FsError::Exists
    );
}

fn open_or_create_creates_then_opens_without_truncating(share: &dyn Share, _: &Caps) {
    let o = open(share, "f", file_opts(OpenMode::OpenOrCreate)).unwrap();
    assert!(o.created);
    o.node.write_at(b"keep", 0).unwrap();
    drop(o);
    let o = open(share, "f", file_opts(OpenMode::OpenOrCreate)).unwrap();
    assert!(!o.created);
    assert!(!o.truncated);
    assert_eq!(read_all(o.node.as_ref()), b"keep");
}

fn truncate_empties_an_existing_file_and_reports_it(share: &dyn Share, _: &Caps) {
    assert_eq!(
        open_err(share, "f", file_opts(OpenMode::Truncate)),
        FsError::NotFound
    );
    drop(write_file(share, "f", b"hello"));
    let o = open(share, "f", file_opts(OpenMode::Truncate)).unwrap();
    assert!(o.truncated);
    assert!(!o.created);
    assert_eq!(o.node.stat().unwrap().size, 0);
}

fn truncate_or_create_creates_then_truncates(share: &dyn Share, _: &Caps) {
    let o = open(share, "f", file_opts(OpenMode::TruncateOrCreate)).unwrap();
    assert!(o.created);
    assert!(!o.truncated);
    o.node.write_at(b"data", 0).unwrap();
    drop(o);
    let o = open(share, "f", file_opts(OpenMode::TruncateOrCreate)).unwrap();
    assert!(!o.created);
    assert!(o.truncated);
    assert_eq!(o.node.stat().unwrap().size, 0);
}

fn directory_create_modes_make_directories(share: &dyn Share, _: &Caps) {
    let o = open(share, "a", dir_opts(OpenMode::CreateNew)).unwrap();
    assert!(o.created);
    assert!(o.node.stat().unwrap().is_dir());
    let o = open(share, "b", dir_opts(OpenMode::OpenOrCreate)).unwrap();
    assert!(o.created);
    assert!(o.node.stat().unwrap().is_dir());
    let o = open(share, "b", dir_opts(OpenMode::OpenOrCreate)).unwrap();
    assert!(!o.created);
    let o = open(share, "b", dir_opts(OpenMode::Existing)).unwrap();
    assert!(!o.created);
    assert!(o.node.read_dir().unwrap().is_empty());
    mkdir(share, "a/nested");
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("a/nested"))
            .unwrap()
            .kind,
        FileKind::Directory
    );
}

fn directory_flag_on_a_file_is_not_a_directory(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "f", b"x"));
    assert_eq!(
        open_err(share, "f", dir_opts(OpenMode::Existing)),
        FsError::NotADirectory
    );
    assert_eq!(
        open_err(share, "f", dir_opts(OpenMode::OpenOrCreate)),
        FsError::NotADirectory
    );
}

fn non_directory_flag_on_a_directory_is_is_a_directory(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    let mut o = file_opts(OpenMode::Existing);
    o.non_directory = true;
    assert_eq!(open_err(share, "d", o), FsError::IsADirectory);
    o.write = false;
    assert_eq!(open_err(share, "d", o), FsError::IsADirectory);
    o.mode = OpenMode::OpenOrCreate;
    assert_eq!(open_err(share, "d", o), FsError::IsADirectory);
    assert_eq!(open_err(share, "", o), FsError::IsADirectory);
}

fn truncating_a_directory_is_is_a_directory(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    assert_eq!(
        open_err(share, "d", file_opts(OpenMode::Truncate)),
        FsError::IsADirectory
    );
    assert_eq!(
        open_err(share, "d", file_opts(OpenMode::TruncateOrCreate)),
        FsError::IsADirectory
    );
    assert_eq!(
        open_err(share, "d", dir_opts(OpenMode::Truncate)),
        FsError::IsADirectory
    );
}

fn plain_open_of_a_directory_gives_a_directory_node(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    drop(write_file(share, "d/x", b"1"));
    for opts in [
        OpenOptions::read_existing(),
        file_opts(OpenMode::Existing),
        file_opts(OpenMode::OpenOrCreate),
    ] {
        let o = open(share, "d", opts).unwrap();
        assert!(!o.created);
        assert!(o.node.stat().unwrap().is_dir());
        let names: Vec<String> = o
            .node
            .read_dir()
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["x".to_string()]);
        let mut buf = [0u8; 4];
        assert_eq!(
            o.node.read_at(&mut buf, 0).unwrap_err(),
            FsError::IsADirectory
        );
        assert_eq!(
            o.node.write_at(b"no", 0).unwrap_err(),
            FsError::IsADirectory
        );
    }
}

fn open_without_read_or_write_still_stats(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "f", b"abc"));
    let mut o = OpenOptions::read_existing();
    o.read = false;
    let opened = open(share, "f", o).unwrap();
    assert_eq!(opened.node.stat().unwrap().size, 3);
}

fn root_opens_as_a_directory_and_cannot_be_created_or_truncated(share: &dyn Share, _: &Caps) {
    let o = open(share, "", dir_opts(OpenMode::Existing)).unwrap();
    assert!(o.node.stat().unwrap().is_dir());
    let o = open(share, "", OpenOptions::read_existing()).unwrap();
    assert!(o.node.stat().unwrap().is_dir());
    assert_eq!(
        open_err(share, "", dir_opts(OpenMode::CreateNew)),
        FsError::Exists
    );
    assert_eq!(
        open_err(share, "", file_opts(OpenMode::Truncate)),
        FsError::IsADirectory
    );
    assert!(share
        .stat(&ringshare_vfs::server_who(), &p(""))
        .unwrap()
        .is_dir());
}

// ---- data ----

fn read_write_round_trip_at_offsets(share: &dyn Share, _: &Caps) {
    let o = open(share, "f", file_opts(OpenMode::CreateNew)).unwrap();
    let n = &o.node;
    assert_eq!(n.write_at(b"hello world", 0).unwrap(), 11);
    assert_eq!(n.write_at(b"W", 6).unwrap(), 1);
    assert_eq!(n.write_at(b"!", 13).unwrap(), 1);
    assert_eq!(read_all(n.as_ref()), b"hello World\0\0!");
    let mut buf = [0u8; 10];
    assert_eq!(n.read_at(&mut buf, 12).unwrap(), 2);
    assert_eq!(&buf[..2], b"\0!");
    assert_eq!(n.read_at(&mut buf, 14).unwrap(), 0);
    assert_eq!(n.read_at(&mut buf, 1 << 40).unwrap(), 0);
    assert_eq!(n.stat().unwrap().size, 14);
    assert_eq!(n.write_at(b"", 3).unwrap(), 0);
    drop(o);
    assert_eq!(read_file(share, "f"), b"hello World\0\0!");
}

fn set_len_extends_with_zeros_and_shrinks(share: &dyn Share, _: &Caps) {
    let n = write_file(share, "f", b"abcdef");
    n.set_len(3).unwrap();
    assert_eq!(read_all(n.as_ref()), b"abc");
    n.set_len(5).unwrap();
    assert_eq!(read_all(n.as_ref()), b"abc\0\0");
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("f"))
            .unwrap()
            .size,
        5
    );
    n.set_allocation(1 << 16).unwrap();
    assert_eq!(
        n.stat().unwrap().size,
        5,
        "allocation must not change the size"
    );
    n.sync().unwrap();
}

fn access_mode_of_the_open_is_enforced(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "f", b"abc"));
    let ro = open(share, "f", OpenOptions::read_existing()).unwrap();
    assert_eq!(
        ro.node.write_at(b"x", 0).unwrap_err(),
        FsError::AccessDenied
    );
    assert_eq!(ro.node.set_len(0).unwrap_err(), FsError::AccessDenied);
    let mut wo = file_opts(OpenMode::Existing);
    wo.read = false;
    let wo = open(share, "f", wo).unwrap();
    let mut buf = [0u8; 3];
    assert_eq!(
        wo.node.read_at(&mut buf, 0).unwrap_err(),
        FsError::AccessDenied
    );
    wo.node.write_at(b"X", 0).unwrap();
    assert_eq!(read_all(ro.node.as_ref()), b"Xbc");
}

fn unlinked_open_file_stays_readable(share: &dyn Share, _: &Caps) {
    let n = write_file(share, "f", b"still here");
    share.unlink(&ringshare_vfs::server_who(), &p("f")).unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("f"))
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(read_all(n.as_ref()), b"still here");
}

// ---- namespace ----

fn unlink_removes_files_only(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "f", b"x"));
    mkdir(share, "d");
    share.unlink(&ringshare_vfs::server_who(), &p("f")).unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("f"))
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(
        share
            .unlink(&ringshare_vfs::server_who(), &p("f"))
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(
        share
            .unlink(&ringshare_vfs::server_who(), &p("d"))
            .unwrap_err(),
        FsError::IsADirectory
    );
    assert_eq!(
        share
            .unlink(&ringshare_vfs::server_who(), &p("no/f"))
            .unwrap_err(),
        FsError::PathNotFound
    );
}

fn rmdir_removes_only_empty_directories(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    drop(write_file(share, "d/f", b"x"));
    assert_eq!(
        share
            .rmdir(&ringshare_vfs::server_who(), &p("d"))
            .unwrap_err(),
        FsError::NotEmpty
    );
    assert_eq!(
        share
            .rmdir(&ringshare_vfs::server_who(), &p("d/f"))
            .unwrap_err(),
        FsError::NotADirectory
    );
    assert_eq!(
        share
            .rmdir(&ringshare_vfs::server_who(), &p("gone"))
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(
        share
            .rmdir(&ringshare_vfs::server_who(), &p("no/gone"))
            .unwrap_err(),
        FsError::PathNotFound
    );
    share
        .unlink(&ringshare_vfs::server_who(), &p("d/f"))
        .unwrap();
    share.rmdir(&ringshare_vfs::server_who(), &p("d")).unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("d"))
            .unwrap_err(),
        FsError::NotFound
    );
}

fn rename_without_replace_refuses_an_existing_target(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "a", b"A"));
    drop(write_file(share, "b", b"B"));
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("a"), &p("b"), false)
            .unwrap_err(),
        FsError::Exists
    );
    assert_eq!(read_file(share, "a"), b"A");
    assert_eq!(read_file(share, "b"), b"B");
    share
        .rename(&ringshare_vfs::server_who(), &p("a"), &p("c"), false)
        .unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("a"))
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(read_file(share, "c"), b"A");
}

fn rename_with_replace_overwrites_the_target(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "a", b"A"));
    drop(write_file(share, "b", b"B"));
    share
        .rename(&ringshare_vfs::server_who(), &p("a"), &p("b"), true)
        .unwrap();
    assert_eq!(read_file(share, "b"), b"A");
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("a"))
            .unwrap_err(),
        FsError::NotFound
    );
}

fn rename_reports_missing_source_and_missing_target_parent(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "a", b"A"));
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("zz"), &p("b"), false)
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("a"), &p("no/b"), false)
            .unwrap_err(),
        FsError::PathNotFound
    );
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("no/a"), &p("b"), false)
            .unwrap_err(),
        FsError::PathNotFound
    );
}

fn rename_refuses_to_move_a_directory_into_itself(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    mkdir(share, "d/e");
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("d"), &p("d/e/d"), false)
            .unwrap_err(),
        FsError::InvalidName
    );
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("d"), &p("d/x"), true)
            .unwrap_err(),
        FsError::InvalidName
    );
    assert!(share
        .stat(&ringshare_vfs::server_who(), &p("d/e"))
        .unwrap()
        .is_dir());
}

fn rename_moves_directories_with_their_contents(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    mkdir(share, "t");
    drop(write_file(share, "d/f", b"F"));
    share
        .rename(&ringshare_vfs::server_who(), &p("d"), &p("t/d2"), false)
        .unwrap();
    assert_eq!(read_file(share, "t/d2/f"), b"F");
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("d"))
            .unwrap_err(),
        FsError::NotFound
    );
}

fn rename_with_replace_respects_kinds(share: &dyn Share, _: &Caps) {
    mkdir(share, "d");
    mkdir(share, "full");
    drop(write_file(share, "full/x", b"x"));
    drop(write_file(share, "f", b"f"));
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("d"), &p("full"), true)
            .unwrap_err(),
        FsError::NotEmpty
    );
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("f"), &p("d"), true)
            .unwrap_err(),
        FsError::IsADirectory
    );
    assert_eq!(
        share
            .rename(&ringshare_vfs::server_who(), &p("d"), &p("f"), true)
            .unwrap_err(),
        FsError::NotADirectory
    );
    mkdir(share, "empty");
    share
        .rename(&ringshare_vfs::server_who(), &p("d"), &p("empty"), true)
        .unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("d"))
            .unwrap_err(),
        FsError::NotFound
    );
}

fn rename_onto_itself_is_a_no_op(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "a", b"A"));
    share
        .rename(&ringshare_vfs::server_who(), &p("a"), &p("a"), false)
        .unwrap();
    assert_eq!(read_file(share, "a"), b"A");
}

fn read_dir_lists_sorted_entries_with_attributes(share: &dyn Share, _: &Caps) {
    drop(write_file(share, "b.txt", b"12345"));
    drop(write_file(share, "a.txt", b"1"));
    mkdir(share, "c");
    let o = open(share, "", dir_opts(OpenMode::Existing)).unwrap();
    let entries = o.node.read_dir().unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a.txt", "b.txt", "c"]);
    assert_eq!(entries[1].attr.size, 5);
    assert_eq!(entries[1].attr.kind, FileKind::File);
    assert_eq!(entries[2].attr.kind, FileKind::Directory);
    let f = open(share, "a.txt", OpenOptions::read_existing()).unwrap();
    assert_eq!(f.node.read_dir().unwrap_err(), FsError::NotADirectory);
}

fn stat_reports_kind_size_and_mode(share: &dyn Share, _: &Caps) {
    let mut o = file_opts(OpenMode::CreateNew);
    o.create_mode = 0o600;
    let n = open(share, "f", o).unwrap().node;
    n.write_at(b"xyz", 0).unwrap();
    let a = share.stat(&ringshare_vfs::server_who(), &p("f")).unwrap();
    assert_eq!(a.kind, FileKind::File);
    assert_eq!(a.size, 3);
    assert_eq!(a.mode & 0o777, 0o600);
    assert_eq!(a.ino, n.stat().unwrap().ino);
    n.set_mode(0o640).unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("f"))
            .unwrap()
            .mode
            & 0o777,
        0o640
    );
}

fn size_follows_writes_and_truncation_like_stat(share: &dyn Share, _: &Caps) {
    let n = open(share, "sz", file_opts(OpenMode::CreateNew))
        .unwrap()
        .node;
    assert_eq!(n.size().unwrap(), 0);
    n.write_at(b"0123456789", 5).unwrap();
    assert_eq!(n.size().unwrap(), 15);
    n.set_len(4).unwrap();
    assert_eq!(n.size().unwrap(), 4);
    assert_eq!(n.size().unwrap(), n.stat().unwrap().size);
}

fn times_can_be_set_and_none_leaves_them(share: &dyn Share, _: &Caps) {
    let n = write_file(share, "f", b"x");
    let t1: i128 = 1_000_000_000 * 1_000_000_000 + 123_456_700;
    let t2: i128 = 1_100_000_000 * 1_000_000_000;
    n.set_times(&SetTimes {
        atime: Some(t1),
        mtime: Some(t2),
        btime: None,
    })
    .unwrap();
    let a = n.stat().unwrap();
    assert_eq!(a.atime, t1);
    assert_eq!(a.mtime, t2);
    n.set_times(&SetTimes {
        atime: None,
        mtime: Some(t1),
        btime: None,
    })
    .unwrap();
    let a = share.stat(&ringshare_vfs::server_who(), &p("f")).unwrap();
    assert_eq!(a.atime, t1, "atime left alone");
    assert_eq!(a.mtime, t1);
    n.set_times(&SetTimes::default()).unwrap();
    assert_eq!(n.stat().unwrap().mtime, t1);
    n.write_at(b"y", 1).unwrap();
    assert_ne!(n.stat().unwrap().mtime, t1, "a write moves mtime");
}

fn dos_attributes_round_trip(share: &dyn Share, caps: &Caps) {
    let n = write_file(share, "f", b"x");
    assert_eq!(n.stat().unwrap().dos_attributes, None);
    n.set_dos_attributes(0x22).unwrap();
    if !caps.dos_attributes {
        eprintln!("skipping: no user xattrs on this filesystem");
        return;
    }
    assert_eq!(n.stat().unwrap().dos_attributes, Some(0x22));
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("f"))
            .unwrap()
            .dos_attributes,
        Some(0x22)
    );
    let root = open(share, "", dir_opts(OpenMode::Existing)).unwrap();
    let entries = root.node.read_dir().unwrap();
    assert_eq!(entries[0].attr.dos_attributes, Some(0x22));
    mkdir(share, "d");
    let d = open(share, "d", dir_opts(OpenMode::Existing)).unwrap();
    d.node.set_dos_attributes(0x10 | 0x4).unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("d"))
            .unwrap()
            .dos_attributes,
        Some(0x14)
    );
}

fn case_insensitive_lookup_finds_the_stored_name(share: &dyn Share, _: &Caps) {
    mkdir(share, "Dir");
    drop(write_file(share, "Dir/ReadMe.TXT", b"x"));
    drop(write_file(share, "Dir/other", b"x"));
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p("Dir"), "readme.txt")
            .unwrap(),
        "ReadMe.TXT"
    );
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p("Dir"), "README.TXT")
            .unwrap(),
        "ReadMe.TXT"
    );
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p("Dir"), "ReadMe.TXT")
            .unwrap(),
        "ReadMe.TXT"
    );
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p(""), "dir")
            .unwrap(),
        "Dir"
    );
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p("Dir"), "missing")
            .unwrap_err(),
        FsError::NotFound
    );
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p("nodir"), "x")
            .unwrap_err(),
        FsError::PathNotFound
    );
    drop(write_file(share, "Ärger", b"x"));
    assert_eq!(
        share
            .find_name_case_insensitive(&ringshare_vfs::server_who(), &p(""), "ärger")
            .unwrap(),
        "Ärger"
    );
}

fn statfs_reports_a_block_size(share: &dyn Share, _: &Caps) {
    let s = share.statfs().unwrap();
    assert!(s.block_size > 0);
    assert!(s.total_blocks >= s.free_blocks);
    assert!(s.name_max >= 255);
}

// ---- read-only ----

fn read_only_share_refuses_every_change(rw: &dyn Share, ro: &dyn Share) {
    drop(write_file(rw, "f", b"data"));
    mkdir(rw, "d");
    for opts in [
        file_opts(OpenMode::Existing),
        file_opts(OpenMode::CreateNew),
        file_opts(OpenMode::Truncate),
        file_opts(OpenMode::TruncateOrCreate),
        dir_opts(OpenMode::CreateNew),
    ] {
        assert_eq!(open_err(ro, "f", opts), FsError::ReadOnly, "{opts:?}");
    }
    let mut create = OpenOptions::read_existing();
    create.mode = OpenMode::OpenOrCreate;
    assert_eq!(open_err(ro, "new", create), FsError::ReadOnly);
    assert_eq!(
        open_err(ro, "newdir", dir_opts(OpenMode::OpenOrCreate)),
        FsError::ReadOnly
    );
    assert_eq!(
        ro.unlink(&ringshare_vfs::server_who(), &p("f"))
            .unwrap_err(),
        FsError::ReadOnly
    );
    assert_eq!(
        ro.rmdir(&ringshare_vfs::server_who(), &p("d")).unwrap_err(),
        FsError::ReadOnly
    );
    assert_eq!(
        ro.rename(&ringshare_vfs::server_who(), &p("f"), &p("g"), false)
            .unwrap_err(),
        FsError::ReadOnly
    );
    let n = ro
        .open(&ringshare_vfs::server_who(), &p("f"), &create)
        .unwrap()
        .node;
    assert_eq!(read_all(n.as_ref()), b"data");
    assert_eq!(n.write_at(b"x", 0).unwrap_err(), FsError::ReadOnly);
    assert_eq!(n.set_len(0).unwrap_err(), FsError::ReadOnly);
    assert_eq!(n.set_allocation(4096).unwrap_err(), FsError::ReadOnly);
    assert_eq!(
        n.set_times(&SetTimes::default()).unwrap_err(),
        FsError::ReadOnly
    );
    assert_eq!(n.set_dos_attributes(1).unwrap_err(), FsError::ReadOnly);
    assert_eq!(n.set_mode(0o600).unwrap_err(), FsError::ReadOnly);
    assert_eq!(
        ro.stat(&ringshare_vfs::server_who(), &p("f")).unwrap().size,
        4
    );
    let d = ro
        .open(
            &ringshare_vfs::server_who(),
            &p("d"),
            &dir_opts(OpenMode::Existing),
        )
        .unwrap();
    assert!(d.node.read_dir().unwrap().is_empty());
}

// ---- harness ----

fn posix_xattrs_supported(dir: &std::path::Path) -> bool {
    let probe = dir.join(".xattr-probe");
    if std::fs::write(&probe, b"").is_err() {
        return false;
    }
    let ok = rustix::fs::setxattr(
        &probe,
        "user.ringshare.probe",
        b"1",
        rustix::fs::XattrFlags::empty(),
    )
    .is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

fn with_posix(check: fn(&dyn Share, &Caps)) {
    let tmp = TempDir::new("conf");
    let caps = Caps {
        dos_attributes: posix_xattrs_supported(tmp.path()),
    };
    let share = PosixShare::new(tmp.path()).unwrap();
    check(&share, &caps);
}

fn with_memory(check: fn(&dyn Share, &Caps)) {
    let share = MemShare::new();
    check(
        &share,
        &Caps {
            dos_attributes: true,
        },
    );
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod posix_backend {
            $( #[test] fn $name() { super::with_posix(super::$name) } )*
        }
        mod memory_backend {
            $( #[test] fn $name() { super::with_memory(super::$name) } )*
        }
    };
}

conformance!(
    existing_open_of_missing_file_is_not_found,
    missing_parent_is_path_not_found_not_not_found,
    create_new_creates_once_then_fails_with_exists,
    open_or_create_creates_then_opens_without_truncating,
    truncate_empties_an_existing_file_and_reports_it,
    truncate_or_create_creates_then_truncates,
    directory_create_modes_make_directories,
    directory_flag_on_a_file_is_not_a_directory,
    non_directory_flag_on_a_directory_is_is_a_directory,
    truncating_a_directory_is_is_a_directory,
    plain_open_of_a_directory_gives_a_directory_node,
    open_without_read_or_write_still_stats,
    root_opens_as_a_directory_and_cannot_be_created_or_truncated,
    read_write_round_trip_at_offsets,
    set_len_extends_with_zeros_and_shrinks,
    access_mode_of_the_open_is_enforced,
    unlinked_open_file_stays_readable,
    unlink_removes_files_only,
    rmdir_removes_only_empty_directories,
    rename_without_replace_refuses_an_existing_target,
    rename_with_replace_overwrites_the_target,
    rename_reports_missing_source_and_missing_target_parent,
    rename_refuses_to_move_a_directory_into_itself,
    rename_moves_directories_with_their_contents,
    rename_with_replace_respects_kinds,
    rename_onto_itself_is_a_no_op,
    read_dir_lists_sorted_entries_with_attributes,
    stat_reports_kind_size_and_mode,
    size_follows_writes_and_truncation_like_stat,
    times_can_be_set_and_none_leaves_them,
    dos_attributes_round_trip,
    case_insensitive_lookup_finds_the_stored_name,
    statfs_reports_a_block_size,
);

#[test]
fn posix_read_only_share_refuses_every_change() {
    let tmp = TempDir::new("ro");
    let rw = PosixShare::new(tmp.path()).unwrap();
    let ro = PosixShare::new(tmp.path()).unwrap().with_read_only(true);
    read_only_share_refuses_every_change(&rw, &ro);
}

#[test]
fn memory_read_only_share_refuses_every_change() {
    let rw = MemShare::new();
    let ro = rw.clone().with_read_only(true);
    read_only_share_refuses_every_change(&rw, &ro);
}
