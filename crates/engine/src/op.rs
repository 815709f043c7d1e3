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

/// Largest length put in one SQE; longer transfers continue in a follow-up SQE.
const SQE_LEN_MAX: usize = 1 << 30;

/// `IOV_MAX` on Linux: the most iovecs one `sendmsg` takes.
pub(crate) const IOVECS_MAX: usize = 1024;

pub(crate) struct Op {
    pub(crate) token: u64,
    /// Set by `Ring::cancel`: do not continue or re-arm this op.
    pub(crate) cancelled: bool,
    pub(crate) kind: OpKind,
}

pub(crate) enum OpKind {
    /// Multishot accept; stays in the slab while armed.
    Accept {
        fd: Arc<OwnedFd>,
    },
    /// Receive into `buf`'s spare capacity.
    Recv {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
    },
    /// Send `buf[pos..]`; `sent` counts bytes already sent by earlier SQEs.
    Send {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        pos: usize,
        sent: usize,
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
}

impl OpKind {
    /// Builds the SQE for the op's current state (first submission or continuation).
    /// Every pointer in it points into memory owned by `self`.
    pub(crate) fn sqe(&mut self) -> squeue::Entry {
        match self {
            OpKind::Accept { fd } => opcode::AcceptMulti::new(types::Fd(fd.as_raw_fd()))
                .flags(libc::SOCK_CLOEXEC)
                .build(),
            OpKind::Recv { fd, buf } => {
                let spare = buf.spare_capacity_mut();
                let len = spare.len().min(SQE_LEN_MAX) as u32;
                opcode::Recv::new(types::Fd(fd.as_raw_fd()), spare.as_mut_ptr().cast(), len).build()
            }
            OpKind::Send { fd, buf, pos, .. } => {
                let rest = &buf[*pos..];
                let len = rest.len().min(SQE_LEN_MAX) as u32;
                opcode::Send::new(types::Fd(fd.as_raw_fd()), rest.as_ptr(), len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
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
                opcode::SendMsg::new(types::Fd(fd.as_raw_fd()), &**msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
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
            OpKind::Timeout { ts } => opcode::Timeout::new(&**ts).build(),
            OpKind::Close { fd } => opcode::Close::new(types::Fd(*fd)).build(),
            OpKind::WakerRead { fd, value } => {
                let ptr: *mut u64 = &mut **value;
                opcode::Read::new(types::Fd(fd.as_raw_fd()), ptr.cast(), 8).build()
            }
        }
    }

    /// Gives the buffers back, dropping the fd clones.
    pub(crate) fn into_buffers(self) -> (Option<Vec<u8>>, Option<Vec<Vec<u8>>>) {
        match self {
            OpKind::Recv { buf, .. }
            | OpKind::Send { buf, .. }
            | OpKind::Read { buf, .. }
            | OpKind::Write { buf, .. } => (Some(buf), None),
            OpKind::SendMsg { bufs, .. } => (None, Some(bufs)),
            OpKind::Accept { .. }
            | OpKind::Fsync { .. }
            | OpKind::Timeout { .. }
            | OpKind::Close { .. }
            | OpKind::WakerRead { .. } => (None, None),
        }
    }
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
