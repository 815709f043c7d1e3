//! SMB 3.1.1 compression on the client side ([MS-SMB2] 3.2.4.1.9, 3.2.5.1.1.2):
//! offering SMB2_COMPRESSION_CAPABILITIES, compressing WRITE requests (the
//! client may compress any request; the spec's example is WRITE), asking for
//! compressed READ responses (SMB2_READFLAG_REQUEST_COMPRESSED) and
//! decompressing what comes back compressed.

use ringshare_compress::{self as codec, CompressOptions};
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{CompressionAlgorithm, CompressionFlags};
use ringshare_wire::negotiate::NegotiateContext;

use super::{ClientConn, ClientError};

/// WRITE request bytes sent plain in front of the compressed data: the SMB2
/// header and the WRITE request's fixed part (DataOffset 0x70).
const WRITE_PLAIN_PREFIX: usize = HEADER_LEN + 48;

/// The connection's compression state.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Connection.CompressionIds as the server answered them.
    ids: Vec<CompressionAlgorithm>,
    chained: bool,
    /// The last frame [`ClientConn::receive`] decompressed: the ranges of its
    /// events index this ([`ClientConn::take_inflated`]).
    pub inflated: Option<Vec<u8>>,
    /// Bytes of frames received and sent (direct-TCP header included).
    pub wire_in: u64,
    pub wire_out: u64,
    /// READs do not set SMB2_READFLAG_REQUEST_COMPRESSED
    /// ([`ClientConn::ask_compressed_reads`]).
    pub reads_plain: bool,
    /// The share answered SMB2_SHAREFLAG_COMPRESS_DATA (TreeConnect.CompressData).
    pub share_compresses: bool,
}

impl State {
    /// Compression was agreed: READs ask for compressed responses and WRITEs
    /// go compressed when it pays.
    pub fn on(&self) -> bool {
        !self.ids.is_empty()
    }

    /// The server's SMB2_COMPRESSION_CAPABILITIES answer.
    pub fn agreed(
        &mut self,
        offered: &[CompressionAlgorithm],
        flags: CompressionFlags,
        algorithms: &[CompressionAlgorithm],
    ) -> Result<(), ClientError> {
        let ids: Vec<CompressionAlgorithm> = algorithms
            .iter()
            .copied()
            .filter(|a| *a != CompressionAlgorithm::NONE)
            .collect();
        if let Some(a) = ids.iter().find(|a| !offered.contains(a)) {
            return Err(ClientError::Unsupported(format!(
                "server chose compression algorithm {:#06x}, not offered",
                a.0
            )));
        }
        self.chained = flags.contains(CompressionFlags::CHAINED) && !ids.is_empty();
        self.ids = ids;
        Ok(())
    }

    fn options(&self, plain_prefix: usize) -> Option<CompressOptions> {
        let algorithm = self.ids.iter().copied().find(|a| codec::can_compress(*a))?;
        Some(CompressOptions {
            algorithm,
            plain_prefix,
            chained: self.chained && self.ids.contains(&CompressionAlgorithm::PATTERN_V1),
        })
    }
}

/// The SMB2_COMPRESSION_CAPABILITIES context offering `algorithms` (in the
/// client's order of preference), chained; `None` for an empty list.
pub(super) fn offer(algorithms: &[CompressionAlgorithm]) -> Option<NegotiateContext> {
    (!algorithms.is_empty()).then(|| NegotiateContext::Compression {
        flags: CompressionFlags::CHAINED,
        algorithms: algorithms.to_vec(),
    })
}

impl ClientConn {
    /// The WRITE message at `out[at..]` (signed already, not yet sealed):
    /// compressed in place when compression was agreed and it pays.
    pub(super) fn compress_write(&mut self, at: usize) {
        let Some(opts) = self.zip.options(WRITE_PLAIN_PREFIX) else {
            return;
        };
        if let Some(packed) = codec::compress_if_it_pays(&self.out[at..], &opts) {
            self.out.truncate(at);
            self.out.extend_from_slice(&packed);
        }
    }

    /// A received message starting `0xFC 'SMB'`: the SMB2 message it holds,
    /// checked as [MS-SMB2] 3.2.5.1.1.2 says (algorithm negotiated, size within
    /// 256 + header + the largest of MaxRead/Write/TransactSize, exact sizes).
    pub(super) fn inflate(&self, msg: &[u8]) -> Result<Vec<u8>, ClientError> {
        if !self.zip.on() {
            return Err(ClientError::Malformed(
                "compressed response without compression negotiated".into(),
            ));
        }
        let limit = codec::size_limit(self.max_read, self.max_write, self.max_transact);
        codec::decompress_message(msg, &self.zip.ids, limit)
            .map_err(|e| ClientError::Malformed(format!("compressed response: {e}")))
    }

    /// After [`ClientConn::receive`] of a compressed frame: the decompressed
    /// message, which the ranges of that call's events index (instead of the
    /// frame given). `None` when the last frame was not compressed.
    pub fn take_inflated(&mut self) -> Option<Vec<u8>> {
        self.zip.inflated.take()
    }

    /// Compression was negotiated on this connection.
    pub fn is_compressing(&self) -> bool {
        self.zip.on()
    }

    /// Whether READs set SMB2_READFLAG_REQUEST_COMPRESSED when compression
    /// was agreed (they do unless told not to: a client that leaves it to
    /// the share's `compress data`).
    pub fn ask_compressed_reads(&mut self, ask: bool) {
        self.zip.reads_plain = !ask;
    }

    /// The share's TREE_CONNECT answer carried SMB2_SHAREFLAG_COMPRESS_DATA
    /// (TreeConnect.CompressData, [MS-SMB2] 2.2.10).
    pub fn share_compresses_data(&self) -> bool {
        self.zip.share_compresses
    }

    /// Bytes received and sent so far, frames whole (the direct-TCP
    /// header, any transform headers, compressed or not): what went over the
    /// wire.
    pub fn wire_bytes(&self) -> (u64, u64) {
        (self.zip.wire_in, self.zip.wire_out)
    }
}
