//! Calls to files' homes on other nodes, carried on the worker's own ring (issue 33 item 2;
//! docs/cluster-internals.md, "No I/O thread waits on the network").
//!
//! A call that is one call ([`Carry::Wire`]: a CREATE's Admit, a CLOSE, a LOCK, a READ's
//! check...) is sealed in the session of one of the worker's connections to its node and sent
//! at once, without waiting (`send::send_now`), or, for what the socket does not take, with a
//! SEND; its answer comes back through a RECV ([`Ring::recv_answer`]) that the worker cancels
//! when the peer protocol's 2 s are up ([`Worker::home_timers`]; a kernel timer linked to each
//! RECV cost more: docs/benchmarks.md, session 72). Both go in the loop's own `io_uring_enter`:
//! no thread hand-off, no wake-up. The SEND is quiet ([`Ring::quietly`]): its success does not
//! end the loop's wait, the answer does. Each connection carries one call at a time (the
//! callee answers its connection's calls in turn); a worker keeps up to K connections per node
//! (`Shared::home_calls_per_peer`). Opening one (connect and handshake) is a job for a lookup
//! thread ([`Peers::dial`]), which leaves the connection in this worker's `dialed` box.
//!
//! What is not one call (a decision at this node's home that calls others, a takeover) is a
//! job ([`Carry::Job`]) for the lookup pool's home-call threads, as are calls when the hidden
//! switch `cluster ring calls = no` is set (all of them then go the threads' way).
//!
//! Calls about one file (`HomeAsk::order`) are carried one after another, in the order this
//! worker asked them, ring and threads together: a connection lives on one ring, so its LOCK,
//! UNLOCK and CLOSE reach the home in order (calls from two rings about one file are not
//! ordered with each other: docs/limits.md).
//!
//! A call not sent within 2 s of being asked (its node stopped or unreachable) fails "try
//! again" (FILE_NOT_AVAILABLE), never sent; so does one that finds [`QUEUED_MAX`] calls waiting
//! for its node, or no connection to it to be had ([`Unsent`] says which, in the log: the first
//! line of a node and reason, then at most one count a second, on each I/O thread: [`FailLog`]). A call sent and not answered within 2 s
//! fails the same way, and its connection goes to a thread that awaits a late answer
//! ([`Peers::watch_counted`]: it half-closes, so a callee that has not read the call yet does
//! not carry it out).

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_core::lookup::{Carry, HomeAsk, HomeResult, HomeWire};
use ringshare_core::{Lookup, LookupDone, LookupRequest};
use ringshare_engine::{Completion, SharedFd};
use ringshare_wire::NtStatus;

use super::mailbox::Mailbox;
use super::send::send_now;
use super::{token, Worker};
use crate::cluster::peer::{self, Peers, Session};

/// A completion of a call's SEND, or its RECV (slot: the connection's id).
pub(super) const KIND_HOME_SEND: u64 = 10;
pub(super) const KIND_HOME_RECV: u64 = 11;

/// How long a call waits to be sent, and for its answer once sent (the peer protocol's).
const CALL_MS: u64 = peer::CALL_TIMEOUT.as_millis() as u64;
/// Calls queued per node per worker at most; more fail at once.
const QUEUED_MAX: usize = 4096;
/// A connection's receive buffer to start with.
const RX_START: usize = 4096;
/// Lines about calls that failed unsent: one per node and reason at most this often.
const LOG_EVERY_MS: u64 = 1000;
/// A connection idle this long is looked at before a call goes on it (one non-blocking peek):
/// its node may have stopped, or restarted on the same address, since. Connections in steady
/// use go again within a millisecond and are not looked at.
const IDLE_LOOK_MS: u64 = 100;

/// Connections a dial made, for the worker that asked: (node, the socket and its session).
pub(super) type Dialed = Mailbox<(u16, std::io::Result<(TcpStream, Session)>)>;

/// A call asked and not answered yet.
pub(super) struct Waiting {
    pub slot: u32,
    pub gen: u32,
    /// Boxed as the core asked it: a call moves several times on its way (into the queue, the
    /// link), as a pointer.
    pub req: Box<LookupRequest>,
    pub asked_ms: u64,
}

impl Waiting {
    fn home(&self) -> Option<&HomeAsk> {
        match &self.req.ask {
            Lookup::Home(h) => Some(h),
            _ => None,
        }
    }

    /// The call's bytes and what runs on its answer, when it is one call.
    fn wire(&self) -> Option<&HomeWire> {
        match self.home().map(|h| &h.carry) {
            Some(Carry::Wire(w)) => Some(w),
            _ => None,
        }
    }

    fn order(&self) -> u64 {
        self.home().map_or(0, |h| h.order)
    }

    fn node(&self) -> u16 {
        self.home().map_or(0, |h| h.node)
    }

    /// Whether it is one call this worker may send on its ring.
    fn on_ring(&self, me: u16) -> bool {
        self.home()
            .is_some_and(|h| h.node != me && matches!(h.carry, Carry::Wire(_)))
    }
}

/// What the worker is to do ([`Calls`] decides; the worker's glue does it).
pub(super) enum Act {
    /// Send the call on connection `conn`.
    Send(u32, Waiting),
    /// Open a new connection to the node.
    Dial(u16),
    /// Hand it to the lookup pool's threads.
    Thread(Waiting),
    /// Answer it at once with FILE_NOT_AVAILABLE: never sent, for this reason.
    Fail(Waiting, Unsent),
}

/// Why a call failed without being sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Unsent {
    /// No connection to its node could be opened (the dial's error), and none was open.
    NoConnection(String),
    /// [`QUEUED_MAX`] calls already waited for its node.
    Crowded,
    /// Not sent within 2 s of being asked.
    Late,
    /// What cannot happen happened (a fault of this node, said rather than the call lost).
    Fault(&'static str),
}

impl Unsent {
    /// Failures of one kind are counted together in the log.
    fn kind(&self) -> u8 {
        match self {
            Unsent::NoConnection(_) => 0,
            Unsent::Crowded => 1,
            Unsent::Late => 2,
            Unsent::Fault(_) => 3,
        }
    }

    /// Why, in words, for a call to `node`.
    fn reason(&self, node: u16) -> String {
        match self {
            Unsent::NoConnection(e) => format!("could not connect to node {node}: {e}"),
            Unsent::Crowded => format!("{QUEUED_MAX} calls already wait for node {node}"),
            Unsent::Late => format!("not sent within {} s", CALL_MS / 1000),
            Unsent::Fault(what) => format!("{what} (a fault of this node)"),
        }
    }
}

/// A burst of failures of one node and reason: when its first was logged, how many came
/// after it, and the last one's reason.
struct Burst {
    since_ms: u64,
    more: u64,
    why: Unsent,
}

/// The log lines of calls that failed unsent, at most one per node and reason a second: a
/// failure with none of its node and reason in the last second is said at once; those in the
/// second after it are counted, and one line says how many when that second ends.
#[derive(Default)]
pub(super) struct FailLog {
    bursts: HashMap<(u16, u8), Burst>,
}

impl FailLog {
    /// A call to `node` failed unsent at `now_ms`, for `why`: the lines to log now.
    pub(super) fn failed(&mut self, node: u16, why: Unsent, now_ms: u64, lines: &mut Vec<String>) {
        let key = (node, why.kind());
        if let Some(b) = self.bursts.get_mut(&key) {
            if now_ms < b.since_ms + LOG_EVERY_MS {
                b.more += 1;
                b.why = why;
                return;
            }
            lines.extend(Self::summary(node, b, now_ms));
        }
        lines.push(format!(
            "cluster: a call to node {node} failed unsent: {}",
            why.reason(node)
        ));
        let b = Burst {
            since_ms: now_ms,
            more: 0,
            why,
        };
        self.bursts.insert(key, b);
    }

    /// `n` calls to `node` failed unsent for `why` (opens refused before they asked:
    /// [`crate::cluster::refusing`]): logged as `n` failures of [`FailLog::failed`].
    pub(super) fn failed_many(
        &mut self,
        node: u16,
        why: Unsent,
        n: u64,
        now_ms: u64,
        lines: &mut Vec<String>,
    ) {
        if n == 0 {
            return;
        }
        self.failed(node, why.clone(), now_ms, lines);
        if let Some(b) = self.bursts.get_mut(&(node, why.kind())) {
            b.more += n - 1;
        }
    }

    /// The counts of the bursts whose second ended by `now_ms`, as lines.
    pub(super) fn due(&mut self, now_ms: u64, lines: &mut Vec<String>) {
        self.bursts.retain(|&(node, _), b| {
            if now_ms < b.since_ms + LOG_EVERY_MS {
                return true;
            }
            lines.extend(Self::summary(node, b, now_ms));
            false
        });
    }

    /// When a count is due to be said.
    pub(super) fn deadline(&self) -> Option<u64> {
        self.bursts
            .values()
            .filter(|b| b.more > 0)
            .map(|b| b.since_ms + LOG_EVERY_MS)
            .min()
    }

    fn summary(node: u16, b: &Burst, now_ms: u64) -> Option<String> {
        (b.more > 0).then(|| {
            let secs = now_ms.saturating_sub(b.since_ms) as f64 / 1000.0;
            format!(
                "cluster: {} more call{} to node {node} failed unsent in {secs:.1} s: {}",
                b.more,
                if b.more == 1 { "" } else { "s" },
                b.why.reason(node)
            )
        })
    }
}

/// A node's connections (ids) and the calls waiting for one.
#[derive(Default)]
struct PeerLinks {
    idle: Vec<u32>,
    busy: usize,
    dialing: bool,
    queue: VecDeque<Waiting>,
    /// Whether the node is marked crowded on this thread ([`crate::cluster::refusing`]).
    marked: bool,
}

/// The worker's calls, without I/O: which goes when, on which connection.
pub(super) struct Calls {
    me: u16,
    /// Connections per node at most.
    k: usize,
    peers: HashMap<u16, PeerLinks>,
    /// The orders with a call under way, and the calls of each waiting behind it.
    busy: HashMap<u64, VecDeque<Waiting>>,
}

impl Calls {
    pub(super) fn new(me: u16, k: usize) -> Calls {
        Calls {
            me,
            k: k.max(1),
            peers: HashMap::new(),
            busy: HashMap::new(),
        }
    }

    /// `w` was asked: it goes now, or after the call of its order under way.
    pub(super) fn ask(&mut self, w: Waiting, out: &mut Vec<Act>) {
        let o = w.order();
        if o != 0 {
            if let Some(behind) = self.busy.get_mut(&o) {
                behind.push_back(w);
                return;
            }
            self.busy.insert(o, VecDeque::new());
        }
        self.dispatch(w, out);
    }

    /// `w`, its order taken, goes to its node's queue (or the threads). One that finds its
    /// node's queue full fails, and the next of its order goes in its stead (in a loop, not
    /// by recursion: thousands may wait behind one order).
    fn dispatch(&mut self, w: Waiting, out: &mut Vec<Act>) {
        let mut next = Some(w);
        while let Some(w) = next.take() {
            if !w.on_ring(self.me) {
                out.push(Act::Thread(w));
                return;
            }
            let node = w.node();
            let p = self.peers.entry(node).or_default();
            if p.queue.len() >= QUEUED_MAX {
                let o = w.order();
                out.push(Act::Fail(w, Unsent::Crowded));
                next = self.next_of(o);
                continue;
            }
            p.queue.push_back(w);
            self.pump(node, out);
        }
    }

    /// The next call of order `o`, which holds the order now; none: the order is free.
    fn next_of(&mut self, o: u64) -> Option<Waiting> {
        let behind = self.busy.get_mut(&o)?;
        let next = behind.pop_front();
        if next.is_none() {
            self.busy.remove(&o);
        }
        next
    }

    /// Start what `node`'s connections can take now, or a dial for more.
    fn pump(&mut self, node: u16, out: &mut Vec<Act>) {
        let k = self.k;
        let Some(p) = self.peers.get_mut(&node) else {
            return;
        };
        while !p.queue.is_empty() {
            if let Some(c) = p.idle.pop() {
                if let Some(w) = p.queue.pop_front() {
                    p.busy += 1;
                    out.push(Act::Send(c, w));
                }
            } else {
                if !p.dialing && p.busy < k {
                    p.dialing = true;
                    out.push(Act::Dial(node));
                }
                break;
            }
        }
    }

    /// The connection to `node` taken for `w` was found closed by its node before `w` was sent
    /// on it: the connection is gone, and `w` goes back in the node's queue by when it was asked
    /// (before the calls asked after it: it goes on another connection, or a new one, and fails
    /// 2 s after it was asked as any queued call, [`Calls::expire`] looking at the queue's
    /// front). It was not sent, so it cannot have been carried out.
    pub(super) fn resend_elsewhere(&mut self, node: u16, w: Waiting, out: &mut Vec<Act>) {
        let p = self.peers.entry(node).or_default();
        p.busy = p.busy.saturating_sub(1);
        let at = p.queue.partition_point(|q| q.asked_ms <= w.asked_ms);
        p.queue.insert(at, w);
        self.pump(node, out);
    }

    /// A dial to `node` ended: its new connection, or why none. With none and no connection
    /// to the node, the calls waiting for one fail at once (never sent), as a call on a thread
    /// fails when it cannot connect.
    pub(super) fn dialed(&mut self, node: u16, conn: Result<u32, String>, out: &mut Vec<Act>) {
        let p = self.peers.entry(node).or_default();
        p.dialing = false;
        match conn {
            Ok(c) => p.idle.push(c),
            Err(e) if p.busy == 0 && p.idle.is_empty() => {
                let failed: Vec<Waiting> = p.queue.drain(..).collect();
                for w in failed {
                    self.fail(w, Unsent::NoConnection(e.clone()), out);
                }
                return;
            }
            Err(e) => tracing::debug!("cluster: no new connection to node {node}: {e}"),
        }
        self.pump(node, out);
    }

    fn fail(&mut self, w: Waiting, why: Unsent, out: &mut Vec<Act>) {
        let o = w.order();
        out.push(Act::Fail(w, why));
        self.release(o, None, out);
    }

    /// A call of order `o` ended (answered, or why not); `follow`: a call that must go before
    /// the next of its order. The next of the order goes.
    pub(super) fn release(&mut self, o: u64, follow: Option<Waiting>, out: &mut Vec<Act>) {
        if o == 0 {
            if let Some(f) = follow {
                self.ask(f, out);
            }
            return;
        }
        if let Some(f) = follow {
            self.busy.entry(o).or_default().push_front(f);
        }
        if let Some(w) = self.next_of(o) {
            self.dispatch(w, out);
        }
    }

    /// The call on connection `conn` to `node` ended: the connection is idle again (`keep`)
    /// or gone.
    pub(super) fn conn_done(&mut self, node: u16, conn: u32, keep: bool, out: &mut Vec<Act>) {
        if let Some(p) = self.peers.get_mut(&node) {
            p.busy = p.busy.saturating_sub(1);
            if keep {
                p.idle.push(conn);
            }
        }
        self.pump(node, out);
    }

    /// Calls queued 2 s after they were asked fail, never sent; so do those that waited
    /// behind them for their file's order as long (each goes to its node's queue as the one
    /// before it fails: the loop takes them in the same turn, not one a turn).
    pub(super) fn expire(&mut self, now_ms: u64, out: &mut Vec<Act>) {
        loop {
            let mut late = Vec::new();
            for p in self.peers.values_mut() {
                while p
                    .queue
                    .front()
                    .is_some_and(|w| w.asked_ms + CALL_MS <= now_ms)
                {
                    late.extend(p.queue.pop_front());
                }
            }
            if late.is_empty() {
                return;
            }
            for w in late {
                self.fail(w, Unsent::Late, out);
            }
        }
    }

    /// The nodes whose queue filled up (a call to them fails at once, [`Unsent::Crowded`]) or
    /// has room again since they were last given here: each call's work ends with this, and a
    /// node's mark changes only when its queue does.
    pub(super) fn crowding_changed(&mut self) -> impl Iterator<Item = (u16, bool)> + '_ {
        self.peers.iter_mut().filter_map(|(&node, p)| {
            let crowded = p.queue.len() >= QUEUED_MAX;
            (crowded != p.marked).then(|| {
                p.marked = crowded;
                (node, crowded)
            })
        })
    }

    /// When the oldest queued call is due to fail.
    pub(super) fn deadline(&self) -> Option<u64> {
        self.peers
            .values()
            .filter_map(|p| p.queue.front().map(|w| w.asked_ms + CALL_MS))
            .min()
    }
}

/// A connection of the worker to another node.
struct Link {
    node: u16,
    fd: SharedFd,
    session: Session,
    /// What came of the answer so far.
    rx: Vec<u8>,
    /// The call under way, and when its answer is due.
    call: Option<(Waiting, u64)>,
    /// Its SEND failed: the RECV's end fails the call.
    broken: bool,
    /// Its answer was due and its RECV was cancelled ([`Worker::home_timers`]): the RECV's end
    /// times the call out.
    overdue: bool,
    /// When its last call ended, or it was opened ([`IDLE_LOOK_MS`]).
    idle_since: u64,
}

/// A worker's side of calls on its ring.
pub(super) struct HomeCalls {
    peers: Arc<Peers>,
    calls: Calls,
    links: HashMap<u32, Link>,
    next_link: u32,
    pub(super) dialed: Arc<Dialed>,
    /// Calls carried by the threads whose order waits for their answer: (slot, gen, id).
    thread_orders: HashMap<(u32, u32, u64), u64>,
    /// Ids for the requests nobody waits for (slot u32::MAX), so each is known apart.
    next_id: u64,
    /// The log lines of calls that failed unsent.
    log: FailLog,
}

impl HomeCalls {
    pub(super) fn new(peers: Arc<Peers>, me: u16, k: usize, dialed: Arc<Dialed>) -> HomeCalls {
        HomeCalls {
            peers,
            calls: Calls::new(me, k),
            links: HashMap::new(),
            next_link: 0,
            dialed,
            thread_orders: HashMap::new(),
            next_id: 1 << 62,
            log: FailLog::default(),
        }
    }

    pub(super) fn deadline(&self) -> Option<u64> {
        [
            self.calls.deadline(),
            self.log.deadline(),
            self.answers_due(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When the first answer still awaited is due (its RECV is cancelled then).
    fn answers_due(&self) -> Option<u64> {
        self.links
            .values()
            .filter(|l| !l.overdue)
            .filter_map(|l| l.call.as_ref().map(|(_, due)| *due))
            .min()
    }
}

impl Worker {
    /// Ask `req` for connection `slot`/`gen`: on the ring when it is one call to another node,
    /// else (or with `cluster ring calls = no`) by the lookup pool.
    pub(super) fn ask_lookup(&mut self, mut req: Box<LookupRequest>, slot: u32, gen: u32) {
        let Some(h) = self.home.as_mut() else {
            return self.shared.lookups.ask(*req, slot, gen, &self.inbox);
        };
        if !matches!(req.ask, Lookup::Home(_)) {
            return self.shared.lookups.ask(*req, slot, gen, &self.inbox);
        }
        if slot == u32::MAX {
            h.next_id += 1;
            req.id = h.next_id;
        }
        let w = Waiting {
            slot,
            gen,
            req,
            asked_ms: self.clock.mono_ms,
        };
        let mut out = Vec::new();
        h.calls.ask(w, &mut out);
        self.home_act(out);
    }

    fn home_act(&mut self, out: Vec<Act>) {
        let mut more = Vec::new();
        for a in out {
            match a {
                Act::Send(c, w) => self.home_send(c, w, &mut more),
                Act::Dial(node) => self.home_dial(node),
                Act::Thread(w) => {
                    let (o, key) = (w.order(), (w.slot, w.gen, w.req.id));
                    if let (Some(h), true) = (self.home.as_mut(), o != 0) {
                        h.thread_orders.insert(key, o);
                    }
                    self.shared.lookups.ask(*w.req, w.slot, w.gen, &self.inbox);
                }
                Act::Fail(w, why) => {
                    let r: HomeResult = Err(NtStatus::FILE_NOT_AVAILABLE);
                    if let Some(h) = self.home.as_mut() {
                        let mut lines = Vec::new();
                        h.log.failed(w.node(), why, self.clock.mono_ms, &mut lines);
                        warn_all(&lines);
                    }
                    // What runs on its answer runs (a close finishes); nothing follows a
                    // call that was never sent.
                    if let Some(wire) = w.wire() {
                        let _ = wire.answered(&r);
                    }
                    self.lookup_answered(w.slot, w.gen, w.req.id, LookupDone::Home(r));
                }
            }
        }
        if !more.is_empty() {
            self.home_act(more);
        }
        self.home_mark_crowded();
    }

    /// Tell this thread's opens which nodes its calls fail at once for now
    /// ([`crate::cluster::refusing`]): they refuse a file homed there before opening it. The
    /// refusals a node's unmarking gives back are logged as its calls' failures are.
    fn home_mark_crowded(&mut self) {
        let now = self.clock.mono_ms;
        let Some(h) = self.home.as_mut() else { return };
        let mut lines = Vec::new();
        for (node, crowded) in h.calls.crowding_changed() {
            let n = crate::cluster::refusing::mark(node, crowded);
            h.log.failed_many(node, Unsent::Crowded, n, now, &mut lines);
        }
        warn_all(&lines);
    }

    /// Seal the call in `c`'s session and send it; its answer's RECV goes in the same
    /// submission, due in 2 s ([`Worker::home_timers`] cancels it then: no kernel timer per
    /// call, which nearly every call would set up and take down for nothing).
    fn home_send(&mut self, c: u32, w: Waiting, more: &mut Vec<Act>) {
        let now = self.clock.mono_ms;
        let Some(h) = self.home.as_mut() else { return };
        let Some(link) = h.links.get_mut(&c) else {
            // Cannot happen: an idle id names a link. Fail it rather than lose it.
            h.calls.conn_done(w.node(), c, false, more);
            h.calls
                .fail(w, Unsent::Fault("its connection was not found"), more);
            return;
        };
        let Some(wire) = w.wire() else {
            // Cannot happen either: only one call is queued for a connection.
            h.calls.conn_done(w.node(), c, true, more);
            h.calls.fail(w, Unsent::Fault("it was not one call"), more);
            return;
        };
        if now.saturating_sub(link.idle_since) >= IDLE_LOOK_MS && peer::other_end_closed(&*link.fd)
        {
            // Its node stopped since (issue 33: the first call to a node restarted on the same
            // address failed on the old connection, "the node closed the connection").
            let node = link.node;
            h.links.remove(&c);
            h.calls.resend_elsewhere(node, w, more);
            return;
        }
        h.peers.stats.calls.fetch_add(1, Ordering::Relaxed);
        let frame = link.session.seal(peer::CALL, &wire.message);
        let rx = std::mem::take(&mut link.rx);
        let rx = if rx.capacity() > 0 {
            rx
        } else {
            Vec::with_capacity(RX_START)
        };
        link.call = Some((w, now + CALL_MS));
        link.overdue = false;
        let fd = Arc::clone(&link.fd);
        // A call is small and its connection idle, so the socket nearly always takes it at
        // once: sent here, without waiting (MSG_DONTWAIT), it needs no SEND on the ring, whose
        // completion would end the loop's wait for the answer only to start it again (an
        // io_uring_enter a call). What the socket does not take, or an error, goes to a SEND
        // on the ring as before, quiet: only its failure is news, the answer's RECV is what the
        // call waits for.
        let sent = send_now(&fd, &[IoSlice::new(&frame)]);
        if sent < frame.len() {
            self.ring
                .quietly(|r| r.send(&fd, frame, sent, token(KIND_HOME_SEND, 0, c)));
        }
        self.ring
            .recv_answer(&fd, rx, peer::FRAME_MAX + 4, token(KIND_HOME_RECV, 0, c));
    }

    /// A lookup thread opens a connection to `node` and leaves it in this worker's box.
    fn home_dial(&mut self, node: u16) {
        let Some(h) = self.home.as_ref() else { return };
        let (peers, dialed) = (Arc::clone(&h.peers), Arc::clone(&h.dialed));
        let job = move || {
            let r = peers.dial(node);
            if !dialed.post((node, r)) {
                tracing::warn!("cluster: a connection to node {node} was opened for nothing");
            }
            Ok(Vec::new())
        };
        let req = LookupRequest {
            id: 0,
            ask: Lookup::Home(HomeAsk::job(node, 0, Box::new(job))),
        };
        self.shared.lookups.ask(req, u32::MAX, 0, &self.inbox);
    }

    /// Take the connections dials made.
    pub(super) fn home_dialed(&mut self) {
        let Some(h) = self.home.as_mut() else { return };
        let mut got = Vec::new();
        if !h.dialed.take_into(&mut got) {
            return;
        }
        let mut out = Vec::new();
        for (node, r) in got {
            let conn = match r {
                Ok((stream, session)) => {
                    h.next_link = h.next_link.wrapping_add(1);
                    let id = h.next_link;
                    let link = Link {
                        node,
                        fd: Arc::new(OwnedFd::from(stream)),
                        session,
                        rx: Vec::new(),
                        call: None,
                        broken: false,
                        overdue: false,
                        idle_since: self.clock.mono_ms,
                    };
                    h.links.insert(id, link);
                    Ok(id)
                }
                // Said with the calls it fails ([`FailLog`]), if any.
                Err(e) => Err(dial_error(&e)),
            };
            h.calls.dialed(node, conn, &mut out);
        }
        self.home_act(out);
    }

    /// A SEND or RECV of connection `c` completed.
    pub(super) fn on_home(&mut self, kind: u64, c: u32, comp: Completion) {
        let Some(h) = self.home.as_mut() else { return };
        let Some(link) = h.links.get_mut(&c) else {
            return;
        };
        if kind == KIND_HOME_SEND {
            if comp.result.is_err() {
                // The RECV's end fails the call.
                link.broken = true;
                self.ring.cancel(token(KIND_HOME_RECV, 0, c));
            }
            return;
        }
        if let Some(buf) = comp.buf {
            link.rx = buf;
        }
        let now = self.clock.mono_ms;
        let end = match comp.result {
            Ok(0) => End::Failed("the node closed the connection".into()),
            Ok(_) if link.broken => End::Failed("the call could not be sent".into()),
            Ok(_) => match link.session.open_from(&link.rx) {
                Ok(Some((peer::ANSWER, payload, used))) if used == link.rx.len() => {
                    link.rx.clear();
                    End::Answer(payload)
                }
                Ok(Some((k, _, _))) => End::Failed(format!("a frame of kind {k}")),
                Ok(None) => {
                    let due = link.call.as_ref().map_or(now, |(_, d)| *d);
                    if due <= now {
                        End::TimedOut
                    } else {
                        // Part of the answer: the rest within the time left.
                        let want = link
                            .rx
                            .get(..4)
                            .and_then(|b| Session::body_len(b.try_into().ok()?).ok())
                            .map_or(RX_START, |n| n + 4);
                        let rx = &mut link.rx;
                        rx.reserve(want.saturating_sub(rx.len()).max(RX_START / 4));
                        let (fd, rx) = (Arc::clone(&link.fd), std::mem::take(rx));
                        let tok = token(KIND_HOME_RECV, 0, c);
                        self.ring.recv_answer(&fd, rx, peer::FRAME_MAX + 4, tok);
                        return;
                    }
                }
                Err(e) => End::Failed(e.to_string()),
            },
            Err(_) if link.overdue && !link.broken => End::TimedOut,
            Err(e) => End::Failed(e.to_string()),
        };
        self.home_end(c, end);
    }

    /// The call on connection `c` ended: what runs on its answer runs, the request gets it,
    /// the next call of its order and of the node go.
    fn home_end(&mut self, c: u32, end: End) {
        let Some(h) = self.home.as_mut() else { return };
        // The link stays where it is when it is kept (it is over a kilobyte: its MAC key's
        // state); only one given up leaves the map.
        let Some(link) = h.links.get_mut(&c) else {
            return;
        };
        let node = link.node;
        let Some((w, _)) = link.call.take() else {
            h.links.remove(&c);
            return;
        };
        link.idle_since = self.clock.mono_ms;
        let timed_out = matches!(end, End::TimedOut);
        let (result, keep): (HomeResult, bool) = match end {
            End::Answer(a) => (Ok(a), true),
            End::TimedOut => (Err(NtStatus::FILE_NOT_AVAILABLE), false),
            End::Failed(why) => {
                tracing::warn!("cluster: a call to node {node} failed: {why}");
                (Err(NtStatus::FILE_NOT_AVAILABLE), false)
            }
        };
        let message = w.wire();
        let follow = message.and_then(|wire| wire.answered(&result));
        let late_msg = timed_out
            .then(|| message.map(|wire| wire.message.clone()))
            .flatten();
        // Only here does the link leave the map (and get copied): a kept one is not touched.
        if !keep {
            if let Some(link) = h.links.remove(&c) {
                await_late(&h.peers, link, late_msg);
            }
        }
        let (slot, gen, id, o) = (w.slot, w.gen, w.req.id, w.order());
        let follow = follow.map(|ask| {
            h.next_id += 1;
            Waiting {
                slot: u32::MAX,
                gen: 0,
                req: Box::new(LookupRequest {
                    id: h.next_id,
                    ask: Lookup::Home(ask),
                }),
                asked_ms: self.clock.mono_ms,
            }
        });
        let mut out = Vec::new();
        h.calls.conn_done(node, c, keep, &mut out);
        h.calls.release(o, follow, &mut out);
        self.lookup_answered(slot, gen, id, LookupDone::Home(result));
        self.home_act(out);
    }

    /// An answer of the lookup pool came for (slot, gen, id): the order it held goes on.
    pub(super) fn thread_answered(&mut self, slot: u32, gen: u32, id: u64) {
        let Some(h) = self.home.as_mut() else { return };
        let Some(o) = h.thread_orders.remove(&(slot, gen, id)) else {
            return;
        };
        let mut out = Vec::new();
        h.calls.release(o, None, &mut out);
        self.home_act(out);
    }

    /// Calls not sent within 2 s fail; the counts of failures due are logged.
    pub(super) fn home_timers(&mut self) {
        let now = self.clock.mono_ms;
        let Some(h) = self.home.as_mut() else { return };
        let mut refused = Vec::new();
        crate::cluster::refusing::take_counts(&mut refused);
        if !refused.is_empty() {
            let mut lines = Vec::new();
            for (node, n) in refused {
                h.log.failed_many(node, Unsent::Crowded, n, now, &mut lines);
            }
            warn_all(&lines);
        }
        if h.log.deadline().is_some_and(|d| d <= now) {
            let mut lines = Vec::new();
            h.log.due(now, &mut lines);
            warn_all(&lines);
        }
        // Answers not in within 2 s: their RECVs end (`on_home` times the calls out).
        for (&c, link) in h.links.iter_mut() {
            if !link.overdue && link.call.as_ref().is_some_and(|(_, due)| *due <= now) {
                link.overdue = true;
                self.ring.cancel(token(KIND_HOME_RECV, 0, c));
            }
        }
        if h.calls.deadline().is_none_or(|d| d > now) {
            return;
        }
        let mut out = Vec::new();
        h.calls.expire(now, &mut out);
        self.home_act(out);
    }

    /// The worker stops: its calls' receives end.
    pub(super) fn home_shutdown(&mut self) {
        let Some(h) = self.home.as_ref() else { return };
        let ids: Vec<u32> = h.links.keys().copied().collect();
        for c in ids {
            self.ring.cancel(token(KIND_HOME_RECV, 0, c));
        }
    }
}

/// A link given up after its call: when the call timed out (`late_msg`: its message), a thread
/// awaits the late answer (at most LATE_MAX node-wide), the connection half-closed so a callee
/// that has not read the call does not carry it out. Part of an answer already read: the
/// connection is closed instead, as is one whose call failed otherwise.
fn await_late(peers: &Peers, link: Link, late_msg: Option<Vec<u8>>) {
    let Some(msg) = late_msg else { return };
    let node = link.node;
    if link.rx.is_empty() && peers.try_watch() {
        match Arc::try_unwrap(link.fd) {
            Ok(fd) => {
                let conn = peer::Conn {
                    stream: TcpStream::from(fd),
                    session: link.session,
                };
                let wait = peer::LATE_LIMIT.saturating_sub(peer::CALL_TIMEOUT);
                peers.watch_counted(node, conn, msg, wait);
            }
            Err(_) => peers.unwatch(),
        }
    } else {
        tracing::warn!("cluster: a call to node {node} timed out; its answer is not awaited");
    }
}

/// Why a dial failed, in words: a timeout says which step's (the kernel says "Resource
/// temporarily unavailable" of a read's).
fn dial_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock => format!(
            "no answer to the handshake within {} s",
            peer::CALL_TIMEOUT.as_secs()
        ),
        std::io::ErrorKind::TimedOut => format!(
            "no answer to the connect within {} s",
            peer::CONNECT_TIMEOUT.as_secs()
        ),
        _ => e.to_string(),
    }
}

fn warn_all(lines: &[String]) {
    for l in lines {
        tracing::warn!("{l}");
    }
}

/// How a call on the ring ended.
enum End {
    Answer(Vec<u8>),
    TimedOut,
    Failed(String),
}

#[cfg(test)]
#[path = "home_calls_tests.rs"]
mod tests;
