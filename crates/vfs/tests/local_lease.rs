//! A local program's kernel lease (F_SETLEASE) on a file: the POSIX backend's open never
//! waits for it (the open is non-blocking); it fails with `FsError::LeaseHeld`, which the
//! CREATE turns into a wait (crates/core/src/cmd/create.rs), and goes through once the
//! program gave the lease up. (A holder that gives the lease up at once may let the open's
//! own retry go through; the holder here waits for the test, so the test cannot race it.)

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{FsError, OpenOptions};

/// Debian's python, whose `fcntl` module takes F_SETLEASE.
const PYTHON: &str = "/usr/bin/python3";

/// A program holding a write lease on `file`. It says `broken` when the kernel asks it to give
/// the lease up (SIGIO; `no break` if none came within 30 s), and gives it up only when its
/// stdin closes: the test decides when, so a retried open cannot slip in after a holder that
/// ended by itself. SIGIO is blocked and waited for, not handled: a Python handler runs only
/// between bytecodes, so a signal that lands just before the read of stdin blocks is noticed
/// only when that read returns, which it never would (a hang seen once in a CI run).
const HOLDER: &str = "import fcntl, os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGIO})
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print('ready', flush=True)
got = signal.sigtimedwait({signal.SIGIO}, 30)
print('broken' if got else 'no break', flush=True)
sys.stdin.read()
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
os.close(fd)";

#[test]
fn an_open_of_a_file_a_local_program_holds_a_lease_on_is_lease_held_at_once_then_goes_through() {
    if !Path::new(PYTHON).exists() {
        eprintln!("skipped: no {PYTHON}");
        return;
    }
    let tmp = TempDir::new("lease");
    let file = tmp.path().join("leased.txt");
    std::fs::write(&file, b"x").unwrap();
    let share = PosixShare::new(tmp.path()).unwrap();
    let mut holder = Command::new(PYTHON)
        .args(["-c", HOLDER])
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the lease holder");
    let mut said = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the holder took its lease");
    let start = Instant::now();
    assert_eq!(
        open_err(&share, "leased.txt", OpenOptions::read_existing()),
        FsError::LeaseHeld
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "the open did not wait for the lease"
    );
    line.clear();
    said.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim(),
        "broken",
        "the kernel asked the holder to give the lease up"
    );
    // The holder gives the lease up; the open then goes through.
    drop(holder.stdin.take());
    let status = holder.wait().unwrap();
    assert!(status.success(), "the holder gave its lease up: {status}");
    open(&share, "leased.txt", OpenOptions::read_existing())
        .expect("the open goes through once the lease is given up");
}
