//! Block cloning end to end on a real btrfs: `bench/clone.sh 256 clone` makes a btrfs image on
//! a loop device, serves it with this ringshare binary, and python smbprotocol (a client that
//! knows nothing of ringshare) writes a 256 MiB file, sets a second file's end of file and sends
//! FSCTL_DUPLICATE_EXTENTS_TO_FILE for the whole range; the copy is read back and compared by
//! SHA-256, and `btrfs filesystem du` tells how many of its bytes it shares with the source.
//! Needs root (losetup, mount), btrfs-progs and python3-venv; `RINGSHARE_SKIP_PY=1` skips it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::py::{python, run_bounded, skipped};

const SIZE: u64 = 256 << 20;

#[test]
fn a_256_mib_file_cloned_by_a_client_on_btrfs_shares_all_its_extents_and_reads_the_same() {
    let test = "block clone on btrfs";
    if skipped(test) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("\n!!!!!!!! SKIPPED {test}: needs root for losetup and mount !!!!!!!!\n");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/clone.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .arg((SIZE >> 20).to_string())
        .arg("clone")
        .env("RINGSHARE_BIN", env!("CARGO_BIN_EXE_ringshare"))
        .env("PYTHON", python());
    let (ok, out) = run_bounded(&mut cmd, Duration::from_secs(300));
    assert!(ok, "bench/clone.sh failed:\n{out}");
    let clone = out
        .lines()
        .find(|l| l.starts_with("clone\t"))
        .unwrap_or_else(|| panic!("no clone line:\n{out}"));
    assert!(clone.ends_with("identical True"), "{clone}");
    // `btrfs filesystem du --raw`: Total, Exclusive, Set shared, Filename.
    let du: Vec<&str> = out
        .lines()
        .find(|l| l.ends_with("/dst-clone"))
        .unwrap_or_else(|| panic!("no du line for the copy:\n{out}"))
        .split_whitespace()
        .collect();
    assert_eq!(du[0], SIZE.to_string(), "size: {out}");
    assert_eq!(du[1], "0", "bytes only the copy holds: {out}");
    assert_eq!(du[2], SIZE.to_string(), "bytes shared: {out}");
}
