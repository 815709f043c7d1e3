//! `ringshare limit`: the plain file-to-socket sender that bounds what any file server can do
//! on this machine, the sink it sends to, and the plain receiver that writes what it receives
//! into a new file (the write side: [`recv`]); and the plain-QUIC pair, the anchor for SMB over
//! QUIC ([`quic`]).
//!
//! On loopback the receiver's TCP work is charged to the sender, so even a perfect server
//! spends CPU per GiB sent. The floor is a sender with no protocol at all: `send` moves a whole
//! file to one TCP connection with `sendfile(2)`, with `splice(2)` through a pipe, or with
//! `read(2)` + `send(2)` from a buffer, or with the server's own io_uring splice chain
//! (`--mode ring`: the mechanism of a spliced READ without the protocol); `sink` accepts one
//! connection and receives until EOF.
//! Each prints one line of `key=value` figures (wall clock, process CPU, GB/s).
//!
//! Both ends use plain blocking calls and set `TCP_NODELAY`, as SMB peers do (`send
//! --nonblocking` waits in `poll(2)` instead, to compare; see docs/benchmarks/history.md; `send
//! --mode ring` waits in `io_uring_enter`). The sink asks to be woken once `--low-water` bytes
//! are queued (`SO_RCVLOWAT`, 512 KiB by default), as `ringshare bench` does for a large READ
//! reply, not per arriving segment. CPU is the
//! process's user + system time from `CLOCK_PROCESS_CPUTIME_ID` (what `getrusage(RUSAGE_SELF)`
//! reports, at nanosecond resolution).

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use rustix::pipe::SpliceFlags;

pub mod quic;
pub mod recv;
use recv::RecvMode;

const GIB: f64 = (1u64 << 30) as f64;
const MIB: usize = 1 << 20;

/// `ringshare limit sink|send|recv|quic-send|quic-recv ...`
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct LimitArgs {
    /// Which end to run.
    #[command(subcommand)]
    pub command: LimitCommand,
}

/// The ends of a measurement.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum LimitCommand {
    /// Accept one connection and receive until EOF.
    Sink {
        /// Address to listen on (port 0: any free port, announced on standard error).
        #[arg(long, value_name = "ADDR:PORT")]
        listen: SocketAddr,
        /// Receive buffer size.
        #[arg(long, value_name = "SIZE", default_value = "1m", value_parser = parse_size)]
        buf: usize,
        /// `SO_RCVLOWAT`: be woken once this much is queued, not per arriving segment (as
        /// `ringshare bench` waits for a large frame; 1 is the kernel's default).
        #[arg(long, value_name = "SIZE", default_value = "512k", value_parser = parse_size)]
        low_water: usize,
    },
    /// Connect and send a whole file.
    Send {
        /// How the bytes move.
        #[arg(long, value_enum)]
        mode: Mode,
        /// The file to send.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Where the sink listens.
        #[arg(value_name = "ADDR:PORT")]
        addr: SocketAddr,
        /// Bytes per call (default: 8m for sendfile, 1m for splice and rw).
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        chunk: Option<usize>,
        /// Make the socket non-blocking and wait in poll(2) when it is full (default: blocking).
        #[arg(long)]
        nonblocking: bool,
    },
    /// Accept one connection and write what it sends into a new file until EOF.
    Recv {
        /// How the bytes move.
        #[arg(long, value_enum)]
        mode: RecvMode,
        /// Address to listen on (port 0: any free port, announced on standard error).
        #[arg(long, value_name = "ADDR:PORT")]
        listen: SocketAddr,
        /// The file to write: removed first if it exists, and again at the end unless --keep.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Bytes per write.
        #[arg(long, value_name = "SIZE", default_value = "1m", value_parser = parse_size)]
        chunk: usize,
        /// Leave the file in place at the end.
        #[arg(long)]
        keep: bool,
    },
    /// Plain QUIC, the server's side: serve one connection (crates/quic's endpoint, a fresh
    /// self-signed certificate) and send the bytes its stream asks for from a buffer.
    QuicSend {
        /// UDP address to listen on (port 0: any free port, announced on standard error with
        /// the certificate's SHA-256).
        #[arg(long, value_name = "ADDR:PORT")]
        listen: SocketAddr,
    },
    /// Plain QUIC, the client's side: connect to a quic-send, ask for SIZE bytes, read and
    /// discard them.
    QuicRecv {
        /// The sender's certificate: sha256:HEX (as quic-send announces it) or a file.
        #[arg(long, value_name = "TRUST")]
        trust: String,
        /// Bytes to ask for.
        #[arg(long, value_name = "SIZE", default_value = "2g", value_parser = parse_size)]
        bytes: usize,
        /// Check every byte against what the sender sends (costs receiver CPU).
        #[arg(long)]
        verify: bool,
        /// Where the sender listens.
        #[arg(value_name = "ADDR:PORT")]
        addr: SocketAddr,
    },
}

/// How `send` moves the file's bytes to the socket.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `sendfile(2)`, file to socket in the kernel.
    Sendfile,
    /// `splice(2)` file -> pipe, then pipe -> socket.
    Splice,
    /// `read(2)` into a buffer, then `send(2)` it.
    Rw,
    /// The server's own splice: the engine's `Ring::send_file` (file -> pipe -> socket as
    /// linked io_uring SPLICEs, run by an io_uring worker), one call per chunk, each with an
    /// 84-byte head as an SMB2 READ reply has, one after the other as a connection's replies go.
    Ring,
}

impl Mode {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sendfile => "sendfile",
            Mode::Splice => "splice",
            Mode::Rw => "rw",
            Mode::Ring => "ring",
        }
    }

    /// Bytes per call when `--chunk` is not given.
    pub fn default_chunk(self) -> usize {
        match self {
            Mode::Sendfile => 8 * MIB,
            Mode::Splice | Mode::Rw | Mode::Ring => MIB,
        }
    }
}

/// What one end measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// `"sink"`, `"send"`, `"recv"`, `"quic-send"` or `"quic-recv"`.
    pub role: &'static str,
    /// The sender's or receiver's mode (`"quic"` for the QUIC pair); `None` for the sink.
    pub mode: Option<&'static str>,
    /// Bytes received or sent.
    pub bytes: u64,
    /// Wall-clock seconds from connection to EOF (sink) or last byte handed to the kernel (send).
    pub wall_s: f64,
    /// Process CPU seconds (user + system) over the same span.
    pub cpu_s: f64,
}

impl Report {
    /// Decimal gigabytes per second.
    pub fn gb_per_s(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.bytes as f64 / self.wall_s / 1e9
        } else {
            0.0
        }
    }

    /// CPU seconds per GiB moved.
    pub fn cpu_s_per_gib(&self) -> f64 {
        if self.bytes > 0 {
            self.cpu_s / (self.bytes as f64 / GIB)
        } else {
            0.0
        }
    }

    /// The one-line form: `role=send mode=sendfile bytes=... wall_s=... cpu_s=... gbps=...`.
    pub fn line(&self) -> String {
        let mode = self.mode.map_or(String::new(), |m| format!(" mode={m}"));
        format!(
            "role={}{mode} bytes={} wall_s={:.6} cpu_s={:.6} gbps={:.6} cpu_s_per_gib={:.6}",
            self.role,
            self.bytes,
            self.wall_s,
            self.cpu_s,
            self.gb_per_s(),
            self.cpu_s_per_gib()
        )
    }
}

fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1usize << 10),
        Some('m') => (&t[..t.len() - 1], MIB),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t.as_str(), 1),
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 64k, 1m, 8m)"))?;
    match n.checked_mul(mult) {
        Some(0) | None => Err(format!("{s:?} is not a usable size")),
        Some(v) => Ok(v),
    }
}

/// This process's CPU time (user + system), in seconds.
fn cpu_now() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Receives from `stream` into a `buf`-byte buffer until EOF; returns the byte count.
pub fn receive_all(stream: &mut TcpStream, buf: usize) -> io::Result<u64> {
    let mut b = vec![0u8; buf.max(1)];
    let mut total = 0u64;
    loop {
        match stream.read(&mut b) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits until `sock` can take more bytes (for a non-blocking socket that said `EAGAIN`).
fn wait_writable(sock: &TcpStream) -> io::Result<()> {
    let mut fds = [rustix::event::PollFd::new(
        sock,
        rustix::event::PollFlags::OUT,
    )];
    loop {
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes all of `buf`, waiting in poll(2) whenever a non-blocking socket is full.
fn write_all_waiting(sock: &mut TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match sock.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = buf.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(sock)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends the first `len` bytes of `file` to `sock` in `chunk`-byte calls; returns the bytes sent
/// (less than `len` only if the file is shorter). `sock` may be blocking or non-blocking.
pub fn send_file(
    mode: Mode,
    file: &mut File,
    sock: &mut TcpStream,
    len: u64,
    chunk: usize,
) -> io::Result<u64> {
    let chunk = chunk.max(1);
    match mode {
        Mode::Sendfile => {
            let mut off = 0u64;
            while off < len {
                let want = chunk.min(usize::try_from(len - off).unwrap_or(usize::MAX));
                match rustix::fs::sendfile(&*sock, &*file, Some(&mut off), want) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => {}
                    Err(rustix::io::Errno::AGAIN) => wait_writable(sock)?,
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(off)
        }
        Mode::Splice => {
            let (pr, pw) = rustix::pipe::pipe()?;
            // A pipe as large as one chunk, or as the system allows (as the server's pipes).
            ringshare_engine::size_pipe(&pw, chunk)?;
            let flags = SpliceFlags::MOVE | SpliceFlags::MORE;
            let mut off = 0u64;
            while off < len {
                let want = chunk.min(usize::try_from(len - off).unwrap_or(usize::MAX));
                let mut in_pipe =
                    match rustix::pipe::splice(&*file, Some(&mut off), &pw, None, want, flags) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(rustix::io::Errno::INTR) => continue,
                        Err(e) => return Err(e.into()),
                    };
                while in_pipe > 0 {
                    match rustix::pipe::splice(&pr, None, &*sock, None, in_pipe, flags) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => in_pipe -= n,
                        Err(rustix::io::Errno::INTR) => {}
                        Err(rustix::io::Errno::AGAIN) => wait_writable(sock)?,
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Ok(off)
        }
        Mode::Ring => ring_send_file(file, sock, len, chunk),
        Mode::Rw => {
            let mut b = vec![0u8; chunk];
            let mut sent = 0u64;
            while sent < len {
                let want = chunk.min(usize::try_from(len - sent).unwrap_or(usize::MAX));
                let Some(dst) = b.get_mut(..want) else {
                    break;
                };
                let n = match file.read(dst) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                write_all_waiting(sock, b.get(..n).unwrap_or_default())?;
                sent += n as u64;
            }
            Ok(sent)
        }
    }
}

/// [`Mode::Ring`]: each chunk through `Ring::send_file` behind an 84-byte head (the size of an
/// SMB2 READ reply's headers), waiting for one before starting the next.
fn ring_send_file(file: &File, sock: &TcpStream, len: u64, chunk: usize) -> io::Result<u64> {
    use ringshare_engine::{Ring, RingConfig};
    use std::os::fd::OwnedFd;
    use std::sync::Arc;
    const HEAD: usize = 84;
    let sfd = Arc::new(OwnedFd::from(sock.try_clone()?));
    let ffd = Arc::new(OwnedFd::from(file.try_clone()?));
    let mut ring = Ring::new(RingConfig {
        splice_chunk: chunk,
        ..RingConfig::default()
    })?;
    let mut head = vec![0u8; HEAD];
    let mut off = 0u64;
    while off < len {
        let want = chunk.min(usize::try_from(len - off).unwrap_or(usize::MAX));
        ring.send_file(&sfd, head, &ffd, off, want, None, 1);
        let c = loop {
            ring.submit_and_wait(1, None)?;
            if let Some(c) = ring.next_completion() {
                break c;
            }
        };
        head = c.buf.unwrap_or_else(|| vec![0u8; HEAD]);
        match c.result {
            Ok(0) => break,
            Ok(n) => off += n as u64,
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

/// Runs `ringshare limit`; the result line goes to `out`.
pub fn run(args: LimitArgs, out: &mut dyn Write) -> Result<(), String> {
    let report = match args.command {
        LimitCommand::QuicSend { listen } => quic::send(listen, |addr, fingerprint| {
            eprintln!("ringshare limit quic-send: listening on {addr} {fingerprint}")
        })?,
        LimitCommand::QuicRecv {
            trust,
            bytes,
            verify,
            addr,
        } => quic::recv(addr, &trust, bytes as u64, verify)?,
        LimitCommand::Sink {
            listen,
            buf,
            low_water,
        } => {
            let l = TcpListener::bind(listen).map_err(|e| format!("listen on {listen}: {e}"))?;
            let local = l.local_addr().map_err(|e| e.to_string())?;
            eprintln!("ringshare limit sink: listening on {local}");
            let (mut s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            ringshare_engine::net::set_rcvlowat(&s, low_water)
                .map_err(|e| format!("SO_RCVLOWAT: {e}"))?;
            let (t0, c0) = (Instant::now(), cpu_now());
            let bytes = receive_all(&mut s, buf).map_err(|e| format!("receive: {e}"))?;
            Report {
                role: "sink",
                mode: None,
                bytes,
                wall_s: t0.elapsed().as_secs_f64(),
                cpu_s: cpu_now() - c0,
            }
        }
        LimitCommand::Recv {
            mode,
            listen,
            file,
            chunk,
            keep,
        } => {
            let l = TcpListener::bind(listen).map_err(|e| format!("listen on {listen}: {e}"))?;
            let local = l.local_addr().map_err(|e| e.to_string())?;
            let f = recv::create_new(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            eprintln!("ringshare limit recv: listening on {local}");
            let (mut s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            let (t0, c0) = (Instant::now(), cpu_now());
            let bytes = recv::receive_into(mode, &mut s, &f, chunk)
                .map_err(|e| format!("receive ({}): {e}", mode.name()))?;
            let r = Report {
                role: "recv",
                mode: Some(mode.name()),
                bytes,
                wall_s: t0.elapsed().as_secs_f64(),
                cpu_s: cpu_now() - c0,
            };
            drop(f);
            if !keep {
                let _ = std::fs::remove_file(&file);
            }
            r
        }
        LimitCommand::Send {
            mode,
            file,
            addr,
            chunk,
            nonblocking,
        } => {
            let mut f = File::open(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let len = f
                .metadata()
                .map_err(|e| format!("{}: {e}", file.display()))?
                .len();
            let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            s.set_nonblocking(nonblocking).map_err(|e| e.to_string())?;
            let (t0, c0) = (Instant::now(), cpu_now());
            let bytes = send_file(
                mode,
                &mut f,
                &mut s,
                len,
                chunk.unwrap_or(mode.default_chunk()),
            )
            .map_err(|e| format!("send ({}): {e}", mode.name()))?;
            s.shutdown(std::net::Shutdown::Write)
                .map_err(|e| format!("shutdown: {e}"))?;
            s.set_nonblocking(false).map_err(|e| e.to_string())?;
            let r = Report {
                role: "send",
                mode: Some(mode.name()),
                bytes,
                wall_s: t0.elapsed().as_secs_f64(),
                cpu_s: cpu_now() - c0,
            };
            // Wait for the sink to close so that the caller sees both lines before exiting.
            let mut b = [0u8; 64];
            let _ = s.read(&mut b);
            r
        }
    };
    writeln!(out, "{}", report.line()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_zero() {
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn report_line_carries_rate_and_cpu_per_gib() {
        let r = Report {
            role: "send",
            mode: Some(Mode::Splice.name()),
            bytes: 2 << 30,
            wall_s: 1.0,
            cpu_s: 0.5,
        };
        assert_eq!(
            r.line(),
            "role=send mode=splice bytes=2147483648 wall_s=1.000000 cpu_s=0.500000 \
             gbps=2.147484 cpu_s_per_gib=0.250000"
        );
    }

    #[test]
    fn every_sender_mode_moves_the_whole_file_and_the_ring_mode_a_head_before_each_chunk() {
        let data: Vec<u8> = (0..(2 * MIB + 4099) as u32)
            .map(|i| (i % 251) as u8)
            .collect();
        let path = std::env::temp_dir().join(format!("rs-limit-modes-{}", std::process::id()));
        std::fs::write(&path, &data).unwrap();
        for mode in [Mode::Sendfile, Mode::Splice, Mode::Rw, Mode::Ring] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let reader = std::thread::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut got = Vec::new();
                s.read_to_end(&mut got).unwrap();
                got
            });
            let mut f = File::open(&path).unwrap();
            let mut s = TcpStream::connect(addr).unwrap();
            let sent = send_file(mode, &mut f, &mut s, data.len() as u64, MIB).unwrap();
            drop(s);
            let got = reader.join().unwrap();
            assert_eq!(sent, data.len() as u64, "{}", mode.name());
            if mode == Mode::Ring {
                // Three chunks (1 MiB, 1 MiB, 4099 bytes), each behind 84 bytes of head.
                let mut want = Vec::new();
                for c in data.chunks(MIB) {
                    want.extend_from_slice(&[0u8; 84]);
                    want.extend_from_slice(c);
                }
                assert!(got == want, "ring: heads and chunks in order");
            } else {
                assert!(got == data, "{}: the file's bytes", mode.name());
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}
