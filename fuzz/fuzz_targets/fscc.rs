//! [MS-FSCC] information classes: the file classes SET_INFO decodes (and the
//! query classes a client decodes), the filesystem classes, and directory
//! listings; every class with an encoder must round-trip.
//! Input: [InfoType][class][buffer]; InfoType 1 = file, 2 = filesystem,
//! 4 = quota (class 0: an SMB2_QUERY_QUOTA_INFO, else a FILE_QUOTA_INFORMATION
//! list), 0x80 = a QUERY_DIRECTORY output buffer of that class.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::fscc::{self as f, decode_dir_entries, FileInfoClass, FsInfoClass};

macro_rules! round_trip {
    ($ty:ty, $buf:expr) => {{
        if let Ok(first) = <$ty>::decode($buf) {
            let mut out = Vec::new();
            first.encode(&mut out);
            let second = <$ty>::decode(&out)
                .unwrap_or_else(|e| panic!("{} re-encoded does not decode: {e}", stringify!($ty)));
            assert_eq!(first, second, "{} does not round-trip", stringify!($ty));
        }
    }};
}

fn file_class(class: FileInfoClass, buf: &[u8]) {
    match class {
        FileInfoClass::BASIC => round_trip!(f::FileBasicInformation, buf),
        FileInfoClass::STANDARD => round_trip!(f::FileStandardInformation, buf),
        FileInfoClass::INTERNAL => round_trip!(f::FileInternalInformation, buf),
        FileInfoClass::EA => round_trip!(f::FileEaInformation, buf),
        FileInfoClass::ACCESS => round_trip!(f::FileAccessInformation, buf),
        FileInfoClass::NAME | FileInfoClass::ALTERNATE_NAME | FileInfoClass::NORMALIZED_NAME => {
            round_trip!(f::FileNameInformation, buf)
        }
        FileInfoClass::RENAME | FileInfoClass::LINK | FileInfoClass::RENAME_EX => {
            round_trip!(f::FileRenameInformation, buf)
        }
        FileInfoClass::DISPOSITION => round_trip!(f::FileDispositionInformation, buf),
        FileInfoClass::DISPOSITION_EX => round_trip!(f::FileDispositionInformationEx, buf),
        FileInfoClass::POSITION => round_trip!(f::FilePositionInformation, buf),
        FileInfoClass::FULL_EA => round_trip!(f::FileFullEaInformation, buf),
        FileInfoClass::MODE => round_trip!(f::FileModeInformation, buf),
        FileInfoClass::ALIGNMENT => round_trip!(f::FileAlignmentInformation, buf),
        FileInfoClass::ALL => round_trip!(f::FileAllInformation, buf),
        FileInfoClass::ALLOCATION => round_trip!(f::FileAllocationInformation, buf),
        FileInfoClass::END_OF_FILE => round_trip!(f::FileEndOfFileInformation, buf),
        FileInfoClass::STREAM => round_trip!(f::FileStreamInformation, buf),
        FileInfoClass::COMPRESSION => round_trip!(f::FileCompressionInformation, buf),
        FileInfoClass::NETWORK_OPEN => round_trip!(f::FileNetworkOpenInformation, buf),
        FileInfoClass::ATTRIBUTE_TAG => round_trip!(f::FileAttributeTagInformation, buf),
        FileInfoClass::ID => round_trip!(f::FileIdInformation, buf),
        _ => {}
    }
}

fn fs_class(class: FsInfoClass, buf: &[u8]) {
    match class {
        FsInfoClass::VOLUME => round_trip!(f::FileFsVolumeInformation, buf),
        FsInfoClass::SIZE => round_trip!(f::FileFsSizeInformation, buf),
        FsInfoClass::DEVICE => round_trip!(f::FileFsDeviceInformation, buf),
        FsInfoClass::ATTRIBUTE => round_trip!(f::FileFsAttributeInformation, buf),
        FsInfoClass::CONTROL => round_trip!(f::FileFsControlInformation, buf),
        FsInfoClass::FULL_SIZE => round_trip!(f::FileFsFullSizeInformation, buf),
        FsInfoClass::OBJECT_ID => round_trip!(f::FileFsObjectIdInformation, buf),
        FsInfoClass::SECTOR_SIZE => round_trip!(f::FileFsSectorSizeInformation, buf),
        FsInfoClass::POSIX => round_trip!(ringshare_wire::posix::FsPosixInfo, buf),
        _ => {}
    }
}

/// A quota query's input buffer or a list of quota entries: bounded by the buffer, and a
/// decoded value survives its own encoding.
fn quota(class: u8, buf: &[u8]) {
    if class == 0 {
        if let Ok(q) = f::QueryQuotaInfo::decode(buf) {
            assert!(q.sids.len() <= buf.len() / 16, "more SIDs than fit");
            let mut out = Vec::new();
            q.encode(&mut out);
            assert_eq!(f::QueryQuotaInfo::decode(&out).ok(), Some(q));
        }
    } else if let Ok(list) = f::FileQuotaInformation::decode_list(buf) {
        assert!(list.len() <= buf.len() / 48, "more entries than fit");
        let mut out = Vec::new();
        f::FileQuotaInformation::encode_list(&list, &mut out);
        assert_eq!(f::FileQuotaInformation::decode_list(&out).ok(), Some(list));
    }
}

fuzz_target!(|data: &[u8]| {
    let [info_type, class, buf @ ..] = data else {
        return;
    };
    match info_type {
        1 => file_class(FileInfoClass(*class), buf),
        2 => fs_class(FsInfoClass(*class), buf),
        4 => quota(*class, buf),
        0x80 => {
            if let Ok(entries) = decode_dir_entries(FileInfoClass(*class), buf) {
                assert!(entries.len() <= buf.len() / 8, "more entries than fit");
            }
        }
        _ => {}
    }
});
