//! quic-libs: bare bulk-transfer endpoints of another sans-I/O QUIC library (Cloudflare's
//! quiche, BoringSSL), built to stand beside `ringshare limit quic-send` / `quic-recv` (the
//! quinn-proto pair, crates/ringshare/src/limit/quic.rs) under the same conditions: loopback,
//! one bidirectional stream, the receiver asks for N bytes (8 bytes, big-endian) and the sender
//! writes them from a 1 MiB buffer as fast as flow and congestion control take them; UDP_GRO
//! receives, UDP_SEGMENT batches of up to 32 datagrams (64 KiB at most), one thread each,
//! waiting in ppoll(2) for the socket or the library's next timer; stream windows of 4 MiB and a
//! connection window of 8 MiB as crates/quic's default `Limits`. The library is driven sans-I/O:
//! datagrams in through `Connection::recv`, datagrams out through `Connection::send`, which
//! writes one datagram per call; the driver packs them into a GSO batch.
//!
//! The sender's figures run from the request to the receiver's CONNECTION_CLOSE (every byte in),
//! the receiver's from the first stream byte to the last, as in the quinn-proto pair. CPU is the
//! process's user + system time (CLOCK_PROCESS_CPUTIME_ID) over the same span.
//!
//! Usage:
//!   quic-libs quiche-send [--listen 127.0.0.1:0] [--payload N] [--batch 32]
//!   quic-libs quiche-recv [--payload N] [--verify] --bytes N ADDR
//! `--payload N`: the largest UDP payload either end sends and accepts (default 1452, what
//! quinn-proto reaches on a 1500-byte path by discovery; quiche's own default is 1200).
//! The sender prints `listening on ADDR` on stderr; each prints one result line on stdout.

mod udp;

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const MIB: usize = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;
/// The one stream: the first client-initiated bidirectional stream.
const STREAM: u64 = 0;

fn cpu_now() -> f64 {
    // SAFETY: all-zero is a valid timespec; clock_gettime writes it.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// The byte the sender sends at stream offset `at` (its 1 MiB buffer, over and over).
fn expected(at: u64) -> u8 {
    (at % MIB as u64 % 251) as u8
}

struct Opts {
    listen: SocketAddr,
    payload: usize,
    batch: usize,
    bytes: u64,
    verify: bool,
    addr: Option<SocketAddr>,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        listen: "127.0.0.1:0".parse().unwrap(),
        payload: 1452,
        batch: 32,
        bytes: 0,
        verify: false,
        addr: None,
    };
    let mut i = 0;
    let val = |i: usize| {
        args.get(i + 1)
            .cloned()
            .ok_or(format!("{} needs a value", args[i]))
    };
    while i < args.len() {
        match args[i].as_str() {
            "--listen" => o.listen = val(i)?.parse().map_err(|e| format!("--listen: {e}"))?,
            "--payload" => o.payload = val(i)?.parse().map_err(|e| format!("--payload: {e}"))?,
            "--batch" => o.batch = val(i)?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--bytes" => o.bytes = val(i)?.parse().map_err(|e| format!("--bytes: {e}"))?,
            "--verify" => {
                o.verify = true;
                i += 1;
                continue;
            }
            a if !a.starts_with('-') => {
                o.addr = Some(a.parse().map_err(|e| format!("{a}: {e}"))?);
                i += 1;
                continue;
            }
            a => return Err(format!("unknown argument {a}")),
        }
        i += 2;
    }
    if !(1200..=udp::SEND_MAX).contains(&o.payload) {
        return Err(format!("--payload must be 1200..={}", udp::SEND_MAX));
    }
    Ok(o)
}

/// The TLS secrets BoringSSL logs (NSS key log format), kept to tell the negotiated cipher
/// suite by the length of a traffic secret: 32 bytes for a SHA-256 suite (AES-128-GCM or
/// ChaCha20-Poly1305), 48 for TLS_AES_256_GCM_SHA384.
#[derive(Clone, Default)]
struct KeyLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for KeyLog {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl KeyLog {
    fn suite(&self) -> &'static str {
        let log = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        let secret = log
            .lines()
            .find(|l| l.starts_with("SERVER_TRAFFIC_SECRET_0"))
            .and_then(|l| l.split_whitespace().nth(2).map(str::len));
        match secret {
            Some(64) => "sha256-suite",
            Some(96) => "TLS_AES_256_GCM_SHA384",
            _ => "unknown",
        }
    }
}

fn config(o: &Opts, cert: Option<(&str, &str)>) -> Result<quiche::Config, String> {
    let e = |e: quiche::Error| e.to_string();
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(e)?;
    c.set_application_protos(&[b"smb"]).map_err(e)?;
    c.set_max_idle_timeout(120_000);
    c.set_max_recv_udp_payload_size(o.payload);
    c.set_max_send_udp_payload_size(o.payload);
    c.set_initial_max_data(8 * MIB as u64);
    c.set_initial_max_stream_data_bidi_local(4 * MIB as u64);
    c.set_initial_max_stream_data_bidi_remote(4 * MIB as u64);
    c.set_max_stream_window(4 * MIB as u64);
    c.set_max_connection_window(8 * MIB as u64);
    c.set_initial_max_streams_bidi(1);
    c.set_initial_max_streams_uni(0);
    c.set_disable_active_migration(true);
    c.log_keys();
    match cert {
        Some((chain, key)) => {
            c.load_cert_chain_from_pem_file(chain).map_err(e)?;
            c.load_priv_key_from_pem_file(key).map_err(e)?;
        }
        None => c.verify_peer(false),
    }
    Ok(c)
}

fn scid() -> [u8; quiche::MAX_CONN_ID_LEN] {
    let mut id = [0u8; quiche::MAX_CONN_ID_LEN];
    // SAFETY: getrandom writes at most id.len() bytes into it.
    unsafe { libc::getrandom(id.as_mut_ptr().cast(), id.len(), 0) };
    id
}

/// Packs what `conn` has to send into GSO batches of up to `batch` datagrams (each datagram
/// of a batch as long as its first, the last may be shorter) and sends them; returns datagrams
/// the socket did not take. quiche's pacing hint (`SendInfo::at`) is not followed: the
/// quinn-proto driver has no such release times either (quinn-proto paces inside poll_transmit).
fn flush(
    s: &UdpSocket,
    conn: &mut quiche::Connection,
    tx: &mut [u8],
    batch: usize,
    gso: &mut bool,
) -> Result<u64, String> {
    let mut drops = 0;
    loop {
        let size = conn.max_send_udp_payload_size();
        let segs = batch.min(udp::SEND_MAX / size).max(1);
        let (mut len, mut n, mut seg, mut to) = (0, 0, size, None);
        while n < segs {
            match conn.send(&mut tx[len..len + seg]) {
                Ok((w, info)) => {
                    if n == 0 {
                        seg = w;
                        to = Some(info.to);
                    }
                    len += w;
                    n += 1;
                    if w < seg {
                        break;
                    }
                }
                Err(quiche::Error::Done) => break,
                Err(e) => return Err(format!("send: {e}")),
            }
        }
        match to {
            Some(to) => drops += udp::send_batch(s, &tx[..len], to, seg, gso),
            None => return Ok(drops),
        }
    }
}

/// Takes every datagram waiting on `s` (GRO buffers cut at their segment size) into `each`.
fn recv_all(
    s: &UdpSocket,
    rx: &mut [u8],
    mut each: impl FnMut(SocketAddr, &mut [u8]) -> Result<(), String>,
) -> Result<(), String> {
    for _ in 0..1024 {
        match udp::recv_gro(s, rx) {
            Ok(Some((n, from, seg))) => {
                for d in rx[..n].chunks_mut(seg) {
                    each(from, d)?;
                }
            }
            Ok(None) => break,
            Err(_) => {}
        }
    }
    Ok(())
}

fn line(role: &str, o: &Opts, bytes: u64, wall: f64, cpu: f64, extra: &str) -> String {
    format!(
        "role={role} mode=quiche-{} bytes={bytes} wall_s={wall:.6} cpu_s={cpu:.6} gbps={:.6} cpu_s_per_gib={:.6} {extra}",
        o.payload,
        bytes as f64 / wall / 1e9,
        cpu / (bytes as f64 / GIB)
    )
}

fn send(o: &Opts) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("quic-libs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(|e| e.to_string())?;
    let (chain, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&chain, ck.cert.pem()).map_err(|e| e.to_string())?;
    std::fs::write(&key, ck.key_pair.serialize_pem()).map_err(|e| e.to_string())?;
    // BoringSSL reads both files here; they are not needed after.
    let cfg = config(o, Some((chain.to_str().unwrap(), key.to_str().unwrap())));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = cfg?;
    let s = udp::bind(o.listen).map_err(|e| format!("udp {}: {e}", o.listen))?;
    let local = s.local_addr().map_err(|e| e.to_string())?;
    eprintln!("listening on {local}");
    let data: Vec<u8> = (0..MIB as u64).map(expected).collect();
    let (mut rx, mut tx) = (vec![0u8; udp::DATAGRAM_MAX], vec![0u8; udp::SEND_MAX]);
    let keylog = KeyLog::default();
    let mut conn: Option<quiche::Connection> = None;
    let (mut request, mut want, mut sent) = (Vec::new(), None::<u64>, 0u64);
    let (mut start, mut drops, mut gso) = (None, 0u64, true);
    loop {
        udp::wait(&s, conn.as_ref().and_then(|c| c.timeout()));
        recv_all(&s, &mut rx, |from, d| {
            if conn.is_none() {
                let hdr = quiche::Header::from_slice(d, quiche::MAX_CONN_ID_LEN)
                    .map_err(|e| e.to_string())?;
                if hdr.ty != quiche::Type::Initial {
                    return Ok(());
                }
                let id = scid();
                let mut c = quiche::accept(
                    &quiche::ConnectionId::from_ref(&id),
                    None,
                    local,
                    from,
                    &mut cfg,
                )
                .map_err(|e| format!("accept: {e}"))?;
                c.set_keylog(Box::new(keylog.clone()));
                conn = Some(c);
            }
            let c = conn.as_mut().unwrap();
            match c.recv(d, quiche::RecvInfo { from, to: local }) {
                Ok(_) | Err(quiche::Error::Done) => Ok(()),
                Err(e) => Err(format!("recv: {e}")),
            }
        })?;
        let Some(c) = conn.as_mut() else { continue };
        if c.timeout_instant().is_some_and(|t| t <= Instant::now()) {
            c.on_timeout();
        }
        if c.is_closed() || c.is_draining() {
            let (t0, c0): (Instant, f64) = start.ok_or("closed before a request")?;
            let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_now() - c0);
            if Some(sent) != want {
                return Err(format!("closed after {sent} bytes: {:?}", c.peer_error()));
            }
            let st = c.stats();
            let extra = format!(
                "payload={} suite={} packets_sent={} lost={} drops={drops} gso={gso}",
                c.max_send_udp_payload_size(),
                keylog.suite(),
                st.sent,
                st.lost
            );
            return Ok(line("quiche-send", o, sent, wall, cpu, &extra));
        }
        if want.is_none() && c.is_established() {
            let mut b = [0u8; 8];
            while let Ok((n, _)) = c.stream_recv(STREAM, &mut b[..8 - request.len()]) {
                request.extend_from_slice(&b[..n]);
                if n == 0 || request.len() == 8 {
                    break;
                }
            }
            if let Ok(n) = <[u8; 8]>::try_from(&request[..]) {
                want = Some(u64::from_be_bytes(n));
                start = Some((Instant::now(), cpu_now()));
            }
        }
        if let Some(w) = want {
            while sent < w {
                let at = (sent % MIB as u64) as usize;
                let k = usize::try_from(w - sent)
                    .unwrap_or(usize::MAX)
                    .min(MIB - at);
                let fin = sent + k as u64 == w;
                match c.stream_send(STREAM, &data[at..at + k], fin) {
                    Ok(0) | Err(quiche::Error::Done) => break,
                    Ok(n) => sent += n as u64,
                    Err(e) => return Err(format!("stream_send after {sent} bytes: {e}")),
                }
            }
        }
        drops += flush(&s, c, &mut tx, o.batch, &mut gso)?;
    }
}

fn recv(o: &Opts) -> Result<String, String> {
    let peer = o.addr.ok_or("the sender's address is missing")?;
    let mut cfg = config(o, None)?;
    let s = udp::bind("127.0.0.1:0".parse().unwrap()).map_err(|e| e.to_string())?;
    let local = s.local_addr().map_err(|e| e.to_string())?;
    let id = scid();
    let mut c = quiche::connect(
        Some("localhost"),
        &quiche::ConnectionId::from_ref(&id),
        local,
        peer,
        &mut cfg,
    )
    .map_err(|e| format!("connect: {e}"))?;
    let keylog = KeyLog::default();
    c.set_keylog(Box::new(keylog.clone()));
    let (mut rx, mut tx) = (vec![0u8; udp::DATAGRAM_MAX], vec![0u8; udp::SEND_MAX]);
    let mut buf = vec![0u8; MIB];
    let (mut asked, mut got, mut start, mut gso) = (false, 0u64, None, true);
    let mut drops = flush(&s, &mut c, &mut tx, o.batch, &mut gso)?;
    while got < o.bytes {
        udp::wait(&s, c.timeout());
        recv_all(&s, &mut rx, |from, d| {
            match c.recv(d, quiche::RecvInfo { from, to: local }) {
                Ok(_) | Err(quiche::Error::Done) => Ok(()),
                Err(e) => Err(format!("recv: {e}")),
            }
        })?;
        if c.timeout_instant().is_some_and(|t| t <= Instant::now()) {
            c.on_timeout();
        }
        if c.is_closed() {
            return Err(format!(
                "closed after {got} bytes: {:?} {:?}",
                c.peer_error(),
                c.local_error()
            ));
        }
        if !asked && c.is_established() {
            c.stream_send(STREAM, &o.bytes.to_be_bytes(), false)
                .map_err(|e| format!("request: {e}"))?;
            asked = true;
        }
        loop {
            match c.stream_recv(STREAM, &mut buf) {
                Ok((n, _)) if n > 0 => {
                    if start.is_none() {
                        start = Some((Instant::now(), cpu_now()));
                    }
                    if o.verify {
                        if let Some(j) = (0..n).find(|&j| buf[j] != expected(got + j as u64)) {
                            return Err(format!(
                                "byte {} differs from what was sent",
                                got + j as u64
                            ));
                        }
                    }
                    got += n as u64;
                }
                _ => break,
            }
        }
        drops += flush(&s, &mut c, &mut tx, o.batch, &mut gso)?;
    }
    let (t0, c0): (Instant, f64) = start.unwrap_or((Instant::now(), cpu_now()));
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_now() - c0);
    let _ = c.close(true, 0, b"");
    flush(&s, &mut c, &mut tx, o.batch, &mut gso)?;
    let extra = format!(
        "payload={} suite={} drops={drops} gso={gso}",
        c.max_send_udp_payload_size(),
        keylog.suite()
    );
    Ok(line("quiche-recv", o, got, wall, cpu, &extra))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("quiche-send") => parse(&args[1..]).and_then(|o| send(&o)),
        Some("quiche-recv") => parse(&args[1..]).and_then(|o| recv(&o)),
        _ => Err("usage: quic-libs quiche-send|quiche-recv [options] (see src/main.rs)".into()),
    };
    match r {
        Ok(l) => println!("{l}"),
        Err(e) => {
            eprintln!("quic-libs: {e}");
            std::process::exit(1);
        }
    }
}
