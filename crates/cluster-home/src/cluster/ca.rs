//! Persistent opens of continuously available shares on a cluster (issue
//! 18): an open made with SMB2_DHANDLE_FLAG_PERSISTENT on a share with
//! `continuous availability = yes` has its record — the open, its user,
//! its lease key and its byte-range locks — stored in etcd before the
//! CREATE (or the LOCK that changed its locks) is answered ([`store`]),
//! and removed when it closes ([`take_forget`]). Its writes go through to
//! stable storage (crates/core/src/cmd/write.rs).
//!
//! When its node dies, the file's home keeps the open in the file's
//! share-mode table ([`ServerState::forget_node`] leaves it, routed
//! nowhere) or, when the home died too, puts it back after rebuilding the
//! file's state ([`ServerState::take_over_persistent`]); then it opens the
//! file again as the open's user and keeps the open as a disconnected
//! durable open of its own, with the record naming it as keeper. The
//! client reconnects (DH2C) through any node: the keeper hands the open
//! over as for any durable open ([`super::handover`]). The lease comes
//! back without caching (breaks after the record was written are not in
//! it), so the client drops what it cached.

use std::sync::Arc;

use ringshare_wire::{FileId, NtStatus};

use super::msg::{self, CaRecord};
use super::{partition_of, Home};
use crate::durable::{Durability, Owner, Parked, Reconnect, DISCONNECTED};
use crate::files::locks::ByteRangeLock;
use crate::files::oplock::{self, Lease};
use crate::lookup::ClusterAsk;
use crate::server::{lock, NodeState, ServerState, ShareEntry};
use crate::state::Open;

/// `open`'s durability when it is a persistent open of a cluster node.
fn persistent(here: &NodeState, open: &Open) -> Option<Durability> {
    here.link()?;
    lock(&open.state).durable.clone().filter(|d| d.persistent)
}

fn record_of(here: &NodeState, open: &Open, d: &Durability) -> Option<CaRecord> {
    let link = here.link()?;
    let mut state = super::reopen::state_of(open, &lock(&open.state), d);
    // Stored as a POSIX open's record only when every node reads it
    // (docs/cluster-internals.md, "Protocol levels").
    state.posix &= super::cluster_level(&**link) >= 3;
    let (lease, locks) = {
        let e = lock(&open.entry);
        let lease = e
            .opens
            .iter()
            .find(|s| s.owner == open.id)
            .and_then(|s| s.caching.lease)
            .and_then(|id| e.leases.iter().find(|l| l.id == id).cloned());
        (lease, e.locks.owned_by(open.id))
    };
    Some(CaRecord {
        keeper: link.node(),
        file_id: FileId {
            persistent: open.persistent_id,
            volatile: open.id,
        },
        share: open.share.name.clone(),
        uid: d.owner.uid,
        user: d.owner.user.clone(),
        who: Some(open.who.clone()),
        state,
        lease,
        locks,
    })
}

/// Store the record of `open` as it is now, if it is a persistent open of
/// a cluster node (before the answer that made or changed it).
pub fn store(here: &NodeState, open: &Open) -> Result<(), NtStatus> {
    match to_store(here, open) {
        Some(ask) => (ask.run)(),
        None => Ok(()),
    }
}

/// [`store`] as a question asked away from the I/O thread (a lookup; the request waits for
/// its answer, its thread does not): `None` when `open` has no record to store.
pub fn to_store(here: &NodeState, open: &Open) -> Option<ClusterAsk> {
    let d = persistent(here, open)?;
    let (link, rec) = (here.link()?, record_of(here, open, &d)?);
    let (link, id, open_id, rec) = (
        Arc::clone(link),
        open.persistent_id,
        open.id,
        msg::encode_ca(&rec),
    );
    Some(ClusterAsk {
        what: format!("the record of persistent open {id:#x} stored"),
        run: Box::new(move || {
            link.ca_put(id, rec.clone()).inspect_err(|s| {
                tracing::warn!(
                    ?s,
                    id = open_id,
                    "a persistent open's record was not stored"
                )
            })
        }),
    })
}

/// `open` closes: its record goes, if it still names this node's open (a copy left on a node
/// that lost it, after fencing, must not remove the record of the open its client took
/// elsewhere), by a question asked away from the I/O thread (a CLOSE waits for its answer,
/// its thread does not; the other closes post it: `crate::opens::closing`), taken from the
/// close of `open` that follows: the open is no longer durable, so that close does not ask it
/// again. `None` when `open` has no record.
pub fn take_forget(here: &NodeState, open: &Open) -> Option<ClusterAsk> {
    let ask = to_forget(here, open)?;
    lock(&open.state).durable = None;
    {
        let mut closed = lock(&here.closed_persistent);
        if closed.len() >= 100_000 {
            closed.clear();
        }
        closed.insert(open.persistent_id);
    }
    Some(ask)
}

/// The removal of `open`'s record, if it has one, as a question ([`take_forget`]).
fn to_forget(here: &NodeState, open: &Open) -> Option<ClusterAsk> {
    persistent(here, open)?;
    let (link, id, open_id) = (Arc::clone(here.link()?), open.persistent_id, open.id);
    Some(ClusterAsk {
        what: format!("the record of persistent open {id:#x} removed"),
        run: Box::new(move || {
            // (A record naming a dead keeper is this open's when the takeover that
            // made it this node's could not store its own.)
            let ours = match link.ca_get(id) {
                Ok(Some(b)) => msg::decode_ca(&b).is_ok_and(|r| {
                    r.file_id.volatile == open_id
                        && (r.keeper == link.node() || !link.members().contains(&r.keeper))
                }),
                Ok(None) => false,
                // Not known: removed (a record left behind would bring back an open
                // that is closed).
                Err(_) => true,
            };
            if ours {
                link.ca_delete(id);
            }
            Ok(())
        }),
    })
}

/// The live node other than this one that keeps persistent open `file_id`
/// by its record (after a takeover the keeper is not the node that made it).
/// A record that still names a dead keeper (the takeover's own record was
/// not stored) points at the file's home: the node that took it over.
///
/// While the open is between nodes the answer is FILE_NOT_AVAILABLE, for the client to try
/// again (issue 33: a reconnect must never hear "gone" while ownership moves): the records
/// cannot be read, or the record names a keeper that died and no live node has the open yet
/// (the file's home is not known, or it is this node and its takeover has not run). `None`:
/// no record, or this node keeps it.
pub fn keeper(server: &ServerState, file_id: FileId) -> Result<Option<u16>, NtStatus> {
    let Some(link) = server.node.link() else {
        return Ok(None);
    };
    let rec = match link.ca_get(file_id.persistent) {
        Ok(Some(rec)) => rec,
        Ok(None) => return Ok(None),
        Err(s) => {
            tracing::info!(
                ?s,
                "a persistent open's record could not be read: the reconnect is to be tried again"
            );
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
    };
    let Some(rec) = readable(&rec) else {
        return Ok(None);
    };
    // (Its volatile part may be a dead keeper's: the open has a new one, [`renamed`].)
    if rec.file_id.persistent != file_id.persistent {
        return Ok(None);
    }
    let node = if link.members().contains(&rec.keeper) {
        rec.keeper
    } else {
        match server.node.home_of(rec.state.key) {
            Home::Node(n) => n,
            Home::Here
                if lock(&server.files.durables)
                    .get(file_id.persistent)
                    .is_some() =>
            {
                return Ok(None)
            }
            Home::Here | Home::Unavailable => return Err(NtStatus::FILE_NOT_AVAILABLE),
        }
    };
    Ok((node != link.node()).then_some(node))
}

/// Whether a reconnect refused as not found (OBJECT_NAME_NOT_FOUND) names a persistent open
/// that is not gone: its record, read again now, is still there for this FileId and would let
/// this reconnect have it (its CreateGuid, share, user, and lease key and ClientGuid when it has
/// a lease), or cannot be read. Such an open is between nodes (issue 33's kill loop): the
/// node asked had not yet seen its keeper die while this one had (etcd reaches nodes hundreds
/// of milliseconds apart), or it was being taken over (its record naming the new keeper a
/// moment before the open is parked there), or it moved on meanwhile; the client is told to try
/// again (FILE_NOT_AVAILABLE). An open is gone when its record is: closed, or expired.
pub fn still_kept(here: &NodeState, file_id: FileId, wanted: &Reconnect<'_>) -> bool {
    let Some(link) = here.link() else {
        return false;
    };
    let rec = match link.ca_get(file_id.persistent) {
        Ok(Some(rec)) => rec,
        Ok(None) => return false,
        Err(_) => return true,
    };
    let Some(rec) = readable(&rec) else {
        return false;
    };
    lets_have(&rec, file_id, wanted)
}

/// Whether record `rec` is of persistent open `file_id` and would let reconnect `wanted` have
/// it: its CreateGuid, share, user, and lease key and ClientGuid when it has a lease.
pub(super) fn lets_have(rec: &CaRecord, file_id: FileId, wanted: &Reconnect<'_>) -> bool {
    let lease_matches = match (&rec.lease, wanted.lease_key) {
        (None, None) => true,
        (Some(l), Some(key)) => l.id.key == key && l.id.client_guid == wanted.client_guid,
        _ => false,
    };
    rec.file_id.persistent == file_id.persistent
        && wanted
            .create_guid
            .is_none_or(|g| g == rec.state.durable_create_guid)
        && rec.share.eq_ignore_ascii_case(wanted.share)
        && rec.uid == wanted.owner.uid
        && rec.user == wanted.owner.user
        && lease_matches
}

/// The records of persistent opens kept by nodes in `gone` or by no live
/// node (none without a store). An error when they cannot be read (logged).
pub(crate) fn orphans(server: &ServerState, gone: &[u16]) -> Result<Vec<CaRecord>, NtStatus> {
    let Some(link) = server.node.link() else {
        return Ok(Vec::new());
    };
    if !server.persistent_handles() {
        return Ok(Vec::new());
    }
    let members = link.members();
    match link.ca_all() {
        Ok(all) => Ok(all
            .iter()
            .filter_map(|b| readable(b))
            .filter(|r| gone.contains(&r.keeper) || !members.contains(&r.keeper))
            .collect()),
        Err(s) => {
            tracing::warn!(?s, "the persistent opens' records could not be read");
            Err(s)
        }
    }
}

/// A persistent open's record as this build reads it; `None` (and a log line, once per process)
/// for one it cannot: another version's (a newer node's, docs/cluster.md "Upgrading a
/// cluster"), or damaged. It is skipped, never misread.
fn readable(record: &[u8]) -> Option<CaRecord> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    match msg::decode_ca(record) {
        Ok(r) => Some(r),
        Err(e) => {
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    ?e,
                    "a persistent open's record this build cannot read (another version's) is \
                     skipped (said once)"
                );
            }
            None
        }
    }
}

/// The node a persistent open's record (as stored in etcd) names as its keeper; `None` for
/// bytes that are no such record.
pub fn record_keeper(record: &[u8]) -> Option<u16> {
    msg::decode_ca(record).ok().map(|r| r.keeper)
}

/// What the cluster layer offers the driver of persistent opens' records (continuously
/// available shares): how many a node keeps, taking over those gone nodes kept.
pub trait PersistentOpens {
    /// How many persistent opens' records name `node` as their keeper: a stopping node waits
    /// for none to be left (the other nodes have taken them over, crates/ringshare's
    /// `Node::leave`). An error when they cannot be read.
    fn persistent_opens_kept_by(&self, node: u16) -> Result<usize, NtStatus>;
    /// After nodes `gone` left (or partitions `gained` were rebuilt here):
    /// the persistent opens their nodes kept, of files homed here (or in
    /// `gained`), become this node's disconnected opens (see the module
    /// notes). Returns how many; an error when the records could not be
    /// read (nothing was taken over: call again).
    fn take_over_persistent(
        &self,
        gone: &[u16],
        gained: &[u32],
        now_ms: u64,
    ) -> Result<usize, NtStatus>;
}

impl PersistentOpens for ServerState {
    fn persistent_opens_kept_by(&self, node: u16) -> Result<usize, NtStatus> {
        let Some(link) = self.node.link() else {
            return Ok(0);
        };
        let all = link.ca_all()?;
        Ok(all
            .iter()
            .filter(|b| record_keeper(b) == Some(node))
            .count())
    }
    fn take_over_persistent(
        &self,
        gone: &[u16],
        gained: &[u32],
        now_ms: u64,
    ) -> Result<usize, NtStatus> {
        let Some(link) = self.node.link() else {
            return Ok(0);
        };
        let n = link.partitions();
        let mut taken = 0;
        for rec in orphans(self, gone)? {
            let key = rec.state.key;
            let mine =
                gained.contains(&partition_of(key, n)) || self.node.home_of(key) == Home::Here;
            if !mine {
                continue;
            }
            match self.reinstate(&rec, now_ms) {
                Ok(()) => taken += 1,
                Err(s) => {
                    tracing::warn!(?s, path = ?rec.state.path, "a dead node's persistent open could not be kept");
                    link.ca_delete(rec.file_id.persistent);
                }
            }
        }
        Ok(taken)
    }
}

/// The id a dead node's persistent open taken over here goes by (issue 33): `id`, one of this
/// node's, once its record naming this node as keeper and `id` is stored. Open ids name the node
/// that made them (`node_of`: the homes' grants, a reclaim's hand-over of a node's opens, a
/// reconnect's first guess at the keeper), and the dead node's number comes back with a new
/// process numbering its opens from the start again: under its old id the open would be taken
/// for that node's. `None` when etcd does not take the record: the open keeps the id its record
/// still names (a reconnect through another node moves the open from the id it reads there,
/// [`id_of`]); also while a node of a level below 4 serves.
fn renamed(here: &NodeState, rec: &CaRecord, id: u64) -> Option<u64> {
    let link = here.link()?;
    // Only when every node finds it under the new id (level 4; before, a reconnect through a
    // node of an older build looked for the FileId the client had, and heard "gone").
    if super::cluster_level(&**link) < 4 {
        return None;
    }
    let mut moved = rec.clone();
    moved.keeper = link.node();
    moved.file_id.volatile = id;
    for l in &mut moved.locks {
        l.owner = id;
    }
    match link.ca_put(rec.file_id.persistent, msg::encode_ca(&moved)) {
        Ok(()) => Some(id),
        Err(s) => {
            tracing::warn!(
                ?s,
                was = rec.file_id.volatile,
                "a persistent open taken over keeps its dead node's id (its record was not stored)"
            );
            None
        }
    }
}

/// The volatile id persistent open `file_id` goes by at the node keeping it, as its record
/// names it (a dead node's open taken over has a new one its client learns only when it
/// reconnects, [`renamed`]); `file_id`'s own when there is no readable record.
pub fn id_of(here: &NodeState, file_id: FileId) -> u64 {
    let rec = here
        .link()
        .and_then(|link| link.ca_get(file_id.persistent).ok().flatten());
    rec.as_deref()
        .and_then(readable)
        .filter(|r| r.file_id.persistent == file_id.persistent)
        .map_or(file_id.volatile, |r| r.file_id.volatile)
}

/// Persistent open `persistent_id`'s record as etcd has it now (`None`: none, unreadable, or
/// not to be read).
pub(crate) fn record(here: &NodeState, persistent_id: u64) -> Option<CaRecord> {
    let b = here.link()?.ca_get(persistent_id).ok().flatten()?;
    readable(&b).filter(|r| r.file_id.persistent == persistent_id)
}

/// Persistent open `rec` as open `id` of file entry `e`, routed nowhere, with its byte-range
/// locks and its lease (without caching: breaks since the record are not in it), unless `e`
/// holds open `id` already: a node that keeps the open after its move failed
/// (`super::handover`).
pub(crate) fn enter_kept(
    files: &crate::server::FileTable,
    e: &mut crate::server::FileEntry,
    rec: &CaRecord,
    id: u64,
) {
    if e.opens.iter().any(|o| o.owner == id) {
        return;
    }
    enter(e, rec, id, DISCONNECTED);
    lease_back(files, e, rec, DISCONNECTED, 0);
}

/// The caching of a durable open put back into its file's entry without a client (taken over,
/// or kept after a move failed): its lease, if it has one, with no state until the client is
/// back; its breaks going to `route`.
pub(super) fn caching_of(
    lease: Option<oplock::LeaseId>,
    route: oplock::Route,
    file_id: (u64, u64),
) -> oplock::Caching {
    oplock::Caching {
        level: if lease.is_some() {
            oplock::LEVEL_LEASE
        } else {
            oplock::LEVEL_NONE
        },
        lease,
        route,
        file_id,
        ..Default::default()
    }
}

/// Put persistent open `rec` into file entry `e` as open `id` with its byte-range locks, its
/// breaks going to `route`.
pub(super) fn enter(
    e: &mut crate::server::FileEntry,
    rec: &CaRecord,
    id: u64,
    route: oplock::Route,
) {
    let h = &rec.state;
    e.name_if_unused(&rec.share, &h.path, h.is_dir);
    let lease = rec.lease.as_ref().map(|l| l.id);
    e.opens.push(ShareEntry {
        owner: id,
        access: h.access,
        share_access: h.share_access,
        caching: caching_of(lease, route, (rec.file_id.persistent, id)),
        who: rec.who.clone(),
        posix: h.posix,
    });
    for l in &rec.locks {
        let l = ByteRangeLock { owner: id, ..*l };
        if !e.locks.try_lock(l) {
            tracing::warn!(?l, "a persistent open's lock overlaps another");
        }
    }
}

/// The lease of persistent open `rec`, if it has one, into file entry `e` in state `state`, its
/// breaks going to `route`.
pub(super) fn lease_back(
    files: &crate::server::FileTable,
    e: &mut crate::server::FileEntry,
    rec: &CaRecord,
    route: oplock::Route,
    state: u32,
) {
    if let Some(l) = &rec.lease {
        e.leases.retain(|x| x.id != l.id);
        e.leases.push(Lease {
            state,
            breaking_to: None,
            required: 0,
            break_deadline_ms: 0,
            route,
            ..l.clone()
        });
        files.set_lease_file(l.id, rec.state.key);
    }
}

/// At a node that rebuilt partitions `parts` (it started again, or took a dead node's; mixed
/// builds while a cluster is upgraded, docs/cluster-internals.md, "Protocol levels"): the
/// persistent opens a live node keeps
/// under an id it did not make join their files' entries here from their records. A node took
/// them over from a dead one keeping their ids (an older build, or this one below level 4 or
/// when etcd refused the takeover's record: before [`renamed`]) and, once their clients
/// reconnected there, leaves them out of the opens it hands back (`super::reclaim::records`
/// hands over the opens under its own number and those it keeps parked): without them their
/// writes got FILE_CLOSED and their locks were gone. Ids under this node's number (its last
/// life's) and under a third node's (scripts/cluster-upgrade.sh, session 40: node 1's open kept
/// by old node 3, the file's partition taken back by the new node 2) alike. Not when the entry
/// holds an open of that persistent id (its keeper handed it back). Their breaks go to their
/// keeper (which drops those for no connection of its: a conflicting open then waits for the
/// break's timeout), their lease as last recorded. Returns how many.
pub(crate) fn adopt_kept_by_others(server: &ServerState, parts: &[u32]) -> usize {
    let Some(link) = server.node.link() else {
        return 0;
    };
    if !server.persistent_handles() {
        return 0;
    }
    let (me, n, members) = (link.node(), link.partitions(), link.members());
    let all = match link.ca_all() {
        Ok(all) => all,
        Err(s) => {
            tracing::warn!(?s, "the persistent opens' records could not be read");
            return 0;
        }
    };
    let mut taken = 0;
    for rec in all.iter().filter_map(|b| readable(b)) {
        let (id, persistent) = (rec.file_id.volatile, rec.file_id.persistent);
        let kept_elsewhere = rec.keeper != me && members.contains(&rec.keeper);
        if !kept_elsewhere
            || super::node_of(id) == rec.keeper
            || !parts.contains(&partition_of(rec.state.key, n))
        {
            continue;
        }
        let entry = server.files.entry(rec.state.key);
        let mut e = lock(&entry);
        if e.opens
            .iter()
            .any(|o| o.owner == id || o.caching.file_id.0 == persistent)
        {
            continue;
        }
        let route = unserved(rec.keeper);
        enter(&mut e, &rec, id, route);
        lease_back(
            &server.files,
            &mut e,
            &rec,
            route,
            rec.lease.as_ref().map_or(0, |l| l.state),
        );
        tracing::info!(
            id,
            keeper = rec.keeper,
            "a persistent open another node keeps under an id it did not make joins its file's entry"
        );
        taken += 1;
    }
    taken
}

/// The route [`adopt_kept_by_others`] gives an open node `keeper` keeps: that node, no
/// connection of it (no connection id is a bare node number). No other open is routed so: a
/// move routes an open to the connection its client reconnected on, a parked one goes
/// nowhere ([`DISCONNECTED`]).
pub(crate) fn unserved(keeper: u16) -> oplock::Route {
    oplock::Route {
        conn_id: u64::from(keeper) << crate::files::NODE_SHIFT,
        session_id: 0,
    }
}

pub(crate) trait CaHere {
    fn reinstate(&self, rec: &CaRecord, now_ms: u64) -> Result<(), NtStatus>;
    /// The volatile ids of the persistent opens node `node` kept of files
    /// homed here, and of those a live node keeps under `node`'s number:
    /// [`ServerState::forget_node`] leaves them in place.
    fn persistent_of(&self, node: u16) -> Vec<u64>;
}

/// Persistent open `rec` as open `id` of this node, disconnected, on file `node` opened again
/// as `who`.
pub(super) fn open_of(
    files: &crate::server::FileTable,
    rec: &CaRecord,
    id: u64,
    node: Arc<dyn ringshare_vfs::Node>,
    share: Arc<crate::server::ShareDef>,
    who: ringshare_vfs::Who,
) -> Result<Open, NtStatus> {
    let h = &rec.state;
    let owner = Owner {
        uid: rec.uid,
        user: rec.user.clone(),
    };
    // A record is of a persistent open, whatever its state says.
    let durability = Durability {
        persistent: true,
        ..super::reopen::durability_of(h, &owner)?
    };
    let place = super::reopen::Place {
        id,
        persistent_id: rec.file_id.persistent,
        tree_id: 0,
        channel_sequence: 0,
        replay_eligible: false,
    };
    let entry = files.entry(h.key);
    Ok(super::reopen::open_from(
        h.clone(),
        place,
        who,
        node,
        entry,
        share,
        durability,
    ))
}

/// Disconnected durable open `open` parked on this node until its client reconnects or its
/// timeout (from `now_ms`); one this parking evicts (the most kept) is closed.
pub(super) fn park(server: &ServerState, open: Arc<Open>, now_ms: u64) {
    let Some(durability) = lock(&open.state).durable.clone() else {
        return;
    };
    let evicted = lock(&server.files.durables).park(Parked {
        expires_ms: now_ms.saturating_add(durability.timeout_ms),
        persistent_id: open.persistent_id,
        open_id: open.id,
        share: open.share.name.clone(),
        durability,
        open,
    });
    server.mail.wake_drivers();
    if let Some(old) = evicted {
        crate::opens::close_open(server, old.open, false);
    }
}

impl CaHere for ServerState {
    fn reinstate(&self, rec: &CaRecord, now_ms: u64) -> Result<(), NtStatus> {
        let h = &rec.state;
        if lock(&self.files.durables)
            .get(rec.file_id.persistent)
            .is_some()
        {
            return Ok(());
        }
        let share = self
            .shares()
            .share(&rec.share)
            .cloned()
            .ok_or(NtStatus::BAD_NETWORK_NAME)?;
        let who = rec.who.clone().ok_or(NtStatus::ACCESS_DENIED)?;
        let entry = self.files.entry(h.key);
        let was = rec.file_id.volatile;
        let id = match renamed(&self.node, rec, self.files.new_owner_id()) {
            Some(id) => id,
            None => was,
        };
        {
            let mut e = lock(&entry);
            match e.opens.iter_mut().find(|o| o.owner == was) {
                // Kept in the table when its node went (forget_node).
                Some(o) => {
                    o.owner = id;
                    o.caching.file_id.1 = id;
                    o.caching.route = DISCONNECTED;
                    e.locks.rekey_owner(was, id);
                }
                None => enter(&mut e, rec, id, DISCONNECTED),
            }
            // Back without caching: breaks since the record are not in it.
            lease_back(&self.files, &mut e, rec, DISCONNECTED, 0);
        }
        let node = super::reopen::reopen(&self.node, &share, &who, h);
        let node = match node {
            Ok(n) => n,
            Err(s) => {
                crate::decide::remove_open(&mut lock(&entry), id);
                self.files.drop_if_unused(h.key);
                return Err(s);
            }
        };
        let open = open_of(&self.files, rec, id, node, share, who)?;
        // This node keeps it now.
        let _ = store(&self.node, &open);
        tracing::info!(
            was,
            id,
            from = rec.keeper,
            "a dead node's persistent open is kept here until its client reconnects"
        );
        park(self, Arc::new(open), now_ms);
        Ok(())
    }
    fn persistent_of(&self, node: u16) -> Vec<u64> {
        let Some(link) = self.node.link() else {
            return Vec::new();
        };
        if !self.persistent_handles() {
            return Vec::new();
        }
        let members = link.members();
        // (Unreadable: they leave the table now and are put back by
        // take_over_persistent, which is tried until it reads them.)
        let all = link.ca_all().unwrap_or_default();
        all.iter()
            .filter_map(|b| readable(b))
            .filter(|r| self.node.home_of(r.state.key) == Home::Here)
            // Its own, and those a live node keeps under its number: given up to a node whose
            // move of them failed (`super::handover`), or taken over by an older build.
            .filter(|r| {
                r.keeper == node
                    || (super::node_of(r.file_id.volatile) == node && members.contains(&r.keeper))
            })
            .map(|r| r.file_id.volatile)
            .collect()
    }
}
