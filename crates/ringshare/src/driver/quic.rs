//! SMB over QUIC on the ring: the UDP socket, the QUIC endpoint
//! (crates/quic, sans-I/O) and, for each connection's SMB stream, a pair of
//! Unix stream sockets whose far end is admitted like an accepted TCP socket
//! ([`Worker::admit`]): the stream's bytes take exactly the TCP path (frames
//! cut, WRITE payloads spliced, READ data sent from the file) and the
//! connection is marked QUIC in the core. Every worker has its own UDP
//! socket on the QUIC port (`SO_REUSEPORT`: the kernel spreads clients over
//! them by their addresses) and its own endpoint; no extra thread: the
//! socket is polled by the ring and read until empty, the pair's ends are
//! received from and sent to by the ring, and QUIC's timers are part of the
//! ring's wait. A datagram that reaches another worker's socket than its
//! connection's (the client's address changed: QUIC connection migration)
//! is handed to the right worker, which its connection id names
//! (`ringshare_quic::steer`), through that worker's [`QuicMail`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ringshare_core::Transport;
use ringshare_engine::{net, udp, Completion, SharedFd, Waker};
use ringshare_quic::steer::Steering;

use super::mailbox::Mailbox;
use ringshare_quic::{ConnId, Event, ReadState, Server};

use super::{token, Worker};

pub(super) const KIND_QUIC_UDP: u64 = 7;
pub(super) const KIND_QUIC_RECV: u64 = 8;
pub(super) const KIND_QUIC_SEND: u64 = 9;

/// Bytes moved from a QUIC stream into its pair (or back) per operation.
const PAIR_CHUNK: usize = 256 * 1024;

/// Datagrams waiting in one worker's [`QuicMail`]; more are dropped (QUIC
/// sends them again).
const MAIL_MAX: usize = 1024;

/// What `serve` hands one worker: its bound UDP sockets (one per address
/// QUIC listens on, with that address's IP when it is a specific one) and
/// its endpoint's configuration.
pub struct QuicListen {
    pub sockets: Vec<(Option<IpAddr>, OwnedFd)>,
    pub config: Arc<ringshare_quic::ServerConfig>,
    pub limits: ringshare_quic::Limits,
    pub endpoint: Arc<ringshare_quic::EndpointConfig>,
}

/// SMB over QUIC as every worker sees it: each one's socket and endpoint
/// configuration (taken at start), the connection-id steering, and each
/// one's mail of datagrams other workers received for its connections.
pub struct QuicShared {
    pub listens: Mutex<Vec<Option<QuicListen>>>,
    pub steering: Steering,
    mail: Vec<QuicMail>,
}

/// A datagram, who sent it and the local IP it came to (of a socket bound to one).
type Received = (SocketAddr, Option<IpAddr>, Vec<u8>);

/// Datagrams for one worker's connections that reached another worker's socket.
type QuicMail = Mailbox<Received>;

impl QuicShared {
    /// One [`QuicListen`] per worker, in worker order.
    pub fn new(listens: Vec<QuicListen>, steering: Steering) -> QuicShared {
        QuicShared {
            mail: (0..listens.len()).map(|_| Mailbox::new(MAIL_MAX)).collect(),
            listens: Mutex::new(listens.into_iter().map(Some).collect()),
            steering,
        }
    }

    /// Worker `index`'s socket and endpoint (once), its mail now addressed to `waker`.
    pub(super) fn take(&self, index: usize, waker: Waker) -> Option<QuicListen> {
        let l = crate::lock(&self.listens).get_mut(index)?.take()?;
        if let Some(m) = self.mail.get(index) {
            m.set_waker(waker);
        }
        Some(l)
    }

    /// Datagrams for worker `index`'s connections that other workers dropped.
    pub(super) fn mail_dropped(&self, index: usize) -> u64 {
        self.mail.get(index).map_or(0, Mailbox::dropped)
    }

    /// Leaves `datagram` (from `from`) in worker `to`'s mail and wakes it
    /// if its mail was empty.
    fn forward(&self, to: usize, from: SocketAddr, local: Option<IpAddr>, datagram: &[u8]) {
        if let Some(m) = self.mail.get(to) {
            m.post((from, local, datagram.to_vec()));
        }
    }
}

/// One SMB stream and the near end of its socket pair.
struct Link {
    conn: ConnId,
    fd: SharedFd,
    /// Stream bytes on their way into the pair (a send in flight when `sending`).
    to_smb: Vec<u8>,
    sending: bool,
    /// The client ended its stream: the pair's write side is shut once `to_smb` is out.
    ended: bool,
    /// Bytes the SMB side wrote, not yet taken by the stream (flow control).
    from_smb: Vec<u8>,
}

/// A worker's QUIC side.
pub(super) struct QuicSide {
    server: Server,
    /// Datagrams taken from this worker's mail (kept for their buffers).
    mail: Vec<Received>,
    /// Datagrams handed to other workers (logged at exit).
    pub(super) forwarded: u64,
    /// The sockets, each with its local IP when bound to a specific one.
    udp: Vec<(Option<IpAddr>, SharedFd)>,
    links: HashMap<u32, Link>,
    by_conn: HashMap<ConnId, u32>,
    next_link: u32,
    datagram: Vec<u8>,
    out: Vec<u8>,
    /// When the endpoint next wants `handle_timeout`.
    pub(super) deadline: Option<Instant>,
    /// Datagrams the socket would not take at once (dropped: QUIC resends).
    send_drops: u64,
    /// The kernel takes `UDP_SEGMENT` batches (until a send says otherwise).
    gso: bool,
}

impl QuicSide {
    pub(super) fn new(l: QuicListen) -> QuicSide {
        for (_, socket) in &l.sockets {
            if let Err(e) = udp::enable_gro(socket) {
                tracing::info!("SMB over QUIC: no UDP_GRO ({e}): datagrams are read one at a time");
            }
        }
        QuicSide {
            server: Server::with_endpoint(l.config, l.limits, l.endpoint),
            mail: Vec::new(),
            forwarded: 0,
            udp: l
                .sockets
                .into_iter()
                .map(|(ip, fd)| (ip, Arc::new(fd)))
                .collect(),
            links: HashMap::new(),
            by_conn: HashMap::new(),
            next_link: 1,
            datagram: vec![0; udp::DATAGRAM_MAX],
            out: Vec::with_capacity(udp::DATAGRAM_MAX),
            deadline: None,
            send_drops: 0,
            gso: true,
        }
    }

    /// Asks the ring to say when each socket has datagrams.
    pub(super) fn arm(&self, ring: &mut ringshare_engine::Ring) {
        for i in 0..self.udp.len() {
            self.arm_socket(ring, i);
        }
    }

    fn arm_socket(&self, ring: &mut ringshare_engine::Ring, i: usize) {
        if let Some((_, fd)) = self.udp.get(i) {
            ring.poll_readable(fd, token(KIND_QUIC_UDP, 0, i as u32));
        }
    }

    pub(super) fn send_drops(&self) -> u64 {
        self.send_drops
    }

    /// Sends what `poll_transmit` wrote into `out`: a `UDP_SEGMENT` batch
    /// in one call, or datagram by datagram once the kernel refused one;
    /// from the socket of the local IP the connection's datagrams came to.
    fn send(&mut self, t: &ringshare_quic::Transmit) {
        let Some((_, fd)) = self
            .udp
            .iter()
            .find(|(ip, _)| *ip == t.src_ip)
            .or(self.udp.first())
        else {
            return;
        };
        let was = self.gso;
        let bytes = &self.out[..t.size];
        let lost = udp::send_batch(&**fd, bytes, t.destination, t.segment_size, &mut self.gso);
        if was && !self.gso {
            tracing::info!("SMB over QUIC: no UDP_SEGMENT: one datagram per send");
        }
        if lost > 0 {
            self.send_drops += lost;
            tracing::trace!(to = %t.destination, "{lost} QUIC datagram(s) not sent");
        }
    }

    /// The endpoint's deadline on the worker's clock (`now_ms` is now).
    pub(super) fn deadline_ms(&self, now_ms: u64) -> Option<u64> {
        let d = self.deadline?;
        let wait = d.saturating_duration_since(Instant::now());
        Some(now_ms + u64::try_from(wait.as_millis()).unwrap_or(u64::MAX / 2))
    }
}

impl Worker {
    /// A completion of one of the QUIC side's operations.
    pub(super) fn on_quic(&mut self, kind: u64, link: u32, mut comp: Completion) {
        let now = Instant::now();
        match kind {
            KIND_QUIC_UDP => {
                let Some(q) = self.quic.as_mut() else {
                    return;
                };
                let socket = link as usize;
                let Some((local, fd)) = q.udp.get(socket).cloned() else {
                    return;
                };
                let (server, forwarded) = (&mut q.server, &mut q.forwarded);
                let (shared, me) = (self.shared.quic.as_ref(), self.index);
                let errors =
                    udp::recv_each(&*fd, &mut q.datagram, udp::RECEIVES_PER_POLL, |from, d| {
                        match shared.and_then(|s| Some((s, s.steering.worker_of(d)?))) {
                            Some((s, to)) if to != me => {
                                s.forward(to, from, local, d);
                                *forwarded += 1;
                            }
                            _ => server.handle(now, from, local, d),
                        }
                    });
                if errors > 0 {
                    tracing::trace!(
                        "QUIC socket: {errors} receive error(s) (ICMP for earlier sends)"
                    );
                }
                q.arm_socket(&mut self.ring, socket);
            }
            KIND_QUIC_RECV => {
                let buf = comp.take_buf().unwrap_or_default();
                let Some(l) = self.quic.as_mut().and_then(|q| q.links.get_mut(&link)) else {
                    return;
                };
                match comp.result {
                    Ok(n) if n > 0 => {
                        l.from_smb = buf;
                        self.pair_to_stream(link, now);
                    }
                    // The SMB side closed the connection (or the pair failed).
                    _ => self.end_link(link, now),
                }
            }
            KIND_QUIC_SEND => {
                let mut buf = comp.take_buf().unwrap_or_default();
                let Some(l) = self.quic.as_mut().and_then(|q| q.links.get_mut(&link)) else {
                    return;
                };
                l.sending = false;
                if comp.result.is_err() {
                    self.end_link(link, now);
                } else {
                    buf.clear();
                    l.to_smb = buf;
                    self.stream_to_pair(link, now);
                }
            }
            _ => {}
        }
        self.quic_pump(now);
    }

    /// Handles the datagrams other workers received for this one's connections.
    pub(super) fn quic_mail(&mut self) {
        let (Some(q), Some(shared)) = (self.quic.as_mut(), self.shared.quic.as_ref()) else {
            return;
        };
        let Some(m) = shared.mail.get(self.index) else {
            return;
        };
        if !m.take_into(&mut q.mail) {
            return;
        }
        let now = Instant::now();
        for (from, local, d) in q.mail.drain(..) {
            q.server.handle(now, from, local, &d);
        }
        self.quic_pump(now);
    }

    /// The SMB side is done with a link: its QUIC connection closes.
    fn end_link(&mut self, link: u32, now: Instant) {
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        if let Some(conn) = q.links.get(&link).map(|l| l.conn) {
            q.server.close(now, conn);
        }
        self.forget_link(link);
    }

    /// Runs QUIC's timers when due (from `fire_timers`).
    pub(super) fn quic_timers(&mut self) {
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        let now = Instant::now();
        if q.deadline.is_some_and(|d| d <= now) {
            q.server.handle_timeout(now);
            self.quic_pump(now);
        }
    }

    /// Acts on the endpoint's events and sends what it has to send.
    fn quic_pump(&mut self, now: Instant) {
        while let Some(ev) = self.quic.as_mut().and_then(|q| q.server.poll_event()) {
            match ev {
                Event::Opened { id, remote } => self.open_link(id, remote, now),
                Event::Readable(id) => {
                    if let Some(link) = self.link_of(id) {
                        self.stream_to_pair(link, now);
                    }
                }
                Event::Writable(id) => {
                    if let Some(link) = self.link_of(id) {
                        self.pair_to_stream(link, now);
                    }
                }
                Event::Refused { remote, reason } => {
                    super::peer::quic_refused(
                        &self.shared.server,
                        remote,
                        &reason,
                        self.clock.mono_ms,
                    );
                }
                Event::Closed { id, reason } => {
                    tracing::debug!(conn = id, "QUIC connection ended: {reason}");
                    if let Some(link) = self.link_of(id) {
                        self.forget_link(link);
                    }
                }
            }
        }
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        let batch = udp::batch_len(q.gso);
        while let Some(t) = q.server.poll_transmit(now, batch, &mut q.out) {
            q.send(&t);
        }
        q.deadline = q.server.poll_timeout();
    }

    fn link_of(&self, id: ConnId) -> Option<u32> {
        self.quic.as_ref()?.by_conn.get(&id).copied()
    }

    /// The client opened its SMB stream: a socket pair, its far end admitted
    /// as a connection of this worker.
    fn open_link(&mut self, id: ConnId, remote: SocketAddr, now: Instant) {
        let (near, far) = match net::stream_pair() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(%remote, "QUIC connection refused: no socket pair ({e})");
                if let Some(q) = self.quic.as_mut() {
                    q.server.close(now, id);
                }
                return;
            }
        };
        if !self.admit(far, remote.to_string(), Transport::Quic) {
            if let Some(q) = self.quic.as_mut() {
                q.server.close(now, id);
            }
            return;
        }
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        let link = q.next_link;
        q.next_link = q.next_link.wrapping_add(1).max(1);
        q.by_conn.insert(id, link);
        q.links.insert(
            link,
            Link {
                conn: id,
                fd: Arc::new(near),
                to_smb: Vec::new(),
                sending: false,
                ended: false,
                from_smb: Vec::new(),
            },
        );
        tracing::debug!(%remote, "SMB over QUIC connection");
        self.arm_pair_recv(link);
        self.stream_to_pair(link, now);
    }

    /// Moves what the stream has into the pair, one send at a time.
    fn stream_to_pair(&mut self, link: u32, now: Instant) {
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        let Some(l) = q.links.get_mut(&link) else {
            return;
        };
        if l.sending || l.ended {
            return;
        }
        let mut buf = std::mem::take(&mut l.to_smb);
        let state = q.server.read(now, l.conn, &mut buf, PAIR_CHUNK);
        if let ReadState::Ended(_) = state {
            l.ended = true;
        }
        if !buf.is_empty() {
            l.sending = true;
            let fd = l.fd.clone();
            self.ring.send(&fd, buf, 0, token(KIND_QUIC_SEND, 0, link));
        } else {
            l.to_smb = buf;
        }
        if l.ended {
            // The SMB side reads what was sent, then the end of the stream.
            let _ = rustix::net::shutdown(&*l.fd, rustix::net::Shutdown::Write);
        }
    }

    /// Offers what the SMB side wrote to the stream; receives more once
    /// all of it was taken.
    fn pair_to_stream(&mut self, link: u32, now: Instant) {
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        let Some(l) = q.links.get_mut(&link) else {
            return;
        };
        // Empty: the pair's receive is in flight (it holds the buffer), and
        // a second one armed beside it would overwrite what the first brings.
        if l.from_smb.is_empty() {
            return;
        }
        // Written until a write takes nothing: quinn-proto announces
        // `Writable` only after a write it refused, never after one it took
        // in part, so stopping after a partial write could wait forever.
        let mut at = 0;
        while at < l.from_smb.len() {
            match q.server.write(now, l.conn, &l.from_smb[at..]) {
                Some(0) => break,
                Some(n) => at += n,
                None => {
                    self.end_link(link, now);
                    return;
                }
            }
        }
        l.from_smb.drain(..at);
        if l.from_smb.is_empty() {
            self.arm_pair_recv(link);
        }
    }

    fn arm_pair_recv(&mut self, link: u32) {
        let Some(l) = self.quic.as_mut().and_then(|q| q.links.get_mut(&link)) else {
            return;
        };
        let mut buf = std::mem::take(&mut l.from_smb);
        buf.clear();
        buf.reserve(PAIR_CHUNK);
        let fd = l.fd.clone();
        self.ring.recv(&fd, buf, token(KIND_QUIC_RECV, 0, link));
    }

    /// Drops a link: the pair's near end is shut, so the SMB side sees the
    /// end of its stream and closes its connection.
    fn forget_link(&mut self, link: u32) {
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        if let Some(l) = q.links.remove(&link) {
            q.by_conn.remove(&l.conn);
            let _ = rustix::net::shutdown(&*l.fd, rustix::net::Shutdown::Both);
        }
    }
}
