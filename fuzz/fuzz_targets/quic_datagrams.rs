//! The QUIC endpoint (crates/quic) as worker 0 drives it: datagrams from anyone, of any
//! content, handed to `Server::handle`, then its events, transmits and timers polled.
//!
//! Input: datagrams, each a 2-byte little-endian length and its bytes (a short last one
//! takes what is left); the byte before each says which of 4 client addresses sent it and
//! how far the clock moves (so timers and the idle timeout run).
//!
//! Invariants: no panic; connections in their handshake never exceed the limit; every
//! datagram sent fits the output buffer.
#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use ringshare_quic::{cert, server_config, Identity, Limits, Server};

fn config() -> Arc<ringshare_quic::ServerConfig> {
    static CONFIG: OnceLock<Arc<ringshare_quic::ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let (c, k) = cert::self_signed(&["localhost".into()]).unwrap();
            let id = Identity::from_pem(c.as_bytes(), k.as_bytes()).unwrap();
            server_config(id, &limits(), Default::default()).unwrap()
        })
        .clone()
}

fn limits() -> Limits {
    Limits {
        handshakes_max: 4,
        ..Limits::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let mut server = Server::new(config(), limits());
    let mut now = Instant::now();
    let mut out = Vec::with_capacity(65_535);
    let mut rest = data;
    while rest.len() >= 3 {
        let who = rest[0];
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
        rest = &rest[3..];
        let (datagram, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;
        let from: SocketAddr = ([127, 0, 0, 1], 40_000 + u16::from(who & 3)).into();
        now += Duration::from_millis(u64::from(who >> 2) * 50);
        server.handle(now, from, None, datagram);
        while server.poll_event().is_some() {}
        while let Some(t) = server.poll_transmit(now, 1, &mut out) {
            assert!(t.size <= out.len());
        }
        if server.poll_timeout().is_some_and(|d| d <= now) {
            server.handle_timeout(now);
        }
        assert!(server.counts().1 <= 4, "{:?} handshaking", server.counts());
    }
});
