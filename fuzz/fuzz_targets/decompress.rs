//! The decompressors of ringshare-compress on hostile input, one codec per run chosen by the
//! first byte (LZ77, LZNT1, LZ77+Huffman, LZ4): `[codec][u16 size/4][stream]` (bound 1 MiB).
//! Never a panic; a success has exactly the asked size; the input round-trips through the
//! codec's compressor.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_compress::{compress_into, decompress, CompressionAlgorithm};

const CODECS: [CompressionAlgorithm; 4] = [
    CompressionAlgorithm::LZ77,
    CompressionAlgorithm::LZNT1,
    CompressionAlgorithm::LZ77_HUFFMAN,
    CompressionAlgorithm::LZ4,
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let alg = CODECS[usize::from(data[0]) % CODECS.len()];
    let expected = usize::from(u16::from_le_bytes([data[1], data[2]])) * 4;
    let stream = &data[3..];
    if let Ok(out) = decompress(alg, stream, expected, 1 << 20) {
        assert_eq!(out.len(), expected);
    }
    let mut packed = Vec::new();
    if compress_into(alg, stream, &mut packed) {
        let back = decompress(alg, &packed, stream.len(), stream.len());
        assert_eq!(back.as_deref(), Ok(stream), "round trip");
    }
});
