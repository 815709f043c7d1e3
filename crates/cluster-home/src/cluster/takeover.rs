//! A durable reconnect (DHnC, DH2C) of an open this node does not keep (issue 33 item 2): an
//! open another node keeps, which hands it over ([`super::handover`]), or a persistent open
//! taken over from a dead node, whose record in etcd names the node keeping it ([`super::ca`]).
//!
//! The takeover is a chain of blocking calls: the look at the file's home, the keeper's
//! give-up, the records read in etcd ([`super::ca::keeper`], [`super::ca::id_of`],
//! [`super::ca::still_kept`]), the file opened again, the home's move and the new record
//! stored, each bounded (2 s with a peer or an etcd member stopped). Takeovers are rare (a
//! failover, when many clients reconnect at once), so the whole chain is one job with owned
//! inputs ([`Reconnecting`]), carried away from the I/O thread by a home-call thread as a
//! [`HomeAsk`] (its "answer" is empty: the result waits in the job's slot, [`Takeover`]); the
//! CREATE parks meanwhile and takes the result ([`Takeover::taken`]) when it runs on. The
//! file's reopen is a syscall on that thread (acceptable for this rare path).
//!
//! A CREATE that will not go on (its connection went, or its session ended) lets its
//! [`Takeover`] go ([`Takeover::abandon`]): a persistent open already taken over is parked on
//! this node as a disconnected durable open, for a later reconnect (through any node: its
//! record names this node), as its connection's end would have left it; another durable open
//! is closed cleanly (its client's FileId no longer names it anywhere); one still being taken
//! over is let go so by the thread that carries the job, once it is.

use std::sync::{Arc, Mutex};

use ringshare_wire::{FileId, NtStatus};

use super::handover::{holder, move_kept, take_over_from, transfer, Landing, Moved, TakenOver};
use crate::durable::{Owner, Parked, Reconnect};
use crate::files::oplock::Route;
use crate::lookup::{HomeAsk, Lookup, LookupRequest};
use crate::server::{lock, FileEntry, FileKey, ServerState};
use crate::state::SessionRef;

/// What a reconnect of an open kept elsewhere names and where it lands, owned (the job runs
/// on another thread, after the request's buffers are gone).
pub struct Reconnecting {
    pub file_id: FileId,
    /// DH2C's CreateGuid (`None` for DHnC).
    pub create_guid: Option<[u8; 16]>,
    pub lease_key: Option<[u8; 16]>,
    pub client_guid: [u8; 16],
    /// The name in the CREATE (without `::$DATA`).
    pub name: String,
    pub share: String,
    pub owner: Owner,
    /// The request's session and tree, the connection its breaks go to, its channel sequence
    /// and the time it came (an open kept after a failed move is parked from then).
    pub sref: SessionRef,
    pub tree_id: u32,
    pub route: Route,
    pub channel_sequence: u16,
    pub now_ms: u64,
    /// An open this node keeps after its move failed, taken out of the parked ones by this
    /// reconnect's checks: moved now ([`move_kept`]) instead of taken over from another node.
    pub kept: Option<Parked>,
}

impl Reconnecting {
    fn wanted(&self) -> Reconnect<'_> {
        Reconnect {
            create_guid: self.create_guid,
            lease_key: self.lease_key,
            client_guid: self.client_guid,
            name: &self.name,
            share: &self.share,
            owner: &self.owner,
        }
    }

    fn landing(&self) -> Landing<'_> {
        Landing {
            sref: &self.sref,
            tree_id: self.tree_id,
            route: self.route,
            channel_sequence: self.channel_sequence,
            now_ms: self.now_ms,
        }
    }
}

/// Take `r`'s open over, waiting for every call (call it where waiting stalls no client: a
/// home-call thread, [`to_ask`]): from the node its volatile id names, else (a persistent
/// open) from the node its record names. While the open is between nodes (its record still
/// there for this reconnect, or unreadable) the answer is FILE_NOT_AVAILABLE (try again), never
/// OBJECT_NAME_NOT_FOUND (issue 33).
pub fn take_over(server: &Arc<ServerState>, r: &Reconnecting) -> Result<TakenOver, NtStatus> {
    let (landing, wanted, file_id) = (r.landing(), r.wanted(), r.file_id);
    let holder = holder(&server.node, file_id.volatile);
    let mut taken = Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    if let Some(node) = holder {
        taken = take_over_from(server, &landing, node, file_id, &wanted);
    }
    if matches!(taken, Err(NtStatus::OBJECT_NAME_NOT_FOUND)) {
        // A persistent open taken over from a dead node: its record names the node keeping it.
        taken = match super::ca::keeper(server, file_id)? {
            Some(node) if Some(node) != holder => {
                take_over_from(server, &landing, node, file_id, &wanted)
            }
            _ => Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        };
    }
    if matches!(taken, Err(NtStatus::OBJECT_NAME_NOT_FOUND))
        && super::takeback::take_back(server, file_id, &wanted, r.now_ms)
    {
        // Its record names this node, and no node held it: kept here again, and moved now.
        taken = match crate::durable::take_matching(&server.files, file_id, &wanted) {
            Ok(p) => move_kept(server, &landing, p, &wanted),
            Err(s) => Err(s),
        };
    }
    if matches!(taken, Err(NtStatus::OBJECT_NAME_NOT_FOUND))
        && super::ca::still_kept(&server.node, file_id, &wanted)
    {
        // Between nodes, not gone (issue 33): the client tries again.
        tracing::debug!(
            persistent = file_id.persistent,
            ?holder,
            "a reconnect waits: its open's record is still there, no node gave the open up"
        );
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    if let Err(s) = &taken {
        tracing::debug!(
            persistent = file_id.persistent,
            ?holder,
            ?s,
            "a reconnect refused"
        );
    }
    taken
}

/// A reconnect on this node of an open it kept parked, of a file homed on another node: the
/// open as it rejoins (its route here changed to the reconnect's connection already), and the
/// home's move that routes its breaks there too (same id), asked before the CREATE is answered
/// (a break the home sent meanwhile to the parked open would close it).
pub struct Rejoining {
    pub open: TakenOver,
    pub key: FileKey,
    pub entry: Arc<Mutex<FileEntry>>,
    pub moved: Moved,
}

/// What a job does.
enum Job {
    /// Take an open kept elsewhere over (or move one kept here after a failed move).
    Take(Reconnecting),
    /// Tell the home of a reconnected open's file its new connection.
    Rejoin(Rejoining),
}

/// Where a takeover job is.
enum State {
    /// Not yet carried.
    Ready(Box<Job>),
    /// Being carried.
    Running,
    /// Carried: the open taken over, or why not (boxed: an open is large).
    Done(Box<Result<TakenOver, NtStatus>>),
    /// Its CREATE will not go on: an open the job takes over is parked.
    Abandoned,
}

/// A takeover carried away from the I/O thread ([`to_ask`]), as its CREATE holds it.
pub struct Takeover {
    state: Arc<Mutex<State>>,
    server: Arc<ServerState>,
    now_ms: u64,
    /// The open keeps the id its client knows ([`Rejoining`]): parked again, never closed, when
    /// its CREATE will not answer with it.
    same_id: bool,
}

/// The takeover of `r` as a job a home-call thread carries ([`take_over`], counted as a call
/// to the node its open's id names: a stopped node's reconnects hold at most that node's share
/// of the threads), and the slot its CREATE takes the result from.
pub fn to_ask(server: &Arc<ServerState>, r: Reconnecting) -> (HomeAsk, Takeover) {
    let node = super::node_of(r.file_id.volatile);
    let now_ms = r.now_ms;
    job_ask(server, Job::Take(r), (node, 0), now_ms)
}

/// [`Rejoining`] as a job a home-call thread carries: the home's move (`home`, the file's home
/// as this node sees it), in order with this node's other calls about the file, and the slot
/// its CREATE takes the open from.
pub fn rejoin_ask(
    server: &Arc<ServerState>,
    r: Rejoining,
    home: u16,
    now_ms: u64,
) -> (HomeAsk, Takeover) {
    let order = super::order_of(r.key);
    job_ask(server, Job::Rejoin(r), (home, order), now_ms)
}

fn job_ask(
    server: &Arc<ServerState>,
    job: Job,
    (node, order): (u16, u64),
    now_ms: u64,
) -> (HomeAsk, Takeover) {
    let same_id = matches!(job, Job::Rejoin(_));
    let state = Arc::new(Mutex::new(State::Ready(Box::new(job))));
    let run = {
        let (server, state) = (Arc::clone(server), Arc::clone(&state));
        Box::new(move || {
            carry(&server, &state, now_ms);
            Ok(Vec::new())
        })
    };
    let ask = HomeAsk::job(node, order, run);
    let takeover = Takeover {
        state,
        server: Arc::clone(server),
        now_ms,
        same_id,
    };
    (ask, takeover)
}

/// Carry the job of `state` (once): its result is left for its CREATE, or, when the CREATE
/// went meanwhile, the open taken over is parked here.
fn carry(server: &Arc<ServerState>, state: &Mutex<State>, now_ms: u64) {
    let job = {
        let mut s = lock(state);
        match std::mem::replace(&mut *s, State::Running) {
            State::Ready(r) => r,
            other => {
                *s = other;
                return;
            }
        }
    };
    let (taken, same_id) = match *job {
        Job::Take(mut r) => match r.kept.take() {
            Some(p) => (move_kept(server, &r.landing(), p, &r.wanted()), false),
            None => (take_over(server, &r), false),
        },
        Job::Rejoin(r) => {
            if let Err(s) = transfer(server, r.key, &r.entry, r.moved) {
                tracing::warn!(
                    ?s,
                    "the home of a reconnected durable open's file did not learn its new connection"
                );
            }
            (Ok(r.open), true)
        }
    };
    let mut s = lock(state);
    if matches!(*s, State::Abandoned) {
        drop(s);
        if let Ok(t) = taken {
            for ask in keep_for_later(server, t, now_ms, same_id) {
                // This thread may wait: what the park asks is asked here.
                LookupRequest { id: 0, ask }.run();
            }
        }
        return;
    }
    *s = State::Done(Box::new(taken));
}

impl Takeover {
    /// The job's result, for its CREATE that runs on: the open taken over, or why not
    /// (FILE_NOT_AVAILABLE, try again, if it was not carried: what it held is let go as
    /// [`Takeover::abandon`] does, and the questions that asks are returned with it).
    pub fn taken(&self) -> (Result<TakenOver, NtStatus>, Vec<Lookup>) {
        let done = std::mem::replace(&mut *lock(&self.state), State::Abandoned);
        match done {
            State::Done(r) => (*r, Vec::new()),
            other => {
                tracing::warn!("a reconnect's takeover was answered before it was carried");
                let asks = let_go(&self.server, other, self.now_ms, self.same_id);
                (Err(NtStatus::FILE_NOT_AVAILABLE), asks)
            }
        }
    }

    /// Its CREATE will not go on: an open taken over already is parked here for a later
    /// reconnect, or closed ([`keep_for_later`]; what that asks of the cluster is returned, to
    /// be asked away from the I/O thread); one not yet is let go so by the job's thread when it
    /// is; an open kept here after a failed move that the job had yet to move goes back to the
    /// parked ones.
    #[must_use = "the park's questions to the cluster are to be asked"]
    pub fn abandon(self) -> Vec<Lookup> {
        let done = std::mem::replace(&mut *lock(&self.state), State::Abandoned);
        let_go(&self.server, done, self.now_ms, self.same_id)
    }

    /// An open taken over whose CREATE cannot answer with it (its session ended meanwhile):
    /// parked here for a later reconnect, or closed, as [`Takeover::abandon`] does.
    #[must_use = "the park's questions to the cluster are to be asked"]
    pub fn keep(self, t: TakenOver) -> Vec<Lookup> {
        keep_for_later(&self.server, t, self.now_ms, self.same_id)
    }
}

/// What a takeover job whose CREATE will not go on holds goes ([`Takeover::abandon`]).
fn let_go(server: &Arc<ServerState>, state: State, now_ms: u64, same_id: bool) -> Vec<Lookup> {
    match state {
        State::Done(r) => match *r {
            Ok(t) => keep_for_later(server, t, now_ms, same_id),
            Err(_) => Vec::new(),
        },
        State::Ready(job) => match *job {
            // Not moved yet: parked again as it was (still kept after its failed move).
            Job::Take(Reconnecting { kept: Some(p), .. }) => {
                let evicted = lock(&server.files.durables).park(p);
                evicted.map_or_else(Vec::new, |old| crate::opens::close_posted(server, old.open))
            }
            Job::Take(_) => Vec::new(),
            // Its home not told yet: parked again (its home still has it disconnected).
            Job::Rejoin(r) => keep_for_later(server, r.open, now_ms, true),
        },
        State::Running | State::Abandoned => Vec::new(),
    }
}

/// Open `t`, taken over for a CREATE that will not answer with it (`same_id`: one parked here
/// that rejoins, under the id its client knows, which is parked again): a persistent open is parked
/// on this node as a disconnected durable open (its connection's end would have left it so):
/// its record names this node, so a later reconnect finds it through any node by its FileId's
/// persistent part. Any other durable open is closed (at its file's home too: what that asks is
/// returned): its client knows it by the FileId the keeper gave it, which no node answers to
/// any more (the open has this node's id now), so parked it would only wait for its timeout.
pub fn keep_for_later(
    server: &Arc<ServerState>,
    t: TakenOver,
    now_ms: u64,
    same_id: bool,
) -> Vec<Lookup> {
    let open = Arc::new(t.open);
    let persistent = lock(&open.state)
        .durable
        .as_ref()
        .is_some_and(|d| d.persistent);
    if !persistent && !same_id {
        tracing::info!(
            id = open.id,
            "a durable open taken over for a reconnect that went is closed"
        );
        return crate::opens::close_posted(server, open);
    }
    tracing::info!(
        id = open.id,
        "a persistent open taken over for a reconnect that went is kept for the next one"
    );
    crate::durable::park_or_close_all(server, vec![open], now_ms)
}
