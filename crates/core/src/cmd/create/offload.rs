//! CREATE on a share whose calls may wait on a network (issue 33, step 5: FUSE, CephFS, NFS;
//! [`crate::config::ShareDef::offloaded`]). What CREATE asks of the file system (the name's
//! walk and case-insensitive search, the open or creation, the stat, the DOS attributes, the
//! access check against a descriptor kept with the file, and for a new file what it is given
//! at its creation: attributes, allocation, owner, inherited or given NT ACL, EAs) is made in
//! one file system job ([`job`]), the CREATE parked meanwhile; it runs again with what the job
//! opened ([`answer`]) and decides on the I/O thread, as before, what uses the server's shared
//! state: the cluster's refusal of a stopped home's file, admission (share modes, leases and
//! oplocks, at the file's home when it is another node's), durable handles, the answer and the
//! open put in its session.
//!
//! A named stream's CREATE (session 49) is made so too: the file's walk and open (or creation)
//! and the stream's open or creation in it, on a `fruit` share its AFP streams (a `._` file
//! taken in, the resource fork in its AppleDouble file, an AfpInfo kept in Netatalk metadata);
//! and a POSIX open's (its exact name, its mode, a symlink or special file opened itself), the
//! reparse buffer its answer shows read in the job ([`super::change::Changed::reparse`]).
//!
//! A new file that inherits its parent's NT ACL on an `acl_xattr` share of a server with an id
//! source and a domain: the job reads the parent's descriptor and, when its inheritable ACEs
//! name domain SIDs the id source was not asked about, answers those ([`Answered`]) without
//! making the file; the CREATE asks the id source (on the I/O thread's side, as it did before
//! the file was made there: `ids::before_inherit`) and runs again, its second job making the
//! file without asking. An existing file's (or stream's) overwrite or supersede is a second
//! job, after admission ([`overwrite_job`]: a refused open never changes the file).

use std::sync::Arc;

use ringshare_vfs::{FileAttr, Node, RelPath};
use ringshare_wire::security::Sid;
use ringshare_wire::snapshot::GmtToken;
use ringshare_wire::NtStatus;

use super::admission::{self, Admitted};
use super::change::Changed;
use super::request::Asked;
use super::stream::Made;
use super::{change, open, rights, stream, target, At, TreeView};
use crate::exchange::ConnCore;
use crate::fsjob::{Carried, FsDone, FsJob};
use crate::io::Now;
use crate::lookup::DomainAnswer;
use crate::server::{lock, ServerState, ShareDef};

/// What the job opened, for the CREATE to go on with on the I/O thread.
pub(super) struct Prepared {
    /// The path as stored.
    pub path: RelPath,
    /// The file's attributes when it existed before.
    pub existing: Option<FileAttr>,
    pub node: Arc<dyn Node>,
    pub made: Made,
    /// A new file's changes, made in the job ([`change::apply_to`]); `None` for a file that
    /// existed (its changes wait for admission).
    pub changed: Option<Changed>,
    /// The count of name changes made through this node to the CREATE's path and the
    /// directories above it when the job began ([`stale`]), and how many times the CREATE's
    /// job ran before this one for that reason.
    pub names_seen: u64,
    pub tries: u8,
    /// The view of the snapshot the CREATE names ([`Posted::snapshot`]), made in the job: the
    /// share the open is on.
    pub view: Option<Arc<ShareDef>>,
    /// A POSIX open's stored reparse buffer for a file that existed ([`reparse_of`]), read in
    /// the job; a new file's is in `changed`.
    pub reparse: Option<Option<Vec<u8>>>,
}

/// How many times a CREATE's job runs again because names moved while it was out ([`stale`]):
/// under a storm of renames it goes on with the name it found after that (as on the I/O
/// thread, where the window is a few microseconds and other threads' renames can still fall
/// into it).
const STALE_TRIES: u8 = 2;

/// Whether what job answer `p` found for an existing file may be found under a name it left: a
/// rename or removal of its path or a directory above it was made through this node since the
/// job began, and it has not run again too often. Its open would join a new entry under the
/// old name, and a delete on close of it would remove what is now at that name (the review of
/// step 5, 1d; the review of session 46, finding 3). A file the job made is nobody else's yet.
pub(super) fn stale(
    server: &ServerState,
    (tree, asked): (&TreeView, &Asked),
    p: &Prepared,
) -> bool {
    p.existing.is_some()
        && !p.made.created
        && p.tries < STALE_TRIES
        && server.files.names_seen(&tree.share.name, &asked.path) != p.names_seen
}

/// What the job answers: the open, or the status the CREATE fails with.
type Outcome = Result<Prepared, NtStatus>;

/// Whether this CREATE's file system calls are made in a job ([`job`]): on a share whose calls
/// may wait on a network.
pub(super) fn applies(tree: &TreeView) -> bool {
    tree.share.offloaded()
}

/// Whether this run of the CREATE carries its job's answer (it runs again after the job).
pub(super) fn answered(core: &ConnCore) -> bool {
    matches!(core.domain_answer, Some(DomainAnswer::Fs(..)))
}

/// The job's answer, taken, when the CREATE runs again after it: what it opened, or the status
/// it failed with (a job that could not run: its file system error).
pub(super) fn answer(core: &mut ConnCore) -> Option<Outcome> {
    let (outcome, refused, sids) = match crate::cmd::job_made::<Answered>(core)? {
        Ok(answered) => answered,
        Err(s) => (Err(s), None, Vec::new()),
    };
    if let (Some(n), Some(link)) = (refused, core.server.node.link()) {
        // Counted for the log, if this thread still refuses the node's calls.
        link.refuses_now(n);
    }
    if !sids.is_empty() {
        // The new file's inherited domain SIDs, asked before it is made; the CREATE runs again.
        let source = core.server.logons.id_source()?;
        let ids = Vec::new();
        core.ids_wanted = Some(crate::lookup::Lookup::Ids { source, sids, ids });
        return Some(Err(crate::cmd::ids::ASK_IDS));
    }
    Some(outcome)
}

/// What the job carries back: its outcome, the node whose file it refused to open
/// ([`refused_home`]), and the domain SIDs a new file would inherit that the id source must
/// be asked about first ([`inherited_unknown`]; the outcome is then Err(`ASK_IDS`), nothing
/// made).
type Answered = (Outcome, Option<u16>, Vec<Sid>);

/// What the I/O thread gives a CREATE's job besides the request: the time, how many times the
/// job ran before because names moved ([`stale`]), the nodes whose calls the thread fails at
/// once now (`ClusterLink::refusing`), whether the connection negotiated AAPL (macOS takes an
/// empty stream for a missing one on a `fruit` share: [`stream::open_named`]), and whether a
/// new file's inherited domain SIDs the id source was not asked about are answered rather than
/// the file made ([`inherited_unknown`]: not once it was asked for this CREATE, nor on a server
/// without an id source and a domain, nor run again after breaks, as on the I/O thread).
pub(super) struct Posted {
    pub now: Now,
    pub tries: u8,
    pub refusing: Vec<u16>,
    /// The snapshot the CREATE names (Previous Versions): the job makes its view first
    /// ([`super::snapshot::view`]: its directory listed, its root opened) and works on it.
    pub snapshot: Option<GmtToken>,
    pub aapl: bool,
    pub ask_inherited: bool,
}

impl Posted {
    /// For a CREATE of `core`'s (`retry`: run again after it waited for breaks, when nothing is
    /// refused before the open, as on the I/O thread: [`super::admission::refused_before_open`]).
    /// `ids_came`: the id source answered this CREATE's question already.
    pub(super) fn by(
        core: &ConnCore,
        retry: bool,
        tries: u8,
        snapshot: Option<GmtToken>,
        ids_came: bool,
    ) -> Posted {
        let refusing = match (retry, core.server.node.link()) {
            (false, Some(link)) => link.refusing(),
            _ => Vec::new(),
        };
        let logons = &core.server.logons;
        let ask_inherited =
            !retry && !ids_came && logons.id_source().is_some() && logons.domain().is_some();
        Posted {
            now: core.now,
            tries,
            refusing,
            snapshot,
            aapl: core.aapl.negotiated,
            ask_inherited,
        }
    }
}

/// The CREATE's file system part as a job, acting as the tree's user: the name resolved and
/// the disposition's checks ([`target::resolve`]; the delete-pending a file's entry shows is
/// read there, under its lock), an existing file homed on a node the I/O thread cannot call
/// now refused before it is opened ([`refused_home`]), the open or creation ([`open::open`]),
/// the access check ([`rights::check`]), a non-empty directory's delete-on-close refused, and
/// for a new file its changes ([`change::apply_to`]). It answers [`Prepared`]
/// ([`FsDone::Made`]).
pub(super) fn job(server: Arc<ServerState>, tree: TreeView, asked: Asked, p: Posted) -> FsJob {
    let share_key = crate::fsjob::share_key(&tree.share.name);
    let who = Some(tree.who.clone());
    FsJob::answer_made(
        who,
        0,
        share_key,
        "the file system part of a CREATE",
        move || {
            let names_seen = server.files.names_seen(&tree.share.name, &asked.path);
            let (mut refused, mut sids) = (None, Vec::new());
            let outcome = on_view(&tree, p.snapshot).and_then(|view| {
                let on = match &view {
                    Some(share) => &TreeView {
                        share: Arc::clone(share),
                        ..tree.clone()
                    },
                    None => &tree,
                };
                let r = prepare(&server, on, &asked, (&p, &mut refused, &mut sids));
                r.map(|o| Prepared {
                    names_seen,
                    tries: p.tries,
                    view,
                    ..o
                })
            });
            let holds = outcome.is_ok();
            Carried::new::<Answered>((outcome, refused, sids), holds)
        },
    )
}

/// The view of `snapshot` when the CREATE names one ([`Posted::snapshot`]).
fn on_view(tree: &TreeView, snapshot: Option<GmtToken>) -> Result<Option<Arc<ShareDef>>, NtStatus> {
    snapshot.map(|t| super::snapshot::view(tree, t)).transpose()
}

/// The node an existing file (`existing`) is homed on, when it is one whose calls the I/O
/// thread that asked the job fails at once now (`refusing`): its open is told "try again"
/// (FILE_NOT_AVAILABLE) before the file is opened, as on the I/O thread
/// ([`super::admission::refused_before_open`]), so a flood of opens of a stopped node's files
/// does not open each on the file system (the review of step 5, 1h).
fn refused_home(
    server: &ServerState,
    existing: Option<&FileAttr>,
    refusing: &[u16],
) -> Option<u16> {
    let attr = existing.filter(|_| !refusing.is_empty())?;
    match server.node.home_of(server.node.file_key(attr)) {
        crate::cluster::Home::Node(n) if refusing.contains(&n) => Some(n),
        _ => None,
    }
}

/// [`job`]'s calls, in the order the I/O thread makes them elsewhere.
/// `refused`: the node whose file it did not open ([`refused_home`]); `sids`: the domain SIDs
/// to ask about before a new file is made ([`inherited_unknown`]).
fn prepare(
    server: &ServerState,
    tree: &TreeView,
    asked: &Asked,
    (posted, refused, sids): (&Posted, &mut Option<u16>, &mut Vec<Sid>),
) -> Outcome {
    let now = posted.now;
    let mut tries = 0;
    let (target, opened) = loop {
        let mut target = target::resolve(server, tree, asked)?;
        let pre = target.opened.take();
        *refused = refused_home(server, target.existing.as_ref(), &posted.refusing);
        if refused.is_some() {
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
        if posted.ask_inherited && target.create && !asked.dacl_given() && tree.share.nt_acl_xattr {
            *sids = inherited_unknown(server, tree, &target.path, now);
            if !sids.is_empty() {
                return Err(crate::cmd::ids::ASK_IDS);
            }
        }
        let at = At {
            server,
            tree,
            path: &target.path,
        };
        match open::open(&at, asked, &target, pre) {
            // Made by another CREATE since the name was looked up (jobs of several connections
            // run at once): a disposition that opens an existing file opens it instead of
            // saying OBJECT_NAME_COLLISION (the review of step 5, 1c).
            Err(NtStatus::OBJECT_NAME_COLLISION)
                if target.existing.is_none() && opens_existing(asked) && tries < 2 =>
            {
                tries += 1;
            }
            r => break (target, r?),
        }
    };
    let at = At {
        server,
        tree,
        path: &target.path,
    };
    let rights = rights::check(&at, now, asked, &opened, target.granted)?;
    open::refuse_nonempty_dir(asked, &opened)?;
    // The file's own open, or its named stream's (opened or made now).
    let (node, made) = stream::open_named(&at, posted.aapl, asked, opened, rights)?;
    if (made.created || made.file_created)
        && admission::lease_names_another(server, asked, admission::key_of(server, &made))
    {
        // Refused at admission (its first check) all the same: what this job made goes here,
        // not on the I/O thread (unless another client's job opened it meanwhile). A lease
        // bound after this check is found there ([`undo_job`]).
        drop(node);
        made.undo_unshared(&at);
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut changed = match made.created {
        true => Some(change::apply_to(&at, now, asked, (&node, &made), &|s| s)?),
        false => None,
    };
    let mut reparse = None;
    match &mut changed {
        Some(c) => c.reparse = reparse_of(asked, &node, &c.attr),
        None => reparse = reparse_of(asked, &node, &made.attr),
    }
    Ok(Prepared {
        path: target.path,
        existing: target.existing,
        node,
        made,
        changed,
        names_seen: 0,
        tries: 0,
        view: None,
        reparse,
    })
}

/// For a POSIX open, the reparse buffer a client stored with the file (metadata `attr`) that
/// its answer shows ([`crate::cmd::reparse::stored`]: an xattr read for a regular file marked
/// REPARSE_POINT), read in the job; `None` for another open (nothing to read).
fn reparse_of(asked: &Asked, node: &Arc<dyn Node>, attr: &FileAttr) -> Option<Option<Vec<u8>>> {
    asked
        .posix
        .is_some()
        .then(|| crate::cmd::reparse::stored(node.as_ref(), attr))
}

/// The domain SIDs the inheritable ACEs of the descriptor of `path`'s parent name that the id
/// source was not asked about (or whose answers expired): a new file at `path` would get no
/// POSIX entry for them ([`crate::cmd::ids::before_inherit`], which the I/O thread makes
/// elsewhere). A parent that cannot be read asks nothing (the inheritance reports it).
fn inherited_unknown(server: &ServerState, tree: &TreeView, path: &RelPath, now: Now) -> Vec<Sid> {
    let ids = server.logons.ids(now.mono_ms);
    match crate::ntsd::parent_descriptor(&tree.share, &tree.who, path, &ids) {
        Ok(Some(parent)) => server.logons.sid_map.unknown_sids(&parent, now.mono_ms),
        _ => Vec::new(),
    }
}

/// Whether `asked`'s disposition opens a file that exists (OPEN_IF, OVERWRITE_IF, SUPERSEDE)
/// rather than failing on it (CREATE).
fn opens_existing(asked: &Asked) -> bool {
    use ringshare_wire::consts::CreateDisposition as D;
    matches!(
        asked.disposition,
        D::OPEN_IF | D::OVERWRITE_IF | D::SUPERSEDE
    )
}

/// An existing file's overwrite or supersede (its truncation, its named streams removed, the
/// attributes, allocation and EAs it is given, the stat the answer shows: [`change::apply_to`])
/// as a second job, once its open holds its place in the file's entry (a refused open never
/// changes the file). It answers the change or the status it failed with; the open leaves the
/// entry on the I/O thread then ([`super::changed`]).
pub(super) fn overwrite_job(
    server: Arc<ServerState>,
    (tree, path): (TreeView, RelPath),
    asked: Asked,
    (node, made): (Arc<dyn Node>, Made),
    (now, stage): (Now, Arc<Overwriting>),
) -> FsJob {
    let share_key = crate::fsjob::share_key(&tree.share.name);
    let who = Some(tree.who.clone());
    FsJob::answer_made(who, 0, share_key, "the overwrite of a CREATE", move || {
        let at = At {
            server: &server,
            tree: &tree,
            path: &path,
        };
        let r = change::apply_to(&at, now, &asked, (&node, &made), &|s| s).map(|mut c| {
            c.reparse = reparse_of(&asked, &node, &c.attr);
            c
        });
        drop((node, made));
        stage.ended();
        Carried::new(r, false)
    })
}

/// Where a CREATE's overwrite job stands, shared by the job and the parked CREATE, so that an
/// open abandoned while the job is out (a LOGOFF, the connection's end) holds its place in
/// its file's entry until the job ended: no other client is admitted to the file while the
/// job still truncates it (the review of step 5, 1a). Whichever side comes second takes the
/// open out of the entry.
#[derive(Default)]
pub(super) struct Overwriting(std::sync::Mutex<Stage>);

#[derive(Default)]
enum Stage {
    #[default]
    Running,
    Ended,
    /// The CREATE was abandoned first: the open, for the job to take out of its entry.
    Abandoned(Box<Leaving>),
}

/// An abandoned open and where it is, for [`Overwriting::ended`] to take out of its entry.
pub(super) struct Leaving {
    pub server: Arc<ServerState>,
    pub tree: TreeView,
    pub path: RelPath,
    pub adm: Admitted,
}

impl Leaving {
    fn leave(self) {
        let at = At {
            server: &self.server,
            tree: &self.tree,
            path: &self.path,
        };
        self.adm.leave(&at, NtStatus::CANCELLED);
    }
}

impl Drop for Overwriting {
    /// A job dropped without running (the pool could not act as its user) still lets an open
    /// abandoned meanwhile leave its file's entry, where the last holder lets it go (the review
    /// of session 46, finding 4).
    fn drop(&mut self) {
        let was = std::mem::take(&mut *lock(&self.0));
        if let Stage::Abandoned(l) = was {
            l.leave();
        }
    }
}

impl Overwriting {
    /// The job ended (on the pool): an open abandoned meanwhile leaves its file's entry now,
    /// and its node is let go here.
    fn ended(&self) {
        let was = std::mem::replace(&mut *lock(&self.0), Stage::Ended);
        if let Stage::Abandoned(l) = was {
            l.leave();
        }
    }

    /// The CREATE is abandoned: while the job is out its open is kept for the job to take out
    /// of the entry when it ends (None); once it ended, it is given back to leave now.
    pub(super) fn abandoned(&self, l: Leaving) -> Option<Leaving> {
        let mut s = lock(&self.0);
        match *s {
            Stage::Running => {
                *s = Stage::Abandoned(Box::new(l));
                None
            }
            _ => Some(l),
        }
    }
}

/// `nodes` ([`Made::nodes`]), opened by the job and not kept (a share-mode conflict, a lease break to wait for,
/// a refusal after the job), let go in a job of its own when nothing else holds one of them:
/// their last close (a FLUSH on FUSE) is not made on the I/O thread. Nobody waits for it.
pub(super) fn let_go(core: &mut ConnCore, tree: &TreeView, nodes: Vec<Arc<dyn Node>>) {
    if nodes.iter().all(|n| Arc::strong_count(n) > 1) {
        // Another holder (the file's entry, a watch) lets them go where it ends.
        return;
    }
    let share = crate::fsjob::share_key(&tree.share.name);
    let job = FsJob::let_go(Carried::new(nodes, true), share);
    core.cluster_posts.push(crate::lookup::Lookup::Fs(job));
}

/// A DH2Q CREATE's (ClientGuid, CreateGuid): the key of its replay's pending mark.
pub(super) type Guids = ([u8; 16], [u8; 16]);

/// What a CREATE refused at admission made (`made`, at `path`: a new file or stream; a lease
/// key that names another file, a new stream of a file found delete-pending) removed in a file
/// system job, the CREATE answered its refusal after it, so that the client never finds the
/// half-made file ([`super::Undoing`]). It removes only what nobody else holds now
/// ([`Made::undo_unshared`]); the nodes it holds are let go on the pool.
pub(super) fn undo_job(
    server: Arc<ServerState>,
    (tree, path): (TreeView, RelPath),
    (made, pending): (Made, Option<Guids>),
) -> FsJob {
    let share_key = crate::fsjob::share_key(&tree.share.name);
    let who = Some(tree.who.clone());
    let what = "the undo of a refused CREATE";
    FsJob::telling(who, 0, share_key, what, move || {
        let at = At {
            server: &server,
            tree: &tree,
            path: &path,
        };
        made.undo_unshared(&at);
        // A replay of its DH2Q CREATE (`pending`: ClientGuid, CreateGuid) was told it is
        // pending while the undo was out; it goes on as a fresh CREATE now.
        if let Some(guids) = pending {
            lock(&server.files.durables).set_pending(guids, false, 0);
        }
    })
}

/// A CREATE job's answer that no request took (its connection went, or it failed before it
/// took it): what it holds is let go on the pool ([`FsJob::let_go`]), not where it is dropped.
pub(crate) fn let_go_unused(core: &mut ConnCore, done: FsDone) {
    if let FsDone::Made(m) = done {
        if m.holds_files {
            core.cluster_posts
                .push(crate::lookup::Lookup::Fs(FsJob::let_go(m, 0)));
        }
    }
}
