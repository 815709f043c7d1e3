//! The CREATE's side of durable opens ([MS-SMB2] 3.3.5.9.6, 3.3.5.9.7, 3.3.5.9.10,
//! 3.3.5.9.12): the durable-handle contexts a CREATE carries, whether a new open becomes
//! durable, a reconnect (DHnC, DH2C) that gives a parked open back (here or taken over from
//! another node), and a replayed DH2Q. The table of parked opens is [`crate::durable`].

use std::sync::Arc;

pub(crate) use crate::durable::{owner_of, Durability, Owner, Reconnect};
use crate::durable::{take_matching, Kind, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS};
use crate::files::oplock::Route;
use crate::server::{lock, ServerState};
use crate::state::Open;

/// What a CREATE asks about durability, from its contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    None,
    /// DHnQ.
    V1,
    /// DH2Q.
    V2 {
        timeout_ms: u64,
        persistent: bool,
        create_guid: [u8; 16],
    },
    /// DHnC: reconnect the open with this FileId.
    ReconnectV1 {
        file_id: ringshare_wire::FileId,
    },
    /// DH2C.
    ReconnectV2 {
        file_id: ringshare_wire::FileId,
        create_guid: [u8; 16],
    },
}

impl Ask {
    /// A DH2Q's CreateGuid (the key of its replay's pending state).
    pub(crate) fn create_guid(&self) -> Option<[u8; 16]> {
        match self {
            Ask::V2 { create_guid, .. } => Some(*create_guid),
            _ => None,
        }
    }
}

/// DH2Q's persistent flag ([MS-SMB2] 2.2.13.2.11).
const DHANDLE_FLAG_PERSISTENT: u32 = 0x2;

/// Read the durable-handle contexts of a CREATE ([MS-SMB2] 3.3.5.9: a
/// version 2 context beside a version 1 one is INVALID_PARAMETER, as is a
/// context of the wrong size; DHnQ beside DHnC is ignored, 3.3.5.9.7).
/// Version 2 contexts count from SMB 3.0 on, version 1 from 2.0.2.
pub(crate) fn ask(
    cr: &ringshare_wire::create::CreateRequest<'_>,
    dialect: u16,
) -> Result<Ask, ringshare_wire::NtStatus> {
    use ringshare_wire::create::{
        decode_durable_reconnect, ContextTag, DurableHandleReconnectV2, DurableHandleRequestV2,
    };
    use ringshare_wire::NtStatus;
    let v1q = cr.context(ContextTag::DurableHandleRequest);
    let v1c = cr.context(ContextTag::DurableHandleReconnect);
    let (v2q, v2c) = if dialect >= 0x0300 {
        (
            cr.context(ContextTag::DurableHandleRequestV2),
            cr.context(ContextTag::DurableHandleReconnectV2),
        )
    } else {
        (None, None)
    };
    if (v2q.is_some() || v2c.is_some()) && (v1q.is_some() || v1c.is_some()) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if v2q.is_some() && v2c.is_some() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if let Some(c) = v2c {
        if c.data.len() != 36 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let r =
            DurableHandleReconnectV2::decode(&c.data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        return Ok(Ask::ReconnectV2 {
            file_id: r.file_id,
            create_guid: r.create_guid,
        });
    }
    if let Some(c) = v2q {
        if c.data.len() != 32 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let r = DurableHandleRequestV2::decode(&c.data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        return Ok(Ask::V2 {
            timeout_ms: u64::from(r.timeout),
            persistent: r.flags & DHANDLE_FLAG_PERSISTENT != 0,
            create_guid: r.create_guid,
        });
    }
    if let Some(c) = v1c {
        if c.data.len() != 16 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let file_id = decode_durable_reconnect(&c.data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        return Ok(Ask::ReconnectV1 { file_id });
    }
    if let Some(c) = v1q {
        if c.data.len() != 16 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        return Ok(Ask::V1);
    }
    Ok(Ask::None)
}

/// Whether a new open becomes durable, and the response context that says
/// so ([MS-SMB2] 3.3.5.9.6, 3.3.5.9.10): only with a batch oplock or a lease
/// that caches handles, never on a share with `durable handles = no`; on a
/// continuously available share (`ca`: and the connection has
/// SMB2_GLOBAL_CAP_PERSISTENT_HANDLES) a DH2Q asking for a persistent
/// handle gets one whatever it caches (3.3.5.9.10; smbtorture's
/// persistent-open-oplock expects it with every oplock level too).
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide(
    ask: Ask,
    v1_timeout_ms: u64,
    oplock_level: u8,
    lease_state: u32,
    allowed: bool,
    ca: bool,
    owner: Owner,
    client_guid: [u8; 16],
) -> Option<(Durability, ringshare_wire::create::CreateContext<'static>)> {
    use ringshare_wire::create::{tag, CreateContext, DurableHandleRequestV2};
    let caches_handles = oplock_level == crate::files::oplock::LEVEL_BATCH
        || (oplock_level == crate::files::oplock::LEVEL_LEASE
            && lease_state & ringshare_wire::consts::LeaseState::HANDLE_CACHING.0 != 0);
    let persistent = ca
        && matches!(
            ask,
            Ask::V2 {
                persistent: true,
                ..
            }
        );
    if !allowed || !(caches_handles || persistent) {
        return None;
    }
    match ask {
        Ask::V1 => Some((
            Durability {
                kind: Kind::V1,
                timeout_ms: v1_timeout_ms,
                create_guid: [0; 16],
                client_guid,
                owner,
                persistent: false,
            },
            CreateContext::new(tag::DURABLE_HANDLE_REQUEST, vec![0; 8]),
        )),
        Ask::V2 {
            timeout_ms,
            create_guid,
            ..
        } => {
            let timeout_ms = match timeout_ms {
                0 => DEFAULT_TIMEOUT_MS,
                t => t.min(MAX_TIMEOUT_MS),
            };
            Some((
                Durability {
                    kind: Kind::V2,
                    timeout_ms,
                    create_guid,
                    client_guid,
                    owner,
                    persistent,
                },
                CreateContext::new(
                    tag::DURABLE_HANDLE_REQUEST_V2,
                    DurableHandleRequestV2::response(
                        timeout_ms as u32,
                        if persistent {
                            DHANDLE_FLAG_PERSISTENT
                        } else {
                            0
                        },
                    ),
                ),
            ))
        }
        _ => None,
    }
}

/// DHnC / DH2C ([MS-SMB2] 3.3.5.9.7, 3.3.5.9.12): give a parked open back to
/// its client on this connection, under the same FileId. The name, access,
/// dispositions and options of the request do not matter (only, for an
/// open with a lease, the name and the lease key). Anything that does not
/// match gets OBJECT_NAME_NOT_FOUND and learns nothing, except another user
/// (ACCESS_DENIED) and a lease key that matches on another name
/// (INVALID_PARAMETER), as Windows and Samba answer.
///
/// On a cluster node, an open not parked here (kept by another node, or a persistent open
/// taken over from a dead one), and one kept here after its move failed, are taken over away
/// from the I/O thread (issue 33): Err([`super::PARKED`]) with the job in `parked`
/// ([`reconnect_elsewhere`]); the CREATE goes on in [`taken_over`]. `parked` `None` (a replay
/// of a parked open's CREATE, [`replay_parked`]): only an open parked here, in place.
pub(crate) fn reconnect(
    core: &mut crate::exchange::ConnCore,
    req: &crate::exchange::Req<'_>,
    cr: &ringshare_wire::create::CreateRequest<'_>,
    ask: Ask,
    parking: Parking<'_>,
) -> Result<crate::exchange::Reply, ringshare_wire::NtStatus> {
    use ringshare_wire::NtStatus;
    let (slot, replaying) = match parking {
        Parking::Fresh(slot) => (slot, None),
        Parking::Replay(slot, create_guid) => {
            (slot, Some((super::PendingCreate::new(req, 0), create_guid)))
        }
    };
    let fresh = replaying.is_none();

    let (file_id, create_guid) = match ask {
        Ask::ReconnectV1 { file_id } => (file_id, None),
        Ask::ReconnectV2 {
            file_id,
            create_guid,
        } => (file_id, Some(create_guid)),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    let server = core.server.clone();
    let sref = core.session_or_deleted(req.session_id)?;
    let (share_name, owner) = reconnect_tree(&sref, req.tree_id)?;
    let dialect = core.dialect().map_or(0, |d| d.0);
    let client_guid = core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid);
    let lease_key = requested_lease_key(cr, dialect)?;
    let name = cr.name.strip_suffix("::$DATA").unwrap_or(&cr.name);
    let wanted = Reconnect {
        create_guid,
        lease_key,
        client_guid,
        name,
        share: &share_name,
        owner: &owner,
    };
    let parked = match take_matching(&server.files, file_id, &wanted) {
        Ok(p) => p,
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) if fresh => {
            return reconnect_elsewhere(core, req, &sref, (file_id, &wanted, None), slot)
        }
        Err(s) => return Err(s),
    };
    if crate::cluster::handover::unmoved(&server.node, &parked) {
        // Kept here after its move to this node failed: moved now (or kept again), away from
        // the I/O thread when the request can park.
        if fresh {
            let kept = (file_id, &wanted, Some(parked));
            return reconnect_elsewhere(core, req, &sref, kept, slot);
        }
        let landing = landing_of(core, req, &sref);
        let t = crate::cluster::handover::move_kept(&server, &landing, parked, &wanted)?;
        let keeping = Keeping::Here { same_id: false };
        return finish(core, (req.session_id, &sref), t, keeping, (slot, replaying));
    }
    let old = parked.open;
    let route = Route {
        conn_id: core.conn_id,
        session_id: req.session_id,
    };
    let (caching, lease) = reroute(&old, route);
    let home = home_to_tell(&server, &old, route);
    let open = rejoined(&old, req, parked.durability);
    drop(old);
    let lease_key = lease_key.and(caching.lease.map(|l| l.key));
    // (A persistent open taken over from a dead node has a new volatile id.)
    let file_id_asked = file_id;
    let file_id = ringshare_wire::FileId {
        persistent: file_id.persistent,
        volatile: open.id,
    };
    let t = crate::cluster::handover::TakenOver {
        open,
        level: caching.level,
        lease,
        lease_key,
        file_id,
    };
    if let Some((node, key, entry, moved)) = home {
        // The file's home learns the new connection before the CREATE is answered: away from
        // the I/O thread when the request can park.
        if fresh && node != 0 {
            let r = crate::cluster::takeover::Rejoining {
                open: t,
                key,
                entry,
                moved,
            };
            let job = crate::cluster::takeover::rejoin_ask(&server, r, node, core.now.mono_ms);
            return park_takeover(req, &sref, job, slot);
        }
        if let Err(s) = crate::cluster::handover::transfer(&server, key, &entry, moved) {
            tracing::warn!(
                ?s,
                "the home of a reconnected durable open's file did not learn its new connection"
            );
        }
    }
    let keeping = Keeping::Here {
        same_id: t.file_id.volatile == file_id_asked.volatile,
    };
    finish(core, (req.session_id, &sref), t, keeping, (slot, replaying))
}

/// Where a reconnect ([`reconnect`]) may park, and why it runs.
pub(crate) enum Parking<'p> {
    /// A CREATE with a DHnC or DH2C: its open may be taken over from another node away from
    /// the I/O thread, and its file's attributes read in a job ([`finish`]).
    Fresh(&'p mut Option<super::Parked>),
    /// The replay of the CREATE (CreateGuid) of a persistent open parked here
    /// ([`replay_parked`]): only an open parked here, in place; the replay is answered once
    /// it joined the session.
    Replay(&'p mut Option<super::Parked>, [u8; 16]),
}

/// The reconnect's tree: a disk share's name and the session's owner, when the session has
/// room for another open and a user.
fn reconnect_tree(
    sref: &crate::state::SessionRef,
    tree_id: u32,
) -> Result<(String, Owner), ringshare_wire::NtStatus> {
    use ringshare_wire::NtStatus;
    let session = lock(sref);
    let tree = session
        .trees
        .get(&tree_id)
        .ok_or(NtStatus::NETWORK_NAME_DELETED)?;
    let crate::state::TreeKind::Disk(share) = &tree.kind else {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    };
    if session.opens.len() >= crate::limits::OPENS_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    if session.account.is_none() {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    Ok((share.name.clone(), owner_of(&session)))
}

/// The lease key a reconnect names (SMB 2.1 and later), or INVALID_PARAMETER for a lease
/// context that does not decode.
fn requested_lease_key(
    cr: &ringshare_wire::create::CreateRequest<'_>,
    dialect: u16,
) -> Result<Option<[u8; 16]>, ringshare_wire::NtStatus> {
    use ringshare_wire::create::ContextTag;
    if dialect < 0x0210 {
        return Ok(None);
    }
    Ok(cr
        .context(ContextTag::RequestLease)
        .map(|c| ringshare_wire::create::Lease::decode(&c.data))
        .transpose()
        .map_err(|_| ringshare_wire::NtStatus::INVALID_PARAMETER)?
        .map(|l| l.key))
}

/// Where a durable open taken over from another node (or moved here) lands: this request's
/// session, tree and connection.
fn landing_of<'a>(
    core: &crate::exchange::ConnCore,
    req: &crate::exchange::Req<'_>,
    sref: &'a crate::state::SessionRef,
) -> crate::cluster::handover::Landing<'a> {
    crate::cluster::handover::Landing {
        sref,
        tree_id: req.tree_id,
        route: Route {
            conn_id: core.conn_id,
            session_id: req.session_id,
        },
        channel_sequence: req.hdr.channel_sequence(),
        now_ms: core.now.mono_ms,
    }
}

/// An open not parked here: kept by another node of the cluster (the volatile id says which),
/// which hands it over, or a persistent open taken over from a dead node, whose record names
/// the node keeping it; else OBJECT_NAME_NOT_FOUND (at once on a server that is no cluster
/// node). With `kept`, an open this node keeps after its move failed, moved now. The takeover
/// is one job carried away from the I/O thread ([`crate::cluster::takeover`]): the CREATE
/// parks (Err([`super::PARKED`]), the job in `parked`) and goes on in [`taken_over`].
fn reconnect_elsewhere(
    core: &mut crate::exchange::ConnCore,
    req: &crate::exchange::Req<'_>,
    sref: &crate::state::SessionRef,
    (file_id, wanted, kept): (
        ringshare_wire::FileId,
        &Reconnect<'_>,
        Option<crate::durable::Parked>,
    ),
    parked: &mut Option<super::Parked>,
) -> Result<crate::exchange::Reply, ringshare_wire::NtStatus> {
    if core.server.node.link().is_none() {
        return Err(ringshare_wire::NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let landing = landing_of(core, req, sref);
    let r = crate::cluster::takeover::Reconnecting {
        file_id,
        create_guid: wanted.create_guid,
        lease_key: wanted.lease_key,
        client_guid: wanted.client_guid,
        name: wanted.name.to_string(),
        share: wanted.share.to_string(),
        owner: wanted.owner.clone(),
        sref: Arc::clone(sref),
        tree_id: landing.tree_id,
        route: landing.route,
        channel_sequence: landing.channel_sequence,
        now_ms: landing.now_ms,
        kept,
    };
    let job = crate::cluster::takeover::to_ask(&core.server, r);
    park_takeover(req, sref, job, parked)
}

/// The reconnect parks on `job` (carried away from the I/O thread), and goes on in
/// [`taken_over`].
fn park_takeover(
    req: &crate::exchange::Req<'_>,
    sref: &crate::state::SessionRef,
    (ask, takeover): (crate::lookup::HomeAsk, crate::cluster::takeover::Takeover),
    parked: &mut Option<super::Parked>,
) -> Result<crate::exchange::Reply, ringshare_wire::NtStatus> {
    let fin = TakingOver {
        session_id: req.session_id,
        sref: Arc::clone(sref),
        takeover,
    };
    *parked = Some((
        crate::lookup::Lookup::Home(ask),
        crate::cmd::LookupCont::Takeover(Box::new(fin)),
    ));
    Err(super::PARKED)
}

/// A reconnect parked while its open is taken over away from the I/O thread
/// ([`reconnect_elsewhere`]): its session, and the takeover's slot.
pub(crate) struct TakingOver {
    session_id: u64,
    sref: crate::state::SessionRef,
    takeover: crate::cluster::takeover::Takeover,
}

/// The takeover of a parked reconnect was carried: the open joins the session and the CREATE
/// is answered with it, or with why not (FILE_NOT_AVAILABLE while the open is between nodes).
/// A session that ended meanwhile (a LOGOFF) gets no open: a persistent one stays parked here
/// for a later reconnect, another closes ([`crate::cluster::takeover`]).
pub(crate) fn taken_over(
    core: &mut crate::exchange::ConnCore,
    fin: TakingOver,
) -> Result<crate::cmd::Handled, ringshare_wire::NtStatus> {
    let (taken, asks) = fin.takeover.taken();
    core.post_closes(asks);
    let t = taken?;
    if lock(&fin.sref).closed {
        let asks = fin.takeover.keep(t);
        core.post_closes(asks);
        return Err(ringshare_wire::NtStatus::USER_SESSION_DELETED);
    }
    let mut parked = None;
    let keeping = Keeping::Takeover(fin.takeover);
    let ids = (fin.session_id, &fin.sref);
    let r = finish(core, ids, t, keeping, (&mut parked, None)).map(Some);
    super::handled(r, parked)
}

/// A parked reconnect will not go on (its connection went): the persistent open its takeover
/// brings is parked here for a later reconnect, another closes ([`crate::cluster::takeover`]).
pub(crate) fn abandon_takeover(core: &mut crate::exchange::ConnCore, fin: TakingOver) {
    let asks = fin.takeover.abandon();
    core.post_closes(asks);
}

/// The parked open's oplock or lease now breaks to `route` (this connection), here.
fn reroute(
    old: &Open,
    route: Route,
) -> (
    crate::files::oplock::Caching,
    Option<crate::files::oplock::Grant>,
) {
    let mut e = lock(&old.entry);
    let mut caching = crate::files::oplock::Caching::default();
    for s in e.opens.iter_mut().filter(|s| s.owner == old.id) {
        s.caching.route = route;
        caching = s.caching;
    }
    let lease = caching.lease.and_then(|id| {
        let l = e.leases.iter_mut().find(|l| l.id == id)?;
        l.route = route;
        Some(crate::files::oplock::Grant::of_lease(l))
    });
    (caching, lease)
}

/// For a file homed on another node: the home (0: none known now) and what tells it that the
/// parked open's breaks go to `route` now (the file, its entry here, the move), which the
/// CREATE waits for ([`crate::cluster::takeover::Rejoining`]).
#[allow(clippy::type_complexity)]
fn home_to_tell(
    server: &ServerState,
    old: &Open,
    route: Route,
) -> Option<(
    u16,
    crate::server::FileKey,
    Arc<std::sync::Mutex<crate::server::FileEntry>>,
    crate::cluster::handover::Moved,
)> {
    use crate::cluster::Home;
    if !crate::cluster::handover::homed_elsewhere(&server.node, old.key) {
        return None;
    }
    let node = match server.node.home_of(old.key) {
        Home::Node(n) => n,
        // No home to call (partitions moving): `transfer` says so at once, in place.
        Home::Here | Home::Unavailable => 0,
    };
    let moved = crate::cluster::handover::Moved {
        from: old.id,
        to: old.id,
        route,
        who: Some(old.who.clone()),
    };
    Some((node, old.key, Arc::clone(&old.entry), moved))
}

/// The parked open again, on the request's tree, with its state kept (a new channel sequence,
/// no directory cursor or watch).
fn rejoined(old: &Open, req: &crate::exchange::Req<'_>, durability: Durability) -> Open {
    let state = {
        let s = lock(&old.state);
        crate::state::OpenState {
            path: s.path.clone(),
            delete_on_close: s.delete_on_close,
            position: s.position,
            mode: s.mode,
            channel_sequence: req.hdr.channel_sequence(),
            durable: Some(durability),
            create_guid: s.create_guid,
            create_action: s.create_action,
            replay_eligible: s.create_guid.is_some(),
            lock_sequences: s.lock_sequences.clone(),
            // (the same descriptor: its POSIX locks stay)
            posix_locks: s.posix_locks.clone(),
            watch: None,
            notify_on_close: s.notify_on_close,
            kernel_marked_ms: 0,
            compress_skip: 0,
            compress_misses: 0,
            posix_rename: s.posix_rename,
        }
    };
    Open {
        id: old.id,
        who: Arc::clone(&old.who),
        persistent_id: old.persistent_id,
        tree_id: req.tree_id,
        node: Arc::clone(&old.node),
        key: old.key,
        entry: Arc::clone(&old.entry),
        is_dir: old.is_dir,
        access: old.access,
        share_access: old.share_access,
        create_options: old.create_options,
        share: Arc::clone(&old.share),
        state: std::sync::Mutex::new(state),
        dir_cursor: std::sync::Mutex::new(None),
        // Streams are never made durable.
        stream: None,
        posix: old.posix,
    }
}

/// A reconnected open (here or handed over from another node) joins the session once its
/// file's attributes are read ([`join`]): on a share whose calls may wait on a network in a
/// file system job, the CREATE parked meanwhile (Err([`super::PARKED`]), the job in `slot`;
/// it goes on in [`statted`]; issue 33: on CephFS a dead node's capabilities can hold the
/// getattr until its eviction); elsewhere at once. `keeping`: how the open is kept if the
/// CREATE does not go on while the job is out ([`Statting::abandon`]); `replaying`: the
/// replay of a parked open's CREATE (its request, and the CreateGuid) answered once it joined.
pub(crate) fn finish(
    core: &mut crate::exchange::ConnCore,
    (session_id, sref): (u64, &crate::state::SessionRef),
    taken: crate::cluster::handover::TakenOver,
    keeping: Keeping,
    (slot, replaying): (&mut Option<super::Parked>, Option<Replayed>),
) -> Result<crate::exchange::Reply, ringshare_wire::NtStatus> {
    if taken.open.share.offloaded() {
        let job = stat_job(&taken.open);
        let fin = Joining {
            session_id,
            sref: Arc::clone(sref),
            taken,
            keeping,
            replaying,
        };
        let cont = Statting::Join(Box::new(fin));
        *slot = Some((
            crate::lookup::Lookup::Fs(job),
            crate::cmd::LookupCont::Stat(Box::new(cont)),
        ));
        return Err(super::PARKED);
    }
    let attr = taken.open.node.stat().map_err(crate::fsmap::status_of);
    join(core, (session_id, sref), (taken, keeping), attr)
}

/// The request and CreateGuid of a replayed CREATE whose parked open is reconnected first
/// ([`Parking::Replay`]).
pub(crate) type Replayed = (super::PendingCreate, [u8; 16]);

/// How an open reconnected for a CREATE that will not go on is kept (its connection went while
/// its attributes were read).
pub(crate) enum Keeping {
    /// As the takeover that brought it from another node keeps it.
    Takeover(crate::cluster::takeover::Takeover),
    /// One parked here (`same_id`: under the id its client knows): parked again, or closed,
    /// as a takeover's would be.
    Here { same_id: bool },
}

/// A durable reconnect or a replayed CREATE parked while its open's attributes are read in a
/// file system job ([`stat_job`]); it goes on in [`statted`].
pub(crate) enum Statting {
    /// A reconnected open, which joins its session ([`join`]).
    Join(Box<Joining>),
    /// A replayed CREATE answered from its open ([`replay`]).
    Replay(Box<Replaying>),
}

/// A reconnected open waiting for its attributes ([`finish`]).
pub(crate) struct Joining {
    session_id: u64,
    sref: crate::state::SessionRef,
    taken: crate::cluster::handover::TakenOver,
    keeping: Keeping,
    replaying: Option<Replayed>,
}

/// A replayed CREATE's answer ([`replay`]), but for the open's attributes.
pub(crate) struct Replaying {
    level: u8,
    action: u32,
    file_id: ringshare_wire::FileId,
    contexts: Vec<ringshare_wire::create::CreateContext<'static>>,
}

impl Replaying {
    /// The answer, with the open's attributes `attr`.
    fn reply(self, attr: &ringshare_vfs::FileAttr) -> crate::exchange::Reply {
        use ringshare_wire::consts::CreateAction;
        let f = self.file_id;
        let body = crate::cmd::create::response_body(
            attr,
            self.level,
            CreateAction(self.action),
            f,
            self.contexts,
        );
        let mut r = crate::exchange::Reply::ok(body);
        r.file_id = Some((f.persistent, f.volatile));
        r
    }
}

impl Statting {
    /// Its CREATE will not go on (its connection went): a reconnected open is kept as
    /// [`Keeping`] says (what that asks of the cluster is posted).
    pub(crate) fn abandon(self, core: &mut crate::exchange::ConnCore) {
        let Statting::Join(j) = self else {
            return;
        };
        let Joining { taken, keeping, .. } = *j;
        keep(core, taken, keeping);
    }
}

/// A reconnected open that will not join its session is kept as `keeping` says (parked again,
/// or closed: what that asks of the cluster is posted).
fn keep(
    core: &mut crate::exchange::ConnCore,
    taken: crate::cluster::handover::TakenOver,
    keeping: Keeping,
) {
    let asks = match keeping {
        Keeping::Takeover(takeover) => takeover.keep(taken),
        Keeping::Here { same_id } => {
            let now_ms = core.now.mono_ms;
            crate::cluster::takeover::keep_for_later(&core.server, taken, now_ms, same_id)
        }
    };
    core.post_closes(asks);
}

/// The job that reads `open`'s file's attributes, as its user, in its order.
fn stat_job(open: &Open) -> crate::fsjob::FsJob {
    let (who, order, share) = crate::cmd::job_of_open(open);
    let node = Arc::clone(&open.node);
    let what = "the attributes of a reconnected or replayed open";
    crate::fsjob::FsJob::answer_made(who, order, share, what, move || {
        let attr = node.stat().map_err(crate::fsmap::status_of);
        crate::fsjob::Carried::new(attr, false)
    })
}

/// The attributes [`stat_job`] read are in: the reconnected open joins its session (and a
/// replay of a parked open's CREATE is answered, [`replay`], which may park again for its
/// own), or a replayed CREATE is answered.
pub(crate) fn statted(
    core: &mut crate::exchange::ConnCore,
    fin: Statting,
    done: crate::lookup::LookupDone,
) -> Result<crate::cmd::Handled, ringshare_wire::NtStatus> {
    use crate::cmd::Handled;
    let attr = crate::cmd::job_result::<ringshare_vfs::FileAttr>(done);
    let j = match fin {
        Statting::Replay(r) => return attr.map(|a| Handled::Reply(r.reply(&a))),
        Statting::Join(j) => *j,
    };
    let Joining {
        session_id,
        sref,
        taken,
        keeping,
        replaying,
    } = j;
    let joined = join(core, (session_id, &sref), (taken, keeping), attr)?;
    let Some((request, create_guid)) = replaying else {
        return Ok(Handled::Reply(joined));
    };
    let req = request.req(session_id);
    let cr = ringshare_wire::create::CreateRequest::decode(req.msg).map_err(|e| e.status())?;
    let mut parked = None;
    let r = replay(core, &req, &cr, create_guid, true, &mut parked);
    super::handled(r, parked)
}

/// A reconnected open joins the session, its file's attributes `attr` read: the CREATE
/// answer, with the lease when the reconnect named one. An open whose file cannot be read back
/// is closed (what that close asks of the cluster, a persistent open's record removed or the
/// close at a file's home, is posted, away from the I/O thread); one whose session ended
/// meanwhile (a LOGOFF while the attributes were read) is kept as `keeping` says, as the
/// session's end would have kept it (the review of session 50).
fn join(
    core: &mut crate::exchange::ConnCore,
    (session_id, sref): (u64, &crate::state::SessionRef),
    (taken, keeping): (crate::cluster::handover::TakenOver, Keeping),
    attr: Result<ringshare_vfs::FileAttr, ringshare_wire::NtStatus>,
) -> Result<crate::exchange::Reply, ringshare_wire::NtStatus> {
    use ringshare_wire::consts::CreateAction;
    use ringshare_wire::NtStatus;
    let attr = match attr {
        Ok(a) => a,
        Err(s) => {
            let asks = crate::opens::close_posted(&core.server, Arc::new(taken.open));
            core.post_closes(asks);
            return Err(s);
        }
    };
    let mut contexts = Vec::new();
    if let (Some(g), Some(key)) = (&taken.lease, taken.lease_key) {
        contexts.push(crate::cmd::create::lease_context(key, g));
    }
    let (level, file_id) = (taken.level, taken.file_id);
    let body =
        crate::cmd::create::response_body(&attr, level, CreateAction::OPENED, file_id, contexts);
    let mut session = lock(sref);
    if session.closed {
        drop(session);
        keep(core, taken, keeping);
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    let open = taken.open;
    let server = &core.server;
    tracing::debug!(id = open.id, "durable open reconnected");
    let create_guid = lock(&open.state).create_guid;
    if let Some(g) = create_guid {
        lock(&server.files.durables).remember(g, session_id, open.id);
    }
    session.opens.insert(open.id, Arc::new(open));
    let mut r = crate::exchange::Reply::ok(body);
    r.file_id = Some((file_id.persistent, file_id.volatile));
    Ok(r)
}

/// A CREATE with a DH2Q whose CreateGuid names an open of this session
/// ([MS-SMB2] 3.3.5.9.10): with REPLAY_OPERATION set, the answer the
/// original CREATE got, from the open as it is (the oplock level the replay
/// asks for, as Windows and Samba answer; the DH2Q response when the open
/// is durable and that level could have made it so); without the flag,
/// DUPLICATE_OBJECTID. `None`: no such open, an ordinary CREATE follows. On a share whose
/// calls may wait on a network the open's attributes are read in a file system job, the
/// CREATE parked meanwhile (Err([`super::PARKED`]), the job in `parked`; [`statted`]).
pub(crate) fn replay(
    core: &mut crate::exchange::ConnCore,
    req: &crate::exchange::Req<'_>,
    cr: &ringshare_wire::create::CreateRequest<'_>,
    create_guid: [u8; 16],
    retry: bool,
    parked: &mut Option<super::Parked>,
) -> Result<Option<crate::exchange::Reply>, ringshare_wire::NtStatus> {
    use ringshare_wire::create::{tag, ContextTag, CreateContext, DurableHandleRequestV2};
    use ringshare_wire::NtStatus;

    let server = core.server.clone();
    let client_guid = core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid);
    // The CREATE it replays is still waiting for breaks: not yet (Samba's
    // answer; Windows says ACCESS_DENIED).
    if req.hdr.is_replay()
        && !retry
        && lock(&server.files.durables).waits(&(client_guid, create_guid), core.now.mono_ms)
    {
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    let live = lock(&server.files.durables).created(&(client_guid, create_guid));
    let Some((session_id, open)) = live.and_then(|(session_id, open_id)| {
        server
            .sessions
            .find(session_id)
            .and_then(|s| lock(&s).opens.get(&open_id).cloned())
            .map(|o| (session_id, o))
    }) else {
        return replay_parked(core, req, cr, (client_guid, create_guid), parked);
    };
    if !req.hdr.is_replay() || session_id != req.session_id {
        return Err(NtStatus::DUPLICATE_OBJECTID);
    }
    let requested = cr.requested_oplock_level.0;
    let caching = {
        let e = lock(&open.entry);
        let c = e
            .opens
            .iter()
            .find(|s| s.owner == open.id)
            .map(|s| s.caching)
            .unwrap_or_default();
        let lease = c.lease.and_then(|id| {
            e.leases
                .iter()
                .find(|l| l.id == id)
                .map(crate::files::oplock::Grant::of_lease)
        });
        (c, lease)
    };
    let (c, lease) = caching;
    // A replay with a lease must name the open's lease.
    let lease_key = cr
        .context(ContextTag::RequestLease)
        .map(|x| ringshare_wire::create::Lease::decode(&x.data))
        .transpose()
        .map_err(|_| NtStatus::INVALID_PARAMETER)?
        .map(|l| l.key);
    if requested == crate::files::oplock::LEVEL_LEASE
        && (lease.is_none() || c.lease.map(|l| l.key) != lease_key)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (durability, action) = {
        let st = lock(&open.state);
        (st.durable.clone(), st.create_action)
    };
    let mut contexts = Vec::new();
    if let (crate::files::oplock::LEVEL_LEASE, Some(g), Some(key)) = (requested, &lease, lease_key)
    {
        contexts.push(crate::cmd::create::lease_context(key, g));
    }
    if let Some(d) = durability.filter(|_| {
        requested == crate::files::oplock::LEVEL_BATCH
            || requested == crate::files::oplock::LEVEL_LEASE
    }) {
        let flags = if d.persistent {
            DHANDLE_FLAG_PERSISTENT
        } else {
            0
        };
        contexts.push(CreateContext::new(
            tag::DURABLE_HANDLE_REQUEST_V2,
            DurableHandleRequestV2::response(d.timeout_ms as u32, flags),
        ));
    }
    let answer = Replaying {
        level: requested,
        action,
        file_id: ringshare_wire::FileId {
            persistent: open.persistent_id,
            volatile: open.id,
        },
        contexts,
    };
    tracing::debug!(id = open.id, "replayed CREATE answered from its open");
    if open.share.offloaded() {
        let job = stat_job(&open);
        let cont = Statting::Replay(Box::new(answer));
        *parked = Some((
            crate::lookup::Lookup::Fs(job),
            crate::cmd::LookupCont::Stat(Box::new(cont)),
        ));
        return Err(super::PARKED);
    }
    let attr = open.node.stat().map_err(crate::fsmap::status_of)?;
    Ok(Some(answer.reply(&attr)))
}

/// A persistent open parked since its client's connection went stays
/// eligible for replay (Open.IsReplayEligible: [MS-SMB2] 3.3.5.9.10; only a
/// non-persistent open loses it): a CREATE with a DH2Q naming its
/// (ClientGuid, CreateGuid) without REPLAY_OPERATION gets
/// DUPLICATE_OBJECTID; with it, the open comes back to this session as a
/// DH2C would bring it (the same checks) and is answered as the original
/// CREATE was. `None`: no such open.
fn replay_parked(
    core: &mut crate::exchange::ConnCore,
    req: &crate::exchange::Req<'_>,
    cr: &ringshare_wire::create::CreateRequest<'_>,
    (client_guid, create_guid): ([u8; 16], [u8; 16]),
    parked: &mut Option<super::Parked>,
) -> Result<Option<crate::exchange::Reply>, ringshare_wire::NtStatus> {
    let file_id = lock(&core.server.files.durables)
        .replayable(&(client_guid, create_guid))
        .map(|p| ringshare_wire::FileId {
            persistent: p.open.persistent_id,
            volatile: p.open.id,
        });
    let Some(file_id) = file_id else {
        return Ok(None);
    };
    if !req.hdr.is_replay() {
        return Err(ringshare_wire::NtStatus::DUPLICATE_OBJECTID);
    }
    let ask = Ask::ReconnectV2 {
        file_id,
        create_guid,
    };
    // Parked while its attributes are read: answered as a replay once it joined ([`statted`]).
    reconnect(core, req, cr, ask, Parking::Replay(parked, create_guid))?;
    // Now an open of this session: answered as a replay of its CREATE.
    replay(core, req, cr, create_guid, true, parked)
}
