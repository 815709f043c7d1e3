//! The index of a large directory's names (crates/vfs/src/posix/names.rs) keeps one inotify
//! instance for the whole process. The kernel charges an inotify instance, and every watch
//! added to it, to the effective uid that made it (`max_user_instances`, `max_user_watches`).
//! Root only: the thread switches to a user that needs no passwd entry (uid 59311).

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{creds, Creds, FsError, RelPath, Share, Who};

const CAROL: u32 = 59311;

fn carol() -> Who {
    creds::intern(Creds::new(CAROL, CAROL, vec![CAROL]))
}

/// Every inotify instance `who` may still make, made (held until dropped).
fn take_all_instances(who: &Who) -> Vec<OwnedFd> {
    creds::act_as(who).unwrap();
    let mut held = Vec::new();
    while let Ok(fd) = rustix::fs::inotify::init(rustix::fs::inotify::CreateFlags::CLOEXEC) {
        held.push(fd);
    }
    creds::act_as_server().unwrap();
    held
}

/// Whether some inotify descriptor of this process watches inode `ino` (/proc/self/fdinfo).
fn watched(ino: u64) -> bool {
    let want = format!(" ino:{ino:x} ");
    fs::read_dir("/proc/self/fdinfo").unwrap().any(|e| {
        fs::read_to_string(e.unwrap().path()).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("inotify ") && l.contains(&want))
        })
    })
}

#[test]
fn the_names_index_does_not_take_the_asking_users_inotify_instances() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("\n!!!!!!!! SKIPPED: needs root !!!!!!!!\n");
        return;
    }
    creds::enable().expect("root can switch credentials");
    let root = std::env::temp_dir().join(format!("rs-names-users-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("big")).unwrap();
    for i in 0..2000 {
        fs::write(root.join(format!("big/file-{i:05}.dat")), b"").unwrap();
    }
    let ino = fs::metadata(root.join("big")).unwrap().ino();
    let share = PosixShare::new(&root).unwrap();
    let big = RelPath::from_strs(&["big"]).unwrap();
    let carol = carol();

    // Carol asks while every inotify instance of hers is in use (by her own programs).
    let held = take_all_instances(&carol);
    let all = held.len();
    assert!(all > 0);
    let f = share.find_name_case_insensitive(&carol, &big, "FILE-00001.DAT");
    assert_eq!(f.as_deref(), Ok("file-00001.dat"));
    drop(held);
    // Her programs closed theirs: the next looks may index the directory.
    for _ in 0..2 {
        let f = share.find_name_case_insensitive(&carol, &big, "missing");
        assert_eq!(f, Err(FsError::NotFound));
    }
    let indexed = watched(ino);
    let left = take_all_instances(&carol).len();
    let _ = fs::remove_dir_all(PathBuf::from(&root));
    assert!(
        indexed,
        "the directory is not indexed: the index stays off for everyone"
    );
    assert_eq!(left, all, "the index's instance is charged to carol");
}
