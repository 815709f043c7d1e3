//! A file entry's I/O grants on a cluster node (`crate::cluster::grant` has
//! the protocol): what the home gave each node, or what this node holds, so
//! that READ and WRITE need not ask the home while nothing is in the way.

use crate::oplock::LEVEL_NONE;
use crate::{access, owner_node as node_of, FileEntry};

/// What a node may decide about a file's I/O without asking its home.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoGrant(pub u8);

impl IoGrant {
    /// The file has no byte-range locks.
    pub const NO_LOCKS: u8 = 1;
    /// No open on another node may write the file.
    pub const NO_FOREIGN_WRITERS: u8 = 2;
    /// No open on another node holds an oplock or a lease on the file.
    pub const NO_FOREIGN_CACHING: u8 = 4;

    pub fn has(self, flag: u8) -> bool {
        self.0 & flag == flag
    }
}

/// A file entry's grants: at the home, what each node was given (and
/// whether a revocation is under way); on another node, what it holds.
#[derive(Debug, Default)]
pub struct Grants {
    given: Vec<(u16, IoGrant)>,
    revoking: u32,
    pub held: IoGrant,
}

/// What node `node` may be granted on the file now.
fn due(e: &FileEntry, node: u16) -> IoGrant {
    let foreign = |owner: u64| node_of(owner) != node;
    let mut g = 0;
    if e.locks.is_empty() {
        g |= IoGrant::NO_LOCKS;
    }
    if !e
        .opens
        .iter()
        .any(|o| foreign(o.owner) && access::can_write(o.access))
    {
        g |= IoGrant::NO_FOREIGN_WRITERS;
    }
    let caches = e
        .opens
        .iter()
        .any(|o| foreign(o.owner) && o.caching.level != LEVEL_NONE)
        || e.leases
            .iter()
            .any(|l| foreign(l.route.conn_id) && l.state != 0);
    if !caches {
        g |= IoGrant::NO_FOREIGN_CACHING;
    }
    IoGrant(g)
}

/// At the home: give node `node` what it may have now (nothing while a
/// revocation is under way) and record it.
pub fn give(e: &mut FileEntry, node: u16) -> IoGrant {
    let g = if e.grants.revoking > 0 {
        IoGrant::default()
    } else {
        due(e, node)
    };
    e.grants.given.retain(|(n, _)| *n != node);
    if g.0 != 0 {
        e.grants.given.push((node, g));
    }
    g
}

/// At the home: a revocation starts (no grant is given until [`Grants::revoked`]); what
/// each node holds of the bits `take(node)` names, to take back.
pub fn start_revoking(e: &mut FileEntry, take: impl Fn(u16) -> u8) -> Vec<(u16, u8)> {
    e.grants.revoking += 1;
    e.grants
        .given
        .iter()
        .map(|(n, g)| (*n, g.0 & take(*n)))
        .filter(|(_, t)| *t != 0)
        .collect()
}

/// Node `node` gave back the bits `clear` of its grant.
pub fn given_back(e: &mut FileEntry, node: u16, clear: u8) {
    if let Some((_, g)) = e.grants.given.iter_mut().find(|(n, _)| *n == node) {
        g.0 &= !clear;
    }
}

/// The decision a revocation preceded is made: grants may be given again.
pub fn revoked(e: &mut FileEntry) {
    e.grants.revoking = e.grants.revoking.saturating_sub(1);
}

/// Node `node` is gone: it holds nothing.
pub fn forget(e: &mut FileEntry, node: u16) {
    e.grants.given.retain(|(n, _)| *n != node);
}

/// On a node holding opens of a file homed elsewhere: may this I/O be
/// decided here? `Some(writers)` when it may (no byte-range lock can be in
/// the way, and a WRITE breaks nothing: no other open caches the file).
pub fn local_io(e: &FileEntry, owner: u64, write: bool, change: bool) -> Option<bool> {
    let g = e.grants.held;
    if !g.has(IoGrant::NO_LOCKS) {
        return None;
    }
    if write && change {
        let mine = e
            .opens
            .iter()
            .find(|o| o.owner == owner)
            .and_then(|o| o.caching.lease);
        let others_cache = e.opens.iter().any(|o| {
            o.owner != owner
                && o.caching.level != LEVEL_NONE
                && (o.caching.lease.is_none() || o.caching.lease != mine)
        });
        if !g.has(IoGrant::NO_FOREIGN_CACHING) || others_cache {
            return None;
        }
    }
    let writers =
        !g.has(IoGrant::NO_FOREIGN_WRITERS) || e.opens.iter().any(|o| access::can_write(o.access));
    Some(writers)
}
