//! Each codec's cost: MB/s compressing and decompressing, and the ratio, on a
//! text-like, a random and a zero 1 MiB buffer (best of 5 runs).
//!
//! `cargo run --release -p ringshare-compress --example figures`

use std::time::{Duration, Instant};

use ringshare_compress::{compress_into, decompress, CompressionAlgorithm as A};

const MIB: usize = 1 << 20;

fn text(n: usize) -> Vec<u8> {
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
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
        if x.is_multiple_of(29) {
            out.extend_from_slice(format!("{}", x % 100_000).as_bytes());
        }
    }
    out.truncate(n);
    out
}

fn random(n: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn best<F: FnMut()>(mut f: F) -> Duration {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn mbs(d: Duration) -> f64 {
    MIB as f64 / 1e6 / d.as_secs_f64()
}

fn main() {
    println!(
        "{:<6} {:<7} {:>12} {:>12} {:>8}",
        "codec", "data", "compress", "decompress", "ratio"
    );
    for (name, data) in [
        ("text", text(MIB)),
        ("random", random(MIB)),
        ("zeros", vec![0; MIB]),
    ] {
        for (alg, label) in [
            (A::LZ77, "LZ77"),
            (A::LZNT1, "LZNT1"),
            (A::LZ77_HUFFMAN, "LZ77+H"),
            (A::LZ4, "LZ4"),
        ] {
            let mut c = Vec::new();
            let tc = best(|| {
                c.clear();
                compress_into(alg, &data, &mut c);
            });
            let td = best(|| {
                let out = decompress(alg, &c, MIB, MIB).expect("round trip");
                assert_eq!(out.len(), MIB);
            });
            println!(
                "{label:<6} {name:<7} {:>8.0} MB/s {:>7.0} MB/s {:>7.2}%",
                mbs(tc),
                mbs(td),
                100.0 * c.len() as f64 / MIB as f64
            );
        }
    }
}
