//! A local program's kernel lease (F_SETLEASE) on a file: the POSIX backend's open never
//! waits for it (the open is non-blocking); it fails with `FsError::LeaseHeld`, which the
//! CREATE turns into a wait (crates/core/src/cmd/create.rs), and goes through once the
//! program gave the lease up.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{FsError, OpenOptions};

/// Debian's python, whose `fcntl` module takes F_SETLEASE.
const PYTHON: &str = "/usr/bin/python3";

/// A program holding a write lease on `file` until the kernel tells it to give the lease up
/// (SIGIO, whose default action ends it).
const HOLDER: &str = "import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print('ready', flush=True)
time.sleep(30)";

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
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the lease holder");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
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
    // The kernel told the holder (SIGIO ends it): the lease is gone and the open goes through.
    let status = holder.wait().unwrap();
    assert!(
        !status.success(),
        "the holder was ended by the break: {status}"
    );
    open(&share, "leased.txt", OpenOptions::read_existing())
        .expect("the open goes through once the lease is given up");
}
