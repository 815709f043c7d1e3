//! [`Ring`]: one io_uring instance, its in-flight operations and their completions.
//!
//! # The push promise
//!
//! Pushing an SQE is unsafe because the kernel will read and write through the
//! pointers in it until the operation's last completion. This module keeps
//! that promise in one place, [`Ring::push_sqe`], under one invariant:
//!
//! > Every SQE the engine pushes either carries no pointer (cancel, close,
//! > fsync), or points only into memory owned by the slab entry whose key is
//! > the SQE's `user_data` (bits 55-62, the step of a linked chain, aside): a
//! > `Vec`'s heap buffer, a `Box`, or a `Vec` of iovecs, none of which moves
//! > when the slab grows. A slab entry is removed only when its final CQE has
//! > been reaped (no `IORING_CQE_F_MORE`; for a chain, every CQE of the
//! > round), and a ring that is dropped with entries still in flight leaks
//! > them instead of freeing them. The fds used by those SQEs are kept open
//! > by an `Arc<OwnedFd>` clone (or, for a send-file pipe, the `OwnedFd`
//! > itself) in the same slab entry.
//!
//! An SQE may name a registered-file slot instead of an fd (`Op::fixed`):
//! the slot is counted as used by the op until the op leaves the slab, and
//! is emptied and handed to another fd only when unregistered and unused, so
//! an SQE never reaches a file other than the one its op was started on.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::bufring::BufRing;
use crate::completion::Completion;
use crate::creds::Creds;
use crate::files::FileTable;
use crate::op::{
    cqe_result, empty_msghdr, Op, OpKind, Pipe, Plan, SendFile, IOVECS_MAX, NOTIF_USAGE_ZC_COPIED,
};
use crate::personality::Personalities;
use crate::setup::build;
pub use crate::setup::{RingConfig, RingSetup};
use crate::slab::Slab;
use crate::{probe, SharedFd};

/// `user_data` of the engine's own pointer-free SQEs (cancels); never a slab key.
const INTERNAL_USER_DATA: u64 = 1 << 63;

/// Where the step of a chained SQE sits in its `user_data`: bits 55-62 hold
/// its index in the round plus one (slab keys leave them clear); 0 is a
/// single-SQE operation.
const STEP_SHIFT: u32 = 55;
const STEP_MASK: u64 = 0xFF << STEP_SHIFT;

/// Idle pipes a ring keeps for [`Ring::send_file`].
const PIPES_KEPT_MAX: usize = 16;
/// `send_vectored` iovec lists and `msghdr`s, and send-file boxes, kept
/// for reuse (each).
const SPARE_MSGS_MAX: usize = 16;

/// How long dropping a ring waits for cancelled operations to complete.
const DROP_WAIT_MAX: Duration = Duration::from_secs(2);

/// How often dropping a ring re-issues "cancel everything" while waiting.
const DROP_CANCEL_INTERVAL: Duration = Duration::from_millis(100);

/// Bound on `submit` calls made in one `submit_and_wait` to drain the backlog.
const BACKLOG_SUBMITS_MAX: usize = 16;

/// Operations leaked by dropped rings because the kernel never completed them.
static LEAKED_OPS: AtomicU64 = AtomicU64::new(0);

/// Number of operations (with their buffers) leaked so far by dropped rings
/// whose operations did not complete in time after being cancelled.
pub fn leaked_ops() -> u64 {
    LEAKED_OPS.load(Ordering::Relaxed)
}

/// A pipe for [`Ring::splice`]: bytes written to `write` come out of `read`;
/// it holds `capacity` bytes at most.
pub struct SplicePipe {
    pub read: SharedFd,
    pub write: SharedFd,
    pub capacity: usize,
}

/// Counters for benchmarks: syscalls and queue entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// `io_uring_enter` calls made by the engine.
    pub submits: u64,
    /// SQEs pushed (continuations of short sends/writes included).
    pub sqes: u64,
    /// CQEs reaped.
    pub cqes: u64,
}

/// Wakes a [`Ring`] from any thread: its `submit_and_wait` returns and
/// `next_completion` yields a completion with `user_data == Ring::WAKE_TOKEN`
/// whose result is the number of wakes since the last one (wakes coalesce).
#[derive(Debug, Clone)]
pub struct Waker {
    eventfd: Arc<OwnedFd>,
}

impl Waker {
    /// Wakes the ring. Safe from signal-handling threads (one `write(2)`).
    pub fn wake(&self) -> io::Result<()> {
        rustix::io::write(&*self.eventfd, &1u64.to_ne_bytes())?;
        Ok(())
    }
}

/// An op in flight, named to [`Ring::need`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpKey(u64);

/// An SQE waiting for room in the submission queue.
enum Pending {
    /// The slab entry's SQE (first submission or continuation).
    Op(u64),
    /// Cancel the slab entry with this key.
    Cancel(u64),
    /// Cancel every request in flight (used when dropping).
    CancelAll,
}

/// One io_uring instance. Not `Send`: with `single_issuer` the kernel binds
/// the ring to the thread that created it, so create it on the thread that runs it.
pub struct Ring {
    uring: IoUring,
    ops: Slab<Op>,
    /// SQEs that did not fit in the SQ, in order; pushed before any newer SQE.
    backlog: VecDeque<Pending>,
    /// Completions ready for the caller.
    ready: VecDeque<Completion>,
    waker: Waker,
    /// Slab key of the waker's eventfd read.
    waker_key: u64,
    stats: RingStats,
    setup: RingSetup,
    /// Set while dropping: completions end operations instead of continuing them.
    closing: bool,
    /// Empty pipes for `send_file`, and the chunk size they are made for.
    pipes: Vec<Pipe>,
    /// The iovec lists and `msghdr`s of finished `send_vectored` operations,
    /// for the next ones (no allocation per send).
    spare_msgs: Vec<(Vec<libc::iovec>, Box<libc::msghdr>)>,
    /// The boxes of ended send-files, for the next ones: kept boxed, since
    /// reusing the box (not its contents) is the point.
    #[allow(clippy::vec_box)]
    spare_send_files: Vec<Box<SendFile>>,
    splice_chunk: usize,
    /// Provided buffers for multishot receives, if the kernel took them.
    recv_bufs: Option<BufRing>,
    /// The provided buffer of the completion last returned by
    /// `next_completion`, and that lending's number: given back to the
    /// kernel by the next `next_completion` (or `submit_and_wait`).
    lent: Option<(u16, u64)>,
    lendings: u64,
    /// The registered-file table, if the kernel took one.
    files: Option<FileTable>,
    /// Registered credentials SQEs run as.
    personalities: Personalities,
    /// File reads and writes started now go to an io_uring worker at once ([`Ring::punted`]).
    punt: bool,
    /// Sends started now complete quietly ([`Ring::quietly`]).
    quiet: bool,
    /// Quiet ops in flight.
    quiet_in_flight: usize,
}

impl Ring {
    /// `user_data` of wake-up completions. Callers must not use it as a token.
    pub const WAKE_TOKEN: u64 = u64::MAX;

    /// Creates a ring, checks the opcodes ringshare needs (see [`probe`]) and
    /// arms the waker. The error explains why io_uring is unusable, if it is.
    pub fn new(config: RingConfig) -> io::Result<Ring> {
        if config.entries == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "RingConfig::entries must be at least 1",
            ));
        }
        let (uring, setup) = build(config)?;
        probe::check_ring(&uring)?;
        if config.blocking_workers_max > 0 {
            // [bounded, unbounded]: splices are "unbounded" work. A failure only
            // means an older kernel; the default limit then applies.
            let mut max = [0, config.blocking_workers_max];
            let _ = uring.submitter().register_iowq_max_workers(&mut max);
        }
        if !uring.params().is_feature_skip_cqe_on_success() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring lacks IOSQE_CQE_SKIP_SUCCESS (Linux 5.17 or newer is needed)",
            ));
        }
        let eventfd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
        let personalities = Personalities::new(&uring.submitter())?;
        let mut ring = Ring {
            uring,
            ops: Slab::with_capacity(config.entries as usize),
            backlog: VecDeque::new(),
            ready: VecDeque::new(),
            waker: Waker {
                eventfd: Arc::new(eventfd),
            },
            waker_key: 0,
            stats: RingStats::default(),
            setup,
            closing: false,
            pipes: Vec::new(),
            spare_msgs: Vec::new(),
            spare_send_files: Vec::new(),
            splice_chunk: config.splice_chunk.max(4096),
            recv_bufs: None,
            lent: None,
            lendings: 0,
            files: None,
            personalities,
            punt: false,
            quiet: false,
            quiet_in_flight: 0,
        };
        if config.fixed_files > 0 {
            ring.files = FileTable::new(&ring.uring.submitter(), config.fixed_files);
        }
        if config.recv_bufs > 0 {
            // An older kernel (before 5.19) refuses the ring: receives then
            // use a buffer each (`recv_multishot` reports Unsupported).
            let bufs = BufRing::new(config.recv_bufs, config.recv_buf_len)?;
            if bufs.register(&ring.uring.submitter()).is_ok() {
                ring.recv_bufs = Some(bufs);
            }
        }
        let fd = Arc::clone(&ring.waker.eventfd);
        ring.waker_key = ring.start(
            Ring::WAKE_TOKEN,
            OpKind::WakerRead {
                fd,
                value: Box::new(0),
            },
        );
        Ok(ring)
    }

    /// The setup flags in effect (after fallbacks).
    pub fn setup(&self) -> RingSetup {
        self.setup
    }

    /// Syscall and queue counters.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Operations in flight or queued, not counting the waker's.
    pub fn in_flight(&self) -> usize {
        self.ops.len() - usize::from(self.ops.contains(self.waker_key))
    }

    /// How many users' io_uring personalities this ring has registered (the
    /// server's own not counted).
    pub fn personality_count(&self) -> usize {
        self.personalities.len()
    }

    /// Unregisters the personalities of credentials no one holds any more
    /// (their sessions ended) and no operation names. Cheap; call it now and
    /// then, e.g. when connections close.
    pub fn sweep_personalities(&mut self) {
        self.personalities.sweep(&self.uring.submitter());
    }

    /// A handle that wakes this ring from any thread.
    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// Arms a multishot accept on a listening socket. Each connection comes
    /// as a completion with `fd` set and `result` = its fd number.
    ///
    /// Re-arming: when the kernel ends the multishot after a success or a
    /// transient network error (`ECONNABORTED`, `EINTR`, …), the engine
    /// re-arms it and the completion still says `more = true`. A completion
    /// with `more = false` means the accept is no longer armed (cancelled, or
    /// a resource error such as `EMFILE`/`ENFILE`/`ENOMEM`): the caller
    /// decides whether and when to call `accept_multishot` again.
    pub fn accept_multishot(&mut self, listener: &SharedFd, token: u64) {
        self.start(
            token,
            OpKind::Accept {
                fd: Arc::clone(listener),
            },
        );
    }

    /// Receives into `buf`'s spare capacity: bytes are appended after
    /// `buf.len()`. `result` is the count, 0 at end of stream. A buffer with
    /// no spare capacity completes at once with `InvalidInput`.
    pub fn recv(&mut self, fd: &SharedFd, buf: Vec<u8>, token: u64) {
        self.recv_up_to(fd, buf, usize::MAX, token);
    }

    /// Like [`Ring::recv`], but receives at most `max` bytes (`max` 0 is
    /// `InvalidInput`), leaving the rest queued in the socket.
    pub fn recv_up_to(&mut self, fd: &SharedFd, buf: Vec<u8>, max: usize, token: u64) {
        self.start_recv(fd, buf, max, false, token);
    }

    /// Like [`Ring::recv_up_to`], for the answer to what was just sent: the kernel arms the
    /// socket's poll at once instead of trying a receive first. No timer of its own: the caller
    /// keeps the deadline and [`Ring::cancel`]s it when due (it then ends with `ECANCELED`).
    /// (A RECV linked to an `IORING_OP_LINK_TIMEOUT` did that in the kernel, at the cost of a
    /// timer set up and taken down in nearly every call: docs/benchmarks.md, session 72.)
    pub fn recv_answer(&mut self, fd: &SharedFd, buf: Vec<u8>, max: usize, token: u64) {
        self.start_recv(fd, buf, max, true, token);
    }

    /// A RECV of at most `max` bytes into `buf`'s spare capacity, its poll armed first or not;
    /// one with no room or no `max` is refused at once.
    fn start_recv(
        &mut self,
        fd: &SharedFd,
        buf: Vec<u8>,
        max: usize,
        poll_first: bool,
        token: u64,
    ) {
        if buf.capacity() == buf.len() || max == 0 {
            return self.reject(token, buf, "recv buffer has no spare capacity");
        }
        self.start(
            token,
            OpKind::Recv {
                fd: Arc::clone(fd),
                buf,
                max,
                poll_first,
            },
        );
    }

    /// Keeps the io-wq workers this thread's io-wq starts from now on (they run its blocking work,
    /// splices among it) on `cpus` (`IORING_REGISTER_IOWQ_AFF`). Workers already running keep
    /// their mask (see `CpuKeep`, which places them one by one).
    pub fn keep_workers_on(&mut self, cpus: &[usize]) -> io::Result<()> {
        // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in cpus {
            if cpu >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            // SAFETY: cpu < CPU_SETSIZE (checked above): the bit lies inside the set.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        self.uring.submitter().register_iowq_aff(&set)
    }

    /// Registers `fd` in the ring's file table: operations on it then name
    /// its slot instead of the fd, so the kernel takes no file reference per
    /// SQE. False when there is no table or no free slot (operations then use
    /// the fd as usual). The ring keeps `fd` open until [`Ring::unregister_fd`]
    /// and every operation that used the slot have finished.
    pub fn register_fd(&mut self, fd: &SharedFd) -> bool {
        match self.files.as_mut() {
            Some(t) => t.register(&self.uring.submitter(), fd),
            None => false,
        }
    }

    /// Takes `fd` out of the file table: operations started from now on use
    /// the fd itself; those in flight finish with the slot.
    pub fn unregister_fd(&mut self, fd: &SharedFd) {
        if let Some(t) = self.files.as_mut() {
            t.unregister(&self.uring.submitter(), fd.as_raw_fd());
        }
    }

    /// Removes an op from the slab, ending its use of a registered slot.
    fn remove_op(&mut self, key: u64) -> Option<Op> {
        let op = self.ops.remove(key)?;
        self.quiet_in_flight -= usize::from(op.quiet);
        self.personalities.release(op.personality);
        if let (Some((_, slot)), Some(t)) = (op.fixed, self.files.as_mut()) {
            t.done_with(&self.uring.submitter(), slot);
        }
        Some(op)
    }

    /// Whether [`Ring::recv_multishot`] is available (provided buffers configured
    /// and accepted by the kernel).
    pub fn has_recv_bufs(&self) -> bool {
        self.recv_bufs.is_some()
    }

    /// Arms a multishot receive: each arrival of bytes completes with
    /// `result = Ok(n)` and the bytes in a provided buffer, read with
    /// [`Ring::received`]; `more = true` while the receive stays armed. It
    /// ends with a completion with `more = false`: `Ok(0)` at end of stream,
    /// `ECANCELED` after [`Ring::cancel`], `ENOBUFS` when every provided
    /// buffer was in use (arm it again), or another error. Without provided
    /// buffers ([`Ring::has_recv_bufs`]) it completes at once with `Unsupported`.
    pub fn recv_multishot(&mut self, fd: &SharedFd, token: u64) {
        if self.recv_bufs.is_none() {
            let e = io::Error::new(io::ErrorKind::Unsupported, "no provided receive buffers");
            return self.complete_now(token, Err(e), None, None);
        }
        self.start(token, OpKind::RecvMulti { fd: Arc::clone(fd) });
    }

    /// The bytes a `recv_multishot` completion brought, valid until the next
    /// [`Ring::next_completion`] (which gives the buffer back to the kernel).
    /// Empty for any other completion, and for one that is no longer the
    /// latest returned.
    pub fn received(&self, c: &Completion) -> &[u8] {
        match (c.recv_buf, self.lent, &self.recv_bufs) {
            (Some((bid, len, n)), Some((lent_bid, lent_n)), Some(bufs))
                if n == lent_n && bid == lent_bid =>
            {
                bufs.data(bid, len)
            }
            _ => &[],
        }
    }

    /// Gives the buffer of the last returned completion back to the kernel.
    fn give_back_lent(&mut self) {
        if let (Some((bid, _)), Some(bufs)) = (self.lent.take(), self.recv_bufs.as_mut()) {
            bufs.push(bid);
            bufs.publish();
        }
    }

    /// Sends `buf[offset..]`, resubmitting after short sends, and completes
    /// once: `Ok(buf.len() - offset)` or the first error (bytes sent before
    /// the error are not reported). `offset > buf.len()` is `InvalidInput`.
    /// Its key names it to [`Ring::need`] (`None`: it completed at once).
    pub fn send(
        &mut self,
        fd: &SharedFd,
        buf: Vec<u8>,
        offset: usize,
        token: u64,
    ) -> Option<OpKey> {
        self.start_send(fd, buf, offset, token, false)
    }

    /// Like [`Ring::send`] (all of `buf[offset..]` or an error), but with
    /// `SEND_ZC`: the kernel sends from the buffer's own pages instead of
    /// copying them into the socket, and the completion (with the buffer)
    /// comes only once the kernel has let go of them. `zc_copied` in the
    /// completion says whether the kernel copied anyway: on loopback it
    /// always does, and then zero-copy costs more than a plain send.
    pub fn send_zc(&mut self, fd: &SharedFd, buf: Vec<u8>, offset: usize, token: u64) {
        self.start_send(fd, buf, offset, token, true);
    }

    /// [`Ring::send`] or, with `zc`, [`Ring::send_zc`].
    fn start_send(
        &mut self,
        fd: &SharedFd,
        buf: Vec<u8>,
        offset: usize,
        token: u64,
        zc: bool,
    ) -> Option<OpKey> {
        if offset > buf.len() {
            self.reject(token, buf, "send offset past the end of the buffer");
            return None;
        }
        if offset == buf.len() {
            self.complete_now(token, Ok(0), Some(buf), None);
            return None;
        }
        let fd = Arc::clone(fd);
        let kind = if zc {
            OpKind::SendZc {
                fd,
                buf,
                pos: offset,
                sent: 0,
                notifs: 0,
                done: None,
                copied: false,
            }
        } else {
            OpKind::Send {
                fd,
                buf,
                pos: offset,
                sent: 0,
            }
        };
        Some(OpKey(self.start(token, kind)))
    }

    /// Sends all of `bufs` in order with `sendmsg` (no joining), with the
    /// same all-or-error semantics as [`Ring::send`]. At most 1024 buffers.
    pub fn send_vectored(
        &mut self,
        fd: &SharedFd,
        bufs: Vec<Vec<u8>>,
        token: u64,
    ) -> Option<OpKey> {
        if bufs.len() > IOVECS_MAX {
            let mut c = Completion::new(
                token,
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "send_vectored takes at most 1024 buffers",
                )),
            );
            c.bufs = Some(bufs);
            self.ready.push_back(c);
            return None;
        }
        let total = bufs.iter().map(Vec::len).sum();
        if total == 0 {
            self.complete_now(token, Ok(0), None, Some(bufs));
            return None;
        }
        // `iov` and `msg` are filled in before each SQE (see `Op::sqe`).
        let (mut iov, msg) = self
            .spare_msgs
            .pop()
            .unwrap_or_else(|| (Vec::new(), empty_msghdr()));
        iov.clear();
        iov.reserve(bufs.len());
        let key = self.start(
            token,
            OpKind::SendMsg {
                fd: Arc::clone(fd),
                bufs,
                iov,
                msg,
                sent: 0,
                total,
            },
        );
        Some(OpKey(key))
    }

    /// Reads up to `len` bytes at file `offset`, appended after `buf.len()`
    /// (capacity is reserved as needed). A short count means end of file; it
    /// is not continued. `result` is the count. It runs as `who` (`None`:
    /// the server; see [`Ring::personality_count`]).
    pub fn read_at(
        &mut self,
        fd: &SharedFd,
        mut buf: Vec<u8>,
        len: usize,
        offset: u64,
        who: Option<&Arc<Creds>>,
        token: u64,
    ) {
        if len == 0 {
            return self.complete_now(token, Ok(0), Some(buf), None);
        }
        buf.reserve(len);
        self.start_as(
            token,
            OpKind::Read {
                fd: Arc::clone(fd),
                buf,
                len,
                offset,
            },
            who,
        );
    }

    /// Writes `buf[range]` at file `offset`, continuing short writes, and
    /// completes once with the total or the first error. It runs as `who`
    /// (`None`: the server): a user's write strips setuid bits and counts
    /// against the user's quota, as a write of the user's own would.
    pub fn write_at(
        &mut self,
        fd: &SharedFd,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        who: Option<&Arc<Creds>>,
        token: u64,
    ) {
        if range.start > range.end || range.end > buf.len() {
            return self.reject(token, buf, "write range outside the buffer");
        }
        if range.is_empty() {
            return self.complete_now(token, Ok(0), Some(buf), None);
        }
        self.start_as(
            token,
            OpKind::Write {
                fd: Arc::clone(fd),
                buf,
                pos: range.start,
                end: range.end,
                offset,
                written: 0,
            },
            who,
        );
    }

    /// Sends `head`, then `len` bytes of `file` from `offset`, to the socket
    /// `sock` without copying the file's pages through user memory: file ->
    /// pipe -> socket with `splice(2)`, the head and the first chunk going out
    /// in one chain of linked SQEs and each further chunk in one more.
    /// Completes once: `Ok(n)` with the file bytes sent (`n < len` only if
    /// the file ended first; the caller then owes the peer `len - n` bytes),
    /// or the first error. The head comes back in `buf`. Cancelling it (see
    /// [`Ring::cancel`]) also shuts `sock` down for writing: a frame cut in
    /// the middle cannot be finished, and a splice blocked on a peer that
    /// stopped reading must not pin the operation. Every splice of it runs
    /// as `who` (`None`: the server), the reader of the file.
    #[allow(clippy::too_many_arguments)]
    pub fn send_file(
        &mut self,
        sock: &SharedFd,
        head: Vec<u8>,
        file: &SharedFd,
        offset: u64,
        len: usize,
        who: Option<&Arc<Creds>>,
        token: u64,
    ) {
        let pipe = match self.pipes.pop() {
            Some(p) => p,
            None => match crate::pipe::new_pipe(self.splice_chunk) {
                Ok(p) => p,
                Err(e) => return self.complete_now(token, Err(e), Some(head), None),
            },
        };
        if i64::try_from(offset).is_err() {
            self.pipes.push(pipe);
            return self.reject(token, head, "send_file offset past i64::MAX");
        }
        let chunk = self.splice_chunk.min(pipe.capacity);
        let sf = self.send_file_box(SendFile {
            sock: Some(Arc::clone(sock)),
            file: Some(Arc::clone(file)),
            head,
            head_pos: 0,
            pipe: Some(pipe),
            offset,
            left: len,
            in_pipe: 0,
            sent: 0,
            eof: false,
            chunk,
            plan: Plan::new(),
            progressed: false,
            error: None,
        });
        self.start_as(token, OpKind::SendFile(sf), who);
    }

    /// `sf` in the box of an ended send-file if one is spare (no allocation).
    fn send_file_box(&mut self, sf: SendFile) -> Box<SendFile> {
        match self.spare_send_files.pop() {
            Some(mut b) => {
                *b = sf;
                b
            }
            None => Box::new(sf),
        }
    }

    /// Moves `len` bytes from `fd_in` to `fd_out` with `splice(2)` (one of
    /// the two must be a pipe), reading at `off_in` / writing at `off_out`, or
    /// at the fd's own position for `None` (pipes and sockets). Resubmits
    /// after short moves and completes once: `Ok(len)`, `Ok(n < len)` when
    /// the input ended (a closed peer, the end of a file), or the first error.
    /// It runs in an io_uring worker thread and blocks there until the bytes
    /// come: callers splice from a socket only what has already arrived.
    /// It runs as `who` (`None`: the server), the writer of a file it fills.
    #[allow(clippy::too_many_arguments)]
    pub fn splice(
        &mut self,
        fd_in: &SharedFd,
        off_in: Option<u64>,
        fd_out: &SharedFd,
        off_out: Option<u64>,
        len: usize,
        who: Option<&Arc<Creds>>,
        token: u64,
    ) {
        self.start_splice(fd_in, off_in, fd_out, off_out, len, who, token, false);
    }

    /// Like [`Ring::splice`] into a pipe, but a full pipe ends it with the
    /// count moved so far (`SPLICE_F_NONBLOCK`) instead of waiting for someone
    /// to drain it: a socket's data can take a pipe slot per small fragment,
    /// so a pipe of N pages may hold far less than N pages of it. A pipe
    /// full before anything moved ends it with `EAGAIN` (`Ok(0)` stays end
    /// of stream).
    pub fn splice_until_full(
        &mut self,
        fd_in: &SharedFd,
        fd_out: &SharedFd,
        len: usize,
        token: u64,
    ) {
        self.start_splice(fd_in, None, fd_out, None, len, None, token, true);
    }

    #[allow(clippy::too_many_arguments)]
    fn start_splice(
        &mut self,
        fd_in: &SharedFd,
        off_in: Option<u64>,
        fd_out: &SharedFd,
        off_out: Option<u64>,
        len: usize,
        who: Option<&Arc<Creds>>,
        token: u64,
        until_full: bool,
    ) {
        let past = |o: Option<u64>| o.is_some_and(|o| i64::try_from(o).is_err());
        if past(off_in) || past(off_out) {
            return self.reject(token, Vec::new(), "splice offset past i64::MAX");
        }
        if len == 0 {
            return self.complete_now(token, Ok(0), None, None);
        }
        self.start_as(
            token,
            OpKind::Splice {
                fd_in: Arc::clone(fd_in),
                off_in,
                fd_out: Arc::clone(fd_out),
                off_out,
                left: len,
                done: 0,
                until_full,
            },
            who,
        );
    }

    /// A new pipe for [`Ring::splice`], sized like the ring's send-file pipes
    /// (`splice_chunk`, or the kernel's limit for this process).
    pub fn new_splice_pipe(&self) -> io::Result<SplicePipe> {
        self.new_splice_pipe_for(self.splice_chunk)
    }

    /// A new pipe for [`Ring::splice`] that holds at least `bytes` where the
    /// kernel allows (a process with `CAP_SYS_RESOURCE` may size pipes freely,
    /// others up to `/proc/sys/fs/pipe-max-size`); else as large as it allows,
    /// at least one like [`Ring::new_splice_pipe`] where that can be had:
    /// check its `capacity`.
    pub fn new_splice_pipe_for(&self, bytes: usize) -> io::Result<SplicePipe> {
        let want = bytes.max(self.splice_chunk);
        let mut p = crate::pipe::new_pipe(want)?;
        if p.capacity < self.splice_chunk && want > self.splice_chunk {
            p = crate::pipe::new_pipe(self.splice_chunk)?;
        }
        Ok(SplicePipe {
            read: Arc::new(p.read),
            write: Arc::new(p.write),
            capacity: p.capacity,
        })
    }

    /// `fsync(2)` the file, as `who` (`None`: the server).
    pub fn fsync(&mut self, fd: &SharedFd, who: Option<&Arc<Creds>>, token: u64) {
        self.start_as(token, OpKind::Fsync { fd: Arc::clone(fd) }, who);
    }

    /// Completes with `Ok(0)` after `after` (or `ECANCELED` if cancelled).
    pub fn timeout(&mut self, after: Duration, token: u64) {
        self.start(
            token,
            OpKind::Timeout {
                ts: Box::new(types::Timespec::from(after)),
            },
        );
    }

    /// Closes `fd` in the ring; completes with `Ok(0)` or the close error
    /// (the fd is gone either way).
    pub fn close(&mut self, fd: OwnedFd, token: u64) {
        self.start(
            token,
            OpKind::Close {
                fd: fd.into_raw_fd(),
            },
        );
    }

    /// Asks the kernel to cancel every in-flight operation carrying `token`
    /// and returns how many there were. Each completes with `ECANCELED` (or
    /// its real result if it finished first), buffers returned as usual. A
    /// send or write that was part-way through is not continued, and a
    /// multishot accept is not re-armed (its last completion has `more = false`).
    pub fn cancel(&mut self, token: u64) -> usize {
        let keys: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, op)| op.token == token && !matches!(op.kind, OpKind::WakerRead { .. }))
            .map(|(key, _)| key)
            .collect();
        for &key in &keys {
            if let Some(op) = self.ops.get_mut(key) {
                op.cancelled = true;
            }
            let queued = self
                .backlog
                .iter()
                .position(|p| matches!(p, Pending::Op(k) if *k == key));
            match queued {
                // Never reached the kernel: complete it here.
                Some(index) => {
                    self.backlog.remove(index);
                    self.finish(key, Err(io::Error::from_raw_os_error(libc::ECANCELED)));
                }
                None => {
                    let chained = match self.ops.get_mut(key).map(|op| &op.kind) {
                        Some(OpKind::SendFile(sf)) => {
                            // A splice blocked on a full socket deep in a linked chain
                            // does not always notice an async cancel; a half-sent frame
                            // cannot be finished anyway, so end the stream for writing:
                            // the blocked splice fails with EPIPE at once.
                            if let Some(sock) = &sf.sock {
                                let _ =
                                    rustix::net::shutdown(&**sock, rustix::net::Shutdown::Write);
                            }
                            Some(sf.plan.len())
                        }
                        _ => None,
                    };
                    if let Some(steps) = chained {
                        for i in 0..steps as u64 {
                            self.enqueue(Pending::Cancel(key | ((i + 1) << STEP_SHIFT)));
                        }
                    } else {
                        self.enqueue(Pending::Cancel(key));
                    }
                }
            }
        }
        keys.len()
    }

    /// The next completion, or `None` when the completion queue is empty.
    /// Internal completions (short-send continuations, waker re-arms, cancel
    /// acknowledgements) are handled here and not shown.
    pub fn next_completion(&mut self) -> Option<Completion> {
        self.give_back_lent();
        loop {
            if let Some(mut c) = self.ready.pop_front() {
                if let Some((bid, _, n)) = c.recv_buf.as_mut() {
                    self.lendings += 1;
                    *n = self.lendings;
                    self.lent = Some((*bid, self.lendings));
                }
                return Some(c);
            }
            if !self.reap_one() {
                return None;
            }
        }
    }

    // ---- internals ----------------------------------------------------------

    /// Handles one CQE, if any. False when the completion queue is empty.
    fn reap_one(&mut self) -> bool {
        let cqe = self.uring.completion().next();
        match cqe {
            Some(cqe) => {
                self.stats.cqes += 1;
                self.handle_cqe(cqe.user_data(), cqe.result(), cqe.flags());
                true
            }
            None => false,
        }
    }

    /// Stores the op in the slab and queues its first SQE, which runs with
    /// the server's own credentials.
    fn start(&mut self, token: u64, kind: OpKind) -> u64 {
        let own = self.personalities.own();
        self.start_with(token, kind, own)
    }

    /// [`Ring::start`] for an op made for `who` (`None`: the server): its
    /// SQEs carry `who`'s personality. When it cannot be had, the op
    /// completes at once with the error and no SQE is pushed: nothing runs
    /// with other credentials instead.
    fn start_as(&mut self, token: u64, kind: OpKind, who: Option<&Arc<Creds>>) {
        let id = match who {
            None => Ok(self.personalities.own()),
            Some(who) => self.personalities.id_for(&self.uring.submitter(), who),
        };
        match id {
            Ok(id) => {
                self.start_with(token, kind, id);
            }
            Err(e) => {
                let (buf, bufs) = kind.into_buffers();
                self.complete_now(token, Err(e), buf, bufs);
            }
        }
    }

    /// Runs `f` with the file reads and writes it starts marked IOSQE_ASYNC when `on`: the
    /// kernel hands them to an io_uring worker at once instead of trying them in the submitting
    /// thread first, where on some file systems (FUSE in direct I/O mode) the try waits for the
    /// file system's answer (docs/cluster-internals.md, "Which io_uring operations run where").
    /// A continued short write keeps the mark.
    pub fn punted<R>(&mut self, on: bool, f: impl FnOnce(&mut Ring) -> R) -> R {
        let was = std::mem::replace(&mut self.punt, on);
        let r = f(self);
        self.punt = was;
        r
    }

    fn start_with(&mut self, token: u64, kind: OpKind, personality: u16) -> u64 {
        debug_assert!(
            token != Ring::WAKE_TOKEN || matches!(kind, OpKind::WakerRead { .. }),
            "Ring::WAKE_TOKEN is reserved"
        );
        let fixed = self.files.as_mut().and_then(|t| t.use_for(kind.fds()));
        self.personalities.hold(personality);
        let punt = self.punt && matches!(kind, OpKind::Read { .. } | OpKind::Write { .. });
        let quiet = self.quiet && matches!(kind, OpKind::Send { .. } | OpKind::SendMsg { .. });
        self.quiet_in_flight += usize::from(quiet);
        let key = self.ops.insert(Op {
            token,
            cancelled: false,
            kind,
            fixed,
            personality,
            punt,
            quiet,
        });
        self.enqueue(Pending::Op(key));
        key
    }

    fn reject(&mut self, token: u64, buf: Vec<u8>, why: &'static str) {
        self.complete_now(
            token,
            Err(io::Error::new(io::ErrorKind::InvalidInput, why)),
            Some(buf),
            None,
        );
    }

    fn complete_now(
        &mut self,
        token: u64,
        result: io::Result<usize>,
        buf: Option<Vec<u8>>,
        bufs: Option<Vec<Vec<u8>>>,
    ) {
        let mut c = Completion::new(token, result);
        c.buf = buf;
        c.bufs = bufs;
        self.ready.push_back(c);
    }

    /// Pushes the SQE now if nothing is parked before it, else parks it.
    fn enqueue(&mut self, pending: Pending) {
        if self.backlog.is_empty() && self.try_push(&pending) {
            return;
        }
        self.backlog.push_back(pending);
    }

    /// Pushes parked SQEs in order. Returns true if some remain (SQ full).
    fn flush_backlog(&mut self) -> bool {
        while let Some(pending) = self.backlog.pop_front() {
            if !self.try_push(&pending) {
                self.backlog.push_front(pending);
                return true;
            }
        }
        false
    }

    /// Pushes one SQE; when the SQ is full, submits what is there once and
    /// retries. False if there is still no room.
    fn try_push(&mut self, pending: &Pending) -> bool {
        if let Pending::Op(key) = *pending {
            if let Some(Op {
                kind: OpKind::SendFile(sf),
                fixed,
                personality,
                ..
            }) = self.ops.get_mut(key)
            {
                let (mut chain, n) = sf.round(*fixed);
                for (i, sqe) in chain.iter_mut().enumerate().take(n) {
                    let mut e = sqe
                        .clone()
                        .user_data(key | ((i as u64 + 1) << STEP_SHIFT))
                        .personality(*personality);
                    if i + 1 < n {
                        // One CQE per round: the last step's, or the first that fell short.
                        e = e.flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS);
                    }
                    *sqe = e;
                }
                return self.push_chain(chain.iter().take(n));
            }
        }
        let sqe = match *pending {
            Pending::Op(key) => match self.ops.get_mut(key) {
                Some(op) if op.punt => op
                    .kind
                    .sqe(op.fixed)
                    .user_data(key)
                    .personality(op.personality)
                    .flags(squeue::Flags::ASYNC),
                Some(op) => op
                    .kind
                    .sqe(op.fixed)
                    .user_data(key)
                    .personality(op.personality),
                None => return true, // already finished; nothing to push
            },
            // Every request carrying this user_data: a send-file round has several.
            Pending::Cancel(key) => opcode::AsyncCancel::new(key)
                .build()
                .user_data(INTERNAL_USER_DATA)
                .personality(self.personalities.own()),
            Pending::CancelAll => opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(INTERNAL_USER_DATA)
                .personality(self.personalities.own()),
        };
        if self.push_sqe(&sqe) {
            return true;
        }
        self.stats.submits += 1;
        if self.uring.submit().is_err() {
            return false;
        }
        self.push_sqe(&sqe)
    }

    /// Pushes a linked chain whole: a chain split across two submissions
    /// would not be linked. False if the SQ has no room for all of it even
    /// after submitting what is queued.
    fn push_chain<'a>(&mut self, chain: impl ExactSizeIterator<Item = &'a squeue::Entry>) -> bool {
        let n = chain.len();
        let room = |u: &mut IoUring| {
            let sq = u.submission();
            sq.capacity() - sq.len()
        };
        if room(&mut self.uring) < n {
            self.stats.submits += 1;
            if self.uring.submit().is_err() || room(&mut self.uring) < n {
                return false;
            }
        }
        for sqe in chain {
            // Cannot fail: room was checked above and nothing else pushes in between.
            if !self.push_sqe(sqe) {
                return false;
            }
        }
        true
    }

    /// THE place where SQEs enter the submission queue.
    fn push_sqe(&mut self, sqe: &squeue::Entry) -> bool {
        // SAFETY: `sqe` was built by `try_push`, either pointer-free (cancels
        // target a `user_data` value only), or by `OpKind::sqe` /
        // `SendFile::round` from the slab entry whose key is the SQE's
        // `user_data` (with the step bits 55-62 cleared). Everything that SQE points
        // to (Vec heap buffers, boxed timespec/msghdr/u64, the iovec Vec) is
        // owned by that entry and does not move when the slab reallocates; its
        // fd is kept open by the entry's `Arc<OwnedFd>`, or (close) owned by
        // the entry as a raw fd nobody else closes. The entry is removed only
        // after the operation's final CQE (`finish`), and `Drop` leaks entries
        // whose final CQE never arrived. A send-file entry also owns its pipe's
        // two fds and is removed only after every SQE of its current round has
        // posted its one CQE (`SendFile::plan` empty again). So the memory and fds stay valid
        // for as long as the kernel may use them.
        let pushed = unsafe { self.uring.submission().push(sqe) };
        if pushed.is_ok() {
            self.stats.sqes += 1;
        }
        pushed.is_ok()
    }

    /// Removes a finished op and queues its completion with its buffers.
    fn finish(&mut self, key: u64, result: io::Result<usize>) {
        if let Some(mut op) = self.remove_op(key) {
            if let OpKind::SendFile(sf) = &mut op.kind {
                // An empty pipe serves again; one with bytes left in it is closed.
                if sf.in_pipe == 0 && result.is_ok() && self.pipes.len() < PIPES_KEPT_MAX {
                    self.pipes.extend(sf.pipe.take());
                }
            }
            let zc_copied = matches!(op.kind, OpKind::SendZc { copied: true, .. });
            let quiet = op.quiet && result.is_ok();
            let (buf, bufs) = match op.kind {
                // Finished: no SQE points into its iovecs or msghdr any more.
                OpKind::SendMsg { bufs, iov, msg, .. } => {
                    if self.spare_msgs.len() < SPARE_MSGS_MAX {
                        self.spare_msgs.push((iov, msg));
                    }
                    (None, Some(bufs))
                }
                // The box serves the next send-file; the descriptors are let
                // go now (a closed peer's socket must not stay open).
                OpKind::SendFile(mut sf) => {
                    let head = std::mem::take(&mut sf.head);
                    sf.sock = None;
                    sf.file = None;
                    sf.pipe = None;
                    if self.spare_send_files.len() < SPARE_MSGS_MAX {
                        self.spare_send_files.push(sf);
                    }
                    (Some(head), None)
                }
                kind => kind.into_buffers(),
            };
            self.complete_now(op.token, result, buf, bufs);
            if let Some(c) = self.ready.back_mut() {
                c.zc_copied = zc_copied;
                c.quiet = quiet;
            }
        }
    }

    fn handle_cqe(&mut self, user_data: u64, res: i32, flags: u32) {
        if user_data & INTERNAL_USER_DATA != 0 {
            return; // a cancel request's own acknowledgement
        }
        let key = user_data & !STEP_MASK;
        let step = (user_data & STEP_MASK) >> STEP_SHIFT;
        let more = cqueue::more(flags);
        let Some(op) = self.ops.get_mut(key) else {
            return; // stale: cannot happen with generation-tagged keys, ignore
        };
        let token = op.token;
        // Stop continuing/re-arming: the ring is going away or the caller cancelled.
        let closing = self.closing || op.cancelled;
        match &mut op.kind {
            OpKind::Accept { .. } => {
                let mut c = Completion::new(token, cqe_result(res));
                if res >= 0 {
                    // SAFETY: a successful accept CQE carries a new fd that the
                    // kernel just installed in our table; nothing else owns it.
                    c.fd = Some(unsafe { OwnedFd::from_raw_fd(res) });
                }
                if more {
                    c.more = true;
                } else if !closing && (res >= 0 || accept_error_is_transient(-res)) {
                    c.more = true;
                    self.enqueue(Pending::Op(key));
                } else {
                    self.remove_op(key);
                }
                self.ready.push_back(c);
            }
            OpKind::RecvMulti { .. } => {
                let mut c = Completion::new(token, cqe_result(res));
                if let Some(bid) = cqueue::buffer_select(flags) {
                    c.recv_buf = Some((bid, res.max(0) as usize, 0));
                }
                c.more = more;
                if !more {
                    self.remove_op(key);
                }
                self.ready.push_back(c);
            }
            OpKind::WakerRead { value, .. } => {
                let count = std::mem::take(&mut **value);
                if closing {
                    self.remove_op(key);
                } else if res >= 0 {
                    self.enqueue(Pending::Op(key));
                    self.ready
                        .push_back(Completion::new(Ring::WAKE_TOKEN, Ok(count as usize)));
                } else if res == -libc::EINTR || res == -libc::EAGAIN {
                    self.enqueue(Pending::Op(key));
                } else {
                    self.remove_op(key);
                    self.ready
                        .push_back(Completion::new(Ring::WAKE_TOKEN, cqe_result(res)));
                }
            }
            OpKind::Recv { buf, .. } | OpKind::Read { buf, .. } => {
                if res > 0 {
                    let n = (res as usize).min(buf.capacity() - buf.len());
                    // SAFETY: the kernel wrote `res` bytes into the spare
                    // capacity we gave it (at most that long), so the first
                    // `n` bytes after `len` are initialised.
                    unsafe { buf.set_len(buf.len() + n) };
                }
                self.finish(key, cqe_result(res));
            }
            OpKind::Send { buf, pos, sent, .. } => {
                let result = advance(res, pos, sent, buf.len());
                self.continue_or_finish(key, result, closing);
            }
            OpKind::SendZc {
                buf,
                pos,
                sent,
                notifs,
                done,
                copied,
                ..
            } => {
                if cqueue::notif(flags) {
                    *notifs = notifs.saturating_sub(1);
                    if res as u32 & NOTIF_USAGE_ZC_COPIED != 0 {
                        *copied = true;
                    }
                } else {
                    if more {
                        *notifs += 1;
                    }
                    match advance(res, pos, sent, buf.len()) {
                        None if !closing => {
                            self.enqueue(Pending::Op(key));
                            return;
                        }
                        None => *done = Some(Err(io::Error::from_raw_os_error(libc::ECANCELED))),
                        Some(r) => *done = Some(r),
                    }
                }
                if *notifs == 0 {
                    if let Some(result) = done.take() {
                        self.finish(key, result);
                    }
                }
            }
            OpKind::SendMsg { sent, total, .. } => {
                let mut unused = 0;
                let total = *total;
                let result = advance(res, sent, &mut unused, total).map(|r| r.map(|_| total));
                self.continue_or_finish(key, result, closing);
            }
            OpKind::Write {
                pos,
                end,
                offset,
                written,
                ..
            } => {
                if res > 0 {
                    *offset += res as u64;
                }
                let result = advance(res, pos, written, *end);
                self.continue_or_finish(key, result, closing);
            }
            OpKind::Timeout { .. } => {
                let result = if res == -libc::ETIME {
                    Ok(0)
                } else {
                    cqe_result(res)
                };
                self.finish(key, result);
            }
            OpKind::Fsync { .. } | OpKind::Close { .. } | OpKind::Poll { .. } => {
                self.finish(key, cqe_result(res))
            }
            OpKind::Splice {
                off_in,
                off_out,
                left,
                done,
                until_full,
                ..
            } => {
                let result = match res {
                    r if r == -libc::EAGAIN && *until_full && *done > 0 => Some(Ok(*done)),
                    r if r < 0 => Some(Err(io::Error::from_raw_os_error(-r))),
                    0 => Some(Ok(*done)),
                    r => {
                        let n = r as usize;
                        *done += n;
                        *left = left.saturating_sub(n);
                        for o in [off_in, off_out].into_iter().flatten() {
                            *o += n as u64;
                        }
                        (*left == 0).then_some(Ok(*done))
                    }
                };
                self.continue_or_finish(key, result, closing);
            }
            OpKind::SendFile(sf) => {
                if step == 0 || sf.plan.is_empty() {
                    return; // not a step of the round in flight: nothing to apply
                }
                sf.apply(step as usize - 1, res);
                match sf.outcome() {
                    None if !closing => self.enqueue(Pending::Op(key)),
                    None => self.finish(key, Err(io::Error::from_raw_os_error(libc::ECANCELED))),
                    Some(result) => self.finish(key, result),
                }
            }
        }
    }

    /// After `advance`: `None` means more bytes to go.
    fn continue_or_finish(&mut self, key: u64, result: Option<io::Result<usize>>, closing: bool) {
        match result {
            None if !closing => self.enqueue(Pending::Op(key)),
            None => self.finish(key, Err(io::Error::from_raw_os_error(libc::ECANCELED))),
            Some(result) => self.finish(key, result),
        }
    }
}

/// Applies a send/write CQE to a cursor `pos` (ending at `end`) and a running
/// total `done`. `None`: not finished, resubmit. `Some`: the final result.
fn advance(res: i32, pos: &mut usize, done: &mut usize, end: usize) -> Option<io::Result<usize>> {
    if res < 0 {
        return Some(Err(io::Error::from_raw_os_error(-res)));
    }
    if res == 0 {
        return Some(Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "the kernel accepted 0 bytes",
        )));
    }
    let n = res as usize;
    *pos += n;
    *done += n;
    if *pos < end {
        None
    } else {
        Some(Ok(*done))
    }
}

/// accept(2) errors after which the listener is still fine (see its man page).
fn accept_error_is_transient(errno: i32) -> bool {
    matches!(
        errno,
        libc::ECONNABORTED
            | libc::EINTR
            | libc::EAGAIN
            | libc::EPROTO
            | libc::ENETDOWN
            | libc::ENOPROTOOPT
            | libc::EHOSTDOWN
            | libc::ENONET
            | libc::EHOSTUNREACH
            | libc::EOPNOTSUPP
            | libc::ENETUNREACH
    )
}

/// `io_uring_enter` failures that only mean "reap completions / try again".
fn soft_enter_error(e: io::Error) -> io::Result<usize> {
    match e.raw_os_error() {
        Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => Ok(0),
        _ => Err(e),
    }
}

impl Drop for Ring {
    /// Cancels everything in flight and waits (at most `DROP_WAIT_MAX`) for
    /// the kernel to give each buffer back. Whatever has not completed by
    /// then is leaked, never freed: the kernel may still write into it.
    fn drop(&mut self) {
        self.closing = true;
        // SQEs never handed to the kernel: their ops can be freed right away.
        for pending in std::mem::take(&mut self.backlog) {
            if let Pending::Op(key) = pending {
                self.remove_op(key);
            }
        }
        self.ready.clear();
        let deadline = Instant::now() + DROP_WAIT_MAX;
        let mut next_cancel = Instant::now();
        while !self.ops.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if now >= next_cancel {
                self.enqueue(Pending::CancelAll);
                next_cancel = now + DROP_CANCEL_INTERVAL;
            }
            let wait = next_cancel.min(deadline).saturating_duration_since(now);
            if self.submit_and_wait(1, Some(wait)).is_err() {
                break;
            }
            while self.reap_one() {}
            // The kernel is done with these: freeing their buffers and
            // closing accepted fds is fine.
            self.ready.clear();
        }
        if let Some(bufs) = self.recv_bufs.take() {
            let released = self.ops.is_empty()
                && self
                    .uring
                    .submitter()
                    .unregister_buf_ring(crate::bufring::GROUP)
                    .is_ok();
            if !released {
                // A receive may still be armed: the kernel may write into
                // these buffers, so they must never return to the allocator.
                std::mem::forget(bufs);
            }
        }
        if !self.ops.is_empty() {
            LEAKED_OPS.fetch_add(self.ops.len() as u64, Ordering::Relaxed);
            // Deliberate leak: these operations may still be armed in the
            // kernel (which tears them down asynchronously after the ring fd
            // closes), so their buffers must never return to the allocator.
            self.ops.drain(std::mem::forget);
        }
    }
}

#[path = "ring_ready.rs"]
mod ready;

#[path = "ring_wait.rs"]
mod wait;

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
