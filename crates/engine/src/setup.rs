//! How a [`crate::Ring`] is set up: its configuration and the io_uring
//! instance built for it (falling back to fewer setup flags on older kernels).

use std::io;

use io_uring::IoUring;

use crate::probe;

/// How to set up a [`Ring`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Submission queue size (the completion queue is twice as large). Default 256.
    pub entries: u32,
    /// `IORING_SETUP_SINGLE_ISSUER`: only the creating thread submits. Default true.
    pub single_issuer: bool,
    /// `IORING_SETUP_DEFER_TASKRUN` (needs `single_issuer`): completion work runs
    /// only inside [`Ring::submit_and_wait`], on the ring's thread. Default true.
    /// Silently dropped when the kernel refuses it; see [`Ring::setup`].
    /// Its cost: an io-wq worker's completion is work for the ring's thread too, so
    /// each linked step after one that ran on a worker (the splices of a
    /// [`Ring::send_file`]) waits for that thread to enter the kernel, and is then
    /// queued to io-wq again. Without it the worker that ends a step runs the next.
    pub defer_taskrun: bool,
    /// `IORING_SETUP_SQPOLL` (a kernel thread polls the SQ). Default false.
    pub sqpoll: bool,
    /// Largest piece of a [`Ring::send_file`] moved through its pipe at once
    /// (the pipe is sized to it where the kernel allows). Default 1 MiB
    /// (`/proc/sys/fs/pipe-max-size`'s default, so unprivileged servers get it too).
    pub splice_chunk: usize,
    /// Most io_uring worker threads for blocking work (splices) this ring
    /// may have at once; 0 leaves the kernel's limit (RLIMIT_NPROC). Default 256.
    pub blocking_workers_max: u32,
    /// Buffers provided to the kernel for [`Ring::recv_multishot`] (a power
    /// of two; 0: no multishot receive). Default 64.
    pub recv_bufs: u16,
    /// Bytes per provided receive buffer. Default 16 KiB.
    pub recv_buf_len: u32,
    /// Slots of the registered-file table ([`Ring::register_fd`]); 0: none.
    /// Default 1024.
    pub fixed_files: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            entries: 256,
            single_issuer: true,
            defer_taskrun: true,
            sqpoll: false,
            splice_chunk: 1024 * 1024,
            blocking_workers_max: 256,
            recv_bufs: 64,
            recv_buf_len: 16 * 1024,
            fixed_files: 1024,
        }
    }
}

/// The setup flags the kernel actually accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSetup {
    /// `IORING_SETUP_SINGLE_ISSUER` is in effect.
    pub single_issuer: bool,
    /// `IORING_SETUP_DEFER_TASKRUN` is in effect.
    pub defer_taskrun: bool,
    /// `IORING_SETUP_SQPOLL` is in effect.
    pub sqpoll: bool,
}

pub(crate) fn build(config: RingConfig) -> io::Result<(IoUring, RingSetup)> {
    let wanted = RingSetup {
        single_issuer: config.single_issuer,
        defer_taskrun: config.defer_taskrun && config.single_issuer && !config.sqpoll,
        sqpoll: config.sqpoll,
    };
    let attempts = [
        wanted,
        RingSetup {
            defer_taskrun: false,
            ..wanted
        },
        RingSetup {
            single_issuer: false,
            defer_taskrun: false,
            ..wanted
        },
    ];
    let mut last_error = None;
    for setup in attempts {
        let mut builder = IoUring::builder();
        builder.setup_submit_all();
        if setup.single_issuer {
            builder.setup_single_issuer();
        }
        if setup.defer_taskrun {
            builder.setup_defer_taskrun().setup_taskrun_flag();
        } else if !setup.sqpoll {
            builder.setup_coop_taskrun().setup_taskrun_flag();
        }
        if setup.sqpoll {
            builder.setup_sqpoll(1000);
        }
        match builder.build(config.entries) {
            Ok(uring) => return Ok((uring, setup)),
            // EINVAL: a flag this kernel does not know; try with fewer.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last_error = Some(e),
            Err(e) => return Err(probe::setup_error(e)),
        }
    }
    Err(probe::setup_error(last_error.unwrap_or_else(|| {
        io::Error::from_raw_os_error(libc::EINVAL)
    })))
}
