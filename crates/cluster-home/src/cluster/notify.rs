//! CHANGE_NOTIFY and directory leases across nodes: a change made through
//! one node reaches the watchers of every node, and breaks the leases of
//! the directory it was made in wherever that directory's home is (a
//! directory's leases are decided by its home, as a file's are). A node
//! with watchers or leased directories (of which it is the home) tells the
//! others that it wants their changes ([`super::msg::Message::Interest`],
//! when its first watcher is armed or directory leased, when its last one
//! ends, and to a node that joins); a node that changes something sends the
//! change to the nodes that want it (a post each, not waited for): they
//! report it to their watchers as their own changes (so that their
//! kernel's echo of it, when they share the directory, is neither reported
//! twice nor breaks a lease the change spared), and break the leases of its
//! directory but the one the changing open named as its parent's
//! ([`super::msg::Message::DirChanged`]).

use super::msg::{Change, Message};
use crate::notify;
use crate::server::{lock, NodeState, ServerState, ShareDef};

/// Send changes made through this node to the nodes that want them.
pub fn forward(here: &NodeState, share: &ShareDef, changes: &[notify::Change<'_>]) {
    post_to_wanting(here, || Message::Changes {
        share: share.name.clone(),
        changes: changes
            .iter()
            .map(|c| Change {
                action: c.action,
                filter: c.filter,
                path: c.path.clone(),
                stream: c.stream.map(str::to_string),
            })
            .collect(),
    });
}

/// Send a change inside directory `dir` of `share` made through this node
/// to the nodes that want changes: those that decide for a leased `dir`
/// break its leases but `except`'s.
pub fn forward_dir_change(
    here: &NodeState,
    share: &str,
    dir: &ringshare_vfs::RelPath,
    except: Option<[u8; 16]>,
) {
    post_to_wanting(here, || Message::DirChanged {
        share: share.to_string(),
        dir: dir.clone(),
        except,
    });
}

/// Post the message `msg` makes to each node that wants this node's
/// changes (made only when there is one).
fn post_to_wanting(here: &NodeState, msg: impl FnOnce() -> Message) {
    let Some(link) = here.link() else {
        return;
    };
    let peers = lock(&here.notify_peers).clone();
    if peers.is_empty() {
        return;
    }
    let msg = msg();
    let level = msg.level();
    let msg = msg.encode();
    // A node of a lower level does not read it (docs/cluster.md, "Upgrading a cluster").
    for n in peers.into_iter().filter(|n| link.level_of(*n) >= level) {
        link.post(n, msg.clone());
    }
}

/// This node wants the other nodes' changes now (`true`: its first watcher
/// was armed or directory leased) or no longer does.
pub fn watching(here: &NodeState, watching: bool) {
    if let Some(link) = here.link() {
        let me = link.node();
        let others: Vec<u16> = link.members().into_iter().filter(|n| *n != me).collect();
        tell(here, &others, watching);
    }
}

fn tell(here: &NodeState, nodes: &[u16], watching: bool) {
    let Some(link) = here.link() else {
        return;
    };
    let msg = Message::Interest {
        from: link.node(),
        watching,
    }
    .encode();
    for n in nodes {
        // A first watcher is asked for, not posted: a change made through
        // another node after the watcher's interim answer must reach it (a
        // post could arrive later). A node that does not answer is told by
        // a post.
        let asked = || {
            let call = super::msg::Call::Interest { from: link.node() };
            super::ask(here, *n, call).is_ok()
        };
        if watching && asked() {
            continue;
        }
        link.post(*n, msg.clone());
    }
}

/// What the cluster layer offers the driver when nodes joined.
pub trait AnnounceWatchers {
    /// Nodes that joined: tell them whether this node has watchers.
    fn announce_watchers(&self, nodes: &[u16]);
}

impl AnnounceWatchers for ServerState {
    fn announce_watchers(&self, nodes: &[u16]) {
        if notify::wants(&self.node) {
            tell(&self.node, nodes, true);
        }
    }
}

/// Another node's changes, for this node's watchers (and, where this node
/// kernel-watches directories, marked as its own: their echo is dropped).
pub fn received(server: &ServerState, share: &str, changes: &[Change]) {
    if !server.notify.active() {
        return;
    }
    let Some(share) = server.shares().share(share).cloned() else {
        return;
    };
    let Some(root) = notify::root_key_known(&share) else {
        return;
    };
    let changes: Vec<notify::Change<'_>> = changes
        .iter()
        .map(|c| notify::Change {
            action: c.action,
            filter: c.filter,
            path: &c.path,
            stream: c.stream.as_deref(),
        })
        .collect();
    notify::report_at(server, root, &changes, true);
}

/// Node `from` has watchers now (or no longer).
pub fn interest(server: &ServerState, from: u16, watching: bool) {
    let mut peers = lock(&server.node.notify_peers);
    peers.retain(|n| *n != from);
    if watching {
        peers.push(from);
    }
    server.notify.set_remote(peers.len());
}
