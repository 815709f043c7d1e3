//! A clean stop of a node (SIGTERM) is a planned hand-over, not a fence (issue 33, item 3):
//! with etcd up, and with every etcd member gone.

use super::*;

/// A clean stop is a planned hand-over, not a fence (issue 33): node 3, stopped with SIGTERM
/// while its client holds persistent opens (data written, a lock) of a file homed on node 3
/// and of one homed on node 1, gives its partitions up and has its opens kept by the
/// survivors before it exits; its log says each step and has no error; its client comes back
/// through node 2 without ever being told the open is gone; the survivors decide for node 3's
/// files well within the lease's TTL.
#[test]
fn a_node_stopped_with_sigterm_hands_its_files_over_and_logs_no_error() {
    let name = "sigterm";
    let Some(mut cl) = ca_cluster(name) else {
        return;
    };
    let files = cl.files_homed_on_each("stop");
    let (_c, persistent) = node3_holds_persistent(&cl, "stopca", &[3, 1], 70);

    let t = Instant::now();
    let exit = cl.nodes[2].signal_and_wait(libc::SIGTERM, Duration::from_secs(15));
    let stopped = t.elapsed();
    let log = cl.nodes[2].log();
    assert!(exit.is_some_and(|e| e.success()), "node 3 stops: {log}");
    for step in [
        "node 3 is stopping: it takes no more clients and decides nothing",
        "node 3 left the cluster (stopping)",
        "node 3: its 2 persistent opens are kept by the other nodes now",
    ] {
        assert!(log.contains(step), "the step '{step}' is logged: {log}");
    }
    assert!(
        !log.contains("fenced") && !log.contains("ERROR") && !log.contains("not handed over"),
        "a stop is a hand-over, not a fence: {log}"
    );
    // When it has exited, the record of each of its persistent opens names a live keeper.
    let mut e = cl.etcd.client();
    for (f, _, fid, _) in &persistent {
        let key = format!("/ringshare/{name}/ca/{:016x}", fid.persistent);
        let rec = e
            .get(key.as_bytes(), Instant::now() + Duration::from_secs(5))
            .unwrap()
            .unwrap_or_else(|| panic!("{f}: its record stays"));
        let keeper = ringshare_core::cluster::record_keeper(&rec.value);
        assert!(
            matches!(keeper, Some(1 | 2)),
            "{f}: kept by {keeper:?} when node 3 had exited: {log}"
        );
    }
    // Its partitions went at its stop: a survivor decides for a file node 3 was home of.
    let mut a = cl.client(1);
    let (_, decided) = within(Duration::from_secs(8), || {
        let h = open(&mut a, &files[2], ALL, 0).ok()?;
        a.close(h).ok()
    })
    .expect("a survivor decides for the file node 3 was home of");
    let took = t.elapsed();
    eprintln!(
        "[{name}] SIGTERM: node 3 handed over and exited in {stopped:?}; node 1 decided for \
         its file {decided:?} later, {took:?} after the signal (lease TTL: 6 s)"
    );
    assert!(
        took < Duration::from_secs(6),
        "{took:?}: not before the lease's TTL"
    );
    // Its client comes back through node 2 (DH2C): the same open, its data and its lock,
    // never told the open is gone on the way.
    let mut back_client = cl.client(2);
    for (f, guid, fid, data) in persistent {
        let mut waits = 0;
        let (back, t) = within(Duration::from_secs(5), || {
            let body = durable_create_as(&f, guid, Some(fid), true);
            match opened(back_client.call(Command::CREATE, &body)) {
                Ok((h, _)) => Some(h),
                Err(NtStatus::FILE_NOT_AVAILABLE) => {
                    waits += 1;
                    None
                }
                Err(s) => panic!("{f}: {s:?} (a give-up)"),
            }
        })
        .unwrap_or_else(|| panic!("{f}: not back through node 2"));
        eprintln!(
            "[{name}] persistent open of {f} back through node 2 in {t:?} \
             ({waits} FILE_NOT_AVAILABLE before)"
        );
        its_data_and_lock_are_back(&mut back_client, back, &mut a, (&f, fid, &data));
    }
    // A stop is no death: the survivors do not cut node 3 off (on CephFS the takeover command
    // evicts its mount, and it could not serve when started again: scripts/cluster-ceph.sh's run
    // of cluster_upgrade's restart shows that).
    for n in [0, 1] {
        let log = cl.nodes[n].log();
        assert!(
            log.contains("node 3 stopped cleanly: its takeover command is not run")
                && !log.contains("takeover command for node 3"),
            "node {}: {log}",
            n + 1
        );
    }
    let ran = std::fs::read_to_string(&cl.takeovers).unwrap_or_default();
    assert!(!ran.contains('3'), "takeover commands run for: {ran:?}");
}

/// A stop that cannot leave through etcd (every member gone) does not hang and is not said
/// as a fence: node 3 exits within the stop's bound (10 s) with a WARN saying what it could
/// not hand over, and no error.
#[test]
fn a_node_stopped_while_etcd_is_gone_exits_within_ten_seconds_and_says_what_was_not_handed_over() {
    let name = "sigtermnoetcd";
    let Some(mut cl) = ca_cluster(name) else {
        return;
    };
    let _held = node3_holds_persistent(&cl, "gone", &[3], 80);
    for i in 0..3 {
        cl.etcd.kill(i);
    }
    let t = Instant::now();
    let exit = cl.nodes[2].signal_and_wait(libc::SIGTERM, Duration::from_secs(15));
    let took = t.elapsed();
    let log = cl.nodes[2].log();
    eprintln!("[{name}] etcd gone: node 3 exited {took:?} after SIGTERM");
    assert!(exit.is_some_and(|e| e.success()), "node 3 stops: {log}");
    assert!(took < Duration::from_secs(10), "{took:?}: {log}");
    assert!(
        log.contains("node 3 could not leave through etcd")
            && log.contains("and 1 persistent opens over only when its lease lapses"),
        "what was not handed over is said: {log}"
    );
    assert!(!log.contains("ERROR"), "a stop, not a fence: {log}");
}
