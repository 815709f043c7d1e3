//! The POSIX backend never reaches outside the share root, whatever symlinks the tree
//! holds. Layout of each test: `<tmp>/share` is the share, `<tmp>/outside` a sibling
//! holding a `secret` file that must stay unreachable. Destructive attempts target
//! `outside`, never system directories; `/etc` is only used for read attempts.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use common::*;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{FileKind, FsError, OpenMode, OpenOptions, RelPath, Share};

struct Fixture {
    tmp: TempDir,
    share: PosixShare,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = TempDir::new("jail");
        std::fs::create_dir(tmp.path().join("share")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/secret"), b"secret").unwrap();
        let share = PosixShare::new(&tmp.path().join("share")).unwrap();
        Fixture { tmp, share }
    }

    fn in_share(&self, rel: &str) -> PathBuf {
        self.tmp.path().join("share").join(rel)
    }

    fn outside(&self, rel: &str) -> PathBuf {
        self.tmp.path().join("outside").join(rel)
    }

    fn outside_names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.tmp.path().join("outside"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

#[test]
fn symlink_to_etc_cannot_be_opened_or_listed_through() {
    let f = Fixture::new();
    symlink("/etc", f.in_share("etc")).unwrap();
    let s = &f.share;
    assert_eq!(
        open_err(s, "etc", dir_opts(OpenMode::Existing)),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "etc", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "etc/passwd", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        s.stat(&ringshare_vfs::server_who(), &p("etc/passwd"))
            .unwrap_err(),
        FsError::Escapes
    );
    assert_eq!(
        s.find_name_case_insensitive(&ringshare_vfs::server_who(), &p("etc"), "PASSWD")
            .unwrap_err(),
        FsError::Escapes
    );
    // The link itself is visible, as a symlink.
    assert_eq!(
        s.stat(&ringshare_vfs::server_who(), &p("etc"))
            .unwrap()
            .kind,
        FileKind::Symlink
    );
    let root = open(s, "", dir_opts(OpenMode::Existing)).unwrap();
    let entries = root.node.read_dir().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].attr.kind, FileKind::Symlink);
}

#[test]
fn relpath_cannot_carry_dot_dot_or_separators() {
    for bad in [
        vec![".."],
        vec!["a", ".."],
        vec!["."],
        vec![""],
        vec!["a/b"],
        vec!["a\0b"],
        vec!["/"],
    ] {
        assert_eq!(
            RelPath::from_components(bad.clone()).unwrap_err(),
            FsError::InvalidName,
            "{bad:?}"
        );
    }
    assert_eq!(
        RelPath::root().join("..").unwrap_err(),
        FsError::InvalidName
    );
    assert_eq!(
        RelPath::from_components(["x".repeat(256)]).unwrap_err(),
        FsError::NameTooLong
    );
    assert!(RelPath::from_components(["..a", "b.."]).is_ok());
}

#[test]
fn absolute_symlink_to_root_fails_with_escapes() {
    let f = Fixture::new();
    symlink("/", f.in_share("abs")).unwrap();
    let s = &f.share;
    assert_eq!(
        open_err(s, "abs", dir_opts(OpenMode::Existing)),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "abs/etc/hostname", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "abs/tmp/x", file_opts(OpenMode::CreateNew)),
        FsError::Escapes
    );
    assert_eq!(
        s.stat(&ringshare_vfs::server_who(), &p("abs/etc"))
            .unwrap_err(),
        FsError::Escapes
    );
}

#[test]
fn relative_symlink_to_a_file_inside_the_share_works() {
    let f = Fixture::new();
    std::fs::create_dir(f.in_share("dir")).unwrap();
    std::fs::write(f.in_share("dir/file.txt"), b"inside").unwrap();
    symlink("dir/file.txt", f.in_share("link")).unwrap();
    symlink("../dir", f.in_share("dir/self")).unwrap();
    let s = &f.share;
    assert_eq!(read_file(s, "link"), b"inside");
    assert_eq!(read_file(s, "dir/self/file.txt"), b"inside");
    assert_eq!(
        s.stat(&ringshare_vfs::server_who(), &p("link"))
            .unwrap()
            .kind,
        FileKind::Symlink
    );
    let o = open(s, "link", OpenOptions::read_existing()).unwrap();
    assert_eq!(o.node.stat().unwrap().kind, FileKind::File);
}

#[test]
fn symlink_chain_leaving_the_share_fails() {
    let f = Fixture::new();
    std::fs::create_dir(f.in_share("sub")).unwrap();
    symlink("b", f.in_share("a")).unwrap();
    symlink("sub/c", f.in_share("b")).unwrap();
    symlink("../../outside/secret", f.in_share("sub/c")).unwrap();
    symlink("..", f.in_share("up")).unwrap();
    let s = &f.share;
    assert_eq!(
        open_err(s, "a", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "b", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "up/outside/secret", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "up", dir_opts(OpenMode::Existing)),
        FsError::Escapes
    );
}

#[test]
fn writes_through_an_escaping_symlink_change_nothing_outside() {
    let f = Fixture::new();
    symlink("../outside", f.in_share("out")).unwrap();
    symlink("../outside/new", f.in_share("dangling")).unwrap();
    std::fs::write(f.in_share("mine"), b"m").unwrap();
    let s = &f.share;
    assert_eq!(
        open_err(s, "out/secret", file_opts(OpenMode::Truncate)),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "out/created", file_opts(OpenMode::CreateNew)),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "out/newdir", dir_opts(OpenMode::CreateNew)),
        FsError::Escapes
    );
    assert!(open(s, "dangling", file_opts(OpenMode::OpenOrCreate)).is_err());
    assert!(open(s, "dangling", file_opts(OpenMode::TruncateOrCreate)).is_err());
    assert_eq!(
        s.unlink(&ringshare_vfs::server_who(), &p("out/secret"))
            .unwrap_err(),
        FsError::Escapes
    );
    assert_eq!(
        s.rename(
            &ringshare_vfs::server_who(),
            &p("mine"),
            &p("out/moved"),
            false
        )
        .unwrap_err(),
        FsError::Escapes
    );
    assert_eq!(
        s.rename(
            &ringshare_vfs::server_who(),
            &p("out/secret"),
            &p("stolen"),
            false
        )
        .unwrap_err(),
        FsError::Escapes
    );
    assert_eq!(
        s.rmdir(&ringshare_vfs::server_who(), &p("out/x"))
            .unwrap_err(),
        FsError::Escapes
    );
    assert_eq!(f.outside_names(), ["secret"]);
    assert_eq!(std::fs::read(f.outside("secret")).unwrap(), b"secret");
    // Removing the link itself is fine: it is an entry of the share.
    s.unlink(&ringshare_vfs::server_who(), &p("out")).unwrap();
    assert_eq!(f.outside_names(), ["secret"]);
}

#[test]
fn directory_swapped_for_a_symlink_between_stat_and_open_cannot_escape() {
    let f = Fixture::new();
    std::fs::create_dir(f.in_share("d")).unwrap();
    std::fs::write(f.in_share("d/secret"), b"mine").unwrap();
    let s = &f.share;
    assert!(s
        .stat(&ringshare_vfs::server_who(), &p("d"))
        .unwrap()
        .is_dir());
    // The swap an attacker with local access would race in.
    std::fs::remove_dir_all(f.in_share("d")).unwrap();
    symlink("../outside", f.in_share("d")).unwrap();
    assert_eq!(
        open_err(s, "d/secret", OpenOptions::read_existing()),
        FsError::Escapes
    );
    assert_eq!(
        open_err(s, "d", dir_opts(OpenMode::Existing)),
        FsError::Escapes
    );
    assert_eq!(
        s.stat(&ringshare_vfs::server_who(), &p("d/secret"))
            .unwrap_err(),
        FsError::Escapes
    );
    assert_eq!(
        s.find_name_case_insensitive(&ringshare_vfs::server_who(), &p("d"), "SECRET")
            .unwrap_err(),
        FsError::Escapes
    );
}

#[test]
fn an_open_directory_node_lists_only_what_is_beneath_it() {
    let f = Fixture::new();
    std::fs::create_dir(f.in_share("d")).unwrap();
    std::fs::write(f.in_share("d/x"), b"1").unwrap();
    let s = &f.share;
    let d = open(s, "d", dir_opts(OpenMode::Existing)).unwrap();
    // Rename the directory away under the open node: it still lists its own entries.
    std::fs::rename(f.in_share("d"), f.in_share("e")).unwrap();
    let names: Vec<String> = d
        .node
        .read_dir()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["x"]);
}

#[test]
fn opening_a_fifo_does_not_hang_and_is_refused_for_io() {
    let f = Fixture::new();
    let root = std::fs::File::open(f.tmp.path().join("share")).unwrap();
    rustix::fs::mkfifoat(&root, "fifo", rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
    let s = &f.share;
    assert_eq!(
        open_err(s, "fifo", OpenOptions::read_existing()),
        FsError::AccessDenied
    );
    assert_eq!(
        s.stat(&ringshare_vfs::server_who(), &p("fifo"))
            .unwrap()
            .kind,
        FileKind::Other(ringshare_vfs::Special::Fifo)
    );
}

#[test]
fn node_exposes_its_fd_for_io_uring() {
    let f = Fixture::new();
    let n = write_file(&f.share, "f", b"abc");
    let fd = n.fd().expect("posix nodes have an fd");
    assert_eq!(rustix::fs::fstat(fd).unwrap().st_size, 3);
    let status = rustix::fs::fcntl_getfl(fd).unwrap();
    assert!(
        !status.contains(rustix::fs::OFlags::NONBLOCK),
        "regular files are blocking for io_uring"
    );
    assert!(rustix::io::fcntl_getfd(fd)
        .unwrap()
        .contains(rustix::io::FdFlags::CLOEXEC));
}

#[test]
fn new_share_on_a_missing_root_fails() {
    let tmp = TempDir::new("missing");
    assert!(PosixShare::new(&tmp.path().join("nope")).is_err());
    std::fs::write(tmp.path().join("file"), b"").unwrap();
    assert!(PosixShare::new(&tmp.path().join("file")).is_err());
}
