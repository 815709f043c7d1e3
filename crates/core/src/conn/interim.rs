//! An interim response for a request that waits long ([MS-SMB2] 3.3.4.2). A request parked on
//! a lookup (a file system job on a share whose calls may wait on a network, a call to a file's
//! home, an id source) or on file I/O for [`INTERIM_MS`] gets STATUS_PENDING with an AsyncId, as
//! Samba 4.22 sends one after 500 ms for a request that went async: its client then waits for
//! the final answer without its request timer (Windows drops a connection whose request goes
//! unanswered for its session timeout, 60 s by default), however long a stalled FUSE or CephFS
//! mount holds the request. A request waiting behind another request's job about the same open
//! ([`super::behind`]) gets one alike: it waits on the same stalled mount. The final answer carries the AsyncId and grants no credits (the
//! interim granted them). Only a request alone in its frame goes async so (one in a compound
//! waits as before: Windows lets only a compound's last member go async); a CANCEL of it is not
//! acted on while its own lookup or I/O is out (the request ends when that does, [MS-SMB2]
//! 3.3.5.16 lets a server go on), but one still waiting behind another's job leaves the queue
//! answered STATUS_CANCELLED ([`Connection::cancel_behind`]).

use ringshare_wire::consts::{Command, HeaderFlags};
use ringshare_wire::header::{Header, HeaderId};
use ringshare_wire::NtStatus;

use super::{build_frame, error_body, seal_room, BuiltReply, Connection, Job};

/// How long a request waits before its interim response (Samba's `smbd_smb2_request_pending_queue`
/// default).
pub(crate) const INTERIM_MS: u64 = 500;

/// Whether a request of `command` may go async this way: the commands Windows answers
/// asynchronously, not the session's set-up and tear-down ones.
fn may_go_async(command: Command) -> bool {
    matches!(
        command,
        Command::CREATE
            | Command::CLOSE
            | Command::FLUSH
            | Command::READ
            | Command::WRITE
            | Command::LOCK
            | Command::IOCTL
            | Command::QUERY_DIRECTORY
            | Command::QUERY_INFO
            | Command::SET_INFO
    )
}

/// Whether `job`, parked with member `hdr`, is due an interim response at `now_ms`.
fn due(job: &Job, hdr: &Header, now_ms: u64) -> bool {
    job.went_async.is_none()
        && job.members.len() == 1
        && now_ms >= job.parked_ms.saturating_add(INTERIM_MS)
        && may_go_async(hdr.command)
}

impl Connection {
    /// `job` parks now (on a lookup or on file I/O): when it is still parked after
    /// [`INTERIM_MS`] it gets its interim response ([`Connection::send_interims`]).
    pub(super) fn parks(&mut self, job: &mut Job) {
        let now = self.core.now.mono_ms;
        job.parked_ms = now;
        // None, or left from requests parked before and answered since.
        if self.interim_check_ms.is_none_or(|at| at < now) {
            self.interim_check_ms = Some(now + INTERIM_MS);
        }
    }

    /// When [`Connection::send_interims`] should look at the parked requests next (none while
    /// nothing is parked).
    pub(super) fn interim_deadline(&self) -> Option<u64> {
        self.interim_check_ms.filter(|_| self.any_parked())
    }

    /// Whether a request is parked: on a lookup, on file I/O, or behind another's job.
    fn any_parked(&self) -> bool {
        !(self.lookups.is_empty() && self.parked.is_empty()) || self.behind_waits()
    }

    /// The parked requests due an interim response get it; the next look is set while any
    /// request is still parked.
    pub(super) fn send_interims(&mut self) {
        let now = self.core.now.mono_ms;
        if self.interim_deadline().is_none_or(|at| at > now) || self.closing {
            if !self.any_parked() {
                self.interim_check_ms = None;
            }
            return;
        }
        let on_lookups: Vec<u64> = self
            .lookups
            .iter()
            .filter(|(_, p)| due(p.job(), p.hdr(), now))
            .map(|(id, _)| *id)
            .collect();
        for id in on_lookups {
            if let Some(mut p) = self.lookups.remove(&id) {
                let (job, hdr, session_id) = p.interim_parts();
                self.interim(job, &hdr, session_id);
                self.lookups.insert(id, p);
            }
        }
        let on_io: Vec<u64> = self
            .parked
            .iter()
            .filter(|(_, (job, hdr, ..))| due(job, hdr, now))
            .map(|(id, _)| *id)
            .collect();
        for id in on_io {
            if let Some((mut job, hdr, cont, r0)) = self.parked.remove(&id) {
                self.interim(&mut job, &hdr, r0.session_id);
                self.parked.insert(id, (job, hdr, cont, r0));
            }
        }
        let mut behind = std::mem::take(&mut self.behind);
        for job in behind.jobs_mut() {
            let Some(hdr) = job.waiting_header() else {
                continue;
            };
            if due(job, &hdr, now) {
                self.interim(job, &hdr, hdr.session_id);
            }
        }
        self.behind = behind;
        self.interim_check_ms = self.any_parked().then_some(now + INTERIM_MS / 2);
    }

    /// Send `job`'s member `hdr` its interim response now: STATUS_PENDING, a new AsyncId, the
    /// credits its request is granted, signed or sealed as its final answer will be.
    fn interim(&mut self, job: &mut Job, hdr: &Header, session_id: u64) {
        let async_id = self.next_async_id;
        self.next_async_id += 1;
        let reply = self.interim_reply(job, hdr, session_id, async_id);
        let (frame, _) = build_frame(
            &mut vec![reply],
            seal_room(job.encrypted),
            &mut self.core.spare,
        );
        tracing::debug!(peer = %self.core.peer, command = ?hdr.command, "an interim response for a request that waits");
        self.send_frame(frame, job.encrypted, None);
        job.went_async = Some((hdr.message_id, async_id));
    }
}

impl Connection {
    /// The interim response to `job`'s member `hdr` going async as `async_id`: ASYNC flag, the
    /// AsyncId, STATUS_PENDING, the credits its request is granted, signed unless its frame is
    /// sealed (as its final answer will be). Sent at once ([`Connection::send_interims`]) or
    /// with its job's frame (`go_async`).
    pub(super) fn interim_reply(
        &mut self,
        job: &Job,
        hdr: &Header,
        session_id: u64,
        async_id: u64,
    ) -> BuiltReply {
        let mut ahdr = hdr.clone();
        ahdr.id = HeaderId::Async { async_id };
        let mut interim = Header::response_to(&ahdr, NtStatus::PENDING);
        interim.credits = self.grant(hdr);
        let sign_key = match job.encrypted {
            Some(_) => None,
            None => self.response_signing_key(hdr, session_id, None, NtStatus::PENDING),
        };
        BuiltReply {
            hdr: interim,
            body: error_body(),
            data: None,
            data_headroom: 0,
            file: None,
            sign_key,
            compress: None,
        }
    }
}

/// A reply `hdr` to a request of `job` that got an interim response answers with its AsyncId
/// (true: its credits were granted with the interim response).
pub(super) fn answers_async(job: &Job, req_message_id: u64, hdr: &mut Header) -> bool {
    match job.went_async {
        Some((message_id, async_id)) if message_id == req_message_id => {
            hdr.id = HeaderId::Async { async_id };
            hdr.flags.insert(HeaderFlags::ASYNC_COMMAND);
            true
        }
        _ => false,
    }
}
