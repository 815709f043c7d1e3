//! `ringshare testparm [FILE]`: reads a configuration as `ringshare serve --config FILE` would
//! and shows what ringshare makes of it, as Samba's `testparm` does for smbd.
//!
//! On standard error: every line of the file ringshare does not act on, as `FILE:LINE: reason`
//! (unknown options, options it ignores, sections it does not share, values it changes), in
//! file order, then a summary. On standard output: the effective configuration in smb.conf
//! syntax, every `[global]` option ringshare supports with the value it takes (defaults
//! included), then each share with all its options. That output is itself a configuration
//! ringshare loads to the same settings.
//!
//! Nothing is written: no smbpasswd file is created (unlike `serve`), share directories are only
//! looked at (`stat`), and no privilege is needed beyond reading the file.
//!
//! Without FILE, the first that exists of [`DEFAULT_CONFIG_FILES`] is read:
//! `/etc/ringshare/smb.conf`, then Samba's `/etc/samba/smb.conf`.

use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ringshare_core::fruit::{Fruit, Metadata, Resource};
use ringshare_core::shadow::{ShadowCopy, SnapSort};
use ringshare_core::{InheritOwner, ShareRules};

use crate::config::{
    self, Config, ConfigError, EncryptPolicy, Global, KerberosMethod, MapToGuest, PinCpus,
    ShareConfig, SigningPolicy, ZerocopySend,
};

/// The files `testparm` reads when none is given, in order: ringshare's own, then Samba's.
pub const DEFAULT_CONFIG_FILES: [&str; 2] = ["/etc/ringshare/smb.conf", "/etc/samba/smb.conf"];

/// Why `testparm` reports failure.
#[derive(Debug)]
pub enum TestparmError {
    /// No FILE was given and none of [`DEFAULT_CONFIG_FILES`] exists.
    NoConfigFile,
    /// The configuration is refused: `ringshare serve` would not start with it.
    Refused(ConfigError),
    /// The configuration loads but has no share, not even `[homes]`: `ringshare serve`
    /// refuses it.
    NoShares(PathBuf),
    /// Writing the report failed.
    Io(io::Error),
}

impl fmt::Display for TestparmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestparmError::NoConfigFile => write!(
                f,
                "no configuration file: neither {} nor {} exists; give one",
                DEFAULT_CONFIG_FILES[0], DEFAULT_CONFIG_FILES[1]
            ),
            TestparmError::Refused(e) => write!(f, "{e}"),
            TestparmError::NoShares(file) => write!(
                f,
                "{}: no share section: `ringshare serve` needs at least one share \
                 (or [homes])",
                file.display()
            ),
            TestparmError::Io(e) => write!(f, "writing the report: {e}"),
        }
    }
}

impl std::error::Error for TestparmError {}

impl From<io::Error> for TestparmError {
    fn from(e: io::Error) -> Self {
        TestparmError::Io(e)
    }
}

/// The file to read when none is given: the first of [`DEFAULT_CONFIG_FILES`] that exists.
pub fn default_config_file() -> Option<PathBuf> {
    choose_config_file(|p| p.exists())
}

/// [`default_config_file`] with the existence test given.
pub fn choose_config_file(exists: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    DEFAULT_CONFIG_FILES
        .iter()
        .map(Path::new)
        .find(|p| exists(p))
        .map(Path::to_path_buf)
}

/// Loads `file` and writes the report: what ringshare does not act on to `err`, the effective
/// configuration to `out`. `Ok` when `ringshare serve --config FILE` would accept the file.
pub fn run(file: &Path, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), TestparmError> {
    // Absolute, so that the paths shown (relative ones are taken from the file's directory)
    // mean the same wherever the output is read.
    let file = &std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    writeln!(err, "Load smb config file {}", file.display())?;
    let cfg = config::load(file).map_err(TestparmError::Refused)?;
    let mut notes: Vec<&config::ConfigWarning> = cfg.warnings.iter().chain(&cfg.ignored).collect();
    // Stable: notes of one line keep the order they were found in.
    notes.sort_by_key(|n| n.line);
    for n in &notes {
        writeln!(err, "{n}")?;
    }
    let homes = if cfg.homes.is_some() {
        " and [homes]"
    } else {
        ""
    };
    writeln!(
        err,
        "Loaded {}: {} share{}{homes}; {} line{} ringshare does not act on (above)",
        file.display(),
        cfg.shares.len(),
        plural(cfg.shares.len()),
        notes.len(),
        plural(notes.len()),
    )?;
    err.flush()?;
    writeln!(
        out,
        "# The configuration of {} as ringshare reads it: every option it supports,\n\
         # defaults included.\n",
        file.display()
    )?;
    out.write_all(render(&cfg).as_bytes())?;
    out.flush()?;
    // `serve` refuses a configuration without shares (serve.rs); say so here too.
    if cfg.shares.is_empty() && cfg.homes.is_none() {
        return Err(TestparmError::NoShares(file.to_path_buf()));
    }
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The effective configuration in smb.conf syntax: `[global]` with every option ringshare
/// supports, then each share, then `[homes]`. Loading it gives the same settings.
pub fn render(cfg: &Config) -> String {
    let mut s = String::new();
    render_global(&mut s, &cfg.global);
    for share in &cfg.shares {
        s.push('\n');
        render_share(&mut s, share, cfg.global.smb_encrypt);
    }
    if let Some(homes) = &cfg.homes {
        s.push('\n');
        render_share(&mut s, homes, cfg.global.smb_encrypt);
    }
    s
}

/// One `\tkey = value` line.
fn opt(s: &mut String, key: &str, value: impl fmt::Display) {
    // Writing to a String cannot fail.
    let _ = writeln!(s, "\t{key} = {value}");
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// A list value; names with blanks or commas are quoted, as the parser reads them.
fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| {
            if i.contains(|c: char| c == ',' || c.is_whitespace()) {
                format!("\"{i}\"")
            } else {
                i.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn signing(p: SigningPolicy) -> &'static str {
    match p {
        SigningPolicy::Default => "default",
        SigningPolicy::Auto => "auto",
        SigningPolicy::Desired => "desired",
        SigningPolicy::Mandatory => "mandatory",
    }
}

fn encrypt(p: EncryptPolicy) -> &'static str {
    match p {
        EncryptPolicy::Off => "off",
        EncryptPolicy::IfRequired => "if_required",
        EncryptPolicy::Desired => "desired",
        EncryptPolicy::Required => "required",
    }
}

/// Every `[global]` option with its effective value, one `\tkey = value`
/// line each (what `testparm` prints; what a reload compares to name the
/// options that need a restart).
pub(crate) fn render_global(s: &mut String, g: &Global) {
    // Each field of Global is printed: a field added to it stops this
    // destructuring from compiling until it is.
    let Global {
        server_min_protocol,
        server_max_protocol,
        server_signing,
        interfaces,
        bind_interfaces_only,
        max_connections,
        deadtime_minutes,
        handshake_timeout_secs,
        durable_handle_timeout_secs,
        log_level,
        smb_passwd_file,
        listen,
        netbios_name,
        workgroup,
        server_string,
        map_to_guest,
        smb_encrypt,
        guest_account,
        get_quota_command,
        set_quota_command,
        use_sendfile,
        pin_cpus,
        multishot_receive,
        kernel_change_notify,
        multicast_dns_register,
        wsd,
        zerocopy_send,
        send_timeout_secs,
        multi_channel,
        compression,
        compression_algorithms,
        disable_lock_sequence_checking,
        smb3_directory_leases,
        smb3_unix_extensions,
        smb2_max_read,
        smb2_max_write,
        smb2_max_trans,
        control_socket,
        control_group,
        metrics_listen,
        quic_port,
        tls_certfile,
        tls_keyfile,
        tls_cafile,
        quic,
        failed_logon_backoff,
        cluster,
        realm,
        kerberos_method,
        dedicated_keytab_file,
        kerberos_encryption_types,
        local_kdc,
        member,
    } = g;
    s.push_str("[global]\n");
    let ads = member.security == crate::config::member::Security::Ads;
    opt(
        s,
        "server role",
        if ads {
            "member server"
        } else {
            "standalone server"
        },
    );
    opt(s, "security", if ads { "ads" } else { "user" });
    opt(s, "netbios name", netbios_name);
    opt(s, "workgroup", workgroup);
    opt(s, "server string", server_string);
    let listen: Vec<String> = listen.iter().map(|a| a.to_string()).collect();
    opt(s, "listen", listen.join(", "));
    match quic_port {
        Some(443) => opt(s, "server smb transports", "tcp, quic"),
        Some(p) => opt(s, "server smb transports", format!("tcp, quic:{p}")),
        None => opt(s, "server smb transports", "tcp"),
    }
    for (name, file) in [
        ("tls certfile", tls_certfile),
        ("tls keyfile", tls_keyfile),
        ("tls cafile", tls_cafile),
    ] {
        match file {
            Some(f) => opt(s, name, f.display()),
            None => {
                let _ = writeln!(s, "\t# {name} = (none)");
            }
        }
    }
    for (name, value) in quic.lines() {
        opt(s, name, value);
    }
    if quic_port.is_some() && tls_certfile.is_none() {
        s.push_str("\t# QUIC: a self-signed certificate is made on first start, kept beside the smb passwd file\n");
    }
    opt(s, "interfaces", list(interfaces));
    opt(s, "bind interfaces only", yes_no(*bind_interfaces_only));
    opt(s, "server min protocol", server_min_protocol);
    opt(s, "server max protocol", server_max_protocol);
    opt(s, "server signing", signing(*server_signing));
    opt(s, "server smb encrypt", encrypt(*smb_encrypt));
    opt(s, "server multi channel support", yes_no(*multi_channel));
    opt(s, "server smb compression", yes_no(*compression));
    let algs: Vec<&str> = compression_algorithms
        .iter()
        .map(|a| crate::config::compression_algorithm_name(*a))
        .collect();
    opt(s, "server smb compression algorithms", algs.join(", "));
    let guest = match map_to_guest {
        MapToGuest::Never => "never",
        MapToGuest::BadUser => "bad user",
    };
    opt(s, "map to guest", guest);
    opt(s, "guest account", guest_account);
    for (key, cmd) in [
        ("get quota command", get_quota_command),
        ("set quota command", set_quota_command),
    ] {
        opt(s, key, cmd.as_deref().unwrap_or(""));
    }
    opt(s, "smb passwd file", smb_passwd_file.display());
    opt(s, "realm", realm);
    let method = match kerberos_method {
        KerberosMethod::SecretsOnly => "secrets only",
        KerberosMethod::DedicatedKeytab => "dedicated keytab",
        KerberosMethod::SystemKeytab => "system keytab",
        KerberosMethod::SecretsAndKeytab => "secrets and keytab",
    };
    opt(s, "kerberos method", method);
    if let Some(f) = dedicated_keytab_file {
        opt(s, "dedicated keytab file", f.display());
    }
    opt(
        s,
        "kerberos encryption types",
        kerberos_encryption_types.name(),
    );
    opt(s, "local kdc", yes_no(*local_kdc));
    if ads || !member.idmap.is_empty() {
        for d in &member.idmap {
            if !d.backend.is_empty() {
                opt(
                    s,
                    &format!("idmap config {} : backend", d.domain),
                    &d.backend,
                );
            }
            if let Some((lo, hi)) = d.range {
                opt(
                    s,
                    &format!("idmap config {} : range", d.domain),
                    format!("{lo}-{hi}"),
                );
            }
            if d.base_rid != 0 {
                opt(
                    s,
                    &format!("idmap config {} : base_rid", d.domain),
                    d.base_rid,
                );
            }
        }
        opt(
            s,
            "winbind use default domain",
            yes_no(member.use_default_domain),
        );
        opt(s, "winbind separator", member.separator);
        opt(s, "id source", member.id_source.name());
        if member.sssd().is_some() {
            let (lo, hi) = member.sssd_range;
            opt(s, "sssd id range", format!("{lo}-{hi}"));
        }
        let _ = writeln!(
            s,
            "\t# domain SIDs get their Unix ids from: {}",
            member.id_source_in_use()
        );
    }
    let _ = match g.keytab() {
        Some(p) => writeln!(s, "\t# Kerberos: on, keytab {}", p.display()),
        None => writeln!(s, "\t# Kerberos: off (no keytab configured)"),
    };
    let control = control_socket
        .as_ref()
        .map_or_else(|| "no".to_string(), |p| p.display().to_string());
    opt(s, "control socket", control);
    match metrics_listen {
        Some(a) => opt(s, "metrics listen", a),
        None => opt(s, "metrics listen", "no"),
    }
    if let Some(group) = control_group {
        opt(s, "control group", group);
    } else {
        s.push_str("\t# control group = (none: root and the server's account only)\n");
    }
    opt(s, "max connections", max_connections);
    opt(s, "deadtime", deadtime_minutes);
    opt(s, "handshake timeout", handshake_timeout_secs);
    match failed_logon_backoff {
        0 => opt(s, "failed logon backoff", "no"),
        n => opt(s, "failed logon backoff", n),
    }
    render_cluster(s, cluster);
    opt(s, "send timeout", send_timeout_secs);
    opt(s, "durable handle timeout", durable_handle_timeout_secs);
    opt(s, "smb2 max read", smb2_max_read);
    opt(s, "smb2 max write", smb2_max_write);
    opt(s, "smb2 max trans", smb2_max_trans);
    opt(
        s,
        "smb2 disable lock sequence checking",
        yes_no(*disable_lock_sequence_checking),
    );
    let dl = smb3_directory_leases.map_or("auto", yes_no);
    opt(s, "smb3 directory leases", dl);
    opt(s, "smb3 unix extensions", yes_no(*smb3_unix_extensions));
    opt(s, "use sendfile", yes_no(*use_sendfile));
    let zc = match zerocopy_send {
        ZerocopySend::No => "no",
        ZerocopySend::Auto => "auto",
        ZerocopySend::Yes => "yes",
    };
    opt(s, "zerocopy send", zc);
    opt(s, "multishot receive", yes_no(*multishot_receive));
    let pin = match pin_cpus {
        PinCpus::No => "no",
        PinCpus::Auto => "auto",
        PinCpus::Yes => "yes",
    };
    opt(s, "pin cpus", pin);
    opt(s, "kernel change notify", yes_no(*kernel_change_notify));
    opt(s, "multicast dns register", yes_no(*multicast_dns_register));
    opt(s, "wsd", yes_no(*wsd));
    opt(s, "log level", log_level);
}

fn render_share(s: &mut String, share: &ShareConfig, global_encrypt: EncryptPolicy) {
    let _ = writeln!(s, "[{}]", share.name);
    opt(s, "path", share.path.display());
    opt(s, "comment", &share.comment);
    opt(s, "read only", yes_no(share.read_only));
    opt(s, "guest ok", yes_no(share.guest_ok));
    opt(s, "browseable", yes_no(share.browseable));
    render_rules(s, &share.rules);
    let mut vfs = Vec::new();
    if share.fruit.is_some() {
        vfs.push("fruit");
    }
    if share.streams {
        vfs.push("streams_xattr");
    }
    if share.acl_xattr {
        vfs.push("acl_xattr");
    }
    if share.shadow.is_some() {
        vfs.push("shadow_copy2");
    }
    opt(s, "vfs objects", vfs.join(" "));
    opt(s, "durable handles", yes_no(share.durable_handles));
    opt(
        s,
        "continuous availability",
        yes_no(share.continuous_availability),
    );
    opt(s, "change notify", yes_no(share.change_notify));
    opt(s, "posix locking", yes_no(share.posix_locking));
    let strict = share.strict_locking.map_or("Auto", yes_no);
    opt(s, "strict locking", strict);
    let offload = share.fs_offload.map_or("Auto", yes_no);
    opt(s, "fs calls off io thread", offload);
    opt(
        s,
        "smb3 unix extensions",
        yes_no(share.smb3_unix_extensions),
    );
    opt(s, "compress data", yes_no(share.compress_data));
    match share.smb_encrypt {
        Some(p) => opt(s, "smb encrypt", encrypt(p)),
        // Shown, as a comment so that the output keeps the share following [global].
        None => {
            let _ = writeln!(
                s,
                "\t# smb encrypt = {} (from [global]'s server smb encrypt)",
                encrypt(global_encrypt)
            );
        }
    }
    if let Some(f) = &share.fruit {
        render_fruit(s, f);
    }
    if let Some(sc) = &share.shadow {
        render_shadow(s, sc);
    }
}

fn render_shadow(s: &mut String, sc: &ShadowCopy) {
    match &sc.base {
        // Where the snapshots were found, and the share's root in each.
        Some(b) => {
            opt(s, "shadow:snapdir", b.dir.display());
            opt(s, "shadow:snapsharepath", b.within.to_slash_path());
        }
        None => opt(s, "shadow:snapdir", sc.snapdir.to_slash_path()),
    }
    opt(s, "shadow:format", sc.format.as_str());
    let sort = match sc.sort {
        SnapSort::Desc => "desc",
        SnapSort::Asc => "asc",
        SnapSort::Unsorted => "none",
    };
    opt(s, "shadow:sort", sort);
    opt(s, "shadow:localtime", yes_no(sc.localtime.is_some()));
    opt(s, "shadow:snapdirseverywhere", yes_no(sc.everywhere));
    opt(s, "shadow:crossmountpoints", yes_no(sc.crossmountpoints));
    for o in &sc.outer {
        // snapdirseverywhere: a snapshot directory above the share's root, found at start.
        let _ = writeln!(
            s,
            "\t# snapshots above the share: {} (the share at '{}')",
            o.dir.display(),
            o.within.to_slash_path()
        );
    }
    if let Some(p) = &sc.prefix {
        opt(s, "shadow:snapprefix", p.as_str());
        opt(s, "shadow:delimiter", &sc.delimiter);
    }
}

fn render_rules(s: &mut String, r: &ShareRules) {
    opt(s, "valid users", list(&r.valid_users));
    opt(s, "invalid users", list(&r.invalid_users));
    opt(s, "read list", list(&r.read_list));
    opt(s, "write list", list(&r.write_list));
    opt(s, "admin users", list(&r.admin_users));
    // The parser takes no empty name for these; an unset one is shown as a comment.
    for (key, value) in [
        ("force user", &r.force_user),
        ("force group", &r.force_group),
    ] {
        match value {
            Some(name) => opt(s, key, name),
            None => {
                let _ = writeln!(s, "\t# {key} = (not set)");
            }
        }
    }
    opt(s, "create mask", format_args!("{:04o}", r.create_mask));
    opt(
        s,
        "directory mask",
        format_args!("{:04o}", r.directory_mask),
    );
    opt(
        s,
        "force create mode",
        format_args!("{:04o}", r.force_create_mode),
    );
    opt(
        s,
        "force directory mode",
        format_args!("{:04o}", r.force_directory_mode),
    );
    opt(s, "inherit permissions", yes_no(r.inherit_permissions));
    opt(s, "inherit acls", yes_no(r.inherit_acls));
    let owner = match r.inherit_owner {
        InheritOwner::No => "no",
        InheritOwner::WindowsAndUnix => "windows and unix",
        InheritOwner::UnixOnly => "unix only",
    };
    opt(s, "inherit owner", owner);
    opt(s, "hide unreadable", yes_no(r.hide_unreadable));
}

fn render_fruit(s: &mut String, f: &Fruit) {
    opt(s, "fruit:aapl", yes_no(f.aapl));
    opt(s, "fruit:model", &f.model);
    opt(s, "fruit:nfs_aces", yes_no(f.nfs_aces));
    opt(s, "fruit:copyfile", yes_no(f.copyfile));
    opt(s, "fruit:time machine", yes_no(f.time_machine));
    opt(s, "fruit:time machine max size", f.time_machine_max_size);
    opt(s, "fruit:zero_file_id", yes_no(f.zero_file_id));
    let metadata = match f.metadata {
        Metadata::Netatalk => "netatalk",
        Metadata::Stream => "stream",
    };
    opt(s, "fruit:metadata", metadata);
    let resource = match f.resource {
        Resource::File => "file",
        Resource::Xattr => "xattr",
        Resource::Stream => "stream",
    };
    opt(s, "fruit:resource", resource);
    opt(s, "fruit:veto_appledouble", yes_no(f.veto_appledouble));
    opt(s, "fruit:posix_rename", yes_no(f.posix_rename));
}

/// The `cluster …` options, or a comment saying the server is not clustered.
fn render_cluster(s: &mut String, c: &crate::config::ClusterOptions) {
    let crate::config::ClusterOptions {
        name,
        node,
        address,
        etcd,
        secret_file,
        filesystem,
        takeover_command,
        witness_off,
        witness_anonymous,
        witness_port,
        endpoint_mapper_port,
        ring_calls_off,
        lease_ttl: _,
    } = c;
    let Some(name) = name else {
        s.push_str("\t# cluster name = (none: a single server)\n");
        return;
    };
    opt(s, "cluster name", name);
    opt(s, "cluster node", node);
    if let Some(a) = address {
        opt(s, "cluster address", a);
    }
    opt(s, "cluster etcd", etcd.join(", "));
    if let Some(f) = secret_file {
        opt(s, "cluster secret file", f.display());
    }
    if let Some(f) = filesystem {
        opt(s, "cluster filesystem", f.display());
    }
    if let Some(f) = takeover_command {
        opt(s, "cluster takeover command", f.display());
    }
    opt(s, "cluster lease ttl", c.lease_ttl_or_default().as_secs());
    opt(s, "cluster witness", yes_no(!witness_off));
    opt(s, "cluster witness anonymous", yes_no(*witness_anonymous));
    opt(
        s,
        "cluster witness port",
        witness_port.unwrap_or(crate::config::WITNESS_PORT),
    );
    opt(
        s,
        "cluster endpoint mapper port",
        endpoint_mapper_port.unwrap_or(135),
    );
    // Hidden (for measuring): shown only when set away from its default.
    if *ring_calls_off {
        opt(s, "cluster ring calls", "no");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_file_ringshares_own_configuration_wins_over_sambas() {
        let both = choose_config_file(|_| true);
        assert_eq!(both, Some(PathBuf::from("/etc/ringshare/smb.conf")));
        let samba_only = choose_config_file(|p| p.starts_with("/etc/samba"));
        assert_eq!(samba_only, Some(PathBuf::from("/etc/samba/smb.conf")));
        assert_eq!(choose_config_file(|_| false), None);
    }

    #[test]
    fn lists_quote_names_with_blanks_so_they_read_back_as_one() {
        let names = ["alice".to_string(), "Domain Users".to_string()];
        assert_eq!(list(&names), "alice \"Domain Users\"");
    }
}
