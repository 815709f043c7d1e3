//! UDP with segmentation offload, as crates/engine/src/udp.rs does it for the quinn-proto pair:
//! receive with `UDP_GRO` (several datagrams of one sender in one buffer, their size in a
//! control message), send a batch of equal-sized datagrams in one `sendmsg` with `UDP_SEGMENT`.
//! Non-blocking; a batch the socket will not take is dropped (QUIC resends), as there.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
const CMSG_ROOM: usize = 64;

/// The largest buffer one receive takes (several datagrams with `UDP_GRO`).
pub const DATAGRAM_MAX: usize = 65_535;
/// The largest IPv4 UDP payload, and so the most one `UDP_SEGMENT` send may carry.
pub const SEND_MAX: usize = 65_507;

#[repr(C, align(8))]
struct Cmsgs([u8; CMSG_ROOM]);

/// A non-blocking IPv4 UDP socket on `addr` with `UDP_GRO` on (when the kernel has it).
pub fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads size_of::<c_int>() bytes from a live local.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_UDP,
            UDP_GRO,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(s)
}

/// Receives one datagram or several coalesced ones into `buf`; `None` when nothing waits.
/// Returns the length, the sender and the size of each datagram in the buffer.
pub fn recv_gro(s: &UdpSocket, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr, usize)>> {
    // SAFETY: all-zero is a valid sockaddr_in and msghdr.
    let mut from: libc::sockaddr_in = unsafe { zeroed() };
    let mut cmsgs = Cmsgs([0; CMSG_ROOM]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsgs.0.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM as _;
    // SAFETY: every pointer in `msg` points into live locals or `buf` with their lengths.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(None),
            _ => Err(e),
        };
    }
    let n = n as usize;
    let mut segment = n;
    // SAFETY: recvmsg filled msg_control/msg_controllen; a SOL_UDP/UDP_GRO message holds a c_int.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                if v > 0 {
                    segment = v as usize;
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let from = SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
        u16::from_be(from.sin_port),
    ));
    Ok(Some((n, from, segment.max(1))))
}

fn send_gso(
    s: &UdpSocket,
    buf: &[u8],
    to: SocketAddr,
    segment: Option<usize>,
) -> io::Result<usize> {
    let SocketAddr::V4(v4) = to else {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    };
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut addr: libc::sockaddr_in = unsafe { zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = v4.port().to_be();
    addr.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
    let mut cmsgs = Cmsgs([0; CMSG_ROOM]);
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(seg) = segment.filter(|&g| g > 0 && g < buf.len()) {
        msg.msg_control = cmsgs.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure computation; the header and its u16 lie inside `cmsgs`.
        unsafe {
            msg.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg as u16);
        }
    }
    // SAFETY: every pointer in `msg` points into live locals or `buf`; the kernel only reads.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sends `buf` as datagrams of `segment` bytes (the last may be shorter) in one call while
/// `*gso` holds; returns how many datagrams the socket did not take.
pub fn send_batch(
    s: &UdpSocket,
    buf: &[u8],
    to: SocketAddr,
    segment: usize,
    gso: &mut bool,
) -> u64 {
    let seg = segment.max(1);
    if *gso && seg < buf.len() {
        match send_gso(s, buf, to, Some(seg)) {
            Ok(_) => return 0,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => *gso = false,
            Err(_) => return buf.len().div_ceil(seg) as u64,
        }
    }
    buf.chunks(seg)
        .filter(|d| send_gso(s, d, to, None).is_err())
        .count() as u64
}

/// Waits until `s` is readable or `timeout` has passed (`None`: no timer), in ppoll(2) as the
/// quinn-proto pair waits in poll(2) with a timespec.
pub fn wait(s: &UdpSocket, timeout: Option<std::time::Duration>) {
    let mut fd = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: one live pollfd; `tp` is null or points to a live timespec.
    unsafe { libc::ppoll(&mut fd, 1, tp, std::ptr::null()) };
}
