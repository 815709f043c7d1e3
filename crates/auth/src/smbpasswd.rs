//! Samba's smbpasswd file: one account per line,
//! `name:uid:LMHASH:NTHASH:[flags]:LCT-XXXXXXXX:`.
//!
//! The LM hash is never stored (written as 32 `X`); an NT hash of 32 `X` or starting with
//! `NO PASSWORD` means the account has no password. Flags are the letters between the brackets
//! (`U` user, `D` disabled, `N` no password required, `X` password never expires, ...). Lines that
//! are empty or start with `#` are skipped.

use std::io::Write;
use std::path::Path;

/// One account.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    /// Account name as written in the file.
    pub name: String,
    /// Unix uid.
    pub uid: u32,
    /// MD4 of the UTF-16LE password; None when the account has no password set.
    pub nt_hash: Option<[u8; 16]>,
    /// Account flag letters without brackets or padding, e.g. `"U"` or `"DU"`.
    pub flags: String,
    /// Last password change, Unix seconds.
    pub last_change: u64,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("uid", &self.uid)
            .field("has_password", &self.nt_hash.is_some())
            .field("flags", &self.flags)
            .field("last_change", &self.last_change)
            .finish()
    }
}

impl Entry {
    /// Whether the `D` (disabled) flag is set.
    pub fn disabled(&self) -> bool {
        self.flags.contains('D')
    }

    /// Whether this is a machine or domain trust account (flag `W` workstation, `S` server or
    /// `I` interdomain), not a user.
    pub fn is_trust_account(&self) -> bool {
        self.flags.contains(['W', 'S', 'I'])
    }

    /// Parses one line of the file (or of `pdbedit -L -w`); the error says what is wrong.
    pub fn parse_line(line: &str) -> Result<Entry, String> {
        parse_line(line.trim_end_matches('\r'))
    }

    fn to_line(&self) -> String {
        let nt = match &self.nt_hash {
            Some(h) => h.iter().map(|b| format!("{b:02X}")).collect(),
            None => "X".repeat(32),
        };
        format!(
            "{}:{}:{}:{}:[{:<11}]:LCT-{:08X}:",
            self.name,
            self.uid,
            "X".repeat(32),
            nt,
            self.flags,
            self.last_change
        )
    }
}

/// A parse error: 1-based line number and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbPasswdError {
    /// 1-based line number (0 for errors not tied to a line, such as I/O).
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for SmbPasswdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "smbpasswd: {}", self.message)
        } else {
            write!(f, "smbpasswd line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for SmbPasswdError {}

/// The accounts of an smbpasswd file, in file order.
#[derive(Debug, Clone, Default)]
pub struct SmbPasswd {
    entries: Vec<Entry>,
}

fn parse_hex16(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn parse_line(line: &str) -> Result<Entry, String> {
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 6 {
        return Err(format!(
            "expected at least 6 ':'-separated fields, found {}",
            fields.len()
        ));
    }
    let name = fields[0];
    if name.is_empty() {
        return Err("empty user name".into());
    }
    let uid: u32 = fields[1]
        .parse()
        .map_err(|_| format!("bad uid {:?}", fields[1]))?;
    let lm = fields[2];
    if lm.len() != 32 {
        return Err("LM hash field must be 32 characters".into());
    }
    let nt_field = fields[3];
    let nt_hash = if nt_field.starts_with("NO PASSWORD")
        || nt_field.bytes().all(|b| b == b'X' || b == b'x')
    {
        if nt_field.len() != 32 {
            return Err("NT hash field must be 32 characters".into());
        }
        None
    } else {
        Some(parse_hex16(nt_field).ok_or_else(|| "NT hash must be 32 hex digits".to_string())?)
    };
    let flag_field = fields[4];
    let inner = flag_field
        .strip_prefix('[')
        .and_then(|f| f.strip_suffix(']'))
        .ok_or_else(|| format!("account flags must be in brackets, found {flag_field:?}"))?;
    let flags: String = inner.chars().filter(|c| *c != ' ').collect();
    if !flags.chars().all(|c| c.is_ascii_uppercase()) {
        return Err(format!("bad account flags {inner:?}"));
    }
    let lct = fields[5];
    let last_change = if lct.is_empty() {
        0
    } else {
        let hex = lct.strip_prefix("LCT-").ok_or_else(|| {
            format!("last change time must look like LCT-XXXXXXXX, found {lct:?}")
        })?;
        u64::from_str_radix(hex, 16).map_err(|_| format!("bad last change time {hex:?}"))?
    };
    Ok(Entry {
        name: name.to_string(),
        uid,
        nt_hash,
        flags,
        last_change,
    })
}

impl SmbPasswd {
    /// Read `path`; a missing file is an empty database.
    pub fn load(path: &Path) -> Result<SmbPasswd, SmbPasswdError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SmbPasswd::default()),
            Err(e) => Err(SmbPasswdError {
                line: 0,
                message: format!("{}: {e}", path.display()),
            }),
        }
    }

    /// Parse file contents; errors carry the 1-based line number.
    pub fn parse(text: &str) -> Result<SmbPasswd, SmbPasswdError> {
        let mut entries: Vec<Entry> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let e = parse_line(line).map_err(|message| SmbPasswdError {
                line: i + 1,
                message,
            })?;
            if entries
                .iter()
                .any(|x| x.name.to_lowercase() == e.name.to_lowercase())
            {
                return Err(SmbPasswdError {
                    line: i + 1,
                    message: format!("duplicate user {:?}", e.name),
                });
            }
            entries.push(e);
        }
        Ok(SmbPasswd { entries })
    }

    /// The file text, one line per account.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for e in &self.entries {
            s.push_str(&e.to_line());
            s.push('\n');
        }
        s
    }

    /// Write atomically: a temporary file (mode 0600) in the same directory, fsync, rename.
    /// A missing parent directory is created with mode 0700.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
        }
        let file_name = path.file_name().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "smbpasswd path has no file name",
            )
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(file_name);
        tmp_name.push(format!(".tmp{}", std::process::id()));
        let tmp = dir.join(tmp_name);
        let result = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(self.to_text().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Set `name`'s password (and uid), creating the account if needed. An existing account keeps
    /// its flags; a new one gets `U`.
    pub fn add_or_update(&mut self, name: &str, uid: u32, password: &str, now_unix: u64) {
        let hash = crate::nt_hash(password);
        if let Some(e) = self.get_mut(name) {
            e.uid = uid;
            e.nt_hash = Some(hash);
            e.last_change = now_unix;
            if !e.flags.contains('U') {
                e.flags.push('U');
            }
        } else {
            self.entries.push(Entry {
                name: name.to_string(),
                uid,
                nt_hash: Some(hash),
                flags: "U".into(),
                last_change: now_unix,
            });
        }
    }

    /// Adds `entry` as it is (hash, flags, last change), or replaces the account of the same
    /// name (compared case-insensitively) in place; true when it replaced one.
    pub fn insert(&mut self, entry: Entry) -> bool {
        match self.get_mut(&entry.name) {
            Some(e) => {
                *e = entry;
                true
            }
            None => {
                self.entries.push(entry);
                false
            }
        }
    }

    /// Remove an account; true if it existed.
    pub fn remove(&mut self, name: &str) -> bool {
        let lower = name.to_lowercase();
        let before = self.entries.len();
        self.entries.retain(|e| e.name.to_lowercase() != lower);
        self.entries.len() != before
    }

    /// Look an account up, case-insensitively.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        let lower = name.to_lowercase();
        self.entries.iter().find(|e| e.name.to_lowercase() == lower)
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Entry> {
        let lower = name.to_lowercase();
        self.entries
            .iter_mut()
            .find(|e| e.name.to_lowercase() == lower)
    }

    /// Set or clear the `D` (disabled) flag; false if there is no such account.
    pub fn set_disabled(&mut self, name: &str, disabled: bool) -> bool {
        match self.get_mut(name) {
            Some(e) => {
                e.flags.retain(|c| c != 'D');
                if disabled {
                    e.flags.insert(0, 'D');
                }
                true
            }
            None => false,
        }
    }

    /// All accounts in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

impl crate::UserLookup for SmbPasswd {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.get(user)
            .filter(|e| !e.disabled())
            .and_then(|e| e.nt_hash)
    }

    fn uid(&self, user: &str) -> Option<u32> {
        self.get(user).map(|e| e.uid)
    }

    fn accounts(&self) -> Vec<(String, bool)> {
        self.entries
            .iter()
            .filter(|e| !e.is_trust_account())
            .map(|e| (e.name.clone(), e.disabled()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UserLookup;

    const SAMBA_LINE: &str = "bench:20000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:8846F7EAEE8FB117AD06BDD830B7586C:[U          ]:LCT-6563A1B2:";

    #[test]
    fn parses_a_samba_written_line() {
        let db = SmbPasswd::parse(&format!("# written by smbpasswd\n\n{SAMBA_LINE}\n")).unwrap();
        let e = db.get("bench").unwrap();
        assert_eq!(e.uid, 20000);
        // 8846F7EA... is the NT hash of "password".
        assert_eq!(e.nt_hash, Some(crate::nt_hash("password")));
        assert_eq!(e.flags, "U");
        assert_eq!(e.last_change, 0x6563A1B2);
        assert_eq!(db.nt_hash("BENCH"), Some(crate::nt_hash("password")));
    }

    #[test]
    fn writes_lines_in_samba_format() {
        let db = SmbPasswd::parse(SAMBA_LINE).unwrap();
        assert_eq!(db.to_text(), format!("{SAMBA_LINE}\n"));
    }

    #[test]
    fn reports_bad_lines_with_their_line_number() {
        let text = format!(
            "{SAMBA_LINE}\n# comment\nalice:notanumber:{x}:{x}:[U          ]:LCT-00000000:\n",
            x = "X".repeat(32)
        );
        let err = SmbPasswd::parse(&text).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("uid"), "{}", err.message);
        assert!(err.to_string().starts_with("smbpasswd line 3:"));

        for (bad, what) in [
            ("short:1:XX", "fields"),
            (
                &format!("a:1:{x}:1234:[U ]:LCT-0:", x = "X".repeat(32)) as &str,
                "hex",
            ),
            (
                &format!("a:1:{x}:{x}:U:LCT-0:", x = "X".repeat(32)),
                "brackets",
            ),
            (&format!("a:1:{x}:{x}:[U]:XYZ:", x = "X".repeat(32)), "LCT"),
            (
                &format!(":1:{x}:{x}:[U]:LCT-0:", x = "X".repeat(32)),
                "empty",
            ),
        ] {
            let err = SmbPasswd::parse(&format!("\n{bad}\n")).unwrap_err();
            assert_eq!(err.line, 2, "{bad}");
            assert!(err.message.contains(what), "{bad}: {}", err.message);
        }
    }

    #[test]
    fn rejects_duplicate_names_ignoring_case() {
        let text = format!(
            "{SAMBA_LINE}\n{}\n",
            SAMBA_LINE.replacen("bench", "BENCH", 1)
        );
        assert_eq!(SmbPasswd::parse(&text).unwrap_err().line, 2);
    }

    #[test]
    fn accounts_without_password_or_disabled_give_no_hash() {
        let text = format!(
            "nopw:1:{x}:NO PASSWORDXXXXXXXXXXXXXXXXXXXXX:[NU         ]:LCT-00000000:\n\
             off:2:{x}:8846F7EAEE8FB117AD06BDD830B7586C:[DU         ]:LCT-00000000:\n",
            x = "X".repeat(32)
        );
        let db = SmbPasswd::parse(&text).unwrap();
        assert_eq!(db.get("nopw").unwrap().nt_hash, None);
        assert_eq!(db.nt_hash("nopw"), None);
        assert!(db.get("off").unwrap().disabled());
        assert_eq!(db.nt_hash("off"), None);
    }

    #[test]
    fn add_update_remove_and_disable() {
        let mut db = SmbPasswd::default();
        db.add_or_update("Alice", 1000, "one", 10);
        assert_eq!(db.nt_hash("alice"), Some(crate::nt_hash("one")));
        db.add_or_update("ALICE", 1001, "two", 20);
        assert_eq!(db.entries().len(), 1);
        let e = db.get("alice").unwrap();
        assert_eq!((e.name.as_str(), e.uid, e.last_change), ("Alice", 1001, 20));
        assert_eq!(db.nt_hash("alice"), Some(crate::nt_hash("two")));
        assert!(db.set_disabled("alice", true));
        assert_eq!(db.nt_hash("alice"), None);
        assert!(db.set_disabled("alice", false));
        assert!(db.nt_hash("alice").is_some());
        assert!(db.remove("aLiCe"));
        assert!(!db.remove("alice"));
        assert!(db.get("alice").is_none());
    }

    #[test]
    fn insert_keeps_the_hash_flags_and_time_given_and_replaces_in_place() {
        let mut db = SmbPasswd::parse(SAMBA_LINE).unwrap();
        db.add_or_update("zed", 20001, "pw", 1);
        let mut e = Entry::parse_line(&SAMBA_LINE.replacen("bench", "BENCH", 1)).unwrap();
        e.uid = 1234;
        e.flags = "DU".into();
        assert!(db.insert(e.clone()), "replaced");
        assert_eq!(db.entries()[0], e, "in the same place, as given");
        assert_eq!(db.nt_hash("bench"), None, "disabled");
        let new = Entry::parse_line(&SAMBA_LINE.replacen("bench", "carol", 1)).unwrap();
        assert!(!db.insert(new.clone()));
        assert_eq!(db.entries().len(), 3);
        assert_eq!(db.get("carol"), Some(&new));
        assert!(!new.is_trust_account());
        let host = SAMBA_LINE
            .replacen("bench", "host$", 1)
            .replace("[U ", "[W ");
        assert!(Entry::parse_line(&host).unwrap().is_trust_account());
        assert!(Entry::parse_line("alice:1:XX").is_err());
    }

    #[test]
    fn save_and_load_round_trip_with_private_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir =
            std::env::temp_dir().join(format!("ringshare-smbpasswd-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("private").join("smbpasswd");
        assert_eq!(
            SmbPasswd::load(&path).unwrap().entries().len(),
            0,
            "missing file is empty"
        );
        let mut db = SmbPasswd::parse(SAMBA_LINE).unwrap();
        db.add_or_update("carol", 20001, "pässwörd", 0x6563_A1B3);
        db.save(&path).unwrap();
        let back = SmbPasswd::load(&path).unwrap();
        assert_eq!(back.entries(), db.entries());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);
        // Saving again replaces the file; no temporary file is left behind.
        db.remove("bench");
        db.save(&path).unwrap();
        assert_eq!(SmbPasswd::load(&path).unwrap().entries().len(), 1);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
