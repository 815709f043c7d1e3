//! Who a session and a tree connect act as.
//!
//! Each SMB user acts as a Unix account ([`Account`]: uid, primary gid,
//! supplementary groups, home directory), resolved when the session is set
//! up through [`Accounts`] (the server binary implements it with NSS, so
//! local, LDAP and sssd accounts all work; the core does no lookups of its
//! own). A tree connect then applies the share's rules, with Samba's option
//! names and meaning ([`ShareRules`]): `invalid users` / `valid users` decide
//! whether the user may connect, `read list` / `write list` whether the tree
//! is read-only for them, `admin users` act as root, `force user` /
//! `force group` replace the identity. The result ([`TreeIdentity`]) is the
//! [`Who`] every file operation on the tree runs as: the core decides *what*
//! to do, the kernel decides *whether* that user may.

use std::fmt;
use std::sync::Arc;

use ringshare_vfs::{Creds, Who};
use ringshare_wire::security::Sid;
use ringshare_wire::NtStatus;

/// A Unix account as the server resolved it.
#[derive(Clone)]
pub struct Account {
    /// The account's name (Samba's `%u`).
    pub name: String,
    /// Its uid, primary gid and supplementary groups.
    pub who: Who,
    /// Its home directory (`%H`, `[homes]`); empty when it has none.
    pub home: String,
    /// SIDs its token holds besides the Unix ones: a domain user's, from the PAC of their
    /// ticket (user first; [`crate::domain`]). Empty for other accounts.
    pub sids: Arc<[Sid]>,
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.name, self.who)
    }
}

/// Why a name has no account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountError {
    /// No Unix account of that name.
    NoSuchUser,
    /// The lookup itself failed (NSS unreachable): says why.
    Lookup(String),
}

impl fmt::Display for AccountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccountError::NoSuchUser => f.write_str("no Unix account of that name"),
            AccountError::Lookup(why) => write!(f, "account lookup failed: {why}"),
        }
    }
}

/// The server's view of Unix accounts and groups.
pub trait Accounts: Send + Sync {
    /// The account SMB user `name` acts as.
    fn user(&self, name: &str) -> Result<Account, AccountError>;
    /// The gid of Unix group `name`.
    fn group(&self, name: &str) -> Option<u32>;
    /// The name of group `gid` (Samba's `%G`).
    fn group_name(&self, gid: u32) -> Option<String>;
    /// The name of the Unix user of uid `uid` (lsarpc's names). The default knows none.
    fn user_name(&self, uid: u32) -> Option<String> {
        let _ = uid;
        None
    }
    /// The uid of Unix user `name` (lsarpc's SIDs); unlike [`Accounts::user`], never whom
    /// the name would act as. The default knows none.
    fn unix_user(&self, name: &str) -> Option<u32> {
        let _ = name;
        None
    }
    /// The name NSS gives Unix user `name` and its GECOS field (what Samba's passdb takes an
    /// account's full name from). The default knows none.
    fn passwd(&self, name: &str) -> Option<(String, String)> {
        let _ = name;
        None
    }
    /// Whether the account of uid `uid` is in group `gid` (primary or
    /// supplementary). The default knows no memberships.
    fn member(&self, uid: u32, gid: u32) -> bool {
        let _ = (uid, gid);
        false
    }
}

/// [`Accounts`] answering the ACL mapping's membership questions.
pub struct Membership<'a>(pub &'a dyn Accounts);

impl ringshare_acl::posix::GroupMembership for Membership<'_> {
    fn user_in_group(&self, uid: u32, gid: u32) -> bool {
        self.0.member(uid, gid)
    }
}

/// Every user acts as the server process itself: what a server that cannot
/// switch credentials (not run as root) does, and what tests over the
/// in-memory share use. Names are accepted as they come.
#[derive(Debug, Default)]
pub struct ProcessAccounts;

impl Accounts for ProcessAccounts {
    fn user(&self, name: &str) -> Result<Account, AccountError> {
        Ok(Account {
            name: name.to_string(),
            who: ringshare_vfs::server_who(),
            home: String::new(),
            sids: Default::default(),
        })
    }

    fn group(&self, _name: &str) -> Option<u32> {
        None
    }

    fn group_name(&self, _gid: u32) -> Option<String> {
        None
    }
}

/// `inherit owner` (Samba's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InheritOwner {
    /// New files belong to their creator.
    #[default]
    No,
    /// New files and directories belong to the owner of their parent
    /// directory (`windows and unix`, `yes`).
    WindowsAndUnix,
    /// Only the Unix owner is taken from the parent (`unix only`).
    UnixOnly,
}

/// A share's rules about users, with Samba's option names and meaning.
/// Name lists hold user names and `@group` / `+group` entries; `%U`-style
/// substitutions are made at tree connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareRules {
    /// `valid users`: when not empty, only these may connect.
    pub valid_users: Vec<String>,
    /// `invalid users`: these may not connect (checked first).
    pub invalid_users: Vec<String>,
    /// `read list`: read-only for these even on a writable share.
    pub read_list: Vec<String>,
    /// `write list`: writable for these even on a read-only share (wins over
    /// `read list`).
    pub write_list: Vec<String>,
    /// `admin users`: these act as root on the share.
    pub admin_users: Vec<String>,
    /// `force user`: everyone acts as this account.
    pub force_user: Option<String>,
    /// `force group`: the primary group becomes this one; with a leading
    /// `+`, only for users already in it.
    pub force_group: Option<String>,
    /// `create mask` (default 0744), ANDed with the mode a new file gets.
    pub create_mask: u32,
    /// `directory mask` (default 0755).
    pub directory_mask: u32,
    /// `force create mode` (default 0), ORed in after the mask.
    pub force_create_mode: u32,
    /// `force directory mode` (default 0).
    pub force_directory_mode: u32,
    /// `inherit permissions`: new files and directories take their mode
    /// from the parent directory instead of the masks.
    pub inherit_permissions: bool,
    /// `inherit acls`: create with the full mode so the parent's default
    /// ACL applies unmasked.
    pub inherit_acls: bool,
    /// `inherit owner`.
    pub inherit_owner: InheritOwner,
    /// `hide unreadable`: listings leave out what the user cannot read.
    pub hide_unreadable: bool,
}

impl Default for ShareRules {
    fn default() -> ShareRules {
        ShareRules {
            valid_users: Vec::new(),
            invalid_users: Vec::new(),
            read_list: Vec::new(),
            write_list: Vec::new(),
            admin_users: Vec::new(),
            force_user: None,
            force_group: None,
            create_mask: 0o744,
            directory_mask: 0o755,
            force_create_mode: 0,
            force_directory_mode: 0,
            inherit_permissions: false,
            inherit_acls: false,
            inherit_owner: InheritOwner::No,
            hide_unreadable: false,
        }
    }
}

/// What a session acts as on one tree.
#[derive(Clone)]
pub struct TreeIdentity {
    /// The credentials every operation on the tree runs as.
    pub who: Who,
    /// The tree is read-only for this user (`read only`, `read list`,
    /// `write list`).
    pub read_only: bool,
    /// An `admin users` member (or root): the NT ACLs stored with files do
    /// not apply, as on Samba.
    pub admin: bool,
    /// The domain SIDs of the session's user, while the tree acts as that user (not with
    /// `force user`): they join the token stored NT ACLs are checked against.
    pub sids: Arc<[Sid]>,
}

/// Samba's `%` substitutions a share's user lists and path allow: `%S` the
/// share, `%U` the session's user name, `%u` the Unix account, `%G` its
/// primary group, `%H` its home directory, `%%` a percent sign. Others stay.
pub struct Subst<'a> {
    pub share: &'a str,
    pub user: &'a str,
    pub account: &'a str,
    pub group: &'a str,
    pub home: &'a str,
}

impl Subst<'_> {
    pub fn apply(&self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('S') => out.push_str(self.share),
                Some('U') => out.push_str(self.user),
                Some('u') => out.push_str(self.account),
                Some('G') => out.push_str(self.group),
                Some('H') => out.push_str(self.home),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }
}

/// Whether an entry of a user list names this user: a user name (as the
/// client logged on, or the Unix account's), or `@group` / `+group`, a Unix
/// group the account is in (primary or supplementary).
fn list_names(list: &[String], user: &str, account: &Account, accounts: &dyn Accounts) -> bool {
    list.iter().any(|entry| {
        let entry = entry.trim();
        match entry.strip_prefix('@').or_else(|| entry.strip_prefix('+')) {
            Some(group) => accounts
                .group(group)
                .is_some_and(|gid| account.who.in_group(gid)),
            None => entry.eq_ignore_ascii_case(user) || entry.eq_ignore_ascii_case(&account.name),
        }
    })
}

/// What the session of `user` (acting as `account`) gets on a share whose
/// rules are `rules` and whose `read only` is `read_only`: refused
/// (ACCESS_DENIED, with a log line saying why), or the identity its files are
/// used with.
pub fn for_tree(
    accounts: &dyn Accounts,
    share: &str,
    user: &str,
    account: &Account,
    rules: &ShareRules,
    read_only: bool,
) -> Result<TreeIdentity, NtStatus> {
    let group = accounts
        .group_name(account.who.gid())
        .unwrap_or_else(|| account.who.gid().to_string());
    let subst = Subst {
        share,
        user,
        account: &account.name,
        group: &group,
        home: &account.home,
    };
    let expand = |list: &[String]| -> Vec<String> {
        list.iter()
            .flat_map(|e| {
                subst
                    .apply(e)
                    .split([',', ' '])
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let names = |list: &[String]| list_names(&expand(list), user, account, accounts);
    if names(&rules.invalid_users) {
        tracing::debug!(share, user, "user is in 'invalid users'");
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !rules.valid_users.is_empty() && !names(&rules.valid_users) {
        tracing::debug!(share, user, "user is not in 'valid users'");
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut read_only = read_only;
    if names(&rules.read_list) {
        read_only = true;
    }
    if names(&rules.write_list) {
        read_only = false;
    }
    let mut who = account.who.clone();
    let mut sids = Arc::clone(&account.sids);
    let admin = names(&rules.admin_users);
    if admin {
        who = ringshare_vfs::server_who();
    } else {
        if let Some(forced) = &rules.force_user {
            let forced = subst.apply(forced);
            sids = Arc::default();
            who = accounts
                .user(&forced)
                .map_err(|e| {
                    tracing::warn!(
                        share,
                        "'force user = {forced}': {e}; refusing the tree connect"
                    );
                    NtStatus::ACCESS_DENIED
                })?
                .who;
        }
        if let Some(g) = &rules.force_group {
            let (only_members, name) = match g.strip_prefix('+') {
                Some(n) => (true, n),
                None => (false, g.as_str()),
            };
            let gid = accounts.group(name).ok_or_else(|| {
                tracing::warn!(
                    share,
                    "'force group = {g}': no such Unix group; refusing the tree connect"
                );
                NtStatus::ACCESS_DENIED
            })?;
            if !only_members || who.in_group(gid) {
                who =
                    ringshare_vfs::creds::intern(Creds::new(who.uid(), gid, who.groups().to_vec()));
            }
        }
    }
    let admin = admin || who.uid() == 0;
    Ok(TreeIdentity {
        who: Arc::clone(&who),
        read_only,
        admin,
        sids,
    })
}

/// The permission bits a new file or directory is created with (the kernel
/// then applies the parent's default ACL, if any; the server runs with umask
/// 0), as Samba's `unix_mode` computes them: rw for everyone, x for the owner
/// of a file with the ARCHIVE attribute (`map archive`, on by default), all x
/// bits for a directory, then `create mask` / `directory mask` and the force
/// modes, or with `inherit permissions` the parent directory's mode instead
/// (a file takes its rw bits, a directory all of it). With `inherit acls`
/// and a parent that has a default ACL, all of rwx for everyone under the
/// mask (no force mode), so the default ACL decides (Samba's rule).
/// `parent_mode` is needed only for `inherit permissions`.
pub fn new_mode(
    rules: &ShareRules,
    is_dir: bool,
    archive: bool,
    parent_mode: Option<u32>,
    parent_has_default_acl: bool,
) -> u32 {
    if rules.inherit_acls && parent_has_default_acl {
        let mask = if is_dir {
            rules.directory_mask
        } else {
            rules.create_mask
        };
        return 0o777 & mask;
    }
    let inherit = parent_mode.filter(|_| rules.inherit_permissions);
    let mut mode = if inherit.is_some() { 0 } else { 0o666 };
    if is_dir {
        mode |= 0o200;
        match inherit {
            Some(p) => mode |= p & 0o7777,
            None => mode = ((mode | 0o111) & rules.directory_mask) | rules.force_directory_mode,
        }
    } else {
        if archive {
            mode |= 0o100;
        }
        match inherit {
            Some(p) => mode |= p & 0o666,
            None => mode = (mode & rules.create_mask) | rules.force_create_mode,
        }
    }
    mode & 0o7777
}

/// The SIDs a stored NT ACL is checked against for `who`: its Unix user and
/// groups (S-1-22-1-uid, S-1-22-2-gid), a domain user's SIDs (`domain`, from
/// the PAC), Everyone, and Authenticated Users for a user logon (not a
/// guest's or an anonymous one).
pub fn sids(who: &Creds, authenticated: bool, domain: &[Sid]) -> Vec<Sid> {
    let mut sids = vec![Sid::everyone(), Sid::unix_user(who.uid())];
    for s in domain {
        if !sids.contains(s) {
            sids.push(s.clone());
        }
    }
    sids.push(Sid::unix_group(who.gid()));
    for g in who.groups() {
        if *g != who.gid() {
            sids.push(Sid::unix_group(*g));
        }
    }
    if authenticated {
        sids.push(Sid::authenticated_users());
    }
    sids
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    impl Accounts for Fixed {
        fn user(&self, name: &str) -> Result<Account, AccountError> {
            let (uid, groups) = match name {
                "alice" => (2001, vec![2001, 3000]),
                "bob" => (2002, vec![2002]),
                "svc" => (2100, vec![2100]),
                _ => return Err(AccountError::NoSuchUser),
            };
            Ok(Account {
                name: name.to_string(),
                who: ringshare_vfs::creds::intern(Creds::new(uid, uid, groups)),
                home: format!("/home/{name}"),
                sids: Default::default(),
            })
        }

        fn group(&self, name: &str) -> Option<u32> {
            (name == "project").then_some(3000)
        }

        fn group_name(&self, gid: u32) -> Option<String> {
            (gid == 3000).then(|| "project".to_string())
        }
    }

    fn tree(user: &str, rules: &ShareRules, ro: bool) -> Result<TreeIdentity, NtStatus> {
        let account = Fixed.user(user).unwrap();
        for_tree(&Fixed, "data", user, &account, rules, ro)
    }

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn invalid_users_win_over_valid_users_and_groups_match_by_membership() {
        let rules = ShareRules {
            valid_users: list(&["@project", "bob"]),
            invalid_users: list(&["bob"]),
            ..Default::default()
        };
        assert!(tree("alice", &rules, false).is_ok());
        assert_eq!(
            tree("bob", &rules, false).err(),
            Some(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(
            tree("svc", &rules, false).err(),
            Some(NtStatus::ACCESS_DENIED)
        );
    }

    #[test]
    fn write_list_wins_over_read_list_and_read_only() {
        let rules = ShareRules {
            read_list: list(&["alice", "bob"]),
            write_list: list(&["+project"]),
            ..Default::default()
        };
        assert!(!tree("alice", &rules, true).unwrap().read_only);
        assert!(tree("bob", &rules, false).unwrap().read_only);
        assert!(!tree("svc", &rules, false).unwrap().read_only);
    }

    #[test]
    fn force_user_and_force_group_replace_the_identity() {
        let rules = ShareRules {
            force_user: Some("svc".into()),
            force_group: Some("project".into()),
            ..Default::default()
        };
        let t = tree("alice", &rules, false).unwrap();
        assert_eq!((t.who.uid(), t.who.gid()), (2100, 3000));
        assert!(!t.admin);
        let plus = ShareRules {
            force_group: Some("+project".into()),
            ..Default::default()
        };
        assert_eq!(tree("alice", &plus, false).unwrap().who.gid(), 3000);
        assert_eq!(tree("bob", &plus, false).unwrap().who.gid(), 2002);
    }

    #[test]
    fn admin_users_act_as_the_server() {
        let rules = ShareRules {
            admin_users: list(&["bob"]),
            force_user: Some("svc".into()),
            ..Default::default()
        };
        let t = tree("bob", &rules, false).unwrap();
        assert!(t.admin);
        assert!(Arc::ptr_eq(&t.who, &ringshare_vfs::server_who()));
    }

    #[test]
    fn new_files_get_0744_and_directories_0755_by_default_and_the_masks_and_forces_apply() {
        let d = ShareRules::default();
        assert_eq!(new_mode(&d, false, true, None, false), 0o744);
        assert_eq!(new_mode(&d, false, false, None, false), 0o644);
        assert_eq!(new_mode(&d, true, false, None, false), 0o755);
        let r = ShareRules {
            create_mask: 0o770,
            force_create_mode: 0o060,
            directory_mask: 0o750,
            force_directory_mode: 0o2000,
            ..Default::default()
        };
        assert_eq!(new_mode(&r, false, true, None, false), 0o760);
        assert_eq!(new_mode(&r, true, false, None, false), 0o2750);
    }

    #[test]
    fn inherit_permissions_takes_the_parents_mode_and_inherit_acls_the_default_acl() {
        let r = ShareRules {
            inherit_permissions: true,
            ..Default::default()
        };
        assert_eq!(new_mode(&r, true, false, Some(0o2770), false), 0o2770);
        assert_eq!(new_mode(&r, false, false, Some(0o2770), false), 0o660);
        let a = ShareRules {
            inherit_acls: true,
            ..Default::default()
        };
        let wide = ShareRules {
            create_mask: 0o777,
            force_create_mode: 0o001,
            ..a.clone()
        };
        assert_eq!(new_mode(&wide, false, true, None, true), 0o777);
        assert_eq!(new_mode(&wide, false, true, None, false), 0o767);
        assert_eq!(new_mode(&a, true, false, None, true), 0o755);
    }

    #[test]
    fn substitutions_follow_samba() {
        let s = Subst {
            share: "bob",
            user: "Bob",
            account: "bob",
            group: "staff",
            home: "/home/bob",
        };
        assert_eq!(
            s.apply("%H/%S:%U:%u:%G:%%:%x"),
            "/home/bob/bob:Bob:bob:staff:%:%x"
        );
        let rules = ShareRules {
            valid_users: list(&["%S"]),
            ..Default::default()
        };
        let bob = Fixed.user("bob").unwrap();
        assert!(for_tree(&Fixed, "bob", "bob", &bob, &rules, false).is_ok());
        assert!(for_tree(&Fixed, "alice", "bob", &bob, &rules, false).is_err());
    }
}
