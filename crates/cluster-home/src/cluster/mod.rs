//! Several nodes serving one share (issue 18; docs/cluster.md): every file
//! has a *home* node, the owner of the file's partition, which keeps the
//! file's share modes, leases, byte-range locks and delete-pending — the
//! [`crate::arbiter`] decisions. A node asks the home of a file homed
//! elsewhere with a small [`msg::Call`] and posts breaks and wake-ups to
//! connections on other nodes with a [`msg::Post`].
//!
//! The core stays sans-I/O: how messages travel and who owns which
//! partition is the [`ClusterLink`] the driver (or a test's in-memory bus)
//! gives [`ServerState::join_cluster`]; what arrives is handed to
//! [`ServerState::cluster_receive`]. A server that never joins behaves
//! exactly as before: every file is homed here.
//!
//! The cluster layer (issue 30; docs/architecture.md) sits above the per-file operations
//! (crate::decide, crate::opens, crate::durable, crate::notify, crate::deliver), which reach it
//! only through the [`crate::server::ClusterHooks`] it sets on joining ([`hooks`]), and below
//! [`crate::arbiter`], its front for commands. Inside it, [`msg`] (the messages and their
//! encoding) imports none of the other modules; this module, on top, dispatches what arrives.

pub mod ca;
pub mod grant;
pub mod handover;
pub mod home;
mod hooks;
pub mod late;
pub mod msg;
pub mod notify;
mod reclaim;
mod reopen;
pub mod shadow;
pub mod takeback;
pub mod takeover;

pub use ca::{record_keeper, PersistentOpens};
pub use hooks::HomeClose;
pub use msg::MESSAGE_MAX;
pub use notify::AnnounceWatchers;
pub use reclaim::Reclaim;

use std::sync::Arc;

use ringshare_wire::{NtStatus, WireError};

use crate::lookup::HomeAsk;
use crate::server::{NodeState, Notice, ServerState};

pub use crate::link::UnsentClose;
pub use crate::link::{ClusterLink, Home};

pub use crate::files::{owner_node as node_of, NODE_SHIFT};
pub use crate::link::{partition_of, CLUSTER_DEV};

/// Why a node could not join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinError {
    /// Node number 0 is the single-node server's.
    NodeZero,
    /// The server joined a cluster already.
    AlreadyJoined,
}

/// What a server does as a node of a cluster: joining, dropping its clients when fenced,
/// resending closes, and serving what other nodes send. (`ServerState` is crates/state's:
/// the cluster layer offers its methods as traits, this one, [`Reclaim`],
/// [`PersistentOpens`] and [`AnnounceWatchers`].)
pub trait ClusterNode {
    /// Serve as one node of a cluster from now on. Call it before the first
    /// connection: ids made before it do not name this node.
    fn join_cluster(&self, link: Arc<dyn ClusterLink>) -> Result<(), JoinError>;
    /// Close every client connection (a node that is fenced stops
    /// acknowledging anything: its clients reconnect to another node).
    fn drop_all_connections(&self);
    /// Send again the closes no home took (call it after the partition
    /// table changed): each goes to its file's home now; one that finds no
    /// such open there (it was forgotten, or closed already) is done. A
    /// late close that was its file's last with the delete pending removes
    /// the file, as the close would have. Returns how many still wait.
    fn resend_closes(&self) -> usize;
    /// A message from another node: the answer to send back for a call,
    /// `None` for a notice. An undecodable message is an error (the
    /// transport closes that peer's connection and logs it); one of a kind
    /// this build does not know ([`msg::UNKNOWN_KIND`], a newer node's) is
    /// answered `Refused(NOT_SUPPORTED)` with a rate-limited log line (the
    /// transport drops the answer to a notice) and the connection stays.
    /// `now_ms` is this node's monotonic clock: a home decides break
    /// deadlines by its own clock, never by the caller's.
    fn cluster_receive(&self, message: &[u8], now_ms: u64) -> Result<Option<Vec<u8>>, WireError>;
    /// Node `node` answered `answer` to `call` (both as they travelled) after this node
    /// stopped waiting for it and told its client FILE_NOT_AVAILABLE: what the answer says was
    /// done there that the client does not know of is undone there ([`late`]). Call it away
    /// from a client's I/O thread: it calls `node`.
    fn cluster_answered_late(&self, node: u16, call: &[u8], answer: &[u8]);
    /// This node answered `answer` to `call` (both as they travel) and its caller has stopped
    /// waiting meanwhile: true when what the answer says was done is undone here at once (the
    /// answer is then not sent); false when there is nothing to undo here (the answer is sent,
    /// and its caller reads it late: [`ClusterNode::cluster_answered_late`]). `now_ms`: as
    /// [`ClusterNode::cluster_receive`]'s.
    fn cluster_undo_here(&self, call: &[u8], answer: &[u8], now_ms: u64) -> bool;
}

impl ClusterNode for ServerState {
    fn join_cluster(&self, link: Arc<dyn ClusterLink>) -> Result<(), JoinError> {
        let node = link.node();
        if node == 0 {
            return Err(JoinError::NodeZero);
        }
        let start = link.id_start() & ((1 << NODE_SHIFT) - 1);
        if !self.node.join(link, &hooks::Hooks) {
            return Err(JoinError::AlreadyJoined);
        }

        self.set_id_base((u64::from(node) << NODE_SHIFT) | start.max(1));
        Ok(())
    }
    fn drop_all_connections(&self) {
        for id in self.mail.connections() {
            self.mail.post(id, Notice::Drop);
        }
    }
    fn resend_closes(&self) -> usize {
        handover::tell_homes_of_parked(self);
        let pending = std::mem::take(&mut *crate::server::lock(&self.node.unsent_closes));
        let mut left = Vec::new();
        for u in pending {
            let closed = match self.node.home_of(u.key) {
                Home::Here => Some(self.files.existing(u.key).map(|e| {
                    crate::decide::close_here(self, u.key, &e, u.owner, u.delete_on_close).0
                })),
                Home::Node(n) => {
                    let call = msg::Call::Close {
                        key: u.key,
                        owner: u.owner,
                        delete_on_close: u.delete_on_close,
                    };
                    match ask(&self.node, n, call) {
                        Ok(msg::Answer::Closed(closed, _)) => Some(Some(closed)),
                        Ok(msg::Answer::Refused(NtStatus::FILE_CLOSED)) => Some(None),
                        _ => None,
                    }
                }
                Home::Unavailable => None,
            };
            match closed {
                None => left.push(u),
                Some(c) => {
                    self.files.drop_if_unused(u.key);
                    let share = self.shares().share(&u.share).cloned();
                    if let (Some(c), Some(s)) = (c.filter(|c| c.remove), share) {
                        crate::opens::remove_file(self, &s, &u.who, &c.path, c.is_dir, None);
                    }
                }
            }
        }
        let mut unsent = crate::server::lock(&self.node.unsent_closes);
        unsent.extend(left);
        unsent.len()
    }
    fn cluster_answered_late(&self, node: u16, call: &[u8], answer: &[u8]) {
        late::answered(self, node, call, answer);
    }
    fn cluster_undo_here(&self, call: &[u8], answer: &[u8], now_ms: u64) -> bool {
        late::undone_here(self, call, answer, now_ms)
    }
    fn cluster_receive(&self, message: &[u8], now_ms: u64) -> Result<Option<Vec<u8>>, WireError> {
        let m = match msg::Message::decode(message) {
            Err(e) if e == msg::UNKNOWN_KIND => {
                // A newer node's, sent above this node's level: "not supported".
                let kind = ringshare_state::loglimit::LogKind::ClusterUnknown;
                if self.log_admit(None, kind, now_ms) {
                    tracing::warn!(
                        "{}: answered NOT_SUPPORTED (a newer node sent it above this node's \
                         level {})",
                        kind.what(),
                        msg::LEVEL
                    );
                }
                let no = msg::Answer::Refused(NtStatus::NOT_SUPPORTED);
                return Ok(Some(msg::Message::Answer(no).encode()));
            }
            m => m?,
        };
        match m {
            msg::Message::Call(call) => {
                let answer = home::serve(self, call, now_ms);
                Ok(Some(msg::Message::Answer(answer).encode()))
            }
            msg::Message::Post(p) => {
                if node_of(p.route.conn_id) != self.node.link().map_or(0, |c| c.node()) {
                    return Err(WireError::Invalid("notice for another node's connection"));
                }
                shadow::break_passes(&self.files, &p.notice);
                self.send_breaks(vec![(p.route, p.notice)]);
                Ok(None)
            }
            msg::Message::Changes { share, changes } => {
                notify::received(self, &share, &changes);
                Ok(None)
            }
            msg::Message::Interest { from, watching } => {
                notify::interest(self, from, watching);
                Ok(None)
            }
            msg::Message::DirChanged { share, dir, except } => {
                crate::dirlease::dir_changed_here(self, &share, &dir, except, Some(now_ms));
                Ok(None)
            }
            msg::Message::Answer(_) => Err(WireError::Invalid("answer without a call")),
        }
    }
}

/// The cluster's level: the lowest of its members' ([`ClusterLink::level_of`]); what every
/// node reads.
pub fn cluster_level(link: &dyn ClusterLink) -> u16 {
    link.members()
        .into_iter()
        .map(|n| link.level_of(n))
        .min()
        .unwrap_or(msg::LEVEL)
}

/// Ask `node`, the home of a file, for a decision.
pub fn ask(here: &NodeState, node: u16, call: msg::Call) -> Result<msg::Answer, NtStatus> {
    let Some(link) = here.link() else {
        return Err(NtStatus::INTERNAL_ERROR);
    };
    answer_of(link.call(node, call_bytes(&**link, node, call)))
}

/// [`ask`] of several nodes at once (issue 33): every call sent, then every answer (or why
/// none came) waited for, in the order asked, so that a node that does not answer holds the
/// asker for one call's bound (2 s), not one per node asked.
pub fn ask_all(
    here: &NodeState,
    calls: Vec<(u16, msg::Call)>,
) -> Vec<Result<msg::Answer, NtStatus>> {
    if calls.len() <= 1 {
        return calls.into_iter().map(|(n, c)| ask(here, n, c)).collect();
    }
    std::thread::scope(|s| {
        let asked: Vec<_> = calls
            .into_iter()
            .map(|(n, c)| s.spawn(move || ask(here, n, c)))
            .collect();
        asked
            .into_iter()
            .map(|t| t.join().unwrap_or(Err(NtStatus::INTERNAL_ERROR)))
            .collect()
    })
}

/// `call` encoded as `node`'s protocol level reads it ([`msg::Message::lowered`]).
pub fn call_bytes(link: &dyn ClusterLink, node: u16, call: msg::Call) -> Vec<u8> {
    msg::Message::Call(call)
        .lowered(link.level_of(node))
        .encode()
}

/// [`ask`] carried away from the I/O thread: the call as a question the driver's lookup pool
/// asks ([`crate::lookup::Lookup::Home`]; the request waits for its answer, which
/// [`answer_of`] reads, and the thread does not), after this node's calls asked before it
/// about the same file ([`order_of`]).
pub fn to_ask(here: &NodeState, node: u16, call: msg::Call) -> Result<HomeAsk, NtStatus> {
    let link = Arc::clone(here.link().ok_or(NtStatus::INTERNAL_ERROR)?);
    let order = home::key_of(&call).map_or(0, order_of);
    let message = call_bytes(&*link, node, call);
    Ok(HomeAsk::wire(link, node, order, message))
}

/// The order of this node's calls about file `key` ([`HomeAsk::order`]: carried one after
/// another, in the order asked): a LOCK, the UNLOCK after it, a CLOSE and a CREATE of the file
/// again reach its home in the order its clients sent them, as when the I/O thread waited for
/// each. (A file's streams go with it.)
pub fn order_of(key: crate::server::FileKey) -> u64 {
    key.ino.max(1)
}

/// The answer to a call, as it came back from the file's home (or why none came).
pub fn answer_of(answer: Result<Vec<u8>, NtStatus>) -> Result<msg::Answer, NtStatus> {
    match msg::Message::decode(&answer?) {
        Ok(msg::Message::Answer(a)) => Ok(a),
        _ => {
            tracing::warn!("a node answered a call with something else");
            Err(NtStatus::INTERNAL_ERROR)
        }
    }
}

/// An answer a call does not expect: the home runs another version.
pub fn unexpected(answer: &msg::Answer) -> NtStatus {
    tracing::warn!(?answer, "a file's home answered unexpectedly");
    NtStatus::INTERNAL_ERROR
}
