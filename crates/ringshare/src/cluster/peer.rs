//! Messages between cluster nodes over the private network: authenticated
//! with the cluster secret, bounded, one TCP connection per concurrent call.
//!
//! Handshake (initiator I, acceptor A; nonces of 16 random bytes):
//!   I → A  `RSCL` | level u16 | node_I u16 | nonce_I
//!   A → I  `RSCL` | level u16 | node_A u16 | nonce_A | HMAC(secret, "accept" …)
//!   I → A  HMAC(secret, "initiate" …)
//! Both MACs cover both nonces and both node numbers, so each side proves
//! it holds the secret, on this connection only. The level (the field was
//! a version, 1, in the builds before levels, which refuse any other) is
//! the protocol level the connection speaks (docs/cluster-internals.md,
//! "Protocol levels"): I proposes the lower of its own and the one A advertises in
//! etcd; A agrees to the lower of that and its own; I refuses an agreement
//! below its proposal (A is not what etcd says). From level 2 on both MACs
//! cover the two levels too. The session key is
//! HMAC(secret, "session" | nonce_I | nonce_A). Then every frame is
//!   len u32 | seq u64 | kind u8 | payload | HMAC(session key, direction | seq | kind | payload)
//! with `seq` counting 0, 1, 2… per direction: a frame replayed, reordered,
//! cut or moved to another connection fails. A frame longer than
//! [`FRAME_MAX`], a bad MAC or a node that is not a member closes the
//! connection with a log line.
//!
//! Calls wait for their answer on their connection (a pool per peer, so
//! calls from several threads go at once); posts go through a queue and a
//! connection of their own, so a node answering a call never waits behind
//! one of its own calls (no cycle of waits between nodes).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringshare_core::cluster::MESSAGE_MAX;
use ringshare_crypto::{ct_eq, hmac_sha256, HmacSha256Key};
use ringshare_wire::NtStatus;

const MAGIC: &[u8; 4] = b"RSCL";
const HELLO_LEN: usize = 4 + 2 + 2 + 16;
const MAC_LEN: usize = 32;
/// The longest frame body accepted: a message and its framing.
pub const FRAME_MAX: usize = MESSAGE_MAX + 8 + 1 + MAC_LEN;
/// Frame kinds.
pub const CALL: u8 = 1;
const POST: u8 = 2;
pub const ANSWER: u8 = 3;

/// How long a call waits for its answer; a connection attempt, a handshake.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long after it was sent a call's late answer is still read ([`Peers::watch_late`]), and
/// how many calls are watched so at most.
pub const LATE_LIMIT: Duration = Duration::from_secs(30);
const LATE_MAX: usize = 256;
/// Idle connections kept per peer.
const IDLE_MAX: usize = 8;
/// Posts queued per peer before new ones are dropped (each dropped post is
/// a break or wake-up whose waiter then waits for its own timer).
const POST_QUEUE: usize = 4096;
/// Connections from other nodes served at once.
/// (1,024: each other node's I/O threads keep up to K connections to this one each, between
/// them 8 or more (crates/ringshare's driver, home_calls.rs), besides its pool's idle ones and
/// its post connection.)
const INBOUND_MAX: usize = 1024;

/// This node's secret, number and protocol level.
#[derive(Clone)]
pub struct Identity {
    pub node: u16,
    pub secret: Arc<[u8]>,
    pub level: u16,
}

/// Counters for status and tests.
#[derive(Default)]
pub struct Stats {
    pub calls: AtomicU64,
    pub posts: AtomicU64,
    pub posts_dropped: AtomicU64,
    pub served: AtomicU64,
    pub refused_connections: AtomicU64,
}

/// The frame keys and counters of one authenticated connection, without its socket: frames
/// are sealed and opened here, read and written by whoever carries the connection (a thread
/// blocking on it, [`Conn`], or an I/O thread's ring, crates/ringshare's driver).
pub struct Session {
    key: HmacSha256Key,
    /// 0 for the initiator's frames, 1 for the acceptor's.
    send_dir: u8,
    send_seq: u64,
    recv_seq: u64,
}

impl Session {
    /// The next frame this side sends: `len | seq | kind | payload | MAC`.
    pub fn seal(&mut self, kind: u8, payload: &[u8]) -> Vec<u8> {
        let seq = self.send_seq;
        self.send_seq += 1;
        let mac = self
            .key
            .mac(&[&[self.send_dir], &seq.to_le_bytes(), &[kind], payload]);
        let len = (8 + 1 + payload.len() + MAC_LEN) as u32;
        let mut frame = Vec::with_capacity(4 + len as usize);
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&seq.to_le_bytes());
        frame.push(kind);
        frame.extend_from_slice(payload);
        frame.extend_from_slice(&mac);
        frame
    }

    /// The body length a frame's 4-byte head announces, or why it is refused.
    pub fn body_len(head: [u8; 4]) -> std::io::Result<usize> {
        let len = u32::from_le_bytes(head) as usize;
        if !(8 + 1 + MAC_LEN..=FRAME_MAX).contains(&len) {
            return Err(bad(format!("a frame of {len} bytes")));
        }
        Ok(len)
    }

    /// The kind and payload of the next frame the other side sent (`body`: the frame after
    /// its length), or why it is refused (a bad MAC, a frame replayed, reordered or cut).
    pub fn open(&mut self, body: &[u8]) -> std::io::Result<(u8, Vec<u8>)> {
        let len = body.len();
        if len < 8 + 1 + MAC_LEN {
            return Err(bad(format!("a frame of {len} bytes")));
        }
        let (head, mac) = body.split_at(len - MAC_LEN);
        let seq = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let kind = head[8];
        let want = self.key.mac(&[
            &[1 - self.send_dir],
            &seq.to_le_bytes(),
            &[kind],
            &head[9..],
        ]);
        if !ct_eq(&want, mac) {
            return Err(bad("a frame whose MAC does not verify".into()));
        }
        if seq != self.recv_seq {
            return Err(bad(format!("frame {seq} where {} was due", self.recv_seq)));
        }
        self.recv_seq += 1;
        Ok((kind, head[9..].to_vec()))
    }

    /// A whole frame at the start of `buf`: its kind and payload and the bytes it took, or
    /// `None` while part of it is still to come.
    pub fn open_from(&mut self, buf: &[u8]) -> std::io::Result<Option<(u8, Vec<u8>, usize)>> {
        let Some(head) = buf.get(..4) else {
            return Ok(None);
        };
        let len = Session::body_len(head.try_into().unwrap_or_default())?;
        let Some(body) = buf.get(4..4 + len) else {
            return Ok(None);
        };
        let (kind, payload) = self.open(body)?;
        Ok(Some((kind, payload, 4 + len)))
    }

    fn new(key: [u8; 32], send_dir: u8) -> Session {
        Session {
            key: HmacSha256Key::new(&key),
            send_dir,
            send_seq: 0,
            recv_seq: 0,
        }
    }
}

/// One authenticated connection, read and written by a thread that blocks on it.
pub struct Conn {
    pub stream: TcpStream,
    pub session: Session,
}

impl Conn {
    fn send(&mut self, kind: u8, payload: &[u8]) -> std::io::Result<()> {
        let frame = self.session.seal(kind, payload);
        self.stream.write_all(&frame)
    }

    fn recv(&mut self) -> std::io::Result<(u8, Vec<u8>)> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = Session::body_len(len)?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        self.session.open(&body)
    }
}

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

fn hello(level: u16, node: u16, nonce: &[u8; 16]) -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[..4].copy_from_slice(MAGIC);
    h[4..6].copy_from_slice(&level.to_le_bytes());
    h[6..8].copy_from_slice(&node.to_le_bytes());
    h[8..].copy_from_slice(nonce);
    h
}

/// A hello: the level it names, the node, the nonce.
fn read_hello(s: &mut TcpStream) -> std::io::Result<(u16, u16, [u8; 16])> {
    let mut h = [0u8; HELLO_LEN];
    s.read_exact(&mut h)?;
    let level = u16::from_le_bytes([h[4], h[5]]);
    if &h[..4] != MAGIC || level == 0 {
        return Err(bad("not a ringshare cluster node".into()));
    }
    let mut nonce = [0u8; 16];
    nonce.copy_from_slice(&h[8..]);
    Ok((level, u16::from_le_bytes([h[6], h[7]]), nonce))
}

/// The levels a connection's proofs cover: the proposed and the agreed one.
#[derive(Clone, Copy)]
struct Levels {
    proposed: u16,
    agreed: u16,
}

fn proof(
    secret: &[u8],
    who: &[u8],
    (ni, na): (&[u8; 16], &[u8; 16]),
    (i, a): (u16, u16),
    l: Levels,
) -> [u8; 32] {
    let (i, a) = (i.to_le_bytes(), a.to_le_bytes());
    if l.agreed < 2 {
        // As the builds before levels prove it.
        return hmac_sha256(secret, &[who, ni, na, &i, &a]);
    }
    let (p, g) = (l.proposed.to_le_bytes(), l.agreed.to_le_bytes());
    hmac_sha256(secret, &[who, ni, na, &i, &a, &p, &g])
}

fn nonce() -> [u8; 16] {
    let mut n = [0u8; 16];
    if getrandom::fill(&mut n).is_err() {
        panic!("the kernel's random source failed");
    }
    n
}

/// Connect to `node` at `addr`, which advertises protocol level `level`, and prove both
/// sides hold the secret.
fn connect(me: &Identity, node: u16, (addr, level): (SocketAddr, u16)) -> std::io::Result<Conn> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(CALL_TIMEOUT))?;
    s.set_write_timeout(Some(CALL_TIMEOUT))?;
    let ni = nonce();
    let proposed = me.level.min(level).max(1);
    s.write_all(&hello(proposed, me.node, &ni))?;
    let (agreed, peer, na) = read_hello(&mut s)?;
    if peer != node {
        return Err(bad(format!("{addr} is node {peer}, not {node}")));
    }
    if agreed != proposed {
        return Err(bad(format!(
            "node {node} at {addr} answered level {agreed} to {proposed} (etcd says it speaks {level})"
        )));
    }
    let l = Levels { proposed, agreed };
    let mut mac = [0u8; MAC_LEN];
    s.read_exact(&mut mac)?;
    if !ct_eq(
        &mac,
        &proof(&me.secret, b"accept", (&ni, &na), (me.node, node), l),
    ) {
        return Err(bad(format!(
            "node {node} at {addr} does not hold the cluster secret"
        )));
    }
    s.write_all(&proof(
        &me.secret,
        b"initiate",
        (&ni, &na),
        (me.node, node),
        l,
    ))?;
    Ok(Conn {
        stream: s,
        session: Session::new(hmac_sha256(&me.secret, &[b"session", &ni, &na]), 0),
    })
}

/// Accept a node's connection: `Ok((node, conn))` once it proved the secret.
fn accept(
    me: &Identity,
    mut s: TcpStream,
    is_member: &dyn Fn(u16) -> bool,
) -> std::io::Result<(u16, Conn)> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(CALL_TIMEOUT))?;
    s.set_write_timeout(Some(CALL_TIMEOUT))?;
    let (proposed, peer, ni) = read_hello(&mut s)?;
    if !is_member(peer) || peer == me.node {
        return Err(bad(format!("node {peer} is not a member of the cluster")));
    }
    let l = Levels {
        proposed,
        agreed: proposed.min(me.level),
    };
    let na = nonce();
    s.write_all(&hello(l.agreed, me.node, &na))?;
    let nodes = (peer, me.node);
    s.write_all(&proof(&me.secret, b"accept", (&ni, &na), nodes, l))?;
    let mut mac = [0u8; MAC_LEN];
    s.read_exact(&mut mac)?;
    if !ct_eq(&mac, &proof(&me.secret, b"initiate", (&ni, &na), nodes, l)) {
        return Err(bad(format!("node {peer} does not hold the cluster secret")));
    }
    // Idle connections stay: a call may come at any time.
    s.set_read_timeout(None)?;
    Ok((
        peer,
        Conn {
            stream: s,
            session: Session::new(hmac_sha256(&me.secret, &[b"session", &ni, &na]), 1),
        },
    ))
}

/// What the node does with a message from another: the answer for a call.
pub type Handler = dyn Fn(&[u8]) -> Result<Option<Vec<u8>>, String> + Send + Sync;

/// A call (its bytes) was answered (these bytes) here after its caller stopped waiting: true
/// when the node undid here what the answer says was done (the answer is then not sent);
/// false when there was nothing to undo here (the answer is sent: its caller reads it late).
pub type UndoHere = dyn Fn(&[u8], &[u8]) -> bool + Send + Sync;

/// Whether a line about the peer at this address may be logged now (the
/// server's per-address log limit: a host that keeps connecting cannot
/// flood the log).
pub type LogAdmit = dyn Fn(Option<std::net::IpAddr>) -> bool + Send + Sync;

/// Serve other nodes' connections on `listener` until the process ends.
pub fn serve(
    listener: TcpListener,
    me: Identity,
    is_member: Arc<dyn Fn(u16) -> bool + Send + Sync>,
    (handler, undo): (Arc<Handler>, Arc<UndoHere>),
    stats: Arc<Stats>,
    log_admit: Arc<LogAdmit>,
) -> std::io::Result<()> {
    let live = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("cluster-listen".into())
        .spawn(move || {
            for s in listener.incoming() {
                let Ok(s) = s else { continue };
                let from = s.peer_addr().ok();
                if live.load(Ordering::Relaxed) >= INBOUND_MAX {
                    stats.refused_connections.fetch_add(1, Ordering::Relaxed);
                    if log_admit(from.map(|a| a.ip())) {
                        tracing::warn!(
                            "cluster: closing a connection from {from:?}: too many from other nodes"
                        );
                    }
                    continue;
                }
                let (me, is_member, handler, undo, stats, live, log_admit) = (
                    me.clone(),
                    is_member.clone(),
                    handler.clone(),
                    undo.clone(),
                    stats.clone(),
                    live.clone(),
                    log_admit.clone(),
                );
                live.fetch_add(1, Ordering::Relaxed);
                let spawned = std::thread::Builder::new()
                    .name("cluster-peer".into())
                    .spawn(move || {
                        let opened = Instant::now();
                        let r = accept(&me, s, &*is_member).and_then(|(node, c)| {
                            serve_conn(c, node, opened, (&*handler, &*undo), &stats)
                        });
                        if let Err(e) = r {
                            if e.kind() != std::io::ErrorKind::UnexpectedEof {
                                stats.refused_connections.fetch_add(1, Ordering::Relaxed);
                                if log_admit(from.map(|a| a.ip())) {
                                    tracing::warn!(
                                        "cluster: closing a connection from {from:?}: {e}"
                                    );
                                }
                            }
                        }
                        live.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    tracing::warn!("cluster: no thread for a node's connection");
                }
            }
        })?;
    Ok(())
}

/// How long after a connection's start, or this node's last answer on it, a call read from it
/// is surely still awaited: a caller has one call at a time on a connection, sent after the
/// answer before it (or once the connection was made), and waits [`CALL_TIMEOUT`] from that
/// send. Until then [`other_end_closed`] need not look (two system calls per call saved); a quarter
/// of a second is left for the clocks of two machines.
const SURELY_AWAITED: Duration = CALL_TIMEOUT.saturating_sub(Duration::from_millis(250));

/// Serves calls and posts of `node` on `c`, made at `opened` (before its handshake).
fn serve_conn(
    mut c: Conn,
    node: u16,
    opened: Instant,
    (handler, undo): (&Handler, &UndoHere),
    stats: &Stats,
) -> std::io::Result<()> {
    // No call on `c` was sent before this: the caller's 2 s of the next call start after it.
    let mut quiet_since = opened;
    let may_have_gone = |since: Instant| since.elapsed() >= SURELY_AWAITED;
    loop {
        let (kind, msg) = c.recv()?;
        if kind == CALL && may_have_gone(quiet_since) && other_end_closed(&c.stream) {
            // The caller stopped waiting (its 2 s went while this node was stopped or slow),
            // told its client FILE_NOT_AVAILABLE (try again) and shut its side: what
            // it asked is not carried out now, as if it never came (issue 33: a LOCK granted,
            // or a durable open given up, after the caller went was nobody's).
            tracing::info!(
                node,
                "cluster: a call whose caller stopped waiting is not carried out"
            );
            return Ok(());
        }
        stats.served.fetch_add(1, Ordering::Relaxed);
        let answer = handler(&msg).map_err(|e| bad(format!("node {node} sent {e}")))?;
        match (kind, answer) {
            (CALL, Some(a)) => {
                // The caller stopped waiting while the call was decided (this node was slow,
                // or stopped after it read the call): what the answer says was done is undone
                // here at once and the answer goes nowhere; what has nothing to undo here is
                // answered, and its caller reads it late ([`Peers::watch_late`]). A caller
                // that stops waiting after this look reads the answer late and undoes it
                // itself: one side only undoes a call.
                if may_have_gone(quiet_since) && other_end_closed(&c.stream) && undo(&msg, &a) {
                    tracing::info!(
                        node,
                        "cluster: a call whose caller stopped waiting while it was decided is undone"
                    );
                    return Ok(());
                }
                quiet_since = Instant::now();
                c.send(ANSWER, &a)?
            }
            // (The answer to a notice of a kind this node does not know is dropped.)
            (POST, _) => {}
            (k, _) => return Err(bad(format!("node {node} sent a frame of kind {k}"))),
        }
    }
}

/// Whether the other end of `stream` has closed it with nothing more to read (looked at
/// without waiting): a caller whose call timed out ([`Peers::call`] shuts its side of the
/// connection, and reads on for a late answer: [`Peers::watch_late`]), or a node that stopped
/// since its connection went idle ([`Peers::conn`], and an I/O thread's calls on its ring).
pub(crate) fn other_end_closed(socket: impl std::os::fd::AsFd) -> bool {
    use rustix::net::RecvFlags;
    let mut b = [0u8; 1];
    match rustix::net::recv(socket, &mut b[..], RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((_, n)) => n == 0,
        Err(e) => e != rustix::io::Errno::AGAIN && e != rustix::io::Errno::INTR,
    }
}

/// What the node does with an answer that came after its call's [`CALL_TIMEOUT`]: node, the
/// call's bytes, the answer's.
pub type Late = dyn Fn(u16, &[u8], &[u8]) + Send + Sync;

/// Whether a read failed for its timeout.
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Calls and posts to other nodes.
pub struct Peers {
    me: Identity,
    /// A node's private address and protocol level now (from etcd's membership).
    resolve: Box<dyn Fn(u16) -> Option<(SocketAddr, u16)> + Send + Sync>,
    idle: Mutex<HashMap<u16, Vec<Conn>>>,
    posts: Mutex<HashMap<u16, SyncSender<Vec<u8>>>>,
    pub stats: Arc<Stats>,
    /// What to do with a late answer ([`Peers::on_late`]).
    late: std::sync::OnceLock<Arc<Late>>,
    /// Calls whose late answer is being awaited ([`Peers::watch_late`]).
    watching: Arc<AtomicUsize>,
}

impl Peers {
    pub fn new(
        me: Identity,
        resolve: Box<dyn Fn(u16) -> Option<(SocketAddr, u16)> + Send + Sync>,
        stats: Arc<Stats>,
    ) -> Arc<Peers> {
        Arc::new(Peers {
            me,
            resolve,
            idle: Mutex::new(HashMap::new()),
            posts: Mutex::new(HashMap::new()),
            stats,
            late: std::sync::OnceLock::new(),
            watching: Arc::default(),
        })
    }

    /// An idle connection to `node`, or a new one. An idle one whose other end closed it (the
    /// node stopped or restarted since: a new process on the same address) is dropped, not
    /// used: a call sent on it would fail with nothing carried out (issue 33: the first call
    /// to a restarted node after it failed so, and a stopping node closed a persistent open
    /// for it).
    fn conn(&self, node: u16) -> std::io::Result<Conn> {
        loop {
            let Some(c) = lock(&self.idle).get_mut(&node).and_then(Vec::pop) else {
                return self.connect_to(node);
            };
            if !other_end_closed(&c.stream) {
                return Ok(c);
            }
        }
    }

    /// A new authenticated connection to member `node`.
    fn connect_to(&self, node: u16) -> std::io::Result<Conn> {
        let addr =
            (self.resolve)(node).ok_or_else(|| bad(format!("node {node} is not a member")))?;
        connect(&self.me, node, addr)
    }

    /// A new authenticated connection to `node`, not from the idle pool and without the
    /// pool's read and write timeouts: its socket and its frame keys, for a caller that reads
    /// and writes it itself (an I/O thread's ring, which bounds its own reads).
    pub fn dial(&self, node: u16) -> std::io::Result<(TcpStream, Session)> {
        let c = self.connect_to(node)?;
        c.stream.set_read_timeout(None)?;
        c.stream.set_write_timeout(None)?;
        Ok((c.stream, c.session))
    }

    /// This node's number.
    pub fn node(&self) -> u16 {
        self.me.node
    }

    /// Count one more call whose late answer is awaited: false (nothing counted) when
    /// [`LATE_MAX`] are already, node-wide (the ring's and the threads' together).
    pub fn try_watch(&self) -> bool {
        if self.watching.fetch_add(1, Ordering::AcqRel) >= LATE_MAX {
            self.watching.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// A call counted by [`Peers::try_watch`] is no longer watched.
    pub fn unwatch(&self) {
        self.watching.fetch_sub(1, Ordering::AcqRel);
    }

    /// Ask `node`; its answer, or FILE_NOT_AVAILABLE when it does not
    /// answer within [`CALL_TIMEOUT`] (the call is not repeated: it may
    /// have been decided). A call sent and not answered in time is watched for its late
    /// answer ([`Peers::watch_late`]).
    pub fn call(&self, node: u16, msg: &[u8]) -> Result<Vec<u8>, NtStatus> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let r = self.conn(node).and_then(|mut c| {
            c.send(CALL, msg)?;
            match c.recv() {
                Ok((ANSWER, a)) => Ok((c, a)),
                Ok((k, _)) => Err(bad(format!(
                    "node {node} answered with a frame of kind {k}"
                ))),
                Err(e) if timed_out(&e) => {
                    self.watch_late(node, c, msg);
                    Err(e)
                }
                Err(e) => Err(e),
            }
        });
        match r {
            Ok((c, a)) => {
                let mut idle = lock(&self.idle);
                let list = idle.entry(node).or_default();
                if list.len() < IDLE_MAX {
                    list.push(c);
                }
                Ok(a)
            }
            Err(e) => {
                tracing::warn!("cluster: a call to node {node} failed: {e}");
                Err(NtStatus::FILE_NOT_AVAILABLE)
            }
        }
    }

    /// What to do with an answer that comes after its call's [`CALL_TIMEOUT`]: the node's
    /// `ClusterNode::cluster_answered_late` (issue 33). Set once, after the node joined.
    pub fn on_late(&self, late: Arc<Late>) {
        let _ = self.late.set(late);
    }

    /// Call `msg` on `c` was not answered within [`CALL_TIMEOUT`] (its caller tells its client
    /// "try again"): this node stops sending on `c` (a callee that has not read the call yet
    /// sees the caller went, `other_end_closed`, and does not carry it out) but a thread of its own
    /// reads `c` until [`LATE_LIMIT`] for the answer of a callee that read the call in time and
    /// was slow to answer it, and hands it to [`Peers::on_late`]'s handler, which undoes what
    /// the answer says was done. At most [`LATE_MAX`] calls are watched at once; past that (or
    /// without a handler) `c` is closed as before.
    fn watch_late(&self, node: u16, c: Conn, msg: &[u8]) {
        if self.late.get().is_none() {
            return;
        }
        if !self.try_watch() {
            tracing::warn!("cluster: a call to node {node} timed out; its answer is not awaited");
            return;
        }
        self.watch_counted(
            node,
            c,
            msg.to_vec(),
            LATE_LIMIT.saturating_sub(CALL_TIMEOUT),
        );
    }

    /// [`Peers::watch_late`] of a call already counted by [`Peers::try_watch`] (uncounted
    /// here when it ends), whose answer is awaited for `wait` more.
    pub fn watch_counted(&self, node: u16, c: Conn, msg: Vec<u8>, wait: Duration) {
        let Some(late) = self.late.get().cloned() else {
            self.unwatch();
            return;
        };
        let _ = c.stream.shutdown(std::net::Shutdown::Write);
        let watching = Arc::clone(&self.watching);
        let spawned = std::thread::Builder::new()
            .name(format!("cluster-late-{node}"))
            .spawn(move || {
                let mut c = c;
                if c.stream
                    .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
                    .is_ok()
                {
                    match c.recv() {
                        Ok((ANSWER, answer)) => late(node, &msg, &answer),
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                            // The callee did not carry the call out (it saw this node went).
                        }
                        Err(e) => {
                            tracing::warn!("cluster: no late answer from node {node}: {e}")
                        }
                    }
                }
                drop(c);
                watching.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            self.unwatch();
            tracing::warn!("cluster: no thread to await a late answer of node {node}");
        }
    }

    /// Send `msg` to `node` without waiting (dropped, with a count, when
    /// the node's queue is full or the node cannot be reached).
    pub fn post(self: &Arc<Self>, node: u16, msg: Vec<u8>) {
        self.stats.posts.fetch_add(1, Ordering::Relaxed);
        let tx = {
            let mut posts = lock(&self.posts);
            match posts.get(&node) {
                Some(tx) => tx.clone(),
                None => {
                    let (tx, rx) = sync_channel(POST_QUEUE);
                    let me = Arc::clone(self);
                    let spawned = std::thread::Builder::new()
                        .name(format!("cluster-post-{node}"))
                        .spawn(move || me.post_loop(node, rx));
                    if spawned.is_err() {
                        self.stats.posts_dropped.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    posts.insert(node, tx.clone());
                    tx
                }
            }
        };
        match tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.posts_dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("cluster: a notice for node {node} was dropped (queue full)");
            }
        }
    }

    fn post_loop(&self, node: u16, rx: Receiver<Vec<u8>>) {
        let mut conn: Option<Conn> = None;
        for msg in rx {
            for attempt in 0..2 {
                if conn.is_none() {
                    conn = (self.resolve)(node)
                        .ok_or_else(|| bad(format!("node {node} is not a member")))
                        .and_then(|a| connect(&self.me, node, a))
                        .map_err(|e| tracing::warn!("cluster: no connection to node {node}: {e}"))
                        .ok();
                }
                let Some(c) = conn.as_mut() else {
                    self.stats.posts_dropped.fetch_add(1, Ordering::Relaxed);
                    break;
                };
                if c.send(POST, &msg).is_ok() {
                    break;
                }
                conn = None;
                if attempt == 1 {
                    self.stats.posts_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
#[path = "peer_tests.rs"]
pub(crate) mod tests;
