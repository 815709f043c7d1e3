//! Two users' sessions on one I/O thread never borrow each other's credentials: the server runs
//! with `--threads 1`, so both connections are served by the same ring and the same thread, and
//! their requests alternate one by one (each switches the thread's credentials, and each ring
//! operation carries its own user's personality). Root only, as CI runs (the server acts as the
//! accounts rsalice and rsbob, made by the test harness).

use crate::common;
use crate::rig;

use std::os::unix::fs::PermissionsExt;

use ringshare_wire::consts::Dialect;
use ringshare_wire::NtStatus;

use rig::{Outcome, Raw, Rig, FILE_NON_DIRECTORY_FILE, FILE_OPEN, USER_A, USER_B};

const GENERIC_READ: u32 = 0x8000_0000;

fn private(path: &std::path::Path, owner: &str, data: &[u8]) {
    std::fs::write(path, data).unwrap();
    let uid = nix::unistd::User::from_name(owner)
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    std::os::unix::fs::chown(path, Some(uid), None).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn denied(r: Result<ringshare_wire::FileId, Outcome>) -> bool {
    matches!(r, Err(Outcome::Reply(h, _)) if h.status == NtStatus::ACCESS_DENIED)
}

#[test]
fn two_users_alternating_on_one_io_thread_each_get_only_their_own_files() {
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "needs root (CI runs as root)"
        );
        eprintln!("\n!!!!!!!! SKIPPED: needs root !!!!!!!!\n");
        return;
    }
    let tmp = common::TempDir::new("interleaved");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let share = tmp.path().join("share");
    std::fs::create_dir_all(&share).unwrap();
    // Each file: 1 MiB (READs of it are spliced from the page cache) and its
    // own bytes, so a READ answered with the other's file would show.
    let a: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..1u32 << 20).map(|i| (i % 241) as u8 ^ 0x5a).collect();
    // The harness makes the accounts (they must exist before the files are given to them).
    common::ensure_unix_account(USER_A.0);
    common::ensure_unix_account(USER_B.0);
    private(&share.join("a.bin"), USER_A.0, &a);
    private(&share.join("b.bin"), USER_B.0, &b);
    let mut rig = Rig::start_on_with(tmp, share, "", &["--threads", "1"]);
    // start_on gives files in the share to USER_A; b.bin goes back to its owner.
    private(&rig.share_dir.join("b.bin"), USER_B.0, &b);
    let mut alice = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let mut bob = Raw::login(rig.port, USER_B, Dialect::SMB3_1_1);
    for round in 0..200u64 {
        let off = (round * 4096) % (1 << 20);
        for (who, raw, mine, theirs, data) in [
            ("alice", &mut alice, "a.bin", "b.bin", &a),
            ("bob", &mut bob, "b.bin", "a.bin", &b),
        ] {
            let f = raw
                .create(mine, GENERIC_READ, FILE_OPEN, FILE_NON_DIRECTORY_FILE)
                .unwrap_or_else(|e| panic!("round {round}: {who} opens {mine}: {e:?}"));
            let small = raw.read(f, off, 4096).expect("small read");
            assert!(
                small == data[off as usize..off as usize + 4096],
                "round {round}: {who}'s 4 KiB"
            );
            if round % 10 == 0 {
                let big = raw.read(f, 0, 1 << 20).expect("spliced read");
                assert!(big == data[..], "round {round}: {who}'s 1 MiB");
            }
            raw.close(f).unwrap();
            let other = raw.create(theirs, GENERIC_READ, FILE_OPEN, FILE_NON_DIRECTORY_FILE);
            assert!(denied(other), "round {round}: {who} opened {theirs}");
        }
    }
    drop((alice, bob));
    rig.signal_and_wait(libc::SIGTERM, std::time::Duration::from_secs(10));
    let log = rig.log();
    let switches: u64 = log
        .lines()
        .filter_map(|l| l.split("acting as users: ").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse::<u64>().ok())
        .sum();
    // Each user's turn of a round switched the one thread to that user at
    // least once (two per round). More switches happen where a request also
    // acts as the server: the DOS attributes of the other user's 0600 file,
    // which the user may not read, are read as the server, and once kept
    // (crates/vfs/src/posix/doscache.rs) they are not read again.
    assert!(
        switches >= 2 * 200,
        "only {switches} credential switches:\n{log}"
    );
}
