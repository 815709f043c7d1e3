//! Unix accounts through NSS: who each SMB user acts as.
//!
//! A user name resolves like `getent passwd NAME` (so local, LDAP and sssd
//! accounts all work): its uid, primary gid, home directory, and supplementary
//! groups from `getgrouplist`. Looked up at each logon, so a group change
//! applies at the user's next logon, as on Samba. A name is tried as given,
//! then in lower case (Windows clients send names in any case).
//!
//! Three ways the server runs:
//! - as root ([`NssAccounts::users`]): every user acts as their own account;
//!   one without an account is refused at logon (as Samba refuses an
//!   smbpasswd entry without one);
//! - as root serving one directory with no configuration
//!   ([`NssAccounts::owner_of`]): as above, and a user without an account (the
//!   first user `serve` makes) acts as the owner of the directory, so that
//!   case works with no setup;
//! - as another account ([`NssAccounts::process`]): it cannot switch, so
//!   everyone acts as that account (the server says so at start).

use std::ffi::CString;
use std::path::Path;
use std::sync::Arc;

use nix::unistd::{Gid, Group, Uid, User};
use ringshare_core::{Account, AccountError, Accounts};
use ringshare_vfs::{creds, Creds};

/// Accounts resolved through NSS.
pub struct NssAccounts {
    mode: Mode,
}

enum Mode {
    /// Each user acts as their own account.
    Users,
    /// Each user acts as their own account; one without acts as this.
    UsersOr(Account),
    /// Everyone acts as the server process's account.
    Process,
}

impl NssAccounts {
    /// Each user acts as their Unix account.
    pub fn users() -> NssAccounts {
        NssAccounts { mode: Mode::Users }
    }

    /// Each user acts as their Unix account; one without acts as the owner
    /// of `dir`.
    pub fn owner_of(dir: &Path) -> std::io::Result<NssAccounts> {
        let st = rustix::fs::stat(dir)?;
        let who = creds_of_uid(st.st_uid, st.st_gid);
        let (name, home) = match User::from_uid(Uid::from_raw(st.st_uid)) {
            Ok(Some(u)) => (u.name, u.dir.to_string_lossy().into_owned()),
            _ => (st.st_uid.to_string(), String::new()),
        };
        Ok(NssAccounts {
            mode: Mode::UsersOr(Account {
                name,
                who,
                home,
                sids: Default::default(),
            }),
        })
    }

    /// Everyone acts as the server process.
    pub fn process() -> NssAccounts {
        NssAccounts {
            mode: Mode::Process,
        }
    }
}

/// The credentials of `uid` with primary group `gid`: its supplementary
/// groups when NSS knows the uid, else the primary group alone.
fn creds_of_uid(uid: u32, gid: u32) -> Arc<Creds> {
    let groups = User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .and_then(|u| groups_of(&u.name, gid))
        .unwrap_or_else(|| vec![gid]);
    creds::intern(Creds::new(uid, gid, groups))
}

/// The groups of account `name` whose primary group is `gid` (NSS).
pub(crate) fn groups_of(name: &str, gid: u32) -> Option<Vec<u32>> {
    let c = CString::new(name).ok()?;
    nix::unistd::getgrouplist(&c, Gid::from_raw(gid))
        .ok()
        .map(|g| g.into_iter().map(Gid::as_raw).collect())
}

/// The passwd entry of `name` (as given, then in lower case).
fn lookup(name: &str) -> Result<Option<User>, AccountError> {
    let found = User::from_name(name).map_err(|e| AccountError::Lookup(e.to_string()))?;
    if found.is_some() || name.to_lowercase() == name {
        return Ok(found);
    }
    User::from_name(&name.to_lowercase()).map_err(|e| AccountError::Lookup(e.to_string()))
}

impl Accounts for NssAccounts {
    fn user(&self, name: &str) -> Result<Account, AccountError> {
        if matches!(self.mode, Mode::Process) {
            return Ok(Account {
                name: name.to_string(),
                who: ringshare_vfs::server_who(),
                home: lookup(name)
                    .ok()
                    .flatten()
                    .map(|u| u.dir.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                sids: Default::default(),
            });
        }
        match lookup(name)? {
            Some(u) => {
                let gid = u.gid.as_raw();
                let groups = groups_of(&u.name, gid).ok_or_else(|| {
                    AccountError::Lookup(format!("the groups of {:?} could not be read", u.name))
                })?;
                Ok(Account {
                    who: creds::intern(Creds::new(u.uid.as_raw(), gid, groups)),
                    home: u.dir.to_string_lossy().into_owned(),
                    name: u.name,
                    sids: Default::default(),
                })
            }
            None => match &self.mode {
                Mode::UsersOr(owner) => Ok(owner.clone()),
                _ => Err(AccountError::NoSuchUser),
            },
        }
    }

    fn group(&self, name: &str) -> Option<u32> {
        Group::from_name(name)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw())
    }

    fn group_name(&self, gid: u32) -> Option<String> {
        Group::from_gid(Gid::from_raw(gid))
            .ok()
            .flatten()
            .map(|g| g.name)
    }

    fn user_name(&self, uid: u32) -> Option<String> {
        User::from_uid(Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.name)
    }

    fn unix_user(&self, name: &str) -> Option<u32> {
        lookup(name).ok().flatten().map(|u| u.uid.as_raw())
    }

    fn passwd(&self, name: &str) -> Option<(String, String)> {
        lookup(name)
            .ok()
            .flatten()
            .map(|u| (u.name, u.gecos.to_string_lossy().into_owned()))
    }

    fn member(&self, uid: u32, gid: u32) -> bool {
        let Ok(Some(u)) = User::from_uid(Uid::from_raw(uid)) else {
            return false;
        };
        u.gid.as_raw() == gid
            || groups_of(&u.name, u.gid.as_raw()).is_some_and(|g| g.contains(&gid))
    }
}

/// Whether `name` has a Unix account (for `user add`).
pub fn has_account(name: &str) -> bool {
    matches!(lookup(name), Ok(Some(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_to_uid_0_with_its_groups() {
        let a = NssAccounts::users().user("root").unwrap();
        assert_eq!((a.who.uid(), a.who.gid()), (0, 0));
        assert!(a.who.in_group(0));
        assert_eq!(a.home, "/root");
    }

    #[test]
    fn a_name_without_an_account_is_no_such_user_unless_a_fallback_owner_is_set() {
        let name = "no-such-user-ringshare-test";
        assert_eq!(
            NssAccounts::users().user(name).err(),
            Some(AccountError::NoSuchUser)
        );
        let dir = std::env::temp_dir();
        let st = rustix::fs::stat(&dir).unwrap();
        let a = NssAccounts::owner_of(&dir).unwrap().user(name).unwrap();
        assert_eq!(a.who.uid(), st.st_uid);
    }

    #[test]
    fn names_are_tried_in_lower_case_too() {
        assert_eq!(NssAccounts::users().user("ROOT").unwrap().name, "root");
    }

    #[test]
    fn the_process_mode_gives_everyone_the_servers_credentials() {
        let a = NssAccounts::process().user("anyone").unwrap();
        assert!(Arc::ptr_eq(&a.who, &ringshare_vfs::server_who()));
    }
}
