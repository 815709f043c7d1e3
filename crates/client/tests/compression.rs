//! SMB 3.1.1 compression between the client and the real server core:
//! negotiate, compressed WRITE requests, compressed READ responses, with
//! signing and encryption, and the server's answers to bad input.

use crate::support;

use std::sync::Arc;

use ringshare_client::{ClientOptions, Reply};
use ringshare_core::{Connection, Frame, Output, SigningPolicy};
use ringshare_wire::consts::{
    Capabilities, Command, CompressionAlgorithm as A, CompressionFlags, Dialect, HashAlgorithm,
    SecurityMode,
};
use ringshare_wire::header::{self, Header, Protocol};
use ringshare_wire::negotiate::{NegotiateContext, NegotiateRequest};
use ringshare_wire::{FileId, NtStatus};
use support::{options, random, server, server_compressing, Pair};

const MIB: usize = 1 << 20;

fn compressing(algs: &[A]) -> ClientOptions {
    let mut o = options(Dialect::SMB3_1_1);
    o.compression = algs.to_vec();
    o
}

/// Text-like data: lines picked from a few sentences.
fn text(len: usize) -> Vec<u8> {
    const LINES: [&str; 4] = [
        "The quick brown fox jumps over the lazy dog.\n",
        "Pack my box with five dozen liquor jugs, said the clerk.\n",
        "How vexingly quick daft zebras jump!\n",
        "Sphinx of black quartz, judge my vow; then file the report.\n",
    ];
    let mut out = Vec::with_capacity(len + 64);
    let mut x = 7u32;
    while out.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        out.extend_from_slice(LINES[(x >> 16) as usize % 4].as_bytes());
        out.extend_from_slice((x % 1000).to_string().as_bytes());
    }
    out.truncate(len);
    out
}

fn write(p: &mut Pair, f: FileId, data: &[u8]) {
    p.client.write(2, f, 0, data).unwrap();
    p.pump().unwrap();
    assert_eq!(
        p.result(2),
        Ok(Reply::Write {
            count: data.len() as u32
        })
    );
}

fn read(p: &mut Pair, f: FileId, len: usize) -> Vec<u8> {
    p.received.clear();
    p.client.read(3, f, 0, len as u32).unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(3), Ok(Reply::Read { .. })));
    p.payloads.remove(&3).expect("read data")
}

/// The last WRITE frame the client sent, and the READ frame it got.
fn last_sent(p: &Pair) -> &[u8] {
    p.sent.last().expect("a frame sent")
}

#[test]
fn a_compressed_write_and_a_read_asked_compressed_come_back_byte_identical_with_each_algorithm() {
    let data = text(MIB);
    for alg in [A::LZ4, A::LZ77, A::LZNT1, A::LZ77_HUFFMAN] {
        let mut p = Pair::ready(
            compressing(&[alg, A::PATTERN_V1]),
            SigningPolicy::IfRequired,
        );
        assert!(p.client.is_compressing(), "{alg:?}");
        let f = p.open("t.txt");
        write(&mut p, f, &data);
        let sent = last_sent(&p);
        assert_eq!(header::protocol_of(sent), Protocol::Compressed, "{alg:?}");
        assert!(
            sent.len() < MIB / 2,
            "{alg:?}: WRITE of {} bytes",
            sent.len()
        );
        assert_eq!(read(&mut p, f, MIB), data, "{alg:?}");
        let got = &p.received[0];
        assert_eq!(header::protocol_of(got), Protocol::Compressed, "{alg:?}");
        assert!(
            got.len() < MIB / 2,
            "{alg:?}: READ reply of {} bytes",
            got.len()
        );
        assert!(!p.server_closed);
    }
}

#[test]
fn zeros_go_as_a_pattern_and_random_data_goes_plain() {
    let mut p = Pair::ready(
        compressing(&[A::LZ77, A::PATTERN_V1]),
        SigningPolicy::IfRequired,
    );
    let f = p.open("z.bin");
    write(&mut p, f, &vec![0u8; MIB]);
    assert!(last_sent(&p).len() < 256, "{}", last_sent(&p).len());
    assert_eq!(read(&mut p, f, MIB), vec![0u8; MIB]);
    assert!(p.received[0].len() < 256, "{}", p.received[0].len());

    let noise = random(MIB);
    let g = p.open("r.bin");
    write(&mut p, g, &noise);
    assert_eq!(header::protocol_of(last_sent(&p)), Protocol::Smb2);
    assert_eq!(read(&mut p, g, MIB), noise);
    assert_eq!(header::protocol_of(&p.received[0]), Protocol::Smb2);
    assert!(p.received[0].len() > MIB);
}

#[test]
fn after_a_read_that_did_not_compress_the_next_reads_of_that_open_go_plain_until_one_tries_again() {
    let mut p = Pair::ready(
        compressing(&[A::LZ77, A::PATTERN_V1]),
        SigningPolicy::IfRequired,
    );
    let g = p.open("r.bin");
    write(&mut p, g, &random(MIB));
    read(&mut p, g, MIB);
    assert_eq!(
        header::protocol_of(&p.received[0]),
        Protocol::Smb2,
        "random: plain"
    );
    // The file becomes zeros: the open still skips compression for a while
    // (ringshare_core's SKIP_AFTER_MISS, 16 READs), then tries again.
    write(&mut p, g, &vec![0u8; MIB]);
    for i in 0..16 {
        assert_eq!(read(&mut p, g, MIB), vec![0u8; MIB]);
        assert!(p.received[0].len() > MIB, "read {i} skipped compression");
    }
    assert_eq!(read(&mut p, g, MIB), vec![0u8; MIB]);
    assert!(
        p.received[0].len() < 256,
        "tried again: {}",
        p.received[0].len()
    );
    // Another open of the same file is not held back by it.
    let h = p.open("r.bin");
    assert_eq!(read(&mut p, h, MIB), vec![0u8; MIB]);
    assert!(p.received[0].len() < 256);
}

#[test]
fn compression_composes_with_signing_and_with_encryption() {
    let data = text(MIB);
    let mut signed = compressing(&[A::LZ4, A::PATTERN_V1]);
    signed.sign = true;
    let mut sealed = compressing(&[A::LZ4, A::PATTERN_V1]);
    sealed.encrypt = true;
    for (opts, outer) in [
        (signed, Protocol::Compressed),
        (sealed, Protocol::Transform),
    ] {
        let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
        let f = p.open("s.txt");
        write(&mut p, f, &data);
        assert_eq!(header::protocol_of(last_sent(&p)), outer);
        assert!(last_sent(&p).len() < MIB / 2);
        assert_eq!(read(&mut p, f, MIB), data);
        assert_eq!(header::protocol_of(&p.received[0]), outer);
        assert!(p.received[0].len() < MIB / 2, "{}", p.received[0].len());
    }
}

#[test]
fn without_compression_asked_or_agreed_reads_and_writes_go_plain() {
    let data = text(MIB);
    // The client does not offer it; then the server has it off.
    let pairs = [
        Pair::ready(options(Dialect::SMB3_1_1), SigningPolicy::IfRequired),
        Pair::on(
            server_compressing(SigningPolicy::IfRequired, Vec::new()),
            compressing(&[A::LZ4]),
        ),
    ];
    for mut p in pairs {
        if !p.client.is_ready() {
            p.pump().unwrap();
        }
        assert!(!p.client.is_compressing());
        let f = p.open("p.txt");
        write(&mut p, f, &data);
        assert_eq!(header::protocol_of(last_sent(&p)), Protocol::Smb2);
        assert_eq!(read(&mut p, f, MIB), data);
        assert!(p
            .received
            .iter()
            .all(|r| header::protocol_of(r) != Protocol::Compressed));
    }
}

/// A pair on a share with `compress data` (or without), the client
/// offering `algs` and not asking for compressed READs itself.
fn on_share_compressing_data(compress_data: bool, algs: &[A]) -> Pair {
    let mut config = support::server_config(
        SigningPolicy::IfRequired,
        ringshare_core::DEFAULT_COMPRESSION.to_vec(),
    );
    Arc::get_mut(&mut config.shares[0])
        .expect("a new share")
        .compress_data = compress_data;
    let mut p = Pair::on(support::state(config), compressing(algs));
    p.pump().unwrap();
    assert!(p.client.is_ready());
    p.client.ask_compressed_reads(false);
    p
}

#[test]
fn a_share_with_compress_data_compresses_reads_the_client_did_not_ask_to_compress() {
    let data = text(MIB);
    let noise = random(MIB);
    let mut p = on_share_compressing_data(true, &[A::LZ4, A::PATTERN_V1]);
    assert!(p.client.share_compresses_data());
    let f = p.open("c.txt");
    write(&mut p, f, &data);
    assert_eq!(read(&mut p, f, MIB), data);
    let got = &p.received[0];
    assert_eq!(header::protocol_of(got), Protocol::Compressed);
    assert!(got.len() < MIB / 2, "{}", got.len());
    // Only when it pays: random data goes plain.
    let g = p.open("r.bin");
    write(&mut p, g, &noise);
    assert_eq!(read(&mut p, g, MIB), noise);
    assert_eq!(header::protocol_of(&p.received[0]), Protocol::Smb2);

    // Without the option, a READ that does not ask goes plain; without
    // compression agreed, the share does not say it compresses.
    let mut p = on_share_compressing_data(false, &[A::LZ4, A::PATTERN_V1]);
    assert!(!p.client.share_compresses_data());
    let f = p.open("c.txt");
    write(&mut p, f, &data);
    assert_eq!(read(&mut p, f, MIB), data);
    assert_eq!(header::protocol_of(&p.received[0]), Protocol::Smb2);
    let p = on_share_compressing_data(true, &[]);
    assert!(!p.client.is_compressing() && !p.client.share_compresses_data());
}

#[test]
fn the_server_answers_in_its_own_order_of_preference() {
    // Offered LZNT1 first, the server prefers LZ4, then LZ77.
    let mut p = Pair::ready(
        compressing(&[A::LZNT1, A::LZ77, A::LZ4, A::PATTERN_V1]),
        SigningPolicy::IfRequired,
    );
    let f = p.open("o.txt");
    write(&mut p, f, &text(MIB));
    // The READ reply is compressed with the server's first choice, LZ4:
    // chained, its third payload (after NONE for the headers) is LZ4.
    read(&mut p, f, MIB);
    let got = &p.received[0];
    let parsed = ringshare_wire::compression::parse(got).unwrap();
    let ringshare_wire::compression::CompressedMessage::Chained { payloads, .. } = parsed else {
        panic!("unchained");
    };
    let algs: Vec<A> = payloads.iter().map(|p| p.algorithm).collect();
    assert_eq!(algs, vec![A::NONE, A::LZ4]);
}

/// A NEGOTIATE request with these contexts (3.1.1 only).
fn negotiate(contexts: Vec<NegotiateContext>) -> Vec<u8> {
    let mut msg = Vec::new();
    Header::request(Command::NEGOTIATE, 0).encode(&mut msg);
    let mut all = vec![NegotiateContext::PreauthIntegrity {
        hash_algorithms: vec![HashAlgorithm::SHA_512],
        salt: vec![1; 32],
    }];
    all.extend(contexts);
    NegotiateRequest {
        security_mode: SecurityMode::SIGNING_ENABLED,
        capabilities: Capabilities::empty(),
        client_guid: [3; 16],
        client_start_time: 0,
        dialects: vec![Dialect::SMB3_1_1],
        contexts: all,
    }
    .encode(&mut msg);
    msg
}

/// What a fresh server connection answers `frame`: the status of its reply,
/// or `None` when it closes without one.
fn server_answer(frame: Vec<u8>) -> (Option<NtStatus>, bool) {
    let mut c = Connection::new(
        server(SigningPolicy::IfRequired),
        "test".into(),
        Box::new(support::Counter(1)),
    );
    let now = ringshare_core::Now {
        mono_ms: 1,
        filetime: 133_500_000_000_000_000,
    };
    c.receive(now, frame);
    let (mut status, mut closed) = (None, false);
    while let Some(o) = c.poll_output() {
        match o {
            Output::Send(Frame::One(b)) => status = Header::decode(&b[4..]).ok().map(|h| h.status),
            Output::Send(f) => status = Header::decode(&f.into_bytes()[4..]).ok().map(|h| h.status),
            Output::Close => closed = true,
            _ => {}
        }
    }
    (status, closed)
}

#[test]
fn a_malformed_or_repeated_compression_context_is_invalid_parameter() {
    let ctx = |algorithms: Vec<A>| NegotiateContext::Compression {
        flags: CompressionFlags::CHAINED,
        algorithms,
    };
    let empty = negotiate(vec![ctx(vec![])]);
    assert_eq!(server_answer(empty).0, Some(NtStatus::INVALID_PARAMETER));
    let twice = negotiate(vec![ctx(vec![A::LZ4]), ctx(vec![A::LZ77])]);
    assert_eq!(server_answer(twice).0, Some(NtStatus::INVALID_PARAMETER));
    // A context shorter than its fixed part does not parse.
    let mut short = negotiate(vec![ctx(vec![A::LZ4])]);
    let at = short.len() - 10;
    short[at - 6..at - 4].copy_from_slice(&2u16.to_le_bytes()); // DataLength 10 -> 2
    short.truncate(at - 8 + 8 + 2);
    assert_eq!(server_answer(short).0, Some(NtStatus::INVALID_PARAMETER));
    let fine = negotiate(vec![ctx(vec![A::LZ4])]);
    assert_eq!(server_answer(fine), (Some(NtStatus::SUCCESS), false));
}

#[test]
fn a_compressed_message_the_server_cannot_take_closes_the_connection() {
    // Before NEGOTIATE: nothing was agreed.
    let msg = {
        let mut m = Vec::new();
        Header::request(Command::ECHO, 0).encode(&mut m);
        m.extend_from_slice(&[4, 0, 0, 0]);
        m.extend(std::iter::repeat_n(b'a', 8000));
        let opts = ringshare_compress::CompressOptions {
            algorithm: A::LZ4,
            plain_prefix: 64,
            chained: false,
        };
        ringshare_compress::compress_message(&m, &opts).unwrap()
    };
    assert_eq!(server_answer(msg.clone()), (None, true));

    // After logon: too large an announced size, a corrupt payload, an
    // algorithm not agreed.
    let mut too_big = msg.clone();
    too_big[4..8].copy_from_slice(&(64u32 << 20).to_le_bytes());
    let mut corrupt = msg.clone();
    let n = corrupt.len();
    corrupt[n - 40..].fill(0xFF);
    let mut other = msg.clone();
    other[8..10].copy_from_slice(&A::LZNT1.0.to_le_bytes());
    for bad in [too_big, corrupt, other] {
        let mut p = Pair::ready(compressing(&[A::LZ4]), SigningPolicy::IfRequired);
        p.server.receive(p.now, bad);
        let mut closed = false;
        while let Some(o) = p.server.poll_output() {
            closed |= matches!(o, Output::Close);
        }
        assert!(closed);
    }
}

/// Writes `fuzz/corpus/core_connection/compressed-3.1.1`: the recorded
/// anonymous SMB 3.1.1 session of seed 8c81fd74… with a compression context
/// in its NEGOTIATE and every later message sent as a chained
/// COMPRESSION_TRANSFORM message (a NONE payload for the header, where the
/// target's placeholders stay visible, and NONE or Pattern_V1 for the rest),
/// then its WRITE again with 4 KiB of zeros (chained, Pattern_V1) and with
/// 4 KiB of text (unchained LZ4): so the fuzzer reaches the server's receive
/// step with compression agreed. Run:
/// `cargo test -p ringshare-client --test client_tests compression:: -- --ignored write_compression_fuzz_seed`
#[test]
#[ignore]
fn write_compression_fuzz_seed() {
    use ringshare_wire::compression::{encode_chained_header, encode_chained_payload};
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/core_connection/"
    );
    let seed = std::fs::read(format!("{dir}8c81fd74425b66f86519575e6b122dc5959c6f61")).unwrap();
    let mut frames = Vec::new();
    let mut i = 1;
    while i + 2 <= seed.len() {
        let n = u16::from_le_bytes([seed[i], seed[i + 1]]) as usize;
        frames.push(seed[i + 2..i + 2 + n].to_vec());
        i += 2 + n;
    }
    let chained = |m: &[u8]| {
        let mut out = Vec::new();
        encode_chained_header(&mut out, m.len() as u32);
        encode_chained_payload(&mut out, A::NONE, true, None, &m[..64]);
        let body = &m[64..];
        let (b, run) = ringshare_compress::pattern::trailing_run(body);
        if run >= 64 {
            let head = &body[..body.len() - run];
            if !head.is_empty() {
                encode_chained_payload(&mut out, A::NONE, false, None, head);
            }
            let p = ringshare_compress::pattern::encode(b, run).unwrap();
            encode_chained_payload(&mut out, A::PATTERN_V1, false, None, &p);
        } else if !body.is_empty() {
            encode_chained_payload(&mut out, A::NONE, false, None, body);
        }
        out
    };
    let mut out = vec![seed[0]];
    let mut write = None;
    for (k, f) in frames.iter().enumerate() {
        let mut f = f.clone();
        if k == 0 {
            // NEGOTIATE: the compression context after the others, 8-aligned.
            f.resize(f.len().next_multiple_of(8), 0);
            let ctx = NegotiateContext::Compression {
                flags: CompressionFlags::CHAINED,
                algorithms: vec![A::LZ4, A::LZ77, A::PATTERN_V1],
            };
            let mut data = Vec::new();
            ctx.encode_data(&mut data);
            f.extend_from_slice(&3u16.to_le_bytes());
            f.extend_from_slice(&(data.len() as u16).to_le_bytes());
            f.extend_from_slice(&[0; 4]);
            f.extend_from_slice(&data);
            let count = u16::from_le_bytes([f[96], f[97]]) + 1;
            f[96..98].copy_from_slice(&count.to_le_bytes());
        } else if f.starts_with(b"\xfeSMB") {
            if u16::from_le_bytes([f[12], f[13]]) == Command::WRITE.0 && write.is_none() {
                write = Some(f.clone());
            }
            f = chained(&f);
        }
        out.extend_from_slice(&(f.len() as u16).to_le_bytes());
        out.extend_from_slice(&f);
    }
    let write = write.expect("the session writes");
    // The WRITE again, its data replaced: Length at 64 + 4, data at 64 + 48.
    let again = |data: &[u8]| {
        let mut w = write[..112].to_vec();
        w[68..72].copy_from_slice(&(data.len() as u32).to_le_bytes());
        w.extend_from_slice(data);
        w
    };
    let zeros = chained(&again(&[0u8; 4096]));
    let opts = ringshare_compress::CompressOptions {
        algorithm: A::LZ4,
        plain_prefix: 112,
        chained: false,
    };
    let lz4 = ringshare_compress::compress_message(&again(&text(4096)), &opts).unwrap();
    for f in [zeros, lz4] {
        out.extend_from_slice(&(f.len() as u16).to_le_bytes());
        out.extend_from_slice(&f);
    }
    // The server takes its NEGOTIATE and answers the compressed SESSION_SETUP
    // legs (whatever they say) without closing.
    let mut c = Connection::new(
        server(SigningPolicy::IfRequired),
        "seed".into(),
        Box::new(support::Counter(1)),
    );
    let now = ringshare_core::Now {
        mono_ms: 1,
        filetime: 133_500_000_000_000_000,
    };
    let mut i = 1;
    for _ in 0..3 {
        let n = u16::from_le_bytes([out[i], out[i + 1]]) as usize;
        c.receive(now, out[i + 2..i + 2 + n].to_vec());
        i += 2 + n;
    }
    let mut answers = 0;
    while let Some(o) = c.poll_output() {
        assert!(
            !matches!(o, Output::Close),
            "the seed's frames close the connection"
        );
        answers += matches!(o, Output::Send(_)) as usize;
    }
    assert_eq!(answers, 3);
    std::fs::write(format!("{dir}compressed-3.1.1"), out).unwrap();
}
