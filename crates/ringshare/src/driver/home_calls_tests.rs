//! [`Calls`]: which call goes when, on which connection (no ring, no sockets).
use super::*;
use ringshare_core::cluster::{ClusterLink, Home};
use std::time::Duration;

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
        req: Box::new(LookupRequest {
            id,
            ask: Lookup::Home(HomeAsk::wire(
                Arc::new(NoLink),
                node,
                order,
                id.to_le_bytes().to_vec(),
            )),
        }),
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
            Act::Fail(w, _) => ("fail", w.req.id, 0),
        })
        .collect()
}

/// Calls put back because their connections were found closed (their node stopped or
/// restarted) keep their places by when they were asked: the earlier one still fails 2 s after
/// it was asked, not held back behind the later one put back after it.
#[test]
fn calls_put_back_after_closed_connections_fail_two_seconds_after_they_were_asked() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    c.ask(call(1, 2, 7, 0), &mut out);
    c.dialed(2, Ok(100), &mut out);
    c.ask(call(2, 2, 8, 1_000), &mut out);
    c.dialed(2, Ok(101), &mut out);
    let sent: Vec<Waiting> = out
        .drain(..)
        .filter_map(|a| match a {
            Act::Send(_, w) => Some(w),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 2, "each on its connection");
    for w in sent {
        c.resend_elsewhere(2, w, &mut out);
    }
    assert_eq!(seen(&mut out), [("dial", 2, 0)], "a new connection wanted");
    c.expire(2_000, &mut out);
    assert_eq!(
        seen(&mut out),
        [("fail", 1, 0)],
        "the first, 2 s after it was asked"
    );
    c.expire(3_000, &mut out);
    assert_eq!(seen(&mut out), [("fail", 2, 0)]);
}

/// The LOCK, UNLOCK and CLOSE of one file, asked by one ring, reach its home one at a time in
/// the order asked; a call about another file goes meanwhile.
#[test]
fn calls_about_one_file_from_one_ring_go_one_at_a_time_in_the_order_asked() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    c.ask(call(1, 2, 7, 0), &mut out);
    assert_eq!(seen(&mut out), [("dial", 2, 0)]);
    c.dialed(2, Ok(100), &mut out);
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
    c.dialed(2, Ok(101), &mut out);
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
    c.dialed(3, Ok(1), &mut out);
    assert_eq!(seen(&mut out), [("send", 1, 1), ("dial", 3, 0)]);
    c.dialed(3, Ok(2), &mut out);
    assert_eq!(
        seen(&mut out),
        [("send", 2, 2)],
        "K = 2: no more dials to node 3"
    );
    c.ask(call(11, 2, 500, 0), &mut out);
    assert_eq!(seen(&mut out), [("dial", 2, 0)]);
    c.dialed(2, Ok(3), &mut out);
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
    c.dialed(3, Ok(1), &mut out);
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
    d.dialed(4, Err("refused".into()), &mut out);
    assert_eq!(seen(&mut out), [("dial", 4, 0), ("fail", 9, 0)]);
}

/// A call that follows another (a withdrawn CREATE's CLOSE) goes before the next call about
/// its file asked meanwhile.
#[test]
fn a_follow_up_post_goes_before_the_next_call_about_its_file() {
    let mut c = Calls::new(1, 2);
    let mut out = Vec::new();
    c.ask(call(1, 2, 7, 0), &mut out);
    c.dialed(2, Ok(1), &mut out);
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

/// The reasons of the calls that failed unsent, as (request id, reason).
fn failed(out: &mut Vec<Act>) -> Vec<(u64, Unsent)> {
    out.drain(..)
        .filter_map(|a| match a {
            Act::Fail(w, why) => Some((w.req.id, why)),
            _ => None,
        })
        .collect()
}

/// A call that fails unsent says why: no connection to its node could be opened (with the
/// dial's error), its node's queue was full, or it was not sent within 2 s.
#[test]
fn a_call_that_fails_unsent_says_why() {
    let mut out = Vec::new();
    let mut c = Calls::new(1, 2);
    c.ask(call(1, 3, 5, 0), &mut out);
    c.dialed(3, Err("Connection refused (os error 111)".into()), &mut out);
    assert_eq!(
        failed(&mut out),
        [(
            1,
            Unsent::NoConnection("Connection refused (os error 111)".into())
        )]
    );
    let mut c = Calls::new(1, 2);
    let changed = |c: &mut Calls| c.crowding_changed().collect::<Vec<(u16, bool)>>();
    for id in 1..=QUEUED_MAX as u64 - 1 {
        c.ask(call(id, 3, id, 0), &mut out);
    }
    assert!(changed(&mut c).is_empty(), "room for one more");
    for id in QUEUED_MAX as u64..=QUEUED_MAX as u64 + 1 {
        c.ask(call(id, 3, id, 0), &mut out);
    }
    assert_eq!(
        failed(&mut out),
        [(QUEUED_MAX as u64 + 1, Unsent::Crowded)],
        "the one past the queue's bound, at once"
    );
    assert_eq!(
        changed(&mut c),
        [(3, true)],
        "opens of node 3's files are refused before they ask"
    );
    assert!(
        changed(&mut c).is_empty(),
        "said once, not with every call's work"
    );
    c.expire(2000, &mut out);
    let late = failed(&mut out);
    assert_eq!(late.len(), QUEUED_MAX, "the queued ones, at their 2 s");
    assert!(late.iter().all(|(_, why)| *why == Unsent::Late), "{late:?}");
    assert_eq!(changed(&mut c), [(3, false)], "room again once they failed");
    assert!(changed(&mut c).is_empty(), "said once");
    // A dial's timeouts say which step's (not the kernel's "Resource temporarily unavailable").
    let timed_out = |k: std::io::ErrorKind| dial_error(&std::io::Error::from(k));
    assert_eq!(
        timed_out(std::io::ErrorKind::WouldBlock),
        "no answer to the handshake within 2 s"
    );
    assert_eq!(
        timed_out(std::io::ErrorKind::TimedOut),
        "no answer to the connect within 1 s"
    );
    let lines: Vec<String> = [
        Unsent::NoConnection("Connection refused (os error 111)".into()),
        Unsent::Crowded,
        Unsent::Late,
    ]
    .iter()
    .map(|why| why.reason(3))
    .collect();
    assert_eq!(
        lines,
        [
            "could not connect to node 3: Connection refused (os error 111)",
            "4096 calls already wait for node 3",
            "not sent within 2 s"
        ]
    );
}

/// A call that finds its node's queue full fails at once, and the calls about its file asked
/// after it are not held behind it: they go (or fail) in turn.
#[test]
fn a_call_refused_by_a_full_queue_does_not_hold_its_files_order() {
    let mut c = Calls::new(1, 1);
    let mut out = Vec::new();
    for id in 1..=QUEUED_MAX as u64 {
        c.ask(call(id, 3, id, 0), &mut out);
    }
    out.clear();
    let file = 1 << 40;
    c.ask(call(10_001, 3, file, 0), &mut out);
    assert_eq!(failed(&mut out), [(10_001, Unsent::Crowded)]);
    c.ask(call(10_002, 3, file, 0), &mut out);
    assert_eq!(
        failed(&mut out),
        [(10_002, Unsent::Crowded)],
        "asked again, it is decided at once, not held behind the first"
    );
    assert!(
        !c.busy.contains_key(&file),
        "nothing about the file is under way"
    );
}

/// Calls that waited behind their file's order for 2 s fail in the turn the one before them
/// does, not one a turn.
#[test]
fn calls_behind_their_files_order_for_two_seconds_fail_in_one_turn() {
    let mut c = Calls::new(1, 1);
    let mut out = Vec::new();
    for id in 1..=100 {
        c.ask(call(id, 3, 7, id), &mut out);
    }
    assert_eq!(seen(&mut out), [("dial", 3, 0)], "one at a time: the first");
    c.expire(2100, &mut out);
    let late = failed(&mut out);
    assert_eq!(late.len(), 100, "all of them in one turn: {late:?}");
    assert_eq!(c.deadline(), None);
    assert!(!c.busy.contains_key(&7));
}

/// Issue 33: thousands of calls failing for one node and reason make one log line at once and
/// one with their count when its second ends; another node or reason has lines of its own.
#[test]
fn failures_in_a_burst_are_one_line_per_node_and_reason_a_second_with_their_count() {
    let mut log = FailLog::default();
    let mut lines = Vec::new();
    for i in 0..5000 {
        log.failed(2, Unsent::Late, 1000 + i / 10, &mut lines);
    }
    log.failed(2, Unsent::Crowded, 1200, &mut lines);
    log.failed(3, Unsent::Late, 1300, &mut lines);
    assert_eq!(
        lines,
        [
            "cluster: a call to node 2 failed unsent: not sent within 2 s",
            "cluster: a call to node 2 failed unsent: 4096 calls already wait for node 2",
            "cluster: a call to node 3 failed unsent: not sent within 2 s",
        ]
    );
    lines.clear();
    assert_eq!(
        log.deadline(),
        Some(2000),
        "node 2's count, at the second's end"
    );
    log.due(1999, &mut lines);
    assert_eq!(lines, Vec::<String>::new());
    log.due(2000, &mut lines);
    assert_eq!(
        lines,
        ["cluster: 4999 more calls to node 2 failed unsent in 1.0 s: not sent within 2 s"]
    );
    lines.clear();
    assert_eq!(log.deadline(), None, "nothing else was counted");
    // A failure in a second that saw none is said at once again; one after its second ended,
    // with the count of that second first.
    log.failed(2, Unsent::Late, 2500, &mut lines);
    log.failed(2, Unsent::Late, 2600, &mut lines);
    log.failed(2, Unsent::Late, 3600, &mut lines);
    assert_eq!(
        lines,
        [
            "cluster: a call to node 2 failed unsent: not sent within 2 s",
            "cluster: 1 more call to node 2 failed unsent in 1.1 s: not sent within 2 s",
            "cluster: a call to node 2 failed unsent: not sent within 2 s",
        ]
    );
}

// ---- on a real ring, to real nodes on the loopback ----

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Mutex;
use std::time::Instant;

use crate::cluster::peer::tests::{node2, wait_for_undo, SLOW_ANSWER};
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
        keep_cpus: false,
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
        Box::new(LookupRequest {
            id: 1,
            ask: Lookup::Home(ask),
        }),
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

/// Issue 33: a node that stopped, or restarted on the same address, since the ring's
/// connection to it went idle: the next call goes on a new connection and is answered (before,
/// it failed on the old one: "the node closed the connection", FILE_NOT_AVAILABLE).
#[test]
fn a_ring_call_after_the_node_restarted_goes_on_a_new_connection_and_is_answered() {
    let (addr, gone) = crate::cluster::peer::tests::node2_closing_its_first_connection();
    let (mut w, _peers) = worker(2, addr, 2);
    let (r, _) = ring_call(&mut w, b"abc");
    assert_eq!(r, Ok(b"cba".to_vec()));
    assert_eq!(gone.recv().expect("closed"), 0);
    std::thread::sleep(Duration::from_millis(IDLE_LOOK_MS + 50));
    // The loop's clock, as a turn that woke now would have it.
    w.clock = super::super::now(w.shared.started);
    let (r, _) = ring_call(&mut w, b"xyz");
    assert_eq!(r, Ok(b"zyx".to_vec()), "the call after the restart");
    let h = w.home.as_ref().expect("ring calls");
    assert_eq!(
        h.links.len(),
        1,
        "the closed connection dropped, the new one kept"
    );
}

/// Issue 33: a ring call whose 2 s went (its deadline: the worker's timers cancel its RECV)
/// is FILE_NOT_AVAILABLE; its connection is half-closed (node 2, once it decided, sees the
/// caller went) and read on for the late answer, which reaches the late handler once; the
/// next call goes on a new connection, answered in time, and reaches nobody's late handler.
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
        took >= Duration::from_millis(1900) && took < SLOW_ANSWER - Duration::from_millis(300),
        "the call's 2 s, not the answer's 3.5 s: {took:?}"
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
    wait_for_undo(&undone);
    assert_eq!(
        *crate::lock(&undone),
        [(b"slow".to_vec(), b"did slow".to_vec())],
        "undone at node 2"
    );
    assert!(rx.try_recv().is_err(), "no answer reached the caller");
}

/// Opens refused before they asked, because their node's queue was full, are counted in the
/// log as the calls that found it full are: the first said at once, the rest in the count.
#[test]
fn opens_refused_before_they_asked_are_counted_with_the_calls_that_found_the_queue_full() {
    let mut log = FailLog::default();
    let mut lines = Vec::new();
    log.failed(2, Unsent::Crowded, 1000, &mut lines);
    log.failed_many(2, Unsent::Crowded, 0, 1100, &mut lines);
    log.failed_many(2, Unsent::Crowded, 300, 1200, &mut lines);
    assert_eq!(
        lines,
        ["cluster: a call to node 2 failed unsent: 4096 calls already wait for node 2"]
    );
    lines.clear();
    log.due(2000, &mut lines);
    assert_eq!(
        lines,
        ["cluster: 300 more calls to node 2 failed unsent in 1.0 s: 4096 calls already wait for node 2"]
    );
    lines.clear();
    log.failed_many(3, Unsent::Crowded, 5, 2100, &mut lines);
    log.due(3100, &mut lines);
    assert_eq!(
        lines,
        [
            "cluster: a call to node 3 failed unsent: 4096 calls already wait for node 3",
            "cluster: 4 more calls to node 3 failed unsent in 1.0 s: 4096 calls already wait for node 3",
        ]
    );
}

/// A loopback pair whose sender has a small send buffer (64 KiB): (sender, reader).
fn small_buffer_pair() -> (SharedFd, TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let reader = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (sender, _) = listener.accept().unwrap();
    rustix::net::sockopt::set_socket_send_buffer_size(&sender, 65536).unwrap();
    (Arc::new(OwnedFd::from(sender)), reader)
}

#[test]
fn a_call_the_socket_takes_whole_needs_no_send_on_the_ring() {
    let (fd, mut reader) = small_buffer_pair();
    let frame: Vec<u8> = (0..200u8).collect();
    assert_eq!(send_now(&fd, &[IoSlice::new(&frame)]), frame.len());
    let mut got = vec![0u8; frame.len()];
    std::io::Read::read_exact(&mut reader, &mut got).unwrap();
    assert_eq!(got, frame);
}

#[test]
fn a_call_the_socket_cannot_take_whole_goes_on_from_where_it_stopped_on_the_ring() {
    use ringshare_engine::{Ring, RingConfig};
    let (fd, mut reader) = small_buffer_pair();
    // Far more than both buffers hold, while nobody reads: the socket takes a part.
    let frame: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    let sent = send_now(&fd, &[IoSlice::new(&frame)]);
    assert!(
        sent < frame.len(),
        "the socket took all of {} bytes",
        frame.len()
    );
    let mut ring = Ring::new(RingConfig::default()).expect("io_uring available");
    ring.send(&fd, frame.clone(), sent, 7);
    let read = std::thread::spawn(move || {
        let mut got = vec![0u8; 4_000_000];
        std::io::Read::read_exact(&mut reader, &mut got).map(|()| got)
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let done = loop {
        ring.submit_and_wait(1, Some(Duration::from_millis(100)))
            .unwrap();
        if let Some(c) = std::iter::from_fn(|| ring.next_completion()).find(|c| c.user_data == 7) {
            break c;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ring's send never ended"
        );
    };
    assert_eq!(done.result.unwrap(), frame.len() - sent);
    assert_eq!(
        read.join().unwrap().unwrap(),
        frame,
        "bytes lost or out of order"
    );
}
