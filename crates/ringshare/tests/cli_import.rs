//! `ringshare user import`: Samba's users, as `pdbedit -L -w` lists them, with their passwords.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{ringshare_bin, Server, ServerConfig, TempDir};
use ringshare::users::{self, import_users, UserError};
use ringshare_auth::smbpasswd::SmbPasswd;

/// An NT hash column: the hash of "password".
const HASH: &str = "8846F7EAEE8FB117AD06BDD830B7586C";

fn line(name: &str, uid: u32, nt: &str, flags: &str) -> String {
    format!(
        "{name}:{uid}:{lm}:{nt}:[{flags:<11}]:LCT-6563A1B2:",
        lm = "X".repeat(32)
    )
}

/// Runs the import of `text` into `file`; (stdout, stderr).
fn import(file: &Path, text: &str, needs_account: bool) -> Result<(String, String), UserError> {
    let (mut out, mut warn) = (Vec::new(), Vec::new());
    import_users(file, "users.txt", text, needs_account, &mut out, &mut warn)?;
    Ok((
        String::from_utf8(out).unwrap(),
        String::from_utf8(warn).unwrap(),
    ))
}

/// A Samba setup of its own (`pdbedit -s`): a private passdb in `dir`.
fn samba_conf(dir: &Path) -> PathBuf {
    for sub in ["private", "lock", "state", "cache", "log"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let conf = dir.join("smb.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\n\
             \tprivate dir = {d}/private\n\
             \tlock directory = {d}/lock\n\
             \tstate directory = {d}/state\n\
             \tcache directory = {d}/cache\n\
             \tlog file = {d}/log/log.%m\n\
             \tpassdb backend = tdbsam:{d}/private/passdb.tdb\n",
            d = dir.display()
        ),
    )
    .unwrap();
    conf
}

fn pdbedit(conf: &Path, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("pdbedit")
        .arg("-s")
        .arg(conf)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pdbedit");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pdbedit {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn users_imported_from_pdbedit_log_on_with_the_password_they_had_on_samba() {
    const TEST: &str = "users_imported_from_pdbedit_log_on_with_the_password_they_had_on_samba";
    if !common::pdbedit_or_skip(TEST) || !common::smbclient_or_skip(TEST) {
        return;
    }
    // pdbedit -a needs a Unix account: as root one is made; otherwise our own is used.
    let name = if rustix::process::geteuid().is_root() {
        common::ensure_unix_account("rsimport");
        "rsimport".to_string()
    } else {
        let out = Command::new("id").arg("-un").output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let password = "Samba-Pass-7";
    let samba = TempDir::new("import-samba");
    let conf = samba_conf(samba.path());
    pdbedit(
        &conf,
        &["-a", "-u", &name, "-t"],
        &format!("{password}\n{password}\n"),
    );
    let listing_text = pdbedit(&conf, &["-L", "-w"], "");
    assert!(
        listing_text.starts_with(&format!("{name}:")),
        "{listing_text}"
    );
    let listing = samba.path().join("users.txt");
    std::fs::write(&listing, &listing_text).unwrap();

    let server = Server::start(
        &ServerConfig {
            import_users: Some(listing),
            ..ServerConfig::default()
        },
        |_| {},
    );
    server
        .client()
        .user(&name, password)
        .run("ls")
        .expect_ok("logon with the Samba password");
    let wrong = server.client().user(&name, "Not-The-Password").run("ls");
    wrong.expect_status("logon with another password", "NT_STATUS_LOGON_FAILURE");
}

#[test]
fn import_keeps_hashes_flags_and_times_and_warns_about_accounts_that_cannot_log_on() {
    let tmp = TempDir::new("import-warn");
    let file = tmp.path().join("state/smbpasswd");
    let no_hash = "NO PASSWORDXXXXXXXXXXXXXXXXXXXXX";
    let text = format!(
        "{}\n{}\n{}\n\n{}\n",
        line("zed-ok", 1500, HASH, "U"),
        line("zed-off", 1501, HASH, "DU"),
        line("zed-nopw", 1502, no_hash, "NU"),
        line("host$", 1503, HASH, "W"),
    );
    let (out, warn) = import(&file, &text, false).unwrap();
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.contains("imported user 'zed-ok' (uid 20000)"), "{out}");
    assert!(warn.contains("'zed-off' is disabled [DU]"), "{warn}");
    assert!(warn.contains("'zed-nopw' has no NT hash"), "{warn}");
    assert!(
        warn.contains("users.txt:5: 'host$' is a machine trust account"),
        "{warn}"
    );
    assert!(!warn.contains("zed-ok"), "{warn}");
    let db = SmbPasswd::load(&file).unwrap();
    let ok = db.get("zed-ok").unwrap();
    assert_eq!(ok.nt_hash, Some(ringshare_auth::nt_hash("password")));
    assert_eq!((ok.flags.as_str(), ok.last_change), ("U", 0x6563_A1B2));
    assert!(db.get("zed-off").unwrap().disabled());
    assert!(db.get("zed-nopw").unwrap().nt_hash.is_none());
    assert!(db.get("host$").is_none());
}

#[test]
fn import_as_root_warns_about_users_without_a_unix_account_and_still_imports_them() {
    let tmp = TempDir::new("import-account");
    let file = tmp.path().join("smbpasswd");
    let text = format!(
        "{}\n{}\n",
        line("root", 0, HASH, "U"),
        line("ringshare-no-such-account", 1600, HASH, "U")
    );
    let (out, warn) = import(&file, &text, true).unwrap();
    assert!(out.contains("imported user 'root' (uid 0)"), "{out}");
    assert!(
        warn.contains("'ringshare-no-such-account' has no Unix account"),
        "{warn}"
    );
    assert!(!warn.contains("'root'"), "{warn}");
    assert_eq!(SmbPasswd::load(&file).unwrap().entries().len(), 2);
}

#[test]
fn import_refuses_a_malformed_line_with_its_number_and_changes_nothing() {
    let tmp = TempDir::new("import-bad");
    let file = tmp.path().join("smbpasswd");
    import(&file, &line("zed-a", 1, HASH, "U"), false).unwrap();
    let before = std::fs::read_to_string(&file).unwrap();
    let good = line("zed-b", 2, HASH, "U");
    let cases = [
        (
            format!(
                "{good}\n# comment\nzed-c:1:{}:1234:[U]:LCT-0:\n",
                "X".repeat(32)
            ),
            "users.txt:3: NT hash must be 32 hex digits",
        ),
        (
            format!("{good}\nnot a user line\n"),
            "users.txt:2: expected",
        ),
        (
            format!("{good}\n{}\n", line("ZED-B", 3, HASH, "U")),
            "users.txt:2: user 'zed-b' is listed twice",
        ),
        (
            format!("{}\n", line("a/b", 3, HASH, "U")),
            "users.txt:1: invalid user name",
        ),
        ("\n# nothing\n".to_string(), "users.txt: no accounts"),
    ];
    for (text, expected) in cases {
        let e = import(&file, &text, false).unwrap_err();
        assert!(
            matches!(e, UserError::BadImportLine { .. }),
            "{text}: {e:?}"
        );
        assert!(e.to_string().starts_with(expected), "{text}: {e}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn user_import_reads_standard_input_for_a_dash_and_replaces_existing_users() {
    let tmp = TempDir::new("import-stdin");
    let passwd = tmp.path().join("smbpasswd");
    let conf = tmp.path().join("ringshare.conf");
    std::fs::write(
        &conf,
        format!("[global]\nsmb passwd file = {}\n", passwd.display()),
    )
    .unwrap();
    let mut db = SmbPasswd::default();
    db.add_or_update("zed-x", users::UNMAPPED_UID_MIN, "old", 1);
    db.save(&passwd).unwrap();
    let run = |input: &str| {
        let mut child = Command::new(ringshare_bin())
            .args(["user", "import", "-", "--config"])
            .arg(&conf)
            .env("HOME", tmp.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(&format!("{}\n", line("ZED-X", 1700, HASH, "UX")));
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("replaced user 'ZED-X' (uid 20000)"),
        "{stdout}"
    );
    let db = SmbPasswd::load(&passwd).unwrap();
    assert_eq!(db.entries().len(), 1);
    let e = db.get("zed-x").unwrap();
    assert_eq!((e.name.as_str(), e.flags.as_str()), ("ZED-X", "UX"));
    assert_eq!(e.nt_hash, Some(ringshare_auth::nt_hash("password")));

    let out = run("zed-y:1:2:3\n");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("standard input:1: expected at least 6"),
        "{stderr}"
    );
}
