//! A received COMPRESSION_TRANSFORM_HEADER message ([MS-SMB2] 2.2.42) through
//! the parser and the whole receive step (every algorithm negotiated, a
//! 1 MiB bound): never a panic, a result is an SMB2 message within the
//! bound; an unchained header re-encodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_compress::{decompress_message, CompressionAlgorithm as A};
use ringshare_wire::compression::{self, CompressedMessage, UNCHAINED_HEADER_LEN};

const ALL: [A; 5] = [A::LZNT1, A::LZ77, A::LZ77_HUFFMAN, A::PATTERN_V1, A::LZ4];
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if let Ok(CompressedMessage::Unchained { header, .. }) = compression::parse(data) {
        let mut out = Vec::new();
        compression::encode_unchained_header(&mut out, &header);
        assert_eq!(
            out[..],
            data[..UNCHAINED_HEADER_LEN],
            "unchained header round trip"
        );
    }
    if let Ok(msg) = decompress_message(data, &ALL, LIMIT) {
        assert!(msg.len() <= LIMIT);
        assert_eq!(&msg[..4], &[0xFE, b'S', b'M', b'B']);
    }
});
