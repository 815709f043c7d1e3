//! The file system backends' integration tests, one module per area, linked into one test binary
//! (docs/testing.md). Run one area with `cargo test -p ringshare-vfs --test vfs_tests AREA::`.
//! `as_users` and `names_as_users` (they act as other users) stay binaries of their own.

mod common;

mod acls;
mod conformance;
mod copy_and_holes;
mod extended_attributes;
mod local_lease;
mod memory_extras;
mod posix_confinement;
mod streams;
