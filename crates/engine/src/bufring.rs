//! A ring of provided buffers (`IORING_REGISTER_PBUF_RING`) for multishot
//! receives: the kernel picks a free buffer when data arrives, so no
//! connection needs a receive buffer of its own while it waits.
//!
//! Ownership of buffer `bid`: the kernel's from [`BufRing::push`] until a
//! completion names it; the ring's owner's from then until it is pushed
//! again. Only the owner's side is ever read through [`BufRing::data`].

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::Submitter;

/// The buffer group id the engine's multishot receives select from.
pub(crate) const GROUP: u16 = 0;

pub(crate) struct BufRing {
    /// The ring of `count` entries the kernel reads (page aligned).
    entries: NonNull<BufRingEntry>,
    entries_layout: Layout,
    /// `count` buffers of `buf_len` bytes, back to back.
    data: NonNull<u8>,
    data_layout: Layout,
    count: u16,
    buf_len: u32,
    /// The tail the next `push` writes at (published by `publish`).
    tail: u16,
}

impl BufRing {
    /// `count` (a power of two, at most 32768) buffers of `buf_len` bytes, all free.
    pub(crate) fn new(count: u16, buf_len: u32) -> io::Result<BufRing> {
        let invalid = |why| io::Error::new(io::ErrorKind::InvalidInput, why);
        if count == 0 || !count.is_power_of_two() || count > 32768 {
            return Err(invalid(
                "receive buffer count must be a power of two up to 32768",
            ));
        }
        if buf_len == 0 {
            return Err(invalid("receive buffer length must not be 0"));
        }
        let entries_layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(|_| invalid("receive buffer ring too large"))?;
        let data_layout = Layout::from_size_align(usize::from(count) * buf_len as usize, 4096)
            .map_err(|_| invalid("receive buffers too large"))?;
        // SAFETY: both layouts have a non-zero size (count and buf_len are
        // checked above); a null result is handled.
        let entries = NonNull::new(unsafe { alloc_zeroed(entries_layout) }.cast::<BufRingEntry>());
        // SAFETY: as above.
        let data = NonNull::new(unsafe { alloc_zeroed(data_layout) });
        let (Some(entries), Some(data)) = (entries, data) else {
            // SAFETY: whichever allocation succeeded was made with this layout.
            unsafe {
                if let Some(e) = entries {
                    dealloc(e.as_ptr().cast(), entries_layout);
                }
                if let Some(d) = data {
                    dealloc(d.as_ptr(), data_layout);
                }
            }
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        };
        let mut ring = BufRing {
            entries,
            entries_layout,
            data,
            data_layout,
            count,
            buf_len,
            tail: 0,
        };
        for bid in 0..count {
            ring.push(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Registers the ring with the kernel as buffer group [`GROUP`].
    pub(crate) fn register(&self, submitter: &Submitter<'_>) -> io::Result<()> {
        // SAFETY: the entries stay allocated (and at this address) until the
        // group is unregistered: `Ring`'s drop unregisters it before freeing
        // it, and leaks it instead when operations may still use it.
        unsafe {
            submitter.register_buf_ring_with_flags(
                self.entries.as_ptr() as u64,
                self.count,
                GROUP,
                0,
            )
        }
    }

    /// Hands buffer `bid` (back) to the kernel; takes effect at `publish`.
    pub(crate) fn push(&mut self, bid: u16) {
        if bid >= self.count {
            return;
        }
        let slot = usize::from(self.tail & (self.count - 1));
        let addr = self.data.as_ptr() as u64 + u64::from(bid) * u64::from(self.buf_len);
        // SAFETY: `slot < count`, inside the entries allocation. The kernel
        // reads only entries between its head and the published tail; this
        // slot is past the published tail (at most `count` buffers exist, and
        // `bid` is not in the ring now, so the ring has room for it).
        let entry = unsafe { &mut *self.entries.as_ptr().add(slot) };
        entry.set_addr(addr);
        entry.set_len(self.buf_len);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes pushed buffers visible to the kernel.
    pub(crate) fn publish(&self) {
        // SAFETY: the tail field lives in the first entry of our allocation,
        // is 2-byte aligned, and the kernel only reads it; the release store
        // orders the entries written by `push` before it.
        let tail = unsafe { &*BufRingEntry::tail(self.entries.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion handed over.
    pub(crate) fn data(&self, bid: u16, len: usize) -> &[u8] {
        if bid >= self.count {
            return &[];
        }
        let len = len.min(self.buf_len as usize);
        // SAFETY: the range lies inside the data allocation; the caller
        // (`Ring::received`) asks only for the buffer of the completion it
        // last returned, which the kernel gave up and will not get back
        // before the next `push` of it, which needs `&mut self`.
        unsafe {
            std::slice::from_raw_parts(
                self.data
                    .as_ptr()
                    .add(usize::from(bid) * self.buf_len as usize),
                len,
            )
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts. `Ring` drops a
        // BufRing only once the kernel has let go of it (unregistered, no
        // receive in flight); otherwise it forgets it.
        unsafe {
            dealloc(self.entries.as_ptr().cast(), self.entries_layout);
            dealloc(self.data.as_ptr(), self.data_layout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_count_that_is_not_a_power_of_two() {
        assert!(BufRing::new(3, 4096).is_err());
        assert!(BufRing::new(0, 4096).is_err());
        assert!(BufRing::new(4, 0).is_err());
    }

    #[test]
    fn starts_with_every_buffer_published_in_order() {
        let r = BufRing::new(4, 1024).unwrap();
        // SAFETY: reading our own allocation in a test; no kernel involved.
        let (tail, bids) = unsafe {
            let tail = *BufRingEntry::tail(r.entries.as_ptr());
            let bids: Vec<u16> = (0..4).map(|i| (*r.entries.as_ptr().add(i)).bid()).collect();
            (tail, bids)
        };
        assert_eq!(tail, 4);
        assert_eq!(bids, vec![0, 1, 2, 3]);
        assert_eq!(r.data(1, 10).len(), 10);
        assert_eq!(r.data(1, 5000).len(), 1024);
        assert!(r.data(9, 10).is_empty());
    }
}
