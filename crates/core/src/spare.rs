//! Small byte buffers a connection reuses, so that answering a request
//! allocates nothing once the connection has warmed up: reply bodies and
//! frame heads are taken from here, and come back when the frame is built
//! (bodies) or, through [`crate::Connection::recycle`], once the driver has
//! sent the frame; the driver takes the buffers it cuts small request frames
//! into from here too ([`crate::Connection::spare_buf`]).

/// Buffers kept at most; more are dropped.
const SPARE_BUFS_MAX: usize = 32;
/// A buffer larger than this is not kept (a large frame's buffer belongs to
/// the driver's pool, and a connection should not sit on big buffers).
const SPARE_BUF_CAPACITY_MAX: usize = 64 * 1024;
/// New buffers get at least this much room, so a reused one fits most heads
/// and bodies without growing.
const SPARE_BUF_CAPACITY_MIN: usize = 512;

#[derive(Default)]
pub(crate) struct SpareBufs {
    bufs: Vec<Vec<u8>>,
}

impl SpareBufs {
    /// An empty buffer with room for at least `capacity` bytes: the most
    /// recently returned one (likely still in cache), or a new one.
    pub fn take(&mut self, capacity: usize) -> Vec<u8> {
        match self.bufs.pop() {
            Some(mut b) => {
                b.clear();
                b.reserve(capacity);
                b
            }
            None => Vec::with_capacity(capacity.max(SPARE_BUF_CAPACITY_MIN)),
        }
    }

    /// Keeps `b` for reuse if it is small enough and there is room.
    pub fn give(&mut self, b: Vec<u8>) {
        if b.capacity() > 0
            && b.capacity() <= SPARE_BUF_CAPACITY_MAX
            && self.bufs.len() < SPARE_BUFS_MAX
        {
            self.bufs.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_buffer_is_handed_out_again_empty() {
        let mut s = SpareBufs::default();
        let mut b = s.take(10);
        b.extend_from_slice(b"hello");
        let p = b.as_ptr();
        s.give(b);
        let again = s.take(10);
        assert_eq!(again.as_ptr(), p);
        assert!(again.is_empty());
    }

    #[test]
    fn large_buffers_and_buffers_beyond_the_limit_are_not_kept() {
        let mut s = SpareBufs::default();
        s.give(Vec::with_capacity(SPARE_BUF_CAPACITY_MAX + 1));
        assert!(s.bufs.is_empty());
        for _ in 0..SPARE_BUFS_MAX + 5 {
            s.give(Vec::with_capacity(100));
        }
        assert_eq!(s.bufs.len(), SPARE_BUFS_MAX);
    }
}
