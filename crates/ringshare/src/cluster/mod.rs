//! This server as one node of a cluster (issue 18, docs/cluster.md): it
//! joins etcd through [`ringshare_cluster::Coordinator`] (membership,
//! partitions with fencing tokens), serves other nodes' calls about the
//! files homed here and gives the core a [`ClusterLink`] to ask theirs.

mod ca;
pub(crate) mod peer;
pub(crate) mod refusing;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ringshare_cluster::{ClusterConfig, Coordinator, Event};
use ringshare_core::cluster::{
    msg, AnnounceWatchers, ClusterLink, ClusterNode, Home, PersistentOpens, Reclaim,
};
use ringshare_core::ServerState;
use ringshare_wire::NtStatus;

use crate::config::ClusterOptions;
pub use peer::Stats;

/// Partitions files are spread over (the coordinator's default).
const PARTITIONS: u32 = 256;
/// How often the partition table is read again from the coordinator.
const REFRESH: Duration = Duration::from_millis(100);
/// How often the count of closes the files' homes did not take is said (its first is logged
/// at once: `NodeState::closes_not_taken`).
const CLOSES_SAID_EVERY: Duration = Duration::from_secs(1);
/// The longest a stop spends handing this node's partitions and persistent opens over
/// ([`Node::leave`]) before the process exits anyway.
const STOP_LIMIT: Duration = Duration::from_secs(10);
/// The longest a `cluster takeover command` may run.
const TAKEOVER_LIMIT: Duration = Duration::from_secs(20);

/// What the core asks of the cluster, answered from a table the
/// coordinator's events and a 100 ms refresh keep current.
struct Link {
    node: u16,
    /// Owner node of each partition (0: none).
    owners: Vec<AtomicU32>,
    /// Partitions this node gained and is rebuilding: nothing is decided
    /// for their files until every other node has handed over its opens.
    rebuilding: Vec<AtomicBool>,
    /// Private address of each live node.
    addrs: RwLock<HashMap<u16, SocketAddr>>,
    /// The protocol level each live node advertises (docs/cluster.md, "Upgrading a cluster").
    levels: RwLock<HashMap<u16, u16>>,
    /// Incarnation of each live node as last seen (a node that left, or
    /// came back as a new incarnation, is forgotten by the homes here).
    incarnations: Mutex<HashMap<u16, i64>>,
    /// This node stopped being a member (its lease lapsed): it decides
    /// nothing until it joined again.
    fenced: AtomicBool,
    /// The node is stopping ([`Node::leave`]): its coordinator going away is a planned
    /// departure, not a fence.
    leaving: AtomicBool,
    /// The coordinator's fence deadline as last read (ms since `base`):
    /// from then on nothing is decided, even before any thread noticed.
    fence_at_ms: AtomicU64,
    base: Instant,
    coordinator: Mutex<Option<Coordinator>>,
    peers: std::sync::OnceLock<Arc<peer::Peers>>,
    /// The persistent opens' records in etcd.
    ca: ca::Store,
    /// `cluster takeover command`: run for each node that left, before its
    /// opens are forgotten and its partitions taken.
    takeover: Option<std::path::PathBuf>,
    /// The node serves Witness (`cluster witness`, crate::witness).
    witness: bool,
}

impl ClusterLink for Link {
    fn node(&self) -> u16 {
        self.node
    }

    fn partitions(&self) -> u32 {
        PARTITIONS
    }

    fn home(&self, p: u32) -> Home {
        let now = self.base.elapsed().as_millis() as u64;
        if self.fenced.load(Ordering::Acquire) || now >= self.fence_at_ms.load(Ordering::Acquire) {
            return Home::Unavailable;
        }
        if self
            .rebuilding
            .get(p as usize)
            .is_some_and(|r| r.load(Ordering::Acquire))
        {
            return Home::Unavailable;
        }
        match self
            .owners
            .get(p as usize)
            .map(|o| o.load(Ordering::Acquire))
        {
            Some(0) | None => Home::Unavailable,
            Some(n) => Home::Node(n as u16),
        }
    }

    fn refuses_now(&self, node: u16) -> bool {
        refusing::refuses(node)
    }

    fn refusing(&self) -> Vec<u16> {
        refusing::nodes()
    }

    fn id_start(&self) -> u64 {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        u64::from_le_bytes(b) >> 24
    }

    fn members(&self) -> Vec<u16> {
        let mut m: Vec<u16> = read(&self.addrs).keys().copied().collect();
        if !m.contains(&self.node) {
            m.push(self.node);
        }
        m
    }

    fn level_of(&self, node: u16) -> u16 {
        if node == self.node {
            return msg::LEVEL;
        }
        read(&self.levels)
            .get(&node)
            .copied()
            .unwrap_or(msg::BASE_LEVEL)
    }

    fn call(&self, node: u16, message: Vec<u8>) -> Result<Vec<u8>, NtStatus> {
        match self.peers.get() {
            Some(p) => p.call(node, &message),
            None => Err(NtStatus::FILE_NOT_AVAILABLE),
        }
    }

    fn post(&self, node: u16, message: Vec<u8>) {
        if let Some(p) = self.peers.get() {
            p.post(node, message);
        }
    }

    fn ca_put(&self, persistent_id: u64, record: Vec<u8>) -> Result<(), NtStatus> {
        // A fenced node promises nothing: its opens may be taken over.
        let now = self.base.elapsed().as_millis() as u64;
        if self.fenced.load(Ordering::Acquire) || now >= self.fence_at_ms.load(Ordering::Acquire) {
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
        self.ca.put(persistent_id, &record)
    }

    fn ca_delete(&self, persistent_id: u64) {
        self.ca.delete(persistent_id);
    }

    fn ca_get(&self, persistent_id: u64) -> Result<Option<Vec<u8>>, NtStatus> {
        self.ca.get(persistent_id)
    }

    fn ca_all(&self) -> Result<Vec<Vec<u8>>, NtStatus> {
        self.ca.all()
    }

    fn witness(&self) -> bool {
        self.witness
    }
}

impl Link {
    /// The coordinator's own clock-based check: true from the moment its
    /// lease may have lapsed, before any event is read.
    fn coordinator_fenced(&self) -> bool {
        lock(&self.coordinator)
            .as_ref()
            .is_none_or(|c| c.is_fenced())
    }

    /// Read ownership and membership from the coordinator into the table.
    fn refresh(&self) -> Changes {
        let guard = lock(&self.coordinator);
        let Some(c) = guard.as_ref() else {
            return Default::default();
        };
        if c.is_fenced() {
            return Default::default();
        }
        let deadline = c.fence_deadline().saturating_duration_since(self.base);
        self.fence_at_ms
            .store(deadline.as_millis() as u64, Ordering::Release);
        let mut gained = Vec::new();
        for (p, slot) in self.owners.iter().enumerate() {
            let owner = c
                .owner_of(p as u32)
                .and_then(|(id, _)| id.parse::<u16>().ok())
                .unwrap_or(0);
            if owner == self.node && slot.load(Ordering::Acquire) != u32::from(owner) {
                self.rebuilding[p].store(true, Ordering::Release);
                gained.push(p as u32);
            }
            slot.store(u32::from(owner), Ordering::Release);
        }
        let members = c.membership();
        let addrs: HashMap<u16, SocketAddr> = members
            .iter()
            .filter_map(|m| Some((m.id.parse().ok()?, m.addr.parse().ok()?)))
            .collect();
        *self.addrs.write().unwrap_or_else(|e| e.into_inner()) = addrs;
        let levels: HashMap<u16, u16> = members
            .iter()
            .filter_map(|m| Some((m.id.parse().ok()?, m.level)))
            .collect();
        *self.levels.write().unwrap_or_else(|e| e.into_inner()) = levels;
        let now: HashMap<u16, i64> = members
            .iter()
            .filter_map(|m| Some((m.id.parse().ok()?, m.incarnation)))
            .collect();
        let mut seen = lock(&self.incarnations);
        let gone: Vec<u16> = seen
            .iter()
            .filter(|(n, inc)| now.get(n) != Some(inc))
            .map(|(n, _)| *n)
            .filter(|n| *n != self.node)
            .collect();
        let joined: Vec<u16> = now
            .iter()
            .filter(|(n, inc)| seen.get(n) != Some(inc) && **n != self.node)
            .map(|(n, _)| *n)
            .collect();
        let left_cleanly = gone
            .iter()
            .filter(|n| {
                seen.get(n)
                    .is_some_and(|inc| c.left_cleanly(&n.to_string(), *inc))
            })
            .copied()
            .collect();
        *seen = now;
        Changes {
            gained,
            gone,
            joined,
            left_cleanly,
        }
    }

    /// Read the table again; rebuild the partitions this node gained (their
    /// files' state from the other nodes' opens) before deciding for them.
    fn refresh_and_rebuild(&self, server: &std::sync::Weak<ServerState>) {
        let Changes {
            mut gained,
            gone,
            joined,
            left_cleanly,
        } = self.refresh();
        let Some(s) = server.upgrade() else { return };
        self.cut_off(&gone, &left_cleanly);
        let mut gone_all = gone.clone();
        for node in gone {
            let n = s.forget_node(node);
            tracing::warn!("cluster: node {node} left; its {n} opens of files homed here are gone");
        }
        s.announce_watchers(&joined);
        if gained.is_empty() {
            if !gone_all.is_empty() {
                self.take_over_persistent(&s, &gone_all, &[]);
            }
            s.resend_closes();
            return;
        }
        let t = Instant::now();
        loop {
            match s.rebuild(&gained) {
                Ok(n) => {
                    tracing::info!(
                        "cluster: home of {} more partitions; {n} opens of other nodes taken \
                         over in {:?}",
                        gained.len(),
                        t.elapsed()
                    );
                    break;
                }
                // A node that does not answer is dead or cut off: it leaves
                // the membership within the TTL; ask the others again then.
                Err(node) => {
                    tracing::warn!("cluster: node {node} did not hand over its opens; again");
                    std::thread::sleep(REFRESH);
                    let c = self.refresh();
                    gained.extend(c.gained);
                    // (The node that did not answer, once gone: cut off before its
                    // partitions are decided for.)
                    self.cut_off(&c.gone, &c.left_cleanly);
                    for node in c.gone {
                        s.forget_node(node);
                        gone_all.push(node);
                    }
                    s.announce_watchers(&c.joined);
                }
            }
            if self.fenced.load(Ordering::Acquire) {
                return;
            }
        }
        // Before the files of these partitions are decided for again: the
        // persistent opens of dead nodes come back into their tables.
        self.take_over_persistent(&s, &gone_all, &gained);
        for p in gained {
            self.rebuilding[p as usize].store(false, Ordering::Release);
        }
        s.resend_closes();
    }

    /// Run the takeover command for each node of `gone` that is not a member now (not just
    /// come back as a new incarnation), except those that `left_cleanly`: a node that stopped
    /// cleanly finished its I/O before it left, so nothing of it can land late, and cutting it
    /// off (on CephFS: evicting its mount) would only keep it from serving when it is started
    /// again.
    fn cut_off(&self, gone: &[u16], left_cleanly: &[u16]) {
        let members = self.members();
        for node in gone.iter().filter(|n| !members.contains(n)) {
            if !left_cleanly.contains(node) {
                self.run_takeover_command(*node);
            } else if self.takeover.is_some() {
                tracing::info!(
                    "cluster: node {node} stopped cleanly: its takeover command is not run"
                );
            }
        }
    }

    /// Run `cluster takeover command NODE` (bounded: killed after
    /// [`TAKEOVER_LIMIT`]); its outcome is logged, and the takeover goes on
    /// whatever it is.
    fn run_takeover_command(&self, node: u16) {
        let Some(cmd) = &self.takeover else { return };
        let t = Instant::now();
        // As the server: this thread acts as a user after it took a dead node's persistent
        // open over (it opened the file as that user), and a child inherits the thread's ids
        // (on CephFS the eviction then could not run, or not read the cluster's keyring).
        if let Err(e) = ringshare_engine::creds::act_as_server() {
            tracing::error!("cluster: takeover command for node {node}: acting as the server: {e}");
            return;
        }
        let child = std::process::Command::new(cmd)
            .arg(node.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(
                    "cluster: takeover command {} for node {node}: {e}",
                    cmd.display()
                );
                return;
            }
        };
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if t.elapsed() < TAKEOVER_LIMIT => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.by_ref().take(400).read_to_string(&mut err);
        }
        match status {
            Some(s) if s.success() => tracing::warn!(
                "cluster: takeover command for node {node} done in {:?}",
                t.elapsed()
            ),
            Some(s) => tracing::error!(
                "cluster: takeover command {} for node {node} failed ({s}): {}",
                cmd.display(),
                err.trim()
            ),
            None => tracing::error!(
                "cluster: takeover command {} for node {node} killed after {:?}",
                cmd.display(),
                TAKEOVER_LIMIT
            ),
        }
    }

    /// The dead nodes' persistent opens of files homed here; tried again
    /// every [`REFRESH`] while their records cannot be read from etcd (the
    /// gained partitions are not decided for meanwhile), until this node is
    /// fenced.
    fn take_over_persistent(&self, s: &ServerState, gone: &[u16], gained: &[u32]) {
        loop {
            let now_ms = self.base.elapsed().as_millis() as u64;
            match s.take_over_persistent(gone, gained, now_ms) {
                Ok(0) => return,
                Ok(n) => {
                    tracing::warn!(
                        "cluster: {n} persistent opens of dead nodes are kept here for their \
                         clients"
                    );
                    return;
                }
                Err(_) if self.coordinator_fenced() => return,
                Err(_) => std::thread::sleep(REFRESH),
            }
        }
    }
}

/// What a [`Link::refresh`] found changed since the last one.
#[derive(Default)]
struct Changes {
    /// Partitions this node gained (marked as rebuilding).
    gained: Vec<u32>,
    /// Nodes that left, or came back as new incarnations.
    gone: Vec<u16>,
    /// Nodes that joined (new incarnations included).
    joined: Vec<u16>,
    /// Those of `gone` whose incarnation left cleanly (a stop: `Coordinator::left_cleanly`).
    left_cleanly: Vec<u16>,
}

/// A running cluster node; dropping it leaves the cluster at once (as a
/// crash would: the others take its partitions after the lease's TTL).
pub struct Node {
    link: Arc<Link>,
    pub stats: Arc<Stats>,
}

/// The live nodes with the addresses their clients reach them on, and the
/// drained nodes, as the coordinator last read them (`None`: fenced, or
/// not joined).
pub type Membership = (Vec<(u16, Vec<std::net::IpAddr>)>, Vec<u16>);

impl Node {
    /// This node's connections to the others (calls carried on the rings use them).
    pub fn peers(&self) -> Option<Arc<peer::Peers>> {
        self.link.peers.get().cloned()
    }

    /// What the Witness service reads the membership through.
    pub fn membership(&self) -> impl Fn() -> Option<Membership> + Send + 'static {
        let link = self.link.clone();
        move || {
            let guard = lock(&link.coordinator);
            let c = guard.as_ref().filter(|c| !c.is_fenced())?;
            let live = c
                .membership()
                .into_iter()
                .filter_map(|m| {
                    let ips = m.public.iter().filter_map(|a| a.parse().ok()).collect();
                    Some((m.id.parse().ok()?, ips))
                })
                .collect();
            let drained = c.drained().iter().filter_map(|d| d.parse().ok()).collect();
            Some((live, drained))
        }
    }
}

/// Why this node could not join.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Join the cluster `opts` names and serve as its node `opts.node`.
/// `started` is the driver's clock origin (the core's monotonic time).
/// `public`: the addresses clients reach this node on (its record says them, for Witness).
pub fn start(
    opts: &ClusterOptions,
    server: &Arc<ServerState>,
    started: Instant,
    public: &[std::net::IpAddr],
) -> Result<Node, StartError> {
    let e = |m: String| StartError(m);
    let (Some(name), Some(addr), Some(secret_file)) = (&opts.name, opts.address, &opts.secret_file)
    else {
        return Err(e("the cluster options are incomplete".into()));
    };
    let secret = read_secret(secret_file).map_err(e)?;
    let listener =
        TcpListener::bind(addr).map_err(|x| e(format!("cluster address {addr}: {x}")))?;
    let mut cfg = ClusterConfig::new(name, &opts.node.to_string(), addr, opts.etcd.clone());
    cfg.public = public.iter().map(ToString::to_string).collect();
    cfg.level = msg::LEVEL;
    cfg.ttl = opts.lease_ttl_or_default();
    let link = Arc::new(Link {
        node: opts.node,
        owners: (0..PARTITIONS).map(|_| AtomicU32::new(0)).collect(),
        rebuilding: (0..PARTITIONS).map(|_| AtomicBool::new(false)).collect(),
        addrs: RwLock::new(HashMap::new()),
        levels: RwLock::new(HashMap::new()),
        incarnations: Mutex::new(HashMap::new()),
        fenced: AtomicBool::new(false),
        leaving: AtomicBool::new(false),
        fence_at_ms: AtomicU64::new(0),
        base: started,
        coordinator: Mutex::new(None),
        peers: std::sync::OnceLock::new(),
        ca: ca::Store::new(name, &opts.etcd),
        takeover: opts.takeover_command.clone(),
        witness: !opts.witness_off,
    });
    let stats = Arc::new(Stats::default());
    let me = peer::Identity {
        node: opts.node,
        secret: secret.into(),
        level: msg::LEVEL,
    };
    let resolver = link.clone();
    let peers = peer::Peers::new(
        me.clone(),
        Box::new(move |n| {
            let addr = read(&resolver.addrs).get(&n).copied()?;
            Some((addr, resolver.level_of(n)))
        }),
        stats.clone(),
    );
    let late_server = Arc::downgrade(server);
    peers.on_late(Arc::new(move |node, call: &[u8], answer: &[u8]| {
        if let Some(s) = late_server.upgrade() {
            s.cluster_answered_late(node, call, answer);
        }
    }));
    let _ = link.peers.set(peers);
    server
        .join_cluster(link.clone())
        .map_err(|x| e(format!("joining: {x:?}")))?;
    let members = link.clone();
    let handler_server = Arc::downgrade(server);
    let handler: Arc<peer::Handler> = Arc::new(move |msg: &[u8]| {
        let Some(s) = handler_server.upgrade() else {
            return Err("a message after the server stopped".into());
        };
        let now_ms = started.elapsed().as_millis() as u64;
        s.cluster_receive(msg, now_ms).map_err(|w| format!("{w:?}"))
    });
    let undo_server = Arc::downgrade(server);
    let undo: Arc<peer::UndoHere> = Arc::new(move |call: &[u8], answer: &[u8]| {
        let now_ms = started.elapsed().as_millis() as u64;
        undo_server
            .upgrade()
            .is_some_and(|s| s.cluster_undo_here(call, answer, now_ms))
    });
    let log_server = Arc::downgrade(server);
    let log_admit: Arc<peer::LogAdmit> = Arc::new(move |ip| {
        let now_ms = started.elapsed().as_millis() as u64;
        log_server.upgrade().is_some_and(|s| {
            s.log_admit(ip, ringshare_core::loglimit::LogKind::ClusterPeer, now_ms)
        })
    });
    peer::serve(
        listener,
        me,
        Arc::new(move |n| read(&members.addrs).contains_key(&n)),
        (handler, undo),
        stats.clone(),
        log_admit,
    )
    .map_err(|x| e(format!("cluster listener: {x}")))?;
    let coordinator = join(&cfg).map_err(e)?;
    let events = install(&link, coordinator);
    let watcher = link.clone();
    let server = Arc::downgrade(server);
    let fs = match &opts.filesystem {
        Some(p) => Some(HeldFs::open(p, opts.node).map_err(e)?),
        None => None,
    };
    std::thread::Builder::new()
        .name("cluster-watch".into())
        .spawn(move || watch(&watcher, &cfg, fs.as_ref(), &server, events))
        .map_err(|x| e(format!("spawn: {x}")))?;
    tracing::info!(
        "cluster {name}: node {} joined at {addr} ({} etcd endpoints, lease ttl {} s)",
        opts.node,
        opts.etcd.len(),
        opts.lease_ttl_or_default().as_secs()
    );
    Ok(Node { link, stats })
}

impl Node {
    /// Leave the cluster (the server is stopping, after its I/O threads closed every client
    /// connection, parking the durable opens): a planned hand-over, said step by step (INFO).
    /// Nothing is decided here from the first step on; the partitions are released in etcd and
    /// the lease revoked at once, so that the other nodes take the partitions and this node's
    /// persistent opens over (the takeover a death starts, without the TTL's wait); the stop
    /// waits, within [`STOP_LIMIT`], until every persistent open's record names the live node
    /// that keeps it now. What could not be handed over is said (WARN).
    pub fn leave(self, server: &ServerState) {
        let t = Instant::now();
        let me = self.link.node;
        self.link.leaving.store(true, Ordering::Release);
        let mut held = 0;
        for o in &self.link.owners {
            if o.swap(0, Ordering::AcqRel) == u32::from(me) {
                held += 1;
            }
        }
        let others = self.link.members().iter().filter(|n| **n != me).count();
        // (Every client connection is closed: each of its persistent opens is parked.)
        let persistent = server.parked_persistent();
        tracing::info!(
            "cluster: node {me} is stopping: it takes no more clients and decides nothing; its \
             {held} partitions and {persistent} persistent opens go to the other {others} nodes"
        );
        let Some(c) = lock(&self.link.coordinator).take() else {
            return;
        };
        // Every I/O thread has stopped, its ring dropped: what it had in flight completed,
        // unless the kernel did not give an operation back in time (leaked, still running).
        let leaked = ringshare_engine::leaked_ops();
        if leaked > 0 {
            tracing::warn!(
                "cluster: node {me}: {leaked} file system operations did not finish: the other \
                 nodes take this stop for a death and cut this node off (takeover command)"
            );
        }
        if let Err(e) = c.leave(leaked == 0) {
            tracing::warn!(
                "cluster: node {me} could not leave through etcd ({e}): the other nodes take \
                 its {held} partitions and {persistent} persistent opens over only when its \
                 lease lapses (6 s)"
            );
            return;
        }
        tracing::info!(
            "cluster: node {me} left the cluster (stopping): its {held} partitions went to the \
             other nodes"
        );
        let lost = server.parked_durables().saturating_sub(persistent);
        if lost > 0 {
            tracing::info!(
                "cluster: node {me}: its {lost} disconnected durable opens that are not \
                 persistent end with it (only a continuously available share's persistent opens \
                 move to another node); their clients open their files again"
            );
        }
        if persistent == 0 {
            return;
        }
        if others == 0 {
            tracing::info!(
                "cluster: node {me} was the last node: its {persistent} persistent opens stay \
                 recorded in etcd for the next node that joins"
            );
            return;
        }
        self.wait_persistent_handed_over(server, t, persistent);
    }

    /// Wait (within [`STOP_LIMIT`] of `t`) until no persistent open's record names this node:
    /// the other nodes, seeing it gone, have taken them over.
    fn wait_persistent_handed_over(&self, server: &ServerState, t: Instant, persistent: usize) {
        let me = self.link.node;
        loop {
            let left = server.persistent_opens_kept_by(me);
            if left == Ok(0) {
                tracing::info!(
                    "cluster: node {me}: its {persistent} persistent opens are kept by the other \
                     nodes now, for their clients to reconnect there ({:?} after the stop began)",
                    t.elapsed()
                );
                return;
            }
            if t.elapsed() >= STOP_LIMIT {
                let what = match left {
                    Ok(n) => format!("{n} of its {persistent} persistent opens were"),
                    Err(s) => format!(
                        "its persistent opens' records could not be read ({s:?}): its \
                         {persistent} persistent opens may not have been"
                    ),
                };
                tracing::warn!(
                    "cluster: node {me}: {what} not handed over within {STOP_LIMIT:?}; the other \
                     nodes take them over from their records in etcd when they see this node gone"
                );
                return;
            }
            std::thread::sleep(REFRESH);
        }
    }
}

fn read_secret(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let s =
        std::fs::read(path).map_err(|e| format!("cluster secret file {}: {e}", path.display()))?;
    let s: Vec<u8> = s.trim_ascii().to_vec();
    if s.len() < 32 {
        return Err(format!(
            "cluster secret file {}: at least 32 bytes are needed (for example \
             `head -c 32 /dev/urandom | base64 > {}`), the same on every node",
            path.display(),
            path.display()
        ));
    }
    Ok(s)
}

fn join(cfg: &ClusterConfig) -> Result<Coordinator, String> {
    Coordinator::join(cfg.clone())
        .map_err(|e| format!("joining cluster {} on etcd: {e}", cfg.cluster))
}

/// Make `c` this node's coordinator and read its table.
fn install(link: &Link, mut c: Coordinator) -> Option<std::sync::mpsc::Receiver<Event>> {
    let events = c.take_events();
    for o in &link.owners {
        o.store(0, Ordering::Release);
    }
    *lock(&link.coordinator) = Some(c);
    link.fenced.store(false, Ordering::Release);
    events
}

/// The cluster file system as this node opened it when it started: its
/// share roots are held open on that same mount.
struct HeldFs {
    dir: std::fs::File,
    path: std::path::PathBuf,
    node: u16,
}

impl HeldFs {
    fn open(path: &std::path::Path, node: u16) -> Result<HeldFs, String> {
        let dir = std::fs::File::open(path)
            .map_err(|e| format!("cluster filesystem {}: {e}", path.display()))?;
        Ok(HeldFs {
            dir,
            path: path.to_path_buf(),
            node,
        })
    }

    /// Whether the mount answers: one a takeover evicted (a CephFS mount
    /// after `ceph tell mds.* client evict`) refuses everything (ESHUTDOWN),
    /// and a node over it must not join again to serve errors. A reading
    /// may be answered from the client's cache, so a small file is made,
    /// synced and removed: the metadata server and the data servers answer.
    /// (Through the held directory: a remount at the same path does not
    /// revive the share roots this node holds.)
    fn answers(&self) -> Result<(), String> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let probe = format!(
            "/proc/self/fd/{}/.ringshare-probe-node-{}",
            self.dir.as_raw_fd(),
            self.node
        );
        let made = std::fs::File::create(&probe).and_then(|mut f| {
            f.write_all(b"ringshare")?;
            f.sync_all()
        });
        let removed = std::fs::remove_file(&probe);
        made.and(removed).map_err(|e| {
            format!(
                "the cluster file system {} does not answer: {e}",
                self.path.display()
            )
        })
    }
}

/// Follow the coordinator: refresh the table, and when fenced drop every
/// client, decide nothing, and join again as a new incarnation once the
/// cluster file system answers.
fn watch(
    link: &Arc<Link>,
    cfg: &ClusterConfig,
    fs: Option<&HeldFs>,
    server: &std::sync::Weak<ServerState>,
    mut events: Option<std::sync::mpsc::Receiver<Event>>,
) {
    // Seconds the file system has not answered since the fence (logged at
    // the first and every minute).
    let mut fs_down = 0u32;
    // The longest gap between two lease renewals said so far (a WARN each time it grows past
    // a renewal missed: how close the node came to fencing itself).
    let mut gap_said = cfg.ttl / 3 + Duration::from_millis(500);
    let mut closes_said = Instant::now();
    loop {
        if server.strong_count() == 0 || link.leaving.load(Ordering::Acquire) {
            return;
        }
        if closes_said.elapsed() >= CLOSES_SAID_EVERY {
            closes_said = Instant::now();
            if let Some(s) = server.upgrade() {
                say_closes_not_taken(&s);
            }
        }
        let gap = lock(&link.coordinator)
            .as_ref()
            .map_or(Duration::ZERO, Coordinator::max_renew_gap);
        if gap > gap_said {
            gap_said = gap;
            tracing::warn!(
                "cluster: the etcd lease was renewed {gap:?} after the renewal before it (this \
                 node fences itself {:?} after a renewal)",
                cfg.ttl.saturating_sub(cfg.margin)
            );
        }
        let fenced = match &events {
            Some(rx) => match rx.recv_timeout(REFRESH) {
                Ok(Event::Fenced) => true,
                Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => true,
            },
            None => {
                std::thread::sleep(REFRESH);
                false
            }
        } || link.coordinator_fenced();
        if !fenced {
            link.refresh_and_rebuild(server);
            continue;
        }
        if link.leaving.load(Ordering::Acquire) {
            // The coordinator went because the node is stopping ([`Node::leave`]).
            return;
        }
        if !link.fenced.swap(true, Ordering::AcqRel) {
            let why = lock(&link.coordinator).as_ref().map(|c| {
                let reason = c.fence_reason();
                let gap = c.max_renew_gap();
                (reason.unwrap_or_else(|| "not said".into()), gap)
            });
            let (why, gap) = why.unwrap_or_else(|| ("no coordinator".into(), Duration::ZERO));
            tracing::error!(
                "cluster: this node is fenced (its etcd lease lapsed: {why}; the longest gap \
                 between two renewals was {gap:?}): dropping every client and deciding nothing \
                 until it has joined again"
            );
            if let Some(s) = server.upgrade() {
                s.drop_all_connections();
            }
        }
        // Join again (a new incarnation), every second until etcd answers.
        if let Some(old) = lock(&link.coordinator).take() {
            drop(old);
        }
        std::thread::sleep(Duration::from_secs(1));
        if let Err(e) = fs.map_or(Ok(()), HeldFs::answers) {
            if fs_down.is_multiple_of(60) {
                tracing::error!(
                    "cluster: not joining again: {e} (evicted by the other nodes' takeover? \
                     remount it and restart this node)"
                );
            }
            fs_down += 1;
            continue;
        }
        fs_down = 0;
        match join(cfg) {
            Ok(c) => {
                events = install(link, c);
                tracing::warn!("cluster: joined again after being fenced");
            }
            Err(e) => tracing::warn!("cluster: {e}"),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

/// `ringshare cluster-home --config FILE PATH...`: for each file, its
/// partition and the node etcd says owns it now.
/// `ringshare cluster drain|undrain NODE --config FILE`: records in etcd whether node `node`
/// of the cluster `config` names is drained (every node's Witness service reads it).
pub fn set_drained(config: &std::path::Path, node: u16, on: bool) -> Result<(), String> {
    let cfg = crate::config::load(config).map_err(|e| e.to_string())?;
    let c = &cfg.global.cluster;
    let Some(name) = &c.name else {
        return Err(format!("{} names no cluster", config.display()));
    };
    if node == 0 {
        return Err("node numbers start at 1".into());
    }
    ringshare_cluster::set_drained(&c.etcd, name, &node.to_string(), on)
        .map_err(|e| format!("etcd: {e}"))
}

pub fn print_homes(
    config: &std::path::Path,
    paths: &[std::path::PathBuf],
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let cfg = crate::config::load(config).map_err(|e| e.to_string())?;
    let c = &cfg.global.cluster;
    let Some(name) = &c.name else {
        return Err(format!("{} names no cluster", config.display()));
    };
    let mut etcd = ringshare_cluster::etcd::Etcd::new(&c.etcd, Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    for path in paths {
        let ino = std::fs::metadata(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .ino();
        let key = ringshare_core::server::FileKey {
            dev: ringshare_core::cluster::CLUSTER_DEV,
            ino,
            stream: 0,
        };
        let p = ringshare_core::cluster::partition_of(key, PARTITIONS);
        let part = format!("/ringshare/{name}/parts/{p}");
        let owner = etcd
            .get(part.as_bytes(), Instant::now() + Duration::from_secs(5))
            .map_err(|e| e.to_string())?
            .and_then(|kv| serde_json::from_slice::<serde_json::Value>(&kv.value).ok())
            .and_then(|v| v["owner"].as_str().map(str::to_string));
        let home = owner.map_or_else(
            || "none (being taken over)".to_string(),
            |n| format!("node {n}"),
        );
        let _ = writeln!(out, "{}: partition {p}, home {home}", path.display());
    }
    Ok(())
}

/// `ringshare cluster nodes`: each live node of the cluster `config` names, with the protocol
/// level it speaks, and the cluster's level (the lowest: what every node reads), as etcd has
/// them now (docs/cluster.md, "Upgrading a cluster").
pub fn print_nodes(config: &std::path::Path, out: &mut dyn std::io::Write) -> Result<(), String> {
    let cfg = crate::config::load(config).map_err(|e| e.to_string())?;
    let c = &cfg.global.cluster;
    let Some(name) = &c.name else {
        return Err(format!("{} names no cluster", config.display()));
    };
    let members = ringshare_cluster::members(&c.etcd, name).map_err(|e| e.to_string())?;
    let level = members.iter().map(|m| m.level).min();
    let _ = match level {
        Some(l) => writeln!(
            out,
            "cluster {name}: level {l} (the lowest of its {} nodes'; this build speaks {})",
            members.len(),
            msg::LEVEL
        ),
        None => writeln!(out, "cluster {name}: no live node"),
    };
    for m in &members {
        let _ = writeln!(
            out,
            "node {}  {}  level {}  incarnation {}",
            m.id, m.addr, m.level, m.incarnation
        );
    }
    Ok(())
}

/// Logs how many closes the files' homes did not take since the last such line, beyond the
/// first (logged when it came), and starts counting again.
fn say_closes_not_taken(s: &ServerState) {
    let n = s.node.closes_not_taken.swap(0, Ordering::Relaxed);
    if n > 1 {
        tracing::warn!(
            "cluster: {} more closes their files' homes did not take in the last {} s; sent \
             again later",
            n - 1,
            CLOSES_SAID_EVERY.as_secs()
        );
    }
}
