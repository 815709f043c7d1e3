//! `ringshare limit recv`: the plain receiver, the write side of the physical limit. It accepts
//! one connection and writes everything that arrives into a new file, in `chunk`-byte writes at
//! increasing offsets (as a file server does with a client's sequential WRITEs), with no
//! protocol: what a file server that lands the bytes once can spend at least.
//!
//! Modes: `rw` reads the socket into a buffer until it holds a chunk, then `pwrite`s it;
//! `splice` moves a chunk from the socket into a pipe (`splice(2)`, non-blocking, waiting in
//! `poll(2)`), then from the pipe into the file at its offset (the kernel copies the pipe's
//! pages into the page cache, nothing passes through user memory); `uring` receives chunks
//! into buffers with io_uring `RECV` and writes them with io_uring `WRITE`, two buffers
//! alternating so that one is received while the other is written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use clap::ValueEnum;
use ringshare_engine::{Ring, RingConfig, SharedFd};
use rustix::pipe::SpliceFlags;

/// How `recv` moves the bytes from the socket to the file.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvMode {
    /// `read(2)` into a buffer, then `pwrite(2)` it.
    Rw,
    /// `splice(2)` socket -> pipe, then pipe -> file.
    Splice,
    /// io_uring `RECV` into a buffer, then io_uring `WRITE`.
    Uring,
}

impl RecvMode {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            RecvMode::Rw => "rw",
            RecvMode::Splice => "splice",
            RecvMode::Uring => "uring",
        }
    }
}

/// Creates `path` anew (an old file of that name is removed first: the point is writing
/// pages the file did not have).
pub fn create_new(path: &std::path::Path) -> io::Result<File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
}

/// Receives from `sock` until EOF and writes it all into `file` from offset 0 in `chunk`-byte
/// writes; returns the bytes written.
pub fn receive_into(
    mode: RecvMode,
    sock: &mut TcpStream,
    file: &File,
    chunk: usize,
) -> io::Result<u64> {
    let chunk = chunk.max(1);
    match mode {
        RecvMode::Rw => receive_rw(sock, file, chunk),
        RecvMode::Splice => receive_splice(sock, file, chunk),
        RecvMode::Uring => receive_uring(sock, file, chunk),
    }
}

/// Reads until `buf` is full or the peer closed; returns the count.
fn fill(sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match sock.read(&mut buf[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

fn receive_rw(sock: &mut TcpStream, file: &File, chunk: usize) -> io::Result<u64> {
    let mut buf = vec![0u8; chunk];
    let mut off = 0u64;
    loop {
        let n = fill(sock, &mut buf)?;
        if n == 0 {
            return Ok(off);
        }
        file.write_all_at(&buf[..n], off)?;
        off += n as u64;
        if n < chunk {
            return Ok(off);
        }
    }
}

/// Waits until `sock` has bytes (or the peer closed); `timeout_ms` 0 only looks.
fn readable(sock: &TcpStream, timeout_ms: i32) -> io::Result<bool> {
    let mut fds = [rustix::event::PollFd::new(
        sock,
        rustix::event::PollFlags::IN,
    )];
    let t = rustix::event::Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    };
    let timeout = (timeout_ms >= 0).then_some(&t);
    loop {
        match rustix::event::poll(&mut fds, timeout) {
            Ok(n) => return Ok(n > 0),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

fn receive_splice(sock: &mut TcpStream, file: &File, chunk: usize) -> io::Result<u64> {
    let (pr, pw) = rustix::pipe::pipe()?;
    ringshare_engine::size_pipe(&pw, chunk)?;
    let mut off = 0u64;
    let mut eof = false;
    while !eof {
        // Fill the pipe with a chunk (a socket's data can take a pipe slot per fragment, so a
        // full pipe may hold less: then it is written as it is).
        let mut in_pipe = 0usize;
        while in_pipe < chunk {
            let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
            match rustix::pipe::splice(&*sock, None, &pw, None, chunk - in_pipe, flags) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => in_pipe += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    // The socket is empty (wait for it) or the pipe is full (write it out).
                    if in_pipe > 0 && readable(sock, 0)? {
                        break;
                    }
                    readable(sock, -1)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        while in_pipe > 0 {
            match rustix::pipe::splice(&pr, None, file, Some(&mut off), in_pipe, SpliceFlags::MOVE)
            {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => in_pipe -= n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(off)
}

/// Tokens of the io_uring receiver: which of the two buffers, and whether it is its receive
/// or its write.
const RECV: u64 = 0;
const WRITE: u64 = 2;

fn receive_uring(sock: &mut TcpStream, file: &File, chunk: usize) -> io::Result<u64> {
    let mut ring = Ring::new(RingConfig {
        entries: 8,
        recv_bufs: 0,
        fixed_files: 0,
        ..RingConfig::default()
    })?;
    let sock_fd: SharedFd = Arc::new(OwnedFd::from(sock.try_clone()?));
    let file_fd: SharedFd = Arc::new(OwnedFd::from(file.try_clone()?));
    // Per buffer: the offset its bytes go to once full.
    let mut at = [0u64; 2];
    let mut next_off = 0u64;
    let mut written = 0u64;
    let mut in_flight = 0usize;
    let mut eof = false;
    // Buffer 0 receives first; buffer 1 waits for buffer 0 to be full.
    let mut idle: Vec<(usize, Vec<u8>)> = vec![(1, Vec::with_capacity(chunk))];
    ring.recv(&sock_fd, Vec::with_capacity(chunk), RECV);
    in_flight += 1;
    let mut receiving = true;
    while in_flight > 0 {
        ring.submit_and_wait(1, None)?;
        while let Some(mut c) = ring.next_completion() {
            in_flight -= 1;
            let which = (c.user_data & 1) as usize;
            let mut buf = c.take_buf().unwrap_or_default();
            let n = c.result?;
            if c.user_data & WRITE != 0 {
                written += n as u64;
                buf.clear();
                idle.push((which, buf));
            } else if n > 0 && buf.len() < chunk {
                ring.recv(&sock_fd, buf, c.user_data);
                in_flight += 1;
                continue;
            } else {
                receiving = false;
                eof |= n == 0;
                if !buf.is_empty() {
                    at[which] = next_off;
                    next_off += buf.len() as u64;
                    let end = buf.len();
                    ring.write_at(&file_fd, buf, 0..end, at[which], None, WRITE | which as u64);
                    in_flight += 1;
                }
            }
            if !receiving && !eof {
                if let Some((k, b)) = idle.pop() {
                    ring.recv(&sock_fd, b, RECV | k as u64);
                    in_flight += 1;
                    receiving = true;
                }
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn every_mode_writes_exactly_the_bytes_received_into_a_new_file() {
        let data: Vec<u8> = (0..(3 << 20) + 12_345)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        for mode in [RecvMode::Rw, RecvMode::Splice, RecvMode::Uring] {
            let dir = std::env::temp_dir().join(format!(
                "ringshare-limit-recv-{}-{}",
                std::process::id(),
                mode.name()
            ));
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let sent = data.clone();
            let t = std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                // In uneven pieces, so that chunks do not line up with the sends.
                for piece in sent.chunks(300_001) {
                    s.write_all(piece).unwrap();
                }
            });
            let (mut s, _) = l.accept().unwrap();
            let f = create_new(&dir).unwrap();
            let n = receive_into(mode, &mut s, &f, 1 << 20).unwrap();
            t.join().unwrap();
            let got = std::fs::read(&dir).unwrap();
            std::fs::remove_file(&dir).unwrap();
            assert_eq!(n, data.len() as u64, "{}", mode.name());
            assert!(
                got == data,
                "{}: the file differs from what was sent",
                mode.name()
            );
        }
    }
}
