//! Access checks against a stored Windows security descriptor ([MS-DTYP]
//! 2.5.3.2, simplified: no privileges, no object ACEs, no conditional ACEs).
//!
//! Every file operation runs as the tree's Unix user, so the kernel decides
//! with the file's mode and POSIX ACL. When a security descriptor is stored
//! with a file (CREATE with a SecD context, or SET_INFO), its DACL is
//! enforced on top, on every later CREATE, as Windows would (and as Samba's
//! `acl_xattr` does): a NULL or absent DACL allows everything, an
//! empty DACL allows nothing (but the owner's implicit READ_CONTROL and
//! WRITE_DAC), ACEs are applied in order, a deny ACE wins over a later allow.
//!
//! A session's token: the Unix SIDs of the account the tree acts as (user
//! S-1-22-1-uid, its groups S-1-22-2-gid), Everyone, and Authenticated Users
//! for a user logon.

use ringshare_wire::security::{AceType, SecurityDescriptor, Sid, INHERIT_ONLY_ACE};

use crate::files::access::{map_generic, FILE_ALL_ACCESS};

/// READ_CONTROL | WRITE_DAC: what an owner may always do.
const OWNER_RIGHTS: u32 = 0x0002_0000 | 0x0004_0000;
/// DELETE.
pub(crate) const DELETE: u32 = 0x0001_0000;
/// FILE_DELETE_CHILD: a directory right that lets its holder delete entries.
pub(crate) const FILE_DELETE_CHILD: u32 = 0x0000_0040;

/// OWNER RIGHTS, S-1-3-4 ([MS-DTYP] 2.4.2.4).
fn owner_rights_sid() -> Sid {
    Sid::from_parts(3, &[4]).unwrap_or_else(Sid::everyone)
}

/// The identities a session acts as.
#[derive(Debug, Clone, Default)]
pub(crate) struct Token {
    pub sids: Vec<Sid>,
}

impl Token {
    /// The token of a user acting as `who`, with a domain user's SIDs
    /// ([`crate::identity::sids`]).
    pub fn of(who: &ringshare_vfs::Creds, authenticated: bool, domain: &[Sid]) -> Token {
        Token {
            sids: crate::identity::sids(who, authenticated, domain),
        }
    }

    fn has(&self, sid: &Sid) -> bool {
        self.sids.contains(sid)
    }
}

/// Rights the descriptor grants `token` (generic bits mapped).
pub(crate) fn granted(sd: &SecurityDescriptor, token: &Token) -> u32 {
    let Some(dacl) = &sd.dacl else {
        // No DACL, or a NULL DACL: no protection.
        return FILE_ALL_ACCESS;
    };
    let mut allowed = 0u32;
    let mut denied = 0u32;
    let owner = sd.owner.as_ref().is_some_and(|o| token.has(o));
    // OWNER RIGHTS ACEs replace the owner's implicit rights and apply to
    // the owner ([MS-DTYP] 2.5.3.2).
    let owner_rights = owner_rights_sid();
    let has_owner_rights = dacl
        .aces
        .iter()
        .any(|a| a.flags & INHERIT_ONLY_ACE == 0 && a.sid().is_some_and(|s| *s == owner_rights));
    if owner && !has_owner_rights {
        allowed |= OWNER_RIGHTS;
    }
    for ace in &dacl.aces {
        if ace.flags & INHERIT_ONLY_ACE != 0 {
            continue;
        }
        let (Some(sid), Some(mask)) = (ace.sid(), ace.mask()) else {
            continue;
        };
        let applies = token.has(sid) || (owner && *sid == owner_rights);
        if !applies {
            continue;
        }
        let mask = map_generic(mask.0);
        if ace.ace_type == AceType::ACCESS_ALLOWED {
            allowed |= mask & !denied;
        } else if ace.ace_type == AceType::ACCESS_DENIED {
            denied |= mask & !allowed;
        }
    }
    allowed & !denied
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_wire::consts::AccessMask;
    use ringshare_wire::security::{Ace, Acl, SE_DACL_PRESENT};
    use ringshare_wire::NtStatus;

    const READ: u32 = 0x0012_0089;
    const WRITE_DATA: u32 = 0x2;

    fn sd(aces: Option<Vec<Ace>>) -> SecurityDescriptor {
        SecurityDescriptor {
            control: SE_DACL_PRESENT,
            rm_control: 0,
            owner: Some(Sid::unix_user(0)),
            group: None,
            sacl: None,
            dacl: aces.map(|aces| Acl { revision: 2, aces }),
        }
    }

    /// `desired`, when the descriptor grants all of it (with `extra` from
    /// elsewhere); with MAXIMUM_ALLOWED everything it grants.
    fn check(
        sd: &SecurityDescriptor,
        token: &Token,
        desired: u32,
        maximum_allowed: bool,
        extra: u32,
    ) -> Result<u32, NtStatus> {
        let have = granted(sd, token) | extra;
        if desired & !have != 0 {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(if maximum_allowed { have } else { desired })
    }

    fn user(uid: u32) -> Token {
        Token::of(&ringshare_vfs::Creds::new(uid, uid, vec![]), true, &[])
    }

    fn alice() -> Token {
        user(1000)
    }

    #[test]
    fn a_null_dacl_allows_everything() {
        assert!(check(&sd(None), &alice(), FILE_ALL_ACCESS, false, 0).is_ok());
    }

    #[test]
    fn an_empty_dacl_denies_everything_but_the_owners_implicit_rights() {
        let empty = sd(Some(vec![]));
        assert_eq!(
            check(&empty, &alice(), READ, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
        let owner = user(0);
        assert!(check(&empty, &owner, OWNER_RIGHTS, false, 0).is_ok());
        assert_eq!(
            check(&empty, &owner, WRITE_DATA, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
    }

    #[test]
    fn an_allow_ace_for_everyone_grants_its_mask_only() {
        let d = sd(Some(vec![Ace::allow(Sid::everyone(), AccessMask(READ), 0)]));
        assert!(check(&d, &alice(), READ, false, 0).is_ok());
        assert_eq!(
            check(&d, &alice(), WRITE_DATA, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(check(&d, &alice(), 0, true, 0), Ok(READ));
    }

    #[test]
    fn a_deny_ace_before_an_allow_ace_wins() {
        let d = sd(Some(vec![
            Ace::deny(Sid::unix_user(1000), AccessMask(WRITE_DATA), 0),
            Ace::allow(Sid::everyone(), AccessMask(FILE_ALL_ACCESS), 0),
        ]));
        assert_eq!(
            check(&d, &alice(), WRITE_DATA, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert!(check(&d, &alice(), READ, false, 0).is_ok());
        let bob = user(1001);
        assert!(check(&d, &bob, WRITE_DATA, false, 0).is_ok());
    }

    #[test]
    fn a_creator_owner_ace_on_an_object_applies_to_nobody() {
        let d = sd(Some(vec![Ace::allow(
            Sid::creator_owner(),
            AccessMask(FILE_ALL_ACCESS),
            0,
        )]));
        assert_eq!(
            check(&d, &alice(), WRITE_DATA, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
    }

    #[test]
    fn inherit_only_aces_do_not_apply_to_the_object_itself() {
        let a = Ace::allow(
            Sid::everyone(),
            AccessMask(FILE_ALL_ACCESS),
            INHERIT_ONLY_ACE,
        );
        let d = sd(Some(vec![a]));
        assert_eq!(
            check(&d, &alice(), READ, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
    }

    #[test]
    fn delete_granted_through_the_parent_counts() {
        let d = sd(Some(vec![]));
        assert_eq!(
            check(&d, &alice(), DELETE, false, 0),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(check(&d, &alice(), DELETE, false, DELETE), Ok(DELETE));
    }

    #[test]
    fn an_owner_rights_ace_replaces_the_owners_implicit_rights() {
        let owner_rights = owner_rights_sid();
        let d = sd(Some(vec![Ace::allow(
            owner_rights,
            AccessMask(WRITE_DATA),
            0,
        )]));
        let owner = user(0);
        assert_eq!(
            granted(&d, &owner),
            WRITE_DATA,
            "no implicit READ_CONTROL | WRITE_DAC"
        );
        assert_eq!(granted(&d, &alice()), 0, "OWNER RIGHTS is only the owner");
        assert_eq!(granted(&sd(Some(vec![])), &owner), OWNER_RIGHTS);
    }

    #[test]
    fn generic_rights_in_aces_are_mapped() {
        let d = sd(Some(vec![Ace::allow(
            Sid::everyone(),
            AccessMask(0x8000_0000),
            0,
        )]));
        assert!(check(&d, &alice(), READ, false, 0).is_ok());
    }
}
