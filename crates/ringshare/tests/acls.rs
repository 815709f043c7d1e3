//! Windows' Security tab over POSIX ACLs, as Samba's default (`vfs_posixacl`) does it: Debian's
//! `smbcacls` reads and sets descriptors through ringshare and through a private `smbd` in the
//! same run, and both must show the same descriptor for the same file and leave the same POSIX
//! ACL (`getfacl`) and owner after the same change. Root only (accounts and network namespaces;
//! smbcacls reaches only port 445, so each server runs in a network namespace of its own).
//!
//! Samba shows the accounts of its own passdb by its domain SIDs (S-1-5-21-...); ringshare by
//! their Unix SIDs (S-1-22-1-uid), as Samba does for every other account: the comparison maps
//! the former to the latter. Everything else must be equal byte for byte.

mod common;
mod twin;

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::TempDir;
use twin::{gid, make, must, uid, Accounts, Net, Running};

const ALICE: &str = "rs_acl_alice";
const BOB: &str = "rs_acl_bob";
/// An account with no SMB password on either server: shown as S-1-22-1-uid by both.
const XAVIER: &str = "rs_acl_x";
const GROUP: &str = "rs_acl_g";

fn layout(root: &Path) {
    let s = root.join("share");
    make(&s, "root", "root", 0o777, true);
    make(&s.join("x644"), XAVIER, GROUP, 0o644, false);
    make(&s.join("x640"), XAVIER, GROUP, 0o640, false);
    make(&s.join("xacl"), XAVIER, GROUP, 0o644, false);
    let acl = format!("u:{BOB}:rw,g:{GROUP}:r");
    must("setfacl", &["-m", &acl, s.join("xacl").to_str().unwrap()]);
    make(&s.join("xdir"), XAVIER, GROUP, 0o755, true);
    let dflt = format!("d:u:{BOB}:rwx,d:u::rwx,d:g::r-x,d:o::r-x");
    must("setfacl", &["-m", &dflt, s.join("xdir").to_str().unwrap()]);
    make(&s.join("xsgid"), XAVIER, GROUP, 0o2775, true);
    for f in ["a1", "a2", "a3", "a4", "a5", "a6"] {
        make(&s.join(f), ALICE, ALICE, 0o644, false);
    }
    make(&s.join("adir"), ALICE, ALICE, 0o755, true);
}

/// One question: `user` runs smbcacls with `args` on `file`.
struct Check {
    what: &'static str,
    user: &'static str,
    file: &'static str,
    args: Vec<String>,
}

fn checks() -> Vec<Check> {
    let x = uid(XAVIER);
    let bob = uid(BOB);
    let g = gid(GROUP);
    let show = |what, file| Check {
        what,
        user: ALICE,
        file,
        args: vec![],
    };
    let change = |what, user, file, args: &[String]| Check {
        what,
        user,
        file,
        args: args.to_vec(),
    };
    vec![
        show("a 0644 file", "x644"),
        show("a 0640 file (no read for others)", "x640"),
        show("a file with named ACL entries and a mask", "xacl"),
        show("a directory with a default ACL", "xdir"),
        show("a setgid directory", "xsgid"),
        change(
            "the owner adds an allow ACE",
            ALICE,
            "a1",
            &[
                "--add".into(),
                format!("ACL:S-1-22-1-{x}:ALLOWED/0x0/0x001200a9"),
            ],
        ),
        change(
            "the owner sets a whole DACL",
            ALICE,
            "a2",
            &[
                "--set".into(),
                format!(
                    "ACL:S-1-22-1-{}:ALLOWED/0x0/FULL,ACL:S-1-22-1-{bob}:ALLOWED/0x0/READ,\
                     ACL:S-1-1-0:ALLOWED/0x0/0x00120089",
                    uid(ALICE)
                ),
            ],
        ),
        change(
            "an inheritable ACE on a directory becomes a default ACL",
            ALICE,
            "adir",
            &[
                "--add".into(),
                format!("ACL:S-1-22-1-{x}:ALLOWED/OI|CI/0x001f01ff"),
            ],
        ),
        change(
            "another user may not change the ACL",
            BOB,
            "a3",
            &[
                "--add".into(),
                format!("ACL:S-1-22-1-{bob}:ALLOWED/0x0/FULL"),
            ],
        ),
        change(
            "the owner may not give the file away",
            ALICE,
            "a4",
            &["-C".into(), format!("S-1-22-1-{bob}")],
        ),
        change(
            "the owner gives the file to a group of hers",
            ALICE,
            "a5",
            &["-G".into(), format!("S-1-22-2-{g}")],
        ),
        change(
            "another user may not change the group",
            BOB,
            "a6",
            &["-G".into(), format!("S-1-22-2-{g}")],
        ),
    ]
}

/// The answers of `srv`: smbcacls's status and output, then the file's owner and POSIX ACL.
fn answers(srv: &Running, root: &Path, sid_map: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for c in checks() {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let r = srv.smbcacls(c.user, "share", c.file, &args);
        let mut text = format!("{}\n", twin::status_of(&r));
        if args.is_empty() {
            text.push_str(&String::from_utf8_lossy(&r.stdout));
        }
        for (from, to) in sid_map {
            text = text.replace(from.as_str(), to);
        }
        let path = root.join("share").join(c.file);
        let _ = write!(text, "{}\n{}", twin::who_owns(&path), twin::getfacl(&path));
        out.push(text);
    }
    out
}

#[test]
fn smbcacls_shows_and_sets_the_posix_acl_as_samba_does() {
    if !twin::root_and_tools_or_skip(
        "smbcacls_shows_and_sets_the_posix_acl_as_samba_does",
        &[
            "smbcacls",
            "smbd",
            "smbpasswd",
            "pdbedit",
            "setfacl",
            "getfacl",
            "unshare",
            "nsenter",
        ],
    ) {
        return;
    }
    let tmp = TempDir::new("acls");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let shares = |root: &Path| {
        format!(
            "[share]\n\tpath = {}/share\n\tread only = no\n",
            root.display()
        )
    };
    let users = [ALICE, BOB];
    let _accounts = Accounts::create(
        &[GROUP],
        &[(ALICE, &[GROUP]), (BOB, &[]), (XAVIER, &[])],
        None,
    );
    let mut results = Vec::new();
    for kind in ["samba", "ringshare"] {
        let root = twin::server_root(tmp.path(), kind);
        layout(&root);
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = if kind == "samba" {
            twin::start_samba(&base, Net::Own, "", &shares(&root), &users)
        } else {
            twin::start_ringshare(&base, Net::Own, "", &shares(&root), &users)
        };
        let mut sid_map = Vec::new();
        if kind == "samba" {
            for u in users {
                if let Some(sid) = twin::samba_sid(&srv, u) {
                    sid_map.push((sid, format!("S-1-22-1-{}", uid(u))));
                }
            }
        }
        results.push((
            answers(&srv, &root, &sid_map),
            fs::read_to_string(&srv.log).unwrap_or_default(),
        ));
    }
    let (samba, _) = &results[0];
    let (ours, log) = &results[1];
    let mut report = String::new();
    for ((c, s), o) in checks().iter().zip(samba).zip(ours) {
        if s != o {
            let _ = writeln!(
                report,
                "--- {} ({} on {}: {:?})\n samba:\n{s}\n ringshare:\n{o}",
                c.what, c.user, c.file, c.args
            );
        }
    }
    assert!(
        report.is_empty(),
        "answers differ:\n{report}\n--- ringshare log ---\n{log}"
    );
}

const XA_ALICE: &str = "rs_ax_alice";
const XA_BOB: &str = "rs_ax_bob";
const XA_XAVIER: &str = "rs_ax_x";
const XA_GROUP: &str = "rs_ax_g";

/// With `vfs objects = acl_xattr` both servers keep the whole NT ACL in `security.NTACL`, in
/// Samba's format: serving the same directory at once, each shows what the other stored, and
/// each enforces a deny the POSIX ACL does not have.
#[test]
fn an_nt_acl_set_through_samba_is_read_and_enforced_by_ringshare_and_back() {
    if !twin::root_and_tools_or_skip(
        "an_nt_acl_set_through_samba_is_read_and_enforced_by_ringshare_and_back",
        &[
            "smbcacls",
            "smbclient",
            "smbd",
            "smbpasswd",
            "unshare",
            "nsenter",
        ],
    ) {
        return;
    }
    // Accounts of its own: the other test of this file runs at the same time.
    let tmp = TempDir::new("acl-xattr");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let _accounts = Accounts::create(
        &[XA_GROUP],
        &[(XA_ALICE, &[XA_GROUP]), (XA_BOB, &[]), (XA_XAVIER, &[])],
        None,
    );
    let share = tmp.path().join("share");
    make(&share, "root", "root", 0o777, true);
    for f in ["by-samba", "by-ringshare"] {
        make(&share.join(f), XA_ALICE, XA_ALICE, 0o666, false);
    }
    let sections = format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = acl_xattr\n",
        share.display()
    );
    let users = [XA_ALICE, XA_BOB];
    let samba = twin::start_samba(&tmp.path().join("samba"), Net::Own, "", &sections, &users);
    let ours = twin::start_ringshare(&tmp.path().join("rs"), Net::Own, "", &sections, &users);
    let conf = twin::client_conf(&tmp.path().join("client"));
    let (alice, bob, x) = (uid(XA_ALICE), uid(XA_BOB), uid(XA_XAVIER));
    // Bob is denied reading, everyone else may; an ACE for an account without a password.
    let acl = format!(
        "ACL:S-1-22-1-{bob}:DENIED/0x0/READ,ACL:S-1-22-1-{alice}:ALLOWED/0x0/FULL,\
         ACL:S-1-22-1-{x}:ALLOWED/0x0/0x001200a9,ACL:S-1-1-0:ALLOWED/0x0/READ"
    );
    for (setter, file) in [(&samba, "by-samba"), (&ours, "by-ringshare")] {
        let r = setter.smbcacls(XA_ALICE, "share", file, &["--set", &acl]);
        assert_eq!(
            twin::status_of(&r),
            "OK",
            "{} sets the ACL of {file}",
            setter.name
        );
        let shown: Vec<String> = [&samba, &ours]
            .iter()
            .map(|srv| {
                let r = srv.smbcacls(XA_ALICE, "share", file, &[]);
                let mut t = String::from_utf8_lossy(&r.stdout).into_owned();
                for u in users {
                    if let Some(sid) = twin::samba_sid(&samba, u) {
                        t = t.replace(&sid, &format!("S-1-22-1-{}", uid(u)));
                    }
                }
                t
            })
            .collect();
        assert!(
            shown[0].contains(&format!("S-1-22-1-{bob}:1/0x0/")),
            "{file}: {}",
            shown[0]
        );
        assert_eq!(
            shown[0], shown[1],
            "{file} as Samba and as ringshare show it"
        );
        for srv in [&samba, &ours] {
            let get = format!("get {file} /dev/null");
            assert_eq!(
                srv.smbclient(XA_BOB, "share", &get, &conf),
                "NT_STATUS_ACCESS_DENIED",
                "{}: bob reads {file}",
                srv.name
            );
            assert_eq!(
                srv.smbclient(XA_ALICE, "share", &get, &conf),
                "OK",
                "{}: alice reads {file}",
                srv.name
            );
        }
    }
}
