//! The `smb.conf` keys ringshare knows (after [`super::parse::normalize_key`]): what each
//! means ([`Opt`]), which are share rules ([`Rule`]), and the Samba options it ignores or
//! refuses, with the reason `ringshare testparm` prints.

/// A share option that goes into [`ringshare_core::ShareRules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    InvalidUsers,
    ReadList,
    WriteList,
    AdminUsers,
    ForceUser,
    ForceGroup,
    CreateMask,
    DirectoryMask,
    ForceCreateMode,
    ForceDirectoryMode,
    InheritPermissions,
    InheritAcls,
    InheritOwner,
    HideUnreadable,
}

/// Which of the `tls …file` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TlsFile {
    Cert,
    Key,
    Ca,
}

/// What a normalised key means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opt {
    // [global] options.
    MinProtocol,
    MaxProtocol,
    Signing,
    Interfaces,
    BindInterfacesOnly,
    MaxConnections,
    Deadtime,
    HandshakeTimeout,
    DurableHandleTimeout,
    LogLevel,
    SmbPasswdFile,
    Listen,
    SmbTransports,
    TlsFile(TlsFile),
    /// QUIC's other options ([`super::quic::QuicOptions`]).
    Quic(super::quic::QuicOpt),
    NetbiosName,
    Workgroup,
    ServerString,
    MapToGuest,
    GuestAccount,
    /// `get quota command`, `set quota command` (true).
    QuotaCommand(bool),
    ServerRole,
    Security,
    /// `idmap config DOMAIN : …`, `winbind use default domain`, `winbind separator`.
    Member,
    Realm,
    KerberosMethod,
    DedicatedKeytabFile,
    KerberosEncryptionTypes,
    SmbEncrypt,
    UseSendfile,
    PinCpus,
    MultishotReceive,
    KernelChangeNotify,
    MulticastDnsRegister,
    Wsd,
    LocalKdc,
    ZerocopySend,
    SendTimeout,
    MultiChannel,
    Smb3DirectoryLeases,
    Compression,
    CompressionAlgorithms,
    DisableLockSequenceChecking,
    Smb2MaxRead,
    Smb2MaxWrite,
    Smb2MaxTrans,
    ControlSocket,
    ControlGroup,
    MetricsListen,
    FailedLogonBackoff,
    /// `cluster <name>` ([`super::cluster`]).
    Cluster,
    // Share options (defaults when written in [global]).
    Path,
    ReadOnly,
    Writeable,
    GuestOk,
    ValidUsers,
    Comment,
    Browseable,
    /// Who may connect and as whom files are used: each goes into the
    /// share's [`ringshare_core::ShareRules`].
    Rule(Rule),
    /// `vfs objects`: `acl_xattr` is honoured; others are warned about.
    VfsObjects,
    /// `durable handles` (per share).
    DurableHandles,
    /// `continuous availability` (per share).
    ContinuousAvailability,
    ChangeNotify,
    /// `posix locking` (per share).
    PosixLocking,
    /// `strict locking` (per share: auto, yes or no).
    StrictLocking,
    /// `fs calls off io thread` (per share: auto, yes or no).
    FsOffload,
    /// `smb3 unix extensions` (per share; the `[global]` value also rules NEGOTIATE).
    Smb3UnixExtensions,
    /// `compress data` (per share).
    CompressData,
    /// `fruit:<name>` (vfs_fruit's options).
    Fruit,
    /// `shadow:<name>` (vfs_shadow_copy2's options).
    Shadow,
    /// Known, meaningless for ringshare: accepted without a warning at
    /// start, and listed by `ringshare testparm` with the reason.
    Ignored(&'static str),
    /// Ignoring it would grant more access than the administrator meant: refuse to start.
    Refused(&'static str),
}

impl Opt {
    pub(super) fn is_global_only(self) -> bool {
        !matches!(
            self,
            Opt::Path
                | Opt::ReadOnly
                | Opt::Writeable
                | Opt::GuestOk
                | Opt::ValidUsers
                | Opt::Comment
                | Opt::Browseable
                | Opt::Rule(_)
                | Opt::VfsObjects
                | Opt::DurableHandles
                | Opt::ContinuousAvailability
                | Opt::ChangeNotify
                | Opt::PosixLocking
                | Opt::StrictLocking
                | Opt::FsOffload
                | Opt::Smb3UnixExtensions
                | Opt::CompressData
                | Opt::Fruit
                | Opt::Shadow
                | Opt::SmbEncrypt
                | Opt::Ignored(_)
                | Opt::Refused(_)
        )
    }
}

// Why groups of Samba options are ignored (`ringshare testparm` prints these).
const WHY_PASSDB: &str = "ringshare keeps users in its smbpasswd file (`smb passwd file`); \
     bring Samba's users over with `ringshare user import`";
const WHY_LOG: &str = "ringshare logs to standard error (`log level` sets how much)";
const WHY_NETBIOS: &str =
    "ringshare has no NetBIOS services (name service, browsing, WINS); it serves SMB over TCP";
const WHY_PRINTING: &str = "ringshare shares no printers";
const WHY_PAM: &str =
    "ringshare neither uses PAM nor changes Unix passwords; SMB passwords live in its smbpasswd file";
const WHY_USERSHARE: &str = "ringshare has no usershares (shares made with `net usershare`)";
const WHY_DOS: &str = "ringshare always keeps DOS attributes in the `user.DOSATTRIB` xattr \
     (Samba's `store dos attributes = yes`) and maps none of them to mode bits";

pub(super) fn classify(key: &str) -> Option<Opt> {
    if let Some(q) = super::quic::QuicOpt::classify(key) {
        return Some(Opt::Quic(q));
    }
    if key.starts_with("fruit:") {
        return Some(Opt::Fruit);
    }
    if key.starts_with("shadow:") {
        return Some(Opt::Shadow);
    }
    if key.starts_with("cluster ") {
        return Some(Opt::Cluster);
    }
    if key.starts_with("idmap config ")
        || key == "winbind use default domain"
        || key == "winbind separator"
        || key == "winbindd socket directory"
        || key == "id source"
        || key == "sssd id range"
    {
        return Some(Opt::Member);
    }
    if super::member::is_winbinds(key) {
        return Some(Opt::Ignored(
            "winbind's (or sssd's) option: that daemon reads it; ringshare asks NSS",
        ));
    }
    Some(match key {
        "server min protocol" | "min protocol" => Opt::MinProtocol,
        "server max protocol" | "max protocol" | "protocol" => Opt::MaxProtocol,
        "server signing" => Opt::Signing,
        "interfaces" => Opt::Interfaces,
        "bind interfaces only" => Opt::BindInterfacesOnly,
        "use sendfile" => Opt::UseSendfile,
        "pin cpus" => Opt::PinCpus,
        "multishot receive" => Opt::MultishotReceive,
        "kernel change notify" => Opt::KernelChangeNotify,
        "multicast dns register" => Opt::MulticastDnsRegister,
        "wsd" => Opt::Wsd,
        "local kdc" => Opt::LocalKdc,
        "zerocopy send" => Opt::ZerocopySend,
        "send timeout" => Opt::SendTimeout,
        "server multi channel support" => Opt::MultiChannel,
        "server smb compression" => Opt::Compression,
        "server smb compression algorithms" => Opt::CompressionAlgorithms,
        "smb2 disable lock sequence checking" => Opt::DisableLockSequenceChecking,
        "smb3 directory leases" => Opt::Smb3DirectoryLeases,
        "max connections" => Opt::MaxConnections,
        "smb2 max read" => Opt::Smb2MaxRead,
        "smb2 max write" => Opt::Smb2MaxWrite,
        "smb2 max trans" => Opt::Smb2MaxTrans,
        "deadtime" => Opt::Deadtime,
        "handshake timeout" => Opt::HandshakeTimeout,
        "durable handle timeout" => Opt::DurableHandleTimeout,
        "log level" | "debug level" | "debuglevel" | "loglevel" => Opt::LogLevel,
        "smb passwd file" => Opt::SmbPasswdFile,
        "control socket" => Opt::ControlSocket,
        "control group" => Opt::ControlGroup,
        "metrics listen" => Opt::MetricsListen,
        "failed logon backoff" => Opt::FailedLogonBackoff,
        "listen" => Opt::Listen,
        "server smb transports" => Opt::SmbTransports,
        "tls certfile" => Opt::TlsFile(TlsFile::Cert),
        "tls keyfile" => Opt::TlsFile(TlsFile::Key),
        "tls cafile" => Opt::TlsFile(TlsFile::Ca),
        "netbios name" => Opt::NetbiosName,
        "workgroup" => Opt::Workgroup,
        "server string" => Opt::ServerString,
        "map to guest" => Opt::MapToGuest,
        "guest account" => Opt::GuestAccount,
        "get quota command" => Opt::QuotaCommand(false),
        "set quota command" => Opt::QuotaCommand(true),
        "server role" => Opt::ServerRole,
        "realm" => Opt::Realm,
        "kerberos method" => Opt::KerberosMethod,
        "dedicated keytab file" => Opt::DedicatedKeytabFile,
        "kerberos encryption types" => Opt::KerberosEncryptionTypes,
        "security" => Opt::Security,
        "smb encrypt" | "server smb encrypt" => Opt::SmbEncrypt,
        "path" | "directory" => Opt::Path,
        "read only" => Opt::ReadOnly,
        "writeable" | "writable" | "write ok" => Opt::Writeable,
        "guest ok" | "public" => Opt::GuestOk,
        "valid users" => Opt::ValidUsers,
        "comment" => Opt::Comment,
        "browseable" | "browsable" => Opt::Browseable,
        "invalid users" => Opt::Rule(Rule::InvalidUsers),
        "read list" => Opt::Rule(Rule::ReadList),
        "write list" => Opt::Rule(Rule::WriteList),
        "admin users" => Opt::Rule(Rule::AdminUsers),
        "force user" => Opt::Rule(Rule::ForceUser),
        "force group" | "group" => Opt::Rule(Rule::ForceGroup),
        "create mask" | "create mode" => Opt::Rule(Rule::CreateMask),
        "directory mask" | "directory mode" => Opt::Rule(Rule::DirectoryMask),
        "force create mode" => Opt::Rule(Rule::ForceCreateMode),
        "force directory mode" => Opt::Rule(Rule::ForceDirectoryMode),
        "inherit permissions" => Opt::Rule(Rule::InheritPermissions),
        "inherit acls" => Opt::Rule(Rule::InheritAcls),
        "inherit owner" => Opt::Rule(Rule::InheritOwner),
        "hide unreadable" => Opt::Rule(Rule::HideUnreadable),
        "vfs objects" | "vfs object" => Opt::VfsObjects,
        "durable handles" => Opt::DurableHandles,
        "continuous availability" => Opt::ContinuousAvailability,
        "change notify" => Opt::ChangeNotify,
        "smb3 unix extensions" => Opt::Smb3UnixExtensions,
        "compress data" => Opt::CompressData,
        "passdb backend" => Opt::Ignored(WHY_PASSDB),
        "log file" | "max log size" | "logging" | "syslog" | "syslog only" => Opt::Ignored(WHY_LOG),
        "disable netbios" | "wins support" | "local master" | "domain master"
        | "preferred master" | "os level" | "dns proxy" => Opt::Ignored(WHY_NETBIOS),
        "load printers"
        | "printing"
        | "printcap name"
        | "disable spoolss"
        | "show add printer wizard" => Opt::Ignored(WHY_PRINTING),
        "obey pam restrictions"
        | "unix password sync"
        | "pam password change"
        | "passwd program"
        | "passwd chat" => Opt::Ignored(WHY_PAM),
        "usershare allow guests"
        | "usershare path"
        | "usershare max shares"
        | "usershare owner only" => Opt::Ignored(WHY_USERSHARE),
        "ea support" => Opt::Ignored("extended attributes are always on (kept in `user.` xattrs)"),
        "store dos attributes" | "map archive" | "map hidden" | "map system" | "map readonly" => {
            Opt::Ignored(WHY_DOS)
        }
        "panic action" => Opt::Ignored("ringshare runs no panic action"),
        "state directory" | "cache directory" | "lock directory" | "private dir"
        | "pid directory" | "ncalrpc dir" | "binddns dir" => {
            Opt::Ignored("Samba's own directories; ringshare keeps no state in them")
        }
        "server services" => Opt::Ignored("ringshare runs only its SMB file service"),
        "socket options" => Opt::Ignored("ringshare sets its own socket options"),
        "kernel oplocks" => Opt::Ignored("ringshare takes no kernel oplocks (file leases)"),
        "posix locking" => Opt::PosixLocking,
        "strict locking" => Opt::StrictLocking,
        "fs calls off io thread" => Opt::FsOffload,
        "smb ports" => Opt::Ignored("ringshare listens where `listen` says (default 0.0.0.0:445)"),
        "unix extensions" => Opt::Ignored("an SMB1 feature; ringshare speaks SMB 2 and 3 only"),
        "smb2 leases" => {
            Opt::Ignored("ringshare always offers leases to SMB 2.1 and later clients")
        }
        "hosts allow" | "allow hosts" | "hosts deny" | "deny hosts" => {
            Opt::Refused("host filtering is not supported; remove it and use a firewall")
        }
        "include" | "config file" => {
            Opt::Refused("is not supported; put the whole configuration in one file")
        }
        _ => return None,
    })
}
