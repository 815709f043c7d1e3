//! The SMB server's tables and the per-file operations on them (issue 30), below the
//! cluster layer (crates/cluster-home) and the protocol core (crates/core).
//!
//! **Invariant:** this crate knows nothing of connections, commands, sockets or clocks, nor
//! of the cluster layer: it is sans-I/O (no socket, no clock read, no `unsafe`), and the
//! compiler keeps it below crates/core, which re-exports its modules under their old names
//! (`crate::server`, `crate::durable`, …). Inside, two layers (docs/architecture.md,
//! "Layers inside crates/core"), each naming nothing of a later one
//! (`scripts/core-cycles.sh --acyclic crates/state/src`):
//!
//! 1. the server's tables: `ServerState` and its parts (`server`, server/*.rs), the object
//!    model (`state`), the cluster link's data and trait (`link`), the CHANGE_NOTIFY
//!    watchers (`watch`), and the data modules they hold (configuration, identities, id
//!    maps, limits, lookups, RPC pipes, fruit, …);
//! 2. the per-file operations: `decide` (this node's decisions on a file's entry), `deliver`
//!    (sending breaks), `notify` (CHANGE_NOTIFY delivery), `opens` (closing an open) and
//!    `durable` (parked opens). What they need of a cluster goes through `ClusterHooks`
//!    (server/node.rs), which the cluster layer above sets.
//!
//! The per-file rules themselves are crates/files'.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod changes;
pub mod config;
pub mod decide;
pub mod deliver;
pub mod dirlease;
pub mod domain;
pub mod durable;
pub mod fileinfo;
pub mod fruit;
pub mod fsjob;
pub mod fsmap;
pub mod identity;
pub mod idmap;
pub mod ipc;
pub mod limits;
pub mod link;
pub mod localsam;
pub mod loglimit;
pub mod lookup;
pub mod notify;
pub mod ntsd;
pub mod opens;
pub mod path;
pub mod peers;
pub mod quota;
pub mod server;
pub mod shadow;
pub mod sidcache;
pub mod state;
pub mod status;
pub mod sync;
pub mod watch;

/// The per-file state (crates/files), as the modules here name it.
pub use ringshare_files as files;
