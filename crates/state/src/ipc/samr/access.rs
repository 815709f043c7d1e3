//! The access rights of samr's handles ([MS-SAMR] 2.2.1) as Samba 4.22's rpcd answers a
//! standalone server: the security descriptor of each kind of object (what QuerySecurity
//! shows), the rights an open grants and the rights each call needs of its handle.
//!
//! Every object's descriptor gives Everyone the object's generic read and execute rights,
//! BUILTIN\Administrators and BUILTIN\Account Operators all of them, and a user (or group)
//! object also gives its own SID a few more. An ordinary session holds no administrator SID,
//! so an open that asks for more than Everyone's rights is STATUS_ACCESS_DENIED, and a call
//! whose handle was opened without the right it needs is too. A root session (uid 0) is
//! granted what it asks for (MAXIMUM_ALLOWED is everything) and is never held to its
//! handle's rights, as Samba's `root_mode()`. Privileges (SeAddUsers, SeMachineAccount) are
//! not modelled: ringshare's sessions hold none.

use ringshare_wire::consts::{AccessMask, SecurityInformation};
use ringshare_wire::security::{Ace, Acl, SecurityDescriptor, Sid};
use ringshare_wire::NtStatus;

use crate::files::access::MAXIMUM_ALLOWED;
/// READ_CONTROL, which QuerySecurity needs.
pub(super) use crate::files::access::READ_CONTROL;

/// The four generic rights.
const GENERIC_ALL: u32 = 0x1000_0000;
const GENERIC_EXECUTE: u32 = 0x2000_0000;
const GENERIC_WRITE: u32 = 0x4000_0000;
const GENERIC_READ: u32 = 0x8000_0000;

/// SAMR_ACCESS_* of a server (connect) handle.
pub(super) const SAM_ENUM_DOMAINS: u32 = 0x10;
pub(super) const SAM_LOOKUP_DOMAIN: u32 = 0x20;
/// SAMR_DOMAIN_ACCESS_* of a domain handle.
pub(super) const DOMAIN_LOOKUP_INFO_1: u32 = 0x1;
pub(super) const DOMAIN_LOOKUP_INFO_2: u32 = 0x4;
pub(super) const DOMAIN_LOOKUP_ALIAS: u32 = 0x80;
pub(super) const DOMAIN_ENUM_ACCOUNTS: u32 = 0x100;
pub(super) const DOMAIN_OPEN_ACCOUNT: u32 = 0x200;
/// SAMR_USER_ACCESS_* of a user handle.
pub(super) const USER_GET_NAME_ETC: u32 = 0x1;
pub(super) const USER_GET_LOCALE: u32 = 0x2;
pub(super) const USER_GET_LOGONINFO: u32 = 0x8;
pub(super) const USER_GET_ATTRIBUTES: u32 = 0x10;
pub(super) const USER_GET_GROUPS: u32 = 0x100;
/// SAMR_GROUP_ACCESS_* of a group handle.
pub(super) const GROUP_LOOKUP_INFO: u32 = 0x1;
pub(super) const GROUP_GET_MEMBERS: u32 = 0x10;
/// SAMR_ALIAS_ACCESS_* of an alias handle.
pub(super) const ALIAS_GET_MEMBERS: u32 = 0x4;
pub(super) const ALIAS_LOOKUP_INFO: u32 = 0x8;

/// What the generic rights of one kind of object stand for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mapping {
    read: u32,
    write: u32,
    execute: u32,
    all: u32,
}

/// The standard rights in each generic set: READ_CONTROL for read, write and execute;
/// DELETE, READ_CONTROL, WRITE_DAC and WRITE_OWNER for all.
const STD: u32 = READ_CONTROL;
const STD_ALL: u32 = 0x000F_0000;

/// A server handle (GENERIC_RIGHTS_SAM_*).
pub(super) const SAM: Mapping = Mapping {
    read: STD | 0x10,
    write: STD | 0x0e,
    execute: STD | 0x21,
    all: STD_ALL | 0x3f,
};
/// A domain handle (GENERIC_RIGHTS_DOMAIN_*).
pub(super) const DOMAIN: Mapping = Mapping {
    read: STD | 0x84,
    write: STD | 0x47a,
    execute: STD | 0x301,
    all: STD_ALL | 0x7ff,
};
/// A user handle (GENERIC_RIGHTS_USER_*).
pub(super) const USER: Mapping = Mapping {
    read: STD | 0x31a,
    write: STD | 0x4e4,
    execute: STD | 0x41,
    all: STD_ALL | 0x7ff,
};
/// A group handle (GENERIC_RIGHTS_GROUP_*).
pub(super) const GROUP: Mapping = Mapping {
    read: STD | 0x10,
    write: STD | 0x0e,
    execute: STD | 0x01,
    all: STD_ALL | 0x1f,
};
/// An alias handle (GENERIC_RIGHTS_ALIAS_*).
pub(super) const ALIAS: Mapping = Mapping {
    read: STD | 0x04,
    write: STD | 0x13,
    execute: STD | 0x08,
    all: STD_ALL | 0x1f,
};
/// What Samba's descriptor of a group or an alias is made with: the user rights without
/// SAMR_USER_ACCESS_CHANGE_PASSWORD in execute (Samba gives all three the user descriptor).
const USER_NO_PW_CHANGE: Mapping = Mapping {
    execute: STD | 0x01,
    ..USER
};
/// What an account's own SID may do to its object: READ_CONTROL, CHANGE_PASSWORD and
/// SET_LOC_COM (the domain lets passwords change: no minimum password age).
pub(super) const USER_SELF: u32 = STD | 0x44;
/// What a group's SID may do to its object: READ_CONTROL and SET_LOC_COM.
const GROUP_SELF: u32 = STD | 0x04;

impl Mapping {
    /// `desired` with its generic rights replaced by what they stand for.
    fn map(&self, desired: u32) -> u32 {
        let mut out = desired & !(GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL);
        for (bit, rights) in [
            (GENERIC_READ, self.read),
            (GENERIC_WRITE, self.write),
            (GENERIC_EXECUTE, self.execute),
            (GENERIC_ALL, self.all),
        ] {
            if desired & bit != 0 {
                out |= rights;
            }
        }
        out
    }

    /// What Everyone is allowed.
    fn everyone(&self) -> u32 {
        self.read | self.execute
    }
}

/// Who calls: root is granted everything and never checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caller {
    pub root: bool,
    /// The RID of the caller's account in the account domain (its own user object allows it
    /// [`USER_SELF`]).
    pub rid: Option<u32>,
}

/// `desired` as an open asks for it: MAXIMUM_ALLOWED is Everyone's rights (generic read
/// and execute; everything for root), generic rights mapped to the object's.
fn asked(map: &Mapping, caller: Caller, desired: u32) -> u32 {
    let mut desired = desired;
    if desired & MAXIMUM_ALLOWED != 0 {
        desired &= !MAXIMUM_ALLOWED;
        desired |= GENERIC_READ | GENERIC_EXECUTE;
        if caller.root {
            desired |= GENERIC_ALL;
        }
    }
    map.map(desired)
}

/// The rights an open of an object of kind `map` grants `caller` for `desired`, with `own`
/// the rights the object's descriptor gives the caller's own SID (0 when it gives none):
/// any right beyond what the descriptor allows is STATUS_ACCESS_DENIED, except for root.
pub(super) fn grant(
    map: &Mapping,
    caller: Caller,
    desired: u32,
    own: u32,
) -> Result<u32, NtStatus> {
    let desired = asked(map, caller, desired);
    if caller.root || desired & !(map.everyone() | own) == 0 {
        Ok(desired)
    } else {
        Err(NtStatus::ACCESS_DENIED)
    }
}

/// Connect (0), which checks no descriptor: of the requested rights it keeps only
/// SAMR_ACCESS_ENUM_DOMAINS and SAMR_ACCESS_LOOKUP_DOMAIN.
pub(super) fn connect0(caller: Caller, desired: u32) -> u32 {
    asked(&SAM, caller, desired) & (SAM_ENUM_DOMAINS | SAM_LOOKUP_DOMAIN)
}

/// Whether a handle with rights `granted` may make a call that needs `needed`.
pub(super) fn check(caller: Caller, granted: u32, needed: u32) -> Result<(), NtStatus> {
    if caller.root || granted & needed == needed {
        Ok(())
    } else {
        Err(NtStatus::ACCESS_DENIED)
    }
}

/// What each kind of object's descriptor is made of.
#[derive(Debug, Clone)]
pub(super) enum Object {
    Server,
    Domain,
    /// A user object: its SID.
    User(Sid),
    /// A group object: its SID.
    Group(Sid),
}

/// The security descriptor QuerySecurity answers for an object (self-relative, DACL only,
/// no owner or group), as Samba 4.22's make_samr_object_sd builds it on a standalone server.
pub(super) fn descriptor(object: &Object) -> Vec<u8> {
    let (map, own) = match object {
        Object::Server => (SAM, None),
        Object::Domain => (DOMAIN, None),
        Object::User(sid) => (USER, Some((sid, USER_SELF))),
        Object::Group(sid) => (USER_NO_PW_CHANGE, Some((sid, GROUP_SELF))),
    };
    let builtin = |rid| Sid::from_parts(5, &[32, rid]).unwrap_or_else(Sid::null);
    let mut aces = vec![
        Ace::allow(
            Sid::from_parts(1, &[0]).unwrap_or_else(Sid::null),
            AccessMask(map.everyone()),
            0,
        ),
        Ace::allow(builtin(544), AccessMask(map.all), 0),
        Ace::allow(builtin(548), AccessMask(map.all), 0),
    ];
    if let Some((sid, mask)) = own {
        aces.push(Ace::allow(sid.clone(), AccessMask(mask), 0));
    }
    let sd = SecurityDescriptor {
        dacl: Some(Acl::new(aces)),
        ..SecurityDescriptor::default()
    };
    // Four ACEs of at most 76 bytes each: within every 16-bit size.
    sd.to_bytes(SecurityInformation::DACL).unwrap_or_default()
}
