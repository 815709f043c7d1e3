//! The configuration file: an `smb.conf`-style parser.
//!
//! The format is the one Samba and ksmbd administrators already know:
//!
//! ```text
//! ; a comment            # also a comment (only at the start of a line)
//! [global]
//!    server min protocol = SMB2_10
//!    listen = 127.0.0.1:4450, [::1]:4450      ; ringshare extension
//! [data]
//!    path = /srv/data
//!    read only = no
//!    valid users = alice, bob \
//!                  carol
//! ```
//!
//! Rules, in the order they are applied:
//! - A physical line whose last non-blank character is `\` continues on the next line: the `\`
//!   is removed and the next line is appended as it is. Comment lines never continue.
//! - Lines whose first non-blank character is `;` or `#` are comments. There are no comments at
//!   the end of a `key = value` line: `;` and `#` there are part of the value, as in Samba.
//! - `[name]` opens a section. `[global]` holds server-wide options; any other name is a share.
//! - Keys are case-insensitive; `_` counts as a space and runs of blanks count as one space,
//!   so `Read_Only`, `read  only` and `READ ONLY` are the same key.
//! - Booleans are `yes/no`, `true/false`, `1/0`, `on/off`, in any case.
//! - Share options written in `[global]` (`read only`, `guest ok`, `browseable`,
//!   `valid users`, `comment`) are the defaults for every share, as in Samba.
//! - Relative paths (`path`, `smb passwd file`) are taken relative to the directory holding the
//!   configuration file, not to the working directory of the server.
//!
//! Unknown options give a [`ConfigWarning`] and are ignored. A short list of Samba options that
//! make no sense for ringshare (printing, NetBIOS, passdb backends, log files, VFS modules…) is
//! accepted without a warning (they are kept in [`Config::ignored`] with the reason, for
//! `ringshare testparm`). Options whose silent omission would weaken security (`hosts allow`,
//! `include`) stop start-up with a
//! [`ConfigError`], as does every value ringshare cannot honour.

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};

use ringshare_core::{InheritOwner, ShareRules};
use ringshare_wire::consts::CompressionAlgorithm;

mod cluster;
mod fruit;
mod keys;
pub mod member;
mod parse;
pub mod quic;
mod shadow;

pub use cluster::{ClusterOptions, WITNESS_PORT};

use parse::*;
pub use parse::{normalize_key, parse_bool};

/// The SMB 2/3 dialects ringshare can be limited to ([MS-SMB2] 2.2.3, `Dialects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dialect {
    /// SMB 2.0.2 (0x0202).
    Smb2_02,
    /// SMB 2.1 (0x0210).
    Smb2_10,
    /// SMB 3.0 (0x0300).
    Smb3_00,
    /// SMB 3.0.2 (0x0302).
    Smb3_02,
    /// SMB 3.1.1 (0x0311).
    Smb3_11,
}

impl Dialect {
    /// The dialect revision number sent on the wire ([MS-SMB2] 2.2.3).
    pub fn revision(self) -> u16 {
        match self {
            Dialect::Smb2_02 => 0x0202,
            Dialect::Smb2_10 => 0x0210,
            Dialect::Smb3_00 => 0x0300,
            Dialect::Smb3_02 => 0x0302,
            Dialect::Smb3_11 => 0x0311,
        }
    }

    /// The Samba spelling of the dialect (`SMB3_11`).
    pub fn samba_name(self) -> &'static str {
        match self {
            Dialect::Smb2_02 => "SMB2_02",
            Dialect::Smb2_10 => "SMB2_10",
            Dialect::Smb3_00 => "SMB3_00",
            Dialect::Smb3_02 => "SMB3_02",
            Dialect::Smb3_11 => "SMB3_11",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.samba_name())
    }
}

/// Which end of a range a protocol name is read for: Samba reads the family names `SMB2` and
/// `SMB3` as the lowest member of the family for a minimum and the highest for a maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Min,
    Max,
}

/// `server signing` ([MS-SMB2] 3.3.1.1 `RequireMessageSigning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningPolicy {
    /// Samba's `default`: sign when the client asks; require it for nothing.
    Default,
    /// Samba's `auto` / `if_required` (and `disabled`, which SMB2 cannot honour): sign when the
    /// client requires it.
    Auto,
    /// Offer signing and sign when the client agrees.
    Desired,
    /// Refuse unsigned sessions (`mandatory`, `required`, `yes`).
    Mandatory,
}

/// `pin cpus` (ringshare extension): where the I/O threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinCpus {
    /// Wherever the scheduler puts them.
    No,
    /// I/O thread N keeps to CPU N, with the io-wq workers that run its splices, while it sends
    /// READ data spliced from the page cache, and for a moment after; otherwise it is free
    /// (docs/limits.md). The default.
    Auto,
    /// I/O thread N always runs on CPU N.
    Yes,
}

/// `zerocopy send` (ringshare extension): whether large in-memory replies
/// (signed or encrypted READ data) go out with io_uring `SEND_ZC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZerocopySend {
    /// Never.
    No,
    /// Not on connections within this host (they copy anyway); on others,
    /// until the kernel reports that it copied (a device without
    /// scatter-gather). The default.
    Auto,
    /// Always, even where the kernel copies (for measuring).
    Yes,
}

/// `server smb encrypt` / per share `smb encrypt`: the core's policy, read from Samba's words
/// (`off`, `disabled`, `no`; `default`, `auto`, `if_required`, the default; `desired`;
/// `required`, `mandatory`).
pub use ringshare_core::EncryptPolicy;

/// A `server smb compression algorithms` name.
pub fn compression_algorithm(name: &str) -> Option<CompressionAlgorithm> {
    Some(match name.to_ascii_lowercase().as_str() {
        "lz4" => CompressionAlgorithm::LZ4,
        "lz77" | "xpress" => CompressionAlgorithm::LZ77,
        "pattern_v1" => CompressionAlgorithm::PATTERN_V1,
        "lz77+huffman" | "xpress_huffman" => CompressionAlgorithm::LZ77_HUFFMAN,
        "lznt1" => CompressionAlgorithm::LZNT1,
        _ => return None,
    })
}

/// The name `server smb compression algorithms` takes for `a`.
pub fn compression_algorithm_name(a: CompressionAlgorithm) -> &'static str {
    match a {
        CompressionAlgorithm::LZ4 => "lz4",
        CompressionAlgorithm::LZ77 => "lz77",
        CompressionAlgorithm::PATTERN_V1 => "pattern_v1",
        CompressionAlgorithm::LZ77_HUFFMAN => "lz77+huffman",
        CompressionAlgorithm::LZNT1 => "lznt1",
        _ => "none",
    }
}

fn parse_encrypt(value: &str) -> Option<EncryptPolicy> {
    Some(match normalize_key(value).as_str() {
        "off" | "no" | "false" | "0" | "disabled" => EncryptPolicy::Off,
        "default" | "auto" | "if required" => EncryptPolicy::IfRequired,
        "desired" | "enabled" | "yes" | "true" | "1" => EncryptPolicy::Desired,
        "required" | "mandatory" | "forced" => EncryptPolicy::Required,
        _ => return None,
    })
}

/// `kerberos method` (Samba's words): where the keys of the server's Kerberos service are.
/// ringshare reads keytabs only; Samba's `secrets.tdb` is not read, so `secrets only` (Samba's
/// default) means no Kerberos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KerberosMethod {
    /// `secrets only` (and `default`): no keytab, so no Kerberos.
    SecretsOnly,
    /// `dedicated keytab`: the file `dedicated keytab file` names.
    DedicatedKeytab,
    /// `system keytab`: /etc/krb5.keytab.
    SystemKeytab,
    /// `secrets and keytab`: /etc/krb5.keytab (what `net ads join` writes with it).
    SecretsAndKeytab,
}

/// The system keytab.
pub const SYSTEM_KEYTAB: &str = "/etc/krb5.keytab";

/// `kerberos encryption types` (Samba's words; Samba reads it as a Kerberos client, ringshare
/// as the acceptor): which tickets are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KerberosEncryptionTypes {
    /// `strong` (the default): AES-256 and AES-128 only; RC4-HMAC tickets are refused.
    Strong,
    /// `all`: AES and RC4-HMAC (enctype 23), for old domains and accounts without AES keys.
    All,
    /// `legacy`: Samba's client then asks for RC4 only; ringshare accepts RC4-HMAC and AES, as
    /// with `all` (refusing AES tickets would gain nothing).
    Legacy,
}

impl KerberosEncryptionTypes {
    /// Whether RC4-HMAC tickets are accepted.
    pub fn allows_rc4(self) -> bool {
        self != KerberosEncryptionTypes::Strong
    }

    /// The value as smb.conf spells it.
    pub fn name(self) -> &'static str {
        match self {
            KerberosEncryptionTypes::Strong => "strong",
            KerberosEncryptionTypes::All => "all",
            KerberosEncryptionTypes::Legacy => "legacy",
        }
    }
}

impl Global {
    /// The keytab Kerberos tickets are accepted with, when Kerberos is on: `dedicated keytab
    /// file` (with `kerberos method = dedicated keytab`, or alone), or the system keytab.
    /// The realm of the built-in KDC (`local kdc`): `realm` when set, else the NetBIOS name in
    /// upper case. Users' AES keys are salted with it.
    pub fn local_realm(&self) -> String {
        if self.realm.is_empty() {
            self.netbios_name.to_ascii_uppercase()
        } else {
            self.realm.clone()
        }
    }

    pub fn keytab(&self) -> Option<PathBuf> {
        match self.kerberos_method {
            KerberosMethod::SystemKeytab | KerberosMethod::SecretsAndKeytab => {
                Some(PathBuf::from(SYSTEM_KEYTAB))
            }
            KerberosMethod::DedicatedKeytab | KerberosMethod::SecretsOnly => {
                self.dedicated_keytab_file.clone()
            }
        }
    }
}

/// `map to guest`: what happens to a logon with an unknown user name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapToGuest {
    /// Unknown users are refused.
    Never,
    /// Unknown users become the guest; a known user with a wrong password is still refused.
    BadUser,
}

/// The `[global]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Global {
    /// `server min protocol` (also `min protocol`); default SMB2_02.
    pub server_min_protocol: Dialect,
    /// `server max protocol` (also `max protocol`, `protocol`); default SMB3_11.
    pub server_max_protocol: Dialect,
    /// `server signing`; default [`SigningPolicy::Default`].
    pub server_signing: SigningPolicy,
    /// `interfaces`: names or addresses, split on blanks and commas.
    pub interfaces: Vec<String>,
    /// `bind interfaces only`; default no.
    pub bind_interfaces_only: bool,
    /// `max connections`; 0 means no limit.
    pub max_connections: u32,
    /// `deadtime` (minutes, as in Samba): a connection with no open file and no request for
    /// this long is closed; 0 = never. Default 15.
    pub deadtime_minutes: u32,
    /// `handshake timeout` (ringshare extension, seconds): a connection that has no
    /// authenticated session this long after it was accepted is closed. Default 30.
    pub handshake_timeout_secs: u32,
    /// `durable handle timeout` (ringshare extension, seconds): how long a version 1 durable
    /// open (DHnQ) is kept after its connection went. Default 960 (16 minutes, as Windows and
    /// Samba).
    pub durable_handle_timeout_secs: u32,
    /// `log level` (also `debug level`): the leading number of Samba's `N class:M ...` form.
    pub log_level: u32,
    /// `smb passwd file`; default from [`default_smb_passwd_file`].
    pub smb_passwd_file: PathBuf,
    /// `listen` (ringshare extension): addresses to accept connections on; default `0.0.0.0:445`.
    pub listen: Vec<SocketAddr>,
    /// `netbios name`; default the host name's first label in upper case, at most 15 characters.
    pub netbios_name: String,
    /// `workgroup`; default `WORKGROUP`.
    pub workgroup: String,
    /// `server string`; default `ringshare`.
    pub server_string: String,
    /// `map to guest`; default [`MapToGuest::Never`].
    pub map_to_guest: MapToGuest,
    /// `server smb encrypt` (also `smb encrypt` in [global]); default if_required.
    pub smb_encrypt: EncryptPolicy,
    /// `guest account`; default `nobody`.
    pub guest_account: String,
    /// `get quota command` and `set quota command` (Samba's): the programs that read and set
    /// quotas (crate::quota). Default none.
    pub get_quota_command: Option<String>,
    pub set_quota_command: Option<String>,
    /// `use sendfile`: unsigned, unencrypted READ data goes from the file to the socket,
    /// and WRITE payloads from the socket to the file, by splice, never through user
    /// memory. Server-wide in ringshare. Default yes (Samba's default is no); see
    /// docs/architecture.md for the consistency rule and the WRITE path.
    pub use_sendfile: bool,
    /// `pin cpus` (ringshare extension): yes, no or auto (the default); see [`PinCpus`].
    pub pin_cpus: PinCpus,
    /// `multishot receive` (ringshare extension): connections receive small
    /// requests through one multishot receive each, into buffers the I/O
    /// thread shares (io_uring provided buffers), instead of a receive per
    /// request into a buffer of their own. Default no: on this project's
    /// 2-core test machine it saved no CPU per request and, with few
    /// connections, cost more memory (docs/architecture.md).
    pub multishot_receive: bool,
    /// `kernel change notify` (Samba's option, default yes): CHANGE_NOTIFY
    /// also reports changes other programs make on the disk (inotify).
    pub kernel_change_notify: bool,
    /// `multicast dns register` (Samba's option, default yes): Time Machine
    /// shares are announced through Avahi ([`crate::mdns`]).
    pub multicast_dns_register: bool,
    /// `wsd` (ringshare extension; Samba leaves this to wsdd): the server
    /// announces itself to Windows by WS-Discovery ([`crate::wsd`]). Default yes.
    pub wsd: bool,
    /// `zerocopy send` (ringshare extension): `auto` (default), `yes` or `no`.
    pub zerocopy_send: ZerocopySend,
    /// `send timeout` (ringshare extension, seconds): a connection whose peer takes no
    /// reply data for this long is closed. Default 60.
    pub send_timeout_secs: u32,
    /// `smb3 directory leases` (Samba 4.22's option): `yes`, `no` or `auto`
    /// (`None`, the default: on, also on a cluster node, where a change made
    /// through another node breaks them at the directory's home; Samba's
    /// `auto` is off there).
    pub smb3_directory_leases: Option<bool>,
    /// `smb3 unix extensions` as `[global]` sets it (Samba's share option, default no):
    /// NEGOTIATE answers a client offering the SMB3 POSIX extensions only when it is on,
    /// as Samba reads the global value there; each share has its own value too.
    pub smb3_unix_extensions: bool,
    /// `server multi channel support`: SMB 3 clients may bind several
    /// connections to one session. Default yes (as in Samba 4.15 and later).
    pub multi_channel: bool,
    /// `server smb compression` (ringshare extension; Samba has no SMB
    /// compression): SMB 3.1.1 NEGOTIATE agrees on compression when the client
    /// offers it. Default yes, as Windows: agreeing costs nothing, the server
    /// compresses only READ responses the client asks to have compressed, and
    /// decompresses what a client chooses to send compressed
    /// (docs/compression.md).
    pub compression: bool,
    /// `server smb compression algorithms` (ringshare extension): the
    /// algorithms offered, in the server's order of preference; names `lz4`,
    /// `lz77` (`xpress`), `pattern_v1`, `lz77+huffman` (`xpress_huffman`),
    /// `lznt1`. Default all five in that order.
    pub compression_algorithms: Vec<CompressionAlgorithm>,
    /// `smb2 disable lock sequence checking` (as in Samba): LOCK's sequence numbers are not
    /// checked on durable opens and multichannel sessions ([MS-SMB2] 3.3.5.14). Default no.
    pub disable_lock_sequence_checking: bool,
    /// `smb2 max read`, `smb2 max write`, `smb2 max trans` (bytes, `K`/`M` suffixes
    /// allowed): the largest READ, WRITE and other payload advertised to SMB 2.1+
    /// clients. Default 8 MiB each (as in Samba); 64 KiB to 8 MiB.
    pub smb2_max_read: u32,
    pub smb2_max_write: u32,
    pub smb2_max_trans: u32,
    /// `control socket` (ringshare extension): the Unix socket `ringshare
    /// status` and `ringshare reload` talk to; `no` for none. Default
    /// [`DEFAULT_CONTROL_SOCKET`].
    pub control_socket: Option<PathBuf>,
    /// `control group` (ringshare extension): members of this Unix group may
    /// use the control socket too (root always may). Default none.
    pub control_group: Option<String>,
    /// `metrics listen` (ringshare extension): where Prometheus scrapes
    /// `/metrics`, e.g. `127.0.0.1:9445`. Default none (off).
    pub metrics_listen: Option<SocketAddr>,
    /// `server smb transports` naming `quic` (or `quic:PORT`): SMB over
    /// QUIC on this UDP port. Default none (TCP only).
    pub quic_port: Option<u16>,
    /// `tls certfile`, `tls keyfile` (PEM): the certificate QUIC presents;
    /// without them a self-signed one is made on first start (docs/quic.md).
    pub tls_certfile: Option<PathBuf>,
    pub tls_keyfile: Option<PathBuf>,
    /// `tls cafile` (PEM): the CAs client certificates must chain to
    /// (`quic client certificate`).
    pub tls_cafile: Option<PathBuf>,
    /// `server smb encryption over quic`, `quic client certificate` and its
    /// allow and deny lists ([`quic::QuicOptions`]).
    pub quic: quic::QuicOptions,
    /// `failed logon backoff` (ringshare extension): after this many failed
    /// logons from one address, answers to its logons wait, longer with each
    /// failure ([`ringshare_core::backoff`]). `no` (0, the default) is off,
    /// `yes` is [`FAILED_LOGON_BACKOFF_YES`]. A reload applies it.
    pub failed_logon_backoff: u32,
    /// `cluster …` (ringshare extension): this node's cluster, if any.
    pub cluster: ClusterOptions,
    /// `realm`: the Kerberos realm tickets must be for (upper case); empty: the keytab's.
    pub realm: String,
    /// `kerberos method`: where the service keys are ([`Global::keytab`]).
    pub kerberos_method: KerberosMethod,
    /// `dedicated keytab file`.
    pub dedicated_keytab_file: Option<PathBuf>,
    /// `kerberos encryption types`: whether RC4-HMAC tickets are accepted beside AES.
    pub kerberos_encryption_types: KerberosEncryptionTypes,
    /// `local kdc` (ringshare extension, default no): the built-in KDC answers IAKerb clients'
    /// KDC requests for the server's own users (crate::local_kdc). A reload applies it.
    pub local_kdc: bool,
    /// `security`, `idmap config …`, `winbind use default domain`, `winbind separator`: an
    /// Active Directory member's options ([`member`]).
    pub member: member::MemberOptions,
}

/// The failures `failed logon backoff = yes` allows before answers wait.
pub const FAILED_LOGON_BACKOFF_YES: u32 = 10;

/// Where the control socket is unless `control socket` says otherwise.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/ringshare/control.sock";

impl Default for Global {
    fn default() -> Self {
        Global {
            server_min_protocol: Dialect::Smb2_02,
            server_max_protocol: Dialect::Smb3_11,
            server_signing: SigningPolicy::Default,
            interfaces: Vec::new(),
            bind_interfaces_only: false,
            max_connections: 0,
            deadtime_minutes: 15,
            handshake_timeout_secs: 30,
            durable_handle_timeout_secs: 960,
            log_level: 0,
            smb_passwd_file: default_smb_passwd_file(),
            listen: vec![default_listen()],
            netbios_name: default_netbios_name(),
            workgroup: "WORKGROUP".to_string(),
            realm: String::new(),
            kerberos_method: KerberosMethod::SecretsOnly,
            dedicated_keytab_file: None,
            kerberos_encryption_types: KerberosEncryptionTypes::Strong,
            local_kdc: false,
            member: Default::default(),
            server_string: "ringshare".to_string(),
            map_to_guest: MapToGuest::Never,
            smb_encrypt: EncryptPolicy::IfRequired,
            guest_account: "nobody".to_string(),
            get_quota_command: None,
            set_quota_command: None,
            use_sendfile: true,
            pin_cpus: PinCpus::Auto,
            multishot_receive: false,
            kernel_change_notify: true,
            multicast_dns_register: true,
            wsd: true,
            zerocopy_send: ZerocopySend::Auto,
            send_timeout_secs: 60,
            smb3_directory_leases: None,
            smb3_unix_extensions: false,
            multi_channel: true,
            disable_lock_sequence_checking: false,
            compression: true,
            compression_algorithms: ringshare_core::DEFAULT_COMPRESSION.to_vec(),
            smb2_max_read: 8 << 20,
            smb2_max_write: 8 << 20,
            smb2_max_trans: 8 << 20,
            control_socket: Some(PathBuf::from(DEFAULT_CONTROL_SOCKET)),
            control_group: None,
            metrics_listen: None,
            quic_port: None,
            tls_certfile: None,
            tls_keyfile: None,
            tls_cafile: None,
            quic: Default::default(),
            failed_logon_backoff: 0,
            cluster: ClusterOptions::default(),
        }
    }
}

/// One share section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareConfig {
    /// The section name, as written (share names compare case-insensitively).
    pub name: String,
    /// `path`: an existing directory.
    pub path: PathBuf,
    /// `read only` (inverse: `writeable`, `writable`, `write ok`); default yes.
    pub read_only: bool,
    /// `guest ok` (also `public`); default no.
    pub guest_ok: bool,
    /// The path holds Samba substitutions (`%U`, `%H`…): it is made per user
    /// at tree connect (and is not checked at start).
    pub templated: bool,
    /// Who may connect and as whom files are used: `valid users`, `invalid
    /// users`, `read list`, `write list`, `admin users`, `force user`,
    /// `force group`, the create masks and modes, `inherit permissions`,
    /// `inherit acls`, `inherit owner`, `hide unreadable`.
    pub rules: ShareRules,
    /// `vfs objects` holds `acl_xattr`: NT ACLs are kept in Samba's
    /// `security.NTACL` xattr and checked on top of the kernel's check.
    pub acl_xattr: bool,
    /// `durable handles`: opens may outlive their connection; default yes.
    pub durable_handles: bool,
    /// `continuous availability`: persistent handles (kept in etcd on a
    /// cluster), writes through to stable storage; default no.
    pub continuous_availability: bool,
    /// `change notify` (Samba's option): CHANGE_NOTIFY works on the share;
    /// with `no` it is answered NOT_IMPLEMENTED, as Samba does. Default yes.
    pub change_notify: bool,
    /// `posix locking` (Samba's option): each SMB byte-range lock is also taken as a POSIX
    /// (open file description) lock on the open's file, so local programs' fcntl locks and
    /// SMB locks see each other. Default yes, as in Samba.
    pub posix_locking: bool,
    /// `strict locking` (Samba's option): auto (`None`, the default, as in Samba), yes or
    /// no: whether a READ or WRITE is checked against local programs' POSIX locks (with
    /// `posix locking`): when the open's lease or oplock does not cache it, always, never.
    pub strict_locking: Option<bool>,
    /// `fs calls off io thread` (ringshare's own option): auto (`None`, the default: where
    /// the share's file system is not one whose files only this kernel changes, as FUSE,
    /// NFS or CephFS), yes or no: whether the share's file system calls are made away from
    /// the I/O threads (docs/cluster-internals.md, "File system calls off the I/O thread").
    pub fs_offload: Option<bool>,
    /// `smb3 unix extensions` (Samba's option): a CREATE carrying the POSIX
    /// context makes a POSIX open (mode given, POSIX information answered,
    /// case-sensitive names). Default no, as in Samba 4.22.
    pub smb3_unix_extensions: bool,
    /// `compress data` (Windows' `Set-SmbShare -CompressData`; Samba 4.22
    /// and ksmbd have none): READ responses of the share are compressed
    /// when compression was agreed and it pays, asked or not. Default no.
    pub compress_data: bool,
    /// Files have named data streams, kept as Samba's `streams_xattr` keeps
    /// them: when `vfs objects` lists `streams_xattr` (or `fruit`, which
    /// needs it), or is not given at all; a `vfs objects` line without it
    /// turns them off, as on Samba.
    pub streams: bool,
    /// `vfs objects` lists `fruit`: Apple's extensions, with the share's
    /// (and [global]'s) `fruit:` options.
    pub fruit: Option<ringshare_core::fruit::Fruit>,
    /// `vfs objects` lists `shadow_copy2`: Previous Versions from the
    /// share's snapshots, with its (and [global]'s) `shadow:` options.
    pub shadow: Option<ringshare_core::shadow::ShadowCopy>,
    /// `comment`; default empty.
    pub comment: String,
    /// `browseable` (also `browsable`); default yes.
    pub browseable: bool,
    /// `smb encrypt` in the share's section; default: the global policy.
    pub smb_encrypt: Option<EncryptPolicy>,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The `[global]` section.
    pub global: Global,
    /// The shares, in file order.
    pub shares: Vec<ShareConfig>,
    /// The `[homes]` section: a share per user, made from it when a user
    /// connects to a share named after a Unix account (path default `%H`).
    pub homes: Option<ShareConfig>,
    /// Things that were ignored; start-up should print them.
    pub warnings: Vec<ConfigWarning>,
    /// Samba options accepted without a warning because they mean nothing to ringshare
    /// (printing, NetBIOS, log files, PAM…), and the options of the sections it does not
    /// share ([printers], [print$]), each with the reason: `ringshare testparm` lists them.
    pub ignored: Vec<ConfigWarning>,
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
}

/// Something in the file that was ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The configuration file.
    pub file: PathBuf,
    /// 1-based line number (the first line of a continued line).
    pub line: usize,
    /// What was ignored and why.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// A configuration the server must not start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The configuration file.
    pub file: PathBuf,
    /// 1-based line number; 0 when the error concerns the whole file.
    pub line: usize,
    /// What is wrong, in words an administrator can act on.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Longest share name accepted (the limit Windows Server applies to share names).
pub const SHARE_NAME_LEN_MAX: usize = 80;

/// Longest logical line accepted, continuation lines included.
const LINE_LEN_MAX: usize = 64 * 1024;

/// Reads and parses a configuration file. See [`parse_str`].
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| ConfigError {
        file: path.to_path_buf(),
        line: 0,
        message: format!("cannot read configuration file: {e}"),
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => parse_str(&text, path),
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            Err(ConfigError {
                file: path.to_path_buf(),
                line,
                message:
                    "the file is not valid UTF-8; convert it (e.g. `iconv -f latin1 -t utf-8`)"
                        .to_string(),
            })
        }
    }
}

/// Parses configuration text. `file` names the text in messages, and its directory is the base
/// for relative paths. Share paths are checked against the filesystem.
pub fn parse_str(text: &str, file: &Path) -> Result<Config, ConfigError> {
    Parser::new(file).run(text)
}

impl Config {
    /// The configuration of `ringshare serve DIR`: default globals and one writable share of
    /// `dir`, named after the directory's last component (see [`share_name_for_dir`]).
    pub fn single_share(path: &Path) -> Config {
        let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Config {
            global: Global::default(),
            shares: vec![ShareConfig {
                name: share_name_for_dir(&full),
                path: full,
                templated: false,
                read_only: false,
                guest_ok: false,
                rules: ShareRules::default(),
                acl_xattr: false,
                durable_handles: true,
                continuous_availability: false,
                change_notify: true,
                posix_locking: true,
                strict_locking: None,
                fs_offload: None,
                smb3_unix_extensions: false,
                compress_data: false,
                streams: true,
                fruit: None,
                shadow: None,
                comment: String::new(),
                browseable: true,
                smb_encrypt: None,
            }],
            homes: None,
            warnings: Vec::new(),
            ignored: Vec::new(),
            source: None,
        }
    }

    /// The share called `name`, compared case-insensitively as SMB clients do.
    pub fn share(&self, name: &str) -> Option<&ShareConfig> {
        self.shares
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    }
}

/// A share name for a directory: its last component with every character other than ASCII
/// letters, digits, `-`, `_` and `.` replaced by `_`, cut to [`SHARE_NAME_LEN_MAX`]; `share`
/// when nothing usable is left (`/`, or a name made only of other characters).
pub fn share_name_for_dir(dir: &Path) -> String {
    let last = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(SHARE_NAME_LEN_MAX)
        .collect();
    if name.chars().all(|c| matches!(c, '_' | '.')) {
        "share".to_string()
    } else {
        name
    }
}

/// The default `smb passwd file`: `/var/lib/ringshare/smbpasswd` for root, otherwise
/// `$XDG_STATE_HOME/ringshare/smbpasswd`, falling back to `~/.local/state/ringshare/smbpasswd`.
pub fn default_smb_passwd_file() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from);
    smb_passwd_file_for(rustix::process::geteuid().is_root(), xdg, home)
}

fn smb_passwd_file_for(
    root: bool,
    xdg_state_home: Option<PathBuf>,
    home: Option<PathBuf>,
) -> PathBuf {
    if root {
        return PathBuf::from("/var/lib/ringshare/smbpasswd");
    }
    // The XDG base directory spec says relative values are invalid and must be ignored.
    let state = match (xdg_state_home, home) {
        (Some(x), _) if x.is_absolute() => x,
        (_, Some(h)) if h.is_absolute() => h.join(".local/state"),
        _ => return PathBuf::from("/var/lib/ringshare/smbpasswd"),
    };
    state.join("ringshare").join("smbpasswd")
}

fn default_listen() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 445))
}

fn default_netbios_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let label = host.trim().split('.').next().unwrap_or("");
    let name: String = label
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(15)
        .collect::<String>()
        .to_ascii_uppercase();
    if name.is_empty() {
        "RINGSHARE".to_string()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn witness_is_on_in_a_cluster_with_its_ports_and_turns_off_with_cluster_witness_no() {
        let path = Path::new("/x");
        let c = parse_str("[s]\npath = /tmp\n", path)
            .unwrap()
            .global
            .cluster;
        assert!(!c.witness_off && !c.witness_anonymous);
        assert_eq!((c.witness_port, c.endpoint_mapper_port), (None, None));
        let text = "[global]\ncluster witness = no\ncluster witness port = 6000\n\
                    cluster endpoint mapper port = 0\ncluster witness anonymous = yes\n\
                    [s]\npath = /tmp\n";
        let c = parse_str(text, path).unwrap().global.cluster;
        assert!(c.witness_off && c.witness_anonymous);
        assert_eq!(
            (c.witness_port, c.endpoint_mapper_port),
            (Some(6000), Some(0))
        );
        for bad in [
            "cluster witness = maybe",
            "cluster witness port = 0",
            "cluster witness port = x",
        ] {
            assert!(parse_str(&format!("[global]\n{bad}\n[s]\npath = /tmp\n"), path).is_err());
        }
    }

    #[test]
    fn the_cluster_lease_ttl_is_taken_in_whole_seconds_from_3_to_60() {
        let path = Path::new("/x");
        let ttl = |line: &str| {
            parse_str(&format!("[global]\n{line}\n[s]\npath = /tmp\n"), path)
                .map(|c| c.global.cluster.lease_ttl.map(|t| t.as_secs()))
        };
        assert_eq!(ttl("").unwrap(), None);
        assert_eq!(ttl("cluster lease ttl = 12").unwrap(), Some(12));
        assert_eq!(ttl("cluster lease ttl = 3s").unwrap(), Some(3));
        assert_eq!(ttl("cluster lease ttl = 60").unwrap(), Some(60));
        for bad in ["2", "61", "6.5", "x", ""] {
            let e = ttl(&format!("cluster lease ttl = {bad}")).unwrap_err();
            assert!(
                e.to_string().contains("whole seconds from 3 to 60"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn keys_are_normalised_for_case_underscores_and_blanks() {
        assert_eq!(normalize_key("  Read_Only "), "read only");
        assert_eq!(
            normalize_key("SERVER   MIN\tprotocol"),
            "server min protocol"
        );
        assert_eq!(normalize_key("smb_passwd__file"), "smb passwd file");
    }

    #[test]
    fn compression_is_on_with_all_five_algorithms_by_default_and_takes_a_list_in_order() {
        use CompressionAlgorithm as A;
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert!(d.global.compression);
        assert_eq!(
            d.global.compression_algorithms,
            vec![A::LZ4, A::LZ77, A::PATTERN_V1, A::LZ77_HUFFMAN, A::LZNT1]
        );
        let c = parse_str(
            "[global]\nserver smb compression = no\nserver smb compression algorithms = XPRESS, pattern_v1 lz77\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap();
        assert!(!c.global.compression);
        assert_eq!(
            c.global.compression_algorithms,
            vec![A::LZ77, A::PATTERN_V1]
        );
        let bad = parse_str(
            "[global]\nserver smb compression algorithms = lz4, zstd\n",
            path,
        );
        assert!(bad.is_err_and(|e| e.to_string().contains("zstd")));
    }

    #[test]
    fn smb2_max_sizes_default_to_8_mib_take_k_and_m_and_are_clamped_with_a_warning() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        let max = 8 << 20;
        assert_eq!(
            (
                d.global.smb2_max_read,
                d.global.smb2_max_write,
                d.global.smb2_max_trans
            ),
            (max, max, max)
        );
        let c = parse_str(
            "[global]\nsmb2 max read = 1M\nsmb2 max write = 131072\nsmb2 max trans = 512k\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap();
        assert_eq!(
            (
                c.global.smb2_max_read,
                c.global.smb2_max_write,
                c.global.smb2_max_trans
            ),
            (1 << 20, 131_072, 512 << 10)
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let c = parse_str(
            "[global]\nsmb2 max read = 100\nsmb2 max write = 16M\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap();
        assert_eq!(
            (c.global.smb2_max_read, c.global.smb2_max_write),
            (64 << 10, max)
        );
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        for bad in ["lots", "1G", "-1", ""] {
            let text = format!("[global]\nsmb2 max read = {bad}\n[s]\npath = /tmp\n");
            let e = parse_str(&text, path).unwrap_err();
            assert!(e.to_string().contains("smb2 max read"), "{bad}: {e}");
        }
    }

    #[test]
    fn vfs_modules_whose_work_ringshare_always_does_are_taken_without_a_warning() {
        let path = Path::new("test.conf");
        let c = parse_str("[s]\npath = /tmp\nvfs objects = btrfs io_uring\n", path).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let c = parse_str("[s]\npath = /tmp\nvfs objects = btrfs recycle\n", path).unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].message.contains("'recycle'"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn use_sendfile_defaults_to_yes_pin_cpus_to_auto_and_multishot_receive_to_no_and_all_can_be_set(
    ) {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert!(d.global.use_sendfile);
        assert_eq!(d.global.pin_cpus, PinCpus::Auto);
        assert!(!d.global.multishot_receive);
        let c = parse_str(
            "[global]\nuse sendfile = no\npin cpus = yes\nmultishot receive = yes\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap();
        assert!(!c.global.use_sendfile);
        assert_eq!(c.global.pin_cpus, PinCpus::Yes);
        assert!(c.global.multishot_receive);
        let pin = |v: &str| {
            parse_str(
                &format!("[global]\npin cpus = {v}\n[s]\npath = /tmp\n"),
                path,
            )
            .unwrap()
            .global
            .pin_cpus
        };
        assert_eq!(pin("no"), PinCpus::No);
        assert_eq!(pin("auto"), PinCpus::Auto);
    }

    #[test]
    fn streams_are_on_unless_a_vfs_objects_line_leaves_out_streams_xattr() {
        let path = Path::new("test.conf");
        let share = |extra: &str| {
            parse_str(&format!("[s]\npath = /tmp\n{extra}"), path)
                .unwrap()
                .shares[0]
                .streams
        };
        assert!(share(""));
        assert!(share("vfs objects = streams_xattr acl_xattr\n"));
        assert!(!share("vfs objects = acl_xattr\n"));
        let g = parse_str(
            "[global]\nvfs objects = acl_xattr\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap();
        assert!(
            !g.shares[0].streams,
            "a [global] vfs objects line counts too"
        );
        assert!(share("streams_xattr:prefix = user.DosStream.\n"));
        let other = parse_str(
            "[s]\npath = /tmp\nstreams_xattr:prefix = user.Other.\n",
            path,
        );
        assert!(
            other.is_err(),
            "another prefix would hide a share's streams"
        );
        let untyped = parse_str(
            "[s]\npath = /tmp\nstreams_xattr:store_stream_type = no\n",
            path,
        );
        assert!(untyped.is_err());
    }

    #[test]
    fn kernel_change_notify_and_change_notify_default_to_yes_and_can_be_turned_off() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert!(d.global.kernel_change_notify);
        let c = parse_str(
            "[global]\nkernel change notify = no\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap();
        assert!(!c.global.kernel_change_notify);
        assert!(c.shares[0].change_notify);
        let c = parse_str("[s]\npath = /tmp\nchange notify = no\n", path).unwrap();
        assert!(!c.shares[0].change_notify);
    }

    #[test]
    fn fs_calls_off_io_thread_is_auto_by_default_and_set_to_yes_or_no_per_share_or_in_global() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert_eq!(d.shares[0].fs_offload, None);
        let c = parse_str(
            "[global]\nfs calls off io thread = yes\n[s]\npath = /tmp\n[t]\npath = /tmp\n\
             fs calls off io thread = no\n[u]\npath = /tmp\nfs calls off io thread = auto\n",
            path,
        )
        .unwrap();
        assert_eq!(c.shares[0].fs_offload, Some(true));
        assert_eq!(c.shares[1].fs_offload, Some(false));
        assert_eq!(c.shares[2].fs_offload, None);
        assert!(parse_str("[s]\npath = /tmp\nfs calls off io thread = maybe\n", path).is_err());
    }

    #[test]
    fn strict_locking_is_auto_by_default_and_set_to_yes_or_no_per_share_or_in_global() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert_eq!(d.shares[0].strict_locking, None);
        let c = parse_str(
            "[global]\nstrict locking = no\n[s]\npath = /tmp\n[t]\npath = /tmp\n\
             strict locking = yes\n[u]\npath = /tmp\nstrict locking = Auto\n",
            path,
        )
        .unwrap();
        assert_eq!(c.shares[0].strict_locking, Some(false));
        assert_eq!(c.shares[1].strict_locking, Some(true));
        assert_eq!(c.shares[2].strict_locking, None);
        assert!(c.ignored.is_empty(), "{:?}", c.ignored);
        assert!(parse_str("[s]\npath = /tmp\nstrict locking = sometimes\n", path).is_err());
    }

    #[test]
    fn posix_locking_is_on_by_default_and_set_per_share_or_in_global() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert!(d.shares[0].posix_locking);
        assert!(d.ignored.is_empty(), "{:?}", d.ignored);
        let c = parse_str(
            "[global]\nposix locking = no\n[s]\npath = /tmp\n[t]\npath = /tmp\nposix locking = yes\n",
            path,
        )
        .unwrap();
        assert!(!c.shares[0].posix_locking);
        assert!(c.shares[1].posix_locking);
        assert!(c.ignored.is_empty(), "{:?}", c.ignored);
    }

    #[test]
    fn smb3_unix_extensions_is_off_by_default_and_global_sets_the_shares_default() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert!(!d.global.smb3_unix_extensions);
        assert!(!d.shares[0].smb3_unix_extensions);
        let c = parse_str(
            "[global]\nsmb3 unix extensions = yes\n[s]\npath = /tmp\n[t]\npath = /tmp\nsmb3 unix extensions = no\n",
            path,
        )
        .unwrap();
        assert!(c.global.smb3_unix_extensions);
        assert!(c.shares[0].smb3_unix_extensions);
        assert!(!c.shares[1].smb3_unix_extensions);
        // Set in a share only: that share, but NEGOTIATE goes by [global] (as Samba).
        let s = parse_str("[s]\npath = /tmp\nsmb3 unix extensions = yes\n", path).unwrap();
        assert!(!s.global.smb3_unix_extensions);
        assert!(s.shares[0].smb3_unix_extensions);
    }

    #[test]
    fn compress_data_is_off_by_default_and_set_per_share_or_in_global() {
        let path = Path::new("test.conf");
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert!(!d.shares[0].compress_data);
        let c = parse_str(
            "[global]\ncompress data = yes\n[s]\npath = /tmp\n[t]\npath = /tmp\ncompress data = no\n",
            path,
        )
        .unwrap();
        assert!(c.shares[0].compress_data);
        assert!(!c.shares[1].compress_data);
        let text = crate::testparm::render(&c);
        assert!(text.contains("compress data = yes"), "{text}");
        assert!(text.contains("compress data = no"), "{text}");
    }

    #[test]
    fn ws_discovery_is_on_by_default_and_wsd_no_turns_it_off() {
        let path = Path::new("test.conf");
        assert!(parse_str("[s]\npath = /tmp\n", path).unwrap().global.wsd);
        let off = parse_str("[global]\nwsd = no\n[s]\npath = /tmp\n", path).unwrap();
        assert!(!off.global.wsd);
        assert!(parse_str("[global]\nwsd = maybe\n[s]\npath = /tmp\n", path).is_err());
    }

    #[test]
    fn smb3_directory_leases_is_auto_by_default_and_takes_auto_yes_or_no() {
        let path = Path::new("test.conf");
        let conf = |v: &str| {
            let text = format!("[global]\nsmb3 directory leases = {v}\n[s]\npath = /tmp\n");
            parse_str(&text, path).map(|c| c.global.smb3_directory_leases)
        };
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert_eq!(d.global.smb3_directory_leases, None);
        assert_eq!(conf("Auto").unwrap(), None);
        assert_eq!(conf("yes").unwrap(), Some(true));
        assert_eq!(conf("no").unwrap(), Some(false));
        assert!(conf("sometimes").is_err());
    }

    #[test]
    fn zerocopy_send_is_auto_by_default_and_takes_auto_yes_or_no() {
        let path = Path::new("test.conf");
        let conf = |v: &str| {
            parse_str(
                &format!("[global]\nzerocopy send = {v}\n[s]\npath = /tmp\n"),
                path,
            )
        };
        let d = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert_eq!(d.global.zerocopy_send, ZerocopySend::Auto);
        assert_eq!(conf("yes").unwrap().global.zerocopy_send, ZerocopySend::Yes);
        assert_eq!(conf("no").unwrap().global.zerocopy_send, ZerocopySend::No);
        assert_eq!(
            conf("Auto").unwrap().global.zerocopy_send,
            ZerocopySend::Auto
        );
        let e = conf("sometimes").unwrap_err().to_string();
        assert!(e.contains("zerocopy send"), "{e}");
    }

    #[test]
    fn send_timeout_takes_seconds_from_1_to_3600() {
        let path = Path::new("test.conf");
        let conf = |v: &str| {
            parse_str(
                &format!("[global]\nsend timeout = {v}\n[s]\npath = /tmp\n"),
                path,
            )
        };
        assert_eq!(
            parse_str("[s]\npath = /tmp\n", path)
                .unwrap()
                .global
                .send_timeout_secs,
            60
        );
        assert_eq!(conf("5").unwrap().global.send_timeout_secs, 5);
        assert!(conf("0").is_err());
        assert!(conf("soon").is_err());
    }

    #[test]
    fn failed_logon_backoff_is_off_by_default_and_takes_no_yes_or_a_number_of_failures() {
        let path = Path::new("test.conf");
        let backoff = |v: &str| {
            parse_str(
                &format!("[global]\nfailed logon backoff = {v}\n[s]\npath = /tmp\n"),
                path,
            )
            .map(|c| c.global.failed_logon_backoff)
        };
        let default = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert_eq!(default.global.failed_logon_backoff, 0);
        assert_eq!(backoff("no").unwrap(), 0);
        assert_eq!(backoff("yes").unwrap(), FAILED_LOGON_BACKOFF_YES);
        assert_eq!(backoff("3").unwrap(), 3);
        assert!(backoff("soon").is_err());
    }

    #[test]
    fn booleans_accept_every_samba_spelling() {
        for t in ["yes", "True", "1", "ON"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["no", "FALSE", "0", "off"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("maybe"), None);
        assert_eq!(parse_bool(""), None);
    }

    #[test]
    fn family_protocol_names_depend_on_the_bound() {
        assert_eq!(parse_dialect("smb2", Bound::Min), Ok(Dialect::Smb2_02));
        assert_eq!(parse_dialect("SMB2", Bound::Max), Ok(Dialect::Smb2_10));
        assert_eq!(parse_dialect("SMB3", Bound::Min), Ok(Dialect::Smb3_00));
        assert_eq!(parse_dialect("SMB3", Bound::Max), Ok(Dialect::Smb3_11));
        assert_eq!(parse_dialect("SMB3_02", Bound::Max), Ok(Dialect::Smb3_02));
        assert!(parse_dialect("NT1", Bound::Min)
            .unwrap_err()
            .contains("SMB1 is not supported"));
        assert!(parse_dialect("SMB2_22", Bound::Min)
            .unwrap_err()
            .contains("unknown protocol"));
    }

    #[test]
    fn lists_split_on_commas_and_blanks_and_keep_quoted_names() {
        assert_eq!(
            parse_list("alice, bob  carol,\"Domain Users\" @staff"),
            ["alice", "bob", "carol", "Domain Users", "@staff"]
        );
        assert!(parse_list(" , ").is_empty());
    }

    #[test]
    fn log_level_keeps_the_leading_number() {
        assert_eq!(parse_log_level("3"), Ok(3));
        assert_eq!(parse_log_level("2 auth:5 passdb:10"), Ok(2));
        assert!(parse_log_level("auth:5").is_err());
    }

    #[test]
    fn continued_lines_keep_the_first_line_number() {
        let lines = logical_lines("a = 1 \\\n  2\\\n3\n; c \\\nb = 4\n");
        assert_eq!(
            lines,
            vec![(1, "a = 1   23".to_string()), (5, "b = 4".to_string())]
        );
    }

    #[test]
    fn signing_spellings_map_to_policies() {
        assert_eq!(parse_signing("if_required"), Some(SigningPolicy::Auto));
        assert_eq!(parse_signing("disabled"), Some(SigningPolicy::Auto));
        assert_eq!(parse_signing("Required"), Some(SigningPolicy::Mandatory));
        assert_eq!(parse_signing("desired"), Some(SigningPolicy::Desired));
        assert_eq!(parse_signing("default"), Some(SigningPolicy::Default));
        assert_eq!(parse_signing("sometimes"), None);
    }

    #[test]
    fn passwd_file_default_follows_root_and_xdg() {
        assert_eq!(
            smb_passwd_file_for(true, Some("/x".into()), Some("/home/a".into())),
            PathBuf::from("/var/lib/ringshare/smbpasswd")
        );
        assert_eq!(
            smb_passwd_file_for(false, Some("/x".into()), Some("/home/a".into())),
            PathBuf::from("/x/ringshare/smbpasswd")
        );
        assert_eq!(
            smb_passwd_file_for(false, Some("rel".into()), Some("/home/a".into())),
            PathBuf::from("/home/a/.local/state/ringshare/smbpasswd")
        );
    }

    #[test]
    fn share_names_for_directories_are_ascii_safe() {
        assert_eq!(share_name_for_dir(Path::new("/srv/Data")), "Data");
        assert_eq!(share_name_for_dir(Path::new("/srv/my files")), "my_files");
        assert_eq!(share_name_for_dir(Path::new("/srv/éé")), "share");
        assert_eq!(share_name_for_dir(Path::new("/")), "share");
    }

    #[test]
    fn kerberos_encryption_types_are_strong_by_default_and_all_or_legacy_allow_rc4() {
        let path = Path::new("test.conf");
        let c = parse_str("[s]\npath = /tmp\n", path).unwrap();
        assert_eq!(
            c.global.kerberos_encryption_types,
            KerberosEncryptionTypes::Strong
        );
        assert!(!c.global.kerberos_encryption_types.allows_rc4());
        for (value, want) in [
            ("strong", KerberosEncryptionTypes::Strong),
            ("ALL", KerberosEncryptionTypes::All),
            ("legacy", KerberosEncryptionTypes::Legacy),
        ] {
            let text = format!("[global]\nkerberos_encryption types = {value}\n[s]\npath = /tmp\n");
            let c = parse_str(&text, path).unwrap();
            assert_eq!(c.global.kerberos_encryption_types, want, "{value}");
            assert_eq!(want.allows_rc4(), value != "strong");
            // `legacy` is Samba's RC4-only; here it also takes AES, and says so.
            assert_eq!(
                c.warnings.len(),
                usize::from(value == "legacy"),
                "{:?}",
                c.warnings
            );
        }
        let e = parse_str(
            "[global]\nkerberos encryption types = rc4\n[s]\npath = /tmp\n",
            path,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("'kerberos encryption types' is one of"),
            "{e}"
        );
    }
}
