//! [MS-SMB2] 3.3.5.21 Receiving an SMB2 SET_INFO Request, with the file
//! semantics of [MS-FSA] 2.1.5.14.
//!
//! File classes: Basic (times; 0 and -1/-2 leave a time alone; attributes
//! stored through the backend), Rename, Disposition / DispositionEx,
//! EndOfFile, Allocation, Position, Mode, FullEa (extended attributes: set,
//! or delete with an empty value; FILE_WRITE_EA). Security descriptors: the parts
//! given are merged into the file's descriptor and stored with it (the
//! backend's `set_security_descriptor`); they are not applied to access
//! checks. Quotas and FileFsControlInformation on a quota handle (cmd/quota.rs); other file
//! system settings: NOT_SUPPORTED.

use std::sync::{Arc, Mutex};

mod job;
mod moves;
mod stream_move;
pub(crate) use job::{abandon, changed, Changing};

use ringshare_vfs::{FsError, RelPath, SetTimes};
use ringshare_wire::consts::{InfoType, SecurityInformation};
use ringshare_wire::fscc::{
    FileAllocationInformation, FileBasicInformation, FileDispositionInformation,
    FileDispositionInformationEx, FileEndOfFileInformation, FileInfoClass, FileModeInformation,
    FilePositionInformation, FileRenameInformation, FsInfoClass, TimeChange,
    FILE_DISPOSITION_DELETE, FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE, FILE_DISPOSITION_ON_CLOSE,
};
use ringshare_wire::info::{SetInfoRequest, SetInfoResponse};
use ringshare_wire::security::SecurityDescriptor;
use ringshare_wire::{NtStatus, WireError};

use crate::arbiter;
use crate::cmd::home_asks::HomeAsks;
use crate::cmd::resolve::resolve_path;
use crate::cmd::{Handled, LookupCont};
use crate::dirlease;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo::{self, ATTR_DIRECTORY, ATTR_READONLY, SETTABLE_ATTRIBUTES};
use crate::files::access::{
    DELETE, FILE_WRITE_ATTRIBUTES, FILE_WRITE_DATA, WRITE_DAC, WRITE_OWNER,
};
use crate::fsmap::status_of;
use crate::io::Now;
use crate::notify;
use crate::path::parse_smb_path;
use crate::server::{lock, FileEntry, ServerState};
use crate::state::Open;
use crate::writetime;

const ATTR_TEMPORARY: u32 = 0x0000_0100;
/// FILE_WRITE_EA ([MS-SMB2] 2.2.13.1.1): needed to set extended attributes.
const FILE_WRITE_EA: u32 = 0x0000_0010;
/// FileModeInformation bits a client may set ([MS-FSCC] 2.4.26).
const MODE_SETTABLE: u32 = 0x0000_0002 | 0x0000_0004 | 0x0000_0010 | 0x0000_0020;

fn ok_body() -> Vec<u8> {
    let mut b = Vec::with_capacity(2);
    SetInfoResponse.encode(&mut b);
    b
}

fn bad(_: WireError) -> NtStatus {
    NtStatus::INFO_LENGTH_MISMATCH
}

/// What a change that must wait for other clients' break acknowledgments
/// returns inside this module (a rename); never a status on the wire.
const WAIT: NtStatus = NtStatus::PENDING;

/// SET_INFO: its reply; [`Handled::WaitForBreaks`] while a rename waits for other clients to
/// acknowledge breaks of their handle caching; a question to the file's home (another node)
/// when it sets a delete pending ([`disposed`] goes on with the answer).
/// A rename's questions to a file's home park it ([`HomeAsks`]), a fresh one's and one run
/// again after it waited for breaks ([`crate::cmd::create::retry`]) alike.
pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    match set_info(core, req) {
        Err(WAIT) => Ok(Handled::WaitForBreaks),
        other => other,
    }
}

fn set_info(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let s = SetInfoRequest::decode(req.msg).map_err(|e| e.status())?;
    if s.buffer.len() > handles::io_sizes(core).trans as usize {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let read_only = handles::tree_read_only(core, req);
    let server = core.server.clone();
    let open = handles::find(core, req, s.file_id)?;
    if handles::in_snapshot(&open) {
        snapshot_refusal(s.info_type, FileInfoClass(s.info_class))?;
    }
    match s.info_type {
        InfoType::FILE if is_disposition(FileInfoClass(s.info_class)) => {
            if read_only {
                return Err(NtStatus::ACCESS_DENIED);
            }
            let (delete, on_close, ignore_readonly) =
                disposition(FileInfoClass(s.info_class), s.buffer)?;
            // On a share whose calls may wait on a network the file's attributes and a
            // directory's names are read in a job first ([`moves::delete_facts`]).
            let facts = match delete && open.share.offloaded() {
                true if open.access & DELETE == 0 => return Err(NtStatus::ACCESS_DENIED),
                true => Some(moves::delete_facts(core, &open)?),
                false => None,
            };
            let flags = (delete, on_close, ignore_readonly);
            return set_disposition(&server, &open, flags, facts);
        }
        InfoType::FILE => {
            let mut asks = HomeAsks::of(core);
            let class = FileInfoClass(s.info_class);
            // A rename's or link's look at its target, made in a job ([`moves`]).
            let looked = match class {
                FileInfoClass::RENAME | FileInfoClass::LINK if open.share.offloaded() => {
                    moves::looked(core)
                }
                _ => None,
            };
            let r = set_file(
                &server,
                (core.now, core.conn_id),
                &open,
                (class, s.buffer),
                read_only,
                (&mut asks, looked),
            );
            asks.done(core);
            // On a share whose calls may wait on a network the change is a file system job
            // ([`job`]): the request parks.
            if let Some(parked) = r? {
                return Ok(parked);
            }
        }
        InfoType::SECURITY => {
            if read_only {
                return Err(NtStatus::ACCESS_DENIED);
            }
            let nfs = core.aapl.negotiated && open.share.fruit.as_ref().is_some_and(|f| f.nfs_aces);
            let parked = set_security(
                core,
                &open,
                SecurityInformation(s.additional_information),
                s.buffer,
                nfs,
            )?;
            if let Some(parked) = parked {
                return Ok(parked);
            }
            notify::modified(&server, &open, notify::filter::SECURITY);
        }
        InfoType::FILESYSTEM if FsInfoClass(s.info_class) == FsInfoClass::CONTROL => {
            crate::cmd::quota::set_fs(core, &open, s.buffer, read_only)?;
        }
        InfoType::QUOTA => crate::cmd::quota::set_user(core, &open, s.buffer)?,
        InfoType::FILESYSTEM => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    Ok(Handled::Reply(Reply::ok(ok_body())))
}

/// What a SET_INFO on an open of a file in a snapshot answers, as Samba 4.22 does: a rename
/// or hard link (out of the snapshot's volume) NOT_SAME_DEVICE, any other change of the file
/// (its size, allocation, attributes, times, EAs, delete disposition, short name, valid data
/// length, security descriptor) MEDIA_WRITE_PROTECTED; only the handle's own position and mode
/// may be set.
fn snapshot_refusal(info_type: InfoType, class: FileInfoClass) -> Result<(), NtStatus> {
    match info_type {
        InfoType::FILE if matches!(class, FileInfoClass::POSITION | FileInfoClass::MODE) => Ok(()),
        InfoType::FILE
            if matches!(
                class,
                FileInfoClass::RENAME | FileInfoClass::RENAME_EX | FileInfoClass::LINK
            ) =>
        {
            Err(NtStatus::NOT_SAME_DEVICE)
        }
        InfoType::FILE | InfoType::SECURITY => Err(NtStatus::MEDIA_WRITE_PROTECTED),
        _ => Ok(()),
    }
}

/// `when`: now and this connection's id (a rename may wait). On a share whose calls may wait
/// on a network, the times, attributes, end of file, allocation and EAs are set in a file
/// system job once decided here ([`job`]): the request parks (`Some`).
fn set_file(
    server: &Arc<ServerState>,
    when: (Now, u64),
    open: &Arc<Open>,
    (class, buf): (FileInfoClass, &[u8]),
    read_only: bool,
    (asks, looked): (&mut HomeAsks, Option<Result<moves::Looked, NtStatus>>),
) -> Result<Option<Handled>, NtStatus> {
    let handle_local = matches!(class, FileInfoClass::POSITION | FileInfoClass::MODE);
    if read_only && !handle_local {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let offloaded = open.share.offloaded();
    match class {
        FileInfoClass::BASIC => {
            let b = FileBasicInformation::decode(buf).map_err(bad)?;
            let plan = basic_plan(open, &b)?;
            if offloaded {
                return Ok(Some(job::basic(open, when.0, plan)));
            }
            let changed = set_basic(server, open, &plan)?;
            // A written handle's update shows now (Windows; smbtorture
            // smb2.timestamps.delayed-write-vs-setbasic), unless the write
            // time itself was set.
            writetime::immediate(open, when.0);
            notify::modified(server, open, changed);
            if changed != 0 {
                entry_changed(server, open, when.0.mono_ms);
            }
            Ok(None)
        }
        FileInfoClass::RENAME => {
            let r = name_info(buf)?;
            rename(server, when, open, &r, (asks, looked))
        }
        FileInfoClass::END_OF_FILE => {
            let v = FileEndOfFileInformation::decode(buf).map_err(bad)?;
            if open.access & FILE_WRITE_DATA == 0 {
                return Err(NtStatus::ACCESS_DENIED);
            }
            if open.is_dir || v.end_of_file > i64::MAX as u64 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let afp_info = open
                .stream
                .as_ref()
                .is_some_and(|s| s.afp == crate::fruit::afp::Afp::Info);
            if afp_info && v.end_of_file > crate::fruit::afp::AFP_INFO_SIZE as u64 {
                return Err(NtStatus::ALLOTTED_SPACE_EXCEEDED);
            }
            break_caches(server, open, when.0.mono_ms, asks);
            if offloaded {
                return Ok(Some(job::end_of_file(open, when.0, v.end_of_file)));
            }
            open.node.set_len(v.end_of_file).map_err(status_of)?;
            writetime::immediate(open, when.0);
            notify::modified(server, open, notify::filter::SIZE);
            entry_changed(server, open, when.0.mono_ms);
            Ok(None)
        }
        FileInfoClass::ALLOCATION => {
            let v = FileAllocationInformation::decode(buf).map_err(bad)?;
            if open.access & FILE_WRITE_DATA == 0 {
                return Err(NtStatus::ACCESS_DENIED);
            }
            if open.is_dir || v.allocation_size > i64::MAX as u64 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            break_caches(server, open, when.0.mono_ms, asks);
            if offloaded {
                return Ok(Some(job::allocation(open, when.0, v.allocation_size)));
            }
            writetime::immediate(open, when.0);
            // A smaller allocation cuts the file ([MS-FSA] 2.1.5.14.1).
            let size = open.node.stat().map_err(status_of)?.size;
            if v.allocation_size < size {
                open.node.set_len(v.allocation_size).map_err(status_of)?;
                notify::modified(server, open, notify::filter::SIZE);
                entry_changed(server, open, when.0.mono_ms);
            }
            open.node
                .set_allocation(v.allocation_size)
                .map_err(status_of)?;
            Ok(None)
        }
        FileInfoClass::POSITION => {
            let v = FilePositionInformation::decode(buf).map_err(bad)?;
            if v.current_byte_offset > i64::MAX as u64 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            lock(&open.state).position = v.current_byte_offset;
            Ok(None)
        }
        FileInfoClass::MODE => {
            let v = FileModeInformation::decode(buf).map_err(bad)?;
            if v.mode & !MODE_SETTABLE != 0 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            lock(&open.state).mode = v.mode;
            Ok(None)
        }
        FileInfoClass::FULL_EA => {
            // [MS-FSA] 2.1.5.14.2 FileFullEaInformation.
            if open.access & FILE_WRITE_EA == 0 {
                return Err(NtStatus::ACCESS_DENIED);
            }
            if offloaded {
                let eas = crate::cmd::query_info::parse_eas(buf)?;
                return Ok(Some(job::eas(open, when.0, eas)));
            }
            crate::cmd::query_info::store_eas(open.node.as_ref(), buf)?;
            notify::modified(server, open, notify::filter::EA);
            Ok(None)
        }
        FileInfoClass::LINK => {
            let r = name_info(buf)?;
            link(server, when, open, &r, (asks, looked))
        }
        FileInfoClass::VALID_DATA_LENGTH | FileInfoClass::SHORT_NAME | FileInfoClass::RENAME_EX => {
            Err(NtStatus::NOT_SUPPORTED)
        }
        _ => Err(NtStatus::INVALID_INFO_CLASS),
    }
}

/// [MS-SMB2] 3.3.5.21.3: set the parts `info` selects. Owner and group need
/// WRITE_OWNER, the DACL WRITE_DAC; a SACL needs ACCESS_SYSTEM_SECURITY, which
/// no open holds. The descriptor becomes the file's POSIX owner, group and
/// ACL ([`crate::ntsd::set`]), so the kernel enforces it. On a share whose calls may wait on a
/// network the descriptor is stored and the mode set in a file system job ([`job::security`]):
/// the request parks (`Some`). With an id source, the file's descriptor is read first (its ids
/// asked about), in a job of its own there ([`job::current_ids`]).
fn set_security(
    core: &mut ConnCore,
    open: &Arc<Open>,
    mut info: SecurityInformation,
    buf: &[u8],
    nfs: bool,
) -> Result<Option<Handled>, NtStatus> {
    if info.intersects(SecurityInformation::SACL) {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    let owner_or_group = SecurityInformation::OWNER | SecurityInformation::GROUP;
    if (info.intersects(owner_or_group) && open.access & WRITE_OWNER == 0)
        || (info.contains(SecurityInformation::DACL) && open.access & WRITE_DAC == 0)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut given =
        SecurityDescriptor::decode(buf).map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
    // A POSIX open's chmod: the mode alone changes, whatever else the descriptor says (Samba
    // 4.22); the kernel decides whether the user may.
    if open.posix && info.contains(SecurityInformation::DACL) {
        if let Some(mode) = crate::fruit::nfs::posix_chmod(&given) {
            if open.share.offloaded() {
                let nothing = SecurityInformation(0);
                return Ok(Some(job::security(
                    core,
                    open,
                    (given, nothing),
                    Some(mode),
                )));
            }
            return open.node.set_mode(mode).map_err(status_of).map(|()| None);
        }
    }
    // macOS sets a file's mode through an NFS ACE ([`crate::fruit::nfs`]).
    let mode = if nfs && info.contains(SecurityInformation::DACL) {
        let (mode, only_nfs) = crate::fruit::nfs::take(&mut given);
        if only_nfs {
            info = SecurityInformation(info.0 & !SecurityInformation::DACL.0);
        }
        mode
    } else {
        None
    };
    if !info.is_empty() {
        // Domain SIDs the id source must place first, and the SIDs of the file's ids the
        // stored descriptor will show ([`crate::cmd::ids`]).
        let current = match core.server.logons.id_source() {
            // Read in a job of its own first (the request parks and runs again).
            Some(_) if open.share.offloaded() => job::current_ids(core, open)?,
            Some(_) => {
                let attr = open.node.stat_without_dos().map_err(status_of)?;
                let sids = (&core.server.logons.sid_map, core.now.mono_ms);
                let sd = crate::ntsd::descriptor(open.node.as_ref(), &attr, &open.share, sids)?;
                crate::cmd::ids::unix_ids(&sd)
            }
            None => Vec::new(),
        };
        crate::cmd::ids::before_set(core, &given, &current)?;
        if open.share.offloaded() {
            return Ok(Some(job::security(core, open, (given, info), mode)));
        }
        let server = &core.server;
        let ids = server.logons.ids(core.now.mono_ms);
        crate::ntsd::set(
            open.node.as_ref(),
            &open.share,
            &given,
            info,
            crate::ntsd::From::Client,
            &ids,
            core.now.filetime,
        )?;
    }
    if let Some(m) = mode {
        if open.share.offloaded() {
            let nothing = SecurityInformation(0);
            return Ok(Some(job::security(core, open, (given, nothing), Some(m))));
        }
        open.node.set_mode(m).map_err(status_of)?;
    }
    Ok(None)
}

fn time_of(t: TimeChange) -> Option<i128> {
    match t {
        TimeChange::Set(t) => Some(t.to_unix_nanos()),
        TimeChange::Keep | TimeChange::StopAutoUpdate | TimeChange::ResumeAutoUpdate => None,
    }
}

/// A FileBasicInformation decided: the times to set (`changed`: their CompletionFilter bits)
/// and the DOS attributes to store, if any.
struct Basic {
    times: SetTimes,
    changed: u32,
    attrs: Option<u32>,
}

/// FileBasicInformation's checks, and what it sets.
fn basic_plan(open: &Open, b: &FileBasicInformation) -> Result<Basic, NtStatus> {
    if open.access & FILE_WRITE_ATTRIBUTES == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let attrs = b.file_attributes.0;
    if attrs != 0 {
        if attrs & ATTR_DIRECTORY != 0 && !open.is_dir {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if attrs & ATTR_TEMPORARY != 0 && open.is_dir {
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    let times = SetTimes {
        atime: time_of(b.last_access_time.set_info_action()),
        mtime: time_of(b.last_write_time.set_info_action()),
        btime: time_of(b.creation_time.set_info_action()),
    };
    let stored = attrs & SETTABLE_ATTRIBUTES;
    Ok(Basic {
        changed: job::times_bits(&times),
        times,
        attrs: (attrs != 0).then_some(if open.is_dir {
            stored | ATTR_DIRECTORY
        } else {
            stored
        }),
    })
}

/// Returns the CompletionFilter bits of what it changed.
fn set_basic(server: &ServerState, open: &Open, b: &Basic) -> Result<u32, NtStatus> {
    let mut changed = b.changed;
    if changed != 0 {
        open.node.set_times(&b.times).map_err(status_of)?;
        if let Some(t) = b.times.mtime {
            writetime::set_sticky(&server.files, open, t);
        }
    }
    if let Some(a) = b.attrs {
        open.node.set_dos_attributes(a).map_err(status_of)?;
        changed |= notify::filter::ATTRIBUTES;
    }
    Ok(changed)
}

fn is_disposition(class: FileInfoClass) -> bool {
    class == FileInfoClass::DISPOSITION || class == FileInfoClass::DISPOSITION_EX
}

/// FileDispositionInformation or FileDispositionInformationEx ([`set_disposition`]): delete,
/// on close, ignore the read-only attribute.
fn disposition(class: FileInfoClass, buf: &[u8]) -> Result<(bool, bool, bool), NtStatus> {
    if class == FileInfoClass::DISPOSITION {
        let d = FileDispositionInformation::decode(buf).map_err(bad)?;
        return Ok((d.delete_pending, false, false));
    }
    let d = FileDispositionInformationEx::decode(buf).map_err(bad)?;
    Ok((
        d.flags & FILE_DISPOSITION_DELETE != 0,
        d.flags & FILE_DISPOSITION_ON_CLOSE != 0,
        d.flags & FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE != 0,
    ))
}

/// [MS-FSA] 2.1.5.14.3 FileDispositionInformation (and the Ex form). The delete pending is
/// the file's home's: when that is another node, the request parks while it is asked away
/// from the I/O thread ([`disposed`]). `facts`: what a job read of the file system for it
/// (a share whose calls may wait on a network: [`moves::delete_facts`]), else read here.
fn set_disposition(
    server: &ServerState,
    open: &Arc<Open>,
    (delete, on_close, ignore_readonly): (bool, bool, bool),
    facts: Option<moves::DeleteFacts>,
) -> Result<Handled, NtStatus> {
    if open.access & DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if delete {
        let (attr, empty) = match facts {
            Some(f) => (f.attr?, f.empty),
            None => (open.node.stat().map_err(status_of)?, None),
        };
        if !ignore_readonly && !open.is_dir && fileinfo::attributes(&attr) & ATTR_READONLY != 0 {
            return Err(NtStatus::CANNOT_DELETE);
        }
        let empty = match empty {
            Some(e) => e?,
            None => !open.is_dir || open.node.list_names().map_err(status_of)?.is_empty(),
        };
        if open.is_dir && !empty {
            return Err(NtStatus::DIRECTORY_NOT_EMPTY);
        }
        if lock(&open.entry).path.is_root() {
            return Err(NtStatus::CANNOT_DELETE);
        }
    }
    if delete {
        // Who made the delete pending: see FileEntry::delete_parent_key.
        let mut e = lock(&open.entry);
        e.delete_parent_key = crate::files::oplock::parent_key_of(&e, open.id);
    }
    if on_close {
        lock(&open.state).delete_on_close = delete;
        return Ok(Handled::Reply(Reply::ok(ok_body())));
    }
    let (node, key) = (&server.node, open.key);
    match arbiter::delete_pending_or_ask(node, key, &open.entry, Some(delete)) {
        arbiter::Decision::Made(set) => pending_set(server, open, set),
        arbiter::Decision::Ask(ask, ()) => Ok(Handled::lookup(
            crate::lookup::Lookup::Home(ask),
            LookupCont::Disposition(Box::new(AtHome {
                open: Arc::clone(open),
            })),
        )),
    }
}

/// A SET_INFO of a delete pending parked while its file's home (another node) sets it.
pub(crate) struct AtHome {
    open: Arc<Open>,
}

/// The file's home answered a parked SET_INFO of a delete pending: it is answered as one
/// decided at once would be.
pub(crate) fn disposed(
    core: &ConnCore,
    fin: AtHome,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    let set = arbiter::delete_pending_answered(&fin.open.entry, done.home());
    pending_set(&core.server, &fin.open, set)
}

/// The delete pending is set (or not): a directory's watchers below hear that it newly is.
fn pending_set(
    server: &ServerState,
    open: &Open,
    set: Result<(bool, bool), NtStatus>,
) -> Result<Handled, NtStatus> {
    let (_, newly) = set?;
    if newly && open.is_dir {
        let path = lock(&open.entry).path.clone();
        notify::dir_delete_pending(server, &open.share, &path, open.key);
    }
    Ok(Handled::Reply(Reply::ok(ok_body())))
}

/// [MS-FSA] 2.1.5.14.11 FileRenameInformation. The target is a share-relative
/// name parsed like a CREATE name; its directory is found case-insensitively.
/// On a share whose calls may wait on a network, what follows the checks of the server's state
/// is [`moves::rename`]'s (jobs; the request parks: `Some`).
fn rename(
    server: &Arc<ServerState>,
    (now, conn_id): (Now, u64),
    open: &Arc<Open>,
    r: &FileRenameInformation,
    (asks, looked): (&mut HomeAsks, Option<Result<moves::Looked, NtStatus>>),
) -> Result<Option<Handled>, NtStatus> {
    let now_ms = now.mono_ms;
    if open.access & DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.root_directory != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if let Some(s) = &open.stream {
        if open.share.offloaded() {
            return stream_move::rename(server, now, open, r);
        }
        return crate::cmd::stream::rename(server, open, s, r).map(|()| None);
    }
    // A file whose streams are open keeps its name (their opens hold it,
    // smbtorture smb2.streams.basefile-rename-with-open-stream); so does a
    // directory with files open below it (Windows), unless macOS renames it
    // (fruit's POSIX rename); a POSIX open of it minds only the Windows opens
    // below (Samba 4.22's have_file_open_below).
    let (share_name, source_path) = {
        let e = lock(&open.entry);
        if !e.streams.is_empty() {
            return Err(NtStatus::ACCESS_DENIED);
        }
        (e.share.clone(), e.path.clone())
    };
    if open.is_dir
        && !lock(&open.state).posix_rename
        && server
            .files
            .opens_below(&share_name, &source_path, open.posix)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.share.offloaded() {
        return moves::rename(server, (now, conn_id), open, r, asks, looked);
    }
    let backend = open.share.backend.clone();
    let who = &open.who;
    let Target {
        parent: tparent,
        name: tname,
        path: target,
        parent_attr: pattr,
    } = target_of(open, &r.file_name)?;
    let tname = tname.as_str();
    let source = lock(&open.entry).path.clone();
    if source.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if target == source {
        return Ok(None);
    }
    // A file takes no entry by rename in a directory someone holds open
    // with DELETE access (smbtorture smb2.oplock.exclusive6 and batch20, as
    // Windows and Samba); a directory does (smb2.notify-inotify renames one
    // while another client watches its parent, opened with DELETE: Samba
    // passes all three).
    // The handle caching of such a directory's leases is broken first, and
    // the rename waits for that: a client that closes the handle it only
    // kept cached lets the rename through (smbtorture 4.22
    // smb2.dirlease.rename_dst_parent, as Samba).
    parent_refuses(server, (pattr, open), (now_ms, conn_id), asks)?;
    // Other clients give up caching handles of the file first.
    if asks.rename_waits(server, open.key, &open.entry, open.id, (conn_id, now_ms))? {
        return Err(WAIT);
    }
    // Another file already holds the name (case-insensitively; for a POSIX
    // open, exactly)?
    let holder = match open.posix {
        true => backend.stat(who, &target).map(|_| tname.to_string()),
        false => backend.find_name_case_insensitive(who, &tparent, tname),
    };
    let mut replaced = None;
    match holder {
        Ok(stored) => {
            let existing = tparent.join(&stored).map_err(status_of)?;
            if existing != source {
                if !r.replace_if_exists {
                    return Err(NtStatus::OBJECT_NAME_COLLISION);
                }
                let a = backend.stat(who, &existing).map_err(status_of)?;
                if a.is_dir() {
                    return Err(NtStatus::ACCESS_DENIED);
                }
                if target_is_open(server, &a, open.id, (now_ms, conn_id), asks)? {
                    return Err(NtStatus::ACCESS_DENIED);
                }
                replaced = Some(server.node.file_key(&a));
                if existing != target {
                    backend.unlink(who, &existing).map_err(status_of)?;
                }
            }
        }
        Err(FsError::NotFound) => {}
        Err(e) => return Err(status_of(e)),
    }
    backend
        .rename(who, &source, &target, r.replace_if_exists)
        .map_err(status_of)?;
    server.files.name_changed(&open.share.name, &source);
    server.files.name_changed(&open.share.name, &target);
    // The POSIX opens of the file replaced keep it without a name.
    if let Some(e) = replaced.and_then(|k| server.files.existing(k)) {
        lock(&e).unlinked = true;
    }
    // fruit: the file's AppleDouble `._` file (its resource fork) follows.
    if !open.is_dir && crate::fruit::keeps_appledouble(&open.share) {
        let ads =
            crate::fruit::adouble::sidecar(&source).zip(crate::fruit::adouble::sidecar(&target));
        if let Some((from, to)) = ads {
            match backend.rename(who, &from, &to, true) {
                Ok(()) | Err(FsError::NotFound) => {}
                Err(e) => tracing::debug!("AppleDouble file not renamed with its file: {e}"),
            }
        }
    }
    // The home hears of it by a call nobody waits for.
    asks.moved(server, open.key, &open.entry, &target);
    if open.is_dir {
        server.files.moved_below(&open.share.name, &source, &target);
    }
    {
        let mut st = lock(&open.state);
        st.path = target.clone();
        if !open.is_dir {
            // Windows reports a renamed file MODIFIED too, when it is closed.
            st.notify_on_close |= notify::filter::ATTRIBUTES | notify::filter::CREATION;
        }
    }
    notify::renamed(server, &open.share, &source, &target, open.is_dir);
    // The leases of both directories break (of one, within one directory).
    let except = dirlease::parent_key(open);
    let share = &open.share.name;
    dirlease::entry_changed(server, share, &source, except, Some(now_ms));
    if source.parent() != target.parent() {
        dirlease::entry_changed(server, share, &target, except, Some(now_ms));
    }
    Ok(None)
}

/// A file (not a directory) renamed into directory `pattr`, which someone holds open with
/// DELETE access: the handle caching of its leases is broken first and the rename waits
/// ([`WAIT`]); held still, SHARING_VIOLATION ([`rename`]).
fn parent_refuses(
    server: &ServerState,
    (pattr, open): (Option<ringshare_vfs::FileAttr>, &Open),
    (now_ms, conn_id): (u64, u64),
    asks: &mut HomeAsks,
) -> Result<(), NtStatus> {
    if let (Some(pa), false) = (pattr, open.is_dir) {
        let pkey = server.node.file_key(&pa);
        let deleting = |e: &Arc<Mutex<FileEntry>>| {
            let e = lock(e);
            e.opens.iter().any(|o| o.access & DELETE != 0)
        };
        if let Some(pe) = server.files.existing(pkey).filter(deleting) {
            if asks.rename_waits(server, pkey, &pe, open.id, (conn_id, now_ms))? {
                return Err(WAIT);
            }
            if deleting(&pe) {
                return Err(NtStatus::SHARING_VIOLATION);
            }
        }
    }
    Ok(())
}

/// FileRenameInformation or FileLinkInformation (the same layout).
fn name_info(buf: &[u8]) -> Result<FileRenameInformation, NtStatus> {
    FileRenameInformation::decode(buf).map_err(|e| match e {
        WireError::BadName => NtStatus::OBJECT_NAME_INVALID,
        _ => NtStatus::INFO_LENGTH_MISMATCH,
    })
}

/// Where a rename or link puts the file: its directory (found
/// case-insensitively, as the open's user), the name and the path.
struct Target {
    parent: RelPath,
    name: String,
    path: RelPath,
    parent_attr: Option<ringshare_vfs::FileAttr>,
}

fn target_of(open: &Open, file_name: &str) -> Result<Target, NtStatus> {
    let name = file_name.strip_prefix('\\').unwrap_or(file_name);
    let target = parse_smb_path(name)?;
    let (Some(tparent), Some(tname)) = (target.parent(), target.file_name()) else {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    };
    let backend = open.share.backend.as_ref();
    let (parent, parent_attr) = resolve_path(backend, &open.who, &tparent, open.posix)?;
    if !parent_attr.as_ref().is_some_and(|a| a.is_dir()) {
        return Err(NtStatus::OBJECT_PATH_NOT_FOUND);
    }
    let path = parent.join(tname).map_err(status_of)?;
    Ok(Target {
        parent,
        name: tname.to_string(),
        path,
        parent_attr,
    })
}

/// [MS-FSA] 2.1.5.14.6 FileLinkInformation (the SMB2 form has the layout of
/// FileRenameInformation): a new name for the open's file in a directory of
/// the share, made with linkat as the open's user (the kernel decides).
/// Not of a directory (FILE_IS_A_DIRECTORY) or a stream (INVALID_PARAMETER),
/// as Samba answers. Watchers hear ADDED; the new name's directory's leases
/// break but the one the open's lease names as its parent's (Samba 4.22,
/// smbtorture smb2.dirlease.hardlink).
fn link(
    server: &Arc<ServerState>,
    (now, conn_id): (Now, u64),
    open: &Arc<Open>,
    r: &FileRenameInformation,
    (asks, looked): (&mut HomeAsks, Option<Result<moves::Looked, NtStatus>>),
) -> Result<Option<Handled>, NtStatus> {
    if r.root_directory != 0 || open.stream.is_some() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.is_dir {
        return Err(NtStatus::FILE_IS_A_DIRECTORY);
    }
    if open.share.offloaded() {
        return moves::link(server, (now, conn_id), open, r, asks, looked);
    }
    let now_ms = now.mono_ms;
    let (backend, who) = (open.share.backend.clone(), &open.who);
    let Target {
        parent: tparent,
        name: tname,
        path: target,
        ..
    } = target_of(open, &r.file_name)?;
    let tname = tname.as_str();
    let source = lock(&open.entry).path.clone();
    match backend.find_name_case_insensitive(who, &tparent, tname) {
        Ok(stored) => {
            if !r.replace_if_exists {
                return Err(NtStatus::OBJECT_NAME_COLLISION);
            }
            let existing = tparent.join(&stored).map_err(status_of)?;
            let a = backend.stat(who, &existing).map_err(status_of)?;
            if a.is_dir() {
                return Err(NtStatus::FILE_IS_A_DIRECTORY);
            }
            if target_is_open(server, &a, open.id, (now_ms, conn_id), asks)? {
                return Err(NtStatus::ACCESS_DENIED);
            }
            backend.unlink(who, &existing).map_err(status_of)?;
        }
        Err(FsError::NotFound) => {}
        Err(e) => return Err(status_of(e)),
    }
    backend.link(who, &source, &target).map_err(status_of)?;
    let change = notify::Change {
        action: notify::ADDED,
        filter: notify::filter::FILE_NAME,
        path: &target,
        stream: None,
    };
    notify::report(server, &open.share, &[change]);
    let except = dirlease::parent_key(open);
    dirlease::entry_changed(server, &open.share.name, &target, except, Some(now_ms));
    Ok(None)
}

/// Is the file a rename would replace open? Its holders first give up caching
/// its handle (a lease's H, a batch oplock) and the rename waits for that
/// ([`WAIT`]): a client that closes the handle it only kept cached lets the
/// rename through; one that keeps it open makes it ACCESS_DENIED (smbtorture
/// 4.22 smb2.lease.v2_rename_target_overwrite, as Samba).
fn target_is_open(
    server: &ServerState,
    target: &ringshare_vfs::FileAttr,
    renaming: u64,
    (now_ms, conn_id): (u64, u64),
    asks: &mut HomeAsks,
) -> Result<bool, NtStatus> {
    let key = server.node.file_key(target);
    let Some(entry) = server.files.existing(key) else {
        return Ok(false);
    };
    // Every open's handle caching is given up first, a POSIX open's too (Samba 4.22's
    // rename_dst_check); then POSIX opens do not keep the file from being replaced.
    if asks.rename_waits(server, key, &entry, renaming, (conn_id, now_ms))? {
        return Err(WAIT);
    }
    let windows_open = lock(&entry).opens.iter().any(|o| !o.posix);
    Ok(windows_open)
}

/// The file of `open` changed (attributes, times, size): the leases on its
/// directory break, but the one its lease names as its parent's (here, and
/// at the directory's home when that is another node that wants changes).
fn entry_changed(server: &ServerState, open: &Open, now_ms: u64) {
    if server.files.any_dir_leased() || server.notify.remote() {
        let path = lock(&open.entry).path.clone();
        let except = dirlease::parent_key(open);
        dirlease::entry_changed(server, &open.share.name, &path, except, Some(now_ms));
    }
}

/// A size change breaks the read caching of the file's other opens (the call to a file's home
/// on another node is posted: [`HomeAsks::changed`]).
fn break_caches(server: &ServerState, open: &Open, now_ms: u64, asks: &mut HomeAsks) {
    asks.changed(server, open.key, &open.entry, (open.id, now_ms));
}
