//! The lookup pool: where the questions an I/O thread must not wait for are asked
//! ([`ringshare_core::lookup`]: the domain's NTLM check through winbind, a user's account
//! through NSS, which may ask winbindd, sssd or LDAP).
//!
//! A few threads take questions from one queue, ask, and leave each answer in the inbox of the
//! worker whose connection asked, then wake that worker's ring (its eventfd). The worker hands
//! the answers to their connections on its next loop iteration. A slow or stopped winbindd
//! delays only the logons that need it; every other request on every ring goes on.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ringshare_core::{LookupDone, LookupRequest};
use ringshare_engine::Waker;

use super::Worker;

/// Threads asking at once: NSS and winbind calls of several logons overlap (winbind's own
/// `ntlm_auth` pool holds up to 8 helpers).
const LOOKUP_THREADS: usize = 4;
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

/// The queue and its threads.
#[derive(Default)]
pub struct LookupPool {
    queue: Mutex<VecDeque<Question>>,
    ready: Condvar,
}

impl LookupPool {
    /// The pool with its threads running. Call it from the thread that starts the server (the
    /// threads take its credentials: the server's own, never a user's).
    pub fn start() -> Arc<LookupPool> {
        let pool = Arc::new(LookupPool::default());
        for i in 0..LOOKUP_THREADS {
            let p = Arc::clone(&pool);
            let spawned = std::thread::Builder::new()
                .name(format!("ringshare-lookup-{i}"))
                .spawn(move || p.serve());
            if let Err(e) = spawned {
                tracing::error!("cannot start a lookup thread: {e}");
            }
        }
        pool
    }

    /// Ask `req` for connection `slot`/`gen`; its answer goes to `inbox`.
    pub fn ask(&self, req: LookupRequest, slot: u32, gen: u32, inbox: &Arc<Inbox>) {
        crate::lock(&self.queue).push_back(Question {
            req,
            slot,
            gen,
            inbox: Arc::clone(inbox),
        });
        self.ready.notify_one();
    }

    fn serve(&self) {
        loop {
            let q = {
                let mut queue = crate::lock(&self.queue);
                loop {
                    if let Some(q) = queue.pop_front() {
                        break q;
                    }
                    queue = self
                        .ready
                        .wait(queue)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let started = Instant::now();
            let done = q.req.run();
            let took = started.elapsed();
            if took > LOOKUP_SLOW {
                tracing::warn!("{:?} took {:.1} s", q.req, took.as_secs_f64());
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
