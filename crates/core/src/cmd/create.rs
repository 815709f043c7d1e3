//! [MS-SMB2] 3.3.5.9 Receiving an SMB2 CREATE Request, with the open
//! semantics of [MS-FSA] 2.1.5.1 (share access, delete-on-close, read-only
//! files).
//!
//! Order of work: decode and validate; resolve the name (exact, then
//! case-insensitively per component); decide from the disposition whether to
//! open or create; open through the backend *without* truncating; check
//! delete-pending and share modes under the file's entry lock and join the
//! entry; only then truncate (OVERWRITE/SUPERSEDE) and set attributes, so a
//! refused open never changes the file.
//!
//! Oplocks and leases are granted and broken by [`crate::oplock`]: an open
//! that must wait for another client to acknowledge a break is answered
//! later ([`Handled::WaitForBreaks`]; the connection retries it).

use std::sync::{Arc, Mutex};

use ringshare_vfs::{FileAttr, FsError, Node, OpenMode, OpenOptions, RelPath, Share, EOPNOTSUPP};
use ringshare_wire::consts::{
    AccessMask, CreateAction, CreateDisposition, FileAttributes, LeaseFlags, LeaseState,
    OplockLevel, SecurityInformation,
};
use ringshare_wire::create::{
    maximal_access_response, query_on_disk_id_response, ContextTag, CreateContext, CreateRequest,
    CreateResponse,
};
use ringshare_wire::security::{SecurityDescriptor, SE_DACL_PRESENT};
use ringshare_wire::{FileId, NtStatus};

use crate::access::{self, DELETE, FILE_APPEND_DATA, FILE_WRITE_DATA};
use crate::acl;
use crate::arbiter;
use crate::conn::{ConnCore, Handled, Reply, Req};
use crate::durable;
use crate::fileinfo::{self, ATTR_ARCHIVE, ATTR_READONLY, SETTABLE_ATTRIBUTES};
use crate::fsmap::status_of;
use crate::identity;
use crate::limits;
use crate::notify;
use crate::opens;
use crate::oplock::{self, LeaseId, Route};
use crate::path::{parse_create_name, StreamPart};
use crate::server::{lock, ServerState, ShareDef, ShareEntry};
use crate::state::{Open, OpenState, TreeKind};

const OPT_DIRECTORY_FILE: u32 = 0x0000_0001;
const OPT_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
const OPT_DELETE_ON_CLOSE: u32 = 0x0000_1000;
const OPT_OPEN_BY_FILE_ID: u32 = 0x0000_2000;
const OPT_RESERVE_OPFILTER: u32 = 0x0010_0000;
/// Options with bits 24-31 set are invalid ([MS-SMB2] 2.2.13: reserved).
const OPT_INVALID: u32 = 0xFF00_0000;
/// Create options that FileModeInformation reports ([MS-FSCC] 2.4.26).
const MODE_FROM_OPTIONS: u32 = 0x0000_0002 | 0x0000_0004 | 0x0000_0008 | 0x0000_0010 | 0x0000_0020;

/// CREATE: its reply, or [`Handled::WaitForBreaks`] while other clients
/// have yet to acknowledge the breaks it caused.
pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    Ok(match create(core, req, false)? {
        Some(reply) => Handled::Reply(reply),
        None => Handled::WaitForBreaks,
    })
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
        }
    }
}

/// Try a pending CREATE again: `Some` when it no longer waits.
pub(crate) fn poll(
    core: &mut ConnCore,
    session_id: u64,
    p: &mut PendingCreate,
) -> Option<Result<Reply, NtStatus>> {
    let req = Req {
        hdr: p.hdr.clone(),
        msg: &p.msg,
        msg_offset: 0,
        detached: None,
        session_id,
        tree_id: p.tree_id,
        related_file_id: p.related_file_id,
        sole: false,
        encrypted: p.encrypted,
    };
    match retry(core, &req) {
        Ok(Some(r)) => Some(Ok(r)),
        Ok(None) => {
            p.retry_at_ms = core.now.mono_ms + oplock::BREAK_RETRY_MS;
            None
        }
        Err(s) => Some(Err(s)),
    }
}

/// Run again a request that waited for break acknowledgments (a CREATE or
/// a SET_INFO rename): its reply, or `None` while it still waits.
pub(crate) fn retry(core: &mut ConnCore, req: &Req<'_>) -> Result<Option<Reply>, NtStatus> {
    if req.hdr.command == ringshare_wire::consts::Command::SET_INFO {
        return crate::cmd::set_info::handle(core, req);
    }
    create(core, req, true)
}

/// CREATE; `retry`: it waited for breaks before. `None`: it must wait (again).
pub(crate) fn create(
    core: &mut ConnCore,
    req: &Req<'_>,
    retry: bool,
) -> Result<Option<Reply>, NtStatus> {
    let mut dh2q = None;
    let r = create_or_wait(core, req, retry, &mut dh2q);
    if let Some(create_guid) = dh2q {
        // A replay of a DH2Q CREATE that waits for breaks is told so
        // ([`durable::replay`]) until this one is answered.
        let client_guid = core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid);
        let waits = matches!(r, Ok(None));
        lock(&core.server.durables).set_pending(
            (client_guid, create_guid),
            waits,
            core.now.mono_ms,
        );
    }
    r
}

/// [`create`]; `dh2q` gets the CreateGuid of a DH2Q context (when the
/// request is not a reconnect or an answered replay).
fn create_or_wait(
    core: &mut ConnCore,
    req: &Req<'_>,
    retry: bool,
    dh2q: &mut Option<[u8; 16]>,
) -> Result<Option<Reply>, NtStatus> {
    let cr = CreateRequest::decode(req.msg).map_err(|e| e.status())?;
    // Durable handles: a reconnect looks at nothing else of the request
    // ([MS-SMB2] 3.3.5.9.7, 3.3.5.9.12).
    let ask = durable::ask(&cr, core.dialect().map_or(0, |d| d.0))?;
    if matches!(
        ask,
        durable::Ask::ReconnectV1 { .. } | durable::Ask::ReconnectV2 { .. }
    ) {
        return durable::reconnect(core, req, &cr, ask).map(Some);
    }
    if let durable::Ask::V2 { create_guid, .. } = ask {
        if let Some(r) = durable::replay(core, req, &cr, create_guid, retry)? {
            return Ok(Some(r));
        }
        *dh2q = Some(create_guid);
    }
    let server = core.server.clone();
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
    let read_only = tree.read_only;
    let maximal = tree.maximal_access;
    if session.opens.len() >= limits::OPENS_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let (who, admin, domain_sids) = (tree.who.clone(), tree.admin, Arc::clone(&tree.sids));
    let authenticated = !(session.is_guest || session.is_anonymous);
    let owner = durable::owner_of(&session);
    drop(session);

    // Validation ([MS-SMB2] 3.3.5.9, [MS-FSA] 2.1.5.1).
    let disposition = cr.create_disposition;
    let options = cr.create_options.0;
    if cr.impersonation_level.0 > 3 {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    if disposition.0 > CreateDisposition::OVERWRITE_IF.0
        || cr.share_access.0 & !7 != 0
        || options & OPT_INVALID != 0
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if options & (OPT_RESERVE_OPFILTER | OPT_OPEN_BY_FILE_ID) != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let want_dir = options & OPT_DIRECTORY_FILE != 0;
    let mut want_file = options & OPT_NON_DIRECTORY_FILE != 0;
    if want_dir && want_file {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // AAPL (Apple's context, on a `fruit` share): every CREATE carrying it
    // is answered, as Samba does ([`crate::fruit`]).
    let aapl = match (&share.fruit, cr.context(ContextTag::Aapl)) {
        (Some(f), Some(c)) if f.aapl => {
            Some(crate::fruit::server_query(f, &c.data, share.has_streams())?)
        }
        _ => None,
    };
    // `file:stream`: the file is opened (or made) first, the stream in it.
    let (path, stream) = parse_create_name(&cr.name, share.has_streams())?;
    let named = match stream {
        StreamPart::Named(n) => Some(n),
        // `name::$DATA` is the file itself, never a directory ([MS-FSA]
        // 2.1.5.1: a directory has no default data stream).
        StreamPart::Default if want_dir => return Err(NtStatus::NOT_A_DIRECTORY),
        StreamPart::Default => {
            want_file = true;
            None
        }
        StreamPart::None => None,
    };
    if named.is_some() && want_dir {
        return Err(NtStatus::NOT_A_DIRECTORY);
    }
    if let (Some(n), Some(f)) = (&named, &share.fruit) {
        crate::fruit::check_afp_stream(f, n)?;
    }
    if want_dir
        && !matches!(
            disposition,
            CreateDisposition::OPEN | CreateDisposition::CREATE | CreateDisposition::OPEN_IF
        )
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // SecD: the security descriptor a new file gets ([MS-SMB2] 2.2.13.2.2).
    let sd_given = cr
        .context(ContextTag::SdBuffer)
        .map(|c| SecurityDescriptor::decode(&c.data))
        .transpose()
        .map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
    let mut granted = access::granted_access(cr.desired_access.0, maximal)?;
    let explicit = access::map_generic(cr.desired_access.0 & !access::MAXIMUM_ALLOWED);
    let delete_on_close = options & OPT_DELETE_ON_CLOSE != 0;
    if delete_on_close && granted & DELETE == 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // ExtA: the extended attributes a new or overwritten file gets ([MS-SMB2]
    // 2.2.13.2.1), checked before anything changes.
    let eas_given = cr
        .context(ContextTag::EaBuffer)
        .map(|c| crate::cmd::query_info::parse_eas(&c.data))
        .transpose()?;
    // AlSi: the allocation a new or overwritten file starts with ([MS-SMB2] 2.2.13.2.6).
    let alloc_given = cr
        .context(ContextTag::AllocationSize)
        .map(|c| ringshare_wire::create::decode_u64_context(&c.data))
        .transpose()
        .map_err(|_| NtStatus::INVALID_PARAMETER)?;
    // RqLs: leases from 2.1 on; version 2 from 3.0 on ([MS-SMB2] 3.3.5.9.8, 3.3.5.9.11).
    let mut requested = cr.requested_oplock_level.0;
    let lease_req = if requested == oplock::LEVEL_LEASE {
        let dialect = core.dialect().map_or(0, |d| d.0);
        match cr.context(ContextTag::RequestLease) {
            Some(c) if dialect >= 0x0210 => {
                let mut l = ringshare_wire::create::Lease::decode(&c.data)
                    .map_err(|_| NtStatus::INVALID_PARAMETER)?;
                if dialect < 0x0300 {
                    l.v2 = None;
                }
                Some(l)
            }
            _ => None,
        }
    } else {
        None
    };
    if requested == oplock::LEVEL_LEASE && lease_req.is_none() {
        requested = oplock::LEVEL_NONE;
    }
    let lease_id = lease_req.as_ref().map(|l| LeaseId {
        client_guid: core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid),
        key: l.key,
    });
    if path
        .file_name()
        .is_some_and(|n| crate::fruit::vetoed(&share, n))
    {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let backend: &dyn Share = share.backend.as_ref();
    let (path, existing) = resolve_path(backend, &who, &path)?;

    // What to do with the name.
    let truncate = matches!(
        disposition,
        CreateDisposition::SUPERSEDE
            | CreateDisposition::OVERWRITE
            | CreateDisposition::OVERWRITE_IF
    );
    // For a stream, whether the file is to be made: the disposition
    // decides for the stream once the file is open.
    let (mode, create) = match (&existing, disposition) {
        (Some(_), CreateDisposition::CREATE) if named.is_none() => {
            return Err(NtStatus::OBJECT_NAME_COLLISION)
        }
        (Some(_), _) => (OpenMode::Existing, false),
        (None, CreateDisposition::OPEN | CreateDisposition::OVERWRITE) => {
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        }
        (None, _) => (OpenMode::CreateNew, true),
    };
    if read_only && (create || (truncate && named.is_none())) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let attrs_asked = cr.file_attributes.0 & SETTABLE_ATTRIBUTES;
    if let Some(a) = &existing {
        let is_dir = a.is_dir();
        if want_dir && !is_dir {
            return Err(NtStatus::NOT_A_DIRECTORY);
        }
        if want_file && is_dir {
            return Err(NtStatus::FILE_IS_A_DIRECTORY);
        }
        if is_dir && truncate && named.is_none() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if let Some(e) = server.existing_file_entry(server.file_key(a)) {
            if lock(&e).delete_pending {
                return Err(NtStatus::DELETE_PENDING);
            }
        }
        if fileinfo::attributes(a) & ATTR_READONLY != 0 && !is_dir {
            if delete_on_close {
                return Err(NtStatus::CANNOT_DELETE);
            }
            if explicit & (FILE_WRITE_DATA | FILE_APPEND_DATA) != 0 || truncate {
                return Err(NtStatus::ACCESS_DENIED);
            }
            granted &= !(FILE_WRITE_DATA | FILE_APPEND_DATA);
        }
    } else if delete_on_close && attrs_asked & ATTR_READONLY != 0 {
        return Err(NtStatus::CANNOT_DELETE);
    }

    // Open (never truncating here: share modes are checked first), as the
    // tree's user: the kernel decides whether they may read or write it.
    let maximum = cr.desired_access.0 & access::MAXIMUM_ALLOWED != 0;
    let parent_mode = match (&existing, path.parent()) {
        (None, Some(parent)) if share.rules.inherit_permissions => {
            backend.stat(&who, &parent).ok().map(|a| a.mode)
        }
        _ => None,
    };
    let parent_default_acl = match (&existing, path.parent()) {
        (None, Some(parent)) if share.rules.inherit_acls => has_default_acl(backend, &who, &parent),
        _ => false,
    };
    let create_mode = identity::new_mode(
        &share.rules,
        want_dir,
        !want_dir,
        parent_mode,
        parent_default_acl,
    );
    let opts = if named.is_some() {
        // The stream's data is reached through the file's xattrs, which the
        // kernel checks as the user at each access: the file is opened for
        // nothing more than that (and the access decision below).
        OpenOptions {
            mode,
            read: false,
            write: false,
            directory: false,
            non_directory: false,
            create_mode,
            best_effort: false,
        }
    } else {
        OpenOptions {
            mode,
            read: access::can_read(granted),
            write: access::can_write(granted) || (truncate && existing.is_some()),
            directory: want_dir,
            non_directory: want_file,
            create_mode,
            best_effort: maximum,
        }
    };
    let opened = backend.open(&who, &path, &opts).map_err(|e| match e {
        FsError::NotFound if create => NtStatus::OBJECT_PATH_NOT_FOUND,
        e => status_of(e),
    })?;
    let created = opened.created;
    let (opened_read, opened_write) = (opened.read, opened.write);
    let node: Arc<dyn Node> = Arc::from(opened.node);
    // The metadata the open read, if the backend has it; the DOS attributes
    // of an existing file are those the lookup just read when the open
    // found the same file, and a new file has none yet.
    let found = match opened.attr {
        Some(a) => a,
        None => node.stat_without_dos().map_err(status_of)?,
    };
    let attr = match &existing {
        Some(pre) if !created && (found.dev, found.ino) == (pre.dev, pre.ino) => FileAttr {
            dos_attributes: pre.dos_attributes,
            create_time: pre.create_time,
            ..found
        },
        None if created => found,
        _ => node.stat().map_err(status_of)?,
    };
    let is_dir = attr.is_dir();
    // What the kernel lets the user do with the file. The open itself
    // proved the data rights it was made with; anything else the client asks
    // (DELETE, WRITE_DAC, EXECUTE, listing a directory the open could not
    // read, MAXIMUM_ALLOWED, the MxAc context) is asked of the kernel.
    let mxac = cr.context(ContextTag::QueryMaximalAccess).is_some();
    let wanted = explicit | if truncate { FILE_WRITE_DATA } else { 0 };
    let had = access::rights_of_open(opened_read, opened_write);
    // A descriptor kept with the file (acl_xattr) decides what is granted,
    // as on Samba ([MS-DTYP] 2.5.3.2 over it); the kernel still decides
    // every operation. Root (and `admin users`) are not held to it.
    let kept = if created || admin {
        None
    } else {
        crate::ntsd::enforced(node.as_ref(), &attr, &share)?
    };
    let rights = if created {
        access::FILE_ALL_ACCESS
    } else if let Some((sd, _)) = &kept {
        let token = acl::Token::of(&who, authenticated, &domain_sids);
        // FILE_READ_ATTRIBUTES comes with the right to reach the file
        // ([MS-FSA] 2.1.5.1.2.1), DELETE also from the parent directory.
        let mut r = acl::granted(sd, &token) | access::FILE_READ_ATTRIBUTES;
        if r & DELETE == 0 && (maximum || mxac || wanted & DELETE != 0) {
            r |= parent_delete_child(&share, &who, &path, &token);
        }
        r
    } else if maximum || mxac || wanted & !had != 0 {
        let may_delete = (maximum || mxac || wanted & DELETE != 0)
            && !path.is_root()
            && backend.may_delete(&who, &path).map_err(status_of)?;
        access::rights_of(node.access().map_err(status_of)?, is_dir, may_delete)
    } else {
        had
    };
    let wanted = wanted & !access::ACCESS_SYSTEM_SECURITY;
    if wanted & !rights != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    granted &= if maximum { rights | wanted } else { !0 };
    if let Some((_, crate::ntsd::Kept::Legacy)) = kept {
        if rights & access::WRITE_DAC != 0 {
            let ids = crate::ntsd::Ids::of(&server);
            crate::ntsd::migrate(node.as_ref(), &share, &ids, core.now.filetime);
        }
    }
    let maximal = maximal & rights;
    if delete_on_close
        && is_dir
        && named.is_none()
        && !created
        && !node.list_names().map_err(status_of)?.is_empty()
    {
        return Err(NtStatus::DIRECTORY_NOT_EMPTY);
    }
    // A named stream: the disposition now decides for the stream, and the
    // open from here on is the stream's (its own share modes, oplocks,
    // leases, locks and delete-on-close; the file's metadata).
    let (file_node, file_created, file_is_dir) = (Arc::clone(&node), created, is_dir);
    let (node, attr, created, is_dir, stream_name) = match &named {
        None => (node, attr, created, is_dir, None),
        Some(sname) => {
            let undo = |s: NtStatus| {
                if file_created {
                    let _ = backend.unlink(&who, &path);
                }
                s
            };
            let in_appledouble = crate::fruit::keeps_appledouble(&share)
                && sname.eq_ignore_ascii_case(crate::fruit::AFPRESOURCE_STREAM);
            // A `._` file macOS wrote is taken in first (Samba does it here).
            if let Some(f) = share.fruit.as_deref().filter(|_| !file_is_dir) {
                let afp = sname.eq_ignore_ascii_case(crate::fruit::AFPINFO_STREAM)
                    || sname.eq_ignore_ascii_case(crate::fruit::AFPRESOURCE_STREAM);
                if afp && crate::fruit::keeps_appledouble(&share) {
                    if let Err(e) =
                        crate::fruit::adouble::convert(backend, &who, &path, &file_node, f)
                    {
                        tracing::debug!(path = %path.to_slash_path(), "AppleDouble file not converted: {e}");
                    }
                }
            }
            let s = if in_appledouble {
                let at = (backend, &who, &path);
                open_fork(at, &file_node, disposition, granted, read_only)
            } else {
                open_stream(
                    &file_node,
                    share.fruit.as_deref(),
                    sname,
                    disposition,
                    truncate,
                    granted,
                    read_only,
                )
            }
            .map_err(undo)?;
            let attr = s.node.stat().map_err(|e| {
                if s.created {
                    let _ = file_node.remove_stream(&s.name);
                }
                undo(status_of(e))
            })?;
            // macOS (after AAPL on a fruit share) takes an empty stream
            // for a missing one: a plain open of it is NOT_FOUND (Samba).
            if disposition == CreateDisposition::OPEN
                && attr.size == 0
                && core.aapl.negotiated
                && share.fruit.is_some()
            {
                return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
            }
            (Arc::from(s.node), attr, s.created, false, Some(s.name))
        }
    };
    // Undo what this open made when it fails after making it.
    let remove_made = || {
        if let (Some(n), true) = (&stream_name, created) {
            let _ = file_node.remove_stream(n);
        }
        if file_created {
            let _ = if file_is_dir {
                backend.rmdir(&who, &path)
            } else {
                backend.unlink(&who, &path)
            };
        }
    };

    // Join the file's share-mode table.
    let id = server.new_owner_id();
    let persistent_id = server.new_owner_id();
    let key = match &stream_name {
        Some(n) => server.file_key(&attr).stream(n),
        None => server.file_key(&attr),
    };
    if let Some(lid) = lease_id {
        // A lease key names one file ([MS-SMB2] 3.3.5.9.8).
        if server.lease_file(lid).is_some_and(|k| k != key) {
            drop(node);
            remove_made();
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    // A directory gets no oplock and no lease (directory leasing is not
    // offered), once its lease key was checked (smbtorture smb2.lease.request).
    let (requested, lease_req, lease_id) = if is_dir {
        (oplock::LEVEL_NONE, None, None)
    } else {
        (requested, lease_req, lease_id)
    };
    // A stream open keeps its file open (an invisible open that conflicts
    // with nothing): the file is not removed or renamed under it.
    let file_entry = stream_name.as_ref().map(|_| server.file_entry(key.base()));
    if let Some(fe) = &file_entry {
        if lock(fe).delete_pending {
            drop(node);
            remove_made();
            server.drop_file_entry_if_unused(key.base());
            return Err(NtStatus::DELETE_PENDING);
        }
    }
    let entry = server.file_entry(key);
    let wish = oplock::Wish {
        retry,
        access: granted,
        share_access: cr.share_access.0,
        truncate: truncate && !created,
        delete_only: granted == access::DELETE && requested == oplock::LEVEL_NONE,
        lease: lease_id,
    };
    let route = Route {
        conn_id: core.conn_id,
        session_id: req.session_id,
    };
    let open_ask = arbiter::OpenAsk {
        owner: id,
        persistent_id,
        route,
        wish: &wish,
        requested,
        lease_req: lease_req.as_ref(),
        share: &share.name,
        path: &path,
        is_dir,
        conn_id: core.conn_id,
        now_ms: core.now.mono_ms,
        who: Some(&who),
    };
    let joined = arbiter::admit(&server, key, &entry, &open_ask);
    let grant = match joined {
        Ok(Some(g)) => g,
        Ok(None) => {
            drop(node);
            server.drop_file_entry_if_unused(key);
            if file_entry.is_some() {
                server.drop_file_entry_if_unused(key.base());
            }
            return Ok(None);
        }
        Err(s) => {
            drop(node);
            server.drop_file_entry_if_unused(key);
            if file_entry.is_some() {
                server.drop_file_entry_if_unused(key.base());
            }
            return Err(s);
        }
    };
    if let Some(fe) = &file_entry {
        let mut b = lock(fe);
        if b.opens.is_empty() {
            b.share = share.name.clone();
            b.path = path.clone();
            b.is_dir = file_is_dir;
        }
        b.opens.push(ShareEntry {
            owner: id,
            access: 0,
            share_access: 7,
            caching: Default::default(),
            who: None,
        });
        b.streams.push((id, key));
    }
    let leave = |s: NtStatus| {
        arbiter::withdraw(&server, key, &entry, id, &who);
        server.drop_file_entry_if_unused(key);
        if let Some(fe) = &file_entry {
            {
                let mut b = lock(fe);
                b.opens.retain(|o| o.owner != id);
                b.streams.retain(|(o, _)| *o != id);
            }
            server.drop_file_entry_if_unused(key.base());
        }
        s
    };

    // A stream open gives the file attributes only when it made the file.
    let attrs_asked = if stream_name.is_some() && !file_created {
        0
    } else {
        attrs_asked
    };
    // Now change the file: truncate, attributes.
    let mut action = if created {
        CreateAction::CREATED
    } else {
        CreateAction::OPENED
    };
    if truncate && !created {
        node.set_len(0).map_err(|e| leave(status_of(e)))?;
        if stream_name.is_none() && !is_dir {
            // An overwritten file keeps no named streams ([MS-FSA] 2.1.5.1.2.1).
            match node.remove_all_streams() {
                Ok(()) | Err(FsError::Other(EOPNOTSUPP)) => {}
                Err(e) => return Err(leave(status_of(e))),
            }
        }
        action = if disposition == CreateDisposition::SUPERSEDE {
            CreateAction::SUPERSEDED
        } else {
            CreateAction::OVERWRITTEN
        };
    }
    if (created || truncate) && !is_dir && attrs_asked != 0 {
        node.set_dos_attributes(attrs_asked | ATTR_ARCHIVE)
            .map_err(|e| leave(status_of(e)))?;
    } else if created && is_dir && attrs_asked != 0 {
        node.set_dos_attributes(attrs_asked | fileinfo::ATTR_DIRECTORY)
            .map_err(|e| leave(status_of(e)))?;
    }
    if let (true, false, Some(size)) = (created || truncate, is_dir, alloc_given) {
        match node.set_allocation(size) {
            // An open without write access gets no allocation, as on Samba.
            Ok(()) | Err(FsError::AccessDenied) => {}
            Err(e) => return Err(leave(status_of(e))),
        }
    }
    // The creator owns what it creates (the kernel made it theirs, with the
    // group a setgid directory gives); `inherit owner` gives it to the
    // parent directory's owner instead.
    if file_created && share.rules.inherit_owner != identity::InheritOwner::No {
        if let Some(parent) = path.parent() {
            if let Ok(p) = backend.stat(&who, &parent) {
                if let Err(e) = file_node.set_owner(p.uid) {
                    tracing::debug!(
                        "inherit owner: cannot give a new file to uid {}: {e}",
                        p.uid
                    );
                }
            }
        }
    }
    let attr = if created {
        node.stat().map_err(|e| leave(status_of(e)))?
    } else {
        attr
    };
    let dacl_given = sd_given
        .as_ref()
        .is_some_and(|sd| sd.control & SE_DACL_PRESENT != 0);
    if file_created && share.nt_acl_xattr && !dacl_given {
        // The parent's inheritable ACEs make the new file's NT ACL.
        let ids = crate::ntsd::Ids::of(&server);
        crate::ntsd::inherit(
            &share,
            &who,
            &path,
            file_node.as_ref(),
            file_is_dir,
            &ids,
            core.now.filetime,
        )
        .map_err(leave)?;
    }
    if let (true, Some(given)) = (file_created, &sd_given) {
        store_initial_sd(
            &server,
            core.now.filetime,
            file_node.as_ref(),
            &share,
            given,
        )
        .map_err(leave)?;
    }
    let new_content = file_created || (truncate && stream_name.is_none());
    if let (true, Some(eas)) = (new_content, &eas_given) {
        store_initial_eas(file_node.as_ref(), eas, !file_created).map_err(|s| {
            // Not left half-made: the client retries without EAs when they
            // are not supported.
            remove_made();
            leave(s)
        })?;
    }
    let mut attr = if created || truncate {
        node.stat().map_err(|e| leave(status_of(e)))?
    } else {
        attr
    };
    // An open of a file another handle is writing shows that file's write
    // time as the other handles see it (crate::writetime).
    if !created {
        crate::writetime::listed(&server, &mut attr, core.now.mono_ms);
    }

    let mut contexts = response_contexts(&cr, &attr, maximal, file_id_shown(core, &share, &attr));
    if let Some((reply, on)) = aapl {
        contexts.push(CreateContext::new(ringshare_wire::create::tag::AAPL, reply));
        // Once on, it stays on for the connection.
        core.aapl.negotiated = true;
        core.aapl.readdir_attr |= on.readdir_attr;
        core.aapl.copyfile |= on.copyfile;
    }
    if let (Some(l), oplock::LEVEL_LEASE) = (&lease_req, grant.level) {
        contexts.push(lease_response(l, &grant));
    }
    let client_guid = core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid);
    let durability = durable::decide(
        // Streams are never durable (as on Samba).
        if stream_name.is_some() {
            durable::Ask::None
        } else {
            ask
        },
        server.config.durable_v1_timeout_ms,
        grant.level,
        grant.lease_state,
        share.durable_handles,
        share.continuous_availability
            && !is_dir
            && core.negotiated.as_ref().is_some_and(|n| {
                n.server_capabilities & ringshare_wire::consts::Capabilities::PERSISTENT_HANDLES.0
                    != 0
            }),
        owner,
        client_guid,
    )
    .map(|(d, context)| {
        contexts.push(context);
        d
    });
    let file_id = FileId {
        persistent: persistent_id,
        volatile: id,
    };
    let body = response_body(&attr, grant.level, action, file_id, contexts);
    // What watchers of the directory hear, once the open is in place.
    let mut changes: Vec<(u32, u32, Option<String>)> = Vec::new();
    if server.notify.active() {
        use notify::filter::{
            ATTRIBUTES, LAST_WRITE, SIZE, STREAM_NAME, STREAM_SIZE, STREAM_WRITE,
        };
        if file_created {
            changes.push((notify::ADDED, notify::name_filter(file_is_dir), None));
        } else if truncate && stream_name.is_none() {
            changes.push((notify::MODIFIED, SIZE | LAST_WRITE | ATTRIBUTES, None));
        }
        if let Some(n) = &stream_name {
            if created {
                changes.push((notify::ADDED_STREAM, STREAM_NAME, Some(n.clone())));
            } else if truncate {
                let f = STREAM_SIZE | STREAM_WRITE;
                changes.push((notify::MODIFIED_STREAM, f, Some(n.clone())));
            }
        }
    }
    let notify_share = Arc::clone(&share);
    let notify_path = (!changes.is_empty()).then(|| path.clone());

    let open = Open {
        who,
        id,
        persistent_id,
        tree_id: req.tree_id,
        node,
        key,
        entry,
        is_dir,
        access: granted,
        share_access: cr.share_access.0,
        create_options: options,
        share,
        state: Mutex::new(OpenState {
            path,
            delete_on_close,
            dir_cursor: None,
            position: 0,
            mode: options & MODE_FROM_OPTIONS,
            channel_sequence: req.hdr.channel_sequence(),
            durable: durability,
            create_guid: match ask {
                durable::Ask::V2 { create_guid, .. } => Some((client_guid, create_guid)),
                _ => None,
            },
            create_action: action.0,
            replay_eligible: matches!(ask, durable::Ask::V2 { .. }),
            lock_sequences: None,
            watch: None,
            notify_on_close: 0,
            kernel_marked_ms: 0,
            posix_rename: is_dir
                && core.aapl.negotiated
                && notify_share.fruit.as_ref().is_some_and(|f| f.posix_rename),
        }),
        stream: stream_name.zip(file_entry).map(|(name, file_entry)| {
            let afp = crate::fruit::afp::kind(notify_share.fruit.as_deref(), &name);
            Box::new(crate::state::StreamOf {
                now: Mutex::new((name, key)),
                file_entry,
                afp,
            })
        }),
    };
    // A persistent open's record is in etcd before the client hears of it
    // (crate::cluster::ca); without it, no open (etcd cannot be reached:
    // the node refuses rather than promise what it cannot keep).
    if crate::cluster::ca::store(&server, &open).is_err() {
        opens::close_open(&server, Arc::new(open), false);
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    let mut session = lock(&sref);
    if session.closed {
        // Logged off on another channel while the file was being opened.
        drop(session);
        opens::close_open(&server, Arc::new(open), false);
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if let durable::Ask::V2 { create_guid, .. } = ask {
        lock(&server.durables).remember((client_guid, create_guid), req.session_id, id);
    }
    session.opens.insert(id, Arc::new(open));
    drop(session);
    if let Some(path) = notify_path {
        let cs: Vec<notify::Change<'_>> = changes
            .iter()
            .map(|(action, filter, stream)| notify::Change {
                action: *action,
                filter: *filter,
                path: &path,
                stream: stream.as_deref(),
            })
            .collect();
        notify::report(&server, &notify_share, &cs);
    }
    let mut r = Reply::ok(body);
    r.file_id = Some((persistent_id, id));
    Ok(Some(r))
}

/// A named stream opened for CREATE: its node, its name as stored, and
/// whether this open made it.
struct StreamOpened {
    node: Box<dyn Node>,
    name: String,
    created: bool,
}

/// Open (or make) named stream `name` of the file `file` is open on, as
/// `disposition` says ([MS-FSA] 2.1.5.1.2.1 for streams): found ignoring
/// case; never truncated here (after the share-mode check, as files).
fn open_stream(
    file: &Arc<dyn Node>,
    fruit: Option<&crate::fruit::Fruit>,
    name: &str,
    disposition: CreateDisposition,
    truncate: bool,
    granted: u32,
    read_only: bool,
) -> Result<StreamOpened, NtStatus> {
    use crate::fruit::afp::{self, Afp};
    let afp = afp::kind(fruit, name);
    if afp == Afp::Info && fruit.is_some_and(|f| f.metadata == crate::fruit::Metadata::Netatalk) {
        // Kept in the file's Netatalk metadata: no stream to open.
        let exists = afp::netatalk_exists(file.as_ref()).map_err(status_of)?;
        may_take(exists, disposition, read_only)?;
        return Ok(StreamOpened {
            node: Box::new(afp::InfoNode::netatalk(Arc::clone(file))),
            name: crate::fruit::AFPINFO_STREAM.to_string(),
            created: !exists,
        });
    }
    let found = file.find_stream(name).map_err(status_of)?;
    // An AfpInfo exists only as 60 stored bytes; anything else there is a
    // placeholder a create may take over.
    let valid = match (&found, afp) {
        (Some(f), Afp::Info) => afp::is_stored_info(f.size),
        (f, _) => f.is_some(),
    };
    may_take(valid, disposition, false)?;
    let mode = if found.is_some() {
        OpenMode::Existing
    } else {
        OpenMode::CreateNew
    };
    if read_only && (mode == OpenMode::CreateNew || truncate) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let name = found.map_or_else(|| name.to_string(), |f| f.name);
    let write = access::can_write(granted) || truncate;
    let opened = file.open_stream(&name, mode, write).map_err(|e| match e {
        FsError::Other(EOPNOTSUPP) => NtStatus::OBJECT_NAME_INVALID,
        e => status_of(e),
    })?;
    Ok(StreamOpened {
        node: match afp {
            Afp::Info => Box::new(afp::InfoNode::new(opened.node)),
            _ => opened.node,
        },
        name,
        created: opened.created,
    })
}

/// What `disposition` allows for a stream that `exists` or not: an
/// existing one is not made again (COLLISION), a missing one is not opened
/// (NOT_FOUND); on a `read_only` tree none is made.
fn may_take(exists: bool, disposition: CreateDisposition, read_only: bool) -> Result<(), NtStatus> {
    match (exists, disposition) {
        (true, CreateDisposition::CREATE) => Err(NtStatus::OBJECT_NAME_COLLISION),
        (false, CreateDisposition::OPEN | CreateDisposition::OVERWRITE) => {
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        }
        (false, _) if read_only => Err(NtStatus::ACCESS_DENIED),
        _ => Ok(()),
    }
}

/// Open (or make) the resource fork of the file at `path` (open as `file`)
/// in its AppleDouble `._` file ([`crate::fruit::adouble`]), as
/// `disposition` says.
fn open_fork(
    (share, who, path): (&dyn Share, &ringshare_vfs::Who, &RelPath),
    file: &Arc<dyn Node>,
    disposition: CreateDisposition,
    granted: u32,
    read_only: bool,
) -> Result<StreamOpened, NtStatus> {
    use crate::fruit::adouble;
    let exists = match adouble::open(share, who, path, file, false, false) {
        Ok(_) => true,
        Err(FsError::NotFound) => false,
        Err(e) => return Err(status_of(e)),
    };
    may_take(exists, disposition, read_only)?;
    let (node, _) = adouble::open(share, who, path, file, !exists, access::can_write(granted))
        .map_err(status_of)?;
    Ok(StreamOpened {
        node,
        name: crate::fruit::AFPRESOURCE_STREAM.to_string(),
        created: !exists,
    })
}

/// The RqLs response context: the lease's key, its state now, and for
/// version 2 its epoch and parent key ([MS-SMB2] 2.2.14.2.10, 2.2.14.2.11).
fn lease_response(
    req: &ringshare_wire::create::Lease,
    g: &oplock::Grant,
) -> CreateContext<'static> {
    lease_context(req.key, g)
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

/// Give a file just created the descriptor of a SecD context: its owner,
/// group and DACL over what the file got (its POSIX ACL, as the parent's
/// default ACL made it). Without SE_DACL_PRESENT the file keeps its DACL
/// (the one it inherited; smbtorture smb2.create.nulldacl). A backend that
/// cannot store ACLs leaves the file as it is.
fn store_initial_sd(
    server: &ServerState,
    now_filetime: u64,
    node: &dyn Node,
    share: &ShareDef,
    given: &SecurityDescriptor,
) -> Result<(), NtStatus> {
    let mut info = SecurityInformation::empty();
    if given.owner.is_some() {
        info |= SecurityInformation::OWNER;
    }
    if given.group.is_some() {
        info |= SecurityInformation::GROUP;
    }
    if given.control & SE_DACL_PRESENT != 0 {
        info |= SecurityInformation::DACL;
    }
    if info.is_empty() {
        return Ok(());
    }
    let ids = crate::ntsd::Ids::of(server);
    let from = crate::ntsd::From::Client;
    match crate::ntsd::set(node, share, given, info, from, &ids, now_filetime) {
        Err(NtStatus::NOT_SUPPORTED) => Ok(()),
        r => r,
    }
}

/// Give a new or overwritten file the EAs of an ExtA context; an
/// overwritten file loses the ones it had ([MS-FSA] 2.1.5.1.2.1).
fn store_initial_eas(
    node: &dyn Node,
    eas: &[(String, Vec<u8>)],
    replace: bool,
) -> Result<(), NtStatus> {
    if replace {
        let old = match node.list_eas() {
            Ok(old) => old,
            Err(FsError::Other(EOPNOTSUPP)) => Vec::new(),
            Err(e) => return Err(status_of(e)),
        };
        for (name, _) in old {
            node.set_ea(&name, None).map_err(status_of)?;
        }
    }
    crate::cmd::query_info::apply_eas(node, eas)
}

/// DELETE when the parent directory grants FILE_DELETE_CHILD ([MS-FSA]
/// 2.1.5.1.2.1) by a descriptor kept with it, or without one, when the
/// kernel would let the user remove the entry.
fn parent_delete_child(
    share: &ShareDef,
    who: &ringshare_vfs::Who,
    path: &RelPath,
    token: &acl::Token,
) -> u32 {
    let Some(parent) = path.parent() else {
        return 0;
    };
    let mut opts = OpenOptions::read_existing();
    opts.read = false;
    opts.directory = true;
    let Ok(dir) = share.backend.open(who, &parent, &opts) else {
        return 0;
    };
    let Ok(attr) = dir.node.stat_without_dos() else {
        return 0;
    };
    match crate::ntsd::enforced(dir.node.as_ref(), &attr, share) {
        // No descriptor kept with the parent: the kernel's rule for unlink.
        Ok(None) => match share.backend.may_delete(who, path) {
            Ok(true) => acl::DELETE,
            _ => 0,
        },
        Ok(Some((sd, _))) if acl::granted(&sd, token) & acl::FILE_DELETE_CHILD != 0 => acl::DELETE,
        _ => 0,
    }
}

/// Whether directory `dir` has a default POSIX ACL (for `inherit acls`).
fn has_default_acl(backend: &dyn Share, who: &ringshare_vfs::Who, dir: &RelPath) -> bool {
    let mut opts = OpenOptions::read_existing();
    (opts.read, opts.directory) = (false, true);
    backend
        .open(who, dir, &opts)
        .and_then(|d| d.node.posix_acls())
        .is_ok_and(|a| a.default.is_some())
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

/// Resolve a parsed name: exactly when it exists, else component by component
/// case-insensitively. Returns the path as stored (the last component as given
/// when it does not exist) and the file's attributes when it exists.
pub(crate) fn resolve_path(
    backend: &dyn Share,
    who: &ringshare_vfs::Who,
    path: &RelPath,
) -> Result<(RelPath, Option<FileAttr>), NtStatus> {
    match backend.stat(who, path) {
        Ok(a) => return Ok((path.clone(), Some(a))),
        Err(FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory) => {}
        Err(e) => return Err(status_of(e)),
    }
    let comps = path.components();
    let mut cur = RelPath::root();
    for (i, comp) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        match backend.find_name_case_insensitive(who, &cur, comp) {
            Ok(stored) => cur = cur.join(&stored).map_err(status_of)?,
            Err(FsError::NotFound) if last => {
                let p = cur.join(comp).map_err(status_of)?;
                return Ok((p, None));
            }
            Err(FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory) => {
                return Err(NtStatus::OBJECT_PATH_NOT_FOUND)
            }
            Err(e) => return Err(status_of(e)),
        }
    }
    match backend.stat(who, &cur) {
        Ok(a) => Ok((cur, Some(a))),
        Err(FsError::NotFound) => Ok((cur, None)),
        Err(FsError::PathNotFound | FsError::NotADirectory) => Err(NtStatus::OBJECT_PATH_NOT_FOUND),
        Err(e) => Err(status_of(e)),
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
    let mut body = vec![0u8; 64];
    resp.encode(&mut body);
    body.split_off(64)
}
