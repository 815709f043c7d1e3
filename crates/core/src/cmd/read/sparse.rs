//! A compressed READ of a range with holes ([MS-SMB2] 3.3.5.12 with
//! SMB2_READFLAG_REQUEST_COMPRESSED, 2.2.42.2.2): the holes are found with
//! SEEK_DATA/SEEK_HOLE ([`ringshare_vfs::Node::read_map`], a small
//! synchronous call as the user, like `Node::size`: io_uring has no lseek),
//! only the data ranges are read, one after another, and the holes go to the
//! compressor as zeros it sends as Pattern_V1 payloads without scanning them.
//! The zeros are still in the reply's buffer, so a reply that is signed,
//! sent in a compound or not compressed after all is the file's bytes.

use std::sync::Arc;

use ringshare_vfs::Node;
use ringshare_wire::NtStatus;

use super::{reply, ReadCont};
use crate::cmd::{Cont, Handled};
use crate::exchange::ConnCore;
use crate::fsmap::status_of;
use crate::io::IoOp;

/// Data ranges one READ reads one after another, at most: a file with more
/// in the range (small holes between small data) has the span from its
/// first data to its last read whole, holes included, in one read; the
/// holes still go as Pattern_V1 without being scanned.
const RANGES_MAX: usize = 16;

/// A READ whose holes are not read: what is left to read.
pub(crate) struct Sparse {
    node: Arc<dyn Node>,
    /// The file's data ranges `(offset, len)` in the READ, clipped to it and
    /// to the end of file; `next` is the one being read.
    data: Vec<(u64, u64)>,
    next: usize,
    /// Bytes of the reply (the READ clipped to the file's size).
    n: usize,
    /// The holes `(start, len)` from the READ's offset, for the compressor.
    holes: Vec<(usize, usize)>,
    /// The reply's buffer: headroom, then the data from the READ's offset
    /// (`None` until the first range is read: that read's buffer becomes it).
    buf: Option<Vec<u8>>,
}

/// Map the READ's range: `Err(c)` gives the READ back to be read whole (the
/// backend found no holes, or does not tell); otherwise the reply (the range
/// is all holes) or the read of its first data range.
pub(super) fn start(
    core: &mut ConnCore,
    node: &Arc<dyn Node>,
    c: ReadCont,
) -> Result<Result<Handled, ReadCont>, NtStatus> {
    let map = node
        .read_map(c.offset, u64::from(c.len))
        .map_err(status_of)?;
    let Some(mut data) = map.data else {
        return Ok(Err(c));
    };
    let n = map.size.saturating_sub(c.offset).min(u64::from(c.len)) as usize;
    if n == 0 || n < c.min_count as usize {
        return Err(NtStatus::END_OF_FILE);
    }
    let holes = holes_between(&data, c.offset, n);
    if let (true, Some(&(first, _)), Some(&(last, len))) =
        (data.len() > RANGES_MAX, data.first(), data.last())
    {
        data = vec![(first, last + len - first)];
    }
    let s = Sparse {
        node: node.clone(),
        data,
        next: 0,
        n,
        holes,
        buf: None,
    };
    if s.data.is_empty() {
        let mut buf = core.spare.take(c.headroom + n);
        buf.resize(c.headroom + n, 0);
        return done(core, c, s, buf).map(Ok);
    }
    Ok(Ok(read_next(c, s)))
}

/// The read of data range `s.next`. The first lands after the headroom and
/// the hole before it (room the driver gives any content: zeroed when it
/// lands), so a READ with one data range is not copied; later ones are
/// appended to the buffer.
fn read_next(mut c: ReadCont, s: Sparse) -> Handled {
    let (offset, len) = s.data[s.next];
    let headroom = match s.buf {
        None => c.headroom + (offset - c.offset) as usize,
        Some(_) => 0,
    };
    let node = s.node.clone();
    c.sparse = Some(Box::new(s));
    Handled::Io {
        node,
        op: IoOp::Read {
            offset,
            len: len as usize,
            headroom,
        },
        cont: Cont::Read(c),
    }
}

/// Data range `s.next` was read into `got`: the next read, or the reply.
pub(super) fn step(
    core: &mut ConnCore,
    c: ReadCont,
    mut s: Sparse,
    got: Vec<u8>,
) -> Result<Handled, NtStatus> {
    let (offset, len) = s.data[s.next];
    let at = c.headroom + (offset - c.offset) as usize;
    let mut buf = match s.buf.take() {
        None => {
            let mut buf = got;
            let hole = buf.len().min(at);
            buf[c.headroom..hole].fill(0);
            buf
        }
        Some(mut buf) => {
            buf.resize(at, 0);
            buf.extend_from_slice(&got);
            core.spare.give(got);
            buf
        }
    };
    let read = buf.len().saturating_sub(at);
    s.next += 1;
    if (read as u64) < len {
        // The file shrank meanwhile: the reply ends where its data did.
        s.n = read + (offset - c.offset) as usize;
    } else if s.next < s.data.len() {
        s.buf = Some(buf);
        return Ok(read_next(c, s));
    }
    buf.resize(c.headroom + s.n, 0);
    done(core, c, s, buf)
}

/// The holes `(start, len)` around `data` in the `n` bytes from `offset`.
fn holes_between(data: &[(u64, u64)], offset: u64, n: usize) -> Vec<(usize, usize)> {
    let mut holes = Vec::with_capacity(data.len() + 1);
    let mut pos = 0usize;
    for &(at, len) in data {
        let start = (at - offset) as usize;
        if start > pos {
            holes.push((pos, start - pos));
        }
        pos = start + len as usize;
    }
    if n > pos {
        holes.push((pos, n - pos));
    }
    holes
}

/// The reply, the holes marked for Pattern_V1 (those within it, when the
/// file shrank meanwhile).
fn done(core: &mut ConnCore, c: ReadCont, s: Sparse, buf: Vec<u8>) -> Result<Handled, NtStatus> {
    let holes = s
        .holes
        .iter()
        .filter(|&&(start, _)| start < s.n)
        .map(|&(start, len)| (start, len.min(s.n - start)))
        .collect();
    reply(core, c, buf, holes).map(Handled::Reply)
}
