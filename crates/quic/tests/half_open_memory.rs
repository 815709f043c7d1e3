//! What one half-open connection (an Initial received, the handshake never
//! finished) holds in memory: the figure docs/limits.md gives.

mod common;
use common::*;

/// Counts the bytes this thread holds allocated.
struct Counting;

thread_local! {
    static HELD: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

// SAFETY: only counts, and hands every call to the system allocator unchanged.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        let _ = HELD.try_with(|h| h.set(h.get() + l.size() as isize));
        // SAFETY: the caller's layout, passed on.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        let _ = HELD.try_with(|h| h.set(h.get() - l.size() as isize));
        // SAFETY: `p` came from `alloc` above with this layout.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn held() -> isize {
    HELD.with(|h| h.get())
}

#[test]
fn a_half_open_connection_holds_under_32_kib() {
    let (mut s, root) = server_with(Limits::default());
    let now = Instant::now();
    let n = 200;
    // The clients' Initials first, so that only the server's side is counted.
    let mut initials = Vec::new();
    for port in 0..n {
        let mut c = Client::new(20000 + port);
        c.connect(now, client_config(&root, ALPN));
        initials.push((c.addr, c.outgoing(now)));
    }
    let mut buf = Vec::with_capacity(64 * 1024);
    // One connection first: the endpoint's own tables grow on first use.
    let (a, ds) = initials.pop().unwrap();
    ds.iter().for_each(|d| s.handle(now, a, None, d));
    while s.poll_transmit(now, 10, &mut buf).is_some() {}
    let before = held();
    for (a, ds) in &initials {
        ds.iter().for_each(|d| s.handle(now, *a, None, d));
        while s.poll_transmit(now, 10, &mut buf).is_some() {}
    }
    let per = (held() - before) / initials.len() as isize;
    assert_eq!(s.counts().1, n as usize);
    println!("one half-open QUIC connection holds {per} bytes");
    assert!(per > 1024, "{per}: the count sees the connections");
    assert!(per < 32 * 1024, "{per} bytes per half-open connection");
}
