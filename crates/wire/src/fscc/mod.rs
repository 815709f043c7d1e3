//! [MS-FSCC] structures carried inside SMB2 QUERY_INFO, SET_INFO and
//! QUERY_DIRECTORY: times, file attributes, information class numbers, the
//! file / directory / filesystem information structures, and the
//! QUERY_DIRECTORY wildcard matcher of [MS-FSA] 2.1.4.4.
//!
//! Every structure has `encode(&self, out: &mut Vec<u8>)` (append) and
//! `decode(buf: &[u8]) -> Result<Self, WireError>`. `decode` takes the whole
//! information buffer, requires at least the fixed size and ignores trailing
//! bytes (SET_INFO buffers are often padded); variable parts are followed only
//! through [`Reader::sub`](crate::codec::Reader::sub).
//!
//! * [`file_info`] - [MS-FSCC] 2.4 classes for QUERY_INFO / SET_INFO.
//! * [`dir_info`] - [MS-FSCC] 2.4 directory enumeration classes, one
//!   [`DirEntryInfo`] for all of them, and [`DirEntryChain`] to pack a
//!   QUERY_DIRECTORY output buffer.
//! * [`fs_info`] - [MS-FSCC] 2.5 filesystem classes.
//! * [`notify`] - [MS-FSCC] 2.7.1 FILE_NOTIFY_INFORMATION chains.
//! * [`quota`] - SMB2_QUERY_QUOTA_INFO and the [MS-FSCC] 2.4.41 quota lists.
//! * [`wildcard`] - [`name_matches`].

pub mod dir_info;
pub mod file_info;
pub mod fs_info;
pub mod notify;
pub mod quota;
pub mod wildcard;

pub use dir_info::{
    decode_dir_entries, encode_dir_entry, AppleDirAttr, DirEntryChain, DirEntryInfo,
};
pub use file_info::*;
pub use fs_info::*;
pub use notify::*;
pub use quota::{
    decode_get_quota_list, encode_get_quota_list, FileQuotaInformation, QueryQuotaInfo,
};
pub use wildcard::name_matches;

use crate::codec::Reader;
use crate::utf16::decode_utf16le;
use crate::WireError;

/// A Windows FILETIME: 100-nanosecond intervals since 1601-01-01 00:00 UTC
/// ([MS-DTYP] 2.3.3). Carried as a signed 64-bit LARGE_INTEGER in [MS-FSCC]
/// structures; valid times are in `0..=i64::MAX`.
///
/// Special values, meaningful only in SET_INFO (FileBasicInformation,
/// [MS-FSCC] 2.4.7): `0` means "do not change this time", `-1`
/// ([`FileTime::STOP_UPDATING`]) means "stop updating this time automatically
/// for this handle", `-2` ([`FileTime::RESUME_UPDATING`]) means "resume
/// automatic updates". In a query response `0` means "unknown / not
/// supported". See [`FileTime::set_info_action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileTime(pub u64);

/// What a FileBasicInformation time in a SET_INFO asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeChange {
    /// 0: leave the time as it is.
    Keep,
    /// Set the time to this value.
    Set(FileTime),
    /// -1: stop updating this time automatically on this handle.
    StopAutoUpdate,
    /// -2: resume automatic updates on this handle.
    ResumeAutoUpdate,
}

impl FileTime {
    /// "No time": unknown in a response, "don't change" in SET_INFO.
    pub const ZERO: FileTime = FileTime(0);
    /// -1 in SET_INFO: stop automatic updates of this time.
    pub const STOP_UPDATING: FileTime = FileTime(u64::MAX);
    /// -2 in SET_INFO: resume automatic updates of this time.
    pub const RESUME_UPDATING: FileTime = FileTime(u64::MAX - 1);
    /// 1970-01-01 00:00 UTC.
    pub const UNIX_EPOCH: FileTime = FileTime(116_444_736_000_000_000);
    /// The latest time representable as a positive LARGE_INTEGER.
    pub const MAX: FileTime = FileTime(i64::MAX as u64);

    /// Convert nanoseconds since the Unix epoch (negative = before 1970).
    /// Sub-100 ns precision is floored; times before 1601 clamp to
    /// [`FileTime::ZERO`] and times past [`FileTime::MAX`] clamp to it, so the
    /// result is never one of the SET_INFO special values -1 / -2.
    pub fn from_unix_nanos(nanos: i128) -> FileTime {
        // Every time from 1678 to 2262 fits an i64 of nanoseconds, and its FILETIME then
        // lies inside 0..=i64::MAX with no clamping: divide in 64 bits (a 128-bit division is
        // a call into the compiler's runtime, and a listing makes four per entry).
        if let Ok(n) = i64::try_from(nanos) {
            return FileTime((n.div_euclid(100) + Self::UNIX_EPOCH.0 as i64) as u64);
        }
        Self::from_unix_nanos_wide(nanos)
    }

    /// [`Self::from_unix_nanos`] in 128 bits, for any time.
    fn from_unix_nanos_wide(nanos: i128) -> FileTime {
        let ticks = nanos.div_euclid(100) + i128::from(Self::UNIX_EPOCH.0);
        FileTime(ticks.clamp(0, i128::from(i64::MAX)) as u64)
    }

    /// Nanoseconds since the Unix epoch (negative before 1970). The special
    /// values are converted as plain numbers; check [`Self::set_info_action`]
    /// first when handling SET_INFO.
    pub fn to_unix_nanos(&self) -> i128 {
        (i128::from(self.0) - i128::from(Self::UNIX_EPOCH.0)) * 100
    }

    /// Interpret this value as a FileBasicInformation time in SET_INFO.
    pub fn set_info_action(self) -> TimeChange {
        match self {
            FileTime::ZERO => TimeChange::Keep,
            FileTime::STOP_UPDATING => TimeChange::StopAutoUpdate,
            FileTime::RESUME_UPDATING => TimeChange::ResumeAutoUpdate,
            t => TimeChange::Set(t),
        }
    }
}

/// A UTC date and time `(year, month, day, hour, minute, second)` from seconds since the Unix
/// epoch (proleptic Gregorian calendar; H. Hinnant's days-to-civil algorithm).
pub fn civil_from_unix(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let rem = rem as u32;
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Seconds since the Unix epoch of a UTC date and time (the inverse of [`civil_from_unix`]).
pub fn unix_from_civil(y: i64, m: u32, d: u32, hour: u32, min: u32, sec: u32) -> i64 {
    let (m, d) = (i64::from(m), i64::from(d));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + i64::from(hour) * 3600 + i64::from(min) * 60 + i64::from(sec)
}

// File attributes ([MS-FSCC] 2.6) are `crate::consts::FileAttributes`.
pub use crate::consts::FileAttributes;

/// A file information class number ([MS-FSCC] 2.4; values as in
/// FILE_INFORMATION_CLASS), as carried in the
/// FileInfoClass byte of SMB2 QUERY_INFO / SET_INFO (InfoType
/// SMB2_0_INFO_FILE) and QUERY_DIRECTORY. Unknown values round-trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileInfoClass(pub u8);

/// A filesystem information class number ([MS-FSCC] 2.5), as carried in
/// QUERY_INFO / SET_INFO with InfoType SMB2_0_INFO_FILESYSTEM.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FsInfoClass(pub u8);

macro_rules! named_classes {
    ($ty:ident { $($(#[$m:meta])* $name:ident = $val:expr, $spec:literal;)* }) => {
        impl $ty {
            $($(#[$m])* pub const $name: $ty = $ty($val);)*

            /// The spec name of this class, if known.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some($spec),)*
                    _ => None,
                }
            }
        }

        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({})", stringify!($ty), self.0),
                }
            }
        }
    };
}

named_classes!(FileInfoClass {
    /// QUERY_DIRECTORY.
    DIRECTORY = 1, "FileDirectoryInformation";
    /// QUERY_DIRECTORY.
    FULL_DIRECTORY = 2, "FileFullDirectoryInformation";
    /// QUERY_DIRECTORY.
    BOTH_DIRECTORY = 3, "FileBothDirectoryInformation";
    /// Query, set.
    BASIC = 4, "FileBasicInformation";
    /// Query.
    STANDARD = 5, "FileStandardInformation";
    /// Query.
    INTERNAL = 6, "FileInternalInformation";
    /// Query.
    EA = 7, "FileEaInformation";
    /// Query.
    ACCESS = 8, "FileAccessInformation";
    /// Query; not in SMB2 QUERY_INFO by itself on Windows.
    NAME = 9, "FileNameInformation";
    /// Set.
    RENAME = 10, "FileRenameInformation";
    /// Set.
    LINK = 11, "FileLinkInformation";
    /// QUERY_DIRECTORY.
    NAMES = 12, "FileNamesInformation";
    /// Set.
    DISPOSITION = 13, "FileDispositionInformation";
    /// Query, set.
    POSITION = 14, "FilePositionInformation";
    /// Query, set.
    FULL_EA = 15, "FileFullEaInformation";
    /// Query, set.
    MODE = 16, "FileModeInformation";
    /// Query.
    ALIGNMENT = 17, "FileAlignmentInformation";
    /// Query.
    ALL = 18, "FileAllInformation";
    /// Set.
    ALLOCATION = 19, "FileAllocationInformation";
    /// Set.
    END_OF_FILE = 20, "FileEndOfFileInformation";
    /// Query.
    ALTERNATE_NAME = 21, "FileAlternateNameInformation";
    /// Query.
    STREAM = 22, "FileStreamInformation";
    /// Query, set; named pipes.
    PIPE = 23, "FilePipeInformation";
    /// Query; named pipes.
    PIPE_LOCAL = 24, "FilePipeLocalInformation";
    /// Query; named pipes.
    PIPE_REMOTE = 25, "FilePipeRemoteInformation";
    /// Query.
    COMPRESSION = 28, "FileCompressionInformation";
    /// Set.
    OBJECT_ID = 29, "FileObjectIdInformation";
    /// Query, set.
    QUOTA = 32, "FileQuotaInformation";
    /// QUERY_DIRECTORY on $Reparse.
    REPARSE_POINT = 33, "FileReparsePointInformation";
    /// Query.
    NETWORK_OPEN = 34, "FileNetworkOpenInformation";
    /// Query.
    ATTRIBUTE_TAG = 35, "FileAttributeTagInformation";
    /// QUERY_DIRECTORY.
    ID_BOTH_DIRECTORY = 37, "FileIdBothDirectoryInformation";
    /// QUERY_DIRECTORY.
    ID_FULL_DIRECTORY = 38, "FileIdFullDirectoryInformation";
    /// Set.
    VALID_DATA_LENGTH = 39, "FileValidDataLengthInformation";
    /// Set.
    SHORT_NAME = 40, "FileShortNameInformation";
    /// Query.
    SFIO_RESERVE = 44, "FileSfioReserveInformation";
    /// Query.
    HARD_LINK = 46, "FileHardLinkInformation";
    /// Query.
    NORMALIZED_NAME = 48, "FileNormalizedNameInformation";
    /// Query.
    ID_GLOBAL_TX_DIRECTORY = 50, "FileIdGlobalTxDirectoryInformation";
    /// Query.
    STANDARD_LINK = 54, "FileStandardLinkInformation";
    /// Query.
    ID = 59, "FileIdInformation";
    /// QUERY_DIRECTORY.
    ID_EXTD_DIRECTORY = 60, "FileIdExtdDirectoryInformation";
    /// Set.
    DISPOSITION_EX = 64, "FileDispositionInformationEx";
    /// Set.
    RENAME_EX = 65, "FileRenameInformationEx";
    /// Query and QUERY_DIRECTORY, on a POSIX open only (the SMB3 POSIX extensions, [`crate::posix`]).
    POSIX = 100, "FilePosixInformation";
});

named_classes!(FsInfoClass {
    /// Query.
    VOLUME = 1, "FileFsVolumeInformation";
    /// Set.
    LABEL = 2, "FileFsLabelInformation";
    /// Query.
    SIZE = 3, "FileFsSizeInformation";
    /// Query.
    DEVICE = 4, "FileFsDeviceInformation";
    /// Query.
    ATTRIBUTE = 5, "FileFsAttributeInformation";
    /// Query, set.
    CONTROL = 6, "FileFsControlInformation";
    /// Query.
    FULL_SIZE = 7, "FileFsFullSizeInformation";
    /// Query, set.
    OBJECT_ID = 8, "FileFsObjectIdInformation";
    /// Query.
    DRIVER_PATH = 9, "FileFsDriverPathInformation";
    /// Query, set.
    VOLUME_FLAGS = 10, "FileFsVolumeFlagsInformation";
    /// Query.
    SECTOR_SIZE = 11, "FileFsSectorSizeInformation";
    /// Query, on a POSIX open (SMB3 POSIX extensions; [`crate::posix::FsPosixInfo`]).
    POSIX = 100, "FSCC_FS_POSIX_INFORMATION";
});

/// Read a `u32` byte length followed by that many bytes of UTF-16LE.
pub(crate) fn read_len_name(r: &mut Reader<'_>) -> Result<String, WireError> {
    let len = r.u32()? as usize;
    let mut s = r.sub(len)?;
    decode_utf16le(s.rest())
}

/// Check that `buf` holds at least `size` bytes (the fixed part of a class).
pub(crate) fn need(buf: &[u8], size: usize) -> Result<Reader<'_>, WireError> {
    if buf.len() < size {
        return Err(WireError::Truncated {
            at: buf.len(),
            needed: size - buf.len(),
        });
    }
    Ok(Reader::new(buf))
}

#[cfg(test)]
mod tests {

    #[test]
    fn civil_dates_convert_both_ways_across_leap_days_and_centuries() {
        assert_eq!(civil_from_unix(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_from_unix(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil_from_unix(4_107_542_399), (2100, 2, 28, 23, 59, 59));
        assert_eq!(civil_from_unix(-1), (1969, 12, 31, 23, 59, 59));
        for t in [
            -86_401i64,
            0,
            951_782_400,
            1_795_000_123,
            4_107_542_399,
            253_402_300_799,
        ] {
            let (y, m, d, hh, mm, ss) = civil_from_unix(t);
            assert_eq!(unix_from_civil(y, m, d, hh, mm, ss), t, "{t}");
        }
    }

    use super::*;

    /// Runs every fscc decoder on `b`; only checks that none panics.
    fn decode_everything(b: &[u8]) {
        let _ = FileBasicInformation::decode(b);
        let _ = FileStandardInformation::decode(b);
        let _ = FileAllInformation::decode(b);
        let _ = FileNameInformation::decode(b);
        let _ = FileStreamInformation::decode(b);
        let _ = FileRenameInformation::decode(b);
        let _ = FileFullEaInformation::decode(b);
        let _ = FileNetworkOpenInformation::decode(b);
        let _ = FileFsVolumeInformation::decode(b);
        let _ = FileFsAttributeInformation::decode(b);
        for c in [1u8, 2, 3, 12, 37, 38, 60] {
            let _ = decode_dir_entries(FileInfoClass(c), b);
        }
    }

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn decoders_do_not_panic_on_random_or_mutated_input() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..3000 {
            let len = (xorshift(&mut seed) % 160) as usize;
            let b: Vec<u8> = (0..len).map(|_| xorshift(&mut seed) as u8).collect();
            decode_everything(&b);
        }
        let mut valid = Vec::new();
        let mut chain = DirEntryChain::new(&valid, 4096);
        for name in ["a", "bc", "def.txt"] {
            let e = DirEntryInfo {
                name: name.into(),
                short_name: "S".into(),
                ..Default::default()
            };
            chain.push(&mut valid, FileInfoClass::ID_BOTH_DIRECTORY, &e);
        }
        for i in 0..valid.len() {
            for v in [0u8, 1, 0x7F, 0xFF] {
                let mut m = valid.clone();
                m[i] = v;
                decode_everything(&m);
            }
            decode_everything(&valid[..i]);
        }
    }

    #[test]
    fn filetime_of_unix_epoch_is_the_documented_constant() {
        assert_eq!(
            FileTime::from_unix_nanos(0),
            FileTime(116_444_736_000_000_000)
        );
        assert_eq!(FileTime::UNIX_EPOCH.to_unix_nanos(), 0);
    }

    #[test]
    fn filetime_round_trips_at_100ns_precision_and_floors_below() {
        let ns = 1_700_000_000_123_456_700i128;
        assert_eq!(FileTime::from_unix_nanos(ns).to_unix_nanos(), ns);
        assert_eq!(FileTime::from_unix_nanos(ns + 99).to_unix_nanos(), ns);
        // Before 1970, flooring goes towards the past.
        assert_eq!(FileTime::from_unix_nanos(-1).to_unix_nanos(), -100);
    }

    #[test]
    fn filetime_of_a_time_that_fits_64_bits_is_the_128_bit_formulas_at_every_edge() {
        let edges = [
            i128::from(i64::MIN),
            i128::from(i64::MIN) + 1,
            i128::from(i64::MIN) + 99,
            -101,
            -100,
            -99,
            -1,
            0,
            1,
            99,
            100,
            1_700_000_000_123_456_789,
            i128::from(i64::MAX) - 1,
            i128::from(i64::MAX),
            i128::from(i64::MAX) + 1,
            i128::from(i64::MIN) - 1,
        ];
        for n in edges {
            assert_eq!(
                FileTime::from_unix_nanos(n),
                FileTime::from_unix_nanos_wide(n),
                "{n} ns"
            );
        }
    }

    #[test]
    fn filetime_clamps_instead_of_producing_special_values() {
        let before_1601 = -(i128::from(FileTime::UNIX_EPOCH.0) * 100) - 1_000;
        assert_eq!(FileTime::from_unix_nanos(before_1601), FileTime::ZERO);
        assert_eq!(FileTime::from_unix_nanos(i128::MAX), FileTime::MAX);
        assert_ne!(
            FileTime::from_unix_nanos(i128::MAX),
            FileTime::STOP_UPDATING
        );
    }

    #[test]
    fn set_info_special_times_are_recognised() {
        assert_eq!(FileTime(0).set_info_action(), TimeChange::Keep);
        assert_eq!(
            FileTime(u64::MAX).set_info_action(),
            TimeChange::StopAutoUpdate
        );
        assert_eq!(
            FileTime((-2i64) as u64).set_info_action(),
            TimeChange::ResumeAutoUpdate
        );
        assert_eq!(FileTime(5).set_info_action(), TimeChange::Set(FileTime(5)));
    }

    #[test]
    fn info_classes_print_spec_names_or_number() {
        assert_eq!(format!("{:?}", FileInfoClass::ALL), "FileAllInformation");
        assert_eq!(FileInfoClass::ID_BOTH_DIRECTORY.0, 37);
        assert_eq!(FileInfoClass::NETWORK_OPEN.0, 34);
        assert_eq!(FileInfoClass::DISPOSITION_EX.0, 64);
        assert_eq!(format!("{:?}", FileInfoClass(200)), "FileInfoClass(200)");
        assert_eq!(
            format!("{:?}", FsInfoClass::SECTOR_SIZE),
            "FileFsSectorSizeInformation"
        );
        assert_eq!(FsInfoClass::FULL_SIZE.0, 7);
    }
}
