//! Plain LZ77 ("XPRESS"), [MS-XCA] 2.3 (decompression) and 2.4 (compression).
//!
//! A stream is groups of 32 tokens behind a 32-bit flag word (most
//! significant bit first: 0 literal byte, 1 match). A match is a 16-bit word,
//! `(offset - 1) << 3 | length`, offset up to 8192, with longer lengths in a
//! shared half byte, then a byte, then 16 or 32 bits.

use crate::{check_full, copy_match, output_end, Error};

/// Largest match offset the format encodes.
pub const MAX_OFFSET: usize = 8192;
const MIN_MATCH: usize = 3;
const HASH_BITS: u32 = 14;

fn read_u16(input: &[u8], at: usize) -> Result<u16, Error> {
    match input.get(at..at + 2) {
        Some(b) => Ok(u16::from_le_bytes([b[0], b[1]])),
        None => Err(Error::Truncated),
    }
}

fn read_u32(input: &[u8], at: usize) -> Result<u32, Error> {
    match input.get(at..at + 4) {
        Some(b) => Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(Error::Truncated),
    }
}

fn read_u8(input: &[u8], at: usize) -> Result<u8, Error> {
    input.get(at).copied().ok_or(Error::Truncated)
}

/// The decompressor's state between tokens.
struct Decoder<'a> {
    input: &'a [u8],
    pos: usize,
    /// Where the half byte shared by the next long match is, if one is open.
    half_byte: Option<usize>,
}

impl Decoder<'_> {
    /// The match length after the 3-bit field said 7 ([MS-XCA] 2.3.4).
    fn long_length(&mut self) -> Result<usize, Error> {
        let nibble = match self.half_byte.take() {
            None => {
                let b = read_u8(self.input, self.pos)?;
                self.half_byte = Some(self.pos);
                self.pos += 1;
                b & 0x0F
            }
            Some(at) => read_u8(self.input, at)? >> 4,
        };
        let mut len = usize::from(nibble);
        if len == 15 {
            len = usize::from(read_u8(self.input, self.pos)?);
            self.pos += 1;
            if len == 255 {
                len = usize::from(read_u16(self.input, self.pos)?);
                self.pos += 2;
                if len == 0 {
                    len = read_u32(self.input, self.pos)? as usize;
                    self.pos += 4;
                }
                if len < 15 + 7 {
                    return Err(Error::Corrupt("LZ77 match length"));
                }
                len -= 15 + 7;
            }
            len += 15;
        }
        Ok(len + 7)
    }
}

/// Decompress `input`, appending exactly `expected` bytes to `out`.
pub fn decompress(input: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    let base = out.len();
    let end = output_end(out, expected)?;
    let mut d = Decoder {
        input,
        pos: 0,
        half_byte: None,
    };
    let mut flags = 0u32;
    let mut flag_count = 0u32;
    loop {
        if flag_count == 0 {
            if d.pos == input.len() {
                break;
            }
            flags = read_u32(input, d.pos)?;
            d.pos += 4;
            flag_count = 32;
        }
        flag_count -= 1;
        if flags & (1 << flag_count) == 0 {
            let Some(&b) = input.get(d.pos) else { break };
            if out.len() == end {
                return Err(Error::Overflow);
            }
            out.push(b);
            d.pos += 1;
            continue;
        }
        if d.pos == input.len() {
            break;
        }
        let word = usize::from(read_u16(input, d.pos)?);
        d.pos += 2;
        let offset = (word >> 3) + 1;
        let mut len = word & 7;
        if len == 7 {
            len = d.long_length()?;
        }
        len += MIN_MATCH;
        if offset > out.len() - base {
            return Err(Error::Corrupt("LZ77 match offset before the start"));
        }
        if len > end - out.len() {
            return Err(Error::Overflow);
        }
        copy_match(out, offset, len);
    }
    check_full(out, end, expected)
}

/// The compressor's output: flag words are reserved ahead and filled in.
struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    flag_at: usize,
    flags: u32,
    flag_count: u32,
    half_byte: Option<usize>,
}

impl<'a> Encoder<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        let flag_at = out.len();
        out.extend_from_slice(&[0; 4]);
        Encoder {
            out,
            flag_at,
            flags: 0,
            flag_count: 0,
            half_byte: None,
        }
    }

    fn flag(&mut self, bit: u32) {
        self.flags = (self.flags << 1) | bit;
        self.flag_count += 1;
        if self.flag_count == 32 {
            self.out[self.flag_at..self.flag_at + 4].copy_from_slice(&self.flags.to_le_bytes());
            self.flag_at = self.out.len();
            self.out.extend_from_slice(&[0; 4]);
            self.flag_count = 0;
            self.flags = 0;
        }
    }

    fn literal(&mut self, b: u8) {
        self.out.push(b);
        self.flag(0);
    }

    /// A match of `len` >= 3 bytes at distance `offset` in 1..=8192.
    fn matched(&mut self, offset: usize, len: usize) {
        let len = len - MIN_MATCH;
        let field = len.min(7);
        let word = (((offset - 1) << 3) | field) as u16;
        self.out.extend_from_slice(&word.to_le_bytes());
        if len >= 7 {
            let rest = len - 7;
            let nibble = rest.min(15) as u8;
            match self.half_byte.take() {
                None => {
                    self.half_byte = Some(self.out.len());
                    self.out.push(nibble);
                }
                Some(at) => self.out[at] |= nibble << 4,
            }
            if rest >= 15 {
                let rest = rest - 15;
                if rest < 255 {
                    self.out.push(rest as u8);
                } else {
                    self.out.push(255);
                    match u16::try_from(len) {
                        Ok(l) => self.out.extend_from_slice(&l.to_le_bytes()),
                        Err(_) => {
                            self.out.extend_from_slice(&[0, 0]);
                            self.out.extend_from_slice(&(len as u32).to_le_bytes());
                        }
                    }
                }
            }
        }
        self.flag(1);
    }

    fn finish(self) {
        let shift = 32 - self.flag_count;
        let flags = if shift == 32 {
            u32::MAX
        } else {
            (self.flags << shift) | ((1u32 << shift) - 1)
        };
        self.out[self.flag_at..self.flag_at + 4].copy_from_slice(&flags.to_le_bytes());
    }
}

fn hash3(b: &[u8]) -> usize {
    let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// How many bytes from `a` and `b` (a < b) agree, up to the end of `data`.
pub(crate) fn match_len(data: &[u8], a: usize, b: usize) -> usize {
    let max = data.len() - b;
    let mut n = 0;
    while n + 8 <= max {
        let x = u64::from_le_bytes(data[a + n..a + n + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(data[b + n..b + n + 8].try_into().unwrap_or([0; 8]));
        let diff = x ^ y;
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < max && data[a + n] == data[b + n] {
        n += 1;
    }
    n
}

/// Compress `input` (any length that fits a u32 match length), appending
/// the stream to `out`. Greedy, one hash candidate per position.
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len() + input.len() / 32 + 8);
    let mut enc = Encoder::new(out);
    let mut table = vec![0u32; 1 << HASH_BITS];
    let mut i = 0;
    while i < input.len() {
        if i + MIN_MATCH > input.len() {
            enc.literal(input[i]);
            i += 1;
            continue;
        }
        let h = hash3(&input[i..]);
        let cand = table[h] as usize;
        table[h] = (i + 1) as u32;
        if cand != 0 && i - (cand - 1) <= MAX_OFFSET {
            let c = cand - 1;
            let len = match_len(input, c, i);
            if len >= MIN_MATCH {
                enc.matched(i - c, len);
                let stop = i + len;
                i += 1;
                while i < stop && i + MIN_MATCH <= input.len() {
                    table[hash3(&input[i..])] = (i + 1) as u32;
                    i += 1;
                }
                i = stop;
                continue;
            }
        }
        enc.literal(input[i]);
        i += 1;
    }
    enc.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz77_compresses_the_spec_alphabet_example() {
        let mut out = Vec::new();
        compress(b"abcdefghijklmnopqrstuvwxyz", &mut out);
        let mut want = vec![0x3f, 0, 0, 0];
        want.extend_from_slice(b"abcdefghijklmnopqrstuvwxyz");
        assert_eq!(out, want);
    }

    #[test]
    fn lz77_compresses_the_spec_repeated_abc_example() {
        let data: Vec<u8> = b"abc".iter().copied().cycle().take(300).collect();
        let mut out = Vec::new();
        compress(&data, &mut out);
        let want = [
            0xff, 0xff, 0xff, 0x1f, 0x61, 0x62, 0x63, 0x17, 0x00, 0x0f, 0xff, 0x26, 0x01,
        ];
        assert_eq!(out, want);
        let mut back = Vec::new();
        decompress(&want, 300, &mut back).unwrap();
        assert_eq!(back, data);
    }
}
