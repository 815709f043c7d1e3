//! Per-thread credentials and io_uring personalities (crates/engine/src/creds.rs,
//! personality.rs), on the real kernel. Switching needs root, as the server
//! does when it acts as users (CI runs as root): without root these tests
//! fail with a clear message under `CI`, and skip loudly otherwise.
//!
//! The uids and gids used here (59xxx) need no passwd entry: the kernel does
//! not look names up.

use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringshare_engine::creds::{self, Creds};
use ringshare_engine::{Ring, RingConfig, SharedFd};
use support::wait_for;

mod support;

const ALICE: u32 = 59101;
const BOB: u32 = 59102;
const PROJECT: u32 = 59150;

fn root_or_skip(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        creds::enable().expect("root can switch credentials");
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} switches thread credentials and needs root (CI runs as root)"
    );
    eprintln!("\n!!!!!!!! SKIPPED {test}: needs root !!!!!!!!\n");
    false
}

fn alice() -> Arc<Creds> {
    creds::intern(Creds::new(ALICE, ALICE, vec![ALICE, PROJECT]))
}

fn bob() -> Arc<Creds> {
    creds::intern(Creds::new(BOB, BOB, vec![BOB]))
}

/// A directory removed on drop, on tmpfs (every ring read or write of a
/// tmpfs file runs in an io_uring worker) or on the disk (inline).
struct Dir(PathBuf);

impl Dir {
    fn new(base: &str, name: &str) -> Dir {
        let p = Path::new(base).join(format!("ringshare-creds-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir(&p).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        Dir(p)
    }

    /// A file with `mode`, owned by `uid:gid`, holding "secret".
    fn file(&self, name: &str, uid: u32, gid: u32, mode: u32) -> PathBuf {
        let p = self.0.join(name);
        let mut f = fs::File::create(&p).unwrap();
        f.write_all(b"secret").unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = creds::act_as_server();
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `Uid:`, `Gid:`, `Groups:` and `CapEff:` of the calling thread.
fn thread_status() -> (String, String, String, String) {
    let s = fs::read_to_string("/proc/thread-self/status").unwrap();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    (
        field("Uid:"),
        field("Gid:"),
        field("Groups:"),
        field("CapEff:"),
    )
}

fn open_rw(p: &Path) -> SharedFd {
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(p)
        .unwrap();
    Arc::new(OwnedFd::from(f))
}

fn mode_of(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_thread_acting_as_a_user_has_its_ids_and_groups_and_no_capability_while_others_stay_root() {
    if !root_or_skip("a_thread_acting_as_a_user_has_its_ids...") {
        return;
    }
    let (_, _, _, root_caps) = thread_status();
    // A thread started now, before the switch (a thread started by a thread
    // acting as a user would inherit the user's credentials, as on fork).
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        wait.recv().unwrap();
        thread_status()
    });
    let a = alice();
    let before = creds::thread_switches();
    creds::act_as(&a).unwrap();
    creds::act_as(&a).unwrap();
    assert_eq!(
        creds::thread_switches(),
        before + 1,
        "the second call is free"
    );
    let (uid, gid, groups, caps) = thread_status();
    // Real, effective, saved, filesystem: the real and saved ids stay root.
    assert_eq!(uid, format!("0 {ALICE} 0 {ALICE}"));
    assert_eq!(gid, format!("0 {ALICE} 0 {ALICE}"));
    assert_eq!(groups, format!("{ALICE} {PROJECT}"));
    assert_eq!(caps, "0000000000000000");
    go.send(()).unwrap();
    let other = other.join().unwrap();
    assert_eq!(other.0, "0 0 0 0", "another thread is untouched");
    assert_eq!(other.3, root_caps);
    creds::act_as_server().unwrap();
    let (uid, _, _, caps) = thread_status();
    assert_eq!(uid, "0 0 0 0");
    assert_eq!(caps, root_caps, "capabilities come back with root");
}

/// Going from one user straight to another (as the server does when two
/// users' requests interleave on a thread) leaves exactly the second's ids,
/// groups and no capability, whichever of gid and groups the two share.
#[test]
fn switching_from_user_to_user_leaves_exactly_the_second_users_ids_and_groups() {
    if !root_or_skip("switching_from_user_to_user_leaves_exactly...") {
        return;
    }
    let (_, _, _, root_caps) = thread_status();
    let carol = |gid: u32, groups: &[u32]| creds::intern(Creds::new(59103, gid, groups.to_vec()));
    let same_gid_other_groups = creds::intern(Creds::new(59104, ALICE, vec![BOB]));
    let same_groups_other_gid = creds::intern(Creds::new(59105, BOB, vec![ALICE, PROJECT]));
    let all = [
        alice(),
        bob(),
        same_gid_other_groups,
        same_groups_other_gid,
        carol(PROJECT, &[ALICE, PROJECT]),
        alice(),
        carol(ALICE, &[]),
        bob(),
    ];
    for c in &all {
        creds::act_as(c).unwrap();
        let (uid, gid, groups, caps) = thread_status();
        let want_groups = c.groups().iter().map(u32::to_string).collect::<Vec<_>>();
        assert_eq!(uid, format!("0 {0} 0 {0}", c.uid()), "{c:?}");
        assert_eq!(gid, format!("0 {0} 0 {0}", c.gid()), "{c:?}");
        assert_eq!(groups, want_groups.join(" "), "{c:?}");
        assert_eq!(caps, "0000000000000000", "{c:?}");
    }
    creds::act_as_server().unwrap();
    let (uid, gid, groups, caps) = thread_status();
    assert_eq!(uid, "0 0 0 0");
    assert_eq!(gid, format!("0 {0} 0 {0}", creds::server().gid()));
    let server_groups = creds::server()
        .groups()
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>();
    assert_eq!(groups, server_groups.join(" "));
    assert_eq!(caps, root_caps);
}

#[test]
fn the_kernel_refuses_a_user_another_users_0600_file_and_grants_group_and_acl_access() {
    if !root_or_skip("the_kernel_refuses_a_user...") {
        return;
    }
    let dir = Dir::new("/tmp", "perm");
    let private = dir.file("private", ALICE, ALICE, 0o600);
    let project = dir.file("project", 0, PROJECT, 0o640);
    let shared = dir.file("shared", ALICE, ALICE, 0o600);
    let setfacl = std::process::Command::new("setfacl")
        .args(["-m", &format!("u:{BOB}:r")])
        .arg(&shared)
        .status()
        .expect("setfacl (Debian package acl) runs");
    assert!(setfacl.success());
    let open = |p: &Path| fs::File::open(p).map(|_| ()).map_err(|e| e.raw_os_error());
    for _ in 0..3 {
        creds::act_as(&alice()).unwrap();
        assert_eq!(open(&private), Ok(()));
        assert_eq!(open(&project), Ok(()), "through a supplementary group");
        creds::act_as(&bob()).unwrap();
        assert_eq!(open(&private), Err(Some(libc::EACCES)));
        assert_eq!(open(&project), Err(Some(libc::EACCES)));
        assert_eq!(open(&shared), Ok(()), "through an ACL entry");
    }
    creds::act_as_server().unwrap();
    assert_eq!(open(&private), Ok(()), "root again");
}

/// A write made for a user drops the setuid bit (the writer lacks
/// CAP_FSETID); one made for the server keeps it. Run inline (disk) and in
/// io_uring workers (tmpfs), with the ring thread itself acting as the other
/// user meanwhile, so only the SQE's personality can be deciding.
#[test]
fn ring_writes_run_as_the_personality_they_carry_whatever_the_thread_acts_as() {
    if !root_or_skip("ring_writes_run_as_the_personality_they_carry...") {
        return;
    }
    for base in ["/tmp", "/dev/shm"] {
        let dir = Dir::new(base, "suid");
        let mut ring = Ring::new(RingConfig::default()).unwrap();
        let user_file = dir.file("user", ALICE, ALICE, 0o4755);
        let server_file = dir.file("server", ALICE, ALICE, 0o4755);
        let a = alice();
        let (user_fd, server_fd) = (open_rw(&user_file), open_rw(&server_file));
        creds::act_as(&bob()).unwrap();
        ring.write_at(&user_fd, b"x".to_vec(), 0..1, 0, Some(&a), 1);
        assert_eq!(wait_for(&mut ring, 1).result.unwrap(), 1);
        ring.write_at(&server_fd, b"x".to_vec(), 0..1, 0, None, 2);
        assert_eq!(wait_for(&mut ring, 2).result.unwrap(), 1);
        creds::act_as_server().unwrap();
        assert_eq!(mode_of(&user_file), 0o755, "{base}: the user's write");
        assert_eq!(mode_of(&server_file), 0o4755, "{base}: the server's write");
        assert_eq!(ring.personality_count(), 1);
    }
}

#[test]
fn a_personality_goes_once_no_one_holds_its_credentials() {
    if !root_or_skip("a_personality_goes_once_no_one_holds_its_credentials") {
        return;
    }
    let dir = Dir::new("/tmp", "sweep");
    let f = dir.file("f", ALICE, ALICE, 0o644);
    let mut ring = Ring::new(RingConfig::default()).unwrap();
    let carol = creds::intern(Creds::new(59103, 59103, vec![]));
    let fd = open_rw(&f);
    ring.write_at(&fd, b"x".to_vec(), 0..1, 0, Some(&carol), 1);
    assert_eq!(wait_for(&mut ring, 1).result.unwrap(), 1);
    ring.write_at(&fd, b"y".to_vec(), 0..1, 1, Some(&carol), 2);
    assert_eq!(wait_for(&mut ring, 2).result.unwrap(), 1);
    assert_eq!(ring.personality_count(), 1, "one per credentials");
    ring.sweep_personalities();
    assert_eq!(ring.personality_count(), 1, "still held");
    drop(carol);
    ring.sweep_personalities();
    assert_eq!(ring.personality_count(), 0);
    creds::act_as_server().unwrap();
}
