//! What the core asks the driver to do, and what the driver gives back.
//!
//! The core never touches a socket, a clock or a file descriptor's data path.
//! It queues [`Output`]s; the driver sends frames, performs file I/O through
//! io_uring (or through the backend's own methods when a node has no fd) and
//! feeds completions back with [`crate::Connection::complete_io`].

use std::fmt;
use std::sync::Arc;

use ringshare_vfs::{FsError, Node};

/// The present, as the driver sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Now {
    /// Monotonic milliseconds (any epoch).
    pub mono_ms: u64,
    /// Wall clock as a FILETIME (100 ns units since 1601).
    pub filetime: u64,
}

/// A source of unpredictable bytes (challenges, session ids, GUIDs).
pub trait Entropy: Send {
    fn fill(&mut self, out: &mut [u8]);
}

/// Something the driver must do for the connection.
pub enum Output {
    /// One direct-TCP frame, as parts to be sent back to back (the first part
    /// starts with the 4-byte transport header). A READ response keeps the file
    /// data in its own part, so it is never copied into the header buffer.
    Send(Frame),
    /// File I/O to perform; complete it with `complete_io(id, ..)`.
    Io(IoRequest),
    /// A question to answer away from the I/O thread ([`crate::lookup`]); the answer goes to
    /// [`crate::Connection::complete_lookup`]. (Boxed: a lookup is rare, and the other
    /// outputs, moved twice per reply, then fit in 128 bytes, moved with inline stores.)
    Lookup(Box<crate::lookup::LookupRequest>),
    /// One direct-TCP frame made of `head` followed by file bytes: an unsigned
    /// READ response whose data the driver moves from the file to the socket
    /// without copying it (splice). Only queued after
    /// [`crate::Connection::set_send_file`] turned it on.
    SendFile(SendFile),
    /// Close the connection once the frames queued before this are sent.
    Close,
}

/// The parts of one frame. Most frames are one buffer (every reply built
/// in one piece, a READ reply built around its data), held without a list
/// so that answering a request allocates nothing; a compound whose READ data
/// stays in its own buffer is a list.
pub enum Frame {
    One(Vec<u8>),
    Parts(Vec<Vec<u8>>),
}

impl Frame {
    /// The frame as one buffer (its parts joined when there are several).
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            Frame::One(b) => b,
            Frame::Parts(p) => p.concat(),
        }
    }

    /// The buffers, in order, for the driver to take.
    pub fn into_parts(self) -> impl Iterator<Item = Vec<u8>> {
        let (one, many) = match self {
            Frame::One(b) => (Some(b), Vec::new()),
            Frame::Parts(p) => (None, p),
        };
        one.into_iter().chain(many)
    }
}

impl std::ops::Deref for Frame {
    type Target = [Vec<u8>];

    fn deref(&self) -> &[Vec<u8>] {
        match self {
            Frame::One(b) => std::slice::from_ref(b),
            Frame::Parts(p) => p,
        }
    }
}

/// A frame whose tail comes straight from a file.
pub struct SendFile {
    /// Transport header, SMB2 header and READ response body.
    pub head: Vec<u8>,
    pub node: Arc<dyn Node>,
    pub offset: u64,
    /// File bytes the frame carries after `head`. If the file has shrunk
    /// since the core looked, the sender pads with zeros up to `len`: the frame
    /// length is already on the wire.
    pub len: usize,
}

impl SendFile {
    /// The whole frame in memory, read through the node's own methods (for
    /// harnesses and backends without a descriptor); zero-padded like the
    /// driver pads a file that shrank.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.head.clone();
        let start = out.len();
        out.resize(start + self.len, 0);
        let mut done = 0;
        while done < self.len {
            match self
                .node
                .read_at(&mut out[start + done..], self.offset + done as u64)
            {
                Ok(n) if n > 0 => done += n,
                _ => break,
            }
        }
        out
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Send(parts) => write!(
                f,
                "Send({} bytes in {} parts)",
                parts.iter().map(Vec::len).sum::<usize>(),
                parts.len()
            ),
            Output::Io(r) => write!(f, "Io({:?})", r),
            Output::Lookup(r) => write!(f, "{r:?}"),
            Output::SendFile(sf) => write!(
                f,
                "SendFile({} head bytes + {} file bytes at {})",
                sf.head.len(),
                sf.len,
                sf.offset
            ),
            Output::Close => write!(f, "Close"),
        }
    }
}

/// File I/O the core needs.
pub struct IoRequest {
    pub id: u64,
    pub node: Arc<dyn Node>,
    pub op: IoOp,
}

impl fmt::Debug for IoRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IoRequest {{ id: {}, op: {:?} }}", self.id, self.op)
    }
}

pub enum IoOp {
    /// Read up to `len` bytes at `offset` into a buffer that starts with
    /// `headroom` bytes of room (any content) before the data, so the reply's
    /// headers can be written in front of the data and the frame signed and
    /// sent as one piece.
    Read {
        offset: u64,
        len: usize,
        headroom: usize,
    },
    /// Write `buf[start..end]` at `offset`. `buf` is the received frame itself,
    /// so the payload is written from where it landed.
    Write {
        offset: u64,
        buf: Vec<u8>,
        start: usize,
        end: usize,
    },
    /// Write the `len` payload bytes of a WRITE that the driver received
    /// apart from its header (see `Connection::detachable_write`) at
    /// `offset`, from where the driver holds them (a pipe).
    WriteReceived { offset: u64, len: usize },
    /// fsync.
    Sync,
}

impl fmt::Debug for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoOp::Read { offset, len, .. } => {
                write!(f, "Read {{ offset: {offset}, len: {len} }}")
            }
            IoOp::Write {
                offset, start, end, ..
            } => write!(f, "Write {{ offset: {offset}, len: {} }}", end - start),
            IoOp::WriteReceived { offset, len } => {
                write!(f, "WriteReceived {{ offset: {offset}, len: {len} }}")
            }
            IoOp::Sync => write!(f, "Sync"),
        }
    }
}

/// The result of an [`IoRequest`].
#[derive(Debug)]
pub enum IoDone {
    /// The buffer: `headroom` bytes, then the bytes read (shorter than asked at end of file).
    Read(Result<Vec<u8>, FsError>),
    /// Bytes written.
    Write(Result<usize, FsError>),
    Sync(Result<(), FsError>),
}

impl IoRequest {
    /// Perform the request synchronously through the node's own methods: for
    /// backends without a file descriptor (the in-memory backend) and for tests.
    pub fn run_blocking(&self) -> IoDone {
        self.run_blocking_into(Vec::new())
    }

    /// [`IoRequest::run_blocking`], a READ's data going into `buf` (emptied
    /// first; a caller's pooled buffer, so that no fresh one is allocated).
    pub fn run_blocking_into(&self, mut buf: Vec<u8>) -> IoDone {
        match &self.op {
            IoOp::Read {
                offset,
                len,
                headroom,
            } => {
                buf.clear();
                buf.resize(headroom + len, 0);
                IoDone::Read(self.node.read_at(&mut buf[*headroom..], *offset).map(|n| {
                    buf.truncate(headroom + n);
                    buf
                }))
            }
            IoOp::Write {
                offset,
                buf,
                start,
                end,
            } => IoDone::Write(self.node.write_at(&buf[*start..*end], *offset)),
            // The payload is with the driver; there is nothing here to write.
            IoOp::WriteReceived { .. } => IoDone::Write(Err(FsError::Io)),
            IoOp::Sync => IoDone::Sync(self.node.sync()),
        }
    }
}
