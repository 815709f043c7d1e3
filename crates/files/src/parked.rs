//! The server's durable opens that lost their connection (*parked*, until
//! their client reconnects or their time is up), and the CreateGuids of
//! version 2 durable opens for replay detection ([MS-SMB2] 3.3.5.9.7,
//! 3.3.5.9.10, 3.3.5.9.12). Generic over what the protocol layer keeps of a
//! parked open.

use std::collections::{BTreeSet, HashMap};

use crate::oplock::{BREAK_RETRY_MS, BREAK_TIMEOUT_MS};

/// May open `owner` of `e`, made durable as `d`, be kept when its connection
/// goes? A durable open that holds byte-range locks is kept only while it
/// caches writes (a lease with W, or a batch or exclusive oplock): without W
/// another client may have been told nothing of data the locks protected
/// (smbtorture 4.22 smb2.durable-open.lock-noW-lease and durable-v2-open's:
/// the reconnect is OBJECT_NAME_NOT_FOUND, as on Samba). Persistent and
/// resilient opens keep their locks ([MS-SMB2] 3.3.7.1, 2.2.31.3).
pub fn may_keep(d: &Durability, e: &crate::FileEntry, owner: u64) -> bool {
    if d.persistent || d.kind == Kind::Resilient || !e.locks.held_by(owner) {
        return true;
    }
    let Some(c) = e
        .opens
        .iter()
        .find(|o| o.owner == owner)
        .map(|o| &o.caching)
    else {
        return true;
    };
    match c.level {
        crate::oplock::LEVEL_BATCH | crate::oplock::LEVEL_EXCLUSIVE => true,
        crate::oplock::LEVEL_LEASE => e.leases.iter().any(|l| {
            Some(l.id) == c.lease
                && l.state & ringshare_wire::consts::LeaseState::WRITE_CACHING.0 != 0
        }),
        _ => false,
    }
}

/// Durable opens kept after their connection went, server-wide; past it the
/// one nearest its timeout is closed (with a log line).
pub const OPENS_MAX: usize = 16384;

/// How an open became durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// DHnQ ([MS-SMB2] 2.2.13.2.3).
    V1,
    /// DH2Q ([MS-SMB2] 2.2.13.2.11).
    V2,
    /// FSCTL_LMR_REQUEST_RESILIENCY ([MS-SMB2] 2.2.31.3).
    Resilient,
}

/// What makes an open durable, and what a reconnect must match
/// ([MS-SMB2] 3.3.1.10: Open.IsDurable, DurableOpenTimeout, DurableOwner,
/// CreateGuid, ClientGuid, IsResilient).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    pub kind: Kind,
    /// How long the open is kept once disconnected.
    pub timeout_ms: u64,
    /// DH2Q's CreateGuid (zero for DHnQ).
    pub create_guid: [u8; 16],
    /// The ClientGuid of the connection that opened it.
    pub client_guid: [u8; 16],
    /// Who opened it (Open.DurableOwner): only the same user reconnects.
    pub owner: Owner,
    /// Open.IsPersistent: made on a continuously available share with
    /// SMB2_DHANDLE_FLAG_PERSISTENT ([MS-SMB2] 3.3.5.9.10).
    pub persistent: bool,
}

/// The user a durable open belongs to: the account it acts as and the name
/// the user logged on with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub user: String,
}

/// A parked open: `open` is what the protocol layer keeps of it.
pub struct Parked<O> {
    pub open: O,
    /// Its FileId: persistent part (the table's key) and volatile part.
    pub persistent_id: u64,
    pub open_id: u64,
    pub durability: Durability,
    pub expires_ms: u64,
    /// The share it was opened on (a reconnect must come on a tree of it).
    pub share: String,
}

/// The most DH2Q CREATEs waiting for breaks remembered for replays.
const PENDING_MAX: usize = 4096;

/// The server's durable opens that have no connection, and the CreateGuids
/// of version 2 durable opens (live and parked) for replay detection.
pub struct Durables<O> {
    parked: HashMap<u64, Parked<O>>,
    /// (expiry, persistent id) of every parked open, soonest first.
    expiry: BTreeSet<(u64, u64)>,
    /// Connected opens made with a DH2Q, by (ClientGuid, CreateGuid):
    /// (session id, open id), for replays ([MS-SMB2] 3.3.5.9.10: a replay
    /// is found only from the client that made the open).
    created: HashMap<([u8; 16], [u8; 16]), (u64, u64)>,
    /// Parked persistent opens, by (ClientGuid, CreateGuid): their persistent
    /// ids (they stay eligible for replay, [`replay_parked`]).
    replayable: HashMap<([u8; 16], [u8; 16]), u64>,
    /// DH2Q CREATEs waiting for breaks, by (ClientGuid, CreateGuid): until
    /// when a replay of one is told FILE_NOT_AVAILABLE (an entry past its
    /// time, left by a CREATE cancelled or whose connection went, counts as
    /// gone).
    pending: HashMap<([u8; 16], [u8; 16]), u64>,
}

impl<O> Default for Durables<O> {
    fn default() -> Self {
        Durables {
            parked: HashMap::new(),
            expiry: BTreeSet::new(),
            created: HashMap::new(),
            replayable: HashMap::new(),
            pending: HashMap::new(),
        }
    }
}

impl<O> Durables<O> {
    /// An open made (or reconnected) with this CreateGuid.
    pub fn remember(&mut self, guids: ([u8; 16], [u8; 16]), session_id: u64, open_id: u64) {
        if self.created.len() < OPENS_MAX * 4 || self.created.contains_key(&guids) {
            self.created.insert(guids, (session_id, open_id));
        }
    }

    /// The open with this CreateGuid is gone (closed or disconnected).
    pub fn forget(&mut self, guids: ([u8; 16], [u8; 16]), open_id: u64) {
        if self.created.get(&guids).is_some_and(|(_, o)| *o == open_id) {
            self.created.remove(&guids);
        }
    }

    /// Note that the DH2Q CREATE `guids` waits for breaks (as of `now_ms`),
    /// or no longer does. A wait is believed for one break timeout.
    pub fn set_pending(&mut self, guids: ([u8; 16], [u8; 16]), waits: bool, now_ms: u64) {
        if !waits {
            self.pending.remove(&guids);
            return;
        }
        if self.pending.len() >= PENDING_MAX {
            // Full: drop the entries past their time.
            self.pending.retain(|_, t| *t > now_ms);
        }
        if self.pending.len() < PENDING_MAX {
            let until = now_ms + BREAK_TIMEOUT_MS + BREAK_RETRY_MS;
            self.pending.insert(guids, until);
        }
    }

    /// Whether the DH2Q CREATE `guids` still waits for breaks at `now_ms`.
    pub fn waits(&self, guids: &([u8; 16], [u8; 16]), now_ms: u64) -> bool {
        self.pending.get(guids).is_some_and(|t| *t > now_ms)
    }

    /// The connected open made with these (ClientGuid, CreateGuid): (session id, open id).
    pub fn created(&self, guids: &([u8; 16], [u8; 16])) -> Option<(u64, u64)> {
        self.created.get(guids).copied()
    }

    /// Park an open; when the table is full the one that would expire first
    /// goes to make room (returned, to be closed by the caller).
    pub fn park(&mut self, p: Parked<O>) -> Option<Parked<O>> {
        let evicted = if self.parked.len() >= OPENS_MAX {
            self.expiry
                .first()
                .copied()
                .and_then(|(_, id)| self.take(id))
        } else {
            None
        };
        self.expiry.insert((p.expires_ms, p.persistent_id));
        if p.durability.persistent {
            let d = &p.durability;
            self.replayable
                .insert((d.client_guid, d.create_guid), p.persistent_id);
        }
        self.parked.insert(p.persistent_id, p);
        evicted
    }

    /// Remove the parked open with this persistent id.
    pub fn take(&mut self, persistent_id: u64) -> Option<Parked<O>> {
        let p = self.parked.remove(&persistent_id)?;
        self.expiry.remove(&(p.expires_ms, persistent_id));
        let guids = (p.durability.client_guid, p.durability.create_guid);
        if self.replayable.get(&guids) == Some(&persistent_id) {
            self.replayable.remove(&guids);
        }
        Some(p)
    }

    /// The parked persistent open made with these (ClientGuid, CreateGuid).
    pub fn replayable(&self, guids: &([u8; 16], [u8; 16])) -> Option<&Parked<O>> {
        self.parked.get(self.replayable.get(guids)?)
    }

    pub fn get(&self, persistent_id: u64) -> Option<&Parked<O>> {
        self.parked.get(&persistent_id)
    }

    /// When the next parked open expires.
    pub fn next_expiry(&self) -> Option<u64> {
        self.expiry.first().map(|(t, _)| *t)
    }

    /// Take every parked open whose time is up.
    pub fn take_expired(&mut self, now_ms: u64) -> Vec<Parked<O>> {
        let due: Vec<u64> = self
            .expiry
            .iter()
            .take_while(|(t, _)| *t <= now_ms)
            .map(|(_, id)| *id)
            .collect();
        due.into_iter().filter_map(|id| self.take(id)).collect()
    }

    /// How many durable opens wait for their client to reconnect.
    pub fn len(&self) -> usize {
        self.parked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// How many of them are persistent ([`Durability::persistent`]).
    pub fn persistent_len(&self) -> usize {
        self.parked
            .values()
            .filter(|p| p.durability.persistent)
            .count()
    }

    /// The open ids (FileId.Volatile) of the parked opens.
    pub fn open_ids(&self) -> std::collections::HashSet<u64> {
        self.parked.values().map(|p| p.open_id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(id: u64, expires_ms: u64, persistent: bool) -> Parked<&'static str> {
        Parked {
            open: "open",
            persistent_id: id,
            open_id: id + 1000,
            durability: Durability {
                kind: Kind::V2,
                timeout_ms: 60_000,
                create_guid: [id as u8; 16],
                client_guid: [7; 16],
                owner: Owner {
                    uid: 1000,
                    user: "alice".into(),
                },
                persistent,
            },
            expires_ms,
            share: "share".into(),
        }
    }

    #[test]
    fn parked_opens_expire_soonest_first_and_leave_the_table() {
        let mut t = Durables::default();
        assert!(t.park(parked(1, 300, false)).is_none());
        assert!(t.park(parked(2, 100, false)).is_none());
        assert!(t.park(parked(3, 200, false)).is_none());
        assert_eq!(t.next_expiry(), Some(100));
        let due: Vec<u64> = t
            .take_expired(200)
            .iter()
            .map(|p| p.persistent_id)
            .collect();
        assert_eq!(due, vec![2, 3]);
        assert_eq!(t.len(), 1);
        assert_eq!(t.open_ids(), [1001].into_iter().collect());
        assert!(t.take(1).is_some());
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_full_table_gives_up_the_open_nearest_its_timeout() {
        let mut t = Durables::default();
        for id in 0..OPENS_MAX as u64 {
            assert!(t.park(parked(id, 10_000 + id, false)).is_none());
        }
        let evicted = t.park(parked(1 << 40, 1, false)).expect("one goes");
        assert_eq!(evicted.persistent_id, 0, "the one that would expire first");
        assert_eq!(t.len(), OPENS_MAX);
    }

    #[test]
    fn only_a_parked_persistent_open_stays_eligible_for_replay() {
        let mut t = Durables::default();
        t.park(parked(1, 100, true));
        t.park(parked(2, 100, false));
        assert_eq!(
            t.replayable(&([7; 16], [1; 16])).map(|p| p.persistent_id),
            Some(1)
        );
        assert!(t.replayable(&([7; 16], [2; 16])).is_none());
        t.take(1);
        assert!(
            t.replayable(&([7; 16], [1; 16])).is_none(),
            "gone with the open"
        );
    }

    #[test]
    fn a_create_waiting_for_breaks_is_believed_for_one_break_timeout() {
        let mut t: Durables<()> = Durables::default();
        let g = ([7; 16], [9; 16]);
        t.set_pending(g, true, 1_000);
        assert!(t.waits(&g, 1_000 + BREAK_TIMEOUT_MS));
        assert!(!t.waits(&g, 1_000 + BREAK_TIMEOUT_MS + BREAK_RETRY_MS));
        t.set_pending(g, false, 2_000);
        assert!(!t.waits(&g, 2_000));
    }
}
