//! `--transport quic`: a bench connection's SMB bytes over SMB over QUIC
//! ([MS-SMB2] 2.1). Each connection has its own UDP socket and its own
//! QUIC connection (crates/quic's sans-I/O client: quinn-proto, TLS 1.3,
//! ALPN `smb`), driven from the bench thread's loop: the ring polls the
//! socket, datagrams are read until none is left and fed in, the
//! connection's output is written into its stream, and what QUIC has to
//! send goes out with `sendto` at once. No other thread, no tokio.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use ringshare_engine::{net, udp, SharedFd};
use ringshare_quic::client::{client_config, Client, ClientEvent, Trust};
use ringshare_quic::ReadState;

/// Bytes of the SMB stream the server may send ahead of what was read
/// (the connection's window is twice that): room for 16 READs of 1 MiB.
const STREAM_WINDOW: u32 = 16 << 20;

/// One connection's QUIC side.
pub(crate) struct QuicPipe {
    client: Client,
    pub(crate) udp: SharedFd,
    server: SocketAddr,
    /// Output the SMB connection handed over, from `out_at` not yet taken
    /// by the stream.
    pub(crate) out: Vec<u8>,
    out_at: usize,
    datagram: Vec<u8>,
    tx: Vec<u8>,
    /// Datagrams the socket would not take at once (QUIC resends them).
    pub(crate) send_drops: u64,
    /// The kernel takes `UDP_SEGMENT` batches.
    gso: bool,
}

impl QuicPipe {
    /// Starts the handshake with `server` (the name checked against the
    /// certificate is `host`).
    pub(crate) fn connect(
        server: SocketAddr,
        host: &str,
        trust: &Trust,
    ) -> Result<QuicPipe, String> {
        let any: IpAddr = if server.is_ipv6() {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let udp = net::udp_bind(SocketAddr::new(any, 0))
            .map_err(|e| format!("cannot open a UDP socket: {e}"))?;
        let _ = net::set_socket_buffers(&udp, Some(4 << 20), Some(4 << 20));
        // Without it datagrams come one at a time.
        let _ = udp::enable_gro(&udp);
        let cfg = client_config(trust, STREAM_WINDOW)?;
        let client = Client::connect(Instant::now(), cfg, server, host)?;
        let mut p = QuicPipe {
            client,
            udp: Arc::new(udp),
            server,
            out: Vec::new(),
            out_at: 0,
            datagram: vec![0; udp::DATAGRAM_MAX],
            tx: Vec::with_capacity(udp::DATAGRAM_MAX),
            send_drops: 0,
            gso: true,
        };
        p.transmit(Instant::now());
        Ok(p)
    }

    /// The socket is readable: every datagram waiting goes in.
    pub(crate) fn on_readable(&mut self, now: Instant) {
        // A receive error is an ICMP error for an earlier send (the server
        // is not there yet): passed over.
        let client = &mut self.client;
        udp::recv_each(
            &*self.udp,
            &mut self.datagram,
            udp::RECEIVES_PER_POLL,
            |from, d| client.handle(now, from, d),
        );
    }

    /// Runs due timers, offers the pending output to the stream and reads
    /// what the stream has into `rbuf` (up to its spare room). Returns
    /// the bytes read, and whether all output was taken.
    pub(crate) fn exchange(
        &mut self,
        now: Instant,
        rbuf: &mut Vec<u8>,
    ) -> Result<(usize, bool), String> {
        self.client.handle_timeout(now);
        while let Some(ev) = self.client.poll_event() {
            if let ClientEvent::Closed(reason) = ev {
                return Err(format!("the QUIC connection closed: {reason}"));
            }
        }
        if self.out_at < self.out.len() {
            match self.client.write(&self.out[self.out_at..]) {
                Some(n) => self.out_at += n,
                None => return Err("the QUIC stream closed".into()),
            }
        }
        let room = rbuf.capacity() - rbuf.len();
        let got = match self.client.read(rbuf, room) {
            ReadState::Open(n) => n,
            ReadState::Ended(0) => return Err("the server ended the QUIC stream".into()),
            ReadState::Ended(n) => n,
        };
        Ok((got, self.out_at == self.out.len()))
    }

    /// Hands output over (the stream takes it in `exchange`).
    pub(crate) fn queue(&mut self, buf: Vec<u8>) {
        self.out = buf;
        self.out_at = 0;
    }

    /// Sends what QUIC has to send now.
    pub(crate) fn transmit(&mut self, now: Instant) {
        let batch = udp::batch_len(self.gso);
        while let Some(t) = self.client.poll_transmit(now, batch, &mut self.tx) {
            let bytes = &self.tx[..t.size];
            self.send_drops += udp::send_batch(
                &*self.udp,
                bytes,
                self.server,
                t.segment_size,
                &mut self.gso,
            );
        }
    }

    /// When the connection's next timer is due.
    pub(crate) fn deadline(&mut self) -> Option<Instant> {
        self.client.poll_timeout()
    }

    pub(crate) fn close(&mut self, now: Instant) {
        self.client.close(now);
        self.transmit(now);
    }
}
