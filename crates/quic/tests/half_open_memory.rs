//! What one half-open connection (an Initial received, the handshake never
//! finished) holds in memory: the figure docs/limits.md gives.

mod common;
use common::*;

use ringshare_engine::alloc_count::{held_bytes as held, CountingAllocator};

#[global_allocator]
static A: CountingAllocator = CountingAllocator;

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
