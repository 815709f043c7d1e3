//! Small READs and WRITEs (and fsyncs) on files kept in memory, and I/O on nodes without
//! a descriptor (named streams, resource forks, the in-memory backend):
//! done in the ring's own thread instead of through io_uring.

use super::*;

/// Whether `req` is done in the ring's thread: a READ or WRITE of at most
/// [`INLINE_IO_LEN_MAX`] bytes, or an fsync, on a file kept in memory.
pub(super) fn in_place(req: &IoRequest) -> bool {
    let len = match &req.op {
        IoOp::Read { len, .. } => *len,
        IoOp::Write { start, end, .. } => end - start,
        // tmpfs has nothing to sync: a write that goes through is answered at once.
        IoOp::Sync => 0,
        _ => return false,
    };
    len <= INLINE_IO_LEN_MAX && req.node.in_memory()
}

/// Does `req` in this thread: READs into a pooled buffer, WRITE buffers back
/// to the pool.
pub(super) fn run_here(pool: &mut BufPool, conn: &mut Connection, req: IoRequest) -> IoDone {
    let buf = match &req.op {
        IoOp::Read { len, headroom, .. } => read_buf(pool, conn, headroom + len),
        _ => Vec::new(),
    };
    let done = req.run_blocking_into(buf);
    if let IoOp::Write { buf, .. } = req.op {
        give_back(pool, Some(conn), buf);
    }
    done
}
