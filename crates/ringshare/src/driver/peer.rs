//! Who is at the other end of a connection.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;

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
