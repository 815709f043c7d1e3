//! READ and WRITE of a file homed on another node decided on this node:
//! the home gives each node holding opens of the file a revocable *I/O
//! grant* saying what it need not ask about — no byte-range locks on the
//! file, no open on another node that may write it, no open on another
//! node caching it — and takes a part back (a [`super::msg::Call::Revoke`]
//! answered before the decision that needs it is answered) when a LOCK, an
//! open that may write, or an open that caches comes. While the grant
//! holds, a READ needs nothing from the home, and a WRITE only when one of
//! this node's other opens caches the file (the home breaks it).
//!
//! A grant is never given while a revocation of the file is under way, and
//! a revocation that cannot reach a node fails the request that needed it
//! (FILE_NOT_AVAILABLE) rather than let that node go on alone.

use std::sync::Mutex;

use ringshare_wire::NtStatus;

use super::msg::{Answer, Call};
use super::node_of;
use crate::access;
use crate::oplock::LEVEL_NONE;
use crate::server::{lock, FileEntry, FileKey, ServerState};

/// What a node may decide about a file's I/O without asking its home.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IoGrant(pub u8);

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
pub(crate) struct Grants {
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
pub(crate) fn give(e: &mut FileEntry, node: u16) -> IoGrant {
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

/// At the home: `decide`, after taking back from every node the parts of
/// its grant `take(node)` names (nothing to do outside a cluster); no grant
/// is given until the decision is made.
pub(crate) fn after_revoking<T>(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    take: impl Fn(u16) -> u8,
    decide: impl FnOnce() -> T,
) -> Result<T, NtStatus> {
    if server.cluster().is_none() {
        return Ok(decide());
    }
    revoke(server, key, entry, take)?;
    let r = decide();
    done(entry);
    Ok(r)
}

/// Take back from every node the parts `take(node)` names (bits of
/// [`IoGrant`]) and wait for each to confirm. No grant is given meanwhile;
/// call [`done`] after the decision.
fn revoke(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    take: impl Fn(u16) -> u8,
) -> Result<(), NtStatus> {
    let targets: Vec<(u16, u8)> = {
        let mut e = lock(entry);
        e.grants.revoking += 1;
        e.grants
            .given
            .iter()
            .map(|(n, g)| (*n, g.0 & take(*n)))
            .filter(|(_, t)| *t != 0)
            .collect()
    };
    for (node, clear) in targets {
        match super::ask(server, node, Call::Revoke { key, clear }) {
            Ok(Answer::Done) => {
                let mut e = lock(entry);
                if let Some((_, g)) = e.grants.given.iter_mut().find(|(n, _)| *n == node) {
                    g.0 &= !clear;
                }
            }
            other => {
                tracing::warn!(node, ?other, ?key, "a node did not give back its I/O grant");
                done(entry);
                return Err(NtStatus::FILE_NOT_AVAILABLE);
            }
        }
    }
    Ok(())
}

/// The decision a [`revoke`] preceded is made: grants may be given again.
fn done(entry: &Mutex<FileEntry>) {
    let mut e = lock(entry);
    e.grants.revoking = e.grants.revoking.saturating_sub(1);
}

/// On the node holding a grant: give back the parts `clear` names.
pub(crate) fn give_back(server: &ServerState, key: FileKey, clear: u8) {
    if let Some(e) = server.existing_file_entry(key) {
        lock(&e).grants.held.0 &= !clear;
    }
}

/// Node `node` is gone: it holds nothing.
pub(crate) fn forget(e: &mut FileEntry, node: u16) {
    e.grants.given.retain(|(n, _)| *n != node);
}

/// On a node holding opens of a file homed elsewhere: may this I/O be
/// decided here? `Some(writers)` when it may (no byte-range lock can be in
/// the way, and a WRITE breaks nothing: no other open caches the file).
pub(crate) fn local_io(e: &FileEntry, owner: u64, write: bool, change: bool) -> Option<bool> {
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
