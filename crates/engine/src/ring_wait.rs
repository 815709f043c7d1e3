//! Submitting and waiting, and the quiet sends a wait does not end for.
//!
//! A send usually completes while `io_uring_enter` submits it (the socket had room), so the
//! wait that follows in the same call ends at once for a completion its caller has nothing to
//! do about: a reply whose connection has nothing else to send, a call to another node whose
//! answer is what the caller waits for. Each such early end costs the caller a turn of its loop
//! and a second `io_uring_enter`. Sends started inside [`Ring::quietly`] are quiet: their
//! success alone does not end a wait ([`Ring::submit_and_wait`] waits on for something else,
//! within the same timeout), and it is handed over with the next completion that does. An
//! error ends the wait as always, and [`Ring::need`] makes a quiet send loud again when its
//! caller comes to need its end (more queued behind it).

use std::io;
use std::time::{Duration, Instant};

use io_uring::types;

use super::{soft_enter_error, OpKey, Ring, BACKLOG_SUBMITS_MAX};

impl Ring {
    /// Submits every queued SQE and waits until at least `min_complete`
    /// completions are available or `timeout` passes, in one `io_uring_enter`
    /// (plus one per SQ-full flush, and one more per quiet send that ended the
    /// wait alone). A timeout or a signal is not an error: it returns `Ok` and
    /// `next_completion` may then yield nothing.
    /// Returns the number of SQEs the kernel consumed.
    pub fn submit_and_wait(
        &mut self,
        min_complete: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        self.give_back_lent();
        let mut submitted = 0;
        let mut flushes = 0;
        while self.flush_backlog() && flushes < BACKLOG_SUBMITS_MAX {
            // SQ full and more waiting: hand the SQ to the kernel and go on.
            flushes += 1;
            self.stats.submits += 1;
            submitted += self.uring.submit().or_else(soft_enter_error)?;
        }
        // Do not block while something is already waiting to be reaped, or
        // while SQEs are still parked (their ops must not starve).
        let want = if self.ready.is_empty() && self.backlog.is_empty() {
            min_complete
        } else {
            0
        };
        let quiet = want > 0 && self.quiet_in_flight > 0;
        let since = (quiet && timeout.is_some()).then(Instant::now);
        let (n, mut ended) = self.enter(want, timeout)?;
        submitted += n;
        while quiet && !ended && self.only_quiet_came() {
            let left = match (timeout, since) {
                (Some(t), Some(s)) => match t.checked_sub(s.elapsed()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => break,
                },
                _ => None,
            };
            let (n, e) = self.enter(want, left)?;
            submitted += n;
            ended = e;
        }
        Ok(submitted)
    }

    /// Submits queued SQEs without waiting.
    pub fn submit(&mut self) -> io::Result<usize> {
        self.submit_and_wait(0, None)
    }

    /// Runs `f` with the sends it starts ([`Ring::send`], [`Ring::send_vectored`]) quiet: their
    /// success does not end a wait by itself (this module's note). For sends whose end their
    /// caller needs only when it comes with other news, or marks with [`Ring::need`] once it
    /// does.
    pub fn quietly<R>(&mut self, f: impl FnOnce(&mut Ring) -> R) -> R {
        let was = std::mem::replace(&mut self.quiet, true);
        let r = f(self);
        self.quiet = was;
        r
    }

    /// The quiet send `key` (if it is still in flight) ends a wait again when it completes.
    pub fn need(&mut self, key: OpKey) {
        if let Some(op) = self.ops.get_mut(key.0) {
            if op.quiet {
                op.quiet = false;
                self.quiet_in_flight -= 1;
            }
        }
    }

    /// One `io_uring_enter`: submit, and wait for `want` completions within `timeout`.
    /// Also whether the wait ended without them (the timeout, a signal).
    fn enter(&mut self, want: usize, timeout: Option<Duration>) -> io::Result<(usize, bool)> {
        self.stats.submits += 1;
        let result = match timeout {
            Some(after) => {
                let ts = types::Timespec::from(after);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.uring.submitter().submit_with_args(want, &args)
            }
            None => self.uring.submitter().submit_and_wait(want),
        };
        let ended = result.is_err();
        Ok((result.or_else(soft_enter_error)?, ended))
    }

    /// Reaps what the completion queue holds: true when all that came (at least one) were
    /// quiet sends' successes and nothing else waits (SQEs parked for room).
    fn only_quiet_came(&mut self) -> bool {
        while self.reap_one() {}
        !self.ready.is_empty() && self.backlog.is_empty() && self.ready.iter().all(|c| c.quiet)
    }
}
