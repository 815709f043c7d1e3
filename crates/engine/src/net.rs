//! Socket set-up helpers. Sockets stay blocking: io_uring polls them itself,
//! and a blocking socket is what lets a RECV or SEND wait in the kernel
//! instead of failing with `EAGAIN`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::{self as rnet, sockopt, AddressFamily, SocketFlags, SocketType};

/// A TCP listener bound to `addr` with `SO_REUSEADDR` and `SO_REUSEPORT`, so
/// that every ring can own a listener on the same port and the kernel spreads
/// incoming connections across them. IPv6 listeners are v6-only.
pub fn listen_reuseport(addr: SocketAddr, backlog: i32) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rnet::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    sockopt::set_socket_reuseport(&fd, true)?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rnet::bind(&fd, &addr)?;
    rnet::listen(&fd, backlog)?;
    Ok(fd)
}

/// The address a socket is bound to (e.g. to learn the port after binding port 0).
pub fn local_addr(fd: impl AsFd) -> io::Result<SocketAddr> {
    let any = rnet::getsockname(fd)?;
    SocketAddr::try_from(any).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "socket is not an IPv4/IPv6 socket",
        )
    })
}

/// Sets `TCP_NODELAY` (disables Nagle): responses leave at once.
pub fn set_nodelay(fd: impl AsFd, nodelay: bool) -> io::Result<()> {
    Ok(sockopt::set_tcp_nodelay(fd, nodelay)?)
}

/// Sets `SO_SNDBUF` / `SO_RCVBUF` when given (the kernel doubles the value and
/// caps it at `net.core.wmem_max` / `rmem_max`).
pub fn set_socket_buffers(
    fd: impl AsFd,
    send_size: Option<usize>,
    recv_size: Option<usize>,
) -> io::Result<()> {
    let fd = fd.as_fd();
    if let Some(size) = send_size {
        sockopt::set_socket_send_buffer_size(fd, size)?;
    }
    if let Some(size) = recv_size {
        sockopt::set_socket_recv_buffer_size(fd, size)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpStream};

    #[test]
    fn two_listeners_share_one_port() {
        let first = listen_reuseport((Ipv4Addr::LOCALHOST, 0).into(), 16).unwrap();
        let addr = local_addr(&first).unwrap();
        let second = listen_reuseport(addr, 16).unwrap();
        assert_eq!(local_addr(&second).unwrap(), addr);
        let stream = TcpStream::connect(addr).unwrap();
        set_nodelay(&stream, true).unwrap();
        set_socket_buffers(&stream, Some(64 * 1024), Some(64 * 1024)).unwrap();
        assert!(stream.nodelay().unwrap());
    }
}
