//! SMB 3.1.1 compression on a connection ([MS-SMB2] 3.3.5.4, 3.1.4.4): what NEGOTIATE agrees
//! on, whether a READ asks for a compressed response, and whether compressing one pays. The
//! driver decompresses what it receives and compresses what it sends with these
//! (crates/core/src/conn/compress.rs). The codecs and the message format are in
//! `ringshare_compress`.

use std::sync::Arc;

use ringshare_compress::{self as codec, CompressOptions};
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{CompressionAlgorithm, CompressionFlags, ReadFlags};
use ringshare_wire::NtStatus;

use crate::exchange::ConnCore;
use crate::state::Open;

/// What SMB2_COMPRESSION_CAPABILITIES agreed on: Connection.CompressionIds
/// (in the server's order of preference) and
/// Connection.SupportsChainedCompression.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Compression {
    pub ids: Vec<CompressionAlgorithm>,
    pub chained: bool,
}

/// READ response bytes sent plain in front of the compressed data: the SMB2
/// header and the 16-byte READ response body (DataOffset 0x50), as Windows
/// sends them.
pub(crate) const READ_PLAIN_PREFIX: usize = HEADER_LEN + 16;

/// [MS-SMB2] 3.3.5.4 for one SMB2_COMPRESSION_CAPABILITIES context: the
/// algorithms of `server` (the configuration, in its order of preference) the
/// client listed, and chained when the client offered it. Pattern_V1 only
/// goes with chained compression (it is a chained payload type). An empty list
/// is INVALID_PARAMETER, as the spec says.
pub(crate) fn negotiate(
    server: &[CompressionAlgorithm],
    flags: CompressionFlags,
    client: &[CompressionAlgorithm],
) -> Result<Compression, NtStatus> {
    if client.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let chained = flags.contains(CompressionFlags::CHAINED);
    let ids: Vec<CompressionAlgorithm> = server
        .iter()
        .copied()
        .filter(|a| *a != CompressionAlgorithm::NONE && client.contains(a))
        .filter(|a| chained || *a != CompressionAlgorithm::PATTERN_V1)
        .collect();
    Ok(Compression {
        chained: chained && !ids.is_empty(),
        ids,
    })
}

/// The response context for what was agreed: the common algorithms, or the
/// single NONE when there are none ([MS-SMB2] 3.3.5.4).
pub(crate) fn response_context(c: &Compression) -> ringshare_wire::negotiate::NegotiateContext {
    let algorithms = if c.ids.is_empty() {
        vec![CompressionAlgorithm::NONE]
    } else {
        c.ids.clone()
    };
    let flags = if c.chained {
        CompressionFlags::CHAINED
    } else {
        CompressionFlags::empty()
    };
    ringshare_wire::negotiate::NegotiateContext::Compression { flags, algorithms }
}

/// The connection's agreement, when it compresses at all.
pub(crate) fn agreed(core: &ConnCore) -> Option<&Compression> {
    core.negotiated
        .as_ref()
        .map(|n| &n.compression)
        .filter(|c| !c.ids.is_empty())
}

/// A READ whose response is to be compressed on a connection that negotiated
/// compression ([MS-SMB2] 3.3.5.12: Request.CompressReply): it asks with
/// SMB2_READFLAG_REQUEST_COMPRESSED, or its share has `compress data`
/// (Share.CompressData). Its data must be read into memory, not spliced.
pub(crate) fn read_asks(core: &ConnCore, flags: ReadFlags, share_compresses: bool) -> bool {
    (share_compresses || flags.contains(ReadFlags::REQUEST_COMPRESSED)) && agreed(core).is_some()
}

/// A READ reply its client asked to have compressed ([`read_asks`]): the
/// open, which learns whether compressing paid, and the holes of the file in
/// the reply's data (`(start, len)` from the data's first byte), zeros the
/// server did not read, sent as Pattern_V1 without being scanned.
pub(crate) struct CompressAsk {
    pub open: Arc<Open>,
    pub holes: Vec<(usize, usize)>,
}

/// Does this connection send zero runs as Pattern_V1 (chained compression
/// and Pattern_V1 agreed)? Only then are a compressed READ's holes found
/// and left unread.
pub(crate) fn sends_patterns(core: &ConnCore) -> bool {
    agreed(core)
        .and_then(|c| send_options(c, 0))
        .is_some_and(|o| o.chained)
}

/// How this connection compresses what it sends: the first negotiated
/// algorithm the server has a compressor for, chained (with Pattern_V1 for
/// runs) when both chained compression and Pattern_V1 were agreed.
fn send_options(c: &Compression, plain_prefix: usize) -> Option<CompressOptions> {
    let algorithm = c.ids.iter().copied().find(|a| codec::can_compress(*a))?;
    Some(CompressOptions {
        algorithm,
        plain_prefix,
        chained: c.chained && c.ids.contains(&CompressionAlgorithm::PATTERN_V1),
    })
}

/// READs of one open that go plain after a compressed READ of it did not pay,
/// before one is tried again: random or already compressed data costs a sample
/// and a copy out of the page cache for nothing, while a plain READ may splice.
/// Each miss in a row doubles it, up to [`SKIP_MAX`]; a READ that compresses
/// ends the streak.
pub(crate) const SKIP_AFTER_MISS: u32 = 16;
pub(crate) const SKIP_MAX: u32 = 256;

/// The plain READs after the `misses`-th try in a row that did not pay.
pub(crate) fn skip_after(misses: u32) -> u32 {
    SKIP_AFTER_MISS
        .saturating_mul(1 << misses.saturating_sub(1).min(8))
        .min(SKIP_MAX)
}

/// Does this READ of `open` skip compression it asked for ([`SKIP_AFTER_MISS`])?
pub(crate) fn skips(open: &Open) -> bool {
    let mut st = crate::server::lock(&open.state);
    if st.compress_skip == 0 {
        return false;
    }
    st.compress_skip -= 1;
    true
}

/// Compress `msg` (one signed SMB2 message whose first `plain_prefix` bytes
/// stay plain, and whose data after them has zeros at `holes`) for a
/// connection that agreed on `c`, when it pays
/// ([`codec::compress_holes_if_it_pays`]). `None`: send `msg`.
pub(crate) fn compress_if_it_pays(
    c: &Compression,
    msg: &[u8],
    plain_prefix: usize,
    holes: &[(usize, usize)],
) -> Option<Vec<u8>> {
    codec::compress_holes_if_it_pays(msg, &send_options(c, plain_prefix)?, holes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use CompressionAlgorithm as A;

    const SERVER: [A; 5] = crate::config::DEFAULT_COMPRESSION;

    #[test]
    fn each_miss_in_a_row_doubles_the_plain_reads_up_to_the_most() {
        let got: Vec<u32> = (1..=7).map(skip_after).collect();
        assert_eq!(got, [16, 32, 64, 128, 256, 256, 256]);
        assert_eq!(skip_after(u32::MAX), SKIP_MAX);
    }

    #[test]
    fn the_server_picks_its_own_order_among_what_the_client_offers() {
        let c = negotiate(
            &SERVER,
            CompressionFlags::CHAINED,
            &[A::LZNT1, A::LZ77, A::LZ4],
        )
        .unwrap();
        assert_eq!(c.ids, vec![A::LZ4, A::LZ77, A::LZNT1]);
        assert!(c.chained);
    }

    #[test]
    fn none_in_the_client_list_is_skipped_and_pattern_needs_chained() {
        let c = negotiate(
            &SERVER,
            CompressionFlags::empty(),
            &[A::NONE, A::PATTERN_V1, A::LZ4],
        )
        .unwrap();
        assert_eq!(c.ids, vec![A::LZ4]);
        assert!(!c.chained);
        let c = negotiate(
            &SERVER,
            CompressionFlags::CHAINED,
            &[A::NONE, A::PATTERN_V1, A::LZ4],
        )
        .unwrap();
        assert_eq!(c.ids, vec![A::LZ4, A::PATTERN_V1]);
    }

    #[test]
    fn no_common_algorithm_answers_none_and_not_chained() {
        let c = negotiate(&[A::LZ77], CompressionFlags::CHAINED, &[A::LZ4]).unwrap();
        assert!(c.ids.is_empty() && !c.chained);
        match response_context(&c) {
            ringshare_wire::negotiate::NegotiateContext::Compression { flags, algorithms } => {
                assert_eq!(algorithms, vec![A::NONE]);
                assert_eq!(flags, CompressionFlags::empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_empty_client_list_is_invalid_parameter() {
        assert_eq!(
            negotiate(&SERVER, CompressionFlags::CHAINED, &[]),
            Err(NtStatus::INVALID_PARAMETER)
        );
    }

    fn message(data: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; READ_PLAIN_PREFIX];
        m[..4].copy_from_slice(&ringshare_wire::header::SMB2_MAGIC);
        m.extend_from_slice(data);
        m
    }

    #[test]
    fn random_data_is_not_compressed_and_text_and_zeros_are() {
        let c = Compression {
            ids: vec![A::LZ4, A::PATTERN_V1],
            chained: true,
        };
        let mut x = 0x1234_5678_9abc_def0u64;
        let random: Vec<u8> = (0..65536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(compress_if_it_pays(&c, &message(&random), READ_PLAIN_PREFIX, &[]).is_none());
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(1500);
        let m = message(&text);
        let packed = compress_if_it_pays(&c, &m, READ_PLAIN_PREFIX, &[]).unwrap();
        assert!(packed.len() * 4 < m.len());
        let back = codec::decompress_message(&packed, &c.ids, 1 << 20).unwrap();
        assert_eq!(back, m);
        let zeros = message(&vec![0u8; 1 << 20]);
        let packed = compress_if_it_pays(&c, &zeros, READ_PLAIN_PREFIX, &[]).unwrap();
        assert!(packed.len() < 200, "{}", packed.len());
        assert_eq!(
            codec::decompress_message(&packed, &c.ids, 2 << 20).unwrap(),
            zeros
        );
    }
}
