//! Small READs, WRITEs from memory and fsyncs on files kept in memory, and I/O on nodes
//! without a descriptor (named streams, resource forks, the in-memory backend):
//! done in the ring's own thread instead of through io_uring.

use super::*;

/// Whether `req` is done in the ring's thread: on a file kept in memory
/// (`fd` is its descriptor), a READ or WRITE of at most
/// [`INLINE_IO_LEN_MAX`] bytes, a larger WRITE from memory that lands
/// within the file as it is (pages already there: a plain copy from the
/// buffer just filled here), or an fsync. A larger WRITE that extends the
/// file allocates its pages: an io_uring worker does it on the other core
/// while this thread receives the next one (done here, the new-file row lost
/// about a quarter of its speed (median 2.63 -> 1.95 GB/s) for no CPU saved:
/// docs/benchmarks.md, session 43).
pub(super) fn in_place(req: &IoRequest, fd: &OwnedFd) -> bool {
    if !req.node.in_memory() {
        return false;
    }
    match &req.op {
        IoOp::Read { len, .. } => *len <= INLINE_IO_LEN_MAX,
        IoOp::Write {
            offset, start, end, ..
        } => {
            end - start <= INLINE_IO_LEN_MAX
                || rustix::fs::fstat(fd).is_ok_and(|st| {
                    u64::try_from(st.st_size)
                        .is_ok_and(|size| offset.saturating_add((end - start) as u64) <= size)
                })
        }
        // tmpfs has nothing to sync: a write that goes through is answered at once.
        IoOp::Sync => true,
        _ => false,
    }
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
