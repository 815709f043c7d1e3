//! Splices on a [`Ring`]: [`Ring::send_file`] (a file's bytes to a socket through a pipe, in
//! rounds of linked SQEs; on the side ring when there is one, `ring_side.rs`), [`Ring::splice`]
//! and the pipes they use.

use std::io;
use std::sync::Arc;

use crate::creds::Creds;
use crate::op::{OpKind, Plan, SendFile};
use crate::SharedFd;

use super::Ring;

/// A pipe for [`Ring::splice`]: bytes written to `write` come out of `read`;
/// it holds `capacity` bytes at most.
pub struct SplicePipe {
    pub read: SharedFd,
    pub write: SharedFd,
    pub capacity: usize,
}

impl Ring {
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
}
