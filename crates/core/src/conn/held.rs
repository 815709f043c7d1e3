//! A job whose answer waits ([`crate::backoff`]: the logon of a backed-off
//! address). It is set aside with the rest of its frame until its time, and
//! frames that arrive meanwhile wait behind it, in order: a client gets no
//! more answers by sending more requests.

use std::collections::VecDeque;

use super::{Connection, Job};

/// Frames a connection keeps while an answer waits; one more closes it.
const LATER_FRAMES_MAX: usize = 64;
/// Bytes of those frames at most; more close the connection.
const LATER_BYTES_MAX: usize = 16 << 20;

/// The job set aside (with the time it goes on) and the frames behind it.
#[derive(Default)]
pub(super) struct Held {
    job: Option<(u64, Box<Job>)>,
    later: VecDeque<Vec<u8>>,
    later_bytes: usize,
}

impl Held {
    pub(super) fn is_holding(&self) -> bool {
        self.job.is_some()
    }

    /// When the job goes on.
    pub(super) fn deadline(&self) -> Option<u64> {
        self.job.as_ref().map(|(t, _)| *t)
    }
}

impl Connection {
    /// The member just run asked for its answer to wait: the job goes on at
    /// `until_ms`.
    pub(super) fn hold(&mut self, job: Box<Job>, until_ms: u64) {
        self.held.job = Some((until_ms, job));
    }

    /// A frame that arrived: kept (`None`) while an answer waits, else given back.
    pub(super) fn keep_while_held(&mut self, frame: Vec<u8>) -> Option<Vec<u8>> {
        if !self.held.is_holding() {
            return Some(frame);
        }
        self.held.later_bytes += frame.len();
        self.held.later.push_back(frame);
        if self.held.later.len() > LATER_FRAMES_MAX || self.held.later_bytes > LATER_BYTES_MAX {
            self.disconnect("too many requests while a logon answer waits");
        }
        None
    }

    /// When its time came, the held job goes on, then the frames that waited
    /// behind it (until one is held again).
    pub(super) fn release_held(&mut self) {
        if self
            .held
            .deadline()
            .is_none_or(|t| t > self.core.now.mono_ms)
        {
            return;
        }
        if let Some((_, job)) = self.held.job.take() {
            self.run(job);
        }
        while !self.closing && !self.held.is_holding() {
            let Some(frame) = self.held.later.pop_front() else {
                break;
            };
            self.held.later_bytes -= frame.len();
            self.receive_frame(frame);
        }
    }
}
