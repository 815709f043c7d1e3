//! `ringshare user add|del|list|import`, and the first user `serve` creates on an empty user
//! file (`user import`: [`import_users`]).
//!
//! Users live in an smbpasswd file ([`SmbPasswd`]). A server run as root acts as each user's
//! Unix account (resolved through NSS at logon; see `accounts`), so as root `user add` needs the
//! account to exist, as Samba's `smbpasswd -a` does. Each entry carries a Unix uid: the uid of
//! the Unix account with the same name when `/etc/passwd` has one, otherwise the uid the entry
//! already had, otherwise the lowest uid from [`UNMAPPED_UID_MIN`] (20000) upward that neither
//! `/etc/passwd` nor the smbpasswd file uses (users of a server not run as root, and the first
//! user `serve DIR` makes). The server goes by the account, not by this column.
//!
//! Every function takes its output stream (and its password input) as a parameter, so the
//! commands are tested with in-memory buffers.

use std::fmt;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ringshare_auth::smbpasswd::{SmbPasswd, SmbPasswdError};

mod import;
pub mod keys;

pub use import::{import_users, read_listing, IMPORT_BYTES_MAX};

/// Lowest uid handed to a user with no Unix account of the same name.
pub const UNMAPPED_UID_MIN: u32 = 20000;

/// Longest user name accepted, in characters.
pub const USER_NAME_LEN_MAX: usize = 64;

/// Longest password accepted, in characters (the NTLM limit on Windows is 256 UTF-16 units).
pub const PASSWORD_LEN_MAX: usize = 256;

/// Name of the user [`ensure_first_user`] creates.
pub const FIRST_USER_NAME: &str = "ringshare";

/// Length of the generated first password.
pub const GENERATED_PASSWORD_LEN: usize = 16;

/// Letters and digits a person cannot confuse when copying a password: no 0/O/o, 1/l/I.
const PASSWORD_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789";

/// Where `user add` takes the new password from.
pub enum PasswordSource<'a> {
    /// `--password-stdin`: two lines, the password and its confirmation.
    Stdin(&'a mut dyn BufRead),
    /// Ask twice on the terminal with echo off; refused when standard input is not a terminal.
    Prompt,
}

/// Why a user command failed.
#[derive(Debug)]
pub enum UserError {
    /// The user name breaks a rule; `reason` says which.
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The password was empty.
    EmptyPassword,
    /// The confirmation differs from the password.
    PasswordMismatch,
    /// Standard input ended before the password (`confirmation` says which line was missing).
    PasswordMissing {
        /// True when the password came but its confirmation did not.
        confirmation: bool,
    },
    /// The password is longer than [`PASSWORD_LEN_MAX`] or is not UTF-8.
    BadPassword(&'static str),
    /// No `--password-stdin` and standard input is not a terminal to prompt on.
    NotATerminal,
    /// `user del` of a user that is not in the file.
    NoSuchUser(String),
    /// `user add` as root of a name without a Unix account: a server run as
    /// root acts as each user's account, so it needs one (as Samba does).
    NoUnixAccount(String),
    /// The smbpasswd file could not be read or parsed.
    Load {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: SmbPasswdError,
    },
    /// `user import`: a line of the listing is not an account (`line` 0: the whole listing).
    BadImportLine {
        /// The file, or "standard input".
        source: String,
        /// 1-based line number, 0 when it is about the whole listing.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Some other I/O failed; `context` says what was being done.
    Io {
        /// What was being done.
        context: String,
        /// The error.
        error: io::Error,
    },
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserError::InvalidName { name, reason } => {
                write!(f, "invalid user name {name:?}: {reason}")
            }
            UserError::EmptyPassword => f.write_str("the password is empty; refusing it"),
            UserError::PasswordMismatch => f.write_str("the passwords do not match"),
            UserError::PasswordMissing {
                confirmation: false,
            } => f.write_str(
                "no password on standard input: give it twice, on two lines (password, then confirmation)",
            ),
            UserError::PasswordMissing { confirmation: true } => f.write_str(
                "no confirmation on standard input: give the password twice, on two lines",
            ),
            UserError::BadPassword(why) => write!(f, "unusable password: {why}"),
            UserError::NotATerminal => f.write_str(
                "standard input is not a terminal, so the password cannot be asked for; \
                 use --password-stdin and give the password twice, on two lines",
            ),
            UserError::NoSuchUser(name) => write!(f, "no user named {name:?}"),
            UserError::NoUnixAccount(name) => write!(
                f,
                "{name:?} has no Unix account: each user acts as their own Unix account \
                 (as with Samba); create it first, for example with \
                 `useradd -M -s /usr/sbin/nologin {name}`, then run this again"
            ),
            UserError::Load { path, error } => write!(f, "{}: {error}", path.display()),
            UserError::BadImportLine {
                source,
                line: 0,
                message,
            } => write!(f, "{source}: {message}"),
            UserError::BadImportLine {
                source,
                line,
                message,
            } => write!(f, "{source}:{line}: {message}"),
            UserError::Io { context, error } => write!(f, "{context}: {error}"),
        }
    }
}

impl std::error::Error for UserError {}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> UserError {
    let context = context.into();
    move |error| UserError::Io { context, error }
}

/// Checks a user name: 1 to [`USER_NAME_LEN_MAX`] characters, none of them `:` (the smbpasswd
/// field separator), `\` or `/` (domain separators), or a control character; no blanks at the ends.
pub fn validate_name(name: &str) -> Result<(), UserError> {
    let invalid = |reason| {
        Err(UserError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.chars().count() > USER_NAME_LEN_MAX {
        return invalid("it is longer than 64 characters");
    }
    if name.chars().any(|c| c.is_control()) {
        return invalid("it contains a control character");
    }
    if name.contains([':', '\\', '/']) {
        return invalid("it contains ':', '\\' or '/'");
    }
    if name.trim() != name {
        return invalid("it starts or ends with a blank");
    }
    Ok(())
}

/// `ringshare user add NAME`: adds the user, or changes the password of an existing one.
/// `needs_account`: the name must have a Unix account (the server runs as root and acts as
/// each user's account), as Samba's `smbpasswd -a` requires. The user's AES keys for the
/// built-in KDC are stored too, salted with `realm` ([`keys`]).
pub fn add_user(
    file: &Path,
    name: &str,
    password_source: PasswordSource<'_>,
    needs_account: bool,
    realm: &str,
    out: &mut dyn Write,
) -> Result<(), UserError> {
    validate_name(name)?;
    if needs_account && !crate::accounts::has_account(name) {
        return Err(UserError::NoUnixAccount(name.to_string()));
    }
    // Read the file first so that a broken file is reported before the password is asked for.
    let mut db = load(file)?;
    let password = match password_source {
        PasswordSource::Stdin(reader) => read_password_twice(reader)?,
        PasswordSource::Prompt => prompt_password_twice()?,
    };
    let existed = db.get(name).is_some();
    let uid = uid_for(name, &db);
    db.add_or_update(name, uid, &password, now_unix());
    save(&db, file)?;
    keys::set_keys(file, realm, name, &password)?;
    let what = if existed {
        "changed the password of"
    } else {
        "added"
    };
    writeln!(
        out,
        "{what} user '{name}' (uid {uid}) in {}",
        file.display()
    )
    .map_err(io_err("writing output"))
}

/// `ringshare user del NAME`.
pub fn del_user(file: &Path, name: &str, out: &mut dyn Write) -> Result<(), UserError> {
    let mut db = load(file)?;
    if !db.remove(name) {
        return Err(UserError::NoSuchUser(name.to_string()));
    }
    save(&db, file)?;
    keys::remove_keys(file, name)?;
    writeln!(out, "deleted user '{name}' from {}", file.display()).map_err(io_err("writing output"))
}

/// `ringshare user list`: one line per user, `NAME<TAB>UID`, followed by `<TAB>disabled` or
/// `<TAB>no password` when that applies. Nothing when there are no users.
pub fn list_users(file: &Path, out: &mut dyn Write) -> Result<(), UserError> {
    let db = load(file)?;
    for e in db.entries() {
        let mut line = format!("{}\t{}", e.name, e.uid);
        if e.disabled() {
            line.push_str("\tdisabled");
        }
        if e.nt_hash.is_none() {
            line.push_str("\tno password");
        }
        writeln!(out, "{line}").map_err(io_err("writing output"))?;
    }
    Ok(())
}

/// For `serve`: when the user file has no users, creates [`FIRST_USER_NAME`] with a random
/// password, writes a notice with the password to `out` (the only time it is ever shown) and
/// returns (name, password). Returns `None`, and writes nothing, when there already are users.
pub fn ensure_first_user(
    file: &Path,
    realm: &str,
    out: &mut dyn Write,
) -> Result<Option<(String, String)>, UserError> {
    let mut db = load(file)?;
    if !db.entries().is_empty() {
        return Ok(None);
    }
    let password = random_password()?;
    let uid = uid_for(FIRST_USER_NAME, &db);
    db.add_or_update(FIRST_USER_NAME, uid, &password, now_unix());
    save(&db, file)?;
    keys::set_keys(file, realm, FIRST_USER_NAME, &password)?;
    writeln!(
        out,
        "created user '{FIRST_USER_NAME}' with password '{password}' in {}\n\
         this password is shown only once; change it with `ringshare user add {FIRST_USER_NAME}`",
        file.display()
    )
    .map_err(io_err("writing output"))?;
    Ok(Some((FIRST_USER_NAME.to_string(), password)))
}

/// A password of [`GENERATED_PASSWORD_LEN`] characters from an alphabet without look-alike
/// characters (56 symbols, about 93 bits), drawn without modulo bias.
pub fn random_password() -> Result<String, UserError> {
    let n = PASSWORD_ALPHABET.len();
    // Largest multiple of the alphabet size that fits in a byte: bytes at or above it are
    // redrawn so that every symbol is equally likely.
    let limit = 256 - 256 % n;
    let mut password = String::with_capacity(GENERATED_PASSWORD_LEN);
    let mut buf = [0u8; 32];
    while password.len() < GENERATED_PASSWORD_LEN {
        getrandom::fill(&mut buf).map_err(|e| UserError::Io {
            context: "getting random bytes".to_string(),
            error: io::Error::other(e.to_string()),
        })?;
        for &b in &buf {
            if password.len() == GENERATED_PASSWORD_LEN {
                break;
            }
            if usize::from(b) < limit {
                if let Some(&c) = PASSWORD_ALPHABET.get(usize::from(b) % n) {
                    password.push(char::from(c));
                }
            }
        }
    }
    Ok(password)
}

/// Reads the password and its confirmation, one line each.
pub fn read_password_twice(reader: &mut dyn BufRead) -> Result<String, UserError> {
    let first = read_password_line(reader)?.ok_or(UserError::PasswordMissing {
        confirmation: false,
    })?;
    if first.is_empty() {
        return Err(UserError::EmptyPassword);
    }
    let second =
        read_password_line(reader)?.ok_or(UserError::PasswordMissing { confirmation: true })?;
    if first != second {
        return Err(UserError::PasswordMismatch);
    }
    Ok(first)
}

/// One line without its line ending; `None` at end of input. Reads at most a bounded amount.
fn read_password_line(reader: &mut dyn BufRead) -> Result<Option<String>, UserError> {
    // Characters are up to 4 bytes; allow for "\r\n".
    let limit = (PASSWORD_LEN_MAX * 4 + 2) as u64;
    let mut bytes = Vec::new();
    let n = reader
        .take(limit)
        .read_until(b'\n', &mut bytes)
        .map_err(io_err("reading the password"))?;
    if n == 0 {
        return Ok(None);
    }
    let ended = bytes.last() == Some(&b'\n');
    if ended {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    } else if n as u64 == limit {
        return Err(UserError::BadPassword("longer than 256 characters"));
    }
    let line = String::from_utf8(bytes).map_err(|_| UserError::BadPassword("not valid UTF-8"))?;
    if line.chars().count() > PASSWORD_LEN_MAX {
        return Err(UserError::BadPassword("longer than 256 characters"));
    }
    Ok(Some(line))
}

/// Asks for the password twice on the terminal with echo off.
fn prompt_password_twice() -> Result<String, UserError> {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return Err(UserError::NotATerminal);
    }
    let first = prompt_no_echo(&stdin, "New password: ")?;
    if first.is_empty() {
        return Err(UserError::EmptyPassword);
    }
    let second = prompt_no_echo(&stdin, "Retype new password: ")?;
    if first != second {
        return Err(UserError::PasswordMismatch);
    }
    Ok(first)
}

/// Puts the terminal back as it was, even on an early return.
struct EchoGuard<'a> {
    fd: std::os::fd::BorrowedFd<'a>,
    saved: rustix::termios::Termios,
}

impl Drop for EchoGuard<'_> {
    fn drop(&mut self) {
        let _ =
            rustix::termios::tcsetattr(self.fd, rustix::termios::OptionalActions::Now, &self.saved);
    }
}

fn prompt_no_echo(stdin: &io::Stdin, prompt: &str) -> Result<String, UserError> {
    use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions};
    use std::os::fd::AsFd;

    let mut err = io::stderr();
    write!(err, "{prompt}")
        .and_then(|()| err.flush())
        .map_err(io_err("writing the prompt"))?;
    let fd = stdin.as_fd();
    let saved = tcgetattr(fd).map_err(|e| UserError::Io {
        context: "reading terminal settings".to_string(),
        error: e.into(),
    })?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    // Still echo the newline so that the next prompt starts on its own line.
    quiet.local_modes.insert(LocalModes::ECHONL);
    let _guard = EchoGuard { fd, saved };
    tcsetattr(fd, OptionalActions::Flush, &quiet).map_err(|e| UserError::Io {
        context: "turning terminal echo off".to_string(),
        error: e.into(),
    })?;
    // Read the descriptor directly, a byte at a time, rather than through `stdin.lock()`: the
    // caller may hold that lock (it would deadlock), and std's buffer could swallow input past
    // the line. In canonical mode the terminal hands over whole lines anyway.
    let limit = PASSWORD_LEN_MAX * 4 + 2;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < limit {
        match rustix::io::read(fd, &mut byte) {
            Ok(0) => break,
            Ok(_) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(io_err("reading the password")(e.into())),
        }
    }
    read_password_line(&mut line.as_slice())?.ok_or(UserError::PasswordMissing {
        confirmation: false,
    })
}

/// The uid for `name`: its Unix account's, else the one it already has in `db`, else a free one.
fn uid_for(name: &str, db: &SmbPasswd) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let existing = db.get(name).map(|e| e.uid);
    let used: Vec<u32> = db.entries().iter().map(|e| e.uid).collect();
    pick_uid(name, &passwd, existing, &used)
}

/// The uid rule on explicit inputs (see the module documentation).
pub fn pick_uid(name: &str, etc_passwd: &str, existing: Option<u32>, used: &[u32]) -> u32 {
    let accounts: Vec<(&str, u32)> = etc_passwd
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let account = fields.next()?;
            let uid = fields.nth(1)?.trim().parse::<u32>().ok()?;
            Some((account, uid))
        })
        .collect();
    if let Some(&(_, uid)) = accounts.iter().find(|(a, _)| *a == name) {
        return uid;
    }
    if let Some(uid) = existing {
        return uid;
    }
    let mut uid = UNMAPPED_UID_MIN;
    while uid < u32::MAX && (used.contains(&uid) || accounts.iter().any(|&(_, u)| u == uid)) {
        uid += 1;
    }
    uid
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn load(file: &Path) -> Result<SmbPasswd, UserError> {
    SmbPasswd::load(file).map_err(|error| UserError::Load {
        path: file.to_path_buf(),
        error,
    })
}

/// Saves the file, creating its directory (mode 0700) when missing, and leaves the file mode
/// 0600: it holds password hashes.
fn save(db: &SmbPasswd, file: &Path) -> Result<(), UserError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err(format!("creating {}", dir.display())))?;
        }
    }
    db.save(file)
        .map_err(io_err(format!("writing {}", file.display())))?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err(format!("setting the mode of {}", file.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_comes_from_etc_passwd_when_the_account_exists() {
        let passwd = "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(pick_uid("alice", passwd, Some(20001), &[]), 1000);
    }

    #[test]
    fn uid_is_kept_for_an_existing_entry_without_account() {
        assert_eq!(pick_uid("bob", "", Some(20005), &[20005]), 20005);
    }

    #[test]
    fn uid_skips_values_used_by_the_file_or_by_accounts() {
        let passwd = "svc:x:20001:20001::/:/bin/false\nbroken line\n";
        assert_eq!(pick_uid("carol", passwd, None, &[20000, 20002]), 20003);
        assert_eq!(pick_uid("carol", "", None, &[]), UNMAPPED_UID_MIN);
    }

    #[test]
    fn random_passwords_use_only_the_unambiguous_alphabet() {
        let a = random_password().unwrap();
        let b = random_password().unwrap();
        assert_eq!(a.len(), GENERATED_PASSWORD_LEN);
        assert_ne!(a, b);
        for c in a.chars().chain(b.chars()) {
            assert!(PASSWORD_ALPHABET.contains(&(c as u8)), "{c}");
            assert!(!"0Oo1lI".contains(c));
        }
    }
}
