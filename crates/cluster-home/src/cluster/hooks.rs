//! What the per-file operations below the cluster layer ask of it ([`ClusterHooks`], issue 30):
//! set by [`ServerState::join_cluster`], so that crate::decide, crate::opens, crate::durable,
//! crate::notify and crate::deliver never name the cluster.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ringshare_wire::NtStatus;

use super::msg::{self, Answer, Call};
use super::{ask, node_of, shadow, UnsentClose};
use crate::files::oplock::{Break, Route};
use crate::link::Closed;
use crate::lookup::HomeAsk;
use crate::server::{lock, ClusterHooks, FileEntry, FileKey, NodeState, ServerState, ShareDef};
use crate::state::Open;
use crate::watch::Change;

/// The cluster layer's [`ClusterHooks`].
pub struct Hooks;

/// Wire call `ask` and what runs on its answer, carried together as one job of a home-call
/// thread in its order (`HomeAsk::run` there): for an answer whose follow-up makes calls that
/// may wait (file system calls on a share whose calls may wait on a network, a call to another
/// node), which on the I/O thread's ring would run where the answer comes in (issue 33).
fn on_a_thread(ask: HomeAsk) -> HomeAsk {
    let (node, order) = (ask.node, ask.order);
    HomeAsk::job(node, order, Box::new(move || ask.run()))
}

impl ClusterHooks for Hooks {
    fn close_elsewhere(
        &self,
        server: &ServerState,
        node: Option<u16>,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        owner: u64,
        delete_on_close: bool,
        who: &ringshare_vfs::Who,
    ) -> Closed {
        let c = HomeClose::new(key, entry, owner, delete_on_close, who);
        let answer = match node {
            Some(n) => ask(&server.node, n, c.call()),
            None => Err(NtStatus::FILE_NOT_AVAILABLE),
        };
        c.answered(server, answer)
    }

    fn close_posted(
        &self,
        server: &Arc<ServerState>,
        node: u16,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        owner: u64,
        delete_on_close: bool,
        who: &ringshare_vfs::Who,
        (offloaded, then): (bool, Box<dyn FnOnce(Closed) + Send>),
    ) -> Option<HomeAsk> {
        let c = HomeClose::new(key, entry, owner, delete_on_close, who);
        let ask = match super::to_ask(&server.node, node, c.call()) {
            Ok(ask) => ask,
            Err(s) => {
                then(c.answered(server, Err(s)));
                return None;
            }
        };
        // Run once, where the call is carried, as its answer comes in: the close finishes
        // there, and its answer is only logged (HomeClose::answered). On a share whose calls
        // may wait on a network that is a home-call thread: the close's end (the last close, a
        // removal the home decided) makes file system calls.
        let server = Arc::clone(server);
        let ask = ask.then(Box::new(move |answer: &crate::lookup::HomeResult| {
            then(c.answered(&server, super::answer_of(answer.clone())));
        }));
        Some(if offloaded { on_a_thread(ask) } else { ask })
    }

    fn delete_pending_at(
        &self,
        here: &NodeState,
        node: u16,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        set: Option<bool>,
    ) -> Result<(bool, bool), NtStatus> {
        shadow::delete_pending(entry, ask(here, node, Call::DeletePending(key, set)))
    }

    fn delete_pending_posted(
        &self,
        here: &NodeState,
        node: u16,
        key: FileKey,
        entry: Arc<Mutex<FileEntry>>,
        then: Box<dyn FnOnce(Result<bool, NtStatus>) + Send>,
    ) -> Option<HomeAsk> {
        let ask = match super::to_ask(here, node, Call::DeletePending(key, None)) {
            Ok(ask) => ask,
            Err(s) => {
                then(Err(s));
                return None;
            }
        };
        // Run once, as its answer comes in, where the call is carried: a home-call thread, not
        // the I/O thread's ring, since `then` may close the open (at its home: a call of its
        // own, waited for; and the file system's calls).
        let ask = ask.then(Box::new(move |answer: &crate::lookup::HomeResult| {
            let pending = shadow::delete_pending(&entry, super::answer_of(answer.clone()));
            then(pending.map(|(p, _)| p));
        }));
        Some(on_a_thread(ask))
    }

    fn open_closed(&self, here: &NodeState, open: &Open) -> Option<crate::lookup::ClusterAsk> {
        super::ca::take_forget(here, open)
    }

    fn forward_break(&self, here: &NodeState, route: Route, notice: &Break) -> bool {
        forward(here, route, notice)
    }

    fn changes(&self, here: &NodeState, share: &ShareDef, changes: &[Change<'_>]) {
        super::notify::forward(here, share, changes);
    }

    fn watching(&self, here: &NodeState, watching: bool) {
        super::notify::watching(here, watching);
    }

    fn dir_changed(
        &self,
        here: &NodeState,
        share: &str,
        dir: &ringshare_vfs::RelPath,
        except: Option<[u8; 16]>,
    ) {
        super::notify::forward_dir_change(here, share, dir, except);
    }
}

/// A close of an open of a file homed on another node, on its way to the home: what its
/// answer needs. The shadow entry lets the open go at once, whatever the home answers.
pub struct HomeClose {
    key: FileKey,
    owner: u64,
    delete_on_close: bool,
    share: String,
    who: ringshare_vfs::Who,
    path: ringshare_vfs::RelPath,
    is_dir: bool,
}

impl HomeClose {
    /// Open `owner` of `key` (whose shadow entry is `entry`) closes.
    pub fn new(
        key: FileKey,
        entry: &Mutex<FileEntry>,
        owner: u64,
        delete_on_close: bool,
        who: &ringshare_vfs::Who,
    ) -> HomeClose {
        let mut e = lock(entry);
        shadow::closed(&mut e, owner);
        HomeClose {
            key,
            owner,
            delete_on_close,
            share: e.share.clone(),
            who: who.clone(),
            path: e.path.clone(),
            is_dir: e.is_dir,
        }
    }

    /// The call to the file's home.
    pub fn call(&self) -> Call {
        Call::Close {
            key: self.key,
            owner: self.owner,
            delete_on_close: self.delete_on_close,
        }
    }

    /// What the close leaves, from the home's answer; a home that is gone, busy rebuilding
    /// or did not answer has the close sent again until a home takes it (the home that
    /// rebuilds the file's state may have this open from before the close).
    pub fn answered(self, server: &ServerState, answer: Result<Answer, NtStatus>) -> Closed {
        match answer {
            Ok(Answer::Closed(closed, lease_gone)) => {
                if let Some(id) = lease_gone {
                    server.lease_left(id, self.key);
                }
                closed
            }
            other => {
                // The first since the count was last said (`NodeState::closes_not_taken`).
                let before = server.node.closes_not_taken.fetch_add(1, Ordering::Relaxed);
                if before == 0 {
                    tracing::warn!(
                        ?other,
                        key = ?self.key,
                        "a file's home did not take a close; sent again later (more are counted)"
                    );
                }
                let (path, is_dir) = (self.path.clone(), self.is_dir);
                self.withdraw(&server.node);
                Closed {
                    remove: false,
                    last_open: false,
                    path,
                    is_dir,
                    newly_pending: false,
                }
            }
        }
    }

    /// The close is sent again until a home takes it ([`super::ClusterNode::resend_closes`]):
    /// its answer did not come, or will reach nobody (the request's connection went).
    pub fn withdraw(self, here: &NodeState) {
        lock(&here.unsent_closes).push(UnsentClose {
            key: self.key,
            owner: self.owner,
            delete_on_close: self.delete_on_close,
            share: self.share,
            who: self.who,
        });
    }
}

/// Send a break for a connection of another node there: true when the
/// connection is another node's (the break went, or is lost with that
/// node), false when it is this node's to post.
fn forward(here: &NodeState, route: Route, notice: &Break) -> bool {
    let Some(link) = here.link() else {
        return false;
    };
    let node = node_of(route.conn_id);
    if node == link.node() || node == 0 {
        return false;
    }
    let post = msg::Post {
        route,
        notice: notice.clone(),
    };
    link.post(node, msg::Message::Post(post).encode());
    true
}
