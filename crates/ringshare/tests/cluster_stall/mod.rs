//! No I/O thread waits on etcd or on a peer (issue 33, item 2): while one etcd member (the
//! leader, the worst case) and then one peer node are stopped (SIGSTOP), 8 clients of node 1
//! opening, writing, reading and closing files homed on node 1 are answered as fast as before
//! (p99 printed before and during each stall). Two more clients of node 1 keep making
//! persistent opens meanwhile: each needs its record in etcd before its CREATE is answered,
//! so theirs wait for etcd's election (printed, not bounded), and on the old code the I/O
//! thread waited with them, stalling everyone (measured on main before the change: the
//! figures in docs/cluster-internals.md, "No I/O thread waits on the network"). Four more
//! clients of
//! node 1 work on a file homed on node 2 while node 2 is stopped: one closes the open of it
//! that it held, one opens it again and again, one locks and unlocks bytes of its open of it
//! again and again, one writes and reads other bytes of its open of it again and again (a lock
//! of another node's client on the file leaves node 1 no grant to decide them); and one more
//! sets and clears the delete pending of a file of its own homed there, one more asks
//! FileStandardInformation of its open of another such file, one more renames a third there
//! and back again and again, and one more acknowledges a lease
//! break of a third (the break came before the stop), each request waiting for node 2 (at most
//! 2 s); the other clients' requests do not wait with them. A fifth holds a persistent open of
//! that file, sends its CLOSE and goes while the CLOSE waits: the open's record leaves etcd all
//! the same. A sixth holds a persistent open of a file of its own homed on node 2 whose delete
//! it set pending, and goes: node 1's look at that delete pending waits for node 2, not its I/O
//! thread, and the open is not kept (its record leaves etcd). Ten more
//! open files of their own homed on node 2 meanwhile, more calls to it than the driver carries
//! to one node at once, while one more client of node 1 opens, writes, reads and closes a file
//! homed on node 3: its calls to node 3 are answered as fast as before (a stopped node holds
//! only its share of the threads that carry calls to files' homes). And one more client of
//! node 1 waits in a blocking LOCK of bytes of that file held by a client of node 3
//! throughout: its retries, every 10 ms, ask node 2 (each up to 2 s while it is stopped), and
//! it is granted once the holder unlocks, after the stall. And one more client of node 1
//! holding persistent opens of files of its own homed on node 1 disconnects their tree once
//! etcd's leader stops: the removal of their records waits for etcd, not its I/O thread, and
//! the records leave etcd afterwards. And one more client of node 1 waits in a CREATE of a
//! file of its own homed on node 2 for the break of a lease a client of node 3 holds on it,
//! acknowledged only after the stall: the CREATE is run again every second, and when its
//! client closes another file as node 2 stops; each run asks node 2 whether it may open now
//! (up to 2 s while it is stopped). And two more clients of node 1 open (for writing) and lock
//! files homed on node 1 whose I/O grants a client of node 2 holds, once node 2 stops: each
//! request must first take node 2's grant back, which a home-call thread tries (up to 2 s; the
//! request then gets FILE_NOT_AVAILABLE), not their I/O thread.
//! And one more client of node 1 reconnects (DH2C) a durable
//! open another client of node 1 left of a file homed on node 2, once node 2 stops: node 1
//! tells the home the open's new connection before it answers (up to 2 s).
//! Last, the etcd leader and node 2 stop together (issue 33: "one etcd member and one peer
//! node"; both go on after 2 s) while every client above keeps
//! working: the same bounds hold, and no request of
//! a file node 1 or node 3 decides takes as long as a wait for a stopped party would.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread;

use super::*;

mod flood;

/// Clients whose latency is measured.
const CLIENTS: usize = 8;
/// Clients making persistent opens (their CREATEs wait for etcd).
const PERSISTENT_CLIENTS: usize = 2;
/// Clients opening files of their own homed on node 2 while it is stopped.
const CROWD: usize = 10;

/// When each CREATE+WRITE+READ+CLOSE of the measured clients started and how long it took.
type Samples = Arc<Mutex<Vec<(Instant, Duration)>>>;

/// `count` files (made now) homed on node `n` (by one read of the partitions' owners: the
/// flood test wants thousands).
fn files_homed_on(cl: &Cluster, n: u16, tag: &str, count: usize) -> Vec<String> {
    let mut found = Vec::new();
    let owners = cl.owners();
    for i in 0..(count * 10).max(4000) {
        let name = format!("{tag}-{i}.txt");
        std::fs::write(cl.share.join(&name), b"").unwrap();
        if cl.home_by(&owners, &name) == n {
            found.push(name);
            if found.len() == count {
                break;
            }
        }
    }
    assert_eq!(found.len(), count, "files homed on node {n}");
    if let Ok(Some(a)) = nix::unistd::User::from_name(USER_A.0) {
        chown_tree(&cl.share, a.uid.as_raw());
    }
    found
}

/// Clusters of tests run side by side share the two CPUs. The stall test's bounds are about
/// its own cluster's waits, and under another cluster's load etcd's election after a stopped
/// leader can outlast the nodes' leases (every node fenced: seen in 2 of 6 runs of the whole
/// suite): it runs alone, holding this for writing, while every other cluster holds it for
/// reading.
static SIDE_BY_SIDE: RwLock<()> = RwLock::new(());

thread_local! {
    /// This thread's test holds [`SIDE_BY_SIDE`] for writing: its clusters take no turn.
    static ALONE: Cell<bool> = const { Cell::new(false) };
}

/// A cluster's turn beside the others'.
pub(crate) enum Turn {
    Beside(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone,
}

impl Turn {
    /// The turn of a cluster started on this thread: beside the others, unless its test
    /// runs [`Turn::alone`].
    pub(crate) fn take() -> Turn {
        if ALONE.with(Cell::get) {
            return Turn::Alone;
        }
        Turn::Beside(SIDE_BY_SIDE.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Run this test's clusters with no other test's beside them.
    fn alone() -> AloneGuard {
        let g = SIDE_BY_SIDE.write().unwrap_or_else(|e| e.into_inner());
        ALONE.with(|a| a.set(true));
        AloneGuard(g)
    }
}

struct AloneGuard(#[allow(dead_code)] RwLockWriteGuard<'static, ()>);

impl Drop for AloneGuard {
    fn drop(&mut self) {
        ALONE.with(|a| a.set(false));
    }
}

/// A measured client: CREATE+WRITE+READ+CLOSE of `file` until `stop`, every one succeeding.
fn measured(mut c: Raw, file: String, stop: Arc<AtomicBool>, samples: Samples) {
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let h = open(&mut c, &file, ALL, 7).unwrap_or_else(|s| panic!("{file}: {s:?}"));
        c.write(h, 0, b"local").expect("write");
        assert_eq!(c.read(h, 0, 5).expect("read"), b"local");
        c.close(h).expect("close");
        lock(&samples).push((t, t.elapsed()));
    }
}

/// A client making persistent opens of `file` (and closing them) until `stop`: the answers
/// it heard (SUCCESS, or FILE_NOT_AVAILABLE when etcd did not take the record in time) and
/// the longest CREATE.
fn persistent(mut c: Raw, file: String, first_guid: u8, stop: Arc<AtomicBool>) -> String {
    let (mut ok, mut refused, mut longest) = (0, 0, Duration::ZERO);
    let mut i = 0u8;
    while !stop.load(Ordering::Relaxed) {
        let guid = first_guid + i % 100;
        i = i.wrapping_add(1);
        let t = Instant::now();
        let made = opened(c.call(Command::CREATE, &durable_create_as(&file, guid, None, true)));
        longest = longest.max(t.elapsed());
        match made {
            Ok((h, _)) => {
                ok += 1;
                c.close(h).expect("close a persistent open");
            }
            Err(NtStatus::FILE_NOT_AVAILABLE) => refused += 1,
            Err(s) => panic!("a persistent open of {file}: {s:?}"),
        }
    }
    format!("{ok} made, {refused} FILE_NOT_AVAILABLE, longest CREATE {longest:?}")
}

/// What a client of node 1 does with a file homed on node 2 while node 2 is stopped.
#[derive(Clone, Copy)]
enum Remote {
    /// Closes the open of it it held (the CLOSE must succeed).
    Close(FileId),
    /// Opens it (and closes what it got) again and again.
    Open,
    /// Locks and unlocks bytes 0..10 of the open of it it holds, again and again.
    Lock(FileId),
    /// Sets and clears the delete pending of the open of it it holds, again and again.
    Dispose(FileId),
    /// Asks FileStandardInformation (its delete pending is the home's) of the open of it it
    /// holds, again and again.
    Query(FileId),
    /// WRITEs and READs bytes 20..25 of the open of it it holds, again and again, while
    /// another node's client holds a byte-range lock on it (no I/O grant decides them here).
    Io(FileId),
    /// Renames the open of it it holds to its name with "-b" and back, again and again (the
    /// file's home says whether a rename waits for breaks).
    Rename(FileId),
}

/// A FileRenameInformation buffer naming `to` (not replacing).
fn rename_to(to: &str) -> Vec<u8> {
    let name: Vec<u8> = to.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut b = vec![0u8; 20];
    b[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&name);
    b
}

/// A client of node 1 working on `file`, homed on node 2, once `stopped` is set (node 2
/// stopped), until `stop`. What it heard: how long the CLOSE took, or how many CREATEs or
/// LOCKs were answered SUCCESS or FILE_NOT_AVAILABLE (anything else fails the test) and the
/// longest.
fn homed_elsewhere(
    mut c: Raw,
    file: String,
    work: Remote,
    stopped: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> String {
    while !stopped.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    if let Remote::Close(h) = work {
        c.close(h)
            .expect("a CLOSE while the file's home is stopped succeeds");
        return format!("CLOSE answered in {:?}", t.elapsed());
    }
    let (mut ok, mut refused, mut longest) = (0, 0, Duration::ZERO);
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let done = match work {
            Remote::Lock(h) => match status(c.call(Command::LOCK, &lock_body(h, 0, 10, 0x12))) {
                NtStatus::SUCCESS => {
                    // An UNLOCK told FILE_NOT_AVAILABLE was not done here: the client unlocks
                    // again (a next LOCK of the range would conflict). Its call may still have
                    // reached the home and been made there once node 2 went on (a late answer,
                    // docs/cluster-internals.md: "the client retries and hears
                    // RANGE_NOT_LOCKED"): then the range is free, as asked.
                    let mut told_unavailable = false;
                    loop {
                        let unlocked = status(c.call(Command::LOCK, &lock_body(h, 0, 10, 4)));
                        match unlocked {
                            NtStatus::SUCCESS => break,
                            NtStatus::RANGE_NOT_LOCKED if told_unavailable => break,
                            NtStatus::FILE_NOT_AVAILABLE => told_unavailable = true,
                            s => panic!("an UNLOCK of {file}, homed on the stopped node 2: {s:?}"),
                        }
                    }
                    Ok(())
                }
                s => Err(s),
            },
            Remote::Dispose(h) => {
                let set = |c: &mut Raw, on: u8| {
                    let s = status(c.call(Command::SET_INFO, &set_info_body(h, 13, &[on])));
                    (s == NtStatus::SUCCESS).then_some(()).ok_or(s)
                };
                set(&mut c, 1).and_then(|()| set(&mut c, 0))
            }
            Remote::Query(h) => {
                let s = status(c.call(Command::QUERY_INFO, &query_info_body(h, 5)));
                (s == NtStatus::SUCCESS).then_some(()).ok_or(s)
            }
            Remote::Rename(h) => {
                let mv = |c: &mut Raw, to: &str| {
                    let s =
                        status(c.call(Command::SET_INFO, &set_info_body(h, 10, &rename_to(to))));
                    (s == NtStatus::SUCCESS).then_some(()).ok_or(s)
                };
                let moved = format!("{file}-b");
                mv(&mut c, &moved).and_then(|()| {
                    // A rename back told FILE_NOT_AVAILABLE was not done: asked again.
                    let mut back = mv(&mut c, &file);
                    while back == Err(NtStatus::FILE_NOT_AVAILABLE) {
                        back = mv(&mut c, &file);
                    }
                    assert_eq!(back, Ok(()), "{file} renamed back");
                    back
                })
            }
            Remote::Io(h) => {
                let s = |o: Outcome| o.status().unwrap_or(NtStatus::INTERNAL_ERROR);
                match c.write(h, 20, b"homed") {
                    Ok(_) => match c.read(h, 20, 5) {
                        Ok(d) if d == b"homed" => Ok(()),
                        Ok(d) => panic!("{file}: read {d:?} back"),
                        Err(o) => Err(s(o)),
                    },
                    Err(o) => Err(s(o)),
                }
            }
            _ => open(&mut c, &file, ALL, 7).map(|h| c.close(h).expect("close")),
        };
        longest = longest.max(t.elapsed());
        match done {
            Ok(()) => ok += 1,
            Err(NtStatus::FILE_NOT_AVAILABLE) => refused += 1,
            Err(s) => panic!("{file}, homed on the stopped node 2: {s:?}"),
        }
    }
    let what = match work {
        Remote::Lock(_) => "LOCKs",
        Remote::Dispose(_) => "delete pendings set and cleared",
        Remote::Query(_) => "QUERY_INFOs (FileStandardInformation)",
        Remote::Io(_) => "WRITE+READs",
        Remote::Rename(_) => "renames there and back",
        _ => "CREATEs",
    };
    format!("{what}: {ok} SUCCESS, {refused} FILE_NOT_AVAILABLE, longest {longest:?}")
}

/// A client of node 1 holding persistent open `held` of a file homed on node 2: once
/// `stopped` is set (node 2 stopped) it sends the CLOSE and goes (its connection ends while
/// the CLOSE waits for the file's home).
fn closes_and_goes(mut c: Raw, held: FileId, stopped: Arc<AtomicBool>) {
    while !stopped.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    let mut body = vec![24, 0, 0, 0, 0, 0, 0, 0];
    put_file_id(&mut body, held);
    let hdr = c.header(Command::CLOSE);
    c.send_frame(&Raw::message(&hdr, &body))
        .expect("send the CLOSE");
    thread::sleep(Duration::from_millis(300));
}

/// A client of node 1 holding persistent open `held` of a file homed on node 2, whose delete
/// it set pending: once `stopped` is set (node 2 stopped) its connection ends, and node 1 looks
/// at whether the open's file is delete-pending before it keeps the open for a reconnect (a
/// call to node 2, up to 2 s).
fn pends_and_goes(c: Raw, stopped: Arc<AtomicBool>) {
    while !stopped.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    drop(c);
}

/// A client of node 1 reconnecting (DH2C) durable open `left` (CreateGuid `guid`, of `file`,
/// homed on node 2) that another client of node 1 left there: once `stopped` is set (node 2
/// stopped) it reconnects, which tells the file's home the open's new connection (a call of up
/// to 2 s while node 2 is stopped), and closes it. What the CREATE answered, and how long it
/// took.
fn reconnects(
    mut c: Raw,
    (file, guid, left): (String, u8, FileId),
    stopped: Arc<AtomicBool>,
) -> (NtStatus, Duration) {
    while !stopped.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    let r = opened(c.call(Command::CREATE, &durable_create(&file, guid, Some(left))));
    let took = t.elapsed();
    match r {
        Ok((back, _)) => {
            assert_eq!(back, left, "the same open");
            c.close(back).expect("close it");
            (NtStatus::SUCCESS, took)
        }
        Err(s) => (s, took),
    }
}

/// Persistent opens a client of node 1 holds in its tree.
const TREE_PERSISTENT: usize = 4;

/// A client of node 1 holding persistent opens of files homed on node 1: once `stopped` is set
/// (etcd's leader stopped) it disconnects their tree, which closes them and removes their
/// records from etcd (before issue 33's change, on its I/O thread). How long the
/// TREE_DISCONNECT took.
fn disconnects_tree(mut c: Raw, stopped: Arc<AtomicBool>) -> Duration {
    while !stopped.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    let s = status(c.call(Command::TREE_DISCONNECT, &[4, 0, 0, 0]));
    assert_eq!(s, NtStatus::SUCCESS, "the TREE_DISCONNECT");
    t.elapsed()
}

/// A client of node 1 with [`TREE_PERSISTENT`] persistent opens of files homed on node 1, which
/// disconnects their tree once `stopped` is set ([`disconnects_tree`]): the opens' FileIds, and
/// the client's thread.
fn parts_once_etcd_stops(
    cl: &Cluster,
    stopped: Arc<AtomicBool>,
) -> (Vec<FileId>, thread::JoinHandle<Duration>) {
    let mut c = cl.client(1);
    let held = files_homed_on(cl, 1, "parted", TREE_PERSISTENT)
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let guid = 230 + i as u8;
            let made = opened(c.call(Command::CREATE, &durable_create_as(f, guid, None, true)));
            made.expect("a persistent open of a file homed on node 1").0
        })
        .collect();
    (held, thread::spawn(move || disconnects_tree(c, stopped)))
}

/// The etcd record of persistent open `id` is gone within 5 s.
fn record_goes(cl: &Cluster, name: &str, id: FileId) -> bool {
    let key = format!("/ringshare/{name}/ca/{:016x}", id.persistent);
    let mut e = cl.etcd.client();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if e.get(key.as_bytes(), Instant::now() + Duration::from_secs(2))
            .is_ok_and(|r| r.is_none())
        {
            return true;
        }
        thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The final answer to request `mid` on `c`, which went async (its interim read).
fn final_answer(c: &mut Raw, mid: u64) -> NtStatus {
    loop {
        let frame = read_frame(&mut c.sock)
            .expect("open")
            .expect("an answer within the read timeout");
        for (h, _) in split_responses(&frame) {
            if h.message_id == mid && h.status != NtStatus::PENDING {
                return h.status;
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The 99th percentile and the longest of the samples that started in `[from, to)`, and
/// their number (none: [`Duration::MAX`], which fails any bound after the figures are printed).
fn p99(samples: &Samples, from: Instant, to: Instant) -> (Duration, Duration, usize) {
    let mut d: Vec<Duration> = lock(samples)
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, d)| *d)
        .collect();
    if d.is_empty() {
        return (Duration::MAX, Duration::MAX, 0);
    }
    d.sort();
    let at = (d.len() * 99).div_ceil(100) - 1;
    (d[at], d[d.len() - 1], d.len())
}

/// Says on stderr when (UTC, as the nodes' logs have it) this test did `what`: the nodes' logs
/// (`RINGSHARE_CLUSTER_LOGS`) are read against it.
fn said(what: &str) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let s = t.as_secs() % 86_400;
    eprintln!(
        "[stall] {what} at {:02}:{:02}:{:02}.{:03} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60,
        t.subsec_millis()
    );
}

/// Stop the etcd leader (SIGSTOP) for [`ETCD_STOP`], then let it go on: the member, when it stopped and
/// went on, and how long etcd took no write meanwhile (the other members' election). A busy
/// machine may have moved the leadership between the question and the stop (no write waited
/// then): the next leader is stopped instead, up to three times. `stopped` is set at the first
/// stop. Process `with` (a node), if any, is stopped with the leader and let go on 2 s later
/// (less than its lease's margin, as when it is stopped alone).
fn stop_the_etcd_leader(
    cl: &Cluster,
    stopped_flag: &AtomicBool,
    with: Option<u32>,
) -> (usize, Instant, Instant, Duration) {
    for _ in 0..3 {
        let leader = cl.etcd.leader();
        let pid = cl.etcd.pid(leader).expect("the leader runs");
        let others: Vec<String> = (0..cl.etcd.urls.len())
            .filter(|i| *i != leader)
            .map(|i| cl.etcd.urls[i].clone())
            .collect();
        let mut probe =
            ringshare_cluster::etcd::Etcd::new(&others, Duration::from_secs(1)).unwrap();
        let stopped = Instant::now();
        stop_process(pid);
        if let Some(node) = with {
            stop_process(node);
        }
        said(&format!(
            "etcd member {leader} stopped (and node pid {with:?})"
        ));
        stopped_flag.store(true, Ordering::Relaxed);
        // The node goes on after 2 s, as when it is stopped alone: with the default lease a
        // node fences itself 5 s after its last renewal, which may have been 2 s before the
        // stop (renewals 4.0 s apart were seen with 3 s stops), and its fence is not what
        // this test is about ([`STALL_TTL`]).
        let node_goes_on = with.map(|node| {
            thread::spawn(move || {
                thread::sleep(Duration::from_secs(2).saturating_sub(stopped.elapsed()));
                continue_process(node);
            })
        });
        // The first write the others take after the stop.
        let stall = loop {
            let at = Instant::now() + ETCD_STOP;
            if probe.put(b"/probe", b"stopped", at).is_ok() || stopped.elapsed() > ETCD_STOP {
                break stopped.elapsed();
            }
            thread::sleep(Duration::from_millis(20));
        };
        thread::sleep(ETCD_STOP.saturating_sub(stopped.elapsed()));
        let resumed = Instant::now();
        continue_process(pid);
        if let Some(t) = node_goes_on {
            t.join().expect("the stopped node went on");
        }
        said(&format!(
            "etcd member {leader} went on after {stall:?} without a write"
        ));
        thread::sleep(Duration::from_millis(1_000));
        if stall >= Duration::from_millis(500) {
            return (leader, stopped, resumed, stall);
        }
        eprintln!("etcd member {leader} was no longer the leader when stopped ({stall:?}): again");
    }
    panic!("etcd's leader could not be stopped");
}

/// [`ca_cluster`] whose nodes keep their etcd leases [`STALL_TTL`] (`cluster lease ttl`).
fn stall_cluster(name: &str) -> Option<Cluster> {
    let more = format!(
        "\tcontinuous availability = yes\n\tcluster lease ttl = {}\n",
        STALL_TTL.as_secs()
    );
    etcd_available(name).then(|| Cluster::start_with(name, &more))
}

/// The stall test's nodes' lease TTL. Renewed every third of it, a node fences itself 1 s
/// before it runs out: with 15 s, at least 9 s after the etcd leader's stop (with the default
/// 6 s, 3 s). On a 2-vCPU machine running three etcd members, three nodes and some 30
/// clients, etcd has taken no write for the whole 2-s stop and its election then ran past
/// that fence: nodes 1 and 3 dropped their clients (seen once in session 56's local CI runs).
/// A fence is not what this test is about (a_hung_node_is_fenced… and the coordination
/// tests are).
const STALL_TTL: Duration = Duration::from_secs(15);

/// How long the etcd leader is stopped. Not longer: when the others elect no leader meanwhile
/// (seen once in CI, session 48: no write for the whole 3 s stop then used), etcd takes no write
/// for the whole stop, and a node whose last renewal came up to 2 s before it reaches its fence
/// deadline (last renewal + 5 s) after a stop of 3 s, refusing even its own files'
/// requests (FILE_NOT_AVAILABLE), as it must: that is the fence's test, not this one's.
const ETCD_STOP: Duration = Duration::from_secs(2);

/// How much slower p99 may be during a stall: twice, plus room for a shared, noisy machine
/// (the old code took a whole etcd election, over a second, with the thread blocked).
fn bound(before: Duration) -> Duration {
    before
        .saturating_mul(2)
        .saturating_add(Duration::from_millis(150))
}

#[test]
fn a_stopped_etcd_member_or_peer_does_not_slow_requests_on_local_files() {
    let _alone = Turn::alone();
    let name = "nowait";
    let Some(cl) = stall_cluster(name) else {
        return;
    };
    let ttl = format!("lease ttl {} s)", STALL_TTL.as_secs());
    for (i, n) in cl.nodes.iter().enumerate() {
        assert!(
            n.log().contains(&ttl),
            "node {} joined without {ttl}",
            i + 1
        );
    }
    let files = files_homed_on(&cl, 1, "local", CLIENTS + PERSISTENT_CLIENTS);
    let stop = Arc::new(AtomicBool::new(false));
    let samples: Samples = Arc::default();
    let mut measuring = Vec::new();
    for f in &files[..CLIENTS] {
        let (c, f, stop, samples) = (cl.client(1), f.clone(), stop.clone(), samples.clone());
        measuring.push(thread::spawn(move || measured(c, f, stop, samples)));
    }
    let mut making = Vec::new();
    for (i, f) in files[CLIENTS..].iter().enumerate() {
        let (c, f, stop) = (cl.client(1), f.clone(), stop.clone());
        making.push(thread::spawn(move || {
            persistent(c, f, 1 + 120 * i as u8, stop)
        }));
    }
    // Four clients of node 1 work on a file homed on node 2 once node 2 stops: one closes its
    // open of it, one opens it, one locks and unlocks it, one writes and reads it (a client of
    // node 3 holds a lock on it by then: node 1 has no grant that decides its I/O).
    let elsewhere = files_homed_on(&cl, 2, "elsewhere", 1).remove(0);
    let peer_stop = Arc::new(AtomicBool::new(false));
    let mut remote = Vec::new();
    for i in 0..4 {
        let mut c = cl.client(1);
        let mut held = || open(&mut c, &elsewhere, ALL, 7).expect("a file homed on node 2");
        let work = match i {
            0 => Remote::Close(held()),
            1 => Remote::Open,
            2 => Remote::Lock(held()),
            _ => Remote::Io(held()),
        };
        let (f, peer_stop, stop) = (elsewhere.clone(), peer_stop.clone(), stop.clone());
        remote.push(thread::spawn(move || {
            homed_elsewhere(c, f, work, peer_stop, stop)
        }));
    }
    // One more sets and clears the delete pending of its own file homed on node 2, one more
    // asks FileStandardInformation of its own, and one more renames its own there and back.
    let own = files_homed_on(&cl, 2, "doomed", 3);
    for (i, f) in own.into_iter().enumerate() {
        let mut c = cl.client(1);
        let h = open(&mut c, &f, ALL, 7).expect("a file homed on node 2");
        let work = [Remote::Dispose(h), Remote::Query(h), Remote::Rename(h)][i];
        let (peer_stop, stop) = (peer_stop.clone(), stop.clone());
        remote.push(thread::spawn(move || {
            homed_elsewhere(c, f, work, peer_stop, stop)
        }));
    }
    // Ten more open files of their own homed on node 2 once it stops: more calls to it than
    // the driver carries to one node at once (8), so that the calls to node 3 of a client
    // measured meanwhile would wait for threads they hold, if they could hold them all.
    for f in files_homed_on(&cl, 2, "crowd", CROWD) {
        let (c, peer_stop, stop) = (cl.client(1), peer_stop.clone(), stop.clone());
        remote.push(thread::spawn(move || {
            homed_elsewhere(c, f, Remote::Open, peer_stop, stop)
        }));
    }
    // Two more work on files homed on node 1 (their own node) whose I/O grants a client of node
    // 2 holds (its open of each, made now): once node 2 stops, one opens its file for writing
    // again and again, one locks bytes of its open of the other: each must first take node 2's
    // grant back, which a home-call thread tries (up to 2 s), not their I/O thread.
    let mut granted_to_2 = cl.client(2);
    let mut homeside = Vec::new();
    for (i, f) in files_homed_on(&cl, 1, "granted", 2).into_iter().enumerate() {
        open(&mut granted_to_2, &f, READ, 7).expect("node 2's open: its grant");
        let mut c = cl.client(1);
        let work = match i {
            0 => Remote::Open,
            _ => Remote::Lock(open(&mut c, &f, ALL, 7).expect("node 1's open")),
        };
        let (peer_stop, stop) = (peer_stop.clone(), stop.clone());
        homeside.push(thread::spawn(move || {
            homed_elsewhere(c, f, work, peer_stop, stop)
        }));
    }
    let far: Samples = Arc::default();
    let farther = {
        let f = files_homed_on(&cl, 3, "far", 1).remove(0);
        let (c, stop, far) = (cl.client(1), stop.clone(), far.clone());
        thread::spawn(move || measured(c, f, stop, far))
    };
    // A fifth holds a persistent open of it, closes it once node 2 stops and goes at once.
    let mut c = cl.client(1);
    let goes = opened(c.call(
        Command::CREATE,
        &durable_create_as(&elsewhere, 250, None, true),
    ))
    .expect("a persistent open of a file homed on node 2")
    .0;
    let going = {
        let peer_stop = peer_stop.clone();
        thread::spawn(move || closes_and_goes(c, goes, peer_stop))
    };
    // A sixth holds a persistent open of a file of its own homed on node 2, sets its delete
    // pending, and goes once node 2 stops: the look at the delete pending waits for node 2.
    let pended = files_homed_on(&cl, 2, "pended", 1).remove(0);
    let mut c = cl.client(1);
    let pends = opened(c.call(
        Command::CREATE,
        &durable_create_as(&pended, 251, None, true),
    ))
    .expect("a persistent open of a file homed on node 2")
    .0;
    let set = c.call(Command::SET_INFO, &set_info_body(pends, 13, &[1]));
    assert_eq!(status(set), NtStatus::SUCCESS, "its delete set pending");
    let pending_goes = {
        let peer_stop = peer_stop.clone();
        thread::spawn(move || pends_and_goes(c, peer_stop))
    };
    // One more holds a lease on a file of its own homed on node 2, broken by a client of node 3's
    // open of it; it acknowledges the break once node 2 stops (the acknowledgment is node 2's).
    let acked = files_homed_on(&cl, 2, "acked", 1).remove(0);
    let (mut leased, mut breaker) = (cl.client(1), cl.client(3));
    let rwh = create(&acked, ALL, 7, Some(lease(40, R | W | H)));
    let (_, state) = opened(leased.call(Command::CREATE, &rwh)).expect("a lease");
    assert_eq!(state, R | W | H);
    let breaking = send(
        &mut breaker,
        Command::CREATE,
        &create(&acked, WRITE, 7, None),
    );
    interim(&mut breaker, breaking);
    let OplockBreak::LeaseBreakNotification(_) = next_break(&mut leased) else {
        panic!("a lease break");
    };
    let acking = {
        let peer_stop = peer_stop.clone();
        thread::spawn(move || {
            while !peer_stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(10));
            }
            let t = Instant::now();
            (ack_lease(&mut leased, 40, R | H), t.elapsed())
        })
    };
    // One more waits in a CREATE of a file of its own homed on node 2 for the break of a lease
    // a client of node 3 holds (acknowledged after the stall): run again every second, and
    // when the client closes another file as node 2 stops (a close may end a break), the
    // CREATE asks node 2 each time.
    let waited = files_homed_on(&cl, 2, "waited", 1).remove(0);
    let (mut lessee, mut opener) = (cl.client(3), cl.client(1));
    let closed_later = open(&mut opener, &files[0], ALL, 7).expect("a local file");
    let rwh = create(&waited, ALL, 7, Some(lease(41, R | W | H)));
    let (_, state) = opened(lessee.call(Command::CREATE, &rwh)).expect("a lease");
    assert_eq!(state, R | W | H);
    let opening = send(
        &mut opener,
        Command::CREATE,
        &create(&waited, WRITE, 7, None),
    );
    interim(&mut opener, opening);
    let OplockBreak::LeaseBreakNotification(_) = next_break(&mut lessee) else {
        panic!("a lease break");
    };
    let waiting = {
        let peer_stop = peer_stop.clone();
        thread::spawn(move || {
            while !peer_stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(10));
            }
            let mut body = vec![24, 0, 0, 0, 0, 0, 0, 0];
            put_file_id(&mut body, closed_later);
            let hdr = opener.header(Command::CLOSE);
            opener
                .send_frame(&Raw::message(&hdr, &body))
                .expect("send the CLOSE");
            opener
        })
    };
    // A client of node 3 holds bytes 100..110 of it; one of node 1 waits for them.
    let (mut holder, mut waiter) = (cl.client(3), cl.client(1));
    let held = open(&mut holder, &elsewhere, ALL, 7).expect("the holder's open");
    let exclusive = lock_body(held, 100, 10, 0x12);
    assert_eq!(
        status(holder.call(Command::LOCK, &exclusive)),
        NtStatus::SUCCESS
    );
    let waits = open(&mut waiter, &elsewhere, ALL, 7).expect("the waiter's open");
    let blocking = send(&mut waiter, Command::LOCK, &lock_body(waits, 100, 10, 2));
    interim(&mut waiter, blocking);
    // One more leaves a durable open of a file of its own homed on node 2 on node 1; another
    // client of node 1 reconnects it once node 2 stops (the home is told its new connection).
    let rejoined = files_homed_on(&cl, 2, "rejoined", 1).remove(0);
    let mut leaver = cl.client(1);
    let (left, _) = opened(leaver.call(Command::CREATE, &durable_create(&rejoined, 252, None)))
        .expect("a durable open of a file homed on node 2");
    drop(leaver);
    let reconnecting = {
        let (c, peer_stop) = (cl.client(1), peer_stop.clone());
        thread::spawn(move || reconnects(c, (rejoined, 252, left), peer_stop))
    };
    // One more holds persistent opens of files of its own homed on node 1 and disconnects their
    // tree once etcd's leader stops: their records go, asked of etcd away from the I/O thread.
    let etcd_stop = Arc::new(AtomicBool::new(false));
    let (parted, parting) = parts_once_etcd_stops(&cl, etcd_stop.clone());
    thread::sleep(Duration::from_millis(500));
    let before = Instant::now();
    said("every client works");
    thread::sleep(Duration::from_millis(2_000));

    // The etcd leader stops: persistent opens wait for a new leader.
    let (leader, etcd_stopped, etcd_resumed, stall) = stop_the_etcd_leader(&cl, &etcd_stop, None);

    // Node 2 stops (for less than its lease: it is not taken over).
    let peer_stopped = Instant::now();
    stop_process(cl.nodes[1].pid());
    said("node 2 stopped");
    peer_stop.store(true, Ordering::Relaxed);
    thread::sleep(Duration::from_millis(2_000));
    let peer_resumed = Instant::now();
    continue_process(cl.nodes[1].pid());
    said("node 2 went on");
    thread::sleep(Duration::from_millis(1_000));

    // Both at once (issue 33: "one etcd member and one peer node"): the etcd leader and node 2
    // stop together (both for 2 s) while every client above keeps working.
    let (joint_leader, joint_stopped, joint_resumed, joint_stall) =
        stop_the_etcd_leader(&cl, &AtomicBool::new(false), Some(cl.nodes[1].pid()));

    stop.store(true, Ordering::Relaxed);
    going
        .join()
        .expect("the client that closed and went failed");
    let record_gone = record_goes(&cl, name, goes);
    pending_goes
        .join()
        .expect("the client that set a delete pending and went failed");
    let pended_gone = record_goes(&cl, name, pends);
    let parted_in = parting
        .join()
        .expect("the client that disconnected its tree failed");
    let parted_gone = parted.iter().all(|id| record_goes(&cl, name, *id));
    let unlock = lock_body(held, 100, 10, 4);
    let unlocked = Instant::now();
    assert_eq!(
        status(holder.call(Command::LOCK, &unlock)),
        NtStatus::SUCCESS
    );
    let frame = read_frame(&mut waiter.sock)
        .expect("the waiter's connection")
        .expect("the blocking LOCK's answer");
    let (h, _) = split_responses(&frame).remove(0);
    assert_eq!(
        (h.message_id, h.status),
        (blocking, NtStatus::SUCCESS),
        "the blocking lock is granted once its range is free"
    );
    let granted = unlocked.elapsed();
    let mut opener = waiting.join().expect("the waiting client failed");
    let waited_acked = ack_lease(&mut lessee, 41, R | H);
    let waited_answer = final_answer(&mut opener, opening);
    assert!(
        [NtStatus::SUCCESS, NtStatus::FILE_NOT_AVAILABLE].contains(&waited_answer),
        "a CREATE that waited for a break of a file homed on node 2: {waited_answer:?}"
    );
    let (reconnected, reconnected_in) =
        reconnecting.join().expect("the reconnecting client failed");
    assert!(
        [NtStatus::SUCCESS, NtStatus::FILE_NOT_AVAILABLE].contains(&reconnected),
        "a reconnect of a durable open of a file homed on node 2: {reconnected:?}"
    );
    let (acked_status, acked_in) = acking.join().expect("the acknowledging client failed");
    assert!(
        [NtStatus::SUCCESS, NtStatus::FILE_NOT_AVAILABLE].contains(&acked_status),
        "a lease break acknowledgment while the file's home is stopped: {acked_status:?}"
    );
    drop(breaker);
    let remote: Vec<String> = remote
        .into_iter()
        .map(|t| t.join().expect("a client of a file homed on node 2 failed"))
        .collect();
    let homeside: Vec<String> = homeside
        .into_iter()
        .map(|t| {
            t.join()
                .expect("a client of a file whose grant node 2 holds failed")
        })
        .collect();
    drop(granted_to_2);
    for t in measuring {
        t.join().expect("a measured client failed");
    }
    farther
        .join()
        .expect("the client of a file homed on node 3 failed");
    let made: Vec<String> = making
        .into_iter()
        .map(|t| t.join().expect("a persistent client failed"))
        .collect();
    let (p_before, max_before, n_before) = p99(&samples, before, etcd_stopped);
    let (p_etcd, max_etcd, n_etcd) = p99(&samples, etcd_stopped, etcd_resumed);
    let (p_peer, max_peer, n_peer) = p99(&samples, peer_stopped, peer_resumed);
    let (far_before, _, far_n_before) = p99(&far, before, etcd_stopped);
    let (far_peer, far_max, far_n) = p99(&far, peer_stopped, peer_resumed);
    let (p_joint, max_joint, n_joint) = p99(&samples, joint_stopped, joint_resumed);
    let (far_joint, far_joint_max, far_joint_n) = p99(&far, joint_stopped, joint_resumed);
    eprintln!(
        "[{name}] {CLIENTS} clients' CREATE+WRITE+READ+CLOSE of files homed on their node: \
         p99 {p_before:?} (max {max_before:?}, {n_before} requests) before; \
         {p_etcd:?} (max {max_etcd:?}, {n_etcd}) with etcd member {leader} (the leader) stopped (etcd took no write for {stall:?}); \
         {p_peer:?} (max {max_peer:?}, {n_peer}) with node 2 stopped; \
         {p_joint:?} (max {max_joint:?}, {n_joint}) with etcd member {joint_leader} (the leader) \
         and node 2 stopped at once (etcd took no write for {joint_stall:?}); \
         persistent opens meanwhile: {made:?}; the clients of files homed on node 2: {remote:?}; \
         the clients of files homed on node 1 whose grants node 2 holds: {homeside:?}; \
         a client of node 1 on a file homed on node 3: p99 {far_before:?} ({far_n_before} requests) \
         before, {far_peer:?} (max {far_max:?}, {far_n}) with node 2 stopped, \
         {far_joint:?} (max {far_joint_max:?}, {far_joint_n}) with both stopped; \
         the blocking LOCK of a file homed on node 2, waiting throughout, granted {granted:?} after the unlock; \
         a lease break acknowledgment of a file homed on node 2: {acked_status:?} in {acked_in:?}; \
         a TREE_DISCONNECT closing {TREE_PERSISTENT} persistent opens with etcd's leader stopped: \
         answered in {parted_in:?}, their records gone afterwards: {parted_gone}; \
         a CREATE that waited for a break of a file homed on node 2 throughout: {waited_answer:?} \
         (the break acknowledged after the stall: {waited_acked:?}); \
         a DH2C on node 1 of a durable open of a file homed on node 2: {reconnected:?} in \
         {reconnected_in:?}"
    );
    assert!(
        n_before > 0 && far_n_before > 0,
        "requests were measured before the stalls"
    );
    assert!(
        record_gone,
        "a persistent open closed by a client that went while the CLOSE waited for the file's \
         home keeps no record in etcd"
    );
    assert!(
        pended_gone,
        "a persistent open whose file's delete is pending is not kept after its connection \
         ended: its record leaves etcd"
    );
    assert!(
        parted_gone,
        "the persistent opens a TREE_DISCONNECT closed keep no record in etcd"
    );
    assert!(
        p_etcd <= bound(p_before),
        "etcd's leader stopped: p99 {p_etcd:?} against {p_before:?} before"
    );
    assert!(
        p_peer <= bound(p_before),
        "node 2 stopped: p99 {p_peer:?} against {p_before:?} before"
    );
    assert!(
        p_joint <= bound(p_before),
        "etcd's leader and node 2 stopped at once: p99 {p_joint:?} against {p_before:?} before"
    );
    // A request that waited for a stopped party took as long as it was away (etcd's election)
    // or the 2 s bound of a call to node 2: none of the clients of files node 1 decides (their
    // own, or one node 3 decides) did.
    let waited = joint_stall.min(Duration::from_secs(2));
    assert!(
        max_joint < waited && far_joint_max < waited,
        "etcd's leader and node 2 stopped at once: the longest request of a file homed on node \
         1 took {max_joint:?}, of one homed on node 3 {far_joint_max:?}: as long as etcd took \
         no write ({joint_stall:?})"
    );
    assert!(
        far_joint <= bound(far_before),
        "etcd's leader and node 2 stopped at once: calls to node 3 p99 {far_joint:?} against \
         {far_before:?} before"
    );
    assert!(
        far_peer <= bound(far_before),
        "node 2 stopped: calls to node 3 p99 {far_peer:?} against {far_before:?} before"
    );
}

/// Issue 33 (docs/cluster.md, Limits): a durable open left on node 1 (its file homed on node 3)
/// is reconnected through node 2 while node 1 is stopped (SIGSTOP): node 2's give-up call waits
/// its 2 s and the reconnect is told FILE_NOT_AVAILABLE; node 1 goes on a second later and reads
/// the call with node 2's close behind it. It does not carry it out: the open stays with node 1,
/// and the client's next reconnects through node 2 end with the handle back and its data, with
/// no answer but FILE_NOT_AVAILABLE or SUCCESS on the way. Before, node 1 gave the open up to
/// nobody and the next reconnect was OBJECT_NAME_NOT_FOUND.
#[test]
fn a_keeper_stopped_while_asked_to_give_an_open_up_keeps_it_for_the_next_reconnect() {
    let name = "lategive";
    let Some(cl) = ca_cluster(name) else {
        return;
    };
    let file = files_homed_on(&cl, 3, "kept", 1).remove(0);
    let mut leaver = cl.client(1);
    let (left, _) = opened(leaver.call(Command::CREATE, &durable_create(&file, 253, None)))
        .expect("a durable open on node 1");
    leaver.write(left, 0, b"kept").expect("write");
    drop(leaver);
    // Node 2's connection to node 1 in its pool: the give-up goes out on it at once.
    let mut c = cl.client(2);
    for f in files_homed_on(&cl, 1, "warm", 2) {
        let h = open(&mut c, &f, ALL, 7).expect("a file homed on node 1");
        c.close(h).expect("close");
    }
    thread::sleep(Duration::from_millis(500));
    let keeper = cl.nodes[0].pid();
    let stopped = Instant::now();
    stop_process(keeper);
    let first = opened(c.call(Command::CREATE, &durable_create(&file, 253, Some(left))));
    let first_in = stopped.elapsed();
    // Said before anything is asserted: a failure shows how long the first answer took. (One CI
    // run had SUCCESS here, session 54: the test then sent the reconnect as soon as SIGSTOP was
    // sent, and node 1 could still answer until its threads were scheduled to stop;
    // stop_process now waits for that.)
    eprintln!(
        "[{name}] the reconnect with the keeper stopped: {:?} in {first_in:?}",
        first.as_ref().map(|_| ())
    );
    thread::sleep(Duration::from_millis(3_000).saturating_sub(stopped.elapsed()));
    continue_process(keeper);
    let resumed = Instant::now();
    let mut heard = vec![first.map(|_| ()).err().unwrap_or(NtStatus::SUCCESS)];
    let back = loop {
        thread::sleep(Duration::from_millis(300));
        match opened(c.call(Command::CREATE, &durable_create(&file, 253, Some(left)))) {
            Ok((h, _)) => break h,
            Err(s) => heard.push(s),
        }
        assert_eq!(
            heard.last(),
            Some(&NtStatus::FILE_NOT_AVAILABLE),
            "a reconnect after node 1 went on: {heard:?}"
        );
        assert!(
            resumed.elapsed() < Duration::from_secs(20),
            "not back 20 s after node 1 went on: {heard:?}"
        );
    };
    let back_in = resumed.elapsed();
    eprintln!(
        "[{name}] a reconnect through node 2 with the keeper (node 1) stopped: {:?} in \
         {first_in:?}; back {back_in:?} after node 1 went on; answers heard before: {heard:?}",
        heard[0]
    );
    assert_eq!(
        heard[0],
        NtStatus::FILE_NOT_AVAILABLE,
        "the reconnect while the keeper is stopped: try again"
    );
    assert!(
        heard.iter().all(|s| *s == NtStatus::FILE_NOT_AVAILABLE),
        "only FILE_NOT_AVAILABLE before the handle is back: {heard:?}"
    );
    assert_eq!(back.persistent, left.persistent, "the same open");
    assert_eq!(c.read(back, 0, 4).expect("read"), b"kept", "its data");
    c.close(back).expect("close");
}
