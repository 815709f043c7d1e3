//! [MS-SMB2] 3.3.5.12 Receiving an SMB2 READ Request.
//!
//! Checks (access, size, credit charge, byte-range locks) happen here; the
//! read itself is done by the driver ([`IoOp::Read`]) and the reply is built in
//! [`finish`], with the file data kept out of the body (`Reply::data`) so it is
//! sent without a copy: DataOffset 0x50, the data right after the 16-byte body.
//!
//! A read that returns data moves the open's position (FilePositionInformation)
//! to its end, as [MS-FSA] 2.1.5.2 does for synchronous I/O; Samba does this for
//! every open and smbtorture (smb2.read.position, samba3 target) expects it.

use std::sync::Arc;

use ringshare_wire::file::{ReadRequest, ReadResponse};
use ringshare_wire::transform::TRANSFORM_HEADER_LEN;
use ringshare_wire::NtStatus;

use crate::arbiter;
use crate::cmd::{Cont, Handled};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access;
use crate::fsmap::status_of;
use crate::io::{IoDone, IoOp};
use crate::state::Open;

mod sparse;

/// READs up to this long are read into memory even when they could be
/// spliced: a splice runs in an io_uring worker thread, and for small reads that
/// hop costs more than the copy it saves (4 KiB random reads measured 4-5x
/// slower spliced). At 64 KiB the two cost the server about the same, but the
/// client copies spliced data out of cold page-cache pages and spends twice
/// the CPU, so on one machine 64 KiB reads run 10-15 % faster from memory;
/// from 128 KiB on, splicing is 1.6x faster (docs/benchmarks.md).
pub(crate) const SPLICE_ONLY_ABOVE: usize = 64 * 1024;

/// Room left before READ data for the frame header, SMB2 header and READ
/// response body, so a reply alone in its frame is built around the data
/// (and, encrypted, the transform header too).
const READ_HEADROOM: usize = 4 + 64 + 16;

pub(crate) struct ReadCont {
    len: u32,
    /// Bytes before the data in the buffer the driver returns.
    headroom: usize,
    min_count: u32,
    /// Where the read starts, and the open (session, volatile id) whose
    /// position follows it.
    offset: u64,
    session_id: u64,
    open_id: u64,
    /// The READ asked for a compressed response, on a connection that agreed to compression:
    /// its open (which learns whether compressing paid).
    compress: Option<Arc<Open>>,
    /// A compressed READ of a range with holes: the data ranges read one
    /// after another, the holes never read ([`sparse`]).
    sparse: Option<Box<sparse::Sparse>>,
}

/// The 16-byte READ response body for `data_len` bytes sent after it, in a
/// reused buffer.
fn head(core: &mut ConnCore, data_len: usize) -> Vec<u8> {
    let mut b = core.spare.take(16);
    ReadResponse::encode_head(&mut b, data_len, 0, 0);
    b
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let rr = ReadRequest::decode(req.msg).map_err(|e| e.status())?;
    handles::check_credit_charge(core, req, u64::from(rr.length))?;
    if rr.length > handles::io_sizes(core).read {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let open = handles::find(core, req, rr.file_id)?;
    if open.is_dir {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    if !access::can_read(open.access) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // A read may not reach past i64::MAX (smb2.rw.invalid: INVALID_PARAMETER).
    if rr
        .offset
        .checked_add(u64::from(rr.length))
        .is_none_or(|end| end > i64::MAX as u64)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if rr.length == 0 {
        if rr.minimum_count > 0 {
            return Err(NtStatus::END_OF_FILE);
        }
        let mut r = Reply::ok(head(core, 0));
        r.data = Some(Vec::new());
        return Ok(Handled::Reply(r));
    }
    let io = arbiter::IoAsk {
        owner: open.id,
        offset: rr.offset,
        length: u64::from(rr.length),
        write: false,
        change: false,
        now_ms: core.now.mono_ms,
    };
    if crate::cmd::io_check::stream_io_applies(&open) {
        return stream_read(core, req, &open, &rr, io);
    }
    // Asked of the file's home away from the I/O thread when no grant decides it (the READ
    // parks and runs again: cmd/io_check.rs); on a share whose calls may wait on a network,
    // the check against local POSIX locks and the size read below are asked away from it too.
    let want_size = open.node.reads_within_size() || rr.length as usize > SPLICE_ONLY_ABOVE;
    let checked = crate::cmd::io_check::io_check_sized(core, &open, io, (want_size, false))?;
    let (writers, mut known_size) = (checked.writers, checked.size);
    let compress = crate::exchange::compress::read_asks(core, rr.flags, open.share.compress_data)
        && !crate::exchange::compress::skips(&open);
    let (node, open_id) = (open.node.clone(), open.id);
    let mut size_of = |node: &Arc<dyn ringshare_vfs::Node>| {
        known_size
            .take()
            .unwrap_or_else(|| node.size())
            .map_err(status_of)
    };
    if rr.length as usize > SPLICE_ONLY_ABOVE
        && splice_allowed(core, req, writers)
        && !compress
        && node.shared_fd().is_some()
    {
        // The reply header carries the length, so it must be known now.
        let size = size_of(&node)?;
        let n = size.saturating_sub(rr.offset).min(u64::from(rr.length)) as usize;
        if n == 0 || n < rr.minimum_count as usize {
            return Err(NtStatus::END_OF_FILE);
        }
        handles::set_position(core, req.session_id, open_id, rr.offset + n as u64, false);
        let mut r = Reply::ok(head(core, n));
        r.file = Some((node, rr.offset, n));
        return Ok(Handled::Reply(r));
    }
    let headroom = headroom_of(req);
    let base = ReadCont {
        len: rr.length,
        headroom,
        min_count: rr.minimum_count,
        offset: rr.offset,
        session_id: req.session_id,
        open_id,
        compress: compress.then(|| open.clone()),
        sparse: None,
    };
    // Holes go as Pattern_V1 payloads: found, not read.
    let base = if compress && crate::exchange::compress::sends_patterns(core) {
        match sparse::start(core, &node, base)? {
            Ok(handled) => return Ok(handled),
            Err(base) => base,
        }
    } else {
        base
    };
    // On a file system whose io_uring reads must not come up short (FUSE:
    // [`ringshare_vfs::Node::reads_within_size`]), ask for no more than the
    // file holds now.
    let len = if node.reads_within_size() {
        let size = size_of(&node)?;
        let n = size.saturating_sub(rr.offset).min(u64::from(rr.length)) as u32;
        if n == 0 || n < rr.minimum_count {
            return Err(NtStatus::END_OF_FILE);
        }
        n
    } else {
        rr.length
    };
    Ok(Handled::Io {
        node,
        op: IoOp::Read {
            offset: rr.offset,
            len: len as usize,
            headroom,
        },
        cont: Cont::Read(ReadCont { len, ..base }),
    })
}

/// Alone in its frame, the reply can be laid out around the data in place: the room left
/// before it.
fn headroom_of(req: &Req<'_>) -> usize {
    match (req.sole, req.encrypted) {
        (false, _) => 0,
        (true, false) => READ_HEADROOM,
        // Also the transform header: the reply is sealed where it lies.
        (true, true) => READ_HEADROOM + TRANSFORM_HEADER_LEN,
    }
}

/// A named stream's READ on a share whose calls may wait on a network
/// ([`crate::cmd::io_check::stream_io_applies`]): its checks and its read (an xattr call of the
/// POSIX backend, made on the I/O thread elsewhere: the driver's `run_here`) are one file system
/// job; the READ parks and runs again with the data, answered as [`finish`] answers a read's
/// data. No size is asked first (the stream's read comes up short at its end by itself), and
/// no splice or hole search: the data is in memory.
fn stream_read(
    core: &mut ConnCore,
    req: &Req<'_>,
    open: &Arc<Open>,
    rr: &ReadRequest,
    io: arbiter::IoAsk,
) -> Result<Handled, NtStatus> {
    let (node, headroom) = (open.node.clone(), headroom_of(req));
    let (offset, len) = (rr.offset, rr.length as usize);
    let made = crate::cmd::io_check::stream_io(core, open, io, false, move || {
        let mut buf = vec![0u8; headroom + len];
        IoDone::Read(node.read_at(&mut buf[headroom..], offset).map(|n| {
            buf.truncate(headroom + n);
            buf
        }))
    })?;
    let compress = crate::exchange::compress::read_asks(core, rr.flags, open.share.compress_data)
        && !crate::exchange::compress::skips(open);
    let cont = ReadCont {
        len: rr.length,
        headroom,
        min_count: rr.minimum_count,
        offset: rr.offset,
        session_id: req.session_id,
        open_id: open.id,
        compress: compress.then(|| Arc::clone(open)),
        sparse: None,
    };
    finish(core, cont, made.done)
}

/// May this READ's data go from the page cache to the socket by splice?
///
/// Only when nothing needs the bytes in memory (the reply is neither signed
/// nor encrypted), the READ is alone in its frame (no compound padding after
/// the data), and no open of the file can write to it: spliced pages are
/// referenced, not copied, until the peer has them, so a write landing in
/// that window would change bytes already "sent". With a writer open the
/// data is read into a buffer instead (docs/architecture.md, "Consistency").
fn splice_allowed(core: &ConnCore, req: &Req<'_>, writers: bool) -> bool {
    core.send_file
        && req.sole
        && !req.encrypted
        && !writers
        && core
            .reply_signing_key(&req.hdr, req.session_id, None, NtStatus::SUCCESS)
            .is_none()
}

/// The READ's I/O is done: its reply, or (a sparse READ with data ranges
/// left) the next read.
pub(crate) fn finish(
    core: &mut ConnCore,
    mut c: ReadCont,
    done: IoDone,
) -> Result<Handled, NtStatus> {
    let buf = match done {
        IoDone::Read(Ok(d)) => d,
        IoDone::Read(Err(e)) => return Err(status_of(e)),
        _ => return Err(NtStatus::INTERNAL_ERROR),
    };
    if let Some(s) = c.sparse.take() {
        return sparse::step(core, c, *s, buf);
    }
    reply(core, c, buf, Vec::new()).map(Handled::Reply)
}

/// The reply to a READ whose data (after `c.headroom` bytes) is `buf`;
/// `holes` are zeros in it that were not read.
fn reply(
    core: &mut ConnCore,
    c: ReadCont,
    buf: Vec<u8>,
    holes: Vec<(usize, usize)>,
) -> Result<Reply, NtStatus> {
    let n = buf.len().saturating_sub(c.headroom);
    if (n == 0 && c.len > 0) || n < c.min_count as usize {
        return Err(NtStatus::END_OF_FILE);
    }
    handles::set_position(
        core,
        c.session_id,
        c.open_id,
        c.offset.saturating_add(n as u64),
        false,
    );
    let mut r = Reply::ok(head(core, n));
    r.data = Some(buf);
    // (At most READ_HEADROOM + TRANSFORM_HEADER_LEN: `headroom_of`.)
    r.data_headroom = c.headroom as u32;
    r.compress = c
        .compress
        .map(|open| Box::new(crate::exchange::compress::CompressAsk { open, holes }));
    Ok(r)
}
