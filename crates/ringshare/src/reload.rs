//! `ringshare reload` and SIGHUP: read the configuration and the user file
//! again and apply them to the running server without dropping connections
//! the change does not concern.
//!
//! Applied at once: shares added, removed or changed (a removed share's tree
//! connects are disconnected, a changed one's trees take its new settings for
//! their next opens: [`ringshare_core::ServerState::replace_shares`]), users
//! added, removed or given new passwords (for logons from now on),
//! `log level` and `failed logon backoff`. Other `[global]` options (addresses, protocol versions,
//! signing…) are read but need a restart; the reload says which changed.
//! A configuration with an error is refused with its file, line and reason,
//! and the running one stays.

use std::sync::{Arc, Mutex};

use ringshare_auth::smbpasswd::SmbPasswd;
use ringshare_core::server::ShareSet;
use ringshare_core::ServerState;

use crate::config::{self, Config, Global};

/// A keytab as read: the file's fingerprint (taken before the read, so that a change made
/// during it is seen next time) and the acceptor's configuration (None: no keytab configured),
/// and the built-in KDC (`local kdc`), whose keys the acceptor then holds.
type ReadKeytab = (
    Option<crate::kerberos::Fingerprint>,
    Option<ringshare_auth::krb5::acceptor::AcceptorConfig>,
    Option<Arc<crate::local_kdc::Local>>,
);

fn read_keytab(g: &Global) -> Result<ReadKeytab, String> {
    let seen = g.keytab().and_then(|p| crate::kerberos::fingerprint(&p));
    let local = crate::local_kdc::load(g)?;
    let acceptor = match &local {
        Some(l) => Some(l.acceptor_config()),
        None => crate::kerberos::load(g)?,
    };
    Ok((seen, acceptor, local))
}

/// Sets the log level (`log level`) of the running process.
pub type SetLogLevel = dyn Fn(u32) + Send + Sync;

/// What a reload needs: the configuration running now and the server.
pub struct Reloader {
    current: Mutex<Config>,
    server: Arc<ServerState>,
    set_log_level: Box<SetLogLevel>,
    fixed: Fixed,
    /// The keytab file as last read ([`Reloader::check_keytab`]).
    keytab_seen: Mutex<Option<crate::kerberos::Fingerprint>>,
    /// Where IAKerb clients' KDC requests go (the built-in KDC or the realm's).
    kdcs: Arc<crate::local_kdc::ServerKdcs>,
}

/// Settings the command line gave at start: they win over the file's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fixed {
    pub listen: bool,
    pub log_level: bool,
}

impl Reloader {
    pub fn new(
        current: Config,
        server: Arc<ServerState>,
        set_log_level: Box<SetLogLevel>,
        fixed: Fixed,
    ) -> Reloader {
        Reloader {
            current: Mutex::new(current),
            kdcs: Arc::new(crate::local_kdc::ServerKdcs::new(&server)),
            server,
            set_log_level,
            fixed,
            keytab_seen: Mutex::new(None),
        }
    }

    /// Read the keytab of `g` and hand it to the server; remembers the file's fingerprint.
    pub fn apply_keytab(&self, g: &Global) -> Result<Option<String>, String> {
        Ok(self.install_keytab(read_keytab(g)?))
    }

    /// Where IAKerb clients' KDC requests go ([`ringshare_core::ServerState::set_kdcs`]).
    pub fn kdcs(&self) -> Arc<crate::local_kdc::ServerKdcs> {
        Arc::clone(&self.kdcs)
    }

    /// Hand a keytab read by [`read_keytab`] to the server: what the reload summary says of it.
    fn install_keytab(&self, (seen, k, local): ReadKeytab) -> Option<String> {
        let built_in = local.is_some();
        self.kdcs.set_local(local);
        let what = k.as_ref().map(|k| {
            format!(
                "Kerberos: realm {}, {}, {}",
                k.realm,
                if built_in {
                    "built-in KDC for the server's users (local kdc = yes)".to_string()
                } else {
                    format!("{} keys", k.keytab.entries.len())
                },
                if k.allow_rc4 {
                    "AES and RC4-HMAC tickets accepted"
                } else {
                    "AES tickets accepted (RC4-HMAC refused)"
                }
            )
        });
        self.server.logons.set_kerberos(k);
        *crate::lock(&self.keytab_seen) = seen;
        what
    }

    /// Read the keytab again when its file changed since it was last read (a rotated machine
    /// password); a keytab that cannot be read now leaves the keys in use as they are.
    pub fn check_keytab(&self) {
        let Some(path) = crate::lock(&self.current).global.keytab() else {
            return;
        };
        let now = crate::kerberos::fingerprint(&path);
        if now.is_none() || now == *crate::lock(&self.keytab_seen) {
            return;
        }
        let g = crate::lock(&self.current).global.clone();
        match self.apply_keytab(&g) {
            Ok(_) => tracing::info!("the keytab {} changed and was read again", path.display()),
            Err(e) => {
                tracing::warn!("the keytab changed but cannot be used, the keys in use stay: {e}");
                *crate::lock(&self.keytab_seen) = now;
            }
        }
    }

    /// Read the configuration again and apply it: a summary of what changed,
    /// or why nothing did.
    pub fn reload(&self) -> Result<String, String> {
        // One reload at a time (SIGHUP and the control socket may race).
        let mut current = crate::lock(&self.current);
        crate::sdnotify::reloading();
        let result = self.reload_locked(&mut current);
        crate::sdnotify::ready(match &result {
            Ok(_) => "serving; configuration reloaded",
            Err(_) => "serving; the last reload was refused (see the log)",
        });
        match &result {
            Ok(summary) => {
                for l in summary.lines() {
                    tracing::info!("reload: {l}");
                }
            }
            Err(why) => tracing::error!("reload refused, the running configuration stays: {why}"),
        }
        result
    }

    fn reload_locked(&self, current: &mut Config) -> Result<String, String> {
        let mut next = match &current.source {
            Some(file) => config::load(file).map_err(|e| e.to_string())?,
            // `serve DIR`: no file to read; the users are read again.
            None => current.clone(),
        };
        // Settings the command line gave at start (`--listen`,
        // `--log-level`) stay: they are not in the file.
        if self.fixed.listen {
            next.global.listen = current.global.listen.clone();
        }
        if self.fixed.log_level {
            next.global.log_level = current.global.log_level;
        }
        if next.shares.is_empty() && next.homes.is_none() {
            return Err("no shares configured".to_string());
        }
        let users = SmbPasswd::load(&next.global.smb_passwd_file)
            .map_err(|e| format!("{}: {e}", next.global.smb_passwd_file.display()))?;
        // Read before anything is applied: a keytab that cannot be read refuses the reload.
        let keytab = read_keytab(&next.global)?;
        let running = self.server.shares();
        let mut summary = Vec::new();
        let mut set = ShareSet {
            shares: Vec::new(),
            homes: None,
            guest_enabled: next.shares.iter().any(|s| s.guest_ok),
        };
        let (mut added, mut changed) = (Vec::new(), Vec::new());
        for s in &next.shares {
            let old = current.share(&s.name);
            let same = old == Some(s) && current.global.smb_encrypt == next.global.smb_encrypt;
            let def = match running.share(&s.name) {
                Some(d) if same => Arc::clone(d),
                _ => {
                    match old {
                        None => added.push(s.name.clone()),
                        Some(_) => changed.push(s.name.clone()),
                    }
                    Arc::new(crate::serve::share_def(&next, s).map_err(|e| e.0)?)
                }
            };
            set.shares.push(def);
        }
        set.homes = match (&next.homes, &current.homes, &running.homes) {
            (None, _, _) => None,
            (Some(n), Some(o), Some(d)) if n == o => Some(Arc::clone(d)),
            (Some(n), _, _) => {
                changed.push("homes".to_string());
                Some(Arc::new(
                    crate::serve::share_def(&next, n).map_err(|e| e.0)?,
                ))
            }
        };
        if current.homes.is_some() && next.homes.is_none() {
            changed.push("homes (removed)".to_string());
        }
        let removed: Vec<String> = current
            .shares
            .iter()
            .filter(|s| next.share(&s.name).is_none())
            .map(|s| s.name.clone())
            .collect();
        // Everything checked: apply.
        let user_count = users.entries().len();
        self.server.logons.replace_users(Arc::new(users));
        self.server.replace_shares(set);
        if let Some(k) = self.install_keytab(keytab) {
            summary.push(k);
        }
        let member = next.global.member.member(&next.global.workgroup);
        if member != current.global.member.member(&current.global.workgroup) {
            summary.push(match &member {
                Some(m) => format!("domain member of {}", m.workgroup),
                None => "not a domain member".to_string(),
            });
        }
        match (&member, self.server.logons.domain_logons().is_some()) {
            (Some(_), false) => self
                .server
                .logons
                .set_domain_logons(crate::winbind::domain_logons(next.source.as_deref())),
            (None, true) => self.server.logons.set_domain_logons(None),
            _ => {}
        }
        self.server.logons.set_domain(member);
        self.server
            .logons
            .set_id_source(crate::winbind_ids::id_source(&next.global.member));
        if next.global.failed_logon_backoff != current.global.failed_logon_backoff {
            let n = next.global.failed_logon_backoff;
            self.server.logons.set_failed_logon_backoff(n);
            summary.push(format!("failed logon backoff: {n}"));
        }
        if next.global.log_level != current.global.log_level {
            (self.set_log_level)(next.global.log_level);
            summary.push(format!("log level: {}", next.global.log_level));
        }
        let name = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        summary.insert(
            0,
            format!(
                "shares added: {}; removed: {}; changed: {}",
                name(&added),
                name(&removed),
                name(&changed)
            ),
        );
        summary.push(format!("users: {user_count}"));
        let restart = changed_globals(&current.global, &next.global);
        if !restart.is_empty() {
            summary.push(format!(
                "changed, and applied at the next restart only: {}",
                restart.join(", ")
            ));
        }
        for w in &next.warnings {
            summary.push(format!("warning: {w}"));
        }
        *current = next;
        Ok(summary.join("\n") + "\n")
    }
}

/// `[global]` options a reload applies at once; the others need a restart.
const APPLIED_GLOBALS: [&str; 7] = [
    "log level",
    "failed logon backoff",
    "realm",
    "kerberos method",
    "dedicated keytab file",
    "kerberos encryption types",
    "local kdc",
];

/// The `[global]` options whose effective values differ, other than those a
/// reload applies: named and compared as `testparm` prints them (one table
/// of every global option, [`crate::testparm::render_global`]).
fn changed_globals(old: &Global, new: &Global) -> Vec<String> {
    let options = |g: &Global| {
        let mut s = String::new();
        crate::testparm::render_global(&mut s, g);
        s.lines()
            .filter_map(|l| {
                let (key, value) = l.trim_start().trim_start_matches("# ").split_once(" = ")?;
                Some((key.to_string(), value.to_string()))
            })
            .collect::<Vec<_>>()
    };
    let before = options(old);
    options(new)
        .into_iter()
        .filter(|(key, value)| {
            !APPLIED_GLOBALS.contains(&key.as_str())
                && !before.iter().any(|(k, v)| k == key && v == value)
        })
        .map(|(key, _)| key)
        .collect()
}
