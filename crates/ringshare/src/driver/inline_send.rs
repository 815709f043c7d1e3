//! Spliced READ replies made by the ring's own thread: `splice(2)` from the file into a pipe
//! and from the pipe into the socket, made here without waiting, instead of as a chain of linked
//! SQEs that io_uring hands to its io-wq workers (it runs every splice there, as no splice can be
//! asked not to wait through it). Done for a file kept in memory (tmpfs, ramfs), and for one on a
//! local disk file system when the page cache holds the whole reply ([`Here`]): the fill then
//! reads memory. The socket is made non-blocking for the drain, and when its send buffer is
//! full the rest waits for a `POLLOUT` on the ring. What it saves is the hand-offs to io-wq and
//! back (docs/benchmarks.md, session 68).

use std::io;
use std::os::fd::AsFd;

use ringshare_engine::SharedFd;
use rustix::io::Errno;
use rustix::net::SendFlags;
use rustix::pipe::SpliceFlags;

use super::{act_for, Pipe, Who};

/// Whether a READ reply of a file is spliced by the ring's thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Here {
    /// The file is kept in memory (tmpfs, ramfs): always.
    Always,
    /// A file on a local disk file system: when every page of the reply is in the page cache
    /// as it starts (`cachestat(2)`, [`ringshare_engine::sys::all_cached`]), so that its fill
    /// reads memory. A page evicted right then makes the fill wait for the disk in this thread:
    /// rare, and one read's time. Since Linux 6.10 `cachestat` answers only a caller that owns
    /// the file or may write it (else `EPERM`): it is asked as the reader, and for a file the
    /// reader may only read the reply goes through io_uring's workers as before.
    IfCached,
    /// A file whose reads may wait on a network or another process (FUSE, NFS, CephFS...):
    /// never; io_uring's workers splice it.
    Never,
}

impl Here {
    pub(super) fn of(node: &dyn ringshare_vfs::Node) -> Here {
        if node.in_memory() {
            Here::Always
        } else if node.ring_io_may_block() {
            Here::Never
        } else {
            Here::IfCached
        }
    }

    /// Whether `len` bytes of `file` from `offset`, read by `who`, are spliced here, as the
    /// reply starts.
    pub(super) fn now(self, file: &SharedFd, offset: u64, len: usize, who: Option<&Who>) -> bool {
        match self {
            Here::Always => true,
            Here::IfCached => {
                // As the reader, as the splices will run (a failed switch: not here).
                act_for(who).is_ok()
                    && ringshare_engine::sys::all_cached(file.as_fd(), offset, len as u64)
            }
            Here::Never => false,
        }
    }
}

/// A spliced READ reply under way in the ring's thread.
pub(super) struct InlineSend {
    head: Vec<u8>,
    head_pos: usize,
    file: SharedFd,
    offset: u64,
    /// File bytes not yet in the pipe.
    left: usize,
    /// Bytes in the pipe, not yet in the socket.
    in_pipe: usize,
    /// File bytes that reached the socket.
    sent: usize,
    /// The file ended before `left` reached 0.
    eof: bool,
    pipe: Option<Pipe>,
    /// Who reads the file (the open's user; `None`: the server).
    who: Option<Who>,
}

/// What a step came to.
pub(super) enum Step {
    /// The socket is full: go on once it can take more.
    Blocked,
    /// All went (`Ok(file bytes sent)`, fewer than asked only if the file ended first) or the
    /// first error; the head comes back, and the pipe if it is empty.
    Done(io::Result<usize>, Vec<u8>, Option<Pipe>),
}

impl InlineSend {
    pub(super) fn new(
        head: Vec<u8>,
        file: SharedFd,
        offset: u64,
        len: usize,
        who: Option<Who>,
    ) -> InlineSend {
        InlineSend {
            head,
            head_pos: 0,
            file,
            offset,
            left: len,
            in_pipe: 0,
            sent: 0,
            eof: false,
            pipe: None,
            who,
        }
    }

    /// Who its splices run as.
    pub(super) fn who(&self) -> Option<&Who> {
        self.who.as_ref()
    }

    /// Whether it still needs a pipe ([`InlineSend::give_pipe`]).
    pub(super) fn needs_pipe(&self) -> bool {
        self.pipe.is_none()
    }

    /// The pipe it splices through from now on.
    pub(super) fn give_pipe(&mut self, pipe: Pipe) {
        self.pipe = Some(pipe);
    }

    /// Moves what can be moved now without waiting. `sock` must be non-blocking while this
    /// runs.
    pub(super) fn step(&mut self, sock: impl AsFd) -> Step {
        match self.go(sock.as_fd()) {
            Ok(true) => self.end(Ok(self.sent)),
            Ok(false) => Step::Blocked,
            Err(e) => self.end(Err(e)),
        }
    }

    /// Ends it with `e` before or between steps.
    pub(super) fn fail(&mut self, e: io::Error) -> Step {
        self.end(Err(e))
    }

    /// Ends it with `result`: the head back, and the pipe if it is empty (a pipe that may
    /// still hold bytes is not used again).
    fn end(&mut self, result: io::Result<usize>) -> Step {
        let pipe = self.pipe.take().filter(|_| self.in_pipe == 0);
        Step::Done(result, std::mem::take(&mut self.head), pipe)
    }

    /// True once everything went, false when the socket is full.
    fn go(&mut self, sock: std::os::fd::BorrowedFd<'_>) -> io::Result<bool> {
        let Some(pipe) = self.pipe.as_ref() else {
            return Err(io::Error::other("no pipe to splice through"));
        };
        while self.head_pos < self.head.len() {
            let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL | SendFlags::MORE;
            match rustix::net::send(sock, &self.head[self.head_pos..], flags) {
                Ok(n) => self.head_pos += n,
                Err(Errno::AGAIN) => return Ok(false),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        loop {
            if self.in_pipe == 0 {
                if self.left == 0 || self.eof {
                    return Ok(true);
                }
                let want = self.left.min(pipe.capacity);
                let mut off = self.offset;
                let flags = SpliceFlags::NONBLOCK;
                match rustix::pipe::splice(
                    &*self.file,
                    Some(&mut off),
                    &*pipe.write,
                    None,
                    want,
                    flags,
                ) {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        self.offset = off;
                        self.in_pipe = n;
                        self.left -= n.min(self.left);
                    }
                    Err(Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
                continue;
            }
            let more = self.left > 0 && !self.eof;
            let flags = if more {
                SpliceFlags::NONBLOCK | SpliceFlags::MORE
            } else {
                SpliceFlags::NONBLOCK
            };
            match rustix::pipe::splice(&*pipe.read, None, sock, None, self.in_pipe, flags) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.in_pipe -= n.min(self.in_pipe);
                    self.sent += n;
                    if self.in_pipe > 0 {
                        // Short: the socket's buffer is full.
                        return Ok(false);
                    }
                }
                Err(Errno::AGAIN) => return Ok(false),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
