//! [MS-FSCC] 2.4 file information classes used by SMB2 QUERY_INFO and
//! SET_INFO (InfoType SMB2_0_INFO_FILE).
//!
//! Sizes and times are carried as signed LARGE_INTEGERs on the wire; sizes are
//! `u64` here (a file size is never negative), times are [`FileTime`].

use super::{need, read_len_name, FileAttributes, FileTime};
use crate::codec::{to_u32, Reader, WriteExt};
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::WireError;

fn put_name_with_len(out: &mut Vec<u8>, name: &str) {
    out.put_u32(to_u32(utf16_len(name)));
    encode_utf16le(name, out);
}

/// FILE_BASIC_INFORMATION: 40 bytes. In SET_INFO a time of 0 means "don't
/// change" and an attribute value of 0 means "don't change" (see
/// [`FileTime::set_info_action`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileBasicInformation {
    pub creation_time: FileTime,
    pub last_access_time: FileTime,
    pub last_write_time: FileTime,
    pub change_time: FileTime,
    pub file_attributes: FileAttributes,
}

impl FileBasicInformation {
    pub const SIZE: usize = 40;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.creation_time.0);
        out.put_u64(self.last_access_time.0);
        out.put_u64(self.last_write_time.0);
        out.put_u64(self.change_time.0);
        out.put_u32(self.file_attributes.0);
        out.put_u32(0); // Reserved
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            creation_time: FileTime(r.u64()?),
            last_access_time: FileTime(r.u64()?),
            last_write_time: FileTime(r.u64()?),
            change_time: FileTime(r.u64()?),
            file_attributes: FileAttributes(r.u32()?),
        })
    }
}

/// FILE_STANDARD_INFORMATION: 24 bytes (including 2 reserved bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileStandardInformation {
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub number_of_links: u32,
    pub delete_pending: bool,
    pub directory: bool,
}

impl FileStandardInformation {
    pub const SIZE: usize = 24;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.number_of_links);
        out.put_u8(u8::from(self.delete_pending));
        out.put_u8(u8::from(self.directory));
        out.put_u16(0); // Reserved
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            number_of_links: r.u32()?,
            delete_pending: r.u8()? != 0,
            directory: r.u8()? != 0,
        })
    }
}

/// A structure that is a single fixed-width integer.
macro_rules! scalar_info {
    ($(#[$m:meta])* $name:ident { $field:ident: $ty:ty, $put:ident, $get:ident, $size:expr }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name {
            pub $field: $ty,
        }

        impl $name {
            pub const SIZE: usize = $size;

            pub fn encode(&self, out: &mut Vec<u8>) {
                out.$put(self.$field);
            }

            pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
                let mut r = need(buf, Self::SIZE)?;
                Ok(Self { $field: r.$get()? })
            }
        }
    };
}

scalar_info!(
    /// FILE_INTERNAL_INFORMATION: the 64-bit file id (IndexNumber), 8 bytes.
    FileInternalInformation { index_number: u64, put_u64, u64, 8 }
);
scalar_info!(
    /// FILE_EA_INFORMATION: combined EA size, 4 bytes.
    FileEaInformation { ea_size: u32, put_u32, u32, 4 }
);
scalar_info!(
    /// FILE_ACCESS_INFORMATION: the granted access mask of the open, 4 bytes.
    FileAccessInformation { access_flags: u32, put_u32, u32, 4 }
);
scalar_info!(
    /// FILE_POSITION_INFORMATION: CurrentByteOffset, 8 bytes.
    FilePositionInformation { current_byte_offset: u64, put_u64, u64, 8 }
);
scalar_info!(
    /// FILE_MODE_INFORMATION: open mode flags (FILE_WRITE_THROUGH etc.), 4 bytes.
    FileModeInformation { mode: u32, put_u32, u32, 4 }
);
scalar_info!(
    /// FILE_ALIGNMENT_INFORMATION: AlignmentRequirement (0 = byte aligned), 4 bytes.
    FileAlignmentInformation { alignment_requirement: u32, put_u32, u32, 4 }
);
scalar_info!(
    /// FILE_END_OF_FILE_INFORMATION (SET_INFO): new file size, 8 bytes.
    FileEndOfFileInformation { end_of_file: u64, put_u64, u64, 8 }
);
scalar_info!(
    /// FILE_ALLOCATION_INFORMATION (SET_INFO): new allocation size, 8 bytes.
    FileAllocationInformation { allocation_size: u64, put_u64, u64, 8 }
);
scalar_info!(
    /// FILE_DISPOSITION_INFORMATION_EX (SET_INFO): `FILE_DISPOSITION_*` flags, 4 bytes.
    FileDispositionInformationEx { flags: u32, put_u32, u32, 4 }
);

/// FILE_DISPOSITION_INFORMATION_EX flag: clear the delete disposition.
pub const FILE_DISPOSITION_DO_NOT_DELETE: u32 = 0x0000_0000;
/// FILE_DISPOSITION_INFORMATION_EX flag: delete the file.
pub const FILE_DISPOSITION_DELETE: u32 = 0x0000_0001;
/// FILE_DISPOSITION_INFORMATION_EX flag: unlink immediately (POSIX semantics).
pub const FILE_DISPOSITION_POSIX_SEMANTICS: u32 = 0x0000_0002;
/// FILE_DISPOSITION_INFORMATION_EX flag: check for mapped image sections.
pub const FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK: u32 = 0x0000_0004;
/// FILE_DISPOSITION_INFORMATION_EX flag: set/clear FILE_DELETE_ON_CLOSE state.
pub const FILE_DISPOSITION_ON_CLOSE: u32 = 0x0000_0008;
/// FILE_DISPOSITION_INFORMATION_EX flag: delete even if FILE_ATTRIBUTE_READONLY.
pub const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE: u32 = 0x0000_0010;

/// FILE_DISPOSITION_INFORMATION (SET_INFO): DeletePending, 1 byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileDispositionInformation {
    pub delete_pending: bool,
}

impl FileDispositionInformation {
    pub const SIZE: usize = 1;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(u8::from(self.delete_pending));
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            delete_pending: r.u8()? != 0,
        })
    }
}

/// FILE_NAME_INFORMATION: FileNameLength (bytes) then the UTF-16LE name.
/// Also the layout of FileAlternateNameInformation and
/// FileNormalizedNameInformation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileNameInformation {
    pub file_name: String,
}

/// FileAlternateNameInformation: the 8.3 name, same layout as FILE_NAME_INFORMATION.
pub type FileAlternateNameInformation = FileNameInformation;
/// FileNormalizedNameInformation: same layout as FILE_NAME_INFORMATION.
pub type FileNormalizedNameInformation = FileNameInformation;

impl FileNameInformation {
    /// Size without the name.
    pub const FIXED_SIZE: usize = 4;

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_name_with_len(out, &self.file_name);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::FIXED_SIZE)?;
        Ok(Self {
            file_name: read_len_name(&mut r)?,
        })
    }
}

/// FILE_ALL_INFORMATION: basic (40) + standard (24) + internal (8) + EA (4) +
/// access (4) + position (8) + mode (4) + alignment (4) + name (4 + name):
/// 100 bytes plus the name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileAllInformation {
    pub basic: FileBasicInformation,
    pub standard: FileStandardInformation,
    pub internal: FileInternalInformation,
    pub ea: FileEaInformation,
    pub access: FileAccessInformation,
    pub position: FilePositionInformation,
    pub mode: FileModeInformation,
    pub alignment: FileAlignmentInformation,
    pub name: FileNameInformation,
}

impl FileAllInformation {
    /// Size without the name characters.
    pub const FIXED_SIZE: usize = 100;

    pub fn encode(&self, out: &mut Vec<u8>) {
        self.basic.encode(out);
        self.standard.encode(out);
        self.internal.encode(out);
        self.ea.encode(out);
        self.access.encode(out);
        self.position.encode(out);
        self.mode.encode(out);
        self.alignment.encode(out);
        self.name.encode(out);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::FIXED_SIZE)?;
        let mut part = |n: usize| r.bytes(n);
        Ok(Self {
            basic: FileBasicInformation::decode(part(40)?)?,
            standard: FileStandardInformation::decode(part(24)?)?,
            internal: FileInternalInformation::decode(part(8)?)?,
            ea: FileEaInformation::decode(part(4)?)?,
            access: FileAccessInformation::decode(part(4)?)?,
            position: FilePositionInformation::decode(part(8)?)?,
            mode: FileModeInformation::decode(part(4)?)?,
            alignment: FileAlignmentInformation::decode(part(4)?)?,
            name: FileNameInformation::decode(r.rest())?,
        })
    }
}

/// FILE_NETWORK_OPEN_INFORMATION: 56 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileNetworkOpenInformation {
    pub creation_time: FileTime,
    pub last_access_time: FileTime,
    pub last_write_time: FileTime,
    pub change_time: FileTime,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: FileAttributes,
}

impl FileNetworkOpenInformation {
    pub const SIZE: usize = 56;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.creation_time.0);
        out.put_u64(self.last_access_time.0);
        out.put_u64(self.last_write_time.0);
        out.put_u64(self.change_time.0);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes.0);
        out.put_u32(0); // Reserved
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            creation_time: FileTime(r.u64()?),
            last_access_time: FileTime(r.u64()?),
            last_write_time: FileTime(r.u64()?),
            change_time: FileTime(r.u64()?),
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: FileAttributes(r.u32()?),
        })
    }
}

/// FILE_ATTRIBUTE_TAG_INFORMATION: 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileAttributeTagInformation {
    pub file_attributes: FileAttributes,
    /// Reparse tag; meaningful only with FILE_ATTRIBUTE_REPARSE_POINT.
    pub reparse_tag: u32,
}

impl FileAttributeTagInformation {
    pub const SIZE: usize = 8;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.file_attributes.0);
        out.put_u32(self.reparse_tag);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            file_attributes: FileAttributes(r.u32()?),
            reparse_tag: r.u32()?,
        })
    }
}

/// FILE_COMPRESSION_INFORMATION: 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileCompressionInformation {
    pub compressed_file_size: u64,
    /// COMPRESSION_FORMAT_NONE (0), _LZNT1 (2), ...
    pub compression_format: u16,
    pub compression_unit_shift: u8,
    pub chunk_shift: u8,
    pub cluster_shift: u8,
}

impl FileCompressionInformation {
    pub const SIZE: usize = 16;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.compressed_file_size);
        out.put_u16(self.compression_format);
        out.put_u8(self.compression_unit_shift);
        out.put_u8(self.chunk_shift);
        out.put_u8(self.cluster_shift);
        out.put_zeros(3); // Reserved
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            compressed_file_size: r.u64()?,
            compression_format: r.u16()?,
            compression_unit_shift: r.u8()?,
            chunk_shift: r.u8()?,
            cluster_shift: r.u8()?,
        })
    }
}

/// FILE_ID_INFORMATION: VolumeSerialNumber then a 128-bit FileId, 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileIdInformation {
    pub volume_serial_number: u64,
    pub file_id: [u8; 16],
}

impl FileIdInformation {
    pub const SIZE: usize = 24;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.volume_serial_number);
        out.put_bytes(&self.file_id);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            volume_serial_number: r.u64()?,
            file_id: r.array()?,
        })
    }
}

/// One FILE_STREAM_INFORMATION entry. A file's unnamed data stream is
/// named `::$DATA`; named streams `:name:$DATA`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileStreamEntry {
    pub stream_name: String,
    pub stream_size: u64,
    pub stream_allocation_size: u64,
}

/// FileStreamInformation: a chain of [`FileStreamEntry`], each starting on
/// an 8-byte boundary, linked by NextEntryOffset (0 on the last).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileStreamInformation {
    pub entries: Vec<FileStreamEntry>,
}

impl FileStreamInformation {
    /// Fixed part of one entry.
    pub const ENTRY_FIXED_SIZE: usize = 24;

    pub fn encode(&self, out: &mut Vec<u8>) {
        let base = out.len();
        let mut prev: Option<usize> = None;
        for e in &self.entries {
            if let Some(p) = prev {
                out.pad_to(8, base);
                out.patch_u32(p, to_u32(out.len() - p));
            }
            prev = Some(out.len());
            out.put_u32(0); // NextEntryOffset, patched above
            out.put_u32(to_u32(utf16_len(&e.stream_name)));
            out.put_u64(e.stream_size);
            out.put_u64(e.stream_allocation_size);
            encode_utf16le(&e.stream_name, out);
        }
    }

    /// Decode the chain. An empty buffer is an empty list (a file with no
    /// streams, e.g. a directory).
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut entries = Vec::new();
        walk_chain(buf, Self::ENTRY_FIXED_SIZE, |entry| {
            let mut r = Reader::new(entry);
            r.skip(4)?; // NextEntryOffset
            let name_len = r.u32()? as usize;
            let stream_size = r.u64()?;
            let stream_allocation_size = r.u64()?;
            let mut name = r.sub(name_len)?;
            entries.push(FileStreamEntry {
                stream_name: decode_utf16le(name.rest())?,
                stream_size,
                stream_allocation_size,
            });
            Ok(Self::ENTRY_FIXED_SIZE + name_len)
        })?;
        Ok(Self { entries })
    }
}

/// Walk a NextEntryOffset chain in `buf`. `f` gets the bytes from the entry
/// start to the end of `buf` and returns how many bytes the entry really
/// uses; a NextEntryOffset smaller than that (overlapping entries) or past
/// the end is rejected, so the walk is linear and always terminates.
pub(crate) fn walk_chain(
    buf: &[u8],
    fixed_size: usize,
    mut f: impl FnMut(&[u8]) -> Result<usize, WireError>,
) -> Result<(), WireError> {
    let mut at = 0usize;
    if buf.is_empty() {
        return Ok(());
    }
    loop {
        let entry = buf
            .get(at..)
            .ok_or(WireError::BadOffset("NextEntryOffset"))?;
        if entry.len() < fixed_size {
            return Err(WireError::Truncated {
                at: buf.len(),
                needed: fixed_size - entry.len(),
            });
        }
        let next = Reader::new(entry).u32()? as usize;
        let used = f(entry)?;
        if next == 0 {
            return Ok(());
        }
        if next < used || next >= entry.len() {
            return Err(WireError::BadOffset("NextEntryOffset"));
        }
        at += next;
    }
}

/// FILE_RENAME_INFORMATION in its SMB2 form (FILE_RENAME_INFORMATION_TYPE_2:
/// 64-bit RootDirectory). ReplaceIfExists (1) + Reserved (7) + RootDirectory
/// (8) + FileNameLength (4) + FileName: 20 bytes plus the name. Over SMB2
/// RootDirectory MUST be 0 and the name is relative to the share root.
/// FileLinkInformation has the same layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileRenameInformation {
    pub replace_if_exists: bool,
    pub root_directory: u64,
    pub file_name: String,
}

/// FILE_LINK_INFORMATION (SMB2 form): same layout as [`FileRenameInformation`].
pub type FileLinkInformation = FileRenameInformation;

impl FileRenameInformation {
    /// Size without the name.
    pub const FIXED_SIZE: usize = 20;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(u8::from(self.replace_if_exists));
        out.put_zeros(7);
        out.put_u64(self.root_directory);
        put_name_with_len(out, &self.file_name);
    }

    /// Decode; FileNameLength must fit in the buffer and the name must be
    /// valid UTF-16 ([`WireError::BadName`] otherwise).
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::FIXED_SIZE)?;
        let replace_if_exists = r.u8()? != 0;
        r.skip(7)?;
        let root_directory = r.u64()?;
        let file_name = read_len_name(&mut r)?;
        Ok(Self {
            replace_if_exists,
            root_directory,
            file_name,
        })
    }
}

/// One FILE_FULL_EA_INFORMATION entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFullEaEntry {
    /// FILE_NEED_EA (0x80) or 0.
    pub flags: u8,
    /// The EA name: 8-bit characters, without the terminating NUL.
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

/// FILE_FULL_EA_INFORMATION: a chain of [`FileFullEaEntry`] (each 4-byte
/// aligned), as carried by the ExtA create context, SET_INFO and QUERY_INFO
/// FileFullEaInformation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFullEaInformation {
    pub entries: Vec<FileFullEaEntry>,
}

impl FileFullEaInformation {
    /// Fixed part of one entry (before the name).
    pub const ENTRY_FIXED_SIZE: usize = 8;

    /// Encode; names longer than 255 bytes and values longer than 65535 bytes
    /// are truncated (they are not representable).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let base = out.len();
        let mut prev: Option<usize> = None;
        for e in &self.entries {
            if let Some(p) = prev {
                out.pad_to(4, base);
                out.patch_u32(p, to_u32(out.len() - p));
            }
            prev = Some(out.len());
            let name = &e.name[..e.name.len().min(255)];
            let value = &e.value[..e.value.len().min(65535)];
            out.put_u32(0);
            out.put_u8(e.flags);
            out.put_u8(name.len() as u8);
            out.put_u16(value.len() as u16);
            out.put_bytes(name);
            out.put_u8(0);
            out.put_bytes(value);
        }
    }

    /// Decode the chain; the name's NUL terminator must be present.
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut entries = Vec::new();
        walk_chain(buf, Self::ENTRY_FIXED_SIZE, |entry| {
            let mut r = Reader::new(entry);
            r.skip(4)?;
            let flags = r.u8()?;
            let name_len = usize::from(r.u8()?);
            let value_len = usize::from(r.u16()?);
            let name = r.bytes(name_len)?.to_vec();
            if r.u8()? != 0 {
                return Err(WireError::Invalid("EaName terminator"));
            }
            let value = r.bytes(value_len)?.to_vec();
            entries.push(FileFullEaEntry { flags, name, value });
            Ok(r.position())
        })?;
        Ok(Self { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut v = Vec::new();
        f(&mut v);
        v
    }

    #[test]
    fn basic_information_is_40_bytes_and_round_trips() {
        let b = FileBasicInformation {
            creation_time: FileTime(0x0102_0304_0506_0708),
            last_access_time: FileTime(2),
            last_write_time: FileTime(3),
            change_time: FileTime(4),
            file_attributes: FileAttributes::ARCHIVE,
        };
        let v = enc(|o| b.encode(o));
        assert_eq!(v.len(), 40);
        assert_eq!(&v[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&v[32..40], &[0x20, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(FileBasicInformation::decode(&v).unwrap(), b);
    }

    #[test]
    fn basic_information_shorter_than_40_bytes_is_rejected() {
        assert!(matches!(
            FileBasicInformation::decode(&[0u8; 39]),
            Err(WireError::Truncated { at: 39, needed: 1 })
        ));
    }

    #[test]
    fn standard_information_is_24_bytes_with_flags_at_20_and_21() {
        let s = FileStandardInformation {
            allocation_size: 4096,
            end_of_file: 10,
            number_of_links: 1,
            delete_pending: true,
            directory: false,
        };
        let v = enc(|o| s.encode(o));
        assert_eq!(v.len(), 24);
        assert_eq!(&v[16..24], &[1, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(FileStandardInformation::decode(&v).unwrap(), s);
    }

    #[test]
    fn network_open_information_is_56_bytes_and_round_trips() {
        let n = FileNetworkOpenInformation {
            creation_time: FileTime(1),
            last_access_time: FileTime(2),
            last_write_time: FileTime(3),
            change_time: FileTime(4),
            allocation_size: 8192,
            end_of_file: 5000,
            file_attributes: FileAttributes::NORMAL,
        };
        let v = enc(|o| n.encode(o));
        assert_eq!(v.len(), 56);
        assert_eq!(v[48], 0x80);
        assert_eq!(FileNetworkOpenInformation::decode(&v).unwrap(), n);
    }

    #[test]
    fn all_information_is_100_bytes_plus_name_with_name_length_at_96() {
        let a = FileAllInformation {
            basic: FileBasicInformation {
                creation_time: FileTime(9),
                ..Default::default()
            },
            standard: FileStandardInformation {
                end_of_file: 3,
                number_of_links: 1,
                directory: true,
                ..Default::default()
            },
            internal: FileInternalInformation { index_number: 77 },
            ea: FileEaInformation { ea_size: 0 },
            access: FileAccessInformation {
                access_flags: 0x0012_0089,
            },
            position: FilePositionInformation {
                current_byte_offset: 5,
            },
            mode: FileModeInformation { mode: 0x20 },
            alignment: FileAlignmentInformation {
                alignment_requirement: 0,
            },
            name: FileNameInformation {
                file_name: "\\dir\\a.txt".into(),
            },
        };
        let v = enc(|o| a.encode(o));
        assert_eq!(v.len(), 100 + 20);
        assert_eq!(&v[64..72], &77u64.to_le_bytes());
        assert_eq!(&v[96..100], &20u32.to_le_bytes());
        assert_eq!(FileAllInformation::decode(&v).unwrap(), a);
    }

    #[test]
    fn name_information_rejects_length_past_buffer_and_odd_utf16() {
        assert!(FileNameInformation::decode(&[10, 0, 0, 0, b'a', 0]).is_err());
        assert_eq!(
            FileNameInformation::decode(&[3, 0, 0, 0, b'a', 0, b'b']),
            Err(WireError::BadName)
        );
        assert!(FileNameInformation::decode(&[0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }

    #[test]
    fn scalar_classes_have_spec_sizes_and_round_trip() {
        let v = enc(|o| FileInternalInformation { index_number: 7 }.encode(o));
        assert_eq!(v, 7u64.to_le_bytes());
        assert_eq!(FileInternalInformation::decode(&v).unwrap().index_number, 7);
        let v = enc(|o| {
            FileEndOfFileInformation {
                end_of_file: 1 << 40,
            }
            .encode(o)
        });
        assert_eq!(
            FileEndOfFileInformation::decode(&v).unwrap().end_of_file,
            1 << 40
        );
        let v = enc(|o| FileAllocationInformation { allocation_size: 3 }.encode(o));
        assert_eq!(
            FileAllocationInformation::decode(&v)
                .unwrap()
                .allocation_size,
            3
        );
        let v = enc(|o| FileDispositionInformationEx { flags: 3 }.encode(o));
        assert_eq!(v, [3, 0, 0, 0]);
        assert_eq!(FileDispositionInformationEx::decode(&v).unwrap().flags, 3);
        assert!(FileModeInformation::decode(&[1, 2, 3]).is_err());
        let v = enc(|o| {
            FileDispositionInformation {
                delete_pending: true,
            }
            .encode(o)
        });
        assert_eq!(v, [1]);
        assert!(
            FileDispositionInformation::decode(&v)
                .unwrap()
                .delete_pending
        );
        assert!(FileDispositionInformation::decode(&[]).is_err());
    }

    #[test]
    fn fixed_small_classes_round_trip() {
        let t = FileAttributeTagInformation {
            file_attributes: FileAttributes::REPARSE_POINT,
            reparse_tag: 0xA000_000C,
        };
        let v = enc(|o| t.encode(o));
        assert_eq!(v.len(), 8);
        assert_eq!(FileAttributeTagInformation::decode(&v).unwrap(), t);
        let c = FileCompressionInformation {
            compressed_file_size: 100,
            compression_format: 2,
            compression_unit_shift: 16,
            chunk_shift: 12,
            cluster_shift: 12,
        };
        let v = enc(|o| c.encode(o));
        assert_eq!(v.len(), 16);
        assert_eq!(FileCompressionInformation::decode(&v).unwrap(), c);
        let i = FileIdInformation {
            volume_serial_number: 0x1122,
            file_id: [7; 16],
        };
        let v = enc(|o| i.encode(o));
        assert_eq!(v.len(), 24);
        assert_eq!(FileIdInformation::decode(&v).unwrap(), i);
    }

    #[test]
    fn stream_information_chains_on_8_byte_boundaries() {
        let s = FileStreamInformation {
            entries: vec![
                FileStreamEntry {
                    stream_name: "::$DATA".into(),
                    stream_size: 10,
                    stream_allocation_size: 4096,
                },
                FileStreamEntry {
                    stream_name: ":x:$DATA".into(),
                    stream_size: 1,
                    stream_allocation_size: 8,
                },
            ],
        };
        let v = enc(|o| s.encode(o));
        // 24 + 14 = 38, padded to 40.
        assert_eq!(&v[..4], &40u32.to_le_bytes());
        assert_eq!(v.len(), 40 + 24 + 16);
        assert_eq!(FileStreamInformation::decode(&v).unwrap(), s);
        assert!(FileStreamInformation::decode(&[])
            .unwrap()
            .entries
            .is_empty());
    }

    #[test]
    fn stream_information_rejects_overlapping_or_outside_entries() {
        let s = FileStreamInformation {
            entries: vec![FileStreamEntry::default(), FileStreamEntry::default()],
        };
        let mut v = enc(|o| s.encode(o));
        v[0] = 8; // points into the first entry's own fixed part
        assert_eq!(
            FileStreamInformation::decode(&v),
            Err(WireError::BadOffset("NextEntryOffset"))
        );
        v[0] = 200; // past the end
        assert!(FileStreamInformation::decode(&v).is_err());
    }

    #[test]
    fn rename_information_uses_the_smb2_layout() {
        let r = FileRenameInformation {
            replace_if_exists: true,
            root_directory: 0,
            file_name: "new\\name.txt".into(),
        };
        let v = enc(|o| r.encode(o));
        assert_eq!(v.len(), 20 + 24);
        assert_eq!(v[0], 1);
        assert_eq!(&v[16..20], &24u32.to_le_bytes());
        assert_eq!(&v[20..22], &[b'n', 0]);
        assert_eq!(FileRenameInformation::decode(&v).unwrap(), r);
        // Windows pads the buffer: trailing bytes are ignored.
        let mut padded = v.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(FileRenameInformation::decode(&padded).unwrap(), r);
    }

    #[test]
    fn rename_information_rejects_name_length_past_end() {
        let mut v = enc(|o| {
            FileRenameInformation {
                file_name: "ab".into(),
                ..Default::default()
            }
            .encode(o)
        });
        v[16] = 6;
        assert!(FileRenameInformation::decode(&v).is_err());
        assert!(FileRenameInformation::decode(&v[..19]).is_err());
    }

    #[test]
    fn full_ea_information_round_trips_and_checks_terminator() {
        let ea = FileFullEaInformation {
            entries: vec![
                FileFullEaEntry {
                    flags: 0,
                    name: b"USER.A".to_vec(),
                    value: b"xyz".to_vec(),
                },
                FileFullEaEntry {
                    flags: 0x80,
                    name: b"B".to_vec(),
                    value: vec![],
                },
            ],
        };
        let v = enc(|o| ea.encode(o));
        // 8 + 6 + 1 + 3 = 18 -> next at 20.
        assert_eq!(&v[..4], &20u32.to_le_bytes());
        assert_eq!(FileFullEaInformation::decode(&v).unwrap(), ea);
        let mut bad = v.clone();
        bad[8 + 6] = b'!';
        assert_eq!(
            FileFullEaInformation::decode(&bad),
            Err(WireError::Invalid("EaName terminator"))
        );
        // Value length past the end.
        let mut bad = v.clone();
        bad[6] = 0xFF;
        assert!(FileFullEaInformation::decode(&bad).is_err());
    }
}
