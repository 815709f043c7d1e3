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
    assert!(c.busy.get(&7).is_none(), "file 7 has nothing under way");
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
