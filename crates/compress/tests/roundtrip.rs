//! Round trips of every codec over varied data, every short length, and
//! every truncation of a valid stream.

use crate::common;

use ringshare_compress::{compress_into, decompress, CompressionAlgorithm as A, Error};

const CODECS: [A; 4] = [A::LZ77, A::LZNT1, A::LZ77_HUFFMAN, A::LZ4];

fn packed(alg: A, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    assert!(compress_into(alg, data, &mut out));
    out
}

#[test]
fn every_codec_round_trips_text_random_zeros_mixed_and_large_buffers() {
    for (name, data) in common::corpus() {
        for alg in CODECS {
            let c = packed(alg, &data);
            let back = decompress(alg, &c, data.len(), data.len())
                .unwrap_or_else(|e| panic!("{alg:?} {name}: {e}"));
            assert!(back == data, "{alg:?} {name}: differs");
        }
    }
}

#[test]
fn every_codec_round_trips_every_length_up_to_300() {
    let text = common::text(300, 9);
    let random = common::Rng(5).bytes(300);
    for n in 0..=300 {
        for data in [&text[..n], &random[..n], &vec![0u8; n][..]] {
            for alg in CODECS {
                let c = packed(alg, data);
                assert_eq!(
                    decompress(alg, &c, n, n).as_deref(),
                    Ok(data),
                    "{alg:?} len {n}"
                );
            }
        }
    }
}

#[test]
fn compressible_data_shrinks() {
    let text = common::text(100_000, 7);
    for alg in CODECS {
        let c = packed(alg, &text);
        assert!(
            c.len() < text.len() / 2,
            "{alg:?}: {} of {}",
            c.len(),
            text.len()
        );
    }
}

#[test]
fn every_truncation_of_a_valid_stream_is_an_error_not_a_panic() {
    let mut data = common::text(5_000, 11);
    data.extend(common::Rng(3).bytes(300));
    data.extend(vec![0u8; 2000]);
    for alg in CODECS {
        let c = packed(alg, &data);
        for cut in 0..c.len() {
            assert!(
                decompress(alg, &c[..cut], data.len(), data.len()).is_err(),
                "{alg:?} cut {cut}"
            );
        }
    }
}

#[test]
fn a_wrong_expected_size_is_an_error() {
    let data = common::text(20_000, 12);
    for alg in CODECS {
        let c = packed(alg, &data);
        assert!(
            decompress(alg, &c, data.len() - 1, data.len()).is_err(),
            "{alg:?} shorter"
        );
        assert!(
            decompress(alg, &c, data.len() + 1, data.len() + 1).is_err(),
            "{alg:?} longer"
        );
        assert_eq!(
            decompress(alg, &c, data.len(), data.len() - 1),
            Err(Error::TooLarge)
        );
    }
}

#[test]
fn corrupted_streams_never_panic_and_never_exceed_the_expected_size() {
    let data = common::text(3_000, 13);
    let mut r = common::Rng(77);
    for alg in [A::LZ77, A::LZNT1, A::LZ4, A::LZ77_HUFFMAN] {
        let c = if alg == A::LZ77_HUFFMAN {
            r.bytes(600)
        } else {
            packed(alg, &data)
        };
        for _ in 0..2000 {
            let mut bad = c.clone();
            for _ in 0..1 + r.next() % 4 {
                let i = (r.next() as usize) % bad.len();
                bad[i] = r.next() as u8;
            }
            if let Ok(out) = decompress(alg, &bad, data.len(), data.len()) {
                assert_eq!(out.len(), data.len());
            }
        }
    }
}

#[test]
fn lz77_huffman_truncations_of_the_spec_example_are_errors() {
    let input = common::spec_huffman_alphabet();
    assert!(decompress(A::LZ77_HUFFMAN, &input, 26, 26).is_ok());
    // 256 bytes of table, 16 of codes: cutting into them is an error.
    for cut in 0..256 + 16 {
        assert!(
            decompress(A::LZ77_HUFFMAN, &input[..cut], 26, 26).is_err(),
            "cut {cut}"
        );
    }
}

#[test]
fn every_codec_round_trips_lengths_around_the_64k_block_and_4k_chunk() {
    let text = common::text(140_000, 17);
    for n in [4095, 4096, 4097, 65535, 65536, 65537, 131_072, 131_073] {
        for alg in CODECS {
            let c = packed(alg, &text[..n]);
            assert_eq!(
                decompress(alg, &c, n, n).as_deref(),
                Ok(&text[..n]),
                "{alg:?} len {n}"
            );
        }
    }
}
