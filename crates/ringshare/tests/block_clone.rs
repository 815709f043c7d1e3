//! Block cloning end to end on real file systems that share extents, btrfs and xfs made with
//! `-m reflink=1` (README: "block cloning … on btrfs and reflink xfs"): `bench/clone.sh 256
//! clone` makes the file system on a loop device, serves it with this ringshare binary, and
//! python smbprotocol (a client that knows nothing of ringshare) writes a 256 MiB file, sets a
//! second file's end of file and sends FSCTL_DUPLICATE_EXTENTS_TO_FILE for the whole range; the
//! copy is read back and compared by SHA-256, and the file system tells how many of its bytes
//! it shares with the source (`btrfs filesystem du` on btrfs; on both, the extents `filefrag
//! -v` flags shared). Needs root (losetup, mount), btrfs-progs, xfsprogs and python3-venv;
//! `RINGSHARE_SKIP_PY=1` skips it.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::py::{python, run_bounded, skipped};

const SIZE: u64 = 256 << 20;
/// bench/clone.sh makes (and removes) one account, `rsbench`: one run at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `CLONE_FS=fs bench/clone.sh 256 clone`'s output, once it checked the copy reads the same
/// and `filefrag` finds every byte of it in shared extents; `None` when skipped.
fn clone_on(fs: &str, mkfs: &str) -> Option<String> {
    let test = format!("block clone on {fs}");
    if skipped(&test) {
        return None;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("\n!!!!!!!! SKIPPED {test}: needs root for losetup and mount !!!!!!!!\n");
        return None;
    }
    let found = Command::new("which")
        .arg(mkfs)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: {mkfs} missing (scripts/install-deps.sh --test)"
        );
        eprintln!("\n!!!!!!!! SKIPPED {test}: {mkfs} missing !!!!!!!!\n");
        return None;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/clone.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .arg((SIZE >> 20).to_string())
        .arg("clone")
        .env("CLONE_FS", fs)
        .env("RINGSHARE_BIN", env!("CARGO_BIN_EXE_ringshare"))
        .env("PYTHON", python());
    let (ok, out) = run_bounded(&mut cmd, Duration::from_secs(300));
    assert!(ok, "bench/clone.sh on {fs} failed:\n{out}");
    let clone = out
        .lines()
        .find(|l| l.starts_with("clone\t"))
        .unwrap_or_else(|| panic!("no clone line:\n{out}"));
    assert!(clone.ends_with("identical True"), "{clone}");
    // shared, file, bytes in shared extents, size.
    let shared: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("shared\tdst-clone\t"))
        .unwrap_or_else(|| panic!("no shared line for the copy:\n{out}"))
        .split('\t')
        .collect();
    assert_eq!(shared[3], SIZE.to_string(), "size on {fs}: {out}");
    assert_eq!(shared[2], SIZE.to_string(), "bytes shared on {fs}: {out}");
    Some(out)
}

#[test]
fn a_256_mib_file_cloned_by_a_client_on_btrfs_shares_all_its_extents_and_reads_the_same() {
    let Some(out) = clone_on("btrfs", "mkfs.btrfs") else {
        return;
    };
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

#[test]
fn a_256_mib_file_cloned_by_a_client_on_reflink_xfs_shares_all_its_extents_and_reads_the_same() {
    clone_on("xfs", "mkfs.xfs");
}
