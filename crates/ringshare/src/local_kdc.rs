//! The built-in KDC (`local kdc = yes`): a standalone server answers the KDC requests IAKerb
//! clients send through it for its own smbpasswd users, in process, instead of relaying them to
//! a realm's KDC (crate::kdc). The Kerberos logic is ringshare_auth::krb5::kdc; this module
//! gives it its keys, the users' keys, the clock and random bytes, and runs on the lookup
//! threads (never on an I/O thread).
//!
//! - The realm is `realm` when set, else the NetBIOS name in upper case
//!   ([`crate::config::Global::local_realm`]).
//! - The KDC's own keys (krbtgt and the file service's, AES-256) are made at the first start and
//!   kept in `SMBPASSWD.kdc.keytab` (mode 0600, beside the smbpasswd file) so that tickets issued
//!   before a restart stay valid; when that file cannot be written, keys made for this run only
//!   are used (and tickets end with it), with a warning. They never leave the process otherwise.
//! - Users' AES keys come from `SMBPASSWD.keytab` (crate::users::keys), read at each request,
//!   and a user must be an enabled smbpasswd user with a password; the NT hash serves as an
//!   RC4-HMAC key only with `kerberos encryption types = all`.
//! - A refusal (unknown user, wrong password, no AES keys, skew, a forged ticket) ends the
//!   SESSION_SETUP with LOGON_FAILURE and the failed-logon line, counted per address as an NTLM
//!   failure is (`failed logon backoff`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};

use ringshare_auth::krb5::acceptor::AcceptorConfig;
use ringshare_auth::krb5::etype;
use ringshare_auth::krb5::kdc::{self, Fresh, KdcKeys, LocalKdc, Principals, UserKey};
use ringshare_auth::krb5::keytab::{Keytab, KeytabEntry, KEYTAB_SIZE_MAX};
use ringshare_auth::UserLookup;
use ringshare_core::ServerState;

use crate::config::Global;

/// The built-in KDC as configured.
pub struct Local {
    kdc: LocalKdc,
    /// The users' keys (crate::users::keys).
    user_keys: PathBuf,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Local KDC of {}", self.kdc.realm)
    }
}

/// The file of the KDC's own keys, beside the smbpasswd file `passwd`.
pub fn kdc_keys_file(passwd: &Path) -> PathBuf {
    let mut p = passwd.as_os_str().to_owned();
    p.push(".kdc.keytab");
    PathBuf::from(p)
}

/// The KDC's keys from `file`: krbtgt's and the file service's AES-256 keys, of one kvno.
fn read_own_keys(file: &Path) -> Result<Option<KdcKeys>, String> {
    let data = match std::fs::read(file) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    if data.len() > KEYTAB_SIZE_MAX {
        return Err(format!("{} is too large", file.display()));
    }
    let keytab = Keytab::parse(&data).map_err(|e| format!("{}: {e}", file.display()))?;
    let find = |first: &str| {
        keytab
            .entries
            .iter()
            .find(|e| e.components.first().map(String::as_str) == Some(first))
            .filter(|e| e.enctype == etype::AES256 && e.key.len() == 32)
    };
    match (find("krbtgt"), find("cifs")) {
        (Some(t), Some(s)) => Ok(Some(KdcKeys {
            krbtgt: t.key.clone(),
            service: s.key.clone(),
            kvno: t.kvno,
        })),
        _ => Err(format!(
            "{} lacks the krbtgt/ or cifs/ AES-256 key (remove it to make new keys)",
            file.display()
        )),
    }
}

/// New random keys, written to `file` (created, mode 0600) when it can be.
fn make_own_keys(file: &Path, realm: &str) -> Result<KdcKeys, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = [0u8; 64];
    getrandom::fill(&mut bytes).map_err(|e| format!("random source: {e}"))?;
    let keys = KdcKeys {
        krbtgt: bytes[..32].to_vec(),
        service: bytes[32..].to_vec(),
        kvno: 1,
    };
    let entry = |components: [&str; 2], key: &[u8]| KeytabEntry {
        components: components.iter().map(|c| c.to_string()).collect(),
        realm: realm.to_string(),
        kvno: 1,
        enctype: etype::AES256,
        key: key.to_vec(),
    };
    let keytab = Keytab {
        entries: vec![
            entry(["krbtgt", realm], &keys.krbtgt),
            entry(["cifs", "ringshare"], &keys.service),
        ],
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .and_then(|mut f| f.write_all(&keytab.encode()).and_then(|()| f.sync_all()));
    match written {
        Ok(()) => tracing::info!("local KDC: new keys in {}", file.display()),
        Err(e) => tracing::warn!(
            "local KDC: cannot keep its keys in {} ({e}); keys made for this run only: tickets \
             issued now are refused after a restart",
            file.display()
        ),
    }
    Ok(keys)
}

/// The built-in KDC of `g`, None when `local kdc` is off. Its keys are read, or made at the
/// first start.
pub fn load(g: &Global) -> Result<Option<Arc<Local>>, String> {
    if !g.local_kdc {
        return Ok(None);
    }
    if let Some(k) = g.keytab() {
        return Err(format!(
            "'local kdc = yes' is for a standalone server's own users, and this server has a \
             keytab ({}): a server in a realm or a domain leaves tickets to its KDC; turn one \
             of them off",
            k.display()
        ));
    }
    let realm = g.local_realm();
    let file = kdc_keys_file(&g.smb_passwd_file);
    let keys = match read_own_keys(&file)? {
        Some(k) => k,
        None => make_own_keys(&file, &realm)?,
    };
    {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata(&file).is_ok_and(|m| m.mode() & 0o077 != 0) {
            tracing::warn!(
                "{} is readable by others than its owner: anyone who reads it can make tickets \
                 for any user (chmod 600 it)",
                file.display()
            );
        }
    }
    tracing::info!(
        "local KDC: realm {realm}; IAKerb clients' KDC requests for it are answered here for \
         the users of {} (their AES keys in {})",
        g.smb_passwd_file.display(),
        crate::users::keys::keys_file(&g.smb_passwd_file).display()
    );
    Ok(Some(Arc::new(Local {
        kdc: LocalKdc {
            realm,
            keys,
            allow_rc4: g.kerberos_encryption_types.allows_rc4(),
            skew_secs: crate::kerberos::CLOCK_SKEW_SECS,
            ticket_life_secs: kdc::TICKET_LIFE_SECS,
        },
        user_keys: crate::users::keys::keys_file(&g.smb_passwd_file),
    })))
}

impl Local {
    /// The realm it serves.
    pub fn realm(&self) -> &str {
        &self.kdc.realm
    }

    /// What the acceptor takes: the tickets this KDC issues for the file service.
    pub fn acceptor_config(&self) -> AcceptorConfig {
        AcceptorConfig {
            keytab: Arc::new(Keytab {
                entries: vec![KeytabEntry {
                    components: vec!["cifs".into(), "ringshare".into()],
                    realm: self.kdc.realm.clone(),
                    kvno: self.kdc.keys.kvno,
                    enctype: etype::AES256,
                    key: self.kdc.keys.service.clone(),
                }],
            }),
            realm: self.kdc.realm.clone(),
            skew_secs: self.kdc.skew_secs,
            allow_rc4: self.kdc.allow_rc4,
        }
    }

    /// Answer a KDC request of a user of `users`.
    pub fn answer(&self, users: &dyn UserLookup, request: &[u8]) -> Result<Vec<u8>, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut fresh = Fresh {
            session_key: [0; 32],
        };
        getrandom::fill(&mut fresh.session_key).map_err(|e| format!("random source: {e}"))?;
        let principals = Users {
            lookup: users,
            keys_file: &self.user_keys,
        };
        kdc::answer(&self.kdc, &principals, request, now, &fresh).map_err(|e| e.to_string())
    }
}

/// The KDC's view of the smbpasswd users: enabled ones with a password, their AES keys from
/// the keys file, and the NT hash as an RC4-HMAC key (used only when RC4 is allowed).
struct Users<'a> {
    lookup: &'a dyn UserLookup,
    keys_file: &'a Path,
}

impl Principals for Users<'_> {
    fn keys(&self, name: &str) -> Option<Vec<UserKey>> {
        let nt = self.lookup.nt_hash(name)?;
        let mut keys = crate::users::keys::user_keys(self.keys_file, name).unwrap_or_else(|e| {
            tracing::warn!("local KDC: the users' Kerberos keys cannot be read: {e}");
            Vec::new()
        });
        keys.push(UserKey {
            etype: etype::RC4_HMAC,
            key: nt.to_vec(),
            salt: String::new(),
            kvno: 1,
        });
        Some(keys)
    }
}

/// Where IAKerb clients' KDC requests go: the built-in KDC for its realm when `local kdc` is
/// on, else the realm's KDCs named in krb5.conf (crate::kdc). A reload switches it.
pub struct ServerKdcs {
    local: RwLock<Option<Arc<Local>>>,
    remote: crate::kdc::Krb5ConfKdcs,
    server: Weak<ServerState>,
}

impl ServerKdcs {
    pub fn new(server: &Arc<ServerState>) -> ServerKdcs {
        ServerKdcs {
            local: RwLock::new(None),
            remote: crate::kdc::Krb5ConfKdcs::from_env(),
            server: Arc::downgrade(server),
        }
    }

    /// Turn the built-in KDC on (Some) or off.
    pub fn set_local(&self, local: Option<Arc<Local>>) {
        *self.local.write().unwrap_or_else(|e| e.into_inner()) = local;
    }
}

impl ringshare_core::Kdcs for ServerKdcs {
    fn exchange(&self, realm: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        let local = self.local.read().unwrap_or_else(|e| e.into_inner()).clone();
        match local {
            Some(l) if realm.eq_ignore_ascii_case(l.realm()) => {
                let server = self.server.upgrade().ok_or("the server is stopping")?;
                l.answer(server.logons.users().as_ref(), request)
            }
            _ => self.remote.exchange(realm, request),
        }
    }
}
