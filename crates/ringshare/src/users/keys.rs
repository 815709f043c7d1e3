//! Users' Kerberos keys for the built-in KDC (`local kdc`, crate::local_kdc): the AES-256 and
//! AES-128 keys derived from each user's password with the realm's salt (RFC 3962
//! string-to-key; the salt is the realm then the name), in a keytab-format file beside the
//! smbpasswd file (`SMBPASSWD.keytab`, mode 0600), one entry per key, principal `name@REALM`.
//!
//! smbpasswd keeps only the NT hash, from which no AES key can be made: `user add` (a new user or
//! a new password) writes the keys; a user added otherwise (`user import`, or before this
//! existed) has none until its password is set again, and the KDC says so.

use std::path::{Path, PathBuf};

use ringshare_auth::krb5::etype;
use ringshare_auth::krb5::kdc::{salt, string_to_key, UserKey};
use ringshare_auth::krb5::keytab::{Keytab, KeytabEntry, KEYTAB_SIZE_MAX};

use super::{io_err, UserError};

/// The keys file of the smbpasswd file `passwd`.
pub fn keys_file(passwd: &Path) -> PathBuf {
    let mut p = passwd.as_os_str().to_owned();
    p.push(".keytab");
    PathBuf::from(p)
}

/// The keys file's entries (none when it does not exist).
fn read(file: &Path) -> Result<Keytab, String> {
    match std::fs::metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Keytab::default()),
        Ok(m) if m.len() > KEYTAB_SIZE_MAX as u64 => {
            return Err(format!("{} is too large", file.display()))
        }
        _ => {}
    }
    let data = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Keytab::parse(&data).map_err(|e| format!("{}: {e}", file.display()))
}

/// Write `keytab` to `file` (mode 0600), through a temporary file renamed over it.
fn write(file: &Path, keytab: &Keytab) -> Result<(), UserError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io_err(format!("creating {}", tmp.display())))?;
    f.write_all(&keytab.encode())
        .and_then(|()| f.sync_all())
        .map_err(io_err(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, file).map_err(io_err(format!("renaming {}", tmp.display())))
}

fn is_user(e: &KeytabEntry, name: &str) -> bool {
    matches!(e.components.as_slice(), [n] if n.to_lowercase() == name.to_lowercase())
}

/// Store `name`'s AES keys made from `password` in `realm`, in place of any it had (the key
/// version goes up by one).
pub fn set_keys(passwd: &Path, realm: &str, name: &str, password: &str) -> Result<(), UserError> {
    let file = keys_file(passwd);
    let mut keytab = read(&file).map_err(|e| UserError::Io {
        context: "reading the Kerberos keys".into(),
        error: std::io::Error::other(e),
    })?;
    let kvno = keytab
        .entries
        .iter()
        .filter(|e| is_user(e, name))
        .map(|e| e.kvno)
        .max()
        .unwrap_or(0)
        .wrapping_add(1)
        .max(1);
    keytab.entries.retain(|e| !is_user(e, name));
    let salt = salt(realm, name);
    for e in [etype::AES256, etype::AES128] {
        let key = string_to_key(e, password, &salt).ok_or_else(|| UserError::Io {
            context: "deriving the Kerberos keys".into(),
            error: std::io::Error::other("string-to-key failed"),
        })?;
        keytab.entries.push(KeytabEntry {
            components: vec![name.to_string()],
            realm: realm.to_string(),
            kvno,
            enctype: e,
            key,
        });
    }
    write(&file, &keytab)
}

/// Forget `name`'s keys (a deleted user, or a password set from elsewhere).
pub fn remove_keys(passwd: &Path, name: &str) -> Result<(), UserError> {
    let file = keys_file(passwd);
    let Ok(mut keytab) = read(&file) else {
        return Ok(());
    };
    let before = keytab.entries.len();
    keytab.entries.retain(|e| !is_user(e, name));
    if keytab.entries.len() == before {
        return Ok(());
    }
    write(&file, &keytab)
}

/// `name`'s keys in the keys file `file`, each with the salt it was made with.
pub fn user_keys(file: &Path, name: &str) -> Result<Vec<UserKey>, String> {
    Ok(read(file)?
        .entries
        .into_iter()
        .filter(|e| is_user(e, name))
        .map(|e| UserKey {
            salt: salt(&e.realm, &e.components.concat()),
            etype: e.enctype,
            key: e.key,
            kvno: e.kvno,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_set_twice_keeps_one_pair_of_keys_under_a_new_version_and_del_removes_them() {
        let dir = std::env::temp_dir().join(format!("rs-user-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let passwd = dir.join("smbpasswd");
        set_keys(&passwd, "FS", "alice", "one").unwrap();
        set_keys(&passwd, "FS", "bob", "two").unwrap();
        set_keys(&passwd, "FS", "Alice", "three").unwrap();
        let keys = user_keys(&keys_file(&passwd), "ALICE").unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.iter().all(|k| k.kvno == 2 && k.salt == "FSAlice"));
        assert_eq!(
            keys[0].key,
            string_to_key(etype::AES256, "three", "FSAlice").unwrap()
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(keys_file(&passwd))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        remove_keys(&passwd, "alice").unwrap();
        assert!(user_keys(&keys_file(&passwd), "alice").unwrap().is_empty());
        assert_eq!(user_keys(&keys_file(&passwd), "bob").unwrap().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
