//! This server as a node of a cluster: the link to the other nodes, the
//! hooks the per-file operations call through (they never name the
//! cluster), and what the cluster layer keeps between messages (the nodes
//! with CHANGE_NOTIFY watchers, closes and parks no home took yet). Outside
//! a cluster it is empty and every file is homed here. The cluster layer
//! (crate::cluster) fills it when the server joins one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::files::FileKey;
use crate::link::{ClusterLink, Home};
use crate::server::ServerState;
use crate::server::{FileEntry, ShareDef};

/// The server's part as a cluster node ([`crate::server::ServerState::node`]).
#[derive(Default)]
pub struct NodeState {
    /// The cluster this server is a node of (`crate::cluster` (crates/core)).
    link: OnceLock<Arc<dyn ClusterLink>>,
    /// What the per-file operations ask of the cluster layer (set with the link).
    hooks: OnceLock<&'static dyn ClusterHooks>,
    /// Other cluster nodes that want this node's changes: they have
    /// CHANGE_NOTIFY watchers or are homes of leased directories
    /// (`crate::cluster::notify` (crates/core)).
    pub notify_peers: Mutex<Vec<u16>>,
    /// Whether the other nodes were last told that this node wants theirs
    /// ([`crate::notify::tell_wants`]; held while they are told).
    pub told_wants: Mutex<bool>,
    /// Closes no home took yet: sent again by [`ServerState::resend_closes`].
    pub unsent_closes: Mutex<Vec<crate::link::UnsentClose>>,
    /// Closes a home did not take since the count was last said (the first of them is logged
    /// at once, the rest counted; the cluster's thread says and clears the count once a
    /// second): a flood of CLOSEs of a stopped node's files logs a line or two a second, not
    /// one per CLOSE.
    pub closes_not_taken: std::sync::atomic::AtomicU64,
    /// Durable opens of files homed elsewhere parked since the homes were
    /// last told (key, persistent id, open id): [`ServerState::resend_closes`].
    pub unsent_parks: Mutex<Vec<(FileKey, u64, u64)>>,
    /// Disconnected durable opens this node keeps because their move to it failed after their
    /// keeper gave them up (persistent id, the id the file's home holds them by): a reconnect
    /// through this node moves them first (`crate::cluster::handover` (crates/cluster-home)).
    pub unmoved: Mutex<std::collections::HashSet<(u64, u64)>>,
    /// Disconnected persistent opens this node gave up to another node's reconnect, by the
    /// FileId asked for: asked the same again (the asker stopped waiting before the answer
    /// came) while the open's record still names this node, this node answers the same again,
    /// until the open's durable timeout (`crate::cluster::handover::give_up`
    /// (crates/cluster-home)).
    pub given_up: Mutex<std::collections::HashMap<(u64, u64), crate::link::GivenUp>>,
    /// When (this node's clock, ms) this node last gave up each persistent open (by persistent
    /// id) to a reconnect through another node: a keeper named by a record of an open it no
    /// longer holds takes it back only once the asker's move is over
    /// (`crate::cluster::takeback` (crates/cluster-home)).
    pub given_up_at: Mutex<std::collections::HashMap<u64, u64>>,
    /// The persistent opens (persistent ids) this node closed: their records, whose removal
    /// may still be on its way, are never taken back (`crate::cluster::takeback`
    /// (crates/cluster-home)). Cleared past 100,000.
    pub closed_persistent: Mutex<std::collections::HashSet<u64>>,
    /// What closes made while deciding another request (a parked open a new open would have
    /// to break, closed at its file's home: crate::cluster::home's `purge_for_open`) ask of the
    /// cluster, nobody waiting: the removal of a persistent open's record. An I/O thread
    /// posts them after the request ([`NodeState::take_posted`], `Connection::poll_output`
    /// (crates/core)); a thread that may wait (a peer connection's) asks them in place.
    posted: Mutex<Vec<crate::lookup::ClusterAsk>>,
    /// Whether `posted` may hold any (looked at without its lock on every poll).
    posted_any: AtomicBool,
}

impl NodeState {
    /// Become a node of the cluster `link` reaches, with the cluster layer's
    /// `hooks`: false when the server is a node already. The hooks first: a
    /// file is homed elsewhere only once the link is set.
    pub fn join(&self, link: Arc<dyn ClusterLink>, hooks: &'static dyn ClusterHooks) -> bool {
        let _ = self.hooks.set(hooks);
        self.link.set(link).is_ok()
    }

    /// The cluster this server is a node of.
    pub fn link(&self) -> Option<&Arc<dyn ClusterLink>> {
        self.link.get()
    }

    /// A question to the cluster nobody waits for, made while deciding a request on a thread
    /// that may not wait for it: asked after the request, away from that thread.
    pub fn post(&self, ask: crate::lookup::ClusterAsk) {
        crate::server::lock(&self.posted).push(ask);
        self.posted_any.store(true, Ordering::Release);
    }

    /// The questions [`NodeState::post`] left, to be asked (in order).
    pub fn take_posted(&self) -> Vec<crate::lookup::ClusterAsk> {
        if !self.posted_any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut posted = crate::server::lock(&self.posted);
        self.posted_any.store(false, Ordering::Release);
        std::mem::take(&mut *posted)
    }

    /// The cluster layer's hooks, on a cluster node ([`ClusterHooks`]).
    pub fn hooks(&self) -> Option<&'static dyn ClusterHooks> {
        self.hooks.get().copied()
    }

    /// The key of the file `attr` describes: (device, inode) on a single
    /// server; on a cluster node the device is the cluster file system's,
    /// the same on every node ([`crate::link::CLUSTER_DEV`]: every share of a cluster
    /// node is on the cluster file system, whose device number each node
    /// numbers its own way).
    pub fn file_key(&self, attr: &ringshare_vfs::FileAttr) -> FileKey {
        let key = FileKey::of(attr);
        match self.link.get() {
            Some(_) => FileKey {
                dev: crate::link::CLUSTER_DEV,
                ..key
            },
            None => key,
        }
    }

    /// The home of file `key` now ([`Home::Here`] outside a cluster).
    pub fn home_of(&self, key: FileKey) -> Home {
        match self.link.get() {
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
pub trait ClusterHooks: Send + Sync {
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
    /// A close nobody waits for (a logoff's, a tree disconnect's, a connection's end) of open
    /// `owner` of file `key`, homed on node `node`: the call that closes it there, to be
    /// carried away from the I/O thread ([`crate::lookup::Lookup::Home`]), which runs `then`
    /// with what the close leaves where it runs, once the home answered. `None` when the call
    /// cannot be made: `then` ran (the close is sent again later). With `offloaded_then.0`
    /// (the share's calls may wait on a network) the call and `then` are one job of a
    /// home-call thread, so that `then`'s file system calls are never made on the I/O thread.
    #[allow(clippy::too_many_arguments)]
    fn close_posted(
        &self,
        server: &Arc<ServerState>,
        node: u16,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        owner: u64,
        delete_on_close: bool,
        who: &ringshare_vfs::Who,
        offloaded_then: (bool, Box<dyn FnOnce(crate::link::Closed) + Send>),
    ) -> Option<crate::lookup::HomeAsk>;
    /// Whether the delete of file `key` is pending at its home, node `node` (with `set`, made
    /// so or not first): (pending, newly pending).
    fn delete_pending_at(
        &self,
        here: &NodeState,
        node: u16,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        set: Option<bool>,
    ) -> Result<(bool, bool), ringshare_wire::NtStatus>;
    /// Whether the delete of file `key` is pending at its home, node `node`, asked away from the
    /// I/O thread ([`crate::lookup::Lookup::Home`]): the call, whose carrier runs `then` with the
    /// answer (`entry`, this node's shadow entry, follows it). `None` when the call cannot be
    /// made: `then` ran with why.
    fn delete_pending_posted(
        &self,
        here: &NodeState,
        node: u16,
        key: FileKey,
        entry: Arc<Mutex<FileEntry>>,
        then: Box<dyn FnOnce(Result<bool, ringshare_wire::NtStatus>) + Send>,
    ) -> Option<crate::lookup::HomeAsk>;
    /// `open` closes: the removal of a persistent open's record, to be asked (on the cluster's
    /// store thread, after what was asked of the store before it: a LOCK's record stored),
    /// not run here. `None` when it has no record.
    fn open_closed(
        &self,
        here: &NodeState,
        open: &crate::state::Open,
    ) -> Option<crate::lookup::ClusterAsk>;
    /// Send a break for another node's connection there: true when it was another node's.
    fn forward_break(
        &self,
        here: &NodeState,
        route: crate::files::oplock::Route,
        notice: &crate::files::oplock::Break,
    ) -> bool;
    /// Changes made through this node on `share`, for the other nodes' watchers.
    fn changes(&self, here: &NodeState, share: &ShareDef, changes: &[crate::watch::Change<'_>]);
    /// This node wants the changes made through the other nodes (`true`: its first
    /// CHANGE_NOTIFY watcher was armed or its first directory lease listed; answered once
    /// the others noted it), or no longer does.
    fn watching(&self, here: &NodeState, watching: bool);
    /// Something inside directory `dir` of `share` changed through this node: the nodes
    /// that want changes break the leases on it they decide for, but `except`'s.
    fn dir_changed(
        &self,
        here: &NodeState,
        share: &str,
        dir: &ringshare_vfs::RelPath,
        except: Option<[u8; 16]>,
    );
}
