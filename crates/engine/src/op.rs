//! The operations a ring can have in flight, and how each one builds its SQE.
//!
//! An [`Op`] owns everything the kernel may touch until its final completion:
//! the buffers, the iovec array and `msghdr` (boxed or in a `Vec`, so their
//! addresses stay put when the slab grows) and a clone of the fd's `Arc`.
//! Building an SQE is safe; pushing it is the unsafe step and happens in one
//! place, `Ring::push_sqe`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use io_uring::{opcode, squeue, types};

/// `IORING_SEND_ZC_REPORT_USAGE`: the notification says whether the kernel copied.
const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED`, in a notification's result.
pub(crate) const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

/// Largest length put in one SQE; longer transfers continue in a follow-up SQE.
const SQE_LEN_MAX: usize = 1 << 30;

/// `IOV_MAX` on Linux: the most iovecs one `sendmsg` takes.
pub(crate) const IOVECS_MAX: usize = 1024;

pub(crate) struct Op {
    pub(crate) token: u64,
    /// Set by `Ring::cancel`: do not continue or re-arm this op.
    pub(crate) cancelled: bool,
    pub(crate) kind: OpKind,
    /// The op's fd that is in the ring's registered-file table, and its slot:
    /// SQEs name the slot instead of the fd (no file reference taken per SQE).
    pub(crate) fixed: Fixed,
    /// The io_uring personality every SQE of the op carries (see
    /// `crate::personality`); 0: none.
    pub(crate) personality: u16,
    /// Its SQEs carry IOSQE_ASYNC ([`crate::Ring::punted`]).
    pub(crate) punt: bool,
    /// Its success alone does not end a wait ([`crate::Ring::quietly`]).
    pub(crate) quiet: bool,
}

/// A registered fd and its slot in the ring's file table, if the op has one.
pub(crate) type Fixed = Option<(RawFd, u32)>;

/// Builds `$build` with `$t` bound to the registered slot of `$raw` when
/// `$fixed` names it, else to the fd itself.
macro_rules! with_fd {
    ($raw:expr, $fixed:expr, |$t:ident| $build:expr) => {{
        let raw: RawFd = $raw;
        match $fixed {
            Some((r, slot)) if r == raw => {
                let $t = types::Fixed(slot);
                $build
            }
            _ => {
                let $t = types::Fd(raw);
                $build
            }
        }
    }};
}

pub(crate) enum OpKind {
    /// Multishot accept; stays in the slab while armed.
    Accept {
        fd: Arc<OwnedFd>,
    },
    /// Receive into `buf`'s spare capacity, at most `max` bytes.
    Recv {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        max: usize,
        /// Arm the socket's poll before trying to receive (`IORING_RECVSEND_POLL_FIRST`): for
        /// the answer to what was just sent, which cannot be there yet.
        poll_first: bool,
    },
    /// Multishot receive into buffers the kernel picks from the ring's
    /// provided-buffer group; stays in the slab while armed.
    RecvMulti {
        fd: Arc<OwnedFd>,
    },
    /// Send `buf[pos..]`; `sent` counts bytes already sent by earlier SQEs.
    Send {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        pos: usize,
        sent: usize,
    },
    /// Zero-copy send of `buf[pos..]` (`SEND_ZC`): the kernel sends from the
    /// buffer's pages and tells when it has let go of them (a notification
    /// per SQE, `notifs` still to come). `done`: the final result, once every
    /// byte is sent or an error ended it; the op finishes when `done` is set
    /// and no notification is outstanding. `copied`: a notification said the
    /// kernel copied after all (loopback, or a device without scatter-gather).
    SendZc {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        pos: usize,
        sent: usize,
        notifs: usize,
        done: Option<io::Result<usize>>,
        copied: bool,
    },
    /// `sendmsg` of all of `bufs`; `iov`/`msg` are rebuilt before each SQE to skip `sent` bytes.
    SendMsg {
        fd: Arc<OwnedFd>,
        bufs: Vec<Vec<u8>>,
        iov: Vec<libc::iovec>,
        msg: Box<libc::msghdr>,
        sent: usize,
        total: usize,
    },
    /// Positional read of up to `len` bytes into `buf`'s spare capacity.
    Read {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        len: usize,
        offset: u64,
    },
    /// Positional write of `buf[pos..end]` at `offset` (both advance together).
    Write {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        pos: usize,
        end: usize,
        offset: u64,
        written: usize,
    },
    Fsync {
        fd: Arc<OwnedFd>,
    },
    Timeout {
        ts: Box<types::Timespec>,
    },
    /// Close of an fd the engine took ownership of (as a raw fd, so nothing closes it twice).
    Close {
        fd: RawFd,
    },
    /// The waker's eventfd read, kept armed by the ring; `value` receives the counter.
    WakerRead {
        fd: Arc<OwnedFd>,
        value: Box<u64>,
    },
    /// `head`, then `len` bytes of `file` from `offset`, to a socket through
    /// a pipe (see [`SendFile`]); submitted as rounds of linked SQEs.
    SendFile(Box<SendFile>),
    /// One-shot poll for `events` (`POLLIN`, `POLLOUT`).
    Poll {
        fd: Arc<OwnedFd>,
        events: u32,
    },
    /// `splice(2)` of `left` more bytes from `fd_in` to `fd_out` (one of them
    /// a pipe), at the given offsets or the fds' own positions; `done` moved.
    Splice {
        fd_in: Arc<OwnedFd>,
        off_in: Option<u64>,
        fd_out: Arc<OwnedFd>,
        off_out: Option<u64>,
        left: usize,
        done: usize,
        /// `SPLICE_F_NONBLOCK`: a full output pipe ends the operation (short)
        /// instead of waiting for it to drain.
        until_full: bool,
    },
}

/// A pipe used to splice file pages into a socket without copying them.
pub(crate) struct Pipe {
    pub(crate) read: OwnedFd,
    pub(crate) write: OwnedFd,
    /// Bytes the pipe holds at most (its `F_GETPIPE_SZ`).
    pub(crate) capacity: usize,
}

/// The state of a [`OpKind::SendFile`] between rounds.
///
/// One round is a chain of linked SQEs: send the rest of the head
/// (`MSG_MORE | MSG_WAITALL`: only all of it counts as success), then for each chunk (up to [`CHUNKS_PER_ROUND_MAX`]) splice
/// it from the file into the empty pipe and from the pipe into the socket.
/// Every SQE but the last carries `IOSQE_CQE_SKIP_SUCCESS`, so a round posts
/// exactly one CQE: the last step's when all went through, or the first step
/// that came up short or failed (the kernel then fails the rest of the link
/// without CQEs). Steps before the reporting one moved their full planned
/// length; the next round resumes from there.
pub(crate) struct SendFile {
    /// `None` only once the operation has ended and its box waits to serve
    /// the next send-file (the ring keeps a few; see `Ring::send_file`).
    pub(crate) sock: Option<Arc<OwnedFd>>,
    pub(crate) file: Option<Arc<OwnedFd>>,
    pub(crate) head: Vec<u8>,
    pub(crate) head_pos: usize,
    /// Taken back by the ring when the operation ends with the pipe empty.
    pub(crate) pipe: Option<Pipe>,
    /// Next file offset to splice from, and file bytes not yet in the pipe.
    pub(crate) offset: u64,
    pub(crate) left: usize,
    /// Bytes in the pipe, not yet in the socket.
    pub(crate) in_pipe: usize,
    /// File bytes that reached the socket.
    pub(crate) sent: usize,
    /// The file ended before `left` reached 0.
    pub(crate) eof: bool,
    /// Largest file-to-pipe splice.
    pub(crate) chunk: usize,
    /// The steps of the round in flight (kind, planned length); empty between rounds.
    pub(crate) plan: Plan,
    /// The round made progress (a guard against spinning on zero results).
    pub(crate) progressed: bool,
    /// The first hard error (errno).
    pub(crate) error: Option<i32>,
}

/// File chunks (a fill and a drain each) linked into one round at most.
pub(crate) const CHUNKS_PER_ROUND_MAX: usize = 16;
/// SQEs in one round at most: the head and the chunks.
pub(crate) const ROUND_SQES_MAX: usize = 1 + 2 * CHUNKS_PER_ROUND_MAX;

/// The steps of one [`SendFile`] round, held in place (a round has at most
/// [`ROUND_SQES_MAX`]), so that starting a send-file allocates one box, not
/// a list as well.
pub(crate) struct Plan {
    steps: [(u64, usize); ROUND_SQES_MAX],
    len: usize,
}

impl Plan {
    pub(crate) fn new() -> Plan {
        Plan {
            steps: [(0, 0); ROUND_SQES_MAX],
            len: 0,
        }
    }

    fn push(&mut self, step: (u64, usize)) {
        // `round` plans at most ROUND_SQES_MAX steps.
        if let Some(slot) = self.steps.get_mut(self.len) {
            *slot = step;
            self.len += 1;
        }
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn get(&self, i: usize) -> Option<&(u64, usize)> {
        self.steps[..self.len].get(i)
    }
}

/// What a step of a [`SendFile`] round does.
pub(crate) const STEP_HEAD: u64 = 1;
pub(crate) const STEP_FILL: u64 = 2;
pub(crate) const STEP_DRAIN: u64 = 3;

impl SendFile {
    /// The SQEs of the next round, in order, with the count; the caller links
    /// them and tags each with its index. `self.plan` records what each asks for.
    pub(crate) fn round(&mut self, fixed: Fixed) -> ([squeue::Entry; ROUND_SQES_MAX], usize) {
        let mut out: [squeue::Entry; ROUND_SQES_MAX] =
            std::array::from_fn(|_| opcode::Nop::new().build());
        self.plan.clear();
        let (Some(pipe), Some(sock), Some(file)) = (&self.pipe, &self.sock, &self.file) else {
            return (out, 0);
        };
        let mut n = 0;
        if self.head_pos < self.head.len() {
            let rest = &self.head[self.head_pos..];
            let len = rest.len().min(SQE_LEN_MAX);
            out[n] = with_fd!(sock.as_raw_fd(), fixed, |t| opcode::Send::new(
                t,
                rest.as_ptr(),
                len as u32
            )
            // MSG_WAITALL: a send that moves only part of the head is
            // otherwise a success, and the linked splices would put file
            // bytes on the wire before the rest of the head. With it the
            // kernel keeps sending until all of it went (or fails the link).
            .flags(libc::MSG_NOSIGNAL | libc::MSG_MORE | libc::MSG_WAITALL)
            .build());
            self.plan.push((STEP_HEAD, len));
            n += 1;
        }
        if self.in_pipe > 0 {
            // Bytes left in the pipe by a short drain go first, alone.
            let more = self.left > 0 && !self.eof;
            out[n] = drain_sqe(pipe, sock, self.in_pipe, more, fixed);
            self.plan.push((STEP_DRAIN, self.in_pipe));
            return (out, n + 1);
        }
        // Up to CHUNKS_PER_ROUND_MAX fill/drain pairs in one chain: one io-wq
        // worker runs them back to back, and the ring hears back once.
        let mut offset = self.offset;
        let mut left = if self.eof { 0 } else { self.left };
        for _ in 0..CHUNKS_PER_ROUND_MAX {
            if left == 0 {
                break;
            }
            let fill = left.min(self.chunk).min(pipe.capacity);
            out[n] = opcode::Splice::new(
                types::Fd(file.as_raw_fd()),
                offset as i64,
                types::Fd(pipe.write.as_raw_fd()),
                -1,
                fill as u32,
            )
            .build();
            offset += fill as u64;
            left -= fill;
            out[n + 1] = drain_sqe(pipe, sock, fill, left > 0, fixed);
            self.plan.push((STEP_FILL, fill));
            self.plan.push((STEP_DRAIN, fill));
            n += 2;
        }
        (out, n)
    }

    /// The round's one CQE arrived, from step `index` with `res`: the steps
    /// before it moved their planned lengths, it moved `res`, the rest nothing.
    pub(crate) fn apply(&mut self, index: usize, res: i32) {
        self.progressed = false;
        for i in 0..index.min(self.plan.len()) {
            if let Some(&(kind, len)) = self.plan.get(i) {
                self.moved(kind, len);
            }
        }
        if let Some(&(kind, _)) = self.plan.get(index) {
            if res < 0 {
                self.error.get_or_insert(-res);
            } else {
                self.moved(kind, res as usize);
                if kind == STEP_FILL && res == 0 {
                    self.eof = true;
                    self.progressed = true;
                }
            }
        }
        self.plan.clear();
    }

    fn moved(&mut self, kind: u64, n: usize) {
        match kind {
            STEP_HEAD => self.head_pos += n,
            STEP_FILL => {
                self.in_pipe += n;
                self.offset += n as u64;
                self.left -= n.min(self.left);
            }
            _ => {
                self.in_pipe -= n.min(self.in_pipe);
                self.sent += n;
            }
        }
        if n > 0 {
            self.progressed = true;
        }
    }

    /// After a round: `None` to go on, or the operation's result.
    pub(crate) fn outcome(&self) -> Option<io::Result<usize>> {
        if let Some(errno) = self.error {
            return Some(Err(io::Error::from_raw_os_error(errno)));
        }
        let done =
            self.head_pos == self.head.len() && self.in_pipe == 0 && (self.left == 0 || self.eof);
        if done {
            return Some(Ok(self.sent));
        }
        if !self.progressed {
            return Some(Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "a send-file round moved no bytes",
            )));
        }
        None
    }
}

/// `IORING_RECVSEND_POLL_FIRST` (include/uapi/linux/io_uring.h, Linux 5.19), a RECV's `ioprio`
/// flag: arm the socket's poll before trying to receive.
const RECVSEND_POLL_FIRST: u16 = 1;

impl OpKind {
    /// Builds the SQE for the op's current state (first submission or continuation).
    /// Every pointer in it points into memory owned by `self`.
    pub(crate) fn sqe(&mut self, fixed: Fixed) -> squeue::Entry {
        match self {
            OpKind::Accept { fd } => opcode::AcceptMulti::new(types::Fd(fd.as_raw_fd()))
                .flags(libc::SOCK_CLOEXEC)
                .build(),
            OpKind::Recv {
                fd,
                buf,
                max,
                poll_first,
            } => {
                // An answer to what was just sent: the kernel arms the socket's poll at once
                // instead of trying a receive first.
                let poll_first = if *poll_first { RECVSEND_POLL_FIRST } else { 0 };
                let spare = buf.spare_capacity_mut();
                let len = spare.len().min(*max).min(SQE_LEN_MAX) as u32;
                with_fd!(fd.as_raw_fd(), fixed, |t| opcode::Recv::new(
                    t,
                    spare.as_mut_ptr().cast(),
                    len
                )
                .ioprio(poll_first)
                .build())
            }
            OpKind::RecvMulti { fd } => {
                with_fd!(fd.as_raw_fd(), fixed, |t| opcode::RecvMulti::new(
                    t,
                    crate::bufring::GROUP
                )
                .build())
            }
            OpKind::Send { fd, buf, pos, .. } => {
                let rest = &buf[*pos..];
                let len = rest.len().min(SQE_LEN_MAX) as u32;
                with_fd!(fd.as_raw_fd(), fixed, |t| opcode::Send::new(
                    t,
                    rest.as_ptr(),
                    len
                )
                .flags(libc::MSG_NOSIGNAL)
                .build())
            }
            OpKind::SendZc { fd, buf, pos, .. } => {
                let rest = &buf[*pos..];
                let len = rest.len().min(SQE_LEN_MAX) as u32;
                with_fd!(fd.as_raw_fd(), fixed, |t| opcode::SendZc::new(
                    t,
                    rest.as_ptr(),
                    len
                )
                .flags(libc::MSG_NOSIGNAL)
                .zc_flags(SEND_ZC_REPORT_USAGE)
                .build())
            }
            OpKind::SendMsg {
                fd,
                bufs,
                iov,
                msg,
                sent,
                ..
            } => {
                iov.clear();
                let mut skip = *sent;
                for buf in bufs.iter() {
                    if skip >= buf.len() {
                        skip -= buf.len();
                        continue;
                    }
                    let rest = &buf[skip..];
                    skip = 0;
                    iov.push(libc::iovec {
                        iov_base: rest.as_ptr() as *mut libc::c_void,
                        iov_len: rest.len(),
                    });
                }
                msg.msg_iov = iov.as_mut_ptr();
                msg.msg_iovlen = iov.len();
                with_fd!(fd.as_raw_fd(), fixed, |t| opcode::SendMsg::new(t, &**msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build())
            }
            OpKind::Read {
                fd,
                buf,
                len,
                offset,
            } => {
                let spare = buf.spare_capacity_mut();
                let len = spare.len().min(*len).min(SQE_LEN_MAX) as u32;
                opcode::Read::new(types::Fd(fd.as_raw_fd()), spare.as_mut_ptr().cast(), len)
                    .offset(*offset)
                    .build()
            }
            OpKind::Write {
                fd,
                buf,
                pos,
                end,
                offset,
                ..
            } => {
                let rest = &buf[*pos..*end];
                let len = rest.len().min(SQE_LEN_MAX) as u32;
                opcode::Write::new(types::Fd(fd.as_raw_fd()), rest.as_ptr(), len)
                    .offset(*offset)
                    .build()
            }
            OpKind::Fsync { fd } => opcode::Fsync::new(types::Fd(fd.as_raw_fd())).build(),
            OpKind::Poll { fd, events } => {
                with_fd!(fd.as_raw_fd(), fixed, |t| opcode::PollAdd::new(t, *events)
                    .build())
            }
            OpKind::Splice {
                fd_in,
                off_in,
                fd_out,
                off_out,
                left,
                until_full,
                ..
            } => {
                // Offsets were checked to fit i64 by `Ring::splice`; -1: the fd's position.
                let pos = |o: &Option<u64>| o.map_or(-1, |o| o as i64);
                let flags = if *until_full {
                    libc::SPLICE_F_NONBLOCK
                } else {
                    0
                };
                let len = (*left).min(SQE_LEN_MAX) as u32;
                with_fd!(fd_in.as_raw_fd(), fixed, |a| with_fd!(
                    fd_out.as_raw_fd(),
                    fixed,
                    |b| opcode::Splice::new(a, pos(off_in), b, pos(off_out), len)
                        .flags(flags)
                        .build()
                ))
            }
            OpKind::Timeout { ts } => opcode::Timeout::new(&**ts).build(),
            OpKind::Close { fd } => opcode::Close::new(types::Fd(*fd)).build(),
            OpKind::WakerRead { fd, value } => {
                let ptr: *mut u64 = &mut **value;
                opcode::Read::new(types::Fd(fd.as_raw_fd()), ptr.cast(), 8).build()
            }
            // Submitted through `SendFile::round`; a lone NOP never reaches the ring.
            OpKind::SendFile(_) => opcode::Nop::new().build(),
        }
    }

    /// The fds this op's SQEs name that may be registered (sockets and pipes),
    /// so that `Ring` can use a registered slot for one of them.
    pub(crate) fn fds(&self) -> [Option<RawFd>; 2] {
        match self {
            OpKind::Recv { fd, .. }
            | OpKind::RecvMulti { fd }
            | OpKind::Send { fd, .. }
            | OpKind::SendZc { fd, .. }
            | OpKind::SendMsg { fd, .. }
            | OpKind::Poll { fd, .. } => [Some(fd.as_raw_fd()), None],
            OpKind::Splice { fd_in, fd_out, .. } => {
                [Some(fd_in.as_raw_fd()), Some(fd_out.as_raw_fd())]
            }
            OpKind::SendFile(sf) => [sf.sock.as_ref().map(|s| s.as_raw_fd()), None],
            _ => [None, None],
        }
    }

    /// Gives the buffers back, dropping the fd clones.
    pub(crate) fn into_buffers(self) -> (Option<Vec<u8>>, Option<Vec<Vec<u8>>>) {
        match self {
            OpKind::Recv { buf, .. }
            | OpKind::Send { buf, .. }
            | OpKind::SendZc { buf, .. }
            | OpKind::Read { buf, .. }
            | OpKind::Write { buf, .. } => (Some(buf), None),
            OpKind::SendMsg { bufs, .. } => (None, Some(bufs)),
            OpKind::SendFile(sf) => (Some(sf.head), None),
            OpKind::Accept { .. }
            | OpKind::RecvMulti { .. }
            | OpKind::Fsync { .. }
            | OpKind::Splice { .. }
            | OpKind::Poll { .. }
            | OpKind::Timeout { .. }
            | OpKind::Close { .. }
            | OpKind::WakerRead { .. } => (None, None),
        }
    }
}

/// Splice `len` bytes from the pipe to the socket; `more`: the frame goes on.
fn drain_sqe(pipe: &Pipe, sock: &OwnedFd, len: usize, more: bool, fixed: Fixed) -> squeue::Entry {
    with_fd!(sock.as_raw_fd(), fixed, |t| opcode::Splice::new(
        types::Fd(pipe.read.as_raw_fd()),
        -1,
        t,
        -1,
        len as u32,
    )
    .flags(if more { libc::SPLICE_F_MORE } else { 0 })
    .build())
}

/// A `msghdr` with no address, no control data and no iovecs yet.
pub(crate) fn empty_msghdr() -> Box<libc::msghdr> {
    // SAFETY: `msghdr` is a plain C struct of integers and raw pointers, for
    // which all-zero bytes are a valid value (null pointers, zero lengths).
    Box::new(unsafe { std::mem::zeroed() })
}

/// Maps a CQE result to `io::Result`.
pub(crate) fn cqe_result(res: i32) -> io::Result<usize> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as usize)
    }
}
