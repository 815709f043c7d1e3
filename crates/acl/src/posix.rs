//! POSIX ACLs and their mapping to and from NT security descriptors, with
//! the meaning Samba's default gives them (`vfs_posixacl` plus
//! `source3/smbd/posix_acls.c`, as in Samba 4.17).
//!
//! - [`PosixAcl`]: the value of the kernel's `system.posix_acl_access` and
//!   `system.posix_acl_default` extended attributes, and what `chmod` and
//!   `stat` see of it.
//! - [`sd_from_posix`]: the security descriptor a client reads for a file
//!   (owner, group, mode, access ACL and, for a directory, default ACL).
//! - [`posix_from_sd`] / [`posix_from_sd_with`]: what setting a security
//!   descriptor does to the file: chown, the new access ACL (hence mode) and
//!   the new default ACL.
//!
//! # SIDs
//!
//! A uid is always S-1-22-1-uid and a gid S-1-22-2-gid; POSIX "other" is
//! Everyone (S-1-1-0); in a default ACL the owning user and group entries are
//! CREATOR OWNER (S-1-3-0) and CREATOR GROUP (S-1-3-1). (Samba maps accounts
//! of its own passdb to its domain SIDs instead; ringshare has no such
//! accounts.)
//!
//! # What Samba does, in short
//!
//! Reading ([`sd_from_posix`]): one allow ACE per POSIX entry, never a deny
//! ACE; the mask applied to named entries and the owning group; entries the
//! mask empties kept with an access mask of 0 (moved to the front, after the
//! owner); "other" always present as Everyone, last; the DACL always
//! protected (control 0x9004). rwx is "full control" (0x1F01FF on
//! directories, without DELETE, 0x1E01FF, on files), otherwise r, w and x
//! are FILE_GENERIC_READ / WRITE / EXECUTE (w also FILE_DELETE_CHILD on
//! directories). For a directory the default ACL follows as inherit-only
//! (OI|CI|IO) ACEs, its owning user and group as CREATOR OWNER / CREATOR
//! GROUP, and an access entry equal to a default entry is shown once with
//! OI|CI. Set-id and sticky bits do not show.
//!
//! Writing ([`posix_from_sd_with`]):
//!
//! - the owner SID must be S-1-22-1-uid and the group SID S-1-22-2-gid,
//!   else STATUS_INVALID_OWNER and nothing changes (Samba also maps SIDs of
//!   its own passdb accounts); chown/chgrp come first and the ACL refers to
//!   the new owner and group;
//! - in the DACL, Everyone is "other", S-1-22 SIDs are users and groups
//!   (the owner's and owning group's being `user::` / `group::`), CREATOR
//!   OWNER / GROUP are the default ACL's `user::` / `group::`, BUILTIN and
//!   NT AUTHORITY SIDs are skipped, and any other SID makes Samba ignore the
//!   whole DACL while reporting success;
//! - deny ACEs are folded into allow entries (a deny after an allow: the
//!   DACL is ignored, success); ACE types other than allow and deny: ignored,
//!   success;
//! - a NULL DACL gives owner, group and everyone rwx; an empty DACL changes
//!   nothing;
//! - the owner always keeps read (rwx on directories); named copies of the
//!   owner and the owning group are always added, so the result always has a
//!   mask, and the mask is always rwx (the group mode bits become rwx);
//! - on directories, ACEs with both OBJECT_INHERIT and CONTAINER_INHERIT make
//!   the default ACL; without any, the default ACL is removed; a DACL of only
//!   inherit-only ACEs is ignored.
//!
//! See [`KeepReason`] for the cases where the ACLs stay as they are.

mod acl;
mod from_nt;
mod to_nt;

#[cfg(test)]
mod tests;

pub use acl::{AclEntry, AclError, AclTag, PosixAcl, ACL_EXECUTE, ACL_READ, ACL_WRITE};
pub use from_nt::{
    perm_from_nt_mask, posix_from_sd, posix_from_sd_with, security_info_of, AclChange,
    GroupMembership, KeepReason, MapError, NewAcls, NoGroups, PosixChange,
};
pub use to_nt::{nt_mask_from_perm, sd_from_posix};

/// `S_IFMT`, `S_IFDIR` and `S_IFREG` from `<sys/stat.h>`.
const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;

/// What the filesystem says about a file: its owner, group, mode and POSIX
/// ACLs, as `fstat` and the `system.posix_acl_*` xattrs give them.
///
/// The input of the NT <-> POSIX mapping ([`sd_from_posix`],
/// [`posix_from_sd_with`]) and of Samba's `sys_acl_hash`
/// ([`crate::ntacl::sys_acl_hash`], [`crate::ntacl::encode_v4`],
/// [`crate::ntacl::check`]). The mapping looks only at the permission bits
/// of `mode` and ignores the order of ACL entries; the hash covers the whole
/// `st_mode` and takes the entries in libacl's order (see
/// [`crate::ntacl::sys_acl_blob`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixView {
    /// Owning user (`st_uid`).
    pub uid: u32,
    /// Owning group (`st_gid`).
    pub gid: u32,
    /// The full `st_mode`, file type bits included (0o100644, 0o040755),
    /// as `stat` reports it: Samba's `sys_acl_hash` covers the whole value.
    /// The mapping uses only the permission bits (0o7777); with an access
    /// ACL the group bits are the mask, as the kernel reports them. A value
    /// without type bits is taken as a regular file or, with `is_dir`, a
    /// directory ([`PosixView::st_mode`]).
    pub mode: u32,
    /// The file is a directory (Samba: the handle is a directory). Decides
    /// whether the default ACL counts, for the mapping and for the hash.
    pub is_dir: bool,
    /// `system.posix_acl_access`, entries in the order the xattr holds them
    /// ([`PosixAcl::decode`] keeps it); `None` when the file has none (its
    /// permissions are then just the mode bits). An ACL without entries
    /// counts as none, as the kernel stores none.
    pub access_acl: Option<PosixAcl>,
    /// `system.posix_acl_default`, for directories; `None` (or an ACL
    /// without entries) when there is none. Ignored for anything that is
    /// not a directory.
    pub default_acl: Option<PosixAcl>,
}

impl PosixView {
    /// A file or directory with only owner, group and mode (`st_mode`,
    /// see [`PosixView::mode`]).
    pub fn new(uid: u32, gid: u32, mode: u32, is_dir: bool) -> PosixView {
        PosixView {
            uid,
            gid,
            mode,
            is_dir,
            access_acl: None,
            default_acl: None,
        }
    }

    /// The access ACL in effect: the stored one, or (when there is none, or
    /// it has no entries) the three entries the mode bits stand for, as
    /// libacl returns them for a file without the xattr.
    pub fn effective_access_acl(&self) -> PosixAcl {
        match &self.access_acl {
            Some(acl) if !acl.entries.is_empty() => acl.clone(),
            _ => PosixAcl::from_mode(self.mode),
        }
    }

    /// `mode` with file type bits: `mode` itself when it has them, else
    /// `mode` plus `S_IFDIR` (`is_dir`) or `S_IFREG`.
    pub fn st_mode(&self) -> u32 {
        if self.mode & S_IFMT != 0 {
            self.mode
        } else if self.is_dir {
            self.mode | S_IFDIR
        } else {
            self.mode | S_IFREG
        }
    }
}
