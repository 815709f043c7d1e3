//! The kernel's POSIX ACL xattr format (`system.posix_acl_access`,
//! `system.posix_acl_default`) and what `stat` and `chmod` make of an ACL.
//!
//! Layout (little endian): a u32 version (2), then 8-byte entries of tag
//! (u16), perm (u16) and id (u32). The id only means something for named
//! users and groups; the kernel writes 0xFFFFFFFF for the others.

use core::fmt;

/// Read permission bit of an entry.
pub const ACL_READ: u8 = 4;
/// Write permission bit of an entry.
pub const ACL_WRITE: u8 = 2;
/// Execute (search, for directories) permission bit of an entry.
pub const ACL_EXECUTE: u8 = 1;

const RWX: u8 = ACL_READ | ACL_WRITE | ACL_EXECUTE;
const HEADER_LEN: usize = 4;
const ENTRY_LEN: usize = 8;
const UNDEFINED_ID: u32 = u32::MAX;

const TAG_USER_OBJ: u16 = 0x01;
const TAG_USER: u16 = 0x02;
const TAG_GROUP_OBJ: u16 = 0x04;
const TAG_GROUP: u16 = 0x08;
const TAG_MASK: u16 = 0x10;
const TAG_OTHER: u16 = 0x20;

/// Whom an entry is about. The derived order is the kernel's: by tag, then
/// by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclTag {
    /// The owning user (`user::`).
    UserObj,
    /// A named user (`user:uid:`).
    User(u32),
    /// The owning group (`group::`).
    GroupObj,
    /// A named group (`group:gid:`).
    Group(u32),
    /// The upper bound for named entries and the owning group (`mask::`).
    Mask,
    /// Everyone else (`other::`).
    Other,
}

impl AclTag {
    /// The tag's value in the xattr (ACL_USER_OBJ = 1 ... ACL_OTHER = 0x20).
    pub fn code(self) -> u16 {
        match self {
            AclTag::UserObj => TAG_USER_OBJ,
            AclTag::User(_) => TAG_USER,
            AclTag::GroupObj => TAG_GROUP_OBJ,
            AclTag::Group(_) => TAG_GROUP,
            AclTag::Mask => TAG_MASK,
            AclTag::Other => TAG_OTHER,
        }
    }

    /// The tag of an xattr entry: its tag value and, for named entries, its
    /// id (ignored for the others). `None` for a value that is none of the
    /// six.
    pub fn from_code(code: u16, id: u32) -> Option<AclTag> {
        Some(match code {
            TAG_USER_OBJ => AclTag::UserObj,
            TAG_USER => AclTag::User(id),
            TAG_GROUP_OBJ => AclTag::GroupObj,
            TAG_GROUP => AclTag::Group(id),
            TAG_MASK => AclTag::Mask,
            TAG_OTHER => AclTag::Other,
            _ => return None,
        })
    }

    /// The uid or gid of a named entry.
    pub fn id(self) -> Option<u32> {
        match self {
            AclTag::User(id) | AclTag::Group(id) => Some(id),
            _ => None,
        }
    }

    /// A named user or named group entry.
    pub fn is_named(self) -> bool {
        self.id().is_some()
    }
}

/// One entry: a tag and its rwx bits ([`ACL_READ`] | [`ACL_WRITE`] |
/// [`ACL_EXECUTE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AclEntry {
    /// Whom the entry is about.
    pub tag: AclTag,
    /// rwx bits (4, 2, 1); other bits are not valid.
    pub perm: u8,
}

impl AclEntry {
    /// An entry with `perm` (only the rwx bits are kept).
    pub fn new(tag: AclTag, perm: u8) -> AclEntry {
        AclEntry {
            tag,
            perm: perm & RWX,
        }
    }
}

/// Why an xattr value is not a valid POSIX ACL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclError {
    /// Shorter than the 4-byte header.
    Truncated,
    /// The version is not 2.
    BadVersion(u32),
    /// The bytes after the header are not a whole number of 8-byte entries.
    BadLength(usize),
    /// Only the header: the kernel reads this as "no ACL".
    Empty,
    /// A tag value that is none of the six.
    UnknownTag(u16),
    /// Permission bits other than rwx.
    BadPerm(u16),
    /// A named entry with the id 0xFFFFFFFF, which names nobody.
    UndefinedId(AclTag),
    /// The same tag (and id, for named entries) twice.
    Duplicate(AclTag),
    /// The owning user, owning group or other entry is missing.
    Missing(AclTag),
    /// Named entries but no mask entry.
    MissingMask,
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclError::Truncated => f.write_str("POSIX ACL shorter than its header"),
            AclError::BadVersion(v) => write!(f, "POSIX ACL version {v}, expected 2"),
            AclError::BadLength(n) => {
                write!(
                    f,
                    "POSIX ACL of {n} bytes is not a header plus whole entries"
                )
            }
            AclError::Empty => f.write_str("POSIX ACL without entries"),
            AclError::UnknownTag(t) => write!(f, "POSIX ACL entry with unknown tag {t:#x}"),
            AclError::BadPerm(p) => write!(f, "POSIX ACL entry with permission bits {p:#x}"),
            AclError::UndefinedId(t) => write!(f, "POSIX ACL entry {t:?} without an id"),
            AclError::Duplicate(t) => write!(f, "POSIX ACL entry {t:?} given twice"),
            AclError::Missing(t) => write!(f, "POSIX ACL without a {t:?} entry"),
            AclError::MissingMask => f.write_str("POSIX ACL with named entries but no mask"),
        }
    }
}

impl std::error::Error for AclError {}

/// A POSIX access or default ACL.
///
/// [`PosixAcl::decode`] only returns valid ACLs (the three base entries,
/// no duplicates, a mask when there are named entries); values built by hand
/// may be anything, and every method copes with that without panicking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PosixAcl {
    /// The entries, in any order ([`PosixAcl::encode`] sorts them).
    pub entries: Vec<AclEntry>,
}

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([*s.first()?, *s.get(1)?]))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([
        *s.first()?,
        *s.get(1)?,
        *s.get(2)?,
        *s.get(3)?,
    ]))
}

impl PosixAcl {
    /// The xattr format version.
    pub const VERSION: u32 = 2;

    /// An ACL from entries (kept in the given order).
    pub fn new(entries: Vec<AclEntry>) -> PosixAcl {
        PosixAcl { entries }
    }

    /// Decode an xattr value. Entries may come in any order; the result
    /// keeps the order of `buf` (libacl, and so Samba, sorts them by tag
    /// and id when reading: [`PosixAcl::sorted`]).
    pub fn decode(buf: &[u8]) -> Result<PosixAcl, AclError> {
        let version = le_u32(buf, 0).ok_or(AclError::Truncated)?;
        if version != Self::VERSION {
            return Err(AclError::BadVersion(version));
        }
        let body = buf.get(HEADER_LEN..).unwrap_or_default();
        if body.len() % ENTRY_LEN != 0 {
            return Err(AclError::BadLength(buf.len()));
        }
        if body.is_empty() {
            return Err(AclError::Empty);
        }
        let mut entries = Vec::with_capacity(body.len() / ENTRY_LEN);
        for raw in body.chunks_exact(ENTRY_LEN) {
            let (Some(code), Some(perm), Some(id)) =
                (le_u16(raw, 0), le_u16(raw, 2), le_u32(raw, 4))
            else {
                return Err(AclError::BadLength(buf.len()));
            };
            let tag = AclTag::from_code(code, id).ok_or(AclError::UnknownTag(code))?;
            if perm & !u16::from(RWX) != 0 {
                return Err(AclError::BadPerm(perm));
            }
            if tag.is_named() && id == UNDEFINED_ID {
                return Err(AclError::UndefinedId(tag));
            }
            entries.push(AclEntry {
                tag,
                perm: (perm & u16::from(RWX)) as u8,
            });
        }
        let acl = PosixAcl { entries };
        acl.validate()?;
        Ok(acl)
    }

    /// Check what the kernel checks: each base entry once, no duplicate
    /// named entry, a mask when there are named entries.
    pub fn validate(&self) -> Result<(), AclError> {
        let mut tags: Vec<AclTag> = self.entries.iter().map(|e| e.tag).collect();
        tags.sort_unstable();
        if let Some(w) = tags.windows(2).find(|w| w.first() == w.get(1)) {
            if let Some(t) = w.first() {
                return Err(AclError::Duplicate(*t));
            }
        }
        for base in [AclTag::UserObj, AclTag::GroupObj, AclTag::Other] {
            if !tags.contains(&base) {
                return Err(AclError::Missing(base));
            }
        }
        if self.has_named() && !tags.contains(&AclTag::Mask) {
            return Err(AclError::MissingMask);
        }
        Ok(())
    }

    /// The xattr value: version 2, then the entries sorted as the kernel
    /// wants them (by tag, then id), ids of unnamed entries 0xFFFFFFFF.
    pub fn encode(&self) -> Vec<u8> {
        let mut sorted = self.entries.clone();
        sorted.sort_by_key(|e| e.tag);
        let mut out = Vec::with_capacity(HEADER_LEN + ENTRY_LEN * sorted.len());
        out.extend_from_slice(&Self::VERSION.to_le_bytes());
        for e in &sorted {
            out.extend_from_slice(&e.tag.code().to_le_bytes());
            out.extend_from_slice(&u16::from(e.perm & RWX).to_le_bytes());
            out.extend_from_slice(&e.tag.id().unwrap_or(UNDEFINED_ID).to_le_bytes());
        }
        out
    }

    /// The entries sorted by tag, then id.
    pub fn sorted(&self) -> PosixAcl {
        let mut acl = self.clone();
        acl.entries.sort_by_key(|e| e.tag);
        acl
    }

    /// The minimal ACL the permission bits of `mode` stand for: owning
    /// user, owning group and other.
    pub fn from_mode(mode: u32) -> PosixAcl {
        let bits = |shift: u32| ((mode >> shift) & 7) as u8;
        PosixAcl {
            entries: vec![
                AclEntry::new(AclTag::UserObj, bits(6)),
                AclEntry::new(AclTag::GroupObj, bits(3)),
                AclEntry::new(AclTag::Other, bits(0)),
            ],
        }
    }

    /// Only the three base entries: the mode bits say everything (the
    /// kernel then stores no xattr).
    pub fn is_minimal(&self) -> bool {
        !self.has_named() && self.perm(AclTag::Mask).is_none()
    }

    /// There are named user or group entries.
    pub fn has_named(&self) -> bool {
        self.entries.iter().any(|e| e.tag.is_named())
    }

    /// The rwx bits of the first entry with `tag`.
    pub fn perm(&self, tag: AclTag) -> Option<u8> {
        self.entries
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| e.perm & RWX)
    }

    /// Set the rwx bits of every entry with `tag`, adding one if there is
    /// none.
    pub fn set_perm(&mut self, tag: AclTag, perm: u8) {
        let mut found = false;
        for e in self.entries.iter_mut().filter(|e| e.tag == tag) {
            e.perm = perm & RWX;
            found = true;
        }
        if !found {
            self.entries.push(AclEntry::new(tag, perm));
        }
    }

    /// The mask entry's bits, if there is one.
    pub fn mask(&self) -> Option<u8> {
        self.perm(AclTag::Mask)
    }

    /// The mask `setfacl` computes: the union of the owning group's and the
    /// named entries' bits.
    pub fn computed_mask(&self) -> u8 {
        self.entries
            .iter()
            .filter(|e| matches!(e.tag, AclTag::GroupObj | AclTag::User(_) | AclTag::Group(_)))
            .fold(0, |m, e| m | (e.perm & RWX))
    }

    /// Set the mask to [`Self::computed_mask`], adding a mask entry when
    /// there are named entries and none yet.
    pub fn recompute_mask(&mut self) {
        if self.has_named() || self.mask().is_some() {
            let m = self.computed_mask();
            self.set_perm(AclTag::Mask, m);
        }
    }

    /// The permission bits (0o777) `stat` reports for a file with this ACL:
    /// owner from the owning user entry, group from the mask (or the owning
    /// group entry when there is no mask), other from the other entry.
    pub fn mode_bits(&self) -> u32 {
        let p = |tag| u32::from(self.perm(tag).unwrap_or(0));
        let group = match self.mask() {
            Some(m) => u32::from(m),
            None => p(AclTag::GroupObj),
        };
        (p(AclTag::UserObj) << 6) | (group << 3) | p(AclTag::Other)
    }

    /// What `chmod(mode)` does to the ACL: the owning user and other entries
    /// take the owner and other bits, and the group bits go to the mask when
    /// there is one, else to the owning group entry.
    pub fn apply_mode(&mut self, mode: u32) {
        let bits = |shift: u32| ((mode >> shift) & 7) as u8;
        self.set_perm(AclTag::UserObj, bits(6));
        if self.mask().is_some() {
            self.set_perm(AclTag::Mask, bits(3));
        } else {
            self.set_perm(AclTag::GroupObj, bits(3));
        }
        self.set_perm(AclTag::Other, bits(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: AclTag, perm: u8) -> AclEntry {
        AclEntry::new(tag, perm)
    }

    /// `getfattr -n system.posix_acl_access -e hex` of a file after
    /// `setfacl -m u:rsaclt2:r` (uid 1002) on mode 0644.
    const KERNEL_VALUE: &str =
        "0200000001000600ffffffff02000400ea03000004000400ffffffff10000400ffffffff20000400ffffffff";

    fn kernel_value() -> Vec<u8> {
        hex::decode(KERNEL_VALUE).unwrap()
    }

    #[test]
    fn a_value_read_from_the_kernel_decodes_and_encodes_back_to_the_same_bytes() {
        let acl = PosixAcl::decode(&kernel_value()).unwrap();
        assert_eq!(
            acl.entries,
            vec![
                e(AclTag::UserObj, 6),
                e(AclTag::User(1002), 4),
                e(AclTag::GroupObj, 4),
                e(AclTag::Mask, 4),
                e(AclTag::Other, 4),
            ]
        );
        assert_eq!(acl.encode(), kernel_value());
        assert_eq!(acl.mode_bits(), 0o644);
        assert!(!acl.is_minimal());
    }

    #[test]
    fn encode_sorts_by_tag_then_id_and_writes_undefined_ids_for_unnamed_entries() {
        let acl = PosixAcl::new(vec![
            e(AclTag::Other, 0),
            e(AclTag::Group(7), 1),
            e(AclTag::User(9), 2),
            e(AclTag::Mask, 7),
            e(AclTag::User(3), 4),
            e(AclTag::GroupObj, 5),
            e(AclTag::UserObj, 7),
        ]);
        let bytes = acl.encode();
        let back = PosixAcl::decode(&bytes).unwrap();
        let tags: Vec<AclTag> = back.entries.iter().map(|e| e.tag).collect();
        assert_eq!(
            tags,
            [
                AclTag::UserObj,
                AclTag::User(3),
                AclTag::User(9),
                AclTag::GroupObj,
                AclTag::Group(7),
                AclTag::Mask,
                AclTag::Other
            ]
        );
        assert_eq!(&bytes[4..12], &[1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&bytes[12..20], &[2, 0, 4, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn decode_accepts_entries_in_any_order() {
        let mut v = kernel_value();
        // Swap the first (USER_OBJ) and last (OTHER) entries.
        let first: Vec<u8> = v[4..12].to_vec();
        let last: Vec<u8> = v[36..44].to_vec();
        v[4..12].copy_from_slice(&last);
        v[36..44].copy_from_slice(&first);
        let acl = PosixAcl::decode(&v).unwrap();
        assert_eq!(acl.encode(), kernel_value());
    }

    #[test]
    fn malformed_values_are_rejected_with_the_reason() {
        let good = kernel_value();
        assert_eq!(PosixAcl::decode(&[]), Err(AclError::Truncated));
        assert_eq!(PosixAcl::decode(&[2, 0, 0]), Err(AclError::Truncated));
        assert_eq!(PosixAcl::decode(&[2, 0, 0, 0]), Err(AclError::Empty));
        let mut v = good.clone();
        v[0] = 1;
        assert_eq!(PosixAcl::decode(&v), Err(AclError::BadVersion(1)));
        assert_eq!(
            PosixAcl::decode(&good[..good.len() - 1]),
            Err(AclError::BadLength(good.len() - 1))
        );
        let mut v = good.clone();
        v[4] = 0x40;
        assert_eq!(PosixAcl::decode(&v), Err(AclError::UnknownTag(0x40)));
        let mut v = good.clone();
        v[6] = 8;
        assert_eq!(PosixAcl::decode(&v), Err(AclError::BadPerm(8)));
        let mut v = good.clone();
        v[16..20].copy_from_slice(&[0xff; 4]);
        assert_eq!(
            PosixAcl::decode(&v),
            Err(AclError::UndefinedId(AclTag::User(u32::MAX)))
        );
        // USER_OBJ twice (the named user entry turned into a second one).
        let mut v = good.clone();
        v[12] = 1;
        assert_eq!(
            PosixAcl::decode(&v),
            Err(AclError::Duplicate(AclTag::UserObj))
        );
        // The same named user twice.
        let mut v = good.clone();
        v.extend_from_slice(&[2, 0, 4, 0, 0xea, 3, 0, 0]);
        assert_eq!(
            PosixAcl::decode(&v),
            Err(AclError::Duplicate(AclTag::User(1002)))
        );
        // No OTHER entry.
        assert_eq!(
            PosixAcl::decode(&good[..36]),
            Err(AclError::Missing(AclTag::Other))
        );
        // Named entry without a mask: drop the mask entry (bytes 28..36).
        let mut v = good[..28].to_vec();
        v.extend_from_slice(&good[36..]);
        assert_eq!(PosixAcl::decode(&v), Err(AclError::MissingMask));
        // A mask without named entries is valid.
        let v = PosixAcl::new(vec![
            e(AclTag::UserObj, 6),
            e(AclTag::GroupObj, 4),
            e(AclTag::Mask, 0),
            e(AclTag::Other, 0),
        ])
        .encode();
        assert!(PosixAcl::decode(&v).is_ok());
    }

    #[test]
    fn decode_never_panics_on_mutated_or_truncated_values() {
        let good = kernel_value();
        for i in 0..good.len() {
            for b in [0u8, 1, 2, 4, 7, 8, 0x10, 0x20, 0x7f, 0x80, 0xff] {
                let mut m = good.clone();
                m[i] = b;
                if let Ok(acl) = PosixAcl::decode(&m) {
                    assert_eq!(PosixAcl::decode(&acl.encode()), Ok(acl.sorted()));
                }
            }
            let _ = PosixAcl::decode(&good[..i]);
            let _ = PosixAcl::decode(&good[i..]);
        }
    }

    #[test]
    fn kernel_xattr_tags_round_trip() {
        for t in [1u16, 2, 4, 8, 0x10, 0x20] {
            assert_eq!(AclTag::from_code(t, 1002).unwrap().code(), t);
        }
        assert_eq!(AclTag::from_code(2, 1002), Some(AclTag::User(1002)));
        assert_eq!(AclTag::from_code(4, 1002), Some(AclTag::GroupObj));
        assert_eq!(AclTag::from_code(3, 0), None);
    }

    #[test]
    fn from_mode_gives_the_three_base_entries_and_is_minimal() {
        let acl = PosixAcl::from_mode(0o100_640);
        assert_eq!(
            acl.entries,
            vec![
                e(AclTag::UserObj, 6),
                e(AclTag::GroupObj, 4),
                e(AclTag::Other, 0)
            ]
        );
        assert!(acl.is_minimal());
        assert_eq!(acl.mode_bits(), 0o640);
        assert_eq!(acl.validate(), Ok(()));
    }

    #[test]
    fn the_group_mode_bits_are_the_mask_when_there_is_one() {
        // getfacl: user::rw- user:1003:rwx group::r-- group:1005:rwx mask::r-- other::r--
        let acl = PosixAcl::new(vec![
            e(AclTag::UserObj, 6),
            e(AclTag::User(1003), 7),
            e(AclTag::GroupObj, 4),
            e(AclTag::Group(1005), 7),
            e(AclTag::Mask, 4),
            e(AclTag::Other, 4),
        ]);
        assert_eq!(acl.mode_bits(), 0o644);
        assert_eq!(acl.computed_mask(), 7);
        let mut recomputed = acl.clone();
        recomputed.recompute_mask();
        assert_eq!(recomputed.mask(), Some(7));
        assert_eq!(recomputed.mode_bits(), 0o674);
    }

    #[test]
    fn chmod_sets_owner_other_and_the_mask_but_leaves_the_owning_group_entry() {
        let mut acl = PosixAcl::new(vec![
            e(AclTag::UserObj, 6),
            e(AclTag::User(1003), 7),
            e(AclTag::GroupObj, 4),
            e(AclTag::Mask, 7),
            e(AclTag::Other, 4),
        ]);
        acl.apply_mode(0o2750);
        assert_eq!(acl.perm(AclTag::UserObj), Some(7));
        assert_eq!(acl.perm(AclTag::GroupObj), Some(4));
        assert_eq!(acl.mask(), Some(5));
        assert_eq!(acl.perm(AclTag::Other), Some(0));
        assert_eq!(acl.perm(AclTag::User(1003)), Some(7));
        assert_eq!(acl.mode_bits(), 0o750);

        let mut minimal = PosixAcl::from_mode(0o644);
        minimal.apply_mode(0o751);
        assert_eq!(minimal, PosixAcl::from_mode(0o751));
    }

    #[test]
    fn methods_cope_with_hand_built_acls_missing_entries() {
        let acl = PosixAcl::new(vec![e(AclTag::User(5), 7)]);
        assert_eq!(acl.mode_bits(), 0);
        assert_eq!(acl.validate(), Err(AclError::Missing(AclTag::UserObj)));
        let mut empty = PosixAcl::default();
        empty.apply_mode(0o754);
        assert_eq!(empty.sorted(), PosixAcl::from_mode(0o754));
    }
}
