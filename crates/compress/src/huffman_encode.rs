//! LZ77+Huffman compression, [MS-XCA] 2.1.
//!
//! Each 64 KiB of input is one block: its LZ77 tokens (window 65535, one
//! hash candidate per position), canonical Huffman codes of at most 15 bits
//! for its 512 symbols (the last block also codes the end symbol 256), the
//! 256-byte length table, then the bit stream. The 16-bit words of the bit
//! stream sit where the decoder of [MS-XCA] 2.2.4 reads them: two at the
//! start of a block, then one each time fewer than 16 bits are left, with
//! the extra length bytes of a match in between.

use crate::lz77::match_len;

const BLOCK: usize = 65536;
const SYMBOLS: usize = 512;
const MAX_BITS: u8 = 15;
const MIN_MATCH: usize = 3;
const MAX_OFFSET: usize = 65535;
const HASH_BITS: u32 = 15;
const EOF: usize = 256;

#[derive(Clone, Copy)]
enum Token {
    Literal(u8),
    Match { len: usize, offset: usize },
}

fn hash3(b: &[u8]) -> usize {
    let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

fn offset_bits(offset: usize) -> usize {
    (usize::BITS - 1 - offset.leading_zeros()) as usize
}

fn symbol(t: &Token) -> usize {
    match *t {
        Token::Literal(b) => usize::from(b),
        Token::Match { len, offset } => {
            256 + (offset_bits(offset) << 4) + (len - MIN_MATCH).min(15)
        }
    }
}

/// The tokens of `input[start..end]`, matching back into all of `input`.
fn tokens(input: &[u8], start: usize, end: usize, table: &mut [u32], out: &mut Vec<Token>) {
    out.clear();
    let data = &input[..end];
    let mut i = start;
    while i < end {
        if i + MIN_MATCH <= end {
            let h = hash3(&data[i..]);
            let cand = table[h] as usize;
            table[h] = (i + 1) as u32;
            if cand != 0 && i - (cand - 1) <= MAX_OFFSET {
                let c = cand - 1;
                let len = match_len(data, c, i);
                // Offset 1 length 3 would be symbol 256, the end-of-stream
                // symbol to a decoder that has used up its input: a literal.
                if len >= MIN_MATCH && !(len == MIN_MATCH && i - c == 1) {
                    out.push(Token::Match { len, offset: i - c });
                    let stop = i + len;
                    i += 1;
                    while i < stop && i + MIN_MATCH <= end {
                        table[hash3(&data[i..])] = (i + 1) as u32;
                        i += 1;
                    }
                    i = stop;
                    continue;
                }
            }
        }
        out.push(Token::Literal(data[i]));
        i += 1;
    }
}

/// Huffman code lengths of at most 15 bits for `freq`; every used symbol
/// gets a length, and at least two symbols are coded.
fn code_lengths(freq: &[u32; SYMBOLS]) -> [u8; SYMBOLS] {
    let mut f: Vec<u64> = freq.iter().map(|&x| u64::from(x)).collect();
    if f.iter().filter(|&&x| x > 0).count() < 2 {
        for x in f.iter_mut().take(2) {
            *x = (*x).max(1);
        }
    }
    loop {
        let lengths = huffman_lengths(&f);
        if lengths.iter().all(|&l| l <= MAX_BITS) {
            return lengths;
        }
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = (*x >> 1).max(1);
        }
    }
}

/// Plain Huffman lengths (may exceed 15) by repeatedly joining the two
/// lightest trees.
fn huffman_lengths(f: &[u64]) -> [u8; SYMBOLS] {
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        std::collections::BinaryHeap::new();
    let mut parent: Vec<usize> = vec![usize::MAX; SYMBOLS];
    for (s, &w) in f.iter().enumerate() {
        if w > 0 {
            heap.push(std::cmp::Reverse((w, s)));
        }
    }
    while heap.len() > 1 {
        let (Some(std::cmp::Reverse((wa, a))), Some(std::cmp::Reverse((wb, b)))) =
            (heap.pop(), heap.pop())
        else {
            break;
        };
        let node = parent.len();
        parent.push(usize::MAX);
        parent[a] = node;
        parent[b] = node;
        heap.push(std::cmp::Reverse((wa + wb, node)));
    }
    let mut lengths = [0u8; SYMBOLS];
    for (s, &w) in f.iter().enumerate() {
        if w == 0 {
            continue;
        }
        let mut depth = 0usize;
        let mut n = s;
        while parent[n] != usize::MAX {
            n = parent[n];
            depth += 1;
        }
        lengths[s] = depth.min(255) as u8;
    }
    lengths
}

/// Canonical codes: by length, then by symbol ([MS-XCA] 2.2.4's order).
fn canonical_codes(lengths: &[u8; SYMBOLS]) -> [u16; SYMBOLS] {
    let mut codes = [0u16; SYMBOLS];
    let mut code = 0u32;
    for len in 1..=MAX_BITS {
        for (s, &l) in lengths.iter().enumerate() {
            if l == len {
                codes[s] = code as u16;
                code += 1;
            }
        }
        code <<= 1;
    }
    codes
}

/// The bit writer mirroring the decoder's reads.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Output positions of the words the decoder has read, not yet full.
    slots: std::collections::VecDeque<usize>,
    /// Bits written into the front slot so far.
    acc: u32,
    acc_bits: u32,
    /// Bits consumed by the decoder and words it has read.
    consumed: u64,
    words: u64,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        let mut w = BitWriter {
            out,
            slots: Default::default(),
            acc: 0,
            acc_bits: 0,
            consumed: 0,
            words: 0,
        };
        w.reserve();
        w.reserve();
        w
    }

    fn reserve(&mut self) {
        self.slots.push_back(self.out.len());
        self.out.extend_from_slice(&[0, 0]);
        self.words += 1;
    }

    /// Write the low `n` <= 16 bits of `v`, most significant first.
    fn bits(&mut self, n: u32, v: u32) {
        for i in (0..n).rev() {
            self.acc = (self.acc << 1) | ((v >> i) & 1);
            self.acc_bits += 1;
            if self.acc_bits == 16 {
                self.flush_word();
            }
        }
        self.consumed += u64::from(n);
        if self.consumed > 16 * (self.words - 1) {
            self.reserve();
        }
    }

    fn flush_word(&mut self) {
        if let Some(at) = self.slots.pop_front() {
            self.out[at..at + 2].copy_from_slice(&(self.acc as u16).to_le_bytes());
        }
        self.acc = 0;
        self.acc_bits = 0;
    }

    fn finish(mut self) {
        if self.acc_bits > 0 {
            self.acc <<= 16 - self.acc_bits;
            self.flush_word();
        }
    }
}

fn write_block(tokens: &[Token], last: bool, out: &mut Vec<u8>) {
    let mut freq = [0u32; SYMBOLS];
    for t in tokens {
        freq[symbol(t)] += 1;
    }
    if last {
        freq[EOF] += 1;
    }
    let lengths = code_lengths(&freq);
    let codes = canonical_codes(&lengths);
    for pair in lengths.chunks(2) {
        out.push(pair[0] | (pair[1] << 4));
    }
    let mut w = BitWriter::new(out);
    for t in tokens {
        let s = symbol(t);
        w.bits(u32::from(lengths[s]), u32::from(codes[s]));
        if let Token::Match { len, offset } = *t {
            let l = len - MIN_MATCH;
            if l >= 15 {
                if l - 15 < 255 {
                    w.out.push((l - 15) as u8);
                } else {
                    w.out.push(255);
                    w.out.extend_from_slice(&(l as u16).to_le_bytes());
                }
            }
            let ob = offset_bits(offset) as u32;
            w.bits(ob, (offset - (1 << ob)) as u32);
        }
    }
    if last {
        w.bits(u32::from(lengths[EOF]), u32::from(codes[EOF]));
    }
    w.finish();
}

/// Compress `input`, appending the stream to `out`.
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    let mut table = vec![0u32; 1 << HASH_BITS];
    let mut toks = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + BLOCK).min(input.len());
        tokens(input, start, end, &mut table, &mut toks);
        let last = end == input.len() && (end == 0 || !end.is_multiple_of(BLOCK));
        write_block(&toks, last, out);
        if last {
            break;
        }
        if end == input.len() {
            // A whole number of blocks: the end symbol gets a block of its own.
            write_block(&[], true, out);
            break;
        }
        start = end;
    }
}
