//! The server's lighter integration tests (its command line, the hostile-client suites, smbclient
//! interop, disk faults, ...), one module per former file, linked into one test binary (one link
//! and one build of tests/common and tests/rig instead of one per file: docs/testing.md). Run one
//! area with `cargo test -p ringshare --test server_tests AREA::`, e.g. `hostile_paths::`. The
//! suites that start Samba, a KDC, a cluster or a package build, and `allocations` (its own
//! counting allocator), stay binaries of their own (crates/ringshare/Cargo.toml).

mod common;
mod rig;

mod admin;
mod bench_client;
mod block_clone;
mod cli_args;
mod cli_config;
mod cli_import;
mod cli_limit;
mod cli_listen;
mod cli_testparm;
mod cli_timeouts;
mod cli_users;
mod durability;
mod faults_disk;
mod hostile_clients;
mod hostile_durable;
mod hostile_logons;
mod hostile_paths;
mod hostile_protocol;
mod identity_interleaved;
mod interop_notify;
mod interop_smbclient;
mod metrics;
mod multichannel;
mod send_file_paths;
mod spliced_writes;
