//! Previous Versions end to end on real btrfs snapshots, against Samba 4.22's smbd with
//! `vfs objects = shadow_copy2` on the same share in the same run: a btrfs image on a loop
//! device holds the share as a subvolume with `.snapshots/@GMT-…` read-only snapshots of it;
//! `smbclient allinfo` lists the snapshots as Samba lists them, a file read from a snapshot has
//! its old content, a write into a snapshot fails, a path leaving the snapshot is refused, a
//! file restored from a snapshot (smbclient `get` from it, `put` over the live file) has its old
//! content again; then smbtorture's smb2.twrp runs against both servers. Needs root (losetup,
//! mount), btrfs-progs, Samba's smbd, smbclient and smbtorture.

mod common;
mod twin;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::py::{python, run_bounded, script};
use common::TempDir;
use twin::{must, Accounts, Btrfs, Net, Running, PASS};

const USER: &str = "rstwrp";
/// The tests share the account `USER`: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
const OLD: &str = "@GMT-2026.11.01-10.00.00";
const NEWER: &str = "@GMT-2026.11.02-10.00.00";

/// The share's files: `file.txt`, `subdir/hardlink` (a hard link of it) and a stream `st` of 3
/// bytes on it, owned by the user; `snapshot(name)` is called as `file.txt` changes, to take
/// the snapshots `OLD` then `NEWER`.
fn lay_out(share: &Path, snapshot: impl Fn(&str)) {
    fs::create_dir_all(share.join(".snapshots")).unwrap();
    fs::create_dir(share.join("subdir")).unwrap();
    let file = share.join("file.txt");
    fs::write(&file, "old content\n").unwrap();
    // rwx for its owner: full control on both servers (Samba's `acl map full control`), which
    // smb2.twrp.write asks of the snapshot's file (MaximalAccess with WRITE_OWNER; rw- gives
    // Samba's 0x17019F and the test fails at its first check on either server).
    fs::set_permissions(&file, fs::Permissions::from_mode(0o744)).unwrap();
    fs::hard_link(&file, share.join("subdir/hardlink")).unwrap();
    // streams_xattr's layout: the data and a NUL.
    let stream = ["-n", "user.DosStream.st:$DATA", "-v", "0x61626300"];
    must(
        "setfattr",
        &[&stream[..], &[file.to_str().unwrap()]].concat(),
    );
    must(
        "chown",
        &["-R", &format!("{USER}:{USER}"), share.to_str().unwrap()],
    );
    snapshot(OLD);
    fs::write(&file, "newer content\n").unwrap();
    snapshot(NEWER);
    fs::write(&file, "current content\n").unwrap();
}

/// Read-only btrfs snapshots of the subvolume `share`.
fn btrfs_snapshot(share: &Path, name: &str) {
    let to = share.join(".snapshots").join(name);
    let (s, to) = (share.to_str().unwrap(), to.to_str().unwrap());
    must("btrfs", &["-q", "subvolume", "snapshot", "-r", s, to]);
}

/// A snapshot as a plain directory (snapper's layout on a file system without snapshots): a
/// copy of the share's files, hard links and xattrs kept, writable by the user on disk.
fn copied_snapshot(share: &Path, name: &str) {
    copy_into(share, &share.join(".snapshots").join(name));
}

/// The share's files copied into directory `to` (made with its parents), as the user's.
fn copy_into(share: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    let (s, t) = (share.display(), to.display());
    must(
        "sh",
        &[
            "-c",
            &format!(
                "cd {s} && cp -a --parents file.txt subdir {t}/ && chown -R {USER}:{USER} {t}"
            ),
        ],
    );
}

/// What each test starts with, once its tools are there: the tests one at a time (they share
/// `USER`), a directory anyone may enter, and the account.
fn set_up(tag: &str) -> (std::sync::MutexGuard<'static, ()>, TempDir, Accounts) {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = TempDir::new(tag);
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let accounts = Accounts::create(&[], &[(USER, &[])], None);
    (one, tmp, accounts)
}

/// Samba's smbd (`kind` "samba") or ringshare with the share `section`, state in `base`.
fn start(kind: &str, base: &Path, section: &str) -> Running {
    if kind == "samba" {
        twin::start_samba(base, Net::Loopback, "", section, &[USER])
    } else {
        twin::start_ringshare(base, Net::Loopback, "", section, &[USER])
    }
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
    /// `file.txt` after its copy in `OLD` was restored over it: smbclient `get` from the
    /// snapshot, then `put` back in one session, as a restore through Explorer copies it.
    restored: String,
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
        restored: {
            let copy = dir.join(format!("restore-{}", srv.name));
            let _ = fs::remove_file(&copy);
            let out = smbclient(
                srv,
                conf,
                &format!(
                    "get \"{OLD}\\file.txt\" {0}; put {0} file.txt",
                    copy.display()
                ),
            );
            assert_eq!(status(&out), "OK", "restore on {}: {out}", srv.name);
            get("file.txt")
        },
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

/// Each way of changing `OLD`'s file.txt through an open made for writing (python smbprotocol,
/// tests/py/smbprotocol_snapshot_writes.py): `what STATUS` lines.
fn snapshot_writes(srv: &Running) -> Vec<String> {
    let mut cmd = srv.command(python().to_str().unwrap());
    cmd.arg(script("smbprotocol_snapshot_writes.py"))
        .arg(srv.port.to_string())
        .args([USER, PASS, "share", OLD, "file.txt", "st", "file.txt"]);
    let (ok, out) = run_bounded(&mut cmd, std::time::Duration::from_secs(60));
    assert!(ok, "snapshot writes against {}: {out}", srv.name);
    let lines: Vec<String> = out.lines().map(String::from).collect();
    assert_eq!(lines.last().map(String::as_str), Some("DONE"), "{out}");
    lines
}

/// What is on disk in `dir` (names, sizes, modes, modification times, xattrs), to tell whether
/// anything changed it.
fn on_disk(dir: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("find . -printf '%p %s %m %T@\\n' | sort && getfattr -R -d -m - -e hex . 2>/dev/null")
        .current_dir(dir)
        .output()
        .expect("find");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Samba 4.22 grants an open of a snapshot's file for writing and refuses each change through
/// it; so does ringshare (each line's status: `what STATUS`). Where Samba refuses a change as
/// MEDIA_WRITE_PROTECTED or NOT_SAME_DEVICE, ringshare answers the same; where Samba does not
/// have the request at all (FileDispositionInformationEx, a short name, the valid data length,
/// object ids, block cloning without vfs_btrfs) ringshare may refuse it otherwise, but refuses
/// it.
fn assert_snapshot_writes_refused(samba: &[String], ours: &[String]) {
    let split = |l: &String| {
        let (what, st) = l.rsplit_once(' ').unwrap_or((l.as_str(), ""));
        (what.to_string(), st.to_string())
    };
    let samba: Vec<(String, String)> = samba.iter().map(split).collect();
    let ours: Vec<(String, String)> = ours.iter().map(split).collect();
    assert_eq!(
        samba.iter().map(|l| &l.0).collect::<Vec<_>>(),
        ours.iter().map(|l| &l.0).collect::<Vec<_>>(),
        "the same requests on both: {ours:#?}"
    );
    let (protected, other_device) = ("0xc00000a2", "0xc00000d4");
    for ((what, theirs), (_, st)) in samba.iter().zip(&ours) {
        if what == "DONE" {
            continue;
        }
        if what == "open for writing" {
            assert_eq!(theirs, "SUCCESS", "Samba: {samba:#?}");
            assert_eq!(st, "SUCCESS", "{what} on ringshare");
            continue;
        }
        assert_ne!(st, "SUCCESS", "{what}: ringshare let it through");
        if theirs == protected || theirs == other_device {
            assert_eq!(
                st, theirs,
                "{what}: ringshare answered {st}, Samba {theirs}"
            );
        }
    }
}

/// What Samba (first) and ringshare (second) answered on `share` with the share's extra
/// `shadow:` lines: smbclient's questions, smb2.twrp's outcomes and the snapshot writes, each
/// checked as [`assert_snapshot_writes_refused`] says; `OLD` (at `old_dir` on disk) is
/// unchanged after each.
fn both(
    tmp: &Path,
    share: &Path,
    old_dir: &Path,
    shadow_lines: &str,
) -> ([Seen; 2], [Vec<String>; 2]) {
    // `.snapshots` unless the lines name another snapshot directory.
    let snapdir = if shadow_lines.contains("shadow:snapdir =") {
        ""
    } else {
        "\tshadow:snapdir = .snapshots\n"
    };
    let section = format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = shadow_copy2 streams_xattr\n\
         {snapdir}{shadow_lines}",
        share.display()
    );
    let conf = twin::client_conf(&tmp.join("client"));
    let mut seen = Vec::new();
    let mut torture = Vec::new();
    let mut writes = Vec::new();
    for kind in ["samba", "ringshare"] {
        let base = tmp.join(format!("{kind}-state"));
        let srv = start(kind, &base, &section);
        seen.push(ask(&srv, &conf, tmp));
        // The restore changed the share's file; the next server and smb2.twrp see it as laid
        // out.
        fs::write(share.join("file.txt"), "current content\n").unwrap();
        torture.push(twrp(&srv, &conf));
        let before = on_disk(old_dir);
        writes.push(snapshot_writes(&srv));
        let after = on_disk(old_dir);
        assert_eq!(before, after, "{OLD} changed through {kind}");
    }
    eprintln!(
        "snapshot writes samba: {:#?}\nringshare: {:#?}",
        writes[0], writes[1]
    );
    assert_snapshot_writes_refused(&writes[0], &writes[1]);
    eprintln!("samba: {:#?}\nringshare: {:#?}", seen[0], seen[1]);
    eprintln!(
        "smb2.twrp samba: {:?}\nsmb2.twrp ringshare: {:?}",
        torture[0], torture[1]
    );
    let ringshare = seen.pop().unwrap();
    let samba = seen.pop().unwrap();
    let t1 = torture.pop().unwrap();
    ([samba, ringshare], [torture.pop().unwrap(), t1])
}

/// The answers both give alike, and ringshare's own: the old contents, the refused writes and
/// the refused escape; allinfo lists the snapshot `first` first (NEWER in `shadow:sort`'s
/// default order).
fn assert_alike(samba: &Seen, ours: &Seen, first: &str) {
    assert_eq!(samba.snapshots.len(), 2, "{samba:?}");
    assert!(samba.snapshots[0].starts_with(first), "{samba:?}");
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
    assert_eq!(
        ours.restored, "old content\n",
        "file.txt restored from {OLD}"
    );
    assert_eq!(ours.restored, samba.restored);
}

/// Every smb2.twrp test Samba passes (at least `least` of them) passes on ringshare.
fn assert_twrp_alike(torture: &[Vec<String>; 2], least: usize) {
    let passed = torture[0]
        .iter()
        .filter(|l| l.starts_with("success "))
        .count();
    assert!(passed >= least, "samba: {:?}", torture[0]);
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

fn tools_or_skip(test: &str, more: &[&str]) -> bool {
    let tools = ["smbd", "smbclient", "smbtorture", "smbpasswd", "setfattr"];
    twin::root_and_tools_or_skip(test, &[&tools[..], more].concat())
}

#[test]
fn previous_versions_on_btrfs_snapshots_answer_as_samba_with_shadow_copy2() {
    if !tools_or_skip(
        "previous versions on btrfs",
        &["mkfs.btrfs", "btrfs", "losetup"],
    ) {
        return;
    }
    let (_one, tmp, _accounts) = set_up("twrp");
    let fsys = Btrfs::new(tmp.path());
    let share = fsys.mnt.join("share");
    must(
        "btrfs",
        &["-q", "subvolume", "create", share.to_str().unwrap()],
    );
    lay_out(&share, |name| btrfs_snapshot(&share, name));
    // The share is a subvolume: Samba finds the snapdir at its root, as ringshare does.
    let ([samba, ours], torture) =
        both(tmp.path(), &share, &share.join(".snapshots").join(OLD), "");
    assert_alike(&samba, &ours, NEWER);
    // Samba passes all four here (write: the open of the snapshot's file is granted for
    // writing, its WRITE and SET_INFOs refused), so does ringshare.
    assert_twrp_alike(&torture, 4);
}

#[test]
fn previous_versions_on_plain_directories_answer_as_samba_with_shadow_copy2() {
    if !tools_or_skip("previous versions on plain directories", &[]) {
        return;
    }
    let (_one, tmp, _accounts) = set_up("twrp-plain");
    let share = tmp.path().join("share");
    fs::create_dir(&share).unwrap();
    lay_out(&share, |name| copied_snapshot(&share, name));
    // Not a mount point: both look for the snapdir at the share root only with
    // snapdirseverywhere. Only ringshare keeps the snapshot's files unchanged here.
    let ([samba, ours], torture) = both(
        tmp.path(),
        &share,
        &share.join(".snapshots").join(OLD),
        "\tshadow:snapdirseverywhere = yes\n",
    );
    assert_alike(&samba, &ours, NEWER);
    assert!(!share.join(".snapshots").join(OLD).join("new.txt").exists());
    assert_eq!(
        fs::read_to_string(share.join(".snapshots").join(OLD).join("file.txt")).unwrap(),
        "old content\n"
    );
    // As on btrfs: all four pass on Samba and on ringshare.
    assert_twrp_alike(&torture, 4);
}

/// zfs-auto-snapshot's name of the snapshot taken at `token` (`@GMT-YYYY.MM.DD-HH.MM.00`).
fn zfs_name(token: &str) -> String {
    let t = token.trim_start_matches("@GMT-");
    let (date, time) = t.split_once('-').unwrap();
    format!(
        "zfs-auto-snap_hourly-{}-{}",
        date.replace('.', "-"),
        &time.replace('.', "")[..4]
    )
}

#[test]
fn previous_versions_below_a_mount_point_with_zfs_auto_snapshot_names_answer_as_samba() {
    if !tools_or_skip("previous versions below a mount point", &[]) {
        return;
    }
    let (_one, tmp, _accounts) = set_up("twrp-zfs");
    // ZFS's layout: the data set's root (its mount point) holds the snapshots, each an image
    // of the whole data set; the share is a directory two levels below.
    let fsys = tmp.path().join("fs");
    let share = fsys.join("data").join("share");
    fs::create_dir_all(&share).unwrap();
    let snapshots = fsys.join(".snapshots");
    let image_of = |token: &str| snapshots.join(zfs_name(token)).join("data").join("share");
    lay_out(&share, |token| copy_into(&share, &image_of(token)));
    // A directory that is no snapshot: its name does not match the prefix.
    fs::create_dir_all(snapshots.join("manual-2026-11-03-1000/data/share")).unwrap();
    let lines = format!(
        "\tshadow:mountpoint = {}\n\tshadow:snapprefix = ^zfs-auto-snap_\\(hourly\\)\\{{0,1\\}}\\(daily\\)\\{{0,1\\}}\n\
         \tshadow:delimiter = -20\n\tshadow:format = -%Y-%m-%d-%H%M\n",
        fsys.display()
    );
    let ([samba, ours], torture) = both(tmp.path(), &share, &image_of(OLD), &lines);
    assert_alike(&samba, &ours, NEWER);
    assert_twrp_alike(&torture, 4);
}

/// The names `ls` shows (first word of each entry line), sorted, or the status.
fn listed(text: &str) -> String {
    let st = status(text);
    if st != "OK" {
        return st;
    }
    let mut names: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with(char::is_numeric))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.sort();
    names.join(" ")
}

/// snapper's layout of a share holding another subvolume: the share's `.snapshots` (in whose
/// snapshots the nested subvolume is an empty directory) and the subvolume's own
/// `vol/.snapshots`, taken at OLD only. With `shadow:snapdirseverywhere = yes` Samba finds each
/// path in the snapshot of its nearest directory that has one; so does ringshare (before,
/// it looked at the share's root only and showed the subvolume empty).
#[test]
fn previous_versions_of_a_nested_btrfs_subvolume_answer_as_samba_with_snapdirseverywhere() {
    if !tools_or_skip(
        "previous versions of a nested subvolume",
        &["mkfs.btrfs", "btrfs", "losetup"],
    ) {
        return;
    }
    let (_one, tmp, _accounts) = set_up("twrp-nested");
    let fsys = Btrfs::new(tmp.path());
    let share = fsys.mnt.join("share");
    let vol = share.join("vol");
    for sv in [&share, &vol] {
        must(
            "btrfs",
            &["-q", "subvolume", "create", sv.to_str().unwrap()],
        );
        fs::create_dir(sv.join(".snapshots")).unwrap();
    }
    let (file, v) = (share.join("file.txt"), vol.join("v.txt"));
    fs::write(&file, "old content\n").unwrap();
    fs::write(&v, "vol old\n").unwrap();
    must(
        "chown",
        &["-R", &format!("{USER}:{USER}"), share.to_str().unwrap()],
    );
    let snap = |of: &Path, name: &str| {
        let to = of.join(".snapshots").join(name);
        let (s, t) = (of.to_str().unwrap(), to.to_str().unwrap());
        must("btrfs", &["-q", "subvolume", "snapshot", "-r", s, t]);
    };
    snap(&vol, OLD);
    snap(&share, OLD);
    fs::write(&file, "newer content\n").unwrap();
    fs::write(&v, "vol newer\n").unwrap();
    snap(&share, NEWER);
    fs::write(&file, "current content\n").unwrap();
    fs::write(&v, "vol current\n").unwrap();
    let section = format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = shadow_copy2\n\
         \tshadow:snapdir = .snapshots\n\tshadow:snapdirseverywhere = yes\n",
        share.display()
    );
    let conf = twin::client_conf(&tmp.path().join("client"));
    let local = tmp.path().join("local.txt");
    fs::write(&local, "x").unwrap();
    let mut answers = Vec::new();
    for kind in ["samba", "ringshare"] {
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = start(kind, &base, &section);
        let snapshots = |name: &str| -> Vec<String> {
            smbclient(&srv, &conf, &format!("allinfo \"{name}\""))
                .lines()
                .filter(|l| l.starts_with("@GMT-"))
                .map(String::from)
                .collect()
        };
        let get = |from: &str| {
            let to = tmp.path().join(format!("got-{kind}"));
            let _ = fs::remove_file(&to);
            let out = smbclient(&srv, &conf, &format!("get \"{from}\" {}", to.display()));
            fs::read_to_string(&to).unwrap_or_else(|_| status(&out))
        };
        let seen = vec![
            format!("allinfo file.txt: {:?}", snapshots("file.txt")),
            format!("allinfo vol\\v.txt: {:?}", snapshots("vol\\v.txt")),
            format!("old vol\\v.txt: {:?}", get(&format!("{OLD}\\vol\\v.txt"))),
            format!(
                "newer vol\\v.txt: {:?}",
                get(&format!("{NEWER}\\vol\\v.txt"))
            ),
            format!("old file.txt: {:?}", get(&format!("{OLD}\\file.txt"))),
            format!("newer file.txt: {:?}", get(&format!("{NEWER}\\file.txt"))),
            format!(
                "ls old vol: {}",
                listed(&smbclient(&srv, &conf, &format!("ls \"{OLD}\\vol\\*\"")))
            ),
            format!(
                "put old vol: {}",
                status(&smbclient(
                    &srv,
                    &conf,
                    &format!("put {} \"{OLD}\\vol\\new.txt\"", local.display())
                ))
            ),
        ];
        answers.push(seen);
    }
    eprintln!("samba: {:#?}\nringshare: {:#?}", answers[0], answers[1]);
    assert_eq!(answers[0], answers[1], "ringshare answers as Samba");
    // What both answered is what the layout holds: vol's own snapshot for OLD.
    assert_eq!(answers[1][2], "old vol\\v.txt: \"vol old\\n\"");
    assert!(!vol.join(".snapshots").join(OLD).join("new.txt").exists());
}

/// With `shadow:snapdirseverywhere` the snapshot directories above the share's root are looked
/// at too, up to the mount point, and past it with `shadow:crossmountpoints`: a share two levels
/// below `fs`, whose `.snapshots` hold images of all of `fs`. Named as the mount point, `fs` is
/// found; with `fs/data` named instead, only `shadow:crossmountpoints = yes` reaches `fs`.
#[test]
fn with_snapdirseverywhere_snapshots_above_the_share_are_found_up_to_the_mount_point_or_past_it_as_samba(
) {
    if !tools_or_skip("previous versions above the share", &[]) {
        return;
    }
    let (_one, tmp, _accounts) = set_up("twrp-above");
    let fsys = tmp.path().join("fs");
    let share = fsys.join("data").join("share");
    fs::create_dir_all(&share).unwrap();
    let image_of = |token: &str| {
        fsys.join(".snapshots")
            .join(token)
            .join("data")
            .join("share")
    };
    lay_out(&share, |token| copy_into(&share, &image_of(token)));
    // No snapshot directory in the share: the nearest is above it (an empty one in the share
    // would be the nearest, and list no snapshots, on both servers).
    fs::remove_dir(share.join(".snapshots")).unwrap();
    let everywhere = "\tshadow:snapdirseverywhere = yes\n";
    let at = |mount: &Path, cross: &str| {
        format!(
            "{everywhere}\tshadow:mountpoint = {}\n\tshadow:crossmountpoints = {cross}\n",
            mount.display()
        )
    };
    for (mount, cross) in [(fsys.clone(), "no"), (fsys.join("data"), "yes")] {
        let lines = at(&mount, cross);
        let ([samba, ours], torture) = both(tmp.path(), &share, &image_of(OLD), &lines);
        assert_alike(&samba, &ours, NEWER);
        assert_twrp_alike(&torture, 4);
    }
    // Below `fs` without crossing: neither server finds a snapshot.
    let section = format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = shadow_copy2\n\
         \tshadow:snapdir = .snapshots\n{}",
        share.display(),
        at(&fsys.join("data"), "no")
    );
    let conf = twin::client_conf(&tmp.path().join("client"));
    for kind in ["samba", "ringshare"] {
        let base = tmp.path().join(format!("{kind}-state-none"));
        let srv = start(kind, &base, &section);
        let out = smbclient(
            &srv,
            &conf,
            &format!("allinfo file.txt; get \"{OLD}\\file.txt\" /dev/null"),
        );
        // Samba 4.22 still lists `fs`'s snapshots here (its listing looks up to `/` whatever
        // the mount point; only the files' lookup stops there), though none of their files
        // opens; ringshare lists none it would not open, and answers as Samba does when it
        // finds no snapshot directory.
        let listed = out.lines().any(|l| l.starts_with("@GMT-"));
        assert_eq!(listed, kind == "samba", "{kind}: {out}");
        if kind == "ringshare" {
            assert!(
                out.contains("NT_STATUS_INVALID_PARAMETER getting shadow copy data"),
                "{out}"
            );
        }
        assert!(
            out.contains(&format!(
                "NT_STATUS_OBJECT_NAME_NOT_FOUND opening remote file \\{OLD}\\file.txt"
            )),
            "{kind}: {out}"
        );
    }
}

/// LVM's layout (Samba's wiki, "Shadow Copies with LVM"): each snapshot of the logical volume
/// mounted in a directory of its own outside the share (an absolute `shadow:snapdir`), named in
/// the server's local time in a format of the admin's (`shadow:format`, `shadow:localtime`),
/// holding an image of `shadow:basedir` (the volume's `data` directory, between its mount point
/// and the share); listed oldest first (`shadow:sort = asc`), with a `lost+found` that is no
/// snapshot. Both servers run with TZ=Europe/Berlin (UTC+1 in November): a snapshot named
/// 11.00 is the client's @GMT-….10.00.00.
#[test]
fn previous_versions_of_lvm_snapshots_mounted_outside_the_share_answer_as_samba() {
    if !tools_or_skip("previous versions of LVM snapshots", &[]) {
        return;
    }
    let (_one, tmp, _accounts) = set_up("twrp-lvm");
    let fsys = tmp.path().join("fs");
    let share = fsys.join("data").join("share");
    fs::create_dir_all(&share).unwrap();
    let snaps = tmp.path().join("lvm-snapshots");
    // The token's time in Berlin: one hour later than UTC in November.
    let berlin = |token: &str| {
        let utc = token.trim_start_matches("@GMT-");
        let (date, time) = utc.split_once('-').unwrap();
        let hour: u32 = time[..2].parse().unwrap();
        format!("lv_data-{date}_{:02}{}", hour + 1, &time[2..])
    };
    let image_of = |token: &str| snaps.join(berlin(token)).join("share");
    lay_out(&share, |token| copy_into(&share, &image_of(token)));
    fs::remove_dir(share.join(".snapshots")).unwrap();
    fs::create_dir_all(snaps.join("lost+found")).unwrap();
    let lines = format!(
        "\tshadow:snapdir = {}\n\tshadow:mountpoint = {}\n\tshadow:basedir = {}\n\
         \tshadow:format = lv_data-%Y.%m.%d_%H.%M.%S\n\tshadow:localtime = yes\n\
         \tshadow:sort = asc\n",
        snaps.display(),
        fsys.display(),
        fsys.join("data").display()
    );
    let ([samba, ours], torture) = twin::with_server_env(&[("TZ", "Europe/Berlin")], || {
        both(tmp.path(), &share, &image_of(OLD), &lines)
    });
    assert_alike(&samba, &ours, OLD);
    assert_twrp_alike(&torture, 4);
}
