//! [`Calls`]: which call goes when, on which connection (no ring, no sockets).
use super::*;
use ringshare_core::cluster::{ClusterLink, Home};

/// A link nothing is carried on (the calls here only carry bytes).
struct NoLink;

impl ClusterLink for NoLink {
    fn node(&self) -> u16 {
        1
    }
    fn partitions(&self) -> u32 {
        1
    }
    fn home(&self, _: u32) -> Home {
        Home::Here
    }
    fn members(&self) -> Vec<u16> {
        vec![1, 2, 3]
    }
    fn call(&self, _: u16, _: Vec<u8>) -> Result<Vec<u8>, NtStatus> {
        Err(NtStatus::INTERNAL_ERROR)
    }
    fn post(&self, _: u16, _: Vec<u8>) {}
}

/// Request `id` of connection 1: one call to `node` about the file of order `order`, asked at
/// `at` ms.
fn call(id: u64, node: u16, order: u64, at: u64) -> Waiting {
    Waiting {
        slot: 1,
        gen: 1,
        req: LookupRequest {
            id,
            ask: Lookup::Home(HomeAsk::wire(
                Arc::new(NoLink),
                node,
                order,
                id.to_le_bytes().to_vec(),
            )),
        },
        asked_ms: at,
    }
}

/// What the acts are, as (kind, request id or node, connection).
fn seen(out: &mut Vec<Act>) -> Vec<(&'static str, u64, u32)> {
    out.drain(..)
        .map(|a| match a {
            Act::Send(c, w) => ("send", w.req.id, c),
            Act::Dial(n) => ("dial", u64::from(n), 0),
            Act::Thread(w) => ("thread", w.req.id, 0),
            Act::Fail(w) => ("fail", w.req.id, 0),
        })
        .collect()
}

/// The LOCK, UNLOCK and CLOSE of one file, asked by one ring, reach its home one at a time in
/// the order asked; a call about another file goes meanwhile.
#[test]
fn calls_about_one_file_from_one_ring_go_one_at_a_time_in_the_order_asked() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    c.ask(call(1, 2, 7, 0), &mut out);
    assert_eq!(seen(&mut out), [("dial", 2, 0)]);
    c.dialed(2, Some(100), &mut out);
    assert_eq!(seen(&mut out), [("send", 1, 100)]);
    c.ask(call(2, 2, 7, 0), &mut out);
    c.ask(call(3, 2, 7, 0), &mut out);
    assert_eq!(seen(&mut out), [], "behind the call about file 7");
    c.ask(call(4, 2, 8, 0), &mut out);
    assert_eq!(
        seen(&mut out),
        [("dial", 2, 0)],
        "file 8's call wants a connection"
    );
    c.dialed(2, Some(101), &mut out);
    assert_eq!(seen(&mut out), [("send", 4, 101)]);
    c.conn_done(2, 100, true, &mut out);
    c.release(7, None, &mut out);
    assert_eq!(
        seen(&mut out),
        [("send", 2, 100)],
        "the second about file 7, next"
    );
    c.conn_done(2, 100, true, &mut out);
    c.release(7, None, &mut out);
    assert_eq!(seen(&mut out), [("send", 3, 100)]);
    c.conn_done(2, 100, true, &mut out);
    c.release(7, None, &mut out);
    assert_eq!(seen(&mut out), []);
    assert!(!c.busy.contains_key(&7), "file 7 has nothing under way");
}

/// Issue 33: a stopped node holds only its own K connections; calls to it wait for them, and
/// a call to another node goes at once on a connection of its own.
#[test]
fn a_stopped_node_holds_only_its_connections_and_a_call_to_another_node_goes_at_once() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    for id in 1..=10 {
        c.ask(call(id, 3, 100 + id, 0), &mut out);
    }
    assert_eq!(seen(&mut out), [("dial", 3, 0)], "one dial at a time");
    c.dialed(3, Some(1), &mut out);
    assert_eq!(seen(&mut out), [("send", 1, 1), ("dial", 3, 0)]);
    c.dialed(3, Some(2), &mut out);
    assert_eq!(
        seen(&mut out),
        [("send", 2, 2)],
        "K = 2: no more dials to node 3"
    );
    c.ask(call(11, 2, 500, 0), &mut out);
    assert_eq!(seen(&mut out), [("dial", 2, 0)]);
    c.dialed(2, Some(3), &mut out);
    assert_eq!(
        seen(&mut out),
        [("send", 11, 3)],
        "node 2's call goes at once"
    );
    // Node 3's first call times out: its connection goes, a new one is dialed.
    c.conn_done(3, 1, false, &mut out);
    c.release(101, None, &mut out);
    assert_eq!(seen(&mut out), [("dial", 3, 0)]);
}

/// Issue 33: a call that finds no connection to its node within 2 s of being asked fails
/// (FILE_NOT_AVAILABLE, "try again") and is never sent; the next call about its file goes.
#[test]
fn a_call_not_sent_within_two_seconds_fails_and_is_never_sent() {
    let mut c = Calls::new(1, 1);
    let mut out = Vec::new();
    c.ask(call(1, 3, 5, 1000), &mut out);
    c.dialed(3, Some(1), &mut out);
    c.ask(call(2, 3, 6, 1500), &mut out);
    c.ask(call(3, 3, 5, 1600), &mut out);
    assert_eq!(seen(&mut out), [("dial", 3, 0), ("send", 1, 1)]);
    assert_eq!(c.deadline(), Some(3500), "the queued call's 2 s");
    c.expire(3499, &mut out);
    assert_eq!(seen(&mut out), []);
    c.expire(3500, &mut out);
    assert_eq!(seen(&mut out), [("fail", 2, 0)], "never sent");
    assert_eq!(c.deadline(), None);
    // The connection is back: file 5's second call goes; nothing of call 2 remains.
    c.conn_done(3, 1, true, &mut out);
    c.release(5, None, &mut out);
    assert_eq!(seen(&mut out), [("send", 3, 1)]);
    // No connection can be had at all: the calls waiting for one fail at once.
    let mut d = Calls::new(1, 2);
    d.ask(call(9, 4, 9, 0), &mut out);
    d.dialed(4, None, &mut out);
    assert_eq!(seen(&mut out), [("dial", 4, 0), ("fail", 9, 0)]);
}

/// A call that follows another (a withdrawn CREATE's CLOSE) goes before the next call about
/// its file asked meanwhile.
#[test]
fn a_follow_up_post_goes_before_the_next_call_about_its_file() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    c.ask(call(1, 2, 7, 0), &mut out);
    c.dialed(2, Some(1), &mut out);
    c.ask(call(2, 2, 7, 0), &mut out);
    assert_eq!(seen(&mut out), [("dial", 2, 0), ("send", 1, 1)]);
    c.conn_done(2, 1, true, &mut out);
    c.release(7, Some(call(50, 2, 7, 0)), &mut out);
    assert_eq!(seen(&mut out), [("send", 50, 1)], "the follow-up first");
    c.conn_done(2, 1, true, &mut out);
    c.release(7, None, &mut out);
    assert_eq!(seen(&mut out), [("send", 2, 1)]);
}

/// A job (a decision at this node's home that calls others) goes to the threads, in its file's
/// order with the ring's calls.
#[test]
fn a_job_goes_to_the_threads_in_its_files_order() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    let mut job = call(1, 1, 7, 0);
    job.req.ask = Lookup::Home(HomeAsk::job(1, 7, Box::new(|| Ok(Vec::new()))));
    c.ask(job, &mut out);
    c.ask(call(2, 2, 7, 0), &mut out);
    assert_eq!(seen(&mut out), [("thread", 1, 0)]);
    c.release(7, None, &mut out);
    assert_eq!(seen(&mut out), [("dial", 2, 0)]);
}

// ---- on a real ring, to real nodes on the loopback ----

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Mutex;
use std::time::Instant;

use crate::cluster::peer::tests::node2;
use crate::cluster::peer::{Identity, Stats};

const SECRET: &[u8] = b"the cluster secret";

/// A worker of node 1 (speaking `level`) whose calls to node 2 at `to` go on its ring.
fn worker(level: u16, to: SocketAddr, advertised: u16) -> (Worker, Arc<Peers>) {
    let me = Identity {
        node: 1,
        secret: Arc::from(SECRET),
        level,
    };
    let peers = Peers::new(
        me,
        Box::new(move |n| (n == 2).then_some((to, advertised))),
        Arc::new(Stats::default()),
    );
    let cfg = crate::config::parse_str("[global]\n", std::path::Path::new("/nonexistent"))
        .expect("config");
    let sc = crate::serve::server_config(&cfg, [0; 16], 0).expect("server config");
    let server = ringshare_core::ServerState::with_accounts(
        sc,
        Arc::new(ringshare_auth::smbpasswd::SmbPasswd::parse("").expect("users")),
        Arc::new(ringshare_core::ProcessAccounts),
    );
    let shared = Arc::new(super::super::Shared {
        server,
        listen: Vec::new(),
        max_connections: 0,
        connections: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        wakers: Mutex::new(Vec::new()),
        started: Instant::now(),
        send_file: false,
        multishot_receive: false,
        zerocopy_send: crate::config::ZerocopySend::No,
        splice_chunk: 1 << 20,
        ring_metrics: None,
        send_stall_ms: 60_000,
        inotify: None,
        lookups: super::super::LookupPool::start(),
        quic: None,
        peers: Some(Arc::clone(&peers)),
        home_calls_per_peer: 2,
    });
    let w = super::super::new_worker(0, shared, Some(Vec::new())).expect("worker");
    (w, peers)
}

/// Ask `message` of node 2 on `w`'s ring (nobody's request: its answer is what runs on it)
/// and turn the loop until it is in; the answer and how long it took.
fn ring_call(w: &mut Worker, message: &[u8]) -> (HomeResult, Duration) {
    let got: Arc<Mutex<Option<HomeResult>>> = Arc::default();
    let into = Arc::clone(&got);
    // NoLink: a call carried by a thread instead would be INTERNAL_ERROR.
    let ask = HomeAsk::wire(Arc::new(NoLink), 2, 7, message.to_vec()).then(Box::new(
        move |a: &HomeResult| {
            *crate::lock(&into) = Some(a.clone());
        },
    ));
    let t = Instant::now();
    w.ask_lookup(
        LookupRequest {
            id: 1,
            ask: Lookup::Home(ask),
        },
        u32::MAX,
        0,
    );
    while t.elapsed() < Duration::from_secs(10) {
        if let Some(a) = crate::lock(&got).take() {
            return (a, t.elapsed());
        }
        w.turn().expect("turn");
    }
    panic!("no answer in 10 s");
}

/// Issue 33 item 2: a call made on the ring is sealed, sent and answered in the session of a
/// connection the ring dialed, to a node of either level; the next call reuses it.
#[test]
fn a_call_made_on_the_ring_gets_the_answer_of_a_node_of_either_level() {
    for (i, a) in [(4, 4), (4, 1), (1, 4)] {
        let (addr, asked, _) = node2(a, false);
        let (mut w, _peers) = worker(i, addr, a);
        let (r, _) = ring_call(&mut w, b"one");
        assert_eq!(r, Ok(b"did one".to_vec()), "{i} to {a}");
        let (r, _) = ring_call(&mut w, b"two");
        assert_eq!(r, Ok(b"did two".to_vec()), "{i} to {a}");
        assert_eq!(*crate::lock(&asked), [b"one".to_vec(), b"two".to_vec()]);
        let h = w.home.as_ref().expect("ring calls");
        assert_eq!(h.links.len(), 1, "one connection, kept");
    }
}

/// Issue 33: a ring call whose 2 s went (the kernel's timeout) is FILE_NOT_AVAILABLE; its
/// connection is half-closed (node 2, once it decided, sees the caller went) and read on for
/// the late answer, which reaches the late handler once; the next call goes on a new
/// connection, answered in time, and reaches nobody's late handler.
#[test]
fn a_ring_call_answered_late_is_handed_to_the_late_handler_once() {
    let (addr, asked, looked_at) = node2(4, false);
    let (mut w, peers) = worker(4, addr, 4);
    let (tx, rx) = std::sync::mpsc::channel();
    peers.on_late(Arc::new(move |node, call: &[u8], answer: &[u8]| {
        let _ = tx.send((node, call.to_vec(), answer.to_vec()));
    }));
    let (r, took) = ring_call(&mut w, b"slow");
    assert_eq!(r, Err(NtStatus::FILE_NOT_AVAILABLE));
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(2400),
        "the call's 2 s: {took:?}"
    );
    let (node, call, answer) = rx.recv_timeout(Duration::from_secs(5)).expect("late");
    assert_eq!(
        (node, &call[..], &answer[..]),
        (2, &b"slow"[..], &b"did slow"[..])
    );
    assert_eq!(
        crate::lock(&looked_at)
            .iter()
            .map(|(c, _)| c.clone())
            .collect::<Vec<_>>(),
        [b"slow".to_vec()],
        "node 2 saw the caller went (the half-close)"
    );
    let (r, _) = ring_call(&mut w, b"fast");
    assert_eq!(r, Ok(b"did fast".to_vec()));
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "in time: not late"
    );
    assert_eq!(*crate::lock(&asked), [b"slow".to_vec(), b"fast".to_vec()]);
}

/// The same, where node 2 has something to undo itself: it undoes it and sends no answer; the
/// caller's late handler gets nothing (one side only undoes a call).
#[test]
fn a_ring_call_whose_callee_undoes_it_reaches_no_late_handler() {
    let (addr, _, undone) = node2(4, true);
    let (mut w, peers) = worker(4, addr, 4);
    let (tx, rx) = std::sync::mpsc::channel();
    peers.on_late(Arc::new(move |_, call: &[u8], _: &[u8]| {
        let _ = tx.send(call.to_vec());
    }));
    let (r, _) = ring_call(&mut w, b"slow");
    assert_eq!(r, Err(NtStatus::FILE_NOT_AVAILABLE));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        *crate::lock(&undone),
        [(b"slow".to_vec(), b"did slow".to_vec())],
        "undone at node 2"
    );
    assert!(rx.try_recv().is_err(), "no answer reached the caller");
}
