//! [`Completion`]: what an operation gives back when it ends.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;

use crate::ring::Ring;

/// The outcome of one operation (or one shot of a multishot accept).
pub struct Completion {
    /// The caller's token, or [`Ring::WAKE_TOKEN`] for a wake-up.
    pub user_data: u64,
    /// Bytes transferred, the accepted fd number, the wake count, or 0.
    pub result: io::Result<usize>,
    /// The buffer given to `recv`, `send`, `read_at` or `write_at`, always returned.
    pub buf: Option<Vec<u8>>,
    /// The buffers given to `send_vectored`, always returned.
    pub bufs: Option<Vec<Vec<u8>>>,
    /// The accepted connection.
    pub fd: Option<OwnedFd>,
    /// For `accept_multishot` and `recv_multishot`: the operation is still
    /// armed and more completions follow.
    pub more: bool,
    /// For `send_zc`: the kernel copied the bytes after all (so zero-copy
    /// gains nothing on this path: loopback, or a device without
    /// scatter-gather).
    pub zc_copied: bool,
    /// For `recv_multishot`: the provided buffer holding the bytes, and the
    /// number of the lending (see [`Ring::received`]).
    pub(crate) recv_buf: Option<(u16, usize, u64)>,
    /// A quiet op's success ([`crate::Ring::quietly`]): it does not end a wait by itself.
    pub(crate) quiet: bool,
}

impl Completion {
    pub(crate) fn new(user_data: u64, result: io::Result<usize>) -> Self {
        Completion {
            user_data,
            result,
            buf: None,
            bufs: None,
            fd: None,
            more: false,
            zc_copied: false,
            recv_buf: None,
            quiet: false,
        }
    }

    /// Takes the accepted connection out of the completion.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fd.take()
    }

    /// Takes the buffer out of the completion.
    pub fn take_buf(&mut self) -> Option<Vec<u8>> {
        self.buf.take()
    }

    /// True for the completion a [`Waker::wake`] produces.
    pub fn is_wake(&self) -> bool {
        self.user_data == Ring::WAKE_TOKEN
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("user_data", &self.user_data)
            .field("result", &self.result)
            .field("buf_len", &self.buf.as_ref().map(Vec::len))
            .field("bufs", &self.bufs.as_ref().map(Vec::len))
            .field("fd", &self.fd)
            .field("more", &self.more)
            .field("recv_buf", &self.recv_buf)
            .finish()
    }
}
