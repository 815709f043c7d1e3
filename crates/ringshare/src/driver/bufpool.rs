//! Idle large buffers of a worker, reused (READ data, large frames).

use ringshare_core::Connection;

use super::{POOL_BUF_MIN, POOL_BYTES_MAX};

/// Idle large buffers, reused so that a 1 MiB READ or WRITE does not map,
/// fault in and unmap fresh memory every time.
#[derive(Default)]
pub(super) struct BufPool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufPool {
    /// An empty buffer with room for at least `cap` bytes.
    pub(super) fn take(&mut self, cap: usize) -> Vec<u8> {
        if cap >= POOL_BUF_MIN {
            // The most recently used buffer that fits: it is the likeliest to
            // still be in the CPU cache.
            if let Some(i) = self.bufs.iter().rposition(|b| b.capacity() >= cap) {
                let b = self.bufs.swap_remove(i);
                self.bytes -= b.capacity();
                return b;
            }
        }
        Vec::with_capacity(cap)
    }

    /// Keep a buffer for later if it is large and the pool has room.
    pub(super) fn give(&mut self, mut b: Vec<u8>) {
        let cap = b.capacity();
        if cap < POOL_BUF_MIN || self.bytes + cap > POOL_BYTES_MAX {
            return;
        }
        b.clear();
        self.bytes += cap;
        self.bufs.push(b);
    }
}

/// A buffer for a READ of `cap` bytes: a large one from the worker's pool,
/// a small one from the connection's spare buffers (its sent replies).
pub(super) fn read_buf(pool: &mut BufPool, conn: &mut Connection, cap: usize) -> Vec<u8> {
    if cap < POOL_BUF_MIN {
        conn.spare_buf(cap)
    } else {
        pool.take(cap)
    }
}

/// A buffer the driver is done with goes back where it can serve again: a
/// large one (READ data, a large frame) to the worker's pool, a small one
/// (a reply, a request frame) to its connection, which builds its next
/// replies in it.
pub(super) fn give_back(pool: &mut BufPool, conn: Option<&mut Connection>, b: Vec<u8>) {
    match conn {
        Some(conn) if b.capacity() < POOL_BUF_MIN => conn.recycle(b),
        _ => pool.give(b),
    }
}
