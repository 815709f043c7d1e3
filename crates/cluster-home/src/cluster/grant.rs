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
use crate::files::grant;
pub use crate::files::grant::{forget, give, local_io, IoGrant};
use crate::server::{lock, FileEntry, FileKey, FileTable, NodeState};

/// At the home: `decide`, after taking back from every node the parts of
/// its grant `take(node)` names (nothing to do outside a cluster); no grant
/// is given until the decision is made.
pub(crate) fn after_revoking<T>(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    take: impl Fn(u16) -> u8,
    decide: impl FnOnce() -> T,
) -> Result<T, NtStatus> {
    if here.link().is_none() {
        return Ok(decide());
    }
    revoke(here, key, entry, take)?;
    let r = decide();
    done(entry);
    Ok(r)
}

/// [`after_revoking`] on a thread that must not wait for other nodes (a client's I/O thread):
/// `None`, and nothing changed, when some other node holds a part `take` names (a call would
/// be needed) or `decide` says so; else its decision, made with grants held back as there.
pub(crate) fn in_place<T>(
    here: &NodeState,
    entry: &Mutex<FileEntry>,
    take: impl Fn(u16) -> u8,
    decide: impl FnOnce() -> Option<T>,
) -> Option<T> {
    let Some(me) = here.link().map(|l| l.node()) else {
        return decide();
    };
    {
        let mut e = lock(entry);
        let targets = grant::start_revoking(&mut e, take);
        if targets.iter().any(|(node, _)| *node != me) {
            grant::revoked(&mut e);
            return None;
        }
        for (node, clear) in targets {
            // (Never given: `super::home`'s grant_for.)
            grant::given_back(&mut e, node, clear);
        }
    }
    let r = decide();
    done(entry);
    r
}

/// Take back from every node the parts `take(node)` names (bits of
/// [`IoGrant`]) and wait for each to confirm: asked of all at once ([`super::ask_all`]), so a
/// node that does not answer costs one call's bound, not one per node. No grant is given
/// meanwhile; call [`done`] after the decision.
fn revoke(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    take: impl Fn(u16) -> u8,
) -> Result<(), NtStatus> {
    let targets = grant::start_revoking(&mut lock(entry), take);
    let me = here.link().map(|l| l.node());
    let (mine, others): (Vec<_>, Vec<_>) =
        targets.into_iter().partition(|(node, _)| Some(*node) == me);
    for (node, clear) in mine {
        // (Never given: `super::home`'s grant_for. A node does not call itself.)
        grant::given_back(&mut lock(entry), node, clear);
    }
    let calls = others
        .iter()
        .map(|&(node, clear)| (node, Call::Revoke { key, clear }))
        .collect();
    let mut given_back = true;
    for ((node, clear), answer) in others.into_iter().zip(super::ask_all(here, calls)) {
        match answer {
            Ok(Answer::Done) => grant::given_back(&mut lock(entry), node, clear),
            other => {
                tracing::warn!(node, ?other, ?key, "a node did not give back its I/O grant");
                given_back = false;
            }
        }
    }
    if !given_back {
        done(entry);
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    Ok(())
}

/// The decision a [`revoke`] preceded is made: grants may be given again.
fn done(entry: &Mutex<FileEntry>) {
    grant::revoked(&mut lock(entry));
}

/// On the node holding a grant: give back the parts `clear` names.
pub fn give_back(files: &FileTable, key: FileKey, clear: u8) {
    if let Some(e) = files.existing(key) {
        lock(&e).grants.held.0 &= !clear;
    }
}
