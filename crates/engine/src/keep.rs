//! `pin cpus = auto`: an I/O thread keeps to one CPU, with the io-wq workers that run its
//! splices, while it streams file data, and runs where the scheduler puts it otherwise.
//!
//! A spliced READ reply is a hand-off per chunk between the I/O thread (it starts the chain and
//! hears of its end) and an io-wq worker (it runs the splices). Left to the scheduler, the two
//! and the client's side of the connection move between CPUs; kept on one CPU, the hand-offs stay
//! there (docs/benchmarks.md, session 65). A thread of small requests, on the other hand, does
//! better free to move (session 61): so the hold lasts only while streams go on.

use std::io;

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
}

impl CpuKeep {
    /// For the calling thread, I/O thread `index`. `None` when it may run on one CPU only
    /// (nothing to keep) or its mask cannot be read.
    pub fn for_thread(index: usize) -> Option<CpuKeep> {
        let whole = allowed(&sched_getaffinity(None).ok()?);
        if whole.len() < 2 {
            return None;
        }
        Some(CpuKeep {
            home: whole[index % whole.len()],
            whole,
            held: false,
            last_ms: 0,
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
    /// now on (two system calls when the hold begins, none while it lasts). On an error the thread
    /// runs as before, free, and the caller should stop keeping.
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

    /// Ends the hold once no stream began for `idle_ms`: the thread and its workers may run on
    /// every CPU they could before.
    pub fn let_go_after(&mut self, ring: &mut Ring, now_ms: u64, idle_ms: u64) -> io::Result<()> {
        if !self.held || now_ms < self.last_ms.saturating_add(idle_ms) {
            return Ok(());
        }
        self.held = false;
        place(ring, &self.whole)
    }
}

/// Lets the calling thread, its io-wq workers and those its io-wq starts later run on `cpus`
/// only. (`IORING_REGISTER_IOWQ_AFF` reaches only the workers started after it, so the running
/// ones are placed one by one: the kernel lets a process set its io-wq workers' masks since
/// Linux 6.3.)
fn place(ring: &mut Ring, cpus: &[usize]) -> io::Result<()> {
    let set = set_of(cpus);
    sched_setaffinity(None, &set)?;
    ring.keep_workers_on(cpus)?;
    for tid in workers_of(gettid()) {
        // A worker that exited since the listing is no error.
        match sched_setaffinity(Some(tid), &set) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The io-wq workers of thread `tid` of this process: the kernel names them `iou-wrk-TID`.
fn workers_of(tid: Pid) -> Vec<Pid> {
    let name = format!("iou-wrk-{}", tid.as_raw_nonzero());
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|t| {
            std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                .is_ok_and(|c| c.trim_end() == name)
        })
        .filter_map(Pid::from_raw)
        .collect()
}

/// The CPUs set in `set`, in order.
pub(crate) fn allowed(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect()
}

fn set_of(cpus: &[usize]) -> CpuSet {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    set
}
