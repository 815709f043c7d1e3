//! Cluster coordination for ringshare on etcd (issue 18, phase (b), **coordination layer only**):
//! membership, partition ownership with fencing tokens, and self-fencing. Nothing here knows
//! about SMB; home nodes, remote CREATE/break/lock and CA handles are not built yet.
//!
//! # How this talks to etcd, and why
//! Through etcd's own JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn`, `/v3/lease/grant`,
//! `/v3/lease/keepalive`, `/v3/lease/revoke`; etcd 3.4, what Debian 12 ships as
//! `etcd-server` 3.4.23, serves them under `/v3/` on the client URL) with a ~200-line blocking
//! HTTP/1.1 client (`http.rs`) over `std::net`, not the `etcd-client` crate:
//! * **Dependencies and build time.** `etcd-client` brings tokio, tonic, hyper, h2, tower and
//!   prost (roughly a hundred crates, and `protoc` at build time) into a workspace that has no
//!   async runtime; on this 2-core machine that is minutes of extra build in every CI run. This
//!   crate adds one dependency, `serde_json`, which the workspace already builds.
//! * **Keepalive correctness is easier to see.** A keepalive is one request/answer
//!   (`/v3/lease/keepalive` with one message answers once and closes); the fence deadline is
//!   computed from the moment the request was *sent* (`sent + TTL − margin`), so a late answer
//!   can only make the node fence earlier, never later. No stream can silently stall.
//! * **No watch: polling.** The coordinator reads the whole `/ringshare/<cluster>/` prefix (nodes
//!   and parts, one linearizable range at one revision) every `poll` (500 ms). The gateway's
//!   watch is a chunked never-ending answer that would need its own reconnect and
//!   revision-resume logic; polling costs one small read per node per poll (256 parts ≈ 30 KB)
//!   and adds at most `poll` to a takeover that already waits a 6 s TTL. Every decision is
//!   also re-checked by the txn's compares, so a stale poll can never make a wrong claim win.
//!
//! Every call has a deadline (one attempt ≤ 1 s, then the next endpoint), answers are capped at
//! [`etcd::MAX_RESPONSE`], malformed answers are errors, and the event channel is bounded.
//!
//! # Keys (under `/ringshare/<cluster>/`)
//! * `nodes/<id>` = `{"addr": "<private address>", "public": ["<client address>", …],
//!   "level": <protocol level>}`, bound to the node's lease (`public`: the addresses clients
//!   reach it on, for Witness). Its `create_revision` is the node's **incarnation**: a
//!   restarted node with the same id is a different incarnation and owns none of the old one's
//!   partitions. `level` is the protocol level the node speaks (docs/cluster.md, "Upgrading a
//!   cluster"); a record without it is a build's before levels, level 1. Readers ignore fields
//!   they do not know, so a newer build may add some; a record whose meaning changes gets a new
//!   key space.
//! * `parts/<p>` = `{"owner": "<id>", "inc": <incarnation>}`, not bound to any lease (ownership
//!   outlives the owner until someone takes it over). Its `mod_revision` is the **fencing
//!   token**: it grows on every change of owner of that partition (etcd revisions are global and
//!   monotonic), so (p, token) orders every owner of p.
//! * `drain/<id>` = `{}`: the node is drained ([`set_drained`]): Witness moves its clients away.
//! * `left/<id>` = `{"inc": <incarnation>}`: that incarnation of the node left cleanly
//!   ([`Coordinator::leave`], written while it was still a member, before its lease was
//!   revoked): it had stopped all its work first, so the others need not cut it off
//!   ([`Coordinator::left_cleanly`]). Not bound to a lease; the next leave of that id
//!   overwrites it.
//!
//! # Placement, claims, hand-over
//! The preferred owner of p is the live node with the highest rendezvous score
//! ([`preferred_owner`]). Only the preferred node claims, with one txn whose compares are:
//! our own `nodes/<id>` still has our incarnation (we are alive at commit time), and either
//! `parts/<p>` does not exist, or `parts/<p>`'s mod_revision is the one we saw *and* the old
//! owner's `nodes/<id>` does not carry the old incarnation (it is dead). A node that owns a
//! partition whose preferred owner is now someone else (a node joined) releases it: it reports
//! [`Event::PartitionLost`] *first*, then deletes `parts/<p>` comparing its own token; the
//! preferred node claims the absent key on its next poll. Nothing moves to a joining node until
//! its owner lets go, so there is never a moment with two owners.
//!
//! # TTL, margin, fencing
//! TTL 6 s, keepalive every TTL/3 = 2 s, margin 1 s. The node fences itself at
//! `send time of the last successful keepalive + TTL − margin` ([`Event::Fenced`],
//! [`Coordinator::is_fenced`] is true and it owns nothing from then on; checked against the
//! clock on every call, so it holds even before the keepalive thread wakes after a SIGSTOP).
//! etcd deletes `nodes/<id>` no earlier than TTL after it *received* that keepalive (a leader
//! change only extends leases), so when a survivor first sees the key gone the old owner has
//! been fenced for at least `margin`. A survivor then waits `margin` more (measured from when
//! it saw the owner gone) before claiming: a second margin for clock-rate differences and
//! answers already in flight at the fenced node. Waiting a whole second TTL would add 6 s to
//! every takeover for no safety gain. A graceful [`Coordinator::leave`] deletes its partitions
//! before revoking its lease, so they move at once.

#![forbid(unsafe_code)]

pub mod etcd;
mod http;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use etcd::{Compare, Etcd, KeyValue, Op};

/// What can go wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The configuration is unusable.
    Config(String),
    /// No etcd endpoint answered in time (or answered "unavailable").
    Unavailable(String),
    /// etcd answered something this client does not understand.
    BadResponse(String),
    /// etcd refused the request.
    Etcd(String),
    /// A live node already uses this node id.
    NodeIdInUse(String),
    /// The lease was not renewed in time: this node must stop acknowledging.
    Fenced,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(s) => write!(f, "cluster configuration: {s}"),
            Error::Unavailable(s) => write!(f, "etcd unavailable: {s}"),
            Error::BadResponse(s) => write!(f, "unexpected etcd answer: {s}"),
            Error::Etcd(s) => write!(f, "etcd refused: {s}"),
            Error::NodeIdInUse(s) => write!(f, "node id {s:?} is used by a live node"),
            Error::Fenced => write!(
                f,
                "this node is fenced (its etcd lease was not renewed in time)"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// A node's lease TTL unless its configuration says another ([`ClusterConfig::ttl`]).
pub const DEFAULT_TTL: Duration = Duration::from_secs(6);

/// How a node joins a cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Cluster name: the key prefix is `/ringshare/<cluster>/`.
    pub cluster: String,
    /// This node's id (letters, digits, `.`, `_`, `-`; at most 64).
    pub node_id: String,
    /// The address other nodes reach this one on (the private network).
    pub node_addr: SocketAddr,
    /// etcd client URLs, `http://host:port`.
    pub endpoints: Vec<String>,
    /// Lease TTL, whole seconds, at least 2 (default 6 s).
    pub ttl: Duration,
    /// Number of partitions, 1..=4096 (default 256). Every node must use the same number.
    pub partitions: u32,
    /// Fencing margin (default 1 s), less than TTL/2.
    pub margin: Duration,
    /// How often the cluster state is read (default 500 ms).
    pub poll: Duration,
    /// The addresses clients reach this node on (published in its record, for Witness).
    pub public: Vec<String>,
    /// The protocol level this node speaks, advertised in its membership record (default 1).
    pub level: u16,
}

impl ClusterConfig {
    /// A configuration with the defaults above.
    pub fn new(
        cluster: &str,
        node_id: &str,
        node_addr: SocketAddr,
        endpoints: Vec<String>,
    ) -> Self {
        ClusterConfig {
            cluster: cluster.into(),
            node_id: node_id.into(),
            node_addr,
            endpoints,
            ttl: DEFAULT_TTL,
            partitions: 256,
            margin: Duration::from_secs(1),
            poll: Duration::from_millis(500),
            public: Vec::new(),
            level: 1,
        }
    }

    fn validate(&self) -> Result<(), Error> {
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        if !name_ok(&self.cluster) || !name_ok(&self.node_id) {
            return Err(Error::Config(
                "cluster and node id: 1-64 of [A-Za-z0-9._-]".into(),
            ));
        }
        if self.ttl.subsec_nanos() != 0 || self.ttl < Duration::from_secs(2) {
            return Err(Error::Config("ttl: whole seconds, at least 2".into()));
        }
        if self.partitions == 0 || self.partitions > 4096 {
            return Err(Error::Config("partitions: 1..=4096".into()));
        }
        if self.margin.is_zero() || self.margin * 2 >= self.ttl {
            return Err(Error::Config("margin: more than 0, less than ttl/2".into()));
        }
        if self.poll.is_zero() || self.poll > self.ttl / 2 {
            return Err(Error::Config("poll: more than 0, at most ttl/2".into()));
        }
        Ok(())
    }
}

/// What the coordinator tells its user. The state behind them ([`Coordinator::owned`],
/// [`Coordinator::is_fenced`]) is authoritative; events are notices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// This node now owns partition `p`; `token` is the fencing token of this ownership.
    PartitionGained { p: u32, token: i64 },
    /// This node no longer owns `p` (released to its preferred owner, or taken): stop acting for it.
    PartitionLost { p: u32 },
    /// The lease could not be renewed in time (or etcd dropped it): stop acknowledging anything.
    /// The coordinator is finished; a new one must join.
    Fenced,
}

/// A live node, as etcd has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    /// Its private address (empty when its record could not be read).
    pub addr: String,
    /// `create_revision` of its `nodes/<id>` key.
    pub incarnation: i64,
    /// The addresses its clients reach it on.
    pub public: Vec<String>,
    /// The protocol level it advertised (1 when its record has none: a build before levels).
    pub level: u16,
}

/// Marks node `node` of `cluster` drained (`on`) or not, in etcd at `endpoints`: every node's
/// Witness service tells the clients of a drained node to move ([`Coordinator::drained`]).
pub fn set_drained(endpoints: &[String], cluster: &str, node: &str, on: bool) -> Result<(), Error> {
    let mut etcd = Etcd::new(endpoints, Duration::from_secs(1))?;
    let key = format!("/ringshare/{cluster}/drain/{node}").into_bytes();
    let deadline = Instant::now() + Duration::from_secs(5);
    let op = if on {
        Op::Put {
            key,
            value: b"{}".to_vec(),
            lease: 0,
        }
    } else {
        Op::Delete { key }
    };
    etcd.txn(&[], &[op], &[], deadline).map(|_| ())
}

/// The preferred owner of partition `p` among `nodes`: highest rendezvous score, ties by id.
pub fn preferred_owner<'a>(nodes: impl IntoIterator<Item = &'a str>, p: u32) -> Option<&'a str> {
    nodes.into_iter().max_by_key(|n| (score(n, p), *n))
}

fn score(node: &str, p: u32) -> u64 {
    // FNV-1a over id and partition, then the splitmix64 finaliser: stable across builds and
    // architectures (every node must compute the same placement).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain([0xff]).chain(p.to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    owner: String,
    inc: i64,
    mod_revision: i64,
}

#[derive(Default)]
struct View {
    members: BTreeMap<String, Member>,
    parts: Vec<Option<Part>>,
    /// Nodes with a `drain/<id>` key.
    drained: BTreeSet<String>,
    /// The incarnation each `left/<id>` names (the last that left cleanly).
    left: BTreeMap<String, i64>,
}

struct Shared {
    cfg: ClusterConfig,
    prefix: String,
    lease: i64,
    inc: i64,
    fenced: AtomicBool,
    stop_worker: AtomicBool,
    stop_keepalive: AtomicBool,
    fence_at: Mutex<Instant>,
    view: Mutex<View>,
    owned: Mutex<BTreeMap<u32, i64>>,
    tx: SyncSender<Event>,
    dropped: AtomicU64,
    max_renew_gap_ms: AtomicU64,
    /// Why this node fenced itself (set once, by the first fence).
    fence_reason: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn node_key(&self, id: &str) -> Vec<u8> {
        format!("{}nodes/{id}", self.prefix).into_bytes()
    }
    fn part_key(&self, p: u32) -> Vec<u8> {
        format!("{}parts/{p}", self.prefix).into_bytes()
    }
    fn emit(&self, e: Event) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(e) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// True once fenced, and from the fence deadline on even before a thread noticed.
    fn is_fenced(&self) -> bool {
        if self.fenced.load(Ordering::SeqCst) {
            return true;
        }
        let fence_at = *lock(&self.fence_at);
        let now = Instant::now();
        if now >= fence_at {
            self.fence(|| {
                format!(
                    "no keepalive succeeded in time: the fence deadline passed {:?} ago",
                    now - fence_at
                )
            });
            return true;
        }
        false
    }
    /// Fences this node; `why` is kept for [`Coordinator::fence_reason`] if it is the first.
    fn fence(&self, why: impl FnOnce() -> String) {
        if !self.fenced.swap(true, Ordering::SeqCst) {
            *lock(&self.fence_reason) = Some(why());
            lock(&self.owned).clear();
            self.emit(Event::Fenced);
        }
    }
}

/// One node's membership in a cluster. Dropping it without [`Coordinator::leave`] behaves like a
/// crash: the keepalive stops and the others take its partitions after the lease expires.
pub struct Coordinator {
    sh: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
    keepalive: Option<JoinHandle<()>>,
    events: Option<Receiver<Event>>,
}

impl Coordinator {
    /// Grants a lease, registers `nodes/<id>` on it (refused when a live node has that id) and
    /// starts the keepalive and the partition threads.
    pub fn join(cfg: ClusterConfig) -> Result<Coordinator, Error> {
        cfg.validate()?;
        let prefix = format!("/ringshare/{}/", cfg.cluster);
        let mut etcd = Etcd::new(&cfg.endpoints, Duration::from_secs(1))?;
        let deadline = Instant::now() + cfg.ttl;
        let sent = Instant::now();
        let (lease, ttl) = etcd.lease_grant(cfg.ttl.as_secs() as i64, deadline)?;
        let fence_at = sent + Duration::from_secs(ttl as u64).saturating_sub(cfg.margin);
        let key = format!("{prefix}nodes/{}", cfg.node_id).into_bytes();
        let value = serde_json::to_vec(
            &json!({"addr": cfg.node_addr.to_string(), "public": cfg.public,
                "level": cfg.level}),
        )
        .map_err(|e| Error::Config(e.to_string()))?;
        let put = Op::Put {
            key: key.clone(),
            value,
            lease,
        };
        let r = etcd.txn(
            &[Compare::CreateRevisionEq(key.clone(), 0)],
            &[put],
            &[],
            deadline,
        )?;
        let inc = if r.succeeded {
            r.revision
        } else {
            // Taken — unless by our own earlier attempt whose answer was lost.
            match etcd.get(&key, deadline)? {
                Some(kv) if kv.lease == lease => kv.create_revision,
                _ => {
                    let _ = etcd.lease_revoke(lease, deadline);
                    return Err(Error::NodeIdInUse(cfg.node_id.clone()));
                }
            }
        };
        if Instant::now() >= fence_at {
            return Err(Error::Fenced);
        }
        let (tx, rx) = sync_channel(2 * cfg.partitions as usize + 16);
        let sh = Arc::new(Shared {
            view: Mutex::new(View {
                members: BTreeMap::new(),
                parts: vec![None; cfg.partitions as usize],
                drained: BTreeSet::new(),
                left: BTreeMap::new(),
            }),
            cfg,
            prefix,
            lease,
            inc,
            fenced: AtomicBool::new(false),
            stop_worker: AtomicBool::new(false),
            stop_keepalive: AtomicBool::new(false),
            fence_at: Mutex::new(fence_at),
            owned: Mutex::new(BTreeMap::new()),
            tx,
            dropped: AtomicU64::new(0),
            max_renew_gap_ms: AtomicU64::new(0),
            fence_reason: Mutex::new(None),
        });
        let ka = {
            let sh = sh.clone();
            // A keepalive has 1 s: a third of it per member, so that a member that takes the
            // connection but does not answer (SIGSTOPped, hung) leaves time to renew through
            // the others within the same call (with a whole second per member, a retry that
            // fell on the stopped etcd leader after the election used the last second before
            // the fence: renewals 4.0-4.4 s apart were seen in the stall test, fencing at 5 s).
            let etcd = Etcd::new(&sh.cfg.endpoints, KEEPALIVE_ATTEMPT)?;
            std::thread::Builder::new()
                .name("cluster-keepalive".into())
                .spawn(move || keepalive_thread(&sh, etcd, sent))
                .map_err(|e| Error::Config(format!("spawn: {e}")))?
        };
        let worker = {
            let sh2 = sh.clone();
            match std::thread::Builder::new()
                .name("cluster-parts".into())
                .spawn(move || worker_loop(&sh2, etcd))
            {
                Ok(h) => h,
                Err(e) => {
                    sh.stop_keepalive.store(true, Ordering::SeqCst);
                    let _ = ka.join();
                    return Err(Error::Config(format!("spawn: {e}")));
                }
            }
        };
        Ok(Coordinator {
            sh,
            worker: Some(worker),
            keepalive: Some(ka),
            events: Some(rx),
        })
    }

    /// The event receiver (once; later calls get `None`).
    pub fn take_events(&mut self) -> Option<Receiver<Event>> {
        self.events.take()
    }

    /// This node's incarnation (`create_revision` of its `nodes/<id>` key).
    pub fn incarnation(&self) -> i64 {
        self.sh.inc
    }

    /// Whether this node must stop acknowledging (lease not renewed before TTL − margin).
    pub fn is_fenced(&self) -> bool {
        self.sh.is_fenced()
    }

    /// When this node fences itself unless its lease is renewed before: a
    /// user may cache it (it only moves later) and stop acting at it
    /// without asking again.
    pub fn fence_deadline(&self) -> Instant {
        *lock(&self.sh.fence_at)
    }

    /// Live nodes as of the last poll (empty once fenced).
    pub fn membership(&self) -> Vec<Member> {
        if self.sh.is_fenced() {
            return Vec::new();
        }
        lock(&self.sh.view).members.values().cloned().collect()
    }

    /// The nodes drained ([`set_drained`]) as of the last poll.
    pub fn drained(&self) -> BTreeSet<String> {
        lock(&self.sh.view).drained.clone()
    }

    /// Whether incarnation `inc` of node `id` left cleanly ([`Coordinator::leave`] marked it in
    /// `left/<id>` before revoking its lease), as of the last poll: its record and the mark are
    /// read at one revision, so once the record is seen gone, the mark of a clean leave is seen
    /// too. False for a node that died, was fenced, or is of a build without the mark.
    pub fn left_cleanly(&self, id: &str, inc: i64) -> bool {
        lock(&self.sh.view).left.get(id) == Some(&inc)
    }

    /// Owner and fencing token of `p` as of the last poll (`None` when unowned, out of range or
    /// fenced). For this node's own partitions this is exact: see [`Coordinator::owned`].
    pub fn owner_of(&self, p: u32) -> Option<(String, i64)> {
        if self.sh.is_fenced() {
            return None;
        }
        if let Some(t) = lock(&self.sh.owned).get(&p) {
            return Some((self.sh.cfg.node_id.clone(), *t));
        }
        let v = lock(&self.sh.view);
        match v.parts.get(p as usize)? {
            Some(part) if part.owner != self.sh.cfg.node_id => {
                Some((part.owner.clone(), part.mod_revision))
            }
            _ => None,
        }
    }

    /// The partitions this node owns, with their tokens (empty once fenced).
    pub fn owned(&self) -> Vec<(u32, i64)> {
        if self.sh.is_fenced() {
            return Vec::new();
        }
        lock(&self.sh.owned).iter().map(|(p, t)| (*p, *t)).collect()
    }

    /// Events that did not fit in the channel (the user must resync from [`Coordinator::owned`]).
    pub fn dropped_events(&self) -> u64 {
        self.sh.dropped.load(Ordering::Relaxed)
    }

    /// Why this node fenced itself, once it did.
    pub fn fence_reason(&self) -> Option<String> {
        lock(&self.sh.fence_reason).clone()
    }

    /// The longest time between two successful lease renewals so far.
    pub fn max_renew_gap(&self) -> Duration {
        Duration::from_millis(self.sh.max_renew_gap_ms.load(Ordering::Relaxed))
    }

    /// Leaves gracefully: releases every partition (each reported lost first), marks this
    /// incarnation as gone cleanly when `finished` (`left/<id>`, [`Coordinator::left_cleanly`]:
    /// the node does nothing more, its I/O on the shared file system all done), then revokes
    /// the lease. Partitions go to the others at once. Fails with `Fenced` when already fenced
    /// (no mark then: the others treat it as a death, as they do without `finished`).
    pub fn leave(mut self, finished: bool) -> Result<(), Error> {
        self.sh.stop_worker.store(true, Ordering::SeqCst);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        let sh = self.sh.clone();
        let mut etcd = Etcd::new(&sh.cfg.endpoints, Duration::from_secs(1))?;
        let deadline = Instant::now() + sh.cfg.ttl;
        let fenced = sh.is_fenced();
        let owned: Vec<(u32, i64)> = std::mem::take(&mut *lock(&sh.owned)).into_iter().collect();
        for (p, _) in &owned {
            sh.emit(Event::PartitionLost { p: *p });
        }
        let mut result = if fenced { Err(Error::Fenced) } else { Ok(()) };
        if !fenced {
            let items: Vec<(u32, Vec<Compare>, Op)> = owned
                .iter()
                .map(|(p, t)| {
                    (
                        *p,
                        vec![Compare::ModRevisionEq(sh.part_key(*p), *t)],
                        Op::Delete {
                            key: sh.part_key(*p),
                        },
                    )
                })
                .collect();
            if let Err(e) = txn_batches(&mut etcd, &items, &[], deadline) {
                result = Err(e);
            }
        }
        if finished && result.is_ok() {
            // Only while this incarnation is still a member: a node whose lease lapsed was
            // (or is being) taken over as a dead one. Without the mark (etcd did not take it)
            // the others take it for a death: they cut it off, which is safe, only needless.
            let mark = Op::Put {
                key: format!("{}left/{}", sh.prefix, sh.cfg.node_id).into_bytes(),
                value: json!({ "inc": sh.inc }).to_string().into_bytes(),
                lease: 0,
            };
            let alive = Compare::CreateRevisionEq(sh.node_key(&sh.cfg.node_id), sh.inc);
            let _ = etcd.txn(&[alive], &[mark], &[], deadline);
        }
        // From here on this node acts for nothing: fence silently, stop renewing, revoke.
        sh.fenced.store(true, Ordering::SeqCst);
        sh.stop_keepalive.store(true, Ordering::SeqCst);
        if let Some(k) = self.keepalive.take() {
            let _ = k.join();
        }
        etcd.lease_revoke(sh.lease, deadline)?;
        result
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.sh.stop_worker.store(true, Ordering::SeqCst);
        self.sh.stop_keepalive.store(true, Ordering::SeqCst);
        for h in [self.worker.take(), self.keepalive.take()]
            .into_iter()
            .flatten()
        {
            let _ = h.join();
        }
    }
}

/// Sleeps until `until` in short steps, returning early (false) when `stop` is set.
fn sleep_until(stop: &AtomicBool, until: Instant) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// How long a keepalive waits for one etcd member before it asks the next (its call has 1 s).
const KEEPALIVE_ATTEMPT: Duration = Duration::from_millis(300);

fn keepalive_thread(sh: &Shared, mut etcd: Etcd, sent: Instant) {
    keepalive_loop(sh, &mut etcd, sent);
    if sh.fenced.load(Ordering::SeqCst) && !sh.stop_keepalive.load(Ordering::SeqCst) {
        // Fenced (not stopped by leave or drop): this node acknowledges nothing any more, so
        // dropping its lease now is safe and lets the others start their margin at once and a
        // restarted node join under the same id. Best effort: etcd may be unreachable.
        let _ = etcd.lease_revoke(sh.lease, Instant::now() + Duration::from_secs(1));
    }
}

fn keepalive_loop(sh: &Shared, etcd: &mut Etcd, mut last_ok: Instant) {
    let interval = sh.cfg.ttl / 3;
    let mut next = last_ok + interval;
    loop {
        // (Read the deadline in its own statement: a guard in the call would be held while sleeping.)
        let fence_at = *lock(&sh.fence_at);
        if !sleep_until(&sh.stop_keepalive, next.min(fence_at)) {
            return;
        }
        if sh.is_fenced() {
            return;
        }
        let sent = Instant::now();
        let deadline = (sent + Duration::from_secs(1)).min(*lock(&sh.fence_at));
        match etcd.lease_keepalive(sh.lease, deadline) {
            Ok(ttl) if ttl > 0 => {
                let at = sent + Duration::from_secs(ttl as u64).saturating_sub(sh.cfg.margin);
                *lock(&sh.fence_at) = at;
                let gap = sent.saturating_duration_since(last_ok).as_millis() as u64;
                sh.max_renew_gap_ms.fetch_max(gap, Ordering::Relaxed);
                last_ok = sent;
                next = sent + interval;
            }
            Ok(_) => {
                // etcd no longer has the lease: our keys are gone.
                let since = sent.saturating_duration_since(last_ok);
                sh.fence(|| {
                    format!("etcd said the lease is gone (the last keepalive before was {since:?} earlier)")
                });
                return;
            }
            Err(_) => next = Instant::now() + Duration::from_millis(200),
        }
    }
}

fn worker_loop(sh: &Shared, mut etcd: Etcd) {
    let mut next = Instant::now();
    let mut dead_since: BTreeMap<u32, (Part, Instant)> = BTreeMap::new();
    let mut releasing: BTreeSet<u32> = BTreeSet::new();
    loop {
        if !sleep_until(&sh.stop_worker, next) || sh.is_fenced() {
            return;
        }
        next = Instant::now() + sh.cfg.poll;
        let deadline = Instant::now() + sh.cfg.poll.max(Duration::from_secs(1));
        let Ok((_, kvs)) = etcd.range_prefix(sh.prefix.as_bytes(), deadline) else {
            continue; // the keepalive thread decides when etcd has been gone too long
        };
        reconcile(sh, &mut etcd, kvs, &mut dead_since, &mut releasing);
    }
}

/// The live members of cluster `cluster` as etcd has them now, read without joining (for
/// `ringshare cluster nodes`).
pub fn members(endpoints: &[String], cluster: &str) -> Result<Vec<Member>, Error> {
    let mut etcd = Etcd::new(endpoints, Duration::from_secs(2))?;
    let prefix = format!("/ringshare/{cluster}/");
    let nodes = format!("{prefix}nodes/");
    let deadline = Instant::now() + Duration::from_secs(5);
    let (_, kvs) = etcd.range_prefix(nodes.as_bytes(), deadline)?;
    Ok(read_view(&prefix, 0, kvs).members.into_values().collect())
}

/// Reads the polled keys into a view: members and partition owners.
fn read_view(prefix: &str, partitions: u32, kvs: Vec<KeyValue>) -> View {
    let mut v = View {
        members: BTreeMap::new(),
        parts: vec![None; partitions as usize],
        drained: BTreeSet::new(),
        left: BTreeMap::new(),
    };
    let nodes = format!("{prefix}nodes/");
    let drain = format!("{prefix}drain/");
    let left = format!("{prefix}left/");
    let parts = format!("{prefix}parts/");
    for kv in kvs {
        let Ok(key) = std::str::from_utf8(&kv.key) else {
            continue;
        };
        let json: Option<Value> = serde_json::from_slice(&kv.value).ok();
        let field = |f: &str| json.as_ref().and_then(|j| j.get(f).cloned());
        if let Some(id) = key.strip_prefix(&nodes) {
            let addr = field("addr")
                .and_then(|a| a.as_str().map(String::from))
                .unwrap_or_default();
            let public = field("public")
                .and_then(|a| {
                    let list = a.as_array()?.iter().take(64);
                    Some(list.filter_map(|x| x.as_str().map(String::from)).collect())
                })
                .unwrap_or_default();
            let level = field("level")
                .and_then(|l| l.as_u64())
                .and_then(|l| u16::try_from(l).ok())
                .filter(|l| *l >= 1)
                .unwrap_or(1);
            v.members.insert(
                id.to_string(),
                Member {
                    id: id.to_string(),
                    addr,
                    incarnation: kv.create_revision,
                    public,
                    level,
                },
            );
        } else if let Some(id) = key.strip_prefix(&drain) {
            v.drained.insert(id.to_string());
        } else if let Some(id) = key.strip_prefix(&left) {
            if let Some(inc) = field("inc").and_then(|i| i.as_i64()) {
                v.left.insert(id.to_string(), inc);
            }
        } else if let Some(p) = key.strip_prefix(&parts).and_then(|p| p.parse::<u32>().ok()) {
            if let Some(slot) = v.parts.get_mut(p as usize) {
                // An unreadable record counts as owned by nobody alive: it is taken over after
                // the margin like a dead owner's.
                let owner = field("owner")
                    .and_then(|o| o.as_str().map(String::from))
                    .unwrap_or_default();
                let inc = field("inc").and_then(|i| i.as_i64()).unwrap_or(0);
                *slot = Some(Part {
                    owner,
                    inc,
                    mod_revision: kv.mod_revision,
                });
            }
        }
    }
    v
}

fn reconcile(
    sh: &Shared,
    etcd: &mut Etcd,
    kvs: Vec<KeyValue>,
    dead_since: &mut BTreeMap<u32, (Part, Instant)>,
    releasing: &mut BTreeSet<u32>,
) {
    let view = read_view(&sh.prefix, sh.cfg.partitions, kvs);
    let me = sh.cfg.node_id.as_str();
    if view.members.get(me).map(|m| m.incarnation) != Some(sh.inc) {
        // Our key is gone (lease expired) or belongs to another incarnation.
        let seen = view.members.get(me).map(|m| m.incarnation);
        sh.fence(|| {
            format!(
                "etcd's view has this node's record as {seen:?}, not incarnation {}",
                sh.inc
            )
        });
        return;
    }
    let now = Instant::now();
    let my_key = sh.node_key(me);
    let mut claims = Vec::new();
    let mut releases = Vec::new();
    {
        let mut owned = lock(&sh.owned);
        for p in 0..sh.cfg.partitions {
            let preferred = preferred_owner(view.members.keys().map(String::as_str), p);
            let pk = sh.part_key(p);
            match &view.parts[p as usize] {
                Some(part) if part.owner == me && part.inc == sh.inc => {
                    dead_since.remove(&p);
                    if releasing.contains(&p) {
                        releases.push((
                            p,
                            vec![Compare::ModRevisionEq(pk.clone(), part.mod_revision)],
                            Op::Delete { key: pk },
                        ));
                    } else if preferred != Some(me) {
                        // Hand-over: stop acting for p first, then delete it for its new owner.
                        if owned.remove(&p).is_some() {
                            sh.emit(Event::PartitionLost { p });
                        }
                        releasing.insert(p);
                        releases.push((
                            p,
                            vec![Compare::ModRevisionEq(pk.clone(), part.mod_revision)],
                            Op::Delete { key: pk },
                        ));
                    } else if owned.get(&p) != Some(&part.mod_revision) {
                        // A claim whose answer was lost but that did commit.
                        if owned.insert(p, part.mod_revision).is_none() {
                            sh.emit(Event::PartitionGained {
                                p,
                                token: part.mod_revision,
                            });
                        }
                    }
                }
                other => {
                    releasing.remove(&p);
                    if owned.remove(&p).is_some() {
                        sh.emit(Event::PartitionLost { p });
                    }
                    if preferred != Some(me) {
                        dead_since.remove(&p);
                        continue;
                    }
                    match other {
                        None => {
                            dead_since.remove(&p);
                            claims.push((
                                p,
                                vec![Compare::CreateRevisionEq(pk.clone(), 0)],
                                Op::Put {
                                    key: pk,
                                    value: Vec::new(),
                                    lease: 0,
                                },
                            ));
                        }
                        Some(part) => {
                            let alive = view.members.get(&part.owner).map(|m| m.incarnation)
                                == Some(part.inc);
                            if alive {
                                dead_since.remove(&p);
                                continue;
                            }
                            let since = dead_since.entry(p).or_insert_with(|| (part.clone(), now));
                            if since.0 != *part {
                                *since = (part.clone(), now);
                            }
                            if now.duration_since(since.1) >= sh.cfg.margin {
                                let cmp = vec![
                                    Compare::ModRevisionEq(pk.clone(), part.mod_revision),
                                    Compare::CreateRevisionNe(sh.node_key(&part.owner), part.inc),
                                ];
                                claims.push((
                                    p,
                                    cmp,
                                    Op::Put {
                                        key: pk,
                                        value: Vec::new(),
                                        lease: 0,
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    *lock(&sh.view) = view;
    let deadline = Instant::now() + Duration::from_secs(2);
    if !releases.is_empty() {
        let _ = txn_batches(etcd, &releases, &[], deadline);
    }
    if claims.is_empty() || sh.is_fenced() {
        return;
    }
    let value = match serde_json::to_vec(&json!({"owner": me, "inc": sh.inc})) {
        Ok(v) => v,
        Err(_) => return,
    };
    for c in claims.iter_mut() {
        if let Op::Put { value: v, .. } = &mut c.2 {
            v.clone_from(&value);
        }
    }
    let alive = [Compare::CreateRevisionEq(my_key, sh.inc)];
    if let Ok(won) = txn_batches(etcd, &claims, &alive, deadline) {
        if sh.is_fenced() {
            return;
        }
        let mut owned = lock(&sh.owned);
        for (p, token) in won {
            // Not is_fenced(): fencing takes `owned`, which is held here.
            if sh.fenced.load(Ordering::SeqCst) || Instant::now() >= *lock(&sh.fence_at) {
                return;
            }
            if owned.insert(p, token).is_none() {
                sh.emit(Event::PartitionGained { p, token });
            }
        }
    }
}

/// Runs `items` (partition, its compares, its op) in txns of up to 32, each with `common`
/// compares added; a batch that fails its compares is retried one item at a time. Returns the
/// items that committed with their revision.
fn txn_batches(
    etcd: &mut Etcd,
    items: &[(u32, Vec<Compare>, Op)],
    common: &[Compare],
    deadline: Instant,
) -> Result<Vec<(u32, i64)>, Error> {
    let mut won = Vec::new();
    for batch in items.chunks(32) {
        let run = |etcd: &mut Etcd, b: &[(u32, Vec<Compare>, Op)]| {
            let cmp: Vec<Compare> = common
                .iter()
                .cloned()
                .chain(b.iter().flat_map(|i| i.1.iter().cloned()))
                .collect();
            let ops: Vec<Op> = b.iter().map(|i| i.2.clone()).collect();
            etcd.txn(&cmp, &ops, &[], deadline)
        };
        let r = run(etcd, batch)?;
        if r.succeeded {
            won.extend(batch.iter().map(|i| (i.0, r.revision)));
        } else if batch.len() > 1 {
            for item in batch {
                let r = run(etcd, std::slice::from_ref(item))?;
                if r.succeeded {
                    won.push((item.0, r.revision));
                }
            }
        }
    }
    Ok(won)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_spreads_partitions_evenly_over_three_nodes() {
        let nodes = ["a", "b", "c"];
        let mut count = BTreeMap::new();
        for p in 0..256 {
            *count.entry(preferred_owner(nodes, p).unwrap()).or_insert(0) += 1;
        }
        for n in nodes {
            let c = count[n];
            assert!((60..=110).contains(&c), "{n} gets {c} of 256");
        }
    }

    #[test]
    fn a_joining_node_takes_partitions_only_for_itself() {
        for p in 0..256 {
            let before = preferred_owner(["a", "b"], p).unwrap();
            let after = preferred_owner(["a", "b", "c"], p).unwrap();
            assert!(after == before || after == "c", "p{p}: {before} -> {after}");
        }
    }

    #[test]
    fn bad_configurations_are_refused() {
        let ok = ClusterConfig::new(
            "c",
            "n1",
            "127.0.0.1:1".parse().unwrap(),
            vec!["http://127.0.0.1:1".into()],
        );
        assert!(ok.validate().is_ok());
        for bad in [
            ClusterConfig {
                node_id: "a/b".into(),
                ..ok.clone()
            },
            ClusterConfig {
                cluster: String::new(),
                ..ok.clone()
            },
            ClusterConfig {
                ttl: Duration::from_millis(2500),
                ..ok.clone()
            },
            ClusterConfig {
                partitions: 0,
                ..ok.clone()
            },
            ClusterConfig {
                margin: Duration::from_secs(3),
                ..ok.clone()
            },
            ClusterConfig {
                poll: Duration::ZERO,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    /// A key as etcd gives it (created at revision 5, changed at 9).
    fn kv(k: &[u8], v: &[u8]) -> KeyValue {
        KeyValue {
            key: k.to_vec(),
            value: v.to_vec(),
            create_revision: 5,
            mod_revision: 9,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn a_membership_record_without_a_level_is_level_one_and_unknown_fields_are_ignored() {
        let v = read_view(
            "/ringshare/c/",
            1,
            vec![
                // As the builds before levels write it.
                kv(b"/ringshare/c/nodes/1", b"{\"addr\": \"10.0.0.1:7000\"}"),
                kv(
                    b"/ringshare/c/nodes/2",
                    b"{\"addr\": \"10.0.0.2:7000\", \"level\": 2}",
                ),
                // A later build's record, with a field this one does not know.
                kv(
                    b"/ringshare/c/nodes/3",
                    b"{\"addr\": \"10.0.0.3:7000\", \"level\": 9, \"zone\": \"b\"}",
                ),
                kv(
                    b"/ringshare/c/nodes/4",
                    b"{\"addr\": \"x\", \"level\": 70000}",
                ),
                kv(b"/ringshare/c/nodes/5", b"{\"addr\": \"x\", \"level\": 0}"),
            ],
        );
        let level = |n: &str| v.members[n].level;
        assert_eq!(
            [level("1"), level("2"), level("3"), level("4"), level("5")],
            [1, 2, 9, 1, 1]
        );
        assert_eq!(v.members["3"].addr, "10.0.0.3:7000");
    }

    #[test]
    fn odd_records_in_etcd_are_read_as_unowned_or_ignored_never_a_panic() {
        let v = read_view(
            "/ringshare/c/",
            4,
            vec![
                kv(b"/ringshare/c/nodes/a", b"not json"),
                kv(b"/ringshare/c/parts/0", b"{\"owner\": 7}"),
                kv(b"/ringshare/c/parts/1", b"\xff\xfe"),
                kv(b"/ringshare/c/parts/2", b"{\"owner\": \"a\", \"inc\": 5}"),
                kv(b"/ringshare/c/parts/4", b"{}"),
                kv(b"/ringshare/c/parts/x", b"{}"),
                kv(b"/ringshare/c/parts/-1", b"{}"),
                kv(b"/ringshare/c/\xff", b"{}"),
            ],
        );
        assert_eq!(v.members["a"].addr, "");
        assert_eq!(v.members["a"].incarnation, 5);
        let unowned = Some(Part {
            owner: String::new(),
            inc: 0,
            mod_revision: 9,
        });
        assert_eq!(v.parts[0], unowned);
        assert_eq!(v.parts[1], unowned);
        assert_eq!(
            v.parts[2],
            Some(Part {
                owner: "a".into(),
                inc: 5,
                mod_revision: 9
            })
        );
        assert_eq!(v.parts[3], None);
        assert_eq!(v.parts.len(), 4);
    }

    #[test]
    fn join_fails_with_unavailable_when_no_etcd_answers() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cfg = ClusterConfig::new(
            "c",
            "n1",
            "127.0.0.1:1".parse().unwrap(),
            vec![format!("http://127.0.0.1:{port}")],
        );
        cfg.ttl = Duration::from_secs(3);
        let t = Instant::now();
        let r = Coordinator::join(cfg).map(|_| ());
        assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}
