//! NTSTATUS values ([MS-ERREF] 2.3.1) that an SMB2 server and client exchange.

/// A 32-bit NTSTATUS. Unknown values round-trip unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NtStatus(pub u32);

impl NtStatus {
    pub const SUCCESS: NtStatus = NtStatus(0x0000_0000);
    pub const TIMEOUT: NtStatus = NtStatus(0x0000_0102);
    pub const PENDING: NtStatus = NtStatus(0x0000_0103);
    pub const REPARSE: NtStatus = NtStatus(0x0000_0104);
    pub const NOTIFY_CLEANUP: NtStatus = NtStatus(0x0000_010B);
    pub const NOTIFY_ENUM_DIR: NtStatus = NtStatus(0x0000_010C);
    pub const OBJECT_NAME_EXISTS: NtStatus = NtStatus(0x4000_0000);
    pub const BUFFER_OVERFLOW: NtStatus = NtStatus(0x8000_0005);
    pub const NO_MORE_FILES: NtStatus = NtStatus(0x8000_0006);
    pub const NO_MORE_EAS: NtStatus = NtStatus(0x8000_0012);
    /// STATUS_NO_MORE_ENTRIES: a listing (quotas) has nothing more.
    pub const NO_MORE_ENTRIES: NtStatus = NtStatus(0x8000_001A);
    pub const INVALID_EA_NAME: NtStatus = NtStatus(0x8000_0013);
    pub const EA_LIST_INCONSISTENT: NtStatus = NtStatus(0x8000_0014);
    pub const STOPPED_ON_SYMLINK: NtStatus = NtStatus(0x8000_002D);
    pub const UNSUCCESSFUL: NtStatus = NtStatus(0xC000_0001);
    pub const NOT_IMPLEMENTED: NtStatus = NtStatus(0xC000_0002);
    pub const INVALID_INFO_CLASS: NtStatus = NtStatus(0xC000_0003);
    pub const INVALID_LEVEL: NtStatus = NtStatus(0xC000_0148);
    pub const INFO_LENGTH_MISMATCH: NtStatus = NtStatus(0xC000_0004);
    pub const INVALID_HANDLE: NtStatus = NtStatus(0xC000_0008);
    pub const INVALID_PARAMETER: NtStatus = NtStatus(0xC000_000D);
    pub const NO_SUCH_DEVICE: NtStatus = NtStatus(0xC000_000E);
    pub const NO_SUCH_FILE: NtStatus = NtStatus(0xC000_000F);
    pub const INVALID_DEVICE_REQUEST: NtStatus = NtStatus(0xC000_0010);
    pub const END_OF_FILE: NtStatus = NtStatus(0xC000_0011);
    pub const MORE_PROCESSING_REQUIRED: NtStatus = NtStatus(0xC000_0016);
    pub const NO_MEMORY: NtStatus = NtStatus(0xC000_0017);
    pub const INVALID_LOCK_SEQUENCE: NtStatus = NtStatus(0xC000_001E);
    pub const INVALID_VIEW_SIZE: NtStatus = NtStatus(0xC000_001F);
    pub const ACCESS_DENIED: NtStatus = NtStatus(0xC000_0022);
    pub const BUFFER_TOO_SMALL: NtStatus = NtStatus(0xC000_0023);
    pub const OBJECT_TYPE_MISMATCH: NtStatus = NtStatus(0xC000_0024);
    pub const NOT_LOCKED: NtStatus = NtStatus(0xC000_002A);
    pub const OBJECT_NAME_INVALID: NtStatus = NtStatus(0xC000_0033);
    pub const OBJECT_NAME_NOT_FOUND: NtStatus = NtStatus(0xC000_0034);
    pub const OBJECT_NAME_COLLISION: NtStatus = NtStatus(0xC000_0035);
    pub const OBJECT_PATH_INVALID: NtStatus = NtStatus(0xC000_0039);
    pub const OBJECT_PATH_NOT_FOUND: NtStatus = NtStatus(0xC000_003A);
    pub const OBJECT_PATH_SYNTAX_BAD: NtStatus = NtStatus(0xC000_003B);
    pub const DATA_ERROR: NtStatus = NtStatus(0xC000_003E);
    pub const SHARING_VIOLATION: NtStatus = NtStatus(0xC000_0043);
    pub const QUOTA_EXCEEDED: NtStatus = NtStatus(0xC000_0044);
    /// STATUS_ALLOTTED_SPACE_EXCEEDED: more than the object may hold (an
    /// AfpInfo past 60 bytes).
    pub const ALLOTTED_SPACE_EXCEEDED: NtStatus = NtStatus(0xC000_0099);
    pub const EAS_NOT_SUPPORTED: NtStatus = NtStatus(0xC000_004F);
    pub const EA_TOO_LARGE: NtStatus = NtStatus(0xC000_0050);
    pub const NONEXISTENT_EA_ENTRY: NtStatus = NtStatus(0xC000_0051);
    pub const NO_EAS_ON_FILE: NtStatus = NtStatus(0xC000_0052);
    pub const FILE_LOCK_CONFLICT: NtStatus = NtStatus(0xC000_0054);
    pub const LOCK_NOT_GRANTED: NtStatus = NtStatus(0xC000_0055);
    pub const DELETE_PENDING: NtStatus = NtStatus(0xC000_0056);
    pub const INVALID_OWNER: NtStatus = NtStatus(0xC000_005A);
    pub const INVALID_PRIMARY_GROUP: NtStatus = NtStatus(0xC000_005B);
    pub const NO_SUCH_LOGON_SESSION: NtStatus = NtStatus(0xC000_005F);
    pub const PRIVILEGE_NOT_HELD: NtStatus = NtStatus(0xC000_0061);
    pub const NO_SUCH_USER: NtStatus = NtStatus(0xC000_0064);
    pub const WRONG_PASSWORD: NtStatus = NtStatus(0xC000_006A);
    pub const LOGON_FAILURE: NtStatus = NtStatus(0xC000_006D);
    pub const ACCOUNT_RESTRICTION: NtStatus = NtStatus(0xC000_006E);
    pub const INVALID_LOGON_HOURS: NtStatus = NtStatus(0xC000_006F);
    pub const INVALID_WORKSTATION: NtStatus = NtStatus(0xC000_0070);
    pub const PASSWORD_EXPIRED: NtStatus = NtStatus(0xC000_0071);
    pub const ACCOUNT_DISABLED: NtStatus = NtStatus(0xC000_0072);
    pub const NONE_MAPPED: NtStatus = NtStatus(0xC000_0073);
    pub const INVALID_ACL: NtStatus = NtStatus(0xC000_0077);
    pub const INVALID_SID: NtStatus = NtStatus(0xC000_0078);
    pub const INVALID_SECURITY_DESCR: NtStatus = NtStatus(0xC000_0079);
    pub const RANGE_NOT_LOCKED: NtStatus = NtStatus(0xC000_007E);
    pub const DISK_FULL: NtStatus = NtStatus(0xC000_007F);
    pub const FILE_INVALID: NtStatus = NtStatus(0xC000_0098);
    pub const INSUFFICIENT_RESOURCES: NtStatus = NtStatus(0xC000_009A);
    pub const MEDIA_WRITE_PROTECTED: NtStatus = NtStatus(0xC000_00A2);
    pub const BAD_IMPERSONATION_LEVEL: NtStatus = NtStatus(0xC000_00A5);
    pub const INSTANCE_NOT_AVAILABLE: NtStatus = NtStatus(0xC000_00AB);
    pub const PIPE_NOT_AVAILABLE: NtStatus = NtStatus(0xC000_00AC);
    pub const INVALID_PIPE_STATE: NtStatus = NtStatus(0xC000_00AD);
    pub const PIPE_BUSY: NtStatus = NtStatus(0xC000_00AE);
    pub const PIPE_DISCONNECTED: NtStatus = NtStatus(0xC000_00B0);
    pub const PIPE_EMPTY: NtStatus = NtStatus(0xC000_00D9);
    pub const PIPE_CLOSING: NtStatus = NtStatus(0xC000_00B1);
    pub const IO_TIMEOUT: NtStatus = NtStatus(0xC000_00B5);
    pub const FILE_IS_A_DIRECTORY: NtStatus = NtStatus(0xC000_00BA);
    pub const NOT_SUPPORTED: NtStatus = NtStatus(0xC000_00BB);
    pub const DUPLICATE_NAME: NtStatus = NtStatus(0xC000_00BD);
    pub const BAD_NETWORK_PATH: NtStatus = NtStatus(0xC000_00BE);
    pub const INVALID_NETWORK_RESPONSE: NtStatus = NtStatus(0xC000_00C3);
    pub const UNEXPECTED_NETWORK_ERROR: NtStatus = NtStatus(0xC000_00C4);
    pub const NETWORK_NAME_DELETED: NtStatus = NtStatus(0xC000_00C9);
    pub const NETWORK_ACCESS_DENIED: NtStatus = NtStatus(0xC000_00CA);
    pub const BAD_DEVICE_TYPE: NtStatus = NtStatus(0xC000_00CB);
    pub const BAD_NETWORK_NAME: NtStatus = NtStatus(0xC000_00CC);
    pub const REQUEST_NOT_ACCEPTED: NtStatus = NtStatus(0xC000_00D0);
    pub const REQUEST_OUT_OF_SEQUENCE: NtStatus = NtStatus(0xC000_042A);
    pub const NOT_SAME_DEVICE: NtStatus = NtStatus(0xC000_00D4);
    pub const FILE_RENAMED: NtStatus = NtStatus(0xC000_00D5);
    pub const CANT_WAIT: NtStatus = NtStatus(0xC000_00D8);
    pub const OPLOCK_NOT_GRANTED: NtStatus = NtStatus(0xC000_00E2);
    pub const INVALID_OPLOCK_PROTOCOL: NtStatus = NtStatus(0xC000_00E3);
    pub const INTERNAL_ERROR: NtStatus = NtStatus(0xC000_00E5);
    pub const DIRECTORY_NOT_EMPTY: NtStatus = NtStatus(0xC000_0101);
    pub const FILE_CORRUPT_ERROR: NtStatus = NtStatus(0xC000_0102);
    pub const NOT_A_DIRECTORY: NtStatus = NtStatus(0xC000_0103);
    pub const CANNOT_IMPERSONATE: NtStatus = NtStatus(0xC000_010D);
    pub const TOO_MANY_OPENED_FILES: NtStatus = NtStatus(0xC000_011F);
    pub const CANCELLED: NtStatus = NtStatus(0xC000_0120);
    pub const CANNOT_DELETE: NtStatus = NtStatus(0xC000_0121);
    pub const FILE_DELETED: NtStatus = NtStatus(0xC000_0123);
    pub const FILE_CLOSED: NtStatus = NtStatus(0xC000_0128);
    pub const PIPE_BROKEN: NtStatus = NtStatus(0xC000_014B);
    pub const LOGON_TYPE_NOT_GRANTED: NtStatus = NtStatus(0xC000_015B);
    pub const INVALID_DEVICE_STATE: NtStatus = NtStatus(0xC000_0184);
    pub const IO_DEVICE_ERROR: NtStatus = NtStatus(0xC000_0185);
    pub const ACCOUNT_EXPIRED: NtStatus = NtStatus(0xC000_0193);
    pub const FS_DRIVER_REQUIRED: NtStatus = NtStatus(0xC000_019C);
    pub const INVALID_LOCK_RANGE: NtStatus = NtStatus(0xC000_01A1);
    pub const CONNECTION_DISCONNECTED: NtStatus = NtStatus(0xC000_020C);
    pub const CONNECTION_RESET: NtStatus = NtStatus(0xC000_020D);
    pub const USER_SESSION_DELETED: NtStatus = NtStatus(0xC000_0203);
    pub const INSUFF_SERVER_RESOURCES: NtStatus = NtStatus(0xC000_0205);
    pub const INVALID_BUFFER_SIZE: NtStatus = NtStatus(0xC000_0206);
    pub const PASSWORD_MUST_CHANGE: NtStatus = NtStatus(0xC000_0224);
    pub const NOT_FOUND: NtStatus = NtStatus(0xC000_0225);
    pub const RETRY: NtStatus = NtStatus(0xC000_022D);
    pub const ACCOUNT_LOCKED_OUT: NtStatus = NtStatus(0xC000_0234);
    pub const REQUEST_ABORTED: NtStatus = NtStatus(0xC000_0240);
    pub const PATH_NOT_COVERED: NtStatus = NtStatus(0xC000_0257);
    pub const FILE_IS_OFFLINE: NtStatus = NtStatus(0xC000_0267);
    pub const VOLUME_DISMOUNTED: NtStatus = NtStatus(0xC000_026E);
    pub const NOT_A_REPARSE_POINT: NtStatus = NtStatus(0xC000_0275);
    pub const IO_REPARSE_TAG_MISMATCH: NtStatus = NtStatus(0xC000_0277);
    pub const IO_REPARSE_DATA_INVALID: NtStatus = NtStatus(0xC000_0278);
    pub const IO_REPARSE_TAG_NOT_HANDLED: NtStatus = NtStatus(0xC000_0279);
    pub const DIRECTORY_IS_A_REPARSE_POINT: NtStatus = NtStatus(0xC000_0281);
    pub const DUPLICATE_OBJECTID: NtStatus = NtStatus(0xC000_022A);
    pub const OBJECTID_NOT_FOUND: NtStatus = NtStatus(0xC000_02F0);
    pub const NETWORK_SESSION_EXPIRED: NtStatus = NtStatus(0xC000_035C);
    pub const DOWNGRADE_DETECTED: NtStatus = NtStatus(0xC000_0388);
    pub const FILE_SYSTEM_LIMITATION: NtStatus = NtStatus(0xC000_0427);
    pub const DEVICE_FEATURE_NOT_SUPPORTED: NtStatus = NtStatus(0xC000_0463);
    pub const SERVER_UNAVAILABLE: NtStatus = NtStatus(0xC000_0466);
    pub const FILE_NOT_AVAILABLE: NtStatus = NtStatus(0xC000_0467);
    pub const DISK_QUOTA_EXCEEDED: NtStatus = NtStatus(0xC000_0802);
    pub const FILE_TOO_LARGE: NtStatus = NtStatus(0xC000_0904);
    pub const CANNOT_BREAK_OPLOCK: NtStatus = NtStatus(0xC000_0909);
    pub const SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP: NtStatus = NtStatus(0xC05D_0000);
    pub const SMB_BAD_CLUSTER_DIALECT: NtStatus = NtStatus(0xC05D_0001);

    /// The [MS-ERREF] name without the `STATUS_` prefix, if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            NtStatus::SUCCESS => "SUCCESS",
            NtStatus::TIMEOUT => "TIMEOUT",
            NtStatus::PENDING => "PENDING",
            NtStatus::REPARSE => "REPARSE",
            NtStatus::NOTIFY_CLEANUP => "NOTIFY_CLEANUP",
            NtStatus::NOTIFY_ENUM_DIR => "NOTIFY_ENUM_DIR",
            NtStatus::OBJECT_NAME_EXISTS => "OBJECT_NAME_EXISTS",
            NtStatus::BUFFER_OVERFLOW => "BUFFER_OVERFLOW",
            NtStatus::NO_MORE_FILES => "NO_MORE_FILES",
            NtStatus::NO_MORE_EAS => "NO_MORE_EAS",
            NtStatus::NO_MORE_ENTRIES => "NO_MORE_ENTRIES",
            NtStatus::INVALID_EA_NAME => "INVALID_EA_NAME",
            NtStatus::EA_LIST_INCONSISTENT => "EA_LIST_INCONSISTENT",
            NtStatus::STOPPED_ON_SYMLINK => "STOPPED_ON_SYMLINK",
            NtStatus::UNSUCCESSFUL => "UNSUCCESSFUL",
            NtStatus::NOT_IMPLEMENTED => "NOT_IMPLEMENTED",
            NtStatus::INVALID_INFO_CLASS => "INVALID_INFO_CLASS",
            NtStatus::INVALID_LEVEL => "INVALID_LEVEL",
            NtStatus::INFO_LENGTH_MISMATCH => "INFO_LENGTH_MISMATCH",
            NtStatus::INVALID_HANDLE => "INVALID_HANDLE",
            NtStatus::INVALID_PARAMETER => "INVALID_PARAMETER",
            NtStatus::NO_SUCH_DEVICE => "NO_SUCH_DEVICE",
            NtStatus::NO_SUCH_FILE => "NO_SUCH_FILE",
            NtStatus::INVALID_DEVICE_REQUEST => "INVALID_DEVICE_REQUEST",
            NtStatus::END_OF_FILE => "END_OF_FILE",
            NtStatus::MORE_PROCESSING_REQUIRED => "MORE_PROCESSING_REQUIRED",
            NtStatus::NO_MEMORY => "NO_MEMORY",
            NtStatus::INVALID_LOCK_SEQUENCE => "INVALID_LOCK_SEQUENCE",
            NtStatus::INVALID_VIEW_SIZE => "INVALID_VIEW_SIZE",
            NtStatus::ACCESS_DENIED => "ACCESS_DENIED",
            NtStatus::BUFFER_TOO_SMALL => "BUFFER_TOO_SMALL",
            NtStatus::OBJECT_TYPE_MISMATCH => "OBJECT_TYPE_MISMATCH",
            NtStatus::NOT_LOCKED => "NOT_LOCKED",
            NtStatus::OBJECT_NAME_INVALID => "OBJECT_NAME_INVALID",
            NtStatus::OBJECT_NAME_NOT_FOUND => "OBJECT_NAME_NOT_FOUND",
            NtStatus::OBJECT_NAME_COLLISION => "OBJECT_NAME_COLLISION",
            NtStatus::OBJECT_PATH_INVALID => "OBJECT_PATH_INVALID",
            NtStatus::OBJECT_PATH_NOT_FOUND => "OBJECT_PATH_NOT_FOUND",
            NtStatus::OBJECT_PATH_SYNTAX_BAD => "OBJECT_PATH_SYNTAX_BAD",
            NtStatus::DATA_ERROR => "DATA_ERROR",
            NtStatus::SHARING_VIOLATION => "SHARING_VIOLATION",
            NtStatus::QUOTA_EXCEEDED => "QUOTA_EXCEEDED",
            NtStatus::ALLOTTED_SPACE_EXCEEDED => "ALLOTTED_SPACE_EXCEEDED",
            NtStatus::EAS_NOT_SUPPORTED => "EAS_NOT_SUPPORTED",
            NtStatus::EA_TOO_LARGE => "EA_TOO_LARGE",
            NtStatus::NONEXISTENT_EA_ENTRY => "NONEXISTENT_EA_ENTRY",
            NtStatus::NO_EAS_ON_FILE => "NO_EAS_ON_FILE",
            NtStatus::FILE_LOCK_CONFLICT => "FILE_LOCK_CONFLICT",
            NtStatus::LOCK_NOT_GRANTED => "LOCK_NOT_GRANTED",
            NtStatus::DELETE_PENDING => "DELETE_PENDING",
            NtStatus::INVALID_OWNER => "INVALID_OWNER",
            NtStatus::INVALID_PRIMARY_GROUP => "INVALID_PRIMARY_GROUP",
            NtStatus::NO_SUCH_LOGON_SESSION => "NO_SUCH_LOGON_SESSION",
            NtStatus::PRIVILEGE_NOT_HELD => "PRIVILEGE_NOT_HELD",
            NtStatus::NO_SUCH_USER => "NO_SUCH_USER",
            NtStatus::WRONG_PASSWORD => "WRONG_PASSWORD",
            NtStatus::LOGON_FAILURE => "LOGON_FAILURE",
            NtStatus::ACCOUNT_RESTRICTION => "ACCOUNT_RESTRICTION",
            NtStatus::INVALID_LOGON_HOURS => "INVALID_LOGON_HOURS",
            NtStatus::INVALID_WORKSTATION => "INVALID_WORKSTATION",
            NtStatus::PASSWORD_EXPIRED => "PASSWORD_EXPIRED",
            NtStatus::ACCOUNT_DISABLED => "ACCOUNT_DISABLED",
            NtStatus::NONE_MAPPED => "NONE_MAPPED",
            NtStatus::INVALID_ACL => "INVALID_ACL",
            NtStatus::INVALID_SID => "INVALID_SID",
            NtStatus::INVALID_SECURITY_DESCR => "INVALID_SECURITY_DESCR",
            NtStatus::RANGE_NOT_LOCKED => "RANGE_NOT_LOCKED",
            NtStatus::DISK_FULL => "DISK_FULL",
            NtStatus::FILE_INVALID => "FILE_INVALID",
            NtStatus::INSUFFICIENT_RESOURCES => "INSUFFICIENT_RESOURCES",
            NtStatus::MEDIA_WRITE_PROTECTED => "MEDIA_WRITE_PROTECTED",
            NtStatus::BAD_IMPERSONATION_LEVEL => "BAD_IMPERSONATION_LEVEL",
            NtStatus::INSTANCE_NOT_AVAILABLE => "INSTANCE_NOT_AVAILABLE",
            NtStatus::PIPE_NOT_AVAILABLE => "PIPE_NOT_AVAILABLE",
            NtStatus::INVALID_PIPE_STATE => "INVALID_PIPE_STATE",
            NtStatus::PIPE_BUSY => "PIPE_BUSY",
            NtStatus::PIPE_DISCONNECTED => "PIPE_DISCONNECTED",
            NtStatus::PIPE_EMPTY => "PIPE_EMPTY",
            NtStatus::PIPE_CLOSING => "PIPE_CLOSING",
            NtStatus::IO_TIMEOUT => "IO_TIMEOUT",
            NtStatus::FILE_IS_A_DIRECTORY => "FILE_IS_A_DIRECTORY",
            NtStatus::NOT_SUPPORTED => "NOT_SUPPORTED",
            NtStatus::DUPLICATE_NAME => "DUPLICATE_NAME",
            NtStatus::BAD_NETWORK_PATH => "BAD_NETWORK_PATH",
            NtStatus::INVALID_NETWORK_RESPONSE => "INVALID_NETWORK_RESPONSE",
            NtStatus::UNEXPECTED_NETWORK_ERROR => "UNEXPECTED_NETWORK_ERROR",
            NtStatus::NETWORK_NAME_DELETED => "NETWORK_NAME_DELETED",
            NtStatus::NETWORK_ACCESS_DENIED => "NETWORK_ACCESS_DENIED",
            NtStatus::BAD_DEVICE_TYPE => "BAD_DEVICE_TYPE",
            NtStatus::BAD_NETWORK_NAME => "BAD_NETWORK_NAME",
            NtStatus::REQUEST_NOT_ACCEPTED => "REQUEST_NOT_ACCEPTED",
            NtStatus::REQUEST_OUT_OF_SEQUENCE => "REQUEST_OUT_OF_SEQUENCE",
            NtStatus::NOT_SAME_DEVICE => "NOT_SAME_DEVICE",
            NtStatus::FILE_RENAMED => "FILE_RENAMED",
            NtStatus::CANT_WAIT => "CANT_WAIT",
            NtStatus::OPLOCK_NOT_GRANTED => "OPLOCK_NOT_GRANTED",
            NtStatus::INVALID_OPLOCK_PROTOCOL => "INVALID_OPLOCK_PROTOCOL",
            NtStatus::INTERNAL_ERROR => "INTERNAL_ERROR",
            NtStatus::DIRECTORY_NOT_EMPTY => "DIRECTORY_NOT_EMPTY",
            NtStatus::FILE_CORRUPT_ERROR => "FILE_CORRUPT_ERROR",
            NtStatus::NOT_A_DIRECTORY => "NOT_A_DIRECTORY",
            NtStatus::CANNOT_IMPERSONATE => "CANNOT_IMPERSONATE",
            NtStatus::TOO_MANY_OPENED_FILES => "TOO_MANY_OPENED_FILES",
            NtStatus::CANCELLED => "CANCELLED",
            NtStatus::CANNOT_DELETE => "CANNOT_DELETE",
            NtStatus::FILE_DELETED => "FILE_DELETED",
            NtStatus::FILE_CLOSED => "FILE_CLOSED",
            NtStatus::PIPE_BROKEN => "PIPE_BROKEN",
            NtStatus::LOGON_TYPE_NOT_GRANTED => "LOGON_TYPE_NOT_GRANTED",
            NtStatus::INVALID_DEVICE_STATE => "INVALID_DEVICE_STATE",
            NtStatus::IO_DEVICE_ERROR => "IO_DEVICE_ERROR",
            NtStatus::ACCOUNT_EXPIRED => "ACCOUNT_EXPIRED",
            NtStatus::FS_DRIVER_REQUIRED => "FS_DRIVER_REQUIRED",
            NtStatus::INVALID_LOCK_RANGE => "INVALID_LOCK_RANGE",
            NtStatus::CONNECTION_DISCONNECTED => "CONNECTION_DISCONNECTED",
            NtStatus::CONNECTION_RESET => "CONNECTION_RESET",
            NtStatus::USER_SESSION_DELETED => "USER_SESSION_DELETED",
            NtStatus::INSUFF_SERVER_RESOURCES => "INSUFF_SERVER_RESOURCES",
            NtStatus::INVALID_BUFFER_SIZE => "INVALID_BUFFER_SIZE",
            NtStatus::PASSWORD_MUST_CHANGE => "PASSWORD_MUST_CHANGE",
            NtStatus::NOT_FOUND => "NOT_FOUND",
            NtStatus::RETRY => "RETRY",
            NtStatus::ACCOUNT_LOCKED_OUT => "ACCOUNT_LOCKED_OUT",
            NtStatus::REQUEST_ABORTED => "REQUEST_ABORTED",
            NtStatus::PATH_NOT_COVERED => "PATH_NOT_COVERED",
            NtStatus::FILE_IS_OFFLINE => "FILE_IS_OFFLINE",
            NtStatus::VOLUME_DISMOUNTED => "VOLUME_DISMOUNTED",
            NtStatus::NOT_A_REPARSE_POINT => "NOT_A_REPARSE_POINT",
            NtStatus::IO_REPARSE_TAG_MISMATCH => "IO_REPARSE_TAG_MISMATCH",
            NtStatus::IO_REPARSE_DATA_INVALID => "IO_REPARSE_DATA_INVALID",
            NtStatus::IO_REPARSE_TAG_NOT_HANDLED => "IO_REPARSE_TAG_NOT_HANDLED",
            NtStatus::DIRECTORY_IS_A_REPARSE_POINT => "DIRECTORY_IS_A_REPARSE_POINT",
            NtStatus::OBJECTID_NOT_FOUND => "OBJECTID_NOT_FOUND",
            NtStatus::NETWORK_SESSION_EXPIRED => "NETWORK_SESSION_EXPIRED",
            NtStatus::DUPLICATE_OBJECTID => "DUPLICATE_OBJECTID",
            NtStatus::DOWNGRADE_DETECTED => "DOWNGRADE_DETECTED",
            NtStatus::FILE_SYSTEM_LIMITATION => "FILE_SYSTEM_LIMITATION",
            NtStatus::DEVICE_FEATURE_NOT_SUPPORTED => "DEVICE_FEATURE_NOT_SUPPORTED",
            NtStatus::SERVER_UNAVAILABLE => "SERVER_UNAVAILABLE",
            NtStatus::FILE_NOT_AVAILABLE => "FILE_NOT_AVAILABLE",
            NtStatus::DISK_QUOTA_EXCEEDED => "DISK_QUOTA_EXCEEDED",
            NtStatus::FILE_TOO_LARGE => "FILE_TOO_LARGE",
            NtStatus::CANNOT_BREAK_OPLOCK => "CANNOT_BREAK_OPLOCK",
            NtStatus::SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP => {
                "SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP"
            }
            NtStatus::SMB_BAD_CLUSTER_DIALECT => "SMB_BAD_CLUSTER_DIALECT",
            _ => return None,
        })
    }

    /// Severity bits 30..31 are 0b11: an error.
    pub fn is_error(self) -> bool {
        self.0 >> 30 == 3
    }

    /// Severity bits are 0b10: a warning (e.g. BUFFER_OVERFLOW; the response still carries data).
    pub fn is_warning(self) -> bool {
        self.0 >> 30 == 2
    }

    /// Success or informational (severity 0b00 or 0b01).
    pub fn is_success(self) -> bool {
        self.0 >> 31 == 0
    }
}

impl core::fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "STATUS_{n}"),
            None => write!(f, "NtStatus({:#010x})", self.0),
        }
    }
}

impl core::fmt::Display for NtStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

impl From<u32> for NtStatus {
    fn from(v: u32) -> Self {
        NtStatus(v)
    }
}

impl From<NtStatus> for u32 {
    fn from(s: NtStatus) -> u32 {
        s.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_known_statuses_and_prints_hex_for_unknown() {
        assert_eq!(NtStatus::ACCESS_DENIED.0, 0xC000_0022);
        assert_eq!(NtStatus::ACCESS_DENIED.name(), Some("ACCESS_DENIED"));
        assert_eq!(format!("{:?}", NtStatus::SUCCESS), "STATUS_SUCCESS");
        assert_eq!(
            format!("{:?}", NtStatus(0xC0DE_0001)),
            "NtStatus(0xc0de0001)"
        );
        assert_eq!(NtStatus(0xC0DE_0001).name(), None);
    }

    #[test]
    fn classifies_severity() {
        assert!(NtStatus::OBJECT_NAME_NOT_FOUND.is_error());
        assert!(NtStatus::BUFFER_OVERFLOW.is_warning());
        assert!(!NtStatus::BUFFER_OVERFLOW.is_error());
        assert!(NtStatus::PENDING.is_success());
        assert!(NtStatus::SUCCESS.is_success());
    }

    #[test]
    fn well_known_values_match_ms_erref() {
        assert_eq!(NtStatus::MORE_PROCESSING_REQUIRED.0, 0xC000_0016);
        assert_eq!(NtStatus::NO_MORE_FILES.0, 0x8000_0006);
        assert_eq!(NtStatus::OBJECT_NAME_COLLISION.0, 0xC000_0035);
        assert_eq!(NtStatus::LOGON_FAILURE.0, 0xC000_006D);
        assert_eq!(NtStatus::NETWORK_SESSION_EXPIRED.0, 0xC000_035C);
        assert_eq!(NtStatus::USER_SESSION_DELETED.0, 0xC000_0203);
        assert_eq!(NtStatus::INVALID_LOCK_RANGE.0, 0xC000_01A1);
        assert_eq!(
            NtStatus::INVALID_LOCK_RANGE.name(),
            Some("INVALID_LOCK_RANGE")
        );
    }
}
