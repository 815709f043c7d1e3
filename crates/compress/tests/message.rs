//! The receive and send steps over whole messages: the receiver checks of
//! [MS-SMB2] 3.3.5.2.x and compression only when smaller.

use crate::common;

use ringshare_compress::message::{size_limit, CompressOptions, Disconnect};
use ringshare_compress::{compress_message, decompress_message, CompressionAlgorithm as A};
use ringshare_wire::compression::{self, PatternV1, UnchainedHeader};

const ALL: [A; 5] = [A::LZNT1, A::LZ77, A::LZ77_HUFFMAN, A::PATTERN_V1, A::LZ4];

/// A READ-response-like message: 64-byte header, 16 bytes of body, data.
fn message(data: &[u8]) -> Vec<u8> {
    let mut m = vec![0xFE, b'S', b'M', b'B'];
    m.resize(80, 1);
    m.extend_from_slice(data);
    m
}

fn limit() -> usize {
    size_limit(8 << 20, 8 << 20, 65536)
}

#[test]
fn unchained_messages_round_trip_with_each_compressor() {
    let msg = message(&common::text(60_000, 1));
    for alg in [A::LZ77, A::LZNT1, A::LZ77_HUFFMAN, A::LZ4] {
        let opts = CompressOptions {
            algorithm: alg,
            plain_prefix: 80,
            chained: false,
        };
        let c = compress_message(&msg, &opts).expect("smaller");
        assert!(c.len() < msg.len() / 2);
        assert_eq!(&c[..4], &[0xFC, b'S', b'M', b'B']);
        assert_eq!(
            decompress_message(&c, &ALL, limit()).unwrap(),
            msg,
            "{alg:?}"
        );
        assert_eq!(
            decompress_message(&c, &[A::PATTERN_V1], limit()),
            Err(Disconnect::NotNegotiated(alg))
        );
    }
}

#[test]
fn chained_messages_carry_leading_and_trailing_runs_as_pattern_v1() {
    let mut data = vec![0u8; 100_000];
    data.extend(common::text(20_000, 2));
    data.extend(vec![0xAAu8; 50_000]);
    let msg = message(&data);
    for alg in [A::LZ77, A::LZNT1, A::LZ77_HUFFMAN, A::LZ4] {
        let opts = CompressOptions {
            algorithm: alg,
            plain_prefix: 80,
            chained: true,
        };
        let c = compress_message(&msg, &opts).expect("smaller");
        let compression::CompressedMessage::Chained { payloads, .. } =
            compression::parse(&c).unwrap()
        else {
            panic!("not chained");
        };
        let algs: Vec<A> = payloads.iter().map(|p| p.algorithm).collect();
        assert_eq!(algs, [A::NONE, A::PATTERN_V1, alg, A::PATTERN_V1]);
        assert_eq!(decompress_message(&c, &ALL, limit()).unwrap(), msg);
        assert_eq!(
            decompress_message(&c, &[alg], limit()),
            Err(Disconnect::NotNegotiated(A::PATTERN_V1))
        );
    }
}

#[test]
fn incompressible_data_is_not_compressed() {
    let msg = message(&common::Rng(4).bytes(50_000));
    for alg in [A::LZ77, A::LZNT1, A::LZ77_HUFFMAN, A::LZ4] {
        for chained in [false, true] {
            let opts = CompressOptions {
                algorithm: alg,
                plain_prefix: 80,
                chained,
            };
            assert_eq!(
                compress_message(&msg, &opts),
                None,
                "{alg:?} chained {chained}"
            );
        }
    }
}

#[test]
fn an_lz4_message_larger_than_the_original_is_accepted() {
    // What the smb crate sends: LZ4, Offset 0, whatever the size.
    let mut msg = vec![0xFE, b'S', b'M', b'B'];
    msg.extend(common::Rng(8).bytes(2_000));
    let mut c = Vec::new();
    let header = UnchainedHeader {
        original_size: msg.len() as u32,
        algorithm: A::LZ4,
        offset: 0,
    };
    compression::encode_unchained_header(&mut c, &header);
    c.extend(lz4_flex::block::compress(&msg));
    assert!(c.len() > msg.len());
    assert_eq!(decompress_message(&c, &[A::LZ4], limit()).unwrap(), msg);
}

#[test]
fn the_receiver_checks_close_the_connection() {
    let msg = message(&common::text(10_000, 3));
    let opts = CompressOptions {
        algorithm: A::LZ77,
        plain_prefix: 0,
        chained: false,
    };
    let c = compress_message(&msg, &opts).unwrap();
    // Size above the bound.
    assert!(matches!(
        decompress_message(&c, &ALL, msg.len() - 1),
        Err(Disconnect::TooLarge { .. })
    ));
    // Announced size off by one either way.
    for delta in [-1i64, 1] {
        let mut bad = c.clone();
        let n = (msg.len() as i64 + delta) as u32;
        bad[4..8].copy_from_slice(&n.to_le_bytes());
        assert!(matches!(
            decompress_message(&bad, &ALL, limit()),
            Err(Disconnect::Decompress(..))
        ));
    }
    // NONE unchained.
    let mut bad = c.clone();
    bad[8..10].copy_from_slice(&0u16.to_le_bytes());
    assert_eq!(
        decompress_message(&bad, &ALL, limit()),
        Err(Disconnect::NotNegotiated(A::NONE))
    );
    // Not an SMB2 message once decompressed.
    let mut other = msg.clone();
    other[0] = 0xFD;
    let c2 = compress_message(&other, &opts).unwrap();
    assert_eq!(
        decompress_message(&c2, &ALL, limit()),
        Err(Disconnect::NotSmb2)
    );
    // Too short for a header.
    assert!(matches!(
        decompress_message(&c[..10], &ALL, limit()),
        Err(Disconnect::Malformed(_))
    ));
}

#[test]
fn chained_payloads_must_add_up_to_the_announced_size() {
    let mut c = Vec::new();
    compression::encode_chained_header(&mut c, 200);
    compression::encode_chained_payload(&mut c, A::NONE, true, None, &message(&[])[..80]);
    let p = PatternV1 {
        pattern: 0,
        repetitions: 100,
    };
    compression::encode_chained_payload(&mut c, A::PATTERN_V1, false, None, &p.encode());
    assert_eq!(
        decompress_message(&c, &ALL, limit()),
        Err(Disconnect::SizeMismatch {
            announced: 200,
            got: 180
        })
    );
    // A run past the announced size stops before it is written.
    let mut c = Vec::new();
    compression::encode_chained_header(&mut c, 100);
    let p = PatternV1 {
        pattern: 0,
        repetitions: u32::MAX,
    };
    compression::encode_chained_payload(&mut c, A::PATTERN_V1, true, None, &p.encode());
    assert!(matches!(
        decompress_message(&c, &ALL, limit()),
        Err(Disconnect::Decompress(..))
    ));
}

#[test]
fn size_limit_is_256_plus_header_plus_the_largest_maximum() {
    assert_eq!(size_limit(1 << 20, 8 << 20, 65536), 256 + 64 + (8 << 20));
}

/// The payload algorithms of a chained message.
fn chained_algorithms(c: &[u8]) -> Vec<A> {
    let compression::CompressedMessage::Chained { payloads, .. } = compression::parse(c).unwrap()
    else {
        panic!("not chained");
    };
    payloads.iter().map(|p| p.algorithm).collect()
}

#[test]
fn holes_in_the_middle_become_pattern_v1_and_the_parts_between_go_to_the_algorithm() {
    // text | hole | random | hole | text with a 10-byte "hole" (too short
    // for Pattern_V1: it stays data) | hole at the end, the holes given by
    // the caller (a sparse file's map), never scanned.
    let mut data = common::text(20_000, 3);
    let hole1 = (data.len(), 300_000);
    data.resize(data.len() + 300_000, 0);
    data.extend(common::Rng(5).bytes(30_000));
    let hole2 = (data.len(), 200_000);
    data.resize(data.len() + 200_000, 0);
    data.extend(common::text(5_000, 6));
    let short = (data.len(), 10);
    data.resize(data.len() + 10, 0);
    data.extend(common::text(7_000, 7));
    let hole3 = (data.len(), 4096);
    data.resize(data.len() + 4096, 0);
    let msg = message(&data);
    let opts = CompressOptions {
        algorithm: A::LZ4,
        plain_prefix: 80,
        chained: true,
    };
    let holes = [hole1, hole2, short, hole3];
    let c = ringshare_compress::compress_holes_if_it_pays(&msg, &opts, &holes).expect("pays");
    assert_eq!(
        chained_algorithms(&c),
        [
            A::NONE,
            A::LZ4,
            A::PATTERN_V1,
            A::NONE,
            A::PATTERN_V1,
            A::LZ4,
            A::PATTERN_V1
        ]
    );
    assert_eq!(decompress_message(&c, &ALL, limit()).unwrap(), msg);
    // A message that is one hole: header and one Pattern_V1 payload.
    let zeros = message(&vec![0u8; 1 << 20]);
    let c = ringshare_compress::compress_holes_if_it_pays(&zeros, &opts, &[(0, 1 << 20)]).unwrap();
    assert_eq!(chained_algorithms(&c), [A::NONE, A::PATTERN_V1]);
    assert!(c.len() < 120, "{}", c.len());
    assert_eq!(decompress_message(&c, &ALL, limit()).unwrap(), zeros);
    // Unchained, holes cannot be Pattern_V1: the ordinary rule.
    let plain = CompressOptions {
        chained: false,
        ..opts
    };
    let c = ringshare_compress::compress_holes_if_it_pays(&msg, &plain, &holes).unwrap();
    assert_eq!(decompress_message(&c, &ALL, limit()).unwrap(), msg);
}
