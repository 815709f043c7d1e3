//! Nodes of different builds in one cluster (issue 33, rolling upgrades; docs/cluster.md,
//! "Upgrading a cluster"; docs/cluster-internals.md, "Protocol levels"): the in-memory
//! cluster of cluster_sim.rs with some nodes said to
//! speak an older protocol level. The bus fails a test when a node is sent a message above
//! its level; these tests show what a mixed cluster does instead, and what it loses (a
//! directory lease's break below level 2, a POSIX open's flag at a home below level 3).

use crate::cluster_support;
use crate::support;

use cluster_support::*;
use ringshare_core::cluster::{cluster_level, msg, ClusterNode};
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::CreateResponse;
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::{FileId, NtStatus};
use support::caching::{H, R, READ};
use support::*;

/// FILE_DIRECTORY_FILE.
const DIRECTORY: u32 = 0x1;
/// The first byte of a `DirChanged` message (msg/codec.rs).
const DIR_CHANGED: u8 = 6;
/// The first byte of a `Changes` message.
const CHANGES: u8 = 4;

/// `c` opens directory `d` with an RH lease of key `key` repeated; the handle stays open.
fn leased_d(c: &mut Client, key: u8) -> FileId {
    let m = c.create_msg_caching("d", READ, 7, D::OPEN, 0xFF, Some(lease_v2(key, R | H)));
    let r = c.send_frame(m).remove(0);
    assert_eq!(granted_lease(&r).state.0, R | H);
    CreateResponse::decode(&r.msg).expect("create").file_id
}

/// A client of node 1 holding a lease on directory `d` (homed on node 1), and one of node 2
/// that made `d`.
fn lease_on_node_1(cl: &Cluster) -> (Client, Client, FileId) {
    let mut a = Client::leasing_dirs(cl.nodes[0].clone(), cl.mem.clone(), [1; 16]);
    let mut b = Client::leasing_dirs(cl.nodes[1].clone(), cl.mem.clone(), [2; 16]);
    let f = b.create("d", READ, D::CREATE, DIRECTORY).expect("mkdir");
    assert_eq!(b.close(f).status(), NtStatus::SUCCESS);
    let da = leased_d(&mut a, 1);
    (a, b, da)
}

fn kinds_to_1(cl: &Cluster) -> Vec<u8> {
    let kinds = cl.bus.kinds.lock().unwrap();
    kinds.get(&1).cloned().unwrap_or_default()
}

#[test]
fn a_node_of_level_one_is_sent_no_dir_changed_and_its_directory_lease_stays_until_it_is_new() {
    let cl = Cluster::new(3, 1);
    cl.bus.levels.lock().unwrap().insert(1, msg::BASE_LEVEL);
    for n in [1u16, 2] {
        let link = cl.nodes[usize::from(n) - 1]
            .node
            .link()
            .cloned()
            .expect("joined");
        assert_eq!(cluster_level(&*link), msg::BASE_LEVEL, "seen from node {n}");
    }
    let (mut a, mut b, da) = lease_on_node_1(&cl);
    cl.bus.kinds.lock().unwrap().clear();
    b.put_file("d\\through-2.txt", b"x");
    let kinds = kinds_to_1(&cl);
    assert!(
        kinds.contains(&CHANGES),
        "watchers' changes still go: {kinds:?}"
    );
    assert!(!kinds.contains(&DIR_CHANGED), "{kinds:?}");
    // What the old node's client loses meanwhile: the break of its directory lease for a
    // change made through a new node (its cached listing is stale).
    assert_eq!(a.breaks(), Vec::new());
    assert_eq!(a.close(da).status(), NtStatus::SUCCESS);

    // Node 1 is upgraded: the cluster's level rises, the same change breaks the lease.
    cl.bus.levels.lock().unwrap().clear();
    let link = cl.nodes[1].node.link().cloned().expect("joined");
    assert_eq!(cluster_level(&*link), msg::LEVEL);
    let _da = leased_d(&mut a, 1);
    cl.bus.kinds.lock().unwrap().clear();
    b.put_file("d\\again.txt", b"x");
    assert!(kinds_to_1(&cl).contains(&DIR_CHANGED));
    let got = a.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    assert_eq!((n.lease_key, n.new_lease_state.0), ([1; 16], 0));
}

#[test]
fn a_message_of_an_unknown_kind_is_answered_not_supported_and_the_node_serves_on() {
    let cl = Cluster::new(2, 1);
    let refused = msg::Message::Answer(msg::Answer::Refused(NtStatus::NOT_SUPPORTED)).encode();
    for unknown in [vec![9], vec![0xEE, 1, 2], vec![1, 0xEE, 0, 0]] {
        assert_eq!(
            cl.nodes[0].cluster_receive(&unknown, 2_000),
            Ok(Some(refused.clone())),
            "{unknown:?}"
        );
    }
    // Malformed is still an error (the transport closes that connection).
    assert!(cl.nodes[0].cluster_receive(&[5, 3], 2_000).is_err());
    // The node serves on: a client of node 2 opens a file homed on node 1.
    let mut c = cl.client(2);
    c.put_file("after.txt", b"x");
    assert!(cl.bus.calls.lock().unwrap().get(&1).copied().unwrap_or(0) > 0);
}

#[test]
fn a_home_of_level_two_is_sent_a_posix_open_as_a_windows_one_and_keeps_its_deleted_file() {
    use support::posix::*;
    let cl = Cluster::with(2, 1, |c| c.posix_extensions = true);
    // Node 1, every file's home, runs a level-2 build: the bus fails the test if node 2
    // sends it the level-3 admission of a POSIX open.
    cl.bus.levels.lock().unwrap().insert(1, 2);
    let mut a = offering(cl.nodes[0].clone(), cl.mem.clone(), 1).0;
    let mut b = offering(cl.nodes[1].clone(), cl.mem.clone(), 2).0;
    let w = a.create("doc", 0x110080, D::CREATE, 0).unwrap();
    let p = posix_open(&mut b, "doc", D::OPEN);
    set_delete_on_close(&mut a, w);
    a.close(w);
    // What the mixed cluster loses: the old home counts b's open as a Windows one, so the
    // file stays, delete pending, until b closes it.
    assert_eq!(
        a.create("doc", 0x80, D::OPEN, 0),
        Err(NtStatus::DELETE_PENDING)
    );
    b.close(p);
    assert!(!listed(&mut a, "doc"));

    // Node 1 upgraded: the same opens answer as on one node.
    cl.bus.levels.lock().unwrap().clear();
    let w = a.create("doc", 0x110080, D::CREATE, 0).unwrap();
    let p = posix_open(&mut b, "doc", D::OPEN);
    set_delete_on_close(&mut a, w);
    a.close(w);
    assert!(!listed(&mut a, "doc"));
    b.close(p);
}
