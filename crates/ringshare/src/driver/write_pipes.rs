//! Pipes that carry spliced WRITE payloads from the socket to the file:
//! taking them for a payload, counting the live ones, keeping idle ones.

use std::cell::Cell;
use std::ops::Deref;
use std::rc::Rc;

use ringshare_engine::{Ring, SharedFd, SplicePipe};

use super::{
    Conn, Rx, PIPES_KEPT_MAX, PIPES_LIVE_MAX, PIPE_STEP, WRITE_HEAD_LEN, WRITE_SPLICE_LEN_MAX,
};

/// A pipe for WRITE payloads, counted in its worker's `pipes_live` while it
/// exists.
pub(super) struct Pipe {
    pipe: SplicePipe,
    live: Rc<Cell<usize>>,
}

impl Pipe {
    pub(super) fn new(pipe: SplicePipe, live: &Rc<Cell<usize>>) -> Pipe {
        live.set(live.get() + 1);
        Pipe {
            pipe,
            live: Rc::clone(live),
        }
    }
}

impl Deref for Pipe {
    type Target = SplicePipe;
    fn deref(&self) -> &SplicePipe {
        &self.pipe
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.live.set(self.live.get().saturating_sub(1));
    }
}

/// A spliced WRITE payload on its way from its pipes into the file: pipe
/// `next` is being written at `offset + written`.
pub(super) struct PipedWrite {
    pub(super) pipes: Vec<Pipe>,
    pub(super) file: SharedFd,
    pub(super) offset: u64,
    pub(super) len: usize,
    pub(super) next: usize,
    pub(super) written: usize,
    /// Who writes the file (the open's user).
    pub(super) who: Option<ringshare_vfs::Who>,
}

impl PipedWrite {
    /// Bytes pipe `i` holds.
    pub(super) fn piece(&self, i: usize) -> usize {
        piece_len(self.len, i)
    }
}

/// Keeps emptied pipes for reuse while the pool has room; the rest are closed.
pub(super) fn keep_pipes(pool: &mut Vec<Pipe>, pipes: impl IntoIterator<Item = Pipe>) {
    for p in pipes {
        if pool.len() < PIPES_KEPT_MAX {
            pool.push(p);
        }
    }
}

/// Bytes of a `len`-byte payload that pipe `i` takes.
pub(super) fn piece_len(len: usize, i: usize) -> usize {
    len.saturating_sub(i * PIPE_STEP).min(PIPE_STEP)
}

/// Whether the large frame starting in `c.buf` (frame length `len`) is a
/// WRITE whose payload can be spliced from the socket into pipes: the core
/// allows it, it is at most `WRITE_SPLICE_LEN_MAX`, pipes of `PIPE_STEP`
/// can be had (`pipe_size_max`, lowered by the first refusal: the limit is
/// `/proc/sys/fs/pipe-max-size` unless privileged) and the worker stays
/// within `PIPES_LIVE_MAX`. The payload bytes already in `c.buf` go into the
/// first pipe. `None`: receive the frame as usual.
pub(super) fn detach_write(
    c: &mut Conn,
    pipes: &mut Vec<Pipe>,
    live: &Rc<Cell<usize>>,
    pipe_size_max: &mut usize,
    ring: &mut Ring,
    lists: &mut Vec<Vec<Pipe>>,
    len: usize,
) -> Option<Rx> {
    // One payload at a time is kept for a WRITE that waits (the core says so too).
    if c.pipe_loaded.is_some() {
        return None;
    }
    let head_end = WRITE_HEAD_LEN;
    let head = c.buf.get(4..head_end)?;
    let n = c.conn.detachable_write(head, len)?;
    if n > WRITE_SPLICE_LEN_MAX || PIPE_STEP > *pipe_size_max {
        return None;
    }
    let prefix = &c.buf[head_end..];
    let rest = n.checked_sub(prefix.len())?;
    if prefix.len() > piece_len(n, 0) {
        return None;
    }
    // New pipes beyond the idle ones must stay within the worker's budget of
    // descriptors; past it the payload is received into memory.
    let count = n.div_ceil(PIPE_STEP);
    if live.get() - pipes.len().min(live.get()) + count > PIPES_LIVE_MAX {
        return None;
    }
    // The list comes from the worker's spares (see `Worker::on_io`).
    let mut taken: Vec<Pipe> = lists.pop().unwrap_or_default();
    taken.clear();
    taken.reserve(count);
    for i in 0..count {
        let piece = piece_len(n, i);
        let pipe = match pipes.iter().position(|p| p.capacity >= piece) {
            Some(k) => pipes.swap_remove(k),
            None => match ring.new_splice_pipe_for(piece) {
                Ok(p) => Pipe::new(p, live),
                Err(_) => {
                    keep_pipes(pipes, taken);
                    return None;
                }
            },
        };
        if pipe.capacity < piece {
            *pipe_size_max = pipe.capacity;
            taken.push(pipe);
            keep_pipes(pipes, taken);
            return None;
        }
        taken.push(pipe);
    }
    // An empty pipe with room for its whole piece: this cannot block.
    let mut at = 0;
    while at < prefix.len() {
        match rustix::io::write(&*taken[0].write, &prefix[at..]) {
            Ok(k) if k > 0 => at += k,
            _ => return None,
        }
    }
    let mut head_buf = c.conn.spare_buf(head.len());
    head_buf.extend_from_slice(head);
    Some(Rx::Pipe {
        head: head_buf,
        len: n,
        rest,
        pipes: taken,
        moving: 0,
        waited: false,
    })
}

/// The pipes of a WRITE payload received apart go (with their bytes) unless
/// its WRITE waits for its file's home (`Connection::holds_payload`): it
/// failed, or was written (its `IoOp::WriteReceived` took them). Held, they
/// count in the worker's `pipes_live` (8 MiB: 8 pipes) until the WRITE runs
/// again, within the home call's 2 s bound, or its connection goes.
pub(super) fn drop_unheld_payload(c: &mut Conn) {
    if c.pipe_loaded.is_some() && !c.conn.holds_payload() {
        c.pipe_loaded = None;
    }
}

/// Appends exactly `n` bytes read from `fd` (a pipe known to hold them) to `buf`.
pub(super) fn read_exact_into(fd: &SharedFd, buf: &mut Vec<u8>, n: usize) -> bool {
    let start = buf.len();
    buf.resize(start + n, 0);
    let mut at = start;
    while at < buf.len() {
        match rustix::io::read(&**fd, &mut buf[at..]) {
            Ok(k) if k > 0 => at += k,
            _ => return false,
        }
    }
    true
}
