//! The two ways a metadata operation can run as a user, measured: as a
//! system call on a thread switched to the user's credentials
//! (`creds::act_as`, the way ringshare does it), or as io_uring operations
//! (OPENAT2, STATX, CLOSE) carrying the user's personality, the thread
//! staying root. One operation is what a CREATE of an existing file costs at
//! least: open it by name beneath a directory, stat it, close it. Each way is
//! run with one user throughout and with two users alternating operation by
//! operation (the worst case for switching).
//!
//!     cargo run --release -p ringshare-engine --example identity_ops -- [DIR] [SECONDS]
//!
//! Root only. DIR (default /dev/shm) gets a scratch directory of 1,000 files
//! owned by two users (uids 59201 and 59202, no passwd entry needed).
//! Prints nanoseconds per operation and the process's CPU, alternating the
//! modes three times.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};
use ringshare_engine::creds::{self, Creds};

const FILES: usize = 1000;

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

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    ThreadOneUser,
    ThreadTwoUsers,
    RingOneUser,
    RingTwoUsers,
    /// No file operation: only the switch to the other user.
    SwitchOnly,
}

struct Setup {
    dir: OwnedFd,
    names: Vec<CString>,
    users: [Arc<Creds>; 2],
}

/// One op with the thread acting as the user: openat2 (beneath the dir),
/// statx of the descriptor, close.
fn thread_op(s: &Setup, i: usize, who: &Creds) {
    creds::act_as(who).expect("switch");
    let fd = rustix::fs::openat2(
        &s.dir,
        s.names[i].as_c_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
        rustix::fs::ResolveFlags::BENEATH,
    )
    .expect("openat2");
    rustix::fs::statx(
        &fd,
        c"",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::BASIC_STATS,
    )
    .expect("statx");
    drop(fd);
}

/// One op on the ring: OPENAT2, then STATX and CLOSE of the new fd, each
/// SQE with the user's personality.
fn ring_op(ring: &mut IoUring, s: &Setup, i: usize, personality: u16) {
    let how = types::OpenHow::new()
        .flags((libc::O_RDONLY | libc::O_CLOEXEC) as u64)
        .resolve(libc::RESOLVE_BENEATH);
    let open = opcode::OpenAt2::new(types::Fd(s.dir.as_raw_fd()), s.names[i].as_ptr(), &how)
        .build()
        .personality(personality)
        .user_data(1);
    // SAFETY: the name and `how` outlive the wait below, which reaps this
    // SQE's completion before either is dropped.
    unsafe { ring.submission().push(&open).expect("sq") };
    ring.submit_and_wait(1).expect("enter");
    let fd = ring.completion().next().expect("cqe").result();
    assert!(fd >= 0, "openat2: {}", -fd);
    let mut stx = std::mem::MaybeUninit::<libc::statx>::uninit();
    let stat = opcode::Statx::new(types::Fd(fd), c"".as_ptr(), stx.as_mut_ptr().cast())
        .flags(libc::AT_EMPTY_PATH)
        .mask(libc::STATX_BASIC_STATS)
        .build()
        .personality(personality)
        .user_data(2);
    let close = opcode::Close::new(types::Fd(fd))
        .build()
        .personality(personality)
        .user_data(3);
    // SAFETY: `stx` and the empty path outlive the wait below, which reaps
    // both completions; the fd is closed only by the CLOSE that follows the
    // STATX in the same submission (linked, so in order).
    unsafe {
        let mut sq = ring.submission();
        sq.push(&stat.flags(io_uring::squeue::Flags::IO_LINK))
            .expect("sq");
        sq.push(&close).expect("sq");
    }
    ring.submit_and_wait(2).expect("enter");
    let mut n = 0;
    for c in ring.completion() {
        assert!(c.result() >= 0, "op {}: {}", c.user_data(), -c.result());
        n += 1;
    }
    assert_eq!(n, 2);
}

fn run(mode: Mode, s: &Setup, ring: &mut IoUring, ids: [u16; 2], secs: f64) -> (f64, f64) {
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut ops = 0usize;
    while t0.elapsed().as_secs_f64() < secs {
        for _ in 0..100 {
            let u = match mode {
                Mode::ThreadOneUser | Mode::RingOneUser => 0,
                Mode::ThreadTwoUsers | Mode::RingTwoUsers | Mode::SwitchOnly => ops % 2,
            };
            // Each user opens only its own files.
            let i = (ops % (FILES / 2)) * 2 + u;
            match mode {
                Mode::ThreadOneUser | Mode::ThreadTwoUsers => thread_op(s, i, &s.users[u]),
                Mode::SwitchOnly => creds::act_as(&s.users[u]).expect("switch"),
                Mode::RingOneUser | Mode::RingTwoUsers => {
                    creds::act_as_server().expect("root");
                    ring_op(ring, s, i, ids[u])
                }
            }
            ops += 1;
        }
    }
    creds::act_as_server().expect("root");
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    (wall / ops as f64 * 1e9, cpu / ops as f64 * 1e9)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let base = args.next().unwrap_or_else(|| "/dev/shm".into());
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    creds::enable().expect("run as root");
    let path = std::path::Path::new(&base).join(format!("rs-identity-ops-{}", std::process::id()));
    std::fs::create_dir_all(&path).expect("mkdir");
    let users = [
        creds::intern(Creds::new(59201, 59201, vec![59201])),
        creds::intern(Creds::new(59202, 59202, vec![59202])),
    ];
    let mut names = Vec::new();
    for i in 0..FILES {
        let p = path.join(format!("f{i}"));
        std::fs::write(&p, b"x").expect("write");
        let uid = users[i % 2].uid();
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).expect("chown");
        let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
        std::fs::set_permissions(&p, mode).expect("chmod");
        names.push(CString::new(format!("f{i}")).expect("name"));
    }
    let dir = rustix::fs::open(
        &path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .expect("open dir");
    let s = Setup { dir, names, users };
    let mut ring = IoUring::builder()
        .setup_single_issuer()
        .build(64)
        .expect("io_uring");
    let mut ids = [0u16; 2];
    for (i, u) in s.users.iter().enumerate() {
        creds::act_as(u).expect("switch");
        ids[i] = ring
            .submitter()
            .register_personality()
            .expect("personality");
    }
    creds::act_as_server().expect("root");
    println!("ns per op (open by name + statx + close), wall / CPU; {secs} s each, three rounds");
    for round in 0..3 {
        for mode in [
            Mode::ThreadOneUser,
            Mode::ThreadTwoUsers,
            Mode::RingOneUser,
            Mode::RingTwoUsers,
            Mode::SwitchOnly,
        ] {
            let (wall, cpu) = run(mode, &s, &mut ring, ids, secs);
            println!("round {round} {mode:?}: {wall:.0} / {cpu:.0}");
        }
    }
    std::thread::sleep(Duration::from_millis(10));
    let _ = std::fs::remove_dir_all(&path);
}
