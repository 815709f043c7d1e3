//! A queue other threads leave items in for one worker, and that worker's wake-up: the lookup
//! pool's answers ([`super::lookups::Inbox`]), QUIC datagrams another worker received for
//! this one's connections (`quic::QuicShared`), and the bells of its connections' mailboxes
//! (`Worker::deliver_mail`). The ring is woken only when the queue turns
//! non-empty; the worker's loop, which looks every iteration, takes the lock only when
//! something was left.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use ringshare_engine::Waker;

pub struct Mailbox<T> {
    items: Mutex<Vec<T>>,
    /// Something was left since the worker last took the items.
    any: AtomicBool,
    /// The worker's ring (set when it starts).
    waker: OnceLock<Waker>,
    /// Items held at most; more are dropped.
    max: usize,
    /// Dropped because the box was full or had no worker yet.
    dropped: AtomicU64,
}

impl<T> Mailbox<T> {
    /// A box of at most `max` items, its worker not started yet ([`Mailbox::set_waker`]).
    pub fn new(max: usize) -> Mailbox<T> {
        Mailbox {
            items: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            waker: OnceLock::new(),
            max,
            dropped: AtomicU64::new(0),
        }
    }

    /// The box's worker has started: posts wake `waker` (the first call counts).
    pub fn set_waker(&self, waker: Waker) {
        let _ = self.waker.set(waker);
    }

    /// Leaves `item` and wakes the worker if the box was empty; false when it was dropped.
    pub fn post(&self, item: T) -> bool {
        let Some(waker) = self.waker.get() else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        {
            let mut items = crate::lock(&self.items);
            if items.len() >= self.max {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            items.push(item);
        }
        // A post after the worker's `take_into` sees `any` false and wakes it; one before sees
        // it true or is in the items the worker takes.
        if !self.any.swap(true, Ordering::AcqRel) {
            let _ = waker.wake();
        }
        true
    }

    /// Swaps what was left into `out` (empty; its buffer goes back to the box); false when
    /// nothing was left since the last time.
    pub fn take_into(&self, out: &mut Vec<T>) -> bool {
        if !self.any.swap(false, Ordering::AcqRel) {
            return false;
        }
        std::mem::swap(&mut *crate::lock(&self.items), out);
        true
    }

    /// Items dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
