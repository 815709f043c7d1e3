//! The core's integration tests, one module per behaviour area, linked into one test binary
//! (one link and one build of the shared support instead of one per area: docs/testing.md).
//! Run one area with `cargo test -p ringshare-core --test core_tests AREA::`, e.g.
//! `--test core_tests fuse_watches::`. `allocations` (its own counting allocator) and
//! `instructions` (bench/instructions) stay binaries of their own.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

mod acl_enforcement;
mod anonymous_keys;
mod cluster_calls;
mod cluster_durable;
mod cluster_fs_jobs;
mod cluster_home_calls;
mod cluster_late;
mod cluster_levels;
mod cluster_posix;
mod cluster_sim;
mod cluster_takeover;
mod compound_async;
mod create_close;
mod detached_write;
mod dir_info;
mod dir_leases;
mod domain_ids;
mod dup_extents;
mod durable;
mod ea;
mod encryption_policy;
mod faults_injected;
mod fruit;
mod fuse_changes;
mod fuse_closes;
mod fuse_create_undo;
mod fuse_creates;
mod fuse_durable;
mod fuse_fsctls;
mod fuse_inherited_sids;
mod fuse_io_thread;
mod fuse_locks;
mod fuse_reads;
mod fuse_renames;
mod fuse_security;
mod fuse_snapshots;
mod fuse_stream_creates;
mod fuse_stream_renames;
mod fuse_streams;
mod fuse_watches;
mod iakerb_lookups;
mod interim_responses;
mod ioctl_fsctl;
mod ioctl_server;
mod logon_lookups;
mod multichannel;
mod name_lookups;
mod notify;
mod oplocks;
mod posix;
mod previous_versions;
mod quic_transport;
mod quotas;
mod read_write_lock;
mod send_file;
mod session_reauth;
mod streams;
mod timeouts;
mod write_through;
mod write_time;
