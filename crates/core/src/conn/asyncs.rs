//! Requests that went async ([MS-SMB2] 3.3.4.2): the interim STATUS_PENDING,
//! retries, the final reply, CANCEL (3.3.5.16), and what closing a handle or
//! a session does to the operations waiting on it.

use super::handles;
use ringshare_wire::header::{Header, HeaderId};
use ringshare_wire::NtStatus;

use super::{build_frame, error_body, seal_room, AsyncOp, BuiltReply, Connection, Job, Reply};
use crate::cmd;
use crate::io::Output;
use crate::limits;
use crate::lookup::LookupRequest;
use crate::server::lock;

impl Connection {
    pub(super) fn go_async(
        &mut self,
        job: &mut Job,
        hdr: Header,
        session_id: u64,
        mut work: cmd::AsyncWork,
    ) {
        if job.next < job.members.len() {
            // Only the last member of a compound may go async; Windows fails one
            // in the middle with INTERNAL_ERROR ([MS-SMB2] <159>), and so do we.
            cmd::cancel_async(&mut self.core, session_id, &mut work);
            let reply = Reply::with_status(NtStatus::INTERNAL_ERROR, Vec::new());
            self.push_reply(job, &hdr, session_id, reply);
            return;
        }
        if self.async_ops.len() >= limits::ASYNC_OPS_PER_CONNECTION_MAX {
            let reply = Reply::with_status(NtStatus::INSUFFICIENT_RESOURCES, Vec::new());
            self.push_reply(job, &hdr, session_id, reply);
            return;
        }
        // A request that got its interim response while it waited ([`super::interim`]) keeps
        // its AsyncId and gets no second one.
        let told = job
            .went_async
            .filter(|(message_id, _)| *message_id == hdr.message_id);
        let async_id = match told {
            Some((_, async_id)) => async_id,
            None => {
                self.next_async_id += 1;
                self.next_async_id - 1
            }
        };
        let mut ahdr = hdr.clone();
        ahdr.id = HeaderId::Async { async_id };
        if told.is_none() {
            let interim = self.interim_reply(job, &hdr, session_id, async_id);
            job.replies.push(interim);
        }
        if let cmd::AsyncWork::Notify(n) = &mut work {
            // Queued on its watcher; if changes are there already, its answer
            // comes through the mailbox, after the interim.
            cmd::notify::queued(&self.core, n, async_id);
        }
        self.async_ops.insert(
            async_id,
            AsyncOp {
                hdr: ahdr,
                arrived_us: job.arrived_us,
                session_id,
                encrypted: job.encrypted.is_some(),
                work,
            },
        );
    }

    /// Try an async operation again; send its final reply when it is done.
    pub(super) fn poll_async(&mut self, async_id: u64) {
        let Some(mut op) = self.async_ops.remove(&async_id) else {
            return;
        };
        let polled = cmd::poll_async(&mut self.core, op.session_id, &mut op.work);
        self.polled(async_id, op, polled);
        self.post_to_cluster();
    }

    /// The answer to lookup `id` is in, and no parked request waits for it: an async
    /// operation that asked it ([`cmd::Polled::Ask`]) goes on, if one did.
    pub(super) fn async_answered(&mut self, id: u64, done: crate::lookup::LookupDone) {
        let asked_by = match self.closing {
            true => None,
            false => self
                .async_ops
                .iter()
                .find(|(_, op)| op.work.asks(id))
                .map(|(aid, _)| *aid),
        };
        let Some(async_id) = asked_by else {
            // A CREATE's file system job's open nobody takes now (its connection closing, the
            // CREATE cancelled) goes on the pool.
            if let crate::lookup::LookupDone::Fs(done) = done {
                cmd::create::let_go_unused(&mut self.core, done);
                self.post_to_cluster();
            }
            return;
        };
        let Some(mut op) = self.async_ops.remove(&async_id) else {
            return;
        };
        let polled = cmd::answered_async(&mut self.core, op.session_id, &mut op.work, done);
        self.polled(async_id, op, polled);
        self.post_to_cluster();
    }

    /// What trying `op` came to: its final reply, another wait, or a question asked away
    /// from the I/O thread (it waits for the answer, the thread does not).
    fn polled(&mut self, async_id: u64, mut op: AsyncOp, polled: cmd::Polled) {
        match polled {
            cmd::Polled::Done(result) => {
                let reply = result.unwrap_or_else(|s| Reply::with_status(s, Vec::new()));
                self.send_async_final(op, reply);
            }
            cmd::Polled::Wait => {
                self.async_ops.insert(async_id, op);
            }
            cmd::Polled::Ask(ask) => {
                let id = self.next_io_id;
                self.next_io_id += 1;
                self.outputs
                    .push_back(Output::Lookup(Box::new(LookupRequest { id, ask })));
                op.work.asked(id);
                self.async_ops.insert(async_id, op);
            }
        }
    }

    fn send_async_final(&mut self, op: AsyncOp, reply: Reply) {
        if let Some(m) = &self.core.metrics {
            crate::conn::frame::reply_sent(m, op.hdr.command, &reply, op.arrived_us);
        }
        let mut hdr = Header::response_to(&op.hdr, reply.status);
        hdr.credits = 0;
        let sign_key = if op.encrypted {
            None
        } else {
            self.response_signing_key(&op.hdr, op.session_id, None, reply.status)
        };
        let body = if reply.body.is_empty() {
            error_body()
        } else {
            reply.body
        };
        let encrypted = op.encrypted.then_some(op.session_id);
        let (frame, _) = build_frame(
            &mut vec![BuiltReply {
                hdr,
                body,
                data: reply.data,
                data_headroom: reply.data_headroom as usize,
                file: None,
                sign_key,
                compress: None,
            }],
            seal_room(encrypted),
            &mut self.core.spare,
        );
        self.send_frame(frame, encrypted, None);
    }

    /// [MS-SMB2] 3.3.5.16: CANCEL. Finds the async (or still-waiting) request and
    /// completes it with STATUS_CANCELLED. No reply to the CANCEL itself.
    pub(super) fn cancel(&mut self, hdr: &Header) {
        let target = match hdr.async_id() {
            Some(aid) => self.async_ops.contains_key(&aid).then_some(aid),
            None => self
                .async_ops
                .iter()
                .find(|(_, op)| {
                    op.hdr.message_id == hdr.message_id && op.session_id == hdr.session_id
                })
                .map(|(id, _)| *id),
        };
        if let Some(aid) = target {
            if let Some(mut op) = self.async_ops.remove(&aid) {
                // A lock whose home is being asked ends with the answer.
                if op.session_id != hdr.session_id || op.work.cancel_when_answered() {
                    self.async_ops.insert(aid, op);
                    return;
                }
                cmd::cancel_async(&mut self.core, op.session_id, &mut op.work);
                self.send_async_final(op, Reply::with_status(NtStatus::CANCELLED, Vec::new()));
                self.post_to_cluster();
            }
        } else {
            self.cancel_behind(hdr);
        }
    }

    /// The waiting CHANGE_NOTIFYs of `session_id` on the directories that
    /// `which` ends complete with NOTIFY_CLEANUP ([MS-SMB2] 3.3.5.10,
    /// 3.3.5.19). For a TREE_DISCONNECT or LOGOFF this runs before the
    /// command, while the session can still sign them (Samba answers them
    /// before the reply too).
    pub(super) fn cleanup_notifies(&mut self, session_id: u64, which: NotifyScope) {
        let ended = |open_id: u64| match which {
            NotifyScope::Open(id) => open_id == id,
            NotifyScope::Tree(t) => {
                handles::by_id(&self.core, session_id, open_id).is_some_and(|o| o.tree_id == t)
            }
            NotifyScope::Session => true,
        };
        let ids: Vec<u64> = self
            .async_ops
            .iter()
            .filter(|(_, op)| {
                op.session_id == session_id
                    && matches!(&op.work, cmd::AsyncWork::Notify(n) if ended(n.open_id))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(mut op) = self.async_ops.remove(&id) {
                cmd::cancel_async(&mut self.core, op.session_id, &mut op.work);
                self.send_async_final(op, Reply::with_status(NtStatus::NOTIFY_CLEANUP, Vec::new()));
            }
        }
    }

    /// Before a LOGOFF closes a session's files: close the ones no blocking
    /// lock waits on first, and give the waiting locks one last try, as a
    /// server closing the files one by one would (Windows and Samba answer a
    /// lock that became grantable this way with success).
    pub(super) fn settle_waiting_locks(&mut self, session_id: u64) {
        let waiting: Vec<(u64, u64)> = self
            .async_ops
            .iter()
            .filter_map(|(id, op)| match &op.work {
                cmd::AsyncWork::Lock(p) if op.session_id == session_id => Some((*id, p.open_id)),
                _ => None,
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        let server = self.core.server.clone();
        if let Some(sref) = self.core.session(session_id) {
            let opens = crate::opens::take_where(&mut lock(&sref), |o| {
                !waiting.iter().any(|(_, open)| *open == o.id)
            });
            let asks = crate::opens::close_all(&server, opens);
            self.core.post_closes(asks);
        }
        for (id, _) in waiting {
            self.poll_async(id);
        }
    }

    /// Session `session_id` logged off: its async operations end unanswered, letting go of
    /// what they hold (a CREATE run again that waits for its file's home or its record).
    pub(super) fn end_async_ops(&mut self, session_id: u64) {
        let ids: Vec<u64> = self
            .async_ops
            .iter()
            .filter(|(_, op)| op.session_id == session_id)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(mut op) = self.async_ops.remove(&id) {
                cmd::cancel_async(&mut self.core, op.session_id, &mut op.work);
            }
        }
        self.post_to_cluster();
    }

    /// After a close or unlock, waiting locks may now succeed: retry them.
    pub fn retry_waiting(&mut self) {
        let ids: Vec<u64> = self.async_ops.keys().copied().collect();
        for id in ids {
            self.poll_async(id);
        }
    }
}

/// Which of a session's directory handles a [`Connection::cleanup_notifies`]
/// is about.
#[derive(Debug, Clone, Copy)]
pub(super) enum NotifyScope {
    /// The handle with this volatile id (it was closed).
    Open(u64),
    /// Every handle of this tree (TREE_DISCONNECT).
    Tree(u32),
    /// Every handle of the session (LOGOFF, or the session ended).
    Session,
}
