//! The in-memory cluster of the core's cluster tests (issue 18): server
//! cores joined by a bus with fake membership over one in-memory share.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ringshare_core::cluster::{msg, ClusterLink, ClusterNode, Home, PersistentOpens, Reclaim};
use ringshare_core::{ServerConfig, ServerState};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{
    AccessMask, Command, CreateDisposition as D, CreateOptions, FileAttributes, ImpersonationLevel,
    OplockLevel, ShareAccess,
};
use ringshare_wire::create::{
    tag, CreateContext, CreateRequest, CreateResponse, DurableHandleReconnectV2,
    DurableHandleRequestV2, Lease,
};
use ringshare_wire::{FileId, NtStatus};

use super::support::*;

pub const PARTS: u32 = 16;

/// The in-memory network and membership of a test cluster.
pub struct Bus {
    pub nodes: Mutex<HashMap<u16, Weak<ServerState>>>,
    /// Owner of each partition (0: none).
    pub owners: Mutex<Vec<u16>>,
    /// A node's own, older view of the owners, when it has not yet seen a
    /// change (etcd's watch reaches nodes one by one).
    pub views: Mutex<HashMap<u16, Vec<u16>>>,
    pub down: Mutex<HashSet<u16>>,
    /// Dead nodes a node has not seen go yet (it still counts them as members: etcd reaches
    /// nodes one by one, hundreds of milliseconds apart).
    pub unseen: Mutex<HashMap<u16, HashSet<u16>>>,
    /// The record store refuses writes (an etcd that timed out).
    pub ca_refused: std::sync::atomic::AtomicBool,
    pub now_ms: AtomicU64,
    /// Calls each node received.
    pub calls: Mutex<HashMap<u16, u64>>,
    /// Notices (breaks, wake-ups, changes, interest) each node received.
    pub posts: Mutex<HashMap<u16, u64>>,
    /// The persistent opens' records (etcd's `ca/` keys).
    pub ca: Mutex<HashMap<u64, Vec<u8>>>,
    /// The protocol level of a node that runs an older build (the others speak this
    /// build's, `msg::LEVEL`): a message above it reaching it fails the test.
    pub levels: Mutex<HashMap<u16, u16>>,
    /// The kind (first byte) of every notice each node received, in order.
    pub kinds: Mutex<HashMap<u16, Vec<u8>>>,
    /// Nodes whose moves of opens (`Transfer` calls) fail as a call that timed out: a home
    /// between partitions' moves, stopping, or cut off.
    pub moves_fail: Mutex<HashSet<u16>>,
    /// Nodes whose give-ups (`GiveUp` calls) are carried out but answered too late: the asker
    /// hears what a call that timed out says (FILE_NOT_AVAILABLE, the peer connection's), as
    /// from a keeper stopped (SIGSTOP) past the asker's 2 s and let go on.
    pub give_ups_late: Mutex<HashSet<u16>>,
    /// Nodes that take this long (ms, wall clock) to answer each call, as a stopped or slow peer.
    pub slow: Mutex<HashMap<u16, u64>>,
    /// Nodes that carry out every call (but a give-up) and answer it too late: the caller hears
    /// FILE_NOT_AVAILABLE, and the answer waits in [`Bus::late_answers`] until the test hands
    /// it to the caller ([`Cluster::deliver_late`]), as the peer connection does once it comes.
    /// (Only the calls its predicate picks.)
    pub answers_late: Mutex<HashMap<u16, PickCall>>,
    /// The node that answers too late sees, once it decided, that its caller went, and undoes
    /// the call itself (`cluster_undo_here`) when it can: then no answer is handed over.
    pub undo_at_home: std::sync::atomic::AtomicBool,
    /// (caller, callee, call, answer) of the calls answered too late, not yet handed over.
    pub late_answers: Mutex<Vec<LateAnswer>>,
    /// Nodes every caller's calls fail at once for (`ClusterLink::refuses_now`: as many calls
    /// wait for them as may), and the opens refused so.
    pub refusing: Mutex<HashSet<u16>>,
    pub refused: AtomicU64,
}

/// Which calls a node answers too late ([`Bus::answers_late`]).
pub type PickCall = fn(&msg::Call) -> bool;

/// A call answered too late: (caller, callee, call, answer).
pub type LateAnswer = (u16, u16, Vec<u8>, Vec<u8>);

pub struct Link {
    node: u16,
    bus: Arc<Bus>,
}

impl Bus {
    /// The protocol level node `node` speaks.
    pub fn level(&self, node: u16) -> u16 {
        let levels = self.levels.lock().unwrap();
        levels.get(&node).copied().unwrap_or(msg::LEVEL)
    }

    /// A message sent to `node` is one its level reads.
    fn readable_by(&self, node: u16, message: &[u8]) {
        let m = msg::Message::decode(message).expect("a message this build reads");
        let level = self.level(node);
        assert!(
            m.level() <= level,
            "a level-{level} node {node} was sent {m:?}"
        );
    }

    pub fn server(&self, node: u16) -> Option<Arc<ServerState>> {
        if self.down.lock().unwrap().contains(&node) {
            return None;
        }
        self.nodes.lock().unwrap().get(&node)?.upgrade()
    }
}

impl ClusterLink for Link {
    fn node(&self) -> u16 {
        self.node
    }

    fn partitions(&self) -> u32 {
        PARTS
    }

    fn home(&self, p: u32) -> Home {
        if self.bus.down.lock().unwrap().contains(&self.node) {
            return Home::Unavailable;
        }
        let owner = match self.bus.views.lock().unwrap().get(&self.node) {
            Some(view) => view[p as usize],
            None => self.bus.owners.lock().unwrap()[p as usize],
        };
        match owner {
            0 => Home::Unavailable,
            n => Home::Node(n),
        }
    }

    fn members(&self) -> Vec<u16> {
        let down = self.bus.down.lock().unwrap();
        let unseen = self.bus.unseen.lock().unwrap();
        let unseen = unseen.get(&self.node);
        let nodes = self.bus.nodes.lock().unwrap();
        nodes
            .keys()
            .copied()
            .filter(|n| !down.contains(n) || unseen.is_some_and(|u| u.contains(n)))
            .collect()
    }

    fn level_of(&self, node: u16) -> u16 {
        self.bus.level(node)
    }

    fn refuses_now(&self, node: u16) -> bool {
        let refused = self.bus.refusing.lock().unwrap().contains(&node);
        if refused {
            self.bus.refused.fetch_add(1, Ordering::Relaxed);
        }
        refused
    }

    fn refusing(&self) -> Vec<u16> {
        self.bus.refusing.lock().unwrap().iter().copied().collect()
    }

    fn call(&self, node: u16, message: Vec<u8>) -> Result<Vec<u8>, NtStatus> {
        // A node's peer layer does not connect to itself (its acceptor refuses the node as
        // not another member): nothing may ask itself.
        if node == self.node {
            return Err(NtStatus::IO_TIMEOUT);
        }
        let server = self.bus.server(node).ok_or(NtStatus::IO_TIMEOUT)?;
        self.bus.readable_by(node, &message);
        if self.bus.moves_fail.lock().unwrap().contains(&node)
            && matches!(
                msg::Message::decode(&message),
                Ok(msg::Message::Call(msg::Call::Transfer(..)))
            )
        {
            return Err(NtStatus::IO_TIMEOUT);
        }
        *self.bus.calls.lock().unwrap().entry(node).or_default() += 1;
        let slow = self.bus.slow.lock().unwrap().get(&node).copied();
        if let Some(ms) = slow {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        let now = self.bus.now_ms.load(Ordering::Relaxed);
        let give_up = matches!(
            msg::Message::decode(&message),
            Ok(msg::Message::Call(msg::Call::GiveUp(..)))
        );
        let late = self.bus.give_ups_late.lock().unwrap().contains(&node) && give_up;
        let picked = self.bus.answers_late.lock().unwrap().get(&node).copied();
        let all_late = !give_up
            && picked.is_some_and(
                |p| matches!(msg::Message::decode(&message), Ok(msg::Message::Call(c)) if p(&c)),
            );
        match server.cluster_receive(&message, now) {
            Ok(Some(_)) if late => Err(NtStatus::FILE_NOT_AVAILABLE),
            Ok(Some(answer)) if all_late => {
                let at_home = self.bus.undo_at_home.load(Ordering::Relaxed);
                if !(at_home && server.cluster_undo_here(&message, &answer, now)) {
                    let late = (self.node, node, message, answer);
                    self.bus.late_answers.lock().unwrap().push(late);
                }
                Err(NtStatus::FILE_NOT_AVAILABLE)
            }
            Ok(Some(answer)) => Ok(answer),
            other => panic!("a call got {other:?}"),
        }
    }

    fn post(&self, node: u16, message: Vec<u8>) {
        if let Some(server) = self.bus.server(node) {
            self.bus.readable_by(node, &message);
            *self.bus.posts.lock().unwrap().entry(node).or_default() += 1;
            let mut kinds = self.bus.kinds.lock().unwrap();
            kinds.entry(node).or_default().push(message[0]);
            drop(kinds);
            let now = self.bus.now_ms.load(Ordering::Relaxed);
            assert_eq!(server.cluster_receive(&message, now), Ok(None));
        }
    }

    fn ca_put(&self, persistent_id: u64, record: Vec<u8>) -> Result<(), NtStatus> {
        if self.bus.ca_refused.load(Ordering::Relaxed) {
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
        self.bus.ca.lock().unwrap().insert(persistent_id, record);
        Ok(())
    }

    fn ca_delete(&self, persistent_id: u64) {
        self.bus.ca.lock().unwrap().remove(&persistent_id);
    }

    fn ca_get(&self, persistent_id: u64) -> Result<Option<Vec<u8>>, NtStatus> {
        Ok(self.bus.ca.lock().unwrap().get(&persistent_id).cloned())
    }

    fn ca_all(&self) -> Result<Vec<Vec<u8>>, NtStatus> {
        Ok(self.bus.ca.lock().unwrap().values().cloned().collect())
    }
}

/// A cluster of `n` nodes over one in-memory share, every partition homed
/// on node `home`.
pub struct Cluster {
    pub mem: MemShare,
    pub bus: Arc<Bus>,
    pub nodes: Vec<Arc<ServerState>>,
    /// How each node's configuration differs from the default (a restarted node's too).
    change: Arc<dyn Fn(&mut ServerConfig) + Send + Sync>,
}

impl Cluster {
    pub fn new(n: u16, home: u16) -> Cluster {
        Cluster::with(n, home, |_| {})
    }

    /// [`Cluster::new`] with each node's configuration changed by `change`.
    pub fn with(
        n: u16,
        home: u16,
        change: impl Fn(&mut ServerConfig) + Send + Sync + 'static,
    ) -> Cluster {
        let mem = MemShare::new();
        let bus = Arc::new(Bus {
            nodes: Mutex::new(HashMap::new()),
            owners: Mutex::new(vec![home; PARTS as usize]),
            views: Mutex::new(HashMap::new()),
            down: Mutex::new(HashSet::new()),
            unseen: Mutex::new(HashMap::new()),
            now_ms: AtomicU64::new(1_000),
            calls: Mutex::new(HashMap::new()),
            posts: Mutex::new(HashMap::new()),
            ca: Mutex::new(HashMap::new()),
            ca_refused: std::sync::atomic::AtomicBool::new(false),
            levels: Mutex::new(HashMap::new()),
            kinds: Mutex::new(HashMap::new()),
            moves_fail: Mutex::new(HashSet::new()),
            give_ups_late: Mutex::new(HashSet::new()),
            slow: Mutex::new(HashMap::new()),
            answers_late: Mutex::new(HashMap::new()),
            late_answers: Mutex::new(Vec::new()),
            undo_at_home: std::sync::atomic::AtomicBool::new(false),
            refusing: Mutex::new(HashSet::new()),
            refused: AtomicU64::new(0),
        });
        let change: Arc<dyn Fn(&mut ServerConfig) + Send + Sync> = Arc::new(change);
        let nodes = (1..=n)
            .map(|node| start(&mem, &bus, node, &*change))
            .collect();
        Cluster {
            mem,
            bus,
            nodes,
            change,
        }
    }

    /// Node `node`, dead, starts again: a new process with the same node number and nothing
    /// of the old one's state (its open ids are numbered from the start again). It is a
    /// member once more and takes back the partitions `parts` from their homes, rebuilding
    /// their files' state from the other nodes' opens (the old homes hand theirs over).
    pub fn restart(&mut self, node: u16, parts: &[u32]) {
        let s = start(&self.mem, &self.bus, node, &*self.change);
        self.nodes[usize::from(node) - 1] = s.clone();
        self.bus.down.lock().unwrap().remove(&node);
        for p in parts {
            self.bus.owners.lock().unwrap()[*p as usize] = node;
        }
        s.rebuild(parts)
            .expect("every live node hands over its opens");
    }

    /// A logged-on client of node `node` (1-based).
    pub fn client(&self, node: u16) -> Client {
        let s = self.nodes[usize::from(node) - 1].clone();
        Client::on(s, self.mem.clone(), Options::default())
    }

    /// Whether `name` exists (a client of the last node looks).
    pub fn exists(&self, name: &str) -> bool {
        let mut c = self.client(self.nodes.len() as u16);
        match c.create(name, FILE_READ_ATTRIBUTES, D::OPEN, 0) {
            Ok(f) => {
                c.close(f);
                true
            }
            Err(NtStatus::DELETE_PENDING) => true,
            Err(NtStatus::OBJECT_NAME_NOT_FOUND) => false,
            Err(s) => panic!("looking for {name}: {s:?}"),
        }
    }

    /// Node `dead` dies: its clients are gone with it; node `heir` takes
    /// its partitions over and rebuilds them from the other nodes' opens.
    pub fn kill(&self, dead: u16, heir: u16) -> usize {
        let (taken, parts) = self.die(dead, heir);
        self.take_over(dead, heir, &parts);
        taken
    }

    /// The first half of [`Cluster::kill`]: node `dead` dies and node `heir` rebuilds its
    /// partitions (how many opens it rebuilt, and the partitions), but no survivor has taken
    /// the dead node's persistent opens over yet ([`Cluster::take_over`]).
    pub fn die(&self, dead: u16, heir: u16) -> (usize, Vec<u32>) {
        self.bus.down.lock().unwrap().insert(dead);
        let mut parts = Vec::new();
        for (p, o) in self.bus.owners.lock().unwrap().iter_mut().enumerate() {
            if *o == dead {
                *o = heir;
                parts.push(p as u32);
            }
        }
        for (i, s) in self.nodes.iter().enumerate() {
            if i + 1 != usize::from(dead) {
                s.forget_node(dead);
            }
        }
        let taken = self.nodes[usize::from(heir) - 1]
            .rebuild(&parts)
            .expect("every live node hands over its opens");
        (taken, parts)
    }

    /// The second half of [`Cluster::kill`]: each survivor keeps the dead node's persistent
    /// opens of its files (`heir` those of the partitions `parts` it gained).
    pub fn take_over(&self, dead: u16, heir: u16, parts: &[u32]) {
        let now = self.bus.now_ms.load(Ordering::Relaxed);
        for (i, s) in self.nodes.iter().enumerate() {
            if i + 1 != usize::from(dead) {
                let gained: &[u32] = if i + 1 == usize::from(heir) {
                    parts
                } else {
                    &[]
                };
                s.take_over_persistent(&[dead], gained, now)
                    .expect("the in-memory records are read");
            }
        }
    }

    /// The calls node `node` answered too late ([`Bus::answers_late`]) reach their callers now
    /// (each caller's `cluster_answered_late`, on this thread, as on the peer connection's):
    /// how many.
    pub fn deliver_late(&self) -> usize {
        let late = std::mem::take(&mut *self.bus.late_answers.lock().unwrap());
        for (caller, node, call, answer) in &late {
            if let Some(s) = self.bus.server(*caller) {
                s.cluster_answered_late(*node, call, answer);
            }
        }
        late.len()
    }

    /// Node `node` answers every call too late while `on` ([`Bus::answers_late`]).
    pub fn answer_late(&self, node: u16, on: bool) {
        self.answer_late_if(node, on.then_some(|_| true));
    }

    /// Node `node` answers the calls `which` picks too late (none: answers every call in time).
    pub fn answer_late_if(&self, node: u16, which: Option<PickCall>) {
        let mut m = self.bus.answers_late.lock().unwrap();
        match which {
            Some(p) => m.insert(node, p),
            None => m.remove(&node),
        };
    }

    pub fn posts_to(&self, node: u16) -> u64 {
        self.bus
            .posts
            .lock()
            .unwrap()
            .get(&node)
            .copied()
            .unwrap_or(0)
    }

    pub fn calls_to(&self, node: u16) -> u64 {
        self.bus
            .calls
            .lock()
            .unwrap()
            .get(&node)
            .copied()
            .unwrap_or(0)
    }

    /// Time passes on every node's clock (the clients' and the homes').
    pub fn tick(&self, ms: u64, clients: &mut [&mut Client]) -> Vec<Vec<Resp>> {
        self.bus.now_ms.fetch_add(ms, Ordering::Relaxed);
        clients.iter_mut().map(|c| c.tick(ms)).collect()
    }
}

/// Node `node`'s server core, joined to the cluster of `bus` over `mem`.
fn start(
    mem: &MemShare,
    bus: &Arc<Bus>,
    node: u16,
    change: &dyn Fn(&mut ServerConfig),
) -> Arc<ServerState> {
    let s = server_with(mem, change);
    let link = Link {
        node,
        bus: bus.clone(),
    };
    s.join_cluster(Arc::new(link)).expect("join");
    bus.nodes.lock().unwrap().insert(node, Arc::downgrade(&s));
    s
}

/// Answer the lookups `c` held (the driver's lookup threads do it later, elsewhere): the
/// responses that come out then.
pub fn answer_held(c: &mut Client) -> Vec<Resp> {
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
    }
    c.pump()
}

pub fn open(c: &mut Client, name: &str, access: u32, share: u32) -> Result<FileId, NtStatus> {
    let m = c.create_msg_caching(name, access, share, D::OPEN_IF, 0, None);
    let r = c.send_frame(m).remove(0);
    if r.status() != NtStatus::SUCCESS {
        return Err(r.status());
    }
    Ok(CreateResponse::decode(&r.msg).expect("create").file_id)
}

/// The flags of a CREATE answer's DH2Q response, if any.
pub fn durable_flags(r: &Resp) -> Option<u32> {
    use ringshare_wire::create::ContextTag;
    let cr = CreateResponse::decode(&r.msg).expect("create response");
    cr.contexts
        .iter()
        .find(|c| c.tag() == ContextTag::DurableHandleRequestV2)
        .map(|c| u32::from_le_bytes(c.data[4..8].try_into().unwrap()))
}

/// A cluster of three nodes whose share is continuously available (persistent handles), every
/// file homed on node `home`.
pub fn ca_cluster(home: u16) -> Cluster {
    Cluster::with(3, home, |c| {
        Arc::get_mut(&mut c.shares[0])
            .unwrap()
            .continuous_availability = true;
    })
}

/// A DH2Q create context with CreateGuid `[guid; 16]` and `flags`.
pub fn dh2q_flags(guid: u8, flags: u32) -> CreateContext<'static> {
    let q = DurableHandleRequestV2 {
        timeout: 0,
        flags,
        create_guid: [guid; 16],
    };
    CreateContext::new(tag::DURABLE_HANDLE_REQUEST_V2, q.encode())
}

/// A DH2C create context reconnecting `f` with CreateGuid `[guid; 16]` and `flags`.
pub fn dh2c_flags(f: FileId, guid: u8, flags: u32) -> CreateContext<'static> {
    let c = DurableHandleReconnectV2 {
        file_id: f,
        create_guid: [guid; 16],
        flags,
    };
    CreateContext::new(tag::DURABLE_HANDLE_RECONNECT_V2, c.encode())
}

/// A RqLs create context asking for lease `l`.
pub fn rqls(l: &Lease) -> CreateContext<'static> {
    CreateContext::new(tag::REQUEST_LEASE, l.encode())
}

/// A CREATE (open-if, all access, a lease level asked) of `name` sharing `share_access`, with
/// `contexts`.
pub fn lease_create_msg(
    c: &mut Client,
    name: &str,
    share_access: u32,
    contexts: Vec<CreateContext<'static>>,
) -> Vec<u8> {
    let req = CreateRequest {
        security_flags: 0,
        requested_oplock_level: OplockLevel(0xFF),
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(0x001F_01FF),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(share_access),
        create_disposition: D::OPEN_IF,
        create_options: CreateOptions(0),
        name: name.to_string(),
        contexts,
    };
    let tree = c.tree_id;
    c.message(Command::CREATE, tree, |o| req.encode(o))
}
