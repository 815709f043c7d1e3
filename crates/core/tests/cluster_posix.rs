//! SMB3 POSIX opens across cluster nodes (issue 31): a POSIX open made on node 2 of a file
//! homed on node 1 is POSIX at the home too (its admission carries the flag, protocol level 3),
//! so the home's decisions that depend on it give the answers one node gives
//! (crates/core/tests/posix.rs): a delete-pending file goes at the close that leaves only POSIX
//! opens, a rename replaces a file only POSIX opens hold, and a POSIX open of a directory
//! renames it over POSIX opens below. What a home of level 2 does instead is in
//! cluster_levels.rs.

use crate::cluster_support;
use crate::support;

use cluster_support::*;
use ringshare_core::cluster::node_of;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::posix::*;
use support::*;

/// FILE_DIRECTORY_FILE.
const DIRECTORY: u32 = 0x1;

/// Two nodes with the POSIX extensions, every file homed on node 1; a POSIX client of each.
fn posix_cluster() -> (Cluster, Client, Client) {
    let cl = Cluster::with(2, 1, |c| c.posix_extensions = true);
    let a = offering(cl.nodes[0].clone(), cl.mem.clone(), 1).0;
    let b = offering(cl.nodes[1].clone(), cl.mem.clone(), 2).0;
    (cl, a, b)
}

#[test]
fn a_delete_pending_file_goes_at_the_close_that_leaves_only_posix_opens_of_another_node() {
    let (_cl, mut a, mut b) = posix_cluster();
    let w = a.create("doc", 0x110080, D::CREATE, 0).unwrap();
    let p = posix_open(&mut b, "doc", D::OPEN);
    set_delete_on_close(&mut a, w);
    a.close(w);
    assert!(!listed(&mut a, "doc"), "gone at the Windows open's close");
    assert!(!listed(&mut b, "doc"));
    // The name is free; the POSIX open's close leaves the new file alone.
    let n = a.create("doc", 0x80, D::CREATE, 0).unwrap();
    a.close(n);
    set_delete_on_close(&mut b, p);
    b.close(p);
    assert!(listed(&mut a, "doc"));
}

#[test]
fn a_rename_replaces_a_file_only_a_posix_open_of_another_node_holds() {
    let (_cl, mut a, mut b) = posix_cluster();
    for n in ["src", "dst"] {
        let f = a.create(n, 0x80, D::CREATE, 0).unwrap();
        a.close(f);
    }
    let s = a.create("src", 0x110080, D::OPEN, 0).unwrap();
    let w = b.create("dst", 0x80, D::OPEN, 0).unwrap();
    assert_eq!(rename(&mut a, s, "dst", true), NtStatus::ACCESS_DENIED);
    b.close(w);
    let p = posix_open(&mut b, "dst", D::OPEN);
    assert_eq!(rename(&mut a, s, "dst", true), NtStatus::SUCCESS);
    a.close(s);
    b.close(p);
    assert!(listed(&mut a, "dst"));
    assert!(!listed(&mut a, "src"));
}

#[test]
fn a_posix_open_of_a_directory_renames_it_over_posix_opens_of_another_node_below() {
    let (_cl, mut a, mut b) = posix_cluster();
    let f = a.create("d", 0x80, D::CREATE, DIRECTORY).unwrap();
    a.close(f);
    let f = a.create("d\\f", 0x80, D::CREATE, 0).unwrap();
    a.close(f);
    let pd = posix_open(&mut a, "d", D::OPEN);
    let w = b.create("d\\f", 0x80, D::OPEN, 0).unwrap();
    assert_eq!(rename(&mut a, pd, "d2", false), NtStatus::ACCESS_DENIED);
    b.close(w);
    let pf = posix_open(&mut b, "d/f", D::OPEN);
    assert_eq!(rename(&mut a, pd, "d2", false), NtStatus::SUCCESS);
    a.close(pd);
    b.close(pf);
    assert!(listed(&mut a, "d2\\f"));
}

#[test]
fn a_new_home_rebuilds_a_posix_open_of_another_node_as_a_posix_open() {
    let cl = Cluster::with(3, 3, |c| c.posix_extensions = true);
    let mut a = offering(cl.nodes[0].clone(), cl.mem.clone(), 1).0;
    let mut b = offering(cl.nodes[1].clone(), cl.mem.clone(), 2).0;
    let w = a.create("doc", 0x110080, D::CREATE, 0).unwrap();
    let p = posix_open(&mut b, "doc", D::OPEN);
    // Node 3, the home, dies; node 1 rebuilds the file's entry from the opens of nodes 1
    // and 2 (node 2's record of its open says it is POSIX).
    assert_eq!(cl.kill(3, 1), 1, "node 2's open taken in");
    set_delete_on_close(&mut a, w);
    a.close(w);
    assert!(!listed(&mut a, "doc"), "gone at the Windows open's close");
    b.close(p);
}

/// FILE_POSIX_INFORMATION.
const POSIX_INFORMATION: u8 = 100;

#[test]
fn a_durable_posix_open_reconnected_through_another_node_is_still_posix() {
    use ringshare_wire::create::{
        tag, CreateContext, CreateResponse, DurableHandleReconnectV2, DurableHandleRequestV2,
    };
    use support::caching::{H, R, W};
    // The file's home is node 3, node 1 (the open's node), node 2 (where the client comes
    // back) in turn.
    for home in [3, 1, 2] {
        let cl = Cluster::with(3, home, |c| c.posix_extensions = true);
        let name = format!("p-{home}");
        let lease = lease_v2(7, R | W | H);
        let open = |c: &mut Client, durable: CreateContext<'static>| {
            let ctx = vec![
                CreateContext::new(tag::POSIX, 0o600u32.to_le_bytes().to_vec()),
                CreateContext::new(tag::REQUEST_LEASE, lease.encode()),
                durable,
            ];
            let m = c.create_msg_caching_ctx(&name, 0x12019F, 7, D::OPEN_IF, 0xFF, ctx);
            let r = c.send_frame(m).remove(0);
            assert_eq!(r.status(), NtStatus::SUCCESS, "home {home}");
            CreateResponse::decode(&r.msg).unwrap().file_id
        };
        let mut a = offering(cl.nodes[0].clone(), cl.mem.clone(), 1).0;
        let dh2q = DurableHandleRequestV2 {
            timeout: 0,
            flags: 0,
            create_guid: [7; 16],
        };
        let f = open(
            &mut a,
            CreateContext::new(tag::DURABLE_HANDLE_REQUEST_V2, dh2q.encode()),
        );
        a.conn.shutdown(a.now);
        let mut b = offering(cl.nodes[1].clone(), cl.mem.clone(), 1).0;
        let dh2c = DurableHandleReconnectV2 {
            file_id: f,
            create_guid: [7; 16],
            flags: 0,
        };
        let back = open(
            &mut b,
            CreateContext::new(tag::DURABLE_HANDLE_RECONNECT_V2, dh2c.encode()),
        );
        assert_eq!(node_of(back.volatile), 2, "home {home}: node 2's now");
        assert_eq!(
            b.query_info(back, 1, POSIX_INFORMATION, 0, 4096).status(),
            NtStatus::SUCCESS,
            "home {home}: still a POSIX open"
        );
        b.close(back);
    }
}
