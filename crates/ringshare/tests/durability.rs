//! Nothing acknowledged is lost, against the real binary: a client that dies in the middle of a
//! WRITE frame, a server SIGKILLed during a write workload and restarted (every write whose FLUSH
//! reply arrived is on disk, checked by content), and SIGTERM with requests in flight (the process
//! exits 0 promptly; every in-flight request is answered or its connection closed, never a hang).

use crate::rig;

use std::io::Write;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ringshare_wire::consts::Command;

use rig::*;

/// The content of block `i` of writer `w`: every byte says who wrote which block.
fn block(w: u8, i: u32, len: usize) -> Vec<u8> {
    let tag = [w, (i >> 16) as u8, (i >> 8) as u8, i as u8];
    (0..len).map(|k| tag[k % 4] ^ (k / 4) as u8).collect()
}

#[test]
fn a_client_that_dies_in_the_middle_of_a_write_frame_leaves_only_acknowledged_data() {
    let rig = Rig::start("dur-midwrite", "");
    let mut c = rig.login(USER_A);
    let f = c
        .create(
            "mid.bin",
            GENERIC_READ | GENERIC_WRITE,
            FILE_OVERWRITE_IF,
            0,
        )
        .expect("create");
    let acked = block(1, 0, 65536);
    assert_eq!(c.write(f, 0, &acked).expect("write"), 65536);
    // A 4 MiB WRITE over the same range, cut after half of its frame, then the socket closed.
    let data = vec![0xEE; 4 << 20];
    let mut h = c.header(Command::WRITE);
    h.credit_charge = 64;
    h.credits = 1;
    c.next_mid += 63;
    let msg = Raw::message(&h, &write_body(f, 0, &data));
    let mut frame = Vec::new();
    ringshare_wire::framing::put_frame_header(&mut frame, msg.len());
    frame.extend_from_slice(&msg);
    c.sock
        .write_all(&frame[..frame.len() / 2])
        .expect("half a frame");
    let _ = c.sock.shutdown(Shutdown::Both);
    drop(c);
    // The server goes on, and the file holds exactly the acknowledged write.
    rig.still_serves("after a client died mid-write");
    thread::sleep(Duration::from_millis(200));
    let on_disk = std::fs::read(rig.share_dir.join("mid.bin")).unwrap();
    assert_eq!(
        on_disk.len(),
        acked.len(),
        "the cut write changed the file size"
    );
    assert!(on_disk == acked, "the cut write changed the file's content");
    let mut d = rig.login(USER_B);
    let g = d
        .create("mid.bin", GENERIC_READ, FILE_OPEN, 0)
        .expect("open");
    assert!(d.read(g, 0, 65536).expect("read") == acked);
}

#[test]
fn every_write_flushed_before_a_sigkill_is_on_disk_after_the_restart() {
    const WRITERS: u8 = 4;
    const BLOCK: usize = 64 * 1024;
    let mut rig = Rig::start("dur-kill", "");
    let port = rig.port;
    let stop = Arc::new(AtomicBool::new(false));
    // Per writer: the blocks whose FLUSH reply arrived.
    let durable: Arc<Mutex<Vec<Vec<u32>>>> =
        Arc::new(Mutex::new(vec![Vec::new(); usize::from(WRITERS)]));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (stop, durable) = (stop.clone(), durable.clone());
            thread::spawn(move || {
                let mut c = Raw::login(port, USER_A, ringshare_wire::consts::Dialect::SMB3_1_1);
                let name = format!("w{w}.bin");
                let f = c
                    .create(&name, GENERIC_READ | GENERIC_WRITE, FILE_OVERWRITE_IF, 0)
                    .expect("create");
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    if c.write(f, u64::from(i) * BLOCK as u64, &block(w, i, BLOCK))
                        .is_err()
                    {
                        return;
                    }
                    match c.flush(f) {
                        Outcome::Reply(h, _) if h.status.is_success() => {
                            durable.lock().unwrap()[usize::from(w)].push(i);
                        }
                        _ => return,
                    }
                    i += 1;
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));
    let status = rig
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(5))
        .expect("the server did not die on SIGKILL");
    eprintln!("server killed: {status}");
    for t in writers {
        t.join().expect("writer");
    }
    let durable = durable.lock().unwrap().clone();
    let total: usize = durable.iter().map(Vec::len).sum();
    eprintln!("{total} flushed blocks of {BLOCK} bytes before the kill");
    assert!(
        total >= usize::from(WRITERS),
        "too few flushed writes to mean anything: {total}"
    );
    rig.spawn();
    let mut c = rig.login(USER_B);
    for (w, blocks) in durable.iter().enumerate() {
        let w = w as u8;
        let path = rig.share_dir.join(format!("w{w}.bin"));
        let disk = std::fs::read(&path).expect("writer's file");
        let f = c
            .create(&format!("w{w}.bin"), GENERIC_READ, FILE_OPEN, 0)
            .expect("open after restart");
        for &i in blocks {
            let at = i as usize * BLOCK;
            let want = block(w, i, BLOCK);
            assert!(
                disk.get(at..at + BLOCK) == Some(&want[..]),
                "writer {w} block {i}: flushed but not on disk after the restart"
            );
            assert!(
                c.read(f, at as u64, BLOCK as u32).expect("read") == want,
                "writer {w} block {i}: the restarted server reads something else"
            );
        }
        c.close(f).unwrap();
    }
}

#[test]
fn sigterm_with_requests_in_flight_exits_zero_promptly_and_answers_or_closes_each() {
    let mut rig = Rig::start("dur-term", "");
    let port = rig.port;
    let go = Arc::new(AtomicBool::new(true));
    // Each client keeps 8 one-MiB WRITEs in flight; after SIGTERM it reports whether every
    // request was answered or the connection closed (true), or it hung (false).
    let clients: Vec<_> = (0..4)
        .map(|n| {
            let go = go.clone();
            thread::spawn(move || -> (u64, bool) {
                let mut c = Raw::login(port, USER_A, ringshare_wire::consts::Dialect::SMB3_1_1);
                let f = c
                    .create(
                        &format!("t{n}.bin"),
                        GENERIC_READ | GENERIC_WRITE,
                        FILE_OVERWRITE_IF,
                        0,
                    )
                    .expect("create");
                let data = vec![n as u8; 1 << 20];
                let mut answered = 0u64;
                let mut in_flight = std::collections::VecDeque::new();
                loop {
                    while in_flight.len() < 8 && go.load(Ordering::Relaxed) {
                        let mut h = c.header(Command::WRITE);
                        h.credit_charge = 16;
                        h.credits = 16;
                        c.next_mid += 15;
                        let off = ((answered + in_flight.len() as u64) % 32) << 20;
                        let m = Raw::message(&h, &write_body(f, off, &data));
                        if c.send_frame(&m).is_err() {
                            return (answered, true);
                        }
                        in_flight.push_back(h.message_id);
                    }
                    let Some(mid) = in_flight.pop_front() else {
                        return (answered, true);
                    };
                    match c.wait_for(mid) {
                        Outcome::Reply(..) => answered += 1,
                        Outcome::Closed => return (answered, true),
                        Outcome::Silent => return (answered, false),
                    }
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1000));
    let started = Instant::now();
    let status = rig.signal_and_wait(libc::SIGTERM, Duration::from_secs(10));
    let took = started.elapsed();
    go.store(false, Ordering::Relaxed);
    let status = status.unwrap_or_else(|| panic!("no exit 10 s after SIGTERM:\n{}", rig.log()));
    eprintln!("exited {status} {took:?} after SIGTERM");
    assert!(
        status.success(),
        "exit status after SIGTERM: {status}\n{}",
        rig.log()
    );
    for (n, t) in clients.into_iter().enumerate() {
        let (answered, clean) = t.join().expect("client");
        eprintln!("client {n}: {answered} writes answered");
        assert!(answered > 0, "client {n} never got a reply before SIGTERM");
        assert!(
            clean,
            "client {n}: an in-flight request was neither answered nor closed"
        );
    }
}
