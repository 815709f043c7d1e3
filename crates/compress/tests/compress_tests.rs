//! The compression crate's integration tests, one module per area, linked into one test binary
//! (docs/testing.md). Run one area with `cargo test -p ringshare-compress --test compress_tests AREA::`.

mod common;

mod differential_crates;
mod differential_python;
mod message;
mod roundtrip;
