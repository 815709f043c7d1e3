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
//! availability. Once A gave the open up it is B's: when the home does not
//! move it (partitions moving, the home stopping or not holding it under
//! the id B asked for), B keeps it as a disconnected durable open of its
//! own ([`keep`]; a persistent open's record names B) and the reconnect is
//! FILE_NOT_AVAILABLE; the next reconnect through B moves it first
//! ([`move_kept`]), one through another node has B give it up. Only a real
//! end closes it: its file gone, its record gone, its timeout.

use std::sync::{Arc, Mutex};

use ringshare_vfs::Who;
use ringshare_wire::{FileId, NtStatus};

pub use super::msg::Moved;
use super::msg::{Answer, Call, GiveUpAsk, HandOver, Message, Transferred};
use super::reopen::{durability_of, open_from, reopen, state_of, Place};
use super::{node_of, Home};
use crate::durable::{self, Owner, Reconnect};
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

/// At the node keeping the open: give it up if the reconnect may have it. A persistent open
/// whose record names this node while no node holds it is taken back first
/// ([`super::takeback`]). `now_ms`: this node's clock.
pub(crate) fn give_up(
    server: &ServerState,
    ask: &GiveUpAsk,
    now_ms: u64,
) -> Result<HandOver, NtStatus> {
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
    let mut parked = durable::take_matching(&server.files, ask.file_id, &wanted);
    if matches!(parked, Err(NtStatus::OBJECT_NAME_NOT_FOUND))
        && super::takeback::take_back(server, ask.file_id, &wanted, now_ms)
    {
        parked = durable::take_matching(&server.files, ask.file_id, &wanted);
    }
    let parked = match parked {
        Ok(p) => p,
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) => {
            if let Some(h) = given_before(server, ask) {
                return Ok(h);
            }
            // A persistent open this node (its file's home) is still to take over from a
            // dead node: the reconnect is to be tried again, not told it is gone.
            super::ca::keeper(server, ask.file_id)?;
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
        Err(s) => return Err(s),
    };
    let open = parked.open;
    lock(&server.node.unmoved).remove(&(parked.persistent_id, open.id));
    if parked.durability.persistent {
        super::takeback::given_up(&server.node, parked.persistent_id, now_ms);
    }
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
    remember_given(&server.node, ask, &h);
    Ok(h)
}

/// The same ask the same again (issue 33): a give-up of a persistent open this node read in
/// time but answered after its asker's 2 s went (this node overloaded) reaches nobody, and the
/// open, let go here and never moved at its file's home, would be lost (its record naming this
/// node, every reconnect FILE_NOT_AVAILABLE). The client's next reconnect asks again (through
/// any node, by the same FileId) and is answered as the first one would have been: the open's
/// file's home still holds it under the id its record names, so the move the asker then makes
/// is the one the first asker would have made. Kept for the open's durable timeout. (A keeper
/// stopped meanwhile does not carry the give-up out at all: crates/ringshare's peer layer
/// drops a call whose caller went.) Not for a durable open without a record: nothing tells
/// whether the first answer reached a node that keeps the open now (after a failed move).
fn remember_given(here: &NodeState, ask: &GiveUpAsk, h: &HandOver) {
    if here.link().is_none() || !h.persistent {
        return;
    }
    let now = std::time::Instant::now();
    let until = now + std::time::Duration::from_millis(h.timeout_ms.max(1));
    let given = crate::link::GivenUp {
        ask: ask_bytes(ask),
        answer: Message::Answer(Answer::GivenUp(Box::new(h.clone()))).encode(),
        until,
    };
    let mut g = lock(&here.given_up);
    g.retain(|_, v| v.until > now);
    g.insert((ask.file_id.persistent, ask.file_id.volatile), given);
}

/// What this node answered an ask the same as `ask` (the same FileId, CreateGuid, lease key,
/// client, name, share and user) when it gave the open up ([`remember_given`]), while the
/// open's record still names this node its keeper: no node has stored it as its own since (the
/// first asker, once it had the answer, moved the open or kept it, and its record says so).
/// The file's home is to hold it under the record's id, as the first give-up left it: a home of
/// level 5 enters it again if it holds no open of it (the first asker, of the build before
/// levels, closed it when its move failed: [`super::takeback::restore_given`]).
fn given_before(server: &ServerState, ask: &GiveUpAsk) -> Option<HandOver> {
    let here = &server.node;
    let now = std::time::Instant::now();
    let answer = {
        let mut g = lock(&here.given_up);
        g.retain(|_, v| v.until > now);
        let given = g.get(&(ask.file_id.persistent, ask.file_id.volatile))?;
        if given.ask != ask_bytes(ask) {
            return None;
        }
        given.answer.clone()
    };
    let Ok(Message::Answer(Answer::GivenUp(h))) = Message::decode(&answer) else {
        return None;
    };
    let me = here.link()?.node();
    let rec = super::ca::record(here, ask.file_id.persistent)?;
    if rec.keeper != me {
        return None;
    }
    super::takeback::restore_given(server, &rec);
    tracing::info!(
        persistent = ask.file_id.persistent,
        "a persistent open given up before handed over again: the first answer reached nobody"
    );
    Some(*h)
}

/// `ask` as compared with a later one: encoded, without what says only how the asker reads
/// the answer (`posix`, which the answer is lowered by).
fn ask_bytes(ask: &GiveUpAsk) -> Vec<u8> {
    let mut a = ask.clone();
    a.posix = false;
    Message::Call(Call::GiveUp(Box::new(a))).encode()
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
            if !link.members().contains(&n) {
                tracing::debug!(
                    home = n,
                    ?key,
                    "a reconnect waits: the file's home is no member"
                );
                return false;
            }
            let answer = super::ask(here, n, Call::DeletePending(key, None));
            let yes = match &answer {
                Ok(Answer::Pending { .. }) => true,
                // No entry there: the keeper decides (as before this question).
                Ok(Answer::Refused(s)) => *s == NtStatus::FILE_CLOSED,
                _ => false,
            };
            if !yes {
                tracing::debug!(
                    home = n,
                    ?key,
                    ?answer,
                    "a reconnect waits: the file's home does not say so"
                );
            }
            yes
        }
        Home::Unavailable => {
            tracing::debug!(?key, "a reconnect waits: no node decides for the file now");
            false
        }
    }
}

/// Where a reconnect taken over from another node lands: the session's tree, the
/// connection its breaks go to, the request's channel sequence, and this node's clock (an open
/// kept after a failed move is parked from then).
pub struct Landing<'a> {
    pub sref: &'a SessionRef,
    pub tree_id: u32,
    pub route: Route,
    pub channel_sequence: u16,
    pub now_ms: u64,
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

/// The share and user of `landing`'s tree.
fn tree_of(landing: &Landing<'_>) -> Result<(Arc<ShareDef>, Who), NtStatus> {
    let session = lock(landing.sref);
    let tree = session
        .trees
        .get(&landing.tree_id)
        .ok_or(NtStatus::NETWORK_NAME_DELETED)?;
    let TreeKind::Disk(share) = &tree.kind else {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    };
    Ok((Arc::clone(share), tree.who.clone()))
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
    let (share, who) = tree_of(landing)?;
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
    // dead one (or kept after a failed move) has another there, which its record names
    // (super::ca::renamed). Also when the keeper's number is the one the client's id bears: a
    // node that started again took over an open of its last life under a new id (issue 33,
    // scripts/cluster-upgrade.sh step 3: the move asked for the old id, the home refused it
    // OBJECT_NAME_NOT_FOUND, and the open was lost).
    let was = if h.persistent {
        super::ca::id_of(&server.node, file_id)
    } else {
        file_id.volatile
    };
    // From here the open is this node's to move, to keep, or (once really gone) to close.
    let reopened = match reopen(&server.node, &share, &who, &h) {
        Ok(n) => n,
        Err(s) => {
            tracing::warn!(?s, path = ?h.path, "a handed-over durable open's file did not open again");
            close_at_home(&server.node, &h, was, &share, &who);
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
    };
    let given = Given {
        h,
        was,
        node: reopened,
        share,
        who,
    };
    settle(server, landing, given, file_id, wanted, node)
}

/// An open a keeper gave up (or this node kept after a failed move), reopened here: its state,
/// the id its file's home holds it by, the file, the share and the user it acts as.
struct Given {
    h: HandOver,
    was: u64,
    node: Arc<dyn ringshare_vfs::Node>,
    share: Arc<ShareDef>,
    who: Who,
}

/// The open `given` is this node's: close it at its file's home (sent again until a home takes
/// it). Only for an open that is really gone (its file is).
fn close_at_home(here: &NodeState, h: &HandOver, was: u64, share: &ShareDef, who: &Who) {
    lock(&here.unsent_closes).push(super::UnsentClose {
        key: h.key,
        owner: was,
        delete_on_close: false,
        share: share.name.clone(),
        who: who.clone(),
    });
}

/// Move `given` to a new id of this node at its file's home and make it the session's; when
/// the move fails, keep it ([`keep`]) and answer FILE_NOT_AVAILABLE (try again). `from`: the
/// node that gave it up (for the log).
fn settle(
    server: &Arc<ServerState>,
    landing: &Landing<'_>,
    given: Given,
    file_id: FileId,
    wanted: &Reconnect<'_>,
    from: u16,
) -> Result<TakenOver, NtStatus> {
    let (h, was) = (&given.h, given.was);
    let id = server.files.new_owner_id();
    let entry = server.files.entry(h.key);
    lock(&entry).name_if_unused(&given.share.name, &h.path, h.is_dir);
    let moved = Moved {
        from: was,
        to: id,
        route: landing.route,
        who: Some(given.who.clone()),
    };
    let t = match transfer(server, h.key, &entry, moved) {
        Ok(t) => t,
        Err(s) => {
            tracing::warn!(
                ?s,
                from = was,
                to = id,
                home = ?server.node.home_of(h.key),
                path = ?h.path,
                "the file's home did not move a handed-over durable open: kept here for the next reconnect"
            );
            drop(entry);
            return keep(server, given, file_id, wanted, (landing.now_ms, from), s);
        }
    };
    // The home's answer does not carry the flag (a Transferred's entry): this node's record
    // of the open takes it from the hand-over.
    if let Some(o) = lock(&entry).opens.iter_mut().find(|o| o.owner == id) {
        o.posix = h.posix;
    }
    let Given {
        h,
        node: fs_node,
        share,
        who,
        ..
    } = given;
    let durability = durability_of(&h, wanted.owner)?;
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
        crate::opens::close_open(server, Arc::new(open), false);
        return Err(s);
    }
    let lease = t.lease.as_ref().map(crate::files::oplock::Grant::of_lease);
    let lease_key = wanted.lease_key.and(t.open.caching.lease.map(|l| l.key));
    let new_id = FileId {
        persistent: file_id.persistent,
        volatile: id,
    };
    tracing::info!(from = was, id, "durable open taken over from node {from}");
    Ok(TakenOver {
        open,
        level: t.open.caching.level,
        lease,
        lease_key,
        file_id: new_id,
    })
}

/// The move of `given` failed (`why`) after its keeper gave it up (issue 33): this node keeps
/// it as a disconnected durable open of its own, under the id the file's home holds it by
/// (`given.was`), for its timeout, and the reconnect is told FILE_NOT_AVAILABLE. Its entry here
/// holds it (for a file homed elsewhere the shadow a new home's reclaim reads; for a file
/// homed here the home's own entry, which a reclaim may have rebuilt without it) with its
/// locks and lease from its record; its record names this node. The next reconnect through
/// this node moves it first ([`move_kept`]); one through another node finds this node by the
/// record and has it give the open up as any keeper does. If this node dies meanwhile the
/// record lets the file's home take the open over (`super::ca`). A non-persistent open has no
/// record: a home that no longer holds it (OBJECT_NAME_NOT_FOUND) has let it go, and so does
/// this node.
fn keep(
    server: &Arc<ServerState>,
    given: Given,
    file_id: FileId,
    wanted: &Reconnect<'_>,
    (now_ms, from): (u64, u16),
    why: NtStatus,
) -> Result<TakenOver, NtStatus> {
    let Given {
        h,
        was,
        node,
        share,
        who,
    } = given;
    // A persistent open is gone when its record is (closed or expired); one whose record
    // cannot be read now is kept, its record left as it is.
    let rec = match (h.persistent, server.node.link()) {
        (true, Some(link)) => match link.ca_get(file_id.persistent) {
            Ok(None) => Ok(None),
            Ok(Some(_)) => super::ca::record(&server.node, file_id.persistent)
                .map(Some)
                .ok_or(()),
            Err(_) => Err(()),
        },
        _ => Ok(None),
    };
    let gone = match &rec {
        Ok(None) => h.persistent || why == NtStatus::OBJECT_NAME_NOT_FOUND,
        Ok(Some(_)) | Err(_) => false,
    };
    if gone {
        tracing::warn!(
            ?why,
            id = was,
            "a handed-over durable open whose move failed is gone"
        );
        if let Some(e) = server.files.existing(h.key) {
            if homed_elsewhere(&server.node, h.key) {
                crate::decide::remove_open(&mut lock(&e), was);
            }
        }
        server.files.drop_if_unused(h.key);
        close_at_home(&server.node, &h, was, &share, &who);
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let rec = rec.ok().flatten();
    if let Some(r) = rec
        .as_ref()
        .filter(|r| !still_its(&server.node, r, from, was))
    {
        // Another node has taken it over meanwhile (the file's home, seeing the node that gave it
        // up gone): this copy goes, and the client finds that node by the record.
        tracing::info!(
            id = was,
            keeper = r.keeper,
            "a handed-over durable open whose move failed is kept by another node now"
        );
        if let Some(e) = server.files.existing(h.key) {
            if homed_elsewhere(&server.node, h.key) {
                crate::decide::remove_open(&mut lock(&e), was);
            }
        }
        server.files.drop_if_unused(h.key);
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    let store = rec.is_some();
    // The home holds it by the id its record names (the one the move asked for, read from it).
    let was = rec.as_ref().map_or(was, |r| r.file_id.volatile);
    let entry = server.files.entry(h.key);
    {
        let mut e = lock(&entry);
        e.name_if_unused(&share.name, &h.path, h.is_dir);
        match &rec {
            Some(rec) => super::ca::enter_kept(&server.files, &mut e, rec, was),
            None => enter_unrecorded(&mut e, &h, was, file_id.persistent, &who, wanted),
        }
    }
    let durability = durability_of(&h, wanted.owner)?;
    let place = Place {
        id: was,
        persistent_id: file_id.persistent,
        tree_id: 0,
        channel_sequence: 0,
        replay_eligible: false,
    };
    let open = Arc::new(open_from(h, place, who, node, entry, share, durability));
    // Its record names this node now (if etcd does not take it, it still names the node that
    // gave the open up, and only a reconnect through this node finds it).
    if store {
        let _ = super::ca::store(&server.node, &open);
    }
    lock(&server.node.unmoved).insert((open.persistent_id, was));
    tracing::info!(
        id = was,
        "a handed-over durable open whose move failed is kept here until its client reconnects"
    );
    // (Its id is `was`: the open is parked under the id its client knows.)
    super::ca::park(server, open, now_ms);
    Err(NtStatus::FILE_NOT_AVAILABLE)
}

/// Whether persistent open record `r` still describes the open node `from` gave up under id
/// `was` (it names as keeper this node, a node gone, or `from` with that id): not one another
/// node has taken over since, nor one `from` took back under a new id
/// ([`super::takeback`]).
fn still_its(here: &NodeState, r: &super::msg::CaRecord, from: u16, was: u64) -> bool {
    let Some(link) = here.link() else {
        return true;
    };
    (r.keeper == from && r.file_id.volatile == was)
        || r.keeper == link.node()
        || !link.members().contains(&r.keeper)
}

/// A durable open without a record (not persistent) as open `id` of entry `e`, routed
/// nowhere: its share modes, and its lease as the reconnect names it (the keeper checked it
/// matches) without caching. Its byte-range locks are at its file's home only.
fn enter_unrecorded(
    e: &mut crate::server::FileEntry,
    h: &HandOver,
    id: u64,
    persistent_id: u64,
    who: &Who,
    wanted: &Reconnect<'_>,
) {
    use crate::files::oplock;
    if e.opens.iter().any(|o| o.owner == id) {
        return;
    }
    let lease = wanted.lease_key.map(|key| oplock::LeaseId {
        client_guid: wanted.client_guid,
        key,
    });
    e.opens.push(crate::server::ShareEntry {
        owner: id,
        access: h.access,
        share_access: h.share_access,
        caching: super::ca::caching_of(lease, durable::DISCONNECTED, (persistent_id, id)),
        who: Some(who.clone()),
        posix: h.posix,
    });
    if let Some(id) = lease.filter(|id| !e.leases.iter().any(|l| l.id == *id)) {
        e.leases.push(oplock::Lease {
            id,
            state: 0,
            breaking_to: None,
            required: 0,
            break_deadline_ms: 0,
            epoch: 0,
            v2: h.kind == 2,
            parent_key: None,
            route: durable::DISCONNECTED,
        });
    }
}

/// Whether parked open `parked` is one this node keeps after its move failed ([`keep`]).
pub fn unmoved(here: &NodeState, parked: &durable::Parked) -> bool {
    lock(&here.unmoved).contains(&(parked.persistent_id, parked.open.id))
}

/// A reconnect through this node of an open it keeps after its move failed ([`unmoved`],
/// taken out of the table by the reconnect's checks): the move again, from the id the file's
/// home holds it by to a new one of this node's; kept again (FILE_NOT_AVAILABLE) if it fails.
pub fn move_kept(
    server: &Arc<ServerState>,
    landing: &Landing<'_>,
    parked: durable::Parked,
    wanted: &Reconnect<'_>,
) -> Result<TakenOver, NtStatus> {
    let open = parked.open;
    let was = open.id;
    lock(&server.node.unmoved).remove(&(parked.persistent_id, was));
    let (share, who) = tree_of(landing)?;
    let h = state_of(&open, &lock(&open.state), &parked.durability);
    let file_id = FileId {
        persistent: open.persistent_id,
        volatile: was,
    };
    let given = Given {
        h,
        was,
        node: Arc::clone(&open.node),
        share,
        who,
    };
    // (Its entry here keeps holding it: the move's answer replaces it, or it is kept again.)
    drop(open);
    let me = server.node.link().map_or(0, |l| l.node());
    settle(server, landing, given, file_id, wanted, me)
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
/// nodes are in a new open's way; their nodes close them (asked of all at once,
/// [`super::ask_all`]).
pub(crate) fn close_parked_elsewhere(here: &NodeState, ids: &[(u64, u64)]) {
    let mut nodes: Vec<u16> = ids.iter().map(|(_, v)| node_of(*v)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let calls: Vec<(u16, Call)> = nodes
        .iter()
        .map(|&node| {
            let mine: Vec<(u64, u64)> = ids
                .iter()
                .copied()
                .filter(|(_, v)| node_of(*v) == node)
                .collect();
            (node, Call::CloseParked(mine))
        })
        .collect();
    for (node, answer) in nodes.into_iter().zip(super::ask_all(here, calls)) {
        if let Err(s) = answer {
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
