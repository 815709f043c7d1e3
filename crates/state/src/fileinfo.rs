//! [MS-FSCC] information built from a backend's [`FileAttr`]: DOS attributes,
//! FILETIMEs, sizes and directory entries.
//!
//! Attributes: the stored DOS attributes when the backend has them (with the
//! DIRECTORY bit forced to match the kind), else DIRECTORY for directories and
//! ARCHIVE for files. Dotfiles are not hidden. Directories report an
//! end-of-file and allocation of 0, as NTFS does.
//!
//! Security descriptors: the one a client stored with the file, else one
//! derived from the POSIX owner, group and mode.

use ringshare_vfs::FileAttr;
use ringshare_wire::consts::SecurityInformation;
use ringshare_wire::fscc::{
    DirEntryInfo, FileAttributes, FileBasicInformation, FileNetworkOpenInformation,
    FileStandardInformation, FileTime,
};
use ringshare_wire::security::{
    SecurityDescriptor, SE_DACL_AUTO_INHERITED, SE_DACL_AUTO_INHERIT_REQ, SE_DACL_DEFAULTED,
    SE_DACL_PRESENT, SE_DACL_PROTECTED, SE_GROUP_DEFAULTED, SE_OWNER_DEFAULTED, SE_SACL_PRESENT,
};

/// Attributes a client may set or ask for at create (the rest are the file system's business).
pub const SETTABLE_ATTRIBUTES: u32 =
    0x0000_0001 | 0x0000_0002 | 0x0000_0004 | 0x0000_0020 | 0x0000_0100 | 0x0000_2000 | 0x0000_1000;

pub const ATTR_READONLY: u32 = 0x0000_0001;
pub const ATTR_HIDDEN: u32 = 0x0000_0002;
pub const ATTR_SYSTEM: u32 = 0x0000_0004;
pub const ATTR_DIRECTORY: u32 = 0x0000_0010;
pub const ATTR_ARCHIVE: u32 = 0x0000_0020;
pub const ATTR_NORMAL: u32 = 0x0000_0080;
pub const ATTR_COMPRESSED: u32 = 0x0000_0800;

pub fn attributes(a: &FileAttr) -> u32 {
    let dir = a.is_dir();
    let base = match a.dos_attributes {
        Some(d) => d & !(ATTR_DIRECTORY | ATTR_NORMAL),
        None if dir => 0,
        None => ATTR_ARCHIVE,
    };
    let mut v = if dir { base | ATTR_DIRECTORY } else { base };
    // The file system's, never stored (a client cannot set it: [MS-FSA] 2.1.5.14.2).
    if a.compressed {
        v |= ATTR_COMPRESSED;
    } else {
        v &= !ATTR_COMPRESSED;
    }
    if v == 0 {
        ATTR_NORMAL
    } else {
        v
    }
}

/// Creation, last access, last write and change times. The creation time is
/// the one stored with the DOS attributes (a client may have set it), else
/// the birth time, else the older of mtime and ctime. The change time is the
/// last write time, as Samba reports it (POSIX cannot set a ctime, and a
/// client that sets both sees both back).
pub fn times(a: &FileAttr) -> [FileTime; 4] {
    let created = a.create_time.or(a.btime).unwrap_or(a.mtime.min(a.ctime));
    [
        FileTime::from_unix_nanos(created),
        FileTime::from_unix_nanos(a.atime),
        FileTime::from_unix_nanos(a.mtime),
        FileTime::from_unix_nanos(a.mtime),
    ]
}

/// End of file and allocation size.
pub fn sizes(a: &FileAttr) -> (u64, u64) {
    if a.is_dir() {
        (0, 0)
    } else {
        (a.size, a.alloc_size)
    }
}

/// The 64-bit file id clients see (FileInternalInformation, QFid, directory ids).
pub fn file_id(a: &FileAttr) -> u64 {
    a.ino
}

pub fn basic(a: &FileAttr) -> FileBasicInformation {
    let [c, la, lw, ch] = times(a);
    FileBasicInformation {
        creation_time: c,
        last_access_time: la,
        last_write_time: lw,
        change_time: ch,
        file_attributes: FileAttributes(attributes(a)),
    }
}

pub fn standard(a: &FileAttr, delete_pending: bool) -> FileStandardInformation {
    let (eof, alloc) = sizes(a);
    FileStandardInformation {
        allocation_size: alloc,
        end_of_file: eof,
        number_of_links: u32::try_from(a.nlink.max(1)).unwrap_or(u32::MAX),
        delete_pending,
        directory: a.is_dir(),
    }
}

pub fn network_open(a: &FileAttr) -> FileNetworkOpenInformation {
    let [c, la, lw, ch] = times(a);
    let (eof, alloc) = sizes(a);
    FileNetworkOpenInformation {
        creation_time: c,
        last_access_time: la,
        last_write_time: lw,
        change_time: ch,
        allocation_size: alloc,
        end_of_file: eof,
        file_attributes: FileAttributes(attributes(a)),
    }
}

/// The directory entry of `name` with attributes `a`, written over `info`, whose strings'
/// room is used again (a listing describes thousands of entries, one after the other, with
/// one of these).
pub fn fill_dir_entry_info(info: &mut DirEntryInfo, name: &str, a: &FileAttr) {
    // Every field named, so that a new one cannot be left over from the entry before.
    let DirEntryInfo {
        file_index,
        creation_time,
        last_access_time,
        last_write_time,
        change_time,
        end_of_file,
        allocation_size,
        file_attributes,
        ea_size,
        reparse_tag,
        file_id: id,
        short_name,
        name: name_field,
        apple,
        posix,
    } = info;
    [
        *creation_time,
        *last_access_time,
        *last_write_time,
        *change_time,
    ] = times(a);
    (*end_of_file, *allocation_size) = sizes(a);
    *file_index = 0;
    *file_attributes = FileAttributes(attributes(a));
    *ea_size = 0;
    *reparse_tag = 0;
    *id = file_id(a);
    short_name.clear();
    name_field.clear();
    name_field.push_str(name);
    *apple = None;
    *posix = None;
}

/// Control bits that describe the DACL ([MS-DTYP] 2.4.6).
const DACL_CONTROL: u16 = SE_DACL_PRESENT
    | SE_DACL_DEFAULTED
    | SE_DACL_AUTO_INHERIT_REQ
    | SE_DACL_AUTO_INHERITED
    | SE_DACL_PROTECTED;

/// `current` with the parts `info` selects taken from `given` ([MS-DTYP]
/// 2.4.6; SET_INFO of [MS-SMB2] 3.3.5.21.3). An owner or group `given` lacks is
/// kept. A DACL selected but not present in `given` becomes a NULL DACL, as on
/// Windows (smbtorture smb2.create.nulldacl). SACLs are not stored.
pub(crate) fn merge_security_descriptor(
    mut current: SecurityDescriptor,
    given: &SecurityDescriptor,
    info: SecurityInformation,
) -> SecurityDescriptor {
    if info.contains(SecurityInformation::OWNER) && given.owner.is_some() {
        current.owner = given.owner.clone();
        current.control =
            (current.control & !SE_OWNER_DEFAULTED) | (given.control & SE_OWNER_DEFAULTED);
    }
    if info.contains(SecurityInformation::GROUP) && given.group.is_some() {
        current.group = given.group.clone();
        current.control =
            (current.control & !SE_GROUP_DEFAULTED) | (given.control & SE_GROUP_DEFAULTED);
    }
    if info.contains(SecurityInformation::DACL) {
        current.control = (current.control & !DACL_CONTROL) | (given.control & DACL_CONTROL);
        current.dacl = if given.control & SE_DACL_PRESENT != 0 {
            given.dacl.clone()
        } else {
            None
        };
        current.control |= SE_DACL_PRESENT;
    }
    current.sacl = None;
    current.control &= !SE_SACL_PRESENT;
    current
}

#[cfg(test)]
mod tests {
    use ringshare_vfs::FileKind;

    use super::*;

    #[test]
    fn files_without_stored_attributes_are_archive_and_directories_directory() {
        let f = FileAttr {
            kind: FileKind::File,
            ..Default::default()
        };
        assert_eq!(attributes(&f), ATTR_ARCHIVE);
        let d = FileAttr {
            kind: FileKind::Directory,
            ..Default::default()
        };
        assert_eq!(attributes(&d), ATTR_DIRECTORY);
    }

    #[test]
    fn stored_attributes_win_but_the_directory_bit_follows_the_kind() {
        let f = FileAttr {
            kind: FileKind::File,
            dos_attributes: Some(ATTR_READONLY | ATTR_DIRECTORY),
            ..Default::default()
        };
        assert_eq!(attributes(&f), ATTR_READONLY);
        let f = FileAttr {
            kind: FileKind::File,
            dos_attributes: Some(0),
            ..Default::default()
        };
        assert_eq!(attributes(&f), ATTR_NORMAL);
    }

    #[test]
    fn directories_report_zero_sizes() {
        let d = FileAttr {
            kind: FileKind::Directory,
            size: 4096,
            alloc_size: 4096,
            ..Default::default()
        };
        assert_eq!(sizes(&d), (0, 0));
    }
}
