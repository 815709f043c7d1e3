//! State shared by every connection on every ring: configuration, shares,
//! users, and the table of open files (share modes, delete-on-close,
//! byte-range locks).
//!
//! Lock order: `ServerState::files` (the map) before any `FileEntry` mutex;
//! never hold a `FileEntry` mutex while taking the map lock. The lease map
//! and the mailboxes are taken after a `FileEntry` mutex, never before one.
//! `ServerState::sessions` (the GlobalSessionTable) is taken only to create,
//! bind or forget a session, never while a `Session` mutex is held and never
//! on the path of an ordinary request (connections reach their sessions
//! through their own channel table).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use ringshare_wire::ioctl::NetworkInterfaceInfo;

use ringshare_auth::UserLookup;

use crate::link::{ClusterLink, Home};

mod mail;
mod sessions;
mod table;

pub use mail::ConnStatus;
pub(crate) use mail::{Mail, Mailbox, Notice};
pub(crate) use sessions::SessionTable;
pub(crate) use table::FileTable;

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
    /// The users who may log on now ([`ServerState::users`]).
    users: RwLock<Arc<dyn UserLookup + Send + Sync>>,
    /// Unix accounts the users act as.
    pub accounts: Arc<dyn crate::identity::Accounts>,
    /// The open files ([`FileTable`]).
    pub(crate) files: FileTable,
    /// What FSCTL_QUERY_NETWORK_INTERFACE_INFO reports; the driver fills it
    /// at start-up (the core cannot look at the machine).
    interfaces: RwLock<Vec<NetworkInterfaceInfo>>,
    /// GlobalSessionTable ([MS-SMB2] 3.3.1.5): every session by SessionId.
    pub(crate) sessions: SessionTable,
    next_connection: AtomicU64,
    /// The mail between connections ([`Mail`]).
    pub(crate) mail: Mail,
    /// Directories watched by CHANGE_NOTIFY ([`crate::notify`]).
    pub(crate) notify: crate::watch::Registry,
    /// Rate limits of the log lines peers cause ([`crate::loglimit`]).
    pub(crate) log_limit: crate::loglimit::LogLimiter,
    /// Failed logons by address ([`crate::backoff`]).
    pub(crate) logon_backoff: crate::backoff::LogonBackoff,
    /// The cluster this server is a node of ([`crate::cluster`]).
    pub(crate) cluster: std::sync::OnceLock<Arc<dyn ClusterLink>>,
    /// What the per-file operations ask of the cluster layer (set with [`Self::cluster`]).
    pub(crate) cluster_hooks: std::sync::OnceLock<&'static dyn ClusterHooks>,
    /// Other cluster nodes with CHANGE_NOTIFY watchers ([`crate::cluster::notify`]).
    pub(crate) notify_peers: Mutex<Vec<u16>>,
    /// Closes no home took yet: sent again by [`ServerState::resend_closes`].
    pub(crate) unsent_closes: Mutex<Vec<crate::link::UnsentClose>>,
    /// Durable opens of files homed elsewhere parked since the homes were
    /// last told (key, persistent id, open id): [`ServerState::resend_closes`].
    pub(crate) unsent_parks: Mutex<Vec<(FileKey, u64, u64)>>,
    /// Kerberos: the keytab and realm tickets are accepted with, when configured
    /// ([`ServerState::set_kerberos`]).
    kerberos: RwLock<Option<Arc<ringshare_auth::krb5::acceptor::AcceptorConfig>>>,
    /// `security = ads`: the member-server rules ([`ServerState::set_domain`]).
    domain: RwLock<Option<Arc<crate::domain::DomainMember>>>,
    /// How a domain member asks its domain (winbind), when it can ([`ServerState::set_domain_logons`]).
    domain_logons: RwLock<Option<Arc<dyn crate::domain::DomainLogons>>>,
    /// How IAKerb clients' KDC requests reach the realm's KDCs ([`ServerState::set_kdcs`]).
    kdcs: RwLock<Option<Arc<dyn crate::lookup::Kdcs>>>,
    /// Who maps domain SIDs the rid ranges do not to Unix ids (winbind;
    /// [`ServerState::set_id_source`]).
    id_source: RwLock<Option<Arc<dyn crate::sidcache::IdSource>>>,
    /// Domain SIDs and the rid ranges their ids come from ([`crate::domain::SidMap`]).
    pub(crate) sid_map: crate::domain::SidMap,
    /// Every authenticator accepted, for the whole process (a replay may come on any
    /// connection).
    pub(crate) replay_cache: Arc<ringshare_auth::krb5::replay::ReplayCache>,
}

impl fmt::Debug for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerState")
            .field("config", &self.config)
            .finish()
    }
}

impl ServerState {
    /// The accounts and domain SIDs NT ACLs are mapped with ([`crate::ntsd`]), at `now_ms`
    /// (monotonic: the id source's answers expire).
    pub(crate) fn ids(&self, now_ms: u64) -> crate::ntsd::Ids<'_> {
        crate::ntsd::Ids {
            groups: crate::identity::Membership(self.accounts.as_ref()),
            sids: &self.sid_map,
            now_ms,
        }
    }

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
        let logon_backoff = crate::backoff::LogonBackoff::new(config.failed_logon_backoff);
        Arc::new(ServerState {
            config,
            shares: RwLock::new(Arc::new(shares)),
            users: RwLock::new(users),
            accounts,
            files: FileTable::default(),
            interfaces: RwLock::new(Vec::new()),
            sessions: SessionTable::default(),
            next_connection: AtomicU64::new(1),
            mail: Mail::default(),
            notify: Default::default(),
            log_limit: Default::default(),
            logon_backoff,
            cluster: std::sync::OnceLock::new(),
            cluster_hooks: std::sync::OnceLock::new(),
            unsent_closes: Mutex::new(Vec::new()),
            unsent_parks: Mutex::new(Vec::new()),
            notify_peers: Mutex::new(Vec::new()),
            kerberos: RwLock::new(None),
            domain: RwLock::new(None),
            domain_logons: RwLock::new(None),
            kdcs: RwLock::new(None),
            sid_map: Default::default(),
            id_source: RwLock::new(None),
            replay_cache: Default::default(),
        })
    }

    /// The shares offered now.
    pub fn shares(&self) -> Arc<ShareSet> {
        Arc::clone(&self.shares.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether the server offers persistent handles (SMB2_GLOBAL_CAP_PERSISTENT_HANDLES):
    /// a share is continuously available.
    pub(crate) fn persistent_handles(&self) -> bool {
        self.shares()
            .shares
            .iter()
            .any(|s| s.continuous_availability)
    }

    /// The users who may log on now.
    pub fn users(&self) -> Arc<dyn UserLookup + Send + Sync> {
        Arc::clone(&self.users.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Offer these shares from now on (a reload). Every connection then
    /// looks at its tree connects: one whose share is gone is disconnected
    /// (its opens closed; its requests answered NETWORK_NAME_DELETED), one
    /// whose share changed takes the new settings for its next opens, under
    /// the share's new user rules. A share that did not change should be
    /// passed as the same `Arc`, so its trees are left alone.
    pub fn replace_shares(&self, set: ShareSet) {
        *self.shares.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
        for id in self.mail.connections() {
            self.mail.post(id, Notice::SharesChanged);
        }
    }

    /// Let these users log on from now on (a reload); sessions already set
    /// up stay as they are.
    pub fn replace_users(&self, users: Arc<dyn UserLookup + Send + Sync>) {
        *self.users.write().unwrap_or_else(|e| e.into_inner()) = users;
    }

    /// Accept Kerberos tickets with this keytab and realm from now on (None: NTLM only). At
    /// start, on reload and when the keytab file changes; logons in progress keep theirs.
    pub fn set_kerberos(&self, k: Option<ringshare_auth::krb5::acceptor::AcceptorConfig>) {
        *self.kerberos.write().unwrap_or_else(|e| e.into_inner()) = k.map(Arc::new);
    }

    /// Act as a member of an Active Directory domain (`security = ads`) from now on, or not
    /// (None). At start and on reload.
    pub fn set_domain(&self, d: Option<crate::domain::DomainMember>) {
        self.sid_map
            .set_ranges(d.as_ref().map(|d| d.rid_ranges.clone()).unwrap_or_default());
        self.sid_map
            .set_id_ranges(d.as_ref().map(|d| d.id_ranges.clone()).unwrap_or_default());
        *self.domain.write().unwrap_or_else(|e| e.into_inner()) = d.map(Arc::new);
    }

    /// Check domain users' NTLM responses with `d` from now on (None: domain users can log on
    /// with Kerberos only).
    pub fn set_domain_logons(&self, d: Option<Arc<dyn crate::domain::DomainLogons>>) {
        *self
            .domain_logons
            .write()
            .unwrap_or_else(|e| e.into_inner()) = d;
    }

    /// How the domain is asked, when the server is a member that can.
    pub fn domain_logons(&self) -> Option<Arc<dyn crate::domain::DomainLogons>> {
        self.domain_logons
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Relay IAKerb clients' KDC requests with `k` from now on (None: IAKerb logons are
    /// refused).
    pub fn set_kdcs(&self, k: Option<Arc<dyn crate::lookup::Kdcs>>) {
        *self.kdcs.write().unwrap_or_else(|e| e.into_inner()) = k;
    }

    /// Ask `s` for the ids of domain SIDs (and the SIDs of ids) that no rid range maps, from now
    /// on (None: such SIDs get no POSIX ACL entries).
    pub fn set_id_source(&self, s: Option<Arc<dyn crate::sidcache::IdSource>>) {
        *self.id_source.write().unwrap_or_else(|e| e.into_inner()) = s;
    }

    /// The id source, when there is one.
    pub fn id_source(&self) -> Option<Arc<dyn crate::sidcache::IdSource>> {
        self.id_source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How the realm's KDCs are reached, when they can be.
    pub fn kdcs(&self) -> Option<Arc<dyn crate::lookup::Kdcs>> {
        self.kdcs.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The member-server rules, when the server is a domain member.
    pub fn domain(&self) -> Option<Arc<crate::domain::DomainMember>> {
        self.domain
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The Kerberos acceptor's configuration, when Kerberos is on.
    pub fn kerberos(&self) -> Option<Arc<ringshare_auth::krb5::acceptor::AcceptorConfig>> {
        self.kerberos
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Called (from any thread) after a notice was posted to a connection, so
    /// that the thread running it looks at its mail ([`ServerState::mail_posted`]).
    pub fn set_mail_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        self.mail.set_waker(wake);
    }

    /// How many notices were ever posted: when it changed, some connection
    /// may have mail ([`crate::Connection::has_mail`]).
    pub fn mail_posted(&self) -> u64 {
        self.mail.posted()
    }

    /// A server-wide unique id for a new connection (its channel id).
    pub fn new_connection_id(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    /// How many sessions the server holds.
    pub fn session_count(&self) -> usize {
        self.sessions.count()
    }

    /// Set the network interfaces clients are told about.
    pub fn set_interfaces(&self, list: Vec<NetworkInterfaceInfo>) {
        *self.interfaces.write().unwrap_or_else(|e| e.into_inner()) = list;
    }

    /// The network interfaces clients are told about.
    pub fn interfaces(&self) -> Vec<NetworkInterfaceInfo> {
        self.interfaces
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Make open and connection ids from `base` up (a cluster node's number
    /// in their top bits).
    pub(crate) fn set_id_base(&self, base: u64) {
        self.files.set_owner_base(base);
        self.next_connection.fetch_max(base, Ordering::Relaxed);
    }

    /// The cluster this server is a node of.
    pub(crate) fn cluster(&self) -> Option<&Arc<dyn ClusterLink>> {
        self.cluster.get()
    }

    /// The cluster layer's hooks, on a cluster node ([`ClusterHooks`]).
    pub(crate) fn cluster_hooks(&self) -> Option<&'static dyn ClusterHooks> {
        self.cluster_hooks.get().copied()
    }

    /// The key of the file `attr` describes: (device, inode) on a single
    /// server; on a cluster node the device is the cluster file system's,
    /// the same on every node ([`crate::link::CLUSTER_DEV`]: every share of a cluster
    /// node is on the cluster file system, whose device number each node
    /// numbers its own way).
    pub fn file_key(&self, attr: &ringshare_vfs::FileAttr) -> FileKey {
        let key = FileKey::of(attr);
        match self.cluster.get() {
            Some(_) => FileKey {
                dev: crate::link::CLUSTER_DEV,
                ..key
            },
            None => key,
        }
    }

    /// The home of file `key` now ([`Home::Here`] outside a cluster).
    pub(crate) fn home_of(&self, key: FileKey) -> Home {
        match self.cluster.get() {
            None => Home::Here,
            Some(c) => match c.home(crate::link::partition_of(key, c.partitions())) {
                Home::Node(n) if n == c.node() => Home::Here,
                h => h,
            },
        }
    }
}

/// What the per-file operations below the cluster layer (crate::decide, crate::opens,
/// crate::durable, crate::notify, crate::deliver) ask of it (issue 30): they never name the
/// cluster, which sets these when the server joins one (crate::cluster::hooks). Without a
/// cluster nothing is asked: every file is homed here.
pub(crate) trait ClusterHooks: Send + Sync {
    /// Close open `owner` of file `key` at its home, node `node` (`None`: no node decides for
    /// the file now; the close is sent again later). `entry` is this node's shadow entry.
    #[allow(clippy::too_many_arguments)]
    fn close_elsewhere(
        &self,
        server: &ServerState,
        node: Option<u16>,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        owner: u64,
        delete_on_close: bool,
        who: &ringshare_vfs::Who,
    ) -> crate::link::Closed;
    /// Whether the delete of file `key` is pending at its home, node `node` (with `set`, made
    /// so or not first): (pending, newly pending).
    fn delete_pending_at(
        &self,
        server: &ServerState,
        node: u16,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        set: Option<bool>,
    ) -> Result<(bool, bool), ringshare_wire::NtStatus>;
    /// `open` closed: the record of a persistent open goes.
    fn open_closed(&self, server: &ServerState, open: &crate::state::Open);
    /// Send a break for another node's connection there: true when it was another node's.
    fn forward_break(
        &self,
        server: &ServerState,
        route: crate::files::oplock::Route,
        notice: &crate::files::oplock::Break,
    ) -> bool;
    /// Changes made through this node on `share`, for the other nodes' watchers.
    fn changes(&self, server: &ServerState, share: &ShareDef, changes: &[crate::watch::Change<'_>]);
    /// This node's first CHANGE_NOTIFY watcher was armed (`true`) or its last one ended.
    fn watching(&self, server: &ServerState, watching: bool);
}

pub use crate::sync::lock;
