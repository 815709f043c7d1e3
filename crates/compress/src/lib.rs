//! SMB 3.1.1 compression ([MS-SMB2] 2.2.42, 3.1.4.4, 3.3.5.2.x; [MS-XCA]).
//!
//! **Invariant:** this crate knows nothing about connections or sessions: a message is
//! bytes in, bytes out (below it only wire).
//!
//! Codecs, each written from its specification: [`lz77`] (plain LZ77,
//! "XPRESS", [MS-XCA] 2.3-2.4), [`lznt1`] ([MS-XCA] 2.5), [`huffman`]
//! (LZ77+Huffman, [MS-XCA] 2.1-2.2), [`pattern`]
//! (Pattern_V1), and LZ4 blocks through `lz4_flex` ([`lz4`]). [`message`] is
//! the sans-I/O step a connection calls: decompress a received
//! COMPRESSION_TRANSFORM_HEADER message with the receiver's checks, or
//! compress one to send.
//!
//! Decompressors take hostile input: the caller gives the exact size the
//! output must have (bounded before anything is allocated), they never write
//! past it, never panic, and run in time linear in input plus output.
#![forbid(unsafe_code)]

pub mod huffman;
mod huffman_encode;
pub mod lz4;
pub mod lz77;
pub mod lznt1;
pub mod message;
pub mod pattern;

pub use message::{
    compress_holes_if_it_pays, compress_if_it_pays, compress_message, decompress_message,
    size_limit, CompressOptions, Disconnect,
};
pub use ringshare_wire::consts::CompressionAlgorithm;

/// Why a compressed stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The stream ended in the middle of a token.
    Truncated,
    /// A token or table the format does not allow; names what.
    Corrupt(&'static str),
    /// The output would be larger than the size the caller expects.
    Overflow,
    /// The stream ended with fewer bytes than expected.
    Short { expected: usize, got: usize },
    /// The expected size is above the caller's maximum.
    TooLarge,
    /// The algorithm is not one this crate decompresses.
    Unsupported,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("compressed stream truncated"),
            Error::Corrupt(what) => write!(f, "corrupt compressed stream: {what}"),
            Error::Overflow => f.write_str("decompressed data larger than announced"),
            Error::Short { expected, got } => {
                write!(f, "decompressed {got} bytes, {expected} announced")
            }
            Error::TooLarge => f.write_str("announced size above the limit"),
            Error::Unsupported => f.write_str("algorithm not supported"),
        }
    }
}

impl std::error::Error for Error {}

/// Decompress `input` with `alg`, appending exactly `expected` bytes to
/// `out`. `expected` above `max` is refused before any allocation. On error
/// `out` is left with whatever was appended (callers drop it).
pub fn decompress_into(
    alg: CompressionAlgorithm,
    input: &[u8],
    expected: usize,
    max: usize,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    if expected > max {
        return Err(Error::TooLarge);
    }
    out.reserve(expected);
    match alg {
        CompressionAlgorithm::LZ77 => lz77::decompress(input, expected, out),
        CompressionAlgorithm::LZNT1 => lznt1::decompress(input, expected, out),
        CompressionAlgorithm::LZ77_HUFFMAN => huffman::decompress(input, expected, out),
        CompressionAlgorithm::LZ4 => lz4::decompress(input, expected, out),
        _ => Err(Error::Unsupported),
    }
}

/// [`decompress_into`] a new buffer.
pub fn decompress(
    alg: CompressionAlgorithm,
    input: &[u8],
    expected: usize,
    max: usize,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    decompress_into(alg, input, expected, max, &mut out)?;
    Ok(out)
}

/// Compress `input` with `alg`, appending to `out`; `false` when this crate
/// has no compressor for `alg` (Pattern_V1, NONE).
pub fn compress_into(alg: CompressionAlgorithm, input: &[u8], out: &mut Vec<u8>) -> bool {
    match alg {
        CompressionAlgorithm::LZ77 => lz77::compress(input, out),
        CompressionAlgorithm::LZNT1 => lznt1::compress(input, out),
        CompressionAlgorithm::LZ77_HUFFMAN => huffman::compress(input, out),
        CompressionAlgorithm::LZ4 => lz4::compress(input, out),
        _ => return false,
    }
    true
}

/// Whether [`compress_into`] can produce `alg`.
pub fn can_compress(alg: CompressionAlgorithm) -> bool {
    matches!(
        alg,
        CompressionAlgorithm::LZ77
            | CompressionAlgorithm::LZNT1
            | CompressionAlgorithm::LZ77_HUFFMAN
            | CompressionAlgorithm::LZ4
    )
}

/// Bytes of each sample [`worth_compressing`] takes.
pub const SAMPLE_LEN: usize = 4096;

/// Whether `data` is worth compressing, judged cheaply: up to three samples
/// of [`SAMPLE_LEN`] bytes (start, middle, end) go through LZ4, the fastest
/// codec here (about 11 GB/s on random data, docs/compression.md), and must
/// come out at most 7/8 of their size. Data that short is always tried.
/// Random or already compressed data (video, archives) is then sent plain
/// after ~12 KiB of LZ4 work, instead of a whole pass of a slower codec.
pub fn worth_compressing(data: &[u8]) -> bool {
    if data.len() <= 3 * SAMPLE_LEN {
        return true;
    }
    let mid = data.len() / 2 - SAMPLE_LEN / 2;
    let end = data.len() - SAMPLE_LEN;
    let mut out = Vec::with_capacity(lz4_flex::block::get_maximum_output_size(SAMPLE_LEN));
    let mut packed = 0;
    for start in [0, mid, end] {
        out.clear();
        lz4::compress(&data[start..start + SAMPLE_LEN], &mut out);
        packed += out.len();
    }
    packed * 8 <= 3 * SAMPLE_LEN * 7
}

/// Copy `len` bytes from `dist` bytes back to the end of `out` (the source
/// may overlap what is being written), in time linear in `len`.
pub(crate) fn copy_match(out: &mut Vec<u8>, dist: usize, len: usize) {
    let src = out.len() - dist;
    let mut left = len;
    while left > 0 {
        let n = left.min(out.len() - src);
        out.extend_from_within(src..src + n);
        left -= n;
    }
}

/// The end of the output, checked: `base + expected` must not overflow.
pub(crate) fn output_end(out: &[u8], expected: usize) -> Result<usize, Error> {
    out.len().checked_add(expected).ok_or(Error::TooLarge)
}

/// The final size check every decompressor makes.
pub(crate) fn check_full(out: &[u8], end: usize, expected: usize) -> Result<(), Error> {
    if out.len() == end {
        Ok(())
    } else {
        Err(Error::Short {
            expected,
            got: expected - (end - out.len()),
        })
    }
}
