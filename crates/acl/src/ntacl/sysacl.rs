//! The POSIX side of a version-4 `security.NTACL` blob: what Samba hashes
//! into `sys_acl_hash`, built from a [`PosixView`].
//!
//! Samba 4.17's default VFS (`posix_sys_acl_blob_get_fd` in
//! source3/smbd/posix_acls.c) builds a `struct smb_acl_wrapper`
//! (librpc/idl/smb_acl.idl) from
//!
//! - the file's access ACL as libacl returns it (`acl_get_fd`): libacl's
//!   `__acl_from_xattr` sorts the xattr's entries by tag, then uid/gid
//!   (`__acl_reorder_obj_p`), so the order the xattr holds them in does not
//!   matter, and they are hashed in [`AclTag`]'s order, the kernel's
//!   ([`PosixAcl::sorted`]); without an access ACL xattr libacl gives the
//!   three entries of the mode bits ([`PosixView::effective_access_acl`]);
//! - when the handle is a directory ([`PosixView::is_dir`]), its default
//!   ACL: always there, with no entries when the directory has none (libacl
//!   returns an empty ACL); on anything else a NULL pointer;
//! - `st_uid`, `st_gid` and the whole `st_mode` from fstat, file type bits
//!   included ([`PosixView::st_mode`]),
//!
//! pushes it as NDR, and takes SHA-256 of the result. The description
//! stored next to the hash is `"posix_acl"`.
//!
//! The NDR layout, written out here from pidl's rules for that IDL (NDR32,
//! little-endian, zero padding):
//!
//! ```text
//! wrapper:  u32 access ptr (0x00020000)  u32 default ptr (0x00020004 on
//!           directories, else 0)  u64 uid (8-aligned)  u64 gid  u32 mode
//! smb_acl_t (access, then default if present):
//!           u32 count (conformance)  pad to 8  i32 count  i32 next = 0
//!           entries, each 8-aligned: u16 tag  u16 tag again (union switch)
//!             [USER/GROUP only: pad to 8, u64 id]  u32 perm (rwx = 4|2|1)
//! ```
//!
//! Tags use Samba's `smb_acl_tag_t` numbering (USER 1, USER_OBJ 2, GROUP 3,
//! GROUP_OBJ 4, OTHER 5, MASK 6), not the kernel's.
//!
//! Checked against every v4 blob captured from Debian's Samba 4.17.12 (see
//! crates/acl/tests/ntacl_samba.rs): the SHA-256 of this layout equals the
//! stored `sys_acl_hash`, also with the entries given in another order.

use sha2::{Digest, Sha256};

use super::HASH_SIZE;
use crate::posix::{AclEntry, AclTag, PosixAcl, PosixView};

/// NDR referent ids of the first and second non-NULL unique pointers pushed.
const PTR_FIRST: u32 = 0x0002_0000;
const PTR_SECOND: u32 = 0x0002_0004;

/// Samba's `smb_acl_tag_t` value of a tag.
fn samba_tag(tag: AclTag) -> u16 {
    match tag {
        AclTag::User(_) => 1,
        AclTag::UserObj => 2,
        AclTag::Group(_) => 3,
        AclTag::GroupObj => 4,
        AclTag::Other => 5,
        AclTag::Mask => 6,
    }
}

/// A little NDR32 writer: aligned little-endian scalars, zero padding.
struct Ndr {
    out: Vec<u8>,
}

impl Ndr {
    fn align(&mut self, n: usize) {
        while !self.out.len().is_multiple_of(n) {
            self.out.push(0);
        }
    }

    fn u16(&mut self, v: u16) {
        self.align(2);
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.align(4);
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// `hyper` (uid_t, gid_t): 8-aligned.
    fn hyper(&mut self, v: u64) {
        self.align(8);
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// An `smb_acl_t` of `entries`, in the order given.
    fn acl(&mut self, entries: &[AclEntry]) {
        // A count beyond i32 cannot come from a real file (the kernel limits
        // an ACL to a few thousand entries); saturate rather than wrap.
        let count = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        self.u32(count);
        self.align(8);
        self.u32(count);
        self.u32(0);
        for e in entries {
            self.align(8);
            let tag = samba_tag(e.tag);
            self.u16(tag);
            self.u16(tag);
            if let Some(id) = e.tag.id() {
                self.hyper(u64::from(id));
            }
            self.u32(u32::from(e.perm & 7));
        }
    }
}

/// The NDR `smb_acl_wrapper` blob Samba hashes for `sys_acl_hash`: `posix`'s
/// uid, gid and [`PosixView::st_mode`], its access ACL (or the mode's three
/// entries) and, for a directory, its default ACL (empty when there is
/// none), entries sorted by tag then id as libacl returns them.
pub fn sys_acl_blob(posix: &PosixView) -> Vec<u8> {
    let access = posix.effective_access_acl().sorted();
    let default = posix.is_dir.then(|| {
        posix
            .default_acl
            .as_ref()
            .map(PosixAcl::sorted)
            .unwrap_or_default()
    });
    let entries = access.entries.len() + default.as_ref().map_or(0, |d| d.entries.len());
    let mut w = Ndr {
        out: Vec::with_capacity(48 + 24 * entries),
    };
    w.u32(PTR_FIRST);
    w.u32(if default.is_some() { PTR_SECOND } else { 0 });
    w.hyper(u64::from(posix.uid));
    w.hyper(u64::from(posix.gid));
    w.u32(posix.st_mode());
    w.acl(&access.entries);
    if let Some(default) = default {
        w.acl(&default.entries);
    }
    w.out
}

/// SHA-256 of `data` in a 64-byte hash field (the rest zero), as Samba
/// stores and compares its hashes.
pub(super) fn sha256_field(data: &[u8]) -> [u8; HASH_SIZE] {
    let mut field = [0u8; HASH_SIZE];
    field[..32].copy_from_slice(&Sha256::digest(data));
    field
}

/// The `sys_acl_hash` field Samba 4.17 stores for a file in the state
/// `posix` (and compares with on read): SHA-256 of [`sys_acl_blob`],
/// zero-padded to 64 bytes.
pub fn sys_acl_hash(posix: &PosixView) -> [u8; HASH_SIZE] {
    sha256_field(&sys_acl_blob(posix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: AclTag, perm: u8) -> AclEntry {
        AclEntry::new(tag, perm)
    }

    #[test]
    fn a_file_without_acl_xattr_hashes_the_three_entries_libacl_derives_from_its_mode() {
        let facts = PosixView::new(1000, 100, 0o100_640, false);
        let blob = sys_acl_blob(&facts);
        let mut want = Vec::new();
        want.extend_from_slice(&PTR_FIRST.to_le_bytes());
        want.extend_from_slice(&0u32.to_le_bytes());
        want.extend_from_slice(&1000u64.to_le_bytes());
        want.extend_from_slice(&100u64.to_le_bytes());
        want.extend_from_slice(&0o100_640u32.to_le_bytes());
        want.extend_from_slice(&3u32.to_le_bytes()); // conformance
        want.extend_from_slice(&3u32.to_le_bytes()); // count (already 8-aligned at 32)
        want.extend_from_slice(&0u32.to_le_bytes()); // next
        for (tag, perm) in [(2u16, 6u32), (4, 4), (5, 0)] {
            want.extend_from_slice(&tag.to_le_bytes());
            want.extend_from_slice(&tag.to_le_bytes());
            want.extend_from_slice(&perm.to_le_bytes());
        }
        assert_eq!(blob, want);
        // An access ACL without entries is no ACL, as for the kernel.
        let empty = PosixView {
            access_acl: Some(PosixAcl::default()),
            ..facts.clone()
        };
        assert_eq!(sys_acl_blob(&empty), want);
    }

    #[test]
    fn named_entries_carry_an_eight_aligned_64_bit_id() {
        let facts = PosixView {
            uid: 1,
            gid: 2,
            mode: 0o100_770,
            is_dir: false,
            access_acl: Some(PosixAcl::new(vec![
                e(AclTag::UserObj, 7),
                e(AclTag::User(0x1234), 5),
                e(AclTag::GroupObj, 7),
                e(AclTag::Mask, 7),
                e(AclTag::Other, 0),
            ])),
            default_acl: Some(PosixAcl::new(vec![e(AclTag::UserObj, 7)])),
        };
        let blob = sys_acl_blob(&facts);
        // Entries start at 40: user:: (8 bytes), then user:0x1234 at 48 with
        // the id at 56 and perm at 64, next entry 8-aligned at 72.
        assert_eq!(&blob[48..52], &[1, 0, 1, 0]);
        assert_eq!(&blob[52..56], &[0; 4]);
        assert_eq!(&blob[56..64], &0x1234u64.to_le_bytes());
        assert_eq!(&blob[64..68], &5u32.to_le_bytes());
        assert_eq!(&blob[72..76], &[4, 0, 4, 0]);
        // A file: no default ACL pointer, no default ACL even if given.
        assert_eq!(&blob[4..8], &[0; 4]);
        assert_eq!(blob.len(), 72 + 8 * 3);
    }

    #[test]
    fn a_directory_always_has_a_default_acl_pointer_even_when_empty() {
        let facts = PosixView::new(0, 0, 0o040_755, true);
        let blob = sys_acl_blob(&facts);
        assert_eq!(&blob[4..8], &PTR_SECOND.to_le_bytes());
        // The access ACL (3 minimal entries) ends at 64; the empty default
        // ACL: conformance, padding to 8, count, next.
        assert_eq!(&blob[64..], &[0; 16]);
        // A default ACL without entries is the same as none.
        let empty = PosixView {
            default_acl: Some(PosixAcl::default()),
            ..facts
        };
        assert_eq!(sys_acl_blob(&empty), blob);
    }

    #[test]
    fn entries_are_hashed_in_libacl_order_whatever_order_the_xattr_holds_them_in() {
        // user:1005 before user:1004 and other:: first: the kernel keeps
        // such an order, libacl sorts it when Samba reads the ACL.
        let mut xattr = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (0x20u16, 5u16, u32::MAX),
            (0x01, 7, u32::MAX),
            (0x02, 5, 1005),
            (0x02, 7, 1004),
            (0x04, 5, u32::MAX),
            (0x10, 7, u32::MAX),
        ] {
            xattr.extend_from_slice(&tag.to_le_bytes());
            xattr.extend_from_slice(&perm.to_le_bytes());
            xattr.extend_from_slice(&id.to_le_bytes());
        }
        let unsorted = PosixAcl::decode(&xattr).unwrap();
        assert_eq!(unsorted.entries[0].tag, AclTag::Other);
        let view = |acl: PosixAcl| PosixView {
            access_acl: Some(acl.clone()),
            default_acl: Some(acl),
            ..PosixView::new(1004, 1006, 0o040_775, true)
        };
        let sorted = view(unsorted.sorted());
        assert_eq!(
            sys_acl_blob(&view(unsorted)),
            sys_acl_blob(&sorted),
            "same bytes as the sorted ACL"
        );
        let blob = sys_acl_blob(&sorted);
        // user:: first (Samba tag 2), then user:1004 (tag 1, id at 56).
        assert_eq!(&blob[40..44], &[2, 0, 2, 0]);
        assert_eq!(&blob[48..52], &[1, 0, 1, 0]);
        assert_eq!(&blob[56..64], &1004u64.to_le_bytes());
    }

    #[test]
    fn a_mode_without_file_type_bits_is_hashed_with_those_is_dir_implies() {
        for (perm_only, full, is_dir) in [(0o640, 0o100_640, false), (0o2775, 0o042_775, true)] {
            let given = PosixView::new(7, 8, perm_only, is_dir);
            assert_eq!(given.st_mode(), full);
            assert_eq!(
                sys_acl_blob(&given),
                sys_acl_blob(&PosixView::new(7, 8, full, is_dir))
            );
        }
        // Type bits that are there are kept, whatever they say.
        assert_eq!(PosixView::new(0, 0, 0o020_666, false).st_mode(), 0o020_666);
    }
}
