//! A file compressed on request (FSCTL_SET_COMPRESSION) on a real btrfs, against Samba 4.22's
//! smbd with `vfs objects = btrfs` on the same file system in the same run: smbtorture's
//! `smb2.ioctl` compression tests and the two block-clone tests of compressed files. ringshare
//! maps the request to btrfs's own compression flag (`FS_COMPR_FL`), as vfs_btrfs does, and
//! says FILE_FILE_COMPRESSION on btrfs shares. Needs root (losetup, mount), btrfs-progs, Samba's
//! smbd and smbtorture.

mod common;
mod twin;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::TempDir;
use twin::{Accounts, Btrfs, Net, Running, PASS};

const USER: &str = "rscompr";

/// smb2.ioctl's tests of compressed files.
const TESTS: [&str; 14] = [
    "compress_file_flag",
    "compress_dir_inherit",
    "compress_invalid_format",
    "compress_invalid_buf",
    "compress_query_file_attr",
    "compress_create_with_attr",
    "compress_inherit_disable",
    "compress_set_file_attr",
    "compress_perms",
    "compress_notsup_get",
    "compress_notsup_set",
    "sparse_compressed",
    "dup_extents_compressed_src",
    "dup_extents_compressed_dest",
];

/// The tests' outcomes against `srv`: "success NAME", "failure NAME", "skip NAME".
fn torture(srv: &Running, conf: &Path) -> Vec<String> {
    let mut outcomes = Vec::new();
    for t in TESTS {
        let out = srv
            .command("smbtorture")
            .args(["-s", conf.to_str().unwrap(), "//127.0.0.1/share"])
            .args(["-p", &srv.port.to_string()])
            .args(["-U", &format!("{USER}%{PASS}")])
            .arg(format!("smb2.ioctl.{t}"))
            .output()
            .expect("run smbtorture");
        let text = String::from_utf8_lossy(&out.stdout);
        let outcome = ["success: ", "failure: ", "skip: ", "error: "]
            .iter()
            .find(|p| text.lines().any(|l| l.starts_with(*p)))
            .map_or("none", |p| p.trim_end_matches(": "));
        if outcome != "success" {
            eprintln!("smb2.ioctl.{t} against {}: {text}", srv.name);
        }
        outcomes.push(format!("{outcome} {t}"));
    }
    outcomes
}

#[test]
fn files_compressed_on_request_on_btrfs_answer_as_samba_with_vfs_btrfs() {
    let tools = ["smbd", "smbtorture", "smbpasswd", "mkfs.btrfs", "losetup"];
    if !twin::root_and_tools_or_skip("compression on btrfs", &tools) {
        return;
    }
    let tmp = TempDir::new("compress");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let _accounts = Accounts::create(&[], &[(USER, &[])], None);
    let fsys = Btrfs::new(tmp.path());
    let conf = twin::client_conf(&tmp.path().join("client"));
    let mut seen = Vec::new();
    for kind in ["samba", "ringshare"] {
        let share = fsys.mnt.join(kind);
        fs::create_dir(&share).unwrap();
        twin::must(
            "chown",
            &[&format!("{USER}:{USER}"), share.to_str().unwrap()],
        );
        let section = format!(
            "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = btrfs streams_xattr\n",
            share.display()
        );
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = match kind {
            "samba" => twin::start_samba(&base, Net::Loopback, "", &section, &[USER]),
            _ => twin::start_ringshare(&base, Net::Loopback, "", &section, &[USER]),
        };
        seen.push(torture(&srv, &conf));
    }
    eprintln!("samba: {:?}\nringshare: {:?}", seen[0], seen[1]);
    let passed: Vec<&String> = seen[0]
        .iter()
        .filter(|l| l.starts_with("success "))
        .collect();
    // vfs_btrfs passes both block-clone tests of compressed files and most flag tests.
    assert!(
        passed
            .iter()
            .any(|l| l.ends_with("dup_extents_compressed_src")),
        "samba: {:?}",
        seen[0]
    );
    for line in passed {
        assert!(
            seen[1].contains(line),
            "{line} on samba, ringshare: {:?}",
            seen[1]
        );
    }
}
