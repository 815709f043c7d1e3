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
    let fd = tcp_socket(addr, true)?;
    rnet::listen(&fd, backlog)?;
    Ok(fd)
}

/// A TCP socket bound to `addr` with `SO_REUSEADDR` (and `SO_REUSEPORT` with `reuseport`);
/// IPv6 ones v6-only.
fn tcp_socket(addr: SocketAddr, reuseport: bool) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rnet::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if reuseport {
        sockopt::set_socket_reuseport(&fd, true)?;
    }
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rnet::bind(&fd, &addr)?;
    Ok(fd)
}

/// Ok when no socket is bound to `addr` (TCP) yet; else an `AddrInUse` error that says
/// another server listens there. A bind without `SO_REUSEPORT` tells: [`listen_reuseport`]
/// alone would not, since a listener of another server of the same user with `SO_REUSEPORT`
/// (another ringshare) lets it join its group, and the kernel then spreads the clients over
/// both servers. `SO_REUSEADDR` is set, so that connections of an earlier server still in
/// TIME_WAIT do not count. Port 0 is always free; when the probe itself fails otherwise (no
/// permission for the port) Ok is returned too, and the real bind reports it.
pub fn tcp_port_free(addr: SocketAddr) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    free_unless_in_use(tcp_socket(addr, false).map(drop))
}

/// [`tcp_port_free`] for UDP (SMB over QUIC): a socket bound to `addr` without
/// `SO_REUSEPORT` tells whether another is there already.
pub fn udp_port_free(addr: SocketAddr) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    free_unless_in_use(udp_socket(addr, false).map(drop))
}

/// A probe's bind: the error of a port another server holds, else Ok.
fn free_unless_in_use(bound: io::Result<()>) -> io::Result<()> {
    match bound {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another server (perhaps another ringshare) listens there already",
        )),
        _ => Ok(()),
    }
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

/// Sets `SO_RCVLOWAT`: the socket polls readable only once that many bytes
/// are queued, or the peer closed (TCP also grows the receive buffer to hold
/// them, unless it was set by hand). 1 is the default. Returns the value in
/// effect: TCP caps it (at half of `tcp_rmem`'s maximum).
pub fn set_rcvlowat(fd: impl AsFd, bytes: usize) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_fd().as_raw_fd();
    let mut v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt reads `len` bytes from `&v`, a live local; the fd is
    // borrowed for the call.
    let r = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&v as *const libc::c_int).cast(),
            len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getsockopt writes at most `len` (= size_of c_int) bytes to `&mut
    // v` and the new length to `&mut len`, both live locals.
    let r = unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(v).unwrap_or(0))
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

/// One address of a network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// Interface name, e.g. `eth0`, `lo`.
    pub name: String,
    /// Interface index (`if_nametoindex`).
    pub index: u32,
    pub addr: std::net::IpAddr,
    /// Network prefix length of the address.
    pub prefix_len: u8,
    /// `IFF_UP` is set.
    pub up: bool,
    /// `IFF_LOOPBACK` is set.
    pub loopback: bool,
    /// Link speed from `/sys/class/net/NAME/speed`, when the driver reports one.
    pub speed_mbps: Option<u64>,
}

/// Every IPv4 and IPv6 address of every interface (`getifaddrs(3)`).
pub fn interface_addrs() -> io::Result<Vec<InterfaceAddr>> {
    use std::ffi::CStr;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a pointer to a list it allocates into `head`;
    // we pass a valid pointer to our local and free the list below exactly once.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a non-null node of the list getifaddrs returned, which
        // stays valid until freeifaddrs below.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose family
        // tells its real type; we read sa_family first, then the matching struct.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let netmask = ifa.ifa_netmask;
        let (addr, prefix_len) = match family {
            libc::AF_INET => {
                // SAFETY: family AF_INET means the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let prefix = if netmask.is_null() {
                    32
                } else {
                    // SAFETY: the netmask of an AF_INET address is a sockaddr_in.
                    let m = unsafe { &*(netmask as *const libc::sockaddr_in) };
                    u32::from_be(m.sin_addr.s_addr).count_ones() as u8
                };
                (IpAddr::V4(ip), prefix)
            }
            libc::AF_INET6 => {
                // SAFETY: family AF_INET6 means the sockaddr is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                let prefix = if netmask.is_null() {
                    128
                } else {
                    // SAFETY: the netmask of an AF_INET6 address is a sockaddr_in6.
                    let m = unsafe { &*(netmask as *const libc::sockaddr_in6) };
                    m.sin6_addr
                        .s6_addr
                        .iter()
                        .map(|b| b.count_ones())
                        .sum::<u32>() as u8
                };
                (IpAddr::V6(ip), prefix)
            }
            _ => continue,
        };
        // SAFETY: if_nametoindex reads the NUL-terminated name, which is valid here.
        let index = unsafe { libc::if_nametoindex(ifa.ifa_name) };
        let flags = ifa.ifa_flags;
        let speed_mbps = std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|s| *s > 0)
            .map(|s| s as u64);
        out.push(InterfaceAddr {
            name,
            index,
            addr,
            prefix_len,
            up: flags & libc::IFF_UP as u32 != 0,
            loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
            speed_mbps,
        });
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once; no
    // reference into the list outlives this point (names were copied).
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod interface_tests {
    use super::*;

    #[test]
    fn lists_the_loopback_interface_with_its_address_and_prefix() {
        let all = interface_addrs().unwrap();
        let lo = all
            .iter()
            .find(|a| a.addr == std::net::IpAddr::from([127, 0, 0, 1]))
            .expect("127.0.0.1 is configured");
        assert!(lo.loopback && lo.up);
        assert_eq!(lo.prefix_len, 8);
        assert!(lo.index > 0);
    }
}

/// A non-blocking UDP socket bound to `addr` (SMB over QUIC): the ring polls
/// it, and datagrams are taken with [`crate::udp::recv_gro`] until none is left.
/// IPv6 sockets are v6-only.
pub fn udp_bind(addr: SocketAddr) -> io::Result<OwnedFd> {
    udp_socket(addr, false)
}

/// [`udp_bind`] with `SO_REUSEPORT`: one of several sockets of the same
/// address and port, one per I/O thread, among which the kernel spreads
/// senders by a hash of their addresses.
pub fn udp_bind_reuseport(addr: SocketAddr) -> io::Result<OwnedFd> {
    udp_socket(addr, true)
}

fn udp_socket(addr: SocketAddr, reuseport: bool) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rnet::socket_with(
        family,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    if reuseport {
        sockopt::set_socket_reuseport(&fd, true)?;
    }
    rnet::bind(&fd, &addr)?;
    Ok(fd)
}

/// A connected pair of Unix stream sockets: one end stands for a QUIC
/// stream where the driver expects a TCP socket.
pub fn stream_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rnet::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}
