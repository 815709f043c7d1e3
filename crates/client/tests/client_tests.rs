//! The client crate's integration tests, one module per area, linked into one test binary
//! (docs/testing.md). Run one area with `cargo test -p ringshare-client --test client_tests AREA::`.

mod support;

mod against_server;
mod channels;
mod compression;
mod leases;
mod read_head;
mod sparse_reads;
mod transport_security;
mod write_apart;
