//! The server's configuration as the core sees it: policies, shares, sizes
//! (the binary reads smb.conf and fills these in; a reload replaces the
//! [`ShareSet`]).

use std::fmt;
use std::sync::Arc;

use ringshare_vfs::Share;
use ringshare_wire::consts::CompressionAlgorithm;

use crate::files::FileKey;

/// Signing policy, in smb.conf words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningPolicy {
    /// Sign when the client asks (Samba `default`/`auto`/`if_required`).
    IfRequired,
    /// Offer signing, require it when the client supports it (`desired`).
    Desired,
    /// Refuse unsigned sessions (`mandatory`/`required`).
    Required,
}

/// SMB 3 encryption policy, in smb.conf words ([MS-SMB2] 3.3.1.5
/// EncryptData / RejectUnencryptedAccess).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncryptPolicy {
    /// No cipher is offered.
    Off,
    /// Encrypt when the client does.
    IfRequired,
    /// Ask clients that can encrypt to encrypt (SMB2_SESSION_FLAG_ENCRYPT_DATA /
    /// SMB2_SHAREFLAG_ENCRYPT_DATA); others still get in.
    Desired,
    /// Only encrypted access: unencrypted requests get ACCESS_DENIED and sessions or
    /// tree connects that cannot encrypt are refused.
    Required,
}

impl EncryptPolicy {
    /// The policy on a connection whose transport security the server
    /// accepted (SMB over QUIC with SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY,
    /// [MS-SMB2] 2.2.3.1.5): the transport encrypts already, so nothing is
    /// asked beyond encrypting when the client does (as Samba 4.23 does).
    pub fn over_secure_transport(self, secure: bool) -> EncryptPolicy {
        match self {
            EncryptPolicy::Desired | EncryptPolicy::Required if secure => EncryptPolicy::IfRequired,
            p => p,
        }
    }
}

/// Opens the directory of a share made per user (a `[homes]` share, or a
/// `path` with `%U`-style substitutions) as a backend.
pub type OpenShare = dyn Fn(&str) -> std::io::Result<Arc<dyn Share>> + Send + Sync;

/// A share whose directory depends on who connects: `path` with Samba's
/// substitutions, resolved and opened at each tree connect.
pub struct ShareTemplate {
    /// The path as configured (`/srv/users/%U`, `%H`).
    pub path: String,
    pub open: Arc<OpenShare>,
}

/// A share as the core sees it.
pub struct ShareDef {
    pub name: String,
    pub comment: String,
    pub backend: Arc<dyn Share>,
    pub read_only: bool,
    pub guest_ok: bool,
    /// The share's encryption policy (the server's unless the share sets one).
    pub encrypt: EncryptPolicy,
    /// Who may connect and as whom files are used (`valid users`, `force
    /// user`, `create mask`…).
    pub rules: crate::identity::ShareRules,
    /// Set for a share made per user: `backend` is then not used (a tree
    /// connect opens the user's own directory).
    pub template: Option<Arc<ShareTemplate>>,
    /// `vfs objects = acl_xattr`: full NT ACLs are kept in Samba's
    /// `security.NTACL` xattr and checked on top of the kernel's check.
    pub nt_acl_xattr: bool,
    /// `durable handles` (Samba's option, default yes): opens may outlive
    /// their connection ([`crate::durable`]).
    pub durable_handles: bool,
    /// `continuous availability` (Samba's and ksmbd's word, default no):
    /// opens asked to be persistent are ([MS-SMB2] 3.3.5.9.10); on a
    /// cluster node their records live in etcd, so they survive the node
    /// (`crate::cluster::ca` (crates/core)); writes go through to stable storage.
    pub continuous_availability: bool,
    /// `change notify` (Samba's option, default yes): CHANGE_NOTIFY works;
    /// with `no` it is answered NOT_IMPLEMENTED, as Samba does.
    pub change_notify: bool,
    /// `posix locking` (Samba's option, default yes): each SMB byte-range lock is also taken
    /// as an open-file-description lock on the open's file (`Node::posix_lock`), so a local
    /// program's fcntl lock stops an SMB LOCK and an SMB lock stops a local program's.
    pub posix_locking: bool,
    /// `strict locking` (Samba's option): with `posix locking`, whether a READ or WRITE the
    /// lock table allows is also checked against local programs' POSIX locks: `None` (auto,
    /// the default) unless the open's lease or oplock caches it, `Some(true)` always,
    /// `Some(false)` never. The lock table (SMB clients' own locks) is always checked.
    pub strict_locking: Option<bool>,
    /// `fs calls off io thread` (ringshare's own option): whether the share's file system
    /// calls are made away from the I/O threads ([`crate::fsjob`]): `None` (auto, the
    /// default) where the backend says they may wait on a network
    /// ([`Share::may_wait_on_network`]), `Some(true)` always, `Some(false)` never.
    pub fs_offload: Option<bool>,
    /// Files have named data streams (`vfs objects` lists `streams_xattr`,
    /// or names no modules): used when the backend supports them too
    /// ([`ShareDef::has_streams`]); without, a `:` in a name is
    /// OBJECT_NAME_INVALID.
    pub streams: bool,
    /// `vfs objects` lists `fruit`: Apple's extensions with these options.
    pub fruit: Option<Arc<Fruit>>,
    /// The identity of the share's directory, found at the first change
    /// notification that needs it ([`crate::notify::root_key`]).
    pub root_key: std::sync::OnceLock<Option<FileKey>>,
    /// `vfs objects` lists `shadow_copy2`: Previous Versions, from these
    /// snapshots ([`crate::shadow`]).
    pub shadow: Option<Arc<crate::shadow::ShadowCopy>>,
    /// Where the share's quotas come from (`get quota command`): the free space a user is
    /// shown honours their quota ([`crate::quota`]).
    pub quota: Option<Arc<dyn crate::quota::QuotaSource>>,
    /// `smb3 unix extensions` (Samba's share option, default no): a CREATE
    /// with the POSIX context on a connection that negotiated the extensions
    /// makes a POSIX open ([`ringshare_wire::posix`]).
    pub smb3_unix_extensions: bool,
    /// `compress data` (Windows' `Set-SmbShare -CompressData`; Samba 4.22
    /// and ksmbd have no such option), default no: TREE_CONNECT answers
    /// SMB2_SHAREFLAG_COMPRESS_DATA on a connection that agreed on
    /// compression, and READs are compressed (when it pays) whether or not
    /// they ask ([MS-SMB2] 2.2.10, 3.3.5.12).
    pub compress_data: bool,
}

impl ShareDef {
    /// Whether the share's file system calls are made away from the I/O threads
    /// ([`ShareDef::fs_offload`]; auto asks the backend, which decided when it was set up).
    pub fn offloaded(&self) -> bool {
        self.fs_offload
            .unwrap_or_else(|| self.backend.may_wait_on_network())
    }

    /// This share under another name and on another backend (a `[homes]`
    /// or `%U` share made for a user, a snapshot of the share), with its
    /// other settings.
    pub fn with_backend(&self, name: &str, backend: Arc<dyn Share>) -> ShareDef {
        ShareDef {
            name: name.to_string(),
            comment: self.comment.clone(),
            backend,
            read_only: self.read_only,
            guest_ok: self.guest_ok,
            encrypt: self.encrypt,
            rules: self.rules.clone(),
            template: None,
            nt_acl_xattr: self.nt_acl_xattr,
            durable_handles: self.durable_handles,
            continuous_availability: self.continuous_availability,
            change_notify: self.change_notify,
            posix_locking: self.posix_locking,
            strict_locking: self.strict_locking,
            fs_offload: self.fs_offload,
            streams: self.streams,
            smb3_unix_extensions: self.smb3_unix_extensions,
            compress_data: self.compress_data,
            fruit: self.fruit.clone(),
            root_key: Default::default(),
            shadow: self.shadow.clone(),
            quota: self.quota.clone(),
        }
    }

    /// Named streams are on for this share and its files can have them.
    pub fn has_streams(&self) -> bool {
        self.streams && self.backend.streams_supported()
    }
}

impl fmt::Debug for ShareDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShareDef")
            .field("name", &self.name)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Everything the core needs to know about the server's configuration.
#[derive(Debug)]
pub struct ServerConfig {
    /// Lowest and highest dialect offered (0x0202 ..= 0x0311).
    pub dialect_min: u16,
    pub dialect_max: u16,
    pub signing: SigningPolicy,
    /// `server smb encrypt`.
    pub encrypt: EncryptPolicy,
    pub server_guid: [u8; 16],
    pub netbios_name: String,
    pub workgroup: String,
    pub dns_name: String,
    /// Unknown users log in as guest (smb.conf `map to guest = bad user`).
    pub map_bad_user_to_guest: bool,
    /// Guest logins are possible at all (any share has `guest ok`).
    /// With `shares` and `homes`, moved into the server's [`ShareSet`] at
    /// start (read them with [`crate::server::ServerState::shares`]; a reload replaces them).
    pub guest_enabled: bool,
    pub shares: Vec<Arc<ShareDef>>,
    /// The `[homes]` section: a connection to a share named after a Unix
    /// account that no other share has gets this one, with the account's
    /// home directory (Samba's rules).
    pub homes: Option<Arc<ShareDef>>,
    /// Wall-clock boot time (FILETIME) for NEGOTIATE's ServerStartTime.
    pub start_filetime: u64,
    /// A connection without an authenticated session is closed this long after
    /// it was accepted (milliseconds).
    pub handshake_timeout_ms: u64,
    /// How long a version 1 durable open (DHnQ) is kept after its
    /// connection went (`durable handle timeout`; 16 minutes by default).
    pub durable_v1_timeout_ms: u64,
    /// A connection with no open file, no pending request and no request for
    /// this long is closed (milliseconds; 0 = never).
    pub idle_timeout_ms: u64,
    /// `server multi channel support`: 3.x NEGOTIATE advertises
    /// SMB2_GLOBAL_CAP_MULTI_CHANNEL and SESSION_SETUP accepts binding.
    pub multi_channel: bool,
    /// Check LOCK's sequence numbers on durable opens and multichannel
    /// sessions ([MS-SMB2] 3.3.5.14; off with Samba's `smb2 disable lock
    /// sequence checking`).
    pub lock_sequence_checking: bool,
    /// `smb3 directory leases` (Samba 4.22's option): 3.x NEGOTIATE offers
    /// SMB2_GLOBAL_CAP_DIRECTORY_LEASING to clients that ask, and their
    /// directory opens may get R or RH leases (`crate::dirlease`).
    pub directory_leases: bool,
    /// `smb3 unix extensions` in `[global]` (Samba reads the global value at
    /// NEGOTIATE): a 3.1.1 NEGOTIATE offering the POSIX extensions is answered
    /// with their context.
    pub posix_extensions: bool,
    /// MaxReadSize, MaxWriteSize and MaxTransactSize for SMB 2.1 and later.
    pub io_sizes: IoSizes,
    /// `guest account`: the Unix account guest and anonymous sessions act as.
    pub guest_account: String,
    /// `failed logon backoff`: after this many failed logons from one
    /// address, answers to its logons wait ([`crate::backoff`]); 0 = off.
    pub failed_logon_backoff: u32,
    /// `server smb encryption over quic` (Samba 4.23's words; off here by
    /// default, as Windows' DisableSmbEncryptionOnSecureConnection): SMB
    /// encryption is asked for over QUIC too, even when the client offers
    /// to trust the transport's (SMB2_TRANSPORT_CAPABILITIES).
    pub smb_encryption_over_quic: bool,
    /// `server smb compression` and `server smb compression algorithms`: the
    /// algorithms an SMB 3.1.1 NEGOTIATE may agree on, in the server's order
    /// of preference (the first the server can compress with is what it sends
    /// with); empty: compression is off ([`DEFAULT_COMPRESSION`] by default).
    pub compression: Vec<CompressionAlgorithm>,
}

/// The algorithms negotiated by default, in the server's order of
/// preference: LZ4 first (of the codecs, the cheapest to compress with and the
/// cheapest to find incompressible: docs/compression.md), then plain LZ77
/// (XPRESS, what Windows sends), Pattern_V1 (chained runs), LZ77+Huffman and
/// LZNT1.
pub const DEFAULT_COMPRESSION: [CompressionAlgorithm; 5] = [
    CompressionAlgorithm::LZ4,
    CompressionAlgorithm::LZ77,
    CompressionAlgorithm::PATTERN_V1,
    CompressionAlgorithm::LZ77_HUFFMAN,
    CompressionAlgorithm::LZNT1,
];

/// The largest READ, WRITE and other payload (QUERY_INFO, QUERY_DIRECTORY,
/// SET_INFO, IOCTL, CHANGE_NOTIFY buffers) a client may ask for over SMB 2.1
/// and later (`smb2 max read`, `smb2 max write`, `smb2 max trans`); SMB 2.0.2
/// always uses 64 KiB. Each lies in [`limits::IO_SIZE_MIN`](crate::limits::IO_SIZE_MIN) ..=
/// [`limits::IO_SIZE_MAX`](crate::limits::IO_SIZE_MAX) ([`IoSizes::new`] clamps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoSizes {
    pub read: u32,
    pub write: u32,
    pub trans: u32,
}

impl IoSizes {
    /// What SMB 2.0.2 uses: 64 KiB each ([MS-SMB2] 3.3.5.4).
    pub const SMB2_0_2: IoSizes = IoSizes {
        read: crate::limits::IO_SIZE_MIN,
        write: crate::limits::IO_SIZE_MIN,
        trans: crate::limits::IO_SIZE_MIN,
    };

    /// The three sizes, each clamped to the range the server supports.
    pub fn new(read: u32, write: u32, trans: u32) -> IoSizes {
        let clamp = |n: u32| n.clamp(crate::limits::IO_SIZE_MIN, crate::limits::IO_SIZE_MAX);
        IoSizes {
            read: clamp(read),
            write: clamp(write),
            trans: clamp(trans),
        }
    }
}

impl Default for IoSizes {
    /// 8 MiB each, as Samba.
    fn default() -> IoSizes {
        let max = crate::limits::IO_SIZE_MAX;
        IoSizes::new(max, max, max)
    }
}

/// The shares the server offers now: taken from [`ServerConfig`] at start,
/// replaced as a whole by a reload ([`crate::server::ServerState::replace_shares`]).
#[derive(Debug, Default)]
pub struct ShareSet {
    pub shares: Vec<Arc<ShareDef>>,
    pub homes: Option<Arc<ShareDef>>,
    /// Guest logons are possible at all (some share has `guest ok`).
    pub guest_enabled: bool,
}

impl ShareSet {
    /// The configured share of this name (share names ignore case).
    pub fn share(&self, name: &str) -> Option<&Arc<ShareDef>> {
        self.shares
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    }
}

/// `fruit:metadata`: where `AFP_AfpInfo` is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metadata {
    /// Netatalk's `org.netatalk.Metadata` xattr (Samba's default).
    Netatalk,
    /// A plain `AFP_AfpInfo` stream.
    Stream,
}

/// `fruit:resource`: where `AFP_Resource` is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// An AppleDouble `._name` file beside the file (Samba's default).
    File,
    /// The `org.netatalk.ResourceFork` xattr.
    Xattr,
    /// A plain `AFP_Resource` stream.
    Stream,
}

/// A share's `fruit:` options (Samba's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fruit {
    /// `fruit:aapl` (default yes): answer the AAPL create context.
    pub aapl: bool,
    /// `fruit:model` (default "MacSamba"): the model Finder shows an icon for.
    pub model: String,
    /// `fruit:nfs_aces` (default yes): advertise NFS ACEs (modes in ACLs).
    pub nfs_aces: bool,
    /// `fruit:copyfile` (default no): advertise server-side copies of all streams.
    pub copyfile: bool,
    /// `fruit:time machine` (default no): the share takes Time Machine backups.
    pub time_machine: bool,
    /// `fruit:time machine max size` in bytes (0: none): the size a Time
    /// Machine share reports, less the bands of its sparse bundles.
    pub time_machine_max_size: u64,
    /// `fruit:zero_file_id` (default yes): with AAPL, file ids are 0.
    pub zero_file_id: bool,
    /// `fruit:metadata`.
    pub metadata: Metadata,
    /// `fruit:resource`.
    pub resource: Resource,
    /// `fruit:veto_appledouble` (default yes): with `fruit:resource =
    /// file`, clients neither see nor open `._` files.
    pub veto_appledouble: bool,
    /// `fruit:posix_rename` (default yes): after AAPL, a directory is
    /// renamed even with files open below it.
    pub posix_rename: bool,
}

impl Default for Fruit {
    fn default() -> Fruit {
        Fruit {
            aapl: true,
            model: "MacSamba".to_string(),
            nfs_aces: true,
            copyfile: false,
            time_machine: false,
            time_machine_max_size: 0,
            zero_file_id: true,
            metadata: Metadata::Netatalk,
            resource: Resource::File,
            veto_appledouble: true,
            posix_rename: true,
        }
    }
}
