//! A global allocator that counts allocations made on the current thread, for
//! tests and benchmarks that check the hot path does not allocate. Install it
//! in a test binary with `#[global_allocator]` and measure with [`count`].
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: ringshare_engine::alloc_count::CountingAllocator =
//!     ringshare_engine::alloc_count::CountingAllocator;
//! let (_, allocations) = ringshare_engine::alloc_count::count(|| vec![1u8]);
//! assert_eq!(allocations, 1);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting `alloc`/`realloc` calls of threads inside [`count`], and the
/// bytes each thread holds ([`held_bytes`]).
pub struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static ENROLLED: Cell<bool> = const { Cell::new(false) };
    static HELD: Cell<isize> = const { Cell::new(0) };
}

/// Bytes allocated minus bytes freed by this thread so far (what a structure built on this
/// thread holds is the change across building it). Zero without [`CountingAllocator`].
pub fn held_bytes() -> isize {
    HELD.with(Cell::get)
}

fn hold(bytes: isize) {
    let _ = HELD.try_with(|h| h.set(h.get() + bytes));
}

/// Allocations of every thread that called [`enroll_thread`].
static ENROLLED_ALLOCS: AtomicU64 = AtomicU64::new(0);

fn bump() {
    // `try_with`: during thread teardown the locals may be gone; skip counting then.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
    if ENROLLED.try_with(Cell::get).unwrap_or(false) {
        ENROLLED_ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts every later allocation of this thread in [`enrolled_allocations`]
/// (the server's I/O threads enroll themselves, so that a test running the
/// server in its own process can count what serving costs). Without
/// [`CountingAllocator`] as the global allocator nothing is counted.
pub fn enroll_thread() {
    ENROLLED.with(|e| e.set(true));
}

/// Allocations so far of the threads that called [`enroll_thread`].
pub fn enrolled_allocations() -> u64 {
    ENROLLED_ALLOCS.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees are ours. The bookkeeping touches only
// const-initialised thread-locals, which never allocate (no re-entry).
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        hold(layout.size() as isize);
        // SAFETY: forwarded under the same contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        hold(layout.size() as isize);
        // SAFETY: forwarded under the same contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        hold(-(layout.size() as isize));
        // SAFETY: forwarded under the same contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        hold(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded under the same contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the number of allocations it made on
/// this thread (zero unless [`CountingAllocator`] is the global allocator).
pub fn count<T>(f: impl FnOnce() -> T) -> (T, u64) {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCS.with(Cell::get))
}
