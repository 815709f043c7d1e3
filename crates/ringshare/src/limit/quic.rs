//! `ringshare limit quic-send` and `quic-recv`: the plain-QUIC limit, the anchor for SMB over
//! QUIC. Two bare endpoints of the QUIC library the server uses, with no SMB: the sender is a
//! server endpoint of crates/quic ([`ringshare_quic::Server`], the configuration `serve` builds:
//! TLS 1.3 with rustls and aws-lc-rs, ALPN `smb`, the default [`Limits`]), the receiver is the
//! bench client's QUIC connection ([`QuicPipe`]: the same client configuration and windows).
//! Both move datagrams with crates/engine's `udp` (`UDP_GRO` receives, `UDP_SEGMENT` batches of
//! 32), as the server's driver and the bench client do, and wait in poll(2) for the socket or
//! QUIC's next timer: no ring, no tokio, one thread each.
//!
//! The receiver opens the one stream and asks for N bytes (8 bytes, big-endian); the sender
//! writes them from a 1 MiB buffer into the stream as fast as flow and congestion control take
//! them, the role the server plays in a READ; the receiver reads and discards them, and closes
//! the connection once all are in. The sender's figures run from the request to the close
//! (every byte acknowledged as received), the receiver's from the first byte to the last.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Instant;

use ringshare_engine::{net, udp};
use ringshare_quic::client::Trust;
use ringshare_quic::{cert, Access, Event, Identity, Limits, ReadState, Server};

use super::{cpu_now, Report, MIB};
use crate::bench::quic::QuicPipe;

/// Waits until `fd` is readable or `deadline` (QUIC's next timer) has come.
fn wait(fd: impl AsFd, deadline: Option<Instant>) -> Result<(), String> {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let t = deadline.map(|d| {
        let w = d.saturating_duration_since(Instant::now());
        rustix::event::Timespec {
            tv_sec: i64::try_from(w.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(w.subsec_nanos()),
        }
    });
    match rustix::event::poll(&mut fds, t.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(format!("poll: {e}")),
    }
}

/// The byte the sender sends at stream offset `at` (its buffer, 1 MiB, over and over).
fn expected(at: u64) -> u8 {
    (at % MIB as u64 % 251) as u8
}

/// Serves one connection on `listen`: sends the bytes its stream asks for. `announce` gets the
/// address and the certificate's SHA-256 (`sha256:HEX`, what `quic-recv --trust` takes).
pub fn send(listen: SocketAddr, announce: impl FnOnce(SocketAddr, &str)) -> Result<Report, String> {
    let (cert_pem, key_pem) = cert::self_signed(&["localhost".to_string()])?;
    let id = Identity::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?;
    let fingerprint = format!("sha256:{}", id.fingerprint().replace(':', ""));
    let limits = Limits::default();
    let config = ringshare_quic::server_config(id, &limits, Access::default())?;
    let sock = net::udp_bind(listen).map_err(|e| format!("udp {listen}: {e}"))?;
    let _ = udp::enable_gro(&sock);
    let local = net::local_addr(&sock).map_err(|e| e.to_string())?;
    announce(local, &fingerprint);
    let mut server = Server::new(config, limits);
    let data: Vec<u8> = (0..MIB as u64).map(expected).collect();
    let (mut datagram, mut tx) = (
        vec![0; udp::DATAGRAM_MAX],
        Vec::with_capacity(udp::DATAGRAM_MAX),
    );
    let mut gso = true;
    // Datagrams the socket would not take (dropped: QUIC resends them).
    let mut drops = 0u64;
    // The connection, its request (8 bytes), the bytes asked for and sent.
    let mut conn = None;
    let mut request = Vec::with_capacity(8);
    let (mut want, mut sent) = (None::<u64>, 0u64);
    let mut start = None;
    loop {
        wait(&sock, server.poll_timeout())?;
        let now = Instant::now();
        udp::recv_each(&sock, &mut datagram, udp::RECEIVES_PER_POLL, |from, d| {
            server.handle(now, from, None, d)
        });
        server.handle_timeout(now);
        while let Some(ev) = server.poll_event() {
            match ev {
                Event::Opened { id, .. } => conn = conn.or(Some(id)),
                Event::Readable(id) if Some(id) == conn && want.is_none() => {
                    let room = 8 - request.len();
                    if let ReadState::Ended(_) = server.read(now, id, &mut request, room) {
                        return Err("the receiver ended its stream before asking".into());
                    }
                    if let Ok(n) = <[u8; 8]>::try_from(&request[..]) {
                        want = Some(u64::from_be_bytes(n));
                        start = Some((Instant::now(), cpu_now()));
                    }
                }
                Event::Closed { id, reason } if Some(id) == conn => {
                    let (t0, c0) = start.ok_or(format!("closed before a request: {reason}"))?;
                    if Some(sent) != want {
                        return Err(format!("closed after {sent} bytes: {reason}"));
                    }
                    if drops > 0 {
                        eprintln!("ringshare limit quic-send: {drops} datagram(s) not taken by the socket");
                    }
                    return Ok(Report {
                        role: "quic-send",
                        mode: Some("quic"),
                        bytes: sent,
                        wall_s: t0.elapsed().as_secs_f64(),
                        cpu_s: cpu_now() - c0,
                    });
                }
                _ => {}
            }
        }
        if let (Some(id), Some(w)) = (conn, want) {
            while sent < w {
                // The buffer from where the stream's offset falls in it.
                let at = (sent % MIB as u64) as usize;
                let k = usize::try_from(w - sent)
                    .unwrap_or(usize::MAX)
                    .min(MIB - at);
                match server.write(now, id, &data[at..at + k]) {
                    Some(0) => break,
                    Some(n) => sent += n as u64,
                    None => return Err(format!("the stream closed after {sent} bytes")),
                }
            }
        }
        let batch = udp::batch_len(gso);
        while let Some(t) = server.poll_transmit(now, batch, &mut tx) {
            drops += udp::send_batch(
                &sock,
                &tx[..t.size],
                t.destination,
                t.segment_size,
                &mut gso,
            );
        }
    }
}

/// Connects to a `quic-send` at `addr` (its certificate trusted as `trust` says), asks for
/// `bytes` bytes and reads them, discarding them; with `verify`, each byte is first checked
/// against what the sender's buffer holds at its offset.
pub fn recv(addr: SocketAddr, trust: &str, bytes: u64, verify: bool) -> Result<Report, String> {
    let trust = Trust::parse(trust)?;
    let mut pipe = QuicPipe::connect(addr, "localhost", &trust)?;
    pipe.queue(bytes.to_be_bytes().to_vec());
    let udp = Arc::clone(&pipe.udp);
    let mut rbuf = Vec::with_capacity(MIB);
    let mut got = 0u64;
    let mut start = None;
    while got < bytes {
        wait(&*udp, pipe.deadline())?;
        let now = Instant::now();
        pipe.on_readable(now);
        loop {
            let (n, _) = pipe.exchange(now, &mut rbuf)?;
            if n == 0 {
                break;
            }
            if start.is_none() {
                start = Some((now, cpu_now()));
            }
            if verify {
                if let Some(j) = (0..n).find(|&j| rbuf[j] != expected(got + j as u64)) {
                    return Err(format!(
                        "byte {} differs from what was sent",
                        got + j as u64
                    ));
                }
            }
            got += n as u64;
            rbuf.clear();
        }
        pipe.transmit(now);
    }
    let (t0, c0) = start.unwrap_or((Instant::now(), cpu_now()));
    let report = Report {
        role: "quic-recv",
        mode: Some("quic"),
        bytes: got,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: cpu_now() - c0,
    };
    pipe.close(Instant::now());
    if got != bytes {
        return Err(format!("{got} bytes arrived, {bytes} asked for"));
    }
    Ok(report)
}
