//! `posix locking` (Samba's default yes): an SMB client's byte-range locks and a local
//! program's fcntl locks see each other, against the real binary with python's smbprotocol
//! as the SMB client and Debian's python's `fcntl.lockf` (F_SETLK) as the local program.
//! (The other direction, a local lock in the way of an SMB LOCK, is smbtorture's
//! smb2.samba3misc.localposixlock1: tests/interop_smbtorture.rs.)

mod common;

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use common::py::{python, script, skipped};
use common::{Server, ServerConfig, PASSWORD, USER};

/// An smbprotocol client holding a file open (tests/py/smbprotocol_locks.py).
struct SmbLocker {
    child: Child,
    out: Lines<BufReader<ChildStdout>>,
}

impl SmbLocker {
    fn open(server: &Server, name: &str) -> SmbLocker {
        let mut child = Command::new(python())
            .arg(script("smbprotocol_locks.py"))
            .args(["--port", &server.port.to_string()])
            .args(["--user", USER, "--password", PASSWORD])
            .args(["--share", &server.share, "--name", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python");
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = out.next().and_then(Result::ok).unwrap_or_default();
        assert_eq!(first, "OPEN", "smbprotocol did not open {name}");
        SmbLocker { child, out }
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

#[test]
fn an_smb_clients_lock_stops_a_local_programs_fcntl_lock_until_it_is_unlocked() {
    let test = "an smb lock stops a local fcntl lock";
    if skipped(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |dir| {
        std::fs::write(dir.join("locked.txt"), vec![b'x'; 4096]).unwrap();
    });
    let path = server.share_dir.join("locked.txt");
    let mut smb = SmbLocker::open(&server, "locked.txt");
    assert!(local_lock(&path, 0, 100, true), "nothing locked yet");
    assert_eq!(smb.ask("lock 10 20 x"), "OK");
    assert!(!local_lock(&path, 15, 1, true), "in the exclusive range");
    assert!(!local_lock(&path, 0, 11, false), "a read lock too");
    assert!(local_lock(&path, 30, 10, true), "just past it");
    assert_eq!(smb.ask("lock 100 10 s"), "OK");
    assert!(
        !local_lock(&path, 105, 1, true),
        "no local write in a shared range"
    );
    assert!(local_lock(&path, 105, 1, false), "but a local read lock");
    assert_eq!(smb.ask("unlock 10 20"), "OK");
    assert!(local_lock(&path, 10, 20, true), "unlocked");
    assert_eq!(smb.ask("close"), "OK");
    assert!(
        local_lock(&path, 100, 10, true),
        "closed: its locks are gone"
    );
}

#[test]
fn an_unlock_of_one_of_two_overlapping_smb_locks_of_one_open_keeps_the_others_range_locked() {
    let test = "an unlock keeps an overlapping lock's range";
    if skipped(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |dir| {
        std::fs::write(dir.join("stacked.txt"), vec![b'x'; 4096]).unwrap();
    });
    let path = server.share_dir.join("stacked.txt");
    let mut smb = SmbLocker::open(&server, "stacked.txt");
    // An exclusive lock and a shared one stacked on part of it (SMB allows it for one open).
    assert_eq!(smb.ask("lock 0 100 x"), "OK");
    assert_eq!(smb.ask("lock 50 100 s"), "OK");
    assert!(!local_lock(&path, 10, 1, false), "the exclusive range");
    assert!(!local_lock(&path, 120, 1, true), "the shared range");
    assert_eq!(smb.ask("unlock 0 100"), "OK");
    assert!(
        local_lock(&path, 0, 50, true),
        "only the exclusive lock had these"
    );
    assert!(
        !local_lock(&path, 50, 100, true),
        "the shared lock still holds its range against writers"
    );
    assert!(local_lock(&path, 50, 100, false), "but not against readers");
    // Two shared locks on one range: unlocking one keeps the range locked.
    assert_eq!(smb.ask("lock 500 10 s"), "OK");
    assert_eq!(smb.ask("lock 500 10 s"), "OK");
    assert_eq!(smb.ask("unlock 500 10"), "OK");
    assert!(!local_lock(&path, 500, 10, true), "one shared lock is left");
    assert_eq!(smb.ask("unlock 500 10"), "OK");
    assert!(local_lock(&path, 500, 10, true), "none left");
}

#[test]
fn two_opens_of_one_file_share_ranges_as_the_lock_table_allows_and_refuse_past_it() {
    let test = "two opens' locks";
    if skipped(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |dir| {
        std::fs::write(dir.join("two.txt"), vec![b'x'; 4096]).unwrap();
    });
    let mut a = SmbLocker::open(&server, "two.txt");
    let mut b = SmbLocker::open(&server, "two.txt");
    assert_eq!(a.ask("lock 0 10 s"), "OK");
    assert_eq!(b.ask("lock 0 10 s"), "OK", "two opens' shared locks");
    assert_eq!(b.ask("lock 5 10 x"), NOT_GRANTED);
    assert_eq!(a.ask("unlock 0 10"), "OK");
    assert_eq!(b.ask("unlock 0 10"), "OK");
    assert_eq!(b.ask("lock 5 10 x"), "OK", "nothing left in the way");
    assert_eq!(a.ask("lock 0 6 s"), NOT_GRANTED);
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
    let server = Server::start(&cfg, |dir| {
        std::fs::write(dir.join("apart.txt"), vec![b'x'; 4096]).unwrap();
    });
    let path = server.share_dir.join("apart.txt");
    let mut smb = SmbLocker::open(&server, "apart.txt");
    assert_eq!(smb.ask("lock 0 10 x"), "OK");
    assert!(local_lock(&path, 0, 10, true));
}
