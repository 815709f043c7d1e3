//! A persistent open whose record names this node as its keeper while no node holds it
//! (issue 33, "Also: Rolling upgrades"): this node takes it back from its record, as the file's
//! home takes a dead keeper's open from its record (`super::ca`).
//!
//! How it comes about: this node gave the open up to a reconnect through another node
//! (`super::handover::give_up`), whose move at the file's home failed. A node of this build then
//! keeps the open and its record names it (`super::handover`'s `keep`); the build before levels
//! (e9524d6) closes it and leaves the record, which still names this node. The record says the
//! open is not gone, so every reconnect is told to try again (`super::ca::still_kept`), and no
//! node takes it over: its keeper is alive. In scripts/cluster-upgrade.sh a handle was not back
//! within 20 s (docs/cluster-internals.md, "The ~11 s of step 3, traced"). The same holds for
//! a node that
//! started again under the number a record still names.
//!
//! [`take_back`] is tried when such a node is asked for the open (a reconnect through it, or a
//! peer's give-up ask) and does not hold it. It takes the open back only when no other node can
//! hold it:
//! - the record names this node, and would let the asking reconnect have the open, and this
//!   node did not close the open (its record's removal may be on its way);
//! - this node has not given the open up within [`GIVEN_UP_GRACE_MS`] (or never, in this life):
//!   the asker's move at the home, and the close an older asker sends when that move fails, are
//!   each a call of at most 2 s;
//! - this node's own entry of the file holds no open of its persistent id (one it serves);
//! - the file's home holds no open of its persistent id, and enters this one in the same step
//!   under the home's lock ([`super::msg::Call::Adopt`], level 5, or this node's own entry when
//!   it is the home): a node that holds the open (moved there, or kept by a node of this build
//!   after its move failed and the home's table was rebuilt with it) is in that table under
//!   that persistent id, so the home refuses and nothing is taken. The one entry of that id
//!   the home replaces is one it made itself from the same stale record for this node, routed
//!   to no connection of it (a restarted home, `super::ca::adopt_kept_by_others`, in
//!   scripts/cluster-upgrade.sh): this node, asking, serves none, and a node that moved the
//!   open would have routed the entry to its client's connection. Nor does the home enter it
//!   when its share modes or locks conflict with another open's (one let in since it went);
//! - the record, read again after the home said yes, still names this node with the id it had:
//!   a node of this build whose move failed keeps the open and names itself in the record
//!   within its own calls' bounds, and then this node lets it be.
//!
//! The double open this guards against (the asker's move still in flight): a move lands at the
//! home only where the home holds the id it moves from, and at a cluster level of 4 the open is
//! taken back under a new id of this node (its record renamed), so a late move, or an older
//! asker's late close of the old id, never reaches it. Below level 4 (an older node serves: it
//! moves the open from the id its client's FileId carries) the open keeps its id, and a move
//! from it that reaches the home after the take-back would move it: that needs the asker's
//! move, sent at once after the give-up, to arrive more than [`GIVEN_UP_GRACE_MS`] after it,
//! past its own 2 s bound (the asker then counts it failed and closes that id, ending the
//! copy it moved, so still one open). A home of a level below 5 is not asked: the open waits
//! for its timeout as before.

use ringshare_wire::{FileId, NtStatus};

use super::msg::{self, Answer, CaRecord, Call};
use super::Home;
use crate::durable::{Reconnect, DISCONNECTED};
use crate::server::{lock, ServerState};

/// How long after giving a persistent open up to another node this node, still named by the
/// open's record, leaves the open to that node before it may take it back: two calls' bounds
/// (the asker's move at the file's home, then the close an older asker sends when it failed).
pub const GIVEN_UP_GRACE_MS: u64 = 4_000;

/// The last level [`Call::Adopt`] is not read at.
const BEFORE_ADOPT: u16 = 4;

/// This node gave persistent open `persistent_id` up at `now_ms` (its clock): it leaves the
/// open to the asker for [`GIVEN_UP_GRACE_MS`]. (Entries older than a minute go.)
pub(crate) fn given_up(here: &crate::server::NodeState, persistent_id: u64, now_ms: u64) {
    let mut g = lock(&here.given_up_at);
    g.retain(|_, t| now_ms.saturating_sub(*t) < 60_000);
    g.insert(persistent_id, now_ms);
}

/// At the file's home ([`Call::Adopt`], or this node's own table when it is the home):
/// persistent open `rec` enters its file's entry as open `rec.file_id.volatile`, routed
/// nowhere, with its byte-range locks and its lease (without caching). Not when the entry holds
/// an open of its persistent id already (under any id: a node may hold it, or an older asker's
/// close of it may be on its way), but for one this home entered from the same record for
/// its keeper, `rec.keeper`, which asks now ([`super::ca::unserved`]: routed to that node and
/// no connection of it, `super::ca::adopt_kept_by_others`): that one is replaced, as no
/// node serves it (its keeper, of this build since it asks, holds none; a node that moved it
/// would have routed it to its client's connection). Nor when the open's share modes or locks
/// would conflict with another open's: one let in since it went (its record's removal may be on
/// its way). Whether it entered.
pub(crate) fn adopt_here(files: &crate::server::FileTable, rec: &CaRecord) -> bool {
    let (persistent, id) = (rec.file_id.persistent, rec.file_id.volatile);
    let entry = files.entry(rec.state.key);
    let mut e = lock(&entry);
    let held: Vec<_> = e
        .opens
        .iter()
        .filter(|o| o.caching.file_id.0 == persistent)
        .map(|o| (o.owner, o.caching.route))
        .collect();
    let replaced = match held.as_slice() {
        [] => None,
        [(owner, route)] if *route == super::ca::unserved(rec.keeper) => Some(*owner),
        _ => return false,
    };
    let others: Vec<_> = e
        .opens
        .iter()
        .filter(|o| Some(o.owner) != replaced)
        .cloned()
        .collect();
    let mut locks = e.locks.clone();
    if let Some(owner) = replaced {
        locks.release_owner(owner);
    }
    let locks_free = rec.locks.iter().all(|l| {
        let intent = crate::files::locks::Intent::Lock {
            exclusive: l.exclusive,
        };
        !locks.conflicts(l.offset, l.length, intent, id)
    });
    let (access, share_access) = (rec.state.access, rec.state.share_access);
    if !locks_free || crate::files::access::check_sharing(&others, access, share_access).is_err() {
        return false;
    }
    if let Some(owner) = replaced {
        crate::decide::remove_open(&mut e, owner);
        tracing::info!(
            persistent,
            owner,
            keeper = rec.keeper,
            "a persistent open entered from its record for its keeper, which holds none, is \
             replaced by the one it takes back"
        );
    }
    super::ca::enter(&mut e, rec, id, DISCONNECTED);
    super::ca::lease_back(files, &mut e, rec, DISCONNECTED, 0);
    true
}

/// Whether the file's home of `rec` took it ([`adopt_here`]), asked of it when it is another
/// node of a level that reads [`Call::Adopt`].
fn adopted_at_home(server: &ServerState, rec: &CaRecord) -> bool {
    let Some(link) = server.node.link() else {
        return false;
    };
    match server.node.home_of(rec.state.key) {
        Home::Here => adopt_here(&server.files, rec),
        Home::Node(n) if link.level_of(n) > BEFORE_ADOPT => {
            match super::ask(&server.node, n, Call::Adopt(Box::new(rec.clone()))) {
                Ok(Answer::Flag(yes)) => yes,
                other => {
                    tracing::debug!(
                        home = n,
                        ?other,
                        "a home did not take a persistent open back"
                    );
                    false
                }
            }
        }
        home => {
            tracing::debug!(
                ?home,
                persistent = rec.file_id.persistent,
                "a persistent open this node's record names is not taken back: its file's home \
                 is of an older level, or not known"
            );
            false
        }
    }
}

/// The home's entry of `rec` taken back ([`adopted_at_home`]) goes again: this node does not
/// keep it after all.
fn undo_adopt(server: &ServerState, rec: &CaRecord) {
    let (key, id) = (rec.state.key, rec.file_id.volatile);
    match server.node.home_of(key) {
        Home::Here => {
            if let Some(e) = server.files.existing(key) {
                crate::decide::remove_open(&mut lock(&e), id);
            }
            server.files.drop_if_unused(key);
        }
        Home::Node(n) => {
            let close = Call::Close {
                key,
                owner: id,
                delete_on_close: false,
            };
            if let Err(s) = super::ask(&server.node, n, close) {
                tracing::warn!(
                    ?s,
                    id,
                    "a persistent open's entry taken back was not closed at its home"
                );
            }
        }
        Home::Unavailable => {}
    }
}

/// Whether this node's entry of `rec`'s file holds an open of its persistent id: one this
/// node serves (its own opens of a file homed elsewhere are in its entry, the shadow a new
/// home's reclaim reads), or, at the file's home, one whose keeper the home knows.
fn holds(files: &crate::server::FileTable, rec: &CaRecord) -> bool {
    let persistent = rec.file_id.persistent;
    files.existing(rec.state.key).is_some_and(|e| {
        lock(&e)
            .opens
            .iter()
            .any(|o| o.caching.file_id.0 == persistent)
    })
}

/// A persistent open this node gave up and is asked for again the same
/// (`super::handover`'s `given_before`: the first answer may have reached nobody), whose
/// record `rec` still names this node: its file's home holds it again under the record's id,
/// routed nowhere, as the first give-up left it ([`adopted_at_home`], the home entering it only
/// when it holds no open of its persistent id). The home no longer holds it when the first
/// asker was of the build before levels (e9524d6), whose move failed and which closed it: the
/// move the next asker makes from the record's id then finds it, where before it failed and
/// that asker kept an open no home held, every later reconnect FILE_NOT_AVAILABLE until the
/// open's timeout. Whether the home entered it (not: it holds an open of it, or was not asked).
pub(crate) fn restore_given(server: &ServerState, rec: &CaRecord) -> bool {
    let entered = adopted_at_home(server, rec);
    if entered {
        tracing::info!(
            persistent = rec.file_id.persistent,
            id = rec.file_id.volatile,
            "a persistent open given up again is held by its file's home once more"
        );
    }
    entered
}

/// Persistent open `file_id`, which reconnect `wanted` asks for, whose record names this node as
/// its keeper, and which this node does not hold: taken back from its record and parked here
/// (the module notes say when). Whether it is parked here now.
pub fn take_back(
    server: &ServerState,
    file_id: FileId,
    wanted: &Reconnect<'_>,
    now_ms: u64,
) -> bool {
    let Some(link) = server.node.link() else {
        return false;
    };
    let (me, persistent) = (link.node(), file_id.persistent);
    let Some(rec) = super::ca::record(&server.node, persistent) else {
        return false;
    };
    if rec.keeper != me
        || !server.persistent_handles()
        || !super::ca::lets_have(&rec, file_id, wanted)
        || lock(&server.files.durables).get(persistent).is_some()
        || lock(&server.node.closed_persistent).contains(&persistent)
        || holds(&server.files, &rec)
    {
        return false;
    }
    if let Some(t) = lock(&server.node.given_up_at).get(&persistent) {
        if now_ms < t.saturating_add(GIVEN_UP_GRACE_MS) {
            tracing::debug!(
                persistent,
                "a persistent open given up a moment ago is left to the node that asked"
            );
            return false;
        }
    }
    match taken_back(server, &rec, now_ms) {
        Ok(id) => {
            tracing::info!(
                persistent,
                was = rec.file_id.volatile,
                id,
                "a persistent open whose record names this node, and which no node held, is kept \
                 here again"
            );
            true
        }
        Err(s) => {
            tracing::debug!(?s, persistent, "a persistent open was not taken back");
            false
        }
    }
}

/// [`take_back`] once it may: the file opened again, the home's entry, the record, the open
/// parked. The id it goes by now.
fn taken_back(server: &ServerState, rec: &CaRecord, now_ms: u64) -> Result<u64, NtStatus> {
    let link = server.node.link().ok_or(NtStatus::INTERNAL_ERROR)?;
    let share = server
        .shares()
        .share(&rec.share)
        .cloned()
        .ok_or(NtStatus::BAD_NETWORK_NAME)?;
    let who = rec.who.clone().ok_or(NtStatus::ACCESS_DENIED)?;
    let node = super::reopen::reopen(&server.node, &share, &who, &rec.state)?;
    let was = rec.file_id.volatile;
    // A new id when every node finds an open by its record's (level 4, as `super::ca`'s
    // `renamed`): a late move or close of the old one then misses it.
    let id = if super::cluster_level(&**link) >= 4 {
        server.files.new_owner_id()
    } else {
        was
    };
    let mut back = rec.clone();
    back.keeper = link.node();
    back.file_id.volatile = id;
    for l in &mut back.locks {
        l.owner = id;
    }
    if !adopted_at_home(server, &back) {
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    let persistent = rec.file_id.persistent;
    let unchanged = super::ca::record(&server.node, persistent)
        .is_some_and(|r| r.keeper == link.node() && r.file_id.volatile == was);
    let stored = unchanged && (id == was || link.ca_put(persistent, msg::encode_ca(&back)).is_ok());
    if !stored {
        // (Under the same id the home's entry is the open's, whoever keeps it.)
        if id != was {
            undo_adopt(server, &back);
        }
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    let open = super::ca::open_of(&server.files, &back, id, node, share, who)?;
    // This node's entry of the file holds it too (for a file homed elsewhere, the shadow a new
    // home's reclaim reads).
    super::ca::enter_kept(&server.files, &mut lock(&open.entry), &back, id);
    super::ca::park(server, std::sync::Arc::new(open), now_ms);
    Ok(id)
}
