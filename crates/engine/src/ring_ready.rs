//! Waiting for a descriptor to become ready, and work the ring's user did in its own thread
//! reported as if the ring had done it.

use std::io;
use std::sync::Arc;

use super::{OpKind, Ring, SharedFd};

impl Ring {
    /// Completes with `Ok(revents)` once `fd` is readable (for a TCP socket:
    /// once `SO_RCVLOWAT` bytes are queued, or the peer closed; see
    /// [`crate::net::set_rcvlowat`]). Waiting costs no thread.
    pub fn poll_readable(&mut self, fd: &SharedFd, token: u64) {
        self.poll(fd, libc::POLLIN as u32, token);
    }

    /// Completes with `Ok(revents)` once `fd` can take more bytes (for a TCP socket: once its
    /// send buffer has room again), or has failed. Waiting costs no thread.
    pub fn poll_writable(&mut self, fd: &SharedFd, token: u64) {
        self.poll(fd, libc::POLLOUT as u32, token);
    }

    /// A one-shot poll of `fd` for `events`.
    fn poll(&mut self, fd: &SharedFd, events: u32, token: u64) {
        let fd = Arc::clone(fd);
        self.start(token, OpKind::Poll { fd, events });
    }

    /// Reports `result` (and `buf`) for `token` as if an operation of the ring had ended: for
    /// work the caller did in its own thread, so that its end is handled where the ring's
    /// are. It comes with the next completions, and the next wait does not block before it.
    pub fn done_here(&mut self, token: u64, result: io::Result<usize>, buf: Option<Vec<u8>>) {
        self.complete_now(token, result, buf, None);
    }
}
