//! `pin cpus = auto`: an I/O thread keeps to one CPU, with the io-wq workers that run its
//! splices, while it streams file data, and runs where the scheduler puts it otherwise.
//!
//! A spliced READ reply is a hand-off per chunk between the I/O thread (it starts the chain and
//! hears of its end) and an io-wq worker (it runs the splices). Left to the scheduler, the two
//! and the client's side of the connection move between CPUs; kept on one CPU, the hand-offs stay
//! there (docs/benchmarks.md, session 65). A thread of small requests, on the other hand, does
//! better free to move (session 61): so the hold lasts only while streams go on.

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;

use rustix::fs::{Mode, OFlags, RawDir};
use rustix::path::DecInt;
use rustix::process::Pid;
use rustix::thread::{gettid, sched_getaffinity, sched_setaffinity, CpuSet};

use crate::Ring;

/// An I/O thread's hold on its CPU while it streams.
pub struct CpuKeep {
    /// The CPU this thread keeps to: the index-th its process may run on (the CPU
    /// `pin cpus = yes` would pin it to).
    home: usize,
    /// The CPUs the thread may run on outside a hold (its mask when this was made).
    whole: Vec<usize>,
    held: bool,
    /// When the last stream began, on the caller's clock (ms).
    last_ms: u64,
    /// How long a hold outlasts the start of the last stream (ms).
    idle_ms: u64,
}

impl CpuKeep {
    /// For the calling thread, I/O thread `index`, whose holds end `idle_ms` after the last
    /// stream began. `None` when it may run on one CPU only (nothing to keep) or its mask cannot
    /// be read.
    pub fn for_thread(index: usize, idle_ms: u64) -> Option<CpuKeep> {
        let whole = allowed(&sched_getaffinity(None).ok()?);
        if whole.len() < 2 {
            return None;
        }
        Some(CpuKeep {
            home: home_cpu(&whole, index),
            whole,
            held: false,
            last_ms: 0,
            idle_ms,
        })
    }

    /// The CPU a hold keeps to.
    pub fn home(&self) -> usize {
        self.home
    }

    /// Whether the thread keeps to its CPU now.
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// A stream begins at `now_ms`: the thread and the workers of its io-wq keep to its CPU from
    /// now on. Its start sets the thread's mask, its io-wq's and each running worker's (found in
    /// /proc/self/task); while it lasts, nothing. On an error the thread runs as before, free, and
    /// the caller should stop keeping.
    pub fn hold(&mut self, ring: &mut Ring, now_ms: u64) -> io::Result<()> {
        self.last_ms = now_ms;
        if self.held {
            return Ok(());
        }
        if let Err(e) = place(ring, &[self.home]) {
            let _ = place(ring, &self.whole);
            return Err(e);
        }
        self.held = true;
        Ok(())
    }

    /// When the hold ends if no stream begins meanwhile (on the caller's clock): `idle_ms` after
    /// the last began. `None` while there is no hold.
    pub fn ends_at(&self) -> Option<u64> {
        self.held.then(|| self.last_ms.saturating_add(self.idle_ms))
    }

    /// Ends the hold once no stream began for `idle_ms` ([`CpuKeep::ends_at`] is past): the
    /// thread and its workers may run on every CPU they could before.
    pub fn let_go_if_idle(&mut self, ring: &mut Ring, now_ms: u64) -> io::Result<()> {
        if self.ends_at().is_none_or(|end| now_ms < end) {
            return Ok(());
        }
        self.held = false;
        place(ring, &self.whole)
    }
}

/// Lets the calling thread, its io-wq workers and those its io-wq starts later run on `cpus`
/// only. (`IORING_REGISTER_IOWQ_AFF` reaches only the workers started after it, so the running
/// ones are placed one by one: the kernel lets a process set its io-wq workers' masks since
/// Linux 6.3.) Allocates nothing: a hold begins while requests are being served.
fn place(ring: &mut Ring, cpus: &[usize]) -> io::Result<()> {
    let set = set_of(cpus);
    sched_setaffinity(None, &set)?;
    ring.keep_workers_on(cpus)?;
    each_worker(|tid| {
        // A worker that exited since the listing is no error.
        match sched_setaffinity(Some(tid), &set) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(e.into()),
        }
    })
}

/// Calls `f` with each io-wq worker of the calling thread (the kernel names them `iou-wrk-TID`),
/// read from /proc/self/task into buffers on the stack; stops at `f`'s first error.
fn each_worker(mut f: impl FnMut(Pid) -> io::Result<()>) -> io::Result<()> {
    let mut want = Stack::new();
    want.put(b"iou-wrk-");
    want.put(DecInt::new(gettid().as_raw_nonzero().get()).as_bytes());
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let tasks = rustix::fs::open("/proc/self/task", flags, Mode::empty())?;
    let mut listing = [MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = RawDir::new(&tasks, &mut listing);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        // "." and ".." are no task.
        let Some(tid) = decimal_of(name) else {
            continue;
        };
        let mut path = Stack::new();
        path.put(name);
        path.put(b"/comm\0");
        let Ok(path) = CStr::from_bytes_with_nul(path.bytes()) else {
            continue;
        };
        let Ok(comm) = rustix::fs::openat(
            &tasks,
            path,
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue; // the task ended meanwhile
        };
        let mut got = [0u8; 32];
        let n = rustix::io::read(&comm, &mut got).unwrap_or(0);
        let got = &got[..n];
        if got.strip_suffix(b"\n").unwrap_or(got) == want.bytes() {
            if let Some(pid) = Pid::from_raw(tid) {
                f(pid)?;
            }
        }
    }
    Ok(())
}

/// A short name or path built on the stack (longer input is cut at 32 bytes).
struct Stack {
    buf: [u8; 32],
    len: usize,
}

impl Stack {
    fn new() -> Stack {
        Stack {
            buf: [0; 32],
            len: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// A task id from its directory's name; `None` for "." and "..".
fn decimal_of(name: &[u8]) -> Option<i32> {
    if name.is_empty() || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}

/// The CPU I/O thread `index` runs on when pinned or kept: the index-th of `cpus` (the CPUs its
/// process may run on), wrapping around when there are more threads than CPUs.
pub(crate) fn home_cpu(cpus: &[usize], index: usize) -> usize {
    cpus[index % cpus.len()]
}

/// The CPUs set in `set`, in order.
pub(crate) fn allowed(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect()
}

pub(crate) fn set_of(cpus: &[usize]) -> CpuSet {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    set
}
