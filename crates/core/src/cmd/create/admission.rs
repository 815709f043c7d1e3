//! CREATE's admission through the file's share-mode entry: a lease key
//! names one file, delete-pending, share access, and the oplock or lease
//! granted (breaking others' first) ([MS-SMB2] 3.3.5.9 "Oplock
//! Acquisition", 3.3.5.9.8, 3.3.5.9.11; [MS-FSA] 2.1.5.1.2; decided by
//! [`crate::arbiter`], here or at the file's home node).

use std::sync::{Arc, Mutex};

use ringshare_vfs::Node;
use ringshare_wire::NtStatus;

use super::request::Asked;
use super::stream::Made;
use super::At;
use crate::arbiter;
use crate::exchange::{ConnCore, Req};
use crate::files::access;
use crate::files::oplock::{self, Route};
use crate::server::{lock, FileEntry, FileKey, ShareEntry};

/// An open that holds its place in its file's entry.
pub(super) struct Admitted {
    pub node: Arc<dyn Node>,
    pub made: Made,
    /// FileId.Volatile (the owner of its share mode and locks) and
    /// FileId.Persistent.
    pub id: u64,
    pub persistent_id: u64,
    pub key: FileKey,
    pub entry: Arc<Mutex<FileEntry>>,
    /// For a stream: its file's entry, which holds an invisible open for it.
    pub file_entry: Option<Arc<Mutex<FileEntry>>>,
    pub grant: oplock::Grant,
}

/// An open on its way into its file's entry: what admission asks, and what the open holds
/// meanwhile (kept while the file's home is asked, away from the I/O thread).
pub(crate) struct Joining {
    node: Arc<dyn Node>,
    made: Made,
    id: u64,
    persistent_id: u64,
    key: FileKey,
    entry: Arc<Mutex<FileEntry>>,
    file_entry: Option<Arc<Mutex<FileEntry>>>,
    wish: oplock::Wish,
    requested: u8,
    /// The lease asked for is asked of the entry (not for a directory without directory
    /// leasing).
    leased: bool,
    route: Route,
    now_ms: u64,
    /// The call to the file's home under way, when one is.
    asking: Option<arbiter::Asking>,
}

/// The question a CREATE waits for (its file's home's admission) and the open on its way in.
pub(super) type AskingHome = (crate::lookup::Lookup, Joining);

/// An existing file whose home is another node that this thread's calls are refused for now
/// (as many calls wait for it as may: `ClusterLink::refuses_now`) is not opened: "try again"
/// (FILE_NOT_AVAILABLE), the answer the call to its home would get, without the open, its
/// reads and its close. Under a flood of opens of a stopped node's files those made most of
/// each refusal's cost and slowed the I/O thread's other clients (docs/cluster-internals.md,
/// "Step 6").
pub(super) fn refused_before_open(
    server: &crate::server::ServerState,
    existing: Option<&ringshare_vfs::FileAttr>,
) -> Result<(), NtStatus> {
    let (Some(link), Some(attr)) = (server.node.link(), existing) else {
        return Ok(());
    };
    match server.node.home_of(server.node.file_key(attr)) {
        crate::cluster::Home::Node(n) if link.refuses_now(n) => Err(NtStatus::FILE_NOT_AVAILABLE),
        _ => Ok(()),
    }
}

/// Join the file's entry: `None` while other clients have yet to
/// acknowledge the breaks this open caused (it waits, and leaves the entry
/// as it found it); an error when it may not open the file now. A stream
/// open also keeps its file open (an invisible open that conflicts with
/// nothing): the file is not removed or renamed under it. A file homed on another node is
/// asked away from the I/O thread: Err([`super::PARKED`]), `parked` holding the question and
/// the open, which goes on in [`Joining::answered`]. A refusal that undoes what the CREATE
/// made leaves that in `undo` on a share whose calls may wait on a network ([`refused_made`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn admit(
    core: &ConnCore,
    req: &Req<'_>,
    retry: bool,
    at: &At<'_>,
    asked: &Asked,
    opened: (Arc<dyn Node>, Made),
    parked: &mut Option<AskingHome>,
    undo: &mut Option<Made>,
) -> Result<Option<Admitted>, NtStatus> {
    let mut j = joining(core, req, retry, at, asked, opened, undo)?;
    let r = match arbiter::admit_or_ask(&core.server, j.key, &j.entry, &j.open_ask(at, asked)) {
        arbiter::Decision::Made(r) => r,
        arbiter::Decision::Ask(ask, asking) => {
            j.asking = Some(asking);
            *parked = Some((crate::lookup::Lookup::Home(ask), j));
            return Err(super::PARKED);
        }
    };
    j.decided(at, r)
}

/// What admission asks of the file's entry, once the lease key and a stream's file's
/// delete-pending are checked.
fn joining(
    core: &ConnCore,
    req: &Req<'_>,
    retry: bool,
    at: &At<'_>,
    asked: &Asked,
    (node, made): (Arc<dyn Node>, Made),
    undo: &mut Option<Made>,
) -> Result<Joining, NtStatus> {
    let server = at.server;
    let id = server.files.new_owner_id();
    let persistent_id = server.files.new_owner_id();
    let key = key_of(server, &made);
    if lease_names_another(server, asked, key) {
        drop(node);
        refused_made(at, made, undo);
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // A directory gets no oplock, and a lease only through a version 2
    // lease context on a connection that negotiated directory leasing
    // ([MS-SMB2] 3.3.5.9.11), once its lease key was checked (smbtorture
    // smb2.lease.request).
    let dir_lease = asked.lease_req.as_ref().is_some_and(|l| l.v2.is_some())
        && asked.requested == oplock::LEVEL_LEASE
        && directory_leasing(core);
    let leased = !made.is_dir || dir_lease;
    let (requested, lease_id) = match leased {
        true => (asked.requested, asked.lease_id),
        false => (oplock::LEVEL_NONE, None),
    };
    let file_entry = made
        .stream_name
        .as_ref()
        .map(|_| server.files.entry(key.base()));
    if let Some(fe) = &file_entry {
        let (pending, moving) = {
            let e = lock(fe);
            let moving = matches!(e.stream_moving, Some((a, b)) if a == key || b == key);
            (e.delete_pending, moving)
        };
        if pending || moving {
            drop(node);
            // A stream made at one of a rename's names is the rename's now (it may replace it
            // with the renamed stream's data): not undone, opened as it is when the CREATE is
            // tried again (the review of session 49, findings 1 and 4).
            if !moving {
                refused_made(at, made, undo);
            }
            server.files.drop_if_unused(key.base());
            // A stream being renamed from or to this name by a job (cmd/set_info/
            // stream_move.rs): the CREATE waits until the job ended, then opens what is there.
            return Err(match pending {
                true => NtStatus::DELETE_PENDING,
                false => super::LEASE_HELD,
            });
        }
    }
    let entry = server.files.entry(key);
    let granted = made.granted;
    let wish = oplock::Wish {
        retry,
        access: granted,
        share_access: asked.share_access,
        truncate: asked.truncate && !made.created,
        delete_only: granted == access::DELETE && requested == oplock::LEVEL_NONE,
        lease: lease_id,
    };
    Ok(Joining {
        node,
        made,
        id,
        persistent_id,
        key,
        entry,
        file_entry,
        wish,
        requested,
        leased,
        route: Route {
            conn_id: core.conn_id,
            session_id: req.session_id,
        },
        now_ms: core.now.mono_ms,
        asking: None,
    })
}

/// The key of the file's entry an open of what `made` describes joins (a stream's own).
pub(super) fn key_of(server: &crate::ServerState, made: &Made) -> FileKey {
    match &made.stream_name {
        Some(n) => server.node.file_key(&made.attr).stream(n),
        None => server.node.file_key(&made.attr),
    }
}

/// Whether the lease key `asked` names is another file's than `key`'s: a lease key names one
/// file ([MS-SMB2] 3.3.5.9.8), the open is refused (INVALID_PARAMETER).
pub(super) fn lease_names_another(
    server: &crate::ServerState,
    asked: &Asked,
    key: FileKey,
) -> bool {
    asked
        .lease_id
        .is_some_and(|lid| server.files.lease_file(lid).is_some_and(|k| k != key))
}

/// What a CREATE refused here made goes again before it is answered: at once on a local share;
/// on one whose calls may wait on a network it is left in `undo`, for a file system job the
/// CREATE is answered after ([`super::offload::undo_job`]; issue 33).
fn refused_made(at: &At<'_>, made: Made, undo: &mut Option<Made>) {
    match at.tree.share.offloaded() {
        false => made.undo(at),
        true if made.created || made.file_created => *undo = Some(made),
        true => {}
    }
}

/// An open that does not join its file's entry lets go of the file (`node`) and of the
/// entry made for it, and of its file's entry too when it is a stream's (`stream`).
fn leave_entries(server: &crate::ServerState, node: Arc<dyn Node>, key: FileKey, stream: bool) {
    drop(node);
    server.files.drop_if_unused(key);
    if stream {
        server.files.drop_if_unused(key.base());
    }
}

impl Joining {
    /// The nodes it holds (other holders of them: [`super::offload::let_go`]): its own, and
    /// for a named stream its file's ([`Made::nodes`]).
    pub(super) fn nodes(&self) -> Vec<Arc<dyn Node>> {
        self.made.nodes(&self.node)
    }

    /// What the file's entry is asked.
    fn open_ask<'a>(&'a self, at: &'a At<'_>, asked: &'a Asked) -> arbiter::OpenAsk<'a> {
        arbiter::OpenAsk {
            owner: self.id,
            persistent_id: self.persistent_id,
            route: self.route,
            wish: &self.wish,
            requested: self.requested,
            lease_req: asked.lease_req.as_ref().filter(|_| self.leased),
            share: &at.tree.share.name,
            path: at.path,
            is_dir: self.made.is_dir,
            conn_id: self.route.conn_id,
            now_ms: self.now_ms,
            who: Some(&at.tree.who),
            posix: asked.posix.is_some(),
        }
    }

    /// The file's home answered (`answer`, as it came back, or why none did): as
    /// [`admit`]'s result.
    pub(super) fn answered(
        self,
        at: &At<'_>,
        asked: &Asked,
        answer: Result<Vec<u8>, NtStatus>,
    ) -> Result<Option<Admitted>, NtStatus> {
        let (files, key) = (&at.server.files, self.key);
        let here = self
            .asking
            .as_ref()
            .is_some_and(arbiter::Asking::decided_here);
        let ask = (&self.open_ask(at, asked), here);
        let r = arbiter::admit_answered(files, key, &self.entry, ask, answer);
        self.decided(at, r)
    }

    /// The request that waited for the file's home went: the open the home may have admitted
    /// is closed there ([`arbiter::Asking::withdraw`]).
    pub(super) fn abandon(self, server: &crate::ServerState) {
        if let Some(a) = self.asking {
            a.withdraw(&server.node);
        }
        leave_entries(server, self.node, self.key, self.file_entry.is_some());
    }

    /// The entry decided `r`: the open joined it (a stream's file keeps it too), waits, or
    /// is refused.
    fn decided(
        self,
        at: &At<'_>,
        r: Result<Option<oplock::Grant>, NtStatus>,
    ) -> Result<Option<Admitted>, NtStatus> {
        let server = at.server;
        let Joining {
            node,
            made,
            id,
            persistent_id,
            key,
            entry,
            file_entry,
            ..
        } = self;
        let grant = match r {
            Ok(Some(g)) => g,
            // It waits (`Ok(None)`) or is refused.
            other => {
                leave_entries(server, node, key, file_entry.is_some());
                return other.map(|_| None);
            }
        };
        if made.is_dir && grant.level == oplock::LEVEL_LEASE {
            // Changes other programs make in it break its leases too.
            let share = &at.tree.share;
            crate::dirlease::watch(server, share, (at.path, &entry), key, &node);
        }
        if let Some(fe) = &file_entry {
            let mut b = lock(fe);
            if b.opens.is_empty() {
                b.share.clear(); // keeps its room (a reused entry)
                b.share.push_str(&at.tree.share.name);
                b.path = at.path.clone();
                b.is_dir = made.file_is_dir;
            }
            b.opens.push(ShareEntry {
                owner: id,
                access: 0,
                share_access: 7,
                caching: Default::default(),
                who: None,
                posix: false,
            });
            b.streams.push((id, key));
        }
        Ok(Some(Admitted {
            node,
            made,
            id,
            persistent_id,
            key,
            entry,
            file_entry,
            grant,
        }))
    }
}

impl Admitted {
    /// Leave the file's entry (and a stream's file's) again, when the open
    /// fails after joining it; returns `s`.
    pub(super) fn leave(&self, at: &At<'_>, s: NtStatus) -> NtStatus {
        let (server, key, id) = (at.server, self.key, self.id);
        arbiter::withdraw(server, key, &self.entry, id, &at.tree.who);
        server.files.drop_if_unused(key);
        if let Some(fe) = &self.file_entry {
            {
                let mut b = lock(fe);
                b.opens.retain(|o| o.owner != id);
                b.streams.retain(|(o, _)| *o != id);
            }
            server.files.drop_if_unused(key.base());
        }
        s
    }
}

/// Whether the connection negotiated SMB2_GLOBAL_CAP_DIRECTORY_LEASING.
fn directory_leasing(core: &ConnCore) -> bool {
    let cap = ringshare_wire::consts::Capabilities::DIRECTORY_LEASING.0;
    core.negotiated
        .as_ref()
        .is_some_and(|n| n.server_capabilities & cap != 0)
}
