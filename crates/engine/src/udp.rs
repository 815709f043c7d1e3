//! UDP with segmentation offload (SMB over QUIC): receive with `UDP_GRO`
//! (the kernel hands several datagrams of one sender as one buffer, their
//! size in a control message) and send with `UDP_SEGMENT` (one `sendmsg`
//! carries a batch that the kernel, or the NIC, cuts into datagrams of one
//! size). Both are non-blocking calls made after the ring said the socket
//! is ready; without the options they read and send one datagram at a time.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};

/// `UDP_SEGMENT` and `UDP_GRO` (linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Room for one `c_int` control message (and then some).
const CMSG_ROOM: usize = 64;

/// Asks the kernel to coalesce received datagrams (`UDP_GRO`). An error
/// means it cannot: datagrams then come one at a time, as before.
pub fn enable_gro(fd: impl AsFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads size_of::<c_int>() bytes from `&on`, a live
    // local; the fd is borrowed for the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_UDP,
            UDP_GRO,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A control-message buffer aligned as `cmsghdr` wants.
#[repr(C, align(8))]
struct Cmsgs([u8; CMSG_ROOM]);

/// What one receive brought: bytes, sender, and the size of each datagram
/// in it when the kernel coalesced several (`UDP_GRO`; the last may be
/// shorter).
pub type Received = (usize, SocketAddr, Option<usize>);

/// Receives one datagram, or several coalesced (`UDP_GRO`), into `buf`
/// without waiting; `None` when nothing is waiting.
pub fn recv_gro(fd: impl AsFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    // SAFETY: all-zero is a valid sockaddr_storage and msghdr (null
    // pointers, zero lengths).
    let mut from: libc::sockaddr_storage = unsafe { zeroed() };
    let mut cmsgs = Cmsgs([0; CMSG_ROOM]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsgs.0.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM as _;
    // SAFETY: every pointer in `msg` points into live locals or `buf`, with
    // the lengths given; the kernel writes at most those lengths.
    let n = unsafe { libc::recvmsg(fd.as_fd().as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(None),
            _ => Err(e),
        };
    }
    let Some(sender) = socket_addr(&from) else {
        return Ok(None);
    };
    let mut segment = None;
    // SAFETY: `msg` was filled by recvmsg: msg_control and msg_controllen
    // describe the control messages it wrote into `cmsgs`; CMSG_FIRSTHDR and
    // CMSG_NXTHDR stay within them, and CMSG_DATA of a SOL_UDP/UDP_GRO
    // message holds one c_int (read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                segment = usize::try_from(v).ok().filter(|&s| s > 0);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Some((n as usize, sender, segment)))
}

/// The largest UDP payload one receive takes: QUIC packets are at most
/// ~1,500 bytes, but with `UDP_GRO` one receive brings several.
pub const DATAGRAM_MAX: usize = 65_535;
/// Receives taken from a socket per readiness ([`recv_each`]'s `max`), before
/// the rest of the loop gets a turn.
pub const RECEIVES_PER_POLL: usize = 1024;
/// Datagrams of one connection sent in one `sendmsg` (`UDP_SEGMENT`): 32 of
/// QUIC's 1,452 bytes stay under the 64 KiB a send may carry.
pub const GSO_SEGMENTS: usize = 32;

/// How many datagrams a batch for [`send_batch`] may hold: [`GSO_SEGMENTS`]
/// while the kernel takes `UDP_SEGMENT` batches (`gso`), else one.
pub fn batch_len(gso: bool) -> usize {
    if gso {
        GSO_SEGMENTS
    } else {
        1
    }
}

/// Takes what waits on `fd`, at most `max` receives into `buf` (each one
/// datagram, or several of one sender coalesced by `UDP_GRO`), and hands
/// each datagram to `each` with its sender; stops early when nothing is
/// left. A receive error (an ICMP error for an earlier send, reported
/// here) is passed over. Returns how many receives failed so.
pub fn recv_each(
    fd: impl AsFd,
    buf: &mut [u8],
    max: usize,
    mut each: impl FnMut(SocketAddr, &[u8]),
) -> usize {
    let mut errors = 0;
    for _ in 0..max {
        match recv_gro(&fd, buf) {
            Ok(Some((n, from, segment))) => {
                for d in buf[..n].chunks(segment.unwrap_or(n).max(1)) {
                    each(from, d);
                }
            }
            Ok(None) => break,
            Err(_) => errors += 1,
        }
    }
    errors
}

/// Sends `buf` to `to` without waiting: as datagrams of `segment` bytes
/// each (the last may be shorter) in one call (`UDP_SEGMENT`) when
/// `segment` is given and shorter than `buf`, else as one datagram.
pub fn send_gso(
    fd: impl AsFd,
    buf: &[u8],
    to: SocketAddr,
    segment: Option<usize>,
) -> io::Result<usize> {
    let (addr, addr_len) = sockaddr(to);
    let mut cmsgs = Cmsgs([0; CMSG_ROOM]);
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&addr as *const libc::sockaddr_storage as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = addr_len;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(seg) = segment.filter(|&s| s > 0 && s < buf.len()) {
        let seg = u16::try_from(seg).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        msg.msg_control = cmsgs.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure computation.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        // SAFETY: `cmsgs` has CMSG_ROOM (64) bytes, more than CMSG_SPACE(2);
        // the first header and its data lie inside it, and the u16 is
        // written unaligned.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg);
        }
    }
    // SAFETY: every pointer in `msg` points into live locals or `buf` with
    // the lengths given; the kernel only reads them.
    let n = unsafe { libc::sendmsg(fd.as_fd().as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sends a batch of datagrams of `segment` bytes (the last may be shorter)
/// in one [`send_gso`] call while `*gso` holds. Once the kernel refuses
/// such a send (`EIO`, `EINVAL`: no segmentation offload) `*gso` turns
/// false, and this batch and later ones go datagram by datagram. Returns
/// how many datagrams were not sent (the socket was full: QUIC resends).
pub fn send_batch(
    fd: impl AsFd,
    buf: &[u8],
    to: SocketAddr,
    segment: Option<usize>,
    gso: &mut bool,
) -> u64 {
    let seg = segment.unwrap_or(buf.len()).max(1);
    if *gso && seg < buf.len() {
        match send_gso(&fd, buf, to, Some(seg)) {
            Ok(_) => return 0,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => *gso = false,
            Err(_) => return buf.len().div_ceil(seg) as u64,
        }
    }
    buf.chunks(seg)
        .filter(|d| send_gso(&fd, d, to, None).is_err())
        .count() as u64
}

fn socket_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which
            // it is large and aligned enough for.
            let a = unsafe { &*(s as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a
            // sockaddr_in; the reference lives only in this arm.
            let sin =
                unsafe { &mut *(&mut s as *mut libc::sockaddr_storage as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            (s, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 =
                unsafe { &mut *(&mut s as *mut libc::sockaddr_storage as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_scope_id = v6.scope_id();
            (s, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::udp_bind;

    #[test]
    fn a_gso_batch_arrives_as_its_datagrams_or_coalesced_with_their_size() {
        let rx = udp_bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let tx = udp_bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = crate::net::local_addr(&rx).unwrap();
        let from = crate::net::local_addr(&tx).unwrap();
        let batch: Vec<u8> = (0..1200 * 3 + 500).map(|i| (i % 251) as u8).collect();
        assert_eq!(send_gso(&tx, &batch, to, Some(1200)).unwrap(), batch.len());
        // Without GRO: the four datagrams one by one.
        let mut buf = vec![0; 65_535];
        let mut got = Vec::new();
        while let Some((n, sender, seg)) = recv_gro(&rx, &mut buf).unwrap() {
            assert_eq!((sender, seg), (from, None));
            got.push(buf[..n].to_vec());
        }
        let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1200, 1200, 1200, 500]);
        assert_eq!(got.concat(), batch);
        // With GRO: fewer receives, each saying the datagrams' size.
        enable_gro(&rx).unwrap();
        send_gso(&tx, &batch, to, Some(1200)).unwrap();
        let mut all = Vec::new();
        while let Some((n, _, seg)) = recv_gro(&rx, &mut buf).unwrap() {
            if n > 1200 {
                assert_eq!(seg, Some(1200));
            }
            all.extend_from_slice(&buf[..n]);
        }
        assert_eq!(all, batch);
        // One datagram without a segment size.
        send_gso(&tx, b"single", to, None).unwrap();
        let (n, _, _) = recv_gro(&rx, &mut buf).unwrap().unwrap();
        assert_eq!(&buf[..n], b"single");
    }
}
