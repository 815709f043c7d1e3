//! The SMB3 POSIX extensions (Samba's "SMB3 Unix extensions", the Linux cifs
//! client's `posix` mount option): what they add to the wire.
//!
//! - NEGOTIATE: a context of type 0x100 (SMB2_POSIX_EXTENSIONS_AVAILABLE)
//!   whose data is a list of 16-byte variant ids; the one variant defined is
//!   [`crate::create::tag::POSIX`]. A server that agrees answers with that id.
//! - CREATE: a create context named [`crate::create::tag::POSIX`], 4 bytes of
//!   wire mode in ([`decode_create_mode`]); the answer carries the open's
//!   [`PosixCc`] (links, reparse tag, mode, owner and group SIDs).
//! - FILE_POSIX_INFORMATION (info class 100) in QUERY_INFO, and the same class
//!   in QUERY_DIRECTORY ([`encode_dir_entry`]): [`FilePosixInfo`].
//!
//! The mode on the wire keeps the permission bits in their Unix places (0o7777)
//! and the file type as a number 0-6 in bits 12-15 ([`mode_to_wire`]).
//! Everything is little-endian and unaligned; SIDs are in their binary form
//! ([MS-DTYP] 2.4.2.2).

use crate::codec::{to_u32, Reader, WriteExt};
use crate::security::Sid;
use crate::utf16::{encode_utf16le, utf16_len};
use crate::WireError;

/// File types as the wire numbers them (bits 12-15 of the wire mode).
pub const TYPE_FILE: u32 = 0;
pub const TYPE_DIR: u32 = 1;
pub const TYPE_SYMLINK: u32 = 2;
pub const TYPE_CHARDEV: u32 = 3;
pub const TYPE_BLKDEV: u32 = 4;
pub const TYPE_FIFO: u32 = 5;
pub const TYPE_SOCKET: u32 = 6;
/// A type with no wire number.
pub const TYPE_UNKNOWN: u32 = 0xFFFF_FFFF;

/// The reparse tags a POSIX client sees special files with ([MS-FSCC] 2.1.2.1):
/// a symlink, and a FIFO, socket or device (the NFS tag, as Samba 4.22 shows them).
pub const IO_REPARSE_TAG_SYMLINK: u32 = 0xA000_000C;
pub const IO_REPARSE_TAG_NFS: u32 = 0x8000_0014;
/// Permission, setuid, setgid and sticky bits.
pub const PERM_MASK: u32 = 0o7777;
const TYPE_SHIFT: u32 = 12;

/// The wire mode of a file of wire type `file_type` with permissions `perms`
/// (only its 0o7777 bits count). An unknown type shifts as Samba shifts it.
pub fn mode_to_wire(file_type: u32, perms: u32) -> u32 {
    (perms & PERM_MASK) | file_type.wrapping_shl(TYPE_SHIFT)
}

/// The permission bits of a wire mode (its type bits dropped).
pub fn wire_perms(wire: u32) -> u32 {
    wire & PERM_MASK
}

/// Whether a NEGOTIATE's POSIX context (its data) offers the variant this
/// crate knows. Data whose length is not a multiple of 16 is invalid (the
/// server answers INVALID_PARAMETER, as Samba does); other variants are not
/// an error, only not offered.
pub fn negotiate_offers_posix(data: &[u8]) -> Result<bool, WireError> {
    if !data.len().is_multiple_of(16) {
        return Err(WireError::Invalid("POSIX negotiate context length"));
    }
    Ok(data
        .chunks_exact(16)
        .any(|id| id == crate::create::tag::POSIX))
}

/// The wire mode a CREATE's POSIX context carries: exactly 4 bytes.
pub fn decode_create_mode(data: &[u8]) -> Result<u32, WireError> {
    let bytes: [u8; 4] = data
        .try_into()
        .map_err(|_| WireError::Invalid("POSIX create context length"))?;
    Ok(u32::from_le_bytes(bytes))
}

/// The part of the POSIX information a CREATE answers with (Samba's
/// `smb3_posix_cc_info`), also the tail of [`FilePosixInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixCc {
    pub nlinks: u32,
    pub reparse_tag: u32,
    /// The wire mode ([`mode_to_wire`]).
    pub mode: u32,
    pub owner: Sid,
    pub group: Sid,
}

impl PosixCc {
    pub fn encoded_len(&self) -> usize {
        12 + self.owner.encoded_len() + self.group.encoded_len()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.nlinks);
        out.put_u32(self.reparse_tag);
        out.put_u32(self.mode);
        self.owner.encode(out);
        self.group.encode(out);
    }

    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(PosixCc {
            nlinks: r.u32()?,
            reparse_tag: r.u32()?,
            mode: r.u32()?,
            owner: read_sid(r)?,
            group: read_sid(r)?,
        })
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        Self::read(&mut Reader::new(buf))
    }
}

/// One SID in its binary form, as long as its SubAuthorityCount says.
fn read_sid(r: &mut Reader<'_>) -> Result<Sid, WireError> {
    let mut peek = r.clone();
    peek.u8()?;
    let count = usize::from(peek.u8()?);
    Sid::decode(r.bytes(8 + 4 * count)?)
}

/// FILE_POSIX_INFORMATION (Samba's `smb3_file_posix_information`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePosixInfo {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub end_of_file: u64,
    pub allocation_size: u64,
    pub file_attributes: u32,
    pub inode: u64,
    pub device: u32,
    pub cc: PosixCc,
}

/// Bytes of [`FilePosixInfo`] before its [`PosixCc`].
const INFO_FIXED: usize = 68;

impl FilePosixInfo {
    /// The smallest an answer can be (two SIDs without sub-authorities).
    pub const MIN_LEN: usize = INFO_FIXED + 12 + 16;

    pub fn encoded_len(&self) -> usize {
        INFO_FIXED + self.cc.encoded_len()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.end_of_file);
        out.put_u64(self.allocation_size);
        out.put_u32(self.file_attributes);
        out.put_u64(self.inode);
        out.put_u32(self.device);
        out.put_u32(0); // Reserved
        self.cc.encode(out);
    }

    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let creation_time = r.u64()?;
        let last_access_time = r.u64()?;
        let last_write_time = r.u64()?;
        let change_time = r.u64()?;
        let end_of_file = r.u64()?;
        let allocation_size = r.u64()?;
        let file_attributes = r.u32()?;
        let inode = r.u64()?;
        let device = r.u32()?;
        r.u32()?; // Reserved
        Ok(FilePosixInfo {
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            end_of_file,
            allocation_size,
            file_attributes,
            inode,
            device,
            cc: PosixCc::read(r)?,
        })
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        Self::read(&mut Reader::new(buf))
    }
}

/// FSCC_FS_POSIX_INFORMATION (QUERY_INFO of the file system, class 100), Samba's
/// layout: the file system's statvfs(3) figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsPosixInfo {
    pub optimal_transfer_size: u32,
    pub block_size: u32,
    pub total_blocks: u64,
    pub blocks_available: u64,
    pub user_blocks_available: u64,
    pub total_file_nodes: u64,
    pub free_file_nodes: u64,
    pub fs_identifier: u64,
}

impl FsPosixInfo {
    pub const SIZE: usize = 56;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.optimal_transfer_size);
        out.put_u32(self.block_size);
        out.put_u64(self.total_blocks);
        out.put_u64(self.blocks_available);
        out.put_u64(self.user_blocks_available);
        out.put_u64(self.total_file_nodes);
        out.put_u64(self.free_file_nodes);
        out.put_u64(self.fs_identifier);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        Ok(FsPosixInfo {
            optimal_transfer_size: r.u32()?,
            block_size: r.u32()?,
            total_blocks: r.u64()?,
            blocks_available: r.u64()?,
            user_blocks_available: r.u64()?,
            total_file_nodes: r.u64()?,
            free_file_nodes: r.u64()?,
            fs_identifier: r.u64()?,
        })
    }
}

/// Bytes a directory entry of the POSIX class takes (unpadded).
pub fn dir_entry_len(info: &FilePosixInfo, name: &str) -> usize {
    8 + info.encoded_len() + 4 + utf16_len(name)
}

/// Append one QUERY_DIRECTORY entry of the POSIX class with NextEntryOffset 0
/// (NextEntryOffset, FileIndex 0, the information, the name's length and the
/// name); returns where it starts.
pub fn encode_dir_entry(info: &FilePosixInfo, name: &str, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.put_u32(0);
    out.put_u32(0);
    info.encode(out);
    out.put_u32(to_u32(utf16_len(name)));
    encode_utf16le(name, out);
    start
}

/// One entry of the POSIX class (client side): the information, the name and
/// the entry's NextEntryOffset.
pub fn decode_dir_entry(entry: &[u8]) -> Result<(FilePosixInfo, String, u32), WireError> {
    let mut r = Reader::new(entry);
    let next = r.u32()?;
    r.u32()?;
    let info = FilePosixInfo::read(&mut r)?;
    let len = r.u32()? as usize;
    let name = crate::utf16::decode_utf16le(r.bytes(len)?)?;
    Ok((info, name, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FilePosixInfo {
        FilePosixInfo {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            end_of_file: 5,
            allocation_size: 4096,
            file_attributes: 0x80,
            inode: 77,
            device: 0x803,
            cc: PosixCc {
                nlinks: 2,
                reparse_tag: 0,
                mode: mode_to_wire(TYPE_DIR, 0o2755),
                owner: Sid::unix_user(1000),
                group: Sid::unix_group(100),
            },
        }
    }

    #[test]
    fn the_wire_mode_keeps_permissions_in_place_and_the_type_in_bits_12_to_15() {
        assert_eq!(mode_to_wire(TYPE_FILE, 0o100644), 0o644);
        assert_eq!(mode_to_wire(TYPE_DIR, 0o755), 0o10755);
        assert_eq!(mode_to_wire(TYPE_SYMLINK, 0o777), 0o20777);
        assert_eq!(wire_perms(0o14755), 0o4755);
    }

    #[test]
    fn a_negotiate_context_offers_posix_only_with_the_known_variant() {
        let mut data = vec![0x30; 16];
        assert_eq!(negotiate_offers_posix(&data), Ok(false));
        data.extend_from_slice(crate::create::tag::POSIX);
        assert_eq!(negotiate_offers_posix(&data), Ok(true));
        assert!(negotiate_offers_posix(b"01234").is_err());
        assert_eq!(negotiate_offers_posix(&[]), Ok(false));
    }

    #[test]
    fn a_create_context_carries_exactly_four_bytes_of_mode() {
        assert_eq!(decode_create_mode(&[0xa4, 0x01, 0, 0]), Ok(0o644));
        assert!(decode_create_mode(b"00000").is_err());
        assert!(decode_create_mode(b"000").is_err());
        assert!(decode_create_mode(&[]).is_err());
    }

    #[test]
    fn posix_information_has_samba_s_layout_and_round_trips() {
        let info = sample();
        let mut out = Vec::new();
        info.encode(&mut out);
        // 68 fixed bytes, 12 of links/tag/mode, two SIDs of 2 sub-authorities.
        assert_eq!(out.len(), 68 + 12 + 16 + 16);
        assert_eq!(out.len(), info.encoded_len());
        assert_eq!(&out[52..60], &77u64.to_le_bytes());
        assert_eq!(&out[60..64], &0x803u32.to_le_bytes());
        assert_eq!(&out[76..80], &0o12755u32.to_le_bytes());
        assert_eq!(FilePosixInfo::decode(&out), Ok(info));
    }

    #[test]
    fn short_or_cut_posix_information_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        sample().encode(&mut out);
        for n in 0..out.len() {
            assert!(FilePosixInfo::decode(&out[..n]).is_err(), "{n} bytes");
        }
        // A SubAuthorityCount past the buffer.
        let mut bad = out.clone();
        bad[81] = 200;
        assert!(FilePosixInfo::decode(&bad).is_err());
    }

    #[test]
    fn a_directory_entry_is_the_information_then_the_name() {
        let info = sample();
        let mut out = Vec::new();
        let at = encode_dir_entry(&info, "Straße", &mut out);
        assert_eq!(at, 0);
        assert_eq!(out.len(), dir_entry_len(&info, "Straße"));
        let (back, name, next) = decode_dir_entry(&out).unwrap();
        assert_eq!((back, name.as_str(), next), (info, "Straße", 0));
    }
}
