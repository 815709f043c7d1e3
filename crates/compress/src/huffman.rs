//! LZ77+Huffman, [MS-XCA] 2.1-2.2: decompression here, compression in
//! `huffman_encode`.
//!
//! The output is produced in blocks of 65536 bytes. Each block starts with
//! 256 bytes of 4-bit code lengths for 512 symbols (low nibble first):
//! symbols 0-255 are literals, 256-511 matches (low 4 bits the length, high
//! 4 bits the number of offset bits). The codes are canonical; the bit
//! stream is read 16 bits at a time, most significant bit first.

pub use crate::huffman_encode::compress;
use crate::{check_full, copy_match, output_end, Error};

const BLOCK: usize = 65536;
const TABLE_BYTES: usize = 256;
const SYMBOLS: usize = 512;
const MAX_BITS: u32 = 15;
const NO_SYMBOL: u16 = u16::MAX;

/// A canonical decoding table: the next 15 bits index a symbol.
struct Table {
    lengths: [u8; SYMBOLS],
    symbol: Vec<u16>,
}

impl Table {
    fn new() -> Self {
        Table {
            lengths: [0; SYMBOLS],
            symbol: vec![NO_SYMBOL; 1 << MAX_BITS],
        }
    }

    /// Read the 256-byte length table and assign codes ([MS-XCA] 2.2.4):
    /// shorter codes first, within a length by symbol value.
    fn build(&mut self, bytes: &[u8]) -> Result<(), Error> {
        for (i, &b) in bytes.iter().enumerate() {
            self.lengths[2 * i] = b & 0x0F;
            self.lengths[2 * i + 1] = b >> 4;
        }
        self.symbol.fill(NO_SYMBOL);
        let mut code = 0usize;
        for len in 1..=MAX_BITS {
            for (sym, &l) in self.lengths.iter().enumerate() {
                if u32::from(l) != len {
                    continue;
                }
                let span = 1usize << (MAX_BITS - len);
                let first = code * span;
                if first + span > self.symbol.len() {
                    return Err(Error::Corrupt("LZ77+Huffman code lengths oversubscribed"));
                }
                self.symbol[first..first + span].fill(sym as u16);
                code += 1;
            }
            code <<= 1;
        }
        Ok(())
    }
}

/// The bit reader of [MS-XCA] 2.2.4: `bits` holds 32 bits, of which
/// `16 + extra` are still unread.
struct Bits<'a> {
    input: &'a [u8],
    pos: usize,
    bits: u32,
    extra: i32,
}

impl Bits<'_> {
    fn read16(&mut self) -> Result<u32, Error> {
        let b = self
            .input
            .get(self.pos..self.pos + 2)
            .ok_or(Error::Truncated)?;
        self.pos += 2;
        Ok(u32::from(u16::from_le_bytes([b[0], b[1]])))
    }

    fn start(&mut self) -> Result<(), Error> {
        self.bits = self.read16()? << 16;
        self.bits |= self.read16()?;
        self.extra = 16;
        Ok(())
    }

    /// Drop `n` <= 15 bits and refill when below 16 unread.
    fn consume(&mut self, n: u32) -> Result<(), Error> {
        self.bits = self.bits.checked_shl(n).unwrap_or(0);
        self.extra -= n as i32;
        if self.extra < 0 {
            let word = self.read16()?;
            self.bits |= word << (-self.extra) as u32;
            self.extra += 16;
        }
        Ok(())
    }

    /// The top `n` <= 15 bits.
    fn peek(&self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            self.bits >> (32 - n)
        }
    }

    fn byte(&mut self) -> Result<usize, Error> {
        let b = *self.input.get(self.pos).ok_or(Error::Truncated)?;
        self.pos += 1;
        Ok(usize::from(b))
    }
}

/// Decompress `input`, appending exactly `expected` bytes to `out`.
pub fn decompress(input: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    let base = out.len();
    let end = output_end(out, expected)?;
    let mut table = Table::new();
    let mut bits = Bits {
        input,
        pos: 0,
        bits: 0,
        extra: 0,
    };
    'blocks: while out.len() < end {
        let lengths = input
            .get(bits.pos..bits.pos + TABLE_BYTES)
            .ok_or(Error::Truncated)?;
        table.build(lengths)?;
        bits.pos += TABLE_BYTES;
        bits.start()?;
        let block_end = out.len() + BLOCK;
        while out.len() < block_end {
            if out.len() == end {
                break 'blocks;
            }
            let sym = table.symbol[bits.peek(MAX_BITS) as usize];
            if sym == NO_SYMBOL {
                return Err(Error::Corrupt("LZ77+Huffman code not in the table"));
            }
            bits.consume(u32::from(table.lengths[usize::from(sym)]))?;
            if sym < 256 {
                out.push(sym as u8);
                continue;
            }
            // Symbol 256 is also the end of stream once the input is used
            // up ([MS-XCA] 2.2.4); with the exact size known the loop stops
            // before it, so here it is always a match (offset 1, length 3).
            let sym = usize::from(sym - 256);
            let mut len = sym & 15;
            let offset_bits = (sym >> 4) as u32;
            if len == 15 {
                len = bits.byte()?;
                if len == 255 {
                    len = bits.read16()? as usize;
                    if len < 15 {
                        return Err(Error::Corrupt("LZ77+Huffman match length"));
                    }
                    len -= 15;
                }
                len += 15;
            }
            len += 3;
            let offset = (bits.peek(offset_bits) as usize) + (1 << offset_bits);
            bits.consume(offset_bits)?;
            if offset > out.len() - base {
                return Err(Error::Corrupt("LZ77+Huffman match offset before the start"));
            }
            if len > end - out.len() {
                return Err(Error::Overflow);
            }
            copy_match(out, offset, len);
        }
    }
    check_full(out, end, expected)
}

/// [MS-XCA]'s LZ77+Huffman example: "abcdefghijklmnopqrstuvwxyz" compressed (its 256-byte
/// length table, then the bit stream).
#[cfg(test)]
fn spec_alphabet_stream() -> Vec<u8> {
    let mut s = vec![0u8; 256];
    s[48..62].copy_from_slice(&[
        0x50, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x45, 0x44, 0x04,
    ]);
    s[128] = 0x04;
    s.extend_from_slice(&[
        0xd8, 0x52, 0x3e, 0xd7, 0x94, 0x11, 0x5b, 0xe9, 0x19, 0x5f, 0xf9, 0xd6, 0x7c, 0xdf, 0x8d,
        0x04, 0x00, 0x00, 0x00, 0x00,
    ]);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz77_huffman_decompresses_the_spec_alphabet_example() {
        let input = spec_alphabet_stream();
        let mut out = Vec::new();
        decompress(&input, 26, &mut out).unwrap();
        assert_eq!(out, b"abcdefghijklmnopqrstuvwxyz");
    }
}

#[cfg(test)]
mod encode_tests {
    #[test]
    fn lz77_huffman_compresses_the_spec_alphabet_example_byte_exactly() {
        let mut out = Vec::new();
        super::compress(b"abcdefghijklmnopqrstuvwxyz", &mut out);
        let want = super::spec_alphabet_stream();
        assert_eq!(out[..256], want[..256], "length table");
        assert_eq!(out[256..], want[256..], "bit stream");
    }
}
