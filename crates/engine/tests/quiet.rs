//! Quiet sends ([`Ring::quietly`]): their success does not end a wait; their failure does, and
//! so does their success once [`Ring::need`] was told. Over loopback TCP; every wait is bounded.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ringshare_engine::{Completion, Ring, RingConfig, SharedFd};

/// The longest any wait here may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(10);

const SEND: u64 = 1;
const RECV: u64 = 2;

/// A connected loopback pair: the ring's side and the peer's.
fn tcp_pair() -> (SharedFd, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (Arc::new(OwnedFd::from(server)), peer)
}

fn ring() -> Ring {
    Ring::new(RingConfig::default()).expect("io_uring available")
}

/// Every completion the ring holds after one wait.
fn taken(ring: &mut Ring) -> Vec<Completion> {
    std::iter::from_fn(|| ring.next_completion())
        .filter(|c| !c.is_wake())
        .collect()
}

fn tokens(done: &[Completion]) -> Vec<u64> {
    done.iter().map(|c| c.user_data).collect()
}

#[test]
fn a_quiet_sends_success_does_not_end_a_wait_that_something_else_ends() {
    let (a, _a_peer) = tcp_pair();
    let (b, mut b_peer) = tcp_pair();
    let mut ring = ring();
    ring.recv(&b, Vec::with_capacity(64), RECV);
    ring.quietly(|r| r.send(&a, b"call".to_vec(), 0, SEND));
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        b_peer.write_all(b"answer").unwrap();
        b_peer
    });
    ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
    let done = taken(&mut ring);
    let _b_peer = writer.join().unwrap();
    // The send completed at once, yet the wait went on until the answer came; both are
    // handed over together.
    assert!(
        tokens(&done).contains(&RECV),
        "the wait ended with {:?}",
        tokens(&done)
    );
    let send = done
        .iter()
        .find(|c| c.user_data == SEND)
        .expect("the send's completion");
    assert_eq!(send.result.as_ref().ok(), Some(&4));
}

#[test]
fn a_plain_sends_success_ends_a_wait_at_once() {
    let (a, _a_peer) = tcp_pair();
    let (b, _b_peer) = tcp_pair();
    let mut ring = ring();
    ring.recv(&b, Vec::with_capacity(64), RECV);
    ring.send(&a, b"call".to_vec(), 0, SEND);
    let started = Instant::now();
    ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
    assert!(started.elapsed() < TEST_TIMEOUT / 2);
    assert_eq!(tokens(&taken(&mut ring)), vec![SEND]);
}

#[test]
fn a_quiet_send_its_caller_comes_to_need_ends_a_wait_again() {
    let (a, _a_peer) = tcp_pair();
    let (b, _b_peer) = tcp_pair();
    let mut ring = ring();
    ring.recv(&b, Vec::with_capacity(64), RECV);
    let key = ring.quietly(|r| r.send(&a, b"call".to_vec(), 0, SEND));
    ring.need(key.expect("a send in flight has a key"));
    let started = Instant::now();
    ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
    assert!(started.elapsed() < TEST_TIMEOUT / 2);
    assert_eq!(tokens(&taken(&mut ring)), vec![SEND]);
}

#[test]
fn a_wait_a_quiet_send_did_not_end_still_ends_at_its_timeout() {
    let (a, _a_peer) = tcp_pair();
    let mut ring = ring();
    ring.quietly(|r| r.send(&a, b"call".to_vec(), 0, SEND));
    let started = Instant::now();
    ring.submit_and_wait(1, Some(Duration::from_millis(200)))
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150),
        "returned after {waited:?}"
    );
    assert!(waited < TEST_TIMEOUT / 2, "returned after {waited:?}");
    // Handed over when the wait ended.
    assert_eq!(tokens(&taken(&mut ring)), vec![SEND]);
}

#[test]
fn a_quiet_sends_failure_ends_a_wait_at_once() {
    // A send on a socket its own side shut for writing fails (EPIPE).
    let (a, _a_peer) = tcp_pair();
    let (b, _b_peer) = tcp_pair();
    rustix::net::shutdown(&*a, rustix::net::Shutdown::Write).unwrap();
    let mut ring = ring();
    ring.recv(&b, Vec::with_capacity(64), RECV);
    ring.quietly(|r| r.send(&a, b"call".to_vec(), 0, SEND));
    let started = Instant::now();
    ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
    assert!(started.elapsed() < TEST_TIMEOUT / 2);
    let done = taken(&mut ring);
    assert_eq!(tokens(&done), vec![SEND]);
    assert!(done[0].result.is_err());
}
