//! `serve`'s side of SMB over QUIC: the certificate (`tls certfile` and
//! `tls keyfile`, or a self-signed one made on first start and kept beside
//! the `smb passwd file`, as Samba 4.23 makes its own), the bound UDP
//! sockets (one per I/O thread, `SO_REUSEPORT`), and the endpoints'
//! configuration (driver/quic.rs).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ringshare_engine::net;
use ringshare_quic::steer::Steering;
use ringshare_quic::{cert, Access, ClientCertificate, Identity, Limits};

use crate::config::Config;
use crate::driver::{QuicListen, QuicShared};
use crate::serve::ServeError;

fn err(msg: impl Into<String>) -> ServeError {
    ServeError(msg.into())
}

/// Where the self-signed certificate and its key are kept: a `tls`
/// directory beside the `smb passwd file` (the server's state).
pub fn self_signed_paths(cfg: &Config) -> (PathBuf, PathBuf) {
    let dir = cfg
        .global
        .smb_passwd_file
        .parent()
        .unwrap_or(Path::new("."))
        .join("tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|e| err(format!("{what} {}: {e}", path.display())))
}

/// The names a self-signed certificate is made for: the host's name, the
/// specific addresses QUIC listens on, and the loopback names.
fn names(addrs: &[SocketAddr]) -> Vec<String> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut n: Vec<String> = [host.trim().to_ascii_lowercase(), "localhost".into()]
        .into_iter()
        .filter(|h| !h.is_empty())
        .collect();
    let specific = addrs
        .iter()
        .map(SocketAddr::ip)
        .filter(|ip| !ip.is_unspecified());
    for ip in specific
        .map(|ip| ip.to_string())
        .chain(["127.0.0.1".into(), "::1".into()])
    {
        if !n.contains(&ip) {
            n.push(ip);
        }
    }
    n
}

/// The configured certificate, or the self-signed one (made now if there is none yet).
fn identity(cfg: &Config, addrs: &[SocketAddr]) -> Result<(Identity, PathBuf), ServeError> {
    let g = &cfg.global;
    let (cert_path, key_path) = match (&g.tls_certfile, &g.tls_keyfile) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (Some(_), None) | (None, Some(_)) => {
            return Err(err("'tls certfile' and 'tls keyfile' go together: set both, or neither for a self-signed certificate"));
        }
        (None, None) => {
            let (c, k) = self_signed_paths(cfg);
            if !c.exists() || !k.exists() {
                make_self_signed(&c, &k, &names(addrs))?;
            }
            (c, k)
        }
    };
    let id = Identity::from_pem(
        &read(&cert_path, "tls certfile")?,
        &read(&key_path, "tls keyfile")?,
    )
    .map_err(|e| {
        err(format!(
            "{} / {}: {e}",
            cert_path.display(),
            key_path.display()
        ))
    })?;
    Ok((id, cert_path))
}

fn make_self_signed(cert_path: &Path, key_path: &Path, names: &[String]) -> Result<(), ServeError> {
    let (c, k) = cert::self_signed(names).map_err(err)?;
    if let Some(dir) = cert_path.parent() {
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|e| err(format!("{}: {e}", dir.display())))?;
    }
    let write = |path: &Path, text: &str, mode: u32| {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| err(format!("{}: {e}", path.display())))
    };
    write(key_path, &k, 0o600)?;
    write(cert_path, &c, 0o644)?;
    tracing::info!(
        "made a self-signed certificate for SMB over QUIC: {} (names: {})",
        cert_path.display(),
        names.join(", ")
    );
    Ok(())
}

/// What client certificates must be (`quic client certificate`, its lists,
/// and the CAs of `tls cafile`).
fn access(cfg: &Config) -> Result<Access, ServeError> {
    let q = &cfg.global.quic;
    let roots = match &cfg.global.tls_cafile {
        Some(ca) => cert::certificates_from_pem(&read(ca, "tls cafile")?)
            .map_err(|e| err(format!("tls cafile {}: {e}", ca.display())))?,
        None => Vec::new(),
    };
    if q.client_certificate == ClientCertificate::No && !(q.allow.is_empty() && q.deny.is_empty()) {
        tracing::warn!("'quic client certificate allow' and 'deny' apply only with 'quic client certificate = optional' or 'required'");
    }
    if q.client_certificate != ClientCertificate::No {
        tracing::info!(
            "SMB over QUIC: client certificates {} (CAs of tls cafile: {}; allow entries: {}, deny entries: {})",
            q.client_certificate.name(),
            roots.len(),
            q.allow.len(),
            q.deny.len()
        );
    }
    Ok(Access {
        mode: q.client_certificate,
        roots,
        allow: q.allow.clone(),
        deny: q.deny.clone(),
    })
}

/// SMB over QUIC as the configuration asks (`server smb transports`):
/// the certificate loaded or made, and for each of `threads` I/O threads a
/// UDP socket on each address TCP listens on (their IPs, the QUIC port);
/// `None` when QUIC is off.
pub fn listen(
    cfg: &Config,
    listen: &[SocketAddr],
    threads: usize,
) -> Result<Option<QuicShared>, ServeError> {
    let Some(port) = cfg.global.quic_port else {
        return Ok(None);
    };
    let addrs = quic_addrs(listen, port);
    let (id, cert_path) = identity(cfg, &addrs)?;
    let access = access(cfg)?;
    let fingerprint = id.fingerprint();
    let limits = Limits::default().per_thread(threads);
    let config = ringshare_quic::server_config(id, &limits, access).map_err(err)?;
    let mut per_thread: Vec<Vec<(Option<IpAddr>, OwnedFd)>> =
        (0..threads.max(1)).map(|_| Vec::new()).collect();
    let mut bound_addrs = Vec::new();
    for addr in addrs {
        let (bound, sockets) = bind(addr, threads)?;
        let local = (!bound.ip().is_unspecified()).then_some(bound.ip());
        for (mine, socket) in per_thread.iter_mut().zip(sockets) {
            mine.push((local, socket));
        }
        bound_addrs.push(bound.to_string());
    }
    tracing::info!(
        "SMB over QUIC on udp {}; certificate {} SHA-256 {fingerprint}",
        bound_addrs.join(" "),
        cert_path.display()
    );
    let steering = Steering::new(threads);
    let listens = per_thread
        .into_iter()
        .enumerate()
        .map(|(i, sockets)| QuicListen {
            sockets,
            config: config.clone(),
            limits: limits.clone(),
            endpoint: steering.endpoint_config(i),
        })
        .collect();
    Ok(Some(QuicShared::new(listens, steering)))
}

/// The addresses QUIC listens on: each IP TCP listens on, once, with the
/// QUIC port (an unspecified IP of a family covers that family's others).
fn quic_addrs(listen: &[SocketAddr], port: u16) -> Vec<SocketAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in listen.iter().map(SocketAddr::ip) {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if ips.is_empty() {
        ips.push(Ipv4Addr::UNSPECIFIED.into());
    }
    let covered = |ip: &IpAddr| {
        !ip.is_unspecified()
            && ips
                .iter()
                .any(|o| o.is_unspecified() && o.is_ipv4() == ip.is_ipv4())
    };
    ips.iter()
        .filter(|ip| !covered(ip))
        .map(|ip| SocketAddr::new(*ip, port))
        .collect()
}

/// `threads` UDP sockets on `addr`, one `SO_REUSEPORT` group (all bound
/// before any datagram is read, so the kernel's spread does not change),
/// and the address they were bound to (port 0: the one the first got).
fn bind(addr: SocketAddr, threads: usize) -> Result<(SocketAddr, Vec<OwnedFd>), ServeError> {
    let refused = |e: std::io::Error| {
        err(format!(
            "cannot listen for QUIC on udp {addr}: {e} (port 443 needs root or CAP_NET_BIND_SERVICE; choose another with `server smb transports = tcp, quic:PORT`)"
        ))
    };
    // A port another server's sockets hold is refused, not shared.
    net::udp_port_free(addr).map_err(refused)?;
    let first = net::udp_bind_reuseport(addr).map_err(refused)?;
    let bound = match rustix::net::getsockname(&first).map(SocketAddr::try_from) {
        Ok(Ok(a)) => a,
        _ => addr,
    };
    let mut all = vec![first];
    for _ in 1..threads.max(1) {
        all.push(net::udp_bind_reuseport(bound).map_err(refused)?);
    }
    Ok((bound, all))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn quic_listens_on_each_address_tcp_listens_on_once() {
        let got = quic_addrs(
            &[a("10.0.0.1:445"), a("10.0.0.2:445"), a("10.0.0.1:4445")],
            443,
        );
        assert_eq!(got, vec![a("10.0.0.1:443"), a("10.0.0.2:443")]);
        // An unspecified address covers the specific ones of its family only.
        let got = quic_addrs(&[a("0.0.0.0:445"), a("10.0.0.1:445"), a("[::1]:445")], 443);
        assert_eq!(got, vec![a("0.0.0.0:443"), a("[::1]:443")]);
        assert_eq!(quic_addrs(&[], 443), vec![a("0.0.0.0:443")]);
    }
}
