//! POSIX → NT: the security descriptor Samba's default mapping shows for a
//! file.
//!
//! The steps, for the access ACL and (directories only) the default ACL:
//!
//! 1. Entries are taken in the kernel's order and each is put in front of
//!    the previous ones (the mask is only remembered), so the list runs
//!    other, named groups (highest gid first), owning group, named users,
//!    owning user. A missing owning user, owning group or other entry is
//!    made up from the mode bits and put in front.
//! 2. Walking that list, the mask is applied to every entry but the owning
//!    user and other; an entry left without permissions moves to the front.
//! 3. The owning user moves to the front, other to the back.
//! 4. Each entry becomes an allow ACE (never a deny ACE): access entries
//!    without flags, default entries with OBJECT_INHERIT | CONTAINER_INHERIT
//!    | INHERIT_ONLY; the owning user and group are the file's SIDs in the
//!    access ACL and CREATOR OWNER / CREATOR GROUP in the default ACL.
//! 5. An access ACE and a later default ACE with the same SID and mask
//!    become one ACE with OBJECT_INHERIT | CONTAINER_INHERIT, at the access
//!    ACE's place (at the default ACE's place when the mask is 0).
//! 6. The ACEs are stably sorted: ACEs for the object itself first (those
//!    with inheritance flags before those without), inherit-only ones last.
//!
//! The descriptor's control is SE_SELF_RELATIVE | SE_DACL_PRESENT |
//! SE_DACL_PROTECTED (Samba sets "protected" whenever `map acl inherit` is
//! off, its default).

use ringshare_wire::consts::AccessMask;
use ringshare_wire::security::{
    Ace, Acl, SecurityDescriptor, Sid, CONTAINER_INHERIT_ACE, FILE_GENERIC_EXECUTE,
    FILE_GENERIC_READ, FILE_GENERIC_WRITE, INHERITED_ACE, INHERIT_ONLY_ACE, OBJECT_INHERIT_ACE,
    SE_DACL_PRESENT, SE_DACL_PROTECTED, SE_SELF_RELATIVE,
};

use super::acl::{AclTag, PosixAcl, ACL_EXECUTE, ACL_READ, ACL_WRITE};
use super::PosixView;

const RWX: u8 = ACL_READ | ACL_WRITE | ACL_EXECUTE;
const INHERIT: u8 = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;

/// The access mask Samba shows for rwx bits `perm` (`acl map full control =
/// yes`, `dos filemode = no`, its defaults):
///
/// - rwx: FILE_ALL_ACCESS (0x1F01FF) on a directory, the same without DELETE
///   (0x1E01FF) on a file;
/// - nothing: 0;
/// - otherwise the union of FILE_GENERIC_READ (0x120089) for r,
///   FILE_GENERIC_WRITE (0x120116) for w, plus FILE_DELETE_CHILD (0x40) on a
///   directory, and FILE_GENERIC_EXECUTE (0x1200A0) for x.
pub fn nt_mask_from_perm(perm: u8, is_dir: bool) -> AccessMask {
    let perm = perm & RWX;
    if perm == RWX {
        return if is_dir {
            AccessMask::FILE_ALL_ACCESS
        } else {
            AccessMask(AccessMask::FILE_ALL_ACCESS.0 & !AccessMask::DELETE.0)
        };
    }
    let mut m = AccessMask(0);
    if perm & ACL_READ != 0 {
        m |= FILE_GENERIC_READ;
    }
    if perm & ACL_WRITE != 0 {
        m |= FILE_GENERIC_WRITE;
        if is_dir {
            m |= AccessMask::FILE_DELETE_CHILD;
        }
    }
    if perm & ACL_EXECUTE != 0 {
        m |= FILE_GENERIC_EXECUTE;
    }
    m
}

/// One POSIX entry on its way to becoming an ACE.
struct Entry {
    /// Position in the list before masking, to follow an entry while the
    /// list is rearranged.
    ord: usize,
    tag: AclTag,
    sid: Sid,
    perm: u8,
}

/// Steps 1-3 of the module documentation, for one ACL. `owner` / `group`
/// are the SIDs of the owning user and group entries.
fn canonical_entries(acl: &PosixAcl, mode: u32, owner: &Sid, group: &Sid) -> Vec<Entry> {
    let mut sorted = acl.entries.clone();
    sorted.sort_by_key(|e| e.tag);
    let mut mask = RWX;
    let mut list: Vec<Entry> = Vec::with_capacity(sorted.len() + 3);
    for e in &sorted {
        let sid = match e.tag {
            AclTag::UserObj => owner.clone(),
            AclTag::User(uid) => Sid::unix_user(uid),
            AclTag::GroupObj => group.clone(),
            AclTag::Group(gid) => Sid::unix_group(gid),
            AclTag::Mask => {
                mask = e.perm & RWX;
                continue;
            }
            AclTag::Other => Sid::everyone(),
        };
        list.insert(
            0,
            Entry {
                ord: 0,
                tag: e.tag,
                sid,
                perm: e.perm & RWX,
            },
        );
    }
    // Entries the ACL lacks come from the mode bits.
    let bits = |shift: u32| ((mode >> shift) & 7) as u8;
    for (tag, sid, perm) in [
        (AclTag::UserObj, owner.clone(), bits(6)),
        (AclTag::GroupObj, group.clone(), bits(3)),
        (AclTag::Other, Sid::everyone(), bits(0)),
    ] {
        if !list.iter().any(|e| e.tag == tag) {
            list.insert(
                0,
                Entry {
                    ord: 0,
                    tag,
                    sid,
                    perm,
                },
            );
        }
    }
    for (i, e) in list.iter_mut().enumerate() {
        e.ord = i;
    }
    // Mask, and move emptied entries to the front, in the original order.
    for ord in 0..list.len() {
        let Some(pos) = list.iter().position(|e| e.ord == ord) else {
            continue;
        };
        let Some(e) = list.get_mut(pos) else {
            continue;
        };
        if !matches!(e.tag, AclTag::UserObj | AclTag::Other) {
            e.perm &= mask;
        }
        if e.perm == 0 {
            let e = list.remove(pos);
            list.insert(0, e);
        }
    }
    // Owner first, other last (the last of each, should there be several).
    if let (Some(owner_pos), Some(_)) = (
        list.iter().rposition(|e| e.tag == AclTag::UserObj),
        list.iter().rposition(|e| e.tag == AclTag::Other),
    ) {
        let e = list.remove(owner_pos);
        list.insert(0, e);
        if let Some(other_pos) = list.iter().rposition(|e| e.tag == AclTag::Other) {
            let e = list.remove(other_pos);
            list.push(e);
        }
    }
    list
}

/// Step 5: fold a default ACE into an equal access ACE. Mirrors Samba's
/// loop exactly, including that after removing ACE `i` the ACE moved into
/// its place is not looked at.
fn merge_default_aces(aces: &mut Vec<Ace>) {
    let mut i = 0;
    while i < aces.len() {
        let mut j = i + 1;
        while j < aces.len() {
            let (Some(a), Some(b)) = (aces.get(i), aces.get(j)) else {
                break;
            };
            let a_inh = a.flags & INHERITED_ACE;
            let b_inh = b.flags & INHERITED_ACE;
            let same = a.ace_type == b.ace_type
                && a.encoded_len() == b.encoded_len()
                && a.mask() == b.mask()
                && a.sid() == b.sid()
                && a_inh == b_inh
                && a.flags & !INHERITED_ACE == 0
                && b.flags & !INHERITED_ACE == INHERIT | INHERIT_ONLY_ACE;
            if same {
                let zero = a.mask().map(|m| m.0) == Some(0);
                if zero {
                    if let Some(b) = aces.get_mut(j) {
                        b.flags = INHERIT | a_inh;
                    }
                    aces.remove(i);
                } else {
                    if let Some(a) = aces.get_mut(i) {
                        a.flags = INHERIT | a_inh;
                    }
                    aces.remove(j);
                }
                break;
            }
            j += 1;
        }
        i += 1;
    }
}

/// Step 6: Samba's canonical order (a stable sort): ACEs that are not
/// inherited first; within each part deny before allow, then ACEs for the
/// object itself before inherit-only ones, then ACEs with inheritance flags
/// before those without.
fn sort_canonical(aces: &mut [Ace]) {
    aces.sort_by_key(|a| {
        (
            a.flags & INHERITED_ACE != 0,
            a.ace_type.0 != ringshare_wire::security::AceType::ACCESS_DENIED.0,
            a.flags & INHERIT_ONLY_ACE != 0,
            a.flags & INHERIT == 0,
        )
    });
}

/// The security descriptor Samba 4.17 returns through SMB for a file with
/// the given owner, group, mode and POSIX ACLs (owner, group and DACL; no
/// SACL). See the module documentation for the rules.
pub fn sd_from_posix(input: &PosixView) -> SecurityDescriptor {
    let owner = Sid::unix_user(input.uid);
    let group = Sid::unix_group(input.gid);
    let access = input.effective_access_acl();
    let mut aces: Vec<Ace> = canonical_entries(&access, input.mode, &owner, &group)
        .into_iter()
        .map(|e| Ace::allow(e.sid, nt_mask_from_perm(e.perm, input.is_dir), 0))
        .collect();
    if input.is_dir {
        if let Some(default) = input.default_acl.as_ref().filter(|a| !a.entries.is_empty()) {
            let entries = canonical_entries(
                default,
                input.mode,
                &Sid::creator_owner(),
                &Sid::creator_group(),
            );
            aces.extend(entries.into_iter().map(|e| {
                Ace::allow(
                    e.sid,
                    nt_mask_from_perm(e.perm, true),
                    INHERIT | INHERIT_ONLY_ACE,
                )
            }));
        }
    }
    merge_default_aces(&mut aces);
    sort_canonical(&mut aces);
    SecurityDescriptor {
        control: SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_PROTECTED,
        rm_control: 0,
        owner: Some(owner),
        group: Some(group),
        sacl: None,
        dacl: Some(Acl::new(aces)),
    }
}
