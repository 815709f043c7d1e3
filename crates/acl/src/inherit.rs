//! The security descriptor a new file or directory gets from its parent
//! directory when a share keeps full NT ACLs (Samba's `vfs objects =
//! acl_xattr`): [MS-DTYP] 2.5.3.4 (CreateSecurityDescriptor, ComputeACL,
//! ContainsInheritableACEs) with the results Windows gives and smbtorture's
//! `smb2.acls` suite checks, next to Samba 4.17's `se_create_child_secdesc`
//! (libcli/security/secdesc.c, called by `inherit_new_acl` in
//! source3/smbd/open.c).
//!
//! Pure functions: the caller reads the parent's stored descriptor, calls
//! [`child_descriptor`] and stores what comes back (or, on `None`, keeps the
//! descriptor Samba derives from the file's POSIX permissions, as
//! `inherit_new_acl` does when the parent has nothing to inherit).
//!
//! # Which parent ACEs a child inherits
//!
//! From the parent's DACL, per ACE (ACE inheritance rules of Microsoft's
//! "ACE Inheritance Rules" page; smbtorture `smb2.acls.INHERITANCE`):
//!
//! | parent ACE flags        | new file            | new directory                         |
//! |-------------------------|---------------------|---------------------------------------|
//! | none                    | —                   | —                                     |
//! | OI                      | effective           | inherit-only, OI\|IO                  |
//! | CI                      | —                   | effective and inheritable, CI         |
//! | OI\|CI                  | effective           | effective and inheritable, OI\|CI     |
//! | NP\|OI                  | effective           | —                                     |
//! | NP\|CI or NP\|OI\|CI    | effective if OI     | effective only (flags cleared)        |
//!
//! INHERIT_ONLY on the parent ACE does not matter (it only says the ACE does
//! not apply to the parent itself). An *effective* copy has CREATOR OWNER
//! (S-1-3-0) replaced by the new owner, CREATOR GROUP (S-1-3-1) by the new
//! group, and generic rights mapped with the file mapping
//! ([`map_generic_file_rights`]). On a directory an ACE that is both
//! effective and inheritable and names a CREATOR SID or generic rights
//! becomes two ACEs: the effective copy (flags cleared) followed by the
//! original as inherit-only (its OI/CI kept, IO added), so that the next
//! generation maps it again (smbtorture INHERITANCE expects exactly this
//! pair, in this order, for CREATOR OWNER; Microsoft's rules page says the
//! same of generic rights). An inherit-only copy is never mapped.
//!
//! Exact duplicates among the inherited ACEs are dropped, keeping the first,
//! as `se_create_child_secdesc` does.
//!
//! Debian's Samba 4.17.12 with `acl_xattr` passes smbtorture's
//! `smb2.acls.INHERITANCE`, `INHERITFLAGS` and `DYNAMIC`, and what it stored
//! for new files and directories under three parents (read back with
//! `smbcacls`) is replayed in the tests. Samba names the owner and group
//! with the SIDs of its passdb; here they are whatever the caller passes.
//!
//! # INHERITED_ACE and SE_DACL_AUTO_INHERITED
//!
//! Both follow the parent's *stored* SE_DACL_AUTO_INHERITED bit
//! (smbtorture `smb2.acls.INHERITFLAGS`, and `se_create_child_secdesc`):
//! when the parent has it, every inherited ACE carries INHERITED_ACE and the
//! child's control has SE_DACL_AUTO_INHERITED; when it does not, inherited
//! ACEs carry no INHERITED_ACE and the child has no SE_DACL_AUTO_INHERITED.
//! SE_DACL_AUTO_INHERIT_REQ is a request bit of a SET: Windows and Samba
//! store AUTO_INHERITED only when a SET carried both bits and never store
//! the request bit, so it is not looked at here. The parent's
//! SE_DACL_PROTECTED and the INHERITED_ACE flags of the parent's own ACEs do
//! not matter either.
//!
//! # A descriptor supplied by the creator (SMB2 CREATE `SecD`)
//!
//! As Microsoft's "DACL for a New Object" page and [MS-DTYP] ComputeACL
//! (with DACL_AUTO_INHERIT) describe it, and as Samba's own implementation of
//! [MS-DTYP] (`create_security_descriptor` in
//! libcli/security/create_descriptor.c, its `process_user_acl`) does it:
//!
//! - owner and group: the creator's when it gives them, else the ones the
//!   caller passes (the creating user's SID and primary group SID); the
//!   CREATOR SIDs are replaced by these;
//! - no DACL in the creator's descriptor (SE_DACL_PRESENT clear): the DACL is
//!   inherited as above;
//! - a DACL not protected: the creator's explicit ACEs (those without
//!   INHERITED_ACE; ACEs that claim to be inherited are dropped, the real
//!   ones come from the parent), then the inherited ACEs;
//! - a protected DACL (SE_DACL_PROTECTED): the creator's ACEs only,
//!   INHERITED_ACE cleared, and SE_DACL_PROTECTED in the result;
//! - a NULL DACL (SE_DACL_PRESENT without an ACL) stays a NULL DACL;
//! - in the creator's ACEs, inherit-only ACEs without OI or CI are dropped
//!   (they apply to nothing); an effective ACE naming a CREATOR SID or
//!   generic rights is mapped in place, or, on a directory when it is also
//!   inheritable (OI or CI), kept as inherit-only followed by a mapped
//!   effective copy (the order of `process_user_acl`);
//! - the creator's SACL, if present, is kept as given (SACLs are not
//!   inherited, as in Samba, which reads only the parent's owner, group and
//!   DACL).
//!
//! Samba 4.17's smbd itself does **not** merge: with a `SecD` context it
//! stores the client's descriptor as given (generic rights mapped,
//! `set_sd` in source3/smbd/smb2_nttrans.c) and skips `inherit_new_acl`
//! altogether. A caller that wants that behaviour does not call
//! [`child_descriptor`] when the client sent a DACL.
//!
//! # What is not done here
//!
//! Object ACEs (types 0x05–0x08, 0x0B, 0x0C, 0x0F, 0x10, kept raw by
//! `ringshare_wire`) follow the flag rules but their SIDs and rights are not
//! looked at (no CREATOR substitution, no generic mapping, no split); file
//! systems do not use them. The token's default DACL ([MS-DTYP] when nothing
//! is inheritable) is not used: Samba falls back to the POSIX-derived
//! descriptor instead, and so does the caller on `None`. Checking that the
//! creator may set the owner, group or SACL it names (SeRestorePrivilege,
//! SeSecurityPrivilege, ...) is the caller's job, before calling.

use std::collections::HashSet;

use ringshare_wire::consts::AccessMask;
use ringshare_wire::security::{
    Ace, AceBody, AceType, Acl, SecurityDescriptor, Sid, CONTAINER_INHERIT_ACE,
    FILE_GENERIC_EXECUTE, FILE_GENERIC_READ, FILE_GENERIC_WRITE, INHERITED_ACE, INHERIT_ONLY_ACE,
    NO_PROPAGATE_INHERIT_ACE, OBJECT_INHERIT_ACE, SE_DACL_AUTO_INHERITED, SE_DACL_PRESENT,
    SE_DACL_PROTECTED, SE_SACL_PRESENT, SE_SACL_PROTECTED, SE_SELF_RELATIVE,
};

#[cfg(test)]
mod tests;

/// The AceFlags bits that steer inheritance ([MS-DTYP] 2.4.4.1): OI, CI,
/// NP, IO and INHERITED_ACE. Other bits (the SACL's audit flags) are kept.
const INHERITANCE_FLAGS: u8 = OBJECT_INHERIT_ACE
    | CONTAINER_INHERIT_ACE
    | NO_PROPAGATE_INHERIT_ACE
    | INHERIT_ONLY_ACE
    | INHERITED_ACE;

/// OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE.
const OI_CI: u8 = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;

/// Generic rights to file rights with the file generic mapping ([MS-SMB2]
/// 2.2.13.1.1, Samba's `file_generic_mapping`; the same for directories):
/// GENERIC_READ → FILE_GENERIC_READ (0x120089), GENERIC_WRITE →
/// FILE_GENERIC_WRITE (0x120116), GENERIC_EXECUTE → FILE_GENERIC_EXECUTE
/// (0x1200A0), GENERIC_ALL → FILE_ALL_ACCESS (0x1F01FF). The generic bits
/// are cleared; every other bit is kept.
pub fn map_generic_file_rights(mask: AccessMask) -> AccessMask {
    let map = [
        (AccessMask::GENERIC_READ, FILE_GENERIC_READ),
        (AccessMask::GENERIC_WRITE, FILE_GENERIC_WRITE),
        (AccessMask::GENERIC_EXECUTE, FILE_GENERIC_EXECUTE),
        (AccessMask::GENERIC_ALL, AccessMask::FILE_ALL_ACCESS),
    ];
    let mut out = mask.difference(AccessMask::GENERIC_MASK);
    for (generic, specific) in map {
        if mask.intersects(generic) {
            out |= specific;
        }
    }
    out
}

/// Whether `ace` of a parent's DACL is inherited by a new file
/// (`is_dir == false`: it has OBJECT_INHERIT_ACE) or a new directory (it has
/// CONTAINER_INHERIT_ACE, or OBJECT_INHERIT_ACE without
/// NO_PROPAGATE_INHERIT_ACE). This is Samba's `is_inheritable_ace`: [MS-DTYP]
/// 2.5.3.4.3 ContainsInheritableACEs asks only for OI or CI, Samba narrows it
/// to the kind of child, so that a parent whose ACEs reach nothing of that
/// kind leaves the POSIX-derived descriptor in place.
pub fn is_inheritable(ace: &Ace, is_dir: bool) -> bool {
    let f = ace.flags;
    if !is_dir {
        return f & OBJECT_INHERIT_ACE != 0;
    }
    f & CONTAINER_INHERIT_ACE != 0
        || (f & OBJECT_INHERIT_ACE != 0 && f & NO_PROPAGATE_INHERIT_ACE == 0)
}

/// Whether the parent's DACL has an ACE a new file (`is_dir == false`) or
/// directory would inherit (Samba's `sd_has_inheritable_components`). A
/// parent without a DACL, or with a NULL DACL, has none.
pub fn has_inheritable_aces(parent: &SecurityDescriptor, is_dir: bool) -> bool {
    parent
        .dacl
        .as_ref()
        .is_some_and(|acl| acl.aces.iter().any(|a| is_inheritable(a, is_dir)))
}

/// The ACEs a new file or directory inherits from `parent`'s DACL, in the
/// parent's order, with the rules of the [module documentation](self):
/// INHERITED_ACE set on each when the parent has SE_DACL_AUTO_INHERITED,
/// CREATOR OWNER / CREATOR GROUP replaced by `owner` / `group` and generic
/// rights mapped in effective copies, split into effective plus
/// inherit-only on directories where needed, exact duplicates dropped.
/// Empty when nothing is inheritable.
pub fn inherited_aces(
    parent: &SecurityDescriptor,
    is_dir: bool,
    owner: &Sid,
    group: &Sid,
) -> Vec<Ace> {
    let Some(acl) = parent.dacl.as_ref() else {
        return Vec::new();
    };
    let mark = if parent.control & SE_DACL_AUTO_INHERITED != 0 {
        INHERITED_ACE
    } else {
        0
    };
    let subst = Substitute { owner, group };
    let mut out = Vec::new();
    for ace in &acl.aces {
        if is_inheritable(ace, is_dir) {
            inherit_one(ace, is_dir, mark, &subst, &mut out);
        }
    }
    let mut seen = HashSet::new();
    out.retain(|a| seen.insert(a.clone()));
    out
}

/// The security descriptor of a new file (`is_dir == false`) or directory
/// created in a directory whose stored descriptor is `parent`, by a user
/// whose token gives `owner` (the user's SID) and `group` (the primary group
/// SID), with `creator` the descriptor the client supplied (SMB2 CREATE
/// `SecD` context), if any. The rules, and where they come from, are in the
/// [module documentation](self).
///
/// `None` when there is nothing to compute: the parent's DACL has nothing a
/// child of this kind inherits and the creator supplied no DACL. The caller
/// then keeps the descriptor derived from the file's POSIX permissions, as
/// Samba's `inherit_new_acl` does (and applies an owner or group the creator
/// supplied through its ordinary set path).
///
/// Otherwise the descriptor to store: owner and group (the creator's if it
/// gave them), control SE_SELF_RELATIVE | SE_DACL_PRESENT, plus
/// SE_DACL_AUTO_INHERITED when the parent has it, plus SE_DACL_PROTECTED
/// when the creator's DACL is protected; the DACL is revision 2, or 4 when
/// it holds object ACEs. Its size is not checked: an ACL that no longer fits
/// AclSize fails when encoded.
pub fn child_descriptor(
    parent: &SecurityDescriptor,
    creator: Option<&SecurityDescriptor>,
    is_dir: bool,
    owner: &Sid,
    group: &Sid,
) -> Option<SecurityDescriptor> {
    let owner = creator.and_then(|c| c.owner.as_ref()).unwrap_or(owner);
    let group = creator.and_then(|c| c.group.as_ref()).unwrap_or(group);
    let auto_inherited = parent.control & SE_DACL_AUTO_INHERITED;
    let mut control = SE_SELF_RELATIVE | SE_DACL_PRESENT | auto_inherited;

    let creator_dacl = creator.filter(|c| c.control & SE_DACL_PRESENT != 0);
    let dacl = match creator_dacl {
        None => {
            let aces = inherited_aces(parent, is_dir, owner, group);
            if aces.is_empty() {
                return None;
            }
            Some(new_acl(aces))
        }
        Some(c) => {
            let protected = c.control & SE_DACL_PROTECTED != 0;
            if protected {
                control |= SE_DACL_PROTECTED;
            }
            c.dacl.as_ref().map(|given| {
                let subst = Substitute { owner, group };
                let mut aces = explicit_aces(given, protected, is_dir, &subst);
                if !protected {
                    aces.extend(inherited_aces(parent, is_dir, owner, group));
                }
                new_acl(aces)
            })
        }
    };

    let mut sacl = None;
    if let Some(c) = creator.filter(|c| c.control & SE_SACL_PRESENT != 0) {
        control |= SE_SACL_PRESENT | (c.control & SE_SACL_PROTECTED);
        sacl = c.sacl.clone();
    }

    Some(SecurityDescriptor {
        control,
        rm_control: 0,
        owner: Some(owner.clone()),
        group: Some(group.clone()),
        sacl,
        dacl,
    })
}

/// What CREATOR OWNER and CREATOR GROUP stand for in the new object.
struct Substitute<'a> {
    owner: &'a Sid,
    group: &'a Sid,
}

impl Substitute<'_> {
    /// `ace` as an effective ACE of the new object: CREATOR SIDs replaced,
    /// generic rights mapped, inheritance flags replaced by `flags` (other
    /// flag bits kept). Object ACEs only get the flags.
    fn effective(&self, ace: &Ace, flags: u8) -> Ace {
        let mut out = with_flags(ace, flags);
        if let AceBody::MaskSid { mask, sid, .. } = &mut out.body {
            *mask = map_generic_file_rights(*mask);
            if *sid == Sid::creator_owner() {
                *sid = self.owner.clone();
            } else if *sid == Sid::creator_group() {
                *sid = self.group.clone();
            }
        }
        out
    }
}

/// Whether an effective copy of `ace` differs from the ACE itself: it names
/// CREATOR OWNER or CREATOR GROUP, or has generic rights (Samba's
/// `desc_ace_has_generic`). Object ACEs: never.
fn has_generic_info(ace: &Ace) -> bool {
    match &ace.body {
        AceBody::MaskSid { mask, sid, .. } => {
            mask.intersects(AccessMask::GENERIC_MASK)
                || *sid == Sid::creator_owner()
                || *sid == Sid::creator_group()
        }
        AceBody::Raw(_) => false,
    }
}

/// `ace` with its inheritance flags replaced by `flags`.
fn with_flags(ace: &Ace, flags: u8) -> Ace {
    Ace {
        flags: (ace.flags & !INHERITANCE_FLAGS) | flags,
        ..ace.clone()
    }
}

/// Append what a child inherits from the inheritable parent ACE `ace`;
/// `mark` is INHERITED_ACE or 0.
fn inherit_one(ace: &Ace, is_dir: bool, mark: u8, subst: &Substitute<'_>, out: &mut Vec<Ace>) {
    let f = ace.flags;
    let no_propagate = f & NO_PROPAGATE_INHERIT_ACE != 0;
    if !is_dir {
        // Reached only with OBJECT_INHERIT_ACE: effective on the file.
        out.push(subst.effective(ace, mark));
    } else if f & CONTAINER_INHERIT_ACE == 0 {
        // OI without NP: not for the directory itself, kept for its files.
        out.push(with_flags(
            ace,
            OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | mark,
        ));
    } else if no_propagate {
        out.push(subst.effective(ace, mark));
    } else if has_generic_info(ace) {
        out.push(subst.effective(ace, mark));
        out.push(with_flags(ace, (f & OI_CI) | INHERIT_ONLY_ACE | mark));
    } else {
        out.push(with_flags(ace, (f & OI_CI) | mark));
    }
}

/// The creator's own ACEs as they go into the new DACL (see the module
/// documentation).
fn explicit_aces(given: &Acl, protected: bool, is_dir: bool, subst: &Substitute<'_>) -> Vec<Ace> {
    let mut out = Vec::new();
    for ace in &given.aces {
        if ace.flags & INHERITED_ACE != 0 && !protected {
            continue;
        }
        let flags = ace.flags & INHERITANCE_FLAGS & !INHERITED_ACE;
        let inheritable = flags & OI_CI != 0;
        if flags & INHERIT_ONLY_ACE != 0 {
            if inheritable {
                out.push(with_flags(ace, flags));
            }
        } else if !has_generic_info(ace) {
            out.push(with_flags(ace, flags));
        } else if is_dir && inheritable {
            out.push(with_flags(ace, flags | INHERIT_ONLY_ACE));
            out.push(subst.effective(ace, 0));
        } else {
            out.push(subst.effective(ace, 0));
        }
    }
    out
}

/// Whether `t` is one of the object ACE types, whose ACL must be of
/// revision 4 (ACL_REVISION_DS, [MS-DTYP] 2.4.5).
fn is_object_type(t: AceType) -> bool {
    matches!(
        t,
        AceType::ACCESS_ALLOWED_OBJECT
            | AceType::ACCESS_DENIED_OBJECT
            | AceType::SYSTEM_AUDIT_OBJECT
            | AceType::SYSTEM_ALARM_OBJECT
            | AceType::ACCESS_ALLOWED_CALLBACK_OBJECT
            | AceType::ACCESS_DENIED_CALLBACK_OBJECT
            | AceType::SYSTEM_AUDIT_CALLBACK_OBJECT
            | AceType::SYSTEM_ALARM_CALLBACK_OBJECT
    )
}

/// An ACL of revision 2 (what `se_create_child_secdesc` writes), or 4 when
/// it holds object ACEs.
fn new_acl(aces: Vec<Ace>) -> Acl {
    let revision = if aces.iter().any(|a| is_object_type(a.ace_type)) {
        Acl::REVISION_DS
    } else {
        Acl::REVISION
    };
    Acl { revision, aces }
}
