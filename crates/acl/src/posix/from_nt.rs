//! NT → POSIX: what Samba's default mapping does when a client sets a
//! security descriptor.
//!
//! In order:
//!
//! 1. Parts the descriptor lacks are dropped from the request (no owner SID:
//!    no chown; no group SID: no chgrp). Nothing left to set: success.
//! 2. The owner SID must map to a uid and the group SID to a gid, else
//!    STATUS_INVALID_OWNER before anything changes. Owner and group change
//!    first; the rest is relative to the new owner and group.
//! 3. A NULL DACL becomes owner, group and Everyone with full control (no
//!    inheritance). A DACL not requested or not present leaves the ACLs
//!    alone. Generic rights are mapped to file rights.
//! 4. ACEs other than allow and deny, SIDs that map to neither a uid nor a
//!    gid (S-1-22-…, Everyone and the CREATOR SIDs do; SIDs in BUILTIN
//!    (S-1-5-32-x) and NT AUTHORITY (S-1-5-x) are skipped), and a deny ACE
//!    after an allow ACE (in the ACEs for the object, or in those inherited
//!    by both files and directories) make Samba leave the ACLs alone and
//!    still report success.
//! 5. ACEs become entries of the access ACL (ACEs that are not inherit-only)
//!    and, on directories, of the default ACL (ACEs inheritable by both
//!    files and directories). CREATOR OWNER / CREATOR GROUP are always
//!    inherit-only and become the default ACL's owning user / group; the
//!    file owner's SID is the access ACL's owning user but a named user in
//!    the default ACL. rwx come from FILE_READ_DATA|FILE_READ_EA,
//!    FILE_WRITE_DATA|FILE_APPEND_DATA|FILE_WRITE_EA and FILE_EXECUTE.
//! 6. ACEs for the same id and of the same kind are merged; a deny for an
//!    id removes its bits from the allow for that id.
//! 7. Remaining deny ACEs are folded into allow entries (see
//!    [`GroupMembership`] for where group membership matters).
//! 8. Missing base entries are added, the owner gets at least r (rwx on a
//!    directory), named copies of the owning user and group are added, and
//!    the mask is rwx.

use core::fmt;

use ringshare_wire::consts::{AccessMask, SecurityInformation};
use ringshare_wire::security::{
    Ace, AceType, Acl, SecurityDescriptor, Sid, CONTAINER_INHERIT_ACE, FILE_GENERIC_EXECUTE,
    FILE_GENERIC_READ, FILE_GENERIC_WRITE, INHERIT_ONLY_ACE, OBJECT_INHERIT_ACE, SE_DACL_PRESENT,
    SE_SACL_PRESENT,
};
use ringshare_wire::NtStatus;

use super::acl::{AclEntry, AclTag, PosixAcl, ACL_EXECUTE, ACL_READ, ACL_WRITE};
use super::PosixView;

const RWX: u8 = ACL_READ | ACL_WRITE | ACL_EXECUTE;
const INHERIT: u8 = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;

/// Answers whether a user belongs to a group, for the few places where
/// Samba's mapping asks (its `uid_entry_in_group`):
///
/// - a deny ACE for a user, short of "deny everything", becomes an allow
///   entry with the bits of the groups (and Everyone) allowed further down
///   that the user is a member of, minus the denied bits;
/// - a deny ACE for a group removes the denied bits from the allow entries
///   of users further down that are members of it;
/// - when the DACL has no ACE for the owner, the owner's entry gets the bits
///   of every group entry the owner is a member of (on top of its current
///   owner mode bits).
///
/// Membership means what the system's group database says (primary group
/// or supplementary member). Samba consults the connected user's own token
/// first when the user in question is the connected user; that rarely
/// differs and is not modelled.
pub trait GroupMembership {
    /// True if user `uid` is a member of group `gid`.
    fn user_in_group(&self, uid: u32, gid: u32) -> bool;
}

/// Knows no group memberships: every membership question is answered "no".
#[derive(Debug, Clone, Copy, Default)]
pub struct NoGroups;

impl GroupMembership for NoGroups {
    fn user_in_group(&self, _uid: u32, _gid: u32) -> bool {
        false
    }
}

impl<F: Fn(u32, u32) -> bool> GroupMembership for F {
    fn user_in_group(&self, uid: u32, gid: u32) -> bool {
        self(uid, gid)
    }
}

/// Why Samba would refuse the request (nothing changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapError {
    /// The owner SID maps to no uid (a group SID, Everyone, a foreign
    /// domain SID ...): STATUS_INVALID_OWNER.
    InvalidOwner(Sid),
    /// The group SID maps to no gid: also STATUS_INVALID_OWNER.
    InvalidGroup(Sid),
    /// The resulting ACL would not be valid for the kernel (libacl's
    /// `acl_valid` fails in Samba, EINVAL): STATUS_INVALID_PARAMETER. Not
    /// expected to happen.
    InvalidAcl,
}

impl MapError {
    /// The status Samba answers with.
    pub fn status(&self) -> NtStatus {
        match self {
            MapError::InvalidOwner(_) | MapError::InvalidGroup(_) => NtStatus::INVALID_OWNER,
            MapError::InvalidAcl => NtStatus::INVALID_PARAMETER,
        }
    }
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::InvalidOwner(s) => write!(f, "owner SID {s} maps to no uid"),
            MapError::InvalidGroup(s) => write!(f, "group SID {s} maps to no gid"),
            MapError::InvalidAcl => f.write_str("the resulting POSIX ACL is not valid"),
        }
    }
}

impl std::error::Error for MapError {}

/// Why the ACLs and mode stay as they are. Samba reports success in every
/// case; the last three are requests it logs as errors and ignores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepReason {
    /// DACL_SECURITY_INFORMATION was not part of the request.
    NotRequested,
    /// The DACL was requested but the descriptor has none (SE_DACL_PRESENT
    /// clear).
    NoDacl,
    /// Nothing applies: an empty DACL, or only ACEs that are skipped
    /// (BUILTIN / NT AUTHORITY SIDs, inherit-only ACEs on a file), or on a
    /// directory only inherit-only ACEs (Samba: "Win2k inherit acl
    /// traverse").
    NothingToApply,
    /// An ACE that is neither ACCESS_ALLOWED nor ACCESS_DENIED.
    UnsupportedAceType(AceType),
    /// An ACE whose SID maps to neither a uid nor a gid.
    UnmappableSid(Sid),
    /// A deny ACE after an allow ACE.
    DenyAfterAllow,
}

/// The ACLs a set writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAcls {
    /// The new `system.posix_acl_access` (never minimal: Samba always adds
    /// named entries and an rwx mask).
    pub access: PosixAcl,
    /// For a directory: the new `system.posix_acl_default`, or `None` to
    /// remove it. Always `None` for files.
    pub default: Option<PosixAcl>,
    /// The permission bits (0o777) the file has afterwards
    /// (`access.mode_bits()`). Writing the access ACL leaves the set-id and
    /// sticky bits as they are (for a caller with CAP_FSETID or in the
    /// owning group).
    pub mode: u32,
}

/// What happens to the ACLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclChange {
    /// Leave mode and ACLs alone.
    Keep(KeepReason),
    /// Write these ACLs.
    Set(NewAcls),
}

/// The effect of setting a security descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixChange {
    /// chown to this uid (only when it differs from the current owner).
    /// Done before the ACLs are written.
    pub uid: Option<u32>,
    /// chgrp to this gid (only when it differs from the current group).
    pub gid: Option<u32>,
    /// What to do with the ACLs.
    pub acl: AclChange,
}

/// The parts a descriptor carries: OWNER if it has an owner SID, GROUP if a
/// group SID, DACL if SE_DACL_PRESENT (a NULL DACL included), SACL if
/// SE_SACL_PRESENT.
pub fn security_info_of(sd: &SecurityDescriptor) -> SecurityInformation {
    let mut info = SecurityInformation(0);
    if sd.owner.is_some() {
        info |= SecurityInformation::OWNER;
    }
    if sd.group.is_some() {
        info |= SecurityInformation::GROUP;
    }
    if sd.control & SE_DACL_PRESENT != 0 {
        info |= SecurityInformation::DACL;
    }
    if sd.control & SE_SACL_PRESENT != 0 {
        info |= SecurityInformation::SACL;
    }
    info
}

/// [`posix_from_sd_with`] for the parts `sd` carries
/// ([`security_info_of`]), knowing no group memberships ([`NoGroups`]).
pub fn posix_from_sd(
    sd: &SecurityDescriptor,
    current: &PosixView,
) -> Result<PosixChange, MapError> {
    posix_from_sd_with(sd, security_info_of(sd), current, &NoGroups)
}

/// What Samba does when a client sets the parts `info` selects of `sd` on a
/// file that is `current` now (the caller has already checked WRITE_OWNER /
/// WRITE_DAC access). See the module documentation for the rules. SACLs
/// are ignored, as Samba's POSIX mapping does.
pub fn posix_from_sd_with(
    sd: &SecurityDescriptor,
    info: SecurityInformation,
    current: &PosixView,
    groups: &dyn GroupMembership,
) -> Result<PosixChange, MapError> {
    let want_owner = info.contains(SecurityInformation::OWNER) && sd.owner.is_some();
    let want_group = info.contains(SecurityInformation::GROUP) && sd.group.is_some();
    let want_dacl = info.contains(SecurityInformation::DACL);

    let mut uid = current.uid;
    let mut gid = current.gid;
    if let (true, Some(sid)) = (want_owner, &sd.owner) {
        uid = sid
            .unix_uid()
            .ok_or_else(|| MapError::InvalidOwner(sid.clone()))?;
    }
    if let (true, Some(sid)) = (want_group, &sd.group) {
        gid = sid
            .unix_gid()
            .ok_or_else(|| MapError::InvalidGroup(sid.clone()))?;
    }
    let mut change = PosixChange {
        uid: (uid != current.uid).then_some(uid),
        gid: (gid != current.gid).then_some(gid),
        acl: AclChange::Keep(KeepReason::NotRequested),
    };
    if !want_dacl {
        return Ok(change);
    }
    let file = FileState {
        uid,
        gid,
        mode: current.mode,
        is_dir: current.is_dir,
    };
    let dacl = match &sd.dacl {
        Some(acl) => acl.clone(),
        None if sd.control & SE_DACL_PRESENT != 0 => null_dacl_replacement(uid, gid),
        None => {
            change.acl = AclChange::Keep(KeepReason::NoDacl);
            return Ok(change);
        }
    };
    change.acl = match build_lists(&dacl, &file) {
        Err(reason) => AclChange::Keep(reason),
        Ok((file_list, dir_list)) if file_list.is_empty() && dir_list.is_empty() => {
            AclChange::Keep(KeepReason::NothingToApply)
        }
        Ok((file_list, dir_list)) => AclChange::Set(finish(file_list, dir_list, &file, groups)?),
    };
    Ok(change)
}

/// The file as the mapping sees it after any chown.
struct FileState {
    uid: u32,
    gid: u32,
    mode: u32,
    is_dir: bool,
}

/// Samba's stand-in for a NULL DACL.
fn null_dacl_replacement(uid: u32, gid: u32) -> Acl {
    let all = AccessMask::GENERIC_ALL;
    Acl::new(vec![
        Ace::allow(Sid::unix_user(uid), all, 0),
        Ace::allow(Sid::unix_group(gid), all, 0),
        Ace::allow(Sid::everyone(), all, 0),
    ])
}

/// Generic rights to file rights (`file_generic_mapping`).
fn map_generic(mask: AccessMask) -> AccessMask {
    let mut m = mask.0;
    let map = [
        (AccessMask::GENERIC_READ.0, FILE_GENERIC_READ.0),
        (AccessMask::GENERIC_WRITE.0, FILE_GENERIC_WRITE.0),
        (AccessMask::GENERIC_EXECUTE.0, FILE_GENERIC_EXECUTE.0),
        (AccessMask::GENERIC_ALL.0, AccessMask::FILE_ALL_ACCESS.0),
    ];
    for (generic, specific) in map {
        if m & generic != 0 {
            m = (m & !generic) | specific;
        }
    }
    AccessMask(m)
}

/// The rwx bits Samba derives from an access mask: r from FILE_READ_DATA or
/// FILE_READ_EA, w from FILE_WRITE_DATA, FILE_APPEND_DATA or FILE_WRITE_EA,
/// x from FILE_EXECUTE; GENERIC_ALL gives rwx and the other generic rights
/// count as their bit. Attribute, delete and standard rights give nothing.
pub fn perm_from_nt_mask(mask: AccessMask) -> u8 {
    let m = mask.0;
    if m & AccessMask::GENERIC_ALL.0 != 0 {
        return RWX;
    }
    let any = |bits: &[AccessMask]| bits.iter().any(|b| m & b.0 != 0);
    let mut perm = 0;
    if any(&[
        AccessMask::GENERIC_READ,
        AccessMask::FILE_READ_DATA,
        AccessMask::FILE_READ_EA,
    ]) {
        perm |= ACL_READ;
    }
    if any(&[
        AccessMask::GENERIC_WRITE,
        AccessMask::FILE_WRITE_DATA,
        AccessMask::FILE_APPEND_DATA,
        AccessMask::FILE_WRITE_EA,
    ]) {
        perm |= ACL_WRITE;
    }
    if any(&[AccessMask::GENERIC_EXECUTE, AccessMask::FILE_EXECUTE]) {
        perm |= ACL_EXECUTE;
    }
    perm
}

/// Whose entry: Samba's `owner_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Uid,
    Gid,
    World,
}

/// One ACE on its way to a POSIX entry (Samba's `canon_ace`).
#[derive(Debug, Clone)]
struct Entry {
    /// Identity, to follow an entry while the list is rearranged.
    ord: usize,
    /// UserObj, User, GroupObj, Group or Other.
    tag: AclTag,
    kind: Kind,
    /// uid or gid (u32::MAX for Everyone).
    id: u32,
    sid: Sid,
    perm: u8,
    deny: bool,
}

/// How an ACE's SID maps.
enum Trustee {
    Entry(AclTag, Kind, u32),
    Skip,
}

fn is_creator(sid: &Sid) -> bool {
    *sid == Sid::creator_owner() || *sid == Sid::creator_group()
}

/// SIDs Samba silently skips when they map to no id: those whose domain
/// (the SID without its last sub-authority) is BUILTIN (S-1-5-32) or NT
/// AUTHORITY (S-1-5).
fn non_mappable(sid: &Sid) -> bool {
    if sid.revision != Sid::REVISION || sid.authority_value() != 5 {
        return false;
    }
    let n = sid.sub_authorities.len();
    let domain = sid
        .sub_authorities
        .get(..n.saturating_sub(1))
        .unwrap_or_default();
    domain.is_empty() || domain == [32]
}

fn classify(sid: &Sid, file: &FileState) -> Result<Trustee, KeepReason> {
    if *sid == Sid::everyone() {
        Ok(Trustee::Entry(AclTag::Other, Kind::World, u32::MAX))
    } else if *sid == Sid::creator_owner() {
        Ok(Trustee::Entry(AclTag::UserObj, Kind::Uid, file.uid))
    } else if *sid == Sid::creator_group() {
        Ok(Trustee::Entry(AclTag::GroupObj, Kind::Gid, file.gid))
    } else if let Some(uid) = sid.unix_uid() {
        let tag = if uid == file.uid {
            AclTag::UserObj
        } else {
            AclTag::User(uid)
        };
        Ok(Trustee::Entry(tag, Kind::Uid, uid))
    } else if let Some(gid) = sid.unix_gid() {
        let tag = if gid == file.gid {
            AclTag::GroupObj
        } else {
            AclTag::Group(gid)
        };
        Ok(Trustee::Entry(tag, Kind::Gid, gid))
    } else if non_mappable(sid) {
        Ok(Trustee::Skip)
    } else {
        Err(KeepReason::UnmappableSid(sid.clone()))
    }
}

/// An allow/deny ACE with its (possibly adjusted) flags.
struct InAce {
    deny: bool,
    flags: u8,
    mask: AccessMask,
    sid: Sid,
}

/// Steps 4-5: the access ("file") and default ("dir") entry lists.
fn build_lists(dacl: &Acl, file: &FileState) -> Result<(Vec<Entry>, Vec<Entry>), KeepReason> {
    let mut aces: Vec<InAce> = Vec::with_capacity(dacl.aces.len());
    for ace in &dacl.aces {
        let deny = match ace.ace_type {
            AceType::ACCESS_ALLOWED => false,
            AceType::ACCESS_DENIED => true,
            other => return Err(KeepReason::UnsupportedAceType(other)),
        };
        let (Some(mask), Some(sid)) = (ace.mask(), ace.sid()) else {
            return Err(KeepReason::UnsupportedAceType(ace.ace_type));
        };
        aces.push(InAce {
            deny,
            flags: ace.flags,
            mask: map_generic(mask),
            sid: sid.clone(),
        });
    }
    // NT4 splits an inheritable ACE into "inherit only" and "this object"
    // halves with the inheritance bits on the wrong one; put them back.
    for i in 0..aces.len() {
        for j in i + 1..aces.len() {
            let (Some(a), Some(b)) = (aces.get(i), aces.get(j)) else {
                continue;
            };
            if a.mask != b.mask || a.sid != b.sid {
                continue;
            }
            let (a_flags, b_flags) = (a.flags, b.flags);
            let (new_a, new_b) = if a_flags & INHERIT_ONLY_ACE != 0 {
                (a_flags | (b_flags & INHERIT), b_flags & !INHERIT)
            } else if b_flags & INHERIT_ONLY_ACE != 0 {
                (a_flags & !INHERIT, b_flags | (a_flags & INHERIT))
            } else {
                continue;
            };
            if let Some(a) = aces.get_mut(i) {
                a.flags = new_a;
            }
            if let Some(b) = aces.get_mut(j) {
                b.flags = new_b;
            }
        }
    }

    let mut file_list: Vec<Entry> = Vec::new();
    let mut dir_list: Vec<Entry> = Vec::new();
    let (mut file_allow, mut dir_allow) = (false, false);
    let mut all_inherit_only = file.is_dir;
    for ace in &aces {
        let (tag, kind, id) = match classify(&ace.sid, file)? {
            Trustee::Entry(tag, kind, id) => (tag, kind, id),
            Trustee::Skip => continue,
        };
        let mut flags = ace.flags;
        if is_creator(&ace.sid) {
            // CREATOR OWNER / GROUP only ever say what children get.
            flags |= INHERIT_ONLY_ACE;
        }
        let entry = Entry {
            ord: 0,
            tag,
            kind,
            id,
            sid: ace.sid.clone(),
            perm: perm_from_nt_mask(ace.mask),
            deny: ace.deny,
        };
        let mut for_file = Some(entry.clone());
        if file.is_dir && flags & INHERIT == INHERIT {
            let mut d = entry;
            d.tag = match (kind, tag) {
                (Kind::Uid, _) if ace.sid == Sid::creator_owner() => AclTag::UserObj,
                (Kind::Uid, _) => AclTag::User(id),
                (Kind::Gid, _) if ace.sid == Sid::creator_group() => AclTag::GroupObj,
                (Kind::Gid, _) => AclTag::Group(id),
                (Kind::World, t) => t,
            };
            dir_allow |= !d.deny;
            if d.deny && dir_allow {
                return Err(KeepReason::DenyAfterAllow);
            }
            dir_list.push(d);
            if flags & INHERIT_ONLY_ACE != 0 {
                for_file = None;
            }
        }
        if let (Some(f), false) = (for_file, flags & INHERIT_ONLY_ACE != 0) {
            file_allow |= !f.deny;
            if f.deny && file_allow {
                return Err(KeepReason::DenyAfterAllow);
            }
            file_list.push(f);
            all_inherit_only = false;
        }
    }
    if file.is_dir && all_inherit_only {
        return Ok((Vec::new(), Vec::new()));
    }
    Ok((file_list, dir_list))
}

/// Steps 6-8 and the POSIX ACLs.
fn finish(
    mut file_list: Vec<Entry>,
    mut dir_list: Vec<Entry>,
    file: &FileState,
    groups: &dyn GroupMembership,
) -> Result<NewAcls, MapError> {
    merge_entries(&mut file_list, false);
    merge_entries(&mut dir_list, true);
    fold_denies(&mut file_list, groups);
    fold_denies(&mut dir_list, groups);
    complete(&mut file_list, file, groups);
    if !dir_list.is_empty() {
        complete(&mut dir_list, file, groups);
    }
    let access = to_posix(&file_list)?;
    let default = if file.is_dir && !dir_list.is_empty() {
        Some(to_posix(&dir_list)?)
    } else {
        None
    };
    Ok(NewAcls {
        mode: access.mode_bits(),
        access,
        default,
    })
}

/// Step 6 (Samba's `merge_aces`): first merge entries of the same id, kind
/// and allow/deny (and, in a default ACL, the same tag); then let a deny
/// remove its bits from the allow for the same id that follows it, dropping
/// the allow when nothing is left, else the deny.
fn merge_entries(list: &mut Vec<Entry>, default_acl: bool) {
    let mut i = 0;
    while i < list.len() {
        let mut j = i + 1;
        while j < list.len() {
            let (Some(a), Some(b)) = (list.get(i), list.get(j)) else {
                break;
            };
            let same = a.id == b.id
                && a.kind == b.kind
                && a.deny == b.deny
                && (!default_acl || a.tag == b.tag);
            if same {
                let perm = b.perm;
                if let Some(a) = list.get_mut(i) {
                    a.perm |= perm;
                }
                list.remove(j);
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    let mut i = 0;
    while i < list.len() {
        let mut j = i + 1;
        let mut removed_outer = false;
        while j < list.len() {
            let (Some(a), Some(b)) = (list.get(i), list.get(j)) else {
                break;
            };
            if a.id == b.id && a.kind == b.kind && a.deny && !b.deny {
                let left = b.perm & !a.perm;
                if left == 0 {
                    list.remove(j);
                    continue;
                }
                if let Some(b) = list.get_mut(j) {
                    b.perm = left;
                }
                list.remove(i);
                removed_outer = true;
                break;
            }
            j += 1;
        }
        if !removed_outer {
            i += 1;
        }
    }
}

/// Samba's `uid_entry_in_group`: Everyone contains everybody; entries for
/// the CREATOR SIDs belong to nobody's groups; otherwise ask `groups`.
fn in_group(user: &Entry, group: &Entry, groups: &dyn GroupMembership) -> bool {
    if group.kind == Kind::World {
        return true;
    }
    if is_creator(&user.sid) || is_creator(&group.sid) {
        return false;
    }
    groups.user_in_group(user.id, group.id)
}

fn renumber(list: &mut [Entry]) {
    for (i, e) in list.iter_mut().enumerate() {
        e.ord = i;
    }
}

/// Move the entry at `pos` to the end.
fn demote(list: &mut Vec<Entry>, pos: usize) {
    if pos < list.len() {
        let e = list.remove(pos);
        list.push(e);
    }
}

/// Step 7 (Samba's `process_deny_list`).
fn fold_denies(list: &mut Vec<Entry>, groups: &dyn GroupMembership) {
    // Pass 1: drop empty denies; an Everyone deny masks every allow after
    // it, and when it denies everything it ends the list. (Samba crashes
    // with a use-after-free when such an ACE is not the first one left;
    // this keeps the entries before it.)
    let mut i = 0;
    while i < list.len() {
        let Some(e) = list.get(i) else { break };
        if !e.deny {
            i += 1;
            continue;
        }
        if e.perm == 0 {
            list.remove(i);
            continue;
        }
        if e.kind != Kind::World {
            i += 1;
            continue;
        }
        let denied = e.perm;
        if denied == RWX {
            list.truncate(i);
            break;
        }
        for a in list.iter_mut().skip(i + 1).filter(|a| !a.deny) {
            a.perm &= !denied;
        }
        list.remove(i);
    }

    // Pass 2: a user deny becomes an allow of what the groups (and
    // Everyone) after it give the user, minus the denied bits, at the end.
    renumber(list);
    for ord in 0..list.len() {
        let Some(pos) = list.iter().position(|e| e.ord == ord) else {
            continue;
        };
        let Some(e) = list.get(pos) else { continue };
        if !e.deny || e.kind != Kind::Uid {
            continue;
        }
        let perm = if e.perm == RWX {
            0
        } else {
            let granted = list
                .iter()
                .skip(pos + 1)
                .filter(|a| !a.deny && a.kind != Kind::Uid && in_group(e, a, groups))
                .fold(0, |p, a| p | a.perm);
            granted & !e.perm
        };
        if let Some(e) = list.get_mut(pos) {
            e.deny = false;
            e.perm = perm;
        }
        demote(list, pos);
    }

    // Pass 3: a group deny removes its bits from the member users allowed
    // after it, and becomes an allow of Everyone's bits minus the denied
    // ones (nothing without an Everyone entry), at the end.
    renumber(list);
    for ord in 0..list.len() {
        let Some(pos) = list.iter().position(|e| e.ord == ord) else {
            continue;
        };
        let Some(g) = list.get(pos).cloned() else {
            continue;
        };
        if !g.deny || g.kind != Kind::Gid {
            continue;
        }
        let mut everyone = None;
        for a in list.iter_mut().skip(pos + 1).filter(|a| !a.deny) {
            if a.kind == Kind::World {
                everyone = Some(a.perm);
            }
            if a.kind == Kind::Uid && in_group(a, &g, groups) {
                a.perm &= !g.perm;
            }
        }
        if let Some(e) = list.get_mut(pos) {
            e.deny = false;
            e.perm = everyone.map_or(0, |p| p & !g.perm);
        }
        demote(list, pos);
    }
}

/// Step 8 (Samba's `ensure_canon_entry_valid_on_set`).
fn complete(list: &mut Vec<Entry>, file: &FileState, groups: &dyn GroupMembership) {
    let minimal = if file.is_dir { RWX } else { ACL_READ };
    for e in list.iter_mut() {
        e.perm &= RWX;
        if e.tag == AclTag::UserObj {
            e.perm |= minimal;
        }
    }
    let bits = |shift: u32| ((file.mode >> shift) & 7) as u8;
    let other = list
        .iter()
        .rev()
        .find(|e| e.tag == AclTag::Other)
        .map(|e| e.perm);
    let new_entry = |tag, kind, id, sid, perm| Entry {
        ord: 0,
        tag,
        kind,
        id,
        sid,
        perm,
        deny: false,
    };

    if !list.iter().any(|e| e.tag == AclTag::UserObj) {
        let mut owner = new_entry(
            AclTag::UserObj,
            Kind::Uid,
            file.uid,
            Sid::unix_user(file.uid),
            bits(6),
        );
        let mut perm = owner.perm;
        for e in list.iter() {
            match e.tag {
                AclTag::User(uid) if uid == owner.id => perm |= e.perm,
                AclTag::GroupObj | AclTag::Group(_)
                    if e.sid == owner.sid || in_group(&owner, e, groups) =>
                {
                    perm |= e.perm
                }
                _ => {}
            }
        }
        if perm == 0 {
            if let Some(o) = other {
                perm = o;
            }
        }
        owner.perm = perm | minimal;
        list.insert(0, owner);
    }
    if !list.iter().any(|e| e.tag == AclTag::GroupObj) {
        let perm = other.unwrap_or(0);
        list.insert(
            0,
            new_entry(
                AclTag::GroupObj,
                Kind::Gid,
                file.gid,
                Sid::unix_group(file.gid),
                perm,
            ),
        );
    }
    if other.is_none() {
        list.insert(
            0,
            new_entry(AclTag::Other, Kind::World, u32::MAX, Sid::everyone(), 0),
        );
    }

    // Named copies of the owning user and group, so that a later chown or
    // chgrp does not take their access away.
    let Some(user) = list
        .iter()
        .rev()
        .find(|e| e.tag == AclTag::UserObj)
        .cloned()
    else {
        return;
    };
    let Some(group) = list
        .iter()
        .rev()
        .find(|e| e.tag == AclTag::GroupObj)
        .cloned()
    else {
        return;
    };
    let has_user_copy = list.iter().any(|e| {
        e.tag == AclTag::User(user.id) || (matches!(e.tag, AclTag::Group(_)) && e.sid == user.sid)
    });
    let has_group_copy = list.iter().any(|e| e.tag == AclTag::Group(group.id));
    if !has_user_copy {
        list.insert(
            0,
            new_entry(
                AclTag::User(user.id),
                Kind::Uid,
                user.id,
                user.sid.clone(),
                user.perm,
            ),
        );
    }
    if !has_group_copy {
        list.insert(
            0,
            new_entry(
                AclTag::Group(group.id),
                Kind::Gid,
                group.id,
                group.sid.clone(),
                group.perm,
            ),
        );
    }
}

/// The POSIX ACL of a completed list: its entries plus an rwx mask when
/// there are named entries.
fn to_posix(list: &[Entry]) -> Result<PosixAcl, MapError> {
    let mut acl = PosixAcl::new(list.iter().map(|e| AclEntry::new(e.tag, e.perm)).collect());
    if acl.has_named() {
        acl.entries.push(AclEntry::new(AclTag::Mask, RWX));
    }
    let acl = acl.sorted();
    acl.validate().map_err(|_| MapError::InvalidAcl)?;
    Ok(acl)
}
