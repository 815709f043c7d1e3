//! The lookup pool: where the questions an I/O thread must not wait for are asked
//! ([`ringshare_core::lookup`]: the domain's NTLM check through winbind, a user's account
//! through NSS, which may ask winbindd, sssd or LDAP).
//!
//! A few threads take questions from one queue, ask, and leave each answer in the inbox of the
//! worker whose connection asked, then wake that worker's ring (its eventfd). The worker hands
//! the answers to their connections on its next loop iteration. A slow or stopped winbindd
//! delays only the logons that need it; every other request on every ring goes on. A cluster
//! node's questions to etcd (persistent opens' records) have a thread of their own, which asks
//! them in order. Calls to files' homes on other nodes that are one call each go on the rings
//! themselves (`home_calls.rs`); the rest (a takeover, a decision at this node's home that calls
//! others, the opening of a ring's connection to a node) and, with `cluster ring calls = no`,
//! every call have threads of their own; those about one file are asked one after another, in
//! the order the rings asked them (`HomeAsk::order`).
//!
//! File system jobs of shares whose calls may wait on a network ([`Lookup::Fs`],
//! `ringshare_core::fsjob`) have threads of their own too: each acts as the job's user before it
//! runs it (`creds::act_as`, per thread); jobs about one open run one after another in the
//! order asked, and a connection has at most [`FS_JOBS_PER_SHARE_AND_CONNECTION`] of one share
//! running at once, so a stuck file or share holds only that many threads.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ringshare_core::{Lookup, LookupDone, LookupRequest};
use ringshare_engine::Waker;

use super::mailbox::Mailbox;
use super::write_pipes::drop_unheld_payload;
use super::Worker;

/// Threads asking at once: NSS and winbind calls of several logons overlap (winbind's own
/// `ntlm_auth` pool holds up to 8 helpers).
const LOOKUP_THREADS: usize = 4;
/// Threads carrying the calls to files' homes that are not made on the rings (`home_calls.rs`:
/// jobs of several calls, dials; all of them with `cluster ring calls = no`, the CREATEs,
/// CLOSEs, LOCKs and UNLOCKs of files homed elsewhere): each waits for its peer's answer, at most the peer
/// connection's 2 s, so a stopped peer holds a thread per call to it for that long; the calls
/// of a node's clients overlap, those about one file go one after another.
const HOME_CALL_THREADS: usize = 16;
/// Calls to one peer carried at once: a stopped peer holds at most these threads (for up to
/// 2 s each); calls to the other nodes have the rest, and those to it wait their turn.
const HOME_CALLS_PER_PEER: usize = 8;
const _: () = assert!(HOME_CALLS_PER_PEER < HOME_CALL_THREADS);
/// Threads running file system jobs ([`Lookup::Fs`]): a stuck file holds one per request
/// about it, up to the bound below per share and connection.
const FS_THREADS: usize = 16;
/// File system jobs of one share and one connection running at once; the rest wait their turn
/// (unbounded in number: what a request should get when very many wait is not decided).
const FS_JOBS_PER_SHARE_AND_CONNECTION: usize = 4;
const _: () = assert!(FS_JOBS_PER_SHARE_AND_CONNECTION < FS_THREADS);
/// A lookup slower than this is logged (winbindd or the directory behind NSS is struggling).
const LOOKUP_SLOW: Duration = Duration::from_secs(2);

/// Where a worker's answers are left: (slot, generation, request id, answer), unbounded.
pub type Inbox = Mailbox<(u32, u32, u64, LookupDone)>;

/// A worker's inbox, addressed to its ring.
pub fn inbox(waker: Waker) -> Arc<Inbox> {
    let b = Mailbox::new(usize::MAX);
    b.set_waker(waker);
    Arc::new(b)
}

struct Question {
    req: LookupRequest,
    slot: u32,
    gen: u32,
    inbox: Arc<Inbox>,
    /// Its [`Turn`], worked out once when it was asked ([`Question::new`]): a waiting question
    /// is looked at on every take, under the queue's lock.
    order: Option<u64>,
    peer: Option<(u64, usize)>,
}

/// What decides when a waiting question may be taken ([`Waiting::take`]).
trait Turn {
    /// Its order ([`ringshare_core::lookup::HomeAsk::order`]): questions of one order are
    /// asked one after another, in the order they came.
    fn order(&self) -> Option<u64>;
    /// What bounds how many of its kind are asked at once, and that bound: the node a call to
    /// a file's home goes to ([`HOME_CALLS_PER_PEER`]), a file system job's share and
    /// connection ([`FS_JOBS_PER_SHARE_AND_CONNECTION`]).
    fn peer(&self) -> Option<(u64, usize)>;
}

impl Question {
    /// `req`, asked for connection `slot`/`gen`, its answer going to `inbox`.
    fn new(req: LookupRequest, slot: u32, gen: u32, inbox: Arc<Inbox>) -> Question {
        // `what` (an open's order or a share's key) of this question's connection: a slot is
        // one I/O thread's (its inbox) and is used again by later connections (its
        // generation), so all three name the connection. (Two keys alike by chance would only
        // take turns.)
        let of_connection =
            |kind: u8, what: u64| key_of((kind, Arc::as_ptr(&inbox) as usize, slot, gen, what));
        let (order, peer) = match &req.ask {
            Lookup::Home(h) => (
                (h.order != 0).then_some(h.order),
                Some((u64::from(h.node), HOME_CALLS_PER_PEER)),
            ),
            // A kernel watch's job is nobody's ([`ringshare_core::fsjob::FsJob::nobodys`]):
            // whichever connection posted it, it shares the bound of the node's other such jobs
            // of its share, not the poster's own.
            Lookup::Fs(j) if j.nobodys => (
                None,
                Some((key_of((2u8, j.share)), FS_JOBS_PER_SHARE_AND_CONNECTION)),
            ),
            // An open's jobs: its order is the connection's own (open ids of two connections
            // may be alike). READs' jobs are not ordered among themselves: the connection
            // asks them only while nothing but READs is out for the open (finding G).
            Lookup::Fs(j) => (
                (j.order != 0 && !j.among_reads).then(|| of_connection(0, j.order)),
                Some((of_connection(1, j.share), FS_JOBS_PER_SHARE_AND_CONNECTION)),
            ),
            _ => (None, None),
        };
        Question {
            req,
            slot,
            gen,
            inbox,
            order,
            peer,
        }
    }
}

/// A question's order or bound named by `parts` (its kind first), as one number.
fn key_of(parts: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

impl Turn for Question {
    fn order(&self) -> Option<u64> {
        self.order
    }

    fn peer(&self) -> Option<(u64, usize)> {
        self.peer
    }
}

/// Questions waiting, and the threads' wake-up.
#[derive(Default)]
struct Queue {
    waiting: Mutex<Waiting<Question>>,
    ready: Condvar,
}

/// The questions not yet taken, the orders of those being asked and how many calls each peer
/// (or share and connection) is being asked. The questions wait by peer, each peer's in the
/// order they came, and the peers take turns: a peer that asks a great many (a connection
/// flooding a share with jobs, a stopped node's calls) holds no other's questions behind its
/// own, and a take looks at each peer once, not at every question waiting.
struct Waiting<Q> {
    by_peer: HashMap<Option<u64>, VecDeque<Q>>,
    /// The peers with questions waiting, in turn (`None`: the questions of no peer, one queue).
    turns: VecDeque<Option<u64>>,
    asking: HashSet<u64>,
    peers: HashMap<u64, usize>,
}

impl<Q> Default for Waiting<Q> {
    fn default() -> Self {
        Waiting {
            by_peer: HashMap::new(),
            turns: VecDeque::new(),
            asking: HashSet::new(),
            peers: HashMap::new(),
        }
    }
}

/// Whether `q`'s order has none being asked.
fn order_free<Q: Turn>(asking: &HashSet<u64>, q: &Q) -> bool {
    q.order().is_none_or(|o| !asking.contains(&o))
}

/// Whether `q`'s peer is asked fewer than its bound.
fn peer_free<Q: Turn>(peers: &HashMap<u64, usize>, q: &Q) -> bool {
    q.peer()
        .is_none_or(|(n, most)| peers.get(&n).copied().unwrap_or(0) < most)
}

impl<Q: Turn> Waiting<Q> {
    /// `q` waits, behind the questions of its peer that came before it.
    fn push(&mut self, q: Q) {
        let peer = q.peer().map(|p| p.0);
        let queue = self.by_peer.entry(peer).or_default();
        if queue.is_empty() {
            self.turns.push_back(peer);
        }
        queue.push_back(q);
    }

    /// The next question that may be taken: of the peers in turn, the first asked fewer than
    /// its bound ([`HOME_CALLS_PER_PEER`], [`FS_JOBS_PER_SHARE_AND_CONNECTION`]) that has a
    /// question whose order has none being asked (its first such); that peer goes to the back
    /// of the turns. It is then being asked, until [`Waiting::done`].
    fn take(&mut self) -> Option<Q> {
        let Waiting {
            by_peer,
            turns,
            asking,
            peers,
        } = self;
        let (turn, q) = turns.iter().enumerate().find_map(|(turn, peer)| {
            let queue = by_peer.get_mut(peer)?;
            if !queue.front().is_some_and(|q| peer_free(peers, q)) {
                return None;
            }
            let at = queue.iter().position(|q| order_free(asking, q))?;
            Some((turn, queue.remove(at)?))
        })?;
        let peer = turns.remove(turn).flatten();
        if by_peer.get(&peer).is_some_and(|queue| !queue.is_empty()) {
            turns.push_back(peer);
        } else {
            by_peer.remove(&peer);
        }
        if let Some(o) = q.order() {
            asking.insert(o);
        }
        if let Some((n, _)) = q.peer() {
            *peers.entry(n).or_default() += 1;
        }
        Some(q)
    }

    /// Whether `q` may be taken now: no question of its order is being asked, and its peer is
    /// asked fewer than its bound.
    fn takeable(&self, q: &Q) -> bool {
        order_free(&self.asking, q) && peer_free(&self.peers, q)
    }

    /// `q`, taken, was asked: the questions it held back may be taken. True when one of them
    /// waits (of its peer, or of its order).
    fn done(&mut self, q: &Q) -> bool {
        if let Some(o) = q.order() {
            self.asking.remove(&o);
        }
        if let Some((n, _)) = q.peer() {
            if let Some(c) = self.peers.get_mut(&n) {
                *c -= 1;
                if *c == 0 {
                    self.peers.remove(&n);
                }
            }
        }
        let peer = q.peer().map(|p| p.0);
        if self.by_peer.contains_key(&peer) {
            return true;
        }
        // Of its order under another peer (a file whose home moved between two calls).
        let order = q.order();
        order.is_some() && self.by_peer.values().flatten().any(|w| w.order() == order)
    }
}

/// The queues and their threads.
#[derive(Default)]
pub struct LookupPool {
    queue: Queue,
    /// A cluster node's questions to its store (persistent opens' records in etcd): one thread
    /// asks them in the order the rings asked, so that two writes of one open's record (a LOCK
    /// and the UNLOCK after it, the CLOSE that removes it) land in that order.
    cluster: Queue,
    /// Calls to files' homes on other nodes ([`Lookup::Home`]): threads of their own, so that
    /// a stopped peer holds up neither logons nor the cluster's store.
    home: Queue,
    /// File system jobs ([`Lookup::Fs`]): threads of their own, each acting as the job's user.
    fs: Queue,
    /// Last closes that wait for another holder of the descriptor: a thread of its own.
    closer: Closer,
}

impl LookupPool {
    /// The pool with its threads running. Call it from the thread that starts the server (the
    /// threads take its credentials: the server's own, never a user's).
    pub fn start() -> Arc<LookupPool> {
        let pool = Arc::new(LookupPool::default());
        let fs_from = LOOKUP_THREADS + HOME_CALL_THREADS + 1;
        for i in 0..fs_from + FS_THREADS {
            let p = Arc::clone(&pool);
            let (name, queue): (String, fn(&LookupPool) -> &Queue) = match i {
                i if i < LOOKUP_THREADS => (format!("ringshare-lookup-{i}"), |p| &p.queue),
                LOOKUP_THREADS => ("ringshare-cluster-store".to_string(), |p| &p.cluster),
                i if i < fs_from => (
                    format!("ringshare-home-call-{}", i - LOOKUP_THREADS - 1),
                    |p| &p.home,
                ),
                i => (format!("ringshare-fs-{}", i - fs_from), |p| &p.fs),
            };
            let spawned = std::thread::Builder::new()
                .name(name)
                .spawn(move || p.serve(queue(&p)));
            if let Err(e) = spawned {
                tracing::error!("cannot start a lookup thread: {e}");
            }
        }
        let p = Arc::clone(&pool);
        let spawned = std::thread::Builder::new()
            .name("ringshare-fs-closer".to_string())
            .spawn(move || p.closer.serve());
        if let Err(e) = spawned {
            tracing::error!("cannot start the file system closer thread: {e}");
        }
        pool
    }

    /// Ask `req` for connection `slot`/`gen`; its answer goes to `inbox`.
    pub fn ask(&self, req: LookupRequest, slot: u32, gen: u32, inbox: &Arc<Inbox>) {
        let queue = match req.ask {
            Lookup::Cluster(_) => &self.cluster,
            Lookup::Home(_) => &self.home,
            Lookup::Fs(_) => &self.fs,
            _ => &self.queue,
        };
        let q = Question::new(req, slot, gen, Arc::clone(inbox));
        // A question that cannot be taken now (an earlier one of its order is being asked, or
        // its peer has its share of calls under way) wakes nobody: the thread that asks what
        // holds it back wakes one when it is done.
        let takeable = {
            let mut waiting = crate::lock(&queue.waiting);
            let takeable = waiting.takeable(&q);
            waiting.push(q);
            takeable
        };
        if takeable {
            queue.ready.notify_one();
        }
    }

    fn serve(&self, queue: &Queue) {
        loop {
            let mut q = {
                let mut waiting = crate::lock(&queue.waiting);
                loop {
                    if let Some(q) = waiting.take() {
                        break q;
                    }
                    waiting = queue
                        .ready
                        .wait(waiting)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let started = Instant::now();
            let done = run_as_asked(&q.req);
            // A CLOSE's last close: made here once nothing else holds the descriptor, before
            // the CLOSE is answered.
            if let Lookup::Fs(job) = &mut q.req.ask {
                if let Some(fd) = job.closes.take() {
                    self.close_when_last(fd);
                }
            }
            let took = started.elapsed();
            if took > LOOKUP_SLOW {
                tracing::warn!("{:?} took {:.1} s", q.req, took.as_secs_f64());
            }
            // The answer goes before its order is let go: the next question of the order, asked
            // by another thread, then answers after it (an inbox is first in, first out).
            q.inbox.post((q.slot, q.gen, q.req.id, done));
            if crate::lock(&queue.waiting).done(&q) {
                // A question it held back may be asked now. This thread takes a question when it
                // loops; one more thread is woken (not all of them: on a stream of calls about
                // one file, every answer woke every home-call thread).
                queue.ready.notify_one();
            }
        }
    }
}

/// How long a CLOSE's job waits for what else holds its descriptor before it hands it to the
/// closer ([`LookupPool::close_when_last`]): an I/O under way ends within it.
const LAST_CLOSE_WAIT: Duration = Duration::from_millis(20);
/// How often the closer looks at the descriptors it holds ([`Closer`]).
const CLOSER_LOOKS_EVERY: Duration = Duration::from_millis(2);

/// Descriptors whose last close waits for another holder (a READ's reply a client is slow to
/// take, an I/O of another channel), and the thread that makes them once it is the last
/// ([`LookupPool::close_when_last`]): no pool thread sleeps for them.
#[derive(Default)]
struct Closer {
    held: Mutex<Vec<Arc<std::os::fd::OwnedFd>>>,
    ready: Condvar,
}

impl Closer {
    /// The closer's thread: each descriptor is closed here once nothing else holds it (it acts
    /// as the server; on FUSE the FLUSH of a slow file holds only this thread).
    fn serve(&self) {
        loop {
            let mut last = Vec::new();
            {
                let mut held = crate::lock(&self.held);
                while held.is_empty() {
                    held = self
                        .ready
                        .wait(held)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                let mut i = 0;
                while i < held.len() {
                    if Arc::strong_count(&held[i]) == 1 {
                        last.push(held.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
            }
            // Closed here, outside the lock.
            drop(last);
            std::thread::sleep(CLOSER_LOOKS_EVERY);
        }
    }
}

impl LookupPool {
    /// Close `fd` on this file system thread once it is its last holder: a WRITE that asked no
    /// job may still be on the ring with it, a READ's reply still being sent from it (issue 33,
    /// the review of steps 3-4, finding B). They end on the I/O thread, which would then make
    /// the last close (on FUSE a FLUSH the closing thread waits for); so this thread looks
    /// again, with pauses growing from 20 us, for [`LAST_CLOSE_WAIT`]; still held then (a
    /// client slow to take a READ's reply), the descriptor goes to the closer's thread, which
    /// closes it when the other holder lets it go, and the job is answered.
    fn close_when_last(&self, fd: Arc<std::os::fd::OwnedFd>) {
        let started = Instant::now();
        let mut pause = Duration::from_micros(20);
        while Arc::strong_count(&fd) > 1 {
            if started.elapsed() >= LAST_CLOSE_WAIT {
                crate::lock(&self.closer.held).push(fd);
                self.closer.ready.notify_one();
                return;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
}

/// Run `req` on this thread, waiting; a file system job as its user (the thread's credentials
/// then stay its: the next job switches only when its user differs, as an I/O thread does).
/// A job whose user this thread cannot act as is not run: it is refused.
fn run_as_asked(req: &LookupRequest) -> LookupDone {
    let Lookup::Fs(job) = &req.ask else {
        return req.run();
    };
    if let Err(e) = super::act_for(job.who.as_ref()) {
        tracing::warn!("{req:?}: cannot act as its user: {e}");
        return LookupDone::Fs(ringshare_core::fsjob::FsDone::Done(Err(
            ringshare_vfs::FsError::AccessDenied,
        )));
    }
    req.run()
}

impl Worker {
    /// Hand the answers in this worker's inbox to their connections (a connection gone since
    /// is skipped: its slot's generation moved on).
    pub(super) fn answer_lookups(&mut self) {
        let mut answers = Vec::new();
        if !self.inbox.take_into(&mut answers) {
            return;
        }
        for (slot, gen, id, done) in answers {
            self.lookup_answered(slot, gen, id, done);
            // A call about a file carried by a thread: the next about it may go.
            self.thread_answered(slot, gen, id);
        }
    }

    /// Hand `done` to the request `id` of connection `slot`/`gen`, if it is still there.
    pub(super) fn lookup_answered(&mut self, slot: u32, gen: u32, id: u64, done: LookupDone) {
        let t = self.clock;
        if let Some(c) = self.conn_mut(slot, gen) {
            c.conn.complete_lookup(t, id, done);
            self.drain(slot);
            // A WRITE received apart that waited for its home and failed: its payload goes.
            if let Some(c) = self.conn_mut(slot, gen) {
                drop_unheld_payload(c);
            }
        } else if let LookupDone::Fs(ringshare_core::fsjob::FsDone::Made(m)) = done {
            // A CREATE's file system job's open whose connection went: let go on the pool (its
            // last close, a FLUSH on FUSE, not made on this thread), nobody waiting.
            if m.holds_files {
                let job = ringshare_core::fsjob::FsJob::let_go(m, 0);
                let req = LookupRequest {
                    id: 0,
                    ask: Lookup::Fs(job),
                };
                self.shared.lookups.ask(req, u32::MAX, 0, &self.inbox);
            }
        }
    }
}

#[cfg(test)]
#[path = "lookups_tests.rs"]
mod fs_pool_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A call to `peer` about the file of order `order`.
    #[derive(Debug, PartialEq)]
    struct Call(u16, u64);

    impl Turn for Call {
        fn order(&self) -> Option<u64> {
            Some(self.1)
        }
        fn peer(&self) -> Option<(u64, usize)> {
            Some((u64::from(self.0), HOME_CALLS_PER_PEER))
        }
    }

    /// Issue 33: a stopped peer holds at most its share of the home-call threads; a call to a
    /// live node queued behind many calls to it is taken while they wait, and calls about one
    /// file wait for the one before.
    #[test]
    fn calls_to_a_live_node_are_taken_while_a_stopped_node_holds_its_share_of_the_threads() {
        let mut w = Waiting::default();
        for i in 0..HOME_CALL_THREADS as u64 * 2 {
            w.push(Call(3, 100 + i));
        }
        w.push(Call(2, 1));
        w.push(Call(2, 1));
        w.push(Call(2, 2));
        let mut taken = Vec::new();
        while let Some(q) = w.take() {
            taken.push(q);
        }
        let to_3 = taken.iter().filter(|c| c.0 == 3).count();
        assert_eq!(to_3, HOME_CALLS_PER_PEER, "node 3 holds its share");
        let to_2: Vec<&Call> = taken.iter().filter(|c| c.0 == 2).collect();
        assert_eq!(
            to_2,
            [&Call(2, 1), &Call(2, 2)],
            "one call per file at once"
        );
        // The first call about file 1 is answered: the second may go.
        let first = taken.iter().position(|c| *c == Call(2, 1)).unwrap();
        assert!(w.done(&taken.remove(first)));
        assert_eq!(w.take(), Some(Call(2, 1)));
        // One call to node 3 ends: the next to it may go, in the order they came.
        assert!(w.done(&taken.remove(0)));
        assert_eq!(w.take(), Some(Call(3, 100 + HOME_CALLS_PER_PEER as u64)));
        assert_eq!(w.take(), None);
    }
}
