//! `posix locking` (Samba's default yes): an SMB client's byte-range locks and a local
//! program's fcntl locks see each other, against the real binary with python's smbprotocol
//! as the SMB client and Debian's python's `fcntl.lockf` (F_SETLK) as the local program. Each
//! scenario runs against Samba 4.22's smbd too, in the same run (tests/twin), each server
//! serving its own share to one Unix account made for the test: both must answer alike.
//! (A local lock in the way of an SMB LOCK is smbtorture's smb2.samba3misc.localposixlock1:
//! tests/interop_smbtorture.rs.)

mod common;
mod twin;

use std::io::{BufRead, BufReader, Lines, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::py::{python, script, skipped};
use common::{Server, ServerConfig, TempDir, PASSWORD, USER};
use twin::{Accounts, Net};

/// One server under test: where its share is served and lies.
struct Target {
    name: &'static str,
    port: u16,
    user: String,
    password: String,
    share: String,
    dir: PathBuf,
}

impl Target {
    /// A file of 4 KiB in the share that the account may write, opened by smbprotocol.
    fn open(&self, name: &str) -> (SmbLocker, PathBuf) {
        let path = self.file(name);
        (SmbLocker::open(self, name), path)
    }

    /// The file of 4 KiB alone.
    fn file(&self, name: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        path
    }
}

/// Runs `scenario` against ringshare and against Samba 4.22's smbd (default `posix locking`
/// and `strict locking`), each with a share of its own.
fn on_both(test: &str, user: &str, scenario: fn(&Target)) {
    on_both_with(test, user, "", scenario);
}

/// [`on_both`] with more `lines` in the share's section on both servers.
fn on_both_with(test: &str, user: &str, lines: &str, scenario: fn(&Target)) {
    if skipped(test) || !twin::root_and_tools_or_skip(test, &["smbd", "smbpasswd", "useradd"]) {
        return;
    }
    let tmp = TempDir::new(user);
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _accounts = Accounts::create(&[], &[(user, &[])], None);
    for kind in ["ringshare", "samba"] {
        let dir = twin::server_root(tmp.path(), kind).join("share");
        std::fs::create_dir(&dir).unwrap();
        twin::must("chown", &[user, dir.to_str().unwrap()]);
        let section = format!(
            "[share]\n\tpath = {}\n\tread only = no\n{lines}",
            dir.display()
        );
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = if kind == "samba" {
            twin::start_samba(&base, Net::Loopback, "", &section, &[user])
        } else {
            twin::start_ringshare(&base, Net::Loopback, "", &section, &[user])
        };
        eprintln!("--- {kind} ---");
        scenario(&Target {
            name: if kind == "samba" {
                "Samba 4.22"
            } else {
                "ringshare"
            },
            port: srv.port,
            user: user.to_string(),
            password: twin::PASS.to_string(),
            share: "share".to_string(),
            dir,
        });
    }
}

/// An smbprotocol client holding a file open (tests/py/smbprotocol_locks.py).
struct SmbLocker {
    child: Child,
    out: Lines<BufReader<ChildStdout>>,
}

impl SmbLocker {
    fn open(t: &Target, name: &str) -> SmbLocker {
        let (locker, first) = SmbLocker::start(t, name, false);
        assert_eq!(
            first, "OPEN",
            "smbprotocol did not open {name} on {}",
            t.name
        );
        locker
    }

    /// [`SmbLocker::open`] asking an RWH lease; the lease state granted.
    fn open_leased(t: &Target, name: &str) -> (SmbLocker, String) {
        let (locker, first) = SmbLocker::start(t, name, true);
        let state = first
            .strip_prefix("OPEN ")
            .unwrap_or_else(|| panic!("smbprotocol did not open {name} on {}: {first:?}", t.name));
        (locker, state.to_string())
    }

    fn start(t: &Target, name: &str, lease: bool) -> (SmbLocker, String) {
        let mut child = Command::new(python())
            .arg(script("smbprotocol_locks.py"))
            .args(lease.then_some("--lease"))
            .args(["--port", &t.port.to_string()])
            .args(["--user", &t.user, "--password", &t.password])
            .args(["--share", &t.share, "--name", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python");
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = out.next().and_then(Result::ok).unwrap_or_default();
        (SmbLocker { child, out }, first)
    }

    /// Sends one command; its answer (`OK` or `ERR 0x…`).
    fn ask(&mut self, command: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.out.next().and_then(Result::ok).unwrap_or_default()
    }
}

impl Drop for SmbLocker {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Whether a local program gets a classic fcntl write (`write`) or read lock on `start ..
/// start + len` of `path` without waiting (F_SETLK, through python's `fcntl.lockf`); the
/// program ends at once, and its lock with it.
fn local_lock(path: &Path, start: u64, len: u64, write: bool) -> bool {
    let (mode, kind) = if write {
        ("r+b", "LOCK_EX")
    } else {
        ("rb", "LOCK_SH")
    };
    let prog = format!(
        "import fcntl, sys\nf = open(sys.argv[1], '{mode}')\n\
         try:\n    fcntl.lockf(f, fcntl.{kind} | fcntl.LOCK_NB, {len}, {start})\n\
         except OSError:\n    sys.exit(1)\n"
    );
    let st = Command::new("/usr/bin/python3")
        .args(["-c", &prog])
        .arg(path)
        .status()
        .expect("run /usr/bin/python3");
    assert!(st.code().is_some_and(|c| c <= 1), "lockf: {st:?}");
    st.success()
}

const NOT_GRANTED: &str = "ERR 0xc0000055";
const LOCK_CONFLICT: &str = "ERR 0xc0000054";
const CANCELLED: &str = "ERR 0xc0000120";
const PENDING: &str = "SENT 0x00000103";
const RANGE_NOT_LOCKED: &str = "ERR 0xc000007e";

/// A local program holding a classic fcntl lock (F_SETLK, python's `fcntl.lockf`) on a range
/// of a file until dropped.
struct LocalHolder(Child);

impl LocalHolder {
    fn hold(path: &Path, start: u64, len: u64, write: bool) -> LocalHolder {
        let (mode, kind) = if write {
            ("r+b", "LOCK_EX")
        } else {
            ("rb", "LOCK_SH")
        };
        let prog = format!(
            "import fcntl, sys\nf = open(sys.argv[1], '{mode}')\n\
             fcntl.lockf(f, fcntl.{kind} | fcntl.LOCK_NB, {len}, {start})\n\
             print('HELD', flush=True)\nsys.stdin.read()\n"
        );
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", &prog])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run /usr/bin/python3");
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let held = out.next().and_then(Result::ok).unwrap_or_default();
        assert_eq!(held, "HELD", "the local program did not get its lock");
        LocalHolder(child)
    }
}

impl Drop for LocalHolder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// `smb.ask(command)` answers `want` on `t`.
fn answers(t: &Target, smb: &mut SmbLocker, command: &str, want: &str) {
    assert_eq!(smb.ask(command), want, "{command} on {}", t.name);
}

#[test]
fn an_smb_clients_lock_stops_a_local_programs_fcntl_lock_until_it_is_unlocked() {
    on_both("an smb lock stops a local lock", "rsplk1", |t| {
        let (mut smb, path) = t.open("locked.txt");
        let local = |start, len, write| local_lock(&path, start, len, write);
        assert!(local(0, 100, true), "nothing locked yet on {}", t.name);
        answers(t, &mut smb, "lock 10 20 x", "OK");
        assert!(!local(15, 1, true), "in the exclusive range on {}", t.name);
        assert!(!local(0, 11, false), "a read lock too on {}", t.name);
        assert!(local(30, 10, true), "just past it on {}", t.name);
        answers(t, &mut smb, "lock 100 10 s", "OK");
        assert!(
            !local(105, 1, true),
            "no local write lock in a shared range on {}",
            t.name
        );
        assert!(local(105, 1, false), "but a read lock on {}", t.name);
        answers(t, &mut smb, "unlock 10 20", "OK");
        assert!(local(10, 20, true), "unlocked on {}", t.name);
        answers(t, &mut smb, "close", "OK");
        assert!(
            local(100, 10, true),
            "closed: its locks are gone on {}",
            t.name
        );
    });
}

#[test]
fn an_unlock_of_one_of_two_overlapping_smb_locks_of_one_open_keeps_the_others_range_locked() {
    on_both(
        "an unlock keeps an overlapping lock's range",
        "rsplk2",
        |t| {
            let (mut smb, path) = t.open("stacked.txt");
            let local = |start, len, write| local_lock(&path, start, len, write);
            // An exclusive lock and a shared one over part of it (SMB allows it for one open).
            answers(t, &mut smb, "lock 0 100 x", "OK");
            answers(t, &mut smb, "lock 50 100 s", "OK");
            assert!(!local(10, 1, false), "the exclusive range on {}", t.name);
            assert!(!local(120, 1, true), "the shared range on {}", t.name);
            answers(t, &mut smb, "unlock 0 100", "OK");
            assert!(
                local(0, 50, true),
                "only the exclusive lock had these on {}",
                t.name
            );
            assert!(
                !local(50, 100, true),
                "the shared lock still holds its range against writers on {}",
                t.name
            );
            assert!(
                local(50, 100, false),
                "but not against readers on {}",
                t.name
            );
            // Two shared locks on one range: unlocking one keeps the range locked.
            answers(t, &mut smb, "lock 500 10 s", "OK");
            answers(t, &mut smb, "lock 500 10 s", "OK");
            answers(t, &mut smb, "unlock 500 10", "OK");
            assert!(
                !local(500, 10, true),
                "one shared lock is left on {}",
                t.name
            );
            answers(t, &mut smb, "unlock 500 10", "OK");
            assert!(local(500, 10, true), "none left on {}", t.name);
        },
    );
}

#[test]
fn two_opens_of_one_file_share_ranges_as_the_lock_table_allows_and_refuse_past_it() {
    on_both("two opens' locks", "rsplk3", |t| {
        let (mut a, _) = t.open("two.txt");
        let mut b = SmbLocker::open(t, "two.txt");
        answers(t, &mut a, "lock 0 10 s", "OK");
        answers(t, &mut b, "lock 0 10 s", "OK");
        answers(t, &mut b, "lock 5 10 x", NOT_GRANTED);
        answers(t, &mut a, "unlock 0 10", "OK");
        answers(t, &mut b, "unlock 0 10", "OK");
        answers(t, &mut b, "lock 5 10 x", "OK");
        answers(t, &mut a, "lock 0 6 s", NOT_GRANTED);
    });
}

/// A blocking LOCK of a range a local program holds goes async (STATUS_PENDING); a CANCEL
/// ends it with nothing left locked; another is granted soon after the program lets go
/// (Samba tries again at 0.2 s, 0.4 s, ... 2 s; ringshare at the same steps).
#[test]
fn a_blocking_smb_lock_waits_for_a_local_programs_lock_and_a_cancel_ends_the_wait() {
    on_both("a blocking lock waits for a local lock", "rsplk5", |t| {
        let (mut smb, path) = t.open("wait.txt");
        let holder = LocalHolder::hold(&path, 0, 10, true);
        answers(t, &mut smb, "wait 0 10 x", PENDING);
        std::thread::sleep(Duration::from_millis(500));
        answers(t, &mut smb, "cancel", "OK");
        answers(t, &mut smb, "result", CANCELLED);
        drop(holder);
        assert!(
            local_lock(&path, 0, 10, true),
            "the cancelled wait holds nothing on {}",
            t.name
        );
        let holder = LocalHolder::hold(&path, 0, 10, true);
        answers(t, &mut smb, "wait 0 10 s", PENDING);
        std::thread::sleep(Duration::from_millis(700));
        drop(holder);
        let gone = Instant::now();
        answers(t, &mut smb, "result", "OK");
        let waited = gone.elapsed();
        eprintln!(
            "{}: granted {waited:?} after the local program went",
            t.name
        );
        assert!(waited < Duration::from_secs(3), "{waited:?} on {}", t.name);
        assert!(
            !local_lock(&path, 0, 10, true),
            "the granted shared lock holds against writers on {}",
            t.name
        );
    });
}

/// A blocking LOCK waiting for a local program's lock ends when its open is closed
/// (RANGE_NOT_LOCKED on both), with nothing left locked.
#[test]
fn a_blocking_smb_lock_waiting_for_a_local_lock_ends_when_its_open_is_closed() {
    on_both("a waiting lock ends with its open", "rsplk7", |t| {
        let (mut smb, path) = t.open("closing.txt");
        let holder = LocalHolder::hold(&path, 0, 10, true);
        answers(t, &mut smb, "wait 0 10 x", PENDING);
        std::thread::sleep(Duration::from_millis(300));
        answers(t, &mut smb, "close", "OK");
        answers(t, &mut smb, "result", RANGE_NOT_LOCKED);
        drop(holder);
        assert!(local_lock(&path, 0, 10, true), "nothing left on {}", t.name);
    });
}

/// With their defaults (`posix locking = yes`, `strict locking = Auto`) both check a READ or
/// WRITE of an open without a caching lease or oplock against local programs' locks.
#[test]
fn a_read_or_write_of_a_range_a_local_program_locked_is_a_lock_conflict() {
    on_both("read and write against a local lock", "rsplk4", |t| {
        let (mut smb, path) = t.open("busy.txt");
        {
            let _writer = LocalHolder::hold(&path, 100, 10, true);
            answers(t, &mut smb, "read 105 10", LOCK_CONFLICT);
            answers(t, &mut smb, "write 95 10", LOCK_CONFLICT);
            answers(t, &mut smb, "read 0 100", "OK");
            answers(t, &mut smb, "write 110 10", "OK");
        }
        {
            let _reader = LocalHolder::hold(&path, 100, 10, false);
            answers(t, &mut smb, "read 100 10", "OK");
            answers(t, &mut smb, "write 100 1", LOCK_CONFLICT);
        }
        answers(t, &mut smb, "write 100 10", "OK");
    });
}

/// Issue 33: on a share whose file system calls are made away from the I/O thread (`fs calls
/// off io thread = yes`, ringshare's own option: forced here on a local file system), the check
/// against local programs' locks is a file system job, and finds them as the inline one does.
#[test]
fn a_read_or_write_on_an_offloaded_share_meets_a_local_programs_lock_as_before() {
    let test = "read and write against a local lock, offloaded";
    let user = "rsplk10";
    if skipped(test) || !twin::root_and_tools_or_skip(test, &["useradd"]) {
        return;
    }
    let tmp = TempDir::new(user);
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _accounts = Accounts::create(&[], &[(user, &[])], None);
    let dir = twin::server_root(tmp.path(), "ringshare").join("share");
    std::fs::create_dir(&dir).unwrap();
    twin::must("chown", &[user, dir.to_str().unwrap()]);
    let section = format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tfs calls off io thread = yes\n",
        dir.display()
    );
    let base = tmp.path().join("ringshare-state");
    let srv = twin::start_ringshare(&base, Net::Loopback, "", &section, &[user]);
    let t = Target {
        name: "ringshare",
        port: srv.port,
        user: user.to_string(),
        password: twin::PASS.to_string(),
        share: "share".to_string(),
        dir,
    };
    let (mut smb, path) = t.open("busy.txt");
    {
        let _writer = LocalHolder::hold(&path, 100, 10, true);
        answers(&t, &mut smb, "read 105 10", LOCK_CONFLICT);
        answers(&t, &mut smb, "write 95 10", LOCK_CONFLICT);
        answers(&t, &mut smb, "read 0 100", "OK");
        answers(&t, &mut smb, "write 110 10", "OK");
    }
    answers(&t, &mut smb, "write 100 10", "OK");
}

/// As Samba's `strict locking = Auto`: an open whose lease caches reads and writes is not
/// checked against local locks on READ or WRITE (no system call per I/O for such clients).
#[test]
fn an_open_holding_a_read_write_lease_reads_and_writes_past_a_local_lock() {
    on_both("a leased open is not checked", "rsplk6", |t| {
        let path = t.file("leased.txt");
        let (mut smb, state) = SmbLocker::open_leased(t, "leased.txt");
        assert_eq!(state, "7", "an RWH lease on {}", t.name);
        let _writer = LocalHolder::hold(&path, 100, 10, true);
        answers(t, &mut smb, "read 105 10", "OK");
        answers(t, &mut smb, "write 105 10", "OK");
    });
}

/// `strict locking = no`: neither server checks a READ or WRITE against local programs' locks
/// (Samba checks no lock at all then; ringshare still checks SMB clients' own locks,
/// docs/limits.md), so a client that asks for no lease pays no system call per I/O.
#[test]
fn with_strict_locking_off_a_read_or_write_is_not_checked_against_local_locks() {
    on_both_with(
        "strict locking = no",
        "rsplk9",
        "\tstrict locking = no\n",
        |t| {
            let (mut smb, path) = t.open("unchecked.txt");
            let _writer = LocalHolder::hold(&path, 100, 10, true);
            answers(t, &mut smb, "read 105 10", "OK");
            answers(t, &mut smb, "write 95 10", "OK");
            // SMB LOCKs still meet the local lock (`posix locking` is on).
            answers(t, &mut smb, "lock 100 1 x", NOT_GRANTED);
        },
    );
}

/// `strict locking = yes`: both check every READ and WRITE, even of an open whose lease
/// caches them.
#[test]
fn with_strict_locking_on_even_a_leased_open_is_checked_against_local_locks() {
    on_both_with(
        "strict locking = yes",
        "rsplk8",
        "\tstrict locking = yes\n",
        |t| {
            let path = t.file("strict.txt");
            let (mut smb, state) = SmbLocker::open_leased(t, "strict.txt");
            assert_eq!(state, "7", "an RWH lease on {}", t.name);
            let _writer = LocalHolder::hold(&path, 100, 10, true);
            answers(t, &mut smb, "read 105 10", LOCK_CONFLICT);
            answers(t, &mut smb, "write 105 10", LOCK_CONFLICT);
            answers(t, &mut smb, "read 0 100", "OK");
        },
    );
}

#[test]
fn with_posix_locking_off_smb_locks_and_local_locks_do_not_see_each_other() {
    let test = "posix locking = no";
    if skipped(test) {
        return;
    }
    let cfg = ServerConfig {
        extra_global: "posix locking = no\n",
        ..ServerConfig::default()
    };
    let server = Server::start(&cfg, |_| {});
    let t = Target {
        name: "ringshare",
        port: server.port,
        user: USER.to_string(),
        password: PASSWORD.to_string(),
        share: server.share.clone(),
        dir: server.share_dir.clone(),
    };
    let (mut smb, path) = t.open("apart.txt");
    answers(&t, &mut smb, "lock 0 10 x", "OK");
    assert!(local_lock(&path, 0, 10, true));
    let _writer = LocalHolder::hold(&path, 100, 10, true);
    answers(&t, &mut smb, "lock 100 10 x", "OK");
    answers(&t, &mut smb, "read 100 10", "OK");
}
