//! State shared by every connection on every ring. `ServerState` owns the
//! configuration snapshot (the configuration, the shares offered now, the
//! network interfaces) and a few parts, each with its own methods in a
//! module here: the open files ([`FileTable`]), the sessions
//! ([`SessionTable`]), the mail between connections ([`Mail`]), logons and
//! identity ([`Logons`]) and this server as a cluster node ([`NodeState`]).
//! docs/architecture.md ("Layers inside crates/core") shows who uses which.
//!
//! Lock order: the file table's map before any `FileEntry` mutex; never hold
//! a `FileEntry` mutex while taking the map lock. The lease map and the
//! mailboxes are taken after a `FileEntry` mutex, never before one. The
//! session table is taken only to create, bind or forget a session, never
//! while a `Session` mutex is held and never on the path of an ordinary
//! request (connections reach their sessions through their own channel
//! table).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use ringshare_wire::ioctl::NetworkInterfaceInfo;

use ringshare_auth::UserLookup;

mod log_limits;
mod logons;
mod mail;
mod node;
mod sessions;
pub(crate) mod table;

pub use logons::Logons;
pub use mail::{Bell, Mail, Mailbox, Notice};
pub use mail::{ConnStatus, Transport};
pub use node::{ClusterHooks, NodeState};
pub use sessions::SessionTable;
pub use table::FileTable;

pub use crate::config::{
    EncryptPolicy, IoSizes, OpenShare, ServerConfig, ShareDef, ShareSet, ShareTemplate,
    SigningPolicy,
};
pub use crate::files::{FileEntry, FileKey, ShareEntry};

/// Shared state of the whole server.
pub struct ServerState {
    /// The configuration the server started with; its shares are in `shares`.
    pub config: ServerConfig,
    /// The shares offered now ([`ServerState::shares`]).
    shares: RwLock<Arc<ShareSet>>,
    /// The open files ([`FileTable`]).
    pub files: FileTable,
    /// What FSCTL_QUERY_NETWORK_INTERFACE_INFO reports; the driver fills it
    /// at start-up (the core cannot look at the machine).
    interfaces: RwLock<Vec<NetworkInterfaceInfo>>,
    /// GlobalSessionTable ([MS-SMB2] 3.3.1.5): every session by SessionId.
    pub sessions: SessionTable,
    next_connection: AtomicU64,
    /// The mail between connections ([`Mail`]).
    pub mail: Mail,
    /// Directories watched by CHANGE_NOTIFY ([`crate::notify`]).
    pub notify: crate::watch::Registry,
    /// Rate limits of the log lines peers cause ([`crate::loglimit`]).
    pub log_limit: crate::loglimit::LogLimiter,
    /// This server as a cluster node ([`NodeState`]).
    pub node: NodeState,
    /// Who may log on and whom they act as ([`Logons`]).
    pub logons: Logons,
}

impl fmt::Debug for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerState")
            .field("config", &self.config)
            .finish()
    }
}

impl ServerState {
    /// A server whose users all act as the server process
    /// ([`crate::identity::ProcessAccounts`]).
    pub fn new(config: ServerConfig, users: Arc<dyn UserLookup + Send + Sync>) -> Arc<ServerState> {
        ServerState::with_accounts(config, users, Arc::new(crate::identity::ProcessAccounts))
    }

    /// A server whose users act as the Unix accounts `accounts` gives them.
    pub fn with_accounts(
        mut config: ServerConfig,
        users: Arc<dyn UserLookup + Send + Sync>,
        accounts: Arc<dyn crate::identity::Accounts>,
    ) -> Arc<ServerState> {
        let shares = ShareSet {
            shares: std::mem::take(&mut config.shares),
            homes: config.homes.take(),
            guest_enabled: config.guest_enabled,
        };
        let logons = Logons::new(users, accounts, config.failed_logon_backoff);
        logons
            .sid_map
            .set_account_domain(crate::localsam::account_domain_sid(&config.netbios_name));
        Arc::new(ServerState {
            config,
            shares: RwLock::new(Arc::new(shares)),
            files: FileTable::default(),
            interfaces: RwLock::new(Vec::new()),
            sessions: SessionTable::default(),
            next_connection: AtomicU64::new(1),
            mail: Mail::default(),
            notify: Default::default(),
            log_limit: Default::default(),
            logons,
            node: NodeState::default(),
        })
    }

    /// The shares offered now.
    pub fn shares(&self) -> Arc<ShareSet> {
        snapshot(&self.shares)
    }

    /// Whether the server offers persistent handles (SMB2_GLOBAL_CAP_PERSISTENT_HANDLES):
    /// a share is continuously available.
    pub fn persistent_handles(&self) -> bool {
        self.shares()
            .shares
            .iter()
            .any(|s| s.continuous_availability)
    }

    /// Offer these shares from now on (a reload). Every connection then
    /// looks at its tree connects: one whose share is gone is disconnected
    /// (its opens closed; its requests answered NETWORK_NAME_DELETED), one
    /// whose share changed takes the new settings for its next opens, under
    /// the share's new user rules. A share that did not change should be
    /// passed as the same `Arc`, so its trees are left alone.
    pub fn replace_shares(&self, set: ShareSet) {
        replace(&self.shares, Arc::new(set));
        for id in self.mail.connections() {
            self.mail.post(id, Notice::SharesChanged);
        }
    }

    /// A server-wide unique id for a new connection (its channel id).
    pub fn new_connection_id(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    /// Set the network interfaces clients are told about.
    pub fn set_interfaces(&self, list: Vec<NetworkInterfaceInfo>) {
        replace(&self.interfaces, list);
    }

    /// The network interfaces clients are told about.
    pub fn interfaces(&self) -> Vec<NetworkInterfaceInfo> {
        snapshot(&self.interfaces)
    }

    /// Make open and connection ids from `base` up (a cluster node's number
    /// in their top bits).
    pub fn set_id_base(&self, base: u64) {
        self.files.set_owner_base(base);
        self.next_connection.fetch_max(base, Ordering::Relaxed);
    }
}

pub use crate::sync::lock;
use crate::sync::{replace, snapshot};
