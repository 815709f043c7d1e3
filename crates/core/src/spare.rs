//! Small byte buffers a connection reuses, so that answering a request
//! allocates nothing once the connection has warmed up: reply bodies and
//! frame heads are taken from here, and come back when the frame is built
//! (bodies) or, through [`crate::Connection::recycle`], once the driver has
//! sent the frame; the driver takes the buffers it cuts small request frames
//! into, and small READs' buffers, from here too
//! ([`crate::Connection::spare_buf`]).

/// Buffers kept at most (a client with 32 small READs in flight cycles
/// about twice that: their data buffers and their request frames).
const SPARE_BUFS_MAX: usize = 96;
/// Bytes of buffers kept at most, so that an idle connection does not sit
/// on much memory.
const SPARE_BYTES_MAX: usize = 256 * 1024;
/// A buffer larger than this is not kept (a large frame's buffer belongs to
/// the driver's pool).
const SPARE_BUF_CAPACITY_MAX: usize = 64 * 1024;
/// New buffers get at least this much room, so a reused one fits most heads
/// and bodies without growing.
const SPARE_BUF_CAPACITY_MIN: usize = 512;
/// How far back `take` looks for a buffer large enough.
const TAKE_SEARCH_MAX: usize = 16;

#[derive(Default)]
pub(crate) struct SpareBufs {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl SpareBufs {
    /// An empty buffer with room for at least `capacity` bytes: the most
    /// recently returned one that is large enough (likely still in cache),
    /// or a new one. A smaller spare is not grown: it stays for a smaller use.
    pub fn take(&mut self, capacity: usize) -> Vec<u8> {
        let start = self.bufs.len().saturating_sub(TAKE_SEARCH_MAX);
        let found = self.bufs[start..]
            .iter()
            .rposition(|b| b.capacity() >= capacity);
        match found {
            Some(i) => {
                let mut b = self.bufs.remove(start + i);
                self.bytes -= b.capacity();
                b.clear();
                b
            }
            None => Vec::with_capacity(capacity.max(SPARE_BUF_CAPACITY_MIN)),
        }
    }

    /// Keeps `b` for reuse if its size is one `take` hands out (from
    /// [`SPARE_BUF_CAPACITY_MIN`] to [`SPARE_BUF_CAPACITY_MAX`]) and there is
    /// room. A smaller buffer (a body some command allocated for itself) is
    /// let go: kept, such buffers filled the window `take` looks in, so that
    /// every take allocated anew while every give of a larger buffer, the
    /// list being full, freed it (three allocations per ECHO at 32 in flight).
    pub fn give(&mut self, b: Vec<u8>) {
        let cap = b.capacity();
        if (SPARE_BUF_CAPACITY_MIN..=SPARE_BUF_CAPACITY_MAX).contains(&cap)
            && self.bufs.len() < SPARE_BUFS_MAX
            && self.bytes + cap <= SPARE_BYTES_MAX
        {
            self.bytes += cap;
            self.bufs.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_smaller_than_any_take_is_not_kept() {
        let mut s = SpareBufs::default();
        let big = s.take(10);
        let p = big.as_ptr();
        s.give(big);
        for _ in 0..TAKE_SEARCH_MAX * 2 {
            s.give(Vec::with_capacity(4));
        }
        assert_eq!(s.bufs.len(), 1);
        let again = s.take(100);
        assert_eq!(again.as_ptr(), p);
    }

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
        assert_eq!(s.bytes, 0);
    }

    #[test]
    fn a_spare_too_small_is_left_for_a_smaller_use() {
        let mut s = SpareBufs::default();
        s.give(Vec::with_capacity(600));
        s.give(Vec::with_capacity(5000));
        s.give(Vec::with_capacity(600));
        assert_eq!(s.take(4000).capacity(), 5000);
        assert_eq!(s.bufs.len(), 2);
        let fresh = s.take(8000);
        assert!(fresh.capacity() >= 8000);
        assert_eq!(s.bufs.len(), 2, "the small ones stay");
    }

    #[test]
    fn large_buffers_and_buffers_beyond_the_limits_are_not_kept() {
        let mut s = SpareBufs::default();
        s.give(Vec::with_capacity(SPARE_BUF_CAPACITY_MAX + 1));
        assert!(s.bufs.is_empty());
        for _ in 0..SPARE_BUFS_MAX + 5 {
            s.give(Vec::with_capacity(SPARE_BUF_CAPACITY_MIN));
        }
        assert_eq!(s.bufs.len(), SPARE_BUFS_MAX);
        let mut s = SpareBufs::default();
        for _ in 0..20 {
            s.give(Vec::with_capacity(SPARE_BUF_CAPACITY_MAX));
        }
        assert_eq!(s.bytes, SPARE_BYTES_MAX);
    }
}
