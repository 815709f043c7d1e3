//! `ringshare user import FILE`: Samba's users with their passwords.
//!
//! FILE is what `pdbedit -L -w` prints (Samba's smbpasswd format, one account a line:
//! `name:uid:LMHASH:NTHASH:[flags]:LCT-XXXXXXXX:`), whatever passdb backend Samba used; an
//! smbpasswd file itself is the same format. The NT hash is the password as Windows and Samba
//! keep it, so users log on with the password they had. The whole listing is checked before
//! anything is written: a malformed line stops the import with its line number.
//!
//! Each account is added to ringshare's smbpasswd file, or replaces the one of the same name,
//! with its NT hash, flags and last change time as listed. Its uid follows the rule of
//! `user add` (module [`super`]): the uid of the Unix account of that name here, which may
//! differ from the uid on the Samba machine. Warned about but imported: disabled accounts (they
//! stay disabled), accounts without an NT hash (they cannot log on until `ringshare user add`
//! sets a password) and, when the server will run as root, accounts without a Unix account
//! (their logons are refused until it exists). Machine trust accounts (`W`, `S`, `I` flags)
//! are not users and are left out, with a warning.

use std::io::{Read, Write};
use std::path::Path;

use ringshare_auth::smbpasswd::Entry;

use super::{io_err, load, save, uid_for, validate_name, UserError};

/// Largest listing read: far beyond any real user list, small enough to hold in memory.
pub const IMPORT_BYTES_MAX: u64 = 64 << 20;

/// Imports the accounts of `text` (named `source` in messages) into the smbpasswd file `file`:
/// one line per account on `out` (`imported user 'NAME' (uid N)` or `replaced user ...`),
/// warnings on `warn`. `needs_account`: the server runs as root and acts as each user's Unix
/// account, so an account without one is warned about.
pub fn import_users(
    file: &Path,
    source: &str,
    text: &str,
    needs_account: bool,
    out: &mut dyn Write,
    warn: &mut dyn Write,
) -> Result<(), UserError> {
    let bad = |line: usize, message: String| UserError::BadImportLine {
        source: source.to_string(),
        line,
        message,
    };
    let mut listed: Vec<Entry> = Vec::new();
    let mut warnings = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() || raw.starts_with('#') {
            continue;
        }
        let entry = Entry::parse_line(raw).map_err(|m| bad(line, m))?;
        validate_name(&entry.name).map_err(|e| bad(line, e.to_string()))?;
        if let Some(first) = listed
            .iter()
            .find(|e| e.name.to_lowercase() == entry.name.to_lowercase())
        {
            return Err(bad(
                line,
                format!("user '{}' is listed twice (names ignore case)", first.name),
            ));
        }
        if entry.is_trust_account() {
            warnings.push(format!(
                "{source}:{line}: '{}' is a machine trust account [{}], not a user; not imported",
                entry.name, entry.flags
            ));
            continue;
        }
        listed.push(entry);
    }
    if listed.is_empty() && warnings.is_empty() {
        return Err(bad(
            0,
            "no accounts: expected the output of `pdbedit -L -w` (name:uid:LM:NT:[flags]:LCT-...:)"
                .to_string(),
        ));
    }
    let mut db = load(file)?;
    let mut report = Vec::new();
    let imported: Vec<String> = listed.iter().map(|e| e.name.clone()).collect();
    for mut entry in listed {
        let name = entry.name.clone();
        if entry.disabled() {
            warnings.push(format!(
                "user '{name}' is disabled [{}]: imported disabled, it cannot log on",
                entry.flags
            ));
        }
        if entry.nt_hash.is_none() {
            warnings.push(format!(
                "user '{name}' has no NT hash (no password): imported, but it cannot log on \
                 until `ringshare user add {name}` sets a password"
            ));
        }
        if needs_account && !crate::accounts::has_account(&name) {
            warnings.push(format!(
                "user '{name}' has no Unix account: imported, but its logons are refused until \
                 the account exists (`useradd -M -s /usr/sbin/nologin {name}`)"
            ));
        }
        entry.uid = uid_for(&name, &db);
        let uid = entry.uid;
        let what = if db.insert(entry) {
            "replaced"
        } else {
            "imported"
        };
        report.push(format!("{what} user '{name}' (uid {uid})"));
    }
    for w in &warnings {
        writeln!(warn, "warning: {w}").map_err(io_err("writing warnings"))?;
    }
    if report.is_empty() {
        return Ok(());
    }
    save(&db, file)?;
    // Their passwords come from elsewhere: AES keys of earlier passwords no longer match.
    for name in &imported {
        super::keys::remove_keys(file, name)?;
    }
    for line in report {
        writeln!(out, "{line} in {}", file.display()).map_err(io_err("writing output"))?;
    }
    Ok(())
}

/// Reads the listing to import: the file `path`, or standard input (`stdin`) when `path` is
/// `-`. Returns the name to use in messages and the text.
pub fn read_listing(path: &Path, stdin: &mut dyn Read) -> Result<(String, String), UserError> {
    let (source, reader): (String, Box<dyn Read + '_>) = if path == Path::new("-") {
        ("standard input".to_string(), Box::new(stdin))
    } else {
        let f = std::fs::File::open(path).map_err(io_err(format!("reading {}", path.display())))?;
        (path.display().to_string(), Box::new(f))
    };
    let mut bytes = Vec::new();
    reader
        .take(IMPORT_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err(format!("reading {source}")))?;
    if bytes.len() as u64 > IMPORT_BYTES_MAX {
        return Err(UserError::BadImportLine {
            source,
            line: 0,
            message: format!("longer than {IMPORT_BYTES_MAX} bytes; not a user listing"),
        });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((source, text)),
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            Err(UserError::BadImportLine {
                source,
                line,
                message: "not valid UTF-8 (pdbedit writes UTF-8 with Samba's default \
                          `unix charset`; convert it with iconv)"
                    .to_string(),
            })
        }
    }
}
