//! WRITE payloads spliced from the socket into the file (socket -> pipe ->
//! file, never through user memory) against the real binary: the data lands
//! intact, refused WRITEs leave the stream in step, and `use sendfile = no`
//! turns the path off.

mod common;
mod rig;

use std::io::Write;
use std::time::{Duration, Instant};

use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::{framing, FileId, NtStatus};

use rig::*;

const MIB: usize = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 12) as u8 ^ seed)
        .collect()
}

/// Pipes the server process holds: spliced WRITEs leave their emptied pipe
/// in the worker's pool (and nothing else in these tests makes one).
fn pipes_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|t| t.to_string_lossy().starts_with("pipe:"))
                .count()
        })
        .unwrap_or(0)
}

/// One WRITE frame of `data` at `offset`, with its credit charge.
fn write_frame(raw: &mut Raw, f: FileId, offset: u64, data: &[u8]) -> (u64, Vec<u8>) {
    let charge = data.len().div_ceil(65536).max(1) as u16;
    let mut h = raw.header(Command::WRITE);
    h.credit_charge = charge;
    h.credits = charge;
    raw.next_mid += u64::from(charge) - 1;
    let msg = Raw::message(&h, &write_body(f, offset, data));
    let mut frame = Vec::with_capacity(4 + msg.len());
    framing::put_frame_header(&mut frame, msg.len());
    frame.extend_from_slice(&msg);
    (h.message_id, frame)
}

/// Sends `n` 1 MiB WRITEs back to back in one burst (so the payloads are
/// queued in the server's socket when it looks), then collects the replies.
fn burst(raw: &mut Raw, f: FileId, n: usize, seed: u8) -> Vec<u8> {
    let data = pattern(n * MIB, seed);
    let mut frames = Vec::new();
    let mut mids = Vec::new();
    for i in 0..n {
        let (mid, fr) = write_frame(raw, f, (i * MIB) as u64, &data[i * MIB..(i + 1) * MIB]);
        mids.push(mid);
        frames.extend_from_slice(&fr);
    }
    let mut sock = raw.sock.try_clone().unwrap();
    let sender = std::thread::spawn(move || sock.write_all(&frames).unwrap());
    for mid in mids {
        match raw.wait_for(mid) {
            Outcome::Reply(h, m) => {
                assert_eq!(h.status, NtStatus::SUCCESS);
                assert_eq!(le32(&m[64 + 4..]) as usize, MIB, "count");
            }
            other => panic!("write {mid}: {other:?}"),
        }
    }
    sender.join().unwrap();
    data
}

fn gather_credits(raw: &mut Raw, want: u64) {
    for _ in 0..64 {
        if raw.credits >= want {
            return;
        }
        let mut h = raw.header(Command::ECHO);
        h.credits = 512;
        match raw.call_with(&h, &[4, 0, 0, 0]) {
            Outcome::Reply(h, _) => assert_eq!(h.status, NtStatus::SUCCESS),
            other => panic!("echo: {other:?}"),
        }
    }
    panic!("only {} credits granted, wanted {want}", raw.credits);
}

#[test]
fn write_payloads_spliced_from_the_socket_land_intact() {
    let rig = Rig::start("splicew", "");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = raw
        .create(
            "w.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            FILE_NON_DIRECTORY_FILE,
        )
        .expect("create w.bin");
    gather_credits(&mut raw, 16 * 16 + 16);
    let before = pipes_of(rig.pid());
    // The socket's receive buffer grows with use; keep writing until a payload
    // has been found whole in it and spliced (a pipe appears in the pool).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seed = 0u8;
    let data = loop {
        let data = burst(&mut raw, f, 16, seed);
        if pipes_of(rig.pid()) > before || Instant::now() > deadline {
            break data;
        }
        seed = seed.wrapping_add(1);
        gather_credits(&mut raw, 16 * 16 + 16);
    };
    assert!(
        pipes_of(rig.pid()) > before,
        "no WRITE payload was spliced in 20 s of bursts"
    );
    raw.flush(f);
    let on_disk = std::fs::read(rig.share_dir.join("w.bin")).unwrap();
    assert_eq!(on_disk.len(), data.len());
    assert!(
        on_disk == data,
        "file content differs from what was written"
    );
}

#[test]
fn a_refused_large_write_leaves_the_stream_in_step() {
    let rig = Rig::start("splicew-ro", "");
    std::fs::write(rig.share_dir.join("ro.bin"), b"keep").unwrap();
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let ro = raw
        .create("ro.bin", GENERIC_READ, FILE_OPEN, FILE_NON_DIRECTORY_FILE)
        .expect("open ro.bin");
    let rw = raw
        .create(
            "rw.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            FILE_NON_DIRECTORY_FILE,
        )
        .expect("create rw.bin");
    gather_credits(&mut raw, 200);
    // Refused WRITEs and good ones, interleaved in one burst: each refused
    // payload must be consumed whole (spliced or received) and dropped.
    let good = pattern(MIB, 7);
    let mut frames = Vec::new();
    let mut expect = Vec::new();
    for i in 0..8u64 {
        let (mid, fr) = write_frame(&mut raw, ro, 0, &pattern(MIB, 9));
        expect.push((mid, NtStatus::ACCESS_DENIED));
        frames.extend_from_slice(&fr);
        let (mid, fr) = write_frame(&mut raw, rw, i * MIB as u64, &good);
        expect.push((mid, NtStatus::SUCCESS));
        frames.extend_from_slice(&fr);
    }
    let mut sock = raw.sock.try_clone().unwrap();
    let sender = std::thread::spawn(move || sock.write_all(&frames).unwrap());
    for (mid, status) in expect {
        match raw.wait_for(mid) {
            Outcome::Reply(h, _) => assert_eq!(h.status, status, "message {mid}"),
            other => panic!("message {mid}: {other:?}"),
        }
    }
    sender.join().unwrap();
    assert_eq!(
        std::fs::read(rig.share_dir.join("ro.bin")).unwrap(),
        b"keep"
    );
    let rw_data = std::fs::read(rig.share_dir.join("rw.bin")).unwrap();
    assert_eq!(rw_data.len(), 8 * MIB);
    assert!(rw_data.chunks(MIB).all(|c| c == &good[..]));
    rig.still_serves("after refused WRITEs");
}

#[test]
fn use_sendfile_no_receives_write_payloads_into_memory() {
    let rig = Rig::start("splicew-off", "\tuse sendfile = no\n");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = raw
        .create(
            "w.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            FILE_NON_DIRECTORY_FILE,
        )
        .expect("create w.bin");
    gather_credits(&mut raw, 16 * 16 + 16);
    let before = pipes_of(rig.pid());
    let mut data = Vec::new();
    for seed in 0..4 {
        data = burst(&mut raw, f, 16, seed);
        gather_credits(&mut raw, 16 * 16 + 16);
    }
    assert_eq!(pipes_of(rig.pid()), before, "a pipe was made");
    let on_disk = std::fs::read(rig.share_dir.join("w.bin")).unwrap();
    assert!(on_disk == data);
}
