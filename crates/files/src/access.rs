//! Access masks and share modes: generic-right mapping ([MS-SMB2] 2.2.13.1,
//! [MS-DTYP] 2.4.3), and the sharing check of [MS-FSA] 2.1.5.1.2.1 over every
//! open of a file, server-wide.

use ringshare_wire::NtStatus;

use crate::ShareEntry;

pub const FILE_READ_DATA: u32 = 0x0000_0001;
pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
pub const FILE_READ_EA: u32 = 0x0000_0008;
pub const FILE_EXECUTE: u32 = 0x0000_0020;
pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
pub const DELETE: u32 = 0x0001_0000;
pub const SYNCHRONIZE: u32 = 0x0010_0000;
pub const READ_CONTROL: u32 = 0x0002_0000;
pub const WRITE_DAC: u32 = 0x0004_0000;
pub const WRITE_OWNER: u32 = 0x0008_0000;
pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;

pub const FILE_GENERIC_READ: u32 = 0x0012_0089;
pub const FILE_GENERIC_WRITE: u32 = 0x0012_0116;
pub const FILE_GENERIC_EXECUTE: u32 = 0x0012_00A0;
pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

/// Bits a DesiredAccess may carry; anything else is refused with ACCESS_DENIED.
pub(crate) const VALID_DESIRED_ACCESS: u32 =
    FILE_ALL_ACCESS | ACCESS_SYSTEM_SECURITY | MAXIMUM_ALLOWED | 0xF000_0000;

pub(crate) const SHARE_READ: u32 = 1;
pub(crate) const SHARE_WRITE: u32 = 2;
pub(crate) const SHARE_DELETE: u32 = 4;

/// Access bits that take part in share-mode checks ([MS-FSA] 2.1.5.1.2.1).
const SHARING_BITS: u32 =
    FILE_READ_DATA | FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_EXECUTE | DELETE;

/// Turn GENERIC_* bits into the file rights they stand for
/// ([`ringshare_acl::inherit::map_generic_file_rights`]).
pub fn map_generic(mask: u32) -> u32 {
    ringshare_acl::inherit::map_generic_file_rights(ringshare_wire::consts::AccessMask(mask)).0
}

/// The access an open gets for `desired` on a tree that grants `maximal`:
/// MAXIMUM_ALLOWED becomes everything the tree grants; asking for more than
/// the tree grants is ACCESS_DENIED.
pub fn granted_access(desired: u32, maximal: u32) -> Result<u32, NtStatus> {
    if desired & !VALID_DESIRED_ACCESS != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if desired & ACCESS_SYSTEM_SECURITY != 0 {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    let mut want = map_generic(desired & !MAXIMUM_ALLOWED);
    if want & !maximal != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if desired & MAXIMUM_ALLOWED != 0 {
        want |= maximal;
    }
    Ok(want)
}

/// FILE_DELETE_CHILD: a directory right to delete its entries.
pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;

/// The NT rights that what the kernel lets a user do with a file stands for
/// (read, write and execute permission, ownership; `may_delete`: the parent
/// directory lets the user remove it): what a user may ask at CREATE and what
/// MAXIMUM_ALLOWED and the MxAc context give. Everyone may read attributes
/// and synchronize ([MS-FSA] 2.1.5.1.2.1: FILE_READ_ATTRIBUTES comes with
/// the right to traverse to the file); an owner may read and change the ACL
/// and the times.
pub fn rights_of(a: ringshare_vfs::Access, is_dir: bool, may_delete: bool) -> u32 {
    let mut r = FILE_READ_ATTRIBUTES | SYNCHRONIZE;
    if a.read {
        r |= FILE_GENERIC_READ;
    }
    if a.write {
        r |= FILE_GENERIC_WRITE;
        if is_dir && a.execute {
            r |= FILE_DELETE_CHILD;
        }
    }
    if a.execute {
        r |= FILE_GENERIC_EXECUTE;
    }
    if a.owner {
        r |= READ_CONTROL | WRITE_DAC | FILE_WRITE_ATTRIBUTES;
    }
    if a.read && a.write && a.execute {
        // rwx is full control (the ACL's own rights; deleting the file is
        // still the parent directory's to grant).
        r |= FILE_ALL_ACCESS & !DELETE;
    }
    if may_delete {
        r |= DELETE;
    }
    r
}

/// The rights an open with these data permissions has without asking the
/// kernel more: the kernel checked them when it opened the file.
pub fn rights_of_open(read: bool, write: bool) -> u32 {
    let mut r = FILE_READ_ATTRIBUTES | SYNCHRONIZE;
    if read {
        r |= FILE_GENERIC_READ;
    }
    if write {
        r |= FILE_GENERIC_WRITE;
    }
    r
}

/// True when the open may read data.
pub fn can_read(access: u32) -> bool {
    access & (FILE_READ_DATA | FILE_EXECUTE) != 0
}

/// True when the open may write data.
pub fn can_write(access: u32) -> bool {
    access & (FILE_WRITE_DATA | FILE_APPEND_DATA) != 0
}

/// [MS-FSA] 2.1.5.1.2.1: may a new open with `access`/`share_access` join `opens`?
/// Opens that hold none of the data/delete rights take no part.
pub fn check_sharing(opens: &[ShareEntry], access: u32, share_access: u32) -> Result<(), NtStatus> {
    if opens
        .iter()
        .any(|e| sharing_conflict(e, access, share_access))
    {
        return Err(NtStatus::SHARING_VIOLATION);
    }
    Ok(())
}

/// True when a new open with `access` and `share_access` cannot coexist
/// with the existing open `e`.
pub(crate) fn sharing_conflict(e: &ShareEntry, access: u32, share_access: u32) -> bool {
    if access & SHARING_BITS == 0 || e.access & SHARING_BITS == 0 {
        return false;
    }
    (e.access & (FILE_READ_DATA | FILE_EXECUTE) != 0 && share_access & SHARE_READ == 0)
        || (e.access & (FILE_WRITE_DATA | FILE_APPEND_DATA) != 0 && share_access & SHARE_WRITE == 0)
        || (e.access & DELETE != 0 && share_access & SHARE_DELETE == 0)
        || (access & (FILE_READ_DATA | FILE_EXECUTE) != 0 && e.share_access & SHARE_READ == 0)
        || (access & (FILE_WRITE_DATA | FILE_APPEND_DATA) != 0 && e.share_access & SHARE_WRITE == 0)
        || (access & DELETE != 0 && e.share_access & SHARE_DELETE == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENERIC_READ: u32 = 0x8000_0000;
    const GENERIC_ALL: u32 = 0x1000_0000;

    fn entry(access: u32, share_access: u32) -> ShareEntry {
        ShareEntry {
            caching: Default::default(),
            owner: 1,
            access,
            share_access,
            who: None,
            posix: false,
        }
    }

    #[test]
    fn generic_read_maps_to_file_generic_read() {
        assert_eq!(map_generic(GENERIC_READ), FILE_GENERIC_READ);
        assert_eq!(map_generic(GENERIC_ALL | DELETE), FILE_ALL_ACCESS);
    }

    #[test]
    fn maximum_allowed_grants_what_the_tree_grants_and_more_is_denied() {
        assert_eq!(
            granted_access(MAXIMUM_ALLOWED, 0x0012_00A9),
            Ok(0x0012_00A9)
        );
        assert_eq!(
            granted_access(FILE_WRITE_DATA, 0x0012_00A9),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(
            granted_access(0x0040_0000, FILE_ALL_ACCESS),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(
            granted_access(ACCESS_SYSTEM_SECURITY, FILE_ALL_ACCESS),
            Err(NtStatus::PRIVILEGE_NOT_HELD)
        );
    }

    #[test]
    fn a_reader_that_does_not_share_read_blocks_a_second_reader() {
        let opens = [entry(FILE_READ_DATA, SHARE_WRITE)];
        assert_eq!(
            check_sharing(&opens, FILE_READ_DATA, SHARE_READ | SHARE_WRITE),
            Err(NtStatus::SHARING_VIOLATION)
        );
        assert_eq!(
            check_sharing(&opens, FILE_WRITE_DATA, SHARE_READ | SHARE_WRITE),
            Ok(())
        );
    }

    #[test]
    fn attribute_only_opens_take_no_part_in_sharing() {
        let opens = [entry(FILE_READ_ATTRIBUTES, 0)];
        assert_eq!(
            check_sharing(&opens, FILE_READ_DATA | FILE_WRITE_DATA, 0),
            Ok(())
        );
        let opens = [entry(FILE_READ_DATA, 0)];
        assert_eq!(check_sharing(&opens, FILE_READ_ATTRIBUTES, 0), Ok(()));
    }

    #[test]
    fn delete_access_needs_share_delete_from_the_others() {
        let opens = [entry(FILE_READ_DATA, SHARE_READ)];
        assert_eq!(
            check_sharing(&opens, DELETE, SHARE_READ),
            Err(NtStatus::SHARING_VIOLATION)
        );
        let opens = [entry(FILE_READ_DATA, SHARE_READ | SHARE_DELETE)];
        assert_eq!(check_sharing(&opens, DELETE, SHARE_READ), Ok(()));
    }
}
