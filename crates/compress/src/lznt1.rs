//! LZNT1, [MS-XCA] 2.5.
//!
//! The data is cut into chunks of 4096 bytes. Each chunk has a 16-bit header
//! (bits 0-11: chunk size in bytes minus 3, counting the header; bits 12-14:
//! signature 3; bit 15: compressed) and either the raw bytes or groups of 8
//! tokens behind a flag byte (least significant bit first: 0 literal, 1 a
//! 16-bit match whose split between offset and length bits depends on how far
//! into the chunk it is).

use crate::lz77::match_len;
use crate::{check_full, copy_match, output_end, Error};

/// Uncompressed bytes per chunk.
pub const CHUNK: usize = 4096;
const MIN_MATCH: usize = 3;
const HASH_BITS: u32 = 12;

/// Offset bits of a match token `pos` bytes into a chunk (pos >= 1).
fn offset_bits(pos: usize) -> u32 {
    let mut bits = 4;
    let mut p = pos - 1;
    while p >= 0x10 {
        bits += 1;
        p >>= 1;
    }
    bits
}

/// Decompress `input`, appending exactly `expected` bytes to `out`. A zero
/// header or the end of the input ends the stream.
pub fn decompress(input: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    let end = output_end(out, expected)?;
    let mut pos = 0;
    while pos + 2 <= input.len() {
        let header = u16::from_le_bytes([input[pos], input[pos + 1]]);
        pos += 2;
        if header == 0 {
            break;
        }
        if (header >> 12) & 7 != 3 {
            return Err(Error::Corrupt("LZNT1 chunk signature"));
        }
        let size = usize::from(header & 0x0FFF) + 1;
        let chunk = input.get(pos..pos + size).ok_or(Error::Truncated)?;
        pos += size;
        if header & 0x8000 == 0 {
            if chunk.len() > end - out.len() {
                return Err(Error::Overflow);
            }
            out.extend_from_slice(chunk);
        } else {
            decompress_chunk(chunk, end, out)?;
        }
    }
    if pos < input.len() && pos + 2 > input.len() && input[pos..].iter().any(|&b| b != 0) {
        return Err(Error::Truncated);
    }
    check_full(out, end, expected)
}

fn decompress_chunk(chunk: &[u8], end: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    let start = out.len();
    let limit = end.min(start + CHUNK);
    let mut i = 0;
    while i < chunk.len() {
        let flags = chunk[i];
        i += 1;
        for bit in 0..8 {
            if i >= chunk.len() {
                break;
            }
            if flags & (1 << bit) == 0 {
                if out.len() == limit {
                    return Err(Error::Overflow);
                }
                out.push(chunk[i]);
                i += 1;
                continue;
            }
            let b = chunk.get(i..i + 2).ok_or(Error::Truncated)?;
            let word = usize::from(u16::from_le_bytes([b[0], b[1]]));
            i += 2;
            let pos = out.len() - start;
            if pos == 0 {
                return Err(Error::Corrupt("LZNT1 match at the start of a chunk"));
            }
            let len_bits = 16 - offset_bits(pos);
            let len = (word & ((1 << len_bits) - 1)) + MIN_MATCH;
            let offset = (word >> len_bits) + 1;
            if offset > pos {
                return Err(Error::Corrupt("LZNT1 match offset before the chunk"));
            }
            if len > limit - out.len() {
                return Err(Error::Overflow);
            }
            copy_match(out, offset, len);
        }
    }
    Ok(())
}

fn hash3(b: &[u8]) -> usize {
    let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// Compress one chunk's tokens into `out`; returns false (and leaves junk
/// past `mark` for the caller to cut) if it did not shrink.
fn compress_chunk(chunk: &[u8], table: &mut [u16], out: &mut Vec<u8>) -> bool {
    table.fill(0);
    let mut flag_at = out.len();
    out.push(0);
    let mut flag_bit = 0;
    let mut i = 0;
    while i < chunk.len() {
        if flag_bit == 8 {
            flag_at = out.len();
            out.push(0);
            flag_bit = 0;
        }
        let mut matched = 0;
        if i > 0 && i + MIN_MATCH <= chunk.len() {
            let h = hash3(&chunk[i..]);
            let cand = usize::from(table[h]);
            table[h] = (i + 1) as u16;
            if cand != 0 {
                let c = cand - 1;
                let len_bits = 16 - offset_bits(i);
                let max_len = (1usize << len_bits) - 1 + MIN_MATCH;
                let len = match_len(&chunk[..chunk.len().min(i + max_len)], c, i);
                if len >= MIN_MATCH {
                    let word = ((i - c - 1) << len_bits) | (len - MIN_MATCH);
                    out.extend_from_slice(&(word as u16).to_le_bytes());
                    out[flag_at] |= 1 << flag_bit;
                    matched = len;
                }
            }
        } else if i + MIN_MATCH <= chunk.len() {
            table[hash3(&chunk[i..])] = (i + 1) as u16;
        }
        if matched == 0 {
            out.push(chunk[i]);
            i += 1;
        } else {
            let stop = i + matched;
            i += 1;
            while i < stop && i + MIN_MATCH <= chunk.len() {
                table[hash3(&chunk[i..])] = (i + 1) as u16;
                i += 1;
            }
            i = stop;
        }
        flag_bit += 1;
    }
    true
}

/// Compress `input`, appending the chunks to `out`. A chunk that does not
/// shrink is stored raw.
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    let mut table = vec![0u16; 1 << HASH_BITS];
    for chunk in input.chunks(CHUNK) {
        let header_at = out.len();
        out.extend_from_slice(&[0, 0]);
        compress_chunk(chunk, &mut table, out);
        let size = out.len() - header_at - 2;
        if size < chunk.len() {
            let header = 0xB000 | (size - 1) as u16;
            out[header_at..header_at + 2].copy_from_slice(&header.to_le_bytes());
        } else {
            out.truncate(header_at);
            let header = 0x3000 | (chunk.len() - 1) as u16;
            out.extend_from_slice(&header.to_le_bytes());
            out.extend_from_slice(chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC_TEXT: &[u8] = b"F# F# G A A G F# E D D E F# F# E E F# F# G A A G F# E D D E F# E D D E E F# D E F# G F# D E F# G F# E D E A F# F# G A A G F# E D D E F# E D D\0";
    const SPEC_COMPRESSED: [u8; 59] = [
        0x38, 0xb0, 0x88, 0x46, 0x23, 0x20, 0x00, 0x20, 0x47, 0x20, 0x41, 0x00, 0x10, 0xa2, 0x47,
        0x01, 0xa0, 0x45, 0x20, 0x44, 0x00, 0x08, 0x45, 0x01, 0x50, 0x79, 0x00, 0xc0, 0x45, 0x20,
        0x05, 0x24, 0x13, 0x88, 0x05, 0xb4, 0x02, 0x4a, 0x44, 0xef, 0x03, 0x58, 0x02, 0x8c, 0x09,
        0x16, 0x01, 0x48, 0x45, 0x00, 0xbe, 0x00, 0x9e, 0x00, 0x04, 0x01, 0x18, 0x90, 0x00,
    ];

    #[test]
    fn lznt1_decompresses_the_spec_example() {
        assert_eq!(SPEC_TEXT.len(), 142);
        let mut out = Vec::new();
        decompress(&SPEC_COMPRESSED, SPEC_TEXT.len(), &mut out).unwrap();
        assert_eq!(out, SPEC_TEXT);
    }

    #[test]
    fn lznt1_offset_bits_grow_with_the_position() {
        assert_eq!(offset_bits(1), 4);
        assert_eq!(offset_bits(16), 4);
        assert_eq!(offset_bits(17), 5);
        assert_eq!(offset_bits(4096), 12);
    }
}
