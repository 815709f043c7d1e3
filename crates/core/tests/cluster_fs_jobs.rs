//! Issue 33, plan step 2 on a cluster: on a share whose file system calls may wait on a network
//! (`fs calls off io thread`), a READ or WRITE of a file homed on another node that no I/O
//! grant decides asks the home, then its file system job (the check against local POSIX
//! locks), each once: the home's answer taken before the job was asked is kept for the run
//! after it (cmd/io_check.rs), not asked again.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::sync::Arc;

use cluster_support::*;
use ringshare_core::Lookup;
use ringshare_wire::NtStatus;
use support::*;

const ALL: u32 = 0x001F_01FF;
const EXCLUSIVE: u32 = 2;
const FAIL_IMMEDIATELY: u32 = 0x10;

/// Each held lookup carried in turn until the request is answered: the kinds asked, in order,
/// and the answers.
fn carry_until_answered(c: &mut Client) -> (Vec<&'static str>, Vec<Resp>) {
    let mut kinds = Vec::new();
    loop {
        let held = std::mem::take(&mut c.held_lookups);
        assert!(!held.is_empty(), "nothing held and no answer");
        kinds.extend(held.iter().map(|r| match r.ask {
            Lookup::Home(_) => "home",
            Lookup::Fs(_) => "fs",
            _ => "other",
        }));
        for req in held {
            let done = req.run();
            c.conn.complete_lookup(c.now, req.id, done);
        }
        let out = c.pump();
        if !out.is_empty() {
            return (kinds, out);
        }
        assert!(kinds.len() < 8, "asked again and again: {kinds:?}");
    }
}

#[test]
fn a_read_and_a_write_on_an_offloaded_share_ask_their_home_and_their_job_once_each() {
    let cl = Cluster::with(3, 3, |c| {
        c.shares = c
            .shares
            .iter()
            .map(|s| {
                let mut d = s.with_backend(&s.name, s.backend.clone());
                d.fs_offload = Some(true);
                Arc::new(d)
            })
            .collect();
    });
    let (mut a, mut b) = (cl.client(1), cl.client(2));
    let fa = open(&mut a, "rw.txt", ALL, 7).expect("a");
    assert_eq!(a.write(fa, 0, b"0123456789").status(), NtStatus::SUCCESS);
    let fb = open(&mut b, "rw.txt", ALL, 7).expect("b");
    let locked = [(100, 10, EXCLUSIVE | FAIL_IMMEDIATELY)];
    assert_eq!(b.lock(fb, &locked).status(), NtStatus::SUCCESS);

    a.hold_lookups = true;
    let calls = cl.calls_to(3);
    let m = a.read_msg(fa, 0, 4);
    assert!(a.send_frame(m).is_empty(), "the READ waits");
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(kinds, ["home", "fs"], "the home, then the job");
    assert_eq!(cl.calls_to(3), calls + 1, "one call to the home");
    assert_eq!(read_data(&r[0]), b"0123");

    let m = a.read_msg(fa, 100, 4);
    assert!(a.send_frame(m).is_empty());
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(
        (kinds, r[0].status()),
        (vec!["home"], NtStatus::FILE_LOCK_CONFLICT),
        "the home refuses: no job"
    );

    let tree = a.tree_id;
    let m = a.message(ringshare_wire::consts::Command::WRITE, tree, |o| {
        write_body(o, fa, 4, b"EF")
    });
    let calls = cl.calls_to(3);
    assert!(a.send_frame(m).is_empty(), "the WRITE waits");
    let (kinds, r) = carry_until_answered(&mut a);
    assert_eq!(
        (kinds, r[0].status()),
        (vec!["home", "fs"], NtStatus::SUCCESS)
    );
    assert_eq!(cl.calls_to(3), calls + 1, "one call to the home");
    a.hold_lookups = false;
    assert_eq!(read_data(&a.read(fa, 0, 10)), b"0123EF6789");
}
