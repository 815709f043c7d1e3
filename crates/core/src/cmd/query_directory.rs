//! [MS-SMB2] 3.3.5.18 Receiving an SMB2 QUERY_DIRECTORY Request, with the
//! enumeration rules of [MS-FSA] 2.1.5.6.3.
//!
//! The first query (or one with RESTART_SCANS / REOPEN) reads the names in
//! the directory once (`list_names`, no stat per entry), keeps those matching
//! the pattern, `.` and `..` first, in the open's [`DirCursor`]; every query
//! pages through it (later ones ignore their pattern) and describes each
//! entry when it returns it (one `stat_entry` on the open directory), so an
//! entry is stat'ed once per listing, one removed in the meantime is not
//! listed (smbtorture smb2.dir.fixed) and one changed is described as it is
//! now.
//! Names a Windows client cannot represent (`:`, `*`, `\`, control
//! characters, ...) are left out.
//!
//! Statuses: a buffer smaller than one entry's fixed part is
//! INFO_LENGTH_MISMATCH; a first entry whose name does not fit is returned cut
//! with BUFFER_OVERFLOW; nothing matching on a fresh scan is NO_SUCH_FILE;
//! nothing left is NO_MORE_FILES.

use ringshare_vfs::FsError;
use ringshare_wire::consts::QueryDirectoryFlags;
use ringshare_wire::dir::{QueryDirectoryRequest, QueryDirectoryResponse};
use ringshare_wire::fscc::dir_info::dir_class_fixed_size;
use ringshare_wire::fscc::{
    encode_dir_entry, name_matches, DirEntryChain, DirEntryInfo, FileInfoClass,
};
use ringshare_wire::NtStatus;

use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo;
use crate::files::access::FILE_LIST_DIRECTORY;
use crate::fsmap::status_of;
use crate::path::check_component;
use crate::server::lock;
use crate::state::{DirCursor, Listed, Open};

/// Bytes of the response's fixed part, kept at the start of the buffer the entries are
/// written into, so that the body is that buffer and no copy of it.
const HEAD: usize = 8;

/// A buffer for a response's entries: [`HEAD`] bytes for the fixed part, room for `room`
/// bytes of entries.
fn start_body(room: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD + room);
    out.resize(HEAD, 0);
    out
}

/// The response body: the fixed part written into the [`HEAD`] bytes [`start_body`] kept,
/// the entries after it.
fn finish_body(mut out: Vec<u8>) -> Vec<u8> {
    let mut head = Vec::with_capacity(HEAD);
    QueryDirectoryResponse::encode_head(&mut head, out.len() - HEAD);
    out[..HEAD].copy_from_slice(&head);
    out
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let q = QueryDirectoryRequest::decode(req.msg).map_err(|e| e.status())?;
    let class = FileInfoClass(q.info_class);
    let fixed = dir_class_fixed_size(class).ok_or(NtStatus::INVALID_INFO_CLASS)?;
    if q.output_buffer_length > handles::io_sizes(core).trans {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let open = handles::find(core, req, q.file_id)?;
    if open.share.offloaded() {
        if let Some(answered) = crate::cmd::query_info::job_answer(core) {
            return answered;
        }
    }
    // The POSIX class: on a POSIX open only (Samba's INVALID_LEVEL otherwise).
    let posix = class == FileInfoClass::POSIX;
    if posix && !open.posix {
        return Err(NtStatus::INVALID_LEVEL);
    }
    let zero_ids = crate::fruit::zero_ids(&core.aapl, &open.share);
    // Apple's attributes in FileIdBothDirectoryInformation after AAPL.
    let apple = match &open.share.fruit {
        Some(f) if core.aapl.negotiated && class == FileInfoClass::ID_BOTH_DIRECTORY => Some(f),
        _ => None,
    };
    if !open.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.access & FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let limit = q.output_buffer_length as usize;
    if limit < fixed {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let asked = Asked {
        class,
        limit,
        flags: q.flags,
        pattern: q.pattern,
        posix,
        zero_ids,
        apple: apple.is_some(),
        now_ms: core.now.mono_ms,
    };
    // On a share whose calls are made away from the I/O thread, the listing and the entries'
    // stat and DOS attribute reads are one file system job (crate::cmd::query_info::in_job).
    if open.share.offloaded() {
        let (server, o) = (core.server.clone(), std::sync::Arc::clone(&open));
        let what = "a QUERY_DIRECTORY";
        return crate::cmd::query_info::in_job(core, &open, what, move || {
            listing(&server, &o, &asked)
        });
    }
    listing(&core.server, &open, &asked)
}

/// What a QUERY_DIRECTORY asks, checked ([`listing`]).
struct Asked {
    class: FileInfoClass,
    limit: usize,
    flags: QueryDirectoryFlags,
    pattern: String,
    /// The POSIX class.
    posix: bool,
    /// File ids shown as 0 (`fruit:zero_file_id` after AAPL).
    zero_ids: bool,
    /// Apple's attributes in FileIdBothDirectoryInformation after AAPL.
    apple: bool,
    now_ms: u64,
}

/// The entries a checked QUERY_DIRECTORY gets: the directory listed when the scan is fresh,
/// and the entries after the open's cursor described.
fn listing(server: &crate::server::ServerState, open: &Open, q: &Asked) -> Result<Reply, NtStatus> {
    let (class, limit, posix, zero_ids) = (q.class, q.limit, q.posix, q.zero_ids);
    let apple = open.share.fruit.as_ref().filter(|_| q.apple);
    // The cursor's own lock, held across the entries' file system calls (in a job on an
    // offloaded share): not the open's state lock, which a LOGOFF, a TREE_DISCONNECT or the
    // connection's end takes on the I/O thread meanwhile.
    let mut kept = lock(&open.dir_cursor);
    let fresh = kept.is_none()
        || q.flags
            .intersects(QueryDirectoryFlags::RESTART_SCANS | QueryDirectoryFlags::REOPEN);
    if fresh {
        let pattern = if q.pattern.is_empty() {
            "*"
        } else {
            &q.pattern
        };
        let entries = list(open, pattern)?;
        *kept = Some(DirCursor { entries, next: 0 });
    }
    let Some(cursor) = kept.as_mut() else {
        return Err(NtStatus::INTERNAL_ERROR);
    };
    if cursor.next >= cursor.entries.len() {
        return Err(if fresh {
            NtStatus::NO_SUCH_FILE
        } else {
            NtStatus::NO_MORE_FILES
        });
    }
    let single = q.flags.contains(QueryDirectoryFlags::RETURN_SINGLE_ENTRY);
    // Room for what most clients ask (64 KiB); a larger limit grows the buffer as it fills.
    let mut out = start_body(limit.min(1 << 16));
    let mut chain = DirEntryChain::new(&out, limit);
    let mut info = DirEntryInfo::default();
    while let Some((name, known)) = cursor.entries.get(cursor.next) {
        // An entry is looked at when it is returned: one removed since the
        // scan is left out, the others are described as they are now.
        let attr = match known {
            // `.` and `..`, described at the scan.
            Some(a) => (**a).clone(),
            None => match open.node.stat_entry(name) {
                Ok(a) => a,
                Err(FsError::NotFound) => {
                    cursor.next += 1;
                    continue;
                }
                // Fail this query if nothing is in it yet; else stop here
                // and let the next query meet the error.
                Err(e) if chain.is_empty() => return Err(status_of(e)),
                Err(_) => break,
            },
        };
        // `hide unreadable`: what the user may not read is not listed; nor
        // are AppleDouble `._` files where fruit vetoes them.
        if crate::fruit::vetoed(&open.share, name) {
            cursor.next += 1;
            continue;
        }
        if known.is_none()
            && open.share.rules.hide_unreadable
            && !open.node.may_read_entry(name).unwrap_or(false)
        {
            cursor.next += 1;
            continue;
        }
        let mut attr = attr;
        if known.is_none() {
            crate::writetime::listed(server, &mut attr, q.now_ms);
        }
        fileinfo::fill_dir_entry_info(&mut info, name, &attr);
        if zero_ids {
            info.file_id = 0;
        }
        // A POSIX open's listing, of any class, shows symlinks and special files as
        // reparse points (Samba 4.22; [MS-FSCC] puts the tag in EaSize where no
        // ReparsePointTag field is).
        if let Some(tag) = crate::cmd::posix::reparse_tag(attr.kind).filter(|_| open.posix) {
            info.file_attributes = ringshare_wire::consts::FileAttributes::REPARSE_POINT;
            (info.ea_size, info.reparse_tag) = (tag, tag);
        }
        // A regular file with a reparse data buffer a client stored shows its tag there too,
        // to every client (Samba 4.22).
        let stored = crate::cmd::reparse::stored_entry(open.node.as_ref(), name, &attr);
        if let Some(b) = &stored {
            let tag = crate::cmd::reparse::tag(b);
            (info.ea_size, info.reparse_tag) = (tag, tag);
        }
        if posix {
            let mut p = crate::cmd::posix::entry(server, &attr, stored.as_deref());
            // The share root's `..` (the root again) has no owner to show: Samba sends
            // NULL SIDs for it.
            // (nor inode and device: 0, as Samba's smb3unix.py test_share_root_null_sids_fid).
            if name == ".." && lock(&open.entry).path.is_root() {
                p.cc.owner = ringshare_wire::security::Sid::null();
                p.cc.group = ringshare_wire::security::Sid::null();
                p.device = 0;
                info.file_id = 0;
            }
            info.posix = Some(p);
        }
        if let Some(f) = apple {
            let dir = lock(&open.entry).path.clone();
            let (max_access, a) =
                crate::fruit::dir_attr(f, &open.share, &open.who, &dir, name, &attr);
            info.ea_size = max_access;
            info.apple = Some(a);
        }
        if !chain.push(&mut out, class, &info) {
            if chain.is_empty() {
                // The first entry alone does not fit: send what fits of it.
                encode_dir_entry(class, &info, &mut out);
                out.truncate(HEAD + limit);
                cursor.next += 1;
                return Ok(Reply::with_status(
                    NtStatus::BUFFER_OVERFLOW,
                    finish_body(out),
                ));
            }
            break;
        }
        cursor.next += 1;
        if single {
            break;
        }
    }
    if chain.is_empty() {
        // Everything left was removed meanwhile.
        return Err(if fresh {
            NtStatus::NO_SUCH_FILE
        } else {
            NtStatus::NO_MORE_FILES
        });
    }
    Ok(Reply::ok(finish_body(out)))
}

/// `.` and `..` (described now) and the names of the directory's entries
/// that match `pattern` (described when they are returned).
fn list(open: &Open, pattern: &str) -> Result<Vec<Listed>, NtStatus> {
    let mut out = Vec::with_capacity(2);
    let me = open.node.stat().map_err(status_of)?;
    let path = lock(&open.entry).path.clone();
    let parent = match path.parent() {
        Some(p) => open
            .share
            .backend
            .stat(&open.who, &p)
            .unwrap_or_else(|_| me.clone()),
        None => me.clone(),
    };
    for (name, attr) in [(".", me), ("..", parent)] {
        if name_matches(pattern, name) {
            out.push((name.to_string(), Some(Box::new(attr))));
        }
    }
    let names = open.node.list_names().map_err(status_of)?;
    out.reserve(names.len());
    for name in names {
        // A POSIX open lists every name (as Samba); others those Windows can represent.
        let shown = if open.posix {
            crate::path::check_posix_component(&name).is_ok()
        } else {
            check_component(&name).is_ok()
        };
        if shown && name_matches(pattern, &name) {
            out.push((name, None));
        }
    }
    Ok(out)
}
