//! SMB2 COMPRESSION_TRANSFORM_HEADER ([MS-SMB2] 2.2.42): the unchained form
//! (2.2.42.1) and the chained form (2.2.42.2) with its payload headers
//! (2.2.42.2.1) and Pattern_V1 payloads (2.2.42.2.2). Parsing borrows the
//! message; nothing here decompresses (that is `ringshare-compress`).

use crate::codec::{Reader, WriteExt};
use crate::consts::CompressionAlgorithm;
use crate::header::COMPRESSION_MAGIC;
use crate::WireError;

/// Size of the unchained header (ProtocolId .. Offset).
pub const UNCHAINED_HEADER_LEN: usize = 16;
/// Size of the chained header before its first payload header.
pub const CHAINED_HEADER_LEN: usize = 8;
/// Size of a Pattern_V1 payload ([MS-SMB2] 2.2.42.2.2).
pub const PATTERN_V1_LEN: usize = 8;
/// `Flags`: not the first payload header of a chain / unchained header.
pub const FLAG_NONE: u16 = 0x0000;
/// `Flags`: the first payload header of a chain.
pub const FLAG_CHAINED: u16 = 0x0001;

/// The unchained header: `Offset` bytes after it are sent plain, the rest is
/// one compressed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnchainedHeader {
    /// OriginalCompressedSegmentSize: the size of the segment once decompressed.
    pub original_size: u32,
    pub algorithm: CompressionAlgorithm,
    pub offset: u32,
}

/// One payload of a chained message, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainedPayload<'a> {
    pub algorithm: CompressionAlgorithm,
    pub flags: u16,
    /// OriginalPayloadSize, present for LZNT1, LZ77, LZ77+Huffman and LZ4.
    pub original_size: Option<u32>,
    /// The payload after the header (and after OriginalPayloadSize).
    pub data: &'a [u8],
}

/// A parsed compressed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompressedMessage<'a> {
    Unchained {
        header: UnchainedHeader,
        /// The `Offset` bytes sent plain.
        plain: &'a [u8],
        /// The compressed segment.
        compressed: &'a [u8],
    },
    Chained {
        original_size: u32,
        payloads: Vec<ChainedPayload<'a>>,
    },
}

/// Whether a chained payload header carries OriginalPayloadSize.
pub fn has_original_payload_size(alg: CompressionAlgorithm) -> bool {
    matches!(
        alg,
        CompressionAlgorithm::LZNT1
            | CompressionAlgorithm::LZ77
            | CompressionAlgorithm::LZ77_HUFFMAN
            | CompressionAlgorithm::LZ4
    )
}

/// Parse a message starting with `0xFC 'SMB'`. Chained payloads are bounded
/// by the message: each takes at least 8 bytes, so their number is too.
pub fn parse(msg: &[u8]) -> Result<CompressedMessage<'_>, WireError> {
    let mut r = Reader::new(msg);
    if r.array::<4>()? != COMPRESSION_MAGIC {
        return Err(WireError::Invalid(
            "COMPRESSION_TRANSFORM_HEADER ProtocolId",
        ));
    }
    let original_size = r.u32()?;
    if msg.len() < UNCHAINED_HEADER_LEN {
        return Err(WireError::Truncated {
            at: msg.len(),
            needed: UNCHAINED_HEADER_LEN - msg.len(),
        });
    }
    let flags = u16::from_le_bytes([msg[10], msg[11]]);
    match flags {
        FLAG_NONE => parse_unchained(original_size, r),
        FLAG_CHAINED => parse_chained(original_size, r),
        _ => Err(WireError::Invalid("COMPRESSION_TRANSFORM_HEADER Flags")),
    }
}

fn parse_unchained(
    original_size: u32,
    mut r: Reader<'_>,
) -> Result<CompressedMessage<'_>, WireError> {
    let algorithm = CompressionAlgorithm(r.u16()?);
    let _flags = r.u16()?;
    let offset = r.u32()?;
    let plain = r
        .bytes(offset as usize)
        .map_err(|_| WireError::BadOffset("COMPRESSION_TRANSFORM_HEADER Offset"))?;
    let compressed = r.rest();
    Ok(CompressedMessage::Unchained {
        header: UnchainedHeader {
            original_size,
            algorithm,
            offset,
        },
        plain,
        compressed,
    })
}

fn parse_chained(
    original_size: u32,
    mut r: Reader<'_>,
) -> Result<CompressedMessage<'_>, WireError> {
    let mut payloads = Vec::new();
    while !r.is_empty() {
        let algorithm = CompressionAlgorithm(r.u16()?);
        let flags = r.u16()?;
        let want = if payloads.is_empty() {
            FLAG_CHAINED
        } else {
            FLAG_NONE
        };
        if flags != want {
            return Err(WireError::Invalid("chained payload Flags"));
        }
        let length = r.u32()? as usize;
        let mut body = r
            .sub(length)
            .map_err(|_| WireError::BadOffset("chained payload Length"))?;
        let original = if has_original_payload_size(algorithm) {
            Some(body.u32()?)
        } else {
            None
        };
        payloads.push(ChainedPayload {
            algorithm,
            flags,
            original_size: original,
            data: body.rest(),
        });
    }
    if payloads.is_empty() {
        return Err(WireError::Invalid("chained message without payload"));
    }
    Ok(CompressedMessage::Chained {
        original_size,
        payloads,
    })
}

/// Append an unchained header.
pub fn encode_unchained_header(out: &mut Vec<u8>, h: &UnchainedHeader) {
    out.put_bytes(&COMPRESSION_MAGIC);
    out.put_u32(h.original_size);
    out.put_u16(h.algorithm.0);
    out.put_u16(FLAG_NONE);
    out.put_u32(h.offset);
}

/// Append the chained header (ProtocolId, OriginalCompressedSegmentSize).
pub fn encode_chained_header(out: &mut Vec<u8>, original_size: u32) {
    out.put_bytes(&COMPRESSION_MAGIC);
    out.put_u32(original_size);
}

/// Append one chained payload header and its data. `first` selects the
/// CHAINED flag; `original_size` is written for the algorithms that carry it
/// (and must then be `Some`).
pub fn encode_chained_payload(
    out: &mut Vec<u8>,
    algorithm: CompressionAlgorithm,
    first: bool,
    original_size: Option<u32>,
    data: &[u8],
) {
    out.put_u16(algorithm.0);
    out.put_u16(if first { FLAG_CHAINED } else { FLAG_NONE });
    let extra = if has_original_payload_size(algorithm) {
        4
    } else {
        0
    };
    out.put_u32((data.len() + extra) as u32);
    if extra != 0 {
        out.put_u32(original_size.unwrap_or(0));
    }
    out.put_bytes(data);
}

/// A Pattern_V1 payload: `repetitions` copies of `pattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternV1 {
    pub pattern: u8,
    pub repetitions: u32,
}

impl PatternV1 {
    /// Decode the 8-byte payload; the reserved fields are ignored.
    pub fn decode(data: &[u8]) -> Result<PatternV1, WireError> {
        if data.len() != PATTERN_V1_LEN {
            return Err(WireError::Invalid("Pattern_V1 payload length"));
        }
        let mut r = Reader::new(data);
        let pattern = r.u8()?;
        r.skip(3)?;
        Ok(PatternV1 {
            pattern,
            repetitions: r.u32()?,
        })
    }

    /// The 8-byte payload.
    pub fn encode(&self) -> [u8; PATTERN_V1_LEN] {
        let mut b = [0u8; PATTERN_V1_LEN];
        b[0] = self.pattern;
        b[4..].copy_from_slice(&self.repetitions.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchained_header_round_trips() {
        let h = UnchainedHeader {
            original_size: 1000,
            algorithm: CompressionAlgorithm::LZ77,
            offset: 3,
        };
        let mut out = Vec::new();
        encode_unchained_header(&mut out, &h);
        out.extend_from_slice(b"abcdef");
        assert_eq!(out.len(), UNCHAINED_HEADER_LEN + 6);
        match parse(&out).unwrap() {
            CompressedMessage::Unchained {
                header,
                plain,
                compressed,
            } => {
                assert_eq!(header, h);
                assert_eq!(plain, b"abc");
                assert_eq!(compressed, b"def");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_chained_message_round_trips_with_pattern_payloads() {
        let mut out = Vec::new();
        encode_chained_header(&mut out, 4200);
        encode_chained_payload(&mut out, CompressionAlgorithm::NONE, true, None, b"plain");
        encode_chained_payload(&mut out, CompressionAlgorithm::LZ77, false, Some(99), b"zz");
        let p = PatternV1 {
            pattern: 0,
            repetitions: 4096,
        };
        encode_chained_payload(
            &mut out,
            CompressionAlgorithm::PATTERN_V1,
            false,
            None,
            &p.encode(),
        );
        let CompressedMessage::Chained {
            original_size,
            payloads,
        } = parse(&out).unwrap()
        else {
            panic!("not chained")
        };
        assert_eq!(original_size, 4200);
        assert_eq!(payloads.len(), 3);
        assert_eq!(payloads[0].data, b"plain");
        assert_eq!(payloads[0].flags, FLAG_CHAINED);
        assert_eq!(payloads[1].original_size, Some(99));
        assert_eq!(payloads[1].data, b"zz");
        assert_eq!(PatternV1::decode(payloads[2].data).unwrap(), p);
    }

    #[test]
    fn a_chained_payload_length_past_the_end_is_refused() {
        let mut out = Vec::new();
        encode_chained_header(&mut out, 10);
        encode_chained_payload(
            &mut out,
            CompressionAlgorithm::NONE,
            true,
            None,
            b"0123456789",
        );
        for cut in 0..out.len() {
            assert!(parse(&out[..cut]).is_err(), "cut at {cut}");
        }
        let len_at = CHAINED_HEADER_LEN + 4;
        out[len_at] = 200;
        assert!(parse(&out).is_err());
    }

    #[test]
    fn an_lz77_payload_without_room_for_its_original_size_is_refused() {
        let mut out = Vec::new();
        encode_chained_header(&mut out, 10);
        out.put_u16(CompressionAlgorithm::LZ77.0);
        out.put_u16(FLAG_CHAINED);
        out.put_u32(2);
        out.put_u16(0);
        assert!(parse(&out).is_err());
    }

    #[test]
    fn an_unchained_offset_past_the_end_is_refused() {
        let mut out = Vec::new();
        let h = UnchainedHeader {
            original_size: 1,
            algorithm: CompressionAlgorithm::LZ4,
            offset: 5,
        };
        encode_unchained_header(&mut out, &h);
        out.extend_from_slice(b"abcd");
        assert!(parse(&out).is_err());
    }
}
