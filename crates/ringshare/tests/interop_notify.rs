//! End to end: smbclient's `notify` (CHANGE_NOTIFY, [MS-SMB2] 3.3.5.19)
//! against `ringshare serve` sees files another client creates and files a
//! local program creates on the share's disk (inotify, read by worker 0).
//!
//! Needs smbclient (`apt-get install -y smbclient`); without it the tests
//! print a loud note and pass, as the other interop tests do.

use crate::common;

use std::time::Duration;

use common::{smbclient_or_skip, Server, ServerConfig};

const SEEN_WITHIN: Duration = Duration::from_secs(10);

#[test]
fn smbclient_notify_sees_files_another_client_and_local_programs_make_in_the_tree() {
    let test =
        "smbclient_notify_sees_a_file_another_client_creates_and_one_a_local_program_creates";
    if smbclient_or_skip(test) {
        notify_sees_the_tree(&ServerConfig::default());
    }
}

/// The same on a share whose file system calls are made off the I/O thread (FUSE, CephFS: issue
/// 33): the watches, the tree's walk and a new directory's watch are added in file system jobs
/// (docs/cluster-internals.md, "Kernel watches in jobs").
#[test]
fn smbclient_notify_sees_the_tree_on_a_share_whose_calls_are_made_off_the_io_thread() {
    let test = "smbclient_notify_sees_the_tree_on_a_share_whose_calls_are_made_off_the_io_thread";
    if smbclient_or_skip(test) {
        notify_sees_the_tree(&ServerConfig {
            extra_global: "    fs calls off io thread = yes\n",
            ..ServerConfig::default()
        });
    }
}

/// smbclient's `notify` of a tree sees a client's file, local programs' files (written and
/// removed), a file two levels down, a new directory and a file in it; ringshare's own create
/// once.
fn notify_sees_the_tree(config: &ServerConfig) {
    let server = Server::start(config, |dir| {
        std::fs::create_dir_all(dir.join("watched/sub/deeper")).unwrap();
    });
    let watcher = server
        .client()
        .timeout(Duration::from_secs(120))
        .spawn("notify watched");
    // The watch starts with smbclient's first request: local files are
    // written until one is reported (the watch is then in place).
    let mut armed = false;
    for i in 0..50 {
        std::fs::write(server.share_dir.join(format!("watched/probe{i}")), b"").unwrap();
        if watcher.wait_for("probe", Duration::from_millis(300)) {
            armed = true;
            break;
        }
    }
    assert!(
        armed,
        "no change reported at all:\n{}\n{}",
        watcher.output(),
        server.log()
    );
    std::fs::write(server.scratch.join("up.txt"), b"from a client").unwrap();
    server
        .client()
        .run("put up.txt watched\\from-smb.txt")
        .expect_ok("put");
    assert!(
        watcher.wait_for("0001 from-smb.txt", SEEN_WITHIN),
        "smbclient notify printed:\n{}\n--- server log ---\n{}",
        watcher.output(),
        server.log()
    );
    // Written by another program, straight onto the disk.
    std::fs::write(server.share_dir.join("watched/from-disk.txt"), b"local").unwrap();
    assert!(
        watcher.wait_for("0001 from-disk.txt", SEEN_WITHIN),
        "smbclient notify printed:\n{}\n--- server log ---\n{}",
        watcher.output(),
        server.log()
    );
    std::fs::remove_file(server.share_dir.join("watched/from-disk.txt")).unwrap();
    assert!(
        watcher.wait_for("0002 from-disk.txt", SEEN_WITHIN),
        "a local delete: {}",
        watcher.output()
    );
    // smbclient watches the tree: changes other programs make below the
    // directory are seen too, in directories that were there and in new ones.
    std::fs::write(server.share_dir.join("watched/sub/deeper/deep.txt"), b"d").unwrap();
    assert!(
        watcher.wait_for("0001 sub\\deeper\\deep.txt", SEEN_WITHIN),
        "a file two levels down: {}",
        watcher.output()
    );
    std::fs::create_dir(server.share_dir.join("watched/newdir")).unwrap();
    assert!(
        watcher.wait_for("0001 newdir", SEEN_WITHIN),
        "a new directory: {}",
        watcher.output()
    );
    std::fs::write(server.share_dir.join("watched/newdir/inside.txt"), b"i").unwrap();
    assert!(
        watcher.wait_for("0001 newdir\\inside.txt", SEEN_WITHIN),
        "a file in the new directory: {}",
        watcher.output()
    );
    // ringshare's own create is reported once, not again from the kernel.
    let out = watcher.output();
    assert_eq!(
        out.matches("0001 from-smb.txt").count(),
        1,
        "reported once:\n{out}"
    );
}
