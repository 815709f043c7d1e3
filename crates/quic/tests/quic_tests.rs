//! The QUIC crate's integration tests, one module per area, linked into one test binary
//! (docs/testing.md). Run one area with `cargo test -p ringshare-quic --test quic_tests AREA::`.
//! `half_open_memory` (its own counting allocator) stays a binary of its own.

mod common;

mod client;
mod client_certificates;
mod endpoint;
