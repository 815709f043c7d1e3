//! Sans-I/O SMB2/3 server core.
//!
//! **Invariant:** sans-I/O (below); the per-file rules are crates/files', the server's
//! tables and per-file operations crates/state's and the cluster layer crates/cluster-home's
//! (both re-exported here under their old names), not here. Inside, the layers of
//! docs/architecture.md ("Layers inside crates/core"): exchange < cmd < conn, each naming
//! nothing of a later one (`scripts/core-cycles.sh --acyclic crates/core/src`).
//!
//! [`Connection`] takes frames and time in and gives frames and file-I/O
//! requests out ([`Output`]). It opens no socket, reads no clock and has no
//! `unsafe`; the driver in the `ringshare` binary runs it on io_uring, and tests
//! run it directly over the in-memory backend.
#![forbid(unsafe_code)]

mod acl;
mod cmd;
mod conn;
pub mod credits;
mod exchange;
pub mod io;
pub mod metrics;
pub mod notify_kernel;
mod peer_limits;
mod shortname;
mod spare;
mod transform;
mod writetime;

pub use config::DEFAULT_COMPRESSION;
pub use conn::{Connection, WRITE_SPLICE_LEN_MIN};
pub use identity::{Account, AccountError, Accounts, InheritOwner, ProcessAccounts, ShareRules};
pub use io::{Entropy, Frame, IoDone, IoOp, IoRequest, Now, Output, SendFile};
#[doc(hidden)]
pub use ipc::FuzzPipe;
pub use lookup::{Kdcs, Lookup, LookupDone, LookupRequest};
use ringshare_cluster_home::arbiter;
/// The cluster layer (crates/cluster-home), under the names the modules here have always used.
pub use ringshare_cluster_home::cluster;
/// The per-file state (crates/files), as the modules here name it.
pub use ringshare_files as files;
/// The server's tables and per-file operations (crates/state), under the names the modules
/// here have always used (`crate::server`, `crate::durable`, …).
pub use ringshare_state::{
    backoff, domain, fruit, fsjob, identity, idmap, limits, loglimit, lookup, path, peers, quota,
    server, shadow, sidcache, status,
};
use ringshare_state::{
    config, dirlease, durable, fileinfo, fsmap, ipc, notify, ntsd, opens, state,
};
/// DCE/RPC over TCP for the cluster's Witness service (crates/ringshare/src/witness.rs).
pub mod rpc {
    pub use ringshare_state::ipc::{epm, rpcauth, witness, Call, Pipe, ServerFacts, Service};
}
pub use server::{
    EncryptPolicy, IoSizes, OpenShare, ServerConfig, ServerState, ShareDef, ShareTemplate,
    SigningPolicy, Transport,
};
