//! Throughput of the AES and HMAC implementations ringshare could use, single thread, on this
//! CPU: RustCrypto (aes-gcm, ccm, cmac, hmac/sha2, ghash), aws-lc-rs and ring, plus ringshare's
//! own `CipherKey` / `SigningKey` (whatever they are built on now).
//!
//! `cargo run --release -p ringshare-crypto --example providers [-- MILLISECONDS]`
//!
//! Each row runs for about MILLISECONDS (default 120) per size; the whole run takes a few
//! seconds. GMAC is GCM with the message as AAD and an empty plaintext, as SMB 3.1.1 signing
//! does; "decrypt" rows check the tag first, as a server must.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aes_gcm::aead::consts::{U11, U16};
use aes_gcm::aead::{AeadInOut, KeyInit};
use ringshare_crypto::encrypt::{Cipher, CipherKey};
use ringshare_crypto::sign::{NonceInfo, SigningAlgorithm, SigningKey};

const KEY: [u8; 16] = [0x42; 16];
const NONCE12: [u8; 12] = [7; 12];
const AAD: [u8; 32] = [9; 32];

/// One run of an operation over the whole buffer.
type Op = Box<dyn FnMut(&mut [u8])>;

struct Row {
    primitive: &'static str,
    provider: &'static str,
    /// Runs the operation once over the buffer.
    op: Op,
}

fn row(
    primitive: &'static str,
    provider: &'static str,
    op: impl FnMut(&mut [u8]) + 'static,
) -> Row {
    Row {
        primitive,
        provider,
        op: Box::new(op),
    }
}

/// Bytes per second of `op` over a `size`-byte buffer: the best of fifteen short trials that
/// together take about `budget` (the best, because other processes share this machine's cores
/// and a short trial is more likely to find one idle).
fn measure(op: &mut dyn FnMut(&mut [u8]), size: usize, budget: Duration) -> f64 {
    let mut buf: Vec<u8> = (0..size).map(|i| (i * 131 + 7) as u8).collect();
    op(&mut buf);
    let trial = budget / 15;
    let mut best = 0f64;
    for _ in 0..15 {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < trial {
            op(&mut buf);
            n += 1;
        }
        let bps = (n as f64 * size as f64) / start.elapsed().as_secs_f64();
        best = best.max(bps);
    }
    black_box(&buf);
    best
}

fn cpu_ghz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("cpu MHz"))?;
    let mhz: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    Some(mhz / 1000.0)
}

fn cpu_flags() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("")
        .to_string();
    let wanted = [
        "aes",
        "pclmulqdq",
        "vaes",
        "vpclmulqdq",
        "avx2",
        "avx512f",
        "avx512vl",
        "sha_ni",
    ];
    wanted
        .iter()
        .map(|w| {
            let has = flags.split_whitespace().any(|f| f == *w);
            format!("{w}{}", if has { "" } else { "(no)" })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

type Tag = [u8; 16];

/// A decrypt row: each call decrypts the buffer in place and checks the tag. CTR is its own
/// inverse, so encrypting the plaintext P twice gives back P with the tag that makes P valid
/// ciphertext (its decryption is C = encrypt(P)), and C is valid under the first tag: calls
/// alternate between the two, each a real tag-checked decryption.
fn decrypt_row(
    primitive: &'static str,
    provider: &'static str,
    enc: impl Fn(&mut [u8]) -> Tag + 'static,
    dec: impl Fn(&mut [u8], &Tag) + 'static,
) -> Row {
    let mut state: Option<(usize, Tag, Tag, bool)> = None;
    row(primitive, provider, move |b| {
        let fresh = !matches!(state, Some((len, ..)) if len == b.len());
        if fresh {
            let for_c = enc(b);
            let for_p = enc(b);
            state = Some((b.len(), for_c, for_p, true));
        }
        let Some((_, for_c, for_p, holds_p)) = state.as_mut() else {
            return;
        };
        dec(b, if *holds_p { for_p } else { for_c });
        *holds_p = !*holds_p;
    })
}

fn gcm_rows(v: &mut Vec<Row>) {
    use aws_lc_rs::aead as lc;
    use ring::aead as rg;
    let rc = || aes_gcm::Aes128Gcm::new(&KEY.into());
    let lc_key = || lc::LessSafeKey::new(lc::UnboundKey::new(&lc::AES_128_GCM, &KEY).unwrap());
    let rg_key = || rg::LessSafeKey::new(rg::UnboundKey::new(&rg::AES_128_GCM, &KEY).unwrap());
    let rs = || CipherKey::new(Cipher::Aes128Gcm, &KEY).unwrap();

    let k = rc();
    v.push(row("AES-128-GCM encrypt", "RustCrypto aes-gcm", move |b| {
        black_box(
            k.encrypt_inout_detached(&NONCE12.into(), &AAD, b.into())
                .unwrap(),
        );
    }));
    let k = lc_key();
    v.push(row("AES-128-GCM encrypt", "aws-lc-rs", move |b| {
        let n = lc::Nonce::assume_unique_for_key(NONCE12);
        let _ = black_box(
            k.seal_in_place_separate_tag(n, lc::Aad::from(AAD), b)
                .unwrap(),
        );
    }));
    let k = rg_key();
    v.push(row("AES-128-GCM encrypt", "ring", move |b| {
        let n = rg::Nonce::assume_unique_for_key(NONCE12);
        let _ = black_box(
            k.seal_in_place_separate_tag(n, rg::Aad::from(AAD), b)
                .unwrap(),
        );
    }));
    let k = rs();
    v.push(row("AES-128-GCM encrypt", "ringshare-crypto", move |b| {
        black_box(k.encrypt_in_place(&NONCE12, &AAD, b).unwrap());
    }));

    let (ke, kd) = (rc(), rc());
    v.push(decrypt_row(
        "AES-128-GCM decrypt",
        "RustCrypto aes-gcm",
        move |b| {
            ke.encrypt_inout_detached(&NONCE12.into(), &AAD, b.into())
                .unwrap()
                .into()
        },
        move |b, t| {
            kd.decrypt_inout_detached(&NONCE12.into(), &AAD, b.into(), &(*t).into())
                .unwrap()
        },
    ));
    let (ke, kd) = (lc_key(), lc_key());
    v.push(decrypt_row(
        "AES-128-GCM decrypt",
        "aws-lc-rs",
        move |b| {
            let n = lc::Nonce::assume_unique_for_key(NONCE12);
            let t = ke
                .seal_in_place_separate_tag(n, lc::Aad::from(AAD), b)
                .unwrap();
            t.as_ref().try_into().unwrap()
        },
        move |b, t| {
            let n = lc::Nonce::assume_unique_for_key(NONCE12);
            kd.open_in_place_separate_tag(n, lc::Aad::from(AAD), t, b)
                .unwrap();
        },
    ));
    let (ke, kd) = (rg_key(), rg_key());
    v.push(decrypt_row(
        "AES-128-GCM decrypt",
        "ring",
        move |b| {
            let n = rg::Nonce::assume_unique_for_key(NONCE12);
            let t = ke
                .seal_in_place_separate_tag(n, rg::Aad::from(AAD), b)
                .unwrap();
            t.as_ref().try_into().unwrap()
        },
        move |b, t| {
            let n = rg::Nonce::assume_unique_for_key(NONCE12);
            let tag = rg::Tag::try_from(&t[..]).unwrap();
            kd.open_in_place_separate_tag(n, rg::Aad::from(AAD), tag, b, 0..)
                .unwrap();
        },
    ));
    let (ke, kd) = (rs(), rs());
    v.push(decrypt_row(
        "AES-128-GCM decrypt",
        "ringshare-crypto",
        move |b| ke.encrypt_in_place(&NONCE12, &AAD, b).unwrap(),
        move |b, t| kd.decrypt_in_place(&NONCE12, &AAD, b, t).unwrap(),
    ));
}

fn ccm_rows(v: &mut Vec<Row>) {
    type Aes128Ccm = ccm::Ccm<aes::Aes128, U16, U11>;
    const NONCE11: [u8; 11] = [7; 11];
    let rc = || Aes128Ccm::new(&KEY.into());
    let k = rc();
    v.push(row("AES-128-CCM encrypt", "RustCrypto ccm", move |b| {
        black_box(
            k.encrypt_inout_detached(&NONCE11.into(), &AAD, b.into())
                .unwrap(),
        );
    }));
    let (ke, kd) = (rc(), rc());
    v.push(decrypt_row(
        "AES-128-CCM decrypt",
        "RustCrypto ccm",
        move |b| {
            ke.encrypt_inout_detached(&NONCE11.into(), &AAD, b.into())
                .unwrap()
                .into()
        },
        move |b, t| {
            kd.decrypt_inout_detached(&NONCE11.into(), &AAD, b.into(), &(*t).into())
                .unwrap()
        },
    ));
    let rs = || CipherKey::new(Cipher::Aes128Ccm, &KEY).unwrap();
    let k = rs();
    v.push(row("AES-128-CCM encrypt", "ringshare-crypto", move |b| {
        black_box(k.encrypt_in_place(&NONCE11, &AAD, b).unwrap());
    }));
    let (ke, kd) = (rs(), rs());
    v.push(decrypt_row(
        "AES-128-CCM decrypt",
        "ringshare-crypto",
        move |b| ke.encrypt_in_place(&NONCE11, &AAD, b).unwrap(),
        move |b, t| kd.decrypt_in_place(&NONCE11, &AAD, b, t).unwrap(),
    ));
}

fn mac_rows(v: &mut Vec<Row>) {
    use aws_lc_rs::aead as lc;
    use ring::aead as rg;
    // GMAC: GCM over an empty plaintext with the message as AAD.
    let k = aes_gcm::Aes128Gcm::new(&KEY.into());
    v.push(row("AES-128-GMAC", "RustCrypto aes-gcm", move |b| {
        black_box(
            k.encrypt_inout_detached(&NONCE12.into(), b, (&mut [][..]).into())
                .unwrap(),
        );
    }));
    let k = lc::LessSafeKey::new(lc::UnboundKey::new(&lc::AES_128_GCM, &KEY).unwrap());
    v.push(row("AES-128-GMAC", "aws-lc-rs", move |b| {
        let n = lc::Nonce::assume_unique_for_key(NONCE12);
        let _ = black_box(
            k.seal_in_place_separate_tag(n, lc::Aad::from(&*b), &mut [])
                .unwrap(),
        );
    }));
    let k = rg::LessSafeKey::new(rg::UnboundKey::new(&rg::AES_128_GCM, &KEY).unwrap());
    v.push(row("AES-128-GMAC", "ring", move |b| {
        let n = rg::Nonce::assume_unique_for_key(NONCE12);
        let _ = black_box(
            k.seal_in_place_separate_tag(n, rg::Aad::from(&*b), &mut [])
                .unwrap(),
        );
    }));
    sign_rows(v, "AES-128-GMAC", SigningAlgorithm::AesGmac);

    // CMAC (SMB 3.0 signing).
    let k = <cmac::Cmac<aes::Aes128> as KeyInit>::new(&KEY.into());
    v.push(row("AES-128-CMAC", "RustCrypto cmac", move |b| {
        use cmac::Mac;
        let mut m = k.clone();
        m.update(b);
        black_box(m.finalize());
    }));
    let k = aws_lc_rs::cmac::Key::new(aws_lc_rs::cmac::AES_128, &KEY).unwrap();
    v.push(row("AES-128-CMAC", "aws-lc-rs", move |b| {
        let mut c = aws_lc_rs::cmac::Context::with_key(&k);
        c.update(b).unwrap();
        black_box(c.sign().unwrap());
    }));
    sign_rows(v, "AES-128-CMAC", SigningAlgorithm::AesCmac);

    // HMAC-SHA256 (SMB 2.x signing).
    v.push(row("HMAC-SHA256", "RustCrypto hmac+sha2", move |b| {
        use hmac::Mac;
        let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&KEY).unwrap();
        m.update(b);
        black_box(m.finalize());
    }));
    let k = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &KEY);
    v.push(row("HMAC-SHA256", "aws-lc-rs", move |b| {
        black_box(aws_lc_rs::hmac::sign(&k, b));
    }));
    let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &KEY);
    v.push(row("HMAC-SHA256", "ring", move |b| {
        black_box(ring::hmac::sign(&k, b));
    }));
    sign_rows(v, "HMAC-SHA256", SigningAlgorithm::HmacSha256);
}

/// ringshare's own signing, over the message in three parts as the server verifies it
/// (header up to the signature, the zeroed signature, the rest), and in one part.
fn sign_rows(v: &mut Vec<Row>, primitive: &'static str, alg: SigningAlgorithm) {
    let k = SigningKey::new(alg, KEY);
    v.push(row(primitive, "ringshare-crypto", move |b| {
        let nonce = NonceInfo {
            message_id: 5,
            ..Default::default()
        };
        black_box(k.sign(&[&b[..48], &[0u8; 16], &b[64..]], nonce));
    }));
    let k = SigningKey::new(alg, KEY);
    v.push(row(primitive, "ringshare-crypto 1 part", move |b| {
        black_box(k.sign(&[b], NonceInfo::default()));
    }));
}

fn rows() -> Vec<Row> {
    let mut v = Vec::new();
    gcm_rows(&mut v);
    ccm_rows(&mut v);
    mac_rows(&mut v);
    v
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(120);
    let budget = Duration::from_millis(ms);
    let ghz = cpu_ghz();
    println!("CPU flags: {}", cpu_flags());
    match ghz {
        Some(g) => println!("cycles/byte at the reported clock of {g:.2} GHz"),
        None => println!("clock unknown: no cycles/byte"),
    }
    println!(
        "{:<30} {:<22} {:>10} {:>8} {:>10} {:>8}",
        "primitive", "provider", "64K GB/s", "64K c/B", "1M GB/s", "1M c/B"
    );
    for mut r in rows() {
        let mut cells = String::new();
        for size in [64 << 10, 1 << 20] {
            let bps = measure(&mut *r.op, size, budget);
            let cpb = ghz.map(|g| g * 1e9 / bps);
            cells += &format!(
                " {:>10.2} {:>8}",
                bps / 1e9,
                cpb.map(|c| format!("{c:.2}")).unwrap_or_default()
            );
        }
        println!("{:<30} {:<22}{cells}", r.primitive, r.provider);
    }
}
