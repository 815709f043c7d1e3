//! [MS-SMB2] 3.3.5.20 Receiving an SMB2 QUERY_INFO Request: file classes
//! ([MS-FSCC] 2.4, [MS-FSA] 2.1.5.12), file system classes ([MS-FSCC] 2.5,
//! [MS-FSA] 2.1.5.13) and security descriptors: the one stored with the file,
//! else one built from POSIX owner, group and mode. Quotas (SMB2_0_INFO_QUOTA,
//! FileFsControlInformation, and the free space shown under a user's quota) come from the
//! share's quota source (cmd/quota.rs).
//!
//! Sizes: an OutputBufferLength below a class's minimum is
//! INFO_LENGTH_MISMATCH; a variable part (names, streams) that does not fit is
//! cut with BUFFER_OVERFLOW. The minimum of a class with a variable part is
//! the size of its structure as Windows declares it, the first character of
//! the name included and padded to the structure's alignment ([MS-FSA]
//! 2.1.5.13.1's BlockAlign(FieldOffset(VolumeLabel), 8) = 24 for
//! FileFsVolumeInformation; 16 for FileFsAttributeInformation, 8 for
//! FileNameInformation, 104 for FileAllInformation, 32 for a stream entry),
//! which is what Windows and Samba answer (smbtorture
//! smb2.getinfo.qfs_buffercheck / qfile_buffercheck).
//!
//! Access ([MS-SMB2] 3.3.5.20.1): Basic, All, NetworkOpen and AttributeTag
//! need FILE_READ_ATTRIBUTES, FileFullEaInformation needs FILE_READ_EA
//! ([MS-FSA] 2.1.5.12.12), a security descriptor READ_CONTROL. A security
//! descriptor that does not fit is BUFFER_TOO_SMALL with the needed size as
//! error data (3.3.5.20.3).
//!
//! Extended attributes ([MS-FSA] 2.1.5.12.12, the backend's `list_eas`):
//! FileFullEaInformation returns as many whole entries as fit,
//! BUFFER_OVERFLOW when some are left out, BUFFER_TOO_SMALL when not even the
//! first fits, NO_EAS_ON_FILE for a file without any (as Windows and Samba).
//! An input FILE_GET_EA_INFORMATION list picks the EAs by name (a missing one
//! comes back with an empty value); SL_INDEX_SPECIFIED starts at the 1-based
//! index; SL_RETURN_SINGLE_ENTRY returns one. There is no per-open EA cursor:
//! every query without an index starts at the first EA. EaSize (FileEaInformation,
//! FileAllInformation) is the size of the whole FILE_FULL_EA_INFORMATION list,
//! as Samba reports it.

use ringshare_vfs::{ea_name_is_reserved, ea_name_is_valid, FileAttr, FsError, Node, EOPNOTSUPP};
use ringshare_wire::consts::{Dialect, InfoType, QueryInfoFlags, SecurityInformation};
use ringshare_wire::fscc::*;
use ringshare_wire::info::{QueryInfoRequest, QueryInfoResponse};
use ringshare_wire::posix::FsPosixInfo;
use ringshare_wire::security::SecurityDescriptor;
use ringshare_wire::{NtStatus, WriteExt};

use std::sync::Arc;

use crate::cmd::ids::ASK_IDS;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo;
use crate::files::access::{FILE_READ_ATTRIBUTES, FILE_READ_EA, READ_CONTROL};
use crate::fsjob::{FsDone, FsJob};
use crate::fsmap::status_of;
use crate::lookup::{DomainAnswer, Lookup};
use crate::server::lock;
use crate::state::Open;

/// The response body: the fixed part, then the buffer (at least one byte).
fn output_buffer_body(out: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(9 + out.len());
    QueryInfoResponse { buffer: out }.encode(&mut b);
    if out.is_empty() {
        b.push(0);
    }
    b
}

/// Smallest OutputBufferLength for the classes with a name or list at the end
/// (see the module notes).
const FS_VOLUME_MIN: usize = 24;
const FS_ATTRIBUTE_MIN: usize = 16;
const NAME_MIN: usize = 8;
const ALL_MIN: usize = 104;
const STREAM_MIN: usize = 32;

/// An answer: the response body, the class's bytes after room for the response's fixed part
/// (filled in once the status is known, so that the bytes are not copied), and the smallest
/// OutputBufferLength the class accepts.
struct Answer {
    body: Vec<u8>,
    fixed: usize,
}

fn answer(fixed: usize, f: impl FnOnce(&mut Vec<u8>)) -> Result<Answer, NtStatus> {
    // The fixed part, the class's fixed part, and the byte an empty buffer is padded with.
    let mut body = Vec::with_capacity(QueryInfoResponse::HEAD_LEN + fixed + 1);
    body.resize(QueryInfoResponse::HEAD_LEN, 0);
    f(&mut body);
    Ok(Answer { body, fixed })
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let q = QueryInfoRequest::decode(req.msg).map_err(|e| e.status())?;
    if q.output_buffer_length > handles::io_sizes(core).trans {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let dialect = core.dialect();
    let read_only = handles::tree_read_only(core, req);
    let open = handles::find(core, req, q.file_id)?;
    let limit = q.output_buffer_length as usize;
    // On a share whose calls are made away from the I/O thread, the classes the backend
    // answers with a file system call are answered in a job ([`in_job`]).
    let offloaded = open.share.offloaded();
    if offloaded {
        if let Some(answered) = job_answer(core) {
            return answered;
        }
    }
    if q.info_type == InfoType::FILE && FileInfoClass(q.info_class) == FileInfoClass::FULL_EA {
        if offloaded {
            let (o, msg) = (Arc::clone(&open), req.msg.to_vec());
            return in_job(core, &open, "a QUERY_INFO's EAs", move || {
                let q = QueryInfoRequest::decode(&msg).map_err(|e| e.status())?;
                full_ea(&o, &q, limit)
            });
        }
        return full_ea(&open, &q, limit);
    }
    let a = match q.info_type {
        InfoType::FILE => {
            let server = core.server.clone();
            let how = (
                core.now.mono_ms,
                crate::fruit::zero_ids(&core.aapl, &open.share),
                core.aapl.negotiated && open.share.fruit.is_some(),
            );
            let class = FileInfoClass(q.info_class);
            if offloaded {
                // The delete pending (which may ask the file's home) first, here.
                let pending = match class {
                    FileInfoClass::STANDARD | FileInfoClass::ALL => {
                        crate::cmd::pending::delete_pending(core, &open)?
                    }
                    _ => false,
                };
                let o = Arc::clone(&open);
                return in_job(core, &open, "a QUERY_INFO", move || {
                    let a = file_info(&server, &o, class, dialect, how, || Ok(pending))?;
                    finish(a, limit)
                });
            }
            let pending = || crate::cmd::pending::delete_pending(core, &open);
            file_info(&server, &open, class, dialect, how, pending)?
        }
        InfoType::FILESYSTEM => {
            let class = FsInfoClass(q.info_class);
            if let (FsInfoClass::CONTROL, Some(source)) = (class, open.share.quota.clone()) {
                let c = crate::cmd::quota::fs_control(core, &open, source)?;
                return finish(
                    answer(FileFsControlInformation::SIZE, |o| c.encode(o))?,
                    limit,
                );
            }
            let limited = if matches!(class, FsInfoClass::SIZE | FsInfoClass::FULL_SIZE) {
                crate::cmd::quota::limited_space(core, &open)?
            } else {
                None
            };
            if offloaded {
                let o = Arc::clone(&open);
                return in_job(core, &open, "a QUERY_INFO of the file system", move || {
                    finish(fs_info(&o, class, read_only, limited)?, limit)
                });
            }
            fs_info(&open, class, read_only, limited)?
        }
        InfoType::SECURITY => {
            let nfs = core.aapl.negotiated && open.share.fruit.as_ref().is_some_and(|f| f.nfs_aces);
            return security(core, &open, q.additional_information, limit, nfs);
        }
        InfoType::QUOTA => return crate::cmd::quota::query(core, &open, &q),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    finish(a, limit)
}

/// Answer in a file system job ([`crate::fsjob::FsJob::answer`]): `answer` runs on the pool,
/// acting as the open's user, the request parked meanwhile (Err([`ASK_IDS`]) with the job in
/// [`ConnCore::ids_wanted`]); it runs again and sends what the job made ([`job_answer`]). The
/// job is of the open's order, so the open's requests after it wait for it
/// (crates/core/src/conn/behind.rs).
pub(crate) fn in_job(
    core: &mut ConnCore,
    open: &Open,
    what: &'static str,
    answer: impl FnOnce() -> Result<Reply, NtStatus> + Send + 'static,
) -> Result<Reply, NtStatus> {
    let (who, order, share) = crate::cmd::job_of_open(open);
    core.ids_wanted = Some(Lookup::Fs(FsJob::answer(
        who,
        order,
        share,
        what,
        move || answer().map(|r| (r.status, r.body)),
    )));
    Err(ASK_IDS)
}

/// The answer a file system job made for this request, when it asked one and runs again
/// ([`in_job`]); a job that could not run (its user could not be acted as) fails it.
pub(crate) fn job_answer(core: &mut ConnCore) -> Option<Result<Reply, NtStatus>> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Fs(FsDone::Reply(r), _)) => {
            Some(r.map(|(status, body)| Reply::with_status(status, body)))
        }
        Some(DomainAnswer::Fs(FsDone::Done(r), _)) => {
            Some(Err(r.err().map_or(NtStatus::INTERNAL_ERROR, status_of)))
        }
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// The reply carrying answer `a` in at most `limit` bytes: INFO_LENGTH_MISMATCH below the
/// class's fixed size, BUFFER_OVERFLOW with what fits when its variable part does not.
fn finish(a: Answer, limit: usize) -> Result<Reply, NtStatus> {
    if limit < a.fixed {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let mut body = a.body;
    let status = if body.len() - QueryInfoResponse::HEAD_LEN > limit {
        body.truncate(QueryInfoResponse::HEAD_LEN + limit);
        NtStatus::BUFFER_OVERFLOW
    } else {
        NtStatus::SUCCESS
    };
    QueryInfoResponse::fill_head(&mut body);
    if body.len() == QueryInfoResponse::HEAD_LEN {
        body.push(0);
    }
    Ok(Reply::with_status(status, body))
}

/// `\dir\file` (FileAllInformation) or `dir\file` (normalized name).
fn smb_name(open: &Open, leading: bool) -> String {
    let path = lock(&open.entry).path.clone();
    let mut joined = path.components().join("\\");
    if let Some(s) = &open.stream {
        joined = format!("{joined}:{}", s.name());
    }
    if leading {
        format!("\\{joined}")
    } else {
        joined
    }
}

fn file_info(
    server: &crate::server::ServerState,
    open: &Open,
    class: FileInfoClass,
    dialect: Option<Dialect>,
    (now_ms, zero_ids, apple): (u64, bool, bool),
    delete_pending: impl FnOnce() -> Result<bool, NtStatus>,
) -> Result<Answer, NtStatus> {
    // The file id shown: 0 after AAPL on a `fruit:zero_file_id` share.
    let shown_id = |a: &FileAttr| if zero_ids { 0 } else { fileinfo::file_id(a) };
    // The classes that carry FileAttributes (and so need the DOS attributes).
    let needs_attr_access = matches!(
        class,
        FileInfoClass::BASIC
            | FileInfoClass::ALL
            | FileInfoClass::NETWORK_OPEN
            | FileInfoClass::ATTRIBUTE_TAG
            | FileInfoClass::POSIX
    );
    // FILE_POSIX_INFORMATION: on a POSIX open only (Samba's INVALID_LEVEL otherwise).
    if class == FileInfoClass::POSIX && !open.posix {
        return Err(NtStatus::INVALID_LEVEL);
    }
    if needs_attr_access && open.access & FILE_READ_ATTRIBUTES == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Asked of the file's home only by the classes that show it, before the file is read (the
    // request may park and run again: cmd/pending.rs).
    let pending = match class {
        FileInfoClass::STANDARD | FileInfoClass::ALL => delete_pending()?,
        _ => false,
    };
    let mut attr: FileAttr = if needs_attr_access {
        open.node.stat()
    } else {
        open.node.stat_without_dos()
    }
    .map_err(status_of)?;
    crate::writetime::apply(&server.files, open, &mut attr, now_ms);
    match class {
        FileInfoClass::BASIC => answer(FileBasicInformation::SIZE, |o| {
            fileinfo::basic(&attr).encode(o)
        }),
        FileInfoClass::STANDARD => answer(FileStandardInformation::SIZE, |o| {
            fileinfo::standard(&attr, pending).encode(o)
        }),
        FileInfoClass::INTERNAL => answer(8, |o| {
            FileInternalInformation {
                index_number: shown_id(&attr),
            }
            .encode(o)
        }),
        FileInfoClass::EA => {
            let ea_size = ea_size(open.node.as_ref());
            answer(4, |o| FileEaInformation { ea_size }.encode(o))
        }
        FileInfoClass::ACCESS => answer(4, |o| {
            FileAccessInformation {
                access_flags: open.access,
            }
            .encode(o)
        }),
        FileInfoClass::POSITION => answer(8, |o| {
            FilePositionInformation {
                current_byte_offset: lock(&open.state).position,
            }
            .encode(o)
        }),
        FileInfoClass::MODE => answer(4, |o| {
            FileModeInformation {
                mode: lock(&open.state).mode | (open.create_options & 0x1000),
            }
            .encode(o)
        }),
        FileInfoClass::ALIGNMENT => answer(4, |o| {
            FileAlignmentInformation {
                alignment_requirement: 0,
            }
            .encode(o)
        }),
        FileInfoClass::ALL => {
            let (position, mode) = {
                let st = lock(&open.state);
                (st.position, st.mode)
            };
            let all = FileAllInformation {
                basic: fileinfo::basic(&attr),
                standard: fileinfo::standard(&attr, pending),
                internal: FileInternalInformation {
                    index_number: shown_id(&attr),
                },
                ea: FileEaInformation {
                    ea_size: ea_size(open.node.as_ref()),
                },
                access: FileAccessInformation {
                    access_flags: open.access,
                },
                position: FilePositionInformation {
                    current_byte_offset: position,
                },
                mode: FileModeInformation {
                    mode: mode | (open.create_options & 0x1000),
                },
                alignment: FileAlignmentInformation {
                    alignment_requirement: 0,
                },
                name: FileNameInformation {
                    file_name: smb_name(open, true),
                },
            };
            answer(ALL_MIN, |o| all.encode(o))
        }
        FileInfoClass::ALTERNATE_NAME => {
            let path = lock(&open.state).path.clone();
            let short = crate::shortname::short_name(path.file_name().unwrap_or(""));
            answer(NAME_MIN, |o| {
                FileNameInformation {
                    file_name: short.clone(),
                }
                .encode(o)
            })
        }
        FileInfoClass::STREAM => {
            let entries = crate::cmd::stream::entries(open, &attr, apple)?;
            let fixed = if entries.is_empty() { 0 } else { STREAM_MIN };
            answer(fixed, |o| FileStreamInformation { entries }.encode(o))
        }
        FileInfoClass::COMPRESSION => answer(FileCompressionInformation::SIZE, |o| {
            FileCompressionInformation {
                compressed_file_size: fileinfo::sizes(&attr).0,
                ..Default::default()
            }
            .encode(o)
        }),
        FileInfoClass::NETWORK_OPEN => answer(FileNetworkOpenInformation::SIZE, |o| {
            fileinfo::network_open(&attr).encode(o)
        }),
        FileInfoClass::ATTRIBUTE_TAG => {
            // A symlink or special file (a POSIX open's) is a reparse point by its kind,
            // a regular file by the buffer a client stored.
            let (attributes, tag) = match crate::cmd::posix::reparse_tag(attr.kind) {
                Some(tag) => (FileAttributes::REPARSE_POINT.0, tag),
                None => {
                    let stored = crate::cmd::reparse::stored(open.node.as_ref(), &attr);
                    let tag = stored.as_deref().map_or(0, crate::cmd::reparse::tag);
                    (fileinfo::attributes(&attr), tag)
                }
            };
            answer(FileAttributeTagInformation::SIZE, |o| {
                FileAttributeTagInformation {
                    file_attributes: FileAttributes(attributes),
                    reparse_tag: tag,
                }
                .encode(o)
            })
        }
        FileInfoClass::NORMALIZED_NAME => {
            if dialect != Some(Dialect::SMB3_1_1) {
                return Err(NtStatus::NOT_SUPPORTED);
            }
            answer(NAME_MIN, |o| {
                FileNameInformation {
                    file_name: smb_name(open, false),
                }
                .encode(o)
            })
        }
        FileInfoClass::ID => {
            let mut file_id = [0u8; 16];
            file_id[..8].copy_from_slice(&shown_id(&attr).to_le_bytes());
            answer(FileIdInformation::SIZE, |o| {
                FileIdInformation {
                    volume_serial_number: attr.dev,
                    file_id,
                }
                .encode(o)
            })
        }
        FileInfoClass::POSIX => {
            let stored = crate::cmd::reparse::stored(open.node.as_ref(), &attr);
            let info = crate::cmd::posix::info(server, &attr, stored.as_deref(), shown_id(&attr));
            answer(0, |o| info.encode(o))
        }
        _ => Err(NtStatus::INVALID_INFO_CLASS),
    }
}

/// The FILE_FULL_EA_INFORMATION entries of stored EAs.
fn ea_entries(eas: Vec<(String, Vec<u8>)>) -> Vec<FileFullEaEntry> {
    eas.into_iter()
        .map(|(name, value)| FileFullEaEntry {
            flags: 0,
            name: name.into_bytes(),
            value,
        })
        .collect()
}

/// Bytes one entry takes, without the padding that follows it when it is
/// not the last.
fn ea_entry_size(e: &FileFullEaEntry) -> usize {
    FileFullEaInformation::ENTRY_FIXED_SIZE + e.name.len() + 1 + e.value.len()
}

/// The size of the FILE_FULL_EA_INFORMATION list of all of a file's EAs
/// (entries padded to 4 bytes, the last one not): the EaSize reported for
/// it; 0 without EAs or when they cannot be read.
pub(crate) fn ea_size(node: &dyn Node) -> u32 {
    let Ok(eas) = node.list_eas() else {
        return 0;
    };
    let entries = ea_entries(eas);
    let mut size = 0usize;
    for (i, e) in entries.iter().enumerate() {
        size += ea_entry_size(e);
        if i + 1 < entries.len() {
            size = size.next_multiple_of(4);
        }
    }
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// The names of a FILE_GET_EA_INFORMATION list ([MS-FSCC] 2.4.15.1):
/// NextEntryOffset (4), EaNameLength (1), the name and its NUL.
/// EA_LIST_INCONSISTENT when an entry runs past the buffer or its offset
/// does not move forward.
fn get_ea_names(buf: &[u8]) -> Result<Vec<String>, NtStatus> {
    let mut names = Vec::new();
    let mut at = 0usize;
    loop {
        let entry = buf.get(at..).ok_or(NtStatus::EA_LIST_INCONSISTENT)?;
        let (Some(next), Some(&len)) = (entry.get(..4), entry.get(4)) else {
            return Err(NtStatus::EA_LIST_INCONSISTENT);
        };
        let next = u32::from_le_bytes([next[0], next[1], next[2], next[3]]) as usize;
        let len = usize::from(len);
        let name = entry
            .get(5..5 + len)
            .ok_or(NtStatus::EA_LIST_INCONSISTENT)?;
        if entry.get(5 + len) != Some(&0) {
            return Err(NtStatus::EA_LIST_INCONSISTENT);
        }
        let name = std::str::from_utf8(name).map_err(|_| NtStatus::INVALID_EA_NAME)?;
        if !ea_name_is_valid(name) {
            return Err(NtStatus::INVALID_EA_NAME);
        }
        names.push(name.to_ascii_uppercase());
        if next == 0 {
            return Ok(names);
        }
        if next < 6 + len {
            return Err(NtStatus::EA_LIST_INCONSISTENT);
        }
        at = at.checked_add(next).ok_or(NtStatus::EA_LIST_INCONSISTENT)?;
    }
}

/// [MS-FSA] 2.1.5.12.12 FileFullEaInformation (see the module notes).
fn full_ea(open: &Open, q: &QueryInfoRequest<'_>, limit: usize) -> Result<Reply, NtStatus> {
    if open.access & FILE_READ_EA == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let stored = match open.node.list_eas() {
        Ok(eas) => eas,
        Err(FsError::Other(EOPNOTSUPP)) => Vec::new(),
        Err(e) => return Err(status_of(e)),
    };
    let mut entries = if q.input.is_empty() {
        if stored.is_empty() {
            return Err(NtStatus::NO_EAS_ON_FILE);
        }
        let mut all = ea_entries(stored);
        if q.flags.contains(QueryInfoFlags::INDEX_SPECIFIED) {
            let index = q.additional_information as usize;
            if index == 0 || index > all.len() + 1 {
                return Err(NtStatus::NONEXISTENT_EA_ENTRY);
            }
            if index == all.len() + 1 {
                return Err(NtStatus::NO_MORE_EAS);
            }
            all.drain(..index - 1);
        }
        all
    } else {
        let wanted = get_ea_names(q.input)?;
        let mut stored = ea_entries(stored);
        wanted
            .into_iter()
            .map(|name| {
                let name = name.into_bytes();
                match stored.iter().position(|e| e.name == name) {
                    Some(k) => stored.swap_remove(k),
                    None => FileFullEaEntry {
                        flags: 0,
                        name,
                        value: Vec::new(),
                    },
                }
            })
            .collect()
    };
    if q.flags.contains(QueryInfoFlags::RETURN_SINGLE_ENTRY) {
        entries.truncate(1);
    }
    // As many whole entries as fit; each one but the last padded to 4.
    let mut fit = 0usize;
    let mut used = 0usize;
    for e in &entries {
        let start = used.next_multiple_of(4);
        let end = start + ea_entry_size(e);
        if end > limit {
            break;
        }
        used = end;
        fit += 1;
    }
    if fit == 0 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let more = fit < entries.len();
    entries.truncate(fit);
    let mut bytes = Vec::with_capacity(used);
    FileFullEaInformation { entries }.encode(&mut bytes);
    let body = output_buffer_body(&bytes);
    Ok(if more {
        Reply::with_status(NtStatus::BUFFER_OVERFLOW, body)
    } else {
        Reply::ok(body)
    })
}

/// A client's FILE_FULL_EA_INFORMATION list (CREATE's ExtA context,
/// SET_INFO FileFullEaInformation), decoded and with every name checked:
/// EA_LIST_INCONSISTENT when malformed, INVALID_EA_NAME for a name Windows
/// refuses, ACCESS_DENIED for one in the backend's own namespace.
pub(crate) fn parse_eas(buf: &[u8]) -> Result<Vec<(String, Vec<u8>)>, NtStatus> {
    let list = FileFullEaInformation::decode(buf).map_err(|_| NtStatus::EA_LIST_INCONSISTENT)?;
    let mut eas = Vec::with_capacity(list.entries.len());
    for e in list.entries {
        let name = String::from_utf8(e.name).map_err(|_| NtStatus::INVALID_EA_NAME)?;
        if !ea_name_is_valid(&name) {
            return Err(NtStatus::INVALID_EA_NAME);
        }
        if ea_name_is_reserved(&name) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        eas.push((name, e.value));
    }
    Ok(eas)
}

/// Store a client's FILE_FULL_EA_INFORMATION list ([MS-FSA] 2.1.5.1.2.1 and
/// 2.1.5.14.2): an empty value deletes. Every name is checked before
/// anything is stored.
pub(crate) fn store_eas(node: &dyn Node, buf: &[u8]) -> Result<(), NtStatus> {
    apply_eas(node, &parse_eas(buf)?)
}

/// Store EAs from [`parse_eas`].
pub(crate) fn apply_eas(node: &dyn Node, eas: &[(String, Vec<u8>)]) -> Result<(), NtStatus> {
    for (name, value) in eas {
        node.set_ea(name, Some(value)).map_err(|e| match e {
            FsError::Other(EOPNOTSUPP) => NtStatus::EAS_NOT_SUPPORTED,
            FsError::NameTooLong | FsError::InvalidName => NtStatus::INVALID_EA_NAME,
            FsError::Other(E2BIG) => NtStatus::EA_TOO_LARGE,
            e => status_of(e),
        })?;
    }
    Ok(())
}

/// errno E2BIG: a value larger than the filesystem holds in an xattr.
const E2BIG: i32 = 7;

/// `limited`: what a quota leaves the user ([`crate::cmd::quota::limited_space`]):
/// FileFsSizeInformation and FileFsFullSizeInformation show it within the file system's
/// sizes, as Samba does, caller and actual alike.
fn fs_info(
    open: &Open,
    class: FsInfoClass,
    read_only: bool,
    limited: Option<(u64, u64, u64)>,
) -> Result<Answer, NtStatus> {
    let backend = &open.share.backend;
    let sector: u32 = 512;
    let stat = || backend.statfs().map_err(status_of);
    if let Some(space) = limited {
        let s = crate::quota::shown(&stat()?, space);
        // What a quota leaves: caller and actual alike, as Samba shows them.
        let units = (s.total, s.available, s.available);
        return sizes(class, units, s.sectors_per_unit, s.bytes_per_sector);
    }
    match class {
        FsInfoClass::VOLUME => {
            let st = stat()?;
            let v = FileFsVolumeInformation {
                volume_creation_time: FileTime::ZERO,
                volume_serial_number: (st.fs_id ^ (st.fs_id >> 32)) as u32,
                supports_objects: false,
                volume_label: open.share.name.clone(),
            };
            answer(FS_VOLUME_MIN, |o| v.encode(o))
        }
        FsInfoClass::SIZE | FsInfoClass::FULL_SIZE => {
            let mut st = stat()?;
            if let Some(f) = open.share.fruit.as_deref() {
                crate::fruit::time_machine_size(f, open.share.backend.as_ref(), &open.who, &mut st);
            }
            let spu = u32::try_from(st.block_size / u64::from(sector))
                .unwrap_or(1)
                .max(1);
            let units = (st.total_blocks, st.avail_blocks, st.free_blocks);
            sizes(class, units, spu, sector)
        }
        FsInfoClass::DEVICE => answer(FileFsDeviceInformation::SIZE, |o| {
            FileFsDeviceInformation {
                device_type: FILE_DEVICE_DISK,
                characteristics: FILE_DEVICE_IS_MOUNTED,
            }
            .encode(o)
        }),
        FsInfoClass::ATTRIBUTE => {
            let st = stat()?;
            // FILE_CASE_SENSITIVE_SEARCH as NTFS and Samba report it (an
            // exact name is found as given first).
            const FILE_CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
            const FILE_NAMED_STREAMS: u32 = 0x0004_0000;
            let mut flags = FILE_CASE_SENSITIVE_SEARCH
                | FILE_CASE_PRESERVED_NAMES
                | FILE_UNICODE_ON_DISK
                | FILE_PERSISTENT_ACLS
                | ringshare_wire::fscc::FILE_SUPPORTS_SPARSE_FILES;
            if read_only {
                flags |= FILE_READ_ONLY_VOLUME;
            }
            if open.share.has_streams() {
                flags |= FILE_NAMED_STREAMS;
            }
            // Quotas where the share has a source (Samba says so always; smbcquotas asks).
            if open.share.quota.is_some() {
                flags |= FILE_VOLUME_QUOTAS;
            }
            // Block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE) where the
            // share's file system shares extents.
            if open.share.backend.clone_block_size().is_some() {
                flags |= ringshare_wire::fscc::FILE_SUPPORTS_BLOCK_REFCOUNTING;
            }
            // Files compressed on request (FSCTL_SET_COMPRESSION) where the file system
            // compresses (btrfs, as Samba's vfs_btrfs says).
            if open.share.backend.compresses() {
                flags |= ringshare_wire::fscc::FILE_FILE_COMPRESSION;
            }
            let v = FileFsAttributeInformation {
                file_system_attributes: flags,
                maximum_component_name_length: u32::try_from(st.name_max).unwrap_or(255).min(255),
                file_system_name: "NTFS".to_string(),
            };
            answer(FS_ATTRIBUTE_MIN, |o| v.encode(o))
        }
        FsInfoClass::SECTOR_SIZE => answer(FileFsSectorSizeInformation::SIZE, |o| {
            FileFsSectorSizeInformation {
                logical_bytes_per_sector: sector,
                physical_bytes_per_sector_for_atomicity: sector,
                physical_bytes_per_sector_for_performance: sector,
                file_system_effective_physical_bytes_per_sector_for_atomicity: sector,
                flags: SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE,
                byte_offset_for_sector_alignment: 0,
                byte_offset_for_partition_alignment: 0,
            }
            .encode(o)
        }),
        // No access is needed, as on Windows and Samba 4.22; below the 64 bytes
        // INFO_LENGTH_MISMATCH ([MS-FSA] 2.1.5.13.8; Samba cuts with BUFFER_OVERFLOW).
        FsInfoClass::OBJECT_ID => answer(FileFsObjectIdInformation::SIZE, |o| {
            FileFsObjectIdInformation {
                object_id: volume_object_id(&open.share.name),
                // "No extended information written" ([MS-FSCC] 2.5.6): 48 zero bytes.
                // (Samba puts its own magic and version here; ringshare claims none.)
                extended_info: [0; 48],
            }
            .encode(o)
        }),
        FsInfoClass::CONTROL => Err(NtStatus::NOT_SUPPORTED),
        // On other opens INVALID_INFO_CLASS, as Samba answers it.
        FsInfoClass::POSIX if open.posix => {
            let v = crate::cmd::posix::fs_info(&stat()?);
            answer(FsPosixInfo::SIZE, |o| v.encode(o))
        }
        _ => Err(NtStatus::INVALID_INFO_CLASS),
    }
}

/// The object id of share `share`'s volume (FileFsObjectIdInformation, and the BirthVolumeId
/// of FSCTL_CREATE_OR_GET_OBJECT_ID): a GUID named by the share's name, as Samba 4.22 names it
/// (though by another hash), so that it is the same from every handle, after a restart and on
/// every node of a cluster, and differs between shares. The share's name is folded to lower
/// case (share names are case-insensitive). An RFC 9562 version 8 GUID: the first 16 bytes of
/// HMAC-SHA256 keyed with a fixed label, with the version and variant bits set (in the wire's
/// byte order: Data3 is little-endian).
pub(crate) fn volume_object_id(share: &str) -> [u8; 16] {
    let name = share.to_lowercase();
    let mac = ringshare_crypto::hmac_sha256(b"ringshare volume object id", &[name.as_bytes()]);
    let mut id = [0u8; 16];
    id.copy_from_slice(&mac[..16]);
    id[7] = (id[7] & 0x0f) | 0x80;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

/// FileFsSizeInformation (`class` SIZE) or FileFsFullSizeInformation of (total, available to
/// the caller, actually available) allocation units of `spu` sectors of `sector` bytes.
fn sizes(
    class: FsInfoClass,
    (total, caller, actual): (u64, u64, u64),
    spu: u32,
    sector: u32,
) -> Result<Answer, NtStatus> {
    if class == FsInfoClass::SIZE {
        let v = FileFsSizeInformation {
            total_allocation_units: total,
            available_allocation_units: caller,
            sectors_per_allocation_unit: spu,
            bytes_per_sector: sector,
        };
        answer(FileFsSizeInformation::SIZE, |o| v.encode(o))
    } else {
        let v = FileFsFullSizeInformation {
            total_allocation_units: total,
            caller_available_allocation_units: caller,
            actual_available_allocation_units: actual,
            sectors_per_allocation_unit: spu,
            bytes_per_sector: sector,
        };
        answer(FileFsFullSizeInformation::SIZE, |o| v.encode(o))
    }
}

/// [MS-SMB2] 3.3.5.20.3: the descriptor parts `additional` selects.
/// `nfs`: Apple's NFS ACEs are shown ([`crate::fruit::nfs`]).
fn security(
    core: &mut ConnCore,
    open: &Arc<Open>,
    additional: u32,
    limit: usize,
    nfs: bool,
) -> Result<Reply, NtStatus> {
    let info = SecurityInformation(additional);
    if info.intersects(SecurityInformation::SACL) {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    // READ_CONTROL for any part; asking for none gets an empty descriptor
    // without it, as on Windows (smbtorture smb2.sdread).
    let parts = SecurityInformation::OWNER | SecurityInformation::GROUP | SecurityInformation::DACL;
    if info.intersects(parts) && open.access & READ_CONTROL == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (attr, mut sd) = if open.share.offloaded() {
        let Some(read) = crate::cmd::job_made::<DescriptorRead>(core) else {
            return read_descriptor_in_job(core, open);
        };
        let (read, ids_answered) = read?;
        let (attr, sd) = read?;
        if !ids_answered {
            crate::cmd::ids::before_read(core, &sd)?;
        }
        (attr, sd)
    } else {
        let attr = open.node.stat_without_dos().map_err(status_of)?;
        let sids = (&core.server.logons.sid_map, core.now.mono_ms);
        let sd = crate::ntsd::descriptor(open.node.as_ref(), &attr, &open.share, sids)?;
        // Ids of the other idmap backends' ranges the id source must name first.
        crate::cmd::ids::before_read(core, &sd)?;
        (attr, sd)
    };
    if nfs {
        crate::fruit::nfs::add(&mut sd, &attr);
    }
    let bytes = sd.to_bytes(info).map_err(|_| NtStatus::INTERNAL_ERROR)?;
    if bytes.len() > limit {
        // ERROR response with ByteCount 4 and the size needed.
        let mut body = Vec::with_capacity(12);
        body.put_u16(9);
        body.put_u8(0);
        body.put_u8(0);
        body.put_u32(4);
        body.put_u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        return Ok(Reply::with_status(NtStatus::BUFFER_TOO_SMALL, body));
    }
    Ok(Reply::ok(output_buffer_body(&bytes)))
}

/// What a QUERY_INFO security's job read ([`read_descriptor_in_job`]): the file's attributes and
/// descriptor, or the status the read failed with; and whether the id source had answered this
/// request before the job was asked (its ids are not asked about again).
type DescriptorRead = (Result<(FileAttr, SecurityDescriptor), NtStatus>, bool);

/// On a share whose calls may wait on a network (issue 33, plan step 4): the file's attributes
/// and its descriptor (the stored one, or one made from its POSIX ACL) read in a file system
/// job of the open's order, the request parked (Err([`ASK_IDS`])); it runs again with them. The
/// id source is asked after, on the I/O thread, when the descriptor names ids of the other
/// idmap backends' ranges ([`crate::cmd::ids::before_read`]); run again with its answer, the
/// descriptor is read again in a second job (its SIDs are mapped with what the source named),
/// and the source is not asked again.
fn read_descriptor_in_job(core: &mut ConnCore, open: &Arc<Open>) -> Result<Reply, NtStatus> {
    let ids_answered = crate::cmd::ids::took_answer(core);
    let (server, o, now_ms) = (Arc::clone(&core.server), Arc::clone(open), core.now.mono_ms);
    let (who, order, share) = crate::cmd::job_of_open(open);
    core.ids_wanted = Some(Lookup::Fs(FsJob::answer_made(
        who,
        order,
        share,
        "a QUERY_INFO's security descriptor",
        move || {
            let read = || {
                let attr = o.node.stat_without_dos().map_err(status_of)?;
                let sids = (&server.logons.sid_map, now_ms);
                let sd = crate::ntsd::descriptor(o.node.as_ref(), &attr, &o.share, sids)?;
                Ok((attr, sd))
            };
            let read: DescriptorRead = (read(), ids_answered);
            crate::fsjob::Carried::new(read, false)
        },
    )));
    Err(ASK_IDS)
}
