//! [MS-SMB2] 3.3.5.13 Receiving an SMB2 WRITE Request.
//!
//! The payload is written from where it landed: when the WRITE is alone in its
//! frame, the driver gets the frame itself and the payload's range in it
//! (`req.msg` starts at `req.msg_offset`: 0, or after the transform header of
//! a frame decrypted in place). In a compound the payload is copied out here.
//!
//! A write moves the open's position to its end, like a read (see read.rs).
//!
//! A handle with FILE_APPEND_DATA and not FILE_WRITE_DATA writes where the
//! request says, as Windows and Samba 4.22 do over SMB2 (smbtorture 4.22
//! smb2.rw.append): the access decides whether it may write, not where.
//!
//! A write that goes through (on a continuously available share, with
//! SMB2_WRITEFLAG_WRITE_THROUGH, with SMB2_WRITEFLAG_WRITE_UNBUFFERED from 3.0.2 on, or
//! through an open whose mode has FILE_WRITE_THROUGH, as Samba 4.22 with its default `strict
//! sync` does) is answered once a second I/O request, an fsync, completed after the write:
//! the I/O thread does not wait for it (the driver puts it on the ring).

use std::sync::Arc;

use ringshare_vfs::Node;
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{Dialect, WriteFlags};
use ringshare_wire::file::{WriteRequest, WriteResponse};
use ringshare_wire::NtStatus;

use crate::arbiter;
use crate::cmd::{Cont, Handled};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access;
use crate::fsmap::status_of;
use crate::io::{IoDone, IoOp};
use crate::server::lock;

/// The largest file a write may make: NTFS's limit, 2^44 - 64 KiB. Windows and
/// Samba answer INVALID_PARAMETER for a write ending past it, and for an offset
/// past i64::MAX, all ones (FILE_WRITE_TO_END_OF_FILE of [MS-FSA] 2.1.5.3)
/// included; smbtorture smb2.rw.invalid checks both.
const MAX_FILE_SIZE: u64 = 0x0FFF_FFFF_0000;

pub(crate) struct WriteCont {
    /// Where the write starts, and the open whose position follows it.
    offset: u64,
    session_id: u64,
    open_id: u64,
    /// A write that goes through: the file, synced (a second I/O request)
    /// before the answer.
    through: Option<Arc<dyn Node>>,
    /// Set once the write is done and its sync asked: the bytes written.
    written: Option<usize>,
}

/// FILE_WRITE_THROUGH in an open's mode ([MS-FSCC] 2.4.26): from its create options, or set
/// with FileModeInformation.
const MODE_WRITE_THROUGH: u32 = 0x0000_0002;

/// Whether the write must reach stable storage before it is answered ([MS-SMB2] 3.3.5.13,
/// [MS-FSA] 2.1.5.3).
fn goes_through(core: &ConnCore, open: &crate::state::Open, flags: WriteFlags) -> bool {
    open.share.continuous_availability
        || flags.contains(WriteFlags::WRITE_THROUGH)
        || (flags.contains(WriteFlags::WRITE_UNBUFFERED)
            && core
                .negotiated
                .as_ref()
                .is_some_and(|n| n.dialect >= Dialect::SMB3_0_2))
        || lock(&open.state).mode & MODE_WRITE_THROUGH != 0
}

/// The WRITE response body, in a reused buffer.
fn response(core: &mut ConnCore, count: usize) -> Vec<u8> {
    if let Some(m) = &core.metrics {
        m.written(count as u64);
    }
    let mut b = core.spare.take(16);
    WriteResponse {
        count: u32::try_from(count).unwrap_or(u32::MAX),
        remaining: 0,
    }
    .encode(&mut b);
    b
}

/// The request's DataOffset (already checked by the decoder to lie in `msg`).
fn data_offset(msg: &[u8]) -> usize {
    msg.get(HEADER_LEN + 2..HEADER_LEN + 4)
        .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])))
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let (wr, len) = match req.detached {
        // The payload was received apart (and is held by the driver).
        Some(n) => match WriteRequest::decode_head(req.msg) {
            Ok((wr, len)) if len == n => (wr, len),
            _ => return Err(NtStatus::INVALID_PARAMETER),
        },
        None => {
            let wr = WriteRequest::decode(req.msg).map_err(|e| e.status())?;
            let len = wr.data.len();
            (wr, len)
        }
    };
    let data_start = data_offset(req.msg);
    handles::check_credit_charge(core, req, len as u64)?;
    if len > handles::io_sizes(core).write as usize {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let read_only = handles::tree_read_only(core, req);
    let open = handles::find(core, req, wr.file_id)?;
    if open.is_dir {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    if read_only || !access::can_write(open.access) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if handles::in_snapshot(&open) {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    if wr.offset > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let offset = wr.offset;
    if len > 0
        && offset
            .checked_add(len as u64)
            .is_none_or(|end| end > MAX_FILE_SIZE)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open
        .stream
        .as_ref()
        .is_some_and(|s| s.afp == crate::fruit::afp::Afp::Info)
    {
        // Checked and stored here ([`crate::fruit::afp`]); a payload
        // received apart (256 KiB or more) is not an AfpInfo.
        if req.detached.is_some() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let (n, delete) = afp_write(core, &open, wr.offset, wr.data)?;
        if delete {
            lock(&open.state).delete_on_close = true;
        }
        return Ok(Handled::Reply(Reply::ok(response(core, n))));
    }
    let in_xattr = open.stream.as_ref().is_some_and(|s| {
        s.afp != crate::fruit::afp::Afp::Resource || !crate::fruit::keeps_appledouble(&open.share)
    });
    if in_xattr && offset + len as u64 > ringshare_vfs::STREAM_SIZE_MAX {
        // A stream is one xattr (docs/limits.md), refused before any I/O.
        return Err(NtStatus::FILE_SYSTEM_LIMITATION);
    }
    if len == 0 {
        return Ok(Handled::Reply(Reply::ok(response(core, 0))));
    }
    let io = arbiter::IoAsk {
        owner: open.id,
        offset,
        length: len as u64,
        write: true,
        change: true,
        now_ms: core.now.mono_ms,
    };
    if crate::cmd::io_check::stream_io_applies(&open) && req.detached.is_none() {
        return stream_write(core, req, &open, &wr, io);
    }
    // Asked of the file's home away from the I/O thread when no grant decides it (the WRITE
    // parks and runs again with its frame, or with its head while the driver keeps a payload
    // received apart: cmd/io_check.rs). On a share whose calls may wait on a network the
    // file's modification time before its first WRITE is asked in the checks' job too.
    let want_mtime = open.share.offloaded() && lock(&open.entry).write_time.needs_base();
    let checked = crate::cmd::io_check::io_check_sized(core, &open, io, (false, want_mtime))?;
    book_write_time(core, &open, checked.mtime);
    let through = goes_through(core, &open, wr.flags).then(|| open.node.clone());
    if req.detached.is_some() {
        return Ok(Handled::Io {
            node: open.node.clone(),
            op: IoOp::WriteReceived { offset, len },
            cont: Cont::Write(WriteCont {
                offset,
                session_id: req.session_id,
                open_id: open.id,
                through: through.clone(),
                written: None,
            }),
        });
    }
    let (buf, start, end) = if req.sole {
        let start = req.msg_offset + data_start;
        (Vec::new(), start, start + len)
    } else {
        (wr.data.to_vec(), 0, len)
    };
    Ok(Handled::Io {
        node: open.node.clone(),
        op: IoOp::Write {
            offset,
            buf,
            start,
            end,
        },
        cont: Cont::Write(WriteCont {
            offset,
            session_id: req.session_id,
            open_id: open.id,
            through,
            written: None,
        }),
    })
}

/// An AfpInfo stream's WRITE ([`crate::fruit::afp::write`]: the payload checked, the 60-byte
/// blob stored): on a share whose calls may wait on a network in a file system job of the
/// open's order (the WRITE parks and runs again with what it came to: the count, and whether
/// an empty FinderInfo deletes the stream at its close), else here.
fn afp_write(
    core: &mut ConnCore,
    open: &crate::state::Open,
    offset: u64,
    data: &[u8],
) -> Result<(usize, bool), NtStatus> {
    if !open.share.offloaded() {
        return crate::fruit::afp::write(open.node.as_ref(), offset, data);
    }
    if let Some(r) = crate::cmd::job_made::<Result<(usize, bool), NtStatus>>(core) {
        return r.and_then(|written| written);
    }
    let (who, order, share) = crate::cmd::job_of_open(open);
    let (node, data) = (open.node.clone(), data.to_vec());
    let job = crate::fsjob::FsJob::answer_made(who, order, share, "an AfpInfo WRITE", move || {
        let r = crate::fruit::afp::write(node.as_ref(), offset, &data);
        crate::fsjob::Carried::new(r, false)
    });
    core.ids_wanted = Some(crate::lookup::Lookup::Fs(job));
    Err(crate::cmd::ids::ASK_IDS)
}

/// The write time of a WRITE of `open`: its first WRITE's from the modification time before it
/// (`mtime`, when the checks asked it: crates/core's writetime), a later one's noted.
fn book_write_time(
    core: &ConnCore,
    open: &crate::state::Open,
    mtime: Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>>,
) {
    {
        let mut e = lock(&open.entry);
        if !e.write_time.needs_base() {
            e.write_time.wrote(
                open.id,
                core.now.mono_ms,
                crate::writetime::nanos(core.now),
                None,
            );
            return;
        }
    }
    crate::writetime::wrote(&core.server.files, open, core.now, mtime);
}

/// A named stream's WRITE on a share whose calls may wait on a network
/// ([`crate::cmd::io_check::stream_io_applies`]): its checks, its write (the POSIX backend's
/// xattr read and write, made on the I/O thread elsewhere: the driver's `run_here`) and, for a
/// write that goes through, its sync are one file system job; the WRITE parks and runs again
/// with how it went. The write time is booked then (on the I/O thread, as elsewhere, whatever
/// the write came to) and the answer made as [`finish`] makes it.
fn stream_write(
    core: &mut ConnCore,
    req: &Req<'_>,
    open: &Arc<crate::state::Open>,
    wr: &WriteRequest<'_>,
    io: arbiter::IoAsk,
) -> Result<Handled, NtStatus> {
    let want_mtime = lock(&open.entry).write_time.needs_base();
    let through = goes_through(core, open, wr.flags);
    let (node, data, offset) = (open.node.clone(), wr.data.to_vec(), wr.offset);
    let made = crate::cmd::io_check::stream_io(core, open, io, want_mtime, move || {
        match node.write_at(&data, offset) {
            Ok(n) if through => match node.sync() {
                Ok(()) => IoDone::Write(Ok(n)),
                Err(e) => IoDone::Sync(Err(e)),
            },
            r => IoDone::Write(r),
        }
    })?;
    book_write_time(core, open, made.mtime);
    let cont = WriteCont {
        offset,
        session_id: req.session_id,
        open_id: open.id,
        through: None,
        written: None,
    };
    finish(core, cont, made.done)
}

/// The write (or, after it, its sync) completed: answer, or ask for the sync first.
pub(crate) fn finish(core: &mut ConnCore, c: WriteCont, done: IoDone) -> Result<Handled, NtStatus> {
    let n = match (done, c.written) {
        (IoDone::Write(Ok(n)), None) => match &c.through {
            // Acknowledged means on stable storage: the fsync is one more request the
            // driver completes (on the ring), not a wait of this thread.
            Some(node) => {
                return Ok(Handled::Io {
                    node: node.clone(),
                    op: IoOp::Sync,
                    cont: Cont::Write(WriteCont {
                        written: Some(n),
                        ..c
                    }),
                })
            }
            None => n,
        },
        (IoDone::Sync(Ok(())), Some(n)) => n,
        (IoDone::Write(Err(e)) | IoDone::Sync(Err(e)), _) => return Err(status_of(e)),
        _ => return Err(NtStatus::INTERNAL_ERROR),
    };
    handles::set_position(
        core,
        c.session_id,
        c.open_id,
        c.offset.saturating_add(n as u64),
        true,
    );
    Ok(Handled::Reply(Reply::ok(response(core, n))))
}
