//! [MS-SMB2] 3.3.5.15.6 FSCTL_SRV_COPYCHUNK and FSCTL_SRV_COPYCHUNK_WRITE: a server-side copy
//! into the IOCTL's open (the target) from the open its resume key names (the source).
//!
//! The decisions are made on the I/O thread: the resume key's lookup, the access of both opens,
//! the limits, and the byte-range lock table's checks of every chunk's two ranges before
//! anything is copied (each may ask the file's home: the request parks and runs again, the
//! answers kept, cmd/io_check.rs). Then the chunks are copied in order, each after the source's
//! size is read, the copy stopping at the first chunk refused or failed, with the counts so far
//! in the answer.
//!
//! When either end's share may wait on a network (issue 33; [`offload::applies`]) the file system
//! calls (the checks against local programs' POSIX locks, the source's stat before each chunk,
//! the copies, macOS's copyfile) are one file system job of the target open's order; the
//! request parks meanwhile and is answered with what the job made, the target's watchers and
//! write time told after it on the I/O thread. The job is of the target's order only: the
//! target's later requests wait behind it (the order rule), but the source's requests are not
//! ordered with it. A request about the source sent before the copy and still out (its own job,
//! or its I/O on the ring) may be read around by the copy, as on a local share a WRITE to the
//! source still on the ring when the copy runs would be; a client that wants the source's
//! bytes copied waits for its WRITE's answer first (Windows and Samba's smbtorture do). The
//! source's node is held by the job, so a CLOSE of the source meanwhile does not close the
//! file under it (its last close is then the job's, on the pool).

use std::sync::Arc;

use ringshare_vfs::{Node, RelPath};
use ringshare_wire::consts::Fsctl;
use ringshare_wire::ioctl::{IoctlRequest, SrvCopychunk, SrvCopychunkCopy, SrvCopychunkResponse};
use ringshare_wire::{FileId, NtStatus};

use super::{note_written, offload, open_ref, response_to, OpenRef};
use super::{COPYCHUNK_CHUNK_COUNT_MAX, COPYCHUNK_CHUNK_SIZE_MAX, COPYCHUNK_TOTAL_SIZE_MAX};
use crate::cmd::ids::ASK_IDS;
use crate::cmd::io_check::{io_check_kept, local_probe, table_check_kept};
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access::{FILE_EXECUTE, FILE_READ_DATA, FILE_WRITE_DATA};
use crate::fsjob::LockProbe;
use crate::fsmap::status_of;
use crate::server::lock;

/// The open a resume key names: any open of this connection whose session
/// belongs to the same user as the requesting one.
fn find_by_resume_key(core: &ConnCore, req: &Req<'_>, key: &[u8; 24]) -> Option<OpenRef> {
    let me = core.session(req.session_id)?;
    let (user, anonymous) = {
        let s = lock(&me);
        (s.user.clone(), s.is_anonymous)
    };
    // One session's lock at a time.
    core.sessions
        .values()
        .find_map(|c| {
            let s = lock(&c.session);
            if s.user != user || s.is_anonymous != anonymous {
                return None;
            }
            s.opens.values().find(|o| &o.resume_key() == key).cloned()
        })
        .map(OpenRef::of)
}

/// The IOCTL response body carrying SRV_COPYCHUNK_RESPONSE `r`, to the FSCTL `to`.
fn copy_body(to: (Fsctl, FileId), r: SrvCopychunkResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(SrvCopychunkResponse::LEN);
    r.encode(&mut out);
    response_to(to, &out)
}

/// [MS-SMB2] 3.3.5.15.6. Errors found once chunks are being copied carry a
/// SRV_COPYCHUNK_RESPONSE with the progress so far; a request over the
/// limits gets STATUS_INVALID_PARAMETER with the limits in it.
pub(super) fn copychunk(
    core: &mut ConnCore,
    req: &Req<'_>,
    ir: &IoctlRequest<'_>,
    dest_needs_read: bool,
) -> Result<Reply, NtStatus> {
    let dst = open_ref(core, req, ir.file_id)?;
    // Run again with what its job made: answered, whatever became of the source since (a
    // request that asked no job finds no such answer).
    if let Some(r) = offload::answered(core, &dst) {
        return r;
    }
    if (ir.max_output_response as usize) < SrvCopychunkResponse::LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let to = (ir.ctl_code, ir.file_id);
    let with_body = |status: NtStatus, r: SrvCopychunkResponse| {
        Ok(Reply::with_status(status, copy_body(to, r)))
    };
    let limits = SrvCopychunkResponse {
        chunks_written: COPYCHUNK_CHUNK_COUNT_MAX,
        chunk_bytes_written: COPYCHUNK_CHUNK_SIZE_MAX,
        total_bytes_written: COPYCHUNK_TOTAL_SIZE_MAX,
    };
    let cc = match SrvCopychunkCopy::decode(ir.input, COPYCHUNK_CHUNK_COUNT_MAX as usize) {
        Ok(cc) => cc,
        Err(_)
            if SrvCopychunkCopy::chunk_count(ir.input)
                .is_ok_and(|n| n > COPYCHUNK_CHUNK_COUNT_MAX) =>
        {
            return with_body(NtStatus::INVALID_PARAMETER, limits);
        }
        Err(_) => return Err(NtStatus::INVALID_PARAMETER),
    };
    let total: u64 = cc.chunks.iter().map(|c| u64::from(c.length)).sum();
    if cc
        .chunks
        .iter()
        .any(|c| c.length == 0 || c.length > COPYCHUNK_CHUNK_SIZE_MAX)
        || total > u64::from(COPYCHUNK_TOTAL_SIZE_MAX)
    {
        return with_body(NtStatus::INVALID_PARAMETER, limits);
    }
    let src =
        find_by_resume_key(core, req, &cc.source_key).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    if src.is_dir || dst.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // The source may be on another share (any open of the user's on this connection): the copy
    // is a job when either end's calls may wait on a network.
    let in_job = offload::applies(&dst) || offload::applies(&src);
    // The source may be opened for execute only (Windows and Samba allow it).
    if src.access & (FILE_READ_DATA | FILE_EXECUTE) == 0
        || dst.access & FILE_WRITE_DATA == 0
        || (dest_needs_read && dst.access & FILE_READ_DATA == 0)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if cc.chunks.is_empty() && core.aapl.copyfile {
        if in_job {
            return copyfile_in_job(core, to, &src, &dst);
        }
        let before = offload::Base::of(&dst).read(dst.node.as_ref());
        return match crate::fruit::copyfile(copy_end(&src.open), copy_end(&dst.open)) {
            Ok(total) => {
                note_written(&core.server, &dst, core.now, before);
                with_body(NtStatus::SUCCESS, copied(total))
            }
            Err(s) => with_body(s, SrvCopychunkResponse::default()),
        };
    }
    let checks = lock_checks(core, &src, &dst, &cc.chunks, in_job)?;
    if in_job {
        let (s, d) = (Arc::clone(&src.node), Arc::clone(&dst.node));
        let chunks = cc.chunks;
        let counted = if offload::applies(&dst) { &dst } else { &src };
        let base = offload::Base::of(&dst);
        return offload::ask_counted(core, (&dst, counted), "an FSCTL_SRV_COPYCHUNK", move || {
            let (s, d) = (s.as_ref(), d.as_ref());
            let refused = checks.with_probes_made(s, d);
            let before = base.read(d);
            let mut written = false;
            let r = copy_chunks((s, d), &chunks, refused, || written = true);
            offload::Made {
                answer: r.map(|(status, done)| (status, copy_body(to, done))),
                after: offload::Base::after(written, before),
            }
        });
    }
    let (s, d) = (src.node.as_ref(), dst.node.as_ref());
    let mut before = offload::Base::of(&dst).read(d);
    let (status, done) = copy_chunks((s, d), &cc.chunks, checks.refused, || {
        note_written(&core.server, &dst, core.now, before.take())
    })?;
    with_body(status, done)
}

/// The answer of a copyfile that copied `total` bytes.
fn copied(total: u64) -> SrvCopychunkResponse {
    SrvCopychunkResponse {
        total_bytes_written: u32::try_from(total).unwrap_or(u32::MAX),
        ..Default::default()
    }
}

/// `chunks` copied in order from `src` to `dst`, `refused` (the first chunk the lock checks
/// refused, and why) stopping the copy there: the status to answer with and the counts so far
/// (Err: a status answered without them). `wrote` is called after each chunk copied.
fn copy_chunks(
    (src, dst): (&dyn Node, &dyn Node),
    chunks: &[SrvCopychunk],
    refused: Option<(usize, NtStatus)>,
    mut wrote: impl FnMut(),
) -> Result<(NtStatus, SrvCopychunkResponse), NtStatus> {
    let mut done = SrvCopychunkResponse::default();
    for (i, c) in chunks.iter().enumerate() {
        let len = u64::from(c.length);
        if c.source_offset.checked_add(len).is_none() || c.target_offset.checked_add(len).is_none()
        {
            return Ok((NtStatus::INVALID_PARAMETER, done));
        }
        let src_size = src.stat().map_err(status_of)?.size;
        if c.source_offset + len > src_size {
            return Ok((NtStatus::INVALID_VIEW_SIZE, done));
        }
        match refused {
            Some((at, NtStatus::FILE_LOCK_CONFLICT)) if at == i => {
                return Ok((NtStatus::FILE_LOCK_CONFLICT, done))
            }
            Some((at, s)) if at == i => return Err(s),
            _ => {}
        }
        match dst.copy_range(src, c.source_offset, c.target_offset, len) {
            Ok(n) if n == len => {}
            Ok(_) => return Ok((NtStatus::INVALID_VIEW_SIZE, done)),
            Err(e) => return Ok((status_of(e), done)),
        }
        done.chunks_written += 1;
        done.total_bytes_written += c.length;
        wrote();
    }
    Ok((NtStatus::SUCCESS, done))
}

/// What the lock checks of a copychunk's chunks found: the first chunk refused and why; on a
/// share whose calls may wait on a network, the probes of local programs' POSIX locks each
/// chunk before it asks (source, destination), for its job to make.
struct Checks {
    refused: Option<(usize, NtStatus)>,
    probes: Vec<(Option<LockProbe>, Option<LockProbe>)>,
}

impl Checks {
    /// The first chunk refused once the POSIX lock probes are made (in the job, before
    /// anything is copied, as on the I/O thread): a local program's lock refuses a chunk
    /// before the one the table refused.
    fn with_probes_made(&self, src: &dyn Node, dst: &dyn Node) -> Option<(usize, NtStatus)> {
        // As the I/O thread's check takes it: a probe that fails finds nothing in the way.
        let locked = |node: &dyn Node, probe: Option<LockProbe>| {
            probe.is_some_and(|(kind, start, len)| {
                matches!(node.posix_locked(kind, start, len), Ok(true))
            })
        };
        let first = self
            .probes
            .iter()
            .position(|(s, d)| locked(src, *s) || locked(dst, *d));
        match (first, self.refused) {
            (Some(at), Some((table, _))) if at >= table => self.refused,
            (Some(at), _) => Some((at, NtStatus::FILE_LOCK_CONFLICT)),
            (None, refused) => refused,
        }
    }
}

/// The byte-range lock checks of a copychunk's chunks, source then destination, all before
/// anything is copied: a check may ask the file's home, the request parking for the answer and
/// running again (Err([`ASK_IDS`]), cmd/io_check.rs), which must then find nothing copied yet.
/// The first chunk refused, and why (the copy stops there, as when each chunk was checked just
/// before it was copied). `probes_in_job`: the lock table is checked here and the probes of
/// local POSIX locks are left for the copy's job ([`Checks::with_probes_made`]).
fn lock_checks(
    core: &mut ConnCore,
    src: &OpenRef,
    dst: &OpenRef,
    chunks: &[SrvCopychunk],
    probes_in_job: bool,
) -> Result<Checks, NtStatus> {
    let mut checks = Checks {
        refused: None,
        probes: Vec::new(),
    };
    for (i, c) in chunks.iter().enumerate() {
        let len = u64::from(c.length);
        if c.source_offset.checked_add(len).is_none() || c.target_offset.checked_add(len).is_none()
        {
            break;
        }
        let now = core.now.mono_ms;
        let (src_io, dst_io) = (
            src.io(c.source_offset, len, false, now),
            dst.io(c.target_offset, len, true, now),
        );
        let checked = if probes_in_job {
            let r = table_check_kept(core, &src.open, src_io)
                .and_then(|_| table_check_kept(core, &dst.open, dst_io));
            if r.is_ok() {
                let probes = (
                    local_probe(&src.open, &src_io),
                    local_probe(&dst.open, &dst_io),
                );
                checks.probes.push(probes);
            }
            r
        } else {
            io_check_kept(core, &src.open, src_io)
                .and_then(|_| io_check_kept(core, &dst.open, dst_io))
        };
        match checked {
            Ok(_) => {}
            Err(ASK_IDS) => return Err(ASK_IDS),
            Err(s) => {
                checks.refused = Some((i, s));
                break;
            }
        }
    }
    Ok(checks)
}

/// macOS's copyfile (no chunks, after AAPL with `fruit:copyfile`) in a file system job of the
/// target open's order ([`copychunk`]): the whole file, its streams and metadata copied there;
/// the target's watchers and write time told after it when it copied.
fn copyfile_in_job(
    core: &mut ConnCore,
    to: (Fsctl, FileId),
    src: &OpenRef,
    dst: &OpenRef,
) -> Result<Reply, NtStatus> {
    let (s, d) = (Arc::clone(&src.open), Arc::clone(&dst.open));
    let paths = (lock(&s.entry).path.clone(), lock(&d.entry).path.clone());
    let base = offload::Base::of(dst);
    offload::ask(core, dst, "macOS's copyfile", move || {
        let before = base.read(d.node.as_ref());
        match crate::fruit::copyfile(copy_end_at(&s, paths.0), copy_end_at(&d, paths.1)) {
            Ok(total) => offload::Made {
                answer: Ok((NtStatus::SUCCESS, copy_body(to, copied(total)))),
                after: offload::Base::after(true, before),
            },
            Err(st) => {
                offload::Made::answer(Ok((st, copy_body(to, SrvCopychunkResponse::default()))))
            }
        }
    })
}

/// An open as one end of macOS's copyfile.
fn copy_end(o: &crate::state::Open) -> crate::fruit::CopyEnd<'_> {
    copy_end_at(o, lock(&o.entry).path.clone())
}

/// [`copy_end`] with the open's path read before.
fn copy_end_at(o: &crate::state::Open, path: RelPath) -> crate::fruit::CopyEnd<'_> {
    crate::fruit::CopyEnd {
        node: &o.node,
        share: &o.share,
        who: &o.who,
        path,
    }
}
