//! [MS-SMB2] 3.3.5.9 Receiving an SMB2 CREATE Request, with the open
//! semantics of [MS-FSA] 2.1.5.1 (share access, delete-on-close, read-only
//! files).
//!
//! [`create_or_wait`] runs the steps of 3.3.5.9 in order, each a function of
//! its own in a submodule:
//!
//! 1. durable reconnect and replay ([`reconnect_or_replay`]: 3.3.5.9.7,
//!    3.3.5.9.10, 3.3.5.9.12), then the session and tree ([`tree_of`]);
//! 2. a snapshot's file (Previous Versions) is opened on a read-only view of
//!    the snapshot ([`snapshot`]); the request's fields, name, stream and
//!    contexts ([`request`]);
//! 3. the name resolved (exact, then case-insensitively per component) and
//!    what the disposition does with it ([`target`]);
//! 4. open or create on the backend, *without* truncating ([`open`]), then
//!    the access check ([`rights`]) and the named stream, if any ([`stream`]);
//! 5. admission through the file's share-mode entry: delete-pending, share
//!    modes, oplocks and leases ([`admission`]);
//! 6. only then truncate (OVERWRITE/SUPERSEDE), attributes, allocation,
//!    security and EAs ([`change`]), so a refused open never changes the file;
//! 7. the answer and its contexts, and the open put in its session
//!    ([`answer`]).
//!
//! Oplocks and leases are granted and broken by [`crate::files::oplock`]: an open
//! that must wait for another client to acknowledge a break is answered
//! later ([`Handled::WaitForBreaks`]; the connection retries it, [`retry`], and the retry
//! parks on its questions to the file's home and the cluster's store as a fresh CREATE does).

use std::sync::Arc;

use ringshare_vfs::{FileAttr, RelPath, Who};
use ringshare_wire::consts::{CreateAction, FileAttributes, LeaseFlags, LeaseState, OplockLevel};
use ringshare_wire::create::{CreateContext, CreateRequest, CreateResponse};
use ringshare_wire::security::Sid;
use ringshare_wire::{FileId, NtStatus};

use crate::cmd::{Handled, LookupCont, Polled};
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo;
use crate::files::oplock;
use crate::limits;
use crate::server::{lock, ServerState, ShareDef};
use crate::state::{SessionRef, TreeKind};

mod admission;
mod answer;
pub(crate) use answer::{abandon, resume, Installing};
mod change;
mod granted;
pub(crate) use granted::{in_response as granted_in_response, Granted};
pub(crate) mod durable;
mod offload;
pub(crate) use offload::let_go_unused;
mod open;
mod request;
mod rights;
mod snapshot;
mod stream;
mod target;

/// CREATE: its reply, or [`Handled::WaitForBreaks`] while other clients
/// have yet to acknowledge the breaks it caused.
pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    if core.create_waits == Some(req.hdr.message_id) {
        // Its file's home said so while it was parked ([`admitted`]).
        core.create_waits = None;
        return Ok(Handled::WaitForBreaks);
    }
    create_parking(core, req, false)
}

/// [`create`], its result as the connection takes it: the file's home is asked, or a
/// persistent open's record stored, away from the I/O thread ([`Handled::Lookup`]).
fn create_parking(core: &mut ConnCore, req: &Req<'_>, retry: bool) -> Result<Handled, NtStatus> {
    let mut parked = None;
    let r = create(core, req, retry, &mut parked);
    // A CREATE that waits for a local lease keeps its wait's start while it waits, and while
    // a try asks its file system job ([`offload`]: the try's outcome comes when it runs again).
    let waits = matches!(r, Ok(None) | Err(crate::cmd::ids::ASK_IDS));
    if !core.lease_waits.is_empty() && !waits {
        let id = req.hdr.message_id;
        core.lease_waits.retain(|(m, _)| *m != id);
    }
    handled(r, parked)
}

/// Never on the wire: the CREATE waits for a question asked away from the I/O thread (its
/// file's home's admission, or its persistent open's record) ([`Parked`]; [`super::handle`]
/// parks it).
pub(crate) const PARKED: NtStatus = NtStatus(0xE1D5_0002);

/// Never on the wire: the backend's open met a local program's kernel lease on the file
/// ([`ringshare_vfs::FsError::LeaseHeld`]), or admission a rename of the named stream being
/// made by a job (cmd/set_info/stream_move.rs); the CREATE waits for it ([`lease_wait`]).
pub(crate) const LEASE_HELD: NtStatus = NtStatus(0xE1D5_0003);

/// How long a CREATE waits for a local program to give up its kernel lease before it is
/// answered SHARING_VIOLATION: Samba 4.22's bound (twice its 35 s oplock break timeout, from
/// the request's arrival). The kernel itself takes the lease away after
/// `/proc/sys/fs/lease-break-time` (45 s by default), so the wait normally ends before.
pub(crate) const LEASE_WAIT_MS: u64 = 70_000;

/// CREATEs of one connection that wait for local leases at once, at most; past it a CREATE
/// that meets one is answered SHARING_VIOLATION at once.
const LEASE_WAITS_MAX: usize = 64;

/// The open met a local program's kernel lease (the non-blocking open failed with
/// EWOULDBLOCK and the kernel told the holder to give it up): as Samba does, the CREATE waits
/// and is run again every second ([`oplock::BREAK_RETRY_MS`], as one waiting for breaks: the
/// open is never made blocking on the I/O thread), other requests served meanwhile, until the
/// open goes through or [`LEASE_WAIT_MS`] has passed since it first met the lease
/// (SHARING_VIOLATION then).
fn lease_wait(core: &mut ConnCore, req: &Req<'_>) -> Result<Option<Reply>, NtStatus> {
    let (now, id) = (core.now.mono_ms, req.hdr.message_id);
    let since = match core.lease_waits.iter().find(|(m, _)| *m == id) {
        Some(&(_, since)) => since,
        None => {
            // (entries of requests that went without an answer here, e.g. cancelled)
            core.lease_waits
                .retain(|(_, since)| now.saturating_sub(*since) < LEASE_WAIT_MS);
            if core.lease_waits.len() >= LEASE_WAITS_MAX {
                return Err(NtStatus::SHARING_VIOLATION);
            }
            core.lease_waits.push((id, now));
            now
        }
    };
    if now.saturating_sub(since) >= LEASE_WAIT_MS {
        core.lease_waits.retain(|(m, _)| *m != id);
        return Err(NtStatus::SHARING_VIOLATION);
    }
    Ok(None)
}

/// The question a CREATE waits for and how it goes on with the answer.
pub(crate) type Parked = (crate::lookup::Lookup, crate::cmd::LookupCont);

/// A CREATE's outcome as the connection takes it: answered, waiting for breaks, or parked on
/// the question in `parked` ([`PARKED`]).
fn handled(
    r: Result<Option<Reply>, NtStatus>,
    parked: Option<Parked>,
) -> Result<Handled, NtStatus> {
    match r {
        Ok(Some(reply)) => Ok(Handled::Reply(reply)),
        Ok(None) => Ok(Handled::WaitForBreaks),
        Err(PARKED) => match parked {
            Some((ask, cont)) => Ok(Handled::lookup(ask, cont)),
            None => Err(NtStatus::INTERNAL_ERROR),
        },
        Err(s) => Err(s),
    }
}

/// A CREATE parked while its file's home decides whether the open may join the file's
/// entry (a file homed on another node; [`admission::Joining`]): the request as it came, what
/// it opened and asked, and the open on its way in. It goes on in [`admitted`].
pub(crate) struct AtHome {
    request: PendingCreate,
    session_id: u64,
    opening: Opening,
    joining: admission::Joining,
}

/// What a CREATE keeps for its steps after admission ([`go_on`]).
struct Opening {
    sref: SessionRef,
    tree: TreeView,
    owner: durable::Owner,
    quota_file: bool,
    asked: request::Asked,
    /// The path as stored.
    path: RelPath,
    /// A new file's changes, made in its file system job ([`offload`]).
    changed: Option<change::Changed>,
    /// A POSIX open's reparse buffer of a file that existed, read in its job ([`offload`]).
    reparse: Option<Option<Vec<u8>>>,
    /// Its file system calls are made in jobs ([`offload`]): an overwrite is one too.
    in_job: bool,
}

/// The file's home answered a parked CREATE (`done`): it goes on as it would have with the
/// answer at hand (answered; waiting for breaks, [`Handled::WaitForBreaks`]; or parked again,
/// for its persistent open's record).
pub(crate) fn admitted(
    core: &mut ConnCore,
    fin: Box<AtHome>,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    // Taken boxed, as it was parked (over a kilobyte): its parts leave the box one by one.
    let AtHome {
        request,
        session_id,
        opening,
        joining,
    } = *fin;
    let req = request.req(session_id);
    let server = core.server.clone();
    let at = At {
        server: &server,
        tree: &opening.tree,
        path: &opening.path,
    };
    // Opened in a file system job: not let go on the I/O thread when it is refused.
    let keep = opening.tree.share.offloaded().then(|| joining.nodes());
    let adm = joining.answered(&at, &opening.asked, done.home());
    if let (Some(node), false) = (keep, matches!(adm, Ok(Some(_)))) {
        offload::let_go(core, &opening.tree, node);
    }
    let dh2q = opening.asked.durable.create_guid();
    let mut parked = None;
    let r = match adm {
        Ok(Some(adm)) => match CreateRequest::decode(req.msg) {
            Ok(cr) => go_on(core, &req, &cr, opening, adm, &mut parked),
            Err(e) => Err(e.status()),
        },
        Ok(None) => Ok(None),
        Err(s) => Err(s),
    };
    if let Some(create_guid) = dh2q {
        pending(core, create_guid, matches!(r, Ok(None) | Err(PARKED)));
    }
    handled(r, parked)
}

/// A parked CREATE whose connection went (or that was cancelled or logged off): the open on
/// its way in leaves, and a DH2Q replay is no longer told that it is pending.
pub(crate) fn abandon_admission(core: &mut ConnCore, fin: AtHome) {
    if let Some(create_guid) = fin.opening.asked.durable.create_guid() {
        pending(core, create_guid, false);
    }
    // Opened in a file system job: let go on the pool, not here.
    let keep = fin
        .opening
        .tree
        .share
        .offloaded()
        .then(|| fin.joining.nodes());
    fin.joining.abandon(&core.server);
    if let Some(node) = keep {
        offload::let_go(core, &fin.opening.tree, node);
    }
}

/// Whether a replay of DH2Q CREATE `create_guid` is told that it is pending
/// ([`durable::replay`]): while it waits for breaks or for a question asked away from the
/// I/O thread.
fn pending(core: &ConnCore, create_guid: [u8; 16], waits: bool) {
    let guids = (client_guid(core), create_guid);
    lock(&core.server.files.durables).set_pending(guids, waits, core.now.mono_ms);
}

/// A CREATE (or a SET_INFO rename) gone async while breaks it caused are
/// acknowledged: the request as it came, asked again until it no longer waits.
pub(crate) struct PendingCreate {
    pub hdr: ringshare_wire::header::Header,
    pub msg: Vec<u8>,
    pub tree_id: u32,
    pub related_file_id: Option<(u64, u64)>,
    pub encrypted: bool,
    pub retry_at_ms: u64,
    /// Run again, it asked something away from the I/O thread ([`Polled::Ask`]): how it goes
    /// on with the answer (boxed: rare, and large), and the lookup's id once asked.
    asking: Option<Box<LookupCont>>,
    asked: Option<u64>,
}

impl PendingCreate {
    pub fn new(req: &Req<'_>, now_ms: u64) -> PendingCreate {
        PendingCreate {
            hdr: req.hdr.clone(),
            msg: req.msg.to_vec(),
            tree_id: req.tree_id,
            related_file_id: req.related_file_id,
            encrypted: req.encrypted,
            retry_at_ms: now_ms + oplock::BREAK_RETRY_MS,
            asking: None,
            asked: None,
        }
    }

    /// When to try it again: not while its question is out.
    pub fn deadline_ms(&self) -> Option<u64> {
        self.asking.is_none().then_some(self.retry_at_ms)
    }

    /// Its question went out as lookup `id`.
    pub fn asked(&mut self, id: u64) {
        if self.asking.is_some() {
            self.asked = Some(id);
        }
    }

    /// Whether it waits for the answer to lookup `id`.
    pub fn asks(&self, id: u64) -> bool {
        self.asking.is_some() && self.asked == Some(id)
    }

    /// A CANCEL came: true when the CREATE ends with its answer instead (its open is made and
    /// its record being stored, or its existing file's overwrite is under way in a file system
    /// job: it is past cancelling, as a completed request is; cancelled, the file was changed
    /// all the same and the open left the file's entry while the job ran; or it was refused
    /// and what it made is being removed: answered once it is gone).
    pub fn cancel_when_answered(&self) -> bool {
        matches!(
            self.asking.as_deref(),
            Some(LookupCont::Create(_) | LookupCont::Changed(_) | LookupCont::Undo(_))
        )
    }

    /// The request again, on session `session_id`.
    fn req(&self, session_id: u64) -> Req<'_> {
        Req {
            hdr: self.hdr.clone(),
            msg: &self.msg,
            msg_offset: 0,
            detached: None,
            session_id,
            tree_id: self.tree_id,
            related_file_id: self.related_file_id,
            sole: false,
            encrypted: self.encrypted,
        }
    }
}

/// Try a pending CREATE (or rename) again: done, waiting still, or asking its file's home or
/// the cluster's store away from the I/O thread (it goes on in [`answered`]).
pub(crate) fn poll(core: &mut ConnCore, session_id: u64, p: &mut PendingCreate) -> Polled {
    if p.asking.is_some() {
        // Its question is out: it goes on with the answer.
        return Polled::Wait;
    }
    let r = {
        let req = p.req(session_id);
        retry(core, &req)
    };
    went_on(core, p, r)
}

/// The answer to the question a pending CREATE (or rename) asked when run again is in: it goes
/// on as a fresh request parked on it would.
pub(crate) fn answered(
    core: &mut ConnCore,
    session_id: u64,
    p: &mut PendingCreate,
    done: crate::lookup::LookupDone,
) -> Polled {
    p.asked = None;
    let r = match p.asking.take().map(|b| *b) {
        Some(LookupCont::Admit(fin)) => admitted(core, fin, done),
        Some(LookupCont::Changed(fin)) => changed(core, *fin, done),
        Some(LookupCont::Create(fin)) => answer::resume(core, *fin, done).map(Handled::Reply),
        // A rename's job on a share whose calls may wait on a network (cmd/set_info/moves.rs).
        Some(LookupCont::SetInfo(fin)) => crate::cmd::set_info::changed(core, *fin, done),
        // A replay's (or reconnect's) open's attributes, read in a job.
        Some(LookupCont::Stat(fin)) => durable::statted(core, *fin, done),
        // Refused at admission, what it made removed in a job.
        Some(LookupCont::Undo(fin)) => undone(fin),
        Some(LookupCont::Again(asked)) => {
            core.domain_answer = Some(crate::cmd::answer_of(core, asked, done));
            let r = {
                let req = p.req(session_id);
                retry(core, &req)
            };
            // Taken by the request when it ran again; not kept for another.
            crate::cmd::drop_answer(core);
            r
        }
        Some(other) => {
            crate::cmd::abandon(core, other);
            Err(NtStatus::INTERNAL_ERROR)
        }
        None => return Polled::Wait,
    };
    went_on(core, p, r)
}

/// A pending CREATE (or rename) is cancelled, or its session or connection went: what its
/// question holds goes ([`crate::cmd::abandon`]).
pub(crate) fn cancel(core: &mut ConnCore, p: &mut PendingCreate) {
    p.asked = None;
    if let Some(cont) = p.asking.take() {
        crate::cmd::abandon(core, *cont);
    }
}

/// What running a pending CREATE (or rename) again came to, for its async operation.
fn went_on(core: &ConnCore, p: &mut PendingCreate, r: Result<Handled, NtStatus>) -> Polled {
    match r {
        Ok(Handled::Reply(reply)) => Polled::Done(Ok(reply)),
        Ok(Handled::WaitForBreaks) => {
            p.retry_at_ms = core.now.mono_ms + oplock::BREAK_RETRY_MS;
            Polled::Wait
        }
        Ok(Handled::Lookup(parked)) => {
            let crate::cmd::Parked { ask, cont } = *parked;
            p.asking = Some(Box::new(cont));
            Polled::Ask(ask)
        }
        Ok(_) => Polled::Done(Err(NtStatus::INTERNAL_ERROR)),
        Err(s) => Polled::Done(Err(s)),
    }
}

/// Run again a request that waited for break acknowledgments (a CREATE or a SET_INFO rename):
/// its reply, [`Handled::WaitForBreaks`] while it still waits, or [`Handled::Lookup`] when it
/// asks its file's home (its admission, a rename's questions) or the cluster's store (a
/// persistent open's record) away from the I/O thread, as a fresh request does.
pub(crate) fn retry(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    if req.hdr.command == ringshare_wire::consts::Command::SET_INFO {
        // Only a rename waits for breaks.
        let r = crate::cmd::set_info::handle(core, req);
        return crate::cmd::ids::parked(core, r);
    }
    // A CREATE run again asks its file system job as a fresh one does ([`offload`]).
    let r = create_parking(core, req, true);
    crate::cmd::ids::parked(core, r)
}

/// CREATE; `retry`: it waited for breaks before. `None`: it must wait (again). The file's
/// home (a file homed on another node) is asked and a persistent open's record stored away
/// from the I/O thread: Err([`PARKED`]) and `parked` holds the question and how the CREATE
/// goes on ([`admission::admit`], [`answer::install`]).
fn create(
    core: &mut ConnCore,
    req: &Req<'_>,
    retry: bool,
    parked: &mut Option<Parked>,
) -> Result<Option<Reply>, NtStatus> {
    let mut dh2q = None;
    let r = create_or_wait(core, req, retry, &mut dh2q, parked);
    if let Some(create_guid) = dh2q {
        // A replay of a DH2Q CREATE that waits for breaks is told so
        // ([`durable::replay`]) until this one is answered; a CREATE that asks a file system
        // job meanwhile (run again after the breaks) leaves it as it was.
        if !matches!(r, Err(e) if e == crate::cmd::ids::ASK_IDS) {
            pending(core, create_guid, matches!(r, Ok(None) | Err(PARKED)));
        }
    }
    r
}

/// Durable handles first ([MS-SMB2] 3.3.5.9.7, 3.3.5.9.12): a reconnect
/// (`ask`) looks at nothing else of the request and is answered here, as
/// is a replay of a DH2Q CREATE, from the open it made (3.3.5.9.10). `None`:
/// the CREATE goes on to open; `dh2q` then gets a DH2Q context's CreateGuid. A reconnect of
/// an open kept by another node parks while it is taken over (Err([`PARKED`]), the job in
/// `parked`: [`durable::reconnect`]).
fn reconnect_or_replay(
    core: &mut ConnCore,
    req: &Req<'_>,
    cr: &CreateRequest<'_>,
    ask: durable::Ask,
    retry: bool,
    (dh2q, parked): (&mut Option<[u8; 16]>, &mut Option<Parked>),
) -> Result<Option<Reply>, NtStatus> {
    if matches!(
        ask,
        durable::Ask::ReconnectV1 { .. } | durable::Ask::ReconnectV2 { .. }
    ) {
        let parking = durable::Parking::Fresh(parked);
        return durable::reconnect(core, req, cr, ask, parking).map(Some);
    }
    if let Some(create_guid) = ask.create_guid() {
        if let Some(r) = durable::replay(core, req, cr, create_guid, retry, parked)? {
            return Ok(Some(r));
        }
        *dh2q = Some(create_guid);
    }
    Ok(None)
}

/// What a CREATE takes from its session and tree, read under the session's
/// lock and released at once.
#[derive(Clone)]
struct TreeView {
    share: Arc<ShareDef>,
    read_only: bool,
    /// The tree's MaximalAccess.
    maximal: u32,
    who: Who,
    /// `admin users`: not held to a descriptor kept with the file.
    admin: bool,
    domain_sids: Arc<[Sid]>,
    authenticated: bool,
}

/// The session and tree the CREATE runs on ([MS-SMB2] 3.3.5.9 "Session
/// Verification", "Tree Connect Verification"; 3.3.5.2.9, 3.3.5.2.11), the
/// session's cap on open files, and who owns a durable open made on it.
fn tree_of(
    core: &ConnCore,
    req: &Req<'_>,
    ask: durable::Ask,
) -> Result<(SessionRef, TreeView, durable::Owner), NtStatus> {
    let sref = core.session_or_deleted(req.session_id)?;
    let session = lock(&sref);
    let tree = session
        .trees
        .get(&req.tree_id)
        .ok_or(NtStatus::NETWORK_NAME_DELETED)?;
    let share = match &tree.kind {
        TreeKind::Disk(s) => Arc::clone(s),
        // TODO: named pipes (srvsvc, wkssvc) on IPC$.
        TreeKind::Ipc => return Err(NtStatus::NOT_SUPPORTED),
    };
    let (read_only, maximal) = (tree.read_only, tree.maximal_access);
    if session.opens.len() >= limits::OPENS_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let view = TreeView {
        share,
        read_only,
        maximal,
        who: tree.who.clone(),
        admin: tree.admin,
        domain_sids: Arc::clone(&tree.sids),
        authenticated: !(session.is_guest || session.is_anonymous),
    };
    // Only a durable open keeps its owner: no copy of the user's name for the others.
    let owner = match ask {
        durable::Ask::None => durable::Owner {
            uid: u32::MAX,
            user: String::new(),
        },
        _ => durable::owner_of(&session),
    };
    drop(session);
    Ok((sref, view, owner))
}

/// `tree` on the view of its share's snapshot `token` ([`snapshot::view`]).
fn on_view(
    tree: TreeView,
    token: ringshare_wire::snapshot::GmtToken,
) -> Result<TreeView, NtStatus> {
    let share = snapshot::view(&tree, token)?;
    Ok(TreeView { share, ..tree })
}

/// Where a CREATE works once its name is resolved: the server, the tree and
/// the path as stored.
struct At<'a> {
    server: &'a ServerState,
    tree: &'a TreeView,
    path: &'a RelPath,
}

/// [`create`], step by step ([MS-SMB2] 3.3.5.9; the module's header lists
/// the steps); `dh2q` gets the CreateGuid of a DH2Q context (when the
/// request is not a reconnect or an answered replay).
fn create_or_wait(
    core: &mut ConnCore,
    req: &Req<'_>,
    retry: bool,
    dh2q: &mut Option<[u8; 16]>,
    parked: &mut Option<Parked>,
) -> Result<Option<Reply>, NtStatus> {
    let mut cr = CreateRequest::decode(req.msg).map_err(|e| e.status())?;
    let ask = durable::ask(&cr, core.dialect().map_or(0, |d| d.0))?;
    if let Some(r) = reconnect_or_replay(core, req, &cr, ask, retry, (dh2q, parked))? {
        return Ok(Some(r));
    }
    let server = core.server.clone();
    let (sref, tree, owner) = tree_of(core, req, ask)?;
    let quota_file = crate::cmd::quota::fake_file(&mut cr, tree.who.uid())?;
    let token = snapshot::token_of(&mut cr, &tree)?;
    let in_snapshot = token.is_some();
    // The snapshot's view is made here, or on a share whose calls may wait on a network (every
    // CREATE of which is a job: [`offload::applies`]) in the CREATE's job (below: `token` kept
    // for it). The view has the share's settings and file system, so the request is checked
    // alike against either.
    let (mut tree, token) = match token {
        Some(t) if !tree.share.offloaded() => (on_view(tree, t)?, None),
        t => (tree, t),
    };
    let asked = request::check(core, &cr, &tree, ask).map_err(|e| match e {
        // `@GMT-…\..\..`: above the snapshot's root, as Samba answers.
        NtStatus::OBJECT_PATH_SYNTAX_BAD if in_snapshot => NtStatus::OBJECT_PATH_NOT_FOUND,
        e => e,
    })?;
    if in_snapshot && asked.delete_on_close {
        // Nothing in a snapshot is deleted; Samba 4.22 refuses such an open so.
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    // On a share whose calls may wait on a network its file system part is made in a job,
    // the CREATE parked meanwhile; it runs again with what the job opened ([`offload`]).
    let offloaded = offload::applies(&tree);
    let job_ran = offloaded && offload::answered(core);
    // The id source answered the question a job asked (a new file's inherited domain SIDs),
    // unless a SecD context's check takes the answer as its own below (it asks first, as on
    // the I/O thread; what it asked is kept, so the job then asks only what is still unknown).
    let sd_checked = !retry && !job_ran && asked.sd_given.is_some();
    let ids_came = offloaded && !sd_checked && crate::cmd::ids::answer_here(core);
    if let (false, false, Some(sd)) = (retry, job_ran, &asked.sd_given) {
        // A SecD context's domain SIDs are placed before anything changes ([`crate::cmd::ids`]).
        // Also the SIDs of the creator's ids, the new file's owner and group.
        let creator = [
            crate::sidcache::Xid::Uid(tree.who.uid()),
            crate::sidcache::Xid::Gid(tree.who.gid()),
        ];
        crate::cmd::ids::before_set(core, sd, &creator)?;
    }
    let (path, node, made, changed) = if offloaded {
        if ids_came && crate::cmd::ids::took_failed_answer(core) {
            // As `ids::before_inherit` fails on the I/O thread.
            return Err(crate::cmd::ids::NO_ANSWER);
        }
        let Some(outcome) = offload::answer(core) else {
            let posted = offload::Posted::by(core, retry, 0, token, ids_came);
            let job = offload::job(server.clone(), tree.clone(), asked, posted);
            core.ids_wanted = Some(crate::lookup::Lookup::Fs(job));
            return Err(crate::cmd::ids::ASK_IDS);
        };
        let p = match outcome {
            Err(LEASE_HELD) => return lease_wait(core, req),
            r => r?,
        };
        if offload::stale(&server, (&tree, &asked), &p) {
            // A name moved while the job was out: it looks the name up again.
            let tries = p.tries + 1;
            let nodes = p.made.nodes(&p.node);
            drop(p);
            offload::let_go(core, &tree, nodes);
            let posted = offload::Posted::by(core, retry, tries, token, false);
            let job = offload::job(server.clone(), tree.clone(), asked, posted);
            core.ids_wanted = Some(crate::lookup::Lookup::Fs(job));
            return Err(crate::cmd::ids::ASK_IDS);
        }
        if !retry {
            if let Err(s) = admission::refused_before_open(&server, p.existing.as_ref()) {
                let nodes = p.made.nodes(&p.node);
                drop(p);
                offload::let_go(core, &tree, nodes);
                return Err(s);
            }
        }
        // The open is the snapshot's view's, made in the job.
        if let Some(share) = p.view {
            tree = TreeView { share, ..tree };
        }
        (p.path, p.node, p.made, (p.changed, p.reparse))
    } else {
        let (path, node, made) = match open_here(core, retry, &server, &tree, &asked) {
            Err(LEASE_HELD) => return lease_wait(core, req),
            r => r?,
        };
        (path, node, made, (None, None))
    };
    let (changed, reparse) = changed;
    let at = At {
        server: &server,
        tree: &tree,
        path: &path,
    };
    // A node the job opened is let go in a job too when the open is not kept.
    let keep = offloaded.then(|| made.nodes(&node));
    let (mut home, mut undo) = (None, None);
    let opened = (node, made);
    let admitted = admission::admit(core, req, retry, &at, &asked, opened, &mut home, &mut undo);
    if let (Some(node), Ok(None) | Err(_)) = (keep, &admitted) {
        if !matches!(admitted, Err(PARKED)) {
            offload::let_go(core, &tree, node);
        }
    }
    if let (Some(made), Err(status)) = (undo, &admitted) {
        // What it made goes in a job, before the refusal is heard.
        let dh2q = asked.durable.create_guid();
        let pending_until = dh2q.map(|g| (client_guid(core), g));
        let job = offload::undo_job(server.clone(), (tree, path), (made, pending_until));
        let fin = Undoing { status: *status };
        *parked = Some((crate::lookup::Lookup::Fs(job), LookupCont::Undo(fin)));
        return Err(PARKED);
    }
    let opening = Opening {
        sref,
        tree,
        owner,
        quota_file,
        asked,
        path,
        changed,
        reparse,
        in_job: offloaded,
    };
    let adm = match admitted {
        Ok(Some(adm)) => adm,
        Ok(None) => return Ok(None),
        // A stream of the file being renamed by a job: waits (bounded) as for a kernel lease.
        Err(LEASE_HELD) => return lease_wait(core, req),
        Err(PARKED) => {
            let Some((ask, joining)) = home else {
                return Err(NtStatus::INTERNAL_ERROR);
            };
            let fin = AtHome {
                request: PendingCreate::new(req, 0),
                session_id: req.session_id,
                opening,
                joining,
            };
            *parked = Some((ask, LookupCont::Admit(Box::new(fin))));
            return Err(PARKED);
        }
        Err(s) => return Err(s),
    };
    go_on(core, req, &cr, opening, adm, parked)
}

/// A CREATE refused at admission on a share whose calls may wait on a network, parked while a
/// file system job removes the file or stream it made ([`offload::undo_job`]): answered its
/// refusal once the job ran ([`undone`]), so a retry never finds the half-made file.
/// A replay of its DH2Q CREATE is told the CREATE is pending until the job ran, which then
/// lets it go on ([`offload::undo_job`]).
pub(crate) struct Undoing {
    status: NtStatus,
}

/// The undo's job ran ([`Undoing`]): the CREATE is answered its refusal.
pub(crate) fn undone(fin: Undoing) -> Result<Handled, NtStatus> {
    Err(fin.status)
}

/// Steps 3 and 4 on the I/O thread (a share whose calls are made here, or a CREATE
/// [`offload`] leaves here): the name resolved, the file opened or made, the access checked,
/// a named stream opened. Returns the path as stored, the open's node and what it made.
fn open_here(
    core: &mut ConnCore,
    retry: bool,
    server: &ServerState,
    tree: &TreeView,
    asked: &request::Asked,
) -> Result<(RelPath, Arc<dyn ringshare_vfs::Node>, stream::Made), NtStatus> {
    let mut target = target::resolve(server, tree, asked)?;
    let pre = target.opened.take();
    if !retry {
        admission::refused_before_open(server, target.existing.as_ref())?;
    }
    if !retry && target.create && !asked.dacl_given() && tree.share.nt_acl_xattr {
        // The domain SIDs the new file inherits are placed before it is made.
        crate::cmd::ids::before_inherit(core, &tree.share, &tree.who, &target.path)?;
    }
    let at = At {
        server,
        tree,
        path: &target.path,
    };
    // A local program's kernel lease: Err(LEASE_HELD), the CREATE waits ([`lease_wait`]).
    let opened = open::open(&at, asked, &target, pre)?;
    let rights = rights::check(&at, core.now, asked, &opened, target.granted)?;
    open::refuse_nonempty_dir(asked, &opened)?;
    let aapl_on = core.aapl.negotiated;
    let (node, made) = stream::open_named(&at, aapl_on, asked, opened, rights)?;
    Ok((target.path, node, made))
}

/// Steps 6 and 7 of an open that holds its place in its file's entry: the file changed as
/// asked ([`change`]; an overwrite on a share whose calls may wait on a network in a file
/// system job, the CREATE parked meanwhile: [`changed`]), the answer, and the open put in its
/// session ([`answer`]).
fn go_on(
    core: &mut ConnCore,
    req: &Req<'_>,
    cr: &CreateRequest<'_>,
    mut o: Opening,
    adm: admission::Admitted,
    parked: &mut Option<Parked>,
) -> Result<Option<Reply>, NtStatus> {
    let server = core.server.clone();
    let changed = match o.changed.take() {
        Some(changed) => changed,
        None if o.in_job && o.asked.truncate => {
            let opened = (Arc::clone(&adm.node), adm.made.clone());
            let (tree, path) = (o.tree.clone(), o.path.clone());
            let stage = Arc::new(offload::Overwriting::default());
            let when = (core.now, Arc::clone(&stage));
            let job = offload::overwrite_job(server, (tree, path), o.asked.clone(), opened, when);
            let fin = Changing {
                request: PendingCreate::new(req, 0),
                session_id: req.session_id,
                opening: o,
                adm,
                stage,
            };
            let cont = LookupCont::Changed(Box::new(fin));
            *parked = Some((crate::lookup::Lookup::Fs(job), cont));
            return Err(PARKED);
        }
        None => {
            let at = At {
                server: &server,
                tree: &o.tree,
                path: &o.path,
            };
            let mut changed = change::apply(&at, core.now, &o.asked, &adm)?;
            // An existing file's, opened without change, read in its job.
            changed.reparse = o.reparse.take();
            changed
        }
    };
    answer_open(core, req, cr, o, adm, changed, parked)
}

/// Step 7 once the file is changed (`changed`): the answer, and the open put in its session.
fn answer_open(
    core: &mut ConnCore,
    req: &Req<'_>,
    cr: &CreateRequest<'_>,
    o: Opening,
    adm: admission::Admitted,
    changed: change::Changed,
    parked: &mut Option<Parked>,
) -> Result<Option<Reply>, NtStatus> {
    let server = core.server.clone();
    let mut asked = o.asked;
    let at = At {
        server: &server,
        tree: &o.tree,
        path: &o.path,
    };
    let (body, settled) = answer::response(core, cr, &at, &mut asked, &adm, changed, o.owner);
    let report = answer::report(&at, &adm, asked.truncate, core.now.mono_ms);
    let open = answer::new_open(core, req, o.tree, &asked, o.path, adm, settled);
    let fin = answer::Installing {
        sref: o.sref,
        session_id: req.session_id,
        open,
        ask: asked.durable,
        report,
        body,
        quota_file: o.quota_file,
    };
    answer::install(core, fin, parked)
}

/// A CREATE parked while its existing file is overwritten in a file system job ([`go_on`]):
/// the request as it came, what it opened and asked, and the open that holds its place in the
/// file's entry. It goes on in [`changed`].
pub(crate) struct Changing {
    request: PendingCreate,
    session_id: u64,
    opening: Opening,
    adm: admission::Admitted,
    /// Where the job stands: an open abandoned while it is out leaves when it ends.
    stage: Arc<offload::Overwriting>,
}

/// The overwrite's job answered (`done`): the CREATE is answered (or parks again, for its
/// persistent open's record); an overwrite that failed leaves the file's entry (here) and its
/// node is let go on the pool, the CREATE answered with the failure.
pub(crate) fn changed(
    core: &mut ConnCore,
    fin: Changing,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    let Changing {
        request,
        session_id,
        opening,
        adm,
        ..
    } = fin;
    let req = request.req(session_id);
    let dh2q = opening.asked.durable.create_guid();
    let mut parked = None;
    let r = match crate::cmd::job_result::<change::Changed>(done) {
        Ok(changed) => match CreateRequest::decode(req.msg) {
            Ok(cr) => answer_open(core, &req, &cr, opening, adm, changed, &mut parked),
            Err(e) => Err(leave_after_change(core, &opening, adm, e.status())),
        },
        Err(s) => Err(leave_after_change(core, &opening, adm, s)),
    };
    if let Some(create_guid) = dh2q {
        pending(core, create_guid, matches!(r, Err(PARKED)));
    }
    handled(r, parked)
}

/// A CREATE parked on its overwrite's job will not go on (a LOGOFF, its connection's end):
/// the open leaves the file's entry once the job ended (the job does it when it is still out:
/// [`offload::Overwriting`]), its node let go on the pool.
pub(crate) fn abandon_change(core: &mut ConnCore, fin: Changing) {
    let Changing {
        opening,
        adm,
        stage,
        ..
    } = fin;
    if let Some(create_guid) = opening.asked.durable.create_guid() {
        pending(core, create_guid, false);
    }
    let leaving = offload::Leaving {
        server: core.server.clone(),
        tree: opening.tree.clone(),
        path: opening.path.clone(),
        adm,
    };
    if let Some(l) = stage.abandoned(leaving) {
        leave_after_change(core, &opening, l.adm, NtStatus::CANCELLED);
    }
}

/// The open `adm` leaves its file's entry after its overwrite failed (`s`, returned) or will
/// not be answered; its node goes on the pool ([`offload::let_go`]).
fn leave_after_change(
    core: &mut ConnCore,
    o: &Opening,
    adm: admission::Admitted,
    s: NtStatus,
) -> NtStatus {
    let server = core.server.clone();
    let at = At {
        server: &server,
        tree: &o.tree,
        path: &o.path,
    };
    let s = adm.leave(&at, s);
    let nodes = adm.made.nodes(&adm.node);
    drop(adm);
    offload::let_go(core, &o.tree, nodes);
    s
}

/// The ClientGuid the connection negotiated (zeros before NEGOTIATE).
fn client_guid(core: &ConnCore) -> [u8; 16] {
    core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid)
}

/// The RqLs response context of lease `key` as `g` describes it.
pub(crate) fn lease_context(key: [u8; 16], g: &oplock::Grant) -> CreateContext<'static> {
    let mut flags = 0;
    if g.lease_breaking {
        flags |= LeaseFlags::BREAK_IN_PROGRESS.0;
    }
    if g.parent_key.is_some() {
        flags |= LeaseFlags::PARENT_LEASE_KEY_SET.0;
    }
    let l = ringshare_wire::create::Lease {
        key,
        state: LeaseState(g.lease_state),
        flags: LeaseFlags(flags),
        duration: 0,
        v2: g.v2.then_some(ringshare_wire::create::LeaseV2 {
            parent_key: g.parent_key.unwrap_or([0; 16]),
            epoch: g.epoch,
        }),
    };
    CreateContext::new(ringshare_wire::create::tag::REQUEST_LEASE, l.encode())
}

/// The file id a client of this connection sees for `attr`: 0 once it
/// negotiated AAPL on a share with `fruit:zero_file_id` (as Samba, so macOS
/// uses its own ids), else the file's.
pub(crate) fn file_id_shown(core: &ConnCore, share: &ShareDef, attr: &FileAttr) -> u64 {
    if crate::fruit::zero_ids(&core.aapl, share) {
        0
    } else {
        fileinfo::file_id(attr)
    }
}

/// A CREATE response body for an open of a file with attributes `attr`.
pub(crate) fn response_body(
    attr: &ringshare_vfs::FileAttr,
    oplock_level: u8,
    action: CreateAction,
    file_id: FileId,
    contexts: Vec<CreateContext<'_>>,
) -> Vec<u8> {
    let [c, la, lw, ch] = fileinfo::times(attr);
    let (eof, alloc) = fileinfo::sizes(attr);
    let resp = CreateResponse {
        oplock_level: OplockLevel(oplock_level),
        flags: 0,
        create_action: action,
        creation_time: c.0,
        last_access_time: la.0,
        last_write_time: lw.0,
        change_time: ch.0,
        allocation_size: alloc,
        end_of_file: eof,
        file_attributes: FileAttributes(fileinfo::attributes(attr)),
        file_id,
        contexts,
    };
    // The encoder places its offsets after a header in front of the body: room for one, taken
    // off in place (one allocation, no copy into a second vector).
    let mut body = Vec::with_capacity(64 + resp.body_len_max());
    body.resize(64, 0);
    resp.encode(&mut body);
    body.drain(..64);
    body
}
