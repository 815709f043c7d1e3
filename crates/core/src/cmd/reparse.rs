//! Reparse data buffers a client stores on a regular file ([MS-FSCC] 2.1.2.2 and 2.1.2.3;
//! FSCTL_SET_REPARSE_POINT, served in `cmd::ioctl`): the checks every buffer passes, and what
//! a stored one makes a file look like (its tag; the type a POSIX client sees). The buffer is
//! kept as Samba 4.22 keeps it (its `user.SmbReparse` xattr, the whole buffer;
//! [`ringshare_vfs::Node::set_reparse_point`]), so a share moved between the two keeps its
//! reparse points.

use ringshare_vfs::{FileAttr, FileKind, FsResult, Node, Special, ATTR_REPARSE_POINT};
use ringshare_wire::posix;
use ringshare_wire::NtStatus;

/// The header before a buffer's data: ReparseTag (u32), ReparseDataLength (u16), Reserved.
pub(crate) const HEADER: usize = 8;

/// [MS-FSCC] 2.1.2.3 NFS_SPECFILE_* types of IO_REPARSE_TAG_NFS data, as little-endian u64s
/// of their ASCII names.
const NFS_CHR: u64 = u64::from_le_bytes(*b"CHR\0\0\0\0\0");
const NFS_BLK: u64 = u64::from_le_bytes(*b"BLK\0\0\0\0\0");
const NFS_FIFO: u64 = u64::from_le_bytes(*b"FIFO\0\0\0\0");
const NFS_SOCK: u64 = u64::from_le_bytes(*b"SOCK\0\0\0\0");

/// `buf`'s tag and data when it is a well-formed buffer: at least the header, and a
/// ReparseDataLength that is exactly what follows it (Samba 4.22's check; an empty buffer is
/// INVALID_BUFFER_SIZE, any other malformed one IO_REPARSE_DATA_INVALID).
pub(crate) fn check(buf: &[u8]) -> Result<(u32, &[u8]), NtStatus> {
    if buf.is_empty() {
        return Err(NtStatus::INVALID_BUFFER_SIZE);
    }
    let (Some(tag), Some(len), Some(data)) = (buf.get(..4), buf.get(4..6), buf.get(HEADER..))
    else {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    };
    if usize::from(u16::from_le_bytes([len[0], len[1]])) != data.len() {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    }
    Ok((u32::from_le_bytes([tag[0], tag[1], tag[2], tag[3]]), data))
}

/// The tag of a stored buffer (0 when it is not one).
pub(crate) fn tag(stored: &[u8]) -> u32 {
    check(stored).map_or(0, |(t, _)| t)
}

/// Whether a file's attributes say it holds a stored buffer worth reading: a regular file
/// whose stored DOS attributes carry REPARSE_POINT (symlinks and special files are reparse
/// points by their kind, `cmd::posix`).
pub(crate) fn may_hold(attr: &FileAttr) -> bool {
    attr.kind == FileKind::File
        && attr
            .dos_attributes
            .is_some_and(|d| d & ATTR_REPARSE_POINT != 0)
}

/// The buffer stored with `node`, whose metadata is `attr`, if it holds a well-formed one; a
/// failed read is the backend's error (the FSCTLs answer it).
pub(crate) fn read(node: &dyn Node, attr: &FileAttr) -> FsResult<Option<Vec<u8>>> {
    if !may_hold(attr) {
        return Ok(None);
    }
    Ok(node.reparse_point()?.filter(|b| check(b).is_ok()))
}

/// [`read`], a buffer that cannot be read counting as none (what a file shows).
pub(crate) fn stored(node: &dyn Node, attr: &FileAttr) -> Option<Vec<u8>> {
    read(node, attr).ok().flatten()
}

/// [`stored`] of entry `name` (metadata `attr`) of directory `dir`, for a listing.
pub(crate) fn stored_entry(dir: &dyn Node, name: &str, attr: &FileAttr) -> Option<Vec<u8>> {
    if !may_hold(attr) {
        return None;
    }
    dir.entry_reparse_point(name)
        .ok()
        .flatten()
        .filter(|b| check(b).is_ok())
}

/// A buffer of `tag` holding `data`.
fn buffer(tag: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + data.len());
    b.extend_from_slice(&tag.to_le_bytes());
    b.extend_from_slice(&u16::try_from(data.len()).unwrap_or(u16::MAX).to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(data);
    b
}

/// The IO_REPARSE_TAG_SYMLINK buffer ([MS-FSCC] 2.1.2.4) a symlink with `target` shows a
/// POSIX client, as Samba 4.22 builds it: the target, unchanged, as both the substitute and
/// the print name, SYMLINK_FLAG_RELATIVE unless it starts with `/`.
pub(crate) fn symlink_buffer(target: &[u8]) -> Vec<u8> {
    let name: Vec<u8> = String::from_utf8_lossy(target)
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
    let relative = u32::from(!target.starts_with(b"/"));
    let mut data = Vec::with_capacity(12 + 2 * name.len());
    for v in [0, len, len, len] {
        data.extend_from_slice(&v.to_le_bytes());
    }
    data.extend_from_slice(&relative.to_le_bytes());
    data.extend_from_slice(&name);
    data.extend_from_slice(&name);
    buffer(posix::IO_REPARSE_TAG_SYMLINK, &data)
}

/// The IO_REPARSE_TAG_NFS buffer ([MS-FSCC] 2.1.2.6) a FIFO, socket or device shows a POSIX
/// client; `numbers`: a device's major and minor. `None` for a kind NFS has no type for.
pub(crate) fn special_buffer(kind: Special, numbers: (u32, u32)) -> Option<Vec<u8>> {
    let mut data = match kind {
        Special::Fifo => NFS_FIFO,
        Special::Socket => NFS_SOCK,
        Special::CharDevice => NFS_CHR,
        Special::BlockDevice => NFS_BLK,
        Special::Unknown => return None,
    }
    .to_le_bytes()
    .to_vec();
    if matches!(kind, Special::CharDevice | Special::BlockDevice) {
        data.extend_from_slice(&numbers.0.to_le_bytes());
        data.extend_from_slice(&numbers.1.to_le_bytes());
    }
    Some(buffer(posix::IO_REPARSE_TAG_NFS, &data))
}

/// The POSIX wire type a regular file with stored buffer `stored` shows (Samba 4.22): a
/// symlink's tag makes it a symlink, IO_REPARSE_TAG_NFS the special file its data names, any
/// other tag a regular file.
pub(crate) fn posix_type(stored: &[u8]) -> u32 {
    match check(stored) {
        Ok((posix::IO_REPARSE_TAG_SYMLINK, _)) => posix::TYPE_SYMLINK,
        Ok((posix::IO_REPARSE_TAG_NFS, data)) => {
            let kind = data
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
            match kind {
                Some(NFS_CHR) => posix::TYPE_CHARDEV,
                Some(NFS_BLK) => posix::TYPE_BLKDEV,
                Some(NFS_FIFO) => posix::TYPE_FIFO,
                Some(NFS_SOCK) => posix::TYPE_SOCKET,
                _ => posix::TYPE_FILE,
            }
        }
        _ => posix::TYPE_FILE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_must_say_exactly_how_much_data_follows_its_header() {
        assert_eq!(check(&[]), Err(NtStatus::INVALID_BUFFER_SIZE));
        for n in 1..HEADER {
            assert_eq!(check(&vec![0; n]), Err(NtStatus::IO_REPARSE_DATA_INVALID));
        }
        let b = buffer(0x8000_0025, b"abc");
        assert_eq!(check(&b), Ok((0x8000_0025, &b"abc"[..])));
        assert_eq!(
            check(&b[..b.len() - 1]),
            Err(NtStatus::IO_REPARSE_DATA_INVALID)
        );
        let mut longer = b.clone();
        longer.push(0);
        assert_eq!(check(&longer), Err(NtStatus::IO_REPARSE_DATA_INVALID));
        assert_eq!(check(&buffer(7, b"")), Ok((7, &b""[..])));
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn symlinks_and_special_files_show_the_buffers_samba_builds() {
        // Samba 4.22.6's answers (crates/ringshare/tests/py/samba_reparse.py).
        assert_eq!(
            hex(&symlink_buffer(b"File.txt")),
            "0c0000a02c000000000010001000100001000000460069006c0065002e00740078007400\
             460069006c0065002e00740078007400"
        );
        assert_eq!(
            hex(&symlink_buffer(b"/etc")),
            "0c0000a01c0000000000080008000800000000002f006500740063002f00650074006300"
        );
        let nfs = |k, n| hex(&special_buffer(k, n).unwrap());
        assert_eq!(
            nfs(Special::Fifo, (0, 0)),
            "14000080080000004649464f00000000"
        );
        assert_eq!(
            nfs(Special::Socket, (0, 0)),
            "1400008008000000534f434b00000000"
        );
        assert_eq!(
            nfs(Special::CharDevice, (1, 3)),
            "140000801000000043485200000000000100000003000000"
        );
        assert_eq!(
            nfs(Special::BlockDevice, (7, 0)),
            "1400008010000000424c4b00000000000700000000000000"
        );
        assert_eq!(special_buffer(Special::Unknown, (0, 0)), None);
    }

    #[test]
    fn a_posix_client_sees_the_type_a_stored_buffer_names() {
        let nfs = |kind: &[u8; 8]| buffer(posix::IO_REPARSE_TAG_NFS, kind);
        assert_eq!(
            posix_type(&buffer(posix::IO_REPARSE_TAG_SYMLINK, b"x")),
            posix::TYPE_SYMLINK
        );
        assert_eq!(posix_type(&nfs(b"FIFO\0\0\0\0")), posix::TYPE_FIFO);
        assert_eq!(posix_type(&nfs(b"SOCK\0\0\0\0")), posix::TYPE_SOCKET);
        assert_eq!(posix_type(&nfs(b"CHR\0\0\0\0\0")), posix::TYPE_CHARDEV);
        assert_eq!(posix_type(&nfs(b"BLK\0\0\0\0\0")), posix::TYPE_BLKDEV);
        assert_eq!(posix_type(&nfs(b"LNK\0\0\0\0\0")), posix::TYPE_FILE);
        assert_eq!(posix_type(&buffer(0x8000_0025, b"")), posix::TYPE_FILE);
        assert_eq!(posix_type(b"junk"), posix::TYPE_FILE);
    }
}
