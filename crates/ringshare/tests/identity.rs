//! Acting as the logged-on user, shown with real Unix accounts, smbclient, and Debian's Samba
//! `smbd` answering the same questions in the same run.
//!
//! The test (root only, as CI runs; it fails under `CI` without root, smbclient or smbd) makes
//! three accounts (`rs_id_alice`, `rs_id_bob` in group `rs_id_proj`, `rs_id_carol` not in it) with
//! home directories, lays out a tree of files with owners, modes and POSIX ACLs, and serves it
//! twice, from a fresh copy each time: by a private `smbd` and by `ringshare serve`, with the same
//! share sections. Every check (who may read, write, list or delete what; what owner, group and
//! mode new files get; `force user`, `force group`, `admin users`, guests, `[homes]`, `valid
//! users` / `invalid users` / `read list` / `write list`, create masks) runs against both, and
//! each answer must be the one written in the table, which is also Samba's: a difference names
//! the server, the check and both answers. The accounts are removed at the end.

mod common;
mod twin;

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::TempDir;
use twin::{make, must, Accounts, Net, Running};

const ALICE: &str = "rs_id_alice";
const BOB: &str = "rs_id_bob";
const CAROL: &str = "rs_id_carol";
const GROUP: &str = "rs_id_proj";
/// A name nobody has: with `map to guest = bad user` it logs on as the guest.
const STRANGER: &str = "rs_id_stranger";

/// The tree both servers serve (a fresh copy each).
fn layout(root: &Path) {
    let d = root.join("data");
    make(&d, "root", "root", 0o777, true);
    make(&d.join("alice0600"), ALICE, ALICE, 0o600, false);
    make(&d.join("alice0644"), ALICE, ALICE, 0o644, false);
    make(&d.join("proj"), "root", GROUP, 0o2770, true);
    make(&d.join("proj/plan.txt"), "root", GROUP, 0o660, false);
    make(&d.join("alicedir"), ALICE, ALICE, 0o700, true);
    make(&d.join("alicedir/inner"), ALICE, ALICE, 0o644, false);
    make(&d.join("acl.txt"), ALICE, ALICE, 0o600, false);
    must(
        "setfacl",
        &[
            "-m",
            &format!("u:{BOB}:r"),
            d.join("acl.txt").to_str().unwrap(),
        ],
    );
    make(&d.join("nobob.txt"), ALICE, ALICE, 0o644, false);
    must(
        "setfacl",
        &[
            "-m",
            &format!("u:{BOB}:-"),
            d.join("nobob.txt").to_str().unwrap(),
        ],
    );
    make(&d.join("sticky"), "root", "root", 0o1777, true);
    make(&d.join("sticky/alicefile"), ALICE, ALICE, 0o666, false);
    make(&d.join("suid-small"), ALICE, ALICE, 0o4777, false);
    make(&d.join("suid-big"), ALICE, ALICE, 0o4777, false);
    for share in ["masked", "forced", "grp", "forcemode", "iacl"] {
        make(&root.join(share), "root", "root", 0o777, true);
    }
    make(&root.join("inh"), "root", GROUP, 0o2770, true);
    make(&root.join("owned"), BOB, BOB, 0o777, true);
    make(&root.join("users"), "root", "root", 0o755, true);
    make(&root.join("users").join(ALICE), ALICE, ALICE, 0o700, true);
    let dflt = "d:u::rw,d:g::rw,d:o::r";
    must(
        "setfacl",
        &["-m", dflt, root.join("iacl").to_str().unwrap()],
    );
    make(&root.join("pub"), "root", "root", 0o755, true);
    make(&root.join("pub/open.txt"), ALICE, ALICE, 0o644, false);
    make(&root.join("pub/closed.txt"), ALICE, ALICE, 0o600, false);
}

/// The share sections both servers get.
fn shares(root: &Path) -> String {
    let r = root.display();
    format!(
        "[data]\n\tpath = {r}/data\n\tread only = no\n\
         [masked]\n\tpath = {r}/masked\n\tread only = no\n\tcreate mask = 0640\n\
         \tdirectory mask = 0750\n\
         [forced]\n\tpath = {r}/forced\n\tread only = no\n\tforce user = {ALICE}\n\
         [grp]\n\tpath = {r}/grp\n\tread only = no\n\tforce group = {GROUP}\n\
         [admin]\n\tpath = {r}/data\n\tread only = no\n\tadmin users = {BOB}\n\
         [ro]\n\tpath = {r}/data\n\tread only = yes\n\twrite list = {BOB}\n\
         [limited]\n\tpath = {r}/data\n\tread only = no\n\tinvalid users = {CAROL}\n\
         \tread list = {BOB}\n\
         [pub]\n\tpath = {r}/pub\n\tguest ok = yes\n\tread only = yes\n\
         [homes]\n\tread only = no\n\tvalid users = %S\n\tbrowseable = no\n\
         [hidden]\n\tpath = {r}/data\n\tread only = no\n\thide unreadable = yes\n\
         [inh]\n\tpath = {r}/inh\n\tread only = no\n\tinherit permissions = yes\n\
         [forcemode]\n\tpath = {r}/forcemode\n\tread only = no\n\tforce create mode = 0060\n\
         \tforce directory mode = 02000\n\
         [owned]\n\tpath = {r}/owned\n\tread only = no\n\tinherit owner = yes\n\
         [iacl]\n\tpath = {r}/iacl\n\tread only = no\n\tinherit acls = yes\n\
         [noiacl]\n\tpath = {r}/iacl\n\tread only = no\n\
         [peruser]\n\tpath = {r}/users/%U\n\tread only = no\n\
         [team]\n\tpath = {r}/data\n\tread only = yes\n\tvalid users = @{GROUP}\n\
         \twrite list = +{GROUP}\n\
         [noteam]\n\tpath = {r}/data\n\tread only = no\n\tinvalid users = @{GROUP}\n"
    )
}

/// One question: `user` runs `cmds` on `share`; the answer must be `want`.
/// After it, `path` (under the served root) must be `owner:group mode`.
struct Check {
    what: &'static str,
    user: &'static str,
    share: &'static str,
    cmds: &'static str,
    want: &'static str,
    then: Option<(&'static str, &'static str)>,
}

const fn check(
    what: &'static str,
    user: &'static str,
    share: &'static str,
    cmds: &'static str,
    want: &'static str,
) -> Check {
    Check {
        what,
        user,
        share,
        cmds,
        want,
        then: None,
    }
}

const fn check_then(
    what: &'static str,
    user: &'static str,
    share: &'static str,
    cmds: &'static str,
    want: &'static str,
    path: &'static str,
    owned: &'static str,
) -> Check {
    Check {
        what,
        user,
        share,
        cmds,
        want,
        then: Some((path, owned)),
    }
}

const DENIED: &str = "NT_STATUS_ACCESS_DENIED";

/// The questions and Samba's answers. `LOCAL` is a small local file, `BIG` a
/// 1 MiB one (written with WRITEs ringshare splices from the socket).
fn checks() -> Vec<Check> {
    vec![
        check(
            "alice reads her 0600 file",
            ALICE,
            "data",
            "get alice0600 /dev/null",
            "OK",
        ),
        check(
            "bob cannot read alice's 0600 file",
            BOB,
            "data",
            "get alice0600 /dev/null",
            DENIED,
        ),
        check(
            "bob reads alice's 0644 file",
            BOB,
            "data",
            "get alice0644 /dev/null",
            "OK",
        ),
        check(
            "bob cannot overwrite alice's 0644 file",
            BOB,
            "data",
            "put LOCAL alice0644",
            DENIED,
        ),
        check(
            "bob cannot set the times of alice's 0644 file",
            BOB,
            "data",
            "utimes alice0644 -1 -1 20:01:02-03:04:05 -1",
            DENIED,
        ),
        check(
            "nor its DOS attributes",
            BOB,
            "data",
            "setmode alice0644 +h",
            DENIED,
        ),
        check(
            "alice sets the times of her file",
            ALICE,
            "data",
            "utimes alice0644 -1 -1 20:01:02-03:04:05 -1",
            "OK",
        ),
        check(
            "and of a group file she may write but does not own",
            ALICE,
            "data",
            "utimes proj/plan.txt -1 -1 20:01:02-03:04:05 -1",
            "OK",
        ),
        check(
            "and its DOS attributes",
            ALICE,
            "data",
            "setmode proj/plan.txt +h",
            "OK",
        ),
        check(
            "alice lists the 2770 group directory",
            ALICE,
            "data",
            "ls proj/*",
            "OK",
        ),
        check(
            "carol, not in the group, cannot list it",
            CAROL,
            "data",
            "ls proj/*",
            DENIED,
        ),
        check(
            "bob cannot list alice's 0700 directory",
            BOB,
            "data",
            "ls alicedir/*",
            DENIED,
        ),
        check(
            "an ACL entry lets bob read",
            BOB,
            "data",
            "get acl.txt /dev/null",
            "OK",
        ),
        check("but not write", BOB, "data", "put LOCAL acl.txt", DENIED),
        check(
            "an empty ACL entry denies bob",
            BOB,
            "data",
            "get nobob.txt /dev/null",
            DENIED,
        ),
        check(
            "carol reads what bob may not",
            CAROL,
            "data",
            "get nobob.txt /dev/null",
            "OK",
        ),
        check(
            "bob cannot delete alice's file in a sticky directory",
            BOB,
            "data",
            "del sticky/alicefile",
            DENIED,
        ),
        check(
            "nor rename it there",
            BOB,
            "data",
            "rename sticky/alicefile sticky/bobs",
            DENIED,
        ),
        check(
            "nor move a file out of alice's 0700 directory",
            BOB,
            "data",
            "rename alicedir/inner moved",
            DENIED,
        ),
        check(
            "alice renames her file in the sticky directory",
            ALICE,
            "data",
            "rename sticky/alicefile sticky/alicefile2",
            "OK",
        ),
        check_then(
            "a file alice makes is hers",
            ALICE,
            "data",
            "put LOCAL new-by-alice",
            "OK",
            "data/new-by-alice",
            "rs_id_alice:rs_id_alice 744",
        ),
        check_then(
            "a directory alice makes is hers",
            ALICE,
            "data",
            "mkdir dir-by-alice",
            "OK",
            "data/dir-by-alice",
            "rs_id_alice:rs_id_alice 755",
        ),
        check_then(
            "a file made in a setgid directory gets its group",
            ALICE,
            "data",
            "put LOCAL proj/by-alice",
            "OK",
            "data/proj/by-alice",
            "rs_id_alice:rs_id_proj 744",
        ),
        check_then(
            "bob's small write strips the setuid bit",
            BOB,
            "data",
            "put LOCAL suid-small",
            "OK",
            "data/suid-small",
            "rs_id_alice:rs_id_alice 777",
        ),
        check_then(
            "so does a large one",
            BOB,
            "data",
            "put BIG suid-big",
            "OK",
            "data/suid-big",
            "rs_id_alice:rs_id_alice 777",
        ),
        check_then(
            "create mask applies",
            ALICE,
            "masked",
            "put LOCAL m.txt",
            "OK",
            "masked/m.txt",
            "rs_id_alice:rs_id_alice 640",
        ),
        check_then(
            "directory mask applies",
            ALICE,
            "masked",
            "mkdir md",
            "OK",
            "masked/md",
            "rs_id_alice:rs_id_alice 750",
        ),
        check_then(
            "force user makes bob's file alice's",
            BOB,
            "forced",
            "put LOCAL by-bob",
            "OK",
            "forced/by-bob",
            "rs_id_alice:rs_id_alice 744",
        ),
        check_then(
            "force group gives carol's file the group",
            CAROL,
            "grp",
            "put LOCAL by-carol",
            "OK",
            "grp/by-carol",
            "rs_id_carol:rs_id_proj 744",
        ),
        check(
            "admin users read any file",
            BOB,
            "admin",
            "get alice0600 /dev/null",
            "OK",
        ),
        check(
            "others on that share do not",
            CAROL,
            "admin",
            "get alice0600 /dev/null",
            DENIED,
        ),
        check(
            "write list makes a read-only share writable for bob",
            BOB,
            "ro",
            "put LOCAL ro-by-bob",
            "OK",
        ),
        check(
            "and only for him",
            ALICE,
            "ro",
            "put LOCAL ro-by-alice",
            DENIED,
        ),
        check(
            "invalid users cannot connect",
            CAROL,
            "limited",
            "ls",
            DENIED,
        ),
        check(
            "valid users with @group admit a member",
            ALICE,
            "team",
            "ls acl.txt",
            "OK",
        ),
        check("and no one else", CAROL, "team", "ls", DENIED),
        check(
            "write list with +group makes a read-only share writable for a member",
            BOB,
            "team",
            "put LOCAL team-by-bob",
            "OK",
        ),
        check(
            "invalid users with @group keep a member out",
            BOB,
            "noteam",
            "ls",
            DENIED,
        ),
        check("and let others in", CAROL, "noteam", "ls acl.txt", "OK"),
        check(
            "read list makes the share read-only for bob",
            BOB,
            "limited",
            "put LOCAL lim-by-bob",
            DENIED,
        ),
        check(
            "others write there",
            ALICE,
            "limited",
            "put LOCAL lim-by-alice",
            "OK",
        ),
        check(
            "the guest reads a 0644 file",
            STRANGER,
            "pub",
            "get open.txt /dev/null",
            "OK",
        ),
        check(
            "the guest (nobody) cannot read a 0600 file",
            STRANGER,
            "pub",
            "get closed.txt /dev/null",
            DENIED,
        ),
        check_then(
            "alice gets her home",
            ALICE,
            ALICE,
            "put LOCAL in-home",
            "OK",
            "home/rs_id_alice/in-home",
            "rs_id_alice:rs_id_alice 744",
        ),
        check("but not bob's", ALICE, BOB, "ls", DENIED),
        check(
            "hide unreadable hides what bob cannot read",
            BOB,
            "hidden",
            "ls alice0600",
            "NT_STATUS_NO_SUCH_FILE",
        ),
        check("and shows what he can", BOB, "hidden", "ls alice0644", "OK"),
        check_then(
            "inherit permissions gives a file the parent's rw bits",
            ALICE,
            "inh",
            "put LOCAL f",
            "OK",
            "inh/f",
            "rs_id_alice:rs_id_proj 760",
        ),
        check_then(
            "and a directory all of the parent's mode",
            ALICE,
            "inh",
            "mkdir d",
            "OK",
            "inh/d",
            "rs_id_alice:rs_id_proj 2770",
        ),
        check_then(
            "force create mode adds bits",
            ALICE,
            "forcemode",
            "put LOCAL f",
            "OK",
            "forcemode/f",
            "rs_id_alice:rs_id_alice 764",
        ),
        check_then(
            "force directory mode adds bits",
            ALICE,
            "forcemode",
            "mkdir d",
            "OK",
            "forcemode/d",
            "rs_id_alice:rs_id_alice 2755",
        ),
        check_then(
            "inherit owner gives a new file to the directory's owner",
            ALICE,
            "owned",
            "put LOCAL f",
            "OK",
            "owned/f",
            "rs_id_bob:rs_id_alice 744",
        ),
        check_then(
            "inherit acls lets the default ACL apply in full",
            ALICE,
            "iacl",
            "put LOCAL f",
            "OK",
            "iacl/f",
            "rs_id_alice:rs_id_alice 644",
        ),
        check_then(
            "without it the create mask still applies",
            ALICE,
            "noiacl",
            "put LOCAL g",
            "OK",
            "iacl/g",
            "rs_id_alice:rs_id_alice 644",
        ),
        check_then(
            "a path with %U is each user's own",
            ALICE,
            "peruser",
            "put LOCAL mine",
            "OK",
            "users/rs_id_alice/mine",
            "rs_id_alice:rs_id_alice 744",
        ),
        check(
            "and one without a directory there gets none",
            BOB,
            "peruser",
            "ls",
            "NT_STATUS_BAD_NETWORK_NAME",
        ),
    ]
}

/// Runs every check against `srv` serving `root`; the answers as lines.
fn answers(srv: &Running, root: &Path, client_conf: &Path, local: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for c in checks() {
        let cmds = c
            .cmds
            .replace("LOCAL", local.join("small").to_str().unwrap())
            .replace("BIG", local.join("big").to_str().unwrap());
        let mut got = srv.smbclient(c.user, c.share, &cmds, client_conf);
        if let Some((path, _)) = c.then {
            let p = if let Some(h) = path.strip_prefix("home/") {
                root.join("home").join(h)
            } else {
                root.join(path)
            };
            got = format!("{got}; {path}: {}", twin::who_owns(&p));
        }
        out.push(got);
    }
    out
}

fn expected() -> Vec<String> {
    checks()
        .iter()
        .map(|c| match c.then {
            Some((path, owned)) => format!("{}; {path}: {owned}", c.want),
            None => c.want.to_string(),
        })
        .collect()
}

#[test]
fn users_act_as_their_unix_accounts_with_the_same_answers_as_samba() {
    if !twin::root_and_tools_or_skip(
        "users_act_as_their_unix_accounts_with_the_same_answers_as_samba",
        &["smbclient", "smbd", "smbpasswd", "setfacl", "useradd"],
    ) {
        return;
    }
    let tmp = TempDir::new("identity");
    // The served tree must be reachable by the accounts (the temp dir is root's).
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let local = tmp.path().join("local");
    fs::create_dir_all(&local).unwrap();
    fs::write(local.join("small"), b"hello\n").unwrap();
    fs::write(local.join("big"), vec![7u8; 1 << 20]).unwrap();
    let client_conf = twin::client_conf(&local);
    let want = expected();
    let mut report = String::new();
    let mut failed = false;
    for kind in ["samba", "ringshare"] {
        let root = tmp.path().join(kind);
        fs::create_dir_all(root.join("home")).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(root.join("home"), fs::Permissions::from_mode(0o755)).unwrap();
        let _accounts = Accounts::create(
            &[GROUP],
            &[(ALICE, &[GROUP]), (BOB, &[GROUP]), (CAROL, &[])],
            Some(&root.join("home")),
        );
        layout(&root);
        let base = tmp.path().join(format!("{kind}-state"));
        let users = [ALICE, BOB, CAROL];
        let global = "\tmap to guest = bad user\n";
        let srv = if kind == "samba" {
            twin::start_samba(&base, Net::Loopback, global, &shares(&root), &users)
        } else {
            twin::start_ringshare(&base, Net::Loopback, global, &shares(&root), &users)
        };
        let got = answers(&srv, &root, &client_conf, &local);
        for ((c, w), g) in checks().iter().zip(&want).zip(&got) {
            if w != g {
                failed = true;
                let _ = writeln!(
                    report,
                    "{}: {} ({} on [{}]: {}): want {w}, got {g}",
                    srv.name, c.what, c.user, c.share, c.cmds
                );
            }
        }
        if failed && kind == "ringshare" {
            let _ = writeln!(
                report,
                "--- ringshare log ---\n{}",
                fs::read_to_string(&srv.log).unwrap_or_default()
            );
        }
    }
    assert!(!failed, "answers differ:\n{report}");
}
