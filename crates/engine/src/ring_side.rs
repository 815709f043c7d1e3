//! The side ring: where a [`Ring`]'s send-files run when the ring defers its completion work.
//!
//! With `IORING_SETUP_DEFER_TASKRUN` the completion of a step that ran on an io_uring worker
//! is work for the ring's thread, so the next linked step of a send-file (file -> pipe ->
//! socket) waits for that thread to enter the kernel and is then queued to a worker again:
//! two trips through io-wq for each 1 MiB READ (docs/benchmarks.md, session 66). Without the
//! flag the worker that ends a step runs the next, but the request rows (a call to a file's
//! home above all) cost more. So a ring that defers keeps a second io_uring, set up without
//! it ([`crate::setup::build_side`]), for the linked splices of its send-files alone.
//!
//! - Its SQEs come from the same slab as the main ring's, with the same `user_data` keys, so
//!   one `handle_cqe` serves both. An op's `side` says where its SQEs and its cancels go.
//! - They name the side ring's personalities ([`Personalities::side_id`]) and plain fds (the
//!   registered-file table is the main ring's).
//! - They are submitted before each wait of the main ring ([`Ring::side_turn`]).
//! - The side ring has an eventfd registered (`IORING_REGISTER_EVENTFD`), which the kernel
//!   signals only when a CQE was posted there, and the main ring keeps a read of it armed
//!   (as it does its waker's), so the main ring's wait ends when a side op completes. (A poll
//!   of the side ring's fd would not do: the kernel wakes it each time the side ring runs
//!   completion work, CQE or not, so every skipped step of a chain ended the wait: 40-100
//!   turns for a 3 MiB send-file of 4 rounds, against 5 with the eventfd.)
//! - Reaping takes the side ring's CQEs after the main ring's.
//!
//! [`Personalities::side_id`]: crate::personality::Personalities::side_id

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use io_uring::IoUring;

use super::{soft_enter_error, OpKind, Ring, BACKLOG_SUBMITS_MAX};

/// The side ring and what the main ring knows of it.
pub(super) struct Side {
    pub(super) uring: IoUring,
    /// SQEs pushed and not yet submitted.
    pub(super) unsubmitted: bool,
    /// Ops of the slab whose SQEs go here.
    pub(super) ops: usize,
    /// Slab key of the main ring's read of the side ring's eventfd.
    pub(super) read_key: u64,
}

impl Ring {
    /// Gives the ring the side ring `uring`: registers an eventfd there and arms the main
    /// ring's read of it. Without the eventfd (an old kernel) there is no side ring.
    pub(super) fn add_side(&mut self, uring: IoUring) -> io::Result<()> {
        let eventfd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
        uring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        let fd: Arc<OwnedFd> = Arc::new(eventfd);
        let read_key = self.start(
            Ring::WAKE_TOKEN,
            OpKind::WakerRead {
                fd,
                value: Box::new(0),
            },
        );
        self.side = Some(Side {
            uring,
            unsubmitted: false,
            ops: 0,
            read_key,
        });
        Ok(())
    }

    /// Whether `key` is the main ring's read of the side ring's eventfd (its completions are
    /// the engine's own, not the caller's wake-ups).
    pub(super) fn is_side_read(&self, key: u64) -> bool {
        self.side.as_ref().is_some_and(|s| s.read_key == key)
    }

    /// Whether the op with this slab key (step bits cleared) runs on the side ring.
    pub(super) fn on_side(&mut self, key: u64) -> bool {
        self.ops.get_mut(key).is_some_and(|op| op.side)
    }

    /// Before the main ring waits: submits what the side ring has queued and takes what it
    /// completed, until nothing is left queued (a completion can queue a send-file's next
    /// round). True when SQEs are still queued there after [`BACKLOG_SUBMITS_MAX`] submits:
    /// the caller must not block then.
    pub(super) fn side_turn(&mut self) -> io::Result<bool> {
        let mut submits = 0;
        while self.side.as_ref().is_some_and(|s| s.unsubmitted) {
            if submits == BACKLOG_SUBMITS_MAX {
                return Ok(true);
            }
            submits += 1;
            self.stats.submits += 1;
            if let Some(side) = self.side.as_mut() {
                side.uring.submit().or_else(soft_enter_error)?;
                side.unsubmitted = !side.uring.submission().is_empty();
            }
            while self.reap_side_one() {}
        }
        Ok(false)
    }

    /// Handles one CQE of the side ring, if any. False when its completion queue is empty
    /// (or there is no side ring).
    pub(super) fn reap_side_one(&mut self) -> bool {
        let Some(side) = self.side.as_mut() else {
            return false;
        };
        let Some(cqe) = side.uring.completion().next() else {
            return false;
        };
        self.stats.cqes += 1;
        self.handle_cqe(cqe.user_data(), cqe.result(), cqe.flags());
        true
    }
}
