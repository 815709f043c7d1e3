//! [MS-FSCC] 2.5 filesystem information classes (SMB2 QUERY_INFO with
//! InfoType SMB2_0_INFO_FILESYSTEM).

use super::{need, FileTime};
use crate::codec::{to_u32, WriteExt};
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::WireError;

/// FILE_FS_VOLUME_INFORMATION: 18 bytes plus the label.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFsVolumeInformation {
    pub volume_creation_time: FileTime,
    pub volume_serial_number: u32,
    pub supports_objects: bool,
    pub volume_label: String,
}

impl FileFsVolumeInformation {
    /// Size without the label.
    pub const FIXED_SIZE: usize = 18;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.volume_creation_time.0);
        out.put_u32(self.volume_serial_number);
        out.put_u32(to_u32(utf16_len(&self.volume_label)));
        out.put_u8(u8::from(self.supports_objects));
        out.put_u8(0); // Reserved
        encode_utf16le(&self.volume_label, out);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::FIXED_SIZE)?;
        let volume_creation_time = FileTime(r.u64()?);
        let volume_serial_number = r.u32()?;
        let label_len = r.u32()? as usize;
        let supports_objects = r.u8()? != 0;
        r.skip(1)?;
        let mut label = r.sub(label_len)?;
        Ok(Self {
            volume_creation_time,
            volume_serial_number,
            supports_objects,
            volume_label: decode_utf16le(label.rest())?,
        })
    }
}

/// FILE_FS_SIZE_INFORMATION: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileFsSizeInformation {
    pub total_allocation_units: u64,
    pub available_allocation_units: u64,
    pub sectors_per_allocation_unit: u32,
    pub bytes_per_sector: u32,
}

impl FileFsSizeInformation {
    pub const SIZE: usize = 24;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.total_allocation_units);
        out.put_u64(self.available_allocation_units);
        out.put_u32(self.sectors_per_allocation_unit);
        out.put_u32(self.bytes_per_sector);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            total_allocation_units: r.u64()?,
            available_allocation_units: r.u64()?,
            sectors_per_allocation_unit: r.u32()?,
            bytes_per_sector: r.u32()?,
        })
    }
}

/// FILE_FS_FULL_SIZE_INFORMATION: 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileFsFullSizeInformation {
    pub total_allocation_units: u64,
    /// Units available to the calling user (quota applied).
    pub caller_available_allocation_units: u64,
    pub actual_available_allocation_units: u64,
    pub sectors_per_allocation_unit: u32,
    pub bytes_per_sector: u32,
}

impl FileFsFullSizeInformation {
    pub const SIZE: usize = 32;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.total_allocation_units);
        out.put_u64(self.caller_available_allocation_units);
        out.put_u64(self.actual_available_allocation_units);
        out.put_u32(self.sectors_per_allocation_unit);
        out.put_u32(self.bytes_per_sector);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            total_allocation_units: r.u64()?,
            caller_available_allocation_units: r.u64()?,
            actual_available_allocation_units: r.u64()?,
            sectors_per_allocation_unit: r.u32()?,
            bytes_per_sector: r.u32()?,
        })
    }
}

/// FILE_DEVICE_DISK: the DeviceType a file share reports.
pub const FILE_DEVICE_DISK: u32 = 0x0000_0007;
/// FILE_DEVICE_CD_ROM.
pub const FILE_DEVICE_CD_ROM: u32 = 0x0000_0002;
/// Device characteristic: removable media.
pub const FILE_REMOVABLE_MEDIA: u32 = 0x0000_0001;
/// Device characteristic: read-only device.
pub const FILE_READ_ONLY_DEVICE: u32 = 0x0000_0002;
/// Device characteristic: floppy.
pub const FILE_FLOPPY_DISKETTE: u32 = 0x0000_0004;
/// Device characteristic: write-once media.
pub const FILE_WRITE_ONCE_MEDIA: u32 = 0x0000_0008;
/// Device characteristic: a remote (network) device.
pub const FILE_REMOTE_DEVICE: u32 = 0x0000_0010;
/// Device characteristic: the volume is mounted.
pub const FILE_DEVICE_IS_MOUNTED: u32 = 0x0000_0020;
/// Device characteristic: a virtual volume.
pub const FILE_VIRTUAL_VOLUME: u32 = 0x0000_0040;
/// Device characteristic: secure open is enforced.
pub const FILE_DEVICE_SECURE_OPEN: u32 = 0x0000_0100;

/// FILE_FS_DEVICE_INFORMATION: 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileFsDeviceInformation {
    pub device_type: u32,
    pub characteristics: u32,
}

impl FileFsDeviceInformation {
    pub const SIZE: usize = 8;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.device_type);
        out.put_u32(self.characteristics);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            device_type: r.u32()?,
            characteristics: r.u32()?,
        })
    }
}

// FileSystemAttributes flags of FILE_FS_ATTRIBUTE_INFORMATION.
/// The filesystem supports case-sensitive file names.
pub const FILE_CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
/// The filesystem preserves the case of file names.
pub const FILE_CASE_PRESERVED_NAMES: u32 = 0x0000_0002;
/// Names are stored as Unicode.
pub const FILE_UNICODE_ON_DISK: u32 = 0x0000_0004;
/// The filesystem preserves and enforces ACLs.
pub const FILE_PERSISTENT_ACLS: u32 = 0x0000_0008;
/// Per-file compression.
pub const FILE_FILE_COMPRESSION: u32 = 0x0000_0010;
/// Disk quotas.
pub const FILE_VOLUME_QUOTAS: u32 = 0x0000_0020;
/// Sparse files.
pub const FILE_SUPPORTS_SPARSE_FILES: u32 = 0x0000_0040;
/// Reparse points.
pub const FILE_SUPPORTS_REPARSE_POINTS: u32 = 0x0000_0080;
/// Remote storage.
pub const FILE_SUPPORTS_REMOTE_STORAGE: u32 = 0x0000_0100;
/// The volume is compressed.
pub const FILE_VOLUME_IS_COMPRESSED: u32 = 0x0000_8000;
/// Object identifiers.
pub const FILE_SUPPORTS_OBJECT_IDS: u32 = 0x0001_0000;
/// EFS encryption.
pub const FILE_SUPPORTS_ENCRYPTION: u32 = 0x0002_0000;
/// Named streams.
pub const FILE_NAMED_STREAMS: u32 = 0x0004_0000;
/// The volume is read-only.
pub const FILE_READ_ONLY_VOLUME: u32 = 0x0008_0000;
/// Sequential write once.
pub const FILE_SEQUENTIAL_WRITE_ONCE: u32 = 0x0010_0000;
/// Transactions.
pub const FILE_SUPPORTS_TRANSACTIONS: u32 = 0x0020_0000;
/// Hard links.
pub const FILE_SUPPORTS_HARD_LINKS: u32 = 0x0040_0000;
/// Extended attributes.
pub const FILE_SUPPORTS_EXTENDED_ATTRIBUTES: u32 = 0x0080_0000;
/// Open by file id.
pub const FILE_SUPPORTS_OPEN_BY_FILE_ID: u32 = 0x0100_0000;
/// USN journal.
pub const FILE_SUPPORTS_USN_JOURNAL: u32 = 0x0200_0000;
/// Integrity streams.
pub const FILE_SUPPORT_INTEGRITY_STREAMS: u32 = 0x0400_0000;
/// Block refcounting.
pub const FILE_SUPPORTS_BLOCK_REFCOUNTING: u32 = 0x0800_0000;
/// Sparse valid data length.
pub const FILE_SUPPORTS_SPARSE_VDL: u32 = 0x1000_0000;

/// FILE_FS_ATTRIBUTE_INFORMATION: 12 bytes plus the filesystem name
/// (e.g. "NTFS").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFsAttributeInformation {
    /// `FILE_CASE_*`, `FILE_SUPPORTS_*` ... flags.
    pub file_system_attributes: u32,
    /// Longest file name component in characters (255 usually).
    pub maximum_component_name_length: u32,
    pub file_system_name: String,
}

impl FileFsAttributeInformation {
    /// Size without the name.
    pub const FIXED_SIZE: usize = 12;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.file_system_attributes);
        out.put_u32(self.maximum_component_name_length);
        out.put_u32(to_u32(utf16_len(&self.file_system_name)));
        encode_utf16le(&self.file_system_name, out);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::FIXED_SIZE)?;
        let file_system_attributes = r.u32()?;
        let maximum_component_name_length = r.u32()?;
        Ok(Self {
            file_system_attributes,
            maximum_component_name_length,
            file_system_name: super::read_len_name(&mut r)?,
        })
    }
}

/// FILE_FS_OBJECTID_INFORMATION: 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFsObjectIdInformation {
    pub object_id: [u8; 16],
    pub extended_info: [u8; 48],
}

impl Default for FileFsObjectIdInformation {
    fn default() -> Self {
        Self {
            object_id: [0; 16],
            extended_info: [0; 48],
        }
    }
}

impl FileFsObjectIdInformation {
    pub const SIZE: usize = 64;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.object_id);
        out.put_bytes(&self.extended_info);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            object_id: r.array()?,
            extended_info: r.array()?,
        })
    }
}

/// SSINFO flag: the first physical sector is aligned to the device.
pub const SSINFO_FLAGS_ALIGNED_DEVICE: u32 = 0x0000_0001;
/// SSINFO flag: the partition is aligned to physical sectors.
pub const SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE: u32 = 0x0000_0002;
/// SSINFO flag: no seek penalty (SSD).
pub const SSINFO_FLAGS_NO_SEEK_PENALTY: u32 = 0x0000_0004;
/// SSINFO flag: TRIM supported.
pub const SSINFO_FLAGS_TRIM_ENABLED: u32 = 0x0000_0008;
/// ByteOffsetFor*Alignment value meaning "unknown".
pub const SSINFO_OFFSET_UNKNOWN: u32 = 0xFFFF_FFFF;

/// FILE_FS_SECTOR_SIZE_INFORMATION: 28 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileFsSectorSizeInformation {
    pub logical_bytes_per_sector: u32,
    pub physical_bytes_per_sector_for_atomicity: u32,
    pub physical_bytes_per_sector_for_performance: u32,
    pub file_system_effective_physical_bytes_per_sector_for_atomicity: u32,
    /// `SSINFO_FLAGS_*`.
    pub flags: u32,
    pub byte_offset_for_sector_alignment: u32,
    pub byte_offset_for_partition_alignment: u32,
}

impl FileFsSectorSizeInformation {
    pub const SIZE: usize = 28;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.logical_bytes_per_sector);
        out.put_u32(self.physical_bytes_per_sector_for_atomicity);
        out.put_u32(self.physical_bytes_per_sector_for_performance);
        out.put_u32(self.file_system_effective_physical_bytes_per_sector_for_atomicity);
        out.put_u32(self.flags);
        out.put_u32(self.byte_offset_for_sector_alignment);
        out.put_u32(self.byte_offset_for_partition_alignment);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            logical_bytes_per_sector: r.u32()?,
            physical_bytes_per_sector_for_atomicity: r.u32()?,
            physical_bytes_per_sector_for_performance: r.u32()?,
            file_system_effective_physical_bytes_per_sector_for_atomicity: r.u32()?,
            flags: r.u32()?,
            byte_offset_for_sector_alignment: r.u32()?,
            byte_offset_for_partition_alignment: r.u32()?,
        })
    }
}

/// FileSystemControlFlags: quotas are tracked.
pub const FILE_VC_QUOTA_TRACK: u32 = 0x0000_0001;
/// FileSystemControlFlags: quota limits are enforced.
pub const FILE_VC_QUOTA_ENFORCE: u32 = 0x0000_0002;
/// FileSystemControlFlags: content indexing is disabled.
pub const FILE_VC_CONTENT_INDEX_DISABLED: u32 = 0x0000_0008;
/// FileSystemControlFlags: log quota threshold events.
pub const FILE_VC_LOG_QUOTA_THRESHOLD: u32 = 0x0000_0010;
/// FileSystemControlFlags: log quota limit events.
pub const FILE_VC_LOG_QUOTA_LIMIT: u32 = 0x0000_0020;
/// FileSystemControlFlags: log volume threshold events.
pub const FILE_VC_LOG_VOLUME_THRESHOLD: u32 = 0x0000_0040;
/// FileSystemControlFlags: log volume limit events.
pub const FILE_VC_LOG_VOLUME_LIMIT: u32 = 0x0000_0080;
/// FileSystemControlFlags: quota information is out of date.
pub const FILE_VC_QUOTAS_INCOMPLETE: u32 = 0x0000_0100;
/// FileSystemControlFlags: quotas are being rebuilt.
pub const FILE_VC_QUOTAS_REBUILDING: u32 = 0x0000_0200;

/// FILE_FS_CONTROL_INFORMATION: 48 bytes. ringshare's core answers
/// STATUS_NOT_SUPPORTED / INVALID_DEVICE_REQUEST for this class; the
/// structure is here for clients and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileFsControlInformation {
    pub free_space_start_filtering: u64,
    pub free_space_threshold: u64,
    pub free_space_stop_filtering: u64,
    pub default_quota_threshold: u64,
    pub default_quota_limit: u64,
    /// `FILE_VC_*`.
    pub file_system_control_flags: u32,
}

impl FileFsControlInformation {
    pub const SIZE: usize = 48;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.free_space_start_filtering);
        out.put_u64(self.free_space_threshold);
        out.put_u64(self.free_space_stop_filtering);
        out.put_u64(self.default_quota_threshold);
        out.put_u64(self.default_quota_limit);
        out.put_u32(self.file_system_control_flags);
        out.put_u32(0); // Padding
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = need(buf, Self::SIZE)?;
        Ok(Self {
            free_space_start_filtering: r.u64()?,
            free_space_threshold: r.u64()?,
            free_space_stop_filtering: r.u64()?,
            default_quota_threshold: r.u64()?,
            default_quota_limit: r.u64()?,
            file_system_control_flags: r.u32()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_information_has_label_after_18_bytes_and_round_trips() {
        let v = FileFsVolumeInformation {
            volume_creation_time: FileTime(5),
            volume_serial_number: 0xDEAD_BEEF,
            supports_objects: false,
            volume_label: "share".into(),
        };
        let mut b = Vec::new();
        v.encode(&mut b);
        assert_eq!(b.len(), 18 + 10);
        assert_eq!(&b[12..16], &10u32.to_le_bytes());
        assert_eq!(&b[18..20], &[b's', 0]);
        assert_eq!(FileFsVolumeInformation::decode(&b).unwrap(), v);
        b[12] = 12; // label length past the end
        assert!(FileFsVolumeInformation::decode(&b).is_err());
    }

    #[test]
    fn attribute_information_round_trips_and_rejects_bad_length() {
        let a = FileFsAttributeInformation {
            file_system_attributes: FILE_CASE_PRESERVED_NAMES
                | FILE_UNICODE_ON_DISK
                | FILE_SUPPORTS_SPARSE_FILES,
            maximum_component_name_length: 255,
            file_system_name: "NTFS".into(),
        };
        let mut b = Vec::new();
        a.encode(&mut b);
        assert_eq!(b.len(), 12 + 8);
        assert_eq!(&b[..4], &0x46u32.to_le_bytes());
        assert_eq!(FileFsAttributeInformation::decode(&b).unwrap(), a);
        b[8] = 9;
        assert!(FileFsAttributeInformation::decode(&b).is_err());
    }

    #[test]
    fn fixed_filesystem_classes_have_spec_sizes_and_round_trip() {
        let s = FileFsSizeInformation {
            total_allocation_units: 100,
            available_allocation_units: 50,
            sectors_per_allocation_unit: 8,
            bytes_per_sector: 512,
        };
        let mut b = Vec::new();
        s.encode(&mut b);
        assert_eq!(b.len(), 24);
        assert_eq!(FileFsSizeInformation::decode(&b).unwrap(), s);

        let f = FileFsFullSizeInformation {
            total_allocation_units: 100,
            caller_available_allocation_units: 40,
            actual_available_allocation_units: 50,
            sectors_per_allocation_unit: 8,
            bytes_per_sector: 512,
        };
        let mut b = Vec::new();
        f.encode(&mut b);
        assert_eq!(b.len(), 32);
        assert_eq!(FileFsFullSizeInformation::decode(&b).unwrap(), f);
        assert!(FileFsFullSizeInformation::decode(&b[..31]).is_err());

        let d = FileFsDeviceInformation {
            device_type: FILE_DEVICE_DISK,
            characteristics: FILE_REMOTE_DEVICE | FILE_DEVICE_IS_MOUNTED,
        };
        let mut b = Vec::new();
        d.encode(&mut b);
        assert_eq!(b, [7, 0, 0, 0, 0x30, 0, 0, 0]);
        assert_eq!(FileFsDeviceInformation::decode(&b).unwrap(), d);

        let o = FileFsObjectIdInformation {
            object_id: [1; 16],
            extended_info: [2; 48],
        };
        let mut b = Vec::new();
        o.encode(&mut b);
        assert_eq!(b.len(), 64);
        assert_eq!(FileFsObjectIdInformation::decode(&b).unwrap(), o);

        let ss = FileFsSectorSizeInformation {
            logical_bytes_per_sector: 512,
            physical_bytes_per_sector_for_atomicity: 4096,
            physical_bytes_per_sector_for_performance: 4096,
            file_system_effective_physical_bytes_per_sector_for_atomicity: 4096,
            flags: SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE,
            byte_offset_for_sector_alignment: 0,
            byte_offset_for_partition_alignment: 0,
        };
        let mut b = Vec::new();
        ss.encode(&mut b);
        assert_eq!(b.len(), 28);
        assert_eq!(FileFsSectorSizeInformation::decode(&b).unwrap(), ss);

        let c = FileFsControlInformation {
            default_quota_limit: u64::MAX,
            file_system_control_flags: FILE_VC_QUOTA_TRACK,
            ..Default::default()
        };
        let mut b = Vec::new();
        c.encode(&mut b);
        assert_eq!(b.len(), 48);
        assert_eq!(FileFsControlInformation::decode(&b).unwrap(), c);
    }
}
