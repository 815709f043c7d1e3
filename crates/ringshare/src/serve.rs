//! `ringshare serve`: configuration in, a running server out.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ringshare_auth::smbpasswd::SmbPasswd;
use ringshare_core::{
    Accounts, IoSizes, OpenShare, ServerConfig, ServerState, ShareDef, ShareTemplate,
    SigningPolicy as CorePolicy,
};
use ringshare_engine::{net, probe, runtime};
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{
    FileAttr, FsError, FsResult, FsStat, OpenOptions, Opened, RelPath, Share, Who,
};
use ringshare_wire::ioctl::NetworkInterfaceInfo;

use crate::accounts::NssAccounts;
use crate::config::{Config, MapToGuest, ShareConfig, SigningPolicy};
use crate::driver::{self, Shared};
use crate::users;

/// Why `serve` could not start; printed as one clear line.
#[derive(Debug)]
pub struct ServeError(pub String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(msg: impl Into<String>) -> ServeError {
    ServeError(msg.into())
}

/// The backend of a share: its directory, refusing every change when the
/// share is read-only for everyone (a `write list` can make it writable for
/// some: the core then decides per tree).
fn open_backend(path: &std::path::Path, s: &ShareConfig) -> std::io::Result<Arc<dyn Share>> {
    let read_only = s.read_only && s.rules.write_list.is_empty();
    Ok(Arc::new(PosixShare::new(path)?.with_read_only(read_only)))
}

/// The core's view of one share section.
pub(crate) fn share_def(cfg: &Config, s: &ShareConfig) -> Result<ShareDef, ServeError> {
    if let Some(f) = &s.fruit {
        if f.resource == ringshare_core::fruit::Resource::Xattr {
            tracing::warn!(
                "share [{}]: fruit:resource = xattr (Netatalk's resource fork xattr, Solaris only) \
                 is not supported: AFP_Resource is refused there; use file or stream",
                s.name
            );
        }
    }
    let (backend, template): (Arc<dyn Share>, _) = if s.templated {
        let sc = s.clone();
        let open: Arc<OpenShare> =
            Arc::new(move |path: &str| open_backend(std::path::Path::new(path), &sc));
        let template = ShareTemplate {
            path: s.path.to_string_lossy().into_owned(),
            open,
        };
        (Arc::new(Unconnected), Some(Arc::new(template)))
    } else {
        let backend = open_backend(&s.path, s).map_err(|e| {
            err(format!(
                "share [{}]: cannot open {}: {e}",
                s.name,
                s.path.display()
            ))
        })?;
        (backend, None)
    };
    Ok(ShareDef {
        name: s.name.clone(),
        comment: s.comment.clone(),
        backend,
        read_only: s.read_only,
        guest_ok: s.guest_ok,
        encrypt: s.smb_encrypt.unwrap_or(cfg.global.smb_encrypt),
        rules: s.rules.clone(),
        template,
        nt_acl_xattr: s.acl_xattr,
        durable_handles: s.durable_handles,
        continuous_availability: s.continuous_availability,
        root_key: Default::default(),
        change_notify: s.change_notify,
        posix_locking: s.posix_locking,
        strict_locking: s.strict_locking,
        fs_offload: s.fs_offload,
        smb3_unix_extensions: s.smb3_unix_extensions,
        compress_data: s.compress_data,
        streams: s.streams,
        fruit: s.fruit.clone().map(Arc::new),
        shadow: s
            .shadow
            .clone()
            .map(|sc| Arc::new(open_snapshots(sc, &s.name))),
        quota: crate::quota::source(&cfg.global, s),
    })
}

/// A share's snapshot directory outside the share (`shadow:snapdir` absolute, or at a mount
/// point above the share) opened read-only, each snapshot's view found beneath it as the
/// user. A directory that cannot be opened leaves the share without snapshots, with a log line
/// (Samba lists none either).
fn open_snapshots(
    mut sc: ringshare_core::shadow::ShadowCopy,
    share: &str,
) -> ringshare_core::shadow::ShadowCopy {
    if let Some(base) = &mut sc.base {
        match ringshare_vfs::posix::PosixShare::new(&base.dir) {
            Ok(p) => base.opened = Some(Arc::new(p.with_read_only(true))),
            Err(e) => tracing::warn!(
                share,
                dir = %base.dir.display(),
                %e,
                "the snapshot directory cannot be opened: no Previous Versions on this share"
            ),
        }
    }
    // shadow:snapdirseverywhere: those above the share's root.
    sc.outer.retain_mut(|o| match ringshare_vfs::posix::PosixShare::new(&o.dir) {
        Ok(p) => {
            o.opened = Some(Arc::new(p.with_read_only(true)));
            true
        }
        Err(e) => {
            tracing::warn!(share, dir = %o.dir.display(), %e, "a snapshot directory above the share cannot be opened: its snapshots are not looked at");
            false
        }
    });
    sc
}

/// The backend of a share made per user before a tree connect made it: it
/// refuses everything (the core never uses it).
#[derive(Debug)]
struct Unconnected;

impl Share for Unconnected {
    fn open(&self, _: &Who, _: &RelPath, _: &OpenOptions) -> FsResult<Opened> {
        Err(FsError::AccessDenied)
    }
    fn stat(&self, _: &Who, _: &RelPath) -> FsResult<FileAttr> {
        Err(FsError::AccessDenied)
    }
    fn unlink(&self, _: &Who, _: &RelPath) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }
    fn rmdir(&self, _: &Who, _: &RelPath) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }
    fn rename(&self, _: &Who, _: &RelPath, _: &RelPath, _: bool) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }
    fn statfs(&self) -> FsResult<FsStat> {
        Err(FsError::AccessDenied)
    }
    fn find_name_case_insensitive(&self, _: &Who, _: &RelPath, _: &str) -> FsResult<String> {
        Err(FsError::AccessDenied)
    }
}

/// Turn the parsed configuration into the core's view of it.
pub fn server_config(
    cfg: &Config,
    server_guid: [u8; 16],
    start_filetime: u64,
) -> Result<ServerConfig, ServeError> {
    let mut shares = Vec::new();
    for s in &cfg.shares {
        shares.push(Arc::new(share_def(cfg, s)?));
    }
    let homes = match &cfg.homes {
        Some(h) => Some(Arc::new(share_def(cfg, h)?)),
        None => None,
    };
    let g = &cfg.global;
    let signing = match g.server_signing {
        SigningPolicy::Default | SigningPolicy::Auto => CorePolicy::IfRequired,
        SigningPolicy::Desired => CorePolicy::Desired,
        SigningPolicy::Mandatory => CorePolicy::Required,
    };
    Ok(ServerConfig {
        dialect_min: g.server_min_protocol.revision(),
        dialect_max: g.server_max_protocol.revision(),
        signing,
        encrypt: g.smb_encrypt,
        server_guid,
        netbios_name: g.netbios_name.clone(),
        workgroup: g.workgroup.clone(),
        dns_name: g.netbios_name.to_lowercase(),
        map_bad_user_to_guest: g.map_to_guest == MapToGuest::BadUser,
        guest_enabled: cfg.shares.iter().any(|s| s.guest_ok),
        shares,
        start_filetime,
        handshake_timeout_ms: u64::from(g.handshake_timeout_secs) * 1000,
        durable_v1_timeout_ms: u64::from(g.durable_handle_timeout_secs) * 1000,
        idle_timeout_ms: u64::from(g.deadtime_minutes) * 60_000,
        multi_channel: g.multi_channel,
        lock_sequence_checking: !g.disable_lock_sequence_checking,
        // `auto`: on, also on a cluster node (a change through another node breaks
        // them at the directory's home: docs/cluster.md; Samba turns them off there).
        directory_leases: g.smb3_directory_leases.unwrap_or(true),
        posix_extensions: g.smb3_unix_extensions,
        compression: if g.compression {
            g.compression_algorithms.clone()
        } else {
            Vec::new()
        },
        io_sizes: IoSizes::new(g.smb2_max_read, g.smb2_max_write, g.smb2_max_trans),
        guest_account: g.guest_account.clone(),
        failed_logon_backoff: g.failed_logon_backoff,
        smb_encryption_over_quic: g.quic.smb_encryption_over_quic,
        homes,
    })
}

/// The addresses to listen on: `listen` (default 0.0.0.0:445), or, with
/// `bind interfaces only = yes`, every address named by `interfaces` (an
/// address, an address/prefix, or an interface name) on the port of the first
/// `listen` entry. IPv6 link-local addresses are skipped (they need a scope).
pub fn listen_addrs(cfg: &Config) -> Result<Vec<SocketAddr>, ServeError> {
    let g = &cfg.global;
    if !g.bind_interfaces_only || g.interfaces.is_empty() {
        return Ok(g.listen.clone());
    }
    let port = g.listen.first().map_or(445, SocketAddr::port);
    let all =
        net::interface_addrs().map_err(|e| err(format!("cannot list network interfaces: {e}")))?;
    let mut out: Vec<SocketAddr> = Vec::new();
    for entry in &g.interfaces {
        let addr_part = entry.split('/').next().unwrap_or(entry);
        let ips: Vec<std::net::IpAddr> = match addr_part.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => all
                .iter()
                .filter(|a| a.name == *entry)
                .map(|a| a.addr)
                .collect(),
        };
        if ips.is_empty() {
            return Err(err(format!(
                "interfaces: '{entry}' is neither an address nor an interface of this machine"
            )));
        }
        for ip in ips {
            let link_local =
                matches!(ip, std::net::IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
            let a = SocketAddr::new(ip, port);
            if !link_local && !out.contains(&a) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// The interfaces FSCTL_QUERY_NETWORK_INTERFACE_INFO reports: the addresses
/// we listen on when they are specific, else every up interface but loopback
/// (loopback when nothing else is up). Link speed from sysfs, 1 Gbit/s when
/// the driver reports none.
pub fn advertised_interfaces(listen: &[SocketAddr]) -> Vec<NetworkInterfaceInfo> {
    let Ok(all) = net::interface_addrs() else {
        return Vec::new();
    };
    let usable = |a: &&net::InterfaceAddr| {
        a.up && !matches!(a.addr, std::net::IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
    };
    let specific: Vec<std::net::IpAddr> = listen
        .iter()
        .map(SocketAddr::ip)
        .filter(|ip| !ip.is_unspecified())
        .collect();
    let mut chosen: Vec<&net::InterfaceAddr> = if specific.is_empty() {
        all.iter().filter(usable).filter(|a| !a.loopback).collect()
    } else {
        all.iter()
            .filter(usable)
            .filter(|a| specific.contains(&a.addr))
            .collect()
    };
    if chosen.is_empty() && specific.is_empty() {
        chosen = all.iter().filter(usable).collect();
    }
    chosen
        .into_iter()
        .map(|a| NetworkInterfaceInfo {
            if_index: a.index,
            capability: 0,
            link_speed: a.speed_mbps.map_or(1_000_000_000, |m| m * 1_000_000),
            addr: SocketAddr::new(a.addr, 0),
        })
        .collect()
}

/// The addresses clients reach this node on, as its cluster record and the
/// Witness service say them: the `listen` addresses when they are specific,
/// else those FSCTL_QUERY_NETWORK_INTERFACE_INFO reports.
fn public_ips(listen: &[SocketAddr]) -> Vec<std::net::IpAddr> {
    let mut ips: Vec<std::net::IpAddr> = listen
        .iter()
        .map(SocketAddr::ip)
        .filter(|ip| !ip.is_unspecified())
        .collect();
    if ips.is_empty() {
        ips = advertised_interfaces(listen)
            .iter()
            .map(|i| i.addr.ip())
            .collect();
    }
    ips.dedup();
    ips
}

/// Bind every listen address once, to report a clear error before threads start. An address
/// another server listens on already is refused, not shared ([`net::tcp_port_free`]).
fn bind_all(addrs: &[SocketAddr]) -> Result<Vec<OwnedFd>, ServeError> {
    // All are looked at before any is bound: one of ours must not count as another's.
    let free: Vec<_> = addrs.iter().map(|a| net::tcp_port_free(*a)).collect();
    addrs
        .iter()
        .zip(free)
        .map(|(a, free)| {
            free.and_then(|()| net::listen_reuseport(*a, 1024)).map_err(|e| {
                let hint = if a.port() == 445 {
                    " (port 445 needs root or CAP_NET_BIND_SERVICE, and must be free; choose another with --listen 127.0.0.1:4450 or `listen =` in the configuration)"
                } else {
                    " (choose another with --listen ADDR:PORT)"
                };
                err(format!("cannot listen on {a}: {e}{hint}"))
            })
        })
        .collect()
}

/// What `main` gives the server besides its configuration.
pub struct Hooks {
    /// Changes the process's log level (a reload's `log level`).
    pub set_log_level: Box<crate::reload::SetLogLevel>,
    /// Settings the command line gave, which a reload keeps.
    pub fixed: crate::reload::Fixed,
}

impl Default for Hooks {
    fn default() -> Hooks {
        Hooks {
            set_log_level: Box::new(|_| {}),
            fixed: Default::default(),
        }
    }
}

/// What the control socket answers ([`crate::control`]).
fn control_handler(
    server: Arc<ServerState>,
    reloader: Arc<crate::reload::Reloader>,
) -> Arc<crate::control::Handler> {
    use crate::status::Levels;
    Arc::new(move |request: &str| match request {
        "status" => {
            let levels = server.node.link().map(|l| Levels::of(l.as_ref()).text());
            Ok(levels.unwrap_or_default() + &crate::status::text(&server.status()))
        }
        "status json" => {
            let mut v = crate::status::json(&server.status());
            if let (Some(l), Some(o)) = (server.node.link(), v.as_object_mut()) {
                o.insert("cluster".into(), Levels::of(l.as_ref()).json());
            }
            Ok(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n")
        }
        "reload" => reloader.reload(),
        other => Err(format!(
            "unknown request '{other}' (this server knows: status, status json, reload)"
        )),
    })
}

/// Run the server until SIGINT or SIGTERM; SIGHUP reloads.
pub fn serve(
    cfg: Config,
    threads: Option<u32>,
    hooks: Hooks,
    out: &mut dyn Write,
) -> Result<(), ServeError> {
    for w in &cfg.warnings {
        tracing::warn!("{}:{}: {}", w.file.display(), w.line, w.message);
    }
    probe::probe().map_err(|e| err(format!("io_uring is not usable here: {e}")))?;
    if cfg.shares.is_empty() && cfg.homes.is_none() {
        return Err(err("no shares configured"));
    }
    let passwd_file = cfg.global.smb_passwd_file.clone();
    let guest_only = cfg.shares.iter().chain(&cfg.homes).all(|s| s.guest_ok)
        && cfg.global.map_to_guest == MapToGuest::BadUser;
    // Only the zero-configuration `serve DIR` makes a first user and shows its
    // password: a configured server (a packaged one, whose output goes to the
    // journal) starts without users, and says how to add one.
    if !guest_only && cfg.source.is_none() {
        users::ensure_first_user(&passwd_file, &cfg.global.local_realm(), out)
            .map_err(|e| err(format!("{e}")))?;
    }
    let users = SmbPasswd::load(&passwd_file)
        .map_err(|e| err(format!("{}: {e}", passwd_file.display())))?;
    if !guest_only && users.entries().is_empty() {
        let config = cfg
            .source
            .as_ref()
            .map_or_else(String::new, |f| format!(" --config {}", f.display()));
        tracing::warn!(
            "no users in {}: nobody can log on until one is added \
             (`ringshare user add NAME{config}`, then `ringshare reload{config}`)",
            passwd_file.display()
        );
    }
    let accounts = identity_mode(&cfg, out)?;
    let user_names: Vec<String> = users.entries().iter().map(|e| e.name.clone()).collect();
    let mut guid = [0u8; 16];
    getrandom::fill(&mut guid).map_err(|e| err(format!("random source: {e}")))?;
    let started = Instant::now();
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let start_ft = (unix.as_nanos() / 100) as u64 + 116_444_736_000_000_000;
    let server = ServerState::with_accounts(
        server_config(&cfg, guid, start_ft)?,
        Arc::new(users),
        accounts,
    );
    let reloader = Arc::new(crate::reload::Reloader::new(
        cfg.clone(),
        server.clone(),
        hooks.set_log_level,
        hooks.fixed,
    ));
    // Kerberos: the keytab is read before the port opens; one that cannot be read stops
    // start-up with the reason. A thread looks at the file every few seconds.
    reloader.apply_keytab(&cfg.global).map_err(err)?;
    let member = cfg.global.member.member(&cfg.global.workgroup);
    if let Some(m) = &member {
        tracing::info!(
            domain = %m.workgroup, realm = %cfg.global.realm,
            "member of an Active Directory domain: domain users log on with their tickets; \
             their Unix accounts come from NSS (winbind or sssd)"
        );
    }
    if member.is_some() {
        server
            .logons
            .set_domain_logons(crate::winbind::domain_logons(cfg.source.as_deref()));
    }
    server
        .logons
        .set_id_source(crate::winbind_ids::id_source(&cfg.global.member));
    server.logons.set_domain(member);
    // IAKerb clients' KDC requests go to the built-in KDC (`local kdc = yes`), else to the KDCs
    // krb5.conf names for the server's realm (only that realm's), from the lookup threads.
    server.logons.set_kdcs(Some(reloader.kdcs()));
    if cfg.global.keytab().is_some() {
        let r = Arc::clone(&reloader);
        std::thread::Builder::new()
            .name("keytab-watch".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(2));
                r.check_keytab();
            })
            .map_err(|e| err(format!("cannot start the keytab watcher: {e}")))?;
    }
    // Metrics listen before the SMB port does: whoever waits for the SMB
    // port (a test, a service manager) finds the metrics there too.
    let ring_metrics = cfg
        .global
        .metrics_listen
        .map(|_| Arc::new(Mutex::new(Vec::new())));
    if let (Some(addr), Some(rings)) = (cfg.global.metrics_listen, &ring_metrics) {
        let source = crate::metrics::Source {
            server: server.clone(),
            rings: rings.clone(),
        };
        crate::metrics::start(addr, source).map_err(err)?;
        let _ = writeln!(out, "ringshare: metrics on http://{addr}/metrics");
    }
    // The control socket too is there before the SMB port.
    let _control = match &cfg.global.control_socket {
        Some(path) => {
            let handler = control_handler(server.clone(), reloader.clone());
            match crate::control::start(path, cfg.global.control_group.as_deref(), handler) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(
                        "no control socket ({e}): `ringshare status` and `ringshare reload` \
                         cannot reach this server (SIGHUP still reloads); set `control socket` \
                         in [global] to a path this account can create"
                    );
                    None
                }
            }
        }
        None => None,
    };
    let listen = listen_addrs(&cfg)?;
    // QUIC's certificate is made (or read) and its UDP socket bound before
    // the TCP port opens: a client that finds the port open finds the
    // certificate on disk too.
    let threads = threads
        .map(|t| t as usize)
        .unwrap_or_else(runtime::available_cores)
        .max(1);
    let quic = crate::quic::listen(&cfg, &listen, threads)?;
    let listeners = bind_all(&listen)?;
    server.set_interfaces(advertised_interfaces(&listen));
    let cluster_node = if cfg.global.cluster.enabled() {
        on_cluster_filesystem(&cfg)?;
        let public = public_ips(&listen);
        let node = crate::cluster::start(&cfg.global.cluster, &server, started, &public)
            .map_err(|e| err(e.to_string()))?;
        let s = server.clone();
        let users = Box::new(move || s.logons.users());
        let s = server.clone();
        let keytab = Box::new(move || {
            let replay = Arc::clone(&s.logons.replay_cache);
            s.logons.kerberos().map(|k| (k, replay))
        });
        crate::witness::start(&cfg, &listen, node.membership(), users, keytab);
        Some(node)
    } else {
        None
    };

    for a in &listen {
        for s in &cfg.shares {
            let port = if a.port() == 445 {
                String::new()
            } else {
                format!(" -p {}", a.port())
            };
            let host = if a.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                a.ip().to_string()
            };
            let user = if s.guest_ok {
                "-N".to_string()
            } else {
                format!(
                    "-U {}",
                    user_names.first().map(String::as_str).unwrap_or("USER")
                )
            };
            let _ = writeln!(
                out,
                "ringshare: share [{}] ({}{}) on {a}\n  connect: smbclient //{host}/{}{port} {user}",
                s.name,
                s.path.display(),
                if s.read_only { ", read-only" } else { "" },
                s.name
            );
        }
    }
    let _ = writeln!(
        out,
        "ringshare: {threads} I/O thread(s); Ctrl-C or SIGTERM stops"
    );
    let _ = out.flush();

    let inotify = if cfg.global.kernel_change_notify {
        match crate::driver::kernel_notify::Inotify::new() {
            Ok(i) => {
                server.set_kernel_watch(i.clone());
                Some(i)
            }
            Err(e) => {
                tracing::warn!("no inotify ({e}): changes other programs make are not reported to CHANGE_NOTIFY");
                None
            }
        }
    } else {
        None
    };
    let shared = Arc::new(Shared {
        server,
        listen: listen.clone(),
        max_connections: cfg.global.max_connections as usize,
        connections: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        wakers: Mutex::new(Vec::new()),
        started,
        send_file: cfg.global.use_sendfile,
        multishot_receive: cfg.global.multishot_receive,
        zerocopy_send: cfg.global.zerocopy_send,
        keep_cpus: cfg.global.pin_cpus == crate::config::PinCpus::Auto,
        splice_chunk: splice_chunk(),
        send_stall_ms: u64::from(cfg.global.send_timeout_secs) * 1000,
        ring_metrics,
        inotify,
        lookups: driver::LookupPool::start(),
        quic,
        peers: cluster_node
            .as_ref()
            .filter(|_| !cfg.global.cluster.ring_calls_off)
            .and_then(|n| n.peers()),
        home_calls_per_peer: (8 / threads).max(2),
    });
    shared.wake_on_mail();
    install_signal_handler(shared.clone(), reloader)
        .map_err(|e| err(format!("signal handler: {e}")))?;
    // Time Machine shares announced while the server runs (dropped at the end).
    let _announced = crate::mdns::announce(&cfg);
    // WS-Discovery for Windows while the server runs (Bye when dropped at the end).
    let _discovery = crate::wsd::start(&cfg, &listen);
    let first = Mutex::new(Some(listeners));
    // The sockets are bound and listening (connections queue from here): ready for systemd.
    crate::sdnotify::ready(&format!(
        "serving {} share(s) on {}",
        cfg.shares.len(),
        listen
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let pin = cfg.global.pin_cpus == crate::config::PinCpus::Yes;
    let result = runtime::run_per_core(threads, pin, |i| {
        let l = if i == 0 {
            crate::lock(&first).take()
        } else {
            None
        };
        driver::run_worker(i, shared.clone(), l)
    });
    // What the log limits still count is said before the end.
    let now_ms = shared.started.elapsed().as_millis() as u64;
    shared.server.log_limit_flush(now_ms);
    if let Some(node) = cluster_node {
        node.leave(&shared.server);
    }
    result.map_err(|e| err(format!("I/O thread failed: {e}")))?;
    let _ = writeln!(out, "ringshare: stopped");
    Ok(())
}

/// Every share of a cluster node is on the cluster file system (file keys
/// are its inode numbers, the same on every node); a templated path is
/// checked by the administrator.
fn on_cluster_filesystem(cfg: &Config) -> Result<(), ServeError> {
    use std::os::unix::fs::MetadataExt;
    let Some(fs) = &cfg.global.cluster.filesystem else {
        return Err(err("'cluster filesystem' is not set"));
    };
    let dev = std::fs::metadata(fs)
        .map_err(|e| err(format!("cluster filesystem {}: {e}", fs.display())))?
        .dev();
    for s in &cfg.shares {
        if s.path.to_string_lossy().contains('%') {
            continue;
        }
        let d = std::fs::metadata(&s.path)
            .map_err(|e| err(format!("{}: {e}", s.path.display())))?
            .dev();
        if d != dev {
            return Err(err(format!(
                "share [{}]: {} is not on the cluster filesystem {}",
                s.name,
                s.path.display(),
                fs.display()
            )));
        }
    }
    Ok(())
}

/// Who users act as, decided at start and said once: as root, each their own
/// Unix account (the zero-configuration `serve DIR`: a user without one acts
/// as the owner of DIR); otherwise everyone as the account the server runs as.
/// The server creates files with exactly the modes the share's masks give
/// (umask 0, as Samba).
fn identity_mode(cfg: &Config, out: &mut dyn Write) -> Result<Arc<dyn Accounts>, ServeError> {
    rustix::process::umask(rustix::fs::Mode::empty());
    let me = rustix::process::geteuid();
    if !me.is_root() {
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me.as_raw()))
            .ok()
            .flatten()
            .map_or_else(|| me.as_raw().to_string(), |u| u.name);
        let _ = writeln!(
            out,
            "ringshare: running as {name} (uid {}), not root: every user acts as {name}; \
             run as root to have each user act as their own Unix account",
            me.as_raw()
        );
        tracing::warn!("not running as root: every user acts as {name}");
        return Ok(Arc::new(NssAccounts::process()));
    }
    ringshare_vfs::creds::enable().map_err(|e| err(format!("cannot act as users: {e}")))?;
    match (cfg.source.is_none(), cfg.shares.first()) {
        (true, Some(share)) => {
            let a = NssAccounts::owner_of(&share.path)
                .map_err(|e| err(format!("{}: {e}", share.path.display())))?;
            let _ = writeln!(
                out,
                "ringshare: each user acts as their own Unix account; one without (such as the \
                 first user) acts as the owner of {}",
                share.path.display()
            );
            Ok(Arc::new(a))
        }
        _ => Ok(Arc::new(NssAccounts::users())),
    }
}

fn install_signal_handler(
    shared: Arc<Shared>,
    reloader: Arc<crate::reload::Reloader>,
) -> io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("ringshare-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGHUP {
                    tracing::info!("SIGHUP: reloading the configuration");
                    // The outcome is logged either way.
                    let _ = reloader.reload();
                    continue;
                }
                tracing::info!("signal {sig}: stopping");
                crate::sdnotify::stopping();
                shared.stop();
                break;
            }
        })?;
    Ok(())
}

/// Bytes per splice for send-file READs: 1 MiB (docs/benchmarks/history.md, "Splice
/// chunk"), or `RINGSHARE_SPLICE_CHUNK` (bytes) for measuring other sizes.
fn splice_chunk() -> usize {
    std::env::var("RINGSHARE_SPLICE_CHUNK")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| (4096..=64 << 20).contains(n))
        .unwrap_or(1024 * 1024)
}
