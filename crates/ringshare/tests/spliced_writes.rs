//! WRITE payloads spliced from the socket into the file (socket -> pipe ->
//! file, never through user memory) against the real binary: the data lands
//! intact, refused WRITEs leave the stream in step, and `use sendfile = no`
//! turns the path off.

use crate::rig;

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

/// Creates (or truncates) `name` for reading and writing.
fn create_rw(raw: &mut Raw, name: &str) -> FileId {
    raw.create(
        name,
        GENERIC_READ | GENERIC_WRITE,
        FILE_OVERWRITE_IF,
        FILE_NON_DIRECTORY_FILE,
    )
    .unwrap_or_else(|o| panic!("create {name}: {o:?}"))
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
fn burst(raw: &mut Raw, rig: &Rig, f: FileId, n: usize, seed: u8) -> Vec<u8> {
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
    let got = collect(raw, rig, mids.iter().copied());
    for mid in mids {
        assert_eq!(got[&mid], (NtStatus::SUCCESS, MIB), "write {mid}");
    }
    sender.join().unwrap();
    data
}

/// The replies to `mids` (status, WRITE count), which come in completion
/// order: a refused WRITE is answered at once, a good one after its write.
fn collect(
    raw: &mut Raw,
    rig: &Rig,
    mids: impl Iterator<Item = u64>,
) -> std::collections::HashMap<u64, (NtStatus, usize)> {
    let want: std::collections::HashSet<u64> = mids.collect();
    let mut got = std::collections::HashMap::new();
    while want.iter().any(|m| !got.contains_key(m)) {
        match read_frame(&mut raw.sock) {
            Ok(Some(frame)) => {
                for (h, m) in split_responses(&frame) {
                    raw.credits += u64::from(h.credits);
                    let count = m.get(64 + 4..64 + 8).map_or(0, |b| le32(b) as usize);
                    got.insert(h.message_id, (h.status, count));
                }
            }
            other => panic!(
                "{} of {} replies, then {other:?}\n{}",
                got.len(),
                want.len(),
                rig.log()
            ),
        }
    }
    got
}

#[test]
fn write_payloads_spliced_from_the_socket_land_intact() {
    let rig = Rig::start("splicew", "");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = create_rw(&mut raw, "w.bin");
    raw.gather_credits(16 * 16 + 16);
    let before = pipes_of(rig.pid());
    // The socket's receive buffer grows with use; keep writing until a payload
    // has been found whole in it and spliced (a pipe appears in the pool).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seed = 0u8;
    let data = loop {
        let data = burst(&mut raw, &rig, f, 16, seed);
        if pipes_of(rig.pid()) > before || Instant::now() > deadline {
            break data;
        }
        seed = seed.wrapping_add(1);
        raw.gather_credits(16 * 16 + 16);
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
    let rw = create_rw(&mut raw, "rw.bin");
    raw.gather_credits(200);
    // Refused WRITEs and good ones, interleaved in one burst: each refused
    // payload must be consumed whole (spliced or received) and dropped.
    let good = pattern(MIB, 7);
    let mut frames = Vec::new();
    let mut expect = Vec::new();
    let pairs = 32u64;
    for i in 0..pairs {
        let (mid, fr) = write_frame(&mut raw, ro, 0, &pattern(MIB, 9));
        expect.push((mid, NtStatus::ACCESS_DENIED));
        frames.extend_from_slice(&fr);
        let (mid, fr) = write_frame(&mut raw, rw, i * MIB as u64, &good);
        expect.push((mid, NtStatus::SUCCESS));
        frames.extend_from_slice(&fr);
    }
    let mut sock = raw.sock.try_clone().unwrap();
    let sender = std::thread::spawn(move || sock.write_all(&frames).unwrap());
    let got = collect(&mut raw, &rig, expect.iter().map(|(m, _)| *m));
    for (mid, status) in expect {
        assert_eq!(got[&mid].0, status, "message {mid}");
    }
    sender.join().unwrap();
    assert_eq!(
        std::fs::read(rig.share_dir.join("ro.bin")).unwrap(),
        b"keep"
    );
    let rw_data = std::fs::read(rig.share_dir.join("rw.bin")).unwrap();
    assert_eq!(rw_data.len(), pairs as usize * MIB);
    assert!(rw_data.chunks(MIB).all(|c| c == &good[..]));
    rig.still_serves("after refused WRITEs");
}

#[test]
fn use_sendfile_no_receives_write_payloads_into_memory() {
    let rig = Rig::start("splicew-off", "\tuse sendfile = no\n");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = create_rw(&mut raw, "w.bin");
    raw.gather_credits(16 * 16 + 16);
    let before = pipes_of(rig.pid());
    let mut data = Vec::new();
    for seed in 0..4 {
        data = burst(&mut raw, &rig, f, 16, seed);
        raw.gather_credits(16 * 16 + 16);
    }
    assert_eq!(pipes_of(rig.pid()), before, "a pipe was made");
    let on_disk = std::fs::read(rig.share_dir.join("w.bin")).unwrap();
    assert!(on_disk == data);
}

#[test]
fn a_write_payload_that_trickles_in_is_written_whole_once_it_has_all_come() {
    let rig = Rig::start("splicew-slow", "");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = create_rw(&mut raw, "slow.bin");
    raw.gather_credits(128);
    // Three pipes' worth.
    let data = pattern(5 * MIB / 2, 3);
    let (mid, frame) = write_frame(&mut raw, f, 0, &data);
    // The head and a little payload, then the rest in pieces with pauses: the
    // server waits (polling, no thread blocked) and writes nothing early.
    raw.sock.write_all(&frame[..200_000]).unwrap();
    for piece in frame[200_000..].chunks(700_000) {
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(
            std::fs::metadata(rig.share_dir.join("slow.bin"))
                .unwrap()
                .len(),
            0,
            "payload written before it had all come"
        );
        raw.sock.write_all(piece).unwrap();
    }
    match raw.wait_for(mid) {
        Outcome::Reply(h, _) => assert_eq!(h.status, NtStatus::SUCCESS),
        other => panic!("write: {other:?}"),
    }
    assert!(std::fs::read(rig.share_dir.join("slow.bin")).unwrap() == data);
}

#[test]
fn a_peer_that_closes_inside_a_large_write_payload_writes_nothing() {
    let rig = Rig::start("splicew-cut", "");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = create_rw(&mut raw, "cut.bin");
    raw.gather_credits(64);
    // A payload of several pipes, cut in its last one.
    raw.gather_credits(128);
    let (_, frame) = write_frame(&mut raw, f, 0, &pattern(3 * MIB + 100, 4));
    raw.sock.write_all(&frame[..frame.len() - 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(raw);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::metadata(rig.share_dir.join("cut.bin"))
            .unwrap()
            .len(),
        0
    );
    rig.still_serves("after a peer cut a WRITE short");
}

/// The figures the workers log at exit about WRITE payloads, summed: spliced
/// at once, spliced after waiting, received into memory after all, and
/// payload bytes received before their splice.
fn splice_figures_logged(log: &str) -> Option<[u64; 4]> {
    let key = "WRITE payloads spliced: ";
    let mut sum = None;
    for line in log.lines().filter(|l| l.contains(key)) {
        let nums: Vec<u64> = line
            .split(key)
            .nth(1)?
            .split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .take(4)
            .map(|w| w.parse().ok())
            .collect::<Option<_>>()?;
        let s: &mut [u64; 4] = sum.get_or_insert([0; 4]);
        for (total, n) in s.iter_mut().zip(nums) {
            *total += n;
        }
    }
    sum
}

#[test]
fn after_a_large_write_the_next_payload_is_not_received_into_memory_before_its_splice() {
    let mut rig = Rig::start("splicehead", "\tlog level = 2\n");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = create_rw(&mut raw, "h.bin");
    for seed in 0..3u8 {
        raw.gather_credits(16 * 16 + 16);
        let data = burst(&mut raw, &rig, f, 16, seed);
        assert_eq!(data.len(), 16 * MIB);
    }
    drop(raw);
    rig.signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .expect("server stops");
    let log = rig.log();
    let [.., prefix] =
        splice_figures_logged(&log).unwrap_or_else(|| panic!("no splice figures\n{log}"));
    // Only the first WRITE's payload may have come with the receive that
    // brought its header (a 64 KiB buffer); after it, each receive stops at
    // the next WRITE's payload. (Before: up to 64 KiB of each of 48.)
    assert!(
        prefix <= 64 * 1024,
        "{prefix} payload bytes copied first\n{log}"
    );
}

#[test]
fn payloads_larger_than_a_pipe_are_spliced_through_several_and_land_intact() {
    let mut rig = Rig::start("splicew-big", "\tlog level = 2\n");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = create_rw(&mut raw, "big.bin");
    let sizes = [8 * MIB, 3 * MIB + 12_345, 2 * MIB, 5 * MIB - 1];
    let mut expected = Vec::new();
    for (i, len) in sizes.into_iter().enumerate() {
        raw.gather_credits(256);
        let data = pattern(len, 10 + i as u8);
        let (mid, frame) = write_frame(&mut raw, f, expected.len() as u64, &data);
        raw.sock.write_all(&frame).unwrap();
        match raw.wait_for(mid) {
            Outcome::Reply(h, body) => {
                assert_eq!(h.status, NtStatus::SUCCESS, "write of {len}");
                assert_eq!(le32(&body[64 + 4..64 + 8]) as usize, len, "count of {len}");
            }
            other => panic!("write of {len}: {other:?}"),
        }
        expected.extend_from_slice(&data);
    }
    raw.flush(f);
    drop(raw);
    let on_disk = std::fs::read(rig.share_dir.join("big.bin")).unwrap();
    assert_eq!(on_disk.len(), expected.len());
    assert!(
        on_disk == expected,
        "file content differs from what was written"
    );
    rig.signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .expect("server stops");
    let log = rig.log();
    let [at_once, waited, into_memory, _] =
        splice_figures_logged(&log).unwrap_or_else(|| panic!("no splice figures\n{log}"));
    assert_eq!(at_once + waited, sizes.len() as u64, "{log}");
    assert_eq!(into_memory, 0, "{log}");
}

#[test]
fn a_payload_in_many_tiny_segments_lands_intact_even_when_its_pipes_fill_up() {
    let mut rig = Rig::start("splicew-tiny", "\tlog level = 2\n");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    raw.sock.set_nodelay(true).unwrap();
    let f = create_rw(&mut raw, "tiny.bin");
    raw.gather_credits(128);
    // Each small write is a segment of its own: a socket's segments take a
    // pipe slot each when spliced, so pipes can fill far below their size.
    let data = pattern(3 * MIB / 2, 7);
    let (mid, frame) = write_frame(&mut raw, f, 0, &data);
    raw.sock.write_all(&frame[..4096]).unwrap();
    for piece in frame[4096..].chunks(512) {
        raw.sock.write_all(piece).unwrap();
    }
    match raw.wait_for(mid) {
        Outcome::Reply(h, body) => {
            assert_eq!(h.status, NtStatus::SUCCESS);
            assert_eq!(le32(&body[64 + 4..64 + 8]) as usize, data.len());
        }
        other => panic!("write: {other:?}"),
    }
    drop(raw);
    assert!(std::fs::read(rig.share_dir.join("tiny.bin")).unwrap() == data);
    rig.signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .expect("server stops");
    let log = rig.log();
    let counts = splice_figures_logged(&log);
    println!("spliced at once / after waiting / into memory after all: {counts:?}");
}

#[test]
fn peers_that_stall_inside_large_writes_cannot_use_up_the_servers_descriptors() {
    let rig = Rig::start("splicew-stall", "");
    let before = pipes_of(rig.pid());
    // 48 peers each start an 8 MiB WRITE (8 pipes of 1 MiB if spliced) and
    // stop 2 MiB into its payload: unbounded, that is 768 pipe descriptors.
    let mut stalled = Vec::new();
    for i in 0..48 {
        let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
        let f = create_rw(&mut raw, &format!("stall{i}.bin"));
        raw.gather_credits(160);
        let (_, frame) = write_frame(&mut raw, f, 0, &pattern(8 * MIB, i as u8));
        raw.sock.write_all(&frame[..2 * MIB]).unwrap();
        stalled.push(raw);
    }
    std::thread::sleep(Duration::from_millis(300));
    let held = pipes_of(rig.pid()) - before;
    // Two I/O threads, at most 128 busy and 32 idle pipes each, two descriptors a pipe.
    assert!(held <= 2 * (128 + 32) * 2, "{held} pipe descriptors held");
    rig.still_serves("with 48 peers stalled inside 8 MiB WRITEs");
    drop(stalled);
}
