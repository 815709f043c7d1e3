//! CREATE's answer and the open it makes: the response's contexts and body
//! ([MS-SMB2] 3.3.5.9 "Response Construction"; 3.3.5.9.5 MxAc, 3.3.5.9.9
//! QFid, 3.3.5.9.8 and 3.3.5.9.11 RqLs, 3.3.5.9.6 and 3.3.5.9.10 durable
//! handles, AAPL), the Open put in its session, and what watchers of the
//! directory hear.

use std::sync::{Arc, Mutex};

use ringshare_vfs::{FileAttr, RelPath};
use ringshare_wire::consts::{AccessMask, CreateAction};
use ringshare_wire::create::{
    maximal_access_response, query_on_disk_id_response, ContextTag, CreateContext, CreateRequest,
};
use ringshare_wire::{FileId, NtStatus};

use super::admission::Admitted;
use super::change::Changed;
use super::durable;
use super::request::Asked;
use super::{client_guid, file_id_shown, lease_context, response_body, At, TreeView};
use crate::dirlease;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo::{self, ATTR_READONLY};
use crate::files::access::{FILE_APPEND_DATA, FILE_WRITE_DATA};
use crate::files::oplock;
use crate::notify;
use crate::opens;
use crate::server::{lock, ServerState, ShareDef};
use crate::state::{Open, OpenState, SessionRef};

/// Create options that FileModeInformation reports ([MS-FSCC] 2.4.26).
const MODE_FROM_OPTIONS: u32 = 0x0000_0002 | 0x0000_0004 | 0x0000_0008 | 0x0000_0010 | 0x0000_0020;

/// What the open was made with, kept in its state.
pub(super) struct Settled {
    pub action: CreateAction,
    pub durability: Option<durable::Durability>,
}

/// The response body: the file's attributes, the oplock or lease granted,
/// and the contexts answered, in this order: MxAc and QFid, AAPL (which
/// turns AAPL on for the connection), RqLs, then DHnQ or DH2Q when the open
/// is durable (streams never are, as on Samba).
pub(super) fn response(
    core: &mut ConnCore,
    cr: &CreateRequest<'_>,
    at: &At<'_>,
    asked: &mut Asked,
    adm: &Admitted,
    mut changed: Changed,
    owner: durable::Owner,
) -> (Vec<u8>, Settled) {
    // Read in the CREATE's job on a share whose calls may wait on a network.
    let reparse = changed.reparse.take();
    let (share, made, grant) = (&at.tree.share, &adm.made, &adm.grant);
    let attr = &changed.attr;
    let mut contexts = response_contexts(cr, attr, made.maximal, file_id_shown(core, share, attr));
    if let Some((reply, on)) = asked.aapl.take().map(|b| *b) {
        contexts.push(CreateContext::new(ringshare_wire::create::tag::AAPL, reply));
        // Once on, it stays on for the connection.
        core.aapl.negotiated = true;
        core.aapl.readdir_attr |= on.readdir_attr;
        core.aapl.copyfile |= on.copyfile;
    }
    if let (Some(l), oplock::LEVEL_LEASE) = (asked.lease_req.as_ref(), grant.level) {
        contexts.push(lease_response(l, grant));
    }
    if asked.posix.is_some() {
        let mut data = Vec::new();
        let stored =
            reparse.unwrap_or_else(|| crate::cmd::reparse::stored(adm.node.as_ref(), attr));
        crate::cmd::posix::cc(at.server, attr, stored.as_deref()).encode(&mut data);
        contexts.push(CreateContext::new(ringshare_wire::create::tag::POSIX, data));
    }
    let persistent_handles = core.negotiated.as_ref().is_some_and(|n| {
        n.server_capabilities & ringshare_wire::consts::Capabilities::PERSISTENT_HANDLES.0 != 0
    });
    let durability = durable::decide(
        // Streams are never durable (as on Samba).
        if made.stream_name.is_some() {
            durable::Ask::None
        } else {
            asked.durable
        },
        at.server.config.durable_v1_timeout_ms,
        grant.level,
        grant.lease_state,
        share.durable_handles,
        share.continuous_availability && !made.is_dir && persistent_handles,
        owner,
        client_guid(core),
    )
    .map(|(d, context)| {
        contexts.push(context);
        d
    });
    let file_id = FileId {
        persistent: adm.persistent_id,
        volatile: adm.id,
    };
    let action = changed.action;
    let body = response_body(attr, grant.level, action, file_id, contexts);
    (body, Settled { action, durability })
}

/// What watchers of the directory hear of a CREATE, once the open is in
/// place: the changes, the share and the path; and whether the directory's
/// leases break (but the one the open named as its parent's).
pub(super) struct Report {
    share: Arc<ShareDef>,
    path: RelPath,
    changes: Vec<(u32, u32, Option<String>)>,
    watched: bool,
    parent_key: Option<[u8; 16]>,
    now_ms: u64,
}

/// What this CREATE changed, for watchers of its directory and the leases
/// on it (none while nobody watches and no directory is leased). Samba
/// 4.22 breaks the directory's leases where it tells watchers of a file
/// made or overwritten (smbtorture smb2.dirlease).
pub(super) fn report(at: &At<'_>, adm: &Admitted, truncate: bool, now_ms: u64) -> Option<Report> {
    let made = &adm.made;
    let watched = at.server.notify.active();
    if !watched && !at.server.files.any_dir_leased() {
        return None;
    }
    let stream = made.stream_name.as_deref();
    let changes = changes(
        made.file_created,
        made.file_is_dir,
        stream,
        made.created,
        truncate,
    );
    (!changes.is_empty()).then(|| Report {
        share: Arc::clone(&at.tree.share),
        path: at.path.clone(),
        changes,
        watched,
        parent_key: adm.grant.parent_key,
        now_ms,
    })
}

/// The changes of a CREATE (FILE_NOTIFY_INFORMATION actions, [MS-FSCC] 2.7.1): a
/// file made is ADDED, a file overwritten MODIFIED in size, write time and
/// attributes; a stream made is ADDED_STREAM, a stream overwritten
/// MODIFIED_STREAM.
fn changes(
    file_created: bool,
    file_is_dir: bool,
    stream: Option<&str>,
    created: bool,
    truncate: bool,
) -> Vec<(u32, u32, Option<String>)> {
    use notify::filter::{ATTRIBUTES, LAST_WRITE, SIZE, STREAM_NAME, STREAM_SIZE, STREAM_WRITE};
    let mut changes = Vec::new();
    if file_created {
        changes.push((notify::ADDED, notify::name_filter(file_is_dir), None));
    } else if truncate && stream.is_none() {
        changes.push((notify::MODIFIED, SIZE | LAST_WRITE | ATTRIBUTES, None));
    }
    if let Some(n) = stream {
        if created {
            changes.push((notify::ADDED_STREAM, STREAM_NAME, Some(n.to_string())));
        } else if truncate {
            let f = STREAM_SIZE | STREAM_WRITE;
            changes.push((notify::MODIFIED_STREAM, f, Some(n.to_string())));
        }
    }
    changes
}

impl Report {
    fn send(&self, server: &ServerState) {
        let (share, path) = (&self.share.name, &self.path);
        dirlease::entry_changed(server, share, path, self.parent_key, Some(self.now_ms));
        if !self.watched {
            return;
        }
        let cs: Vec<notify::Change<'_>> = self
            .changes
            .iter()
            .map(|(action, filter, stream)| notify::Change {
                action: *action,
                filter: *filter,
                path: &self.path,
                stream: stream.as_deref(),
            })
            .collect();
        notify::report(server, &self.share, &cs);
    }
}

/// The Open this CREATE made ([MS-SMB2] 3.3.5.9 "Open Execution": the
/// Open's fields), on the tree's share as its user.
pub(super) fn new_open(
    core: &ConnCore,
    req: &Req<'_>,
    tree: TreeView,
    asked: &Asked,
    path: RelPath,
    adm: Admitted,
    settled: Settled,
) -> Open {
    let Admitted {
        node,
        made,
        id,
        persistent_id,
        key,
        entry,
        file_entry,
        ..
    } = adm;
    let share = tree.share;
    let posix_rename =
        made.is_dir && core.aapl.negotiated && share.fruit.as_ref().is_some_and(|f| f.posix_rename);
    let stream = made.stream_name.zip(file_entry).map(|(name, file_entry)| {
        let afp = crate::fruit::afp::kind(share.fruit.as_deref(), &name);
        Box::new(crate::state::StreamOf {
            now: Mutex::new((name, key)),
            file_entry,
            afp,
        })
    });
    let ask = asked.durable;
    let state = OpenState {
        path,
        delete_on_close: asked.delete_on_close,
        position: 0,
        mode: asked.options & MODE_FROM_OPTIONS,
        channel_sequence: req.hdr.channel_sequence(),
        durable: settled.durability,
        create_guid: ask.create_guid().map(|g| (client_guid(core), g)),
        create_action: settled.action.0,
        replay_eligible: matches!(ask, durable::Ask::V2 { .. }),
        lock_sequences: None,
        posix_locks: Vec::new(),
        watch: None,
        notify_on_close: 0,
        kernel_marked_ms: 0,
        compress_skip: 0,
        compress_misses: 0,
        posix_rename,
    };
    Open {
        who: tree.who,
        id,
        persistent_id,
        tree_id: req.tree_id,
        node,
        key,
        entry,
        is_dir: made.is_dir,
        access: made.granted,
        share_access: asked.share_access,
        create_options: asked.options,
        share,
        state: Mutex::new(state),
        dir_cursor: Mutex::new(None),
        stream,
        posix: asked.posix.is_some(),
    }
}

/// An open made and about to be answered ([`install`]), kept while its record is stored.
pub(crate) struct Installing {
    pub(super) sref: SessionRef,
    pub(super) session_id: u64,
    pub(super) open: Open,
    pub(super) ask: durable::Ask,
    pub(super) report: Option<Report>,
    pub(super) body: Vec<u8>,
    /// The quota file was opened ([`crate::cmd::quota::fake_file_opened`]).
    pub(super) quota_file: bool,
}

/// Put the open in its session and answer: a persistent open's record is
/// in etcd before the client hears of it ([`crate::cluster::ca`]; without
/// it, no open: the node refuses rather than promise what it cannot keep);
/// a session logged off on another channel meanwhile gets no open; a DH2Q
/// open is remembered for replays (3.3.5.9.10). Watchers hear of the
/// changes last.
///
/// The record is stored away from the I/O thread (Err([`super::PARKED`]) with `parked` set;
/// the request goes on in [`resume`]).
pub(super) fn install(
    core: &mut ConnCore,
    fin: Installing,
    parked: &mut Option<super::Parked>,
) -> Result<Option<Reply>, NtStatus> {
    if let Some(ask) = crate::cluster::ca::to_store(&core.server.node, &fin.open) {
        let cont = crate::cmd::LookupCont::Create(Box::new(fin));
        *parked = Some((crate::lookup::Lookup::Cluster(ask), cont));
        return Err(super::PARKED);
    }
    finish(core, fin).map(Some)
}

/// The record of a parked CREATE's open is stored (`done`): the CREATE is answered. A DH2Q
/// CREATE no longer waits for replays ([`super::create`] marked it pending).
pub(crate) fn resume(
    core: &mut ConnCore,
    fin: Installing,
    done: crate::lookup::LookupDone,
) -> Result<Reply, NtStatus> {
    if let Some(create_guid) = fin.ask.create_guid() {
        super::pending(core, create_guid, false);
    }
    let fin = stored_or_closed(core, fin, done.cluster())?;
    finish(core, fin)
}

/// A parked CREATE whose connection (or session) went: its open, which no client will hear
/// of, closes, and a DH2Q replay is no longer told that it is pending. Its record's removal is
/// posted, so the cluster's store thread asks it after the store the CREATE waited for: a
/// record stored after the close is removed all the same.
pub(crate) fn abandon(core: &mut ConnCore, fin: Installing) {
    if let Some(create_guid) = fin.ask.create_guid() {
        super::pending(core, create_guid, false);
    }
    let asks = opens::close_posted(&core.server, Arc::new(fin.open));
    core.post_closes(asks);
}

/// The open, if its record was stored; if not, it closes and the CREATE fails.
fn stored_or_closed(
    core: &mut ConnCore,
    fin: Installing,
    stored: Result<(), NtStatus>,
) -> Result<Installing, NtStatus> {
    if stored.is_err() {
        // Its record may have been stored all the same (etcd's answer lost): it goes, away
        // from the I/O thread too (etcd does not answer now).
        abandon(core, fin);
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    Ok(fin)
}

/// The open goes into its session and the CREATE is answered.
fn finish(core: &mut ConnCore, fin: Installing) -> Result<Reply, NtStatus> {
    let (id, persistent_id) = (fin.open.id, fin.open.persistent_id);
    let mut session = lock(&fin.sref);
    if session.closed {
        // Logged off on another channel while the file was being opened.
        drop(session);
        let asks = opens::close_posted(&core.server, Arc::new(fin.open));
        core.post_closes(asks);
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if !session.trees.contains_key(&fin.open.tree_id) {
        // Its tree was disconnected while the CREATE waited (for its file system job, its
        // file's home, its record): the open would be out of every request's reach and hold
        // its share modes and lease until the session ends.
        drop(session);
        let asks = opens::close_posted(&core.server, Arc::new(fin.open));
        core.post_closes(asks);
        return Err(NtStatus::NETWORK_NAME_DELETED);
    }
    let server = &core.server;
    if let Some(create_guid) = fin.ask.create_guid() {
        let client_guid = client_guid(core);
        lock(&server.files.durables).remember((client_guid, create_guid), fin.session_id, id);
    }
    session.opens.insert(id, Arc::new(fin.open));
    drop(session);
    if let Some(r) = fin.report {
        r.send(server);
    }
    let mut r = Reply::ok(fin.body);
    r.file_id = Some((persistent_id, id));
    Ok(match fin.quota_file {
        true => crate::cmd::quota::fake_file_opened(core, r),
        false => r,
    })
}

/// MxAc and QFid answers; every other context is ignored ([MS-SMB2] 3.3.5.9:
/// unknown contexts MUST be ignored; durable handles and leases are not offered).
fn response_contexts(
    cr: &CreateRequest<'_>,
    attr: &FileAttr,
    maximal: u32,
    file_id: u64,
) -> Vec<CreateContext<'static>> {
    let mut out = Vec::new();
    if cr.context(ContextTag::QueryMaximalAccess).is_some() {
        let mut m = maximal;
        if fileinfo::attributes(attr) & ATTR_READONLY != 0 && !attr.is_dir() {
            m &= !(FILE_WRITE_DATA | FILE_APPEND_DATA);
        }
        out.push(CreateContext::new(
            ringshare_wire::create::tag::QUERY_MAXIMAL_ACCESS,
            maximal_access_response(NtStatus::SUCCESS, AccessMask(m)),
        ));
    }
    if cr.context(ContextTag::QueryOnDiskId).is_some() {
        out.push(CreateContext::new(
            ringshare_wire::create::tag::QUERY_ON_DISK_ID,
            query_on_disk_id_response(file_id, attr.dev),
        ));
    }
    out
}

/// The RqLs response context: the lease's key, its state now, and for
/// version 2 its epoch and parent key ([MS-SMB2] 2.2.14.2.10, 2.2.14.2.11).
fn lease_response(
    req: &ringshare_wire::create::Lease,
    g: &oplock::Grant,
) -> CreateContext<'static> {
    lease_context(req.key, g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::filter::{LAST_WRITE, SIZE, STREAM_NAME, STREAM_SIZE, STREAM_WRITE};

    #[test]
    fn a_new_file_is_reported_added() {
        let c = changes(true, false, None, true, false);
        assert_eq!(c, [(notify::ADDED, notify::name_filter(false), None)]);
    }

    #[test]
    fn an_overwritten_file_is_reported_modified_in_size_and_write_time() {
        let c = changes(false, false, None, false, true);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, notify::MODIFIED);
        assert_eq!(c[0].1 & (SIZE | LAST_WRITE), SIZE | LAST_WRITE);
    }

    #[test]
    fn a_stream_made_in_an_existing_file_is_reported_as_an_added_stream_only() {
        let c = changes(false, false, Some("s"), true, false);
        assert_eq!(
            c,
            [(notify::ADDED_STREAM, STREAM_NAME, Some("s".to_string()))]
        );
    }

    #[test]
    fn an_overwritten_stream_is_reported_as_a_modified_stream_not_a_modified_file() {
        let c = changes(false, false, Some("s"), false, true);
        let f = STREAM_SIZE | STREAM_WRITE;
        assert_eq!(c, [(notify::MODIFIED_STREAM, f, Some("s".to_string()))]);
    }

    #[test]
    fn an_open_of_what_exists_is_not_reported() {
        assert!(changes(false, false, None, false, false).is_empty());
        assert!(changes(false, true, Some("s"), false, false).is_empty());
    }
}
