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

/// A ring with a RECV armed that nothing answers, the socket a send goes on (`a`), and the
/// sockets' other ends (kept open).
struct Armed {
    ring: Ring,
    a: SharedFd,
    _held: (SharedFd, TcpStream, TcpStream),
}

fn armed() -> Armed {
    let (a, a_peer) = tcp_pair();
    let (b, b_peer) = tcp_pair();
    let mut ring = ring();
    ring.recv(&b, Vec::with_capacity(64), RECV);
    Armed {
        ring,
        a,
        _held: (b, a_peer, b_peer),
    }
}

/// The wait ends at once, with the send's completion alone: that completion.
fn the_wait_ends_with_the_send_alone(ring: &mut Ring) -> Completion {
    let started = Instant::now();
    ring.submit_and_wait(1, Some(TEST_TIMEOUT)).unwrap();
    assert!(started.elapsed() < TEST_TIMEOUT / 2);
    let mut done = taken(ring);
    assert_eq!(tokens(&done), vec![SEND]);
    done.remove(0)
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
    let mut t = armed();
    t.ring.send(&t.a, b"call".to_vec(), 0, SEND);
    the_wait_ends_with_the_send_alone(&mut t.ring);
}

#[test]
fn a_quiet_send_its_caller_comes_to_need_ends_a_wait_again() {
    let mut t = armed();
    let key = t.ring.quietly(|r| r.send(&t.a, b"call".to_vec(), 0, SEND));
    t.ring.need(key.expect("a send in flight has a key"));
    the_wait_ends_with_the_send_alone(&mut t.ring);
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
    let mut t = armed();
    // A send on a socket its own side shut for writing fails (EPIPE).
    rustix::net::shutdown(&*t.a, rustix::net::Shutdown::Write).unwrap();
    t.ring.quietly(|r| r.send(&t.a, b"call".to_vec(), 0, SEND));
    let send = the_wait_ends_with_the_send_alone(&mut t.ring);
    assert!(send.result.is_err());
}
