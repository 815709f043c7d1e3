//! What registered ("fixed") buffers and files would save on the
//! READ-into-memory path: io_uring READ into ordinary heap buffers vs
//! READ_FIXED into the same buffers registered with the ring, and READ
//! naming the file by its slot in the ring's registered-file table instead
//! of its descriptor, from a file (on tmpfs every READ runs in an io_uring
//! worker thread, as ringshare's signed and encrypted READs do).
//!
//!     cargo run --release -p ringshare-engine --example fixed_buffers -- FILE [IO_SIZE] [SECONDS]
//!
//! Prints GB/s and the process's CPU seconds per GiB (user + system, all
//! threads, io-wq workers included) for each, alternating three times.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

const DEPTH: usize = 4;

fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole rusage into the pointer we give it.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    FixedBuffers,
    FixedFile,
}

fn run(file: &File, size: u64, bufs: &mut [Vec<u8>], mode: Mode, secs: f64) -> (f64, f64) {
    let mut ring = IoUring::new(64).expect("io_uring");
    let fixed = mode == Mode::FixedBuffers;
    if mode == Mode::FixedFile {
        ring.submitter()
            .register_files(&[file.as_raw_fd()])
            .expect("register file");
    }
    let io = bufs[0].len();
    if fixed {
        let iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: the buffers outlive the ring (dropped after it, below) and
        // are not moved or resized while registered.
        unsafe { ring.submitter().register_buffers(&iovs) }.expect("register buffers");
    }
    let fd = types::Fd(file.as_raw_fd());
    let slot = types::Fixed(0);
    let mut offset = 0u64;
    let mut bytes = 0u64;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut submit = |ring: &mut IoUring, i: usize, offset: &mut u64| {
        let ptr = bufs[i].as_mut_ptr();
        let e = match mode {
            Mode::FixedBuffers => opcode::ReadFixed::new(fd, ptr, io as u32, i as u16)
                .offset(*offset)
                .build(),
            Mode::FixedFile => opcode::Read::new(slot, ptr, io as u32)
                .offset(*offset)
                .build(),
            Mode::Plain => opcode::Read::new(fd, ptr, io as u32)
                .offset(*offset)
                .build(),
        }
        .user_data(i as u64);
        // SAFETY: the buffer stays alive and untouched until its CQE is reaped.
        unsafe { ring.submission().push(&e) }.expect("sq full");
        *offset = (*offset + io as u64) % (size - io as u64);
    };
    for i in 0..DEPTH {
        submit(&mut ring, i, &mut offset);
    }
    while t0.elapsed() < Duration::from_secs_f64(secs) {
        ring.submit_and_wait(1).expect("submit");
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (i, r) in done {
            assert!(r > 0, "read failed: {r}");
            bytes += r as u64;
            submit(&mut ring, i as usize, &mut offset);
        }
    }
    ring.submit_and_wait(DEPTH).ok();
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    drop(ring);
    let gib = bytes as f64 / (1u64 << 30) as f64;
    (bytes as f64 / wall / 1e9, cpu / gib)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("FILE");
    let io: usize = args.get(2).map_or(1 << 20, |s| s.parse().expect("IO_SIZE"));
    let secs: f64 = args.get(3).map_or(3.0, |s| s.parse().expect("SECONDS"));
    let file = File::open(path).expect("open");
    let size = file.metadata().expect("stat").len();
    let mut bufs: Vec<Vec<u8>> = (0..DEPTH).map(|_| vec![0u8; io]).collect();
    for round in 0..3 {
        for mode in [Mode::Plain, Mode::FixedBuffers, Mode::FixedFile] {
            let (gbs, cpu) = run(&file, size, &mut bufs, mode, secs);
            let name = match mode {
                Mode::Plain => "READ",
                Mode::FixedBuffers => "READ_FIXED",
                Mode::FixedFile => "READ, fixed file",
            };
            println!("round {round} {name:>16}: {gbs:.3} GB/s, {cpu:.3} CPU s/GiB");
        }
    }
}
