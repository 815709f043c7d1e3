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
    let usable = keytab
        .entries
        .iter()
        .filter(|e| e.realm.eq_ignore_ascii_case(&realm) && matches!(e.enctype, 17 | 18))
        .count();
    if usable == 0 {
        return Err(format!(
            "keytab {} has no AES key of realm {realm} (RC4-only keytabs are not accepted)",
            path.display()
        ));
    }
    let mut names: Vec<String> = keytab
        .entries
        .iter()
        .map(|e| format!("{} kvno {}", e.principal(), e.kvno))
        .collect();
    names.dedup();
    tracing::info!(
        "Kerberos: realm {realm}, keytab {} ({usable} AES keys: {})",
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
        allow_rc4: false,
    }))
}
