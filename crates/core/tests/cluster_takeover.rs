//! Issue 33 item 2: a durable reconnect (DH2C) of an open another node keeps, or of a
//! persistent open taken over from a dead node, is taken over away from the I/O thread. The
//! takeover (the look at the file's home, the keeper's give-up, the records read in etcd, the
//! reopen, the home's move) is one job the driver's home-call threads carry; the CREATE parks
//! meanwhile and is answered with its result. Here the job is a lookup the test client holds
//! (`hold_lookups`) and carries when it chooses (`answer_held`): while it is held no call has
//! been made, the keeper still has the open, and the connection answers other requests. A
//! connection's end, a LOGOFF, a CANCEL and a compound around a parked reconnect leave the open
//! whole for the next reconnect. Nodes are server cores on the in-memory bus of
//! `support/cluster.rs`.

use crate::cluster_support;
use crate::support;

use cluster_support::*;
use ringshare_core::cluster::{msg, node_of};
use ringshare_wire::consts::{Command, CreateDisposition as D, Dialect};
use ringshare_wire::create::{CreateContext, CreateResponse, Lease};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const ALL: u32 = 0x001F_01FF;
const RH: u32 = 1 | 2;
const RWH: u32 = 1 | 4 | 2;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;
/// SMB2_DHANDLE_FLAG_PERSISTENT.
const PERSISTENT: u32 = 2;
/// The FileId of a related compound's previous open.
const RELATED: FileId = FileId {
    persistent: u64::MAX,
    volatile: u64::MAX,
};

/// A client of node `node` logged on as alice, with ClientGuid `guid`.
fn alice(cl: &Cluster, node: u16, guid: u8) -> Client {
    let s = cl.nodes[usize::from(node) - 1].clone();
    let mut c = Client::negotiated(s, cl.mem.clone(), Dialect::SMB3_1_1, [guid; 16]);
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::SUCCESS);
    c.tree_id = c.tree_connect("share");
    c
}

/// A CREATE of `name` with a lease and `contexts`, opening it if it is there.
fn create_msg(c: &mut Client, name: &str, contexts: Vec<CreateContext<'static>>) -> Vec<u8> {
    lease_create_msg(c, name, 7, contexts)
}

fn file_id(r: &Resp) -> FileId {
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    CreateResponse::decode(&r.msg).expect("create").file_id
}

fn echo(c: &mut Client) -> NtStatus {
    c.call(Command::ECHO, 0, empty_body).status()
}

/// Alice's durable open of `name` with data and a lock, left on node `node` when her
/// connection went (a persistent one when `flags` says so): its FileId and lease.
fn left_on(cl: &Cluster, node: u16, name: &str, flags: u32) -> (FileId, Lease) {
    let mut a = alice(cl, node, 1);
    let l = lease_v2(7, if flags == PERSISTENT { RH } else { RWH });
    let m = create_msg(&mut a, name, vec![rqls(&l), dh2q_flags(7, flags)]);
    let f = file_id(&a.send_frame(m)[0]);
    assert_eq!(a.write(f, 0, b"before").status(), NtStatus::SUCCESS);
    let lock = [(0, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(a.lock(f, &lock).status(), NtStatus::SUCCESS);
    a.conn.shutdown(a.now);
    a.pump();
    (f, l)
}

/// The reconnect of `f` (with lease `l`) through client `b`, which holds its lookups: parked,
/// no answer and one job held. Its message id.
fn parked_reconnect(b: &mut Client, name: &str, f: FileId, l: &Lease, flags: u32) -> u64 {
    b.hold_lookups = true;
    let m = create_msg(b, name, vec![rqls(l), dh2c_flags(f, 7, flags)]);
    let mid = u64::from_le_bytes(m[24..32].try_into().unwrap());
    assert!(
        b.send_frame(m).is_empty(),
        "answered at once: taken over on the I/O thread"
    );
    assert_eq!(b.held_lookups.len(), 1, "the takeover, one job");
    mid
}

/// Carry what `c` holds, and what that asks in turn, until nothing is held: the responses.
fn answer_all(c: &mut Client) -> Vec<Resp> {
    let mut out = Vec::new();
    while !c.held_lookups.is_empty() {
        out.extend(answer_held(c));
    }
    out
}

/// A CA cluster of 3 nodes, files homed on node `home`.
/// A reconnect of `f` through a fresh client of node `node` gets it back with its data, then
/// closes it.
fn back_whole(cl: &Cluster, node: u16, name: &str, f: FileId, l: &Lease, flags: u32) {
    let mut c = alice(cl, node, 1);
    let m = create_msg(&mut c, name, vec![rqls(l), dh2c_flags(f, 7, flags)]);
    let back = file_id(&c.send_frame(m)[0]);
    assert_eq!(back.persistent, f.persistent, "the same open");
    assert_eq!(node_of(back.volatile), node, "now node {node}'s");
    assert_eq!(read_data(&c.read(back, 0, 64)), b"before");
    assert_eq!(c.close(back).status(), NtStatus::SUCCESS);
}

/// Nothing is left of alice's open of `name`: no node keeps it parked, and a client of node
/// 3 opens the file sharing nothing and locks its first bytes.
fn closed_cleanly(cl: &Cluster, name: &str) {
    for n in &cl.nodes {
        assert_eq!(n.parked_durables(), 0, "nothing parked");
    }
    let mut c = alice(cl, 3, 9);
    let f = open(&mut c, name, ALL, 0).expect("no open left in the way");
    let lock = [(0, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(c.lock(f, &lock).status(), NtStatus::SUCCESS, "no lock left");
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}

/// A DH2C through node 2 of an open node 1 keeps (files homed on node 2): parked, no call made
/// to node 1 while the job is held, the open still node 1's, and an ECHO and a CREATE on the
/// same connection answered meanwhile; once carried, SUCCESS with the open and its data.
#[test]
fn a_reconnect_of_an_open_another_node_keeps_is_taken_over_away_from_the_io_thread() {
    let cl = Cluster::new(3, 2);
    let (f, l) = left_on(&cl, 1, "doc.txt", 0);
    let mut b = alice(&cl, 2, 1);
    let calls = cl.calls_to(1);
    parked_reconnect(&mut b, "doc.txt", f, &l, 0);
    assert_eq!(cl.calls_to(1), calls, "no give-up asked on the thread");
    assert_eq!(
        cl.nodes[0].parked_durables(),
        1,
        "node 1 keeps it meanwhile"
    );
    assert_eq!(echo(&mut b), NtStatus::SUCCESS, "answered meanwhile");
    let other = b
        .create("other.txt", ALL, D::OPEN_IF, 0)
        .expect("meanwhile");
    assert_eq!(b.close(other).status(), NtStatus::SUCCESS);
    let answered = answer_all(&mut b);
    let back = file_id(&answered[0]);
    assert_eq!(back.persistent, f.persistent, "the same open");
    assert_eq!(node_of(back.volatile), 2, "now node 2's");
    assert_eq!(cl.nodes[0].parked_durables(), 0, "node 1 let it go");
    assert_eq!(read_data(&b.read(back, 0, 64)), b"before");
    assert_eq!(b.close(back).status(), NtStatus::SUCCESS);
    closed_cleanly(&cl, "doc.txt");
}

/// A DH2C through node 2 of a persistent open whose node (1) died and which the file's home
/// (3) took over: the record is read and the open taken over from node 3 by the job, not on
/// the I/O thread (node 3 keeps it and is asked nothing while the job is held; an ECHO is
/// answered meanwhile); then SUCCESS with its data, its record naming node 2.
#[test]
fn a_reconnect_of_a_persistent_open_taken_over_from_a_dead_node_parks_while_it_moves() {
    let cl = ca_cluster(3);
    let (f, l) = left_on(&cl, 1, "vm.vhdx", PERSISTENT);
    cl.kill(1, 3);
    assert_eq!(cl.nodes[2].parked_persistent(), 1, "node 3 keeps it");
    let mut b = alice(&cl, 2, 1);
    let calls = cl.calls_to(3);
    parked_reconnect(&mut b, "vm.vhdx", f, &l, PERSISTENT);
    assert_eq!(
        cl.calls_to(3),
        calls,
        "nothing asked of node 3 on the thread"
    );
    assert_eq!(cl.nodes[2].parked_persistent(), 1, "still node 3's");
    assert_eq!(echo(&mut b), NtStatus::SUCCESS, "answered meanwhile");
    let answered = answer_all(&mut b);
    b.hold_lookups = false;
    let back = file_id(&answered[0]);
    assert_eq!(back.persistent, f.persistent, "the same open");
    assert_eq!(node_of(back.volatile), 2, "now node 2's");
    assert_eq!(cl.nodes[2].parked_persistent(), 0, "node 3 let it go");
    let record = cl.bus.ca.lock().unwrap().get(&f.persistent).cloned();
    let keeper = record
        .as_deref()
        .and_then(ringshare_core::cluster::record_keeper);
    assert_eq!(keeper, Some(2), "its record names node 2");
    assert_eq!(read_data(&b.read(back, 0, 64)), b"before");
    assert_eq!(b.close(back).status(), NtStatus::SUCCESS);
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "record gone");
}

/// The connection of a parked reconnect of a persistent open node 1 keeps goes: before its job
/// is carried, the job takes nothing (node 1 keeps the open); after it was carried but before
/// its answer came in, the open taken over is parked on node 2, its record naming node 2.
/// Either way the next reconnect (through node 3, by the FileId the client knows) has it back
/// whole. A durable open that is not persistent, taken over so, is closed cleanly instead (its
/// client's FileId no longer names it): nothing of it is left in another open's way.
#[test]
fn a_reconnect_whose_connection_goes_while_it_is_taken_over_leaves_the_open_whole_or_closed() {
    for (flags, carried) in [
        (PERSISTENT, false),
        (PERSISTENT, true),
        (0, false),
        (0, true),
    ] {
        let cl = ca_cluster(2);
        let (f, l) = left_on(&cl, 1, "doc.txt", flags);
        let mut b = alice(&cl, 2, 1);
        parked_reconnect(&mut b, "doc.txt", f, &l, flags);
        let job = b.held_lookups.remove(0);
        if carried {
            job.run();
        }
        b.conn.shutdown(b.now);
        assert!(answer_all(&mut b).is_empty(), "nobody to answer");
        let keeper = if carried { 1 } else { 0 };
        if !carried {
            // Carried after the connection went: it takes nothing.
            job.run();
        }
        match (flags, carried) {
            (0, true) => {
                closed_cleanly(&cl, "doc.txt");
                continue;
            }
            _ => {
                assert_eq!(cl.nodes[keeper].parked_durables(), 1, "kept whole");
                assert_eq!(cl.nodes[1 - keeper].parked_durables(), 0);
            }
        }
        back_whole(&cl, 3, "doc.txt", f, &l, flags);
    }
}

/// A LOGOFF while a reconnect of a persistent open is parked: the open taken over does not join
/// the ended session; it is parked on node 2 for the next reconnect, which has it back whole.
#[test]
fn a_reconnect_parked_across_a_logoff_leaves_the_open_for_the_next() {
    let cl = ca_cluster(2);
    let (f, l) = left_on(&cl, 1, "doc.txt", PERSISTENT);
    let mut b = alice(&cl, 2, 1);
    parked_reconnect(&mut b, "doc.txt", f, &l, PERSISTENT);
    assert_eq!(
        b.call(Command::LOGOFF, 0, empty_body).status(),
        NtStatus::SUCCESS
    );
    let answered = answer_all(&mut b);
    assert!(
        answered.iter().all(|r| r.status() != NtStatus::SUCCESS),
        "no open for an ended session"
    );
    assert_eq!(cl.nodes[0].parked_durables(), 0, "node 1 gave it up");
    assert_eq!(cl.nodes[1].parked_durables(), 1, "kept by node 2");
    back_whole(&cl, 3, "doc.txt", f, &l, PERSISTENT);
}

/// A CANCEL of a parked reconnect changes nothing (it is not async): SUCCESS once carried. A
/// reconnect inside a compound (a related QUERY_INFO after it) parks its job the same way and
/// the compound is answered whole once it is carried.
#[test]
fn a_cancelled_or_compounded_reconnect_is_answered_once_taken_over() {
    let cl = Cluster::new(3, 2);
    let (f, l) = left_on(&cl, 1, "doc.txt", 0);
    let mut b = alice(&cl, 2, 1);
    let mid = parked_reconnect(&mut b, "doc.txt", f, &l, 0);
    let mut h = ringshare_wire::header::Header::request(Command::CANCEL, mid);
    h.session_id = b.session_id;
    let mut c = Vec::new();
    h.encode(&mut c);
    ringshare_wire::misc::CancelRequest.encode(&mut c);
    assert!(b.send_frame(c).is_empty(), "a CANCEL does not end the wait");
    let back = file_id(&answer_all(&mut b)[0]);
    assert_eq!(read_data(&b.read(back, 0, 64)), b"before");
    b.conn.shutdown(b.now);
    b.pump();
    assert_eq!(cl.nodes[1].parked_durables(), 1, "parked again on node 2");

    let mut d = alice(&cl, 3, 1);
    d.hold_lookups = true;
    let calls = cl.calls_to(2);
    let create = create_msg(&mut d, "doc.txt", vec![rqls(&l), dh2c_flags(back, 7, 0)]);
    let query = d.query_info_msg(RELATED, 1, 5, 4096);
    assert!(d.compound(vec![create, query], true).is_empty(), "parked");
    assert_eq!((d.held_lookups.len(), cl.calls_to(2)), (1, calls));
    let answered = answer_all(&mut d);
    let statuses: Vec<NtStatus> = answered.iter().map(Resp::status).collect();
    assert_eq!(statuses, [NtStatus::SUCCESS, NtStatus::SUCCESS]);
    let again = file_id(&answered[0]);
    assert_eq!(node_of(again.volatile), 3, "now node 3's");
    d.hold_lookups = false;
    assert_eq!(d.close(again).status(), NtStatus::SUCCESS);
}

/// A DH2C on node 1 of an open node 1 keeps parked, of a file homed on node 2: the home learns
/// the open's new connection before the CREATE is answered, by a job carried away from the I/O
/// thread (no call to node 2 while it is held; an ECHO answered meanwhile); then SUCCESS, and a
/// break the home sends reaches the new connection. A connection that goes before the job is
/// carried leaves the open parked on node 1 for the next reconnect.
#[test]
fn a_reconnect_on_the_opens_own_node_tells_its_files_home_away_from_the_io_thread() {
    for goes in [false, true] {
        let cl = Cluster::new(3, 2);
        let (f, l) = left_on(&cl, 1, "doc.txt", 0);
        assert_eq!(cl.nodes[0].parked_durables(), 1);
        let mut b = alice(&cl, 1, 1);
        let calls = cl.calls_to(2);
        parked_reconnect(&mut b, "doc.txt", f, &l, 0);
        assert_eq!(cl.calls_to(2), calls, "the home not asked on the thread");
        assert_eq!(echo(&mut b), NtStatus::SUCCESS, "answered meanwhile");
        if goes {
            b.conn.shutdown(b.now);
            assert!(answer_all(&mut b).is_empty(), "nobody to answer");
            assert_eq!(cl.nodes[0].parked_durables(), 1, "parked again");
            back_whole(&cl, 1, "doc.txt", f, &l, 0);
            continue;
        }
        let back = file_id(&answer_all(&mut b)[0]);
        b.hold_lookups = false;
        assert_eq!(back, f, "the same FileId");
        assert_eq!(cl.calls_to(2), calls + 1, "the home told once");
        let mut carol = alice(&cl, 3, 3);
        let m = carol.create_msg_caching("doc.txt", ALL, 7, D::OPEN, 0, None);
        assert_eq!(carol.send_frame(m)[0].status(), NtStatus::PENDING);
        assert_eq!(b.breaks().len(), 1, "the break reaches the new connection");
        assert_eq!(b.close(back).status(), NtStatus::SUCCESS);
    }
}

/// Give-ups at node `node` are answered too late while `on`.
fn give_ups_late(cl: &Cluster, node: u16, on: bool) {
    let mut m = cl.bus.give_ups_late.lock().unwrap();
    if on {
        m.insert(node);
    } else {
        m.remove(&node);
    }
}

/// Issue 33 (docs/cluster.md, Limits, before): alice's persistent open is parked on node 1;
/// her reconnect through node 2 asks node 1 to give it up, and node 1 carries the give-up out
/// but answers only after node 2 stopped waiting (a keeper overloaded past the call's 2 s).
/// The reconnect is told to try again (FILE_NOT_AVAILABLE), and the next one, through node 2
/// again or through node 3, gets the open back with its data: node 1, asked the same again while
/// the open's record still names it, answers the same again. Before, node 1 had let the open go
/// and every later reconnect heard FILE_NOT_AVAILABLE (its record naming node 1, which no longer
/// had it).
#[test]
fn a_give_up_answered_too_late_leaves_the_open_for_the_next_reconnect() {
    for next in [2, 3] {
        let name = format!("late{next}.txt");
        let cl = ca_cluster(3);
        let (f, l) = left_on(&cl, 1, &name, PERSISTENT);
        give_ups_late(&cl, 1, true);
        let mut b = alice(&cl, 2, 1);
        let m = create_msg(&mut b, &name, vec![rqls(&l), dh2c_flags(f, 7, PERSISTENT)]);
        let first = answer_all_of(&mut b, m);
        assert_eq!(
            first,
            vec![NtStatus::FILE_NOT_AVAILABLE],
            "{name}: the give-up's answer came too late: try again"
        );
        assert_eq!(cl.nodes[0].parked_durables(), 0, "{name}: node 1 let it go");
        give_ups_late(&cl, 1, false);
        back_whole(&cl, next, &name, f, &l, PERSISTENT);
        closed_cleanly(&cl, &name);
    }
}

/// Send `m` on `c` and carry what it asks: the statuses it is answered.
fn answer_all_of(c: &mut Client, m: Vec<u8>) -> Vec<NtStatus> {
    let mut out = c.send_frame(m);
    out.extend(answer_all(c));
    out.iter().map(Resp::status).collect()
}

/// What the build before levels (e9524d6) does with a persistent open it was given when its move
/// at the file's home fails: node `keeper`, named by the open's record, gives the open up to a
/// reconnect through node 3 (the give-up asked as that build asks it); node 3's move fails and,
/// when `closed`, it closes the open at the file's home (node `home`), leaving the record, which
/// still names the keeper. The record as it is then.
fn given_to_an_older_node(
    cl: &Cluster,
    (keeper, home): (u16, u16),
    f: FileId,
    l: &Lease,
    closed: bool,
) -> msg::CaRecord {
    use ringshare_core::cluster::ClusterNode;
    let rec = cl.bus.ca.lock().unwrap().get(&f.persistent).cloned();
    let rec = msg::decode_ca(&rec.expect("a record")).expect("readable");
    assert_eq!(rec.keeper, keeper);
    let now = cl.bus.now_ms.load(std::sync::atomic::Ordering::Relaxed);
    let give_up = msg::Call::GiveUp(Box::new(msg::GiveUpAsk {
        file_id: f,
        create_guid: Some([7; 16]),
        lease_key: Some(l.key),
        client_guid: [1; 16],
        name: "vm.vhdx".into(),
        share: "share".into(),
        uid: rec.uid,
        user: rec.user.clone(),
        posix: false,
    }));
    let answer = cl.nodes[usize::from(keeper) - 1]
        .cluster_receive(&msg::Message::Call(give_up).encode(), now)
        .expect("answered")
        .expect("an answer");
    assert!(
        matches!(
            msg::Message::decode(&answer),
            Ok(msg::Message::Answer(msg::Answer::GivenUp(_)))
        ),
        "node {keeper} gives it up"
    );
    if closed {
        let close = msg::Call::Close {
            key: rec.state.key,
            owner: rec.file_id.volatile,
            delete_on_close: false,
        };
        cl.nodes[usize::from(home) - 1]
            .cluster_receive(&msg::Message::Call(close).encode(), now)
            .expect("answered");
    }
    rec
}

/// The reconnect of `f` (lease `l`) through client `c`.
fn reconnect(c: &mut Client, f: FileId, l: &Lease) -> Resp {
    let m = create_msg(c, "vm.vhdx", vec![rqls(l), dh2c_flags(f, 7, PERSISTENT)]);
    c.send_frame(m).remove(0)
}

/// Reconnect `r` of `f` through client `c` of node `via` has the open back whole: its data, its
/// lock (a reader through node 2 is refused it), its record naming node `via`; closed then,
/// its record goes.
fn back_with_its_lock(cl: &Cluster, c: &mut Client, r: &Resp, f: FileId, via: u16) {
    let back = file_id(r);
    assert_eq!(back.persistent, f.persistent, "the same open");
    assert_eq!(node_of(back.volatile), via, "now node {via}'s");
    assert_eq!(read_data(&c.read(back, 0, 64)), b"before");
    let mut d = alice(cl, 2, 9);
    let g = open(&mut d, "vm.vhdx", 1, 7).expect("a reader");
    let lock = [(0, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(
        d.lock(g, &lock).status(),
        NtStatus::LOCK_NOT_GRANTED,
        "its lock is back"
    );
    let keeper = cl.bus.ca.lock().unwrap().get(&f.persistent).cloned();
    let keeper = keeper
        .as_deref()
        .and_then(ringshare_core::cluster::record_keeper);
    assert_eq!(keeper, Some(via), "its record names node {via}");
    assert_eq!(c.close(back).status(), NtStatus::SUCCESS);
    assert!(cl.bus.ca.lock().unwrap().is_empty(), "record gone");
}

/// [`given_to_an_older_node`]: when the home no longer holds the open (`home_closed`), node 1,
/// its recorded keeper, takes it back from its record once it gave it up more than the grace
/// ago, and a reconnect through node 1 has it back with its data and its lock; within the grace
/// it is "try again". While the home still holds it (the asker's move may be on its way)
/// nothing is taken back.
#[test]
fn a_persistent_open_an_older_node_closed_after_a_failed_move_is_taken_back_by_its_recorded_keeper()
{
    for home_closed in [true, false] {
        let cl = ca_cluster(2);
        let (f, l) = left_on(&cl, 1, "vm.vhdx", PERSISTENT);
        let mut c = alice(&cl, 1, 1);
        given_to_an_older_node(&cl, (1, 2), f, &l, home_closed);
        assert_eq!(
            reconnect(&mut c, f, &l).status(),
            NtStatus::FILE_NOT_AVAILABLE,
            "within the grace: try again"
        );
        cl.tick(5_000, &mut [&mut c]);
        let r = reconnect(&mut c, f, &l);
        if home_closed {
            back_with_its_lock(&cl, &mut c, &r, f, 1);
        } else {
            assert_eq!(
                r.status(),
                NtStatus::FILE_NOT_AVAILABLE,
                "the home holds it"
            );
            assert_eq!(cl.nodes[0].parked_durables(), 0, "nothing taken back");
        }
    }
}

/// [`given_to_an_older_node`], the home closing it: the client's next reconnect, through node
/// 3, asks node 1 the same give-up again, and node 1 answers it as the first time, the home
/// holding the open under its record's id once more (it enters it again: it holds no open of
/// it). The move then finds it: the handle is back at once. (Before, the move failed, node 3
/// kept an open no home held, and every reconnect was "try again" until its timeout.)
#[test]
fn a_give_up_asked_again_after_an_older_node_closed_the_open_has_the_home_hold_it_again() {
    let cl = ca_cluster(2);
    let (f, l) = left_on(&cl, 1, "vm.vhdx", PERSISTENT);
    given_to_an_older_node(&cl, (1, 2), f, &l, true);
    let mut c = alice(&cl, 3, 1);
    let r = reconnect(&mut c, f, &l);
    back_with_its_lock(&cl, &mut c, &r, f, 3);
    for n in &cl.nodes {
        assert_eq!(n.parked_durables(), 0, "nothing kept");
    }
}

/// As in scripts/cluster-upgrade.sh: node 2 made the open and died; node 1, its file's home
/// then, kept it under node 2's id (node 3 is of an older level: taken over opens keep their
/// ids), and gave it up to node 3, whose move failed and which closed it. Node 2 started again
/// and took its partitions back: from the record, which names live node 1 and an id under node
/// 2's number, it entered the open into its table for node 1 to serve (as it does for an
/// older node that keeps such an open). Node 1 serves no client of it: once the grace is
/// over, a reconnect through node 1 takes it back, the home replacing that entry.
#[test]
fn a_restarted_home_that_entered_the_open_for_its_recorded_keeper_lets_that_keeper_take_it_back() {
    let mut cl = ca_cluster(2);
    cl.bus.levels.lock().unwrap().insert(3, 3);
    let (f, l) = left_on(&cl, 2, "vm.vhdx", PERSISTENT);
    let (_, parts) = cl.die(2, 1);
    cl.take_over(2, 1, &parts);
    let rec = given_to_an_older_node(&cl, (1, 1), f, &l, true);
    assert_eq!(rec.file_id.volatile, f.volatile, "kept under node 2's id");
    cl.restart(2, &parts);
    let mut c = alice(&cl, 1, 1);
    cl.tick(5_000, &mut [&mut c]);
    let r = reconnect(&mut c, f, &l);
    back_with_its_lock(&cl, &mut c, &r, f, 1);
}

/// [`given_to_an_older_node`], the home closing it, and then an open that shares nothing let
/// in through node 2 (nothing was in its way): node 1 does not take the persistent open back
/// over it (the home refuses what would break that open's share modes), and the reconnect stays
/// "try again" until the open's timeout; the new open keeps the file.
#[test]
fn a_persistent_open_is_not_taken_back_over_an_open_let_in_since_it_went() {
    let cl = ca_cluster(2);
    let (f, l) = left_on(&cl, 1, "vm.vhdx", PERSISTENT);
    given_to_an_older_node(&cl, (1, 2), f, &l, true);
    let mut d = alice(&cl, 2, 9);
    let g = open(&mut d, "vm.vhdx", ALL, 0).expect("nothing in its way");
    let mut c = alice(&cl, 1, 1);
    cl.tick(5_000, &mut [&mut c, &mut d]);
    assert_eq!(
        reconnect(&mut c, f, &l).status(),
        NtStatus::FILE_NOT_AVAILABLE,
        "not taken back"
    );
    assert_eq!(cl.nodes[0].parked_durables(), 0, "nothing parked");
    assert_eq!(d.write(g, 0, b"after").status(), NtStatus::SUCCESS);
}

/// Issue 33 (docs/cluster-internals.md, "A call answered too late"): alice's reconnect through
/// node 2 of
/// the durable (or persistent) open node 1 kept is given it up, and node 3, the file's home,
/// moves it to node 2's new id but answers after node 2 stopped waiting: the reconnect is told
/// to try again, and node 2 keeps the open parked under its old id. Once the late answer
/// reaches node 2, the home moves it back, and the next reconnect gets it whole. Before, the
/// home held it under an id nobody had, and the next reconnect was told OBJECT_NAME_NOT_FOUND.
#[test]
fn a_move_answered_too_late_is_moved_back_for_the_next_reconnect() {
    for flags in [0, PERSISTENT] {
        let name = format!("moved{flags}.txt");
        let cl = if flags == PERSISTENT {
            ca_cluster(3)
        } else {
            Cluster::new(3, 3)
        };
        let (f, l) = left_on(&cl, 1, &name, flags);
        cl.answer_late_if(3, Some(|c| matches!(c, msg::Call::Transfer(..))));
        let mut b = alice(&cl, 2, 1);
        let m = create_msg(&mut b, &name, vec![rqls(&l), dh2c_flags(f, 7, flags)]);
        assert_eq!(
            answer_all_of(&mut b, m),
            vec![NtStatus::FILE_NOT_AVAILABLE],
            "{name}: the move's answer came too late: try again"
        );
        cl.answer_late_if(3, None);
        assert_eq!(cl.deliver_late(), 1, "{name}: the move's answer");
        back_whole(&cl, 2, &name, f, &l, flags);
        closed_cleanly(&cl, &name);
    }
}
