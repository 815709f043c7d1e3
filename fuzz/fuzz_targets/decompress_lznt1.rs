//! The LZNT1 ([MS-XCA] 2.5) decompressor on hostile input: `[u16 expected size][stream]`.
//! Never a panic; a success has exactly the expected size. Compressors that
//! exist also round-trip the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_compress::{compress_into, decompress, CompressionAlgorithm};

const ALG: CompressionAlgorithm = CompressionAlgorithm::LZNT1;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let expected = usize::from(u16::from_le_bytes([data[0], data[1]])) * 4;
    let stream = &data[2..];
    if let Ok(out) = decompress(ALG, stream, expected, 1 << 20) {
        assert_eq!(out.len(), expected);
    }
    let mut packed = Vec::new();
    if compress_into(ALG, stream, &mut packed) {
        let back = decompress(ALG, &packed, stream.len(), stream.len());
        assert_eq!(back.as_deref(), Ok(stream), "round trip");
    }
});
