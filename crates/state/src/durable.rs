//! Durable opens: opens that outlive their connection ([MS-SMB2] 3.3.5.9.6,
//! 3.3.5.9.7, 3.3.5.9.10, 3.3.5.9.12, 3.3.7.1; resilient opens, 3.3.5.15.9).
//!
//! A durable open is an ordinary [`Open`] whose state carries a
//! [`Durability`]. When its session ends without LOGOFF, TREE_DISCONNECT or
//! CLOSE (the connection went, or a new session named it as the previous
//! one), the open is *parked* here instead of closed: it keeps its place in
//! the file's share-mode table, its byte-range locks, its oplock or lease,
//! delete-on-close and position, and its route is [`DISCONNECTED`] so that
//! nothing is sent to it. A reconnect (DHnC, DH2C) on a new connection takes
//! it back under the same FileId; the scavenger closes it when its timeout
//! passes ([`ServerState::expire_durables`], driven by the driver's timer);
//! an open by someone else that would have to break its oplock or lease
//! closes it first (crate::cluster::home's `purge_for_open`, with [`take_parked`]),
//! as Samba and Windows do.
//!
//! Everything the server keeps about parked opens is in one table
//! ([`crate::files::parked::Durables`], `ServerState::files.durables`), one
//! table behind one mutex: the place a later cluster build writes elsewhere.
//! Durable opens do not outlive the process (as in Samba) except persistent ones on a
//! cluster (`crate::cluster::ca` (crates/core)). The CREATE's side (contexts, reconnect, replay) is
//! `crate::cmd::create::durable` (crates/core).
//!
//! Lock order: a `Session` mutex, then the table, then a `FileEntry`
//! mutex; never the other way round.

use std::sync::Arc;

use crate::lookup::Lookup;
use crate::server::{lock, FileTable, ServerState};
use crate::state::Open;

pub use crate::files::oplock::DISCONNECTED;
pub use crate::files::parked::{Durability, Kind, Owner};

/// A parked open ([`crate::files::parked`]).
pub type Parked = crate::files::parked::Parked<Arc<Open>>;

/// Who a session's durable opens belong to.
pub fn owner_of(session: &crate::state::Session) -> Owner {
    Owner {
        uid: session.account.as_ref().map_or(u32::MAX, |a| a.who.uid()),
        user: session.user.to_lowercase(),
    }
}

/// The session's opens go with the session (its last channel went, or a new
/// session named it as the previous one): durable ones are parked, the
/// others closed ([MS-SMB2] 3.3.7.1); what the closes ask of the cluster (the calls that close
/// opens of files homed on another node, the removal of persistent opens' records) is
/// returned, to be asked away from the I/O thread ([`crate::opens::close_all`]).
#[must_use = "the closes' questions to the cluster are to be asked"]
pub fn park_or_close_all(
    server: &Arc<ServerState>,
    opens: Vec<Arc<Open>>,
    now_ms: u64,
) -> Vec<Lookup> {
    let mut asks = Vec::new();
    for open in opens {
        // An open that is to delete its file does so now, as on Samba.
        let durability = {
            let st = lock(&open.state);
            st.durable.clone().filter(|_| !st.delete_on_close)
        }
        .filter(|d| crate::files::parked::may_keep(d, &lock(&open.entry), open.id));
        // So does one whose file's delete is pending: the home's to say. A file homed on
        // another node is asked away from the I/O thread, the open parked meanwhile (and kept
        // when the home gives no answer).
        let Some(d) = durability else {
            asks.extend(crate::opens::close_posted(server, open));
            continue;
        };
        match (
            crate::decide::home(&server.node, open.key),
            server.node.hooks(),
        ) {
            (Ok(Some(node)), Some(_)) => {
                let (key, entry) = (open.key, Arc::clone(&open.entry));
                let ids = (open.persistent_id, open.id);
                asks.extend(park(server, open, d, now_ms));
                asks.extend(pending_asked(server, node, key, entry, ids).map(Lookup::Home));
            }
            (Ok(_), _) if !crate::decide::delete_pending_here(&open.entry, None).0 => {
                asks.extend(park(server, open, d, now_ms))
            }
            _ => asks.extend(crate::opens::close_posted(server, open)),
        }
    }
    asks
}

/// The look at whether file `key` of a parked open (`ids`: its persistent and volatile ids)
/// is delete-pending, asked of its home, node `node`, away from the I/O thread: when the home
/// says it is, the thread that carried the call takes the open back out of the parked ones, if
/// it is still there (not reconnected meanwhile), and closes it there. No answer (the home
/// stopping or restarted, partitions between nodes, the call timed out) keeps it parked: an
/// open is not given up for a call that failed (issue 33: a node stopped while its call to a
/// restarted peer failed closed a persistent open and removed its record; its client heard
/// OBJECT_NAME_NOT_FOUND). Another open that would break it has it closed then, through the
/// home (`CloseParked`).
fn pending_asked(
    server: &Arc<ServerState>,
    node: u16,
    key: crate::server::FileKey,
    entry: Arc<std::sync::Mutex<crate::server::FileEntry>>,
    (persistent, id): (u64, u64),
) -> Option<crate::lookup::HomeAsk> {
    let hooks = server.node.hooks()?;
    let then = {
        let server = Arc::clone(server);
        Box::new(move |pending: Result<bool, ringshare_wire::NtStatus>| {
            match pending {
                Ok(true) => {}
                Ok(false) => return,
                Err(s) => {
                    tracing::debug!(
                        id,
                        ?s,
                        "a parked open's home did not say whether its file is delete-pending: kept"
                    );
                    return;
                }
            }
            let parked = {
                let mut t = lock(&server.files.durables);
                let ours = t.get(persistent).is_some_and(|p| p.open_id == id);
                ours.then(|| t.take(persistent)).flatten()
            };
            if let Some(p) = parked {
                tracing::debug!(id, "a parked open's file is delete-pending: closed");
                crate::opens::close_open(&server, p.open, false);
            }
        })
    };
    hooks.delete_pending_posted(&server.node, node, key, entry, then)
}

/// Park one open: its share-mode entry stays, routed nowhere. What the close of an open it
/// evicted asks of the cluster is returned ([`crate::opens::close_posted`]).
#[must_use = "the evicted open's questions to the cluster are to be asked"]
fn park(
    server: &Arc<ServerState>,
    open: Arc<Open>,
    durability: Durability,
    now_ms: u64,
) -> Vec<Lookup> {
    // Nobody is left to answer: its change-notify watch ends.
    crate::notify::end_open(server, &open);
    {
        let mut e = lock(&open.entry);
        for s in e.opens.iter_mut().filter(|s| s.owner == open.id) {
            s.caching.route = DISCONNECTED;
        }
        let lease = e
            .opens
            .iter()
            .find(|s| s.owner == open.id)
            .and_then(|s| s.caching.lease);
        // A lease shared with opens still connected keeps their route.
        let still_routed = e.opens.iter().any(|s| {
            s.caching.lease == lease && lease.is_some() && s.caching.route != DISCONNECTED
        });
        if let (Some(id), false) = (lease, still_routed) {
            for l in e.leases.iter_mut().filter(|l| l.id == id) {
                l.route = DISCONNECTED;
            }
        }
    }
    tracing::debug!(
        id = open.id,
        timeout_ms = durability.timeout_ms,
        "durable open kept after its connection went"
    );
    let share = open.share.name.clone();
    let create_guid = lock(&open.state).create_guid;
    if let Some(g) = create_guid {
        lock(&server.files.durables).forget(g, open.id);
    }
    let p = Parked {
        expires_ms: now_ms.saturating_add(durability.timeout_ms),
        persistent_id: open.persistent_id,
        open_id: open.id,
        durability,
        open,
        share,
    };
    let (key, persistent, id) = (p.open.key, p.open.persistent_id, p.open.id);
    let evicted = lock(&server.files.durables).park(p);
    if server.node.home_of(key) != crate::link::Home::Here {
        // The file's home learns it is disconnected (soon, not under the
        // session's lock): another open that would break it closes it.
        lock(&server.node.unsent_parks).push((key, persistent, id));
    }
    // The scavenger's timer may have to run sooner now.
    server.mail.wake_drivers();
    if let Some(old) = evicted {
        tracing::warn!(
            "{} disconnected durable opens kept (the most): closing the one nearest its timeout",
            crate::limits::DISCONNECTED_OPENS_MAX
        );
        return crate::opens::close_posted(server, old.open);
    }
    Vec::new()
}

impl ServerState {
    /// When the scavenger must next run ([`ServerState::expire_durables`]).
    pub fn durables_deadline(&self) -> Option<u64> {
        lock(&self.files.durables).next_expiry()
    }

    /// The scavenger: close every disconnected durable open whose timeout
    /// passed, releasing its share modes, locks and lease. What the closes ask of the cluster
    /// (a persistent open's record removed, the close at the home of a file homed on another
    /// node) is returned, to be asked away from the I/O thread that runs the scavenger
    /// ([`crate::opens::close_posted`]).
    #[must_use = "the closes' questions to the cluster are to be asked"]
    pub fn expire_durables(self: &Arc<Self>, now_ms: u64) -> Vec<Lookup> {
        let expired = lock(&self.files.durables).take_expired(now_ms);
        let mut asks = Vec::new();
        for p in expired {
            tracing::debug!(id = p.open.id, "durable open timed out");
            asks.extend(crate::opens::close_posted(self, p.open));
        }
        asks
    }

    /// How many disconnected durable opens the server keeps.
    pub fn parked_durables(&self) -> usize {
        lock(&self.files.durables).len()
    }

    /// How many of them are persistent (on a cluster node only these outlive it: their
    /// records let another node take them over).
    pub fn parked_persistent(&self) -> usize {
        lock(&self.files.durables).persistent_len()
    }
}

/// How long a version 2 durable open whose client asked for no particular
/// time (Timeout 0) is kept: 60 s, as Windows Server 2012 and Samba.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// The longest a client may have a version 2 durable open kept: Samba's
/// 300 s (longer requests are cut to it).
pub const MAX_TIMEOUT_MS: u64 = 300_000;

/// What a reconnect names and who asks ([`take_matching`]).
pub struct Reconnect<'a> {
    /// DH2C's CreateGuid (`None` for DHnC).
    pub create_guid: Option<[u8; 16]>,
    /// The lease key of the reconnect's lease context, if any.
    pub lease_key: Option<[u8; 16]>,
    pub client_guid: [u8; 16],
    /// The name in the CREATE (without `::$DATA`).
    pub name: &'a str,
    pub share: &'a str,
    pub owner: &'a Owner,
}

/// Take the parked open `file_id` out of the table if the reconnect
/// `r` may have it (every check with the table locked; the open leaves it
/// only when all pass). Anything that does not match gets
/// OBJECT_NAME_NOT_FOUND and learns nothing, except another user
/// (ACCESS_DENIED) and a lease key that matches on another name
/// (INVALID_PARAMETER), as Windows and Samba answer.
pub fn take_matching(
    files: &FileTable,
    file_id: ringshare_wire::FileId,
    r: &Reconnect<'_>,
) -> Result<Parked, ringshare_wire::NtStatus> {
    use ringshare_wire::NtStatus;
    let mut t = lock(&files.durables);
    // A persistent open is named by its FileId's persistent part alone ([MS-SMB2] 3.3.5.9.12,
    // as Samba looks it up): its volatile part changes when a cluster node takes it over from
    // a dead one (crates/cluster-home cluster/ca.rs), before its client learns the new one.
    let p = t
        .get(file_id.persistent)
        .filter(|p| p.open.id == file_id.volatile || p.durability.persistent)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let d = &p.durability;
    // DHnC reconnects any durable open (a version 2 one too, as on
    // Samba: smbtorture smb2.durable-v2-open.reopen2b); DH2C one whose
    // CreateGuid (zero for DHnQ) it names.
    // The ClientGuid matters only through a lease's key (an open with an
    // oplock may come back from a client with another ClientGuid, as
    // Windows and Samba allow: smbtorture smb2.durable-v2-open.reopen1a).
    if r.create_guid.is_some_and(|g| g != d.create_guid) {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let held_lease = {
        let e = lock(&p.open.entry);
        e.opens
            .iter()
            .find(|s| s.owner == p.open.id)
            .and_then(|s| s.caching.lease)
    };
    match (held_lease, r.lease_key) {
        (None, None) => {}
        (Some(l), Some(key)) if l.key == key && l.client_guid == r.client_guid => {
            let path = lock(&p.open.state).path.clone();
            let same_name = crate::path::parse_smb_path(r.name).is_ok_and(|n| {
                n.to_slash_path()
                    .eq_ignore_ascii_case(&path.to_slash_path())
            });
            if !same_name {
                return Err(NtStatus::INVALID_PARAMETER);
            }
        }
        _ => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
    }
    if !p.share.eq_ignore_ascii_case(r.share) {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    if d.owner != *r.owner {
        tracing::info!(
            user = %r.owner.user,
            "refusing to reconnect another user's durable open"
        );
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(t.take(file_id.persistent).expect("looked up above"))
}

/// Close the parked opens `ids` (by FileId) that this node keeps, `why` (logged): a break
/// they would have to hear goes to no client ([`crate::files::oplock::parked_in_the_way`],
/// [`crate::files::oplock::parked_broken`]). Call it without a file entry's lock held (the
/// close takes it). A persistent open's record goes after, away from this thread (posted).
pub fn purge(server: &ServerState, ids: &[(u64, u64)], why: &str) {
    if ids.is_empty() {
        return;
    }
    for p in take_parked(&server.files, ids) {
        tracing::debug!(id = p.open.id, "closing a disconnected durable open {why}");
        if let Some(forget) = crate::opens::close_record_posted(server, p.open) {
            server.node.post(forget);
        }
    }
}

/// Take these parked opens (by FileId) out of the table.
pub fn take_parked(files: &FileTable, ids: &[(u64, u64)]) -> Vec<Parked> {
    let mut t = lock(&files.durables);
    let mut out = Vec::new();
    for (p, v) in ids {
        if t.get(*p).is_some_and(|x| x.open.id == *v) {
            out.extend(t.take(*p));
        }
    }
    out
}
