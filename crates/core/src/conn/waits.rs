//! A connection's side of oplock and lease breaks: the notices other
//! connections leave in its mailbox (break notifications to send, requests to
//! retry), and the requests it parked while breaks they caused are
//! acknowledged (crates/core/src/oplock.rs decides the breaks).

use ringshare_wire::consts::{Command, HeaderFlags};
use ringshare_wire::header::Header;

use super::{build_frame, seal_room, BuiltReply, Connection, Job, Req};
use crate::cmd;
use crate::io::Now;
use crate::server::lock;

/// A job parked on a CREATE that waits for break acknowledgments.
pub(super) struct Waiting {
    pub(super) job: Box<Job>,
    pub(super) hdr: Header,
    pub(super) session_id: u64,
    pub(super) tree_id: u32,
    pub(super) related_file_id: Option<(u64, u64)>,
    /// (start, end) of the CREATE in the job's frame, and its index among the job's members.
    pub(super) member: (usize, usize),
    pub(super) index: usize,
    pub(super) sole: bool,
    pub(super) related: bool,
    pub(super) retry_at_ms: u64,
}

impl Connection {
    /// True when other connections left notices (break notifications) for
    /// this one: call [`Connection::handle_mail`].
    pub fn has_mail(&self) -> bool {
        self.mailbox.has_mail()
    }

    /// From now on, a notice left for this connection when it had none calls `bell` (on the
    /// posting thread) instead of waking every driver thread: the driver then calls
    /// [`Connection::handle_mail`] for this connection alone.
    pub fn set_mail_bell(&self, bell: crate::server::Bell) {
        self.mailbox.set_bell(bell);
    }

    /// Send what other connections asked this one to send.
    pub fn handle_mail(&mut self, now: Now) {
        self.core.now = now;
        self.send_mail();
    }

    pub(super) fn send_mail(&mut self) {
        let mut retry = false;
        for notice in self.mailbox.take() {
            if self.closing {
                return;
            }
            match notice {
                crate::server::Notice::Retry => retry = true,
                crate::server::Notice::Notify { async_id } => self.poll_async(async_id),
                crate::server::Notice::SessionEnded { session_id } => {
                    self.cleanup_notifies(session_id, super::asyncs::NotifyScope::Session);
                }
                crate::server::Notice::SharesChanged => self.follow_new_shares(),
                crate::server::Notice::Drop => {
                    self.disconnect("this cluster node is fenced");
                    return;
                }
                n => self.send_or_hold(n),
            }
        }
        if retry {
            self.retry_waiting_creates();
        }
    }

    /// The server's shares were replaced: each session this connection
    /// carries looks at its trees; requests waiting on a tree that went end.
    fn follow_new_shares(&mut self) {
        let sessions: Vec<(u64, crate::state::SessionRef)> = self
            .core
            .sessions
            .iter()
            .map(|(id, ch)| (*id, std::sync::Arc::clone(&ch.session)))
            .collect();
        for (session_id, sref) in sessions {
            for tree_id in cmd::tree::follow_new_shares(&self.core.server, &sref) {
                self.cleanup_notifies(session_id, super::asyncs::NotifyScope::Tree(tree_id));
                let _ = cmd::tree::drop_tree(&mut self.core, &sref, tree_id);
            }
        }
    }

    /// Try the parked CREATEs whose time has come (all of them with `all`):
    /// one that no longer waits is answered and its job goes on; one that asks its file's home
    /// or the cluster's store parks on the question as a fresh request does.
    pub(super) fn retry_creates(&mut self, all: bool) {
        let now = self.core.now.mono_ms;
        let mut keep = Vec::new();
        for mut w in std::mem::take(&mut self.waiting) {
            if self.closing {
                return;
            }
            if !all && w.retry_at_ms > now {
                keep.push(w);
                continue;
            }
            let (start, end) = w.member;
            let outcome = {
                let req = Req {
                    hdr: w.hdr.clone(),
                    msg: &w.job.frame[start..end],
                    msg_offset: start,
                    detached: None,
                    session_id: w.session_id,
                    tree_id: w.tree_id,
                    related_file_id: w.related_file_id,
                    sole: w.sole,
                    encrypted: w.job.encrypted.is_some(),
                };
                cmd::create::retry(&mut self.core, &req)
            };
            let answered = match outcome {
                Ok(cmd::Handled::WaitForBreaks) => {
                    w.retry_at_ms = now + crate::files::oplock::BREAK_RETRY_MS;
                    keep.push(w);
                    continue;
                }
                Ok(cmd::Handled::Lookup(parked)) => {
                    let cmd::Parked { ask, cont } = *parked;
                    let (index, session_id, related) = (w.index, w.session_id, w.related);
                    self.park_on_lookup(
                        w.job,
                        w.hdr,
                        index,
                        (session_id, related),
                        ask,
                        cont,
                        None,
                    );
                    continue;
                }
                Ok(cmd::Handled::Reply(reply)) => Ok(reply),
                Ok(_) => Err(ringshare_wire::NtStatus::INTERNAL_ERROR),
                Err(status) => Err(status),
            };
            let Some(job) =
                self.member_done(w.job, &w.hdr, w.session_id, w.related, None, answered)
            else {
                return;
            };
            self.run(job);
        }
        self.waiting.extend(keep);
        self.post_to_cluster();
    }

    /// After something that can end a break (an acknowledgment, a close):
    /// every waiting CREATE tries again now.
    pub(super) fn retry_waiting_creates(&mut self) {
        if !self.waiting.is_empty() {
            self.retry_creates(true);
        }
        let ids: Vec<u64> = self
            .async_ops
            .iter()
            .filter(|(_, op)| matches!(op.work, cmd::AsyncWork::Create(_)))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.poll_async(id);
        }
    }

    /// Send a break notification another connection decided on ([MS-SMB2]
    /// 3.3.4.6, 3.3.4.7): MessageId all ones, SessionId 0, not signed;
    /// encrypted with the session's key when its client encrypts. Dropped
    /// when the session is no longer on this connection.
    pub(super) fn send_notice(&mut self, notice: crate::server::Notice) {
        use crate::server::Notice;
        use ringshare_wire::misc::OplockBreak;
        let (session_id, body) = match notice {
            Notice::Retry
            | Notice::SessionEnded { .. }
            | Notice::Notify { .. }
            | Notice::SharesChanged
            | Notice::Drop => return,
            Notice::OplockBreak {
                session_id,
                file_id,
                level,
            } => {
                let mut b = Vec::with_capacity(24);
                OplockBreak::Oplock {
                    oplock_level: ringshare_wire::consts::OplockLevel(level),
                    file_id,
                }
                .encode(&mut b);
                (session_id, b)
            }
            Notice::LeaseBreak {
                session_id,
                notification,
            } => {
                let mut b = Vec::with_capacity(44);
                OplockBreak::LeaseBreakNotification(notification).encode(&mut b);
                (session_id, b)
            }
        };
        let Some(ch) = self.core.sessions.get(&session_id) else {
            tracing::debug!(peer = %self.core.peer, session_id, "break for a session not on this connection");
            return;
        };
        let encrypt = {
            let s = lock(&ch.session);
            s.encrypt_key.is_some()
                && (ch.client_encrypts || (s.encrypt_required && !self.core.transport_secure()))
        };
        let hdr = Header {
            command: Command::OPLOCK_BREAK,
            flags: HeaderFlags::SERVER_TO_REDIR,
            message_id: u64::MAX,
            ..Header::default()
        };
        let encrypted = encrypt.then_some(session_id);
        let (frame, _) = build_frame(
            &mut vec![BuiltReply {
                hdr,
                body,
                data: None,
                data_headroom: 0,
                file: None,
                sign_key: None,
                compress: None,
            }],
            seal_room(encrypted),
            &mut self.core.spare,
        );
        tracing::debug!(peer = %self.core.peer, session_id, "sending a break notification");
        self.send_frame(frame, encrypted, None);
    }
}
