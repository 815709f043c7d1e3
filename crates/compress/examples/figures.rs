//! Each codec's cost: MB/s compressing and decompressing, and the ratio, on a
//! text-like, a random and a zero 1 MiB buffer (best of 5 runs).
//!
//! `cargo run --release -p ringshare-compress --example figures`

use std::time::{Duration, Instant};

use ringshare_compress::{compress_into, decompress, CompressionAlgorithm as A};

const MIB: usize = 1 << 20;

// The tests' generators: the same text-like and random data.
#[path = "../tests/common/mod.rs"]
mod common;

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
        ("text", common::text(MIB, 1)),
        ("random", common::Rng(0x2545_F491_4F6C_DD1D).bytes(MIB)),
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
