//! Durable opens moving between nodes (issue 18; shares that are not
//! continuously available): a client whose connection to node A went
//! reconnects (DHnC, DH2C) through node B.
//!
//! B asks A, the node that keeps the disconnected open (the top bits of
//! the FileId's volatile part name it), to give it up ([`Call::GiveUp`]).
//! A checks the reconnect exactly as its own would ([`durable::take_matching`]:
//! the same user, CreateGuid, lease key and name, share), lets the open go
//! *without* closing it at the file's home, and answers with the open's
//! state ([`HandOver`]). B opens the file again as the session's user,
//! checks it is the same file (its key), and has the file's home move the
//! open's share-mode entry, byte-range locks and lease to a new id of B's,
//! routed to the client's new connection ([`Call::Transfer`]). The FileId
//! keeps its persistent part; the volatile part is B's new id ([MS-SMB2]
//! 2.2.14.1: it may change on a reconnect).
//!
//! When A is dead its disconnected opens went with it: the reconnect gets
//! OBJECT_NAME_NOT_FOUND, as on Windows and Samba without continuous
//! availability. A step that fails after A gave the open up closes it at
//! the home (sent again until a home takes it), so nothing lingers.

use std::sync::{Arc, Mutex};

use ringshare_vfs::Who;
use ringshare_wire::{FileId, NtStatus};

pub use super::msg::Moved;
use super::msg::{Answer, Call, GiveUpAsk, HandOver, Transferred};
use super::reopen::{kind_of, open_from, reopen, state_of, Place};
use super::{node_of, Home};
use crate::durable::{self, Durability, Owner, Reconnect};
use crate::files::oplock::Route;
use crate::server::{lock, FileKey, NodeState, ServerState, ShareDef};
use crate::state::{Open, SessionRef, TreeKind};

/// The live node other than this one that keeps open `volatile` (made
/// there), if this is a cluster node.
pub fn holder(here: &NodeState, volatile: u64) -> Option<u16> {
    let link = here.link()?;
    let node = node_of(volatile);
    (node != link.node() && link.members().contains(&node)).then_some(node)
}

/// Whether file `key` is decided by another node now.
pub fn homed_elsewhere(here: &NodeState, key: FileKey) -> bool {
    here.link().is_some() && here.home_of(key) != Home::Here
}

/// At the node keeping the open: give it up if the reconnect may have it.
pub(crate) fn give_up(server: &ServerState, ask: &GiveUpAsk) -> Result<HandOver, NtStatus> {
    let owner = Owner {
        uid: ask.uid,
        user: ask.user.clone(),
    };
    let wanted = Reconnect {
        create_guid: ask.create_guid,
        lease_key: ask.lease_key,
        client_guid: ask.client_guid,
        name: &ask.name,
        share: &ask.share,
        owner: &owner,
    };
    let parked = match durable::take_matching(&server.files, ask.file_id, &wanted) {
        Ok(p) => p,
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) => {
            // A persistent open this node (its file's home) is still to take over from a
            // dead node: the reconnect is to be tried again, not told it is gone.
            super::ca::keeper(server, ask.file_id)?;
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
        Err(s) => return Err(s),
    };
    let open = parked.open;
    let h = state_of(&open, &lock(&open.state), &parked.durability);
    if homed_elsewhere(&server.node, open.key) {
        // This node's record of the open goes; the home keeps it for the
        // transfer.
        let gone = crate::decide::remove_open(&mut lock(&open.entry), open.id);
        if let Some(id) = gone {
            server.lease_left(id, open.key);
        }
    }
    tracing::info!(
        id = open.id,
        "a disconnected durable open handed over to another node"
    );
    let key = open.key;
    drop(open);
    server.files.drop_if_unused(key);
    Ok(h)
}

/// At the file's home: open `from` becomes open `to` (of node
/// `node_of(to)`), routed to `route`, acting as `who`. Other nodes first
/// give back the I/O grants an open of its kind on that node makes wrong.
pub(crate) fn transfer_here(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<crate::server::FileEntry>,
    moved: &Moved,
) -> Result<Transferred, NtStatus> {
    let asker = node_of(moved.to);
    let take = {
        let e = lock(entry);
        let o = e
            .opens
            .iter()
            .find(|o| o.owner == moved.from)
            .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
        let mut t = 0;
        if crate::files::access::can_write(o.access) {
            t |= super::grant::IoGrant::NO_FOREIGN_WRITERS;
        }
        if o.caching.level != crate::files::oplock::LEVEL_NONE {
            t |= super::grant::IoGrant::NO_FOREIGN_CACHING;
        }
        t
    };
    let take = |n| if n == asker { 0 } else { take };
    super::grant::after_revoking(here, key, entry, take, || {
        let mut e = lock(entry);
        let o = e
            .opens
            .iter_mut()
            .find(|o| o.owner == moved.from)
            .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
        o.owner = moved.to;
        o.caching.file_id.1 = moved.to;
        o.caching.route = moved.route;
        o.who = moved.who.clone();
        let open = o.clone();
        e.locks.rekey_owner(moved.from, moved.to);
        let lease = open.caching.lease.and_then(|id| {
            let l = e.leases.iter_mut().find(|l| l.id == id)?;
            l.route = moved.route;
            Some(l.clone())
        });
        let locks = e.locks.owned_by(moved.to);
        Ok(Transferred {
            open,
            lease,
            locks,
            delete_pending: e.delete_pending,
            grant: 0,
        })
    })?
}

/// Move open `moved.from` of file `key` to `moved.to` at the file's home
/// (here, or asked of it); on this node's record of a file homed elsewhere
/// the open is then recorded as the home answered.
pub fn transfer(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<crate::server::FileEntry>,
    moved: Moved,
) -> Result<Transferred, NtStatus> {
    let node = match server.node.home_of(key) {
        Home::Here => return transfer_here(&server.node, key, entry, &moved),
        Home::Node(n) => n,
        Home::Unavailable => return Err(NtStatus::FILE_NOT_AVAILABLE),
    };
    match super::ask(
        &server.node,
        node,
        Call::Transfer(key, Box::new(moved.clone())),
    )? {
        Answer::Transferred(t) => {
            let mut e = lock(entry);
            crate::decide::remove_open(&mut e, moved.from);
            e.opens.push(t.open.clone());
            if let Some(l) = &t.lease {
                e.leases.retain(|x| x.id != l.id);
                e.leases.push(l.clone());
                server.files.set_lease_file(l.id, key);
            }
            super::shadow::locked(&mut e, t.locks.iter().copied());
            e.delete_pending |= t.delete_pending;
            e.grants.held = super::grant::IoGrant(t.grant);
            Ok(*t)
        }
        Answer::Refused(s) => Err(s),
        a => Err(super::unexpected(&a)),
    }
}

/// Whether the home of file `name` (as this node sees it) can move an open
/// once its keeper has given it up: this node is the home, or a live node
/// is and says so itself. While the file's partition is between homes — its home died and
/// this node has not yet seen the survivor's claim — a give-up would lose
/// the open (the move fails, the open is closed): the reconnect is
/// FILE_NOT_AVAILABLE instead, and the client tries again. A name that does
/// not stat is left to the keeper to refuse.
fn home_can_take_it(here: &NodeState, share: &ShareDef, who: &Who, name: &str) -> bool {
    let Some(link) = here.link() else {
        return true;
    };
    let Ok(path) = crate::path::parse_smb_path(name) else {
        return true;
    };
    let Ok(attr) = share.backend.stat(who, &path) else {
        return true;
    };
    let key = here.file_key(&attr);
    match here.home_of(key) {
        Home::Here => true,
        // The node this one takes for the home says so itself: while partitions move (a node
        // stopping, or starting again and taking its partitions back) views differ by hundreds
        // of milliseconds, and an open given up to a move its home refuses is lost (issue 33:
        // a persistent handle not back in 20 s in scripts/cluster-upgrade.sh).
        Home::Node(n) => {
            link.members().contains(&n)
                && match super::ask(here, n, Call::DeletePending(key, None)) {
                    Ok(Answer::Pending { .. }) => true,
                    // No entry there: the keeper decides (as before this question).
                    Ok(Answer::Refused(s)) => s == NtStatus::FILE_CLOSED,
                    _ => false,
                }
        }
        Home::Unavailable => false,
    }
}

/// Where a reconnect taken over from another node lands: the session's tree, the
/// connection its breaks go to, and the request's channel sequence.
pub struct Landing<'a> {
    pub sref: &'a SessionRef,
    pub tree_id: u32,
    pub route: Route,
    pub channel_sequence: u16,
}

/// A durable open taken over from another node, ready to join the session: the open, its
/// oplock level, its lease and the lease key the reconnect named, and its new FileId.
pub struct TakenOver {
    pub open: Open,
    pub level: u8,
    pub lease: Option<crate::files::oplock::Grant>,
    pub lease_key: Option<[u8; 16]>,
    pub file_id: FileId,
}

/// On node B: take over `file_id`, kept by node `node`, for the session and tree of
/// `landing` (the caller answers the CREATE with it, `crate::cmd::create::durable::finish` (crates/core)).
pub fn take_over_from(
    server: &Arc<ServerState>,
    landing: &Landing<'_>,
    node: u16,
    file_id: FileId,
    wanted: &Reconnect<'_>,
) -> Result<TakenOver, NtStatus> {
    let server = server.clone();
    let (share, who) = {
        let session = lock(landing.sref);
        let tree = session
            .trees
            .get(&landing.tree_id)
            .ok_or(NtStatus::NETWORK_NAME_DELETED)?;
        let TreeKind::Disk(share) = &tree.kind else {
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        };
        (Arc::clone(share), tree.who.clone())
    };
    if !home_can_take_it(&server.node, &share, &who, wanted.name) {
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    let ask = GiveUpAsk {
        file_id,
        create_guid: wanted.create_guid,
        lease_key: wanted.lease_key,
        client_guid: wanted.client_guid,
        name: wanted.name.to_string(),
        share: wanted.share.to_string(),
        uid: wanted.owner.uid,
        user: wanted.owner.user.clone(),
        // Lowered for a keeper of an older level (super::ask).
        posix: true,
    };
    let h = match super::ask(&server.node, node, Call::GiveUp(Box::new(ask)))? {
        Answer::GivenUp(h) => *h,
        Answer::Refused(s) => return Err(s),
        a => return Err(super::unexpected(&a)),
    };
    // The id the open goes by at its file's home: a persistent open a node took over from a
    // dead one has a new one there, which its record names (super::ca::renamed).
    let was = if h.persistent && node_of(file_id.volatile) != node {
        super::ca::id_of(&server.node, file_id)
    } else {
        file_id.volatile
    };
    // From here the open is this node's to finish or to close.
    let close_at_home = |owner: u64| {
        lock(&server.node.unsent_closes).push(super::UnsentClose {
            key: h.key,
            owner,
            delete_on_close: false,
            share: share.name.clone(),
            who: who.clone(),
        });
    };
    let reopened = reopen(&server.node, &share, &who, &h);
    let fs_node = match reopened {
        Ok(n) => n,
        Err(s) => {
            tracing::warn!(?s, path = ?h.path, "a handed-over durable open's file did not open again");
            close_at_home(was);
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
    };
    let id = server.files.new_owner_id();
    let route = landing.route;
    let entry = server.files.entry(h.key);
    if lock(&entry).opens.is_empty() {
        let mut e = lock(&entry);
        e.share = share.name.clone();
        e.path = h.path.clone();
        e.is_dir = h.is_dir;
    }
    let moved = Moved {
        from: was,
        to: id,
        route,
        who: Some(who.clone()),
    };
    let t = match transfer(&server, h.key, &entry, moved) {
        Ok(t) => t,
        Err(s) => {
            tracing::warn!(
                ?s,
                "the file's home did not move a handed-over durable open"
            );
            server.files.drop_if_unused(h.key);
            close_at_home(was);
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
    };
    // The home's answer does not carry the flag (a Transferred's entry): this node's record
    // of the open takes it from the hand-over.
    if let Some(o) = lock(&entry).opens.iter_mut().find(|o| o.owner == id) {
        o.posix = h.posix;
    }
    let durability = Durability {
        kind: kind_of(h.kind)?,
        timeout_ms: h.timeout_ms,
        create_guid: h.durable_create_guid,
        client_guid: h.durable_client_guid,
        owner: wanted.owner.clone(),
        persistent: h.persistent,
    };
    let replay = h.create_guid.is_some();
    let place = Place {
        id,
        persistent_id: file_id.persistent,
        tree_id: landing.tree_id,
        channel_sequence: landing.channel_sequence,
        replay_eligible: replay,
    };
    let open = open_from(h, place, who, fs_node, entry, share, durability);
    if let Err(s) = super::ca::store(&server.node, &open) {
        // Its record still names the node that gave it up: close it.
        crate::opens::close_open(&server, Arc::new(open), false);
        return Err(s);
    }
    let lease = t.lease.as_ref().map(crate::files::oplock::Grant::of_lease);
    let lease_key = wanted.lease_key.and(t.open.caching.lease.map(|l| l.key));
    let new_id = FileId {
        persistent: file_id.persistent,
        volatile: id,
    };
    tracing::info!(from = was, id, "durable open taken over from node {node}");
    Ok(TakenOver {
        open,
        level: t.open.caching.level,
        lease,
        lease_key,
        file_id: new_id,
    })
}

/// Tell the homes of files homed elsewhere which of this node's durable
/// opens of them are parked now (route [`durable::DISCONNECTED`]), so that
/// an open that would have to break one has it closed instead
/// ([`close_parked_elsewhere`]), as a single server does. An open
/// reconnected meanwhile is left alone; a home that cannot be reached is
/// told at the next call.
pub(crate) fn tell_homes_of_parked(server: &ServerState) {
    let notes = std::mem::take(&mut *lock(&server.node.unsent_parks));
    let mut left = Vec::new();
    for (key, persistent, id) in notes {
        let who = match lock(&server.files.durables).get(persistent) {
            Some(p) if p.open.id == id => p.open.who.clone(),
            _ => continue,
        };
        let Home::Node(node) = server.node.home_of(key) else {
            if server.node.home_of(key) == Home::Unavailable {
                left.push((key, persistent, id));
            }
            continue;
        };
        let moved = Moved {
            from: id,
            to: id,
            route: durable::DISCONNECTED,
            who: Some(who),
        };
        match super::ask(&server.node, node, Call::Transfer(key, Box::new(moved))) {
            Ok(_) => {}
            Err(_) => left.push((key, persistent, id)),
        }
    }
    lock(&server.node.unsent_parks).extend(left);
}

/// At a file's home: the disconnected opens `ids` (FileIds) kept by other
/// nodes are in a new open's way; their nodes close them.
pub(crate) fn close_parked_elsewhere(here: &NodeState, ids: &[(u64, u64)]) {
    let mut nodes: Vec<u16> = ids.iter().map(|(_, v)| node_of(*v)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    for node in nodes {
        let mine: Vec<(u64, u64)> = ids
            .iter()
            .copied()
            .filter(|(_, v)| node_of(*v) == node)
            .collect();
        if let Err(s) = super::ask(here, node, Call::CloseParked(mine)) {
            tracing::warn!(
                node,
                ?s,
                "a node did not close its disconnected opens in a new open's way"
            );
        }
    }
}

/// At the node keeping them: close these parked opens (FileIds).
pub(crate) fn close_parked(server: &ServerState, ids: &[(u64, u64)]) {
    for p in durable::take_parked(&server.files, ids) {
        tracing::debug!(
            id = p.open.id,
            "closing a disconnected durable open another node's open would have to break"
        );
        crate::opens::close_open(server, p.open, false);
    }
}
