//! Previous Versions end to end on real btrfs snapshots, against Samba 4.22's smbd with
//! `vfs objects = shadow_copy2` on the same share in the same run: a btrfs image on a loop
//! device holds the share as a subvolume with `.snapshots/@GMT-…` read-only snapshots of it;
//! `smbclient allinfo` lists the snapshots as Samba lists them, a file read from a snapshot has
//! its old content, a write into a snapshot fails, a path leaving the snapshot is refused; then
//! smbtorture's smb2.twrp runs against both servers. Needs root (losetup, mount), btrfs-progs,
//! Samba's smbd, smbclient and smbtorture.

mod common;
mod twin;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::TempDir;
use twin::{must, Accounts, Net, Running, PASS};

const USER: &str = "rstwrp";
const OLD: &str = "@GMT-2026.11.01-10.00.00";
const NEWER: &str = "@GMT-2026.11.02-10.00.00";

/// A btrfs file system on a loop device, mounted; unmounted and detached on drop.
struct Btrfs {
    mnt: PathBuf,
    dev: String,
}

impl Btrfs {
    fn new(dir: &Path) -> Btrfs {
        let img = dir.join("img");
        must("truncate", &["-s", "256M", img.to_str().unwrap()]);
        must("mkfs.btrfs", &["-q", img.to_str().unwrap()]);
        let out = Command::new("losetup")
            .args(["-f", "--show", img.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup: {out:?}");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mnt = dir.join("mnt");
        fs::create_dir_all(&mnt).unwrap();
        let b = Btrfs { mnt, dev };
        must("mount", &[&b.dev, b.mnt.to_str().unwrap()]);
        b
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        twin::run("umount", &[self.mnt.to_str().unwrap()]);
        twin::run("losetup", &["-d", &self.dev]);
    }
}

/// The share: a subvolume holding `file.txt`, `subdir/hardlink` (a hard link of it) and a
/// stream `st` of 3 bytes, with two read-only snapshots taken as `file.txt` changed.
fn lay_out(share: &Path) {
    let s = share.to_str().unwrap();
    must("btrfs", &["-q", "subvolume", "create", s]);
    fs::create_dir(share.join(".snapshots")).unwrap();
    fs::create_dir(share.join("subdir")).unwrap();
    let file = share.join("file.txt");
    let snapshot = |name: &str| {
        let to = share.join(".snapshots").join(name);
        must(
            "btrfs",
            &["-q", "subvolume", "snapshot", "-r", s, to.to_str().unwrap()],
        );
    };
    fs::write(&file, "old content\n").unwrap();
    fs::hard_link(&file, share.join("subdir/hardlink")).unwrap();
    // streams_xattr's layout: the data and a NUL.
    must(
        "setfattr",
        &[
            "-n",
            "user.DosStream.st:$DATA",
            "-v",
            "0x61626300",
            file.to_str().unwrap(),
        ],
    );
    must("chown", &["-R", &format!("{USER}:{USER}"), s]);
    snapshot(OLD);
    fs::write(&file, "newer content\n").unwrap();
    snapshot(NEWER);
    fs::write(&file, "current content\n").unwrap();
}

fn smbclient(srv: &Running, conf: &Path, cmds: &str) -> String {
    let out = srv
        .command("smbclient")
        .arg("//127.0.0.1/share")
        .args(["-s", conf.to_str().unwrap(), "-p", &srv.port.to_string()])
        .args([
            "--use-kerberos=off",
            "-t",
            "30",
            "-U",
            &format!("{USER}%{PASS}"),
        ])
        .args(["-c", cmds])
        .output()
        .expect("run smbclient");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The first NT status in smbclient's output, or OK.
fn status(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with("NT_STATUS_"))
        .map_or("OK".to_string(), |s| {
            s.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .to_string()
        })
}

/// What one server answered.
#[derive(Debug, PartialEq)]
struct Seen {
    /// allinfo's `@GMT-…` lines (each snapshot and the file's time in it).
    snapshots: Vec<String>,
    old: String,
    newer: String,
    current: String,
    write: String,
    mkdir: String,
    escape: String,
}

fn ask(srv: &Running, conf: &Path, dir: &Path) -> Seen {
    let allinfo = smbclient(srv, conf, "allinfo file.txt");
    let snapshots = allinfo
        .lines()
        .filter(|l| l.starts_with("@GMT-"))
        .map(String::from)
        .collect();
    let get = |from: &str| {
        let to = dir.join(format!("got-{}", srv.name));
        let _ = fs::remove_file(&to);
        let out = smbclient(srv, conf, &format!("get \"{from}\" {}", to.display()));
        fs::read_to_string(&to).unwrap_or_else(|_| status(&out))
    };
    let local = dir.join("local.txt");
    fs::write(&local, "x").unwrap();
    Seen {
        snapshots,
        old: get(&format!("{OLD}\\file.txt")),
        newer: get(&format!("{NEWER}\\file.txt")),
        current: get("file.txt"),
        write: status(&smbclient(
            srv,
            conf,
            &format!("put {} \"{OLD}\\new.txt\"", local.display()),
        )),
        mkdir: status(&smbclient(srv, conf, &format!("mkdir \"{OLD}\\newdir\""))),
        escape: get(&format!("{OLD}\\..\\..\\..\\etc\\hostname")),
    }
}

/// smbtorture smb2.twrp's tests against `srv`: (test, outcome) lines.
fn twrp(srv: &Running, conf: &Path) -> Vec<String> {
    let out = srv
        .command("smbtorture")
        .args([
            "-s",
            conf.to_str().unwrap(),
            "//127.0.0.1/share",
            "-p",
            &srv.port.to_string(),
        ])
        .args([
            "-U",
            &format!("{USER}%{PASS}"),
            "--option=torture:twrp_file=file.txt",
        ])
        .arg(format!("--option=torture:twrp_snapshot={OLD}"))
        .args([
            "--option=torture:twrp_stream=st",
            "--option=torture:twrp_stream_size=3",
        ])
        .arg("smb2.twrp")
        .output()
        .expect("run smbtorture");
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("failure: ") {
        eprintln!("smbtorture smb2.twrp against {}:\n{text}", srv.name);
    }
    text.lines()
        .filter_map(|l| {
            ["success: ", "failure: ", "skip: ", "error: "]
                .iter()
                .find_map(|p| {
                    l.strip_prefix(p).map(|t| {
                        format!(
                            "{} {}",
                            p.trim_end_matches(": "),
                            t.split_whitespace().next().unwrap_or("")
                        )
                    })
                })
        })
        .collect()
}

#[test]
fn previous_versions_on_btrfs_snapshots_answer_as_samba_with_shadow_copy2() {
    let test = "previous versions on btrfs";
    if !twin::root_and_tools_or_skip(
        test,
        &[
            "smbd",
            "smbclient",
            "smbtorture",
            "smbpasswd",
            "mkfs.btrfs",
            "btrfs",
            "losetup",
            "setfattr",
        ],
    ) {
        return;
    }
    let tmp = TempDir::new("twrp");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let _accounts = Accounts::create(&[], &[(USER, &[])], None);
    let fsys = Btrfs::new(tmp.path());
    let share = fsys.mnt.join("share");
    lay_out(&share);
    let section = format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = shadow_copy2 streams_xattr\n\
         \tshadow:snapdir = .snapshots\n",
        share.display()
    );
    let conf = twin::client_conf(&tmp.path().join("client"));
    let mut seen = Vec::new();
    let mut torture = Vec::new();
    for kind in ["samba", "ringshare"] {
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = if kind == "samba" {
            twin::start_samba(&base, Net::Loopback, "", &section, &[USER])
        } else {
            twin::start_ringshare(&base, Net::Loopback, "", &section, &[USER])
        };
        seen.push(ask(&srv, &conf, tmp.path()));
        torture.push(twrp(&srv, &conf));
    }
    let (samba, ours) = (&seen[0], &seen[1]);
    eprintln!("samba: {samba:#?}\nringshare: {ours:#?}");
    eprintln!(
        "smb2.twrp samba: {:?}\nsmb2.twrp ringshare: {:?}",
        torture[0], torture[1]
    );
    assert_eq!(samba.snapshots.len(), 2, "{samba:?}");
    assert!(samba.snapshots[0].starts_with(NEWER), "{samba:?}");
    assert_eq!(ours.snapshots, samba.snapshots, "allinfo's snapshots");
    assert_eq!(ours.old, "old content\n");
    assert_eq!(ours.newer, "newer content\n");
    assert_eq!(ours.current, "current content\n");
    assert_eq!(ours.write, "NT_STATUS_MEDIA_WRITE_PROTECTED");
    assert_eq!(ours.write, samba.write);
    assert_eq!(ours.mkdir, samba.mkdir);
    assert_ne!(ours.escape, fs::read_to_string("/etc/hostname").unwrap());
    assert!(ours.escape.starts_with("NT_STATUS_"), "{}", ours.escape);
    assert_eq!(ours.escape, samba.escape);
    // smb2.twrp: Samba passes stream, openroot and listdir here (its write test fails on
    // btrfs's read-only snapshots: docs/conformance.md); every test Samba passes passes here.
    let passed = |t: &[String]| t.iter().filter(|l| l.starts_with("success ")).count();
    assert!(passed(&torture[0]) >= 3, "samba: {:?}", torture[0]);
    for line in &torture[0] {
        if let Some(name) = line.strip_prefix("success ") {
            assert!(
                torture[1].contains(line),
                "smb2.twrp {name}: samba passes, ringshare: {:?}",
                torture[1]
            );
        }
    }
}
