//! Who is at the other end of a connection.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use ringshare_core::loglimit::LogKind;
use ringshare_core::peers::PeerIp;
use ringshare_core::ServerState;

/// Whether the connection stays within this host: the peer is a loopback
/// address, or has the very address this end has (a connection to one of
/// the host's own addresses goes through the loopback device too).
pub(super) fn is_local(fd: &OwnedFd) -> bool {
    let local = rustix::net::getsockname(fd)
        .ok()
        .and_then(|a| SocketAddr::try_from(a).ok());
    match (peer_addr(fd), local) {
        (Some(p), Some(l)) => p.ip().is_loopback() || p.ip() == l.ip(),
        _ => false,
    }
}

fn peer_addr(fd: &OwnedFd) -> Option<SocketAddr> {
    let addr = rustix::net::getpeername(fd).ok().flatten()?;
    SocketAddr::try_from(addr).ok()
}

pub(super) fn peer_name(fd: &OwnedFd) -> String {
    peer_addr(fd).map_or_else(|| "unknown".to_string(), |a| a.to_string())
}

/// A connection refused at accept (`max connections`): one warning, within
/// the peer's log budget ([`ringshare_core::loglimit`]).
pub(super) fn refused(server: &ServerState, fd: &OwnedFd, max: usize, now_ms: u64) {
    let ip = peer_addr(fd).map(|a| a.ip().to_canonical());
    if server.log_admit(ip, LogKind::RefusedConnection, now_ms) {
        tracing::warn!(
            "refusing a connection from {}: max connections ({max}) reached",
            PeerIp(ip)
        );
    }
}

/// A QUIC handshake the server's TLS refused (a client certificate refused
/// or missing, another ALPN): one line, within the peer's log budget.
pub(super) fn quic_refused(server: &ServerState, remote: SocketAddr, reason: &str, now_ms: u64) {
    let ip = Some(remote.ip().to_canonical());
    if server.log_admit(ip, LogKind::RefusedConnection, now_ms) {
        tracing::warn!("refusing a connection from {remote} over QUIC: {reason}");
    }
}
