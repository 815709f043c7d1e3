//! The cluster layer of the server (issue 30): above the server's tables and per-file
//! operations (crates/state), below the protocol core (crates/core), which re-exports it
//! under its old names (`crate::cluster`, `crate::arbiter`).
//!
//! **Invariant:** this crate knows nothing of connections, commands, sockets or clocks: it
//! is sans-I/O (no socket, no clock read, no `unsafe`; what it sends goes through the
//! `ClusterLink` the driver gives it, the time comes in as a parameter), and the compiler
//! keeps it from naming crates/core. Inside, `cluster` (the messages between nodes, I/O
//! grants, shadow entries, hand-over, CA records, reclaim, notify across nodes, the home's
//! side) < `arbiter`, the cluster layer's front for commands: each decision runs here
//! (crates/state's `decide`, `cluster::home`) or is asked of the file's home (`cluster::msg`)
//! (`scripts/core-cycles.sh --acyclic crates/cluster-home/src`).
#![forbid(unsafe_code)]

pub mod arbiter;
pub mod cluster;

/// The per-file state (crates/files), as the modules here name it.
use ringshare_files as files;
use ringshare_state::{
    changes, decide, dirlease, durable, fsmap, link, lookup, notify, opens, path, server, state,
    watch,
};
