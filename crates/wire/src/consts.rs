//! Protocol constants, each group with the [MS-SMB2] (or [MS-FSCC]) section that defines it.
//!
//! Every group is a newtype over the wire integer, so values this crate does
//! not know round-trip unchanged. Enumerations (`wire_enum!`) have `name()`
//! and a `Debug` that prints the name or the hex; flag sets (`wire_flags!`)
//! have `contains`/`intersects`/bit operators and a `Debug` listing set flags.

/// Defines a newtype enumeration over a wire integer.
macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident($ty:ty) { $($(#[$cm:meta])* $c:ident = $v:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $ty);

        impl $name {
            $($(#[$cm])* pub const $c: $name = $name($v);)*

            /// The spec name of this value, if it is one this crate knows.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $($name::$c => Some(stringify!($c)),)*
                    _ => None,
                }
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({:#x})", stringify!($name), self.0),
                }
            }
        }

        impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                $name(v)
            }
        }
    };
}

/// Defines a newtype flag set over a wire integer.
macro_rules! wire_flags {
    ($(#[$m:meta])* $name:ident($ty:ty) { $($(#[$cm:meta])* $c:ident = $v:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $ty);

        impl $name {
            $($(#[$cm])* pub const $c: $name = $name($v);)*

            /// Every named flag with its name (used by `Debug`).
            pub const KNOWN: &'static [(&'static str, $ty)] = &[$((stringify!($c), $v),)*];

            /// No flag set.
            pub const fn empty() -> Self {
                $name(0)
            }
            /// The raw wire value.
            pub const fn bits(self) -> $ty {
                self.0
            }
            /// All bits of `other` are set in `self` (true for an empty `other`).
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }
            /// Any bit of `other` is set in `self`.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            pub const fn union(self, other: Self) -> Self {
                $name(self.0 | other.0)
            }
            pub const fn difference(self, other: Self) -> Self {
                $name(self.0 & !other.0)
            }
            pub fn insert(&mut self, other: Self) {
                self.0 |= other.0;
            }
            pub fn remove(&mut self, other: Self) {
                self.0 &= !other.0;
            }
            /// Bits set that no named flag covers.
            pub fn unknown_bits(self) -> $ty {
                let mut known: $ty = 0;
                for (_, v) in Self::KNOWN {
                    known |= *v;
                }
                self.0 & !known
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, o: Self) -> Self {
                $name(self.0 | o.0)
            }
        }
        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, o: Self) {
                self.0 |= o.0;
            }
        }
        impl core::ops::BitAnd for $name {
            type Output = Self;
            fn bitand(self, o: Self) -> Self {
                $name(self.0 & o.0)
            }
        }
        impl core::ops::BitAndAssign for $name {
            fn bitand_assign(&mut self, o: Self) {
                self.0 &= o.0;
            }
        }

        impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                $name(v)
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                let mut first = true;
                let mut covered: $ty = 0;
                for (n, v) in Self::KNOWN {
                    if *v != 0 && self.0 & *v == *v && covered & *v != *v {
                        if !first {
                            f.write_str(" | ")?;
                        }
                        f.write_str(n)?;
                        first = false;
                        covered |= *v;
                    }
                }
                let rest = self.0 & !covered;
                if rest != 0 || first {
                    if !first {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{:#x}", rest)?;
                }
                f.write_str(")")
            }
        }
    };
}

wire_enum! {
    /// SMB2 header `Command` ([MS-SMB2] 2.2.1.2).
    Command(u16) {
        NEGOTIATE = 0x0000,
        SESSION_SETUP = 0x0001,
        LOGOFF = 0x0002,
        TREE_CONNECT = 0x0003,
        TREE_DISCONNECT = 0x0004,
        CREATE = 0x0005,
        CLOSE = 0x0006,
        FLUSH = 0x0007,
        READ = 0x0008,
        WRITE = 0x0009,
        LOCK = 0x000A,
        IOCTL = 0x000B,
        CANCEL = 0x000C,
        ECHO = 0x000D,
        QUERY_DIRECTORY = 0x000E,
        CHANGE_NOTIFY = 0x000F,
        QUERY_INFO = 0x0010,
        SET_INFO = 0x0011,
        OPLOCK_BREAK = 0x0012,
        SERVER_TO_CLIENT_NOTIFICATION = 0x0013,
    }
}

wire_enum! {
    /// Dialect revisions ([MS-SMB2] 2.2.3, 2.2.4). `WILDCARD` (0x02FF) is only
    /// sent by a server answering a multi-protocol SMB1 negotiate.
    Dialect(u16) {
        SMB2_0_2 = 0x0202,
        SMB2_1 = 0x0210,
        WILDCARD = 0x02FF,
        SMB3_0 = 0x0300,
        SMB3_0_2 = 0x0302,
        SMB3_1_1 = 0x0311,
    }
}

impl Dialect {
    /// Every dialect a client can negotiate, lowest first (not the wildcard).
    pub const ALL: [Dialect; 5] = [
        Dialect::SMB2_0_2,
        Dialect::SMB2_1,
        Dialect::SMB3_0,
        Dialect::SMB3_0_2,
        Dialect::SMB3_1_1,
    ];

    /// The dialect as people write it (`3.1.1`); `None` for the wildcard
    /// and values this crate does not know.
    pub fn version(self) -> Option<&'static str> {
        Some(match self {
            Dialect::SMB2_0_2 => "2.0.2",
            Dialect::SMB2_1 => "2.1",
            Dialect::SMB3_0 => "3.0",
            Dialect::SMB3_0_2 => "3.0.2",
            Dialect::SMB3_1_1 => "3.1.1",
            _ => return None,
        })
    }

    /// The SMB 3.x family (signing with AES-CMAC or better, encryption possible).
    pub fn is_smb3(self) -> bool {
        self.0 >= 0x0300 && self != Dialect::WILDCARD
    }
}

wire_flags! {
    /// SMB2 header `Flags` ([MS-SMB2] 2.2.1.2).
    HeaderFlags(u32) {
        SERVER_TO_REDIR = 0x0000_0001,
        ASYNC_COMMAND = 0x0000_0002,
        RELATED_OPERATIONS = 0x0000_0004,
        SIGNED = 0x0000_0008,
        PRIORITY_MASK = 0x0000_0070,
        DFS_OPERATIONS = 0x1000_0000,
        REPLAY_OPERATION = 0x2000_0000,
    }
}

wire_flags! {
    /// NEGOTIATE `Capabilities` ([MS-SMB2] 2.2.3, 2.2.4); also in SESSION_SETUP requests.
    Capabilities(u32) {
        DFS = 0x0000_0001,
        LEASING = 0x0000_0002,
        LARGE_MTU = 0x0000_0004,
        MULTI_CHANNEL = 0x0000_0008,
        PERSISTENT_HANDLES = 0x0000_0010,
        DIRECTORY_LEASING = 0x0000_0020,
        ENCRYPTION = 0x0000_0040,
        NOTIFICATIONS = 0x0000_0080,
    }
}

wire_flags! {
    /// NEGOTIATE `SecurityMode` ([MS-SMB2] 2.2.3, 2.2.4). SESSION_SETUP carries the
    /// same bits in a u8 (2.2.5).
    SecurityMode(u16) {
        SIGNING_ENABLED = 0x0001,
        SIGNING_REQUIRED = 0x0002,
    }
}

wire_flags! {
    /// SESSION_SETUP request `Flags` ([MS-SMB2] 2.2.5).
    SessionSetupFlags(u8) {
        BINDING = 0x01,
    }
}

wire_flags! {
    /// SESSION_SETUP response `SessionFlags` ([MS-SMB2] 2.2.6).
    SessionFlags(u16) {
        IS_GUEST = 0x0001,
        IS_NULL = 0x0002,
        ENCRYPT_DATA = 0x0004,
    }
}

wire_flags! {
    /// TREE_CONNECT request `Flags` (3.1.1 only; [MS-SMB2] 2.2.9).
    TreeConnectFlags(u16) {
        CLUSTER_RECONNECT = 0x0001,
        REDIRECT_TO_OWNER = 0x0002,
        EXTENSION_PRESENT = 0x0004,
    }
}

wire_enum! {
    /// TREE_CONNECT response `ShareType` ([MS-SMB2] 2.2.10).
    ShareType(u8) {
        DISK = 0x01,
        PIPE = 0x02,
        PRINT = 0x03,
    }
}

wire_flags! {
    /// TREE_CONNECT response `ShareFlags` ([MS-SMB2] 2.2.10). The caching policy is
    /// the 2-bit field `CACHING_MASK` (`MANUAL_CACHING` is the value 0).
    ShareFlags(u32) {
        DFS = 0x0000_0001,
        DFS_ROOT = 0x0000_0002,
        AUTO_CACHING = 0x0000_0010,
        VDO_CACHING = 0x0000_0020,
        NO_CACHING = 0x0000_0030,
        RESTRICT_EXCLUSIVE_OPENS = 0x0000_0100,
        FORCE_SHARED_DELETE = 0x0000_0200,
        ALLOW_NAMESPACE_CACHING = 0x0000_0400,
        ACCESS_BASED_DIRECTORY_ENUM = 0x0000_0800,
        FORCE_LEVELII_OPLOCK = 0x0000_1000,
        ENABLE_HASH_V1 = 0x0000_2000,
        ENABLE_HASH_V2 = 0x0000_4000,
        ENCRYPT_DATA = 0x0000_8000,
        IDENTITY_REMOTING = 0x0004_0000,
        COMPRESS_DATA = 0x0010_0000,
        ISOLATED_TRANSPORT = 0x0020_0000,
    }
}

impl ShareFlags {
    /// Offline caching: manual (the value 0 of the caching field).
    pub const MANUAL_CACHING: ShareFlags = ShareFlags(0);
    /// Mask of the 2-bit caching policy field.
    pub const CACHING_MASK: ShareFlags = ShareFlags(0x30);
}

wire_flags! {
    /// TREE_CONNECT response `Capabilities` ([MS-SMB2] 2.2.10).
    ShareCapabilities(u32) {
        DFS = 0x0000_0008,
        CONTINUOUS_AVAILABILITY = 0x0000_0010,
        SCALEOUT = 0x0000_0020,
        CLUSTER = 0x0000_0040,
        ASYMMETRIC = 0x0000_0080,
        REDIRECT_TO_OWNER = 0x0000_0100,
    }
}

wire_flags! {
    /// Access mask for files, pipes and printers ([MS-SMB2] 2.2.13.1.1); directory
    /// aliases (2.2.13.1.2) are associated constants with the same bits.
    AccessMask(u32) {
        FILE_READ_DATA = 0x0000_0001,
        FILE_WRITE_DATA = 0x0000_0002,
        FILE_APPEND_DATA = 0x0000_0004,
        FILE_READ_EA = 0x0000_0008,
        FILE_WRITE_EA = 0x0000_0010,
        FILE_EXECUTE = 0x0000_0020,
        FILE_DELETE_CHILD = 0x0000_0040,
        FILE_READ_ATTRIBUTES = 0x0000_0080,
        FILE_WRITE_ATTRIBUTES = 0x0000_0100,
        DELETE = 0x0001_0000,
        READ_CONTROL = 0x0002_0000,
        WRITE_DAC = 0x0004_0000,
        WRITE_OWNER = 0x0008_0000,
        SYNCHRONIZE = 0x0010_0000,
        ACCESS_SYSTEM_SECURITY = 0x0100_0000,
        MAXIMUM_ALLOWED = 0x0200_0000,
        GENERIC_ALL = 0x1000_0000,
        GENERIC_EXECUTE = 0x2000_0000,
        GENERIC_WRITE = 0x4000_0000,
        GENERIC_READ = 0x8000_0000,
    }
}

impl AccessMask {
    /// Directory: list contents (same bit as FILE_READ_DATA).
    pub const FILE_LIST_DIRECTORY: AccessMask = AccessMask(0x0000_0001);
    /// Directory: create a file (same bit as FILE_WRITE_DATA).
    pub const FILE_ADD_FILE: AccessMask = AccessMask(0x0000_0002);
    /// Directory: create a subdirectory (same bit as FILE_APPEND_DATA).
    pub const FILE_ADD_SUBDIRECTORY: AccessMask = AccessMask(0x0000_0004);
    /// Directory: traverse (same bit as FILE_EXECUTE).
    pub const FILE_TRAVERSE: AccessMask = AccessMask(0x0000_0020);
    /// The generic bits, which a server maps to specific rights.
    pub const GENERIC_MASK: AccessMask = AccessMask(0xF000_0000);
    /// Every specific and standard right for a file (FILE_ALL_ACCESS, [MS-FSCC]).
    pub const FILE_ALL_ACCESS: AccessMask = AccessMask(0x001F_01FF);
}

wire_flags! {
    /// CREATE `ShareAccess` ([MS-SMB2] 2.2.13).
    ShareAccess(u32) {
        READ = 0x0000_0001,
        WRITE = 0x0000_0002,
        DELETE = 0x0000_0004,
    }
}

wire_enum! {
    /// CREATE `CreateDisposition` ([MS-SMB2] 2.2.13).
    CreateDisposition(u32) {
        SUPERSEDE = 0,
        OPEN = 1,
        CREATE = 2,
        OPEN_IF = 3,
        OVERWRITE = 4,
        OVERWRITE_IF = 5,
    }
}

wire_flags! {
    /// CREATE `CreateOptions` ([MS-SMB2] 2.2.13).
    CreateOptions(u32) {
        DIRECTORY_FILE = 0x0000_0001,
        WRITE_THROUGH = 0x0000_0002,
        SEQUENTIAL_ONLY = 0x0000_0004,
        NO_INTERMEDIATE_BUFFERING = 0x0000_0008,
        SYNCHRONOUS_IO_ALERT = 0x0000_0010,
        SYNCHRONOUS_IO_NONALERT = 0x0000_0020,
        NON_DIRECTORY_FILE = 0x0000_0040,
        COMPLETE_IF_OPLOCKED = 0x0000_0100,
        NO_EA_KNOWLEDGE = 0x0000_0200,
        OPEN_REMOTE_INSTANCE = 0x0000_0400,
        RANDOM_ACCESS = 0x0000_0800,
        DELETE_ON_CLOSE = 0x0000_1000,
        OPEN_BY_FILE_ID = 0x0000_2000,
        OPEN_FOR_BACKUP_INTENT = 0x0000_4000,
        NO_COMPRESSION = 0x0000_8000,
        OPEN_REQUIRING_OPLOCK = 0x0001_0000,
        DISALLOW_EXCLUSIVE = 0x0002_0000,
        RESERVE_OPFILTER = 0x0010_0000,
        OPEN_REPARSE_POINT = 0x0020_0000,
        OPEN_NO_RECALL = 0x0040_0000,
        OPEN_FOR_FREE_SPACE_QUERY = 0x0080_0000,
    }
}

wire_flags! {
    /// File attributes ([MS-FSCC] 2.6).
    FileAttributes(u32) {
        READONLY = 0x0000_0001,
        HIDDEN = 0x0000_0002,
        SYSTEM = 0x0000_0004,
        DIRECTORY = 0x0000_0010,
        ARCHIVE = 0x0000_0020,
        NORMAL = 0x0000_0080,
        TEMPORARY = 0x0000_0100,
        SPARSE_FILE = 0x0000_0200,
        REPARSE_POINT = 0x0000_0400,
        COMPRESSED = 0x0000_0800,
        OFFLINE = 0x0000_1000,
        NOT_CONTENT_INDEXED = 0x0000_2000,
        ENCRYPTED = 0x0000_4000,
        INTEGRITY_STREAM = 0x0000_8000,
        NO_SCRUB_DATA = 0x0002_0000,
        RECALL_ON_OPEN = 0x0004_0000,
        PINNED = 0x0008_0000,
        UNPINNED = 0x0010_0000,
        RECALL_ON_DATA_ACCESS = 0x0040_0000,
    }
}

wire_enum! {
    /// CREATE response `CreateAction` ([MS-SMB2] 2.2.14).
    CreateAction(u32) {
        SUPERSEDED = 0,
        OPENED = 1,
        CREATED = 2,
        OVERWRITTEN = 3,
    }
}

wire_enum! {
    /// `RequestedOplockLevel` / `OplockLevel` ([MS-SMB2] 2.2.13, 2.2.14, 2.2.23).
    OplockLevel(u8) {
        NONE = 0x00,
        II = 0x01,
        EXCLUSIVE = 0x08,
        BATCH = 0x09,
        LEASE = 0xFF,
    }
}

wire_enum! {
    /// CREATE `ImpersonationLevel` ([MS-SMB2] 2.2.13).
    ImpersonationLevel(u32) {
        ANONYMOUS = 0,
        IDENTIFICATION = 1,
        IMPERSONATION = 2,
        DELEGATE = 3,
    }
}

wire_flags! {
    /// Lease state ([MS-SMB2] 2.2.13.2.8, 2.2.23.2).
    LeaseState(u32) {
        READ_CACHING = 0x01,
        HANDLE_CACHING = 0x02,
        WRITE_CACHING = 0x04,
    }
}

wire_flags! {
    /// Lease flags in RqLs contexts ([MS-SMB2] 2.2.13.2.10).
    LeaseFlags(u32) {
        BREAK_IN_PROGRESS = 0x02,
        PARENT_LEASE_KEY_SET = 0x04,
    }
}

wire_enum! {
    /// QUERY_INFO / SET_INFO `InfoType` ([MS-SMB2] 2.2.37, 2.2.39).
    InfoType(u8) {
        FILE = 0x01,
        FILESYSTEM = 0x02,
        SECURITY = 0x03,
        QUOTA = 0x04,
    }
}

wire_enum! {
    /// IOCTL `CtlCode` values ([MS-SMB2] 2.2.31, [MS-FSCC] 2.3).
    Fsctl(u32) {
        DFS_GET_REFERRALS = 0x0006_0194,
        DFS_GET_REFERRALS_EX = 0x0006_01B0,
        IS_PATHNAME_VALID = 0x0009_002C,
        GET_COMPRESSION = 0x0009_003C,
        GET_NTFS_VOLUME_DATA = 0x0009_0064,
        FIND_FILES_BY_SID = 0x0009_008F,
        SET_OBJECT_ID = 0x0009_0098,
        GET_OBJECT_ID = 0x0009_009C,
        DELETE_OBJECT_ID = 0x0009_00A0,
        SET_REPARSE_POINT = 0x0009_00A4,
        GET_REPARSE_POINT = 0x0009_00A8,
        DELETE_REPARSE_POINT = 0x0009_00AC,
        CREATE_OR_GET_OBJECT_ID = 0x0009_00C0,
        SET_SPARSE = 0x0009_00C4,
        READ_FILE_USN_DATA = 0x0009_00EB,
        WRITE_USN_CLOSE_RECORD = 0x0009_00EF,
        QUERY_ON_DISK_VOLUME_INFO = 0x0009_013C,
        SET_ZERO_ON_DEALLOCATION = 0x0009_0194,
        GET_INTEGRITY_INFORMATION = 0x0009_027C,
        QUERY_SHARED_VIRTUAL_DISK_SUPPORT = 0x0009_0300,
        SVHDX_SYNC_TUNNEL_REQUEST = 0x0009_0304,
        QUERY_ALLOCATED_RANGES = 0x0009_40CF,
        OFFLOAD_READ = 0x0009_4264,
        SET_ZERO_DATA = 0x0009_80C8,
        FILE_LEVEL_TRIM = 0x0009_8208,
        OFFLOAD_WRITE = 0x0009_8268,
        DUPLICATE_EXTENTS_TO_FILE = 0x0009_8344,
        DUPLICATE_EXTENTS_TO_FILE_EX = 0x0009_83E8,
        SET_COMPRESSION = 0x0009_C040,
        SET_INTEGRITY_INFORMATION = 0x0009_C280,
        PIPE_PEEK = 0x0011_400C,
        PIPE_WAIT = 0x0011_0018,
        PIPE_TRANSCEIVE = 0x0011_C017,
        SRV_ENUMERATE_SNAPSHOTS = 0x0014_4064,
        SRV_REQUEST_RESUME_KEY = 0x0014_0078,
        LMR_REQUEST_RESILIENCY = 0x0014_01D4,
        QUERY_NETWORK_INTERFACE_INFO = 0x0014_01FC,
        VALIDATE_NEGOTIATE_INFO = 0x0014_0204,
        SRV_COPYCHUNK = 0x0014_40F2,
        SRV_READ_HASH = 0x0014_41BB,
        SRV_COPYCHUNK_WRITE = 0x0014_80F2,
    }
}

wire_flags! {
    /// IOCTL request `Flags` ([MS-SMB2] 2.2.31).
    IoctlFlags(u32) {
        IS_FSCTL = 0x0000_0001,
    }
}

wire_flags! {
    /// CLOSE request/response `Flags` ([MS-SMB2] 2.2.15, 2.2.16).
    CloseFlags(u16) {
        POSTQUERY_ATTRIB = 0x0001,
    }
}

wire_flags! {
    /// READ request `Flags` ([MS-SMB2] 2.2.19).
    ReadFlags(u8) {
        READ_UNBUFFERED = 0x01,
        REQUEST_COMPRESSED = 0x02,
    }
}

wire_enum! {
    /// READ/WRITE `Channel` ([MS-SMB2] 2.2.19, 2.2.21).
    Channel(u32) {
        NONE = 0,
        RDMA_V1 = 1,
        RDMA_V1_INVALIDATE = 2,
        RDMA_TRANSFORM = 3,
    }
}

wire_flags! {
    /// WRITE request `Flags` ([MS-SMB2] 2.2.21).
    WriteFlags(u32) {
        WRITE_THROUGH = 0x0000_0001,
        WRITE_UNBUFFERED = 0x0000_0002,
    }
}

wire_flags! {
    /// QUERY_DIRECTORY request `Flags` ([MS-SMB2] 2.2.33).
    QueryDirectoryFlags(u8) {
        RESTART_SCANS = 0x01,
        RETURN_SINGLE_ENTRY = 0x02,
        INDEX_SPECIFIED = 0x04,
        REOPEN = 0x10,
    }
}

wire_flags! {
    /// QUERY_INFO request `Flags` ([MS-SMB2] 2.2.37).
    QueryInfoFlags(u32) {
        RESTART_SCAN = 0x0000_0001,
        RETURN_SINGLE_ENTRY = 0x0000_0002,
        INDEX_SPECIFIED = 0x0000_0004,
    }
}

wire_flags! {
    /// Security information selectors: QUERY_INFO/SET_INFO `AdditionalInformation`
    /// for `InfoType::SECURITY` ([MS-SMB2] 2.2.37).
    SecurityInformation(u32) {
        OWNER = 0x0000_0001,
        GROUP = 0x0000_0002,
        DACL = 0x0000_0004,
        SACL = 0x0000_0008,
        LABEL = 0x0000_0010,
        ATTRIBUTE = 0x0000_0020,
        SCOPE = 0x0000_0040,
        BACKUP = 0x0001_0000,
    }
}

wire_flags! {
    /// LOCK element `Flags` ([MS-SMB2] 2.2.26.1).
    LockFlags(u32) {
        SHARED_LOCK = 0x0000_0001,
        EXCLUSIVE_LOCK = 0x0000_0002,
        UNLOCK = 0x0000_0004,
        FAIL_IMMEDIATELY = 0x0000_0010,
    }
}

wire_flags! {
    /// CHANGE_NOTIFY request `Flags` ([MS-SMB2] 2.2.35).
    ChangeNotifyFlags(u16) {
        WATCH_TREE = 0x0001,
    }
}

wire_flags! {
    /// CHANGE_NOTIFY `CompletionFilter` ([MS-SMB2] 2.2.35).
    CompletionFilter(u32) {
        FILE_NAME = 0x0000_0001,
        DIR_NAME = 0x0000_0002,
        ATTRIBUTES = 0x0000_0004,
        SIZE = 0x0000_0008,
        LAST_WRITE = 0x0000_0010,
        LAST_ACCESS = 0x0000_0020,
        CREATION = 0x0000_0040,
        EA = 0x0000_0080,
        SECURITY = 0x0000_0100,
        STREAM_NAME = 0x0000_0200,
        STREAM_SIZE = 0x0000_0400,
        STREAM_WRITE = 0x0000_0800,
    }
}

wire_enum! {
    /// Negotiate context `ContextType` ([MS-SMB2] 2.2.3.1).
    NegotiateContextType(u16) {
        PREAUTH_INTEGRITY_CAPABILITIES = 0x0001,
        ENCRYPTION_CAPABILITIES = 0x0002,
        COMPRESSION_CAPABILITIES = 0x0003,
        NETNAME_NEGOTIATE_CONTEXT_ID = 0x0005,
        TRANSPORT_CAPABILITIES = 0x0006,
        RDMA_TRANSFORM_CAPABILITIES = 0x0007,
        SIGNING_CAPABILITIES = 0x0008,
        /// SMB2_POSIX_EXTENSIONS_AVAILABLE (the SMB3 POSIX extensions; [`crate::posix`]).
        POSIX_EXTENSIONS_AVAILABLE = 0x0100,
    }
}

wire_enum! {
    /// Preauth integrity `HashAlgorithms` ([MS-SMB2] 2.2.3.1.1).
    HashAlgorithm(u16) {
        SHA_512 = 0x0001,
    }
}

wire_enum! {
    /// Encryption `Ciphers` ([MS-SMB2] 2.2.3.1.2).
    CipherId(u16) {
        NONE = 0x0000,
        AES_128_CCM = 0x0001,
        AES_128_GCM = 0x0002,
        AES_256_CCM = 0x0003,
        AES_256_GCM = 0x0004,
    }
}

wire_enum! {
    /// Compression `CompressionAlgorithms` ([MS-SMB2] 2.2.3.1.3).
    CompressionAlgorithm(u16) {
        NONE = 0x0000,
        LZNT1 = 0x0001,
        LZ77 = 0x0002,
        LZ77_HUFFMAN = 0x0003,
        PATTERN_V1 = 0x0004,
        LZ4 = 0x0005,
    }
}

wire_enum! {
    /// `SigningAlgorithms` ([MS-SMB2] 2.2.3.1.7).
    SigningAlgorithm(u16) {
        HMAC_SHA256 = 0x0000,
        AES_CMAC = 0x0001,
        AES_GMAC = 0x0002,
    }
}

wire_flags! {
    /// Transport capabilities context `Flags` ([MS-SMB2] 2.2.3.1.5).
    TransportCapabilityFlags(u32) {
        ACCEPT_TRANSPORT_LEVEL_SECURITY = 0x0000_0001,
    }
}

wire_flags! {
    /// Compression capabilities context `Flags` ([MS-SMB2] 2.2.3.1.3).
    CompressionFlags(u32) {
        CHAINED = 0x0000_0001,
    }
}

wire_enum! {
    /// RDMA transform ids ([MS-SMB2] 2.2.3.1.6).
    RdmaTransformId(u16) {
        NONE = 0x0000,
        ENCRYPTION = 0x0001,
        SIGNING = 0x0002,
    }
}

wire_flags! {
    /// TRANSFORM_HEADER `Flags` for 3.1.1 (`EncryptionAlgorithm` in 3.0/3.0.2;
    /// [MS-SMB2] 2.2.41).
    TransformFlags(u16) {
        ENCRYPTED = 0x0001,
    }
}

wire_flags! {
    /// Lease break notification `Flags` ([MS-SMB2] 2.2.23.2).
    LeaseBreakFlags(u32) {
        ACK_REQUIRED = 0x0000_0001,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_debug_prints_name_or_hex() {
        assert_eq!(format!("{:?}", Command::QUERY_DIRECTORY), "QUERY_DIRECTORY");
        assert_eq!(format!("{:?}", Command(0x77)), "Command(0x77)");
        assert_eq!(Command::OPLOCK_BREAK.0, 0x12);
        assert_eq!(Dialect::SMB3_1_1.name(), Some("SMB3_1_1"));
        assert_eq!(Dialect(0x0303).name(), None);
    }

    #[test]
    fn dialects_order_by_wire_value_and_smb3_excludes_wildcard() {
        assert!(Dialect::SMB2_1 < Dialect::SMB3_0);
        assert!(Dialect::SMB3_0_2.is_smb3());
        assert!(!Dialect::WILDCARD.is_smb3());
        assert!(!Dialect::SMB2_1.is_smb3());
    }

    #[test]
    fn flags_debug_lists_names_then_unknown_bits() {
        let f = HeaderFlags::SERVER_TO_REDIR | HeaderFlags::SIGNED | HeaderFlags(0x100);
        assert_eq!(
            format!("{f:?}"),
            "HeaderFlags(SERVER_TO_REDIR | SIGNED | 0x100)"
        );
        assert_eq!(format!("{:?}", ShareAccess::empty()), "ShareAccess(0x0)");
        assert_eq!(f.unknown_bits(), 0x100);
    }

    #[test]
    fn flags_set_operations() {
        let mut a = AccessMask::FILE_READ_DATA | AccessMask::SYNCHRONIZE;
        assert!(a.contains(AccessMask::FILE_LIST_DIRECTORY));
        assert!(!a.contains(AccessMask::FILE_READ_DATA | AccessMask::DELETE));
        assert!(a.intersects(AccessMask::FILE_READ_DATA | AccessMask::DELETE));
        a.remove(AccessMask::SYNCHRONIZE);
        assert_eq!(a, AccessMask::FILE_READ_DATA);
        a.insert(AccessMask::GENERIC_READ);
        assert!(a.intersects(AccessMask::GENERIC_MASK));
        assert_eq!(AccessMask::GENERIC_READ.bits(), 0x8000_0000);
    }

    #[test]
    fn known_values_match_the_spec() {
        assert_eq!(Fsctl::VALIDATE_NEGOTIATE_INFO.0, 0x0014_0204);
        assert_eq!(Fsctl::QUERY_NETWORK_INTERFACE_INFO.0, 0x0014_01FC);
        assert_eq!(CreateOptions::DELETE_ON_CLOSE.0, 0x1000);
        assert_eq!(NegotiateContextType::SIGNING_CAPABILITIES.0, 8);
        assert_eq!(CipherId::AES_256_GCM.0, 4);
        assert_eq!(AccessMask::MAXIMUM_ALLOWED.0, 0x0200_0000);
    }
}
