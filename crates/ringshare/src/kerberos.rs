//! Kerberos for the running server: read the keytab that `kerberos method` and `dedicated keytab
//! file` name, hand its keys to the core, and read it again when it changes (a machine password
//! rotated by `net ads changetrustpw`, winbind or sssd adds a kvno).
//!
//! The acceptor keeps every entry of the keytab, so tickets issued under the previous key
//! version keep working after a rotation.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use ringshare_auth::krb5::acceptor::AcceptorConfig;
use ringshare_auth::krb5::etype;
use ringshare_auth::krb5::keytab::Keytab;

use crate::config::Global;

/// Largest difference between a client's clock and the server's (RFC 4120's 5 minutes).
pub const CLOCK_SKEW_SECS: i64 = 300;

/// What identifies one version of the keytab file: (device, inode, size, mtime in ns).
pub type Fingerprint = (u64, u64, u64, i128);

/// The keytab file's fingerprint, or None when it cannot be read.
pub fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
    ))
}

/// The acceptor configuration for `g`: None when no keytab is configured.
pub fn load(g: &Global) -> Result<Option<AcceptorConfig>, String> {
    let Some(path) = g.keytab() else {
        return Ok(None);
    };
    let data = std::fs::read(&path).map_err(|e| {
        format!(
            "cannot read the keytab {} ({e}); write it with `net ads keytab create` or \
             `adcli join`, or `kadmin ktadd` for an MIT realm",
            path.display()
        )
    })?;
    let keytab = Keytab::parse(&data).map_err(|e| format!("keytab {}: {e}", path.display()))?;
    if keytab.entries.is_empty() {
        return Err(format!("keytab {} has no keys", path.display()));
    }
    let realm = if g.realm.is_empty() {
        let mut realms: Vec<&str> = keytab.entries.iter().map(|e| e.realm.as_str()).collect();
        realms.sort_unstable();
        realms.dedup();
        match realms.as_slice() {
            [one] => one.to_ascii_uppercase(),
            _ => {
                return Err(format!(
                    "keytab {} holds keys of several realms ({}); set 'realm' in [global]",
                    path.display(),
                    realms.join(", ")
                ))
            }
        }
    } else {
        g.realm.clone()
    };
    // AES keys, and RC4-HMAC ones when `kerberos encryption types` allows them.
    let rc4 = g.kerberos_encryption_types.allows_rc4();
    let ours =
        |e: &&ringshare_auth::krb5::keytab::KeytabEntry| e.realm.eq_ignore_ascii_case(&realm);
    let aes = keytab
        .entries
        .iter()
        .filter(ours)
        .filter(|e| matches!(e.enctype, etype::AES128 | etype::AES256))
        .count();
    let rc4_keys = keytab
        .entries
        .iter()
        .filter(ours)
        .filter(|e| e.enctype == etype::RC4_HMAC)
        .count();
    if aes == 0 && !(rc4 && rc4_keys > 0) {
        return Err(if rc4 {
            format!(
                "keytab {} has no AES or RC4-HMAC key of realm {realm}",
                path.display()
            )
        } else {
            format!(
                "keytab {} has no AES key of realm {realm} (RC4-only keytabs are accepted \
                 only with 'kerberos encryption types = all'; better, give the service \
                 account AES keys)",
                path.display()
            )
        });
    }
    let mut names: Vec<String> = keytab
        .entries
        .iter()
        .map(|e| format!("{} kvno {}", e.principal(), e.kvno))
        .collect();
    names.dedup();
    let rc4_note = match (rc4, rc4_keys) {
        (true, n) => format!(
            ", {n} RC4-HMAC keys (kerberos encryption types = {})",
            g.kerberos_encryption_types.name()
        ),
        (false, 0) => String::new(),
        (false, n) => format!(", {n} RC4-HMAC keys not used"),
    };
    tracing::info!(
        "Kerberos: realm {realm}, keytab {} ({aes} AES keys{rc4_note}: {})",
        path.display(),
        names.join(", ")
    );
    if std::fs::metadata(&path).is_ok_and(|m| m.mode() & 0o004 != 0) {
        tracing::warn!(
            "the keytab {} is readable by every user: anyone can then act as this server \
             (chmod 600 it)",
            path.display()
        );
    }
    Ok(Some(AcceptorConfig {
        keytab: Arc::new(keytab),
        realm,
        skew_secs: CLOCK_SKEW_SECS,
        allow_rc4: rc4,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KerberosEncryptionTypes;
    use ringshare_auth::krb5::keytab::KeytabEntry;

    /// A keytab file holding one key of enctype `etype`, and a configuration that reads it.
    fn global_with_keytab(name: &str, etype: i32) -> Global {
        let path = std::env::temp_dir().join(format!(
            "ringshare-kerberos-{name}-{}.keytab",
            std::process::id()
        ));
        let keytab = Keytab {
            entries: vec![KeytabEntry {
                components: vec!["cifs".into(), "fs.rs.test".into()],
                realm: "RS.TEST".into(),
                kvno: 2,
                enctype: etype,
                key: vec![7; if etype == 23 { 16 } else { 32 }],
            }],
        };
        std::fs::write(&path, keytab.encode()).unwrap();
        Global {
            kerberos_method: crate::config::KerberosMethod::DedicatedKeytab,
            dedicated_keytab_file: Some(path),
            ..Global::default()
        }
    }

    #[test]
    fn an_rc4_only_keytab_stops_start_up_unless_rc4_is_allowed() {
        let mut g = global_with_keytab("rc4", 23);
        let e = load(&g).unwrap_err();
        assert!(e.contains("has no AES key of realm RS.TEST"), "{e}");
        assert!(e.contains("kerberos encryption types = all"), "{e}");
        g.kerberos_encryption_types = KerberosEncryptionTypes::All;
        let cfg = load(&g).unwrap().unwrap();
        assert!(cfg.allow_rc4);
        let _ = std::fs::remove_file(g.dedicated_keytab_file.unwrap());
        // An AES keytab: RC4 stays refused unless allowed.
        let g = global_with_keytab("aes", 18);
        assert!(!load(&g).unwrap().unwrap().allow_rc4);
        let _ = std::fs::remove_file(g.dedicated_keytab_file.unwrap());
    }
}
