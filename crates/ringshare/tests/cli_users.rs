//! `ringshare user add|del|list` and the first user of `serve`, on temporary files.

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ringshare::users::{
    self, add_user, del_user, ensure_first_user, list_users, PasswordSource, UserError,
};
use ringshare_auth::smbpasswd::SmbPasswd;

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ringshare-cli-users-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A user file in a directory that does not exist yet.
    fn file(&self) -> PathBuf {
        self.0.join("state/ringshare/smbpasswd")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn add(file: &Path, name: &str, input: &str) -> Result<String, UserError> {
    let mut reader: &[u8] = input.as_bytes();
    let reader: &mut dyn BufRead = &mut reader;
    let mut out = Vec::new();
    add_user(
        file,
        name,
        PasswordSource::Stdin(reader),
        false,
        "FS",
        &mut out,
    )?;
    Ok(String::from_utf8(out).unwrap())
}

fn list(file: &Path) -> String {
    let mut out = Vec::new();
    list_users(file, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn add_with_password_stdin_creates_the_file_private_to_its_owner() {
    let dir = TempDir::new();
    let file = dir.file();
    let msg = add(&file, "zed-no-such-account", "s3cret pass\ns3cret pass\n").unwrap();
    assert!(
        msg.starts_with("added user 'zed-no-such-account' (uid 20000)"),
        "{msg}"
    );
    let db = SmbPasswd::load(&file).unwrap();
    let e = db.get("zed-no-such-account").expect("entry saved");
    assert_eq!(e.uid, users::UNMAPPED_UID_MIN);
    assert!(e.nt_hash.is_some());
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(file.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
}

#[test]
fn add_of_an_existing_user_changes_the_password_and_keeps_the_uid() {
    let dir = TempDir::new();
    let file = dir.file();
    add(&file, "zed-a", "one\none\n").unwrap();
    add(&file, "zed-b", "two\ntwo\n").unwrap();
    let msg = add(&file, "zed-a", "three\r\nthree\r\n").unwrap();
    assert!(
        msg.starts_with("changed the password of user 'zed-a' (uid 20000)"),
        "{msg}"
    );
    let db = SmbPasswd::load(&file).unwrap();
    assert_eq!(db.entries().len(), 2);
    assert_eq!(db.get("zed-b").unwrap().uid, 20001);
}

#[test]
fn add_takes_the_uid_of_the_unix_account_with_the_same_name() {
    let dir = TempDir::new();
    let file = dir.file();
    add(&file, "root", "pw\npw\n").unwrap();
    assert_eq!(SmbPasswd::load(&file).unwrap().get("root").unwrap().uid, 0);
}

#[test]
fn add_refuses_bad_passwords_and_leaves_the_file_alone() {
    let dir = TempDir::new();
    let file = dir.file();
    type Check = fn(&UserError) -> bool;
    let cases: &[(&str, Check)] = &[
        ("a\nb\n", |e| matches!(e, UserError::PasswordMismatch)),
        ("\n\n", |e| matches!(e, UserError::EmptyPassword)),
        ("", |e| {
            matches!(
                e,
                UserError::PasswordMissing {
                    confirmation: false
                }
            )
        }),
        ("only-once\n", |e| {
            matches!(e, UserError::PasswordMissing { confirmation: true })
        }),
    ];
    for (input, expected) in cases {
        let e = add(&file, "zed", input).unwrap_err();
        assert!(expected(&e), "{input:?} gave {e}");
    }
    let long = format!("{0}\n{0}\n", "x".repeat(300));
    assert!(matches!(
        add(&file, "zed", &long).unwrap_err(),
        UserError::BadPassword(_)
    ));
    assert!(!file.exists(), "nothing was written");
}

#[test]
fn add_refuses_invalid_user_names() {
    let dir = TempDir::new();
    let file = dir.file();
    let long = "a".repeat(65);
    for name in [
        "",
        "a:b",
        "dom\\user",
        "a/b",
        "tab\there",
        " lead",
        long.as_str(),
    ] {
        let e = add(&file, name, "pw\npw\n").unwrap_err();
        assert!(matches!(e, UserError::InvalidName { .. }), "{name:?}: {e}");
    }
    assert!(add(&file, &"a".repeat(64), "pw\npw\n").is_ok());
    assert!(add(&file, "Jürgen Müller", "pw\npw\n").is_ok());
}

#[test]
fn add_without_password_stdin_and_without_a_terminal_is_refused() {
    // Test harnesses run with standard input that is not a terminal.
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return;
    }
    let dir = TempDir::new();
    let mut out = Vec::new();
    let e = add_user(
        &dir.file(),
        "zed",
        PasswordSource::Prompt,
        false,
        "FS",
        &mut out,
    )
    .unwrap_err();
    assert!(matches!(e, UserError::NotATerminal));
    assert!(e.to_string().contains("--password-stdin"));
}

#[test]
fn add_of_a_name_without_a_unix_account_is_refused_where_accounts_are_needed_and_says_how() {
    let dir = TempDir::new();
    let mut out = Vec::new();
    let mut input = "Pw-1\nPw-1\n".as_bytes();
    let name = "ringshare-no-such-account";
    let e = add_user(
        &dir.file(),
        name,
        PasswordSource::Stdin(&mut input),
        true,
        "FS",
        &mut out,
    )
    .unwrap_err();
    assert!(matches!(e, UserError::NoUnixAccount(ref n) if n == name));
    assert!(e
        .to_string()
        .contains(&format!("useradd -M -s /usr/sbin/nologin {name}")));
    assert!(!dir.file().exists(), "nothing written");
    // root has an account, so the same call goes through for it.
    let mut input = "Pw-1\nPw-1\n".as_bytes();
    add_user(
        &dir.file(),
        "root",
        PasswordSource::Stdin(&mut input),
        true,
        "FS",
        &mut out,
    )
    .unwrap();
    assert!(list(&dir.file()).starts_with("root\t0"));
}

#[test]
fn del_removes_a_user_and_refuses_an_unknown_one() {
    let dir = TempDir::new();
    let file = dir.file();
    add(&file, "zed-a", "pw\npw\n").unwrap();
    add(&file, "zed-b", "pw\npw\n").unwrap();
    let mut out = Vec::new();
    del_user(&file, "zed-a", &mut out).unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .starts_with("deleted user 'zed-a'"));
    assert_eq!(list(&file), "zed-b\t20001\n");
    let e = del_user(&file, "zed-a", &mut Vec::new()).unwrap_err();
    assert!(matches!(e, UserError::NoSuchUser(ref n) if n == "zed-a"));
}

#[test]
fn add_stores_the_users_aes_keys_salted_with_the_realm_beside_the_file_and_del_removes_them() {
    let dir = TempDir::new();
    let file = dir.file();
    add(&file, "zed-a", "pw-one\npw-one\n").unwrap();
    add(&file, "zed-b", "pw-two\npw-two\n").unwrap();
    let keys_file = users::keys::keys_file(&file);
    assert_eq!(keys_file, dir.0.join("state/ringshare/smbpasswd.keytab"));
    let mode = std::fs::metadata(&keys_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the keys are secrets");
    let keys = users::keys::user_keys(&keys_file, "zed-a").unwrap();
    let want = ringshare_auth::krb5::kdc::string_to_key(18, "pw-one", "FSzed-a").unwrap();
    assert_eq!(
        keys.iter()
            .map(|k| (k.etype, k.salt.as_str()))
            .collect::<Vec<_>>(),
        vec![(18, "FSzed-a"), (17, "FSzed-a")]
    );
    assert_eq!(keys[0].key, want);
    // A new password: new keys under the next key version.
    add(&file, "zed-a", "pw-new\npw-new\n").unwrap();
    let keys = users::keys::user_keys(&keys_file, "zed-a").unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].kvno, 2);
    del_user(&file, "zed-a", &mut Vec::new()).unwrap();
    assert!(users::keys::user_keys(&keys_file, "zed-a")
        .unwrap()
        .is_empty());
    assert_eq!(
        users::keys::user_keys(&keys_file, "zed-b").unwrap().len(),
        2
    );
}

#[test]
fn list_prints_one_line_per_user_and_nothing_for_an_empty_file() {
    let dir = TempDir::new();
    let file = dir.file();
    assert_eq!(list(&file), "");
    add(&file, "zed-a", "pw\npw\n").unwrap();
    add(&file, "zed-b", "pw\npw\n").unwrap();
    assert_eq!(list(&file), "zed-a\t20000\nzed-b\t20001\n");
}

#[test]
fn first_user_is_created_once_with_a_random_password() {
    let dir = TempDir::new();
    let file = dir.file();
    let mut out = Vec::new();
    let (name, password) = ensure_first_user(&file, "FS", &mut out).unwrap().unwrap();
    assert_eq!(name, "ringshare");
    assert_eq!(password.len(), 16);
    let notice = String::from_utf8(out).unwrap();
    assert!(notice.contains(&password), "{notice}");
    assert!(SmbPasswd::load(&file).unwrap().get("ringshare").is_some());

    let mut again = Vec::new();
    assert!(ensure_first_user(&file, "FS", &mut again)
        .unwrap()
        .is_none());
    assert!(again.is_empty(), "the password is shown only once");
}

#[test]
fn first_user_is_not_created_when_users_exist() {
    let dir = TempDir::new();
    let file = dir.file();
    add(&file, "zed", "pw\npw\n").unwrap();
    assert!(ensure_first_user(&file, "FS", &mut Vec::new())
        .unwrap()
        .is_none());
    assert!(SmbPasswd::load(&file).unwrap().get("ringshare").is_none());
}
