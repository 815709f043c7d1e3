//! [MS-FSCC] 2.4 directory enumeration classes (SMB2 QUERY_DIRECTORY).
//!
//! One [`DirEntryInfo`] holds every field any class needs;
//! [`encode_dir_entry`] writes one entry of a given class and
//! [`DirEntryChain`] packs several into an output buffer: each entry after the
//! first starts on an 8-byte boundary, the previous entry's NextEntryOffset is
//! patched to point at it, the last entry's stays 0 and is not padded, and the
//! total never exceeds the caller's limit (the request's OutputBufferLength).
//!
//! Field offsets (bytes) shared by all classes except FileNamesInformation:
//! NextEntryOffset 0, FileIndex 4, CreationTime 8, LastAccessTime 16,
//! LastWriteTime 24, ChangeTime 32, EndOfFile 40, AllocationSize 48,
//! FileAttributes 56, FileNameLength 60; then per class:
//!
//! | class | after FileNameLength | FileName at |
//! |---|---|---|
//! | FileDirectoryInformation | - | 64 |
//! | FileFullDirectoryInformation | EaSize | 68 |
//! | FileIdFullDirectoryInformation | EaSize, Reserved(4), FileId(8) | 80 |
//! | FileBothDirectoryInformation | EaSize, ShortNameLength(1), Reserved1(1), ShortName(24) | 94 |
//! | FileIdBothDirectoryInformation | as Both, Reserved2(2), FileId(8) | 104 |
//! | FileIdExtdDirectoryInformation | EaSize, ReparsePointTag, FileId(16) | 88 |
//!
//! FileNamesInformation: NextEntryOffset 0, FileIndex 4, FileNameLength 8,
//! FileName 12.

use super::file_info::walk_chain;
use super::{FileAttributes, FileInfoClass, FileTime};
use crate::codec::{to_u32, Reader, WriteExt};
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::WireError;

/// Everything a directory entry of any class can carry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirEntryInfo {
    /// Byte offset of the entry in the directory; servers may send 0.
    pub file_index: u32,
    pub creation_time: FileTime,
    pub last_access_time: FileTime,
    pub last_write_time: FileTime,
    pub change_time: FileTime,
    pub end_of_file: u64,
    pub allocation_size: u64,
    pub file_attributes: FileAttributes,
    /// EaSize. For an entry with FILE_ATTRIBUTE_REPARSE_POINT in the classes
    /// without a ReparsePointTag field, [MS-FSCC] puts the reparse tag here;
    /// the caller decides which value to set.
    pub ea_size: u32,
    /// ReparsePointTag (FileIdExtdDirectoryInformation only).
    pub reparse_tag: u32,
    /// The 64-bit file id (inode number). FileIdExtdDirectoryInformation
    /// carries it zero-extended to 128 bits; decoding that class keeps the
    /// low 64 bits.
    pub file_id: u64,
    /// The 8.3 name (Both classes only); empty when there is none. Names
    /// longer than 12 UTF-16 units are sent as empty.
    pub short_name: String,
    pub name: String,
    /// Apple's readdir attributes (the AAPL create context's
    /// kAAPL_SUPPORTS_READ_DIR_ATTR, FileIdBothDirectoryInformation only):
    /// the 24 short-name bytes (resource fork length, compressed FinderInfo)
    /// sent with ShortNameLength 24, and the Unix mode in Reserved2. The
    /// caller puts the maximal access in `ea_size`.
    pub apple: Option<AppleDirAttr>,
    /// What the POSIX class (FilePosixInformation, [`crate::posix`]) adds;
    /// an entry of that class needs it.
    pub posix: Option<PosixEntry>,
}

/// The fields of a POSIX-class entry beyond those of the other classes (its
/// inode is `file_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixEntry {
    pub device: u32,
    pub cc: crate::posix::PosixCc,
}

impl DirEntryInfo {
    /// The entry as FILE_POSIX_INFORMATION, if it has its POSIX fields.
    pub fn posix_info(&self) -> Option<crate::posix::FilePosixInfo> {
        let p = self.posix.as_ref()?;
        Some(crate::posix::FilePosixInfo {
            creation_time: self.creation_time.0,
            last_access_time: self.last_access_time.0,
            last_write_time: self.last_write_time.0,
            change_time: self.change_time.0,
            end_of_file: self.end_of_file,
            allocation_size: self.allocation_size,
            file_attributes: self.file_attributes.0,
            inode: self.file_id,
            device: p.device,
            cc: p.cc.clone(),
        })
    }
}

/// What a directory entry carries for macOS in place of a short name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppleDirAttr {
    pub short_name: [u8; 24],
    pub unix_mode: u16,
}

/// Size of the fixed part (before FileName) of a directory class, or `None`
/// if `class` is not a directory enumeration class this module supports.
pub fn dir_class_fixed_size(class: FileInfoClass) -> Option<usize> {
    Some(match class {
        FileInfoClass::DIRECTORY => 64,
        FileInfoClass::FULL_DIRECTORY => 68,
        FileInfoClass::BOTH_DIRECTORY => 94,
        FileInfoClass::ID_BOTH_DIRECTORY => 104,
        FileInfoClass::ID_FULL_DIRECTORY => 80,
        FileInfoClass::ID_EXTD_DIRECTORY => 88,
        FileInfoClass::NAMES => 12,
        // Its smallest: two SIDs without sub-authorities.
        FileInfoClass::POSIX => 8 + crate::posix::FilePosixInfo::MIN_LEN + 4,
        _ => return None,
    })
}

/// Bytes one entry takes (unpadded), or `None` for an unsupported class.
pub fn dir_entry_len(class: FileInfoClass, e: &DirEntryInfo) -> Option<usize> {
    if class == FileInfoClass::POSIX {
        return Some(crate::posix::dir_entry_len(&e.posix_info()?, &e.name));
    }
    Some(dir_class_fixed_size(class)? + utf16_len(&e.name))
}

const SHORT_NAME_FIELD: usize = 24;

/// Append one entry of `class` with NextEntryOffset 0. Returns the offset in
/// `out` of the entry start (which is where its NextEntryOffset lives), or
/// `None` (nothing written) if `class` is not a supported directory class.
pub fn encode_dir_entry(
    class: FileInfoClass,
    e: &DirEntryInfo,
    out: &mut Vec<u8>,
) -> Option<usize> {
    dir_class_fixed_size(class)?;
    if class == FileInfoClass::POSIX {
        return Some(crate::posix::encode_dir_entry(
            &e.posix_info()?,
            &e.name,
            out,
        ));
    }
    let start = out.len();
    let name_len = to_u32(utf16_len(&e.name));
    out.put_u32(0); // NextEntryOffset
    out.put_u32(e.file_index);
    if class == FileInfoClass::NAMES {
        out.put_u32(name_len);
        encode_utf16le(&e.name, out);
        return Some(start);
    }
    out.put_u64(e.creation_time.0);
    out.put_u64(e.last_access_time.0);
    out.put_u64(e.last_write_time.0);
    out.put_u64(e.change_time.0);
    out.put_u64(e.end_of_file);
    out.put_u64(e.allocation_size);
    out.put_u32(e.file_attributes.0);
    out.put_u32(name_len);
    match class {
        FileInfoClass::FULL_DIRECTORY => out.put_u32(e.ea_size),
        FileInfoClass::ID_FULL_DIRECTORY => {
            out.put_u32(e.ea_size);
            out.put_u32(0); // Reserved
            out.put_u64(e.file_id);
        }
        FileInfoClass::ID_BOTH_DIRECTORY if e.apple.is_some() => {
            let a = e.apple.unwrap_or_default();
            out.put_u32(e.ea_size);
            out.put_u8(SHORT_NAME_FIELD as u8);
            out.put_u8(0); // Reserved1
            out.put_bytes(&a.short_name);
            out.put_u16(a.unix_mode);
            out.put_u64(e.file_id);
        }
        FileInfoClass::BOTH_DIRECTORY | FileInfoClass::ID_BOTH_DIRECTORY => {
            out.put_u32(e.ea_size);
            let short_len = utf16_len(&e.short_name);
            let short = if short_len <= SHORT_NAME_FIELD {
                short_len
            } else {
                0
            };
            out.put_u8(short as u8);
            out.put_u8(0); // Reserved1
            let field = out.len();
            if short > 0 {
                encode_utf16le(&e.short_name, out);
            }
            out.put_zeros(SHORT_NAME_FIELD - (out.len() - field));
            if class == FileInfoClass::ID_BOTH_DIRECTORY {
                out.put_u16(0); // Reserved2
                out.put_u64(e.file_id);
            }
        }
        FileInfoClass::ID_EXTD_DIRECTORY => {
            out.put_u32(e.ea_size);
            out.put_u32(e.reparse_tag);
            out.put_u64(e.file_id);
            out.put_u64(0);
        }
        _ => {} // DIRECTORY: nothing more
    }
    encode_utf16le(&e.name, out);
    Some(start)
}

/// Packs directory entries into a QUERY_DIRECTORY output buffer.
///
/// ```
/// # use ringshare_wire::fscc::{DirEntryChain, DirEntryInfo, FileInfoClass};
/// let mut out = Vec::new();
/// let mut chain = DirEntryChain::new(&out, 4096);
/// let e = DirEntryInfo { name: "a.txt".into(), ..Default::default() };
/// assert!(chain.push(&mut out, FileInfoClass::ID_BOTH_DIRECTORY, &e));
/// assert_eq!(chain.count(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct DirEntryChain {
    base: usize,
    limit: usize,
    last: Option<usize>,
    count: usize,
}

impl DirEntryChain {
    /// Start a chain at the current end of `out`, allowing at most `limit`
    /// bytes of entries (alignment padding included).
    pub fn new(out: &[u8], limit: usize) -> Self {
        DirEntryChain {
            base: out.len(),
            limit,
            last: None,
            count: 0,
        }
    }

    /// Bytes the chain would occupy after padding for the next entry.
    fn padded_used(&self, out: &[u8]) -> usize {
        let used = out.len().saturating_sub(self.base);
        if self.last.is_some() {
            used.div_ceil(8) * 8
        } else {
            used
        }
    }

    /// Whether `e` in `class` can still be appended without passing the limit
    /// (false for an unsupported class).
    pub fn fits(&self, out: &[u8], class: FileInfoClass, e: &DirEntryInfo) -> bool {
        match dir_entry_len(class, e) {
            Some(len) => self
                .padded_used(out)
                .checked_add(len)
                .is_some_and(|end| end <= self.limit),
            None => false,
        }
    }

    /// Append `e` if it [`fits`](Self::fits): pad to 8 bytes, point the
    /// previous entry at it, write it. Returns false (nothing written)
    /// otherwise.
    pub fn push(&mut self, out: &mut Vec<u8>, class: FileInfoClass, e: &DirEntryInfo) -> bool {
        if !self.fits(out, class, e) {
            return false;
        }
        if let Some(prev) = self.last {
            out.pad_to(8, self.base);
            out.patch_u32(prev, to_u32(out.len() - prev));
        }
        self.last = encode_dir_entry(class, e, out);
        self.count += 1;
        true
    }

    /// Entries written so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of entries written so far.
    pub fn len(&self, out: &[u8]) -> usize {
        out.len().saturating_sub(self.base)
    }
}

/// Decode one entry (client side) from `entry`, the bytes from the entry
/// start to the end of the buffer. Returns the entry and how many bytes it
/// uses (fixed part + name).
pub fn decode_dir_entry(
    class: FileInfoClass,
    entry: &[u8],
) -> Result<(DirEntryInfo, usize), WireError> {
    let fixed = dir_class_fixed_size(class).ok_or(WireError::Invalid("FileInformationClass"))?;
    if class == FileInfoClass::POSIX {
        return decode_posix_entry(entry);
    }
    let mut r = Reader::new(entry);
    let mut e = DirEntryInfo::default();
    r.skip(4)?; // NextEntryOffset
    e.file_index = r.u32()?;
    let name_len;
    if class == FileInfoClass::NAMES {
        name_len = r.u32()? as usize;
    } else {
        e.creation_time = FileTime(r.u64()?);
        e.last_access_time = FileTime(r.u64()?);
        e.last_write_time = FileTime(r.u64()?);
        e.change_time = FileTime(r.u64()?);
        e.end_of_file = r.u64()?;
        e.allocation_size = r.u64()?;
        e.file_attributes = FileAttributes(r.u32()?);
        name_len = r.u32()? as usize;
        match class {
            FileInfoClass::FULL_DIRECTORY => e.ea_size = r.u32()?,
            FileInfoClass::ID_FULL_DIRECTORY => {
                e.ea_size = r.u32()?;
                r.skip(4)?;
                e.file_id = r.u64()?;
            }
            FileInfoClass::BOTH_DIRECTORY | FileInfoClass::ID_BOTH_DIRECTORY => {
                e.ea_size = r.u32()?;
                let short_len = usize::from(r.u8()?);
                r.skip(1)?;
                let field = r.bytes(SHORT_NAME_FIELD)?;
                let short = field
                    .get(..short_len)
                    .ok_or(WireError::Invalid("ShortNameLength"))?;
                e.short_name = decode_utf16le(short)?;
                if class == FileInfoClass::ID_BOTH_DIRECTORY {
                    r.skip(2)?;
                    e.file_id = r.u64()?;
                }
            }
            FileInfoClass::ID_EXTD_DIRECTORY => {
                e.ea_size = r.u32()?;
                e.reparse_tag = r.u32()?;
                e.file_id = r.u64()?;
                r.skip(8)?;
            }
            _ => {}
        }
    }
    debug_assert_eq!(r.position(), fixed);
    let mut name = r.sub(name_len)?;
    e.name = decode_utf16le(name.rest())?;
    Ok((e, fixed + name_len))
}

/// One entry of the POSIX class, as [`decode_dir_entry`] gives it.
fn decode_posix_entry(entry: &[u8]) -> Result<(DirEntryInfo, usize), WireError> {
    let (p, name, _) = crate::posix::decode_dir_entry(entry)?;
    let used = crate::posix::dir_entry_len(&p, &name);
    let e = DirEntryInfo {
        creation_time: FileTime(p.creation_time),
        last_access_time: FileTime(p.last_access_time),
        last_write_time: FileTime(p.last_write_time),
        change_time: FileTime(p.change_time),
        end_of_file: p.end_of_file,
        allocation_size: p.allocation_size,
        file_attributes: FileAttributes(p.file_attributes),
        file_id: p.inode,
        name,
        posix: Some(PosixEntry {
            device: p.device,
            cc: p.cc,
        }),
        ..DirEntryInfo::default()
    };
    Ok((e, used))
}

/// Decode a whole QUERY_DIRECTORY output buffer of `class` (client side).
/// Entries must not overlap and NextEntryOffset must stay inside the buffer.
pub fn decode_dir_entries(
    class: FileInfoClass,
    buf: &[u8],
) -> Result<Vec<DirEntryInfo>, WireError> {
    let fixed = dir_class_fixed_size(class).ok_or(WireError::Invalid("FileInformationClass"))?;
    let mut entries = Vec::new();
    walk_chain(buf, fixed, |entry| {
        let (e, used) = decode_dir_entry(class, entry)?;
        entries.push(e);
        Ok(used)
    })?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_CLASSES: [FileInfoClass; 7] = [
        FileInfoClass::DIRECTORY,
        FileInfoClass::FULL_DIRECTORY,
        FileInfoClass::BOTH_DIRECTORY,
        FileInfoClass::ID_BOTH_DIRECTORY,
        FileInfoClass::ID_FULL_DIRECTORY,
        FileInfoClass::ID_EXTD_DIRECTORY,
        FileInfoClass::NAMES,
    ];

    fn sample(name: &str) -> DirEntryInfo {
        DirEntryInfo {
            file_index: 0,
            creation_time: FileTime(1),
            last_access_time: FileTime(2),
            last_write_time: FileTime(3),
            change_time: FileTime(4),
            end_of_file: 5,
            allocation_size: 4096,
            file_attributes: FileAttributes::ARCHIVE,
            ea_size: 0,
            reparse_tag: 0,
            file_id: 0x1122_3344_5566_7788,
            short_name: String::new(),
            name: name.into(),
            apple: None,
            posix: None,
        }
    }

    #[test]
    fn posix_entries_chain_and_decode_back_and_need_their_posix_fields() {
        let mut out = Vec::new();
        let mut chain = DirEntryChain::new(&out, 4096);
        assert!(!chain.push(&mut out, FileInfoClass::POSIX, &sample("none")));
        let posix = PosixEntry {
            device: 9,
            cc: crate::posix::PosixCc {
                nlinks: 1,
                reparse_tag: 0,
                mode: 0o644,
                owner: crate::security::Sid::unix_user(1),
                group: crate::security::Sid::unix_group(2),
            },
        };
        let entries: Vec<DirEntryInfo> = ["a", "bee"]
            .iter()
            .map(|n| DirEntryInfo {
                file_index: 0,
                posix: Some(posix.clone()),
                ..sample(n)
            })
            .collect();
        for e in &entries {
            assert!(chain.push(&mut out, FileInfoClass::POSIX, e));
        }
        assert_eq!(
            decode_dir_entries(FileInfoClass::POSIX, &out).unwrap(),
            entries
        );
    }

    /// What survives a round trip through `class`.
    fn projected(class: FileInfoClass, e: &DirEntryInfo) -> DirEntryInfo {
        let mut p = e.clone();
        if class == FileInfoClass::NAMES {
            p = DirEntryInfo {
                file_index: e.file_index,
                name: e.name.clone(),
                ..Default::default()
            };
        }
        if !matches!(
            class,
            FileInfoClass::ID_BOTH_DIRECTORY
                | FileInfoClass::ID_FULL_DIRECTORY
                | FileInfoClass::ID_EXTD_DIRECTORY
        ) {
            p.file_id = 0;
        }
        if matches!(class, FileInfoClass::DIRECTORY | FileInfoClass::NAMES) {
            p.ea_size = 0;
        }
        if class != FileInfoClass::ID_EXTD_DIRECTORY {
            p.reparse_tag = 0;
        }
        if !matches!(
            class,
            FileInfoClass::BOTH_DIRECTORY | FileInfoClass::ID_BOTH_DIRECTORY
        ) {
            p.short_name.clear();
        }
        p
    }

    #[test]
    fn every_class_round_trips_and_has_its_fixed_size() {
        let mut e = sample("Résumé.docx");
        e.ea_size = 9;
        e.reparse_tag = 0xA000_0003;
        e.short_name = "RESUME~1.DOC".into();
        e.file_index = 3;
        for class in ALL_CLASSES {
            let mut out = vec![0xEE; 3]; // entries need not start at 0
            let at = encode_dir_entry(class, &e, &mut out).unwrap();
            assert_eq!(at, 3);
            let fixed = dir_class_fixed_size(class).unwrap();
            assert_eq!(out.len() - 3, fixed + utf16_len(&e.name), "{class:?}");
            assert_eq!(&out[3..7], &[0, 0, 0, 0]);
            let got = decode_dir_entries(class, &out[3..]).unwrap();
            assert_eq!(got, vec![projected(class, &e)], "{class:?}");
        }
    }

    #[test]
    fn id_both_directory_places_short_name_file_id_and_name_at_spec_offsets() {
        let mut e = sample("ab");
        e.short_name = "AB".into();
        let mut out = Vec::new();
        encode_dir_entry(FileInfoClass::ID_BOTH_DIRECTORY, &e, &mut out);
        assert_eq!(&out[60..64], &4u32.to_le_bytes()); // FileNameLength
        assert_eq!(out[68], 4); // ShortNameLength
        assert_eq!(&out[70..74], &[b'A', 0, b'B', 0]);
        assert_eq!(&out[96..104], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&out[104..], &[b'a', 0, b'b', 0]);
    }

    #[test]
    fn apple_attributes_take_the_short_name_field_and_reserved2() {
        let mut e = sample("m");
        e.ea_size = 0x001F_01FF;
        let mut short = [0u8; 24];
        short[0] = 3;
        short[8..12].copy_from_slice(b"TEXT");
        e.apple = Some(AppleDirAttr {
            short_name: short,
            unix_mode: 0o100644,
        });
        let mut out = Vec::new();
        encode_dir_entry(FileInfoClass::ID_BOTH_DIRECTORY, &e, &mut out).unwrap();
        assert_eq!(&out[64..68], &0x001F_01FFu32.to_le_bytes());
        assert_eq!((out[68], out[69]), (24, 0));
        assert_eq!(&out[70..94], &short);
        assert_eq!(&out[94..96], &0o100644u16.to_le_bytes());
        assert_eq!(&out[96..104], &e.file_id.to_le_bytes());
        assert_eq!(out.len(), 104 + 2);
    }

    #[test]
    fn over_long_short_name_is_sent_empty() {
        let mut e = sample("x");
        e.short_name = "THIRTEEN_CHAR".into();
        let mut out = Vec::new();
        encode_dir_entry(FileInfoClass::BOTH_DIRECTORY, &e, &mut out);
        assert_eq!(out.len(), 94 + 2);
        assert_eq!(out[68], 0);
    }

    #[test]
    fn unsupported_class_writes_nothing() {
        let mut out = Vec::new();
        assert_eq!(
            encode_dir_entry(FileInfoClass::BASIC, &sample("a"), &mut out),
            None
        );
        assert!(out.is_empty());
        let chain = DirEntryChain::new(&out, 1000);
        assert!(!chain.fits(&out, FileInfoClass::BASIC, &sample("a")));
    }

    #[test]
    fn chain_aligns_entries_to_8_bytes_and_patches_next_offsets() {
        let mut out = vec![0u8; 8]; // pretend header bytes before the buffer
        let mut chain = DirEntryChain::new(&out, 1000);
        let class = FileInfoClass::DIRECTORY;
        for n in ["a", "bbb", "c"] {
            assert!(chain.push(&mut out, class, &sample(n)));
        }
        let buf = &out[8..];
        // 64 + 2 = 66 -> 72; 64 + 6 = 70 -> 72; last unpadded.
        assert_eq!(&buf[0..4], &72u32.to_le_bytes());
        assert_eq!(&buf[72..76], &72u32.to_le_bytes());
        assert_eq!(&buf[144..148], &0u32.to_le_bytes());
        assert_eq!(buf.len(), 144 + 66);
        assert_eq!(chain.count(), 3);
        assert_eq!(chain.len(&out), 210);
        let names: Vec<_> = decode_dir_entries(class, buf)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a", "bbb", "c"]);
    }

    #[test]
    fn chain_stops_at_the_limit_counting_padding() {
        let class = FileInfoClass::NAMES;
        // Each "a" entry is 14 bytes; the second starts at 16.
        let mut out = Vec::new();
        let mut chain = DirEntryChain::new(&out, 29);
        assert!(chain.push(&mut out, class, &sample("a")));
        assert!(!chain.fits(&out, class, &sample("a")));
        assert!(!chain.push(&mut out, class, &sample("a")));
        assert_eq!(out.len(), 14);
        let mut out = Vec::new();
        let mut chain = DirEntryChain::new(&out, 30);
        assert!(chain.push(&mut out, class, &sample("a")));
        assert!(chain.push(&mut out, class, &sample("a")));
        assert_eq!(out.len(), 30);
        let mut chain = DirEntryChain::new(&out, 13);
        let mut empty = Vec::new();
        assert!(!chain.push(&mut empty, class, &sample("a")));
        assert!(chain.is_empty());
    }

    #[test]
    fn decode_rejects_name_length_past_end_and_looping_offsets() {
        let mut out = Vec::new();
        encode_dir_entry(FileInfoClass::DIRECTORY, &sample("abc"), &mut out);
        let mut bad = out.clone();
        bad[60] = 100;
        assert!(decode_dir_entries(FileInfoClass::DIRECTORY, &bad).is_err());
        let mut bad = out.clone();
        bad[0] = 4; // next entry inside this one
        assert!(decode_dir_entries(FileInfoClass::DIRECTORY, &bad).is_err());
        assert!(decode_dir_entries(FileInfoClass::DIRECTORY, &out[..63]).is_err());
        assert!(decode_dir_entries(FileInfoClass::BASIC, &out).is_err());
        let mut bad = Vec::new();
        let mut e = sample("x");
        e.short_name = "A".into();
        encode_dir_entry(FileInfoClass::BOTH_DIRECTORY, &e, &mut bad);
        bad[68] = 30; // ShortNameLength past the 24-byte field
        assert_eq!(
            decode_dir_entries(FileInfoClass::BOTH_DIRECTORY, &bad),
            Err(WireError::Invalid("ShortNameLength"))
        );
    }
}
