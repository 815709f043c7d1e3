//! The sans-I/O steps a connection takes: decompress a received
//! COMPRESSION_TRANSFORM_HEADER message with the receiver's checks of
//! [MS-SMB2] 3.3.5.2.x / 3.2.5.1.1.2, and compress a message to send
//! ([MS-SMB2] 3.1.4.4).

use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::compression::{self, CompressedMessage};
use ringshare_wire::consts::CompressionAlgorithm;
use ringshare_wire::header::SMB2_MAGIC;
use ringshare_wire::WireError;

use crate::{pattern, Error};

/// Why a compressed message closes the connection. Every variant is a
/// disconnect in [MS-SMB2] 3.3.5.2.x; `Display` is the log line's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disconnect {
    /// The header or a payload header does not parse.
    Malformed(WireError),
    /// The algorithm was not negotiated (chained: neither NONE nor negotiated).
    NotNegotiated(CompressionAlgorithm),
    /// OriginalCompressedSegmentSize above the connection's bound.
    TooLarge { size: usize, limit: usize },
    /// A payload does not decompress.
    Decompress(CompressionAlgorithm, Error),
    /// The payloads do not add up to OriginalCompressedSegmentSize.
    SizeMismatch { announced: usize, got: usize },
    /// The result is not an SMB2 message.
    NotSmb2,
}

impl core::fmt::Display for Disconnect {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Disconnect::Malformed(e) => write!(f, "malformed compressed message: {e}"),
            Disconnect::NotNegotiated(a) => {
                write!(f, "compression algorithm {:#06x} not negotiated", a.0)
            }
            Disconnect::TooLarge { size, limit } => {
                write!(
                    f,
                    "compressed message of {size} bytes above the limit {limit}"
                )
            }
            Disconnect::Decompress(a, e) => write!(f, "algorithm {:#06x}: {e}", a.0),
            Disconnect::SizeMismatch { announced, got } => {
                write!(
                    f,
                    "compressed message gave {got} bytes, {announced} announced"
                )
            }
            Disconnect::NotSmb2 => f.write_str("decompressed message is not SMB2"),
        }
    }
}

/// The bound on a decompressed message: 256 + the SMB2 header +
/// max(MaxReadSize, MaxWriteSize, MaxTransactSize) ([MS-SMB2] 3.3.5.2.x).
pub fn size_limit(max_read: u32, max_write: u32, max_transact: u32) -> usize {
    256 + HEADER_LEN + max_read.max(max_write).max(max_transact) as usize
}

/// Decompress a received message that starts with `0xFC 'SMB'`, given the
/// algorithms the connection negotiated and [`size_limit`]. Returns the SMB2
/// message (which the caller then verifies and dispatches) or why to
/// disconnect. LZ4 segments larger than their original are accepted (the
/// `smb` crate sends them).
pub fn decompress_message(
    msg: &[u8],
    negotiated: &[CompressionAlgorithm],
    limit: usize,
) -> Result<Vec<u8>, Disconnect> {
    let parsed = compression::parse(msg).map_err(Disconnect::Malformed)?;
    let out = match parsed {
        CompressedMessage::Unchained {
            header,
            plain,
            compressed,
        } => {
            let alg = header.algorithm;
            if alg == CompressionAlgorithm::NONE || !negotiated.contains(&alg) {
                return Err(Disconnect::NotNegotiated(alg));
            }
            let size = header.original_size as usize;
            let total = size.saturating_add(plain.len());
            if total > limit {
                return Err(Disconnect::TooLarge { size: total, limit });
            }
            let mut out = Vec::with_capacity(total);
            out.extend_from_slice(plain);
            crate::decompress_into(alg, compressed, size, limit, &mut out)
                .map_err(|e| Disconnect::Decompress(alg, e))?;
            out
        }
        CompressedMessage::Chained {
            original_size,
            payloads,
        } => {
            let size = original_size as usize;
            if size > limit {
                return Err(Disconnect::TooLarge { size, limit });
            }
            let mut out = Vec::with_capacity(size);
            for p in &payloads {
                chained_payload(p, negotiated, size, &mut out)?;
            }
            if out.len() != size {
                return Err(Disconnect::SizeMismatch {
                    announced: size,
                    got: out.len(),
                });
            }
            out
        }
    };
    if out.get(..4) != Some(&SMB2_MAGIC[..]) {
        return Err(Disconnect::NotSmb2);
    }
    Ok(out)
}

/// Append one chained payload, never past `size` bytes in all.
fn chained_payload(
    p: &compression::ChainedPayload<'_>,
    negotiated: &[CompressionAlgorithm],
    size: usize,
    out: &mut Vec<u8>,
) -> Result<(), Disconnect> {
    let alg = p.algorithm;
    if alg != CompressionAlgorithm::NONE && !negotiated.contains(&alg) {
        return Err(Disconnect::NotNegotiated(alg));
    }
    let room = size - out.len();
    let fail = |e| Disconnect::Decompress(alg, e);
    match alg {
        CompressionAlgorithm::NONE => {
            if p.data.len() > room {
                return Err(fail(Error::Overflow));
            }
            out.extend_from_slice(p.data);
        }
        CompressionAlgorithm::PATTERN_V1 => pattern::decompress(p.data, room, out).map_err(fail)?,
        _ => {
            let n = p.original_size.unwrap_or(0) as usize;
            crate::decompress_into(alg, p.data, n, room, out).map_err(fail)?;
        }
    }
    Ok(())
}

/// How to compress a message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressOptions {
    /// The algorithm for the data (LZ77, LZNT1 or LZ4).
    pub algorithm: CompressionAlgorithm,
    /// Leading bytes sent plain (the SMB2 header and the command's fixed
    /// part: unchained `Offset`, or a chained NONE payload).
    pub plain_prefix: usize,
    /// Chained: leading and trailing runs become Pattern_V1 payloads.
    /// Needs CHAINED and Pattern_V1 negotiated.
    pub chained: bool,
}

/// Compress `msg` (an SMB2 message, signed already) as the sender does in
/// [MS-SMB2] 3.1.4.4. `None` when the compressed form would not be smaller,
/// and then the caller sends `msg` as it is.
pub fn compress_message(msg: &[u8], opts: &CompressOptions) -> Option<Vec<u8>> {
    let prefix = opts.plain_prefix.min(msg.len());
    let (plain, data) = msg.split_at(prefix);
    if u32::try_from(msg.len()).is_err() {
        return None;
    }
    let out = if opts.chained {
        compress_chained(msg.len(), plain, data, opts.algorithm, &[])?
    } else {
        let mut out = Vec::with_capacity(msg.len());
        let header = compression::UnchainedHeader {
            original_size: data.len() as u32,
            algorithm: opts.algorithm,
            offset: prefix as u32,
        };
        compression::encode_unchained_header(&mut out, &header);
        out.extend_from_slice(plain);
        if !crate::compress_into(opts.algorithm, data, &mut out) {
            return None;
        }
        out
    };
    (out.len() < msg.len()).then_some(out)
}

/// Smallest data (after the plain prefix) [`compress_if_it_pays`] tries:
/// below this the headers of the compressed form eat most of what it saves.
pub const COMPRESS_MIN: usize = 4096;

/// [`compress_message`] when it pays, the rule both of ringshare's senders
/// follow: at least [`COMPRESS_MIN`] bytes of data after the plain prefix,
/// the data looks compressible ([`crate::worth_compressing`], a cheap LZ4
/// sample, so random data costs ~12 KiB of LZ4 work and nothing more), and
/// the result saves at least 1/16 of the message. `None`: send `msg` as it is.
pub fn compress_if_it_pays(msg: &[u8], opts: &CompressOptions) -> Option<Vec<u8>> {
    compress_holes_if_it_pays(msg, opts, &[])
}

/// [`compress_if_it_pays`] for data whose `holes` (`(start, len)` in the
/// data after the plain prefix, in order, not overlapping) are known to be
/// zeros without looking at them (holes of a sparse file, found with
/// SEEK_DATA/SEEK_HOLE): chained, each hole of [`pattern::MIN_RUN`] bytes or
/// more is a Pattern_V1 payload and is never scanned nor sampled; each part
/// between holes is sampled and compressed on its own (NONE when it does not
/// look compressible). Unchained, or without holes, the rule of
/// [`compress_if_it_pays`].
pub fn compress_holes_if_it_pays(
    msg: &[u8],
    opts: &CompressOptions,
    holes: &[(usize, usize)],
) -> Option<Vec<u8>> {
    let data = msg.get(opts.plain_prefix..)?;
    let holes = if opts.chained { holes } else { &[] };
    if data.len() < COMPRESS_MIN || u32::try_from(msg.len()).is_err() {
        return None;
    }
    let out = if holes.is_empty() {
        if !crate::worth_compressing(data) {
            return None;
        }
        compress_message(msg, opts)?
    } else {
        let (plain, data) = msg.split_at(opts.plain_prefix);
        compress_chained(msg.len(), plain, data, opts.algorithm, holes)?
    };
    (out.len() + msg.len() / 16 <= msg.len()).then_some(out)
}

/// A chained message being built: each payload after the first is not
/// flagged CHAINED in its header ([MS-SMB2] 2.2.42.2.1).
struct Chain {
    out: Vec<u8>,
    first: bool,
}

impl Chain {
    fn put(&mut self, alg: CompressionAlgorithm, original: Option<u32>, bytes: &[u8]) {
        compression::encode_chained_payload(&mut self.out, alg, self.first, original, bytes);
        self.first = false;
    }

    fn pattern(&mut self, byte: u8, len: usize) -> Option<()> {
        self.put(
            CompressionAlgorithm::PATTERN_V1,
            None,
            &pattern::encode(byte, len)?,
        );
        Some(())
    }

    /// `data` as today's chained layout: Pattern_V1 for a leading and a
    /// trailing run of [`pattern::MIN_RUN`] bytes or more, the algorithm
    /// for the rest (NONE when it does not shrink, or when `sample` and
    /// [`crate::worth_compressing`] says it will not).
    fn data(&mut self, data: &[u8], alg: CompressionAlgorithm, sample: bool) -> Option<()> {
        let (lead_byte, mut lead) = pattern::leading_run(data);
        if lead < pattern::MIN_RUN {
            lead = 0;
        }
        let (trail_byte, mut trail) = pattern::trailing_run(&data[lead..]);
        if trail < pattern::MIN_RUN {
            trail = 0;
        }
        let middle = &data[lead..data.len() - trail];
        if lead > 0 {
            self.pattern(lead_byte, lead)?;
        }
        if !middle.is_empty() {
            let mut packed = Vec::with_capacity(middle.len());
            if (!sample || crate::worth_compressing(middle))
                && crate::compress_into(alg, middle, &mut packed)
                && packed.len() + 4 < middle.len()
            {
                self.put(alg, Some(middle.len() as u32), &packed);
            } else {
                self.put(CompressionAlgorithm::NONE, None, middle);
            }
        }
        if trail > 0 {
            self.pattern(trail_byte, trail)?;
        }
        Some(())
    }
}

fn compress_chained(
    total: usize,
    plain: &[u8],
    data: &[u8],
    alg: CompressionAlgorithm,
    holes: &[(usize, usize)],
) -> Option<Vec<u8>> {
    let mut c = Chain {
        out: Vec::with_capacity(total),
        first: true,
    };
    compression::encode_chained_header(&mut c.out, total as u32);
    if !plain.is_empty() {
        c.put(CompressionAlgorithm::NONE, None, plain);
    }
    let sample = !holes.is_empty();
    let mut pos = 0;
    for &(start, len) in holes {
        let end = start.checked_add(len)?;
        if len < pattern::MIN_RUN || start < pos || end > data.len() {
            continue;
        }
        debug_assert!(data[start..end].iter().all(|&b| b == 0), "a hole is zeros");
        if start > pos {
            c.data(&data[pos..start], alg, sample)?;
        }
        c.pattern(0, len)?;
        pos = end;
    }
    if pos < data.len() {
        c.data(&data[pos..], alg, sample)?;
    }
    Some(c.out)
}
