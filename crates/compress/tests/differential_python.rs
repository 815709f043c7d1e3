//! Differential test against dissect.util (Python): every stream our
//! compressors write for the shared corpus must decompress byte-identically
//! with dissect's independent decompressors. Skipped, with the reason
//! printed, only when no Python with dissect.util is found:
//! `RINGSHARE_COMPRESS_PYTHON`, else `~/.cache/ringshare/venv-compress`
//! (made by `scripts/install-deps.sh --test`), else `python3`.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use ringshare_compress::{compress_into, CompressionAlgorithm as A};

fn python() -> String {
    if let Ok(p) = std::env::var("RINGSHARE_COMPRESS_PYTHON") {
        return p;
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(".cache/ringshare/venv-compress/bin/python");
        if p.exists() {
            return p.to_string_lossy().into_owned();
        }
    }
    "python3".to_string()
}

#[test]
fn dissect_util_decompresses_our_lz77_lznt1_huffman_and_lz4_streams_byte_identically() {
    let dir = std::env::temp_dir().join(format!("ringshare-compress-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases = common::corpus();
    let text = common::text(300, 21);
    for n in [1, 2, 3, 4, 7, 8, 31, 32, 33, 255, 256, 300] {
        cases.push((format!("text{n}"), text[..n].to_vec()));
    }
    for (i, (_, data)) in cases.iter().enumerate() {
        std::fs::write(dir.join(format!("c{i:02}.raw")), data).unwrap();
        for (alg, ext) in [
            (A::LZ77, "lz77"),
            (A::LZNT1, "lznt1"),
            (A::LZ77_HUFFMAN, "lz77_huffman"),
            (A::LZ4, "lz4"),
        ] {
            if data.is_empty() && alg == A::LZNT1 {
                continue; // an empty LZNT1 stream is zero bytes: nothing to check
            }
            let mut c = Vec::new();
            assert!(compress_into(alg, data, &mut c));
            std::fs::write(dir.join(format!("c{i:02}.{ext}")), &c).unwrap();
        }
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/check_dissect.py");
    let py = python();
    let out = match Command::new(&py).arg(&script).arg(&dir).output() {
        Ok(o) => o,
        Err(e) => {
            println!("SKIPPED: cannot run {py}: {e}");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if out.status.code() == Some(3) {
        println!("SKIPPED: {py} has no dissect.util (scripts/install-deps.sh --test installs it)");
        return;
    }
    assert!(out.status.success(), "dissect.util disagreed:\n{stdout}");
}
