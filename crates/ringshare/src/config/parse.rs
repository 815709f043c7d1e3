//! Reading an `smb.conf`-style text into a [`Config`]: logical lines, sections,
//! keys and their values (the rules are in the parent module's documentation).

use super::keys::{classify, Opt, Rule, TlsFile};
use super::*;

/// Lower-cases a key, reads `_` as a space and folds runs of blanks into one space.
pub fn normalize_key(key: &str) -> String {
    key.split(|c: char| c.is_whitespace() || c == '_')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// What `security = ads` lacks, if anything: a realm, a workgroup, and a keytab ringshare can
/// read (it does not read Samba's secrets.tdb).
fn member_missing(g: &Global) -> Option<String> {
    if g.member.security != super::member::Security::Ads {
        return None;
    }
    if g.realm.is_empty() {
        return Some("'security = ads' needs 'realm' (the domain's DNS name in upper case)".into());
    }
    if g.workgroup.is_empty() || g.workgroup == "WORKGROUP" {
        return Some(
            "'security = ads' needs 'workgroup' (the domain's NetBIOS name, as `net ads join` \
             shows it)"
                .into(),
        );
    }
    if g.keytab().is_none() {
        return Some(
            "'security = ads' needs a keytab ringshare can read (it does not read secrets.tdb): \
             set 'kerberos method = secrets and keytab' (/etc/krb5.keytab) or \
             'kerberos method = dedicated keytab' with 'dedicated keytab file', and write it \
             with `net ads keytab create` (or `adcli join` for sssd)"
                .into(),
        );
    }
    None
}

/// Samba's booleans.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Some(true),
        "no" | "false" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// `failed logon backoff`: `no` (0), `yes`
/// ([`super::FAILED_LOGON_BACKOFF_YES`]) or a number of failures.
fn parse_backoff(value: &str) -> Option<u32> {
    match value.trim().parse::<u32>() {
        Ok(n) => Some(n),
        Err(_) => parse_bool(value).map(|on| {
            if on {
                super::FAILED_LOGON_BACKOFF_YES
            } else {
                0
            }
        }),
    }
}

/// Splits a list value on commas and blanks; double quotes keep a name with blanks together.
pub(super) fn parse_list(value: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in value.chars() {
        match c {
            '"' => quoted = !quoted,
            c if !quoted && (c == ',' || c.is_whitespace()) => {
                if !current.is_empty() {
                    items.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        items.push(current);
    }
    items
}

pub(super) fn parse_dialect(value: &str, bound: Bound) -> Result<Dialect, String> {
    let v = value.trim().to_ascii_uppercase();
    let d = match v.as_str() {
        "SMB2" => match bound {
            Bound::Min => Dialect::Smb2_02,
            Bound::Max => Dialect::Smb2_10,
        },
        "SMB3" => match bound {
            Bound::Min => Dialect::Smb3_00,
            Bound::Max => Dialect::Smb3_11,
        },
        "SMB2_02" | "2.0.2" | "2.02" => Dialect::Smb2_02,
        "SMB2_10" | "2.1" | "2.10" | "2.1.0" => Dialect::Smb2_10,
        "SMB3_00" | "3.0" | "3.00" | "3.0.0" => Dialect::Smb3_00,
        "SMB3_02" | "3.0.2" | "3.02" => Dialect::Smb3_02,
        "SMB3_11" | "3.1.1" | "3.11" => Dialect::Smb3_11,
        "DEFAULT" => match bound {
            Bound::Min => Dialect::Smb2_02,
            Bound::Max => Dialect::Smb3_11,
        },
        "NT1" | "LANMAN1" | "LANMAN2" | "CORE" | "COREPLUS" | "SMB1" => {
            return Err(format!("'{}': SMB1 is not supported", value.trim()));
        }
        _ => {
            return Err(format!(
                "unknown protocol '{}' (expected SMB2, SMB2_02, SMB2_10, SMB3, SMB3_00, \
                 SMB3_02 or SMB3_11)",
                value.trim()
            ));
        }
    };
    Ok(d)
}

pub(super) fn parse_signing(value: &str) -> Option<SigningPolicy> {
    let v = normalize_key(value);
    Some(match v.as_str() {
        "default" => SigningPolicy::Default,
        // SMB2 signing cannot be switched off: Samba reads "disabled" as "auto" for SMB2.
        "auto" | "if required" | "disabled" | "off" | "no" | "false" | "0" => SigningPolicy::Auto,
        "desired" => SigningPolicy::Desired,
        "mandatory" | "required" | "force" | "yes" | "true" | "on" | "1" => {
            SigningPolicy::Mandatory
        }
        _ => return None,
    })
}

pub(super) fn parse_log_level(value: &str) -> Result<u32, String> {
    let first = value.split_whitespace().next().unwrap_or("");
    first.parse::<u32>().map_err(|_| {
        format!(
            "'log level' expects a number, optionally followed by class:level pairs, got '{value}'"
        )
    })
}

/// Share options as written, before `[global]` defaults are applied.
#[derive(Debug, Default, Clone)]
struct ShareDraft {
    name: String,
    line: usize,
    path: Option<(String, usize)>,
    read_only: Option<bool>,
    guest_ok: Option<bool>,
    valid_users: Option<Vec<String>>,
    comment: Option<String>,
    browseable: Option<bool>,
    smb_encrypt: Option<EncryptPolicy>,
    /// Rule options in the order written (checked when read).
    rules: Vec<(Rule, String)>,
    /// `vfs objects = ... acl_xattr ...`.
    acl_xattr: Option<bool>,
    /// `vfs objects = ... streams_xattr ...`.
    streams: Option<bool>,
    /// `vfs objects = ... fruit ...`.
    fruit: Option<bool>,
    /// `fruit:` options as written (checked when read).
    fruit_params: Vec<(String, String)>,
    /// `vfs objects = ... shadow_copy2 ...`.
    shadow: Option<bool>,
    /// `shadow:` options as written (checked when read).
    shadow_params: Vec<(String, String)>,
    durable_handles: Option<bool>,
    continuous_availability: Option<bool>,
    change_notify: Option<bool>,
    posix_locking: Option<bool>,
    /// `strict locking`: unset, or auto (`Some(None)`) / yes / no.
    strict_locking: Option<Option<bool>>,
    /// `fs calls off io thread`: unset, or auto (`Some(None)`) / yes / no.
    fs_offload: Option<Option<bool>>,
    smb3_unix_extensions: Option<bool>,
    compress_data: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    Global,
    Share(usize),
    Homes,
    Skipped,
}

pub(super) struct Parser<'a> {
    file: &'a Path,
    base: PathBuf,
    global: Global,
    defaults: ShareDraft,
    shares: Vec<ShareDraft>,
    homes: Option<ShareDraft>,
    warnings: Vec<ConfigWarning>,
    /// Options accepted and ignored without a warning (see [`Config::ignored`]).
    ignored: Vec<ConfigWarning>,
    section: Section,
    /// The name of the section being skipped ([printers], [print$]).
    skipped: String,
    /// Keys already set in the current section, with their line, to warn about repeats.
    seen: HashMap<String, usize>,
    min_line: usize,
    max_line: usize,
    /// The last `cluster …` line (where a missing one is reported).
    cluster_line: usize,
    /// The line of `security` (where a member's missing options are reported).
    security_line: usize,
}

impl<'a> Parser<'a> {
    pub(super) fn new(file: &'a Path) -> Self {
        let base = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Parser {
            file,
            base,
            global: Global::default(),
            defaults: ShareDraft::default(),
            shares: Vec::new(),
            homes: None,
            warnings: Vec::new(),
            ignored: Vec::new(),
            section: Section::None,
            skipped: String::new(),
            seen: HashMap::new(),
            min_line: 0,
            max_line: 0,
            cluster_line: 0,
            security_line: 0,
        }
    }

    fn err(&self, line: usize, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    fn warn(&mut self, line: usize, message: impl Into<String>) {
        self.warnings.push(ConfigWarning {
            file: self.file.to_path_buf(),
            line,
            message: message.into(),
        });
    }

    fn note_ignored(&mut self, line: usize, message: impl Into<String>) {
        self.ignored.push(ConfigWarning {
            file: self.file.to_path_buf(),
            line,
            message: message.into(),
        });
    }

    pub(super) fn run(mut self, text: &str) -> Result<Config, ConfigError> {
        for (line, logical) in logical_lines(text) {
            if logical.len() > LINE_LEN_MAX {
                return Err(self.err(line, format!("line longer than {LINE_LEN_MAX} bytes")));
            }
            let trimmed = logical.trim();
            if trimmed.is_empty() {
                continue;
            }
            if trimmed.starts_with('[') {
                self.section_header(line, trimmed)?;
            } else {
                self.option(line, trimmed)?;
            }
        }
        self.finish()
    }

    fn section_header(&mut self, line: usize, text: &str) -> Result<(), ConfigError> {
        let Some(close) = text.find(']') else {
            return Err(self.err(
                line,
                format!("malformed section header '{text}': missing ']'"),
            ));
        };
        let rest = text[close + 1..].trim_start();
        if !(rest.is_empty() || rest.starts_with(';') || rest.starts_with('#')) {
            return Err(self.err(
                line,
                format!("malformed section header '{text}': unexpected text after ']'"),
            ));
        }
        let name = text[1..close].trim();
        if name.is_empty() {
            return Err(self.err(line, "malformed section header '[]': empty section name"));
        }
        self.seen.clear();
        let lower = name.to_lowercase();
        if lower == "global" {
            self.section = Section::Global;
            return Ok(());
        }
        if lower == "ipc$" {
            return Err(self.err(
                line,
                "share name [IPC$] is reserved: the server provides it itself",
            ));
        }
        if lower == "homes" {
            if let Some(first) = self.homes.as_ref() {
                return Err(self.err(
                    line,
                    format!(
                        "duplicate section [homes]: already defined on line {}",
                        first.line
                    ),
                ));
            }
            self.homes = Some(ShareDraft {
                name: "homes".to_string(),
                line,
                ..ShareDraft::default()
            });
            self.section = Section::Homes;
            return Ok(());
        }
        if matches!(lower.as_str(), "printers" | "print$") {
            self.warn(
                line,
                format!("section [{name}] is not supported by ringshare; its options are ignored"),
            );
            self.section = Section::Skipped;
            self.skipped = name.to_string();
            return Ok(());
        }
        if name.chars().count() > SHARE_NAME_LEN_MAX {
            return Err(self.err(
                line,
                format!("share name [{name}] is longer than {SHARE_NAME_LEN_MAX} characters"),
            ));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| c.is_control() || "\\/:*?\"<>|[]".contains(*c))
        {
            return Err(self.err(
                line,
                format!("share name [{name}] contains the character {bad:?}, which SMB forbids"),
            ));
        }
        if let Some(first) = self.shares.iter().find(|s| s.name.to_lowercase() == lower) {
            return Err(self.err(
                line,
                format!(
                    "duplicate share [{name}]: already defined on line {} (share names ignore case)",
                    first.line
                ),
            ));
        }
        self.shares.push(ShareDraft {
            name: name.to_string(),
            line,
            ..ShareDraft::default()
        });
        self.section = Section::Share(self.shares.len() - 1);
        Ok(())
    }

    fn option(&mut self, line: usize, text: &str) -> Result<(), ConfigError> {
        let Some((raw_key, raw_value)) = text.split_once('=') else {
            return Err(self.err(
                line,
                format!("expected 'key = value' or '[section]', got '{text}'"),
            ));
        };
        let key = normalize_key(raw_key);
        let value = raw_value.trim();
        if key.is_empty() {
            return Err(self.err(line, format!("missing option name before '=' in '{text}'")));
        }
        if self.section == Section::None {
            return Err(self.err(
                line,
                format!("option '{key}' is outside any section; put it under [global] or a share"),
            ));
        }
        if self.section == Section::Skipped {
            let why = format!(
                "'{key}' in [{}] ignored: the section is not shared",
                self.skipped
            );
            self.note_ignored(line, why);
            return Ok(());
        }
        // Samba's streams_xattr options change the names streams are stored
        // under: only their defaults (which ringshare uses) are accepted.
        let stream_default = match key.as_str() {
            "streams xattr:prefix" => Some(value == ringshare_vfs::STREAM_XATTR_PREFIX),
            "streams xattr:store stream type" => Some(parse_bool(value) == Some(true)),
            _ => None,
        };
        match stream_default {
            Some(false) => {
                return Err(self.err(
                    line,
                    format!(
                    "option '{key}' = {value}: ringshare keeps streams only as Samba's defaults \
                         do (prefix '{}', stream type stored); remove the line",
                    ringshare_vfs::STREAM_XATTR_PREFIX
                ),
                ))
            }
            Some(true) => return Ok(()),
            None => {}
        }
        let Some(opt) = classify(&key) else {
            self.warn(line, format!("unknown option '{key}' ignored"));
            return Ok(());
        };
        if let Opt::Refused(why) = opt {
            return Err(self.err(line, format!("option '{key}' {why}")));
        }
        if let Opt::Ignored(why) = opt {
            self.note_ignored(line, format!("'{key}' ignored: {why}"));
            return Ok(());
        }
        if let Some(first) = self.seen.insert(key.clone(), line) {
            self.warn(
                line,
                format!("option '{key}' was already set on line {first}; this later value wins"),
            );
        }
        match self.section {
            Section::Global => {
                // `smb encrypt` in [global] is the server's policy; shares that do not
                // set their own follow it.
                if opt.is_global_only() || opt == Opt::SmbEncrypt {
                    self.global_option(line, &key, opt, value)
                } else if opt == Opt::Path {
                    self.warn(
                        line,
                        "'path' in [global] ignored: give each share its own path",
                    );
                    Ok(())
                } else {
                    let mut defaults = std::mem::take(&mut self.defaults);
                    let r = self.share_option(line, &key, opt, value, &mut defaults);
                    self.defaults = defaults;
                    r
                }
            }
            Section::Homes => {
                if opt.is_global_only() {
                    self.warn(
                        line,
                        format!("'{key}' is a [global] option; ignored in [homes]"),
                    );
                    return Ok(());
                }
                let mut draft = self.homes.take().unwrap_or_default();
                let r = self.share_option(line, &key, opt, value, &mut draft);
                self.homes = Some(draft);
                r
            }
            Section::Share(i) => {
                if opt.is_global_only() {
                    let share = self
                        .shares
                        .get(i)
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    self.warn(
                        line,
                        format!("'{key}' is a [global] option; ignored in share [{share}]"),
                    );
                    return Ok(());
                }
                let mut draft = std::mem::take(&mut self.shares[i]);
                let r = self.share_option(line, &key, opt, value, &mut draft);
                self.shares[i] = draft;
                r
            }
            Section::None | Section::Skipped => Ok(()),
        }
    }

    fn bool_value(&self, line: usize, key: &str, value: &str) -> Result<bool, ConfigError> {
        parse_bool(value).ok_or_else(|| {
            self.err(
                line,
                format!("'{key}' expects yes or no (also true/false, 1/0, on/off), got '{value}'"),
            )
        })
    }

    /// `auto` (`None`) or a yes/no value (`zerocopy send`, `smb3 directory leases`).
    fn auto_or_bool_value(
        &self,
        line: usize,
        key: &str,
        value: &str,
    ) -> Result<Option<bool>, ConfigError> {
        if value.eq_ignore_ascii_case("auto") {
            return Ok(None);
        }
        self.bool_value(line, key, value).map(Some)
    }

    /// A timeout in whole seconds, 1 to 3600 (`send timeout`, `handshake timeout`).
    fn seconds_value(&self, line: usize, key: &str, value: &str) -> Result<u32, ConfigError> {
        value
            .parse::<u32>()
            .ok()
            .filter(|s| (1..=3600).contains(s))
            .ok_or_else(|| {
                self.err(
                    line,
                    format!("'{key}' expects seconds from 1 to 3600, got '{value}'"),
                )
            })
    }

    /// A byte count for `smb2 max read/write/trans`: digits with an optional
    /// `K` or `M` (1024-based); outside 64 KiB ..= 8 MiB it is clamped, with a
    /// warning.
    fn io_size_value(&mut self, line: usize, key: &str, value: &str) -> Result<u32, ConfigError> {
        let v = value.trim();
        let (digits, unit) = match v.char_indices().last() {
            Some((i, 'k' | 'K')) => (&v[..i], 1u64 << 10),
            Some((i, 'm' | 'M')) => (&v[..i], 1u64 << 20),
            _ => (v, 1),
        };
        let n = digits
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .ok_or_else(|| {
                self.err(
                    line,
                    format!(
                        "'{key}' expects a size in bytes (such as 1048576 or 1M), got '{value}'"
                    ),
                )
            })?;
        let (min, max) = (64u64 << 10, 8u64 << 20);
        let clamped = n.clamp(min, max);
        if clamped != n {
            self.warn(
                line,
                format!("'{key} = {value}' is outside 64 KiB to 8 MiB; {clamped} bytes are used"),
            );
        }
        Ok(clamped as u32)
    }

    fn global_option(
        &mut self,
        line: usize,
        key: &str,
        opt: Opt,
        value: &str,
    ) -> Result<(), ConfigError> {
        match opt {
            Opt::MinProtocol => {
                self.global.server_min_protocol =
                    parse_dialect(value, Bound::Min).map_err(|m| self.err(line, m))?;
                self.min_line = line;
            }
            Opt::MaxProtocol => {
                self.global.server_max_protocol =
                    parse_dialect(value, Bound::Max).map_err(|m| self.err(line, m))?;
                self.max_line = line;
            }
            Opt::Signing => {
                self.global.server_signing = parse_signing(value).ok_or_else(|| {
                    self.err(
                        line,
                        format!(
                            "'server signing' expects default, auto, desired or mandatory, got '{value}'"
                        ),
                    )
                })?;
            }
            Opt::Interfaces => self.global.interfaces = parse_list(value),
            Opt::BindInterfacesOnly => {
                self.global.bind_interfaces_only = self.bool_value(line, key, value)?;
            }
            Opt::UseSendfile => {
                self.global.use_sendfile = self.bool_value(line, key, value)?;
            }
            Opt::PinCpus => {
                self.global.pin_cpus = match self.auto_or_bool_value(line, key, value)? {
                    None => PinCpus::Auto,
                    Some(true) => PinCpus::Yes,
                    Some(false) => PinCpus::No,
                };
            }
            Opt::MultishotReceive => {
                self.global.multishot_receive = self.bool_value(line, key, value)?;
            }
            Opt::KernelChangeNotify => {
                self.global.kernel_change_notify = self.bool_value(line, key, value)?;
            }
            Opt::MulticastDnsRegister => {
                self.global.multicast_dns_register = self.bool_value(line, key, value)?;
            }
            Opt::Wsd => self.global.wsd = self.bool_value(line, key, value)?,
            Opt::LocalKdc => self.global.local_kdc = self.bool_value(line, key, value)?,
            Opt::ZerocopySend => {
                self.global.zerocopy_send = match self.auto_or_bool_value(line, key, value)? {
                    None => ZerocopySend::Auto,
                    Some(true) => ZerocopySend::Yes,
                    Some(false) => ZerocopySend::No,
                };
            }
            Opt::SendTimeout => {
                self.global.send_timeout_secs = self.seconds_value(line, key, value)?;
            }
            Opt::MultiChannel => {
                self.global.multi_channel = self.bool_value(line, key, value)?;
            }
            Opt::Compression => self.global.compression = self.bool_value(line, key, value)?,
            Opt::CompressionAlgorithms => {
                let mut algs = Vec::new();
                for name in parse_list(value) {
                    let a = super::compression_algorithm(&name).ok_or_else(|| {
                        self.err(
                            line,
                            format!("'{key}': unknown algorithm '{name}' (lz4, lz77, pattern_v1, lz77+huffman, lznt1)"),
                        )
                    })?;
                    if !algs.contains(&a) {
                        algs.push(a);
                    }
                }
                self.global.compression_algorithms = algs;
            }
            Opt::Smb3DirectoryLeases => {
                self.global.smb3_directory_leases = self.auto_or_bool_value(line, key, value)?;
            }
            Opt::DisableLockSequenceChecking => {
                self.global.disable_lock_sequence_checking = self.bool_value(line, key, value)?;
            }
            Opt::Smb2MaxRead | Opt::Smb2MaxWrite | Opt::Smb2MaxTrans => {
                let n = self.io_size_value(line, key, value)?;
                match opt {
                    Opt::Smb2MaxRead => self.global.smb2_max_read = n,
                    Opt::Smb2MaxWrite => self.global.smb2_max_write = n,
                    _ => self.global.smb2_max_trans = n,
                }
            }
            Opt::MaxConnections => {
                self.global.max_connections = value.parse::<u32>().map_err(|_| {
                    self.err(
                        line,
                        format!("'{key}' expects a whole number (0 for no limit), got '{value}'"),
                    )
                })?;
            }
            Opt::Deadtime => {
                self.global.deadtime_minutes = value.parse::<u32>().map_err(|_| {
                    self.err(line, format!("'{key}' expects minutes as a whole number (0 for never), got '{value}'"))
                })?;
            }
            Opt::HandshakeTimeout => {
                self.global.handshake_timeout_secs = self.seconds_value(line, key, value)?;
            }
            Opt::DurableHandleTimeout => {
                self.global.durable_handle_timeout_secs = self.seconds_value(line, key, value)?;
            }
            Opt::LogLevel => {
                self.global.log_level = parse_log_level(value).map_err(|m| self.err(line, m))?;
            }
            Opt::SmbPasswdFile => {
                if value.is_empty() {
                    return Err(self.err(line, format!("'{key}' needs a file name")));
                }
                self.global.smb_passwd_file = self.base.join(value);
            }
            Opt::SmbTransports => {
                self.global.quic_port =
                    super::quic::parse_transports(value).map_err(|m| self.err(line, m))?;
            }
            Opt::Quic(which) => {
                self.global
                    .quic
                    .set(which, key, value)
                    .map_err(|m| self.err(line, m))?;
            }
            Opt::TlsFile(which) => {
                if value.is_empty() {
                    return Err(self.err(line, format!("'{key}' needs a file name")));
                }
                let path = Some(self.base.join(value));
                match which {
                    TlsFile::Cert => self.global.tls_certfile = path,
                    TlsFile::Key => self.global.tls_keyfile = path,
                    TlsFile::Ca => self.global.tls_cafile = path,
                }
            }
            Opt::Listen => {
                let mut addrs = Vec::new();
                for item in parse_list(value) {
                    let addr = item.parse::<SocketAddr>().map_err(|_| {
                        self.err(
                            line,
                            format!(
                                "'listen' expects ADDRESS:PORT items such as 0.0.0.0:445 or \
                                 [::1]:4450, got '{item}'"
                            ),
                        )
                    })?;
                    addrs.push(addr);
                }
                if addrs.is_empty() {
                    return Err(self.err(line, "'listen' needs at least one ADDRESS:PORT"));
                }
                self.global.listen = addrs;
            }
            Opt::NetbiosName => {
                if value.is_empty() || value.chars().count() > 15 {
                    return Err(self.err(
                        line,
                        format!("'netbios name' must be 1 to 15 characters, got '{value}'"),
                    ));
                }
                self.global.netbios_name = value.to_ascii_uppercase();
            }
            Opt::Workgroup => self.global.workgroup = value.to_ascii_uppercase(),
            Opt::ServerString => self.global.server_string = value.to_string(),
            Opt::MapToGuest => {
                self.global.map_to_guest = match normalize_key(value).as_str() {
                    "never" => MapToGuest::Never,
                    "bad user" => MapToGuest::BadUser,
                    "bad password" | "bad uid" => {
                        return Err(self.err(
                            line,
                            format!(
                                "'map to guest = {value}' is not supported; use never or bad user"
                            ),
                        ));
                    }
                    _ => {
                        return Err(self.err(
                            line,
                            format!("'map to guest' expects never or bad user, got '{value}'"),
                        ));
                    }
                };
            }
            Opt::ControlSocket => {
                self.global.control_socket = match normalize_key(value).as_str() {
                    "" | "no" | "none" | "off" => None,
                    _ => Some(self.base.join(value)),
                };
            }
            Opt::MetricsListen => {
                self.global.metrics_listen = match normalize_key(value).as_str() {
                    "" | "no" | "off" => None,
                    _ => Some(value.parse::<SocketAddr>().map_err(|_| {
                        self.err(
                            line,
                            format!(
                                "'{key} = {value}': expected ADDRESS:PORT, like 127.0.0.1:9445"
                            ),
                        )
                    })?),
                };
            }
            Opt::ControlGroup => {
                self.global.control_group = (!value.is_empty()).then(|| value.to_string());
            }
            Opt::Cluster => {
                super::cluster::apply(&mut self.global.cluster, key, value, &self.base)
                    .map_err(|m| self.err(line, m))?;
                self.cluster_line = line;
            }
            Opt::FailedLogonBackoff => {
                self.global.failed_logon_backoff = parse_backoff(value).ok_or_else(|| {
                    let m =
                        format!("'{key}' expects no, yes or a number of failures, got '{value}'");
                    self.err(line, m)
                })?;
            }
            Opt::GuestAccount => {
                if value.is_empty() {
                    return Err(self.err(line, "'guest account' needs a user name"));
                }
                self.global.guest_account = value.to_string();
            }
            Opt::QuotaCommand(set) => {
                let g = &mut self.global;
                let to = if set {
                    &mut g.set_quota_command
                } else {
                    &mut g.get_quota_command
                };
                *to = (!value.is_empty()).then(|| value.to_string());
            }
            Opt::ServerRole => {
                let v = normalize_key(value);
                if !matches!(
                    v.as_str(),
                    "standalone" | "standalone server" | "auto" | "member server"
                ) {
                    self.warn(
                        line,
                        format!("'server role = {value}' ignored: ringshare is always a standalone server"),
                    );
                }
            }
            Opt::Security => {
                self.global.member.security =
                    super::member::security(value).map_err(|m| self.err(line, m))?;
                self.security_line = line;
            }
            Opt::Member => {
                super::member::apply(&mut self.global.member, key, value)
                    .map_err(|m| self.err(line, m))?;
            }
            Opt::SmbEncrypt => self.global.smb_encrypt = self.encrypt_value(line, key, value)?,
            Opt::Realm => self.global.realm = value.to_ascii_uppercase(),
            Opt::KerberosMethod => {
                self.global.kerberos_method = match normalize_key(value).as_str() {
                    "default" | "secrets only" => KerberosMethod::SecretsOnly,
                    "dedicated keytab" => KerberosMethod::DedicatedKeytab,
                    "system keytab" => KerberosMethod::SystemKeytab,
                    "secrets and keytab" => KerberosMethod::SecretsAndKeytab,
                    _ => {
                        return Err(self.err(
                            line,
                            format!(
                                "'kerberos method' is one of 'secrets only', 'dedicated keytab', \
                                 'system keytab', 'secrets and keytab'; got '{value}'"
                            ),
                        ))
                    }
                }
            }
            Opt::KerberosEncryptionTypes => {
                self.global.kerberos_encryption_types = match normalize_key(value).as_str() {
                    "strong" => KerberosEncryptionTypes::Strong,
                    "all" => KerberosEncryptionTypes::All,
                    "legacy" => {
                        self.warn(
                            line,
                            "'kerberos encryption types = legacy' accepts RC4-HMAC and AES \
                             tickets, as 'all' does (Samba's client asks for RC4 only)",
                        );
                        KerberosEncryptionTypes::Legacy
                    }
                    _ => {
                        return Err(self.err(
                            line,
                            format!(
                                "'kerberos encryption types' is one of 'strong' (AES only, the \
                                 default), 'all' (AES and RC4-HMAC), 'legacy'; got '{value}'"
                            ),
                        ))
                    }
                }
            }
            Opt::DedicatedKeytabFile => {
                let path = value.strip_prefix("FILE:").unwrap_or(value);
                if path.is_empty() {
                    return Err(self.err(line, format!("'{key}' needs a file name")));
                }
                self.global.dedicated_keytab_file = Some(self.base.join(path));
            }
            _ => {}
        }
        Ok(())
    }

    fn share_option(
        &mut self,
        line: usize,
        key: &str,
        opt: Opt,
        value: &str,
        draft: &mut ShareDraft,
    ) -> Result<(), ConfigError> {
        match opt {
            Opt::Path => draft.path = Some((value.to_string(), line)),
            Opt::ReadOnly => draft.read_only = Some(self.bool_value(line, key, value)?),
            Opt::Writeable => draft.read_only = Some(!self.bool_value(line, key, value)?),
            Opt::GuestOk => draft.guest_ok = Some(self.bool_value(line, key, value)?),
            Opt::ValidUsers => draft.valid_users = Some(parse_list(value)),
            Opt::Comment => draft.comment = Some(value.to_string()),
            Opt::Browseable => draft.browseable = Some(self.bool_value(line, key, value)?),
            Opt::DurableHandles => {
                draft.durable_handles = Some(self.bool_value(line, key, value)?);
            }
            Opt::ContinuousAvailability => {
                draft.continuous_availability = Some(self.bool_value(line, key, value)?);
            }
            Opt::ChangeNotify => {
                draft.change_notify = Some(self.bool_value(line, key, value)?);
            }
            Opt::PosixLocking => {
                draft.posix_locking = Some(self.bool_value(line, key, value)?);
            }
            Opt::StrictLocking => {
                draft.strict_locking = Some(self.auto_or_bool_value(line, key, value)?);
            }
            Opt::FsOffload => {
                draft.fs_offload = Some(self.auto_or_bool_value(line, key, value)?);
            }
            Opt::Smb3UnixExtensions => {
                draft.smb3_unix_extensions = Some(self.bool_value(line, key, value)?);
            }
            Opt::CompressData => {
                draft.compress_data = Some(self.bool_value(line, key, value)?);
            }
            Opt::Fruit => {
                let checked = super::fruit::apply(&mut Default::default(), key, value);
                self.checked_module_option(line, checked)?;
                draft
                    .fruit_params
                    .push((key.to_string(), value.to_string()));
            }
            Opt::Shadow => {
                let checked = super::shadow::apply(&mut Default::default(), key, value);
                self.checked_module_option(line, checked)?;
                draft
                    .shadow_params
                    .push((key.to_string(), value.to_string()));
            }
            Opt::SmbEncrypt => draft.smb_encrypt = Some(self.encrypt_value(line, key, value)?),
            Opt::Rule(rule) => {
                // Checked now, for the line number; applied at the end over
                // the [global] defaults.
                apply_rule(&mut ShareRules::default(), rule, value)
                    .map_err(|m| self.err(line, format!("'{key}' {m}")))?;
                draft.rules.push((rule, value.to_string()));
            }
            Opt::VfsObjects => {
                let (mut acl_xattr, mut streams, mut fruit) = (false, false, false);
                let mut shadow = false;
                for module in parse_list(value) {
                    match module.as_str() {
                        "acl_xattr" => acl_xattr = true,
                        "streams_xattr" => streams = true,
                        "fruit" => fruit = true,
                        "shadow_copy2" => shadow = true,
                        // catia maps characters macOS uses that Windows
                        // forbids; not there yet.
                        "catia" => self.note_ignored(
                            line,
                            "vfs module 'catia' ignored: its name mapping is not implemented \
                             (names with characters Windows forbids are not mapped)",
                        ),
                        "posixacl" | "dirsort" => {}
                        // What vfs_btrfs gives (server-side clones, FSCTL_SET_COMPRESSION,
                        // the compressed attribute) ringshare does on every btrfs share, and
                        // its whole data path is io_uring: nothing to turn on.
                        "btrfs" | "io_uring" => {}
                        other => self.warn(
                            line,
                            format!("vfs module '{other}' is not supported by ringshare; ignored"),
                        ),
                    }
                }
                draft.acl_xattr = Some(acl_xattr);
                draft.streams = Some(streams);
                draft.fruit = Some(fruit);
                draft.shadow = Some(shadow);
            }
            _ => {}
        }
        Ok(())
    }

    /// A vfs module's option (`fruit:`, `shadow:`) checked on a scratch copy of the
    /// module's settings when read, for its line; applied when the share is resolved.
    fn checked_module_option(
        &mut self,
        line: usize,
        checked: Result<Option<String>, String>,
    ) -> Result<(), ConfigError> {
        match checked {
            Ok(None) => Ok(()),
            Ok(Some(w)) => {
                self.warn(line, w);
                Ok(())
            }
            Err(e) => Err(self.err(line, e)),
        }
    }

    fn encrypt_value(
        &self,
        line: usize,
        key: &str,
        value: &str,
    ) -> Result<EncryptPolicy, ConfigError> {
        parse_encrypt(value).ok_or_else(|| {
            self.err(
                line,
                format!("'{key}' expects off, if_required, desired or required, got '{value}'"),
            )
        })
    }

    fn finish(mut self) -> Result<Config, ConfigError> {
        let g = &self.global;
        if let Some(m) = super::cluster::missing(&g.cluster) {
            return Err(self.err(self.cluster_line, m));
        }
        if let Some(m) = member_missing(g) {
            return Err(self.err(self.security_line, m));
        }
        if g.server_min_protocol > g.server_max_protocol {
            let line = self.max_line.max(self.min_line);
            return Err(self.err(
                line,
                format!(
                    "'server min protocol' ({}) is higher than 'server max protocol' ({})",
                    g.server_min_protocol, g.server_max_protocol
                ),
            ));
        }
        self.global.smb3_unix_extensions = self.defaults.smb3_unix_extensions.unwrap_or(false);
        let drafts = std::mem::take(&mut self.shares);
        let mut shares = Vec::with_capacity(drafts.len());
        for d in drafts {
            shares.push(self.resolve_share(d)?);
        }
        let homes = match self.homes.take() {
            Some(mut d) => {
                if d.path.is_none() {
                    d.path = Some(("%H".to_string(), d.line));
                }
                Some(self.resolve_share(d)?)
            }
            None => None,
        };
        Ok(Config {
            global: self.global,
            shares,
            homes,
            warnings: self.warnings,
            ignored: self.ignored,
            source: Some(self.file.to_path_buf()),
        })
    }

    fn resolve_share(&self, d: ShareDraft) -> Result<ShareConfig, ConfigError> {
        let Some((raw, line)) = d.path else {
            return Err(self.err(d.line, format!("share [{}] has no 'path'", d.name)));
        };
        if raw.is_empty() {
            return Err(self.err(line, format!("share [{}] has an empty 'path'", d.name)));
        }
        // A path with Samba's substitutions (`%U`, `%H`…) is made per user at
        // tree connect; it cannot be checked now.
        let templated = raw.contains('%');
        let path = if raw.starts_with('%') {
            PathBuf::from(&raw)
        } else {
            self.base.join(&raw)
        };
        if !templated {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(self.err(
                        line,
                        format!(
                            "path '{}' of share [{}] is not a directory",
                            path.display(),
                            d.name
                        ),
                    ));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(self.err(
                        line,
                        format!(
                            "path '{}' of share [{}] does not exist",
                            path.display(),
                            d.name
                        ),
                    ));
                }
                Err(e) => {
                    return Err(self.err(
                        line,
                        format!("path '{}' of share [{}]: {e}", path.display(), d.name),
                    ));
                }
            }
        }
        let defaults = &self.defaults;
        let shadow = match d.shadow.or(defaults.shadow).unwrap_or(false) {
            true => {
                let mut c = super::shadow::ShadowConf::default();
                for (k, v) in defaults.shadow_params.iter().chain(&d.shadow_params) {
                    // Checked when read.
                    let _ = super::shadow::apply(&mut c, k, v);
                }
                let placed = match templated {
                    true => super::shadow::check_templated(&c, &d.name),
                    false => super::shadow::resolve(&mut c, &d.name, &path),
                };
                placed.map_err(|m| self.err(d.line, m))?;
                Some(c.copy)
            }
            false => None,
        };
        let mut rules = ShareRules {
            valid_users: d
                .valid_users
                .or_else(|| defaults.valid_users.clone())
                .unwrap_or_default(),
            ..ShareRules::default()
        };
        for (rule, value) in defaults.rules.iter().chain(&d.rules) {
            // Checked when the option was read.
            let _ = apply_rule(&mut rules, *rule, value);
        }
        Ok(ShareConfig {
            name: d.name,
            path,
            templated,
            read_only: d.read_only.or(defaults.read_only).unwrap_or(true),
            guest_ok: d.guest_ok.or(defaults.guest_ok).unwrap_or(false),
            comment: d
                .comment
                .or_else(|| defaults.comment.clone())
                .unwrap_or_default(),
            browseable: d.browseable.or(defaults.browseable).unwrap_or(true),
            smb_encrypt: d.smb_encrypt,
            rules,
            acl_xattr: d.acl_xattr.or(defaults.acl_xattr).unwrap_or(false),
            durable_handles: d
                .durable_handles
                .or(defaults.durable_handles)
                .unwrap_or(true),
            continuous_availability: d
                .continuous_availability
                .or(defaults.continuous_availability)
                .unwrap_or(false),
            change_notify: d.change_notify.or(defaults.change_notify).unwrap_or(true),
            // On a cluster node its fcntl calls, made on the I/O thread, are round trips to
            // the cluster file system's metadata server (docs/cluster.md): off unless asked.
            posix_locking: d
                .posix_locking
                .or(defaults.posix_locking)
                .unwrap_or(!self.global.cluster.enabled()),
            strict_locking: d.strict_locking.or(defaults.strict_locking).unwrap_or(None),
            fs_offload: d.fs_offload.or(defaults.fs_offload).unwrap_or(None),
            smb3_unix_extensions: d
                .smb3_unix_extensions
                .or(defaults.smb3_unix_extensions)
                .unwrap_or(false),
            compress_data: d.compress_data.or(defaults.compress_data).unwrap_or(false),
            streams: d.streams.or(defaults.streams).unwrap_or(true),
            fruit: d.fruit.or(defaults.fruit).unwrap_or(false).then(|| {
                let mut f = ringshare_core::fruit::Fruit::default();
                for (k, v) in defaults.fruit_params.iter().chain(&d.fruit_params) {
                    // Checked when read.
                    let _ = super::fruit::apply(&mut f, k, v);
                }
                f
            }),
            shadow,
        })
    }
}

/// Sets one rule option in `rules`; the error says what the value should be.
fn apply_rule(rules: &mut ShareRules, rule: Rule, value: &str) -> Result<(), String> {
    let mask = || {
        u32::from_str_radix(value.trim(), 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .ok_or_else(|| format!("expects an octal mode such as 0755, got '{value}'"))
    };
    let flag = || parse_bool(value).ok_or_else(|| format!("expects yes or no, got '{value}'"));
    let name = || {
        let v = value.trim();
        if v.is_empty() {
            Err("needs a name".to_string())
        } else {
            Ok(v.to_string())
        }
    };
    match rule {
        Rule::InvalidUsers => rules.invalid_users = parse_list(value),
        Rule::ReadList => rules.read_list = parse_list(value),
        Rule::WriteList => rules.write_list = parse_list(value),
        Rule::AdminUsers => rules.admin_users = parse_list(value),
        Rule::ForceUser => rules.force_user = Some(name()?),
        Rule::ForceGroup => rules.force_group = Some(name()?),
        Rule::CreateMask => rules.create_mask = mask()?,
        Rule::DirectoryMask => rules.directory_mask = mask()?,
        Rule::ForceCreateMode => rules.force_create_mode = mask()?,
        Rule::ForceDirectoryMode => rules.force_directory_mode = mask()?,
        Rule::InheritPermissions => rules.inherit_permissions = flag()?,
        Rule::InheritAcls => rules.inherit_acls = flag()?,
        Rule::HideUnreadable => rules.hide_unreadable = flag()?,
        Rule::InheritOwner => {
            rules.inherit_owner = match normalize_key(value).as_str() {
                "no" | "false" | "0" | "off" => InheritOwner::No,
                "yes" | "true" | "1" | "on" | "windows and unix" => InheritOwner::WindowsAndUnix,
                "unix only" => InheritOwner::UnixOnly,
                _ => {
                    return Err(format!(
                        "expects no, windows and unix, or unix only, got '{value}'"
                    ))
                }
            }
        }
    }
    Ok(())
}

/// Joins continued lines. Yields (first physical line number, text).
pub(super) fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let is_comment = pending.is_none() && {
            let t = raw.trim_start();
            t.starts_with(';') || t.starts_with('#')
        };
        if is_comment {
            continue;
        }
        let trimmed_end = raw.trim_end();
        let (body, continues) = match trimmed_end.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (raw, false),
        };
        let (start, mut acc) = pending.take().unwrap_or((number, String::new()));
        // Cap the accumulated text so a file of endless continuations cannot grow without bound;
        // the caller rejects over-long lines.
        if acc.len() <= LINE_LEN_MAX {
            acc.push_str(body);
        }
        if continues {
            pending = Some((start, acc));
        } else {
            out.push((start, acc));
        }
    }
    if let Some(p) = pending {
        out.push(p);
    }
    out
}
