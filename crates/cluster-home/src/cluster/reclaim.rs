//! A new home rebuilds the state of the files of the partitions it gained
//! (their old home died or handed them over): every live node sends the
//! records of its own opens of those files ([`records`], from its shadow
//! entries or, on the old home, from its entries with the other nodes'
//! opens taken out), and the new home merges them into its entries
//! ([`ServerState::rebuild`]). The dead node's opens are gone with it, as
//! its clients' connections are.

use super::ca::CaHere;
use super::msg::{Answer, Call, Record};
use super::{node_of, partition_of};
use crate::files::locks::ByteRangeLock;
use crate::server::{lock, FileKey, ServerState};

/// Records a page of [`records`] holds at most.
pub(crate) const RECORDS_PER_PAGE: usize = 100;

/// The encoded size a page of records stays within (after its first
/// record), well below the message size limit.
const PAGE_BYTES: usize = super::MESSAGE_MAX / 2;

/// The records of this node's opens of files in `parts` whose keys come
/// after `after` (in key order), at most [`RECORDS_PER_PAGE`] files; and
/// the last key looked at when more follow. Entries here keep only this
/// node's opens from now on (the old home hands the others' over to the
/// new one, which has them from their own nodes).
pub fn records(
    server: &ServerState,
    parts: &[u32],
    after: Option<FileKey>,
) -> (Vec<Record>, Option<FileKey>) {
    let Some(link) = server.node.link() else {
        return (Vec::new(), None);
    };
    let (me, n) = (link.node(), link.partitions());
    // This node's opens: those it made, and dead nodes' persistent opens it
    // keeps (made elsewhere, parked here: crate::cluster::ca).
    let kept = lock(&server.files.durables).open_ids();
    let mine = |owner: u64| node_of(owner) == me || kept.contains(&owner);
    let mut entries = server.files.keyed(|k| parts.contains(&partition_of(k, n)));
    let order = |k: &FileKey| (k.dev, k.ino, k.stream);
    entries.retain(|(k, _)| after.is_none_or(|a| order(k) > order(&a)));
    entries.sort_by_key(|(k, _)| order(k));
    let (mut next, mut last) = (None, None);
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut emptied = Vec::new();
    // Leases of other nodes' opens that leave this node's entries, and the
    // files looked at: their leases are the new home's to decide now.
    let mut left = Vec::new();
    let mut moved = Vec::new();
    for (key, entry) in entries {
        if out.len() == RECORDS_PER_PAGE || bytes > PAGE_BYTES {
            // Full: the caller asks again for the files after the last one
            // looked at.
            next = last;
            break;
        }
        last = Some(key);
        moved.push(key);
        let mut e = lock(&entry);
        // The new home gives I/O grants anew; the old one's are void.
        e.grants = Default::default();
        e.opens.retain(|o| mine(o.owner));
        let own_locks: Vec<ByteRangeLock> =
            e.locks.iter().copied().filter(|l| mine(l.owner)).collect();
        let foreign: Vec<u64> = e
            .locks
            .iter()
            .map(|l| l.owner)
            .filter(|o| !mine(*o))
            .collect();
        for o in foreign {
            e.locks.release_owner(o);
        }
        let used: Vec<_> = e.opens.iter().filter_map(|o| o.caching.lease).collect();
        left.extend(
            e.leases
                .iter()
                .filter(|l| !used.contains(&l.id))
                .map(|l| (l.id, key)),
        );
        e.leases.retain(|l| used.contains(&l.id));
        e.waiters.retain(|c| mine(*c));
        if e.opens.is_empty() {
            emptied.push(key);
            continue;
        }
        let rec = Record {
            key,
            share: e.share.clone(),
            path: e.path.clone(),
            is_dir: e.is_dir,
            delete_pending: e.delete_pending,
            opens: e.opens.clone(),
            locks: own_locks,
            leases: e.leases.clone(),
        };
        bytes += super::msg::record_len(&rec);
        out.push(rec);
    }
    for (id, key) in left {
        server.lease_left(id, key);
    }
    for key in moved {
        server.dir_moved(key);
    }
    for key in emptied {
        server.files.drop_if_unused(key);
    }
    (out, next)
}

/// What the cluster layer offers the driver when partitions' homes change: rebuilding the
/// entries of partitions this node became the home of, forgetting a node that is gone.
pub trait Reclaim {
    /// This node became the home of partitions `parts`: ask every other
    /// live node for its opens of their files and merge them into this
    /// node's entries (which hold its own opens already). Returns the
    /// opens taken in, or the node that did not answer.
    fn rebuild(&self, parts: &[u32]) -> Result<usize, u16>;
    /// Node `node` is gone (its lease lapsed; its clients' connections died
    /// with it): its opens, locks, leases and waiting requests leave every
    /// file homed here, and opens that waited on them try again. A file
    /// whose delete was pending goes when the gone opens were its last, as
    /// when those clients' connections end on a single server.
    fn forget_node(&self, node: u16) -> usize;
}

impl Reclaim for ServerState {
    fn rebuild(&self, parts: &[u32]) -> Result<usize, u16> {
        let Some(link) = self.node.link() else {
            return Ok(0);
        };
        let me = link.node();
        let mut taken = 0;
        for node in link.members().into_iter().filter(|n| *n != me) {
            let mut after = None;
            loop {
                let call = Call::Reclaim {
                    parts: parts.to_vec(),
                    after,
                    // Lowered for a node of an older level (super::ask).
                    posix: true,
                };
                match super::ask(&self.node, node, call) {
                    Ok(Answer::Records { records, next }) => {
                        for r in records {
                            taken += self.merge(r);
                        }
                        match next {
                            Some(k) => after = Some(k),
                            None => break,
                        }
                    }
                    other => {
                        tracing::warn!(node, ?other, "a node did not hand over its opens");
                        return Err(node);
                    }
                }
            }
        }
        taken += super::ca::adopt_kept_by_others(self, parts);
        self.list_leased_dirs(parts);
        Ok(taken)
    }
    fn forget_node(&self, node: u16) -> usize {
        super::notify::interest(self, node, false);
        // Its persistent opens stay (continuously available shares): this
        // node keeps them for their clients (take_over_persistent).
        let kept = self.persistent_of(node);
        let gone = |id: u64| node_of(id) == node && !kept.contains(&id);
        let entries = self.files.keyed(|_| true);
        let mut forgotten = 0;
        let mut wakes = Vec::new();
        let mut emptied = Vec::new();
        for (key, entry) in entries {
            let mut e = lock(&entry);
            super::grant::forget(&mut e, node);
            // Kept ones have no connection now: nothing is sent to them.
            for o in e.opens.iter_mut().filter(|o| kept.contains(&o.owner)) {
                o.caching.route = crate::durable::DISCONNECTED;
            }
            let before = e.opens.len();
            // The user of the gone node's last open of the file: a pending
            // delete is carried out as that user.
            let last_who = e
                .opens
                .iter()
                .rev()
                .find(|o| gone(o.owner))
                .map(|o| o.who.clone());
            e.opens.retain(|o| !gone(o.owner));
            if e.opens.len() == before {
                continue;
            }
            forgotten += before - e.opens.len();
            let owners: Vec<u64> = e
                .locks
                .iter()
                .map(|l| l.owner)
                .filter(|o| gone(*o))
                .collect();
            for o in owners {
                e.locks.release_owner(o);
            }
            let used: Vec<_> = e.opens.iter().filter_map(|o| o.caching.lease).collect();
            let leases: Vec<_> = e
                .leases
                .iter()
                .map(|l| l.id)
                .filter(|id| !used.contains(id))
                .collect();
            e.leases.retain(|l| used.contains(&l.id));
            for id in leases {
                self.lease_left(id, key);
            }
            e.waiters.retain(|c| !gone(*c));
            crate::files::oplock::wake_waiters(&mut e, &mut wakes);
            if e.opens.is_empty() {
                emptied.push((
                    key,
                    e.delete_pending
                        .then(|| (e.share.clone(), e.path.clone(), e.is_dir, last_who)),
                ));
            }
        }
        self.send_breaks(wakes);
        for (key, remove) in emptied {
            self.files.drop_if_unused(key);
            let Some((share, path, is_dir, who)) = remove else {
                continue;
            };
            match (self.shares().share(&share).cloned(), who.flatten()) {
                (Some(s), Some(who)) => crate::opens::remove_file(self, &s, &who, &path, is_dir, None),
                (_, who) => tracing::warn!(
                    share,
                    ?path,
                    user_known = who.is_some(),
                    "a gone node's delete-pending file is left (its share or its last opener's user is not known here)"
                ),
            }
        }
        forgotten
    }
}

pub(crate) trait ReclaimHere {
    /// Take one node's record of a file into its entry here.
    fn merge(&self, r: Record) -> usize;
    /// The directories of `parts` with leases (rebuilt here, or this
    /// node's own opens') are this node's to break now: listed, and the
    /// other nodes told to send this node their changes.
    fn list_leased_dirs(&self, parts: &[u32]);
}

impl ReclaimHere for ServerState {
    fn merge(&self, r: Record) -> usize {
        let entry = self.files.entry(r.key);
        let mut e = lock(&entry);
        e.name_if_unused(&r.share, &r.path, r.is_dir);
        e.delete_pending |= r.delete_pending;
        let mut taken = 0;
        for o in r.opens {
            if !e.opens.iter().any(|x| x.owner == o.owner) {
                e.opens.push(o);
                taken += 1;
            }
        }
        for l in r.locks {
            e.locks.try_lock(l);
        }
        for mut l in r.leases {
            if !e.leases.iter().any(|x| x.id == l.id) {
                // A break the dead home had in flight ended at its target.
                l.breaking_to = None;
                l.required = 0;
                l.break_deadline_ms = 0;
                self.files.set_lease_file(l.id, r.key);
                e.leases.push(l);
            }
        }
        taken
    }

    fn list_leased_dirs(&self, parts: &[u32]) {
        let Some(link) = self.node.link() else {
            return;
        };
        let n = link.partitions();
        for (key, entry) in self.files.keyed(|k| parts.contains(&partition_of(k, n))) {
            let leased = {
                let e = lock(&entry);
                e.is_dir && !e.leases.is_empty()
            };
            if leased {
                self.dir_listed(key);
            }
        }
    }
}
