//! The spliced READ path against the real binary: a peer that stops reading is
//! let go at the send timeout, and a file shrinking under spliced READs yields
//! well-formed replies (zero padding) on a connection that stays usable. And READs into
//! memory for a slow peer: few buffers held, and the replies queued go out once it reads.

use crate::common;
use crate::rig;

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::{FileId, NtStatus};

use rig::*;

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
        .collect()
}

/// A file "big" of `len` pattern bytes in the rig's share, opened for reading by a client that
/// then gathers `credits`.
fn open_big(rig: &Rig, len: usize, credits: u64) -> (Raw, FileId) {
    std::fs::write(rig.share_dir.join("big"), pattern(len)).unwrap();
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = raw
        .create("big", GENERIC_READ, FILE_OPEN, FILE_NON_DIRECTORY_FILE)
        .expect("open big");
    raw.gather_credits(credits);
    (raw, f)
}

/// A server over a share on tmpfs (`/dev/shm`), where the I/O thread splices a READ reply
/// itself (driver/inline_send.rs); `None` where there is no /dev/shm.
fn tmpfs_rig(tag: &str, extra_global: &str) -> Option<Rig> {
    if !Path::new("/dev/shm").is_dir() {
        return None;
    }
    Some(rig_under(Path::new("/dev/shm"), tag, extra_global))
}

/// A server over a share on a disk file system (/var/tmp, when that is not tmpfs as well),
/// where a READ reply is spliced by the I/O thread only when the page cache holds all of it;
/// `None` where there is no such directory.
fn disk_rig(tag: &str, extra_global: &str) -> Option<Rig> {
    let base = Path::new("/var/tmp");
    let kind = rustix::fs::statfs(base).ok()?.f_type as u64;
    if kind == 0x0102_1994 || kind == 0x8584_58f6 {
        eprintln!("/var/tmp is kept in memory here: no disk file system to test on");
        return None;
    }
    Some(rig_under(base, tag, extra_global))
}

/// A server over a new share directory under `base`.
fn rig_under(base: &Path, tag: &str, extra_global: &str) -> Rig {
    let tmp = common::TempDir::new_in(base, tag);
    let share = tmp.path().join("share");
    std::fs::create_dir_all(&share).unwrap();
    Rig::start_on(tmp, share, extra_global)
}

/// Drops `path`'s pages from the page cache (written back first): its next READs go through
/// io_uring's workers, not the I/O thread.
fn evict(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
}

#[test]
fn a_peer_that_stops_reading_large_reads_is_closed_at_the_send_timeout_and_others_are_served() {
    let Some(rig) = disk_rig("stall", "\tsend timeout = 2\n") else {
        return;
    };
    stalled_peer_is_closed(rig, true);
}

#[test]
fn a_peer_that_stops_reading_large_reads_of_a_file_in_memory_is_closed_at_the_send_timeout() {
    if let Some(rig) = tmpfs_rig("stallmem", "\tsend timeout = 2\n") {
        stalled_peer_is_closed(rig, false);
    }
}

/// `evicted`: the file's pages are dropped from the page cache first (a disk file system:
/// the replies then go through io_uring's workers).
fn stalled_peer_is_closed(rig: Rig, evicted: bool) {
    let (mut raw, f) = open_big(&rig, 64 << 20, 48 * 16);
    if evicted {
        evict(&rig.share_dir.join("big"));
    }
    // 48 MiB of READs in flight, none of the replies taken: far more than the
    // socket buffers hold, so the server's send (a splice) blocks.
    send_reads(&mut raw, f, 48, 1 << 20, |i| i << 20);
    let started = Instant::now();
    thread::sleep(Duration::from_secs(4));
    rig.still_serves("while a peer is not reading");
    // Draining now finds the end of the stream, not 48 replies and then silence.
    assert!(
        closes(&mut raw.sock),
        "the stalled connection was not closed"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        rig.log().contains("send timeout"),
        "no log line: {}",
        rig.log()
    );
}

#[test]
fn spliced_reads_of_a_file_truncated_underneath_stay_well_formed_and_the_connection_usable() {
    shrinking_file_reads_stay_well_formed(Rig::start("shrink", ""));
}

#[test]
fn spliced_reads_of_a_file_in_memory_truncated_underneath_stay_well_formed() {
    if let Some(rig) = tmpfs_rig("shrinkmem", "") {
        shrinking_file_reads_stay_well_formed(rig);
    }
}

fn shrinking_file_reads_stay_well_formed(rig: Rig) {
    let path = rig.share_dir.join("shrinking");
    let data = pattern(8 << 20);
    std::fs::write(&path, &data).unwrap();
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    let f = raw
        .create(
            "shrinking",
            GENERIC_READ,
            FILE_OPEN,
            FILE_NON_DIRECTORY_FILE,
        )
        .expect("open");
    raw.gather_credits(64);
    // A local process (not an SMB open, so READs stay on the splice path)
    // truncates and restores the file again and again.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, path, data) = (stop.clone(), path.clone(), data.clone());
        thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                f.set_len(1 << 20).unwrap();
                std::fs::write(&path, &data).unwrap();
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut reads = 0;
    while Instant::now() < deadline {
        let off = (reads % 7) << 20;
        match raw.read(f, off, 1 << 20) {
            Ok(got) => {
                assert!(got.len() <= 1 << 20);
                // Each byte is the file's or zero padding where it had shrunk.
                let want = &data[off as usize..off as usize + got.len()];
                let bad = got.iter().zip(want).position(|(g, w)| g != w && *g != 0);
                assert_eq!(bad, None, "read {reads}: foreign bytes");
            }
            Err(Outcome::Reply(h, _)) => assert_eq!(h.status, NtStatus::END_OF_FILE),
            Err(other) => panic!("read {reads}: {other:?}"),
        }
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(reads > 10, "only {reads} reads");
    std::fs::write(&path, &data).unwrap();
    let got = raw.read(f, 3 << 20, 1 << 20).expect("read after the storm");
    assert!(
        got == data[3 << 20..4 << 20],
        "connection no longer reads right"
    );
}

#[test]
fn spliced_reads_of_a_file_in_memory_arrive_whole_at_every_size_and_after_the_peer_lagged() {
    if let Some(rig) = tmpfs_rig("wholemem", "") {
        reads_arrive_whole(rig, false);
    }
}

#[test]
fn spliced_reads_of_a_cached_file_on_disk_are_made_by_the_io_thread_and_arrive_whole() {
    if let Some(rig) = disk_rig("wholedisk", "") {
        reads_arrive_whole(rig, false);
    }
}

#[test]
fn spliced_reads_of_a_cached_file_the_reader_may_only_read_go_through_io_workers() {
    // Since Linux 6.10 the page cache's state is told only to a file's owner or writer: the
    // reader of someone else's file gets its replies spliced by io_uring's workers, as before.
    let Some(rig) = disk_rig("wholeother", "") else {
        return;
    };
    let (mut raw, f) = open_big(&rig, 4 << 20, 64);
    std::os::unix::fs::chown(rig.share_dir.join("big"), Some(0), Some(0)).unwrap();
    let data = raw.read(f, 4096, 2 << 20).expect("READ");
    assert!(data == pattern(4 << 20)[4096..4096 + (2 << 20)]);
    let workers: Vec<String> = io_threads(rig.pid())
        .into_iter()
        .flat_map(|(_, w)| w)
        .collect();
    assert!(!workers.is_empty(), "no io-wq worker spliced the reply");
}

#[test]
fn spliced_reads_of_a_file_on_disk_not_in_the_page_cache_go_through_io_workers_and_arrive_whole() {
    if let Some(rig) = disk_rig("wholecold", "") {
        reads_arrive_whole(rig, true);
    }
}

/// READs of several sizes one at a time, then 40 MiB asked at once while the peer lags: every
/// byte right. `evicted`: the file's pages are dropped first, so the first replies go through
/// io_uring's workers; else the I/O thread splices them and starts no worker.
fn reads_arrive_whole(rig: Rig, evicted: bool) {
    let len = 24 << 20;
    let data = pattern(len);
    let (mut raw, f) = open_big(&rig, len, 8 * 128);
    // The reader's own file: the page cache's state is told to its owner.
    let owner = nix::unistd::User::from_name(USER_A.0).unwrap().unwrap().uid;
    std::os::unix::fs::chown(rig.share_dir.join("big"), Some(owner.as_raw()), None).unwrap();
    if evicted {
        evict(&rig.share_dir.join("big"));
    }
    // One READ at a time, sizes and offsets not aligned to pages or pipe sizes.
    for (i, size) in [(1usize << 20) + 4095, 4 << 20, 8 << 20, 3 << 20, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let off = 12_345 + i * 1_048_573;
        let got = raw.read(f, off as u64, size as u32).expect("read");
        assert!(
            got == data[off..off + size],
            "READ {i} of {size} bytes at {off}"
        );
    }
    let workers: Vec<String> = io_threads(rig.pid())
        .into_iter()
        .flat_map(|(_, w)| w)
        .collect();
    if evicted {
        assert!(!workers.is_empty(), "no io-wq worker read the file");
    } else {
        // The I/O thread made the splices itself: no io_uring worker was started for them.
        assert!(
            workers.is_empty(),
            "io-wq workers: {workers:?}\n{}",
            rig.log()
        );
    }
    // 40 MiB asked for at once and not taken for a while: the socket fills, and the replies
    // go out as the peer reads again.
    let mids = send_reads(&mut raw, f, 40, 1 << 20, |i| (i * 7 % 23) << 20);
    thread::sleep(Duration::from_millis(500));
    for (mid, off) in mids {
        match raw.wait_for(mid) {
            Outcome::Reply(h, body) => {
                assert_eq!(h.status, NtStatus::SUCCESS);
                let at = usize::from(body[HEADER_LEN + 2]);
                let n =
                    u32::from_le_bytes(body[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap());
                let off = off as usize;
                assert!(
                    body[at..at + n as usize] == data[off..off + (1 << 20)],
                    "READ at {off}"
                );
            }
            other => panic!("READ {mid}: {other:?}"),
        }
    }
    rig.still_serves("after the peer lagged");
}

/// A server on tmpfs and a connection with a file of it open for reading and writing (None:
/// no /dev/shm here).
fn slow_peer(name: &str) -> Option<(Rig, Raw, FileId)> {
    if !Path::new("/dev/shm").is_dir() {
        return None;
    }
    let tmp = common::TempDir::new_in(Path::new("/dev/shm"), name);
    let share = tmp.path().join("share");
    std::fs::create_dir_all(&share).unwrap();
    std::fs::write(share.join("f.bin"), pattern(8 << 20)).unwrap();
    let rig = Rig::start_on(tmp, share, "");
    let mut raw = Raw::login(rig.port, USER_A, Dialect::SMB3_1_1);
    // Open for writing too: READs are then read into memory (not spliced),
    // and at 128 KiB on tmpfs they complete at once in the I/O thread.
    let f = raw
        .create(
            "f.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OPEN,
            FILE_NON_DIRECTORY_FILE,
        )
        .expect("open f.bin");
    Some((rig, raw, f))
}

/// 50 MiB of 128 KiB READs of `f` asked for in one go, no reply taken yet: their message ids.
fn ask_reads(raw: &mut Raw, f: FileId) -> Vec<u64> {
    raw.gather_credits(2 * 400 + 16);
    send_reads(raw, f, 400, 128 << 10, |i| (i % 64) << 17)
        .into_iter()
        .map(|(mid, _)| mid)
        .collect()
}

/// `n` READs of `len` bytes of `f`, the i-th at `at(i)`, sent in one go (the credits gathered
/// before), no reply taken: (message id, offset) of each.
fn send_reads(
    raw: &mut Raw,
    f: FileId,
    n: u64,
    len: u32,
    at: impl Fn(u64) -> u64,
) -> Vec<(u64, u64)> {
    let charge = len.div_ceil(65536) as u16;
    let mut sent = Vec::new();
    for i in 0..n {
        let mut h = raw.header(Command::READ);
        h.credit_charge = charge;
        h.credits = charge;
        raw.next_mid += u64::from(charge) - 1;
        sent.push((h.message_id, at(i)));
        raw.send_frame(&Raw::message(&h, &read_body(f, at(i), len)))
            .expect("send READ");
    }
    sent
}

/// Takes the READs' replies, checking each: how long each was waited for.
fn take_read_replies(raw: &mut Raw, mids: Vec<u64>) -> Vec<Duration> {
    let mut waits = Vec::new();
    for mid in mids {
        let asked = Instant::now();
        match raw.wait_for(mid) {
            Outcome::Reply(h, body) => {
                assert_eq!(h.status, NtStatus::SUCCESS);
                assert_eq!(body.len(), 64 + 16 + (128 << 10));
            }
            other => panic!("READ {mid}: {other:?}"),
        }
        waits.push(asked.elapsed());
    }
    waits
}

#[test]
fn reads_done_at_once_on_tmpfs_still_hold_only_a_few_buffers_while_the_peer_is_slow() {
    let Some((rig, mut raw, f)) = slow_peer("heldreads") else {
        return;
    };
    let rss_before = rig.rss_kib();
    let mids = ask_reads(&mut raw, f);
    thread::sleep(Duration::from_millis(500));
    let grown_kib = rig.rss_kib().saturating_sub(rss_before);
    // READ buffers held per connection: 3.5 MiB; socket buffers hold a few
    // MiB more. Unbounded it would be the whole 50 MiB.
    assert!(grown_kib < 24 * 1024, "server grew by {grown_kib} KiB");
    take_read_replies(&mut raw, mids);
}

#[test]
fn in_memory_replies_the_socket_takes_only_in_part_arrive_whole_and_in_order() {
    // In-memory replies are offered to the socket at once (driver/send.rs, `send_now`); while
    // the peer does not read, the socket takes some of a batch, and the rest goes on the ring
    // from where it stopped, the parts after it queued again. Each reply must still carry its
    // own bytes of the file, in the order asked.
    let Some((_rig, mut raw, f)) = slow_peer("partialsends") else {
        return;
    };
    raw.gather_credits(2 * 300 + 16);
    // 300 READs of 40 KiB (read into memory), each at its own offset.
    let len = 40 << 10;
    let asked = send_reads(&mut raw, f, 300, len, |i| (i * 7919 % 190) * u64::from(len));
    thread::sleep(Duration::from_millis(300));
    let file = pattern(8 << 20);
    for (mid, at) in asked {
        match raw.wait_for(mid) {
            Outcome::Reply(h, body) => {
                assert_eq!(h.status, NtStatus::SUCCESS);
                // (the message as it came: header, READ response, data)
                let at = at as usize;
                assert!(
                    body[64 + 16..] == file[at..at + len as usize],
                    "READ {mid} at {at}: other bytes"
                );
            }
            other => panic!("READ {mid}: {other:?}"),
        }
    }
}

#[test]
fn replies_queued_behind_a_send_to_a_slow_peer_go_out_as_soon_as_it_reads_again() {
    // The reply in flight when the peer stopped reading completes only once it reads; the
    // replies and READs queued behind it wait for that completion (a quiet send's, which
    // must then wake the loop: driver/send.rs, `need_send_end`). Left to the next wake-up for
    // something else, about a dozen replies waited 150-260 ms each; woken, none waits 3 ms.
    let Some((_rig, mut raw, f)) = slow_peer("queuedreplies") else {
        return;
    };
    let mids = ask_reads(&mut raw, f);
    thread::sleep(Duration::from_millis(500));
    let waits = take_read_replies(&mut raw, mids);
    let slow: Vec<_> = waits
        .iter()
        .filter(|w| **w > Duration::from_millis(150))
        .collect();
    eprintln!(
        "longest wait for a reply: {:?}; waits past 150 ms: {slow:?}",
        waits.iter().max()
    );
    // Two allowed for a busy machine's own stalls.
    assert!(
        slow.len() <= 2,
        "replies waited once the peer read again: {slow:?}"
    );
}

/// `Cpus_allowed_list` of task `tid` of process `pid`.
fn cpus_of(pid: u32, tid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"));
    list.unwrap().trim().to_owned()
}

/// The I/O threads of process `pid` (comm `ringshare-ring-N`, cut to 15 bytes) and the io-wq
/// workers of each (`iou-wrk-TID`): (thread, its workers).
fn io_threads(pid: u32) -> Vec<(String, Vec<String>)> {
    let tasks: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let tid = e.ok()?.file_name().to_str()?.to_owned();
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            Some((tid, comm.trim_end().to_owned()))
        })
        .collect();
    let workers = |tid: &str| {
        let name = format!("iou-wrk-{tid}");
        tasks
            .iter()
            .filter(|(_, c)| *c == name)
            .map(|(t, _)| t.clone())
            .collect()
    };
    tasks
        .iter()
        .filter(|(_, c)| c.starts_with("ringshare-ring"))
        .map(|(t, _)| (t.clone(), workers(t)))
        .collect()
}

#[test]
fn an_io_thread_sending_read_data_keeps_to_its_cpu_with_its_workers_and_is_free_again_after() {
    let free = cpus_of(std::process::id(), &std::process::id().to_string());
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("one CPU ({free}): nothing to keep to");
        return;
    }
    // `pin cpus = auto`, the default.
    let Some(rig) = disk_rig("keep", "") else {
        return;
    };
    let (mut raw, f) = open_big(&rig, 4 << 20, 64);
    // Not in the page cache: the reply's splices go to io_uring's workers.
    evict(&rig.share_dir.join("big"));
    let pid = rig.pid();
    for (t, _) in io_threads(pid) {
        assert_eq!(cpus_of(pid, &t), free, "I/O thread {t} before any READ");
    }
    let data = raw.read(f, 0, 1 << 20).expect("READ");
    assert_eq!(data, pattern(4 << 20)[..1 << 20]);
    let kept: Vec<_> = io_threads(pid)
        .into_iter()
        .filter(|(t, _)| cpus_of(pid, t) != free)
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "one I/O thread sent the READ's data: {kept:?}"
    );
    let (thread, workers) = &kept[0];
    let cpu = cpus_of(pid, thread);
    assert!(cpu.parse::<usize>().is_ok(), "kept to one CPU: {cpu}");
    assert!(!workers.is_empty(), "the splices ran on no io-wq worker");
    for w in workers {
        assert_eq!(cpus_of(pid, w), cpu, "worker {w} of I/O thread {thread}");
    }
    // 200 ms after the last spliced READ reply began the hold ends, with no request to wake
    // the thread.
    thread::sleep(Duration::from_millis(400));
    assert_eq!(
        cpus_of(pid, thread),
        free,
        "I/O thread {thread} is free again"
    );
    for (t, workers) in io_threads(pid) {
        for w in workers {
            assert_eq!(cpus_of(pid, &w), free, "worker {w} of I/O thread {t}");
        }
    }
    raw.close(f).expect("close");
}
