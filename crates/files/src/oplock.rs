//! Oplocks and leases: what an open may cache, and breaking that when
//! another open needs the file ([MS-SMB2] 3.3.4.6, 3.3.4.7, 3.3.5.9.8,
//! 3.3.5.9.11, 3.3.5.22; the object store's rules of [MS-FSA] 2.1.5.17 and
//! 2.1.4.12 as Windows applies them).
//!
//! The state lives in the file's [`FileEntry`], under its mutex: each open's
//! oplock in its [`ShareEntry`], each lease (one per ClientGuid and LeaseKey,
//! shared by the opens that name it) in `FileEntry::leases`. Breaks are
//! decided there and delivered as [`Break`]s to the connection of the
//! holder's client (any thread); a CREATE that must wait for an
//! acknowledgment is parked by its connection, which the file's entry
//! remembers as a waiter: an acknowledgment or a close there tells it to try
//! again ([`wake_waiters`]), and it also looks every [`BREAK_RETRY_MS`] for
//! breaks the holder let time out ([`BREAK_TIMEOUT_MS`]).
//!
//! Policy (Samba's and Windows', as smbtorture's smb2.oplock and smb2.lease
//! check it; an oplock counts as lease state: BATCH = RWH, EXCLUSIVE = RW,
//! LEVEL_II = R):
//! - a "stat open" (no access beyond reading or writing attributes, not
//!   overwriting) breaks nothing;
//! - any other new open takes W from other holders (BATCH/EXCLUSIVE -> II,
//!   RWH -> RH, RW -> R), or, when it would be refused for sharing, H
//!   (BATCH -> II, RWH -> RW, RH -> R: the holder's client may close handles
//!   it only kept cached); an overwrite breaks to nothing. The CREATE waits
//!   for the acknowledgment when W (or H, on a sharing conflict) was taken,
//!   and then checks sharing again;
//! - a WRITE, byte-range LOCK or size change breaks LEVEL_II oplocks (the
//!   writer's own too) and the R leases of other keys to nothing, without
//!   waiting;
//! - grants: the requested oplock when the file has no other open, LEVEL_II
//!   when it has some and nobody holds H, else nothing; leases R, RH, RW or
//!   RWH (H, W and HW alone give nothing), W only without other opens, H
//!   not beside an oplock; opens with the same lease key count as one;
//! - a break not acknowledged within [`BREAK_TIMEOUT_MS`] leaves the holder
//!   with nothing;
//! - directories get no oplock; a directory lease is R or RH (never W:
//!   [MS-SMB2] 3.3.5.9.11), granted when the connection negotiated
//!   directory leasing, and broken to nothing, without waiting, when
//!   something inside the directory changes ([`break_dir_leases`]) except
//!   for the lease whose key the changing open named as its parent's.

use ringshare_wire::consts::{LeaseBreakFlags, LeaseFlags, LeaseState};
use ringshare_wire::misc::LeaseBreakNotification;
use ringshare_wire::{FileId, NtStatus};

use crate::access;
use crate::FileEntry;

pub const LEVEL_NONE: u8 = 0x00;
pub const LEVEL_II: u8 = 0x01;
pub const LEVEL_EXCLUSIVE: u8 = 0x08;
pub const LEVEL_BATCH: u8 = 0x09;
pub const LEVEL_LEASE: u8 = 0xFF;

const R: u32 = LeaseState::READ_CACHING.0;
const H: u32 = LeaseState::HANDLE_CACHING.0;
const W: u32 = LeaseState::WRITE_CACHING.0;

/// How long a break waits for its acknowledgment (Windows' OplockBreakTimeout).
pub(crate) const BREAK_TIMEOUT_MS: u64 = 35_000;
/// How often a waiting request looks again on its own, for the breaks that
/// end by timing out; acknowledgments and closes wake it at once
/// ([`wake_waiters`]).
pub const BREAK_RETRY_MS: u64 = 1_000;

/// A lease's name: the client's ClientGuid and its LeaseKey.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LeaseId {
    pub client_guid: [u8; 16],
    pub key: [u8; 16],
}

/// Where a break for an open or lease goes: the connection that made it
/// (another channel of its session when that connection is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Route {
    pub conn_id: u64,
    pub session_id: u64,
}

/// What one open caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caching {
    /// The oplock level held ([`LEVEL_LEASE`] when the open has a lease).
    pub level: u8,
    /// An oplock break was sent and not yet acknowledged: the level it breaks to.
    pub breaking_to: Option<u8>,
    pub break_deadline_ms: u64,
    /// The open's lease, when it has one.
    pub lease: Option<LeaseId>,
    pub route: Route,
    pub file_id: (u64, u64),
}

/// A lease on one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: LeaseId,
    pub state: u32,
    /// A break was sent and needs an acknowledgment: the state it breaks to.
    pub breaking_to: Option<u32>,
    /// While breaking: the state the lease must end at for the opens that
    /// wait (lowered by conflicts that come during the break). An
    /// acknowledgment above it starts the next step at once.
    pub required: u32,
    pub break_deadline_ms: u64,
    /// Lease.Epoch (version 2 leases).
    pub epoch: u16,
    pub v2: bool,
    pub parent_key: Option<[u8; 16]>,
    pub route: Route,
}

/// What a new open asks for and how it opens the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wish {
    /// The CREATE waited before: it waits while a lease of another key is
    /// still breaking (its first attempt waits only for what it needs).
    pub retry: bool,
    pub access: u32,
    pub share_access: u32,
    /// The open overwrites or supersedes the file.
    pub truncate: bool,
    /// An open for DELETE alone, without an oplock (how clients delete a
    /// file): it also takes H, so holders close handles they only cached.
    pub delete_only: bool,
    pub lease: Option<LeaseId>,
}

/// What a holder's connection is to be told: a break of its oplock or lease, or
/// that a break its requests wait for may have ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// [MS-SMB2] 2.2.23.1 to the client of `session_id`.
    Oplock {
        session_id: u64,
        file_id: FileId,
        level: u8,
    },
    /// [MS-SMB2] 2.2.23.2 to the client of `session_id`.
    Lease {
        session_id: u64,
        notification: LeaseBreakNotification,
    },
    /// A break this connection's requests wait for may have ended: try them again.
    Retry,
}

/// Breaks to send once the file's entry is unlocked.
pub type Breaks = Vec<(Route, Break)>;

/// The route of a parked durable open: no connection, no session (nothing is
/// sent to it).
pub const DISCONNECTED: Route = Route {
    conn_id: 0,
    session_id: 0,
};

/// Access a "stat open" may have: it breaks no oplock.
const STAT_ACCESS: u32 =
    access::FILE_READ_ATTRIBUTES | access::FILE_WRITE_ATTRIBUTES | access::SYNCHRONIZE;

/// An open that only looks at attributes (and does not overwrite) breaks
/// no oplock; for leases reading the security descriptor counts as such a
/// look too (smbtorture smb2.oplock.statopen1 and smb2.lease.statopen4).
fn is_stat_open(access: u32, truncate: bool) -> bool {
    access & !STAT_ACCESS == 0 && !truncate
}

fn is_lease_stat_open(access: u32, truncate: bool) -> bool {
    access & !(STAT_ACCESS | access::READ_CONTROL) == 0 && !truncate
}

/// The lease state an oplock level stands for.
fn oplock_state(level: u8) -> u32 {
    match level {
        LEVEL_BATCH => R | W | H,
        LEVEL_EXCLUSIVE => R | W,
        LEVEL_II => R,
        _ => 0,
    }
}

/// Before a new open joins the file: end overdue breaks, start the breaks
/// the open needs, and say whether it must wait for acknowledgments
/// (`true`). Called with the entry locked; `breaks` collects what to send.
pub fn before_open(e: &mut FileEntry, wish: &Wish, now_ms: u64, breaks: &mut Breaks) -> bool {
    expire(e, now_ms);
    let lease_stat = is_lease_stat_open(wish.access, wish.truncate);
    if lease_stat && is_stat_open(wish.access, wish.truncate) {
        return false;
    }
    let oplock_stat = is_stat_open(wish.access, wish.truncate);
    let conflict = access::check_sharing(&e.opens, wish.access, wish.share_access).is_err();
    // What the open takes away from other holders, and waits for.
    let take = if conflict { H } else { W } | if wish.delete_only { H } else { 0 };
    let mut wait = false;
    for o in e.opens.iter_mut() {
        let c = &mut o.caching;
        if c.level == LEVEL_LEASE || c.level == LEVEL_NONE || oplock_stat {
            continue;
        }
        if c.breaking_to.is_some() {
            wait = true;
            continue;
        }
        let held = oplock_state(c.level);
        if held & take != 0 {
            let to = if wish.truncate { LEVEL_NONE } else { LEVEL_II };
            c.breaking_to = Some(to);
            c.break_deadline_ms = now_ms + BREAK_TIMEOUT_MS;
            breaks.push((c.route, oplock_notice(c, to)));
            wait = true;
        } else if wish.truncate && !conflict {
            // LEVEL_II: an overwrite breaks it to nothing, no acknowledgment.
            c.level = LEVEL_NONE;
            breaks.push((c.route, oplock_notice(c, LEVEL_NONE)));
        }
    }
    for l in e.leases.iter_mut() {
        if Some(l.id) == wish.lease || lease_stat {
            continue;
        }
        let must = l.state & take != 0;
        let to = if wish.truncate && (must || !conflict) {
            0
        } else {
            l.state & !take
        };
        if l.breaking_to.is_some() {
            // No new notification: the break goes on to what this open
            // needs once the holder acknowledges the step in flight.
            l.required &= to;
            if must || wish.retry {
                wait = true;
            }
            continue;
        }
        if to != l.state {
            let acked = start_lease_break(l, to, now_ms, breaks, true);
            wait |= acked && must;
        }
    }
    wait
}

/// The opens of disconnected clients (route [`DISCONNECTED`])
/// that a new open would have to break, by FileId (persistent, volatile): their client is
/// not there to acknowledge, so they are closed instead (Samba and Windows
/// do the same). What is taken is what [`before_open`] would take.
pub fn parked_in_the_way(e: &FileEntry, wish: &Wish) -> Vec<(u64, u64)> {
    let disconnected = |r: Route| r == DISCONNECTED;
    if !e.opens.iter().any(|o| disconnected(o.caching.route))
        || is_lease_stat_open(wish.access, wish.truncate)
            && is_stat_open(wish.access, wish.truncate)
    {
        return Vec::new();
    }
    let conflict = access::check_sharing(&e.opens, wish.access, wish.share_access).is_err();
    let take = if conflict { H } else { W } | if wish.delete_only { H } else { 0 };
    e.opens
        .iter()
        .filter(|o| disconnected(o.caching.route))
        .filter(|o| {
            let c = &o.caching;
            let held = match (c.level, c.lease) {
                (LEVEL_LEASE, Some(id)) if Some(id) != wish.lease => {
                    e.leases.iter().find(|l| l.id == id).map_or(0, |l| l.state)
                }
                (LEVEL_LEASE, _) => 0,
                (level, _) => oplock_state(level),
            };
            held & take != 0 || (wish.truncate && held != 0)
        })
        .map(|o| o.caching.file_id)
        .collect()
}

/// The parked (disconnected) durable opens that a break in `breaks` goes to: their client
/// cannot hear or acknowledge it, so they are closed instead, as Windows does
/// (smbtorture's durable-v2-open.purge-disconnected-rh-with-write and -with-rename: a WRITE
/// that breaks a disconnected open's R lease, or a rename that breaks its H, purges it), as a
/// new open that would break them does ([`parked_in_the_way`]). Their FileIds.
pub fn parked_broken(e: &FileEntry, breaks: &Breaks) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (route, b) in breaks {
        if *route != DISCONNECTED {
            continue;
        }
        match b {
            Break::Lease { notification, .. } => {
                let ids = e
                    .leases
                    .iter()
                    .filter(|l| l.route == DISCONNECTED && l.id.key == notification.lease_key)
                    .map(|l| l.id);
                for id in ids {
                    out.extend(
                        e.opens
                            .iter()
                            .filter(|o| {
                                o.caching.route == DISCONNECTED && o.caching.lease == Some(id)
                            })
                            .map(|o| o.caching.file_id),
                    );
                }
            }
            Break::Oplock { file_id, .. } => out.push((file_id.persistent, file_id.volatile)),
            _ => {}
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// After a WRITE, byte-range LOCK or size change through open `owner`:
/// LEVEL_II oplocks (the writer's own too) and the R leases of other keys
/// break to nothing, without waiting for anyone.
pub(crate) fn before_change(e: &mut FileEntry, owner: u64, now_ms: u64, breaks: &mut Breaks) {
    expire(e, now_ms);
    let mine = lease_of(e, owner);
    for o in e.opens.iter_mut() {
        let c = &mut o.caching;
        if c.level == LEVEL_II && c.breaking_to.is_none() {
            c.level = LEVEL_NONE;
            breaks.push((c.route, oplock_notice(c, LEVEL_NONE)));
        }
    }
    for l in e.leases.iter_mut() {
        if Some(l.id) == mine || l.breaking_to.is_some() || l.state & R == 0 {
            continue;
        }
        start_lease_break(l, 0, now_ms, breaks, true);
    }
}

/// [`before_change`] when anything on the file is cached at all (a quick
/// look: most files have no oplock or lease).
pub fn on_change(e: &mut FileEntry, owner: u64, now_ms: u64, breaks: &mut Breaks) {
    if !e.leases.is_empty() || e.opens.iter().any(|o| o.caching.level != LEVEL_NONE) {
        before_change(e, owner, now_ms, breaks);
    }
}

/// Before open `owner` renames the file: other holders give up handle
/// caching (leases of other keys lose H, BATCH breaks to LEVEL_II), since a
/// handle they keep open only for caching would hold the old name. True
/// while their acknowledgments are awaited.
pub fn before_rename(e: &mut FileEntry, owner: u64, now_ms: u64, breaks: &mut Breaks) -> bool {
    expire(e, now_ms);
    let mine = lease_of(e, owner);
    let mut wait = false;
    for o in e.opens.iter_mut() {
        let c = &mut o.caching;
        if o.owner == owner || c.level == LEVEL_LEASE {
            continue;
        }
        if c.breaking_to.is_some() {
            wait = true;
        } else if c.level == LEVEL_BATCH {
            c.breaking_to = Some(LEVEL_II);
            c.break_deadline_ms = now_ms + BREAK_TIMEOUT_MS;
            breaks.push((c.route, oplock_notice(c, LEVEL_II)));
            wait = true;
        }
    }
    for l in e.leases.iter_mut() {
        if Some(l.id) == mine {
            continue;
        }
        if let Some(to) = l.breaking_to {
            l.required &= !H;
            wait |= (l.state | to) & H != 0;
        } else if l.state & H != 0 {
            wait |= start_lease_break(l, l.state & !H, now_ms, breaks, true);
        }
    }
    wait
}

/// What the new open `owner` (already in `e.opens`) is granted: its oplock
/// level and, for a lease, the lease's state. Called with the entry locked,
/// after [`before_open`] found nothing to wait for.
pub fn grant(
    e: &mut FileEntry,
    owner: u64,
    truncate: bool,
    requested: u8,
    lease_req: Option<&ringshare_wire::create::Lease>,
    lease_id: Option<LeaseId>,
    route: Route,
) -> Grant {
    let is_dir = e.is_dir;
    let has_locks = !e.locks.is_empty();
    let Some(me) = e.opens.iter().position(|o| o.owner == owner) else {
        return Grant::default();
    };
    // Other opens that keep this one from caching writes: any but stat
    // opens without an oplock, and not those sharing this open's lease.
    let others = e.opens.iter().any(|o| {
        o.owner != owner
            && (lease_id.is_none() || o.caching.lease != lease_id)
            && (o.caching.level != LEVEL_NONE || !is_stat_open(o.access, false))
    });
    let oplock_beside = e
        .opens
        .iter()
        .any(|o| o.owner != owner && !matches!(o.caching.level, LEVEL_NONE | LEVEL_LEASE));
    let h_held = e
        .opens
        .iter()
        .any(|o| o.owner != owner && o.caching.level == LEVEL_BATCH)
        || e.leases
            .iter()
            .any(|l| Some(l.id) != lease_id && l.state & H != 0);
    if requested == LEVEL_LEASE {
        let (Some(req), Some(id)) = (lease_req, lease_id) else {
            return Grant::default();
        };
        let mut want = req.state.0 & if is_dir { R | H } else { R | H | W };
        if want & R == 0 || has_locks {
            want = 0;
        }
        if others {
            want &= !W;
        }
        if oplock_beside {
            want &= !H;
        }
        let lease = match e.leases.iter().position(|l| l.id == id) {
            Some(i) => {
                let l = &mut e.leases[i];
                // A lease only grows while it is not breaking, and only to a
                // state that holds what it had.
                if l.breaking_to.is_none()
                    && req.state.0 & l.state == l.state
                    && req.state.0 != l.state
                    && want == req.state.0
                {
                    l.state = want;
                    l.epoch = l.epoch.wrapping_add(1);
                }
                l
            }
            None => {
                e.leases.push(Lease {
                    id,
                    state: want,
                    breaking_to: None,
                    required: 0,
                    break_deadline_ms: 0,
                    // The epoch counts changes of state: a lease granted no
                    // state (a file with byte-range locks) keeps the client's.
                    epoch: req.v2.map_or(0, |v| {
                        if want == 0 {
                            v.epoch
                        } else {
                            v.epoch.wrapping_add(1)
                        }
                    }),
                    v2: req.v2.is_some(),
                    parent_key: req
                        .v2
                        .filter(|_| req.flags.0 & LeaseFlags::PARENT_LEASE_KEY_SET.0 != 0)
                        .map(|v| v.parent_key),
                    route,
                });
                e.leases.last_mut().expect("just pushed")
            }
        };
        lease.route = route;
        let g = Grant::of_lease(lease);
        let c = &mut e.opens[me].caching;
        c.level = LEVEL_LEASE;
        c.lease = Some(id);
        return g;
    }
    let stat = is_stat_open(e.opens[me].access, truncate);
    let level = match requested {
        LEVEL_II | LEVEL_EXCLUSIVE | LEVEL_BATCH if !is_dir => {
            if h_held || (stat && others) {
                LEVEL_NONE
            } else if others {
                LEVEL_II
            } else {
                requested
            }
        }
        _ => LEVEL_NONE,
    };
    e.opens[me].caching.level = level;
    Grant {
        level,
        ..Grant::default()
    }
}

/// What CREATE answers about caching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grant {
    pub level: u8,
    pub lease_state: u32,
    pub lease_breaking: bool,
    pub epoch: u16,
    pub v2: bool,
    pub parent_key: Option<[u8; 16]>,
}

impl Grant {
    /// What CREATE answers for an open that holds `lease`.
    pub fn of_lease(lease: &Lease) -> Grant {
        Grant {
            level: LEVEL_LEASE,
            lease_state: lease.state,
            lease_breaking: lease.breaking_to.is_some(),
            epoch: lease.epoch,
            v2: lease.v2,
            parent_key: lease.parent_key,
        }
    }
}

/// An oplock break acknowledgment for open `owner` naming `level`
/// ([MS-SMB2] 3.3.5.22.1): the level the open keeps. With no break pending
/// the answer is INVALID_OPLOCK_PROTOCOL (what Windows and Samba answer and
/// smbtorture expects; the text of 3.3.5.22.1 says INVALID_DEVICE_STATE).
pub fn ack_oplock(e: &mut FileEntry, owner: u64, level: u8) -> Result<u8, NtStatus> {
    let o = e
        .opens
        .iter_mut()
        .find(|o| o.owner == owner)
        .ok_or(NtStatus::FILE_CLOSED)?;
    let c = &mut o.caching;
    let Some(to) = c.breaking_to else {
        return Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
    };
    if level != LEVEL_NONE && level != LEVEL_II {
        c.level = LEVEL_NONE;
        c.breaking_to = None;
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let kept = if to == LEVEL_NONE { LEVEL_NONE } else { level };
    c.level = kept;
    c.breaking_to = None;
    Ok(kept)
}

/// A lease break acknowledgment ([MS-SMB2] 3.3.5.22.2): the state the lease
/// keeps. When that is still more than the waiting opens need, the next
/// step of the break starts at once (through R with an acknowledgment while
/// W or H is held, else straight to what is needed).
pub fn ack_lease(
    e: &mut FileEntry,
    id: LeaseId,
    state: u32,
    now_ms: u64,
    breaks: &mut Breaks,
) -> Result<u32, NtStatus> {
    let l = e
        .leases
        .iter_mut()
        .find(|l| l.id == id)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let Some(to) = l.breaking_to else {
        return Err(NtStatus::UNSUCCESSFUL);
    };
    if state & !to != 0 {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    l.state = state;
    l.breaking_to = None;
    let required = l.required;
    if state & !required != 0 {
        let next = if state & (W | H) != 0 {
            (required | R) & state
        } else {
            required
        };
        if next != state {
            start_lease_break(l, next, now_ms, breaks, false);
            l.required = required;
        }
    }
    Ok(state)
}

/// Something inside directory `e` changed (an entry made, removed, renamed,
/// linked or changed): its leases break to nothing, without waiting for
/// anyone, except the lease whose key is `except` (the ParentLeaseKey the
/// changing open sent: its client knows of the change). `now_ms` is `None`
/// where no clock is at hand (a close): the break's deadline then starts at
/// the next look at the directory's entry. [MS-SMB2] 3.3.4.7; Samba 4.22
/// breaks RH (and R) to none.
pub fn break_dir_leases(
    e: &mut FileEntry,
    except: Option<[u8; 16]>,
    now_ms: Option<u64>,
    breaks: &mut Breaks,
) {
    for l in e.leases.iter_mut() {
        if Some(l.id.key) == except {
            continue;
        }
        if l.breaking_to.is_some() {
            // The break in flight goes on to nothing after its acknowledgment.
            l.required = 0;
            continue;
        }
        if l.state & (R | H) == 0 {
            continue;
        }
        if start_lease_break(l, 0, now_ms.unwrap_or(0), breaks, true) && now_ms.is_none() {
            l.break_deadline_ms = DEADLINE_UNSET;
        }
    }
}

/// The ParentLeaseKey open `owner`'s lease names, if it has a lease that
/// names one.
pub fn parent_key_of(e: &FileEntry, owner: u64) -> Option<[u8; 16]> {
    let id = lease_of(e, owner)?;
    e.leases.iter().find(|l| l.id == id)?.parent_key
}

/// A break deadline not set yet (the break started where no clock was at
/// hand): [`expire`] sets it at its first look.
const DEADLINE_UNSET: u64 = u64::MAX;

/// An open left the file: a lease no open names any more goes with it.
/// Returns the lease that went, if one did.
pub fn after_close(e: &mut FileEntry, lease: Option<LeaseId>) -> Option<LeaseId> {
    let id = lease?;
    if e.opens.iter().any(|o| o.caching.lease == Some(id)) {
        return None;
    }
    e.leases.retain(|l| l.id != id);
    Some(id)
}

/// Whether open `owner` caches the file for reads (`write` false) or writes (`write` true):
/// its lease has READ_CACHING or WRITE_CACHING, or its oplock is level II (reads) or
/// exclusive or batch (both), as Samba's `fsp_lease_type` counts oplocks. Samba's `strict
/// locking = Auto` skips the lock check of such an open's READ or WRITE.
pub fn caches(e: &FileEntry, owner: u64, write: bool) -> bool {
    let Some(o) = e.opens.iter().find(|o| o.owner == owner) else {
        return false;
    };
    let state = match (o.caching.level, o.caching.lease) {
        (LEVEL_LEASE, Some(id)) => e.leases.iter().find(|l| l.id == id).map_or(0, |l| l.state),
        (LEVEL_II, _) => R,
        (LEVEL_EXCLUSIVE | LEVEL_BATCH, _) => R | W | H,
        _ => 0,
    };
    state & if write { W } else { R } != 0
}

/// The lease open `owner` holds, if any.
fn lease_of(e: &FileEntry, owner: u64) -> Option<LeaseId> {
    e.opens
        .iter()
        .find(|o| o.owner == owner)
        .and_then(|o| o.caching.lease)
}

/// Breaks whose acknowledgment is overdue count as acknowledged.
fn expire(e: &mut FileEntry, now_ms: u64) {
    for o in e.opens.iter_mut() {
        let c = &mut o.caching;
        if let Some(to) = c.breaking_to {
            if c.break_deadline_ms <= now_ms {
                tracing::info!(open = o.owner, to, "oplock break not acknowledged in time");
                c.level = LEVEL_NONE;
                c.breaking_to = None;
            }
        }
    }
    for l in e.leases.iter_mut() {
        if let Some(to) = l.breaking_to {
            if l.break_deadline_ms == DEADLINE_UNSET {
                l.break_deadline_ms = now_ms + BREAK_TIMEOUT_MS;
            } else if l.break_deadline_ms <= now_ms {
                tracing::info!(to, "lease break not acknowledged in time");
                l.state = 0;
                l.breaking_to = None;
            }
        }
    }
}

/// Break lease `l` to `to`; true when the holder must acknowledge first
/// (it gives up W or H: cached writes or handles).
fn start_lease_break(
    l: &mut Lease,
    to: u32,
    now_ms: u64,
    breaks: &mut Breaks,
    new_epoch: bool,
) -> bool {
    let ack = l.state & (W | H) != 0;
    if l.v2 && new_epoch {
        l.epoch = l.epoch.wrapping_add(1);
    }
    let notification = LeaseBreakNotification {
        new_epoch: if l.v2 { l.epoch } else { 0 },
        flags: if ack {
            LeaseBreakFlags::ACK_REQUIRED
        } else {
            LeaseBreakFlags::empty()
        },
        lease_key: l.id.key,
        current_lease_state: LeaseState(l.state),
        new_lease_state: LeaseState(to),
        break_reason: 0,
        access_mask_hint: ringshare_wire::consts::AccessMask(0),
        share_mask_hint: ringshare_wire::consts::ShareAccess(0),
    };
    breaks.push((
        l.route,
        Break::Lease {
            session_id: l.route.session_id,
            notification,
        },
    ));
    if ack {
        l.breaking_to = Some(to);
        l.required = to;
        l.break_deadline_ms = now_ms + BREAK_TIMEOUT_MS;
    } else {
        l.state = to;
    }
    ack
}

fn oplock_notice(c: &Caching, level: u8) -> Break {
    Break::Oplock {
        session_id: c.route.session_id,
        file_id: FileId {
            persistent: c.file_id.0,
            volatile: c.file_id.1,
        },
        level,
    }
}

/// Remember that connection `conn_id` waits for a break on this file.
pub fn add_waiter(e: &mut FileEntry, conn_id: u64) {
    if !e.waiters.contains(&conn_id) {
        e.waiters.push(conn_id);
    }
}

/// Something a waiter may wait for changed on this file (an acknowledgment,
/// a close): tell every waiting connection to try again. Called with the
/// entry locked; the notices go out through `breaks`, after it is unlocked.
pub fn wake_waiters(e: &mut FileEntry, breaks: &mut Breaks) {
    for conn_id in e.waiters.drain(..) {
        breaks.push((
            Route {
                conn_id,
                session_id: 0,
            },
            Break::Retry,
        ));
    }
}
