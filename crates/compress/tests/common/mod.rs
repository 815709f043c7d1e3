//! Test data shared by the compression tests.
#![allow(dead_code)]

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Text-like data: words from a small vocabulary, lines of varying length.
pub fn text(n: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "server",
        "share",
        "file",
        "read",
        "write",
        "lease",
        "oplock",
        "session",
        "tree",
        "connect",
        "compression",
        "negotiate",
        "status",
        "request",
        "response",
        "channel",
        "durable",
        "handle",
        "byte",
        "range",
        "lock",
        "directory",
        "notify",
    ];
    let mut r = Rng(seed | 1);
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        let w = WORDS[(r.next() % WORDS.len() as u64) as usize];
        out.extend_from_slice(w.as_bytes());
        out.push(if r.next().is_multiple_of(11) {
            b'\n'
        } else {
            b' '
        });
        if r.next().is_multiple_of(29) {
            out.extend_from_slice(format!("{}", r.next() % 100_000).as_bytes());
        }
    }
    out.truncate(n);
    out
}

/// The varied buffers every codec is run over.
pub fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut v = vec![
        ("empty".to_string(), Vec::new()),
        ("text 10k".to_string(), text(10_000, 1)),
        ("random 10k".to_string(), r.bytes(10_000)),
        ("zeros 100k".to_string(), vec![0; 100_000]),
        (
            "abc 300".to_string(),
            b"abc".iter().copied().cycle().take(300).collect(),
        ),
    ];
    let mut mixed = text(30_000, 2);
    mixed.extend(vec![0u8; 20_000]);
    mixed.extend(r.bytes(9_000));
    mixed.extend(text(40_000, 3));
    mixed.extend(vec![0xFFu8; 5_000]);
    v.push(("mixed".to_string(), mixed));
    let mut periodic = Vec::new();
    for i in 0..70_000u32 {
        periodic.push((i % 251) as u8 ^ (i / 4096) as u8);
    }
    v.push(("periodic 70k".to_string(), periodic));
    let mut big = text(1 << 20, 4);
    big.extend(r.bytes(100_000));
    big.extend(vec![7u8; 200_000]);
    v.push(("large 1.3M".to_string(), big));
    v
}

/// [MS-XCA]'s LZ77+Huffman example: "abcdefghijklmnopqrstuvwxyz" compressed (its 256-byte
/// length table, then the bit stream).
pub fn spec_huffman_alphabet() -> Vec<u8> {
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
