//! Sans-I/O SMB2/3 server core.
//!
//! **Invariant:** sans-I/O (below); the per-file rules are crates/files', not here.
//! Inside, the layers of docs/architecture.md ("Layers inside crates/core"): the server's
//! tables (`ServerState` and its parts, server/*.rs) < per-file operations < the cluster
//! layer < exchange < cmd < conn, each naming nothing of a later one
//! (`scripts/core-cycles.sh --acyclic crates/core/src`).
//!
//! [`Connection`] takes frames and time in and gives frames and file-I/O
//! requests out ([`Output`]). It opens no socket, reads no clock and has no
//! `unsafe`; the driver in the `ringshare` binary runs it on io_uring, and tests
//! run it directly over the in-memory backend.
#![forbid(unsafe_code)]

mod acl;
mod arbiter;
pub mod backoff;
pub mod cluster;
mod cmd;
mod config;
mod conn;
pub mod credits;
mod decide;
mod deliver;
pub mod domain;
mod durable;
mod exchange;
mod fileinfo;
pub mod fruit;
mod fsmap;
pub mod identity;
pub mod idmap;
pub mod io;
mod ipc;
pub mod limits;
mod link;
pub mod loglimit;
pub mod lookup;
pub mod metrics;
mod notify;
pub mod notify_kernel;
mod ntsd;
mod opens;
pub mod path;
mod peer_limits;
pub mod peers;
pub mod server;
pub mod shadow;
mod shortname;
pub mod sidcache;
mod spare;
mod state;
pub mod status;
mod sync;
mod transform;
mod watch;
mod writetime;

pub use config::DEFAULT_COMPRESSION;
pub use conn::{Connection, WRITE_SPLICE_LEN_MIN};
pub use identity::{Account, AccountError, Accounts, InheritOwner, ProcessAccounts, ShareRules};
pub use io::{Entropy, Frame, IoDone, IoOp, IoRequest, Now, Output, SendFile};
#[doc(hidden)]
pub use ipc::FuzzPipe;
pub use lookup::{Kdcs, Lookup, LookupDone, LookupRequest};
/// The per-file state (crates/files), as the modules here name it.
pub use ringshare_files as files;
pub use server::{
    EncryptPolicy, IoSizes, OpenShare, ServerConfig, ServerState, ShareDef, ShareTemplate,
    SigningPolicy,
};
