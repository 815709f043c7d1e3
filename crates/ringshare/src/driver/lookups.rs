//! The lookup pool: where the questions an I/O thread must not wait for are asked
//! ([`ringshare_core::lookup`]: the domain's NTLM check through winbind, a user's account
//! through NSS, which may ask winbindd, sssd or LDAP).
//!
//! A few threads take questions from one queue, ask, and leave each answer in the inbox of the
//! worker whose connection asked, then wake that worker's ring (its eventfd). The worker hands
//! the answers to their connections on its next loop iteration. A slow or stopped winbindd
//! delays only the logons that need it; every other request on every ring goes on. A cluster
//! node's questions to etcd (persistent opens' records) have a thread of their own, which asks
//! them in order. Calls to files' homes on other nodes have threads of their own too; those
//! about one file are asked one after another, in the order the rings asked them
//! (`HomeAsk::order`).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ringshare_core::{Lookup, LookupDone, LookupRequest};
use ringshare_engine::Waker;

use super::Worker;

/// Threads asking at once: NSS and winbind calls of several logons overlap (winbind's own
/// `ntlm_auth` pool holds up to 8 helpers).
const LOOKUP_THREADS: usize = 4;
/// Threads carrying calls to files' homes on other nodes (the CREATEs, CLOSEs, LOCKs and
/// UNLOCKs of files homed elsewhere): each waits for its peer's answer, at most the peer
/// connection's 2 s, so a stopped peer holds a thread per call to it for that long; the calls
/// of a node's clients overlap, those about one file go one after another.
const HOME_CALL_THREADS: usize = 8;
/// A lookup slower than this is logged (winbindd or the directory behind NSS is struggling).
const LOOKUP_SLOW: Duration = Duration::from_secs(2);

/// Answers waiting for one worker: (connection slot, its generation, lookup id, answer).
pub struct Inbox {
    answers: Mutex<Vec<(u32, u32, u64, LookupDone)>>,
    /// Answers were left since the worker last looked (so that its loop, which looks every
    /// iteration, takes the lock only then).
    any: AtomicBool,
    waker: Waker,
}

impl Inbox {
    pub fn new(waker: Waker) -> Arc<Inbox> {
        Arc::new(Inbox {
            answers: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            waker,
        })
    }
}

struct Question {
    req: LookupRequest,
    slot: u32,
    gen: u32,
    inbox: Arc<Inbox>,
}

impl Question {
    /// Its order ([`ringshare_core::lookup::HomeAsk::order`]): questions of one order are
    /// asked one after another, in the order they came.
    fn order(&self) -> Option<u64> {
        match &self.req.ask {
            Lookup::Home(h) if h.order != 0 => Some(h.order),
            _ => None,
        }
    }
}

/// Questions waiting, and the threads' wake-up.
#[derive(Default)]
struct Queue {
    waiting: Mutex<Waiting>,
    ready: Condvar,
}

/// The questions not yet taken, and the orders of those being asked.
#[derive(Default)]
struct Waiting {
    questions: VecDeque<Question>,
    asking: HashSet<u64>,
}

impl Waiting {
    /// The first question whose order has none being asked (it is then being asked).
    fn take(&mut self) -> Option<Question> {
        let at = self
            .questions
            .iter()
            .position(|q| q.order().is_none_or(|o| !self.asking.contains(&o)))?;
        let q = self.questions.remove(at)?;
        if let Some(o) = q.order() {
            self.asking.insert(o);
        }
        Some(q)
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
}

impl LookupPool {
    /// The pool with its threads running. Call it from the thread that starts the server (the
    /// threads take its credentials: the server's own, never a user's).
    pub fn start() -> Arc<LookupPool> {
        let pool = Arc::new(LookupPool::default());
        for i in 0..=LOOKUP_THREADS + HOME_CALL_THREADS {
            let p = Arc::clone(&pool);
            let (name, queue): (String, fn(&LookupPool) -> &Queue) = match i {
                i if i < LOOKUP_THREADS => (format!("ringshare-lookup-{i}"), |p| &p.queue),
                LOOKUP_THREADS => ("ringshare-cluster-store".to_string(), |p| &p.cluster),
                i => (
                    format!("ringshare-home-call-{}", i - LOOKUP_THREADS - 1),
                    |p| &p.home,
                ),
            };
            let spawned = std::thread::Builder::new()
                .name(name)
                .spawn(move || p.serve(queue(&p)));
            if let Err(e) = spawned {
                tracing::error!("cannot start a lookup thread: {e}");
            }
        }
        pool
    }

    /// Ask `req` for connection `slot`/`gen`; its answer goes to `inbox`.
    pub fn ask(&self, req: LookupRequest, slot: u32, gen: u32, inbox: &Arc<Inbox>) {
        let queue = match req.ask {
            Lookup::Cluster(_) => &self.cluster,
            Lookup::Home(_) => &self.home,
            _ => &self.queue,
        };
        let q = Question {
            req,
            slot,
            gen,
            inbox: Arc::clone(inbox),
        };
        // A question that must wait for an earlier one of its order wakes nobody: the thread
        // that asks the earlier one takes it next.
        let takeable = {
            let mut waiting = crate::lock(&queue.waiting);
            let takeable = q.order().is_none_or(|o| !waiting.asking.contains(&o));
            waiting.questions.push_back(q);
            takeable
        };
        if takeable {
            queue.ready.notify_one();
        }
    }

    fn serve(&self, queue: &Queue) {
        loop {
            let q = {
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
            let done = q.req.run();
            let took = started.elapsed();
            if took > LOOKUP_SLOW {
                tracing::warn!("{:?} took {:.1} s", q.req, took.as_secs_f64());
            }
            if let Some(o) = q.order() {
                // The next question of this order may be asked now. This thread takes a
                // question when it loops; one more thread is woken when another is waiting
                // (not all of them: on a stream of calls about one file, every answer woke
                // every home-call thread).
                let mut waiting = crate::lock(&queue.waiting);
                waiting.asking.remove(&o);
                let more = waiting.questions.iter().any(|w| w.order() == Some(o));
                drop(waiting);
                if more {
                    queue.ready.notify_one();
                }
            }
            crate::lock(&q.inbox.answers).push((q.slot, q.gen, q.req.id, done));
            q.inbox.any.store(true, Ordering::Release);
            let _ = q.inbox.waker.wake();
        }
    }
}

impl Worker {
    /// Hand the answers in this worker's inbox to their connections (a connection gone since
    /// is skipped: its slot's generation moved on).
    pub(super) fn answer_lookups(&mut self) {
        if !self.inbox.any.swap(false, Ordering::Acquire) {
            return;
        }
        let answers = std::mem::take(&mut *crate::lock(&self.inbox.answers));
        let t = self.clock;
        for (slot, gen, id, done) in answers {
            if let Some(c) = self.conn_mut(slot, gen) {
                c.conn.complete_lookup(t, id, done);
                self.drain(slot);
            }
        }
    }
}
