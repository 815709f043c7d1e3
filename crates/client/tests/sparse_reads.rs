//! Compressed READs of sparse files (issue 32): the server finds the holes
//! of the range with SEEK_DATA/SEEK_HOLE, reads only the data ranges and
//! sends each hole as a Pattern_V1 payload. Files on tmpfs (/dev/shm) and on
//! a loop-mounted ext4 image (root only; without root it prints SKIPPED),
//! written just before the READs so that ext4's data is still delayed
//! allocation. Every READ decompresses (ringshare's client) to the file's
//! bytes.

use crate::support;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use ringshare_client::{ClientOptions, Reply};
use ringshare_core::SigningPolicy;
use ringshare_vfs::posix::PosixShare;
use ringshare_wire::compression::{self, CompressedMessage};
use ringshare_wire::consts::{CompressionAlgorithm as A, Dialect};
use ringshare_wire::header::{self, Protocol};
use ringshare_wire::FileId;
use support::{options, random, server_config, state, Pair};

const KIB: u64 = 1024;
const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;
const SIZE: u64 = 4 * MIB + 123;

/// Data ranges of the test file: holes at its start, between them, and at
/// its end (up to [`SIZE`]); one hole a single page long.
fn layout() -> Vec<(u64, Vec<u8>)> {
    vec![
        (256 * KIB, text(100 * KIB as usize, 1)),
        (MIB, random(8 * KIB as usize)),
        (MIB + 12 * KIB, text(8 * KIB as usize, 2)),
        (3 * MIB, text(5000, 3)),
    ]
}

fn text(len: usize, seed: u32) -> Vec<u8> {
    let words = ["sparse ", "hole ", "data ", "extent ", "page ", "zero "];
    let mut out = Vec::with_capacity(len + 16);
    let mut x = seed;
    while out.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        out.extend_from_slice(words[(x >> 16) as usize % words.len()].as_bytes());
    }
    out.truncate(len);
    out
}

/// Write the sparse file, punch a 1000-byte "hole" (smaller than a page:
/// the file system zeroes the bytes, they stay data) into its first data
/// range, and a zero-filled file whose zeros are written (allocated, no
/// holes). Returns the sparse file's bytes.
fn make_files(dir: &Path) -> Vec<u8> {
    let path = dir.join("sparse.bin");
    let f = std::fs::File::create(&path).unwrap();
    let mut bytes = vec![0u8; SIZE as usize];
    for (at, data) in layout() {
        f.write_all_at(&data, at).unwrap();
        bytes[at as usize..at as usize + data.len()].copy_from_slice(&data);
    }
    f.set_len(SIZE).unwrap();
    let punch = 256 * KIB + 5000;
    let out = Command::new("fallocate")
        .args(["-p", "-o", &punch.to_string(), "-l", "1000"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "fallocate: {out:?}");
    bytes[punch as usize..punch as usize + 1000].fill(0);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    std::fs::write(dir.join("zeros.bin"), vec![0u8; MIB as usize]).unwrap();
    bytes
}

/// The bytes of `offset .. offset+len` (clipped to the file) in the data
/// ranges of [`layout`], rounded out to whole pages: what SEEK_DATA calls
/// data, and all a READ of the range may read.
fn data_bytes_in(offset: u64, len: u64) -> u64 {
    let end = (offset + len).min(SIZE);
    layout()
        .iter()
        .map(|(at, d)| {
            let (s, e) = (
                at / PAGE * PAGE,
                (at + d.len() as u64).div_ceil(PAGE) * PAGE,
            );
            e.min(end).saturating_sub(s.max(offset))
        })
        .sum()
}

fn pair_on(dir: &Path) -> Pair {
    let mut config = server_config(
        SigningPolicy::IfRequired,
        ringshare_core::DEFAULT_COMPRESSION.to_vec(),
    );
    let share = Arc::get_mut(&mut config.shares[0]).expect("a new share");
    share.backend = Arc::new(PosixShare::new(dir).unwrap());
    let mut opts: ClientOptions = options(Dialect::SMB3_1_1);
    opts.compression = vec![A::LZ4, A::PATTERN_V1];
    let mut p = Pair::on(state(config), opts);
    p.pump().expect("handshake");
    assert!(p.client.is_ready() && p.client.is_compressing());
    p
}

/// READ `len` bytes at `offset`: the data, the frame as it came, and the
/// bytes the server read from the file for it.
fn read_at(p: &mut Pair, f: FileId, offset: u64, len: u64) -> (Vec<u8>, Vec<u8>, u64) {
    p.received.clear();
    let before = p.file_bytes_read;
    p.client.read(3, f, offset, len as u32).unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(3), Ok(Reply::Read { .. })));
    let data = p.payloads.remove(&3).expect("read data");
    (data, p.received.remove(0), p.file_bytes_read - before)
}

/// Pattern_V1 payloads of zeros in a chained frame, by length.
fn zero_patterns(frame: &[u8]) -> Vec<u32> {
    let Ok(CompressedMessage::Chained { payloads, .. }) = compression::parse(frame) else {
        return Vec::new();
    };
    payloads
        .iter()
        .filter(|p| p.algorithm == A::PATTERN_V1 && p.data[0] == 0)
        .map(|p| u32::from_le_bytes(p.data[4..8].try_into().unwrap()))
        .collect()
}

fn holes_are_sent_as_patterns_without_being_read(dir: &Path) {
    let bytes = make_files(dir);
    let mut p = pair_on(dir);
    let f = p.open("sparse.bin");
    let reads = [
        (0, MIB),                  // hole, data (with the punched 1000 bytes), hole
        (0, 64 * KIB),             // a hole only
        (300 * KIB, MIB),          // data's end, hole, data, a one-page hole, data, hole
        (MIB + 4 * KIB, 12 * KIB), // random data, the one-page hole, text
        (2 * MIB, 3 * MIB),        // hole, data, the hole up to the end of file
        (0, SIZE),                 // all of it
        (4 * MIB, MIB),            // the last 123 bytes, a hole: too short to compress
    ];
    for (offset, len) in reads {
        let (data, frame, read) = read_at(&mut p, f, offset, len);
        let end = (offset + len).min(SIZE) as usize;
        assert!(
            data == bytes[offset as usize..end],
            "{offset}+{len}: the data differs from the file's"
        );
        assert_eq!(
            read,
            data_bytes_in(offset, len),
            "{offset}+{len}: bytes read"
        );
        if end - offset as usize >= 64 * KIB as usize {
            assert_eq!(
                header::protocol_of(&frame),
                Protocol::Compressed,
                "{offset}+{len}"
            );
            let patterns = zero_patterns(&frame);
            assert!(
                patterns.iter().any(|&n| n as u64 >= 60 * KIB),
                "{offset}+{len}: patterns {patterns:?}"
            );
        }
    }
    // The whole file: 4 MiB on the wire as a few KiB (the data is 121 KiB
    // of text and 8 KiB of random bytes).
    let (_, frame, _) = read_at(&mut p, f, 0, SIZE);
    assert!(frame.len() < 64 * KIB as usize, "{}", frame.len());
    // Five holes, and the zeros after the last data in its page (data to
    // SEEK_DATA, a trailing run found in memory).
    assert_eq!(
        zero_patterns(&frame).len(),
        6,
        "holes at start, middle and end"
    );

    // Forty 4 KiB data ranges with 4 KiB holes between: more ranges than one
    // READ reads in turn, so the span is read whole; the holes still go as
    // Pattern_V1.
    let path = dir.join("fragmented.bin");
    let file = std::fs::File::create(&path).unwrap();
    let mut frag = vec![0u8; 320 * KIB as usize];
    for i in 0..40u64 {
        let data = text(PAGE as usize, 10 + i as u32);
        file.write_all_at(&data, i * 2 * PAGE).unwrap();
        frag[(i * 2 * PAGE) as usize..][..PAGE as usize].copy_from_slice(&data);
    }
    file.set_len(320 * KIB).unwrap();
    let g = p.open("fragmented.bin");
    let (data, frame, read) = read_at(&mut p, g, 0, 320 * KIB);
    assert!(data == frag, "fragmented: the data differs from the file's");
    assert_eq!(read, 79 * PAGE, "one read from the first data to the last");
    assert_eq!(
        zero_patterns(&frame).len(),
        40,
        "{:?}",
        zero_patterns(&frame)
    );

    // Allocated zeros are not holes: read whole, and still a Pattern_V1.
    let z = p.open("zeros.bin");
    let (data, frame, read) = read_at(&mut p, z, 0, MIB);
    assert_eq!(data, vec![0u8; MIB as usize]);
    assert_eq!(read, MIB);
    assert!(frame.len() < 256, "{}", frame.len());
    assert!(!p.server_closed);
}

#[test]
fn holes_of_a_sparse_file_on_tmpfs_go_as_pattern_v1_and_are_not_read() {
    let dir = PathBuf::from(format!("/dev/shm/rs-sparse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    holes_are_sent_as_patterns_without_being_read(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An ext4 file system on a loop device, mounted; unmounted and detached
/// on drop.
struct Ext4 {
    dev: String,
    mnt: PathBuf,
    img: PathBuf,
}

impl Ext4 {
    fn new() -> Option<Ext4> {
        is_root()?;
        let base = std::env::temp_dir().join(format!("rs-sparse-ext4-{}", std::process::id()));
        let (img, mnt) = (base.with_extension("img"), base.join("mnt"));
        std::fs::create_dir_all(&mnt).unwrap();
        std::fs::File::create(&img)
            .unwrap()
            .set_len(64 * MIB)
            .unwrap();
        must(
            "mkfs.ext4",
            &["-q", "-F", "-b", "4096", img.to_str().unwrap()],
        );
        let out = Command::new("losetup")
            .args(["--find", "--show", img.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup: {out:?}");
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let e = Ext4 { dev, mnt, img };
        must("mount", &[&e.dev, e.mnt.to_str().unwrap()]);
        Some(e)
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_dir_all(self.mnt.parent().unwrap());
        let _ = std::fs::remove_file(&self.img);
    }
}

fn is_root() -> Option<()> {
    let out = Command::new("id").arg("-u").output().ok()?;
    (String::from_utf8_lossy(&out.stdout).trim() == "0").then_some(())
}

fn must(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
}

#[test]
fn holes_of_a_sparse_file_on_ext4_go_as_pattern_v1_and_are_not_read() {
    let Some(fs) = Ext4::new() else {
        println!("SKIPPED: needs root for a loop-mounted ext4 image");
        return;
    };
    let dir = fs.mnt.join("share");
    std::fs::create_dir_all(&dir).unwrap();
    holes_are_sent_as_patterns_without_being_read(&dir);
}
