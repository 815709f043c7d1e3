//! Behaviour of `Ring` over loopback TCP and a temporary file.
//! Every wait is bounded; every socket is on 127.0.0.1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ringshare_engine::{leaked_ops, net, Completion, Ring, RingConfig, SharedFd};
use support::{wait_for, TEST_TIMEOUT};

mod support;

fn ring() -> Ring {
    Ring::new(RingConfig::default()).expect("io_uring available")
}

/// A connected loopback pair: the server side for the ring, the peer for a thread.
fn tcp_pair() -> (SharedFd, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    peer.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
    peer.set_write_timeout(Some(TEST_TIMEOUT)).unwrap();
    (Arc::new(OwnedFd::from(server)), peer)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ringshare-engine-{}-{name}", std::process::id()))
}

#[test]
fn echoes_over_loopback_with_multishot_accept_recv_and_send() {
    const ACCEPT: u64 = 1;
    let listener = Arc::new(net::listen_reuseport("127.0.0.1:0".parse().unwrap(), 16).unwrap());
    let addr = net::local_addr(&*listener).unwrap();
    let clients = thread::spawn(move || {
        for round in 0..3u8 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
            let msg = [b'a' + round; 100];
            s.write_all(&msg).unwrap();
            let mut back = [0u8; 100];
            s.read_exact(&mut back).unwrap();
            assert_eq!(back, msg);
        }
    });

    let mut ring = ring();
    ring.accept_multishot(&listener, ACCEPT);
    let mut conns: Vec<Option<SharedFd>> = Vec::new();
    let mut closed = 0;
    let deadline = Instant::now() + TEST_TIMEOUT;
    while closed < 3 {
        assert!(Instant::now() < deadline, "echo did not finish");
        ring.submit_and_wait(1, Some(Duration::from_secs(1)))
            .unwrap();
        while let Some(mut c) = ring.next_completion() {
            // tokens: 1 = accept, 2 + 2*i = recv on conn i, 3 + 2*i = send on conn i
            if c.user_data == ACCEPT {
                assert!(c.more, "multishot accept stays armed");
                let fd = Arc::new(c.take_fd().expect("accepted fd"));
                assert_eq!(c.result.as_ref().unwrap(), &(fd.as_raw_fd() as usize));
                let id = conns.len() as u64;
                ring.recv(&fd, Vec::with_capacity(4096), 2 + 2 * id);
                conns.push(Some(fd));
                continue;
            }
            let id = ((c.user_data - 2) / 2) as usize;
            let fd = conns[id].clone().expect("open connection");
            let buf = c.take_buf().unwrap();
            let n = c.result.unwrap();
            if c.user_data % 2 == 0 {
                if n == 0 {
                    conns[id] = None;
                    closed += 1;
                } else {
                    ring.send(&fd, buf, 0, c.user_data + 1);
                }
            } else {
                assert_eq!(n, buf.len());
                let mut buf = buf;
                buf.clear();
                ring.recv(&fd, buf, c.user_data - 1);
            }
        }
    }
    clients.join().unwrap();
    assert_eq!(ring.in_flight(), 1, "only the accept is left");
}

#[test]
fn a_64_mib_send_completes_once_with_the_full_count_despite_short_sends() {
    const LEN: usize = 64 << 20;
    const SEND: u64 = 7;
    let (fd, mut peer) = tcp_pair();
    net::set_socket_buffers(&*fd, Some(64 * 1024), None).unwrap();
    net::set_socket_buffers(&peer, None, Some(64 * 1024)).unwrap();
    let receiver = thread::spawn(move || {
        let mut got = vec![0u8; 256 * 1024];
        let mut total = 0usize;
        let mut chunks = 0usize;
        let expected = pattern(251 * 1024);
        while total < LEN {
            let n = peer.read(&mut got).unwrap();
            assert!(n > 0, "early EOF at {total}");
            for (i, byte) in got[..n].iter().enumerate() {
                assert_eq!(*byte, expected[(total + i) % 251], "byte {}", total + i);
            }
            total += n;
            chunks += 1;
            if chunks == 64 {
                chunks = 0;
                thread::sleep(Duration::from_millis(1)); // a slow reader
            }
        }
        total
    });

    let mut ring = ring();
    let before = ring.stats();
    ring.send(&fd, pattern(LEN), 0, SEND);
    let c = wait_for(&mut ring, SEND);
    assert_eq!(c.result.unwrap(), LEN);
    assert_eq!(c.buf.unwrap().len(), LEN, "buffer handed back");
    let sqes = ring.stats().sqes - before.sqes;
    assert!(sqes >= 2, "the kernel did short sends: {sqes} SQEs");
    assert_eq!(receiver.join().unwrap(), LEN);
    // Exactly once: nothing else arrives.
    ring.submit_and_wait(1, Some(Duration::from_millis(50)))
        .unwrap();
    assert!(ring.next_completion().is_none());
}

#[test]
fn send_vectored_sends_header_then_data_without_joining_them() {
    const SEND: u64 = 9;
    let (fd, mut peer) = tcp_pair();
    net::set_socket_buffers(&*fd, Some(16 * 1024), None).unwrap();
    let header = b"HEADER:0123456789".to_vec();
    let data = pattern(3 << 20);
    let trailer = b"END".to_vec();
    let mut expected = header.clone();
    expected.extend_from_slice(&data);
    expected.extend_from_slice(&trailer);
    let total = expected.len();
    let receiver = thread::spawn(move || {
        let mut got = vec![0u8; total];
        peer.read_exact(&mut got).unwrap();
        got
    });

    let mut ring = ring();
    ring.send_vectored(
        &fd,
        vec![header.clone(), data.clone(), trailer.clone()],
        SEND,
    );
    let c = wait_for(&mut ring, SEND);
    assert_eq!(c.result.unwrap(), total);
    assert_eq!(c.bufs.unwrap(), vec![header, data, trailer]);
    assert!(
        receiver.join().unwrap() == expected,
        "bytes arrive in order"
    );
}

#[test]
fn send_starts_at_the_offset() {
    let (fd, mut peer) = tcp_pair();
    let mut ring = ring();
    ring.send(&fd, b"skipHELLO".to_vec(), 4, 3);
    let c = wait_for(&mut ring, 3);
    assert_eq!(c.result.unwrap(), 5);
    let mut got = [0u8; 5];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HELLO");
}

#[test]
fn reads_writes_and_fsyncs_a_temp_file() {
    let path = temp_path("rw");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fd: SharedFd = Arc::new(file.into());
    let mut ring = ring();

    let data = pattern(300_000);
    let mut buf = b"xx".to_vec();
    buf.extend_from_slice(&data);
    ring.write_at(&fd, buf, 2..300_002, 10, None, 1);
    let c = wait_for(&mut ring, 1);
    assert_eq!(c.result.unwrap(), 300_000);

    ring.fsync(&fd, None, 2);
    assert_eq!(wait_for(&mut ring, 2).result.unwrap(), 0);

    ring.read_at(&fd, b"abc".to_vec(), 300_000, 10, None, 3);
    let c = wait_for(&mut ring, 3);
    assert_eq!(c.result.unwrap(), 300_000);
    let buf = c.buf.unwrap();
    assert_eq!(&buf[..3], b"abc", "read appends after len");
    assert!(buf[3..] == data[..]);

    ring.read_at(&fd, Vec::new(), 4096, 300_010, None, 4);
    assert_eq!(wait_for(&mut ring, 4).result.unwrap(), 0, "end of file");

    std::fs::remove_file(&path).unwrap();
}

/// Whether an io_uring worker of this thread's rings runs now (`iou-wrk-TID`: workers are
/// named after the task whose ring made them, so other tests' rings do not count).
fn has_own_io_worker() -> bool {
    let me = std::fs::read_link("/proc/thread-self").unwrap();
    let tid = me.file_name().unwrap().to_string_lossy().into_owned();
    let want = format!("iou-wrk-{tid}");
    std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
        let comm = std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap_or_default();
        comm.trim_end() == want
    })
}

/// A read started in `Ring::punted(true, ..)` goes to an io_uring worker at once (IOSQE_ASYNC)
/// instead of being tried in the submitting thread: on an empty pipe a worker waits in its
/// blocking read, where an unpunted read arms a poll and no worker is made. Both then complete
/// with what is written. (Issue 33, step 7: a FUSE file in direct I/O mode waits for the file
/// system in the thread that tries it.)
#[test]
fn a_punted_read_goes_to_an_io_worker_at_once() {
    for punt in [false, true] {
        let (r, mut w) = std::io::pipe().unwrap();
        let fd: SharedFd = Arc::new(OwnedFd::from(r));
        let mut ring = ring();
        ring.punted(punt, |ring| ring.read_at(&fd, Vec::new(), 16, 0, None, 1));
        ring.submit().unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut worker = has_own_io_worker();
        while punt && !worker && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
            worker = has_own_io_worker();
        }
        assert_eq!(worker, punt, "a worker runs the read: {punt}");
        w.write_all(b"through").unwrap();
        let c = wait_for(&mut ring, 1);
        assert_eq!(c.result.unwrap(), 7);
        assert_eq!(c.buf.unwrap(), b"through");
    }
}

#[test]
fn write_at_rejects_a_range_outside_the_buffer_and_returns_it() {
    let path = temp_path("badrange");
    let fd: SharedFd = Arc::new(std::fs::File::create(&path).unwrap().into());
    let mut ring = ring();
    ring.write_at(&fd, vec![1, 2, 3], 1..5, 0, None, 5);
    let c = ring.next_completion().expect("rejected at once");
    assert_eq!(
        c.result.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    assert_eq!(c.buf.unwrap(), vec![1, 2, 3]);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn timeout_fires_after_its_duration() {
    let mut ring = ring();
    let start = Instant::now();
    ring.timeout(Duration::from_millis(50), 11);
    let c = wait_for(&mut ring, 11);
    assert_eq!(c.result.unwrap(), 0);
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[test]
fn cancel_of_a_pending_recv_completes_with_ecanceled_and_returns_the_buffer() {
    let (fd, _peer) = tcp_pair();
    let mut ring = ring();
    let mut buf = Vec::with_capacity(4096);
    buf.extend_from_slice(b"kept");
    ring.recv(&fd, buf, 21);
    ring.submit().unwrap();
    assert_eq!(ring.cancel(21), 1);
    assert_eq!(ring.cancel(999), 0, "unknown token");
    let c = wait_for(&mut ring, 21);
    assert_eq!(c.result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
    let buf = c.buf.unwrap();
    assert_eq!(buf, b"kept");
    assert_eq!(buf.capacity(), 4096);
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn waker_from_another_thread_wakes_submit_and_wait() {
    let mut ring = ring();
    for _ in 0..2 {
        let waker = ring.waker();
        let start = Instant::now();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            waker.wake().unwrap();
        });
        ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
        let c = ring.next_completion().expect("woken");
        assert!(c.is_wake());
        assert_eq!(c.result.unwrap(), 1);
        assert!(start.elapsed() < TEST_TIMEOUT / 2);
        t.join().unwrap();
    }
}

#[test]
fn submit_and_wait_returns_after_its_timeout_with_nothing_to_reap() {
    let mut ring = ring();
    let start = Instant::now();
    ring.submit_and_wait(1, Some(Duration::from_millis(20)))
        .unwrap();
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert!(ring.next_completion().is_none());
}

#[test]
fn each_submit_and_wait_is_one_io_uring_enter() {
    let mut ring = ring();
    let before = ring.stats();
    for token in 0..10 {
        ring.timeout(Duration::from_millis(1), token);
        wait_for(&mut ring, token);
    }
    let after = ring.stats();
    assert_eq!(after.sqes - before.sqes, 10);
    assert_eq!(after.cqes - before.cqes, 10);
    assert!(after.submits - before.submits >= 10);
    assert!(after.submits - before.submits <= 20);
}

#[test]
fn more_operations_than_queue_entries_all_complete() {
    let mut ring = Ring::new(RingConfig {
        entries: 4,
        ..RingConfig::default()
    })
    .unwrap();
    for token in 0..100 {
        ring.timeout(Duration::from_millis(5), token);
    }
    let mut seen = [false; 100];
    let deadline = Instant::now() + TEST_TIMEOUT;
    while seen.iter().any(|s| !s) {
        assert!(Instant::now() < deadline);
        ring.submit_and_wait(1, Some(Duration::from_secs(1)))
            .unwrap();
        while let Some(c) = ring.next_completion() {
            assert_eq!(c.result.unwrap(), 0);
            assert!(!seen[c.user_data as usize], "completes once");
            seen[c.user_data as usize] = true;
        }
    }
}

#[test]
fn close_completes_in_the_ring() {
    let (fd, _peer) = tcp_pair();
    let fd = Arc::try_unwrap(fd).unwrap();
    let mut ring = ring();
    ring.close(fd, 31);
    assert_eq!(wait_for(&mut ring, 31).result.unwrap(), 0);
}

#[test]
fn dropping_a_ring_with_pending_operations_cancels_them_without_leaking() {
    let (fd, mut peer) = tcp_pair();
    let listener = Arc::new(net::listen_reuseport("127.0.0.1:0".parse().unwrap(), 4).unwrap());
    let leaked_before = leaked_ops();
    let start = Instant::now();
    {
        let mut ring = ring();
        ring.recv(&fd, Vec::with_capacity(1 << 16), 1);
        ring.accept_multishot(&listener, 2);
        ring.timeout(Duration::from_secs(60), 3);
        ring.submit().unwrap();
        assert_eq!(ring.in_flight(), 3);
    }
    assert!(start.elapsed() < Duration::from_secs(2), "drop is bounded");
    assert_eq!(
        leaked_ops(),
        leaked_before,
        "every op was cancelled and reaped"
    );
    assert_eq!(Arc::strong_count(&fd), 1, "the ring released its fd clones");
    assert_eq!(Arc::strong_count(&listener), 1);
    // The recv is gone from the kernel: data sent now stays in the socket.
    peer.write_all(b"after drop").unwrap();
    let mut server = TcpStream::from(Arc::try_unwrap(fd).unwrap());
    server.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
    let mut got = [0u8; 10];
    server.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"after drop");
}

#[test]
fn send_to_a_closed_peer_fails_and_returns_the_buffer() {
    let (fd, peer) = tcp_pair();
    drop(peer);
    let mut ring = ring();
    ring.send(&fd, pattern(8 << 20), 0, 41);
    let c = wait_for(&mut ring, 41);
    let err = c.result.unwrap_err();
    assert!(
        matches!(err.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)),
        "{err}"
    );
    assert_eq!(c.buf.unwrap().len(), 8 << 20);
}

#[test]
fn recv_into_a_full_buffer_is_rejected_at_once() {
    let (fd, _peer) = tcp_pair();
    let mut ring = ring();
    ring.recv(&fd, Vec::new(), 51);
    let c = ring.next_completion().expect("rejected at once");
    assert_eq!(
        c.result.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn cancelled_multishot_accept_ends_with_more_false() {
    let listener = Arc::new(net::listen_reuseport("127.0.0.1:0".parse().unwrap(), 4).unwrap());
    let mut ring = ring();
    ring.accept_multishot(&listener, 61);
    ring.submit().unwrap();
    assert_eq!(ring.cancel(61), 1);
    let c = wait_for(&mut ring, 61);
    assert!(!c.more, "no longer armed");
    assert_eq!(c.result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn cancelled_send_to_a_stalled_peer_is_not_continued_and_returns_the_buffer() {
    let (fd, _peer) = tcp_pair(); // the peer never reads
    net::set_socket_buffers(&*fd, Some(64 * 1024), None).unwrap();
    let mut ring = ring();
    ring.send(&fd, pattern(16 << 20), 0, 71);
    ring.submit_and_wait(1, Some(Duration::from_millis(50)))
        .unwrap();
    assert!(ring.next_completion().is_none(), "stalled");
    assert_eq!(ring.cancel(71), 1);
    let c = wait_for(&mut ring, 71);
    assert_eq!(c.result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
    assert_eq!(c.buf.unwrap().len(), 16 << 20);
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn default_config_gets_single_issuer_and_defer_taskrun_on_this_kernel() {
    let ring = ring();
    let setup = ring.setup();
    assert!(setup.single_issuer && setup.defer_taskrun && !setup.sqpoll);
}

#[test]
fn sqpoll_ring_drops_defer_taskrun_and_still_completes_operations() {
    let mut ring = Ring::new(RingConfig {
        sqpoll: true,
        ..RingConfig::default()
    })
    .unwrap();
    assert!(ring.setup().sqpoll && !ring.setup().defer_taskrun);
    ring.timeout(Duration::from_millis(5), 81);
    assert_eq!(wait_for(&mut ring, 81).result.unwrap(), 0);
}

#[test]
fn zero_entries_is_refused() {
    let err = Ring::new(RingConfig {
        entries: 0,
        ..RingConfig::default()
    })
    .err()
    .expect("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn wakes_before_the_wait_coalesce_into_one_completion() {
    let mut ring = ring();
    let waker = ring.waker();
    waker.wake().unwrap();
    waker.wake().unwrap();
    ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
    let c = ring.next_completion().expect("woken");
    assert!(c.is_wake());
    assert_eq!(c.result.unwrap(), 2);
    ring.submit_and_wait(1, Some(Duration::from_millis(20)))
        .unwrap();
    assert!(
        ring.next_completion().is_none(),
        "one completion for both wakes"
    );
}

/// A temp file holding `data`, opened read-only for the ring.
fn file_with(name: &str, data: &[u8]) -> (SharedFd, PathBuf) {
    let path = temp_path(name);
    std::fs::write(&path, data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    (Arc::new(file.into()), path)
}

/// Reads exactly `n` bytes from the peer on a thread while the ring works.
fn read_on_thread(mut peer: TcpStream, n: usize) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut got = vec![0u8; n];
        peer.read_exact(&mut got).unwrap();
        got
    })
}

#[test]
fn send_file_sends_the_head_then_the_file_range_in_chunks() {
    let data = pattern(3 * 1024 * 1024 + 17);
    let (file, path) = file_with("sendfile", &data);
    let (sock, peer) = tcp_pair();
    let mut ring = Ring::new(RingConfig {
        splice_chunk: 64 * 1024,
        ..RingConfig::default()
    })
    .unwrap();
    let head = b"HEADER-BYTES".to_vec();
    let len = data.len() - 1000;
    let reader = read_on_thread(peer, head.len() + len);
    let before = ring.stats();
    ring.send_file(&sock, head.clone(), &file, 1000, len, None, 7);
    let c = wait_for(&mut ring, 7);
    assert_eq!(c.result.unwrap(), len);
    assert_eq!(c.buf.as_deref(), Some(&head[..]), "the head comes back");
    let got = reader.join().unwrap();
    assert_eq!(&got[..head.len()], &head[..]);
    assert!(got[head.len()..] == data[1000..], "file bytes differ");
    // 49 chunks of 64 KiB: two SQEs each (fill, drain) plus the head, linked
    // 16 chunks to a round, and one CQE per round (not one per SQE or page).
    let after = ring.stats();
    let sqes = after.sqes - before.sqes;
    // (A round cut short resubmits its unstarted steps: a few dozen extra SQEs.)
    assert!((99..=200).contains(&sqes), "{sqes} SQEs");
    let cqes = after.cqes - before.cqes;
    assert!((4..=8).contains(&cqes), "{cqes} CQEs for 4 rounds");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn send_file_whose_head_the_socket_takes_only_in_part_sends_all_of_it_before_the_file() {
    // A send into a socket with little room moves part of the head; the
    // file bytes linked after it must not start before the rest of the head
    // went (seen with smbclient over SMB 2.0.2: 12 of an 84-byte READ head
    // sent, then the data, and the client's framing lost).
    let data = pattern(256 * 1024);
    let (file, path) = file_with("sendfile-short-head", &data);
    let (sock, peer) = tcp_pair();
    let small: libc::c_int = 4096;
    // SAFETY: setsockopt on descriptors this test owns, with a pointer to a
    // live c_int and its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        libc::setsockopt(
            peer.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let mut ring = Ring::new(RingConfig {
        splice_chunk: 64 * 1024,
        ..RingConfig::default()
    })
    .unwrap();
    let head: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let total = head.len() + data.len();
    let reader = thread::spawn(move || {
        let mut peer = peer;
        let mut got = vec![0u8; total];
        let mut at = 0;
        // Slowly, in small reads, so the sender keeps finding the socket full.
        while at < total {
            let n = peer.read(&mut got[at..(at + 1500).min(total)]).unwrap();
            assert!(n > 0, "peer closed early");
            at += n;
            if at % 7 == 0 {
                thread::sleep(Duration::from_micros(200));
            }
        }
        got
    });
    ring.send_file(&sock, head.clone(), &file, 0, data.len(), None, 12);
    let c = wait_for(&mut ring, 12);
    assert_eq!(c.result.unwrap(), data.len());
    let got = reader.join().unwrap();
    assert!(
        got[..head.len()] == head[..],
        "the head arrived whole and first"
    );
    assert!(got[head.len()..] == data[..], "then the file bytes");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn send_file_past_the_end_of_the_file_reports_the_short_count() {
    let data = pattern(100_000);
    let (file, path) = file_with("sendfile-short", &data);
    let (sock, peer) = tcp_pair();
    let mut ring = ring();
    let reader = read_on_thread(peer, 4 + 60_000);
    ring.send_file(&sock, b"head".to_vec(), &file, 40_000, 1 << 20, None, 8);
    let c = wait_for(&mut ring, 8);
    assert_eq!(c.result.unwrap(), 60_000, "only what the file holds");
    let got = reader.join().unwrap();
    assert!(got[4..] == data[40_000..]);
    // The pipe is empty again and serves the next send_file.
    let (sock2, peer2) = tcp_pair();
    let reader = read_on_thread(peer2, 10);
    ring.send_file(&sock2, Vec::new(), &file, 0, 10, None, 9);
    assert_eq!(wait_for(&mut ring, 9).result.unwrap(), 10);
    assert_eq!(reader.join().unwrap(), data[..10]);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn without_defer_taskrun_a_send_files_linked_splices_run_to_the_end_while_the_ring_thread_waits_elsewhere(
) {
    // 16 chunks of 64 KiB: one round of linked splices, each forced onto an io-wq worker.
    // With DEFER_TASKRUN each step's completion would wait for this thread to enter the
    // kernel before the next step started, so the peer would get the head and no more.
    let data = pattern(1024 * 1024);
    let (file, path) = file_with("sendfile-worker", &data);
    let (sock, mut peer) = tcp_pair();
    let mut ring = Ring::new(RingConfig {
        splice_chunk: 64 * 1024,
        defer_taskrun: false,
        ..RingConfig::default()
    })
    .unwrap();
    assert!(!ring.setup().defer_taskrun);
    let head = b"HEAD".to_vec();
    let want = head.len() + data.len();
    let reader = thread::spawn(move || {
        let mut got = vec![0u8; want];
        let mut at = 0;
        while at < want {
            match peer.read(&mut got[at..]) {
                Ok(n) if n > 0 => at += n,
                _ => break,
            }
        }
        got.truncate(at);
        got
    });
    ring.send_file(&sock, head.clone(), &file, 0, data.len(), None, 3);
    ring.submit().unwrap();
    // This thread does not enter the kernel again until the peer has read everything.
    let got = reader.join().unwrap();
    assert_eq!(
        got.len(),
        want,
        "bytes that arrived before the ring's thread came back"
    );
    assert!(got[..head.len()] == head[..] && got[head.len()..] == data[..]);
    assert_eq!(wait_for(&mut ring, 3).result.unwrap(), data.len());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn send_file_to_a_closed_peer_fails_and_a_cancel_ends_a_stalled_one() {
    let data = pattern(8 * 1024 * 1024);
    let (file, path) = file_with("sendfile-closed", &data);
    let mut ring = ring();
    // The peer never reads: the socket fills, the splice blocks, cancel ends it.
    let (sock, peer) = tcp_pair();
    ring.send_file(&sock, b"h".to_vec(), &file, 0, data.len(), None, 10);
    ring.submit_and_wait(0, Some(Duration::from_millis(200)))
        .unwrap();
    assert!(
        ring.next_completion().is_none(),
        "cannot finish: nobody reads"
    );
    assert_eq!(ring.cancel(10), 1);
    let c = wait_for(&mut ring, 10);
    assert!(c.result.is_err(), "{c:?}");
    assert_eq!(c.buf.as_deref(), Some(&b"h"[..]));
    drop(peer);
    // A peer that has gone: the send fails instead of hanging.
    let (sock, peer) = tcp_pair();
    drop(peer);
    thread::sleep(Duration::from_millis(50));
    ring.send_file(&sock, b"h".to_vec(), &file, 0, data.len(), None, 11);
    assert!(wait_for(&mut ring, 11).result.is_err());
    assert_eq!(ring.in_flight(), 0);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn splice_moves_socket_bytes_through_a_pipe_into_a_file_at_an_offset() {
    let data = pattern(600_000);
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    let pipe = ring.new_splice_pipe().unwrap();
    assert!(
        pipe.capacity >= data.len(),
        "pipe of {} bytes",
        pipe.capacity
    );
    peer.write_all(&data).unwrap();
    // Socket -> pipe: all of it (the kernel may move it in several steps).
    ring.splice(&sock, None, &pipe.write, None, data.len(), None, 1);
    assert_eq!(wait_for(&mut ring, 1).result.unwrap(), data.len());
    // Pipe -> file at 4096.
    let path = temp_path("splice-in");
    let out: SharedFd = Arc::new(
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap()
            .into(),
    );
    ring.splice(&pipe.read, None, &out, Some(4096), data.len(), None, 2);
    assert_eq!(wait_for(&mut ring, 2).result.unwrap(), data.len());
    let got = std::fs::read(&path).unwrap();
    assert_eq!(got.len(), 4096 + data.len());
    assert!(got[..4096].iter().all(|&b| b == 0));
    assert!(got[4096..] == data[..], "file bytes differ");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn splice_from_a_closed_peer_reports_the_short_count() {
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    let pipe = ring.new_splice_pipe().unwrap();
    peer.write_all(b"only this").unwrap();
    drop(peer);
    ring.splice(&sock, None, &pipe.write, None, 1000, None, 3);
    assert_eq!(wait_for(&mut ring, 3).result.unwrap(), 9);
    ring.splice(&pipe.read, None, &sock, Some(1 << 63), 9, None, 4);
    assert_eq!(
        wait_for(&mut ring, 4).result.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput,
        "an offset past i64::MAX is refused"
    );
}

#[test]
fn poll_readable_waits_for_the_low_mark_then_completes() {
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    assert_eq!(net::set_rcvlowat(&*sock, 100_000).unwrap(), 100_000);
    ring.poll_readable(&sock, 5);
    peer.write_all(&pattern(60_000)).unwrap();
    // Under the mark: nothing completes.
    ring.submit_and_wait(1, Some(Duration::from_millis(200)))
        .unwrap();
    assert!(
        ring.next_completion().is_none(),
        "readable below the low mark"
    );
    peer.write_all(&pattern(40_000)).unwrap();
    let c = wait_for(&mut ring, 5);
    assert!(c.result.unwrap() & libc::POLLIN as usize != 0);
    assert_eq!(net::set_rcvlowat(&*sock, 1).unwrap(), 1);
}

#[test]
fn poll_writable_waits_while_the_send_buffer_is_full_and_completes_once_the_peer_reads() {
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    // Fill the socket without waiting until it takes nothing more, even after the peer's
    // kernel had time to take what was acknowledged into its own buffer.
    rustix::io::ioctl_fionbio(&*sock, true).unwrap();
    let chunk = pattern(1 << 20);
    let mut queued = 0usize;
    loop {
        let mut took = false;
        loop {
            match rustix::net::send(&*sock, &chunk, rustix::net::SendFlags::empty()) {
                Ok(n) => (queued, took) = (queued + n, true),
                Err(rustix::io::Errno::AGAIN) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if !took {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    rustix::io::ioctl_fionbio(&*sock, false).unwrap();
    ring.poll_writable(&sock, 6);
    ring.submit_and_wait(1, Some(Duration::from_millis(200)))
        .unwrap();
    assert!(
        ring.next_completion().is_none(),
        "writable with the send buffer full"
    );
    let reader = thread::spawn(move || {
        let mut buf = vec![0u8; queued];
        peer.read_exact(&mut buf).unwrap();
        peer
    });
    let c = wait_for(&mut ring, 6);
    assert!(c.result.unwrap() & libc::POLLOUT as usize != 0);
    drop(reader.join().unwrap());
}

#[test]
fn work_done_here_is_reported_with_the_next_completions_without_a_wait() {
    let mut ring = ring();
    ring.done_here(9, Ok(42), Some(vec![1, 2, 3]));
    let started = Instant::now();
    // A wait with nothing in the kernel returns at once for it.
    ring.submit_and_wait(1, Some(Duration::from_secs(5)))
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    let c = ring.next_completion().expect("the reported end");
    assert_eq!((c.user_data, c.result.unwrap()), (9, 42));
    assert_eq!(c.buf.as_deref(), Some(&[1u8, 2, 3][..]));
}

#[test]
fn splice_until_full_into_a_pipe_that_fills_up_returns_short_instead_of_waiting() {
    let (sock, peer) = tcp_pair();
    let mut ring = Ring::new(RingConfig {
        splice_chunk: 64 * 1024,
        ..RingConfig::default()
    })
    .unwrap();
    let pipe = ring.new_splice_pipe().unwrap();
    // Far more than 16 pipe slots can hold, however large the fragments.
    let data = pattern(4 << 20);
    let writer = {
        let data = data.clone();
        thread::spawn(move || {
            let mut peer = peer;
            let _ = peer.write_all(&data);
            peer
        })
    };
    thread::sleep(Duration::from_millis(100));
    ring.splice_until_full(&sock, &pipe.write, data.len(), 6);
    let moved = wait_for(&mut ring, 6).result.unwrap();
    assert!(moved > 0 && moved < data.len(), "moved {moved}");
    // What it moved is the stream's start.
    let mut got = vec![0u8; moved];
    let mut at = 0;
    while at < moved {
        at += rustix::io::read(&*pipe.read, &mut got[at..]).unwrap();
    }
    assert!(got[..] == data[..moved]);
    drop(sock);
    drop(writer.join());
}

#[test]
fn splice_until_full_into_a_pipe_already_full_fails_with_eagain_not_end_of_stream() {
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    let pipe = ring.new_splice_pipe_for(4096).unwrap();
    // Fill every slot of the pipe.
    while rustix::io::write(&*pipe.write, &[1u8; 4096][..]).is_ok_and(|n| n > 0) {
        let mut flags = rustix::fs::fcntl_getfl(&*pipe.write).unwrap();
        flags |= rustix::fs::OFlags::NONBLOCK;
        rustix::fs::fcntl_setfl(&*pipe.write, flags).unwrap();
    }
    peer.write_all(b"more").unwrap();
    thread::sleep(Duration::from_millis(50));
    ring.splice_until_full(&sock, &pipe.write, 4, 6);
    let err = wait_for(&mut ring, 6).result.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
}

/// Reaps the next completion for `token` and the bytes it brought.
fn next_received(ring: &mut Ring, token: u64) -> (Completion, Vec<u8>) {
    let c = wait_for(ring, token);
    let data = ring.received(&c).to_vec();
    (c, data)
}

#[test]
fn multishot_recv_delivers_each_arrival_in_a_provided_buffer_until_cancelled() {
    const RECV: u64 = 7;
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    assert!(ring.has_recv_bufs());
    ring.recv_multishot(&sock, RECV);
    let mut got = Vec::new();
    for part in [&b"hello "[..], b"provided ", b"buffers"] {
        peer.write_all(part).unwrap();
        let want = got.len() + part.len();
        while got.len() < want {
            let (c, data) = next_received(&mut ring, RECV);
            assert!(c.more, "the receive stays armed: {c:?}");
            assert_eq!(c.result.as_ref().ok(), Some(&data.len()));
            got.extend_from_slice(&data);
        }
    }
    assert_eq!(got, b"hello provided buffers");
    assert_eq!(ring.cancel(RECV), 1);
    let c = wait_for(&mut ring, RECV);
    assert!(!c.more);
    assert_eq!(c.result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn multishot_recv_ends_with_zero_at_end_of_stream() {
    const RECV: u64 = 8;
    let (sock, peer) = tcp_pair();
    let mut ring = ring();
    ring.recv_multishot(&sock, RECV);
    drop(peer);
    let c = wait_for(&mut ring, RECV);
    assert!(!c.more);
    assert_eq!(c.result.unwrap(), 0);
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn multishot_recv_with_every_buffer_in_use_ends_with_enobufs_and_can_be_armed_again() {
    const RECV: u64 = 9;
    let (sock, mut peer) = tcp_pair();
    let mut ring = Ring::new(RingConfig {
        recv_bufs: 2,
        recv_buf_len: 16,
        ..RingConfig::default()
    })
    .unwrap();
    // 48 bytes queued at once: two 16-byte buffers, then none left.
    peer.write_all(&pattern(48)).unwrap();
    thread::sleep(Duration::from_millis(50));
    ring.recv_multishot(&sock, RECV);
    let mut got = Vec::new();
    let end = loop {
        let (c, data) = next_received(&mut ring, RECV);
        got.extend_from_slice(&data);
        if !c.more {
            break c;
        }
    };
    assert_eq!(end.result.unwrap_err().raw_os_error(), Some(libc::ENOBUFS));
    assert_eq!(got, pattern(32));
    // Both buffers are back with the kernel once their completions are done.
    ring.recv_multishot(&sock, RECV);
    while got.len() < 48 {
        let (_, data) = next_received(&mut ring, RECV);
        got.extend_from_slice(&data);
    }
    assert_eq!(got, pattern(48));
}

#[test]
fn received_bytes_are_only_readable_until_the_next_completion() {
    const RECV: u64 = 10;
    const TIMER: u64 = 11;
    let (sock, mut peer) = tcp_pair();
    let mut ring = ring();
    ring.recv_multishot(&sock, RECV);
    peer.write_all(b"abc").unwrap();
    let first = wait_for(&mut ring, RECV);
    assert_eq!(ring.received(&first), b"abc");
    ring.timeout(Duration::from_millis(1), TIMER);
    let timer = wait_for(&mut ring, TIMER);
    assert!(ring.received(&timer).is_empty());
    // The buffer went back to the kernel: the old completion no longer reads it.
    assert!(ring.received(&first).is_empty());
}

#[test]
fn multishot_recv_without_provided_buffers_is_unsupported() {
    const RECV: u64 = 12;
    let (sock, _peer) = tcp_pair();
    let mut ring = Ring::new(RingConfig {
        recv_bufs: 0,
        ..RingConfig::default()
    })
    .unwrap();
    assert!(!ring.has_recv_bufs());
    ring.recv_multishot(&sock, RECV);
    let c = wait_for(&mut ring, RECV);
    assert_eq!(
        c.result.unwrap_err().kind(),
        std::io::ErrorKind::Unsupported
    );
}

#[test]
fn send_zc_completes_once_after_every_notification_with_the_whole_buffer() {
    const LEN: usize = 16 << 20;
    const SEND: u64 = 13;
    let (fd, peer) = tcp_pair();
    net::set_socket_buffers(&*fd, Some(64 * 1024), None).unwrap();
    let receiver = read_on_thread(peer, LEN);
    let mut ring = ring();
    let before = ring.stats();
    ring.send_zc(&fd, pattern(LEN), 0, SEND);
    let c = wait_for(&mut ring, SEND);
    assert_eq!(c.result.as_ref().unwrap(), &LEN);
    // Loopback delivers into the receiving socket by copying.
    assert!(c.zc_copied, "{c:?}");
    assert_eq!(c.buf.unwrap(), pattern(LEN), "buffer handed back intact");
    assert!(
        ring.stats().sqes - before.sqes >= 2,
        "short sends continued"
    );
    assert!(receiver.join().unwrap() == pattern(LEN));
    assert_eq!(ring.in_flight(), 0);
    ring.submit_and_wait(1, Some(Duration::from_millis(50)))
        .unwrap();
    assert!(ring.next_completion().is_none(), "exactly one completion");
}

#[test]
fn send_zc_to_a_closed_peer_fails_and_returns_the_buffer() {
    let (fd, peer) = tcp_pair();
    drop(peer);
    let mut ring = ring();
    ring.send_zc(&fd, pattern(8 << 20), 0, 42);
    let c = wait_for(&mut ring, 42);
    let err = c.result.unwrap_err();
    assert!(
        matches!(err.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)),
        "{err}"
    );
    assert_eq!(c.buf.unwrap().len(), 8 << 20);
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn recv_up_to_takes_at_most_its_limit_and_leaves_the_rest_queued() {
    const RECV: u64 = 14;
    let (sock, mut peer) = tcp_pair();
    peer.write_all(&pattern(100)).unwrap();
    thread::sleep(Duration::from_millis(20));
    let mut ring = ring();
    ring.recv_up_to(&sock, Vec::with_capacity(4096), 10, RECV);
    let c = wait_for(&mut ring, RECV);
    assert_eq!(c.result.unwrap(), 10);
    let buf = c.buf.unwrap();
    assert_eq!(buf, pattern(10));
    ring.recv(&sock, buf, RECV);
    let c = wait_for(&mut ring, RECV);
    assert_eq!(c.result.unwrap(), 90);
    assert_eq!(c.buf.unwrap(), pattern(100));
}

#[test]
fn ops_on_a_registered_socket_name_its_slot_not_the_fd_number() {
    let (a, mut a_peer) = tcp_pair();
    let (b, mut b_peer) = tcp_pair();
    let mut ring = ring();
    assert!(ring.register_fd(&a));
    // The fd number of `a` now refers to `b`'s socket; the slot still holds
    // `a`'s.
    // SAFETY: both fds are open; the test owns them and `a`'s number is only
    // used through the ring's slot from here on.
    assert!(unsafe { libc::dup2(b.as_raw_fd(), a.as_raw_fd()) } >= 0);
    ring.send(&a, b"through the slot".to_vec(), 0, 1);
    assert_eq!(wait_for(&mut ring, 1).result.unwrap(), 16);
    let mut got = [0u8; 16];
    a_peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"through the slot");
    b_peer.set_nonblocking(true).unwrap();
    assert!(
        b_peer.read(&mut got).is_err(),
        "bytes went to the fd number"
    );
}

#[test]
fn a_slot_is_not_given_to_another_fd_while_an_op_still_names_it() {
    let (a, mut a_peer) = tcp_pair();
    let (b, _b_peer) = tcp_pair();
    let mut ring = Ring::new(RingConfig {
        fixed_files: 1,
        ..RingConfig::default()
    })
    .unwrap();
    assert!(ring.register_fd(&a));
    ring.recv(&a, Vec::with_capacity(64), 2);
    ring.submit().unwrap();
    ring.unregister_fd(&a);
    // The only slot is still in use by the receive.
    assert!(!ring.register_fd(&b));
    a_peer.write_all(b"done").unwrap();
    assert_eq!(wait_for(&mut ring, 2).result.unwrap(), 4);
    // Free again once the receive has ended.
    assert!(ring.register_fd(&b));
}

/// `Ring::recv_answer`: one RECV, no timer. The answer ends it with the data; bytes already
/// waiting end it at once (its poll is armed first, and finds them).
#[test]
fn a_receive_of_an_answer_ends_with_the_answer_and_with_bytes_already_waiting() {
    let (fd, mut peer) = tcp_pair();
    let mut ring = ring();
    ring.recv_answer(&fd, Vec::with_capacity(64), 64, 35);
    ring.submit().unwrap();
    peer.write_all(b"answer").unwrap();
    let c = wait_for(&mut ring, 35);
    assert_eq!(c.result.unwrap(), 6);
    assert_eq!(c.buf.unwrap(), b"answer");
    assert_eq!(ring.in_flight(), 0);
    peer.write_all(b"early").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let started = Instant::now();
    ring.recv_answer(&fd, Vec::with_capacity(64), 64, 36);
    let c = wait_for(&mut ring, 36);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(c.result.unwrap(), 5);
    assert_eq!(c.buf.unwrap(), b"early");
}

/// A receive of an answer has no timeout of its own: nothing ends it but what comes or its
/// caller's cancel, which ends it with ECANCELED (not TimedOut: the caller knows it was due)
/// and gives the buffer back as it was.
#[test]
fn a_receive_of_an_answer_waits_until_cancelled_and_then_ends_with_ecanceled() {
    let (fd, _peer) = tcp_pair();
    let mut ring = ring();
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(b"part");
    ring.recv_answer(&fd, buf, 64, 37);
    ring.submit_and_wait(1, Some(Duration::from_millis(300)))
        .unwrap();
    assert!(ring.next_completion().is_none(), "no timer ended it");
    assert_eq!(ring.in_flight(), 1);
    assert_eq!(ring.cancel(37), 1);
    let c = wait_for(&mut ring, 37);
    assert_eq!(c.result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
    assert_eq!(c.buf.unwrap(), b"part");
    assert_eq!(ring.in_flight(), 0);
}

/// A process without CAP_SYS_RESOURCE (here: a thread acting as nobody) may not size a pipe
/// past /proc/sys/fs/pipe-max-size. Asked for twice that, a ring's splice pipe is made as
/// large as the limit allows, not left at the kernel's 64 KiB default.
#[test]
fn a_splice_pipe_asked_past_the_kernels_limit_is_as_large_as_the_limit_allows() {
    let Some(max) = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&m| m > 65536 && m <= 64 << 20)
    else {
        eprintln!("skipped: pipe-max-size is at the default pipe size or unreadable");
        return;
    };
    let capacity = thread::spawn(move || {
        if rustix::process::geteuid().is_root() {
            // This thread only (the raw call): its effective capabilities go with uid 0.
            rustix::thread::set_thread_res_uid(None, rustix::process::Uid::from_raw(65534), None)
                .expect("act as nobody");
        }
        let ring = Ring::new(RingConfig {
            splice_chunk: 2 * max,
            ..RingConfig::default()
        })
        .expect("io_uring available");
        ring.new_splice_pipe().expect("a pipe").capacity
    })
    .join()
    .unwrap();
    assert_eq!(
        capacity, max,
        "the pipe is as large as pipe-max-size allows"
    );
}
