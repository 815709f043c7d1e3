//! One SMB2 connection: frames in, frames and I/O requests out ([MS-SMB2] 3.3.5).
//!
//! `receive` takes one direct-TCP frame payload. A frame holds one request or
//! a compound chain; each member is checked in the order of [MS-SMB2] 3.3.5.2
//! (credits, session, signature, tree) and dispatched to its command module.
//! A command that needs file I/O parks the rest of its chain as a [`Job`]
//! until the driver completes the I/O; a command that must wait (a blocking
//! lock) becomes an async operation with an interim STATUS_PENDING reply.

use std::collections::VecDeque;
use std::sync::Arc;

use ringshare_crypto::encrypt::CipherKey;
use ringshare_crypto::sign::{NonceInfo, SigningKey};
use ringshare_vfs::Node;
use ringshare_wire::consts::{Command, Dialect, HeaderFlags};
use ringshare_wire::create::CloseRequest;
use ringshare_wire::file::{WriteRequest, WRITE_REQUEST_DATA_OFFSET};
use ringshare_wire::framing;
use ringshare_wire::header::{self, Header, HeaderId, Protocol};
use ringshare_wire::transform::TRANSFORM_HEADER_LEN;
use ringshare_wire::{NtStatus, WriteExt};

use crate::cmd::{self, Cont, Handled};
use crate::credits::CreditWindow;
use crate::exchange::{handles, signature_ok, ConnCore, FileRange, RareReply, Reply, Req};
use crate::idmap::IdMap;
use crate::io::{Entropy, Frame, IoDone, IoOp, IoRequest, Now, Output, SendFile};
use crate::limits;
use crate::server::{lock, ServerState};
use crate::spare::SpareBufs;
use crate::state::TreeKind;
use crate::transform;

mod asyncs;
mod behind;
mod break_order;
mod checks;
mod compress;
mod frame;
mod interim;
use frame::{build_frame, frame_bytes, seal_room};
mod held;
mod lookups;
mod members;
mod waits;

use waits::Waiting;

/// A frame being processed: its members, their replies so far, and where the
/// chain stands.
#[derive(Default)]
struct Job {
    frame: Vec<u8>,
    /// (start, end) of each member in `frame`.
    members: Vec<(usize, usize)>,
    next: usize,
    /// Members whose credits were taken (one that runs again after a lookup is not charged twice).
    charged: usize,
    replies: Vec<BuiltReply>,
    /// Compound state: the last session, tree and file id, and the last status.
    last_session: u64,
    last_tree: u32,
    last_file: Option<(u64, u64)>,
    /// The open the member being answered named ([`ConnCore::named_file`]).
    named_file: Option<(u64, u64)>,
    /// The error later related members inherit: a failed CREATE, or a chain
    /// whose first member was marked related ([MS-SMB2] 3.3.5.2.7.2).
    related_error: Option<NtStatus>,
    /// The frame arrived encrypted for this session: replies go back encrypted.
    encrypted: Option<u64>,
    /// Key and nonce reserved by a member whose session ends with it (LOGOFF).
    seal: Option<(Arc<CipherKey>, u64)>,
    /// The payload of the frame's one WRITE was received apart (its length).
    detached: Option<usize>,
    /// When it arrived, on the metrics' clock (0 without metrics).
    arrived_us: u64,
    /// The member that runs again after its file system job, or is let go from behind
    /// another's ([`behind`]): it is not held behind one again.
    resumes: Option<usize>,
    /// The order of the open whose file system job that member waited for: its file I/O, if
    /// it parks on some, holds the requests behind it too ([`behind`]).
    fs_order: Option<u64>,
    /// The order of an open one of its members held (a job or an ordered I/O of it out): every
    /// request waiting behind that open came after this job, so a later member about it goes
    /// before them, not behind ([`behind`]).
    came_first: Option<u64>,
    /// When it last parked on a lookup or file I/O (monotonic ms), and the MessageId and
    /// AsyncId of its member that got an interim response meanwhile ([`interim`]).
    parked_ms: u64,
    went_async: Option<(u64, u64)>,
}

impl Job {
    /// Back to the state a new frame's job starts from, keeping its lists' room.
    fn clear(&mut self) {
        let (mut members, mut replies) = (
            std::mem::take(&mut self.members),
            std::mem::take(&mut self.replies),
        );
        members.clear();
        replies.clear();
        *self = Job {
            members,
            replies,
            ..Job::default()
        };
    }

    /// The file a related member after the one just answered works on ([MS-SMB2]
    /// 3.3.5.2.7.2): the open it `made` (a CREATE), else the one it named, else, for a
    /// related member, the one it inherited; an unrelated member that named none leaves
    /// none.
    fn settle_last_file(&mut self, made: Option<(u64, u64)>, related: bool) {
        let named = self.named_file.take();
        self.last_file = made.or(named).or(self.last_file.filter(|_| related));
    }
}

/// The session, tree and (for a related member) file id a job's member runs with.
type MemberIds = (u64, u32, Option<(u64, u64)>);

/// A reply ready to be framed: header + body and optional data.
struct BuiltReply {
    hdr: Header,
    body: Vec<u8>,
    data: Option<Vec<u8>>,
    data_headroom: usize,
    file: Option<FileRange>,
    sign_key: Option<SigningKey>,
    compress: Option<Box<crate::exchange::compress::CompressAsk>>,
}

/// An operation that went async.
struct AsyncOp {
    hdr: Header,
    /// When its request arrived, on the metrics' clock.
    arrived_us: u64,
    session_id: u64,
    /// The request arrived encrypted: so does the final reply.
    encrypted: bool,
    work: cmd::AsyncWork,
}

/// An SMB2 connection.
pub struct Connection {
    core: ConnCore,
    credits: CreditWindow,
    outputs: VecDeque<Output>,
    parked: IdMap<u64, (Box<Job>, Header, Cont, Req0)>,
    /// Jobs parked on a lookup, by its id (ids shared with `parked`).
    lookups: IdMap<u64, lookups::Parked>,
    next_io_id: u64,
    async_ops: IdMap<u64, AsyncOp>,
    next_async_id: u64,
    /// Jobs whose CREATE waits for oplock or lease break acknowledgments.
    waiting: Vec<Waiting>,
    /// Notices other connections left for this one (break notifications).
    mailbox: Arc<crate::server::Mailbox>,
    closing: bool,
    /// When the connection was accepted and when its last request came
    /// (monotonic ms), for the handshake and idle timeouts.
    accepted_ms: Option<u64>,
    last_request_ms: u64,
    /// Finished jobs, emptied, reused by the next frames: a job is built in place
    /// and moved as a pointer (no allocation or copy of it per request). Several
    /// jobs can be parked on I/O at once: up to [`SPARE_JOBS_MAX`] are kept.
    #[allow(clippy::vec_box)] // the boxes are what is reused: a job moves as a pointer
    spare_jobs: Vec<Box<Job>>,
    /// A job whose answer waits, and the frames behind it.
    held: held::Held,
    /// Jobs waiting behind an open's file system job, and what they wait for ([`behind`]).
    behind: behind::Behind,
    /// Break notifications waiting for the CREATE answers that tell their clients of what they
    /// break, with when each came ([`break_order`]).
    held_breaks: Vec<(u64, crate::server::Notice)>,
    /// When to look for parked requests due an interim response ([`interim`]); none while
    /// nothing is parked.
    interim_check_ms: Option<u64>,
}

/// Emptied jobs a connection keeps for its next frames.
const SPARE_JOBS_MAX: usize = 64;
/// A list longer than this (a long compound's) is not kept, so that a
/// client cannot make a connection hold 64 lists of 64 replies.
const SPARE_JOB_VEC_CAPACITY_MAX: usize = 8;

/// The parts of a request needed to finish it after I/O.
#[derive(Clone)]
pub(crate) struct Req0 {
    pub session_id: u64,
    /// The order of the open whose file system job the request waited for before its I/O
    /// ([`behind`]).
    pub fs_order: Option<u64>,
}

impl Connection {
    pub fn new(server: Arc<ServerState>, peer: String, entropy: Box<dyn Entropy>) -> Connection {
        let conn_id = server.new_connection_id();
        let mailbox = server.mail.open_mailbox(conn_id, &peer);
        Connection {
            core: ConnCore {
                conn_id,
                authenticated: false,
                user_logged_on: false,
                server,
                peer_ip: crate::peers::ip_of(&peer),
                transport: Default::default(),
                hold_reply_until_ms: None,
                named_file: None,
                peer,
                negotiated: None,
                wildcard_sent: false,
                preauth: None,
                sessions: IdMap::default(),
                entropy,
                now: Now::default(),
                send_file: false,
                spare: SpareBufs::default(),
                aapl: Default::default(),
                metrics: None,
                domain_answer: None,
                ids_wanted: None,
                home_kept: None,
                fs_kept: None,
                cluster_posts: Vec::new(),
                create_waits: None,
                lease_waits: Vec::new(),
                quota_handles: Default::default(),
            },
            credits: CreditWindow::new(),
            outputs: VecDeque::new(),
            parked: IdMap::default(),
            lookups: IdMap::default(),
            next_io_id: 1,
            async_ops: IdMap::default(),
            next_async_id: 1,
            waiting: Vec::new(),
            mailbox,
            closing: false,
            accepted_ms: None,
            last_request_ms: 0,
            spare_jobs: Vec::new(),
            held: Default::default(),
            behind: Default::default(),
            held_breaks: Vec::new(),
            interim_check_ms: None,
        }
    }

    /// Count this connection's requests in `metrics` (its ring's).
    pub fn set_metrics(&mut self, metrics: Arc<crate::metrics::Metrics>) {
        self.core.metrics = Some(metrics);
    }

    /// Server-wide id of this connection (the channel id sessions record).
    pub fn id(&self) -> u64 {
        self.core.conn_id
    }

    /// What carries this connection (TCP unless said): over QUIC only
    /// dialect 3.1.1 is negotiated ([MS-SMB2] 2.1), and `status` shows it.
    pub fn set_transport(&mut self, transport: crate::server::Transport) {
        self.core.transport = transport;
        let id = self.core.conn_id;
        self.core.server.mail.note_transport(id, transport);
    }

    /// Lets the core queue [`Output::SendFile`] for unsigned, unencrypted
    /// READs alone in their frame (the driver splices the data). Off by default.
    pub fn set_send_file(&mut self, on: bool) {
        self.core.send_file = on;
    }

    /// Whether the payload of the large frame starting with `head` (the SMB2
    /// message up to its data, [`WRITE_REQUEST_DATA_OFFSET`] bytes) may be
    /// received apart from it: `Some(payload length)` for a WRITE alone in its
    /// frame, unsigned, not encrypted, in the plain layout, of at least
    /// [`WRITE_SPLICE_LEN_MIN`] bytes, when the driver may splice
    /// ([`Connection::set_send_file`]). The driver then receives the payload
    /// whole (into a pipe) and calls [`Connection::receive_detached`]; every
    /// other check is made there, as for any request. Not while the driver
    /// keeps another such payload for a WRITE that waits
    /// ([`Connection::holds_payload`]): one at a time.
    pub fn detachable_write(&self, head: &[u8], frame_len: usize) -> Option<usize> {
        let held = self.held.is_holding() || self.holds_payload();
        if self.closing || held || !self.core.send_file || self.core.negotiated.is_none() {
            return None;
        }
        if head.len() != WRITE_REQUEST_DATA_OFFSET || header::protocol_of(head) != Protocol::Smb2 {
            return None;
        }
        let hdr = Header::decode(head).ok()?;
        if hdr.command != Command::WRITE
            || hdr.next_command != 0
            || hdr.is_signed()
            || hdr.is_related()
            || hdr.is_response()
        {
            return None;
        }
        let (wr, n) = WriteRequest::decode_head(head).ok()?;
        if n < WRITE_SPLICE_LEN_MIN || Some(n) != frame_len.checked_sub(WRITE_REQUEST_DATA_OFFSET) {
            return None;
        }
        // Only into a file (a named stream or resource fork has no
        // descriptor to splice into: its WRITE is read whole), and only when
        // its byte-range lock check needs no call to the file's home (a WRITE
        // that waits for one is better received whole than holding pipes;
        // one whose grant goes while its payload comes in waits with them:
        // cmd/io_check.rs).
        let session = self.core.session(hdr.session_id)?;
        let open = crate::server::lock(&session)
            .opens
            .get(&wr.file_id.volatile)
            .filter(|o| o.stream.is_none())
            .cloned()?;
        let io = crate::arbiter::IoAsk {
            owner: open.id,
            offset: wr.offset,
            length: n as u64,
            write: true,
            change: true,
            now_ms: self.core.now.mono_ms,
        };
        // On a share whose checks are a file system job, one that asks a job is received whole
        // too: it would hold its pipes for as long as the job takes (a file system that does
        // not answer holds them for good).
        if cmd::io_check::asks_fs_job(&open, &io)
            || self.open_is_ordered(crate::fsjob::order_of(open.id))
        {
            return None;
        }
        crate::arbiter::io_decided_here(&self.core.server.node, open.key, &open.entry, io)
            .then_some(n)
    }

    /// A WRITE frame whose payload (`payload_len` bytes) the driver received
    /// apart, as [`Connection::detachable_write`] allowed: `head` is the
    /// message up to the payload. It is processed like any frame; if it is to
    /// be written, the core asks for [`IoOp::WriteReceived`]; while it waits
    /// for its file's home, [`Connection::holds_payload`] says so and the
    /// driver keeps the payload; else the driver drops it.
    pub fn receive_detached(&mut self, now: Now, head: Vec<u8>, payload_len: usize) {
        self.core.now = now;
        self.last_request_ms = now.mono_ms;
        if self.closing {
            return;
        }
        self.start_job(head, 0, None, Some(payload_len));
    }

    /// The largest frame the driver should accept now: small until a session
    /// is established, so unauthenticated peers cannot make us buffer 8 MiB.
    pub fn frame_len_max(&self) -> usize {
        if self.core.authenticated {
            limits::PDU_SIZE_MAX
        } else {
            limits::PDU_SIZE_UNAUTH_MAX
        }
    }

    /// A buffer the driver is done with (a sent frame, a small request
    /// frame it no longer needs): small ones are kept for the next replies,
    /// so a warmed-up connection answers READs without allocating.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.core.spare.give(buf);
    }

    /// An empty buffer with room for `len` bytes, reused when one is spare
    /// (for the driver to cut a small request frame or a WRITE's head into,
    /// or to read a small READ's data into).
    pub fn spare_buf(&mut self, len: usize) -> Vec<u8> {
        self.core.spare.take(len)
    }

    /// Next thing for the driver to do.
    pub fn poll_output(&mut self) -> Option<Output> {
        if self.outputs.is_empty() {
            // What closes made while deciding a request left to ask of the cluster, nobody
            // waiting (a parked persistent open a new open would have to break, closed at its
            // file's home: its record's removal), is asked away from this thread.
            let posted = self.core.server.node.take_posted();
            if !posted.is_empty() {
                let asks = posted.into_iter().map(crate::lookup::Lookup::Cluster);
                self.core.cluster_posts.extend(asks);
                self.post_to_cluster();
            }
            // Breaks held for answers now sent go after them.
            self.release_breaks();
        }
        self.outputs.pop_front()
    }

    /// When `handle_timeout` should be called next (monotonic ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        let waits = self
            .async_ops
            .values()
            .filter_map(|op| op.work.deadline_ms());
        waits
            .chain(self.waiting.iter().map(|w| w.retry_at_ms))
            .chain(self.handshake_deadline())
            .chain(self.idle_deadline())
            .chain(self.held.deadline())
            .chain(self.held_breaks_deadline())
            .chain(self.interim_deadline())
            .min()
    }

    /// Retry waiting operations whose time has come.
    pub fn handle_timeout(&mut self, now: Now) {
        self.core.now = now;
        if self.closing {
            return;
        }
        if self.handshake_deadline().is_some_and(|d| d <= now.mono_ms) {
            if self.core.log_ok(crate::loglimit::LogKind::HandshakeTimeout) {
                tracing::info!(peer = %self.core.peer, "closing a connection that did not log on in time");
            }
            self.disconnect("handshake timeout");
            return;
        }
        if self.idle_deadline().is_some_and(|d| d <= now.mono_ms) {
            tracing::debug!(peer = %self.core.peer, "closing an idle connection");
            self.disconnect("idle timeout");
            return;
        }
        let due: Vec<u64> = self
            .async_ops
            .iter()
            .filter(|(_, op)| op.work.deadline_ms().is_some_and(|d| d <= now.mono_ms))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.poll_async(id);
        }
        self.retry_creates(false);
        self.release_held();
        self.release_breaks();
        self.send_interims();
    }

    /// The connection was accepted now: the handshake clock starts.
    pub fn accepted(&mut self, now: Now) {
        self.accepted_ms = Some(now.mono_ms);
        self.last_request_ms = now.mono_ms;
        self.core
            .server
            .mail
            .note_accepted(self.core.conn_id, now.filetime);
    }

    /// Until a session is authenticated, the connection must log on in time.
    fn handshake_deadline(&self) -> Option<u64> {
        let accepted = self.accepted_ms?;
        if self.core.authenticated {
            return None;
        }
        Some(accepted + self.core.server.config.handshake_timeout_ms)
    }

    /// A connection with nothing open and nothing pending may idle this long.
    fn idle_deadline(&self) -> Option<u64> {
        let idle = self.core.server.config.idle_timeout_ms;
        self.accepted_ms?;
        let busy = !self.async_ops.is_empty()
            || !self.parked.is_empty()
            || self.looking_up()
            || self.behind_waits()
            || self.core.sessions.values().any(|c| {
                let s = lock(&c.session);
                !s.closed && (!s.opens.is_empty() || !s.pipes.is_empty())
            });
        (idle > 0 && !busy).then(|| self.last_request_ms + idle)
    }

    /// The connection is gone: its channels leave their sessions; a session
    /// whose last channel this was ends, releasing every open and lock
    /// ([MS-SMB2] 3.3.7.1). A session bound to other connections lives on.
    /// `now` is when it went: the clock of durable opens it leaves starts then.
    pub fn shutdown(&mut self, now: Now) {
        self.core.now = now;
        let ids: Vec<u64> = self.core.sessions.keys().copied().collect();
        for id in ids {
            if let Some(ch) = self.core.sessions.remove(&id) {
                let asks = cmd::session_setup::leave_channel(
                    &self.core.server,
                    &ch.session,
                    self.core.conn_id,
                    self.core.now.mono_ms,
                );
                self.core.post_closes(asks);
            }
        }
        // Waiting CHANGE_NOTIFYs leave their watchers' queues (the handle
        // may live on, on another channel); a CREATE run again that waits for its file's home
        // or its record lets go of what it holds.
        for (_, mut op) in std::mem::take(&mut self.async_ops) {
            cmd::cancel_async(&mut self.core, op.session_id, &mut op.work);
        }
        self.waiting.clear();
        // Answers still to come find nothing to go on with (an open made for a CREATE that
        // waits for its record closes).
        self.abandon_lookups();
        self.core.server.mail.close_mailbox(self.core.conn_id);
    }

    /// One direct-TCP frame payload (without the 4-byte header).
    pub fn receive(&mut self, now: Now, frame: Vec<u8>) {
        self.core.now = now;
        self.last_request_ms = now.mono_ms;
        if self.closing {
            return;
        }
        if let Some(frame) = self.keep_while_held(frame) {
            self.receive_frame(frame);
        }
    }

    fn receive_frame(&mut self, mut frame: Vec<u8>) {
        let mut encrypted = None;
        // Where the SMB2 message starts: after the transform header when the
        // frame was decrypted (in place, where it landed).
        let mut base = 0;
        if header::protocol_of(&frame) == Protocol::Transform && self.core.negotiated.is_some() {
            // [MS-SMB2] 3.3.5.2.1.1: decrypt with the session's key; any failure
            // closes the connection.
            let sid = transform::session_of(&frame).unwrap_or(0);
            if !self.core.user_logged_on {
                self.disconnect("encrypted message before a user logged on");
                return;
            }
            // The key is taken out of the session so the work runs unlocked.
            let key = self.core.session(sid).map(|s| lock(&s).decrypt_key.clone());
            match transform::decrypt_in_place(key.as_ref().map(|k| k.as_deref()), &mut frame) {
                Ok(()) => {
                    // Decrypt first, then decompress ([MS-SMB2] 3.3.5.2.1).
                    if header::protocol_of(&frame[TRANSFORM_HEADER_LEN..]) == Protocol::Compressed {
                        let Some(out) = self.decompress_received(&frame[TRANSFORM_HEADER_LEN..])
                        else {
                            return;
                        };
                        self.core.spare.give(std::mem::replace(&mut frame, out));
                    } else {
                        base = TRANSFORM_HEADER_LEN;
                    }
                    let plain = &frame[base..];
                    let same_session = Header::decode(plain).is_ok_and(|h| h.session_id == sid);
                    if header::protocol_of(plain) != Protocol::Smb2 || !same_session {
                        self.disconnect("encrypted message is not SMB2 for its session");
                        return;
                    }
                    encrypted = Some(sid);
                    if let Some(ch) = self.core.sessions.get_mut(&sid) {
                        ch.client_encrypts = true;
                    }
                }
                Err(e) => {
                    self.disconnect(&format!("cannot decrypt: {e:?}"));
                    return;
                }
            }
        }
        if encrypted.is_none() && header::protocol_of(&frame) == Protocol::Compressed {
            let Some(out) = self.decompress_received(&frame) else {
                return;
            };
            self.core.spare.give(std::mem::replace(&mut frame, out));
        }
        match header::protocol_of(&frame[base..]) {
            Protocol::Smb2 => {}
            Protocol::Smb1 if self.core.negotiated.is_none() && !self.core.wildcard_sent => {
                match cmd::negotiate::handle_smb1(&mut self.core, &frame) {
                    Some(reply) => {
                        // The SMB1 NEGOTIATE consumed message id 0.
                        let _ = self.credits.consume(0, 1);
                        self.credits.grant(1);
                        self.outputs
                            .push_back(Output::Send(Frame::One(frame_bytes(reply))));
                    }
                    None => self.disconnect("SMB1 negotiate without an SMB2 dialect"),
                }
                return;
            }
            other => {
                self.disconnect(&format!("unexpected protocol {other:?}"));
                return;
            }
        }
        self.start_job(frame, base, encrypted, None);
    }

    /// Split a (decrypted) frame into its messages and run them.
    fn start_job(
        &mut self,
        frame: Vec<u8>,
        base: usize,
        encrypted: Option<u64>,
        detached: Option<usize>,
    ) {
        // A finished job serves again (no allocation per request).
        let mut job = self.spare_jobs.pop().unwrap_or_default();
        let mut pos = base;
        for m in header::split_compound(&frame[base..]) {
            match m {
                Ok(slice) => {
                    job.members.push((pos, pos + slice.len()));
                    pos += slice.len();
                }
                Err(e) => {
                    self.disconnect(&format!("malformed compound: {e}"));
                    return;
                }
            }
            if job.members.len() > limits::COMPOUND_COMMANDS_MAX {
                self.disconnect("compound chain too long");
                return;
            }
        }
        job.frame = frame;
        job.encrypted = encrypted;
        job.detached = detached;
        job.arrived_us = self.core.metrics.as_ref().map_or(0, |m| m.now_us());
        self.run(job);
    }

    /// File I/O finished.
    pub fn complete_io(&mut self, now: Now, id: u64, done: IoDone) {
        self.core.now = now;
        let Some((job, hdr, cont, r0)) = self.parked.remove(&id) else {
            return;
        };
        if let Some(order) = r0.fs_order {
            self.ordered_ended(order, hdr.command == Command::READ);
            self.io_done(job, hdr, cont, r0, done);
            // The requests that waited behind the open's job and this I/O go on.
            self.run_behind(order);
            return;
        }
        self.io_done(job, hdr, cont, r0, done);
    }

    /// [`Connection::complete_io`] of a job taken from `parked`.
    fn io_done(&mut self, mut job: Box<Job>, hdr: Header, cont: Cont, r0: Req0, done: IoDone) {
        let handled = match cont {
            Cont::Read(c) => cmd::read::finish(&mut self.core, c, done),
            Cont::Write(c) => cmd::write::finish(&mut self.core, c, done),
            Cont::Flush(c) => cmd::flush::finish(&mut self.core, c, done).map(Handled::Reply),
        };
        let result = match handled {
            // A sparse READ reads its data ranges one after another; a WRITE that goes
            // through is synced after it is written.
            Ok(Handled::Io { node, op, cont }) => {
                self.park_on_io(job, hdr, r0, node, op, cont);
                return;
            }
            Ok(Handled::Reply(r)) => Ok(r),
            Ok(_) => Err(NtStatus::INTERNAL_ERROR),
            Err(s) => Err(s),
        };
        let reply = result.unwrap_or_else(|s| Reply::with_status(s, Vec::new()));
        job.settle_last_file(None, hdr.is_related());
        self.push_reply(&mut job, &hdr, r0.session_id, reply);
        self.run(job);
    }

    fn disconnect(&mut self, why: &str) {
        tracing::debug!(peer = %self.core.peer, "closing connection: {why}");
        if let Some(m) = &self.core.metrics {
            m.closed_by_server();
        }
        self.closing = true;
        self.outputs.push_back(Output::Close);
    }

    /// Process members of a job until it finishes or parks on I/O; then send
    /// the break notifications the job's requests posted to this very
    /// connection, before anything a later request answers (a client reads
    /// the break of its own rename before the reply to its next CREATE).
    fn run(&mut self, job: Box<Job>) {
        self.run_job(job);
        if self.mailbox.has_mail() {
            self.send_mail();
        }
        // Kernel watches a request's report asked for on an offloaded share go to the pool too.
        if !self.core.cluster_posts.is_empty() || self.core.server.kernel_jobs_waiting() {
            self.post_to_cluster();
        }
    }

    fn run_job(&mut self, mut job: Box<Job>) {
        let first = job.next;
        while job.next < job.members.len() {
            if self.closing {
                return;
            }
            let idx = job.next;
            if idx != first {
                // An answer left for the member that runs again ([`LookupCont::Again`]) is
                // its own: one it did not take (it failed before it asked again: its session
                // or tree went meanwhile) is not the next member's.
                cmd::drop_answer(&mut self.core);
            }
            job.next += 1;
            let fs_order = job.fs_order.take().filter(|_| job.resumes == Some(idx));
            let (start, end) = job.members[idx];
            let sole = job.members.len() == 1;
            let Some(hdr) = self.member_header(&mut job, idx) else {
                return;
            };
            if hdr.command == Command::CANCEL {
                self.cancel(&hdr);
                continue;
            }
            let related = hdr.is_related() && idx > 0;
            let Some((session_id, tree_id, related_file_id)) = self.member_ids(&mut job, &hdr, idx)
            else {
                continue;
            };
            if let Some(order) = self.behind_order(&mut job, idx, hdr.command, related_file_id) {
                self.park_behind(order, job, idx, hdr.command);
                return;
            }
            let req = Req {
                hdr: hdr.clone(),
                msg: &job.frame[start..end],
                msg_offset: start,
                detached: job.detached,
                session_id,
                tree_id,
                related_file_id,
                sole,
                encrypted: job.encrypted.is_some(),
            };
            // The open a CLOSE names, for completing its CHANGE_NOTIFYs afterwards.
            let closing = (hdr.command == Command::CLOSE)
                .then(|| CloseRequest::decode(req.msg).ok())
                .flatten()
                .and_then(|c| handles::resolve(&req, c.file_id).ok());
            self.core.named_file = None;
            let outcome = self.dispatch(&req);
            job.named_file = self.core.named_file.take();
            job.last_session = session_id;
            job.last_tree = tree_id;
            match outcome {
                Ok(Handled::Reply(reply)) => {
                    let answered = Ok(reply);
                    match self.member_done(job, &hdr, session_id, related, closing, answered) {
                        Some(j) => job = j,
                        None => return,
                    }
                }
                Ok(Handled::Io { node, op, cont }) => {
                    let r0 = Req0 {
                        session_id,
                        fs_order,
                    };
                    self.park_on_io(job, hdr, r0, node, op, cont);
                    return;
                }
                Ok(Handled::Async(work)) => {
                    self.go_async(&mut job, hdr, session_id, *work);
                }
                Ok(Handled::Lookup(parked)) => {
                    let cmd::Parked { ask, cont } = *parked;
                    let ids = (session_id, related);
                    self.park_on_lookup(job, hdr, idx, ids, ask, cont, fs_order);
                    return;
                }
                Ok(Handled::WaitForBreaks) if job.next == job.members.len() => {
                    // The last (or only) request of its frame: answered
                    // STATUS_PENDING now and completed when the breaks end,
                    // as clients expect of a CREATE that waits (it can be
                    // cancelled).
                    let work = cmd::AsyncWork::Create(cmd::create::PendingCreate::new(
                        &req,
                        self.core.now.mono_ms,
                    ));
                    self.go_async(&mut job, hdr, session_id, work);
                }
                Ok(Handled::WaitForBreaks)
                    if self.waiting.len() + self.async_ops.len()
                        >= limits::ASYNC_OPS_PER_CONNECTION_MAX =>
                {
                    let status = NtStatus::INSUFFICIENT_RESOURCES;
                    self.member_failed(&mut job, &hdr, session_id, related, status);
                }
                Ok(Handled::WaitForBreaks) => {
                    // Inside a compound: the job waits, and the members after
                    // the CREATE run once it is answered.
                    self.waiting.push(Waiting {
                        job,
                        hdr,
                        session_id,
                        tree_id,
                        related_file_id,
                        member: (start, end),
                        index: idx,
                        sole,
                        related,
                        retry_at_ms: self.core.now.mono_ms + crate::files::oplock::BREAK_RETRY_MS,
                    });
                    return;
                }
                Err(status) => {
                    match self.member_done(job, &hdr, session_id, related, None, Err(status)) {
                        Some(j) => job = j,
                        None => return,
                    }
                }
            }
            if let Some(until) = self.core.hold_reply_until_ms.take() {
                self.hold(job, until);
                return;
            }
        }
        self.finish(job);
    }

    /// The reply of a job's member is ready: note what later related members
    /// inherit and keep it for the frame. True when the connection must close.
    fn member_replied(
        &mut self,
        job: &mut Job,
        hdr: &Header,
        session_id: u64,
        related: bool,
        closing: Option<(u64, u64)>,
        reply: Reply,
    ) -> bool {
        if hdr.command == Command::CREATE {
            job.related_error = reply.status.is_error().then_some(reply.status);
        }
        if let (Some((_, open_id)), false) = (closing, reply.status.is_error()) {
            self.cleanup_notifies(session_id, asyncs::NotifyScope::Open(open_id));
            // A close may end what a parked CREATE waits for.
            self.retry_waiting_creates();
        }
        if hdr.command == Command::SESSION_SETUP
            && reply.status.is_error()
            && self
                .core
                .session(session_id)
                .is_none_or(|s| crate::server::lock(&s).closed)
        {
            // A failed re-authentication ended the session: its waiting
            // CHANGE_NOTIFYs end too (smbtorture smb2.notify.invalid-reauth).
            self.cleanup_notifies(session_id, asyncs::NotifyScope::Session);
        }
        if hdr.command == Command::LOGOFF && !reply.status.is_error() {
            self.end_async_ops(session_id);
        }
        job.settle_last_file(reply.file_id, related);
        if let Some(rare) = &reply.rare {
            if let Some(sid) = rare.session_id {
                job.last_session = sid;
            }
            if let Some(t) = rare.tree_id {
                job.last_tree = t;
            }
        }
        let disconnect = reply.disconnects();
        self.push_reply(job, hdr, session_id, reply);
        disconnect
    }

    /// A member of `job` was answered (`closing`: the open a CLOSE closed): its reply is kept
    /// for the frame and the job goes on, or, after a fatal reply, the job's frame goes out and
    /// the connection closes (None).
    fn member_done(
        &mut self,
        mut job: Box<Job>,
        hdr: &Header,
        session_id: u64,
        related: bool,
        closing: Option<(u64, u64)>,
        answered: Result<Reply, NtStatus>,
    ) -> Option<Box<Job>> {
        match answered {
            Ok(reply) => {
                if self.member_replied(&mut job, hdr, session_id, related, closing, reply) {
                    self.finish(job);
                    self.disconnect("fatal reply");
                    return None;
                }
            }
            Err(status) => self.member_failed(&mut job, hdr, session_id, related, status),
        }
        Some(job)
    }

    /// A job's member failed with `status`.
    fn member_failed(
        &mut self,
        job: &mut Job,
        hdr: &Header,
        session_id: u64,
        related: bool,
        status: NtStatus,
    ) {
        if hdr.command == Command::CREATE {
            job.related_error = Some(status);
        }
        job.settle_last_file(None, related);
        let reply = Reply::with_status(status, Vec::new());
        self.push_reply(job, hdr, session_id, reply);
    }

    fn large_mtu(&self) -> bool {
        self.core
            .negotiated
            .as_ref()
            .is_some_and(|n| n.dialect != Dialect::SMB2_0_2 && n.server_capabilities & 0x4 != 0)
    }

    /// Checks of [MS-SMB2] 3.3.5.2.4–3.3.5.2.11 and the call into the command.
    fn dispatch(&mut self, req: &Req<'_>) -> Result<Handled, NtStatus> {
        let cmd_id = req.hdr.command;
        match cmd_id {
            Command::NEGOTIATE => {
                return cmd::negotiate::handle(&mut self.core, req).map(Handled::Reply)
            }
            Command::SESSION_SETUP => {
                self.verify_signature(req, true, None)?;
                let waits = self.logon_waits(req.hdr.session_id);
                return cmd::session_setup::handle(&mut self.core, req, waits);
            }
            Command::ECHO if req.session_id == 0 => {
                return cmd::echo::handle(&mut self.core, req).map(Handled::Reply)
            }
            _ => {}
        }
        // Session ([MS-SMB2] 3.3.5.2.9).
        let sref = self.core.session_or_deleted(req.session_id)?;
        let (session_encrypt, signing_required, tree_encrypt, tree_ipc, tree_refused) = {
            let session = lock(&sref);
            if !session.is_valid() {
                drop(session);
                if lock(&sref).closed {
                    // Logged off on another channel: this one forgets it too.
                    // A request signed with this channel's key gets its answer
                    // signed with it (clients refuse an unsigned answer to a
                    // signed request, whatever its status).
                    let key = self
                        .core
                        .sessions
                        .remove(&req.session_id)
                        .and_then(|ch| ch.signing_key)
                        .filter(|k| req.hdr.is_signed() && signature_ok(k, req));
                    if let Some(k) = key {
                        let mut r = Reply::with_status(NtStatus::USER_SESSION_DELETED, Vec::new());
                        r.rare().sign_key = Some(k);
                        return Ok(Handled::Reply(r));
                    }
                }
                return Err(NtStatus::USER_SESSION_DELETED);
            }
            // [MS-SMB2] 3.3.5.2.9: an expired session (its Kerberos ticket ended) still
            // closes, unlocks and logs off; anything else waits for a re-authentication.
            let expired = session
                .expires_filetime
                .is_some_and(|t| t <= self.core.now.filetime);
            if expired && !allowed_when_expired(cmd_id, req.msg) {
                return Err(NtStatus::NETWORK_SESSION_EXPIRED);
            }
            let (tree_encrypt, tree_ipc, tree_refused) = match session.trees.get(&req.tree_id) {
                Some(t) => (
                    Some(t.encrypt_required),
                    matches!(t.kind, TreeKind::Ipc),
                    t.refused,
                ),
                None => (None, false, false),
            };
            (
                session.encrypt_required,
                session.signing_required,
                tree_encrypt,
                tree_ipc,
                tree_refused,
            )
        };
        // (The session is valid, and `session_or_deleted` finds no binding channel.)
        self.verify_signature(req, false, Some(signing_required))?;
        // [MS-SMB2] 3.3.5.2.9: a session that must be encrypted takes only
        // encrypted requests.
        // Over a trusted QUIC transport ([`ConnCore::transport_secure`]) it need not be.
        let insecure = !req.encrypted && !self.core.transport_secure();
        if session_encrypt && insecure {
            return Err(NtStatus::ACCESS_DENIED);
        }
        match cmd_id {
            Command::LOGOFF => {
                self.settle_waiting_locks(req.session_id);
                self.cleanup_notifies(req.session_id, asyncs::NotifyScope::Session);
                return cmd::session_setup::logoff(&mut self.core, req).map(Handled::Reply);
            }
            Command::ECHO => return cmd::echo::handle(&mut self.core, req).map(Handled::Reply),
            Command::TREE_CONNECT => {
                return cmd::tree::connect(&mut self.core, req).map(Handled::Reply)
            }
            _ => {}
        }
        // Tree ([MS-SMB2] 3.3.5.2.11).
        let Some(tree_encrypt) = tree_encrypt else {
            return Err(NtStatus::NETWORK_NAME_DELETED);
        };
        // [MS-SMB2] 3.3.5.2.11: a tree whose share requires encryption takes only
        // encrypted requests.
        if tree_encrypt && insecure {
            return Err(NtStatus::ACCESS_DENIED);
        }
        self.check_channel_sequence(req)?;
        if tree_refused && cmd_id != Command::TREE_DISCONNECT {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if tree_ipc && cmd_id != Command::TREE_DISCONNECT && cmd::pipe::wants(req) {
            return cmd::pipe::handle(&mut self.core, req);
        }
        match cmd_id {
            Command::TREE_DISCONNECT => {
                self.cleanup_notifies(req.session_id, asyncs::NotifyScope::Tree(req.tree_id));
                cmd::tree::disconnect(&mut self.core, req).map(Handled::Reply)
            }
            Command::CREATE => {
                let r = cmd::create::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::CLOSE => {
                // On an offloaded share the attributes a CLOSE asks for are read in a file
                // system job first (the request parks and runs again).
                let r = cmd::close::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::FLUSH => {
                // On an offloaded share a written handle's write time is written in a file
                // system job first (the request parks and runs again).
                let r = cmd::flush::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::READ => {
                let r = cmd::read::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::WRITE => {
                let r = cmd::write::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::LOCK => {
                let r = cmd::lock::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::IOCTL => {
                // A copychunk's or a set-zero-data's lock check may ask the file's home (the
                // request parks and runs again: cmd/io_check.rs).
                let r = cmd::ioctl::handle(&mut self.core, req).map(Handled::Reply);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::QUERY_DIRECTORY => {
                // On an offloaded share the listing is a file system job (the request parks
                // and runs again).
                let r = cmd::query_directory::handle(&mut self.core, req).map(Handled::Reply);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::CHANGE_NOTIFY => {
                let r = cmd::notify::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::QUERY_INFO => {
                let r = cmd::query_info::handle(&mut self.core, req).map(Handled::Reply);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::SET_INFO => {
                let r = cmd::set_info::handle(&mut self.core, req);
                cmd::ids::parked(&mut self.core, r)
            }
            Command::OPLOCK_BREAK => {
                // Asked of the file's home away from the I/O thread when it is another node
                // (the acknowledgment parks and runs again with the answer).
                let r = cmd::oplock_break::handle(&mut self.core, req).map(Handled::Reply);
                let r = cmd::ids::parked(&mut self.core, r);
                // An acknowledgment may end what a waiting CREATE waits for.
                if !matches!(r, Ok(Handled::Lookup(_))) {
                    self.retry_waiting_creates();
                }
                r
            }
            _ => Err(NtStatus::INVALID_PARAMETER),
        }
    }

    /// Build the header of a reply, grant credits and keep it for the frame.
    fn push_reply(&mut self, job: &mut Job, req_hdr: &Header, session_id: u64, reply: Reply) {
        if let Some(m) = &self.core.metrics {
            frame::reply_sent(m, req_hdr.command, &reply, job.arrived_us);
        }
        let mut rare = reply.rare.map(|b| *b);
        let mut hdr = Header::response_to(req_hdr, reply.status);
        if !interim::answers_async(job, req_hdr.message_id, &mut hdr) {
            hdr.credits = self.grant(req_hdr);
        }
        let body = if reply.body.is_empty() {
            error_body()
        } else {
            reply.body
        };
        if let Some(r) = rare.as_mut() {
            rare_header(job, req_hdr, &mut hdr, r);
        }
        let sign_key = self.reply_key(job, req_hdr, session_id, reply.status, rare.as_mut());
        if let Some(r) = &rare {
            self.preauth_hashes(&hdr, &body, sign_key.as_ref(), r);
        }
        debug_assert!(
            reply.file.is_none() || (sign_key.is_none() && job.encrypted.is_none()),
            "file data goes out unsigned and in clear only"
        );
        job.replies.push(BuiltReply {
            hdr,
            body,
            data: reply.data,
            data_headroom: reply.data_headroom as usize,
            file: reply.file,
            sign_key,
            compress: reply.compress,
        });
    }

    /// The key a reply is signed with: none inside an encrypted frame; else the one its
    /// command set (LOGOFF), or its session's (the one SESSION_SETUP made or names), or the
    /// deleted session's for USER_SESSION_DELETED.
    fn reply_key(
        &self,
        job: &Job,
        req_hdr: &Header,
        session_id: u64,
        status: NtStatus,
        rare: Option<&mut RareReply>,
    ) -> Option<SigningKey> {
        if job.encrypted.is_some() {
            return None;
        }
        let (set, sid, forced) = match rare {
            Some(r) => (
                r.sign_key.take(),
                r.session_id.unwrap_or(session_id),
                r.sign_with_session,
            ),
            None => (None, session_id, None),
        };
        set.or_else(|| self.response_signing_key(req_hdr, sid, forced, status))
            .or_else(|| self.session_deleted_key(req_hdr, session_id, status))
    }

    /// 3.1.1 NEGOTIATE and SESSION_SETUP: the response as sent (signed when it is: a
    /// binding's interim responses are) goes into the connection's or the session's preauth
    /// hash.
    fn preauth_hashes(
        &mut self,
        hdr: &Header,
        body: &[u8],
        sign_key: Option<&SigningKey>,
        rare: &RareReply,
    ) {
        if rare.preauth_session.is_none() && !rare.preauth_connection {
            return;
        }
        let mut bytes = Vec::with_capacity(64 + body.len());
        let mut signed_hdr = hdr.clone();
        if sign_key.is_some() {
            signed_hdr.flags.insert(HeaderFlags::SIGNED);
        }
        signed_hdr.encode(&mut bytes);
        bytes.extend_from_slice(body);
        if let Some(key) = sign_key {
            let nonce = NonceInfo {
                message_id: hdr.message_id,
                server_to_client: true,
                cancel: false,
            };
            let sig = key.sign(&[&bytes], nonce);
            header::patch_signature(&mut bytes, 0, &sig);
        }
        if let Some(p) = rare
            .preauth_session
            .and_then(|sid| self.core.sessions.get_mut(&sid))
            .and_then(|c| c.preauth.as_mut())
        {
            p.update(&bytes);
        }
        if rare.preauth_connection {
            if let Some(p) = self.core.preauth.as_mut() {
                p.update(&bytes);
            }
        }
    }

    /// A signed request for a session this connection is not a channel of
    /// (never bound, or logged off elsewhere) gets USER_SESSION_DELETED
    /// signed with the session's key when the server still has the session:
    /// clients refuse an unsigned response to a signed request.
    fn session_deleted_key(
        &self,
        req_hdr: &Header,
        session_id: u64,
        status: NtStatus,
    ) -> Option<SigningKey> {
        if status != NtStatus::USER_SESSION_DELETED || !req_hdr.is_signed() {
            return None;
        }
        let s = self.core.server.sessions.find(session_id)?;
        let key = lock(&s).signing_key.clone();
        key
    }

    fn grant(&mut self, req_hdr: &Header) -> u16 {
        let g = self.credits.grant_for(req_hdr.credits);
        self.credits.grant(g);
        g
    }

    /// [MS-SMB2] 3.3.4.1.1: sign when the session requires it or the request was signed.
    fn response_signing_key(
        &self,
        req_hdr: &Header,
        session_id: u64,
        forced: Option<u64>,
        status: NtStatus,
    ) -> Option<SigningKey> {
        self.core
            .reply_signing_key(req_hdr, session_id, forced, status)
            .cloned()
    }

    /// Frame and sign the replies of a finished job.
    fn finish(&mut self, mut job: Box<Job>) {
        // (A WRITE alone in its frame may have taken the frame.)
        let compress = match (job.members.as_slice(), job.replies.as_mut_slice()) {
            ([_], [r]) => r.compress.take(),
            _ => None,
        };
        let built = if job.replies.is_empty() {
            None
        } else {
            Some(build_frame(
                &mut job.replies,
                seal_room(job.encrypted),
                &mut self.core.spare,
            ))
        };
        self.core.spare.give(std::mem::take(&mut job.frame));
        let (encrypted, seal) = (job.encrypted, job.seal.take());
        if self.spare_jobs.len() < SPARE_JOBS_MAX
            && job.members.capacity() <= SPARE_JOB_VEC_CAPACITY_MAX
            && job.replies.capacity() <= SPARE_JOB_VEC_CAPACITY_MAX
        {
            job.clear();
            self.spare_jobs.push(job);
        }
        let Some((frame, file)) = built else {
            return;
        };
        if let Some((node, offset, len)) = file {
            let head = frame.into_bytes();
            self.outputs.push_back(Output::SendFile(SendFile {
                head,
                node,
                offset,
                len,
            }));
            return;
        }
        let frame = match compress {
            Some(ask) => self.compress_reply(frame, seal_room(encrypted), &ask),
            None => frame,
        };
        self.send_frame(frame, encrypted, seal);
    }

    /// Queue a built frame, encrypting it for `encrypted`'s session first: the
    /// frame was built with [`seal_room`] bytes after its transport header, and
    /// a frame of one part (a READ reply built around its data) is sealed where
    /// it lies; the parts of a longer one are joined first.
    fn send_frame(
        &mut self,
        frame: Frame,
        encrypted: Option<u64>,
        reserved: Option<(Arc<CipherKey>, u64)>,
    ) {
        let Some(sid) = encrypted else {
            self.outputs.push_back(Output::Send(frame));
            return;
        };
        let mut buf = frame.into_bytes();
        // Key and nonce under the session's lock, the work without it.
        let sealing = self
            .core
            .sessions
            .get(&sid)
            .and_then(|c| {
                let mut s = lock(&c.session);
                let key = s.encrypt_key.clone()?;
                s.nonce_counter = s.nonce_counter.checked_add(1)?;
                Some((key, s.nonce_counter))
            })
            .or(reserved);
        let sealed = sealing.and_then(|(key, counter)| {
            transform::seal_in_place(&key, sid, counter, buf.get_mut(4..)?)?;
            let hdr = framing::frame_header(buf.len() - 4).ok()?;
            buf[..4].copy_from_slice(&hdr);
            Some(())
        });
        match sealed {
            Some(()) => self.outputs.push_back(Output::Send(Frame::One(buf))),
            // The session went away (logoff) or lost its key: nothing may go out in clear.
            None => {
                tracing::debug!(peer = %self.core.peer, "dropping a reply to an encrypted request: no session key")
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.core.server.mail.close_mailbox(self.core.conn_id);
    }
}

/// The ERROR response body ([MS-SMB2] 2.2.2): StructureSize 9, no error data.
pub(crate) fn error_body() -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    b.put_u16(9);
    b.put_u8(0);
    b.put_u8(0);
    b.put_u32(0);
    b.put_u8(0);
    b
}

/// WRITEs smaller than this are received into memory even when their payload
/// could be spliced into the file: the splice runs in an io_uring worker, and
/// below this the hop costs more than the copy it saves (1 MiB overwrites,
/// `ringshare bench seq-write`, server CPU s/GiB spliced vs copied: 128 KiB
/// 0.68-0.70 vs 0.64-0.66; 256 KiB 0.51-0.53 vs 0.57-0.62; 64 KiB in the mixed
/// workload 0.81-0.86 vs 0.73-0.74; docs/architecture.md "The WRITE path").
pub const WRITE_SPLICE_LEN_MIN: usize = 256 * 1024;

/// [MS-SMB2] 3.3.5.2.9: what an expired session may still do: LOGOFF, CLOSE, ECHO, and a LOCK that
/// only unlocks (Windows and Samba refuse new locks, as smbtorture's smb2.session.expire2s
/// checks).
fn allowed_when_expired(cmd: Command, msg: &[u8]) -> bool {
    match cmd {
        Command::LOGOFF | Command::CLOSE | Command::ECHO => true,
        Command::LOCK => ringshare_wire::lock::LockRequest::decode(msg).is_ok_and(|l| {
            !l.locks.is_empty()
                && l.locks
                    .iter()
                    .all(|e| e.flags.contains(ringshare_wire::consts::LockFlags::UNLOCK))
        }),
        _ => false,
    }
}

/// What a reply's rare fields change in its header and frame: the response echoes the
/// request's SessionId and TreeId (for related members that is 0xFFFF...: clients match
/// responses by them), except that SESSION_SETUP and TREE_CONNECT carry the ids they created;
/// a LOGOFF of an encrypted session seals its frame with the key it kept.
fn rare_header(job: &mut Job, req_hdr: &Header, hdr: &mut Header, rare: &mut RareReply) {
    if job.encrypted.is_some() {
        if let Some(seal) = rare.seal.take() {
            job.seal = Some(seal);
        }
    }
    if let Some(sid) = rare.session_id {
        hdr.session_id = sid;
    }
    if let (HeaderId::Sync { process_id, .. }, Some(tree_id)) = (req_hdr.id, rare.tree_id) {
        hdr.id = HeaderId::Sync {
            process_id,
            tree_id,
        };
    }
}
